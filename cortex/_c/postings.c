/*
 * Posting blocks and segments (cortex/index/postings.py and segments.py keep the definitions):
 * a block's varint payload from its postings and back (format 14: postings by document
 * number), a segment of new postings, and the segments combined for a fold.
 */

#include "common.h"

static int
cmp_record12(const void *a, const void *b)
{
    return memcmp(a, b, 4);
}

/* -- a segment of new postings (cortex/index/segments.py encode_fresh keeps the definition) -- */

typedef struct {
    const char *term; /* UTF-8, owned by the str */
    Py_ssize_t tlen;
    PyObject *str;
    const char *rec; /* docno4 + tail8 records, owned by the value */
    Py_ssize_t n;    /* records */
} FreshTerm;

static int
cmp_fresh_term(const void *a, const void *b)
{
    const FreshTerm *x = a, *y = b;
    Py_ssize_t m = x->tlen < y->tlen ? x->tlen : y->tlen;
    int c = memcmp(x->term, y->term, (size_t)m);
    return c != 0 ? c : (x->tlen > y->tlen) - (x->tlen < y->tlen);
}

static void
put_u32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static uint32_t
get_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return ((uint32_t)u[0] << 24) | ((uint32_t)u[1] << 16) | ((uint32_t)u[2] << 8) | u[3];
}

/* -- posting blocks by document number (format 14; cortex/index/postings.py keeps the
 * definitions: block_encode, _decode_payload) -- */

static Py_ssize_t
put_varint(unsigned char *p, uint64_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

/* The canonical varint at p[*i] (at most 5 bytes, shortest form): 1 with *v set and *i moved
 * past it, 0 when it is cut, too long or not in its shortest form. */
static int
get_varint(const unsigned char *p, Py_ssize_t n, Py_ssize_t *i, uint64_t *v)
{
    uint64_t x = 0;
    int k;
    for (k = 0; k < 5; k++) {
        unsigned char b;
        if (*i + k >= n) {
            return 0;
        }
        b = p[*i + k];
        x |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            if (b == 0 && k > 0) {
                return 0;
            }
            *i += k + 1;
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* get_varint, a one-byte varint (most of a block's: small deltas, tf and dl) without its loop */
static inline int
get_varint1(const unsigned char *p, Py_ssize_t n, Py_ssize_t *i, uint64_t *v)
{
    if (*i < n && p[*i] < 0x80) {
        *v = p[(*i)++];
        return 1;
    }
    return get_varint(p, n, i, v);
}

PyDoc_STRVAR(block_encode_doc,
             "block_encode(records, block_max, /)\n--\n\n"
             "``cortex.index.postings.block_encode`` in C: the varint payload of a block of "
             "postings given as 12-byte records (docno, tf, dl: u32 big-endian each); None when "
             "they are not 1 to ``block_max`` postings in strictly ascending docno order with "
             "1 <= tf <= dl (the Python definition then names the fault).");

/* The varint payload of 12-byte records r[0:n] into out (room for n / 12 * 15 bytes): its
 * size, or -1 when they are not 1 to block_max postings in strictly ascending docno order with
 * 1 <= tf <= dl. */
Py_ssize_t
cx_block_encode(const unsigned char *r, Py_ssize_t n, Py_ssize_t block_max, unsigned char *out)
{
    unsigned char *q = out;
    Py_ssize_t i;
    uint32_t last = 0;
    if (n == 0 || n % 12 != 0 || n / 12 > block_max) {
        return -1;
    }
    for (i = 0; i < n; i += 12) {
        uint32_t d = get_u32((const char *)r + i), tf = get_u32((const char *)r + i + 4),
                 dl = get_u32((const char *)r + i + 8);
        if (tf < 1 || tf > dl || (i > 0 && d <= last)) {
            return -1;
        }
        if (i > 0) {
            q += put_varint(q, d - last);
        }
        last = d;
        q += put_varint(q, tf);
        q += put_varint(q, dl);
    }
    return q - out;
}

/* The walk of the block payload p[0:n] whose first docno is first: the number of its postings,
 * or -1 when p is not the canonical encoding of 1 to block_max postings; each posting's 12-byte
 * record goes to out when out is not NULL, and *last gets the last posting's docno. Inlined
 * into its two callers, so each is compiled with or without the records. */
static inline Py_ssize_t
block_walk(uint64_t first, const unsigned char *p, Py_ssize_t n, Py_ssize_t block_max,
           unsigned char *out, uint32_t *last)
{
    Py_ssize_t i = 0, count = 0;
    uint64_t docno = first, delta, tf, dl;
    if (n == 0 || docno > 0xFFFFFFFFu || block_max < 1) {
        return -1;
    }
    while (i < n) {
        if (count > 0) {
            if (!get_varint1(p, n, &i, &delta) || delta < 1) {
                return -1;
            }
            docno += delta;
            if (docno > 0xFFFFFFFFu) {
                return -1;
            }
        }
        if (!get_varint1(p, n, &i, &tf) || !get_varint1(p, n, &i, &dl) || tf < 1 || tf > dl ||
            dl > 0xFFFFFFFFu) {
            return -1;
        }
        if (++count > block_max) {
            return -1;
        }
        if (out != NULL) {
            put_u32((char *)out, (uint32_t)docno);
            put_u32((char *)out + 4, (uint32_t)tf);
            put_u32((char *)out + 8, (uint32_t)dl);
            out += 12;
        }
    }
    *last = (uint32_t)docno;
    return count;
}

/* The 12-byte records of the block payload p[0:n] whose first docno is first, into out (room
 * for (n / 2 + 1) * 12 bytes): their size, or -1 when p is not the canonical encoding of 1 to
 * block_max postings. */
Py_ssize_t
cx_block_decode(uint64_t first, const unsigned char *p, Py_ssize_t n, Py_ssize_t block_max,
                unsigned char *out)
{
    uint32_t last;
    Py_ssize_t count = block_walk(first, p, n, block_max, out, &last);
    return count < 0 ? -1 : count * 12;
}

/* The number of postings of the block payload p[0:n] whose first docno is first, with *last set
 * to the docno of its last one: cx_block_decode's checks without its records (an append reads
 * a block only to extend it), -1 when p is not the canonical encoding of 1 to block_max
 * postings. */
Py_ssize_t
cx_block_scan(uint64_t first, const unsigned char *p, Py_ssize_t n, Py_ssize_t block_max,
              uint32_t *last)
{
    return block_walk(first, p, n, block_max, NULL, last);
}

/* The varints that continue a block whose last posting has docno last with the 12-byte records
 * r[0:n] (each posting a delta, tf, dl: the bytes cx_block_encode gives for them after that
 * block's), into out (room for n / 12 * 15 bytes): their size, or -1 when the docnos do not
 * ascend strictly from past last or a posting breaks 1 <= tf <= dl. */
Py_ssize_t
cx_block_extend(const unsigned char *r, Py_ssize_t n, uint32_t last, unsigned char *out)
{
    unsigned char *q = out;
    Py_ssize_t i;
    if (n % 12 != 0) {
        return -1;
    }
    for (i = 0; i < n; i += 12) {
        uint32_t d = get_u32((const char *)r + i), tf = get_u32((const char *)r + i + 4),
                 dl = get_u32((const char *)r + i + 8);
        if (tf < 1 || tf > dl || d <= last) {
            return -1;
        }
        q += put_varint(q, d - last);
        last = d;
        q += put_varint(q, tf);
        q += put_varint(q, dl);
    }
    return q - out;
}

static PyObject *
sp_block_encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *r;
    unsigned char *buf;
    Py_ssize_t n, block_max, size;
    PyObject *out;
    (void)module;
    if (nargs != 2 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "block_encode(bytes, block_max)");
        return NULL;
    }
    block_max = PyLong_AsSsize_t(args[1]);
    if (block_max == -1 && PyErr_Occurred()) {
        return NULL;
    }
    r = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    n = PyBytes_GET_SIZE(args[0]);
    if (n == 0 || n % 12 != 0 || n / 12 > block_max) {
        Py_RETURN_NONE;
    }
    buf = PyMem_Malloc((size_t)(n / 12) * 15); /* at most 5 bytes a varint */
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    size = cx_block_encode(r, n, block_max, buf);
    if (size < 0) {
        PyMem_Free(buf);
        Py_RETURN_NONE;
    }
    out = PyBytes_FromStringAndSize((const char *)buf, size);
    PyMem_Free(buf);
    return out;
}

PyDoc_STRVAR(block_decode_doc,
             "block_decode(first, payload, block_max, /)\n--\n\n"
             "The postings of a block payload whose first docno is ``first`` as 12-byte records "
             "(``cortex.index.postings._decode_payload`` in C); None when the payload is not "
             "the canonical encoding of 1 to ``block_max`` postings (the Python definition then "
             "says why).");

static PyObject *
sp_block_decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *p;
    unsigned char *buf;
    Py_ssize_t n, block_max, size;
    uint64_t docno;
    PyObject *out;
    (void)module;
    if (nargs != 3 || !PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "block_decode(first, bytes, block_max)");
        return NULL;
    }
    docno = PyLong_AsUnsignedLongLong(args[0]);
    if (docno == (uint64_t)-1 && PyErr_Occurred()) {
        return NULL;
    }
    block_max = PyLong_AsSsize_t(args[2]);
    if (block_max == -1 && PyErr_Occurred()) {
        return NULL;
    }
    p = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    n = PyBytes_GET_SIZE(args[1]);
    /* a posting takes 2 bytes at least (3 after the first): at most n / 2 of them */
    buf = PyMem_Malloc((size_t)(n / 2 + 1) * 12);
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    size = cx_block_decode(docno, p, n, block_max, buf);
    if (size < 0) {
        PyMem_Free(buf);
        Py_RETURN_NONE;
    }
    out = PyBytes_FromStringAndSize((const char *)buf, size);
    PyMem_Free(buf);
    return out;
}

PyDoc_STRVAR(segment_fresh_doc,
             "segment_fresh(fresh, /)\n--\n\n"
             "``cortex.index.segments.encode_fresh`` in C: ``(payload, groups)`` for ``fresh`` "
             "({term: docno4 + tail8 records}, a dict of str to bytes or bytearray), or None "
             "when anything is not the common case (the Python definition then runs and names "
             "the fault).");

#define FRESH_MADE 4

static PyObject *
sp_segment_fresh(PyObject *module, PyObject *fresh)
{
    Py_ssize_t nt, pos = 0, i, j, size = 4, count = 0, scratch_n = 0;
    PyObject *k, *v, *payload = NULL, *groups = NULL, *add = NULL, *result = NULL;
    /* the last entries made, by their 12 record bytes: a write's terms share its docno and
     * mostly a few tails, so their (immutable) entries are one object each, not one a term */
    PyObject *made[FRESH_MADE] = {NULL};
    char made_rec[FRESH_MADE][12];
    int nmade = 0, c;
    FreshTerm *terms = NULL;
    char *scratch = NULL, *q;
    if (!PyDict_CheckExact(fresh) || (nt = PyDict_GET_SIZE(fresh)) == 0) {
        Py_RETURN_NONE;
    }
    terms = PyMem_Calloc((size_t)nt, sizeof(FreshTerm));
    if (terms == NULL) {
        return PyErr_NoMemory();
    }
    i = 0;
    while (PyDict_Next(fresh, &pos, &k, &v)) {
        FreshTerm *t = &terms[i++];
        Py_ssize_t len;
        if (!PyUnicode_CheckExact(k)) {
            goto common_case_not;
        }
        t->term = PyUnicode_AsUTF8AndSize(k, &t->tlen);
        if (t->term == NULL) {
            PyErr_Clear();
            goto common_case_not;
        }
        t->str = k;
        if (PyByteArray_CheckExact(v)) {
            t->rec = PyByteArray_AS_STRING(v);
            len = PyByteArray_GET_SIZE(v);
        }
        else if (PyBytes_CheckExact(v)) {
            t->rec = PyBytes_AS_STRING(v);
            len = PyBytes_GET_SIZE(v);
        }
        else {
            goto common_case_not;
        }
        if (len == 0 || len % 12 != 0 || t->tlen < 1 || t->tlen > 256 ||
            memchr(t->term, 0, (size_t)t->tlen) != NULL) {
            goto common_case_not;
        }
        t->n = len / 12;
        count += t->n;
        size += 2 + t->tlen + 4 + t->n * 13;
        if (t->n > scratch_n) {
            scratch_n = t->n;
        }
    }
    if (count > 0xFFFFFFFFLL) {
        goto common_case_not;
    }
    qsort(terms, (size_t)nt, sizeof(FreshTerm), cmp_fresh_term);
    scratch = PyMem_Malloc((size_t)scratch_n * 12);
    payload = PyBytes_FromStringAndSize(NULL, size);
    groups = PyList_New(nt);
    add = PyLong_FromLong(1);
    if (scratch == NULL || payload == NULL || groups == NULL || add == NULL) {
        if (scratch == NULL) {
            PyErr_NoMemory();
        }
        goto fail;
    }
    q = PyBytes_AS_STRING(payload);
    put_u32(q, (uint32_t)count);
    q += 4;
    for (i = 0; i < nt; i++) {
        FreshTerm *t = &terms[i];
        PyObject *listed, *group;
        const char *r = t->rec;
        if (t->n > 1) { /* the records of a term, in id order */
            memcpy(scratch, t->rec, (size_t)t->n * 12);
            for (j = 12; j < t->n * 12; j += 12) {
                if (memcmp(scratch + j - 12, scratch + j, 4) >= 0) {
                    break;
                }
            }
            if (j < t->n * 12) {
                qsort(scratch, (size_t)t->n, 12, cmp_record12);
            }
            r = scratch;
        }
        q[0] = (char)(t->tlen >> 8);
        q[1] = (char)t->tlen;
        memcpy(q + 2, t->term, (size_t)t->tlen);
        q += 2 + t->tlen;
        put_u32(q, (uint32_t)t->n);
        q += 4;
        listed = PyList_New(t->n);
        if (listed == NULL) {
            goto fail;
        }
        group = PyTuple_Pack(2, t->str, listed);
        Py_DECREF(listed);
        if (group == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(groups, i, group);
        for (j = 0; j < t->n; j++) {
            const char *e = r + j * 12;
            uint32_t tf = get_u32(e + 4), dl = get_u32(e + 8);
            PyObject *raw, *tail, *entry;
            if ((j > 0 && memcmp(e - 12, e, 4) >= 0) || tf < 1 || tf > dl) {
                goto common_case_not; /* a repeated docno or a bad posting */
            }
            q[0] = 1; /* ADD */
            memcpy(q + 1, e, 12);
            q += 13;
            entry = NULL;
            raw = NULL;
            for (c = 0; c < nmade; c++) {
                if (memcmp(made_rec[c], e, 12) == 0) {
                    entry = made[c];
                    Py_INCREF(entry);
                    break;
                }
                if (raw == NULL && memcmp(made_rec[c], e, 4) == 0) {
                    raw = PyTuple_GET_ITEM(made[c], 1);
                }
            }
            if (entry == NULL) {
                if (raw != NULL) {
                    Py_INCREF(raw);
                }
                else {
                    raw = PyBytes_FromStringAndSize(e, 4);
                }
                tail = PyBytes_FromStringAndSize(e + 4, 8);
                entry = raw == NULL || tail == NULL ? NULL : PyTuple_Pack(3, add, raw, tail);
                Py_XDECREF(raw);
                Py_XDECREF(tail);
                if (entry == NULL) {
                    goto fail;
                }
                c = nmade < FRESH_MADE ? nmade++ : (int)(j % FRESH_MADE);
                Py_XSETREF(made[c], entry);
                Py_INCREF(entry);
                memcpy(made_rec[c], e, 12);
            }
            PyList_SET_ITEM(listed, j, entry);
        }
    }
    result = PyTuple_Pack(2, payload, groups);
    goto fail; /* releases what the result holds its own references to */
common_case_not:
    Py_INCREF(Py_None);
    result = Py_None;
fail:
    for (c = 0; c < nmade; c++) {
        Py_DECREF(made[c]);
    }
    Py_XDECREF(payload);
    Py_XDECREF(groups);
    Py_XDECREF(add);
    PyMem_Free(scratch);
    PyMem_Free(terms);
    return result;
}


/* One segment entry (kind, docno4, tail8 or None) as segments.decode gives it: 1 with its kind,
 * id and tail (borrowed); 0 when it is not such an entry. */
static int
folded_entry(PyObject *e, int *kind, PyObject **raw, PyObject **tail)
{
    long k;
    int overflow;
    if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 3 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(e, 0))) {
        return 0;
    }
    k = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(e, 0), &overflow); /* no error: an int */
    *raw = PyTuple_GET_ITEM(e, 1);
    *tail = PyTuple_GET_ITEM(e, 2);
    if (k < 1 || k > 3 || !PyBytes_CheckExact(*raw) || PyBytes_GET_SIZE(*raw) != 4 ||
        (*tail == Py_None) != (k == 3) || (*tail != Py_None && !PyBytes_CheckExact(*tail))) {
        return 0;
    }
    *kind = (int)k;
    return 1;
}

PyDoc_STRVAR(segments_folded_doc,
             "segments_folded(segments, /)\n--\n\n"
             "``cortex.index.segments.Overlay.folded`` in C: ``segments`` is the list of the "
             "overlay's decoded segments (term -> [(kind, docno4, tail8 or None), ...]), oldest "
             "first. None when an entry contradicts an older segment's or is not such an entry "
             "(the Python definition then runs and names the fault).");

static PyObject *
sp_segments_folded(PyObject *module, PyObject *segs)
{
    /* term -> [final dict, df change (int), ids the main blocks hold (set) or None] */
    PyObject *out, *result = NULL, *term, *entries, *row;
    Py_ssize_t s, ns, pos, j, ne;
    (void)module;
    if (!PyList_CheckExact(segs)) {
        Py_RETURN_NONE;
    }
    out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    ns = PyList_GET_SIZE(segs);
    for (s = 0; s < ns; s++) {
        PyObject *seg = PyList_GET_ITEM(segs, s);
        if (!PyDict_Check(seg)) {
            goto not_here;
        }
        pos = 0;
        while (PyDict_Next(seg, &pos, &term, &entries)) {
            PyObject *final, *below, *got, *dv;
            long d = 0;
            int first;
            if (!PyList_CheckExact(entries) || !PyUnicode_CheckExact(term)) {
                goto not_here;
            }
            got = PyDict_GetItemWithError(out, term);
            if (got == NULL && PyErr_Occurred()) {
                goto fail;
            }
            first = got == NULL;
            if (first) {
                row = PyList_New(3);
                if (row == NULL) {
                    goto fail;
                }
                final = PyDict_New();
                if (final == NULL || PyDict_SetItem(out, term, row) < 0) {
                    Py_XDECREF(final);
                    Py_DECREF(row);
                    goto fail;
                }
                Py_DECREF(row); /* out holds it */
                PyList_SET_ITEM(row, 0, final);
                Py_INCREF(Py_None);
                PyList_SET_ITEM(row, 2, Py_None);
                got = row;
            }
            else {
                final = PyList_GET_ITEM(got, 0);
                d = PyLong_AsLong(PyList_GET_ITEM(got, 1));
            }
            below = PyList_GET_ITEM(got, 2);
            ne = PyList_GET_SIZE(entries);
            for (j = 0; j < ne; j++) {
                int kind;
                PyObject *raw, *tail;
                if (!folded_entry(PyList_GET_ITEM(entries, j), &kind, &raw, &tail)) {
                    goto not_here;
                }
                if (!first) {
                    PyObject *prior = PyDict_GetItemWithError(final, raw);
                    if (prior == NULL && PyErr_Occurred()) {
                        goto fail;
                    }
                    if (prior != NULL && (prior != Py_None) == (kind == 1)) {
                        goto not_here; /* an entry contradicting an older segment's */
                    }
                    if (prior != NULL) {
                        goto set;
                    }
                }
                if (kind != 1) { /* the main blocks decide what is below */
                    if (below == Py_None) {
                        below = PySet_New(NULL);
                        if (below == NULL) {
                            goto fail;
                        }
                        PyList_SET_ITEM(got, 2, below);
                        Py_DECREF(Py_None);
                    }
                    if (PySet_Add(below, raw) < 0) {
                        goto fail;
                    }
                }
            set:
                if (PyDict_SetItem(final, raw, tail) < 0) {
                    goto fail;
                }
                d += kind == 1 ? 1 : kind == 3 ? -1 : 0;
            }
            dv = PyLong_FromLong(d);
            if (dv == NULL) {
                goto fail;
            }
            if (first) {
                PyList_SET_ITEM(got, 1, dv);
            }
            else if (PyList_SetItem(got, 1, dv) < 0) {
                goto fail;
            }
        }
    }
    /* the rows as tuples, as the Python definition gives them */
    pos = 0;
    while (PyDict_Next(out, &pos, &term, &row)) {
        PyObject *t = PyList_AsTuple(row);
        if (t == NULL) {
            goto fail;
        }
        if (PyDict_SetItem(out, term, t) < 0) { /* an existing key: no resize while iterating */
            Py_DECREF(t);
            goto fail;
        }
        Py_DECREF(t);
    }
    return out;
not_here:
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_DECREF(out);
    return result;
}

PyDoc_STRVAR(segments_added_doc,
             "segments_added(segments, /)\n--\n\n"
             "``cortex.index.segments.Overlay.added`` in C: ``segments`` as for "
             "``segments_folded``. ``(records, counts)`` when every entry is an ADD whose docno "
             "comes after the term's earlier entries' (a run of writes of new memories): term "
             "-> its postings as 12-byte records (docno4 + tail8, a bytearray, ascending) and "
             "term -> how many; None otherwise (``folded`` then combines the segments).");

static PyObject *
sp_segments_added(PyObject *module, PyObject *segs)
{
    PyObject *records = NULL, *counts = NULL, *term, *entries, *ba, *res = NULL;
    Py_ssize_t s, ns, pos, j, ne;
    (void)module;
    if (!PyList_CheckExact(segs)) {
        Py_RETURN_NONE;
    }
    records = PyDict_New();
    if (records == NULL) {
        return NULL;
    }
    ns = PyList_GET_SIZE(segs);
    for (s = 0; s < ns; s++) {
        PyObject *seg = PyList_GET_ITEM(segs, s);
        if (!PyDict_Check(seg)) {
            goto not_here;
        }
        pos = 0;
        while (PyDict_Next(seg, &pos, &term, &entries)) {
            Py_ssize_t have;
            char *at;
            if (!PyList_CheckExact(entries) || !PyUnicode_CheckExact(term)) {
                goto not_here;
            }
            ba = PyDict_GetItemWithError(records, term);
            if (ba == NULL) {
                if (PyErr_Occurred()) {
                    goto fail;
                }
                ba = PyByteArray_FromStringAndSize(NULL, 0);
                if (ba == NULL) {
                    goto fail;
                }
                if (PyDict_SetItem(records, term, ba) < 0) {
                    Py_DECREF(ba);
                    goto fail;
                }
                Py_DECREF(ba); /* records holds it */
            }
            ne = PyList_GET_SIZE(entries);
            have = PyByteArray_GET_SIZE(ba);
            if (PyByteArray_Resize(ba, have + ne * 12) < 0) {
                goto fail;
            }
            at = PyByteArray_AS_STRING(ba) + have;
            for (j = 0; j < ne; j++) {
                int kind;
                PyObject *raw, *tail;
                if (!folded_entry(PyList_GET_ITEM(entries, j), &kind, &raw, &tail) || kind != 1 ||
                    PyBytes_GET_SIZE(tail) != 8) {
                    goto not_here;
                }
                if ((have > 0 || j > 0) && memcmp(at - 12, PyBytes_AS_STRING(raw), 4) >= 0) {
                    goto not_here; /* not after the term's earlier entries: folded decides */
                }
                memcpy(at, PyBytes_AS_STRING(raw), 4);
                memcpy(at + 4, PyBytes_AS_STRING(tail), 8);
                at += 12;
            }
        }
    }
    counts = PyDict_New();
    if (counts == NULL) {
        goto fail;
    }
    pos = 0;
    while (PyDict_Next(records, &pos, &term, &ba)) {
        PyObject *n = PyLong_FromSsize_t(PyByteArray_GET_SIZE(ba) / 12);
        if (n == NULL || PyDict_SetItem(counts, term, n) < 0) {
            Py_XDECREF(n);
            goto fail;
        }
        Py_DECREF(n);
    }
    res = PyTuple_Pack(2, records, counts);
fail:
    Py_XDECREF(records);
    Py_XDECREF(counts);
    return res;
not_here:
    Py_DECREF(records);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(segment_decode_doc,
             "segment_decode(payload, /)\n--\n\n"
             "``cortex.index.segments.decode`` in C: the groups of a canonical segment payload "
             "(bytes), ``[(term, [(kind, docno4, tail8 or None), ...]), ...]``, or None when it "
             "is not one (the Python definition then names the fault).");

static PyObject *
sp_segment_decode(PyObject *module, PyObject *arg)
{
    const unsigned char *p, *last_term = NULL;
    Py_ssize_t n, i = 4, tlen, last_len = 0;
    uint64_t seen = 0;
    uint32_t count;
    PyObject *groups, *kinds[4] = {NULL, NULL, NULL, NULL};
    int k;
    if (!PyBytes_CheckExact(arg)) {
        Py_RETURN_NONE;
    }
    p = (const unsigned char *)PyBytes_AS_STRING(arg);
    n = PyBytes_GET_SIZE(arg);
    if (n < 4) {
        Py_RETURN_NONE;
    }
    count = get_u32((const char *)p);
    groups = PyList_New(0);
    if (groups == NULL) {
        return NULL;
    }
    for (k = 1; k <= 3; k++) {
        kinds[k] = PyLong_FromLong(k);
        if (kinds[k] == NULL) {
            goto fail;
        }
    }
    while (i < n) {
        const unsigned char *term;
        uint32_t m, j;
        PyObject *str, *entries, *group;
        int cmp;
        if (i + 2 > n) {
            goto not_canonical;
        }
        tlen = (Py_ssize_t)p[i] << 8 | p[i + 1];
        i += 2;
        if (tlen < 1 || tlen > 256 || i + tlen > n || memchr(p + i, 0, (size_t)tlen) != NULL) {
            goto not_canonical;
        }
        term = p + i;
        if (last_term != NULL) { /* terms strictly ascending by their bytes */
            cmp = memcmp(term, last_term, (size_t)(tlen < last_len ? tlen : last_len));
            if (cmp < 0 || (cmp == 0 && tlen <= last_len)) {
                goto not_canonical;
            }
        }
        last_term = term;
        last_len = tlen;
        i += tlen;
        if (i + 4 > n) {
            goto not_canonical;
        }
        m = get_u32((const char *)p + i);
        i += 4;
        /* every entry takes at least 5 bytes: a count past what is left is refused before
         * anything is allocated for it */
        if (m < 1 || (uint64_t)m > (uint64_t)(n - i) / 5) {
            goto not_canonical;
        }
        str = PyUnicode_DecodeUTF8((const char *)term, tlen, "strict");
        if (str == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                goto fail;
            }
            PyErr_Clear();
            goto not_canonical;
        }
        entries = PyList_New((Py_ssize_t)m);
        group = entries == NULL ? NULL : PyTuple_Pack(2, str, entries);
        Py_DECREF(str);
        if (group == NULL) {
            Py_XDECREF(entries);
            goto fail;
        }
        Py_DECREF(entries); /* the group holds it */
        if (PyList_Append(groups, group) < 0) {
            Py_DECREF(group);
            goto fail;
        }
        Py_DECREF(group);
        for (j = 0; j < m; j++) {
            unsigned kind;
            PyObject *raw, *tail, *entry;
            if (i + 5 > n) {
                goto not_canonical;
            }
            kind = p[i];
            if (kind < 1 || kind > 3) {
                goto not_canonical;
            }
            raw = PyBytes_FromStringAndSize((const char *)p + i + 1, 4);
            if (raw == NULL) {
                goto fail;
            }
            i += 5;
            if (kind != 3) {
                uint32_t tf, dl;
                if (i + 8 > n) {
                    Py_DECREF(raw);
                    goto not_canonical;
                }
                tf = get_u32((const char *)p + i);
                dl = get_u32((const char *)p + i + 4);
                if (tf < 1 || tf > dl) {
                    Py_DECREF(raw);
                    goto not_canonical;
                }
                tail = PyBytes_FromStringAndSize((const char *)p + i, 8);
                if (tail == NULL) {
                    Py_DECREF(raw);
                    goto fail;
                }
                i += 8;
            }
            else {
                tail = Py_NewRef(Py_None);
            }
            if (j > 0) { /* docnos strictly ascending within a group */
                PyObject *prev = PyTuple_GET_ITEM(PyList_GET_ITEM(entries, j - 1), 1);
                if (memcmp(PyBytes_AS_STRING(prev), PyBytes_AS_STRING(raw), 4) >= 0) {
                    Py_DECREF(raw);
                    Py_DECREF(tail);
                    goto not_canonical;
                }
            }
            entry = PyTuple_New(3);
            if (entry == NULL) {
                Py_DECREF(raw);
                Py_DECREF(tail);
                goto fail;
            }
            PyTuple_SET_ITEM(entry, 0, Py_NewRef(kinds[kind]));
            PyTuple_SET_ITEM(entry, 1, raw);
            PyTuple_SET_ITEM(entry, 2, tail);
            PyList_SET_ITEM(entries, j, entry);
        }
        seen += m;
    }
    if (PyList_GET_SIZE(groups) == 0 || seen != count) {
        goto not_canonical;
    }
    for (k = 1; k <= 3; k++) {
        Py_DECREF(kinds[k]);
    }
    return groups;
not_canonical:
    for (k = 1; k <= 3; k++) {
        Py_XDECREF(kinds[k]);
    }
    Py_DECREF(groups);
    Py_RETURN_NONE;
fail:
    for (k = 1; k <= 3; k++) {
        Py_XDECREF(kinds[k]);
    }
    Py_DECREF(groups);
    return NULL;
}

static PyMethodDef postings_methods[] = {
    {"segments_folded", (PyCFunction)sp_segments_folded, METH_O, segments_folded_doc},
    {"segments_added", (PyCFunction)sp_segments_added, METH_O, segments_added_doc},
    {"block_encode", (PyCFunction)(void (*)(void))sp_block_encode, METH_FASTCALL, block_encode_doc},
    {"block_decode", (PyCFunction)(void (*)(void))sp_block_decode, METH_FASTCALL, block_decode_doc},
    {"segment_fresh", (PyCFunction)sp_segment_fresh, METH_O, segment_fresh_doc},
    {"segment_decode", (PyCFunction)sp_segment_decode, METH_O, segment_decode_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_postings_init(PyObject *m)
{
    return PyModule_AddFunctions(m, postings_methods);
}
