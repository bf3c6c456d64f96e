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
 * diff(files, dead, new) walks two sides of a day's change (each its blocks in path order) one block at a time and
 * merges them by path as lakeFS's diff does: only the entries that do not cancel out become columns.
 * The walk holds no Python object and runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "keyset.h"

typedef struct {
    char *p;
    size_t len, cap;
    PyObject *owner; /* a bytes object of fixed size holding p (never grown), or NULL: malloc'd, grown */
} vec;

static int vec_reserve(vec *v, size_t more) {
    if (v->len + more <= v->cap) return 0;
    if (v->owner) return -1;
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
    while (i + 8 <= n) { /* ASCII eight bytes at a time: what addresses are */
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) break;
        i += 8;
    }
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

/* Where a block's entries end (its restart array follows them), or -1 for a block of no shape. */
static int64_t entries_end(const uint8_t *b, int64_t n) {
    if (n < 4) return -1;
    uint32_t restarts = (uint32_t)b[n - 4] | ((uint32_t)b[n - 3] << 8) | ((uint32_t)b[n - 2] << 16) |
                        ((uint32_t)b[n - 1] << 24);
    int64_t end = n - 4 - 4 * (int64_t)restarts;
    return end < 0 || (restarts == 0 && n > 4) ? -1 : end;
}

/* The entry at *p of a block whose entries end at `end`, read as sstable._block_entries_fast reads it: by its
 * inline shape when the header and value have it, else as its careful path does (varint header, the value split,
 * decode_entry). OK with its key rebuilt in `key` (*klen bytes, the 8-byte internal-key trailer included), its
 * address at b + *a (*an bytes), size and type set and *p at the next entry; IRREGULAR for whatever the careful path
 * would refuse or this walk is unsure of; NOMEM. */
static int block_entry(const uint8_t *b, int64_t end, int64_t *p, vec *key, int64_t *klen, int64_t *a, int64_t *an,
                       int64_t *size, int64_t *atype) {
    int64_t shared, unshared, q, nxt, at = *p;
    int fast = 0;
    if (at + 4 <= end && b[at] < 0x80 && b[at + 1] < 0x80 && b[at] <= *klen &&
        (b[at + 2] < 0x80 || b[at + 3] < 0x80)) {
        shared = b[at];
        unshared = b[at + 1];
        int64_t x = b[at + 2];
        if (x < 0x80) {
            q = at + 3 + unshared;
            nxt = q + x;
        } else {
            q = at + 4 + unshared;
            nxt = q + ((x & 0x7F) | ((int64_t)b[at + 3] << 7));
        }
        fast = 1;
    } else {
        uint64_t s, u, v;
        int big;
        q = at;
        if (uvarint(b, &q, end, &s, &big) || big || uvarint(b, &q, end, &u, &big) || big ||
            uvarint(b, &q, end, &v, &big) || big)
            return IRREGULAR;
        if ((int64_t)s > *klen || (int64_t)u > end || (int64_t)v > end) return IRREGULAR;
        shared = (int64_t)s;
        unshared = (int64_t)u;
        q += unshared;
        nxt = q + (int64_t)v;
    }
    if (nxt > end || q > nxt) return IRREGULAR;
    if (vec_reserve(key, (size_t)(shared + unshared))) return NOMEM;
    memcpy(key->p + shared, b + q - unshared, (size_t)unshared);
    *klen = shared + unshared;
    const uint8_t *k = (const uint8_t *)key->p;
    if (*klen < 8 || k[*klen - 8] != 1) return IRREGULAR; /* internal-key trailer, kind SET */
    if (!(fast && entry_fast(b, q, nxt, a, an, size, atype) == 0)) {
        /* the careful path: value = zigzag identity length, identity, zigzag data length, data (the Entry) */
        uint64_t v;
        int big;
        int64_t r = q;
        if (uvarint(b, &r, nxt, &v, &big) || big || (v & 1) || (int64_t)(v >> 1) > nxt - r) return IRREGULAR;
        r += (int64_t)(v >> 1);
        if (uvarint(b, &r, nxt, &v, &big) || big || (v & 1) || (int64_t)(v >> 1) != nxt - r) return IRREGULAR;
        if (entry_careful(b, r, nxt, a, an, size, atype)) return IRREGULAR;
    }
    *p = nxt;
    return OK;
}

/* One block: entries appended to o, or IRREGULAR with nothing of it kept (the caller rewinds). */
static int walk_block(const uint8_t *b, int64_t n, out_t *o, vec *key) {
    int64_t end = entries_end(b, n);
    if (end < 0) return IRREGULAR;
    /* an entry takes at least 11 bytes (3 of header, an 8-byte key trailer): room for the block's entries at once,
     * and for its addresses (never longer than the block); only the paths (prefixes repeated) grow per entry */
    size_t most = (size_t)(end / 11 + 1);
    if (vec_reserve(&o->path_off, 4 * most) || vec_reserve(&o->addr_off, 4 * most) || vec_reserve(&o->types, most) ||
        vec_reserve(&o->sizes, 8 * most) || vec_reserve(&o->addr, (size_t)end) || vec_reserve(&o->path, 2 * (size_t)end))
        return NOMEM;
    int64_t klen = 0, p = 0;
    while (p < end) {
        int64_t a, an, size, atype;
        int r = block_entry(b, end, &p, key, &klen, &a, &an, &size, &atype);
        if (r != OK) return r;
        if (vec_reserve(&o->path, (size_t)(klen - 8))) return NOMEM;
        memcpy(o->path.p + o->path.len, key->p, (size_t)(klen - 8));
        o->path.len += (size_t)(klen - 8);
        memcpy(o->addr.p + o->addr.len, b + a, (size_t)an);
        o->addr.len += (size_t)an;
        if (o->path.len > INT32_MAX || o->addr.len > INT32_MAX) return IRREGULAR; /* past Arrow's int32 offsets */
        PUT(&o->path_off, int32_t, (int32_t)o->path.len);
        PUT(&o->addr_off, int32_t, (int32_t)o->addr.len);
        PUT(&o->types, int8_t, (int8_t)atype);
        PUT(&o->sizes, int64_t, size);
        o->count++;
    }
    return p == end ? OK : IRREGULAR;
}

static PyObject *take(vec *v) {
    PyObject *r = PyBytes_FromStringAndSize(v->p ? v->p : "", (Py_ssize_t)v->len);
    free(v->p);
    v->p = NULL;
    return r;
}

/* --- CRC32C (Castagnoli) and Snappy, for the blocks as stored ------------------------------------------------- */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc_soft(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(const uint8_t *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
static int have_hw;
#endif

static uint32_t crc32c(const uint8_t *p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_hw) return crc_hw(p, n);
#endif
    return crc_soft(p, n);
}

/* The length a raw Snappy stream claims (its varint header), or -1. */
static int64_t snappy_length(const uint8_t *ip, int64_t n, int64_t *header) {
    uint64_t v = 0;
    for (int i = 0; i < 5 && i < n; i++) {
        v |= (uint64_t)(ip[i] & 0x7F) << (7 * i);
        if (ip[i] < 0x80) {
            *header = i + 1;
            return v > 0xFFFFFFFFu ? -1 : (int64_t)v;
        }
    }
    return -1;
}

/* Raw Snappy from [ip, ip + n) into exactly [op, op + len): 0, or -1 for a stream that is not exactly that.
 * `in_slack` bytes may be read past the input's end and 16 written past the output's end (the caller's room):
 * short literals and copies then move 16 bytes at once, as Snappy's own decoder does. */
static int snappy_into(const uint8_t *ip, int64_t n, uint8_t *op, int64_t len, int64_t in_slack) {
    const uint8_t *end = ip + n;
    uint8_t *start = op, *oend = op + len;
    while (ip < end) {
        uint8_t tag = *ip++;
        int64_t l, off;
        if ((tag & 3) == 0 && tag < (16 << 2) && end - ip + in_slack >= 16) { /* a literal of at most 16 bytes */
            l = (tag >> 2) + 1;
            if (end - ip < l || oend - op < l) return -1;
            memcpy(op, ip, 16);
            ip += l;
            op += l;
            continue;
        }
        switch (tag & 3) {
        case 0:
            l = tag >> 2;
            if (l >= 60) {
                int w = (int)l - 59;
                if (end - ip < w) return -1;
                l = 0;
                for (int i = 0; i < w; i++) l |= (int64_t)ip[i] << (8 * i);
                ip += w;
            }
            l += 1;
            if (end - ip < l || oend - op < l) return -1;
            memcpy(op, ip, (size_t)l);
            ip += l;
            op += l;
            continue;
        case 1:
            if (end - ip < 1) return -1;
            l = ((tag >> 2) & 7) + 4;
            off = ((int64_t)(tag >> 5) << 8) | *ip++;
            break;
        case 2:
            if (end - ip < 2) return -1;
            l = (tag >> 2) + 1;
            off = (int64_t)ip[0] | ((int64_t)ip[1] << 8);
            ip += 2;
            break;
        default:
            if (end - ip < 4) return -1;
            l = (tag >> 2) + 1;
            off = (int64_t)ip[0] | ((int64_t)ip[1] << 8) | ((int64_t)ip[2] << 16) | ((int64_t)ip[3] << 24);
            ip += 4;
            break;
        }
        if (off == 0 || off > op - start || oend - op < l) return -1;
        if (off >= 16 && l <= 16) { /* the usual short copy: 16 bytes at once (the output has the room) */
            memcpy(op, op - off, 16);
            op += l;
        } else if (off >= l) {
            memcpy(op, op - off, (size_t)l);
            op += l;
        } else if (off >= 8) {
            while (l > 0) { /* overlapping by 8 or more: 8 bytes at a time */
                memcpy(op, op - off, 8);
                int64_t step = l < 8 ? l : 8;
                op += step;
                l -= step;
            }
        } else {
            for (int64_t i = 0; i < l; i++, op++) *op = *(op - off); /* overlapping: a run */
        }
    }
    return op == oend ? 0 : -1;
}

/* The block stored at [offset, offset + size) of a file of `len` bytes whose blocks end at `limit`, checked: its
 * decompressed length (its Snappy header's length in *header), or -1 for a block unpack stops at: past the
 * blocks, a checksum that does not match (with `verify`), a compression other than none or Snappy, a Snappy
 * header claiming more than Snappy can expand to. */
static int64_t stored_length(const uint8_t *raw, int64_t len, int64_t limit, int verify, int64_t offset,
                             int64_t size, int64_t *header) {
    *header = 0;
    if (offset < 0 || size <= 0 || offset + size + 5 > limit || limit > len) return -1;
    const uint8_t *b = raw + offset;
    if (verify) {
        uint32_t c = crc32c(b, (size_t)size + 1);
        uint32_t masked = ((c >> 15) | (c << 17)) + 0xA282EAD8u;
        uint32_t stored = (uint32_t)b[size + 1] | ((uint32_t)b[size + 2] << 8) | ((uint32_t)b[size + 3] << 16) |
                          ((uint32_t)b[size + 4] << 24);
        if (masked != stored) return -1;
    }
    if (b[size] == 0) return size;
    if (b[size] != 1) return -1;
    int64_t n = snappy_length(b, size, header);
    return n < 0 || n > 24 * size + 64 ? -1 : n;
}

/* That block's contents into [out, out + n) (16 bytes of room past it): 0, or -1 for a Snappy stream that is not
 * exactly n bytes. */
static int stored_into(const uint8_t *raw, int64_t len, int64_t offset, int64_t size, int64_t header, uint8_t *out,
                       int64_t n) {
    const uint8_t *b = raw + offset;
    if (b[size] == 0) {
        memcpy(out, b, (size_t)n);
        return 0;
    }
    return snappy_into(b + header, size - header, out, n, len - offset - size);
}

/* unpack(data, handles, limit, verify, first): the data blocks of `handles` (int64 offset, size pairs) from block
 * `first`, each checked against the masked CRC32C its trailer stores (with `verify`) and decompressed (Snappy or
 * none), end to end: (bytes, ends int64 bytes, stop). It stops at the first block it cannot take (a block past
 * `limit`, a bad checksum, another compression, a Snappy stream it refuses): the caller reads that one through the
 * careful decoder (which names the fault, or takes it after all) and calls again from the next. No GIL held. */
static PyObject *unpack(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, handles;
    Py_ssize_t limit, first;
    int verify;
    if (!PyArg_ParseTuple(args, "y*y*npn", &data, &handles, &limit, &verify, &first)) return NULL;
    const uint8_t *raw = data.buf;
    const int64_t *h = handles.buf;
    Py_ssize_t blocks = handles.len / 16, stop = blocks;
    /* the output is made at its final size (less what a stop leaves out) before the work: copying a buffer of
     * the whole file's blocks, or growing one block by block, cost as much as the decompression */
    int64_t total = 16, header = 0;
    for (Py_ssize_t i = first; i < blocks; i++) {
        int64_t len = stored_length(raw, data.len, limit, 0, h[2 * i], h[2 * i + 1], &header);
        if (len < 0) break; /* the loop below stops there too (checksums aside, which it checks) */
        total += len;
    }
    PyObject *o = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    PyObject *e = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * (blocks - first + 1)));
    if (!o || !e) {
        Py_XDECREF(o);
        Py_XDECREF(e);
        PyBuffer_Release(&data);
        PyBuffer_Release(&handles);
        return NULL;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(o);
    int64_t *ends = (int64_t *)PyBytes_AS_STRING(e);
    int64_t used = 0, done = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = first; i < blocks; i++) {
        int64_t offset = h[2 * i], size = h[2 * i + 1];
        int64_t len = stored_length(raw, data.len, limit, verify, offset, size, &header);
        if (len < 0 || used + len + 16 > total || stored_into(raw, data.len, offset, size, header, out + used, len)) {
            stop = i;
            break;
        }
        used += len;
        ends[done++] = used;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&handles);
    if (_PyBytes_Resize(&o, (Py_ssize_t)used) || _PyBytes_Resize(&e, (Py_ssize_t)(8 * done))) {
        Py_XDECREF(o);
        Py_XDECREF(e);
        return NULL;
    }
    return Py_BuildValue("(NNn)", o, e, stop);
}

/* crc32c(data): the CRC32C of a bytes-like object (for the tests: the same as google_crc32c.value). */
static PyObject *crc32c_py(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    uint32_t c = crc32c(data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(c);
}

/* same(a, a_start, b, b_start, length): whether a[a_start:a_start+length] == b[b_start:b_start+length], as Python
   compares the two slices (a slice past an end is cut there), without copying them and without the GIL: a day's
   comparison checks megabytes of blocks that repeat (one file often mapped from the range cache) while other
   threads walk ranges and send requests. */
static PyObject *same_py(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer a, b;
    Py_ssize_t a_start, b_start, length;
    if (!PyArg_ParseTuple(args, "y*ny*nn", &a, &a_start, &b, &b_start, &length)) return NULL;
    int equal = 0;
    if (a_start < 0 || b_start < 0 || length < 0) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "same: negative start or length");
        return NULL;
    }
    Py_ssize_t a_len = a_start >= a.len ? 0 : (length < a.len - a_start ? length : a.len - a_start);
    Py_ssize_t b_len = b_start >= b.len ? 0 : (length < b.len - b_start ? length : b.len - b_start);
    if (a_len == b_len) {
        Py_BEGIN_ALLOW_THREADS
        equal = a_len == 0 || memcmp((const char *)a.buf + a_start, (const char *)b.buf + b_start, (size_t)a_len) == 0;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyBool_FromLong(equal);
}

/* snappy(data): a raw Snappy stream decompressed, or None where unpack would refuse it (for the tests). */
static PyObject *snappy_py(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    int64_t header = 0, len = snappy_length(data.buf, data.len, &header);
    PyObject *r = NULL;
    if (len >= 0 && len <= 24 * (int64_t)data.len + 64) {
        uint8_t *tmp = malloc((size_t)len + 16);
        if (!tmp) {
            PyBuffer_Release(&data);
            return PyErr_NoMemory();
        }
        if (snappy_into((const uint8_t *)data.buf + header, data.len - header, tmp, len, 0)) r = Py_NewRef(Py_None);
        else r = PyBytes_FromStringAndSize((const char *)tmp, (Py_ssize_t)len);
        free(tmp);
    } else {
        r = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&data);
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
    vec key = {NULL, 0, 0, NULL};
    out_t o;
    memset(&o, 0, sizeof o);
    /* every column but the paths made at its most (bytes objects, shrunk at the end): an entry takes at least 11
     * bytes, an address no more than its block; copying the columns out of growing buffers cost as much as the walk */
    int64_t room = 0, bytes = 0;
    for (Py_ssize_t i = first; i < blocks; i++) {
        int64_t start = i ? end_of[i - 1] : 0, e = end_of[i];
        if (start < 0 || e < start || e > data.len) break;
        room += (e - start) / 11 + 1;
        bytes += e - start;
    }
    vec *fixed[] = {&o.path_off, &o.addr_off, &o.addr, &o.types, &o.sizes, &o.counts};
    int64_t sizes[] = {4 * (room + 1), 4 * (room + 1), bytes, room, 8 * room, 8 * (blocks - first + 1)};
    for (int f = 0; f < 6; f++) {
        fixed[f]->owner = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizes[f]);
        if (!fixed[f]->owner) {
            for (int g = 0; g < f; g++) Py_DECREF(fixed[g]->owner);
            PyBuffer_Release(&data);
            PyBuffer_Release(&ends);
            return NULL;
        }
        fixed[f]->p = PyBytes_AS_STRING(fixed[f]->owner);
        fixed[f]->cap = (size_t)sizes[f];
    }
    PUT(&o.path_off, int32_t, 0);
    PUT(&o.addr_off, int32_t, 0);
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
    PyObject *pd = status == NOMEM ? NULL : take(&o.path);
    free(o.path.p);
    int failed = pd == NULL;
    for (int f = 0; f < 6; f++)
        if (!failed && _PyBytes_Resize(&fixed[f]->owner, (Py_ssize_t)fixed[f]->len)) failed = 1;
    if (failed) {
        for (int f = 0; f < 6; f++) Py_XDECREF(fixed[f]->owner);
        Py_XDECREF(pd);
        return status == NOMEM ? PyErr_NoMemory() : NULL;
    }
    PyObject *po = o.path_off.owner, *ao = o.addr_off.owner, *ad = o.addr.owner, *ty = o.types.owner,
             *sz = o.sizes.owner, *ct = o.counts.owner;
    return Py_BuildValue("(LNNNNNNNn)", (long long)o.count, po, pd, ao, ad, ty, sz, ct, stop);
}

/* --- the entries of many batches netted by (address, address type) ------------------------------------------ */

typedef struct {
    const int32_t *off, *poff;
    const uint8_t *data, *pdata;
    const int8_t *types;
    int64_t weight, count;
} column_t;

/* An open-addressing table of (address, type) -> sum, each slot naming one entry that holds it. */
typedef struct {
    const column_t *cols;
    size_t cap;
    int32_t *col, *row; /* col -1: empty */
    int64_t *sum;
    uint32_t *tag;
} table_t;

static int table_init(table_t *t, const column_t *cols, int64_t most) {
    t->cols = cols;
    t->cap = 16;
    while (t->cap < (size_t)most + (size_t)most / 2 + 1) t->cap *= 2;
    t->col = malloc(t->cap * sizeof(int32_t));
    t->row = malloc(t->cap * sizeof(int32_t));
    t->sum = malloc(t->cap * sizeof(int64_t));
    t->tag = malloc(t->cap * sizeof(uint32_t));
    if (!t->col || !t->row || !t->sum || !t->tag) return -1;
    for (size_t i = 0; i < t->cap; i++) t->col[i] = -1;
    return 0;
}

static void table_free(table_t *t) {
    free(t->col); free(t->row); free(t->sum); free(t->tag);
}

static void table_add(table_t *t, int32_t c, int32_t r, int64_t weight) {
    const column_t *col = &t->cols[c];
    const uint8_t *a = col->data + col->off[r];
    int64_t an = col->off[r + 1] - col->off[r];
    int8_t ty = col->types[r];
    uint64_t h = hash_bytes(a, an, (uint64_t)(uint8_t)ty);
    size_t at = (size_t)h & (t->cap - 1);
    for (;;) {
        if (t->col[at] < 0) {
            t->col[at] = c;
            t->row[at] = r;
            t->sum[at] = weight;
            t->tag[at] = (uint32_t)(h >> 32);
            return;
        }
        if (t->tag[at] == (uint32_t)(h >> 32)) {
            const column_t *o = &t->cols[t->col[at]];
            int32_t orow = t->row[at];
            int64_t on = o->off[orow + 1] - o->off[orow];
            if (on == an && o->types[orow] == ty && memcmp(o->data + o->off[orow], a, (size_t)an) == 0) {
                t->sum[at] += weight;
                return;
            }
        }
        at = (at + 1) & (t->cap - 1);
    }
}

/* One side's entries in path order, across its columns. */
typedef struct {
    const column_t *cols;
    const int32_t *order;
    int64_t n, c, r; /* columns on this side; where the cursor is */
    const uint8_t *last;
    int64_t lastn;
} side_t;

static int side_valid(side_t *s) {
    while (s->c < s->n && s->r >= s->cols[s->order[s->c]].count) { s->c++; s->r = 0; }
    return s->c < s->n;
}

static int cmp_bytes(const uint8_t *a, int64_t an, const uint8_t *b, int64_t bn) {
    int r = memcmp(a, b, (size_t)(an < bn ? an : bn));
    return r ? r : (an < bn ? -1 : an > bn);
}

/* Advances the side; -1 when its paths are not strictly increasing (it is not one ordered stream). */
static int side_next(side_t *s) {
    const column_t *col = &s->cols[s->order[s->c]];
    const uint8_t *p = col->pdata + col->poff[s->r];
    int64_t pn = col->poff[s->r + 1] - col->poff[s->r];
    if (s->last && cmp_bytes(s->last, s->lastn, p, pn) >= 0) return -1;
    s->last = p;
    s->lastn = pn;
    s->r++;
    return 0;
}

static PyObject *parse_columns(PyObject *list, column_t *cols, Py_buffer *views, Py_ssize_t *held, int64_t *total) {
    Py_ssize_t k = PyList_GET_SIZE(list);
    for (Py_ssize_t c = 0; c < k; c++) {
        PyObject *item = PyList_GET_ITEM(list, c), *bufs[5];
        long long weight, count;
        if (!PyArg_ParseTuple(item, "OOOLLOO", &bufs[0], &bufs[1], &bufs[2], &weight, &count, &bufs[3], &bufs[4]))
            return NULL;
        Py_buffer *v = &views[*held];
        for (int i = 0; i < 5; i++) {
            if (PyObject_GetBuffer(bufs[i], &views[*held], PyBUF_SIMPLE)) return NULL;
            (*held)++;
        }
        if (count < 0 || count >= INT32_MAX || v[0].len < 4 * (count + 1) || v[2].len < count ||
            v[3].len < 4 * (count + 1)) {
            PyErr_SetString(PyExc_ValueError, "a column is shorter than its count");
            return NULL;
        }
        cols[c].off = v[0].buf;
        cols[c].data = v[1].buf;
        cols[c].types = v[2].buf;
        cols[c].poff = v[3].buf;
        cols[c].pdata = v[4].buf;
        cols[c].weight = weight;
        cols[c].count = count;
        for (int64_t r = 0; r < count; r++) /* offsets checked once: the walks below trust them */
            if (cols[c].off[r] < 0 || cols[c].off[r + 1] < cols[c].off[r] || cols[c].poff[r] < 0 ||
                cols[c].poff[r + 1] < cols[c].poff[r]) {
                PyErr_SetString(PyExc_ValueError, "a column's offsets go backwards");
                return NULL;
            }
        if (cols[c].off[count] > v[1].len || cols[c].poff[count] > v[4].len) {
            PyErr_SetString(PyExc_ValueError, "a column's offsets run past its bytes");
            return NULL;
        }
        *total += count;
    }
    return Py_None;
}

/* net(columns, dead, new): columns are (address offsets, address bytes, types, weight, count, path offsets, path
 * bytes), Arrow's int32-offset layout; every (address, type) whose weights do not sum to 0, as three int64
 * buffers: the column and row of one entry holding it, and the sum. `dead` and `new` (int32 column indices, or
 * empty) name columns of weight -1 and +1 whose paths, in that order, rise strictly: those two streams are merged
 * by path as lakeFS's diff merges two versions of a range, an entry at the same path with the same address and
 * type on both sides cancelling out in place; only what does not goes into the hash table, with every other column.
 * If a stream's paths do not rise, its columns go into the table whole. Exact throughout: entries with one hash
 * are compared byte for byte. No GIL held while it counts. */
static PyObject *net(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list;
    Py_buffer dead_b, new_b;
    if (!PyArg_ParseTuple(args, "O!y*y*", &PyList_Type, &list, &dead_b, &new_b)) return NULL;
    Py_ssize_t k = PyList_GET_SIZE(list);
    column_t *cols = calloc((size_t)(k ? k : 1), sizeof *cols);
    Py_buffer *views = calloc((size_t)(5 * (k ? k : 1)), sizeof *views);
    Py_ssize_t held = 0;
    int64_t total = 0;
    PyObject *result = NULL;
    char *merged = calloc((size_t)(k ? k : 1), 1);
    const int32_t *dead = dead_b.buf, *nw = new_b.buf;
    int64_t nd = dead_b.len / 4, nn = new_b.len / 4;
    if (!cols || !views || !merged) { PyErr_NoMemory(); goto done; }
    if (!parse_columns(list, cols, views, &held, &total)) goto done;
    for (int64_t i = 0; i < nd + nn; i++) {
        int32_t c = i < nd ? dead[i] : nw[i - nd];
        if (c < 0 || c >= k || merged[c] || cols[c].weight != (i < nd ? -1 : 1)) {
            PyErr_SetString(PyExc_ValueError, "dead and new name columns of weight -1 and +1, once each");
            goto done;
        }
        merged[c] = 1;
    }
    table_t t;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    /* the merge first, counting what it leaves, so that the table is sized for that (a day's few hundred), not for
     * every entry; a stream that is not in path order leaves everything */
    int32_t *left_c = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    int32_t *left_r = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    int64_t left = 0;
    int ordered = left_c && left_r;
    if (ordered && (nd || nn)) {
        side_t a = {cols, dead, nd, 0, 0, NULL, 0}, b = {cols, nw, nn, 0, 0, NULL, 0};
        for (;;) {
            int va = side_valid(&a), vb = side_valid(&b);
            if (!va && !vb) break;
            int order;
            const column_t *ca = va ? &cols[a.order[a.c]] : NULL, *cb = vb ? &cols[b.order[b.c]] : NULL;
            if (!va) order = 1;
            else if (!vb) order = -1;
            else order = cmp_bytes(ca->pdata + ca->poff[a.r], ca->poff[a.r + 1] - ca->poff[a.r],
                                   cb->pdata + cb->poff[b.r], cb->poff[b.r + 1] - cb->poff[b.r]);
            if (order == 0) {
                int64_t an = ca->off[a.r + 1] - ca->off[a.r], bn = cb->off[b.r + 1] - cb->off[b.r];
                int same = an == bn && ca->types[a.r] == cb->types[b.r] &&
                           memcmp(ca->data + ca->off[a.r], cb->data + cb->off[b.r], (size_t)an) == 0;
                if (!same) {
                    left_c[left] = a.order[a.c]; left_r[left++] = (int32_t)a.r;
                    left_c[left] = b.order[b.c]; left_r[left++] = (int32_t)b.r;
                }
                if (side_next(&a) || side_next(&b)) { ordered = 0; break; }
            } else if (order < 0) {
                left_c[left] = a.order[a.c]; left_r[left++] = (int32_t)a.r;
                if (side_next(&a)) { ordered = 0; break; }
            } else {
                left_c[left] = b.order[b.c]; left_r[left++] = (int32_t)b.r;
                if (side_next(&b)) { ordered = 0; break; }
            }
        }
    }
    int64_t rest = 0;
    for (Py_ssize_t c = 0; c < k; c++)
        if (!merged[c] || !ordered) rest += cols[c].count;
    if (table_init(&t, cols, (ordered ? left : 0) + rest)) failed = 1;
    else {
        if (ordered)
            for (int64_t i = 0; i < left; i++) table_add(&t, left_c[i], left_r[i], cols[left_c[i]].weight);
        for (Py_ssize_t c = 0; c < k; c++)
            if (!merged[c] || !ordered)
                for (int64_t r = 0; r < cols[c].count; r++) table_add(&t, (int32_t)c, (int32_t)r, cols[c].weight);
    }
    free(left_c);
    free(left_r);
    Py_END_ALLOW_THREADS
    if (failed) {
        table_free(&t);
        PyErr_NoMemory();
        goto done;
    }
    int64_t found = 0;
    for (size_t i = 0; i < t.cap; i++)
        if (t.col[i] >= 0 && t.sum[i] != 0) found++;
    PyObject *oc = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * found));
    PyObject *orow = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * found));
    PyObject *os = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * found));
    if (oc && orow && os) {
        int64_t *pc = (int64_t *)PyBytes_AS_STRING(oc), *pr = (int64_t *)PyBytes_AS_STRING(orow),
                *ps = (int64_t *)PyBytes_AS_STRING(os);
        int64_t j = 0;
        for (size_t i = 0; i < t.cap; i++)
            if (t.col[i] >= 0 && t.sum[i] != 0) {
                pc[j] = t.col[i];
                pr[j] = t.row[i];
                ps[j] = t.sum[i];
                j++;
            }
        result = Py_BuildValue("(NNN)", oc, orow, os);
    } else {
        Py_XDECREF(oc);
        Py_XDECREF(orow);
        Py_XDECREF(os);
    }
    table_free(&t);
done:
    for (Py_ssize_t v = 0; v < held; v++) PyBuffer_Release(&views[v]);
    PyBuffer_Release(&dead_b);
    PyBuffer_Release(&new_b);
    free(views);
    free(cols);
    free(merged);
    return result;
}

/* --- a day's change: two streams of blocks merged by path, as lakeFS's diff walks two versions of a range ---- */

typedef struct {
    const uint8_t *raw;
    int64_t len, limit; /* the file's bytes; where its data blocks end (the footer's start) */
    int verify;
} file_t;

/* One side of a change: its blocks ((file, offset, size) triples, int64) walked one at a time, in path order. */
typedef struct {
    const file_t *files;
    int64_t nfiles;
    const int64_t *blocks;
    int64_t nblocks, next;
    uint8_t *buf; /* the block being walked, decompressed (16 bytes of room past it: Snappy's short copies) */
    int64_t cap, end, p;
    vec key, last; /* the current entry's key; the path before it (a side's paths must rise strictly) */
    int64_t klen, a, an, size, atype;
    int valid;
    int64_t walked, entries, bytes; /* blocks, entries and decompressed bytes walked */
} cursor_t;

/* The next block of the side into its buffer, checked as unpack checks it: OK, or IRREGULAR (past its file's
 * blocks, a bad checksum, another compression, a stream Snappy refuses, a block of no shape), or NOMEM. */
static int cursor_block(cursor_t *c) {
    const int64_t *t = c->blocks + 3 * c->next++;
    if (t[0] < 0 || t[0] >= c->nfiles) return IRREGULAR;
    const file_t *f = &c->files[t[0]];
    int64_t offset = t[1], size = t[2], header;
    int64_t len = stored_length(f->raw, f->len, f->limit, f->verify, offset, size, &header);
    if (len < 0) return IRREGULAR;
    if (len + 16 > c->cap) {
        uint8_t *p = realloc(c->buf, (size_t)(len + 16));
        if (!p) return NOMEM;
        c->buf = p;
        c->cap = len + 16;
    }
    if (stored_into(f->raw, f->len, offset, size, header, c->buf, len)) return IRREGULAR;
    c->end = entries_end(c->buf, len);
    if (c->end < 0) return IRREGULAR;
    c->p = 0;
    c->klen = 0;
    c->walked++;
    c->bytes += len;
    return OK;
}

/* The side's next entry (valid 0 past its last): OK, IRREGULAR (also when its paths do not rise), NOMEM. */
static int cursor_next(cursor_t *c) {
    if (c->valid) { /* the path just left, for the order check */
        int64_t n = c->klen - 8;
        c->last.len = 0;
        if (vec_reserve(&c->last, (size_t)n)) return NOMEM;
        memcpy(c->last.p, c->key.p, (size_t)n);
        c->last.len = (size_t)n;
    }
    while (c->p >= c->end) {
        if (c->next >= c->nblocks) {
            c->valid = 0;
            return OK;
        }
        int r = cursor_block(c);
        if (r != OK) return r;
    }
    int r = block_entry(c->buf, c->end, &c->p, &c->key, &c->klen, &c->a, &c->an, &c->size, &c->atype);
    if (r != OK) return r;
    if (c->valid && cmp_bytes((const uint8_t *)c->last.p, (int64_t)c->last.len, (const uint8_t *)c->key.p,
                              c->klen - 8) >= 0)
        return IRREGULAR;
    c->valid = 1;
    c->entries++;
    return OK;
}

/* The side's current entry appended to o (a row of RANGE_SCHEMA's columns). */
static int emit(out_t *o, const cursor_t *c) {
    int64_t pn = c->klen - 8;
    if (vec_reserve(&o->path_off, 4) || vec_reserve(&o->addr_off, 4) || vec_reserve(&o->types, 1) ||
        vec_reserve(&o->sizes, 8) || vec_reserve(&o->path, (size_t)pn) || vec_reserve(&o->addr, (size_t)c->an))
        return NOMEM;
    memcpy(o->path.p + o->path.len, c->key.p, (size_t)pn);
    o->path.len += (size_t)pn;
    memcpy(o->addr.p + o->addr.len, c->buf + c->a, (size_t)c->an);
    o->addr.len += (size_t)c->an;
    if (o->path.len > INT32_MAX || o->addr.len > INT32_MAX) return IRREGULAR;
    PUT(&o->path_off, int32_t, (int32_t)o->path.len);
    PUT(&o->addr_off, int32_t, (int32_t)o->addr.len);
    PUT(&o->types, int8_t, (int8_t)c->atype);
    PUT(&o->sizes, int64_t, c->size);
    o->count++;
    return OK;
}

static PyObject *columns_of(out_t *o) {
    PyObject *v[6];
    vec *parts[] = {&o->path_off, &o->path, &o->addr_off, &o->addr, &o->types, &o->sizes};
    for (int i = 0; i < 6; i++) v[i] = NULL;
    for (int i = 0; i < 6; i++)
        if (!(v[i] = take(parts[i]))) {
            for (int j = 0; j < 6; j++) Py_XDECREF(v[j]);
            return NULL;
        }
    return Py_BuildValue("(LNNNNNN)", (long long)o->count, v[0], v[1], v[2], v[3], v[4], v[5]);
}

/* diff(files, dead, new): files are (bytes, limit, verify) of range files; dead and new the blocks of each side
 * ((file, offset, size) int64 triples) in path order. Both sides are walked entry by entry, one block each at a
 * time, and merged by path as lakeFS's diff merges two versions of a range: an entry at the same path with the same
 * address and type on both sides cancels out; every other entry is kept, on its side. Returns (dead entries, new
 * entries, entries walked, blocks walked, bytes walked), each side's entries as walk's columns (count, path offsets, path bytes,
 * address offsets, address bytes, types, sizes) and the decompressed bytes walked, or None where it is unsure (a block the careful decoder must
 * read, a side whose paths do not rise): the caller then counts the change another way. No GIL held. */
static PyObject *diff(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list;
    Py_buffer sides[2];
    if (!PyArg_ParseTuple(args, "O!y*y*", &PyList_Type, &list, &sides[0], &sides[1])) return NULL;
    Py_ssize_t k = PyList_GET_SIZE(list), held = 0;
    file_t *files = calloc((size_t)(k ? k : 1), sizeof *files);
    Py_buffer *views = calloc((size_t)(k ? k : 1), sizeof *views);
    PyObject *result = NULL;
    cursor_t cur[2];
    out_t out[2];
    memset(cur, 0, sizeof cur);
    memset(out, 0, sizeof out);
    if (!files || !views) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *data;
        Py_ssize_t limit;
        int verify;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "Onp", &data, &limit, &verify)) goto done;
        if (PyObject_GetBuffer(data, &views[i], PyBUF_SIMPLE)) goto done;
        held++;
        files[i].raw = views[i].buf;
        files[i].len = views[i].len;
        files[i].limit = limit;
        files[i].verify = verify;
    }
    for (int s = 0; s < 2; s++) {
        cur[s].files = files;
        cur[s].nfiles = k;
        cur[s].blocks = sides[s].buf;
        cur[s].nblocks = sides[s].len / 24;
    }
    int status = OK;
    for (int s = 0; s < 2 && status == OK; s++)
        if (vec_reserve(&out[s].path_off, 4) || vec_reserve(&out[s].addr_off, 4)) status = NOMEM;
        else {
            PUT(&out[s].path_off, int32_t, 0);
            PUT(&out[s].addr_off, int32_t, 0);
        }
    Py_BEGIN_ALLOW_THREADS
    if (status == OK) status = cursor_next(&cur[0]);
    if (status == OK) status = cursor_next(&cur[1]);
    while (status == OK && (cur[0].valid || cur[1].valid)) {
        int order;
        if (!cur[0].valid) order = 1;
        else if (!cur[1].valid) order = -1;
        else order = cmp_bytes((const uint8_t *)cur[0].key.p, cur[0].klen - 8, (const uint8_t *)cur[1].key.p,
                               cur[1].klen - 8);
        if (order == 0) {
            int same = cur[0].an == cur[1].an && cur[0].atype == cur[1].atype &&
                       memcmp(cur[0].buf + cur[0].a, cur[1].buf + cur[1].a, (size_t)cur[0].an) == 0;
            if (!same && ((status = emit(&out[0], &cur[0])) != OK || (status = emit(&out[1], &cur[1])) != OK)) break;
            if ((status = cursor_next(&cur[0])) != OK) break;
            status = cursor_next(&cur[1]);
        } else {
            int s = order < 0 ? 0 : 1;
            if ((status = emit(&out[s], &cur[s])) != OK) break;
            status = cursor_next(&cur[s]);
        }
    }
    Py_END_ALLOW_THREADS
    if (status == NOMEM) {
        PyErr_NoMemory();
    } else if (status != OK) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *d = columns_of(&out[0]), *n = d ? columns_of(&out[1]) : NULL;
        if (d && n)
            result = Py_BuildValue("(NNLLL)", d, n, (long long)(cur[0].entries + cur[1].entries),
                                   (long long)(cur[0].walked + cur[1].walked), (long long)(cur[0].bytes + cur[1].bytes));
        else {
            Py_XDECREF(d);
            Py_XDECREF(n);
        }
    }
done:
    for (int s = 0; s < 2; s++) {
        free(cur[s].buf);
        free(cur[s].key.p);
        free(cur[s].last.p);
        vec *parts[] = {&out[s].path_off, &out[s].path, &out[s].addr_off, &out[s].addr, &out[s].types,
                        &out[s].sizes, &out[s].counts};
        for (int i = 0; i < 7; i++) free(parts[i]->p);
        PyBuffer_Release(&sides[s]);
    }
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    free(views);
    free(files);
    return result;
}

/* index(data, block, limit): the data block handles an index block lists (int64 offset, size pairs) and each
 * block's key (the masked CRC32C its trailer stores | size << 32, uint64), or None where this is unsure (a handle
 * past `limit`, an entry of another shape): the caller then walks the index with the careful decoder. */
static PyObject *index_py(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, block;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*y*n", &data, &block, &limit)) return NULL;
    const uint8_t *b = block.buf, *raw = data.buf;
    int64_t n = block.len, ok = n >= 4 && limit <= data.len;
    int64_t end = 0, count = 0;
    if (ok) {
        uint32_t restarts = (uint32_t)b[n - 4] | ((uint32_t)b[n - 3] << 8) | ((uint32_t)b[n - 2] << 16) |
                            ((uint32_t)b[n - 1] << 24);
        end = n - 4 - 4 * (int64_t)restarts;
        ok = end >= 0 && !(restarts == 0 && n > 4);
    }
    PyObject *hs = ok ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(16 * (end / 4 + 1))) : NULL;
    PyObject *ks = ok ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * (end / 4 + 1))) : NULL;
    if (ok && (!hs || !ks)) {
        Py_XDECREF(hs);
        Py_XDECREF(ks);
        PyBuffer_Release(&data);
        PyBuffer_Release(&block);
        return NULL;
    }
    if (ok) {
        int64_t *h = (int64_t *)PyBytes_AS_STRING(hs);
        uint64_t *k = (uint64_t *)PyBytes_AS_STRING(ks);
        int64_t p = 0;
        /* without the GIL: reading each block's trailer faults a mapped file's pages in, one per block */
        Py_BEGIN_ALLOW_THREADS
        while (ok && p < end) {
            uint64_t shared, unshared, vlen, offset, size;
            int big;
            if (uvarint(b, &p, end, &shared, &big) || big || uvarint(b, &p, end, &unshared, &big) || big ||
                uvarint(b, &p, end, &vlen, &big) || big || unshared > (uint64_t)(end - p) ||
                vlen > (uint64_t)(end - p) - unshared) {
                ok = 0;
                break;
            }
            int64_t q = p + (int64_t)unshared, vend = q + (int64_t)vlen;
            if (uvarint(b, &q, vend, &offset, &big) || big || uvarint(b, &q, vend, &size, &big) || big ||
                offset + size + 5 > (uint64_t)limit || size > 0xFFFFFFFFu) {
                ok = 0;
                break;
            }
            const uint8_t *t = raw + offset + size + 1;
            h[2 * count] = (int64_t)offset;
            h[2 * count + 1] = (int64_t)size;
            k[count] = ((uint64_t)t[0] | ((uint64_t)t[1] << 8) | ((uint64_t)t[2] << 16) | ((uint64_t)t[3] << 24)) |
                       (size << 32);
            count++;
            p = vend;
        }
        Py_END_ALLOW_THREADS
        ok = ok && p == end;
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&block);
    if (!ok) {
        Py_XDECREF(hs);
        Py_XDECREF(ks);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&hs, (Py_ssize_t)(16 * count)) || _PyBytes_Resize(&ks, (Py_ssize_t)(8 * count))) {
        Py_XDECREF(hs);
        Py_XDECREF(ks);
        return NULL;
    }
    return Py_BuildValue("(NN)", hs, ks);
}

static PyMethodDef methods[] = {
    {"index", index_py, METH_VARARGS, "index(data, index block, limit) -> (handles, keys) or None"},
    {"diff", diff, METH_VARARGS, "diff(files, dead blocks, new blocks) -> (dead entries, new entries, entries "
                                 "walked, blocks walked, bytes walked) or None"},
    {"net", net, METH_VARARGS, "net(columns, dead, new) -> (columns, rows, sums)"},
    {"keyset", keyset_build, METH_VARARGS, "keyset(columns) -> a set of their strings (columns: (offsets, bytes, "
                                           "first row, rows), Arrow's int32-offset layout)"},
    {"holds", keyset_holds, METH_VARARGS, "holds(set, column) -> bytes: 1 where the set has the row's string"},
    {"keyset_size", keyset_size, METH_VARARGS, "keyset_size(set) -> its distinct strings"},
    {"hashes", keyset_hashes, METH_VARARGS, "hashes(column) -> bytes: each row's hash (uint64)"},
    {"unpack", unpack, METH_VARARGS, "unpack(data, handles, limit, verify, first) -> (blocks, ends, stop block)"},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data) -> int"},
    {"same", same_py, METH_VARARGS, "same(a, a_start, b, b_start, length) -> whether the two slices are equal"},
    {"snappy", snappy_py, METH_VARARGS, "snappy(data) -> bytes or None"},
    {"walk", walk, METH_VARARGS, "walk(data, ends, first) -> (count, path offsets, path bytes, address offsets, "
                                 "address bytes, types, sizes, entries after each block (int64), stop block)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "lakefs_rangewalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit_lakefs_rangewalk(void) {
    crc_init();
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}
