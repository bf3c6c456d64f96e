/* lakefs_rangewalk: the entry walk of lakeFS range files, compiled (spark_jobs/core/range_arrow.py uses it).
 *
 * walk(data, ends, first) walks the decompressed data blocks held end to end in `data` (block i ends at ends[i],
 * int64) from block `first`, and returns the entries as the buffers of Arrow arrays: path offsets (int32) and
 * bytes, address offsets (int32) and bytes, address types (int8), sizes (int64), the number of entries after
 * each block walked (int64), plus where it stopped. Each entry is read as sstable._block_entries_fast reads it:
 * the shape lakeFS writes inline (one-byte key lengths, a 32-byte identity, catalog.Entry's fields in Go's order
 * with one-byte lengths), any other as its careful path does (varint header, the value split, every field of the
 * Entry checked as decode_entry checks it). At the first block holding anything the careful decoder would refuse,
 * or that this walk is unsure of (an address type past 127, a size past 2^63, a fixed-width Entry field...), it
 * stops, having emitted nothing of that block: the caller decodes that block with the careful decoder (which
 * accepts every valid encoding and names what is wrong) and calls again from the next.
 * The walk holds no Python object and runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t len, cap;
} vec;

static int vec_reserve(vec *v, size_t more) {
    if (v->len + more <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 4096;
    while (cap < v->len + more) cap *= 2;
    char *p = realloc(v->p, cap);
    if (!p) return -1;
    v->p = p;
    v->cap = cap;
    return 0;
}

#define PUT(v, T, x) do { *(T *)((v)->p + (v)->len) = (x); (v)->len += sizeof(T); } while (0)

typedef struct {
    vec path_off, path, addr_off, addr, types, sizes, counts;
    int64_t count;
} out_t;

/* Snapshots of the output lengths, to drop a block's entries when the block turns out irregular. */
typedef struct {
    size_t path_off, path, addr_off, addr, types, sizes;
    int64_t count;
} mark_t;

static mark_t mark_of(const out_t *o) {
    mark_t m = {o->path_off.len, o->path.len, o->addr_off.len, o->addr.len, o->types.len, o->sizes.len, o->count};
    return m;
}

static void rewind_to(out_t *o, const mark_t *m) {
    o->path_off.len = m->path_off; o->path.len = m->path; o->addr_off.len = m->addr_off; o->addr.len = m->addr;
    o->types.len = m->types; o->sizes.len = m->sizes; o->count = m->count;
}

enum { OK = 0, IRREGULAR = 1, NOMEM = 2 };

/* An unsigned LEB128 varint of at most 10 bytes inside [*q, end): 0 and *v, *q advanced; -1 otherwise. `big` is set
 * when it does not fit 63 bits (the careful decoder's Python ints would still hold it: the caller gives up). */
static int uvarint(const uint8_t *b, int64_t *q, int64_t end, uint64_t *v, int *big) {
    uint64_t r = 0;
    int shift = 0;
    *big = 0;
    for (;;) {
        if (*q >= end || shift > 63) return -1;
        uint8_t c = b[(*q)++];
        if (shift == 63 && (c & 0x7E)) *big = 1;
        r |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) break;
        shift += 7;
    }
    if (r >> 63) *big = 1;
    *v = r;
    return 0;
}

/* Python's strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF). */
static int utf8_ok(const uint8_t *s, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int more;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) more = 1;
        else if (c == 0xE0) { more = 2; lo = 0xA0; }
        else if (c == 0xED) { more = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) more = 2;
        else if (c == 0xF0) { more = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else if (c == 0xF4) { more = 3; hi = 0x8F; }
        else return 0;
        if (i + more >= n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k <= more; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += more + 1;
    }
    return 1;
}

/* The fields of one protobuf message in [q, end) parse (wire types 0, 1, 2, 5), as sstable._pb_fields reads them;
 * with text_fields, fields 1 and 2 must be length-delimited UTF-8 (a map entry of Entry.metadata); with
 * timestamp, field 1 must not be length-delimited (Timestamp.seconds). */
static int message_ok(const uint8_t *b, int64_t q, int64_t end, int text_fields, int timestamp) {
    while (q < end) {
        uint64_t tag, v;
        int big;
        if (uvarint(b, &q, end, &tag, &big) || big) return 0;
        uint64_t num = tag >> 3, wire = tag & 7;
        if (wire == 0) {
            if (uvarint(b, &q, end, &v, &big)) return 0;
            if (text_fields && (num == 1 || num == 2)) return 0;
        } else if (wire == 2) {
            if (uvarint(b, &q, end, &v, &big) || big || (int64_t)v > end - q) return 0;
            if (text_fields && (num == 1 || num == 2) && !utf8_ok(b + q, (int64_t)v)) return 0;
            if (timestamp && num == 1) return 0;
            q += (int64_t)v;
        } else if (wire == 1 || wire == 5) {
            int64_t w = wire == 1 ? 8 : 4;
            if (q + w > end) return 0;
            if (text_fields && (num == 1 || num == 2)) return 0;
            q += w;
        } else {
            return 0;
        }
    }
    return 1;
}

/* sstable.decode_entry over the Entry in [q, end), for what GC keeps: 0 with address (a, an), size and type set,
 * or -1 wherever the careful decoder would raise or give what the columns cannot hold (the caller gives up). */
static int entry_careful(const uint8_t *b, int64_t q, int64_t end, int64_t *a, int64_t *an, int64_t *size,
                         int64_t *atype) {
    *a = *an = *size = *atype = 0;
    while (q < end) {
        uint64_t tag, v;
        int big;
        if (uvarint(b, &q, end, &tag, &big) || big) return -1;
        uint64_t num = tag >> 3, wire = tag & 7;
        if (wire == 0) {
            if (uvarint(b, &q, end, &v, &big)) return -1;
            if (num == 1 || num == 2 || num == 4 || num == 5 || num == 7) return -1;
            if (num == 3) {
                if (big) return -1;
                *size = (int64_t)v;
            } else if (num == 6) {
                if (big || v > 127) return -1;
                *atype = (int64_t)v;
            }
        } else if (wire == 2) {
            if (uvarint(b, &q, end, &v, &big) || big || (int64_t)v > end - q) return -1;
            int64_t s = q, n = (int64_t)v;
            q += n;
            if (num == 1 || num == 4 || num == 7) {
                if (!utf8_ok(b + s, n)) return -1;
                if (num == 1) { *a = s; *an = n; }
            } else if (num == 2) {
                if (!message_ok(b, s, q, 0, 1)) return -1;
            } else if (num == 5) {
                if (!message_ok(b, s, q, 1, 0)) return -1;
            } else if (num == 3 || num == 6) {
                return -1;
            }
        } else if (wire == 1 || wire == 5) {
            int64_t w = wire == 1 ? 8 : 4;
            if (q + w > end) return -1;
            if (num >= 1 && num <= 7) return -1; /* a fixed-width GC field: leave it to the careful decoder */
            q += w;
        } else {
            return -1;
        }
    }
    return *an ? 0 : -1;
}

/* The inline shape sstable._block_entries_fast takes (value at q, ending at nxt), its checks in its order:
 * 0 with the fields set, or -1 when that loop would hand the entry to the careful path. */
static int entry_fast(const uint8_t *b, int64_t q, int64_t nxt, int64_t *a, int64_t *an, int64_t *size,
                      int64_t *atype) {
    if (q + 36 > nxt || b[q] != 0x40) return -1;
    int64_t x = b[q + 33];
    if (x < 0x80) {
        q += 34;
    } else {
        int64_t y = b[q + 34];
        if (y >= 0x80) return -1;
        x = (x & 0x7F) | (y << 7);
        q += 35;
    }
    if ((x & 1) || q + (x >> 1) != nxt || q + 2 > nxt || b[q] != 0x0A) return -1;
    int64_t n = b[q + 1]; /* 1: address */
    if (n == 0 || n >= 0x80) return -1;
    *a = q + 2;
    *an = n;
    q = *a + n;
    if (q > nxt) return -1;
    if (q < nxt && b[q] == 0x12) { /* 2: last_modified */
        if (q + 1 >= nxt || b[q + 1] >= 0x80) return -1;
        q += 2 + b[q + 1];
    }
    *size = 0;
    if (q < nxt && b[q] == 0x18) { /* 3: size, at most 9 varint bytes (below 2^63) */
        q += 1;
        int shift = 0;
        for (;;) {
            if (q >= nxt || shift > 56) return -1;
            uint8_t c = b[q++];
            *size |= (int64_t)(c & 0x7F) << shift;
            shift += 7;
            if (c < 0x80) break;
        }
    }
    if (q < nxt && b[q] == 0x22) { /* 4: e_tag */
        if (q + 1 >= nxt || b[q + 1] >= 0x80) return -1;
        q += 2 + b[q + 1];
    }
    while (q + 1 < nxt && b[q] == 0x2A && b[q + 1] < 0x80) q += 2 + b[q + 1]; /* 5: metadata entries */
    *atype = 0;
    if (q < nxt && b[q] == 0x30) { /* 6: address_type */
        if (q + 1 >= nxt || b[q + 1] >= 0x80) return -1;
        *atype = b[q + 1];
        q += 2;
    }
    if (q < nxt && b[q] == 0x3A) { /* 7: content_type */
        if (q + 1 >= nxt || b[q + 1] >= 0x80) return -1;
        q += 2 + b[q + 1];
    }
    if (q != nxt) return -1;
    return utf8_ok(b + *a, *an) ? 0 : -1;
}

/* One block: entries appended to o, or IRREGULAR with nothing of it kept (the caller rewinds). Each entry is read as
 * sstable._block_entries_fast reads it: by its inline shape when the header and value have it, else as its careful
 * path does (varint header, the value split, decode_entry); whatever the careful path would refuse, or anything
 * this walk is unsure of, makes the block IRREGULAR, and the careful decoder then decides. */
static int walk_block(const uint8_t *b, int64_t n, out_t *o, vec *key) {
    if (n < 4) return IRREGULAR;
    uint32_t restarts = (uint32_t)b[n - 4] | ((uint32_t)b[n - 3] << 8) | ((uint32_t)b[n - 2] << 16) |
                        ((uint32_t)b[n - 1] << 24);
    int64_t end = n - 4 - 4 * (int64_t)restarts;
    if (end < 0 || (restarts == 0 && n > 4)) return IRREGULAR;
    int64_t klen = 0, p = 0;
    while (p < end) {
        int64_t shared, unshared, q, nxt, a, an, size, atype;
        int fast = 0;
        if (p + 4 <= end && b[p] < 0x80 && b[p + 1] < 0x80 && b[p] <= klen &&
            (b[p + 2] < 0x80 || b[p + 3] < 0x80)) {
            shared = b[p];
            unshared = b[p + 1];
            int64_t x = b[p + 2];
            if (x < 0x80) {
                q = p + 3 + unshared;
                nxt = q + x;
            } else {
                q = p + 4 + unshared;
                nxt = q + ((x & 0x7F) | ((int64_t)b[p + 3] << 7));
            }
            fast = 1;
        } else {
            uint64_t s, u, v;
            int big;
            q = p;
            if (uvarint(b, &q, end, &s, &big) || big || uvarint(b, &q, end, &u, &big) || big ||
                uvarint(b, &q, end, &v, &big) || big)
                return IRREGULAR;
            if ((int64_t)s > klen || (int64_t)u > end || (int64_t)v > end) return IRREGULAR;
            shared = (int64_t)s;
            unshared = (int64_t)u;
            q += unshared;
            nxt = q + (int64_t)v;
        }
        if (nxt > end || q > nxt) return IRREGULAR;
        if (vec_reserve(key, (size_t)(shared + unshared))) return NOMEM;
        memcpy(key->p + shared, b + q - unshared, (size_t)unshared);
        klen = shared + unshared;
        const uint8_t *k = (const uint8_t *)key->p;
        if (klen < 8 || k[klen - 8] != 1) return IRREGULAR; /* internal-key trailer, kind SET */
        if (!(fast && entry_fast(b, q, nxt, &a, &an, &size, &atype) == 0)) {
            /* the careful path: value = zigzag identity length, identity, zigzag data length, data (the Entry) */
            uint64_t v;
            int big;
            int64_t r = q;
            if (uvarint(b, &r, nxt, &v, &big) || big || (v & 1) || (int64_t)(v >> 1) > nxt - r) return IRREGULAR;
            r += (int64_t)(v >> 1);
            if (uvarint(b, &r, nxt, &v, &big) || big || (v & 1) || (int64_t)(v >> 1) != nxt - r) return IRREGULAR;
            if (entry_careful(b, r, nxt, &a, &an, &size, &atype)) return IRREGULAR;
        }
        if (vec_reserve(&o->path, (size_t)(klen - 8)) || vec_reserve(&o->path_off, 4) ||
            vec_reserve(&o->addr, (size_t)an) || vec_reserve(&o->addr_off, 4) || vec_reserve(&o->types, 1) ||
            vec_reserve(&o->sizes, 8))
            return NOMEM;
        memcpy(o->path.p + o->path.len, k, (size_t)(klen - 8));
        o->path.len += (size_t)(klen - 8);
        memcpy(o->addr.p + o->addr.len, b + a, (size_t)an);
        o->addr.len += (size_t)an;
        if (o->path.len > INT32_MAX || o->addr.len > INT32_MAX) return IRREGULAR; /* past Arrow's int32 offsets */
        PUT(&o->path_off, int32_t, (int32_t)o->path.len);
        PUT(&o->addr_off, int32_t, (int32_t)o->addr.len);
        PUT(&o->types, int8_t, (int8_t)atype);
        PUT(&o->sizes, int64_t, size);
        o->count++;
        p = nxt;
    }
    return p == end ? OK : IRREGULAR;
}

static PyObject *take(vec *v) {
    PyObject *r = PyBytes_FromStringAndSize(v->p ? v->p : "", (Py_ssize_t)v->len);
    free(v->p);
    v->p = NULL;
    return r;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer data, ends;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "y*y*n", &data, &ends, &first)) return NULL;
    const uint8_t *buf = data.buf;
    const int64_t *end_of = ends.buf;
    Py_ssize_t blocks = ends.len / 8, stop = blocks;
    int status = OK;
    vec key = {NULL, 0, 0};
    out_t o;
    memset(&o, 0, sizeof o);
    if (vec_reserve(&o.path_off, 4) || vec_reserve(&o.addr_off, 4)) status = NOMEM;
    else {
        PUT(&o.path_off, int32_t, 0);
        PUT(&o.addr_off, int32_t, 0);
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = first; status == OK && i < blocks; i++) {
        int64_t start = i ? end_of[i - 1] : 0, e = end_of[i];
        if (start < 0 || e < start || e > data.len) {
            stop = i;
            break;
        }
        mark_t m = mark_of(&o);
        int r = walk_block(buf + start, e - start, &o, &key);
        if (r == OK && vec_reserve(&o.counts, 8)) r = NOMEM;
        if (r != OK) {
            rewind_to(&o, &m);
            if (r == NOMEM) status = NOMEM;
            stop = i;
            break;
        }
        PUT(&o.counts, int64_t, o.count);
    }
    Py_END_ALLOW_THREADS
    free(key.p);
    PyBuffer_Release(&data);
    PyBuffer_Release(&ends);
    if (status == NOMEM) {
        free(o.path_off.p); free(o.path.p); free(o.addr_off.p); free(o.addr.p); free(o.types.p); free(o.sizes.p);
        free(o.counts.p);
        return PyErr_NoMemory();
    }
    PyObject *po = take(&o.path_off), *pd = take(&o.path), *ao = take(&o.addr_off), *ad = take(&o.addr),
             *ty = take(&o.types), *sz = take(&o.sizes), *ct = take(&o.counts);
    if (!po || !pd || !ao || !ad || !ty || !sz || !ct) {
        Py_XDECREF(po); Py_XDECREF(pd); Py_XDECREF(ao); Py_XDECREF(ad); Py_XDECREF(ty); Py_XDECREF(sz);
        Py_XDECREF(ct);
        return NULL;
    }
    return Py_BuildValue("(LNNNNNNNn)", (long long)o.count, po, pd, ao, ad, ty, sz, ct, stop);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "walk(data, ends, first) -> (count, path offsets, path bytes, address offsets, "
                                 "address bytes, types, sizes, entries after each block (int64), stop block)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "lakefs_rangewalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit_lakefs_rangewalk(void) { return PyModule_Create(&module); }
