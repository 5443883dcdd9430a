/*
 * BM25 top-k over posting lists (cortex/index/lexical.py search_terms keeps the definition).
 *
 * One call scores a query: for each term, rarest first, its weight, the bound of what the
 * terms from it on can still add, its document frequency, its main blocks' 12-byte records
 * (docno4, tf4, length4; docnos ascending) and the segments' combined entries of the term.
 * The loop is the Python definition's, step for step (the same candidates pruned at the same
 * point, the same additions in the same order), so the scores are the same doubles and the
 * top is the same list.
 */

#include "common.h"

#include <math.h>

/* a*b+c stays two roundings, as in Python (no fused multiply-add where the CPU has one) */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

static uint32_t
rd_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* -- an open-addressing map docno -> score (the definition's dict) -- */

typedef struct {
    uint32_t *keys;
    double *vals;
    unsigned char *used;
    size_t cap; /* a power of two */
    size_t n;
} Acc;

static int
acc_alloc(Acc *a, size_t want)
{
    size_t cap = 64;
    while (cap < want * 2) {
        cap <<= 1;
    }
    a->keys = PyMem_Malloc(cap * sizeof(uint32_t));
    a->vals = PyMem_Malloc(cap * sizeof(double));
    a->used = PyMem_Calloc(cap, 1);
    a->cap = cap;
    a->n = 0;
    if (a->keys == NULL || a->vals == NULL || a->used == NULL) {
        PyMem_Free(a->keys);
        PyMem_Free(a->vals);
        PyMem_Free(a->used);
        a->keys = NULL;
        a->vals = NULL;
        a->used = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
acc_free(Acc *a)
{
    PyMem_Free(a->keys);
    PyMem_Free(a->vals);
    PyMem_Free(a->used);
    a->keys = NULL;
    a->vals = NULL;
    a->used = NULL;
    a->n = a->cap = 0;
}

static size_t
acc_slot(const Acc *a, uint32_t k)
{
    size_t m = a->cap - 1, i = (size_t)((k * 2654435761u) ^ (k >> 15)) & m;
    while (a->used[i] && a->keys[i] != k) {
        i = (i + 1) & m;
    }
    return i;
}

static double *
acc_get(const Acc *a, uint32_t k)
{
    size_t i = acc_slot(a, k);
    return a->used[i] ? &a->vals[i] : NULL;
}

static int
acc_add(Acc *a, uint32_t k, double v); /* below */

static int
acc_grow(Acc *a)
{
    Acc b;
    if (acc_alloc(&b, a->cap) < 0) { /* twice the slots */
        return -1;
    }
    for (size_t i = 0; i < a->cap; i++) {
        if (a->used[i]) {
            size_t j = acc_slot(&b, a->keys[i]);
            b.used[j] = 1;
            b.keys[j] = a->keys[i];
            b.vals[j] = a->vals[i];
            b.n++;
        }
    }
    acc_free(a);
    *a = b;
    return 0;
}

/* scores[k] = scores.get(k, 0.0) + v */
static int
acc_add(Acc *a, uint32_t k, double v)
{
    size_t i = acc_slot(a, k);
    if (a->used[i]) {
        a->vals[i] = a->vals[i] + v;
        return 0;
    }
    if ((a->n + 1) * 2 > a->cap) {
        if (acc_grow(a) < 0) {
            return -1;
        }
        i = acc_slot(a, k);
    }
    a->used[i] = 1;
    a->keys[i] = k;
    a->vals[i] = 0.0 + v;
    a->n++;
    return 0;
}

/* -- a term's postings: main records merged with the segments' entries -- */

typedef struct {
    uint32_t docno;
    const unsigned char *tail; /* 8 bytes, or NULL: removed by a segment */
} Item;

typedef struct {
    double w, rest;
    Py_ssize_t df;
    Py_ssize_t nblocks;
    const unsigned char **block; /* each block's records */
    Py_ssize_t *count;           /* records per block */
    Py_ssize_t nitems;
    Item *items; /* docno order */
} Term;

static double
factor(const unsigned char *tail, double k1, double norm_a, double norm_b)
{
    double tf = (double)rd_u32(tail), length = (double)rd_u32(tail + 4);
    return tf * (k1 + 1.0) / (tf + norm_a + norm_b * length);
}

/* The tail of docno ``d`` in the term (segments first, then the main blocks), or NULL. */
static const unsigned char *
term_find(const Term *t, uint32_t d)
{
    Py_ssize_t lo = 0, hi = t->nitems;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (t->items[mid].docno < d) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    if (lo < t->nitems && t->items[lo].docno == d) {
        return t->items[lo].tail;
    }
    /* the last block whose first docno <= d */
    lo = 0;
    hi = t->nblocks;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (rd_u32(t->block[mid]) <= d) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    if (lo == 0) {
        return NULL;
    }
    const unsigned char *b = t->block[lo - 1];
    Py_ssize_t l = 0, h = t->count[lo - 1];
    while (l < h) {
        Py_ssize_t mid = (l + h) / 2;
        uint32_t here = rd_u32(b + 12 * mid);
        if (here < d) {
            l = mid + 1;
        }
        else if (here > d) {
            h = mid;
        }
        else {
            return b + 12 * mid + 4;
        }
    }
    return NULL;
}

/* Every posting of the term in docno order, as ``_entries`` yields them: call ``fn``. */
typedef int (*EntryFn)(void *ctx, uint32_t docno, const unsigned char *tail);

static int
term_each(const Term *t, EntryFn fn, void *ctx)
{
    Py_ssize_t j = 0, n = t->nitems;
    for (Py_ssize_t b = 0; b < t->nblocks; b++) {
        const unsigned char *p = t->block[b];
        for (Py_ssize_t r = 0; r < t->count[b]; r++, p += 12) {
            uint32_t d = rd_u32(p);
            while (j < n && t->items[j].docno < d) {
                if (t->items[j].tail != NULL && fn(ctx, t->items[j].docno, t->items[j].tail) < 0) {
                    return -1;
                }
                j++;
            }
            if (j < n && t->items[j].docno == d) {
                if (t->items[j].tail != NULL && fn(ctx, d, t->items[j].tail) < 0) {
                    return -1;
                }
                j++;
                continue;
            }
            if (fn(ctx, d, p + 4) < 0) {
                return -1;
            }
        }
    }
    for (; j < n; j++) {
        if (t->items[j].tail != NULL && fn(ctx, t->items[j].docno, t->items[j].tail) < 0) {
            return -1;
        }
    }
    return 0;
}

typedef struct {
    Acc *acc;
    double w, k1, norm_a, norm_b;
} AddCtx;

static int
add_all(void *ctx, uint32_t d, const unsigned char *tail)
{
    AddCtx *c = ctx;
    return acc_add(c->acc, d, c->w * factor(tail, c->k1, c->norm_a, c->norm_b));
}

static int
add_held(void *ctx, uint32_t d, const unsigned char *tail)
{
    AddCtx *c = ctx;
    double *s = acc_get(c->acc, d);
    if (s != NULL) {
        *s = *s + c->w * factor(tail, c->k1, c->norm_a, c->norm_b);
    }
    return 0;
}

/* -- selection -- */

typedef struct {
    double s;
    uint32_t d;
} Hit;

/* a before b: higher score, then smaller docno */
static int
hit_before(const Hit *a, const Hit *b)
{
    return a->s > b->s || (a->s == b->s && a->d < b->d);
}

/* heap of the kept hits with the worst at the root */
static void
sift_down(Hit *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && hit_before(&h[w], &h[l])) {
            w = l;
        }
        if (r < n && hit_before(&h[w], &h[r])) {
            w = r;
        }
        if (w == i) {
            return;
        }
        Hit t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int
cmp_hit(const void *a, const void *b)
{
    return hit_before(a, b) ? -1 : hit_before(b, a) ? 1 : 0;
}

/* The best min(k, acc->n) candidates into ``heap`` (room for k), the worst of them at its root;
 * returns how many.  With k candidates or more the root's score is the k-th largest score
 * (heapq.nlargest(k, scores)[-1]), whatever order ties take. */
static size_t
best(const Acc *acc, size_t k, Hit *heap)
{
    size_t have = 0;
    for (size_t s = 0; s < acc->cap; s++) {
        if (!acc->used[s]) {
            continue;
        }
        Hit h = {acc->vals[s], acc->keys[s]};
        if (have < k) {
            heap[have++] = h;
            if (have == k) {
                for (size_t i = k / 2; i-- > 0;) {
                    sift_down(heap, k, i);
                }
            }
        }
        else if (hit_before(&h, &heap[0])) {
            heap[0] = h;
            sift_down(heap, k, 0);
        }
    }
    return have;
}

/* -- parsing the plan -- */

static void
free_terms(Term *terms, Py_ssize_t n)
{
    if (terms == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyMem_Free(terms[i].block);
        PyMem_Free(terms[i].count);
        PyMem_Free(terms[i].items);
    }
    PyMem_Free(terms);
}

/* 1: parsed; 0: not the expected shapes (the caller answers None); -1: an error set */
static int
parse_term(PyObject *row, Term *t)
{
    PyObject *w, *rest, *df, *blocks, *items;
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 5) {
        return 0;
    }
    w = PyTuple_GET_ITEM(row, 0);
    rest = PyTuple_GET_ITEM(row, 1);
    df = PyTuple_GET_ITEM(row, 2);
    blocks = PyTuple_GET_ITEM(row, 3);
    items = PyTuple_GET_ITEM(row, 4);
    if (!PyFloat_CheckExact(w) || !PyFloat_CheckExact(rest) || !PyLong_CheckExact(df) ||
        !PyList_CheckExact(blocks) || (items != Py_None && !PyList_CheckExact(items))) {
        return 0;
    }
    t->w = PyFloat_AS_DOUBLE(w);
    t->rest = PyFloat_AS_DOUBLE(rest);
    t->df = PyLong_AsSsize_t(df);
    if (t->df == -1 && PyErr_Occurred()) {
        return -1;
    }
    t->nblocks = PyList_GET_SIZE(blocks);
    t->block = PyMem_Malloc(((size_t)t->nblocks + 1) * sizeof(*t->block));
    t->count = PyMem_Malloc(((size_t)t->nblocks + 1) * sizeof(*t->count));
    if (t->block == NULL || t->count == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    uint32_t last = 0;
    int any = 0;
    for (Py_ssize_t b = 0; b < t->nblocks; b++) {
        PyObject *o = PyList_GET_ITEM(blocks, b);
        if (!PyBytes_CheckExact(o)) {
            return 0;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(o);
        if (len == 0 || len % 12 != 0) {
            return 0;
        }
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(o);
        for (Py_ssize_t r = 0; r < len / 12; r++) { /* docnos ascend across the blocks */
            uint32_t d = rd_u32(p + 12 * r);
            if (any && d <= last) {
                return 0;
            }
            last = d;
            any = 1;
        }
        t->block[b] = p;
        t->count[b] = len / 12;
    }
    t->nitems = items == Py_None ? 0 : PyList_GET_SIZE(items);
    t->items = PyMem_Malloc(((size_t)t->nitems + 1) * sizeof(Item));
    if (t->items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < t->nitems; j++) {
        PyObject *it = PyList_GET_ITEM(items, j), *raw, *tail;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            return 0;
        }
        raw = PyTuple_GET_ITEM(it, 0);
        tail = PyTuple_GET_ITEM(it, 1);
        if (!PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 4 ||
            (tail != Py_None && (!PyBytes_CheckExact(tail) || PyBytes_GET_SIZE(tail) != 8))) {
            return 0;
        }
        t->items[j].docno = rd_u32((const unsigned char *)PyBytes_AS_STRING(raw));
        if (j > 0 && t->items[j].docno <= t->items[j - 1].docno) {
            return 0;
        }
        t->items[j].tail =
            tail == Py_None ? NULL : (const unsigned char *)PyBytes_AS_STRING(tail);
    }
    return 1;
}

PyDoc_STRVAR(bm25_top_doc,
             "bm25_top(plan, limit, k1, norm_a, norm_b, /)\n--\n\n"
             "The ``limit`` best documents of a query as ``[(docno4, score)]`` (by score, ties by "
             "docno), or None when ``plan`` is not as expected.  ``plan``: per term, rarest "
             "first, ``(w, rest, df, blocks, items)``: the term's idf, the bound of what the "
             "terms from it on add, its document frequency, its main blocks' 12-byte records "
             "and the segments' ``(docno4, tail or None)`` entries in docno order (or None).  "
             "The loop of cortex.index.lexical.search_terms without an allow filter.");

static PyObject *
sp_bm25_top(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5 || !PyList_CheckExact(args[0]) || !PyLong_CheckExact(args[1]) ||
        !PyFloat_CheckExact(args[2]) || !PyFloat_CheckExact(args[3]) ||
        !PyFloat_CheckExact(args[4])) {
        Py_RETURN_NONE;
    }
    PyObject *plan = args[0];
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (limit < 1) {
        Py_RETURN_NONE;
    }
    double k1 = PyFloat_AS_DOUBLE(args[2]), norm_a = PyFloat_AS_DOUBLE(args[3]),
           norm_b = PyFloat_AS_DOUBLE(args[4]);
    Py_ssize_t nterms = PyList_GET_SIZE(plan);
    Term *terms = PyMem_Calloc((size_t)nterms + 1, sizeof(Term));
    Acc acc = {0};
    Hit *heap = NULL;
    PyObject *out = NULL;
    if (terms == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nterms; i++) {
        int ok = parse_term(PyList_GET_ITEM(plan, i), &terms[i]);
        if (ok <= 0) {
            free_terms(terms, nterms);
            if (ok < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
    }
    if (acc_alloc(&acc, 1024) < 0) {
        free_terms(terms, nterms);
        return NULL;
    }
    double theta = -INFINITY;
    for (Py_ssize_t i = 0; i < nterms; i++) {
        Term *t = &terms[i];
        AddCtx ctx = {&acc, t->w, k1, norm_a, norm_b};
        if (t->rest < theta) {
            /* drop the candidates that cannot reach the top any more */
            Acc kept;
            if (acc_alloc(&kept, acc.n) < 0) {
                goto fail;
            }
            for (size_t s = 0; s < acc.cap; s++) {
                if (acc.used[s] && acc.vals[s] + t->rest >= theta) {
                    size_t j = acc_slot(&kept, acc.keys[s]);
                    kept.used[j] = 1;
                    kept.keys[j] = acc.keys[s];
                    kept.vals[j] = acc.vals[s];
                    kept.n++;
                }
            }
            acc_free(&acc);
            acc = kept;
            if ((Py_ssize_t)acc.n * 4 < t->df) {
                for (size_t s = 0; s < acc.cap; s++) {
                    if (acc.used[s]) {
                        const unsigned char *tail = term_find(t, acc.keys[s]);
                        if (tail != NULL) {
                            acc.vals[s] = acc.vals[s] + t->w * factor(tail, k1, norm_a, norm_b);
                        }
                    }
                }
            }
            else if (term_each(t, add_held, &ctx) < 0) {
                goto fail;
            }
        }
        else if (term_each(t, add_all, &ctx) < 0) {
            goto fail;
        }
        if ((Py_ssize_t)acc.n >= limit) {
            if (heap == NULL && (heap = PyMem_Malloc((size_t)limit * sizeof(Hit))) == NULL) {
                PyErr_NoMemory(); /* limit <= acc.n: as large as the candidates at most */
                goto fail;
            }
            best(&acc, (size_t)limit, heap);
            theta = heap[0].s;
        }
    }
    /* the top: the best ``limit``, in order */
    if (heap == NULL && (heap = PyMem_Malloc((acc.n + 1) * sizeof(Hit))) == NULL) {
        PyErr_NoMemory(); /* fewer candidates than ``limit``: room for them all */
        goto fail;
    }
    size_t have = best(&acc, (size_t)limit, heap);
    qsort(heap, have, sizeof(Hit), cmp_hit);
    out = PyList_New((Py_ssize_t)have);
    if (out == NULL) {
        goto fail;
    }
    for (size_t k = 0; k < have; k++) {
        unsigned char raw[4] = {(unsigned char)(heap[k].d >> 24), (unsigned char)(heap[k].d >> 16),
                                (unsigned char)(heap[k].d >> 8), (unsigned char)heap[k].d};
        PyObject *pair = Py_BuildValue("(y#d)", (const char *)raw, (Py_ssize_t)4, heap[k].s);
        if (pair == NULL) {
            Py_CLEAR(out);
            goto fail;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, pair);
    }
fail:
    PyMem_Free(heap);
    acc_free(&acc);
    free_terms(terms, nterms);
    return out;
}

static PyMethodDef bm25_methods[] = {
    {"bm25_top", (PyCFunction)(void (*)(void))sp_bm25_top, METH_FASTCALL, bm25_top_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_bm25_init(PyObject *m)
{
    return PyModule_AddFunctions(m, bm25_methods);
}
