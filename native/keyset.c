/* A set of byte strings built once and probed many times (spark_jobs/core/key_set.py uses it).
 *
 * Arrow has no set that outlives a call: `is_in` builds a hash table of its value set at every call, so probing a
 * million reached keys range by range rebuilt it once per range. keyset(columns) builds one open-addressing table
 * over Arrow string or binary columns (int32 offsets, read in place: the set holds their buffers, copies no string)
 * and holds(set, column) answers, for each row of another column, whether the set has its bytes: exact (equal
 * hashes are compared byte for byte), without the GIL, from as many threads at once as like (the table is never
 * written after it is built).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "keyset.h"

#define CAPSULE_NAME "lakefs_rangewalk.keyset"

typedef struct {
    const int32_t *off;
    const uint8_t *data;
    int64_t count;
} strings_t;

typedef struct {
    Py_ssize_t n; /* columns */
    strings_t *cols;
    Py_buffer *views; /* two per column (offsets, bytes), held as long as the set */
    size_t cap;
    int32_t *col, *row; /* the column and row of the string a slot holds; col -1: an empty slot */
    uint32_t *tag;      /* the hash's upper half, to skip most comparisons */
    int64_t size;       /* distinct strings */
} keyset_t;

static void release_views(Py_buffer *views, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
}

static void keyset_free(keyset_t *s) {
    if (!s) return;
    if (s->views) release_views(s->views, 2 * s->n);
    free(s->views);
    free(s->cols);
    free(s->col);
    free(s->row);
    free(s->tag);
    free(s);
}

static void capsule_free(PyObject *capsule) {
    keyset_free(PyCapsule_GetPointer(capsule, CAPSULE_NAME));
}

/* (offsets, bytes, first, count): rows first..first+count of an Arrow column; the offsets are checked once here,
 * the walks below trust them. */
static int strings_of(PyObject *item, strings_t *s, Py_buffer *views) {
    PyObject *offsets, *data;
    long long first, count;
    if (!PyArg_ParseTuple(item, "OOLL", &offsets, &data, &first, &count)) return -1;
    if (PyObject_GetBuffer(offsets, &views[0], PyBUF_SIMPLE) || PyObject_GetBuffer(data, &views[1], PyBUF_SIMPLE))
        return -1;
    /* first bounded before it is added to: a huge one must not wrap the sum past the check */
    if (first < 0 || count < 0 || count >= INT32_MAX || first > views[0].len / 4 ||
        views[0].len / 4 - first < count + 1) {
        PyErr_SetString(PyExc_ValueError, "a column is shorter than its count");
        return -1;
    }
    s->off = (const int32_t *)views[0].buf + first;
    s->data = views[1].buf;
    s->count = count;
    for (int64_t r = 0; r < count; r++)
        if (s->off[r] < 0 || s->off[r + 1] < s->off[r]) {
            PyErr_SetString(PyExc_ValueError, "a column's offsets go backwards");
            return -1;
        }
    if (s->off[0] < 0 || s->off[count] > views[1].len) {
        PyErr_SetString(PyExc_ValueError, "a column's offsets run past its bytes");
        return -1;
    }
    return 0;
}

/* Whether the set holds the n bytes at p (hash h); if not, *at is the empty slot where they would go. */
static int find(const keyset_t *s, const uint8_t *p, int64_t n, uint64_t h, size_t *at) {
    size_t i = (size_t)h & (s->cap - 1);
    uint32_t tag = (uint32_t)(h >> 32);
    for (;;) {
        int32_t c = s->col[i];
        if (c < 0) {
            *at = i;
            return 0;
        }
        if (s->tag[i] == tag) {
            const strings_t *o = &s->cols[c];
            int32_t r = s->row[i];
            if (o->off[r + 1] - o->off[r] == n && (n == 0 || memcmp(o->data + o->off[r], p, (size_t)n) == 0))
                return 1;
        }
        i = (i + 1) & (s->cap - 1);
    }
}

PyObject *keyset_build(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list)) return NULL;
    Py_ssize_t k = PyList_GET_SIZE(list);
    if (k >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many columns");
        return NULL;
    }
    keyset_t *s = calloc(1, sizeof *s);
    if (!s) return PyErr_NoMemory();
    s->n = k;
    s->cols = calloc((size_t)(k ? k : 1), sizeof *s->cols);
    s->views = calloc((size_t)(2 * (k ? k : 1)), sizeof *s->views);
    if (!s->cols || !s->views) {
        keyset_free(s);
        return PyErr_NoMemory();
    }
    int64_t total = 0;
    for (Py_ssize_t c = 0; c < k; c++) {
        if (strings_of(PyList_GET_ITEM(list, c), &s->cols[c], &s->views[2 * c])) {
            keyset_free(s);
            return NULL;
        }
        total += s->cols[c].count;
    }
    s->cap = 16;
    while (s->cap < (size_t)total + (size_t)total / 2 + 1) s->cap *= 2; /* at most two thirds full */
    s->col = malloc(s->cap * sizeof *s->col);
    s->row = malloc(s->cap * sizeof *s->row);
    s->tag = malloc(s->cap * sizeof *s->tag);
    if (!s->col || !s->row || !s->tag) {
        keyset_free(s);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    memset(s->col, 0xff, s->cap * sizeof *s->col); /* every slot -1: empty */
    for (Py_ssize_t c = 0; c < k; c++) {
        const strings_t *col = &s->cols[c];
        for (int64_t r = 0; r < col->count; r++) {
            const uint8_t *p = col->data + col->off[r];
            int64_t n = col->off[r + 1] - col->off[r];
            uint64_t h = hash_bytes(p, n, 0);
            size_t at;
            if (!find(s, p, n, h, &at)) {
                s->col[at] = (int32_t)c;
                s->row[at] = (int32_t)r;
                s->tag[at] = (uint32_t)(h >> 32);
                s->size++;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *capsule = PyCapsule_New(s, CAPSULE_NAME, capsule_free);
    if (!capsule) keyset_free(s);
    return capsule;
}

PyObject *keyset_holds(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *item;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &item)) return NULL;
    const keyset_t *s = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (!s) return NULL;
    strings_t q;
    Py_buffer views[2];
    memset(views, 0, sizeof views);
    PyObject *out = NULL;
    if (!strings_of(item, &q, views) && (out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)q.count))) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t r = 0; r < q.count; r++) {
            const uint8_t *p = q.data + q.off[r];
            int64_t n = q.off[r + 1] - q.off[r];
            size_t at;
            o[r] = (uint8_t)find(s, p, n, hash_bytes(p, n, 0), &at);
        }
        Py_END_ALLOW_THREADS
    }
    release_views(views, 2);
    return out;
}

/* hashes(column) -> bytes: each row's hash (uint64, hash_bytes), the one the set files it under. */
PyObject *keyset_hashes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *item;
    if (!PyArg_ParseTuple(args, "O", &item)) return NULL;
    strings_t q;
    Py_buffer views[2];
    memset(views, 0, sizeof views);
    PyObject *out = NULL;
    if (!strings_of(item, &q, views) && (out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * q.count)))) {
        uint64_t *o = (uint64_t *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t r = 0; r < q.count; r++) o[r] = hash_bytes(q.data + q.off[r], q.off[r + 1] - q.off[r], 0);
        Py_END_ALLOW_THREADS
    }
    release_views(views, 2);
    return out;
}

PyObject *keyset_size(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    const keyset_t *s = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    return s ? PyLong_FromLongLong((long long)s->size) : NULL;
}
