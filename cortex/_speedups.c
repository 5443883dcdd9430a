/*
 * cortex._speedups: a schema-driven, strict, one-pass decoder of canonical CBOR records, and
 * at the end of the file the hot loops of the write path: tokenizing ASCII text, counting
 * terms, holding and ordering the lexical postings of a transaction, and encoding a list of
 * short ASCII text strings (tags, a lexical document's terms).
 *
 * A ``Plan`` describes one record struct (built by ``StructCodec`` from its field list, see
 * cortex/codec.py).  ``decode(plan, data)`` reads ``data`` straight into the struct and accepts
 * only the canonical encoding (RFC 8949 section 4.2.1 plus the record rules of DESIGN.md section
 * 3): shortest heads, shortest float width, definite lengths, no tags, record keys strictly
 * increasing, text map keys strictly increasing in bytewise order of their encodings, no unknown
 * keys, every required field present, no value the encoder would omit, valid NFC UTF-8 text,
 * values in range and no trailing bytes.
 *
 * Any input it does not accept raises ``Reject``; the caller then runs the pure-Python decoder,
 * which names the error (or, should this module ever be stricter than it, returns the value).
 * So this module may reject conservatively but must never accept what the Python path rejects,
 * and must build a value equal to the one the Python path builds.
 *
 * The decoder recurses only along the plan (a record's fields, a list's items), never along
 * the input, so its depth is bounded by the schema; MAX_DEPTH guards against a cyclic plan.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if FLT_RADIX != 2 || FLT_MANT_DIG != 24 || DBL_MANT_DIG != 53
#error "cortex._speedups needs IEEE 754 binary32 float and binary64 double"
#endif

#define MAX_DEPTH 32
#define MAX_FIELDS 64
#define STACK_SPANS 32

enum {
    K_TEXT = 1,
    K_BYTES,
    K_INT,
    K_UNIT,
    K_BOOL,
    K_TIME,
    K_ENUM,
    K_ID,
    K_LIST,
    K_PAIR,
    K_MAP,
    K_RECORD,
};

enum { CHECK_NONE = 0, CHECK_URI = 1, CHECK_DECIMAL = 2 };

static PyObject *Reject = NULL;        /* the one exception this module raises on bad input */
static PyObject *is_normalized = NULL; /* unicodedata.is_normalized */
static PyObject *str_NFC = NULL;       /* "NFC" */
static PyObject *one_obj = NULL;       /* 1 */

/* ------------------------------------------------------------------------------------------ */
/* Plans */

typedef struct Spec {
    int kind;
    Py_ssize_t max_bytes; /* text: UTF-8 bytes; bytes: length */
    int check;            /* text: CHECK_* */
    PyObject *names;      /* text with CHECK_URI: tuple of bytes, the type names */
    Py_ssize_t exact;     /* bytes: exact length, or -1 */
    long long lo, hi;     /* int, time, pair: inclusive range */
    PyObject **members;   /* enum: members by code (NULL where no member) */
    Py_ssize_t n_members;
    PyObject *labels;     /* enum: {label: code} (the encoder takes labels), or NULL */
    PyObject *factory;    /* id: raw 16 bytes -> MemoryId */
    struct Spec *item;    /* list: item; map: key */
    struct Spec *value;   /* map: value */
    Py_ssize_t max_items; /* list, map */
    int unique;           /* list */
    PyObject *plan;       /* record: a Plan */
} Spec;

typedef struct {
    unsigned long long key;
    Py_ssize_t slot;    /* index into kwnames */
    int absent_ok;      /* the encoder omits the default value */
    PyObject *dflt;     /* the default (when absent_ok and no factory) */
    PyObject *factory;  /* called for the default, or NULL */
    Spec spec;
} Field;

typedef struct {
    PyObject_HEAD
    PyObject *cls;
    PyObject *kwnames; /* tuple of attribute names, the order values are passed in */
    int has_sv;
    unsigned long long sv;
    Py_ssize_t nfields;
    Field *fields; /* in key order */
} PlanObject;

static PyTypeObject Plan_Type;

static void
spec_clear(Spec *s)
{
    Py_ssize_t i;
    Py_CLEAR(s->names);
    if (s->members != NULL) {
        for (i = 0; i < s->n_members; i++) {
            Py_XDECREF(s->members[i]);
        }
        PyMem_Free(s->members);
        s->members = NULL;
    }
    Py_CLEAR(s->factory);
    Py_CLEAR(s->labels);
    if (s->item != NULL) {
        spec_clear(s->item);
        PyMem_Free(s->item);
        s->item = NULL;
    }
    if (s->value != NULL) {
        spec_clear(s->value);
        PyMem_Free(s->value);
        s->value = NULL;
    }
    Py_CLEAR(s->plan);
}

static int
as_ssize(PyObject *o, Py_ssize_t *out, const char *what)
{
    Py_ssize_t v;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "plan: %s must be an int", what);
        return -1;
    }
    v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "plan: %s must be >= 0", what);
        return -1;
    }
    *out = v;
    return 0;
}

static int
as_llong(PyObject *o, long long *out, const char *what)
{
    long long v;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "plan: %s must be an int", what);
        return -1;
    }
    v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

static int
spec_arity(PyObject *t, Py_ssize_t n, const char *kind)
{
    if (PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_ValueError, "plan: a %s spec has %zd items", kind, n);
        return -1;
    }
    return 0;
}

static int spec_init(Spec *s, PyObject *t);

static int
spec_child(Spec **out, PyObject *t)
{
    Spec *c = PyMem_Calloc(1, sizeof(Spec));
    if (c == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *out = c; /* owned by the parent from here, freed by spec_clear */
    return spec_init(c, t);
}

/* Fill ``s`` (zeroed) from a spec tuple ``(kind name, params...)``; see _speedup_spec in
 * codec.py.  On error ``s`` may be partly filled; spec_clear releases it. */
static int
spec_init(Spec *s, PyObject *t)
{
    PyObject *name;
    s->exact = -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {
        PyErr_SetString(PyExc_TypeError, "plan: a spec is a tuple (kind, params...)");
        return -1;
    }
    name = PyTuple_GET_ITEM(t, 0);
    if (PyUnicode_CompareWithASCIIString(name, "text") == 0) {
        PyObject *names;
        s->kind = K_TEXT;
        if (spec_arity(t, 4, "text") < 0 ||
            as_ssize(PyTuple_GET_ITEM(t, 1), &s->max_bytes, "max_bytes") < 0) {
            return -1;
        }
        s->check = PyLong_Check(PyTuple_GET_ITEM(t, 2)) ? (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 2))
                                                         : -1;
        if (s->check != CHECK_NONE && s->check != CHECK_URI && s->check != CHECK_DECIMAL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "plan: unknown text check");
            }
            return -1;
        }
        names = PyTuple_GET_ITEM(t, 3);
        if (s->check == CHECK_URI) {
            Py_ssize_t i;
            if (!PyTuple_Check(names)) {
                PyErr_SetString(PyExc_TypeError, "plan: URI type names must be a tuple");
                return -1;
            }
            for (i = 0; i < PyTuple_GET_SIZE(names); i++) {
                if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
                    PyErr_SetString(PyExc_TypeError, "plan: URI type names must be bytes");
                    return -1;
                }
            }
            Py_INCREF(names);
            s->names = names;
        }
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(name, "bytes") == 0) {
        s->kind = K_BYTES;
        if (spec_arity(t, 3, "bytes") < 0 ||
            as_ssize(PyTuple_GET_ITEM(t, 1), &s->max_bytes, "max_len") < 0) {
            return -1;
        }
        if (PyTuple_GET_ITEM(t, 2) != Py_None &&
            as_ssize(PyTuple_GET_ITEM(t, 2), &s->exact, "exact") < 0) {
            return -1;
        }
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(name, "int") == 0 ||
        PyUnicode_CompareWithASCIIString(name, "time") == 0 ||
        PyUnicode_CompareWithASCIIString(name, "pair") == 0) {
        s->kind = PyUnicode_CompareWithASCIIString(name, "int") == 0    ? K_INT
                  : PyUnicode_CompareWithASCIIString(name, "time") == 0 ? K_TIME
                                                                        : K_PAIR;
        if (spec_arity(t, 3, "range") < 0 || as_llong(PyTuple_GET_ITEM(t, 1), &s->lo, "lo") < 0 ||
            as_llong(PyTuple_GET_ITEM(t, 2), &s->hi, "hi") < 0) {
            return -1;
        }
        if (s->lo > s->hi) {
            PyErr_SetString(PyExc_ValueError, "plan: empty range");
            return -1;
        }
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(name, "unit") == 0) {
        s->kind = K_UNIT;
        return spec_arity(t, 1, "unit");
    }
    if (PyUnicode_CompareWithASCIIString(name, "bool") == 0) {
        s->kind = K_BOOL;
        return spec_arity(t, 1, "bool");
    }
    if (PyUnicode_CompareWithASCIIString(name, "enum") == 0) {
        PyObject *d, *k, *v;
        Py_ssize_t pos = 0;
        s->kind = K_ENUM;
        if (PyTuple_GET_SIZE(t) == 3) { /* ("enum", members, labels) */
            if (!PyDict_CheckExact(PyTuple_GET_ITEM(t, 2))) {
                PyErr_SetString(PyExc_TypeError, "plan: enum labels must be a dict");
                return -1;
            }
            Py_INCREF(PyTuple_GET_ITEM(t, 2));
            s->labels = PyTuple_GET_ITEM(t, 2);
        }
        else if (spec_arity(t, 2, "enum") < 0) {
            return -1;
        }
        d = PyTuple_GET_ITEM(t, 1);
        if (!PyDict_Check(d)) {
            PyErr_SetString(PyExc_TypeError, "plan: enum members must be a dict");
            return -1;
        }
        s->n_members = 256; /* codes are one-byte unsigned integers */
        s->members = PyMem_Calloc((size_t)s->n_members, sizeof(PyObject *));
        if (s->members == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        while (PyDict_Next(d, &pos, &k, &v)) {
            Py_ssize_t code;
            if (as_ssize(k, &code, "enum code") < 0) {
                return -1;
            }
            if (code >= s->n_members || s->members[code] != NULL) {
                PyErr_SetString(PyExc_ValueError, "plan: enum codes must be distinct, < 256");
                return -1;
            }
            Py_INCREF(v);
            s->members[code] = v;
        }
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(name, "id") == 0) {
        s->kind = K_ID;
        if (spec_arity(t, 2, "id") < 0) {
            return -1;
        }
        if (!PyCallable_Check(PyTuple_GET_ITEM(t, 1))) {
            PyErr_SetString(PyExc_TypeError, "plan: the id factory must be callable");
            return -1;
        }
        Py_INCREF(PyTuple_GET_ITEM(t, 1));
        s->factory = PyTuple_GET_ITEM(t, 1);
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(name, "list") == 0) {
        s->kind = K_LIST;
        if (spec_arity(t, 4, "list") < 0 ||
            as_ssize(PyTuple_GET_ITEM(t, 2), &s->max_items, "max_items") < 0) {
            return -1;
        }
        s->unique = PyObject_IsTrue(PyTuple_GET_ITEM(t, 3));
        if (s->unique < 0) {
            return -1;
        }
        return spec_child(&s->item, PyTuple_GET_ITEM(t, 1));
    }
    if (PyUnicode_CompareWithASCIIString(name, "map") == 0) {
        s->kind = K_MAP;
        if (spec_arity(t, 4, "map") < 0 ||
            as_ssize(PyTuple_GET_ITEM(t, 3), &s->max_items, "max_items") < 0 ||
            spec_child(&s->item, PyTuple_GET_ITEM(t, 1)) < 0 ||
            spec_child(&s->value, PyTuple_GET_ITEM(t, 2)) < 0) {
            return -1;
        }
        if (s->item->kind != K_TEXT) {
            /* key order is checked on the encoded keys, which is right for text keys only */
            PyErr_SetString(PyExc_ValueError, "plan: map keys must be text");
            return -1;
        }
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(name, "record") == 0) {
        s->kind = K_RECORD;
        if (spec_arity(t, 2, "record") < 0) {
            return -1;
        }
        if (!PyObject_TypeCheck(PyTuple_GET_ITEM(t, 1), &Plan_Type)) {
            PyErr_SetString(PyExc_TypeError, "plan: a record spec needs a Plan");
            return -1;
        }
        Py_INCREF(PyTuple_GET_ITEM(t, 1));
        s->plan = PyTuple_GET_ITEM(t, 1);
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "plan: unknown field kind %R", name);
    return -1;
}

static void
Plan_dealloc(PlanObject *self)
{
    Py_ssize_t i;
    if (self->fields != NULL) {
        for (i = 0; i < self->nfields; i++) {
            spec_clear(&self->fields[i].spec);
            Py_XDECREF(self->fields[i].dflt);
            Py_XDECREF(self->fields[i].factory);
        }
        PyMem_Free(self->fields);
    }
    Py_XDECREF(self->cls);
    Py_XDECREF(self->kwnames);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Plan(cls, kwnames, schema_version, fields)
 *   cls: the struct type, called with keyword arguments kwnames
 *   kwnames: tuple of str, every attribute once
 *   schema_version: int (key 0 of a top-level record) or None
 *   fields: tuple of (key, slot, absent_ok, default, default_factory, spec) in key order */
static PyObject *
Plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cls, *kwnames, *sv, *fields;
    PlanObject *self;
    Py_ssize_t i, j, n;
    static char *kwlist[] = {"cls", "kwnames", "schema_version", "fields", NULL};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OO!:Plan", kwlist, &cls, &PyTuple_Type,
                                     &kwnames, &sv, &PyTuple_Type, &fields)) {
        return NULL;
    }
    if (!PyCallable_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "plan: cls must be callable");
        return NULL;
    }
    n = PyTuple_GET_SIZE(fields);
    if (n > MAX_FIELDS || PyTuple_GET_SIZE(kwnames) != n) {
        PyErr_SetString(PyExc_ValueError, "plan: too many fields, or kwnames do not match");
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, i))) {
            PyErr_SetString(PyExc_TypeError, "plan: kwnames must be str");
            return NULL;
        }
    }
    self = (PlanObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(cls);
    self->cls = cls;
    Py_INCREF(kwnames);
    self->kwnames = kwnames;
    if (sv != Py_None) {
        long long v;
        if (as_llong(sv, &v, "schema_version") < 0 || v < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "plan: schema_version must be >= 0");
            }
            goto fail;
        }
        self->has_sv = 1;
        self->sv = (unsigned long long)v;
    }
    self->fields = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(Field));
    if (self->fields == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    self->nfields = n;
    for (i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(fields, i);
        Field *f = &self->fields[i];
        Py_ssize_t key;
        int ok;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6) {
            PyErr_SetString(PyExc_TypeError,
                            "plan: a field is (key, slot, absent_ok, default, factory, spec)");
            goto fail;
        }
        if (as_ssize(PyTuple_GET_ITEM(t, 0), &key, "key") < 0 ||
            as_ssize(PyTuple_GET_ITEM(t, 1), &f->slot, "slot") < 0) {
            goto fail;
        }
        f->key = (unsigned long long)key;
        if (key == 0 || (i > 0 && f->key <= self->fields[i - 1].key) || f->slot >= n) {
            PyErr_SetString(PyExc_ValueError, "plan: keys must increase from 1; slots < n");
            goto fail;
        }
        for (j = 0; j < i; j++) {
            if (self->fields[j].slot == f->slot) {
                PyErr_SetString(PyExc_ValueError, "plan: two fields share a slot");
                goto fail;
            }
        }
        ok = PyObject_IsTrue(PyTuple_GET_ITEM(t, 2));
        if (ok < 0) {
            goto fail;
        }
        f->absent_ok = ok;
        Py_INCREF(PyTuple_GET_ITEM(t, 3));
        f->dflt = PyTuple_GET_ITEM(t, 3);
        if (PyTuple_GET_ITEM(t, 4) != Py_None) {
            if (!PyCallable_Check(PyTuple_GET_ITEM(t, 4))) {
                PyErr_SetString(PyExc_TypeError, "plan: default_factory must be callable");
                goto fail;
            }
            Py_INCREF(PyTuple_GET_ITEM(t, 4));
            f->factory = PyTuple_GET_ITEM(t, 4);
        }
        if (spec_init(&f->spec, PyTuple_GET_ITEM(t, 5)) < 0) {
            goto fail;
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyTypeObject Plan_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cortex._speedups.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)Plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Plan(cls, kwnames, schema_version, fields): how to decode one record struct.",
    .tp_new = Plan_new,
};

/* ------------------------------------------------------------------------------------------ */
/* Reading */

typedef struct {
    const uint8_t *b;
    Py_ssize_t len;
    Py_ssize_t pos;
} Reader;

static int
reject(const Reader *r, const char *why)
{
    PyErr_Format(Reject, "%s at offset %zd", why, r->pos);
    return -1;
}

static PyObject *
reject_null(const Reader *r, const char *why)
{
    reject(r, why);
    return NULL;
}

/* The argument of the head at r->pos: definite, shortest.  Major type 7 is not read here. */
static int
read_head(Reader *r, int *major, uint64_t *arg)
{
    uint8_t ib, info;
    Py_ssize_t size, i;
    uint64_t v = 0;
    if (r->pos >= r->len) {
        return reject(r, "truncated");
    }
    ib = r->b[r->pos];
    *major = ib >> 5;
    info = ib & 31;
    if (*major == 7) {
        return reject(r, "unexpected simple value or float");
    }
    if (info < 24) {
        *arg = info;
        r->pos += 1;
        return 0;
    }
    if (info > 27) {
        return reject(r, "indefinite length or reserved head");
    }
    size = (Py_ssize_t)1 << (info - 24);
    if (r->len - r->pos - 1 < size) {
        return reject(r, "truncated head");
    }
    for (i = 0; i < size; i++) {
        v = (v << 8) | r->b[r->pos + 1 + i];
    }
    /* shortest form: each width is used only for values the next smaller one cannot hold */
    if ((size == 1 && v < 24) || (size == 2 && v <= 0xFF) || (size == 4 && v <= 0xFFFF) ||
        (size == 8 && v <= 0xFFFFFFFFu)) {
        return reject(r, "non-shortest head");
    }
    *arg = v;
    r->pos += 1 + size;
    return 0;
}

static int
expect(Reader *r, int want, uint64_t *arg)
{
    int major;
    Py_ssize_t at = r->pos;
    if (read_head(r, &major, arg) < 0) {
        return -1;
    }
    if (major != want) {
        r->pos = at;
        return reject(r, "unexpected major type");
    }
    return 0;
}

/* A definite-length string body of ``n`` bytes at r->pos. */
static int
take(Reader *r, uint64_t n, const uint8_t **p)
{
    if (n > (uint64_t)(r->len - r->pos)) {
        return reject(r, "truncated string");
    }
    *p = r->b + r->pos;
    r->pos += (Py_ssize_t)n;
    return 0;
}

/* An integer (major 0 or 1) within [lo, hi]. */
static int
read_int(Reader *r, long long lo, long long hi, long long *out)
{
    int major;
    uint64_t a;
    long long v;
    Py_ssize_t at = r->pos;
    if (read_head(r, &major, &a) < 0) {
        return -1;
    }
    if (major == 0) {
        if (a > (uint64_t)LLONG_MAX) {
            r->pos = at;
            return reject(r, "integer out of range");
        }
        v = (long long)a;
    }
    else if (major == 1) {
        if (a > (uint64_t)LLONG_MAX) {
            r->pos = at;
            return reject(r, "integer out of range");
        }
        v = -1 - (long long)a; /* >= LLONG_MIN */
    }
    else {
        r->pos = at;
        return reject(r, "expected an integer");
    }
    if (v < lo || v > hi) {
        r->pos = at;
        return reject(r, "integer out of range");
    }
    *out = v;
    return 0;
}

/* Exactly representable as IEEE binary16?  ``x`` is finite and non-negative. */
static int
fits_half(double x)
{
    double m;
    uint64_t u;
    if (x > 65504.0) {
        return 0;
    }
    m = ldexp(x, 24); /* exact: a power-of-two scaling of a value far from overflow */
    if (m != floor(m)) {
        return 0; /* finer than the smallest subnormal, 2^-24 */
    }
    u = (uint64_t)m;
    if (u == 0) {
        return 1;
    }
    while ((u & 1) == 0) {
        u >>= 1;
    }
    return u < 2048; /* at most 11 significant bits */
}

/* A float in [0, 1], in the shortest width that keeps it; -0.0 is not canonical (the encoder
 * writes 0.0 for it). */
static int
read_unit(Reader *r, double *out)
{
    uint8_t ib;
    double x;
    Py_ssize_t at = r->pos;
    if (r->pos >= r->len) {
        return reject(r, "truncated");
    }
    ib = r->b[r->pos];
    if (ib == 0xF9) {
        uint16_t h;
        int e, m;
        if (r->len - r->pos < 3) {
            return reject(r, "truncated float");
        }
        h = (uint16_t)((r->b[r->pos + 1] << 8) | r->b[r->pos + 2]);
        if (h & 0x8000) {
            return reject(r, "negative float");
        }
        e = (h >> 10) & 0x1F;
        m = h & 0x3FF;
        if (e == 31) {
            return reject(r, "NaN or infinity");
        }
        x = e == 0 ? ldexp((double)m, -24) : ldexp((double)(m + 1024), e - 25);
        r->pos += 3;
    }
    else if (ib == 0xFA) {
        uint32_t u;
        float f;
        if (r->len - r->pos < 5) {
            return reject(r, "truncated float");
        }
        u = ((uint32_t)r->b[r->pos + 1] << 24) | ((uint32_t)r->b[r->pos + 2] << 16) |
            ((uint32_t)r->b[r->pos + 3] << 8) | (uint32_t)r->b[r->pos + 4];
        if (u & 0x80000000u) {
            return reject(r, "negative float");
        }
        if ((u & 0x7F800000u) == 0x7F800000u) {
            return reject(r, "NaN or infinity");
        }
        memcpy(&f, &u, sizeof f);
        x = (double)f;
        if (x > 1.0) {
            return reject(r, "float out of range");
        }
        if (fits_half(x)) {
            return reject(r, "float not in its shortest form");
        }
        r->pos += 5;
    }
    else if (ib == 0xFB) {
        uint64_t u = 0;
        int i;
        if (r->len - r->pos < 9) {
            return reject(r, "truncated float");
        }
        for (i = 1; i <= 8; i++) {
            u = (u << 8) | r->b[r->pos + i];
        }
        if (u & 0x8000000000000000ull) {
            return reject(r, "negative float");
        }
        if ((u & 0x7FF0000000000000ull) == 0x7FF0000000000000ull) {
            return reject(r, "NaN or infinity");
        }
        memcpy(&x, &u, sizeof x);
        if (x > 1.0) {
            return reject(r, "float out of range");
        }
        if ((double)(float)x == x) { /* in range for float: 0 <= x <= 1 */
            return reject(r, "float not in its shortest form");
        }
        r->pos += 9;
    }
    else {
        return reject(r, "expected a float");
    }
    if (!(x >= 0.0 && x <= 1.0)) {
        r->pos = at;
        return reject(r, "float out of range");
    }
    *out = x;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Text rules: the checks of _check_uri and _check_decimal, on ASCII bytes */

static int
is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static int
is_crockford(uint8_t c)
{
    /* [0-9A-HJKMNP-TV-Z] */
    return is_digit(c) || (c >= 'A' && c <= 'H') || c == 'J' || c == 'K' || c == 'M' ||
           c == 'N' || (c >= 'P' && c <= 'T') || (c >= 'V' && c <= 'Z');
}

/* cortex://<TypeName>/<ULID>#<version>, version 1..2^63-1 without leading zeros */
static int
uri_ok(const uint8_t *s, Py_ssize_t n, PyObject *names)
{
    static const char prefix[] = "cortex://";
    static const char vmax[] = "9223372036854775807";
    const Py_ssize_t plen = (Py_ssize_t)sizeof prefix - 1;
    Py_ssize_t i, j, k, vlen;
    if (n < plen || memcmp(s, prefix, (size_t)plen) != 0) {
        return 0;
    }
    i = plen;
    for (k = 0; k < PyTuple_GET_SIZE(names); k++) {
        PyObject *nm = PyTuple_GET_ITEM(names, k);
        Py_ssize_t len = PyBytes_GET_SIZE(nm);
        if (n - i > len && memcmp(s + i, PyBytes_AS_STRING(nm), (size_t)len) == 0 &&
            s[i + len] == '/') {
            break;
        }
    }
    if (k == PyTuple_GET_SIZE(names)) {
        return 0;
    }
    i += PyBytes_GET_SIZE(PyTuple_GET_ITEM(names, k)) + 1;
    /* [0-7][0-9A-HJKMNP-TV-Z]{25}# */
    if (n - i < 27 || s[i] < '0' || s[i] > '7') {
        return 0;
    }
    for (j = 1; j < 26; j++) {
        if (!is_crockford(s[i + j])) {
            return 0;
        }
    }
    if (s[i + 26] != '#') {
        return 0;
    }
    i += 27;
    vlen = n - i;
    if (vlen < 1 || vlen > 19 || s[i] < '1' || s[i] > '9') {
        return 0;
    }
    for (j = i; j < n; j++) {
        if (!is_digit(s[j])) {
            return 0;
        }
    }
    return vlen < 19 || memcmp(s + i, vmax, 19) <= 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]*[1-9])? and not "-0" */
static int
decimal_ok(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0, start;
    if (i < n && s[i] == '-') {
        i++;
    }
    start = i;
    if (i >= n) {
        return 0;
    }
    if (s[i] == '0') {
        i++;
    }
    else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && is_digit(s[i])) {
            i++;
        }
    }
    else {
        return 0;
    }
    if (i == n) {
        return !(start == 1 && n == 2 && s[1] == '0'); /* "-0" */
    }
    if (s[i] != '.') {
        return 0;
    }
    i++;
    if (i >= n) {
        return 0;
    }
    for (; i < n; i++) {
        if (!is_digit(s[i])) {
            return 0;
        }
    }
    return s[n - 1] != '0';
}

/* ------------------------------------------------------------------------------------------ */
/* Values */

static PyObject *decode_record(PlanObject *pl, Reader *r, int depth);

/* Whether str is NFC by its characters alone: each below U+0300 (NFC_QC=Yes, combining class
 * 0), or U+2014 EM DASH or U+2026 HORIZONTAL ELLIPSIS (the separator of a medium form and the
 * mark of a cut one: NFC_QC=Yes, combining class 0, in no canonical composition).  A string of
 * characters that are all NFC_QC=Yes with class 0 is NFC. */
static int
plainly_nfc(PyObject *str)
{
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    Py_ssize_t i, n = PyUnicode_GET_LENGTH(str);
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x300 && c != 0x2014 && c != 0x2026) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
read_text(const Spec *s, Reader *r)
{
    uint64_t n;
    const uint8_t *p;
    PyObject *str;
    Py_ssize_t at = r->pos;
    if (expect(r, 3, &n) < 0) {
        return NULL;
    }
    if (n == 0) {
        r->pos = at;
        return reject_null(r, "empty text");
    }
    if (n > (uint64_t)s->max_bytes) {
        r->pos = at;
        return reject_null(r, "text too long");
    }
    if (take(r, n, &p) < 0) {
        return NULL;
    }
    if (s->check == CHECK_URI && !uri_ok(p, (Py_ssize_t)n, s->names)) {
        r->pos = at;
        return reject_null(r, "not a version URI");
    }
    if (s->check == CHECK_DECIMAL && !decimal_ok(p, (Py_ssize_t)n)) {
        r->pos = at;
        return reject_null(r, "not a decimal");
    }
    str = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, NULL);
    if (str == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            r->pos = at;
            return reject_null(r, "invalid UTF-8");
        }
        return NULL;
    }
    /* Every character below U+0300 is NFC_QC=Yes with combining class 0, so text of one-byte
     * kind (ASCII and Latin-1) is NFC; so is text of those and the forms' punctuation
     * (plainly_nfc); anything else asks unicodedata. */
    if (PyUnicode_KIND(str) != PyUnicode_1BYTE_KIND && !plainly_nfc(str)) {
        PyObject *args[2] = {str_NFC, str};
        PyObject *ok = PyObject_Vectorcall(is_normalized, args, 2, NULL);
        int nfc;
        if (ok == NULL) {
            Py_DECREF(str);
            return NULL;
        }
        nfc = ok == Py_True;
        Py_DECREF(ok);
        if (!nfc) {
            Py_DECREF(str);
            r->pos = at;
            return reject_null(r, "text is not NFC");
        }
    }
    return str;
}

static PyObject *
read_bytes(const Spec *s, Reader *r)
{
    uint64_t n;
    const uint8_t *p;
    Py_ssize_t at = r->pos;
    if (expect(r, 2, &n) < 0) {
        return NULL;
    }
    if ((s->exact >= 0 && n != (uint64_t)s->exact) || n > (uint64_t)s->max_bytes ||
        (s->exact < 0 && n == 0)) {
        r->pos = at;
        return reject_null(r, "bytes of the wrong length");
    }
    if (take(r, n, &p) < 0) {
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

static long long
floor_div(long long a, long long b, long long *rem)
{
    long long q = a / b, m = a % b;
    if (m < 0) {
        m += b;
        q -= 1;
    }
    *rem = m;
    return q;
}

/* Howard Hinnant's days_from_civil inverse: proleptic Gregorian date of day z (0 = 1970-01-01). */
static void
civil_from_days(long long z, int *y, int *m, int *d)
{
    long long era, yy;
    unsigned doe, yoe, doy, mp;
    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = (unsigned)(z - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    yy = (long long)yoe + era * 400;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yy + (*m <= 2));
}

/* Integer microseconds since the epoch -> aware UTC datetime (equal to _EPOCH + timedelta). */
static PyObject *
read_time(const Spec *s, Reader *r)
{
    long long us, rem, days;
    int y, mo, d;
    if (read_int(r, s->lo, s->hi, &us) < 0) {
        return NULL;
    }
    days = floor_div(us, 86400000000LL, &rem);
    civil_from_days(days, &y, &mo, &d);
    if (y < 1 || y > 9999) {
        return reject_null(r, "time out of range");
    }
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        y, mo, d, (int)(rem / 3600000000LL), (int)(rem / 60000000LL % 60),
        (int)(rem / 1000000LL % 60), (int)(rem % 1000000LL), PyDateTime_TimeZone_UTC,
        PyDateTimeAPI->DateTimeType);
}

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Span;

static int
span_cmp(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    Py_ssize_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, (size_t)n);
    if (c != 0) {
        return c;
    }
    return x->n < y->n ? -1 : x->n > y->n;
}

static PyObject *decode_value(const Spec *s, Reader *r, int depth);

static PyObject *
read_list(const Spec *s, Reader *r, int depth)
{
    uint64_t n;
    Py_ssize_t i, at = r->pos;
    PyObject *out;
    Span stack_spans[STACK_SPANS];
    Span *spans = NULL;
    if (expect(r, 4, &n) < 0) {
        return NULL;
    }
    if (n > (uint64_t)s->max_items || n > (uint64_t)(r->len - r->pos)) {
        r->pos = at;
        return reject_null(r, "too many items");
    }
    if (s->unique && n > 1) {
        spans = n <= STACK_SPANS ? stack_spans : PyMem_Malloc((size_t)n * sizeof(Span));
        if (spans == NULL) {
            return PyErr_NoMemory();
        }
    }
    out = PyTuple_New((Py_ssize_t)n);
    if (out == NULL) {
        goto fail;
    }
    for (i = 0; i < (Py_ssize_t)n; i++) {
        Py_ssize_t start = r->pos;
        PyObject *v = decode_value(s->item, r, depth + 1);
        if (v == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(out, i, v);
        if (spans != NULL) {
            spans[i].p = r->b + start;
            spans[i].n = r->pos - start;
        }
    }
    if (spans != NULL) {
        qsort(spans, (size_t)n, sizeof(Span), span_cmp);
        for (i = 1; i < (Py_ssize_t)n; i++) {
            if (span_cmp(&spans[i - 1], &spans[i]) == 0) {
                r->pos = at;
                reject(r, "duplicate list item");
                goto fail;
            }
        }
        if (spans != stack_spans) {
            PyMem_Free(spans);
        }
    }
    return out;
fail:
    Py_XDECREF(out);
    if (spans != NULL && spans != stack_spans) {
        PyMem_Free(spans);
    }
    return NULL;
}

static PyObject *
read_map(const Spec *s, Reader *r, int depth)
{
    uint64_t n, i;
    Py_ssize_t at = r->pos;
    Span prev = {NULL, 0};
    PyObject *out;
    if (expect(r, 5, &n) < 0) {
        return NULL;
    }
    if (n > (uint64_t)s->max_items || n > (uint64_t)(r->len - r->pos) / 2) {
        r->pos = at;
        return reject_null(r, "too many entries");
    }
    out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        Py_ssize_t start = r->pos;
        Span cur;
        PyObject *k, *v;
        int rc;
        k = decode_value(s->item, r, depth + 1);
        if (k == NULL) {
            goto fail;
        }
        cur.p = r->b + start;
        cur.n = r->pos - start;
        if (i > 0 && span_cmp(&prev, &cur) >= 0) {
            Py_DECREF(k);
            r->pos = start;
            reject(r, "map keys out of order or repeated");
            goto fail;
        }
        prev = cur;
        v = decode_value(s->value, r, depth + 1);
        if (v == NULL) {
            Py_DECREF(k);
            goto fail;
        }
        rc = PyDict_SetItem(out, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (rc < 0) {
            goto fail;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *
read_pair(const Spec *s, Reader *r)
{
    uint64_t n;
    long long a, b;
    Py_ssize_t at = r->pos;
    PyObject *pa, *pb, *out;
    if (expect(r, 4, &n) < 0) {
        return NULL;
    }
    if (n != 2) {
        r->pos = at;
        return reject_null(r, "a pair has two items");
    }
    if (read_int(r, s->lo, s->hi, &a) < 0 || read_int(r, s->lo, s->hi, &b) < 0) {
        return NULL;
    }
    if (a > b) {
        r->pos = at;
        return reject_null(r, "pair start after end");
    }
    pa = PyLong_FromLongLong(a);
    if (pa == NULL) {
        return NULL;
    }
    pb = PyLong_FromLongLong(b);
    if (pb == NULL) {
        Py_DECREF(pa);
        return NULL;
    }
    out = PyTuple_Pack(2, pa, pb); /* takes its own references */
    Py_DECREF(pa);
    Py_DECREF(pb);
    return out;
}

static PyObject *
decode_value(const Spec *s, Reader *r, int depth)
{
    if (depth > MAX_DEPTH) {
        return reject_null(r, "nested too deeply");
    }
    switch (s->kind) {
    case K_TEXT:
        return read_text(s, r);
    case K_BYTES:
        return read_bytes(s, r);
    case K_INT: {
        long long v;
        if (read_int(r, s->lo, s->hi, &v) < 0) {
            return NULL;
        }
        return PyLong_FromLongLong(v);
    }
    case K_UNIT: {
        double x;
        if (read_unit(r, &x) < 0) {
            return NULL;
        }
        return PyFloat_FromDouble(x);
    }
    case K_BOOL:
        if (r->pos < r->len && r->b[r->pos] == 0xF5) {
            r->pos += 1;
            Py_RETURN_TRUE;
        }
        if (r->pos < r->len && r->b[r->pos] == 0xF4) {
            r->pos += 1;
            Py_RETURN_FALSE;
        }
        return reject_null(r, "expected a boolean");
    case K_TIME:
        return read_time(s, r);
    case K_ENUM: {
        long long code;
        Py_ssize_t at = r->pos;
        PyObject *m;
        if (read_int(r, 0, s->n_members - 1, &code) < 0) {
            return NULL;
        }
        m = s->members[code];
        if (m == NULL) {
            r->pos = at;
            return reject_null(r, "unknown enum code");
        }
        Py_INCREF(m);
        return m;
    }
    case K_ID: {
        uint64_t n;
        const uint8_t *p;
        PyObject *raw, *id;
        Py_ssize_t at = r->pos;
        if (expect(r, 2, &n) < 0) {
            return NULL;
        }
        if (n != 16) {
            r->pos = at;
            return reject_null(r, "an id is 16 bytes");
        }
        if (take(r, n, &p) < 0) {
            return NULL;
        }
        raw = PyBytes_FromStringAndSize((const char *)p, 16);
        if (raw == NULL) {
            return NULL;
        }
        id = PyObject_CallOneArg(s->factory, raw);
        Py_DECREF(raw);
        return id;
    }
    case K_LIST:
        return read_list(s, r, depth);
    case K_PAIR:
        return read_pair(s, r);
    case K_MAP:
        return read_map(s, r, depth);
    case K_RECORD:
        return decode_record((PlanObject *)s->plan, r, depth);
    default:
        PyErr_SetString(PyExc_SystemError, "cortex._speedups: bad plan");
        return NULL;
    }
}

/* What the encoder leaves out of its map: such a value must not be present. */
static int
omitted(const Spec *s, PyObject *v)
{
    switch (s->kind) {
    case K_LIST:
        return PyTuple_GET_SIZE(v) == 0;
    case K_MAP:
        return PyDict_GET_SIZE(v) == 0;
    case K_BOOL:
        return v == Py_False;
    default:
        return 0;
    }
}

static PyObject *
decode_record(PlanObject *pl, Reader *r, int depth)
{
    PyObject *vals[MAX_FIELDS];
    uint64_t n, i = 0, key, prev = 0;
    Py_ssize_t fi = 0, j, at = r->pos;
    PyObject *out = NULL;
    const Py_ssize_t nf = pl->nfields;

    if (depth > MAX_DEPTH) {
        return reject_null(r, "nested too deeply");
    }
    if (expect(r, 5, &n) < 0) {
        return NULL;
    }
    if (n > (uint64_t)(r->len - r->pos) / 2) {
        r->pos = at;
        return reject_null(r, "truncated map");
    }
    for (j = 0; j < nf; j++) {
        vals[j] = NULL;
    }
    if (pl->has_sv) {
        long long sv;
        if (n == 0) {
            return reject_null(r, "no schema version");
        }
        if (r->pos >= r->len || r->b[r->pos] != 0x00) {
            return reject_null(r, "no schema version");
        }
        r->pos += 1;
        if (read_int(r, 0, LLONG_MAX, &sv) < 0) {
            return NULL;
        }
        if ((unsigned long long)sv != pl->sv) {
            return reject_null(r, "wrong schema version");
        }
        i = 1;
    }
    for (; i < n; i++) {
        const Field *f;
        PyObject *v;
        Py_ssize_t kat = r->pos;
        if (expect(r, 0, &key) < 0) {
            goto fail;
        }
        if (i > 0 && key <= prev) { /* with a schema version, prev is its key 0 */
            r->pos = kat;
            reject(r, "record keys out of order or repeated");
            goto fail;
        }
        prev = key;
        while (fi < nf && pl->fields[fi].key < key) {
            fi++;
        }
        if (fi == nf || pl->fields[fi].key != key) {
            r->pos = kat;
            reject(r, "unknown record key");
            goto fail;
        }
        f = &pl->fields[fi];
        v = decode_value(&f->spec, r, depth + 1);
        if (v == NULL) {
            goto fail;
        }
        vals[f->slot] = v;
        if (omitted(&f->spec, v)) {
            r->pos = kat;
            reject(r, "value the encoder omits is present");
            goto fail;
        }
        fi++;
    }
    for (fi = 0; fi < nf; fi++) {
        const Field *f = &pl->fields[fi];
        if (vals[f->slot] != NULL) {
            continue;
        }
        if (!f->absent_ok) {
            r->pos = at;
            reject(r, "record lacks a field its encoding always has");
            goto fail;
        }
        if (f->factory != NULL) {
            vals[f->slot] = PyObject_CallNoArgs(f->factory);
            if (vals[f->slot] == NULL) {
                goto fail;
            }
        }
        else {
            Py_INCREF(f->dflt);
            vals[f->slot] = f->dflt;
        }
    }
    out = PyObject_Vectorcall(pl->cls, vals, 0, pl->kwnames);
fail:
    for (j = 0; j < nf; j++) {
        Py_XDECREF(vals[j]);
    }
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Module */

PyDoc_STRVAR(decode_doc,
             "decode(plan, data, /)\n--\n\n"
             "Decode canonical CBOR ``data`` into the record ``plan`` describes; raise Reject "
             "on anything else.");

static PyObject *
sp_decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Reader r;
    PyObject *out;
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode(plan, data) takes two arguments");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &Plan_Type)) {
        PyErr_SetString(PyExc_TypeError, "decode: the first argument must be a Plan");
        return NULL;
    }
    if (PyBytes_CheckExact(args[1])) {
        r.b = (const uint8_t *)PyBytes_AS_STRING(args[1]);
        r.len = PyBytes_GET_SIZE(args[1]);
        r.pos = 0;
        out = decode_record((PlanObject *)args[0], &r, 0);
        if (out != NULL && r.pos != r.len) {
            Py_DECREF(out);
            return reject_null(&r, "trailing bytes");
        }
        return out;
    }
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_SetString(Reject, "not a contiguous bytes-like object");
        return NULL;
    }
    /* the exported buffer cannot be resized while we hold it */
    r.b = (const uint8_t *)view.buf;
    r.len = view.len;
    r.pos = 0;
    out = decode_record((PlanObject *)args[0], &r, 0);
    if (out != NULL && r.pos != r.len) {
        Py_CLEAR(out);
        reject(&r, "trailing bytes");
    }
    PyBuffer_Release(&view);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* The lexical index's hot loops (cortex/text.py, cortex/lexical.py keep the definitions: these
 * return exactly what the pure-Python paths return, or None where they do not apply). */

#define MAX_TOKEN_CHARS 64 /* cortex.text.MAX_TOKEN_CHARS */

PyDoc_STRVAR(ascii_tokens_doc,
             "ascii_tokens(text, /)\n--\n\n"
             "``tokenize(text)`` for ASCII text: the maximal runs of ASCII letters and digits, "
             "lower-cased, each cut to 64 characters; None when ``text`` is not ASCII.");

/* The next token of the ASCII text s[0..n) at or after *pos: its lower-cased first
 * MAX_TOKEN_CHARS characters are written to buf; returns their count (0: no token is left) and
 * moves *pos past the token.  The tokenizer of ``ascii_tokens`` and ``ascii_term_counts``. */
static Py_ssize_t
next_ascii_token(const Py_UCS1 *s, Py_ssize_t n, Py_ssize_t *pos, char *buf)
{
    Py_ssize_t i = *pos;
    while (i < n) {
        Py_ssize_t len = 0;
        while (i < n) {
            Py_UCS1 c = s[i];
            if (c >= 'A' && c <= 'Z') {
                c = (Py_UCS1)(c + ('a' - 'A'));
            }
            else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
                break;
            }
            if (len < MAX_TOKEN_CHARS) {
                buf[len] = (char)c;
            }
            len++;
            i++;
        }
        if (len > 0) {
            *pos = i;
            return len < MAX_TOKEN_CHARS ? len : MAX_TOKEN_CHARS;
        }
        i++; /* a separator */
    }
    *pos = i;
    return 0;
}

static PyObject *
sp_ascii_tokens(PyObject *module, PyObject *text)
{
    const Py_UCS1 *s;
    Py_ssize_t n, i = 0, len;
    PyObject *out, *tok;
    char buf[MAX_TOKEN_CHARS];
    (void)module;
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "ascii_tokens: text must be a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) {
        Py_RETURN_NONE;
    }
    s = PyUnicode_1BYTE_DATA(text);
    n = PyUnicode_GET_LENGTH(text);
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    while ((len = next_ascii_token(s, n, &i, buf)) > 0) {
        tok = PyUnicode_FromStringAndSize(buf, len);
        if (tok == NULL || PyList_Append(out, tok) < 0) {
            Py_XDECREF(tok);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(tok);
    }
    return out;
}

PyDoc_STRVAR(count_terms_doc,
             "count_terms(terms, /)\n--\n\n"
             "The distinct terms of the list ``terms`` in code point order and how often each "
             "occurs: ``(distinct, counts)``; None when an item is not a non-empty str without "
             "U+0000.");

static PyObject *
sp_count_terms(PyObject *module, PyObject *terms)
{
    PyObject *sorted, *distinct = NULL, *counts = NULL, *prev = NULL, *res = NULL;
    Py_ssize_t n, i, run = 0;
    (void)module;
    if (!PyList_CheckExact(terms)) {
        PyErr_SetString(PyExc_TypeError, "count_terms: terms must be a list");
        return NULL;
    }
    n = PyList_GET_SIZE(terms);
    for (i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(terms, i);
        Py_ssize_t len;
        if (!PyUnicode_CheckExact(t)) {
            Py_RETURN_NONE;
        }
        len = PyUnicode_GET_LENGTH(t);
        if (len == 0 || PyUnicode_FindChar(t, 0, 0, len, 1) != -1) {
            Py_RETURN_NONE;
        }
    }
    sorted = PyList_GetSlice(terms, 0, n);
    if (sorted == NULL) {
        return NULL;
    }
    /* exact str items only: the sort compares code points and cannot fail */
    if (PyList_Sort(sorted) < 0) {
        goto done;
    }
    distinct = PyList_New(0);
    counts = PyList_New(0);
    if (distinct == NULL || counts == NULL) {
        goto done;
    }
    for (i = 0; i <= n; i++) {
        PyObject *t = i < n ? PyList_GET_ITEM(sorted, i) : NULL;
        if (t != NULL && prev != NULL) {
            int eq = PyUnicode_Compare(t, prev) == 0;
            if (eq) {
                run++;
                continue;
            }
        }
        if (prev != NULL) {
            PyObject *c = PyLong_FromSsize_t(run);
            if (c == NULL || PyList_Append(distinct, prev) < 0 || PyList_Append(counts, c) < 0) {
                Py_XDECREF(c);
                goto done;
            }
            Py_DECREF(c);
        }
        prev = t;
        run = 1;
    }
    res = PyTuple_Pack(2, distinct, counts);
done:
    Py_DECREF(sorted);
    Py_XDECREF(distinct);
    Py_XDECREF(counts);
    return res;
}

PyDoc_STRVAR(encode_ascii_texts_doc,
             "encode_ascii_texts(items, max_chars, /)\n--\n\n"
             "The canonical CBOR array of the text strings ``items`` (a list or tuple) when every "
             "item is a str of 1..max_chars ASCII characters (max_chars <= 255); else None.");

static PyObject *
sp_encode_ascii_texts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *items, *seq, *out;
    Py_ssize_t n, i, size, max_chars;
    size_t head_len;
    uint64_t count;
    char *p;
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_ascii_texts(items, max_chars) takes two arguments");
        return NULL;
    }
    items = args[0];
    max_chars = PyLong_AsSsize_t(args[1]);
    if (max_chars == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (max_chars < 1 || max_chars > 255) {
        PyErr_SetString(PyExc_ValueError, "encode_ascii_texts: max_chars must be 1..255");
        return NULL;
    }
    if (!PyList_CheckExact(items) && !PyTuple_CheckExact(items)) {
        Py_RETURN_NONE;
    }
    seq = items;
    n = PySequence_Fast_GET_SIZE(seq);
    size = 0;
    for (i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len;
        if (!PyUnicode_CheckExact(t) || !PyUnicode_IS_ASCII(t)) {
            Py_RETURN_NONE;
        }
        len = PyUnicode_GET_LENGTH(t);
        if (len < 1 || len > max_chars) {
            Py_RETURN_NONE;
        }
        size += (len < 24 ? 1 : 2) + len;
    }
    count = (uint64_t)n;
    head_len = count < 24 ? 1 : count < 0x100 ? 2 : count < 0x10000 ? 3 : count < 0x100000000ULL ? 5 : 9;
    out = PyBytes_FromStringAndSize(NULL, size + (Py_ssize_t)head_len);
    if (out == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(out);
    if (head_len == 1) {
        *p++ = (char)(0x80 | count);
    }
    else {
        size_t w = head_len - 1, k;
        *p++ = (char)(w == 1 ? 0x98 : w == 2 ? 0x99 : w == 4 ? 0x9a : 0x9b);
        for (k = 0; k < w; k++) {
            *p++ = (char)(count >> (8 * (w - 1 - k)));
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len = PyUnicode_GET_LENGTH(t);
        if (len < 24) {
            *p++ = (char)(0x60 | len);
        }
        else {
            *p++ = (char)0x78;
            *p++ = (char)len;
        }
        memcpy(p, PyUnicode_1BYTE_DATA(t), (size_t)len);
        p += len;
    }
    return out;
}

PyDoc_STRVAR(add_postings_doc,
             "add_postings(pending, terms, values, raw, /)\n--\n\n"
             "``pending[term][raw] = value`` for each term and value (``pending`` maps a term to "
             "a dict, created when missing); ``cortex.lexical._add_postings`` in C.");

static PyObject *
sp_add_postings(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *pending, *terms, *values, *raw;
    Py_ssize_t n, i;
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add_postings takes four arguments");
        return NULL;
    }
    pending = args[0];
    terms = args[1];
    values = args[2];
    raw = args[3];
    if (!PyDict_CheckExact(pending) || !PyList_CheckExact(terms) || !PyList_CheckExact(values)) {
        PyErr_SetString(PyExc_TypeError, "add_postings(dict, list, list, raw)");
        return NULL;
    }
    n = PyList_GET_SIZE(terms);
    if (PyList_GET_SIZE(values) != n) {
        PyErr_SetString(PyExc_ValueError, "add_postings: as many values as terms");
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *term = PyList_GET_ITEM(terms, i);
        PyObject *group = PyDict_GetItemWithError(pending, term); /* borrowed */
        if (group == NULL) {
            int rc;
            if (PyErr_Occurred()) {
                return NULL;
            }
            group = PyDict_New();
            if (group == NULL) {
                return NULL;
            }
            rc = PyDict_SetItem(pending, term, group);
            Py_DECREF(group); /* pending holds it */
            if (rc < 0) {
                return NULL;
            }
        }
        else if (!PyDict_Check(group)) {
            PyErr_SetString(PyExc_TypeError, "add_postings: pending must map terms to dicts");
            return NULL;
        }
        if (PyDict_SetItem(group, raw, PyList_GET_ITEM(values, i)) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* -- posting blocks (cortex.postings): the sorted run of a term's new postings, and where a run
 * of postings splits into blocks ------------------------------------------------------------ */

/* CRC-32 (ISO-HDLC, the one of zlib.crc32: reflected polynomial 0xEDB88320), eight bytes a step
 * through eight tables.  The tables are filled once at import and only read after. */
/* ------------------------------------------------------------------------------------------ */
/* SHA-256 (FIPS 180-4): content hashes and the journal's chain hashes without hashlib's
 * per-call set-up.  The compression runs on the x86 SHA extensions when the CPU has them
 * (checked once with cpuid), else in portable C; tests compare both with hashlib. */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

#define ROTR32(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha256_blocks_c(uint32_t st[8], const uint8_t *p, size_t nblocks)
{
    uint32_t w[64];
    while (nblocks--) {
        uint32_t a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6],
                 h = st[7];
        int t;
        for (t = 0; t < 16; t++) {
            w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
                   (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
        }
        for (t = 16; t < 64; t++) {
            uint32_t s0 = ROTR32(w[t - 15], 7) ^ ROTR32(w[t - 15], 18) ^ (w[t - 15] >> 3);
            uint32_t s1 = ROTR32(w[t - 2], 17) ^ ROTR32(w[t - 2], 19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        for (t = 0; t < 64; t++) {
            uint32_t t1 = h + (ROTR32(e, 6) ^ ROTR32(e, 11) ^ ROTR32(e, 25)) +
                          ((e & f) ^ (~e & g)) + K256[t] + w[t];
            uint32_t t2 = (ROTR32(a, 2) ^ ROTR32(a, 13) ^ ROTR32(a, 22)) +
                          ((a & b) ^ (a & c) ^ (b & c));
            h = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        st[0] += a;
        st[1] += b;
        st[2] += c;
        st[3] += d;
        st[4] += e;
        st[5] += f;
        st[6] += g;
        st[7] += h;
        p += 64;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHA_NI_PATH 1

/* The same compression on the SHA extensions: the state lives as ABEF and CDGH in two
 * registers; each sha256rnds2 does two rounds, each group of four words two of them. */
__attribute__((target("sha,sse4.1,ssse3"))) static void
sha256_blocks_ni(uint32_t st[8], const uint8_t *p, size_t nblocks)
{
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t0 = _mm_loadu_si128((const __m128i *)&st[0]); /* a b c d */
    __m128i s1 = _mm_loadu_si128((const __m128i *)&st[4]); /* e f g h */
    __m128i s0;
    t0 = _mm_shuffle_epi32(t0, 0xB1);  /* b a d c */
    s1 = _mm_shuffle_epi32(s1, 0x1B);  /* h g f e */
    s0 = _mm_alignr_epi8(t0, s1, 8);   /* f e b a: ABEF */
    s1 = _mm_blend_epi16(s1, t0, 0xF0); /* h g d c: CDGH */
    while (nblocks--) {
        __m128i w[4], abef = s0, cdgh = s1;
        int j;
        for (j = 0; j < 4; j++) {
            w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), swap);
        }
        for (j = 0; j < 16; j++) {
            __m128i wk;
            if (j >= 4) { /* the next four schedule words from the last sixteen */
                __m128i t = _mm_sha256msg1_epu32(w[j & 3], w[(j + 1) & 3]);
                t = _mm_add_epi32(t, _mm_alignr_epi8(w[(j + 3) & 3], w[(j + 2) & 3], 4));
                w[j & 3] = _mm_sha256msg2_epu32(t, w[(j + 3) & 3]);
            }
            wk = _mm_add_epi32(w[j & 3], _mm_loadu_si128((const __m128i *)&K256[4 * j]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, wk);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
        p += 64;
    }
    t0 = _mm_shuffle_epi32(s0, 0x1B);   /* a b e f */
    s1 = _mm_shuffle_epi32(s1, 0xB1);   /* g h c d */
    s0 = _mm_blend_epi16(t0, s1, 0xF0); /* a b c d */
    s1 = _mm_alignr_epi8(s1, t0, 8);    /* e f g h */
    _mm_storeu_si128((__m128i *)&st[0], s0);
    _mm_storeu_si128((__m128i *)&st[4], s1);
}

static int
cpu_has_sha_ni(void)
{
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) {
        return 0; /* SSE4.1, SSSE3 */
    }
    if (__get_cpuid_max(0, NULL) < 7) {
        return 0;
    }
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 29) & 1; /* SHA */
}
#endif

typedef void (*Sha256Blocks)(uint32_t st[8], const uint8_t *p, size_t nblocks);

static Sha256Blocks sha256_blocks = sha256_blocks_c;

static void
sha256_init(void)
{
#ifdef HAVE_SHA_NI_PATH
    if (cpu_has_sha_ni()) {
        sha256_blocks = sha256_blocks_ni;
    }
#endif
}

/* sha256 of the concatenation of n parts into out (32 bytes), compressed by ``blocks``. */
static void
sha256_with(Sha256Blocks blocks, const uint8_t *const *parts, const size_t *lens, int n,
            uint8_t out[32])
{
    uint32_t st[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint8_t buf[128];
    size_t fill = 0, total = 0, k;
    int i;
    for (i = 0; i < n; i++) {
        const uint8_t *p = parts[i];
        size_t len = lens[i];
        total += len;
        if (fill > 0) {
            size_t take = 64 - fill < len ? 64 - fill : len;
            memcpy(buf + fill, p, take);
            fill += take;
            p += take;
            len -= take;
            if (fill < 64) {
                continue;
            }
            blocks(st, buf, 1);
            fill = 0;
        }
        if (len >= 64) {
            blocks(st, p, len / 64);
            p += len - len % 64;
            len %= 64;
        }
        memcpy(buf, p, len);
        fill = len;
    }
    /* 0x80, zeros, the length in bits (64-bit big-endian): one or two more blocks */
    buf[fill++] = 0x80;
    k = fill <= 56 ? 64 : 128;
    memset(buf + fill, 0, k - fill);
    total *= 8;
    for (i = 0; i < 8; i++) {
        buf[k - 1 - i] = (uint8_t)(total >> (8 * i));
    }
    blocks(st, buf, k / 64);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(st[i] >> 24);
        out[4 * i + 1] = (uint8_t)(st[i] >> 16);
        out[4 * i + 2] = (uint8_t)(st[i] >> 8);
        out[4 * i + 3] = (uint8_t)st[i];
    }
}

/* sha256 of the concatenation of n parts into out, on this CPU's fastest compression. */
static void
sha256_parts(const uint8_t *const *parts, const size_t *lens, int n, uint8_t out[32])
{
    sha256_with(sha256_blocks, parts, lens, n, out);
}

PyDoc_STRVAR(sha256_doc,
             "sha256(*parts, portable=False)\n--\n\n"
             "``hashlib.sha256(b''.join(parts)).digest()`` for bytes parts, without joining "
             "them (content hashes: the domain and type prefix, then the data).  "
             "``portable=True`` forces the portable compression (tests).");

static PyObject *
sp_sha256(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const uint8_t *parts[8];
    size_t lens[8];
    uint8_t out[32];
    Py_ssize_t i;
    int portable = 0;
    (void)module;
    if (kwnames != NULL) {
        if (PyTuple_GET_SIZE(kwnames) != 1 ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "portable") != 0) {
            PyErr_SetString(PyExc_TypeError, "sha256: the only keyword is portable");
            return NULL;
        }
        portable = PyObject_IsTrue(args[nargs]);
        if (portable < 0) {
            return NULL;
        }
    }
    if (nargs > 8) {
        PyErr_SetString(PyExc_TypeError, "sha256 takes at most eight parts");
        return NULL;
    }
    for (i = 0; i < nargs; i++) {
        if (!PyBytes_CheckExact(args[i])) {
            PyErr_SetString(PyExc_TypeError, "sha256: the parts must be bytes");
            return NULL;
        }
        parts[i] = (const uint8_t *)PyBytes_AS_STRING(args[i]);
        lens[i] = (size_t)PyBytes_GET_SIZE(args[i]);
    }
    sha256_with(portable ? sha256_blocks_c : sha256_blocks, parts, lens, (int)nargs, out);
    return PyBytes_FromStringAndSize((const char *)out, 32);
}

static uint32_t crc_table[8][256];

static void
crc_init(void)
{
    uint32_t i, c;
    int k;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        }
        crc_table[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        for (k = 1; k < 8; k++) {
            c = crc_table[k - 1][i];
            crc_table[k][i] = (c >> 8) ^ crc_table[0][c & 0xFF];
        }
    }
}

static uint32_t
crc32_of(const uint8_t *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^
            crc_table[2][(hi >> 8) & 0xFF] ^ crc_table[1][(hi >> 16) & 0xFF] ^
            crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    }
    return c ^ 0xFFFFFFFFu;
}

static int
cmp_id16(const void *a, const void *b)
{
    return memcmp(*(const char *const *)a, *(const char *const *)b, 16);
}

static int
cmp_record24(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* A run of new postings (a bytes-like buffer of id16 + tail8 records, as index_new appends
 * them) as bytes in id order; None when it is empty, not whole records, or an id repeats. */
static PyObject *
fresh_run(PyObject *buf)
{
    const char *p;
    char *q;
    Py_ssize_t n, i;
    PyObject *out;
    if (PyByteArray_CheckExact(buf)) {
        p = PyByteArray_AS_STRING(buf);
        n = PyByteArray_GET_SIZE(buf);
    }
    else {
        p = PyBytes_AS_STRING(buf);
        n = PyBytes_GET_SIZE(buf);
    }
    if (n == 0 || n % 24 != 0) {
        Py_RETURN_NONE;
    }
    out = PyBytes_FromStringAndSize(p, n);
    if (out == NULL) {
        return NULL;
    }
    q = PyBytes_AS_STRING(out);
    for (i = 24; i < n; i += 24) { /* a batch's ids mostly arrive in order (ULIDs) */
        if (memcmp(q + i - 24, q + i, 16) >= 0) {
            break;
        }
    }
    if (i < n) {
        qsort(q, (size_t)(n / 24), 24, cmp_record24);
        for (i = 24; i < n; i += 24) {
            if (memcmp(q + i - 24, q + i, 16) == 0) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
        }
    }
    return out;
}

PyDoc_STRVAR(posting_run_doc,
             "posting_run(changes, /)\n--\n\n"
             "The postings of ``changes`` ({id16: tail8}) in id order, joined: id, tail, id, "
             "tail...; None when a key is not 16 bytes or a value not 8 bytes (a removal: "
             "``cortex.postings._run`` in C).");

static PyObject *
sp_posting_run(PyObject *module, PyObject *changes)
{
    Py_ssize_t n, pos = 0, i = 0;
    PyObject *k, *v, *out;
    const char **ids;
    char *dst;
    (void)module;
    if (!PyDict_CheckExact(changes)) {
        PyErr_SetString(PyExc_TypeError, "posting_run(dict)");
        return NULL;
    }
    n = PyDict_GET_SIZE(changes);
    if (n == 0) {
        Py_RETURN_NONE;
    }
    ids = PyMem_Malloc((size_t)n * 2 * sizeof(char *));
    if (ids == NULL) {
        return PyErr_NoMemory();
    }
    /* pairs (id, tail) sorted together: sort pointers to the ids, each followed in the array
       by its tail; qsort moves pairs by sorting an index of pair starts */
    while (PyDict_Next(changes, &pos, &k, &v)) {
        if (!PyBytes_CheckExact(k) || PyBytes_GET_SIZE(k) != 16 || !PyBytes_CheckExact(v) ||
            PyBytes_GET_SIZE(v) != 8) {
            PyMem_Free(ids);
            Py_RETURN_NONE;
        }
        ids[2 * i] = PyBytes_AS_STRING(k);
        ids[2 * i + 1] = PyBytes_AS_STRING(v);
        i++;
    }
    qsort(ids, (size_t)n, 2 * sizeof(char *), cmp_id16);
    out = PyBytes_FromStringAndSize(NULL, n * 24);
    if (out == NULL) {
        PyMem_Free(ids);
        return NULL;
    }
    dst = PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++) {
        memcpy(dst + 24 * i, ids[2 * i], 16);
        memcpy(dst + 24 * i + 16, ids[2 * i + 1], 8);
    }
    PyMem_Free(ids);
    return out;
}

PyDoc_STRVAR(merge_run_doc,
             "merge_run(payloads, changes, /)\n--\n\n"
             "The postings of the block ``payloads`` (in key order) with ``changes`` "
             "({id16: tail8 or None}) applied: ``(run, delta)``, the joined postings in id "
             "order and the change in their count; None when a removed id is not there, or "
             "anything is not what ``cortex.postings.apply`` holds (its Python path then runs).");

static PyObject *
sp_merge_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *payloads, *changes, *k, *v, *out = NULL, *res = NULL;
    Py_ssize_t nb, nc, total = 0, b, i, pos = 0, c = 0, delta = 0;
    const char **ids = NULL;
    char *dst, *last = NULL;
    (void)module;
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "merge_run(list, dict)");
        return NULL;
    }
    payloads = args[0];
    changes = args[1];
    nb = PyList_GET_SIZE(payloads);
    for (b = 0; b < nb; b++) {
        PyObject *p = PyList_GET_ITEM(payloads, b);
        if (!PyBytes_CheckExact(p) || PyBytes_GET_SIZE(p) % 24 != 0) {
            Py_RETURN_NONE;
        }
        total += PyBytes_GET_SIZE(p);
    }
    nc = PyDict_GET_SIZE(changes);
    ids = PyMem_Malloc((size_t)(nc > 0 ? nc : 1) * 2 * sizeof(char *));
    if (ids == NULL) {
        return PyErr_NoMemory();
    }
    while (PyDict_Next(changes, &pos, &k, &v)) {
        if (!PyBytes_CheckExact(k) || PyBytes_GET_SIZE(k) != 16 ||
            (v != Py_None && (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) != 8))) {
            PyMem_Free(ids);
            Py_RETURN_NONE;
        }
        ids[2 * c] = PyBytes_AS_STRING(k);
        ids[2 * c + 1] = v == Py_None ? NULL : PyBytes_AS_STRING(v);
        c++;
    }
    qsort(ids, (size_t)nc, 2 * sizeof(char *), cmp_id16);
    out = PyBytes_FromStringAndSize(NULL, total + 24 * nc); /* at most; cut to size below */
    if (out == NULL) {
        goto done;
    }
    dst = PyBytes_AS_STRING(out);
    c = 0;
    for (b = 0; b <= nb; b++) {
        const char *p = b < nb ? PyBytes_AS_STRING(PyList_GET_ITEM(payloads, b)) : NULL;
        Py_ssize_t n = b < nb ? PyBytes_GET_SIZE(PyList_GET_ITEM(payloads, b)) : 0;
        for (i = 0; i <= n; i += 24) {
            const char *old = i < n ? p + i : NULL;
            if (old == NULL && b < nb) {
                break; /* the next block */
            }
            if (old != NULL && last != NULL && memcmp(last, old, 16) >= 0) {
                Py_CLEAR(out); /* stored postings out of order: left to the Python path */
                goto none;
            }
            /* the changes before this posting (all of them after the last one) */
            while (c < nc && (old == NULL || memcmp(ids[2 * c], old, 16) < 0)) {
                if (ids[2 * c + 1] == NULL) {
                    Py_CLEAR(out); /* removing a posting that is not there */
                    goto none;
                }
                memcpy(dst, ids[2 * c], 16);
                memcpy(dst + 16, ids[2 * c + 1], 8);
                dst += 24;
                delta++;
                c++;
            }
            if (old == NULL) {
                break;
            }
            last = (char *)old;
            if (c < nc && memcmp(ids[2 * c], old, 16) == 0) {
                if (ids[2 * c + 1] == NULL) {
                    delta--; /* removed */
                }
                else {
                    memcpy(dst, old, 16);
                    memcpy(dst + 16, ids[2 * c + 1], 8);
                    dst += 24;
                }
                c++;
            }
            else {
                memcpy(dst, old, 24);
                dst += 24;
            }
        }
    }
    if (_PyBytes_Resize(&out, dst - PyBytes_AS_STRING(out)) < 0) {
        goto done;
    }
    res = Py_BuildValue("(Nn)", out, delta);
    out = NULL;
    goto done;
none:
    PyMem_Free(ids);
    Py_RETURN_NONE;
done:
    PyMem_Free(ids);
    Py_XDECREF(out);
    return res;
}

PyDoc_STRVAR(cut_blocks_doc,
             "cut_blocks(run, held, block_max, spread, /)\n--\n\n"
             "``cortex.postings.blocks(run, held)`` in C: the block payloads of a run of "
             "postings (24 bytes each); a posting begins a block when its block is full "
             "(``block_max``) or ``crc32(id) % spread == 0``.");

static PyObject *
sp_cut_blocks(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *out, *piece;
    const unsigned char *p;
    Py_ssize_t n, i, start = 0, count, held, block_max, spread;
    (void)module;
    if (nargs != 4 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "cut_blocks(bytes, held, block_max, spread)");
        return NULL;
    }
    held = PyLong_AsSsize_t(args[1]);
    block_max = PyLong_AsSsize_t(args[2]);
    spread = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    n = PyBytes_GET_SIZE(args[0]);
    if (n % 24 != 0 || held < 0 || block_max < 1 || spread < 1 || spread > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "cut_blocks: a run of 24-byte postings, held >= 0, "
                                          "block_max >= 1, 1 <= spread < 2**32");
        return NULL;
    }
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    count = held ? held - 1 : 0; /* postings in the current block before the one at i */
    for (i = held ? 0 : 24; i < n; i += 24) {
        count++;
        if (count >= block_max || crc32_of(p + i, 16) % (uint32_t)spread == 0) {
            piece = PyBytes_FromStringAndSize((const char *)p + start, i - start);
            if (piece == NULL || PyList_Append(out, piece) < 0) {
                Py_XDECREF(piece);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(piece);
            start = i;
            count = 0;
        }
    }
    piece = PyBytes_FromStringAndSize((const char *)p + start, n - start);
    if (piece == NULL || PyList_Append(out, piece) < 0) {
        Py_XDECREF(piece);
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(piece);
    return out;
}

PyDoc_STRVAR(block_append_doc,
             "block_append(prefix, run, key, value, block_max, spread, /)\n--\n\n"
             "Append a run of new postings (ids after every posting of the block) to the "
             "stored block ``key: value`` of a term's ``prefix``: the blocks that change, as "
             "``[(key, sealed value), ...]`` (``cortex.postings.apply``'s append in C); None "
             "when the block fails its checks or the run does not come after it (the Python "
             "path then says why).");

static PyObject *
sp_block_append(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *prefix, *run, *key, *value, *out = NULL, *pair;
    const unsigned char *r, *v;
    Py_ssize_t nr, nv, np, held, block_max, spread, i, start, count, plen;
    int extending = 1; /* the next piece extends the stored block */
    uint32_t crc;
    (void)module;
    if (nargs != 6 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) ||
        !PyBytes_CheckExact(args[2]) || !PyBytes_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "block_append(bytes, bytes, bytes, bytes, block_max, spread)");
        return NULL;
    }
    prefix = args[0];
    run = args[1];
    key = args[2];
    value = args[3];
    block_max = PyLong_AsSsize_t(args[4]);
    spread = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (block_max < 1 || spread < 1 || spread > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "block_append: block_max >= 1, 1 <= spread < 2**32");
        return NULL;
    }
    r = (const unsigned char *)PyBytes_AS_STRING(run);
    nr = PyBytes_GET_SIZE(run);
    v = (const unsigned char *)PyBytes_AS_STRING(value);
    nv = PyBytes_GET_SIZE(value);
    plen = PyBytes_GET_SIZE(prefix);
    np = nv - 4; /* the stored block's payload */
    if (nr == 0 || nr % 24 != 0 || np < 24 || np % 24 != 0 || np / 24 > block_max ||
        PyBytes_GET_SIZE(key) != plen + 16 ||
        memcmp(PyBytes_AS_STRING(key), PyBytes_AS_STRING(prefix), (size_t)plen) != 0 ||
        memcmp(v, PyBytes_AS_STRING(key) + plen, 16) != 0 || memcmp(v + np - 24, r, 16) >= 0) {
        Py_RETURN_NONE;
    }
    crc = crc32_of(v, np);
    if (v[np] != (unsigned char)(crc >> 24) || v[np + 1] != (unsigned char)(crc >> 16) ||
        v[np + 2] != (unsigned char)(crc >> 8) || v[np + 3] != (unsigned char)crc) {
        Py_RETURN_NONE;
    }
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    held = np / 24;
    /* cut the run as cut_blocks(run, held): pieces [start, i); the first one extends the
       stored block */
    count = held - 1;
    start = 0;
    for (i = 0; i <= nr; i += 24) {
        int split = 0;
        if (i < nr) {
            count++;
            split = count >= block_max || crc32_of(r + i, 16) % (uint32_t)spread == 0;
        }
        if (i == nr || split) {
            int first = extending;
            Py_ssize_t size = (first ? np : 0) + (i - start);
            PyObject *k, *sv;
            char *p;
            uint32_t c;
            extending = 0;
            if (first && i == 0) { /* the run begins a block of its own: the stored one stays */
                count = 0;
                continue;
            }
            k = PyBytes_FromStringAndSize(NULL, plen + 16);
            sv = PyBytes_FromStringAndSize(NULL, size + 4);
            if (k == NULL || sv == NULL) {
                Py_XDECREF(k);
                Py_XDECREF(sv);
                goto fail;
            }
            p = PyBytes_AS_STRING(sv);
            if (first) {
                memcpy(p, v, (size_t)np);
                memcpy(p + np, r, (size_t)(i - start));
            }
            else {
                memcpy(p, r + start, (size_t)(i - start));
            }
            c = crc32_of((const uint8_t *)p, size);
            p[size] = (char)(c >> 24);
            p[size + 1] = (char)(c >> 16);
            p[size + 2] = (char)(c >> 8);
            p[size + 3] = (char)c;
            memcpy(PyBytes_AS_STRING(k), PyBytes_AS_STRING(prefix), (size_t)plen);
            memcpy(PyBytes_AS_STRING(k) + plen, p, 16);
            pair = PyTuple_New(2);
            if (pair == NULL) {
                Py_DECREF(k);
                Py_DECREF(sv);
                goto fail;
            }
            PyTuple_SET_ITEM(pair, 0, k);
            PyTuple_SET_ITEM(pair, 1, sv);
            if (PyList_Append(out, pair) < 0) {
                Py_DECREF(pair);
                goto fail;
            }
            Py_DECREF(pair);
            start = i;
            count = 0;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* the cursor methods append_runs calls (interned once) */
static PyObject *m_set_range = NULL, *m_key = NULL, *m_value = NULL, *m_prev = NULL,
                *m_last = NULL, *m_next = NULL;

/* 1 / 0 from a cursor method that returns a bool; -1 on error */
static int
cursor_step(PyObject *cursor, PyObject *name, PyObject *arg)
{
    PyObject *r = arg != NULL ? PyObject_CallMethodOneArg(cursor, name, arg)
                              : PyObject_CallMethodNoArgs(cursor, name);
    int ok;
    if (r == NULL) {
        return -1;
    }
    ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

/* the cursor's current key (or value): a new reference to bytes, or NULL (error set) */
static PyObject *
cursor_get(PyObject *cursor, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(cursor, name);
    if (r != NULL && !PyBytes_CheckExact(r)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "append_runs: the cursor must give bytes");
        return NULL;
    }
    return r;
}

static int
starts_with(PyObject *b, PyObject *prefix)
{
    Py_ssize_t n = PyBytes_GET_SIZE(prefix);
    return PyBytes_GET_SIZE(b) >= n &&
           memcmp(PyBytes_AS_STRING(b), PyBytes_AS_STRING(prefix), (size_t)n) == 0;
}

/* The new blocks of a term that has none: cut_blocks(run, 0), sealed, keyed; appended to puts */
static int
new_blocks(PyObject *module, PyObject *prefix, PyObject *run, PyObject *const *limits,
           PyObject *puts)
{
    PyObject *cut_args[4] = {run, NULL, limits[0], limits[1]}, *cut, *zero;
    Py_ssize_t i, plen = PyBytes_GET_SIZE(prefix);
    zero = PyLong_FromLong(0);
    if (zero == NULL) {
        return -1;
    }
    cut_args[1] = zero;
    cut = sp_cut_blocks(module, cut_args, 4);
    Py_DECREF(zero);
    if (cut == NULL) {
        return -1;
    }
    for (i = 0; i < PyList_GET_SIZE(cut); i++) {
        PyObject *block = PyList_GET_ITEM(cut, i), *k, *v, *pair;
        Py_ssize_t n = PyBytes_GET_SIZE(block);
        uint32_t c;
        char *p;
        k = PyBytes_FromStringAndSize(NULL, plen + 16);
        v = PyBytes_FromStringAndSize(NULL, n + 4);
        if (k == NULL || v == NULL) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(cut);
            return -1;
        }
        memcpy(PyBytes_AS_STRING(k), PyBytes_AS_STRING(prefix), (size_t)plen);
        memcpy(PyBytes_AS_STRING(k) + plen, PyBytes_AS_STRING(block), 16);
        p = PyBytes_AS_STRING(v);
        memcpy(p, PyBytes_AS_STRING(block), (size_t)n);
        c = crc32_of((const uint8_t *)p, n);
        p[n] = (char)(c >> 24);
        p[n + 1] = (char)(c >> 16);
        p[n + 2] = (char)(c >> 8);
        p[n + 3] = (char)c;
        pair = PyTuple_Pack(2, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (pair == NULL || PyList_Append(puts, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(cut);
            return -1;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(cut);
    return 0;
}

PyDoc_STRVAR(append_runs_doc,
             "append_runs(cursor, items, block_max, spread, /)\n--\n\n"
             "``cortex.postings.apply``'s common case for many terms in one call: ``items`` is "
             "``[(prefix, changes), ...]`` (a term's posting prefix and {id16: tail8}, or new "
             "postings as bytes or a bytearray of id16 + tail8 records, any order); for "
             "each whose new ids all come after the term's last block begins (and before its "
             "next boundary block), or whose term has no block, the blocks that change are "
             "found with the cursor (set_range, key, value, prev, last: bytes) and returned. "
             "``(puts, leftover)``: the ``(key, sealed value)`` pairs in key order, and the "
             "indexes of the items left to the Python path.");

static PyObject *
sp_append_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *cursor, *items, *puts = NULL, *leftover = NULL, *res = NULL;
    PyObject *run = NULL, *key = NULL, *k0 = NULL, *v0 = NULL, *k1 = NULL;
    Py_ssize_t t, n, block_max, spread;
    (void)module;
    if (nargs != 4 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "append_runs(cursor, list, block_max, spread)");
        return NULL;
    }
    cursor = args[0];
    items = args[1];
    block_max = PyLong_AsSsize_t(args[2]);
    spread = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (block_max < 1 || spread < 1 || spread > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "append_runs: block_max >= 1, 1 <= spread < 2**32");
        return NULL;
    }
    puts = PyList_New(0);
    leftover = PyList_New(0);
    if (puts == NULL || leftover == NULL) {
        goto done;
    }
    n = PyList_GET_SIZE(items);
    for (t = 0; t < n; t++) {
        PyObject *item = PyList_GET_ITEM(items, t), *prefix, *changes, *lo_key;
        Py_ssize_t plen, nr;
        const char *r;
        int found, left = 0;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) ||
            !(PyDict_CheckExact(PyTuple_GET_ITEM(item, 1)) ||
              PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1)) ||
              PyByteArray_CheckExact(PyTuple_GET_ITEM(item, 1)))) {
            PyErr_SetString(PyExc_TypeError,
                            "append_runs: items are (bytes, dict or new postings) pairs");
            goto done;
        }
        prefix = PyTuple_GET_ITEM(item, 0);
        changes = PyTuple_GET_ITEM(item, 1);
        plen = PyBytes_GET_SIZE(prefix);
        run = PyDict_CheckExact(changes) ? sp_posting_run(module, changes) : fresh_run(changes);
        if (run == NULL) {
            goto done;
        }
        if (run == Py_None) { /* a removal, or nothing: the Python path */
            left = 1;
            goto next;
        }
        r = PyBytes_AS_STRING(run);
        nr = PyBytes_GET_SIZE(run);
        key = PyBytes_FromStringAndSize(NULL, plen + 16);
        if (key == NULL) {
            goto done;
        }
        memcpy(PyBytes_AS_STRING(key), PyBytes_AS_STRING(prefix), (size_t)plen);
        memcpy(PyBytes_AS_STRING(key) + plen, r, 16);
        lo_key = key;
        /* as _LmdbTxn.around: the pair at or before lo_key, and the key after it */
        found = cursor_step(cursor, m_set_range, lo_key);
        if (found < 0) {
            goto done;
        }
        if (found) {
            k1 = cursor_get(cursor, m_key);
            if (k1 == NULL) {
                goto done;
            }
            if (PyBytes_GET_SIZE(k1) == PyBytes_GET_SIZE(lo_key) &&
                memcmp(PyBytes_AS_STRING(k1), PyBytes_AS_STRING(lo_key),
                       (size_t)PyBytes_GET_SIZE(k1)) == 0) {
                left = 1; /* a block begins at lo: not an append */
                goto next;
            }
            found = cursor_step(cursor, m_prev, NULL);
        }
        else {
            found = cursor_step(cursor, m_last, NULL);
        }
        if (found < 0) {
            goto done;
        }
        if (found) {
            k0 = cursor_get(cursor, m_key);
            if (k0 == NULL) {
                goto done;
            }
            if (!starts_with(k0, prefix)) {
                Py_CLEAR(k0);
            }
        }
        if (k1 != NULL && !starts_with(k1, prefix)) {
            Py_CLEAR(k1);
        }
        if (k0 == NULL) {
            if (k1 == NULL) { /* the term has no block yet */
                if (new_blocks(module, prefix, run, args + 2, puts) < 0) {
                    goto done;
                }
            }
            else {
                left = 1; /* new ids before the term's first block */
            }
            goto next;
        }
        if (k1 != NULL) { /* a following block must begin after hi, at a boundary */
            const unsigned char *f = (const unsigned char *)PyBytes_AS_STRING(k1) + plen;
            if (PyBytes_GET_SIZE(k1) != plen + 16 || memcmp(f, r + nr - 24, 16) <= 0 ||
                crc32_of(f, 16) % (uint32_t)spread != 0) {
                left = 1;
                goto next;
            }
        }
        v0 = cursor_get(cursor, m_value);
        if (v0 == NULL) {
            goto done;
        }
        {
            PyObject *append_args[6] = {prefix, run, k0, v0, args[2], args[3]};
            PyObject *changed = sp_block_append(module, append_args, 6);
            Py_ssize_t i;
            if (changed == NULL) {
                goto done;
            }
            if (changed == Py_None) {
                left = 1; /* the block fails its checks: the Python path says why */
            }
            else {
                for (i = 0; i < PyList_GET_SIZE(changed); i++) {
                    if (PyList_Append(puts, PyList_GET_ITEM(changed, i)) < 0) {
                        Py_DECREF(changed);
                        goto done;
                    }
                }
            }
            Py_DECREF(changed);
        }
    next:
        if (left) {
            PyObject *index = PyLong_FromSsize_t(t);
            if (index == NULL || PyList_Append(leftover, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
        Py_CLEAR(run);
        Py_CLEAR(key);
        Py_CLEAR(k0);
        Py_CLEAR(v0);
        Py_CLEAR(k1);
    }
    res = PyTuple_Pack(2, puts, leftover);
done:
    Py_XDECREF(run);
    Py_XDECREF(key);
    Py_XDECREF(k0);
    Py_XDECREF(v0);
    Py_XDECREF(k1);
    Py_XDECREF(puts);
    Py_XDECREF(leftover);
    return res;
}

/* ------------------------------------------------------------------------------------------ */
/* The lexical side of a write, one call each (cortex/lexical.py keeps the definitions:
 * ``analyze_counts`` and ``Indexer.add_counted``): the counted terms of an ASCII full form whose
 * tokens are all in the stem cache, and the document, postings and df changes of one memory. */


/* A distinct token of a text: its lower-cased characters in a scratch buffer. */
typedef struct {
    Py_ssize_t off, len, count;
    uint32_t hash;
} TokenRun;

typedef struct {
    uint64_t prefix; /* the stem's first 8 bytes, big-endian, zero-padded: orders most pairs */
    PyObject *stem;  /* a new reference */
    Py_ssize_t count;
} StemCount;

/* Code point order of two ASCII str (their byte order). */
static int
ascii_str_cmp(PyObject *a, PyObject *b)
{
    Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
    int c = memcmp(PyUnicode_1BYTE_DATA(a), PyUnicode_1BYTE_DATA(b), (size_t)(la < lb ? la : lb));
    return c != 0 ? c : (la > lb) - (la < lb);
}

/* Stems hold no U+0000, so zero padding sorts a proper prefix first, as code point order does. */
static uint64_t
ascii_prefix(PyObject *t)
{
    const Py_UCS1 *p = PyUnicode_1BYTE_DATA(t);
    Py_ssize_t len = PyUnicode_GET_LENGTH(t), i;
    uint64_t k = 0;
    for (i = 0; i < 8; i++) {
        k = (k << 8) | (i < len ? p[i] : 0);
    }
    return k;
}

static int
stem_count_cmp(const void *a, const void *b)
{
    const StemCount *x = (const StemCount *)a, *y = (const StemCount *)b;
    if (x->prefix != y->prefix) {
        return x->prefix < y->prefix ? -1 : 1;
    }
    return ascii_str_cmp(x->stem, y->stem);
}

/* Sort by stem: insertion sort for the usual few dozen terms, qsort beyond. */
static void
sort_stem_counts(StemCount *sc, Py_ssize_t n)
{
    Py_ssize_t i, j;
    if (n > 48) {
        qsort(sc, (size_t)n, sizeof(StemCount), stem_count_cmp);
        return;
    }
    for (i = 1; i < n; i++) {
        StemCount x = sc[i];
        for (j = i; j > 0 && stem_count_cmp(&sc[j - 1], &x) > 0; j--) {
            sc[j] = sc[j - 1];
        }
        sc[j] = x;
    }
}

/* Whether t is an exact str of 1..max ASCII characters without U+0000 (a term a key can hold). */
static int
is_ascii_term(PyObject *t, Py_ssize_t max)
{
    Py_ssize_t len;
    if (!PyUnicode_CheckExact(t) || !PyUnicode_IS_ASCII(t)) {
        return 0;
    }
    len = PyUnicode_GET_LENGTH(t);
    return len >= 1 && len <= max && memchr(PyUnicode_1BYTE_DATA(t), 0, (size_t)len) == NULL;
}

/* A token -> stem table beside the stem cache dict: what ``ascii_term_counts`` found in the
 * dict, keyed by the token's bytes, so a token seen before costs no str object and no dict
 * lookup.  A stem is a function of its token, so an entry never goes stale (whatever the dict
 * drops); the table is emptied when half full.  It holds only str: no reference cycles. */

typedef struct {
    PyObject *token; /* an exact ASCII str (a strong reference); NULL: the slot is empty */
    PyObject *stem;  /* a strong reference */
    uint32_t hash;   /* FNV-1a of the token */
} StemSlot;

typedef struct {
    PyObject_HEAD
    StemSlot *slots;
    Py_ssize_t mask; /* slots - 1 */
    Py_ssize_t used;
} StemTableObject;

static PyTypeObject StemTable_Type;

static uint32_t
fnv1a(const char *p, Py_ssize_t n)
{
    uint32_t h = 2166136261u;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    }
    return h;
}

static void
stem_table_clear(StemTableObject *t)
{
    Py_ssize_t i;
    for (i = 0; i <= t->mask; i++) {
        PyObject *token = t->slots[i].token, *stem = t->slots[i].stem;
        t->slots[i].token = NULL;
        t->slots[i].stem = NULL;
        Py_XDECREF(token);
        Py_XDECREF(stem);
    }
    t->used = 0;
}

/* The stem of the token p[0..n) (hash h), borrowed, or NULL when the table lacks it. */
static PyObject *
stem_table_get(const StemTableObject *t, uint32_t h, const char *p, Py_ssize_t n)
{
    Py_ssize_t slot;
    for (slot = (Py_ssize_t)h & t->mask;; slot = (slot + 1) & t->mask) {
        const StemSlot *e = &t->slots[slot];
        if (e->token == NULL) {
            return NULL;
        }
        if (e->hash == h && PyUnicode_GET_LENGTH(e->token) == n &&
            memcmp(PyUnicode_1BYTE_DATA(e->token), p, (size_t)n) == 0) {
            return e->stem;
        }
    }
}

/* Remember token (an exact ASCII str, hash h) -> stem. */
static void
stem_table_put(StemTableObject *t, uint32_t h, PyObject *token, PyObject *stem)
{
    Py_ssize_t slot, n = PyUnicode_GET_LENGTH(token);
    if (t->used >= (t->mask + 1) / 2) {
        stem_table_clear(t);
    }
    for (slot = (Py_ssize_t)h & t->mask; t->slots[slot].token != NULL;
         slot = (slot + 1) & t->mask) {
        const StemSlot *e = &t->slots[slot];
        if (e->hash == h && PyUnicode_GET_LENGTH(e->token) == n &&
            memcmp(PyUnicode_1BYTE_DATA(e->token), PyUnicode_1BYTE_DATA(token), (size_t)n) == 0) {
            return; /* already there */
        }
    }
    Py_INCREF(token);
    Py_INCREF(stem);
    t->slots[slot].token = token;
    t->slots[slot].stem = stem;
    t->slots[slot].hash = h;
    t->used++;
}

static PyObject *
StemTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"slots", NULL};
    Py_ssize_t slots = 1 << 16;
    StemTableObject *self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:StemTable", kwlist, &slots)) {
        return NULL;
    }
    if (slots < 2 || slots > (1 << 24) || (slots & (slots - 1)) != 0) {
        PyErr_SetString(PyExc_ValueError, "StemTable: slots must be a power of two, 2..2**24");
        return NULL;
    }
    self = (StemTableObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->slots = PyMem_Calloc((size_t)slots, sizeof(StemSlot));
    if (self->slots == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->mask = slots - 1;
    self->used = 0;
    return (PyObject *)self;
}

static void
StemTable_dealloc(StemTableObject *self)
{
    if (self->slots != NULL) {
        stem_table_clear(self);
        PyMem_Free(self->slots);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
StemTable_len(StemTableObject *self)
{
    return self->used;
}

static PyObject *
StemTable_clear_method(StemTableObject *self, PyObject *unused)
{
    (void)unused;
    stem_table_clear(self);
    Py_RETURN_NONE;
}

static PyMethodDef StemTable_methods[] = {
    {"clear", (PyCFunction)StemTable_clear_method, METH_NOARGS, "Forget every entry."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods StemTable_as_sequence = {
    .sq_length = (lenfunc)StemTable_len,
};

static PyTypeObject StemTable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cortex._speedups.StemTable",
    .tp_basicsize = sizeof(StemTableObject),
    .tp_dealloc = (destructor)StemTable_dealloc,
    .tp_as_sequence = &StemTable_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StemTable(slots=65536): the token -> stem table of ascii_term_counts.",
    .tp_methods = StemTable_methods,
    .tp_new = StemTable_new,
};

PyDoc_STRVAR(ascii_term_counts_doc,
             "ascii_term_counts(text, stems, table, /)\n--\n\n"
             "``count_terms(terms(text))`` for ASCII text whose every token is a key of "
             "``stems`` (cortex.text's token -> stem cache; ``table``, a StemTable used with "
             "no other dict, remembers what was found there): the distinct stems in code point "
             "order and their counts, ``(distinct, counts)``; None when text is not ASCII, a "
             "token is not in the cache or a stem is not a non-empty ASCII str without U+0000.");

/* ascii_term_counts of the ASCII characters s[0..n) (n <= 2**40). */
static PyObject *
term_counts(const Py_UCS1 *s, Py_ssize_t n, PyObject *stems, StemTableObject *table)
{
    PyObject *distinct = NULL, *counts = NULL, *res = NULL;
    Py_ssize_t maxtok, cap = 16, nd = 0, held = 0, used = 0, pos = 0, len, i, m;
    TokenRun *runs;
    StemCount *sc;
    Py_ssize_t *index;
    char *chars;
    void *block;
    maxtok = n / 2 + 1; /* tokens are separated by at least one character */
    if (n > 4096) {     /* a long text: room for the tokens it has, not for the most it could */
        char buf[MAX_TOKEN_CHARS];
        maxtok = 1;
        while (next_ascii_token(s, n, &pos, buf) > 0) {
            maxtok++;
        }
        pos = 0;
    }
    while (cap < 2 * maxtok) {
        cap <<= 1;
    }
    /* runs, stem counts and the open-addressed index of runs (at most half full), then the
     * tokens' characters: a distinct token's come from its own part of the text, so n bytes */
    block = PyMem_Malloc((size_t)maxtok * (sizeof(TokenRun) + sizeof(StemCount)) +
                         (size_t)cap * sizeof(Py_ssize_t) + (size_t)n + 1);
    if (block == NULL) {
        return PyErr_NoMemory();
    }
    runs = (TokenRun *)block;
    sc = (StemCount *)(runs + maxtok);
    index = (Py_ssize_t *)(sc + maxtok);
    chars = (char *)(index + cap);
    memset(index, 0xff, (size_t)cap * sizeof(Py_ssize_t)); /* -1: empty */
    while ((len = next_ascii_token(s, n, &pos, chars + used)) > 0) {
        const char *t = chars + used;
        uint32_t h = fnv1a(t, len);
        Py_ssize_t slot;
        for (slot = (Py_ssize_t)(h & (uint32_t)(cap - 1));; slot = (slot + 1) & (cap - 1)) {
            Py_ssize_t k = index[slot];
            if (k < 0) {
                index[slot] = nd;
                runs[nd].off = used;
                runs[nd].len = len;
                runs[nd].count = 1;
                runs[nd].hash = h;
                nd++;
                used += len;
                break;
            }
            if (runs[k].hash == h && runs[k].len == len) {
                const char *u = chars + runs[k].off;
                for (i = 0; i < len && u[i] == t[i]; i++) {
                }
                if (i == len) {
                    runs[k].count++;
                    break;
                }
            }
        }
    }
    for (i = 0; i < nd; i++) {
        const char *t = chars + runs[i].off;
        PyObject *tok, *stem = stem_table_get(table, runs[i].hash, t, runs[i].len);
        if (stem != NULL) {
            Py_INCREF(stem);
        }
        else {
            tok = PyUnicode_New(runs[i].len, 127);
            if (tok == NULL) {
                goto done;
            }
            memcpy(PyUnicode_1BYTE_DATA(tok), t, (size_t)runs[i].len);
            stem = PyDict_GetItemWithError(stems, tok); /* borrowed */
            Py_XINCREF(stem);
            if (stem == NULL) {
                Py_DECREF(tok);
                if (PyErr_Occurred()) {
                    goto done;
                }
                goto none; /* not stemmed yet: the Python path stems it into the cache */
            }
            if (!is_ascii_term(stem, PY_SSIZE_T_MAX)) {
                Py_DECREF(tok);
                Py_DECREF(stem);
                goto none;
            }
            stem_table_put(table, runs[i].hash, tok, stem);
            Py_DECREF(tok);
        }
        sc[held].prefix = ascii_prefix(stem);
        sc[held].stem = stem;
        sc[held].count = runs[i].count;
        held++;
    }
    sort_stem_counts(sc, held);
    /* tokens with the same stem ("run", "running") count as one term */
    for (i = 0, m = 0; i < held; i++) {
        if (m > 0 && stem_count_cmp(&sc[m - 1], &sc[i]) == 0) {
            sc[m - 1].count += sc[i].count;
            Py_DECREF(sc[i].stem);
        }
        else {
            sc[m++] = sc[i];
        }
    }
    held = m;
    distinct = PyList_New(m);
    counts = PyList_New(m);
    if (distinct == NULL || counts == NULL) {
        goto done;
    }
    for (i = 0; i < m; i++) {
        PyObject *c = PyLong_FromSsize_t(sc[i].count);
        if (c == NULL) {
            goto done;
        }
        PyList_SET_ITEM(counts, i, c);
    }
    for (i = 0; i < m; i++) {
        PyList_SET_ITEM(distinct, i, sc[i].stem); /* the list takes the reference */
    }
    held = 0;
    res = PyTuple_Pack(2, distinct, counts);
    goto done;
none:
    res = Py_None;
    Py_INCREF(res);
done:
    for (i = 0; i < held; i++) {
        Py_DECREF(sc[i].stem);
    }
    PyMem_Free(block);
    Py_XDECREF(distinct);
    Py_XDECREF(counts);
    return res;
}

static PyObject *
sp_ascii_term_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *text;
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "ascii_term_counts(text, stems, table) takes three arguments");
        return NULL;
    }
    text = args[0];
    if (!PyUnicode_CheckExact(text) || !PyDict_CheckExact(args[1]) ||
        !PyObject_TypeCheck(args[2], &StemTable_Type)) {
        PyErr_SetString(PyExc_TypeError, "ascii_term_counts(str, dict, StemTable)");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text) || PyUnicode_GET_LENGTH(text) > ((Py_ssize_t)1 << 40)) {
        Py_RETURN_NONE;
    }
    return term_counts(PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text), args[1],
                       (StemTableObject *)args[2]);
}

/* A growing byte buffer of ASCII text (full_term_counts). */
typedef struct {
    Py_UCS1 *p;
    Py_ssize_t len, cap;
    Py_UCS1 small[512];
} TextBuf;

/* Append n characters at p: 1, or 0 when the text would pass 2**39 characters; -1 out of
 * memory. */
static int
text_put(TextBuf *b, const Py_UCS1 *p, Py_ssize_t n)
{
    if (n > ((Py_ssize_t)1 << 39) || b->len > ((Py_ssize_t)1 << 39)) {
        return 0;
    }
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap;
        Py_UCS1 *q;
        while (cap < b->len + n) {
            cap *= 2;
        }
        q = PyMem_Malloc((size_t)cap);
        if (q == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(q, b->p, (size_t)b->len);
        if (b->p != b->small) {
            PyMem_Free(b->p);
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, (size_t)n);
    b->len += n;
    return 1;
}

/* Append the str s if it is ASCII: 1; 0 when it is not (or too long); -1 out of memory. */
static int
text_add(TextBuf *b, PyObject *s)
{
    if (!PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s)) {
        return 0;
    }
    return text_put(b, PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s));
}

PyDoc_STRVAR(full_term_counts_doc,
             "full_term_counts(head, short, prefixes, values, labels, stems, table, /)\n--\n\n"
             "``ascii_term_counts(render_full(data))`` without the full form's string: "
             "``head`` is the ``\"TypeName: \"`` of ``data``'s type, ``short`` its filled short "
             "template, ``prefixes`` the fields' line prefixes ``\"name: \"`` and ``values`` "
             "their values (cortex.forms._FULL_SPECS); ``labels`` maps each enum class to "
             "{member: label}.  None, for the Python path, when any text is not ASCII or a "
             "value is not one of: None, False, True, str, int, float, an empty tuple or dict, "
             "an enum member of ``labels``.");

static PyObject *
sp_full_term_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *prefixes, *values, *labels, *res = NULL;
    TextBuf b;
    Py_ssize_t i, n;
    int rc;
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "full_term_counts takes seven arguments");
        return NULL;
    }
    prefixes = args[2];
    values = args[3];
    labels = args[4];
    if (!PyTuple_CheckExact(prefixes) || !PyTuple_CheckExact(values) ||
        !PyDict_CheckExact(labels) || !PyDict_CheckExact(args[5]) ||
        !PyObject_TypeCheck(args[6], &StemTable_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "full_term_counts(str, str, tuple, tuple, dict, dict, StemTable)");
        return NULL;
    }
    n = PyTuple_GET_SIZE(prefixes);
    if (PyTuple_GET_SIZE(values) != n) {
        Py_RETURN_NONE;
    }
    b.p = b.small;
    b.len = 0;
    b.cap = (Py_ssize_t)sizeof(b.small);
    /* "TypeName: " short, then "\n" prefix value for each value that is set (render_full) */
    rc = text_add(&b, args[0]);
    if (rc > 0) {
        rc = text_add(&b, args[1]);
    }
    for (i = 0; i < n && rc > 0; i++) {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, i), *v = PyTuple_GET_ITEM(values, i);
        PyObject *text = NULL, *by_member;
        if (v == Py_None || v == Py_False) {
            continue;
        }
        if ((PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) == 0) ||
            (PyDict_CheckExact(v) && PyDict_GET_SIZE(v) == 0)) {
            continue;
        }
        if (prefix == Py_None) { /* the duration line: the Python path */
            rc = 0;
            break;
        }
        if (PyUnicode_CheckExact(v)) {
            text = v;
            Py_INCREF(text);
        }
        else if (v == Py_True) {
            text = PyUnicode_FromString("true");
        }
        else if (PyFloat_CheckExact(v)) {
            text = PyObject_Repr(v);
        }
        else if (PyLong_CheckExact(v)) {
            text = PyObject_Str(v);
        }
        else if (PyLong_Check(v) &&
                 (by_member = PyDict_GetItemWithError(labels, (PyObject *)Py_TYPE(v))) != NULL) {
            if (!PyDict_CheckExact(by_member)) {
                rc = 0;
                break;
            }
            text = PyDict_GetItemWithError(by_member, v); /* borrowed */
            if (text == NULL) {
                rc = PyErr_Occurred() ? -1 : 0;
                break;
            }
            Py_INCREF(text);
        }
        else {
            rc = PyErr_Occurred() ? -1 : 0;
            break;
        }
        if (text == NULL) {
            rc = -1;
            break;
        }
        rc = text_put(&b, (const Py_UCS1 *)"\n", 1);
        if (rc > 0) {
            rc = text_add(&b, prefix);
        }
        if (rc > 0) {
            rc = text_add(&b, text);
        }
        Py_DECREF(text);
    }
    if (rc > 0) {
        res = term_counts(b.p, b.len, args[5], (StemTableObject *)args[6]);
    }
    else if (rc == 0) {
        res = Py_None;
        Py_INCREF(res);
    }
    if (b.p != b.small) {
        PyMem_Free(b.p);
    }
    return res;
}

/* The bytes of a CBOR head of major type `major` and argument v (shortest form) at p, or only
 * their count when p is NULL. */
static Py_ssize_t
put_head(char *p, int major, uint64_t v)
{
    int w = v < 24 ? 0 : v < 0x100 ? 1 : v < 0x10000 ? 2 : v < 0x100000000ULL ? 4 : 8, k;
    if (p != NULL) {
        int info = w == 0 ? (int)v : w == 1 ? 24 : w == 2 ? 25 : w == 4 ? 26 : 27;
        *p++ = (char)((major << 5) | info);
        for (k = 0; k < w; k++) {
            *p++ = (char)(v >> (8 * (w - 1 - k)));
        }
    }
    return 1 + w;
}

/* Append the checksum of ``cortex.kv.seal`` to b, a new bytes object of the payload and 4 more
 * bytes: big-endian zlib.crc32 of the payload. */
static int
seal_in_place(PyObject *b)
{
    Py_ssize_t n = PyBytes_GET_SIZE(b) - 4;
    char *p = PyBytes_AS_STRING(b);
    uint32_t c = crc32_of((const uint8_t *)p, n);
    p[n] = (char)(c >> 24);
    p[n + 1] = (char)(c >> 16);
    p[n + 2] = (char)(c >> 8);
    p[n + 3] = (char)c;
    return 0;
}

/* The sealed posting value [tf, length] of length (as an int) from memo (length -> {tf: value}),
 * made and remembered when missing; a new reference. */
static PyObject *
posting_value(PyObject *by_length, Py_ssize_t tf, Py_ssize_t length)
{
    /* a posting's tail (cortex.postings.entry_tail): tf and length, u32 big-endian each */
    PyObject *key, *value;
    unsigned char *p;
    if (tf < 1 || tf > length || (uint64_t)length > 0xFFFFFFFFu) {
        PyErr_SetString(PyExc_ValueError, "a posting needs 1 <= tf <= length < 2**32");
        return NULL;
    }
    key = PyLong_FromSsize_t(tf);
    if (key == NULL) {
        return NULL;
    }
    value = PyDict_GetItemWithError(by_length, key); /* borrowed */
    if (value != NULL || PyErr_Occurred()) {
        Py_XINCREF(value);
        Py_DECREF(key);
        return value;
    }
    value = PyBytes_FromStringAndSize(NULL, 8);
    if (value == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    p = (unsigned char *)PyBytes_AS_STRING(value);
    p[0] = (unsigned char)(tf >> 24);
    p[1] = (unsigned char)(tf >> 16);
    p[2] = (unsigned char)(tf >> 8);
    p[3] = (unsigned char)tf;
    p[4] = (unsigned char)((uint64_t)length >> 24);
    p[5] = (unsigned char)((uint64_t)length >> 16);
    p[6] = (unsigned char)((uint64_t)length >> 8);
    p[7] = (unsigned char)length;
    if (PyDict_SetItem(by_length, key, value) < 0) {
        Py_DECREF(value);
        value = NULL;
    }
    Py_DECREF(key);
    return value;
}

#define SMALL_TF 16

PyDoc_STRVAR(index_doc_doc,
             "index_doc(docs, doc_key, pending, memo, raw, version, distinct, counts, /)\n"
             "--\n\n"
             "``cortex.lexical.Indexer.add_counted`` in C: ``docs[doc_key]`` = the sealed "
             "LexDoc(version, length, distinct) and ``pending[term][raw]`` = the sealed posting "
             "value [count, length] of each term (one object per value through ``memo``: "
             "length -> {count: value}); returns the length (the sum of the counts). None, "
             "changing nothing, unless ``distinct`` is a list of strictly "
             "increasing ASCII str of 1..255 characters without U+0000, ``counts`` a list of as "
             "many ints >= 1 and ``version`` an int of 1..2**63-1.");

/* index_doc (fresh == 0) or index_new (fresh == 1): the same checks and document; a posting
 * goes into pending[term][raw], or onto the end of fresh[term] (a bytearray). */
static PyObject *
index_doc_into(PyObject *const *args, Py_ssize_t nargs, int fresh)
{
    PyObject *docs, *doc_key, *pending, *memo, *raw, *version, *distinct, *counts;
    PyObject *doc = NULL, *by_length = NULL, *len_obj = NULL, *res = NULL;
    PyObject *small[SMALL_TF] = {NULL};
    unsigned long long ver;
    Py_ssize_t m, i, length = 0, size;
    char *p;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "index_doc takes eight arguments");
        return NULL;
    }
    docs = args[0];
    doc_key = args[1];
    pending = args[2];
    memo = args[3];
    raw = args[4];
    version = args[5];
    distinct = args[6];
    counts = args[7];
    if (!PyDict_CheckExact(docs) || !PyBytes_CheckExact(doc_key) || !PyDict_CheckExact(pending) ||
        !PyDict_CheckExact(memo) || !PyBytes_CheckExact(raw) ||
        (fresh && PyBytes_GET_SIZE(raw) != 16)) {
        PyErr_SetString(PyExc_TypeError,
                        fresh ? "index_new(dict, bytes, dict, dict, bytes16, version, distinct, "
                                "counts)"
                              : "index_doc(dict, bytes, dict, dict, bytes, version, distinct, "
                                "counts)");
        return NULL;
    }
    if (!PyList_CheckExact(distinct) || !PyList_CheckExact(counts) || !PyLong_CheckExact(version)) {
        Py_RETURN_NONE;
    }
    m = PyList_GET_SIZE(distinct);
    if (PyList_GET_SIZE(counts) != m) {
        Py_RETURN_NONE;
    }
    ver = PyLong_AsUnsignedLongLong(version);
    if (ver == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* negative or too large: the Python path names it */
        Py_RETURN_NONE;
    }
    if (ver < 1 || ver > (unsigned long long)INT64_MAX) { /* the range of LexDoc.version */
        Py_RETURN_NONE;
    }
    /* check everything before changing anything; size the document meanwhile */
    size = 0;
    for (i = 0; i < m; i++) {
        PyObject *t = PyList_GET_ITEM(distinct, i), *c = PyList_GET_ITEM(counts, i);
        Py_ssize_t tf;
        if (!is_ascii_term(t, 255) ||
            (i > 0 && ascii_str_cmp(PyList_GET_ITEM(distinct, i - 1), t) >= 0)) {
            Py_RETURN_NONE;
        }
        if (!PyLong_CheckExact(c)) {
            Py_RETURN_NONE;
        }
        tf = PyLong_AsSsize_t(c);
        if (tf == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (tf < 1 || length > PY_SSIZE_T_MAX - tf) {
            Py_RETURN_NONE;
        }
        length += tf;
        size += put_head(NULL, 3, (uint64_t)PyUnicode_GET_LENGTH(t)) + PyUnicode_GET_LENGTH(t);
    }
    if ((uint64_t)length > 0xFFFFFFFFu) { /* a posting's tail holds the length in 32 bits */
        Py_RETURN_NONE;
    }
    /* {0: 1, 1: version, 2: length, 3: [terms]} (no key 3 without terms), sealed */
    size += 1 + 2 + 1 + put_head(NULL, 0, ver) + 1 + put_head(NULL, 0, (uint64_t)length);
    if (m > 0) {
        size += 1 + put_head(NULL, 4, (uint64_t)m);
    }
    doc = PyBytes_FromStringAndSize(NULL, size + 4);
    if (doc == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(doc);
    *p++ = (char)(m > 0 ? 0xa4 : 0xa3);
    *p++ = 0x00;
    *p++ = 0x01;
    *p++ = 0x01;
    p += put_head(p, 0, ver);
    *p++ = 0x02;
    p += put_head(p, 0, (uint64_t)length);
    if (m > 0) {
        *p++ = 0x03;
        p += put_head(p, 4, (uint64_t)m);
        for (i = 0; i < m; i++) {
            PyObject *t = PyList_GET_ITEM(distinct, i);
            Py_ssize_t tlen = PyUnicode_GET_LENGTH(t);
            p += put_head(p, 3, (uint64_t)tlen);
            memcpy(p, PyUnicode_1BYTE_DATA(t), (size_t)tlen);
            p += tlen;
        }
    }
    if (seal_in_place(doc) < 0) {
        goto done;
    }
    if (m > 0) {
        len_obj = PyLong_FromSsize_t(length);
        if (len_obj == NULL) {
            goto done;
        }
        by_length = PyDict_GetItemWithError(memo, len_obj); /* borrowed */
        if (by_length == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            by_length = PyDict_New();
            if (by_length == NULL || PyDict_SetItem(memo, len_obj, by_length) < 0) {
                goto done;
            }
        }
        else if (!PyDict_CheckExact(by_length)) {
            PyErr_SetString(PyExc_TypeError, "index_doc: memo must map lengths to dicts");
            by_length = NULL;
            goto done;
        }
        else {
            Py_INCREF(by_length);
        }
    }
    /* the items are read (and held) again: nothing above can have run Python code, but the
       second pass does not rely on it */
    for (i = 0; i < m; i++) {
        PyObject *term, *c, *value, *group;
        Py_ssize_t tf;
        int rc;
        if (i >= PyList_GET_SIZE(distinct) || i >= PyList_GET_SIZE(counts)) {
            goto changed;
        }
        term = PyList_GET_ITEM(distinct, i);
        c = PyList_GET_ITEM(counts, i);
        tf = PyLong_CheckExact(c) ? PyLong_AsSsize_t(c) : -1;
        if (tf < 1 || !PyUnicode_CheckExact(term)) {
            goto changed;
        }
        if (tf < SMALL_TF && small[tf] != NULL) {
            value = small[tf];
            Py_INCREF(value);
        }
        else {
            value = posting_value(by_length, tf, length);
            if (value == NULL) {
                goto done;
            }
            if (tf < SMALL_TF) {
                small[tf] = value;
                Py_INCREF(value);
            }
        }
        /* pending[term][raw] = value, or fresh[term] += raw + value */
        Py_INCREF(term);
        group = PyDict_GetItemWithError(pending, term); /* borrowed */
        if (group == NULL) {
            if (!PyErr_Occurred()) {
                group = fresh ? PyByteArray_FromStringAndSize(NULL, 0) : PyDict_New();
            }
            if (group != NULL && PyDict_SetItem(pending, term, group) < 0) {
                Py_CLEAR(group);
            }
        }
        else if (fresh ? !PyByteArray_CheckExact(group) : !PyDict_Check(group)) {
            PyErr_SetString(PyExc_TypeError,
                            fresh ? "index_new: fresh must map terms to bytearrays"
                                  : "index_doc: pending must map terms to dicts");
            group = NULL;
        }
        else {
            Py_INCREF(group);
        }
        if (group == NULL) {
            rc = -1;
        }
        else if (fresh) {
            Py_ssize_t at = PyByteArray_GET_SIZE(group);
            rc = PyByteArray_Resize(group, at + 24);
            if (rc == 0) {
                char *d = PyByteArray_AS_STRING(group) + at;
                memcpy(d, PyBytes_AS_STRING(raw), 16);
                memcpy(d + 16, PyBytes_AS_STRING(value), 8);
            }
        }
        else {
            rc = PyDict_SetItem(group, raw, value);
        }
        Py_XDECREF(group);
        Py_DECREF(term);
        Py_DECREF(value);
        if (rc < 0) {
            goto done;
        }
    }
    if (PyDict_SetItem(docs, doc_key, doc) < 0) {
        goto done;
    }
    res = PyLong_FromSsize_t(length);
    goto done;
changed:
    if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "index_doc: distinct or counts changed meanwhile");
    }
done:
    for (i = 0; i < SMALL_TF; i++) {
        Py_XDECREF(small[i]);
    }
    Py_XDECREF(by_length);
    Py_XDECREF(len_obj);
    Py_XDECREF(doc);
    return res;
}

static PyObject *
sp_index_doc(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return index_doc_into(args, nargs, 0);
}

PyDoc_STRVAR(index_new_doc,
             "index_new(docs, doc_key, fresh, memo, raw, version, distinct, counts, /)\n"
             "--\n\n"
             "``index_doc`` for a memory new to the index (``Indexer.add_counted(new=True)``): "
             "each posting is appended to ``fresh[term]``, a bytearray of id16 + tail8 "
             "records, instead of set in a dict.  ``raw`` must be 16 bytes.");

static PyObject *
sp_index_new(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return index_doc_into(args, nargs, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* The records of a new memory: its head and version, sealed (cortex/codec.py encode_new_pair,
 * cortex/kv.py seal), its index keys (cortex/keys.py index_keys) and its journal entry
 * (cortex/store.py _Journal.write_entry).  The Python code keeps the definitions: these return
 * the same bytes, or None wherever they are not sure (anything but the common case: ASCII text,
 * exact types, times in UTC), and the Python path then runs and names any error.  They never
 * raise for a bad record, only for bad arguments of their own (a plan of the wrong shape). */

/* Attribute names, interned once at import (never changed after). */
enum {
    A_ID,
    A_TYPE,
    A_CURRENT_VERSION,
    A_ACTOR_SCOPE,
    A_VISIBILITY,
    A_IMPORTANCE,
    A_TAGS,
    A_FRAMES,
    A_TOMBSTONE,
    A_CREATED_AT,
    A_LAST_UPDATED_AT,
    A_EMBEDDING_REF,
    A_FORMS,
    A_VERSION,
    A_DATA,
    A_HASH,
    A_CREATED_BY,
    A_EXPIRES_AT,
    A_CONFIDENCE,
    A_PROVENANCE,
    A_FORMS_OVERRIDE,
    A_VALID_FROM,
    A_VALID_UNTIL,
    A_SHORT,
    A_MEDIUM,
    A_VERB,
    A_OBJ_KIND,
    A_OBJ_REF,
    A_BYTES,
    A_DIGEST,
    A_HEAD,
    A_PINNED,
    A_TERMS,
    A_VECTOR,
    A_VERSION_BYTES,
    N_ATTRS,
};

static const char *const attr_names[N_ATTRS] = {
    "id",         "type",       "current_version", "actor_scope",    "visibility",
    "importance", "tags",       "frames",          "tombstone",      "created_at",
    "last_updated_at", "embedding_ref", "forms",   "version",        "data",
    "hash",       "created_by", "expires_at",      "confidence",     "provenance",
    "forms_override", "valid_from", "valid_until", "short",          "medium",
    "verb",       "obj_kind",   "obj_ref",         "bytes",          "digest",
    "head",       "pinned",     "terms",           "vector",         "version_bytes",
};

static PyObject *attr[N_ATTRS];

/* An output buffer: on the stack, moved to the heap when a record outgrows it. */
#define OUT_STACK 2048

typedef struct {
    char *p;
    Py_ssize_t len, cap;
    char stack[OUT_STACK];
} Out;

static void
out_init(Out *o)
{
    o->p = o->stack;
    o->len = 0;
    o->cap = OUT_STACK;
}

static void
out_free(Out *o)
{
    if (o->p != o->stack) {
        PyMem_Free(o->p);
    }
}

static int
out_reserve(Out *o, Py_ssize_t n)
{
    Py_ssize_t cap = o->cap;
    char *p;
    if (n <= cap - o->len) {
        return 0;
    }
    if (n > PY_SSIZE_T_MAX / 2 - o->len) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap - o->len < n) {
        cap *= 2;
    }
    if (o->p == o->stack) {
        p = PyMem_Malloc((size_t)cap);
        if (p != NULL) {
            memcpy(p, o->stack, (size_t)o->len);
        }
    }
    else {
        p = PyMem_Realloc(o->p, (size_t)cap);
    }
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static int
out_put(Out *o, const void *b, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0) {
        return -1;
    }
    memcpy(o->p + o->len, b, (size_t)n);
    o->len += n;
    return 0;
}

static inline int
out_byte(Out *o, uint8_t b)
{
    if (o->len < o->cap) {
        o->p[o->len++] = (char)b;
        return 0;
    }
    return out_put(o, &b, 1);
}

/* A CBOR head in its shortest form (codec._head). */
static int
out_head(Out *o, int major, uint64_t n)
{
    uint8_t b[9];
    int w, k;
    if (n < 24) {
        b[0] = (uint8_t)((major << 5) | (int)n);
        return out_put(o, b, 1);
    }
    w = n < 0x100 ? 1 : n < 0x10000 ? 2 : n < 0x100000000ULL ? 4 : 8;
    b[0] = (uint8_t)((major << 5) | (w == 1 ? 24 : w == 2 ? 25 : w == 4 ? 26 : 27));
    for (k = 0; k < w; k++) {
        b[1 + k] = (uint8_t)(n >> (8 * (w - 1 - k)));
    }
    return out_put(o, b, 1 + w);
}

/* A CBOR integer (codec._int). */
static int
out_int(Out *o, long long v)
{
    if (v >= 0) {
        return out_head(o, 0, (uint64_t)v);
    }
    return out_head(o, 1, (uint64_t)(-1 - v));
}

/* The encoders below return 1 when they wrote the value, 0 when it is not a common case (the
 * caller returns None), -1 on an error (out of memory). */

/* An exact str that is NFC, of 1..max bytes of UTF-8 (codec._Text.enc without its check): ASCII
 * directly; other text when unicodedata says it is NFC (else the Python path normalizes it),
 * encoded here (a lone surrogate: the Python path names it). */
static int
out_text(Out *o, PyObject *s, Py_ssize_t max)
{
    Py_ssize_t len, n = 0, i;
    int kind;
    const void *data;
    char *p;
    if (!PyUnicode_CheckExact(s)) {
        return 0;
    }
    len = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) {
        if (len < 1 || len > max) {
            return 0;
        }
        if (out_head(o, 3, (uint64_t)len) < 0 || out_put(o, PyUnicode_1BYTE_DATA(s), len) < 0) {
            return -1;
        }
        return 1;
    }
    kind = PyUnicode_KIND(s);
    data = PyUnicode_DATA(s);
    /* every character below U+0300 is NFC_QC=Yes with combining class 0 (see read_text) */
    if (kind != PyUnicode_1BYTE_KIND && !plainly_nfc(s)) {
        PyObject *args[2] = {str_NFC, s};
        PyObject *ok = PyObject_Vectorcall(is_normalized, args, 2, NULL);
        int nfc;
        if (ok == NULL) {
            return -1;
        }
        nfc = ok == Py_True;
        Py_DECREF(ok);
        if (!nfc) {
            return 0;
        }
    }
    for (i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            return 0;
        }
        n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    if (n > max) { /* n >= 1: not ASCII, so not empty */
        return 0;
    }
    if (out_head(o, 3, (uint64_t)n) < 0 || out_reserve(o, n) < 0) {
        return -1;
    }
    p = o->p + o->len;
    for (i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            *p++ = (char)c;
        }
        else if (c < 0x800) {
            *p++ = (char)(0xC0 | (c >> 6));
            *p++ = (char)(0x80 | (c & 0x3F));
        }
        else if (c < 0x10000) {
            *p++ = (char)(0xE0 | (c >> 12));
            *p++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *p++ = (char)(0x80 | (c & 0x3F));
        }
        else {
            *p++ = (char)(0xF0 | (c >> 18));
            *p++ = (char)(0x80 | ((c >> 12) & 0x3F));
            *p++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *p++ = (char)(0x80 | (c & 0x3F));
        }
    }
    o->len += n;
    return 1;
}

/* Days from 0001-01-01 (day 1) to y-m-d in the proleptic Gregorian calendar (date.toordinal). */
static long long
ordinal(int y, int m, int d)
{
    static const int before[13] = {0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    long long p = (long long)y - 1;
    long long n = p * 365 + p / 4 - p / 100 + p / 400 + before[m] + d;
    if (m > 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) {
        n += 1;
    }
    return n;
}

#define EPOCH_ORDINAL 719163 /* date(1970, 1, 1).toordinal() */

/* An exact datetime whose tzinfo is the UTC singleton: microseconds since the epoch (every
 * such time lies in the years 1..9999 of UTC, the range _Time allows). */
static int
time_micros(PyObject *v, long long *us)
{
    long long days;
    if (!PyDateTime_CheckExact(v) || PyDateTime_DATE_GET_TZINFO(v) != PyDateTime_TimeZone_UTC) {
        return 0;
    }
    days = ordinal(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v), PyDateTime_GET_DAY(v)) -
           EPOCH_ORDINAL;
    *us = (((days * 24 + PyDateTime_DATE_GET_HOUR(v)) * 60 + PyDateTime_DATE_GET_MINUTE(v)) * 60 +
           PyDateTime_DATE_GET_SECOND(v)) *
              1000000LL +
          PyDateTime_DATE_GET_MICROSECOND(v);
    return 1;
}

static int
out_time(Out *o, PyObject *v)
{
    long long us;
    int rc = time_micros(v, &us);
    if (rc <= 0) {
        return rc;
    }
    return out_int(o, us) < 0 ? -1 : 1;
}

/* A member of exactly the enum class ``cls`` (an int with a code 0..255): its code. */
static int
out_member(Out *o, PyObject *v, PyObject *cls)
{
    long code;
    if ((PyObject *)Py_TYPE(v) != cls || !PyLong_Check(v)) {
        return 0;
    }
    code = PyLong_AsLong(v);
    if (code == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (code < 0 || code > 255) {
        return 0;
    }
    return out_head(o, 0, (uint64_t)code) < 0 ? -1 : 1;
}

/* An exact int in lo..hi (lo >= 0). */
static int
exact_int(PyObject *v, long long lo, long long hi, long long *out)
{
    int overflow;
    long long x;
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < lo || x > hi) {
        return 0;
    }
    *out = x;
    return 1;
}

/* An exact float in [0, 1] in the shortest IEEE width that keeps it (codec._unit.enc). */
static int
out_unit(Out *o, PyObject *v)
{
    uint8_t b[9];
    double x;
    int n;
    if (!PyFloat_CheckExact(v)) {
        return 0;
    }
    x = PyFloat_AS_DOUBLE(v);
    if (!(x >= 0.0 && x <= 1.0)) {
        return 0;
    }
    if (x == 0.0) {
        x = 0.0; /* -0.0 becomes 0.0: equal values, equal bytes */
    }
    if (fits_half(x)) {
        b[0] = 0xF9;
        n = 3;
        if (PyFloat_Pack2(x, (char *)b + 1, 0) < 0) {
            return -1;
        }
    }
    else if ((double)(float)x == x) {
        b[0] = 0xFA;
        n = 5;
        if (PyFloat_Pack4(x, (char *)b + 1, 0) < 0) {
            return -1;
        }
    }
    else {
        b[0] = 0xFB;
        n = 9;
        if (PyFloat_Pack8(x, (char *)b + 1, 0) < 0) {
            return -1;
        }
    }
    return out_put(o, b, n) < 0 ? -1 : 1;
}

/* ``payload || crc32(payload)`` (4 bytes, big-endian): kv.seal. */
static PyObject *
sealed(const char *payload, Py_ssize_t n)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, n + 4);
    uint32_t crc;
    char *p;
    if (out == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(out);
    memcpy(p, payload, (size_t)n);
    crc = crc32_of((const uint8_t *)payload, n);
    p[n] = (char)(crc >> 24);
    p[n + 1] = (char)(crc >> 16);
    p[n + 2] = (char)(crc >> 8);
    p[n + 3] = (char)crc;
    return out;
}

PyDoc_STRVAR(seal_doc,
             "seal(payload, /)\n--\n\n"
             "``payload + zlib.crc32(payload).to_bytes(4, 'big')`` (cortex.kv.seal) for bytes.");

static PyObject *
sp_seal(PyObject *module, PyObject *payload)
{
    (void)module;
    if (!PyBytes_CheckExact(payload)) {
        PyErr_SetString(PyExc_TypeError, "seal: payload must be bytes");
        return NULL;
    }
    return sealed(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload));
}

/* The plan of encode_new_pair (built once by cortex/codec.py, see _NEW_PAIR_PLAN). */
enum {
    NP_HEAD,           /* the Head class */
    NP_VERSION,        /* the Version class */
    NP_MEMORY_ID,      /* the MemoryId class */
    NP_MEMORY_TYPE,    /* enum classes */
    NP_VISIBILITY,
    NP_FORMS,          /* the Forms class */
    NP_FRAME_REF,      /* the FrameRef class */
    NP_VERB,
    NP_OBJ_KIND,
    NP_PROVENANCE,     /* DEFAULT_PROVENANCE, and its bytes */
    NP_PROVENANCE_BYTES,
    NP_HEAD_SV,        /* key 0 and the schema version, of a head and of a version */
    NP_VERSION_SV,
    NP_HEAD_FIELDS,    /* Head.__struct_fields__, Version.__struct_fields__ */
    NP_VERSION_FIELDS,
    NP_ASTUPLE,        /* msgspec.structs.astuple: a struct's fields in their order */
    NP_SHORT_MAX,      /* LIMITS: short text, text, tags, tag, frames, obj_ref, importance */
    NP_TEXT_MAX,
    NP_TAGS_MAX,
    NP_TAG_MAX,
    NP_FRAMES_MAX,
    NP_OBJ_REF_MAX,
    NP_IMPORTANCE_MAX,
    NP_DATA_MAX,       /* a version's data, bytes */
    NP_LEN,
};

typedef struct {
    PyObject *obj[NP_SHORT_MAX];
    Py_ssize_t lim[NP_LEN - NP_SHORT_MAX];
} PairPlan;

static int
pair_plan(PyObject *t, PairPlan *pl)
{
    Py_ssize_t i;
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != NP_LEN) {
        PyErr_SetString(PyExc_TypeError, "encode_new_pair: bad plan");
        return -1;
    }
    for (i = 0; i < NP_SHORT_MAX; i++) {
        PyObject *x = PyTuple_GET_ITEM(t, i);
        int ok = i <= NP_OBJ_KIND                             ? PyType_Check(x)
                 : i == NP_PROVENANCE                         ? 1
                 : i == NP_HEAD_FIELDS || i == NP_VERSION_FIELDS ? PyTuple_CheckExact(x)
                 : i == NP_ASTUPLE                            ? PyCallable_Check(x)
                                                              : PyBytes_CheckExact(x);
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "encode_new_pair: bad plan");
            return -1;
        }
        pl->obj[i] = x;
    }
    for (i = NP_SHORT_MAX; i < NP_LEN; i++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (v < 1 || (i == NP_TAG_MAX && v > 255)) {
            PyErr_SetString(PyExc_ValueError, "encode_new_pair: bad limit in the plan");
            return -1;
        }
        pl->lim[i - NP_SHORT_MAX] = v;
    }
    return 1;
}

#define LIM(pl, k) ((pl)->lim[(k) - NP_SHORT_MAX])

/* Equal exact strs (both checked already: the comparison cannot fail). */
static int
same_text(PyObject *a, PyObject *b)
{
    return PyUnicode_Compare(a, b) == 0;
}

/* A head's tags (TAGS): a list or tuple of distinct NFC strs of 1..TAG_MAX bytes. */
static int
out_tags(Out *o, PyObject *tags, const PairPlan *pl)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(tags), i, j;
    int rc;
    if (n > LIM(pl, NP_TAGS_MAX)) {
        return 0;
    }
    if (out_head(o, 4, (uint64_t)n) < 0) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(tags, i);
        rc = out_text(o, t, LIM(pl, NP_TAG_MAX));
        if (rc <= 0) {
            return rc;
        }
        for (j = 0; j < i; j++) {
            if (same_text(t, PySequence_Fast_GET_ITEM(tags, j))) {
                return 0;
            }
        }
    }
    return 1;
}

/* A head's frames (FRAMES): a tuple of distinct FrameRefs of enum members and NFC references;
 * each one a map {1: verb, 2: obj_kind, 3: obj_ref}. */
static int
out_frames(Out *o, PyObject *frames, const PairPlan *pl)
{
    Py_ssize_t n = PyTuple_GET_SIZE(frames), i, j, k;
    PyObject *parts[16][3] = {{NULL}}; /* verb, obj_kind, obj_ref of each frame */
    int rc = 1;
    if (n > LIM(pl, NP_FRAMES_MAX) || n > 16) {
        return 0;
    }
    if (out_head(o, 4, (uint64_t)n) < 0) {
        return -1;
    }
    for (i = 0; i < n && rc > 0; i++) {
        PyObject *f = PyTuple_GET_ITEM(frames, i), **x = parts[i];
        if ((PyObject *)Py_TYPE(f) != pl->obj[NP_FRAME_REF]) {
            rc = 0;
            break;
        }
        for (k = 0; k < 3; k++) {
            x[k] = PyObject_GetAttr(f, attr[A_VERB + k]);
            if (x[k] == NULL) {
                rc = -1;
                break;
            }
        }
        if (rc < 0) {
            break;
        }
        if (out_byte(o, 0xA3) < 0 || out_byte(o, 0x01) < 0) {
            rc = -1;
        }
        else if ((rc = out_member(o, x[0], pl->obj[NP_VERB])) > 0) {
            if (out_byte(o, 0x02) < 0) {
                rc = -1;
            }
            else if ((rc = out_member(o, x[1], pl->obj[NP_OBJ_KIND])) > 0) {
                rc = out_byte(o, 0x03) < 0 ? -1 : out_text(o, x[2], LIM(pl, NP_OBJ_REF_MAX));
            }
        }
        for (j = 0; j < i && rc > 0; j++) {
            if (parts[j][0] == x[0] && parts[j][1] == x[1] && same_text(parts[j][2], x[2])) {
                rc = 0; /* a repeated frame: the generic encoder names it */
            }
        }
    }
    for (i = 0; i < n; i++) {
        for (k = 0; k < 3; k++) {
            Py_XDECREF(parts[i][k]);
        }
    }
    return rc;
}

/* Forms {1: short, 2: medium}. */
static int
out_forms(Out *o, PyObject *forms, const PairPlan *pl)
{
    PyObject *s, *m;
    int rc;
    if ((PyObject *)Py_TYPE(forms) != pl->obj[NP_FORMS]) {
        return 0;
    }
    s = PyObject_GetAttr(forms, attr[A_SHORT]);
    if (s == NULL) {
        return -1;
    }
    m = PyObject_GetAttr(forms, attr[A_MEDIUM]);
    if (m == NULL) {
        Py_DECREF(s);
        return -1;
    }
    if (out_byte(o, 0xA2) < 0 || out_byte(o, 0x01) < 0) {
        rc = -1;
    }
    else if ((rc = out_text(o, s, LIM(pl, NP_TEXT_MAX))) > 0) {
        rc = out_byte(o, 0x02) < 0 ? -1 : out_text(o, m, LIM(pl, NP_TEXT_MAX));
    }
    Py_DECREF(s);
    Py_DECREF(m);
    return rc;
}

#define HEAD_FIELDS 13
#define VERSION_FIELDS 14

/* The fields of Head and Version in their declared order (msgspec.structs.astuple's order). */
static const int head_attrs[HEAD_FIELDS] = {
    A_ID,         A_TYPE, A_CURRENT_VERSION, A_ACTOR_SCOPE, A_VISIBILITY,
    A_IMPORTANCE, A_TAGS, A_FRAMES,          A_TOMBSTONE,   A_CREATED_AT,
    A_LAST_UPDATED_AT, A_EMBEDDING_REF, A_FORMS,
};

static const int version_attrs[VERSION_FIELDS] = {
    A_ID,         A_VERSION,    A_TYPE,       A_DATA,           A_HASH,
    A_CREATED_AT, A_CREATED_BY, A_EXPIRES_AT, A_CONFIDENCE,     A_PROVENANCE,
    A_FORMS,      A_FORMS_OVERRIDE, A_VALID_FROM, A_VALID_UNTIL,
};

/* Whether ``names`` (a __struct_fields__ tuple) are the fields ``want`` names, in order. */
static int
fields_are(PyObject *names, const int *want, Py_ssize_t n)
{
    Py_ssize_t i;
    if (PyTuple_GET_SIZE(names) != n) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(names, i);
        if (x != attr[want[i]] &&
            (!PyUnicode_CheckExact(x) || PyUnicode_Compare(x, attr[want[i]]) != 0)) {
            return 0;
        }
    }
    return 1;
}

/* The fields of a struct as a tuple of ``n`` (msgspec.structs.astuple); None when not such. */
static PyObject *
fields_of(PyObject *astuple, PyObject *obj, Py_ssize_t n)
{
    PyObject *t = PyObject_CallOneArg(astuple, obj);
    if (t != NULL && (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != n)) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_TypeError, "encode_new_pair: astuple gave no tuple of the fields");
        return NULL;
    }
    return t;
}

/* Where the head's encoding holds its forms (the version holds the same bytes). */
typedef struct {
    Py_ssize_t at, len;
} Part;

/* The head's map (key 0 and the fields in key order); h[] holds its fields. */
static int
encode_head(Out *o, PyObject *const *h, PyObject *id_bytes, const PairPlan *pl, Part *forms)
{
    long long n;
    int rc, count = 9; /* the schema version, six fields, the two times */
    PyObject *tags = h[6], *frames = h[7];
    forms->at = forms->len = 0;
    /* the map head is written last, over this byte (fewer than 24 entries: one byte) */
    if (out_byte(o, 0) < 0 || out_put(o, PyBytes_AS_STRING(pl->obj[NP_HEAD_SV]),
                                      PyBytes_GET_SIZE(pl->obj[NP_HEAD_SV])) < 0) {
        return -1;
    }
    if (out_byte(o, 0x01) < 0 || out_byte(o, 0x50) < 0 ||
        out_put(o, PyBytes_AS_STRING(id_bytes), 16) < 0 || out_byte(o, 0x02) < 0) {
        return -1;
    }
    if ((rc = out_member(o, h[1], pl->obj[NP_MEMORY_TYPE])) <= 0) {
        return rc;
    }
    if (!exact_int(h[2], 1, LLONG_MAX, &n)) {
        return 0;
    }
    if (out_byte(o, 0x03) < 0 || out_head(o, 0, (uint64_t)n) < 0 || out_byte(o, 0x04) < 0) {
        return -1;
    }
    if ((rc = out_text(o, h[3], LIM(pl, NP_SHORT_MAX))) <= 0) {
        return rc;
    }
    if (out_byte(o, 0x05) < 0) {
        return -1;
    }
    if ((rc = out_member(o, h[4], pl->obj[NP_VISIBILITY])) <= 0) {
        return rc;
    }
    if (!exact_int(h[5], 0, LIM(pl, NP_IMPORTANCE_MAX), &n)) {
        return 0;
    }
    if (out_byte(o, 0x06) < 0 || out_head(o, 0, (uint64_t)n) < 0) {
        return -1;
    }
    if (tags != Py_None) {
        if (!PyList_CheckExact(tags) && !PyTuple_CheckExact(tags)) {
            return 0;
        }
        if (PySequence_Fast_GET_SIZE(tags) > 0) {
            if (out_byte(o, 0x07) < 0) {
                return -1;
            }
            if ((rc = out_tags(o, tags, pl)) <= 0) {
                return rc;
            }
            count++;
        }
    }
    if (frames != Py_None) {
        if (!PyList_CheckExact(frames) && !PyTuple_CheckExact(frames)) {
            return 0;
        }
        if (PySequence_Fast_GET_SIZE(frames) > 0) {
            /* a tuple of its own: nothing run meanwhile can change it */
            PyObject *snap = PySequence_Tuple(frames);
            if (snap == NULL) {
                return -1;
            }
            rc = out_byte(o, 0x08) < 0 ? -1 : out_frames(o, snap, pl);
            Py_DECREF(snap);
            if (rc <= 0) {
                return rc;
            }
            count++;
        }
    }
    if (h[8] != Py_None || h[11] != Py_None) { /* a tombstone or a vector: not a new memory */
        return 0;
    }
    if (out_byte(o, 0x0A) < 0) {
        return -1;
    }
    if ((rc = out_time(o, h[9])) <= 0) {
        return rc;
    }
    if (out_byte(o, 0x0B) < 0) {
        return -1;
    }
    if ((rc = out_time(o, h[10])) <= 0) {
        return rc;
    }
    if (h[12] != Py_None) {
        if (out_byte(o, 0x0D) < 0) {
            return -1;
        }
        forms->at = o->len;
        if ((rc = out_forms(o, h[12], pl)) <= 0) {
            return rc;
        }
        forms->len = o->len - forms->at;
        count++;
    }
    o->p[0] = (char)(0xA0 | count);
    return 1;
}

/* The version's map; v[] holds its fields, h[] the head's (the shared ones are checked), and
 * ``head`` the head's encoding, whose forms it repeats. */
static int
encode_version(Out *o, PyObject *const *v, PyObject *const *h, PyObject *id_bytes,
               const PairPlan *pl, const char *head, Part forms)
{
    long long n, head_n;
    int rc, count = 10; /* the schema version, seven fields, confidence and provenance */
    PyObject *data = v[3], *hash = v[4];
    Py_ssize_t size;
    if (v[0] != h[0] || v[2] != h[1] || v[10] != h[12]) { /* id, type and forms are shared */
        return 0;
    }
    if (!exact_int(v[1], 1, LLONG_MAX, &n) || !exact_int(h[2], 1, LLONG_MAX, &head_n) ||
        n != head_n) {
        return 0;
    }
    if (!PyBytes_CheckExact(data) || !PyBytes_CheckExact(hash) || PyBytes_GET_SIZE(hash) != 32) {
        return 0;
    }
    size = PyBytes_GET_SIZE(data);
    if (size < 1 || size > LIM(pl, NP_DATA_MAX)) {
        return 0;
    }
    if (out_reserve(o, size + 256) < 0) {
        return -1;
    }
    if (out_byte(o, 0) < 0 || out_put(o, PyBytes_AS_STRING(pl->obj[NP_VERSION_SV]),
                                      PyBytes_GET_SIZE(pl->obj[NP_VERSION_SV])) < 0) {
        return -1;
    }
    if (out_byte(o, 0x01) < 0 || out_byte(o, 0x50) < 0 ||
        out_put(o, PyBytes_AS_STRING(id_bytes), 16) < 0 || out_byte(o, 0x02) < 0 ||
        out_head(o, 0, (uint64_t)n) < 0 || out_byte(o, 0x03) < 0) {
        return -1;
    }
    if ((rc = out_member(o, v[2], pl->obj[NP_MEMORY_TYPE])) <= 0) {
        return rc;
    }
    if (out_byte(o, 0x04) < 0 || out_head(o, 2, (uint64_t)size) < 0 ||
        out_put(o, PyBytes_AS_STRING(data), size) < 0 || out_byte(o, 0x05) < 0 ||
        out_byte(o, 0x58) < 0 || out_byte(o, 0x20) < 0 ||
        out_put(o, PyBytes_AS_STRING(hash), 32) < 0 || out_byte(o, 0x06) < 0) {
        return -1;
    }
    if ((rc = out_time(o, v[5])) <= 0) {
        return rc;
    }
    if (out_byte(o, 0x07) < 0) {
        return -1;
    }
    if ((rc = out_text(o, v[6], LIM(pl, NP_SHORT_MAX))) <= 0) {
        return rc;
    }
    if (v[7] != Py_None) {
        if (out_byte(o, 0x08) < 0) {
            return -1;
        }
        if ((rc = out_time(o, v[7])) <= 0) {
            return rc;
        }
        count++;
    }
    if (out_byte(o, 0x09) < 0) {
        return -1;
    }
    if ((rc = out_unit(o, v[8])) <= 0) {
        return rc;
    }
    if (v[9] != pl->obj[NP_PROVENANCE]) {
        return 0;
    }
    if (out_byte(o, 0x0A) < 0 || out_put(o, PyBytes_AS_STRING(pl->obj[NP_PROVENANCE_BYTES]),
                                         PyBytes_GET_SIZE(pl->obj[NP_PROVENANCE_BYTES])) < 0) {
        return -1;
    }
    if (forms.len > 0) { /* the same forms as the head's, encoded there */
        if (out_byte(o, 0x0B) < 0 || out_put(o, head + forms.at, forms.len) < 0) {
            return -1;
        }
        count++;
    }
    if (v[11] == Py_True) {
        if (out_byte(o, 0x0C) < 0 || out_byte(o, 0xF5) < 0) {
            return -1;
        }
        count++;
    }
    else if (v[11] != Py_False) {
        return 0;
    }
    if (v[12] != Py_None) {
        if (out_byte(o, 0x0D) < 0) {
            return -1;
        }
        if ((rc = out_time(o, v[12])) <= 0) {
            return rc;
        }
        count++;
    }
    if (v[13] != Py_None) {
        if (out_byte(o, 0x0E) < 0) {
            return -1;
        }
        if ((rc = out_time(o, v[13])) <= 0) {
            return rc;
        }
        count++;
    }
    o->p[0] = (char)(0xA0 | count);
    return 1;
}

/* -- records by their plan: the encoder of StructCodec.encode in C (cortex/codec.py keeps the
 * definition).  Each function returns 1 (written), 0 (not the common case: nothing promised,
 * the Python encoder runs and names any error) or -1 (an exception). */

static int enc_record(Out *o, PlanObject *pl, PyObject *v, int depth);

static int
enc_value(Out *o, const Spec *s, PyObject *x, int depth)
{
    long long n;
    switch (s->kind) {
    case K_TEXT:
        if (s->check != CHECK_NONE) {
            /* ASCII only: the checks read the UTF-8 bytes */
            const uint8_t *p;
            Py_ssize_t len;
            if (!PyUnicode_CheckExact(x) || !PyUnicode_IS_ASCII(x)) {
                return 0;
            }
            p = PyUnicode_1BYTE_DATA(x);
            len = PyUnicode_GET_LENGTH(x);
            if (s->check == CHECK_URI ? !uri_ok(p, len, s->names) : !decimal_ok(p, len)) {
                return 0;
            }
        }
        return out_text(o, x, s->max_bytes);
    case K_BYTES: {
        Py_ssize_t len;
        if (!PyBytes_CheckExact(x)) {
            return 0;
        }
        len = PyBytes_GET_SIZE(x);
        if ((s->exact >= 0 ? len != s->exact : len == 0) || len > s->max_bytes) {
            return 0;
        }
        return out_head(o, 2, (uint64_t)len) < 0 || out_put(o, PyBytes_AS_STRING(x), len) < 0
                   ? -1
                   : 1;
    }
    case K_INT:
        if (!exact_int(x, s->lo, s->hi, &n)) {
            return 0;
        }
        return out_int(o, n) < 0 ? -1 : 1;
    case K_UNIT:
        return out_unit(o, x);
    case K_BOOL:
        if (x != Py_True) {
            return 0;
        }
        return out_byte(o, 0xF5) < 0 ? -1 : 1;
    case K_TIME:
        if (!time_micros(x, &n) || n < s->lo || n > s->hi) {
            return 0;
        }
        return out_int(o, n) < 0 ? -1 : 1;
    case K_ENUM: {
        /* a member of its class, its code (an exact int) or its label, as the Python encoder */
        long code;
        if (PyUnicode_CheckExact(x)) {
            PyObject *c = s->labels != NULL ? PyDict_GetItemWithError(s->labels, x) : NULL;
            if (c == NULL) {
                PyErr_Clear();
                return 0;
            }
            x = c;
        }
        else if (!PyLong_Check(x) || PyBool_Check(x)) {
            return 0;
        }
        code = PyLong_AsLong(x);
        if (code == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (code < 0 || code >= s->n_members || s->members[code] == NULL ||
            (!PyLong_CheckExact(x) && s->members[code] != x)) {
            return 0;
        }
        return out_head(o, 0, (uint64_t)code) < 0 ? -1 : 1;
    }
    case K_LIST: {
        Py_ssize_t i, j, len, *at;
        int rc = 1;
        if (!PyList_CheckExact(x) && !PyTuple_CheckExact(x)) {
            return 0;
        }
        x = PySequence_Tuple(x); /* a tuple of its own: nothing run meanwhile can change it */
        if (x == NULL) {
            return -1;
        }
        len = PyTuple_GET_SIZE(x);
        if (len > s->max_items || len > 4096) {
            Py_DECREF(x);
            return 0;
        }
        at = PyMem_Malloc((size_t)(len + 1) * sizeof(Py_ssize_t));
        if (at == NULL) {
            Py_DECREF(x);
            PyErr_NoMemory();
            return -1;
        }
        if (out_head(o, 4, (uint64_t)len) < 0) {
            rc = -1;
        }
        for (i = 0; i < len && rc > 0; i++) {
            at[i] = o->len;
            rc = enc_value(o, s->item, PyTuple_GET_ITEM(x, i), depth);
        }
        at[len] = o->len;
        /* unique: no two items encode alike (an accepted item's encoding is its value's) */
        for (i = 0; i < len && rc > 0 && s->unique; i++) {
            for (j = i + 1; j < len; j++) {
                if (at[i + 1] - at[i] == at[j + 1] - at[j] &&
                    memcmp(o->p + at[i], o->p + at[j], (size_t)(at[i + 1] - at[i])) == 0) {
                    rc = 0;
                    break;
                }
            }
        }
        PyMem_Free(at);
        Py_DECREF(x);
        return rc;
    }
    case K_RECORD:
        return enc_record(o, (PlanObject *)s->plan, x, depth + 1);
    default: /* maps, pairs and ids: the Python encoder */
        return 0;
    }
}

/* Whether x is what the encoder leaves out for s (None, an empty list or map, False): 1; 0 when
 * it is written; -1 when it is of a type the C path does not take. */
static int
enc_empty(const Spec *s, PyObject *x)
{
    if (x == Py_None) {
        return 1;
    }
    switch (s->kind) {
    case K_LIST:
        if (PyList_CheckExact(x)) {
            return PyList_GET_SIZE(x) == 0;
        }
        if (PyTuple_CheckExact(x)) {
            return PyTuple_GET_SIZE(x) == 0;
        }
        return -1;
    case K_MAP:
        return PyDict_CheckExact(x) ? PyDict_GET_SIZE(x) == 0 : -1;
    case K_BOOL:
        return x == Py_False;
    default:
        return 0;
    }
}

static int
enc_record(Out *o, PlanObject *pl, PyObject *v, int depth)
{
    Py_ssize_t i, head_at;
    int count = 0, rc = 1;
    if (depth > MAX_DEPTH || (PyObject *)Py_TYPE(v) != pl->cls || pl->nfields >= 23) {
        return 0;
    }
    head_at = o->len;
    if (out_byte(o, 0xA0) < 0) { /* the map head, its count filled in below */
        return -1;
    }
    if (pl->has_sv) {
        if (out_byte(o, 0x00) < 0 || out_head(o, 0, pl->sv) < 0) {
            return -1;
        }
        count++;
    }
    for (i = 0; i < pl->nfields && rc > 0; i++) {
        const Field *f = &pl->fields[i];
        PyObject *x = PyObject_GetAttr(v, PyTuple_GET_ITEM(pl->kwnames, f->slot));
        int empty;
        if (x == NULL) {
            return -1;
        }
        empty = enc_empty(&f->spec, x);
        if (empty != 0) {
            rc = empty < 0 || !f->absent_ok ? 0 : 1; /* a required field: Python names it */
        }
        else if (out_head(o, 0, f->key) < 0) {
            rc = -1;
        }
        else {
            rc = enc_value(o, &f->spec, x, depth);
            count++;
        }
        Py_DECREF(x);
    }
    if (rc > 0) {
        o->p[head_at] = (char)(0xA0 | count);
    }
    return rc;
}

PyDoc_STRVAR(encode_doc,
             "encode(plan, value, /)\n--\n\n"
             "``StructCodec.encode`` of ``value`` by its plan in the common case (exact types, "
             "NFC text, enum members, times in UTC, no maps): the canonical bytes; None "
             "otherwise (the Python encoder then runs and names any error).");

static PyObject *
sp_encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Out o;
    PyObject *res;
    int rc;
    (void)module;
    if (nargs != 2 || !PyObject_TypeCheck(args[0], &Plan_Type)) {
        PyErr_SetString(PyExc_TypeError, "encode(plan, value)");
        return NULL;
    }
    out_init(&o);
    rc = enc_record(&o, (PlanObject *)args[0], args[1], 0);
    if (rc < 0) {
        out_free(&o);
        return NULL;
    }
    if (rc == 0) {
        out_free(&o);
        Py_RETURN_NONE;
    }
    res = PyBytes_FromStringAndSize(o.p, o.len);
    out_free(&o);
    return res;
}

PyDoc_STRVAR(encode_new_pair_doc,
             "encode_new_pair(head, version, plan, /)\n--\n\n"
             "``(seal(encode_head(head)), seal(encode_version(version)))`` of a new memory's "
             "records in the common case (NFC text, exact types, times in UTC, the default "
             "provenance, the id, type and forms shared); None otherwise.  ``plan`` is "
             "cortex.codec._NEW_PAIR_PLAN.");

static PyObject *
sp_encode_new_pair(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *head, *version, *ht = NULL, *vt = NULL, *id_bytes = NULL, *hs = NULL, *vs;
    PyObject *const *h, *const *v;
    PairPlan pl;
    Part forms;
    Out o;
    int rc;
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_new_pair(head, version, plan) takes three arguments");
        return NULL;
    }
    head = args[0];
    version = args[1];
    if (pair_plan(args[2], &pl) < 0) {
        return NULL;
    }
    if ((PyObject *)Py_TYPE(head) != pl.obj[NP_HEAD] ||
        (PyObject *)Py_TYPE(version) != pl.obj[NP_VERSION] ||
        !fields_are(pl.obj[NP_HEAD_FIELDS], head_attrs, HEAD_FIELDS) ||
        !fields_are(pl.obj[NP_VERSION_FIELDS], version_attrs, VERSION_FIELDS)) {
        Py_RETURN_NONE;
    }
    ht = fields_of(pl.obj[NP_ASTUPLE], head, HEAD_FIELDS);
    if (ht == NULL) {
        return NULL;
    }
    vt = fields_of(pl.obj[NP_ASTUPLE], version, VERSION_FIELDS);
    if (vt == NULL) {
        Py_DECREF(ht);
        return NULL;
    }
    h = &PyTuple_GET_ITEM(ht, 0);
    v = &PyTuple_GET_ITEM(vt, 0);
    out_init(&o);
    rc = 0;
    if ((PyObject *)Py_TYPE(h[0]) != pl.obj[NP_MEMORY_ID]) {
        goto done;
    }
    id_bytes = PyObject_GetAttr(h[0], attr[A_BYTES]);
    if (id_bytes == NULL) {
        rc = -1;
        goto done;
    }
    if (!PyBytes_CheckExact(id_bytes) || PyBytes_GET_SIZE(id_bytes) != 16) {
        goto done;
    }
    rc = encode_head(&o, h, id_bytes, &pl, &forms);
    if (rc <= 0) {
        goto done;
    }
    hs = sealed(o.p, o.len);
    if (hs == NULL) {
        rc = -1;
        goto done;
    }
    o.len = 0;
    rc = encode_version(&o, v, h, id_bytes, &pl, PyBytes_AS_STRING(hs), forms);
    if (rc <= 0) {
        goto done;
    }
    vs = sealed(o.p, o.len);
    if (vs == NULL) {
        rc = -1;
        goto done;
    }
    out_free(&o);
    Py_DECREF(ht);
    Py_DECREF(vt);
    Py_DECREF(id_bytes);
    {
        PyObject *res = PyTuple_Pack(2, hs, vs);
        Py_DECREF(hs);
        Py_DECREF(vs);
        return res;
    }
done:
    out_free(&o);
    Py_DECREF(ht);
    Py_DECREF(vt);
    Py_XDECREF(id_bytes);
    Py_XDECREF(hs);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The plan of index_keys (built once by cortex/keys.py, see _INDEX_PLAN). */
enum {
    IX_TYPE,      /* the keyspace prefixes */
    IX_TAG,
    IX_FRAME,
    IX_ACTOR_OBJ,
    IX_TYPE_BYTE, /* {MemoryType: its byte} */
    IX_FRAME_REF, /* the FrameRef class */
    IX_TAG_HASH,  /* tag_hash, obj_hash */
    IX_OBJ_HASH,
    IX_LEN,
};

/* prefix || middle || tail as one bytes object (NULL on error). */
static PyObject *
join3(PyObject *prefix, const char *mid, Py_ssize_t nmid, const char *tail, Py_ssize_t ntail)
{
    Py_ssize_t np = PyBytes_GET_SIZE(prefix);
    PyObject *k = PyBytes_FromStringAndSize(NULL, np + nmid + ntail);
    char *p;
    if (k == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(k);
    memcpy(p, PyBytes_AS_STRING(prefix), (size_t)np);
    memcpy(p + np, mid, (size_t)nmid);
    memcpy(p + np + nmid, tail, (size_t)ntail);
    return k;
}

static int
append_new(PyObject *list, PyObject *item)
{
    int rc;
    if (item == NULL) {
        return -1;
    }
    rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* A code 0..255 of an int (bytes((verb, kind)) takes no other); -1 when it is not one. */
static int
code_byte(PyObject *v)
{
    long c;
    if (!PyLong_Check(v)) {
        return -1;
    }
    c = PyLong_AsLong(v);
    if (c == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return c >= 0 && c <= 255 ? (int)c : -1;
}

/* The hash ``fn(text)`` as exact bytes: 1, or 0 (not bytes), or -1 (fn raised). */
static int
hash_of(PyObject *fn, PyObject *text, PyObject **out)
{
    *out = PyObject_CallOneArg(fn, text);
    if (*out == NULL) {
        return -1;
    }
    if (!PyBytes_CheckExact(*out)) {
        Py_CLEAR(*out);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(index_keys_doc,
             "index_keys(plan, type, created_us, id_bytes, tags, frames, actor_obj, /)\n--\n\n"
             "``cortex.keys.index_keys`` for a list or tuple of str tags and of FrameRefs whose "
             "verb and kind are codes 0..255; None otherwise.  ``plan`` is "
             "cortex.keys._INDEX_PLAN.");

static PyObject *
sp_index_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *plan, *tb, *tags, *frames, *out = NULL;
    PyObject *const *ix;
    unsigned long long us;
    char tail[1 + 8 + 64], mid[2 + 64];
    Py_ssize_t ntail, nid, i, ntags, nframes, nh;
    int actor_obj, k;
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "index_keys takes seven arguments");
        return NULL;
    }
    plan = args[0];
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != IX_LEN) {
        PyErr_SetString(PyExc_TypeError, "index_keys: bad plan");
        return NULL;
    }
    ix = &PyTuple_GET_ITEM(plan, 0);
    for (k = IX_TYPE; k <= IX_ACTOR_OBJ; k++) {
        if (!PyBytes_CheckExact(ix[k])) {
            PyErr_SetString(PyExc_TypeError, "index_keys: bad plan");
            return NULL;
        }
    }
    if (!PyDict_CheckExact(ix[IX_TYPE_BYTE]) || !PyType_Check(ix[IX_FRAME_REF]) ||
        !PyCallable_Check(ix[IX_TAG_HASH]) || !PyCallable_Check(ix[IX_OBJ_HASH])) {
        PyErr_SetString(PyExc_TypeError, "index_keys: bad plan");
        return NULL;
    }
    tags = args[4];
    frames = args[5];
    if (!PyLong_Check(args[2]) || !PyBytes_CheckExact(args[3]) ||
        (!PyList_CheckExact(tags) && !PyTuple_CheckExact(tags)) ||
        (!PyList_CheckExact(frames) && !PyTuple_CheckExact(frames))) {
        Py_RETURN_NONE;
    }
    us = PyLong_AsUnsignedLongLong(args[2]);
    if (us == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* negative or over 64 bits: _u64 names it */
        Py_RETURN_NONE;
    }
    nid = PyBytes_GET_SIZE(args[3]);
    if (nid > 64) {
        Py_RETURN_NONE;
    }
    tb = PyDict_GetItemWithError(ix[IX_TYPE_BYTE], args[1]); /* borrowed */
    if (tb == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear(); /* unhashable: the Python path raises */
        }
        Py_RETURN_NONE;
    }
    if (!PyBytes_CheckExact(tb) || PyBytes_GET_SIZE(tb) != 1 || !PyBool_Check(args[6])) {
        Py_RETURN_NONE;
    }
    /* t1 || u64(created_us) || id: the type key's tail; the others use the part after t1 */
    tail[0] = PyBytes_AS_STRING(tb)[0];
    actor_obj = args[6] == Py_True;
    ntags = PySequence_Fast_GET_SIZE(tags);
    nframes = PySequence_Fast_GET_SIZE(frames);
    for (i = 0; i < ntags; i++) {
        if (!PyUnicode_CheckExact(PySequence_Fast_GET_ITEM(tags, i))) {
            Py_RETURN_NONE;
        }
    }
    for (i = 0; i < nframes; i++) {
        if ((PyObject *)Py_TYPE(PySequence_Fast_GET_ITEM(frames, i)) != ix[IX_FRAME_REF]) {
            Py_RETURN_NONE;
        }
    }
    /* tuples of their own: the hash functions (Python code) cannot change them under us */
    tags = PySequence_Tuple(tags);
    if (tags == NULL) {
        return NULL;
    }
    frames = PySequence_Tuple(frames);
    if (frames == NULL) {
        Py_DECREF(tags);
        return NULL;
    }
    for (k = 0; k < 8; k++) {
        tail[1 + k] = (char)(us >> (8 * (7 - k)));
    }
    memcpy(tail + 9, PyBytes_AS_STRING(args[3]), (size_t)nid);
    ntail = 9 + nid;
    out = PyList_New(0);
    if (out == NULL) {
        goto fail;
    }
    if (append_new(out, join3(ix[IX_TYPE], "", 0, tail, ntail)) < 0) {
        goto fail;
    }
    for (i = 0; i < ntags; i++) {
        PyObject *hv;
        int rc = hash_of(ix[IX_TAG_HASH], PySequence_Fast_GET_ITEM(tags, i), &hv);
        if (rc <= 0) {
            goto bail;
        }
        rc = append_new(out, join3(ix[IX_TAG], PyBytes_AS_STRING(hv), PyBytes_GET_SIZE(hv), tail,
                                   ntail));
        Py_DECREF(hv);
        if (rc < 0) {
            goto fail;
        }
    }
    for (i = 0; i < nframes; i++) {
        PyObject *f = PySequence_Fast_GET_ITEM(frames, i), *ref, *hv, *verb, *kind;
        int rc, vb, kb;
        ref = PyObject_GetAttr(f, attr[A_OBJ_REF]);
        if (ref == NULL) {
            goto fail;
        }
        rc = hash_of(ix[IX_OBJ_HASH], ref, &hv);
        Py_DECREF(ref);
        if (rc <= 0) {
            goto bail;
        }
        verb = PyObject_GetAttr(f, attr[A_VERB]);
        kind = verb == NULL ? NULL : PyObject_GetAttr(f, attr[A_OBJ_KIND]);
        if (kind == NULL) {
            Py_XDECREF(verb);
            Py_DECREF(hv);
            goto fail;
        }
        vb = code_byte(verb);
        kb = code_byte(kind);
        Py_DECREF(verb);
        Py_DECREF(kind);
        if (vb < 0 || kb < 0) {
            Py_DECREF(hv);
            goto none;
        }
        nh = PyBytes_GET_SIZE(hv);
        if (nh > 64) {
            Py_DECREF(hv);
            goto none;
        }
        /* verb1 kind1 hash || the tail after t1; actor_obj: verb1 hash || the same */
        mid[0] = (char)vb;
        mid[1] = (char)kb;
        memcpy(mid + 2, PyBytes_AS_STRING(hv), (size_t)nh);
        Py_DECREF(hv);
        rc = append_new(out, join3(ix[IX_FRAME], mid, 2 + nh, tail + 1, ntail - 1));
        if (rc == 0 && actor_obj) {
            mid[1] = (char)vb;
            rc = append_new(out, join3(ix[IX_ACTOR_OBJ], mid + 1, 1 + nh, tail + 1, ntail - 1));
        }
        if (rc < 0) {
            goto fail;
        }
    }
    Py_DECREF(tags);
    Py_DECREF(frames);
    return out;
bail:
    if (PyErr_Occurred()) {
        goto fail; /* a hash function raised: the Python path would raise the same */
    }
none:
    Py_DECREF(tags);
    Py_DECREF(frames);
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_DECREF(tags);
    Py_DECREF(frames);
    Py_XDECREF(out);
    return NULL;
}

PyDoc_STRVAR(journal_entry_doc,
             "journal_entry(prefix, shared, seq, prev, id_bytes, type, version, hash, /)\n"
             "--\n\n"
             "The key, sealed value and sha256 digest of a ``write`` journal entry "
             "(``cortex.store._Journal.write_entry``): ``(key, value, digest)``; None when an "
             "argument is not what that fast path takes.");

static PyObject *
sp_journal_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *prefix, *shared, *prev, *idb, *hash, *payload, *key = NULL, *value = NULL;
    PyObject *digest = NULL, *res = NULL;
    long long seq, version, code;
    Out o;
    char *p;
    Py_ssize_t np;
    int k;
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "journal_entry takes eight arguments");
        return NULL;
    }
    prefix = args[0];
    shared = args[1];
    prev = args[3];
    idb = args[4];
    hash = args[7];
    if (!PyBytes_CheckExact(prefix)) {
        PyErr_SetString(PyExc_TypeError, "journal_entry: bad prefix");
        return NULL;
    }
    if (!PyBytes_CheckExact(shared) || !PyBytes_CheckExact(prev) || PyBytes_GET_SIZE(prev) != 32 ||
        !PyBytes_CheckExact(idb) || PyBytes_GET_SIZE(idb) != 16 || !PyBytes_CheckExact(hash) ||
        PyBytes_GET_SIZE(hash) != 32 || !exact_int(args[2], 1, LLONG_MAX, &seq) ||
        !exact_int(args[6], 1, LLONG_MAX, &version) ||
        /* a MemoryType member: an int of a subclass (not a plain int, not a bool) */
        !PyLong_Check(args[5]) || PyLong_CheckExact(args[5]) || PyBool_Check(args[5])) {
        Py_RETURN_NONE;
    }
    code = PyLong_AsLongLong(args[5]);
    if (code == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (code < 0) {
        Py_RETURN_NONE;
    }
    /* {0: 1, 1: seq, <shared: 2 kind, 3 at, 4 by>, 5: prev, 6: id, 7: type, 8: version,
     * 9: hash} */
    out_init(&o);
    if (out_put(&o, "\xaa\x00\x01\x01", 4) < 0 || out_head(&o, 0, (uint64_t)seq) < 0 ||
        out_put(&o, PyBytes_AS_STRING(shared), PyBytes_GET_SIZE(shared)) < 0 ||
        out_put(&o, "\x05\x58\x20", 3) < 0 || out_put(&o, PyBytes_AS_STRING(prev), 32) < 0 ||
        out_put(&o, "\x06\x50", 2) < 0 || out_put(&o, PyBytes_AS_STRING(idb), 16) < 0 ||
        out_byte(&o, 0x07) < 0 || out_head(&o, 0, (uint64_t)code) < 0 || out_byte(&o, 0x08) < 0 ||
        out_head(&o, 0, (uint64_t)version) < 0 || out_put(&o, "\x09\x58\x20", 3) < 0 ||
        out_put(&o, PyBytes_AS_STRING(hash), 32) < 0) {
        out_free(&o);
        return NULL;
    }
    payload = PyBytes_FromStringAndSize(o.p, o.len);
    out_free(&o);
    if (payload == NULL) {
        return NULL;
    }
    {
        const uint8_t *part = (const uint8_t *)PyBytes_AS_STRING(payload);
        size_t len = (size_t)PyBytes_GET_SIZE(payload);
        uint8_t out[32];
        sha256_parts(&part, &len, 1, out);
        digest = PyBytes_FromStringAndSize((const char *)out, 32);
        if (digest == NULL) {
            goto done;
        }
    }
    value = sealed(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload));
    if (value == NULL) {
        goto done;
    }
    np = PyBytes_GET_SIZE(prefix);
    key = PyBytes_FromStringAndSize(NULL, np + 8);
    if (key == NULL) {
        goto done;
    }
    p = PyBytes_AS_STRING(key);
    memcpy(p, PyBytes_AS_STRING(prefix), (size_t)np);
    for (k = 0; k < 8; k++) {
        p[np + k] = (char)((unsigned long long)seq >> (8 * (7 - k)));
    }
    res = PyTuple_Pack(3, key, value, digest);
done:
    Py_DECREF(payload);
    Py_XDECREF(digest);
    Py_XDECREF(value);
    Py_XDECREF(key);
    return res;
}

/* -- document frequencies (cortex.lexical.Indexer.flush): read, change and write the lex/t/
 * entries of a flush's terms through the transaction's cursor ----------------------------- */

static PyObject *m_set_key = NULL;

/* The df a sealed lex/t/ value holds (a canonical CBOR unsigned integer >= 1), or -1 when the
 * value fails its checks. */
static long long
df_of(PyObject *value)
{
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(value);
    Py_ssize_t n = PyBytes_GET_SIZE(value) - 4, w, i;
    uint32_t c;
    uint64_t v, least;
    if (n < 1) {
        return -1;
    }
    c = crc32_of(p, n);
    if (p[n] != (unsigned char)(c >> 24) || p[n + 1] != (unsigned char)(c >> 16) ||
        p[n + 2] != (unsigned char)(c >> 8) || p[n + 3] != (unsigned char)c) {
        return -1;
    }
    if (p[0] < 24) {
        w = 0;
        v = p[0];
        least = 0;
    }
    else if (p[0] >= 24 && p[0] <= 27) {
        w = (Py_ssize_t)1 << (p[0] - 24);
        least = p[0] == 24 ? 24 : (uint64_t)1 << (8 * (w / 2));
        v = 0;
        if (n < 1 + w) {
            return -1;
        }
        for (i = 0; i < w; i++) {
            v = (v << 8) | p[1 + i];
        }
    }
    else {
        return -1;
    }
    if (n != 1 + w || v < least || v < 1 || v > (uint64_t)LLONG_MAX) {
        return -1;
    }
    return (long long)v;
}

PyDoc_STRVAR(df_updates_doc,
             "df_updates(cursor, items, /)\n--\n\n"
             "``Indexer.flush``'s document frequencies in C: ``items`` is ``[(lex/t/ key, "
             "delta), ...]``; each entry is read with the cursor (set_key, value: bytes), "
             "changed by its delta and its new value made. ``(puts, deletes, added, removed)``: "
             "the sealed values to put, the keys to delete, the entries created and deleted; "
             "None when a stored value fails its checks or a count would go below 0 (the Python "
             "path then says why; nothing was changed).");

static PyObject *
sp_df_updates(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *cursor, *items, *puts = NULL, *deletes = NULL, *res = NULL;
    Py_ssize_t t, n, added = 0, removed = 0;
    (void)module;
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "df_updates(cursor, list)");
        return NULL;
    }
    cursor = args[0];
    items = args[1];
    puts = PyList_New(0);
    deletes = PyList_New(0);
    if (puts == NULL || deletes == NULL) {
        goto done;
    }
    n = PyList_GET_SIZE(items);
    for (t = 0; t < n; t++) {
        PyObject *item = PyList_GET_ITEM(items, t), *key, *value;
        long long before = 0, delta, after;
        int found;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "df_updates: items are (bytes, int) pairs");
            goto done;
        }
        key = PyTuple_GET_ITEM(item, 0);
        delta = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        if (delta == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_CLEAR(puts);
            Py_CLEAR(deletes);
            Py_RETURN_NONE;
        }
        found = cursor_step(cursor, m_set_key, key);
        if (found < 0) {
            goto done;
        }
        if (found) {
            value = cursor_get(cursor, m_value);
            if (value == NULL) {
                goto done;
            }
            before = df_of(value);
            Py_DECREF(value);
            if (before < 0) {
                Py_CLEAR(puts);
                Py_CLEAR(deletes);
                Py_RETURN_NONE;
            }
        }
        if ((delta > 0 && before > LLONG_MAX - delta) || before + delta < 0) {
            Py_CLEAR(puts);
            Py_CLEAR(deletes);
            Py_RETURN_NONE;
        }
        after = before + delta;
        if (after == before) {
            continue;
        }
        if (after == 0) {
            if (PyList_Append(deletes, key) < 0) {
                goto done;
            }
            removed++;
        }
        else {
            PyObject *v = PyBytes_FromStringAndSize(NULL, put_head(NULL, 0, (uint64_t)after) + 4),
                     *pair;
            if (v == NULL) {
                goto done;
            }
            put_head(PyBytes_AS_STRING(v), 0, (uint64_t)after);
            seal_in_place(v);
            pair = PyTuple_Pack(2, key, v);
            Py_DECREF(v);
            if (pair == NULL || PyList_Append(puts, pair) < 0) {
                Py_XDECREF(pair);
                goto done;
            }
            Py_DECREF(pair);
            added += before == 0;
        }
    }
    res = Py_BuildValue("(OOnn)", puts, deletes, added, removed);
done:
    Py_XDECREF(puts);
    Py_XDECREF(deletes);
    return res;
}


/* The plan of stage_new (built once by cortex/store.py, see _STAGE_PLAN). */
enum {
    SG_VERSION,   /* the prefixes: mv/, /v/ (before a version number), idx/pin/, lex/d/, j/ */
    SG_V,
    SG_PIN,
    SG_LEX_DOC,
    SG_JOURNAL,
    SG_INDEX_PLAN, /* cortex.keys._INDEX_PLAN */
    SG_MEMORY_ID,  /* the MemoryId class */
    SG_EVENT,      /* MemoryType.EVENT (its memories have actor_obj entries) */
    SG_LEN,
};

/* A new reference to getattr(o, attr[a]), or NULL with an exception set. */
static PyObject *
get_attr(PyObject *o, int a)
{
    return PyObject_GetAttr(o, attr[a]);
}

/* (key, value) appended to list; steals neither. */
static int
append_pair(PyObject *list, PyObject *key, PyObject *value)
{
    return append_new(list, PyTuple_Pack(2, key, value));
}

/* Stage one prepared memory (see stage_new): 1 staged, 0 not the fast path (nothing changed),
 * -1 error. */
static int
stage_one(PyObject *module, PyObject *const *sg, PyObject *p, PyObject *puts, PyObject *docs,
          PyObject *fresh, PyObject *memo, PyObject *shared, long long *seq, PyObject **prev,
          Py_ssize_t *length, Py_ssize_t *nterms)
{
    PyObject *head = NULL, *id = NULL, *raw = NULL, *mtype = NULL;
    PyObject *created = NULL, *tags = NULL, *frames = NULL, *us_obj = NULL, *keys = NULL;
    PyObject *version = NULL, *hash = NULL, *vbytes = NULL, *pinned = NULL, *terms = NULL;
    PyObject *entry = NULL, *seq_obj = NULL, *doc_key = NULL, *n = NULL, *vkey = NULL;
    PyObject *tb, *empty = NULL;
    long long us;
    Py_ssize_t i, nk;
    int rc = -1;
    if ((head = get_attr(p, A_HEAD)) == NULL || (id = get_attr(head, A_ID)) == NULL) {
        goto done;
    }
    if ((PyObject *)Py_TYPE(id) != sg[SG_MEMORY_ID]) {
        rc = 0;
        goto done;
    }
    if ((raw = get_attr(id, A_BYTES)) == NULL || (mtype = get_attr(head, A_TYPE)) == NULL ||
        (created = get_attr(head, A_CREATED_AT)) == NULL || (tags = get_attr(head, A_TAGS)) == NULL ||
        (frames = get_attr(head, A_FRAMES)) == NULL || (version = get_attr(p, A_VERSION)) == NULL ||
        (hash = get_attr(version, A_HASH)) == NULL ||
        (vbytes = get_attr(p, A_VERSION_BYTES)) == NULL || (pinned = get_attr(p, A_PINNED)) == NULL ||
        (terms = get_attr(p, A_TERMS)) == NULL) {
        goto done;
    }
    if (!PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 16 || !PyBytes_CheckExact(vbytes) ||
        !PyBool_Check(pinned) || !PyTuple_CheckExact(terms) || PyTuple_GET_SIZE(terms) != 2 ||
        !time_micros(created, &us) || us < 0 || *seq >= LLONG_MAX) {
        rc = 0;
        goto done;
    }
    tb = PyDict_GetItemWithError(PyTuple_GET_ITEM(sg[SG_INDEX_PLAN], IX_TYPE_BYTE), mtype);
    if (tb == NULL || !PyBytes_CheckExact(tb) || PyBytes_GET_SIZE(tb) != 1) {
        if (PyErr_Occurred()) {
            goto done;
        }
        rc = 0;
        goto done;
    }
    /* the pure parts first: the index keys and the journal entry */
    us_obj = PyLong_FromLongLong(us);
    if (us_obj == NULL) {
        goto done;
    }
    {
        PyObject *a[7] = {sg[SG_INDEX_PLAN], mtype, us_obj, raw, tags, frames,
                          mtype == sg[SG_EVENT] ? Py_True : Py_False};
        keys = sp_index_keys(module, a, 7);
    }
    if (keys == NULL || keys == Py_None) {
        rc = keys == NULL ? -1 : 0;
        goto done;
    }
    seq_obj = PyLong_FromLongLong(*seq + 1);
    if (seq_obj == NULL) {
        goto done;
    }
    {
        PyObject *a[8] = {sg[SG_JOURNAL], shared, seq_obj, *prev, raw, mtype, one_obj, hash};
        entry = sp_journal_entry(module, a, 8);
    }
    if (entry == NULL || entry == Py_None) {
        rc = entry == NULL ? -1 : 0;
        goto done;
    }
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
        PyErr_SetString(PyExc_RuntimeError, "stage_new: a journal entry of the wrong shape");
        goto done;
    }
    /* the postings and the lex/d record: the one step that changes anything (or nothing) */
    doc_key = join3(sg[SG_LEX_DOC], "", 0, PyBytes_AS_STRING(raw), 16);
    if (doc_key == NULL) {
        goto done;
    }
    {
        PyObject *a[8] = {docs, doc_key, fresh, memo, raw, one_obj,
                          PyTuple_GET_ITEM(terms, 0), PyTuple_GET_ITEM(terms, 1)};
        n = sp_index_new(module, a, 8);
    }
    if (n == NULL || n == Py_None) {
        rc = n == NULL ? -1 : 0;
        goto done;
    }
    *length = PyLong_AsSsize_t(n);
    if (*length == -1 && PyErr_Occurred()) {
        goto done;
    }
    *nterms = PyList_GET_SIZE(PyTuple_GET_ITEM(terms, 0)); /* a list: index_doc took it */
    /* what is put: the version, the index entries, the pin, the journal entry */
    {
        char tail[3 + 8];
        memcpy(tail, PyBytes_AS_STRING(sg[SG_V]), 3);
        memset(tail + 3, 0, 7);
        tail[10] = 1;
        vkey = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(sg[SG_VERSION]) + 16 + 11);
        if (vkey == NULL) {
            goto done;
        }
        memcpy(PyBytes_AS_STRING(vkey), PyBytes_AS_STRING(sg[SG_VERSION]),
               (size_t)PyBytes_GET_SIZE(sg[SG_VERSION]));
        memcpy(PyBytes_AS_STRING(vkey) + PyBytes_GET_SIZE(sg[SG_VERSION]), PyBytes_AS_STRING(raw),
               16);
        memcpy(PyBytes_AS_STRING(vkey) + PyBytes_GET_SIZE(sg[SG_VERSION]) + 16, tail, 11);
    }
    if (append_pair(puts, vkey, vbytes) < 0) {
        goto done;
    }
    empty = PyBytes_FromStringAndSize(NULL, 0);
    if (empty == NULL) {
        goto done;
    }
    nk = PyList_GET_SIZE(keys);
    for (i = 0; i < nk; i++) {
        if (append_pair(puts, PyList_GET_ITEM(keys, i), empty) < 0) {
            goto done;
        }
    }
    if (pinned == Py_True) {
        char mid[1 + 8];
        PyObject *pk;
        int k;
        mid[0] = PyBytes_AS_STRING(tb)[0];
        for (k = 0; k < 8; k++) {
            mid[1 + k] = (char)((unsigned long long)us >> (8 * (7 - k)));
        }
        pk = join3(sg[SG_PIN], mid, 9, PyBytes_AS_STRING(raw), 16);
        if (pk == NULL) {
            goto done;
        }
        k = append_pair(puts, pk, empty);
        Py_DECREF(pk);
        if (k < 0) {
            goto done;
        }
    }
    if (append_pair(puts, PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1)) < 0) {
        goto done;
    }
    *seq += 1;
    Py_INCREF(PyTuple_GET_ITEM(entry, 2));
    Py_SETREF(*prev, PyTuple_GET_ITEM(entry, 2));
    rc = 1;
done:
    Py_XDECREF(head);
    Py_XDECREF(id);
    Py_XDECREF(raw);
    Py_XDECREF(mtype);
    Py_XDECREF(created);
    Py_XDECREF(tags);
    Py_XDECREF(frames);
    Py_XDECREF(us_obj);
    Py_XDECREF(keys);
    Py_XDECREF(version);
    Py_XDECREF(hash);
    Py_XDECREF(vbytes);
    Py_XDECREF(pinned);
    Py_XDECREF(terms);
    Py_XDECREF(entry);
    Py_XDECREF(seq_obj);
    Py_XDECREF(doc_key);
    Py_XDECREF(n);
    Py_XDECREF(vkey);
    Py_XDECREF(empty);
    return rc;
}

PyDoc_STRVAR(stage_new_doc,
             "stage_new(plan, prepared, start, puts, docs, fresh, memo, shared, seq, prev, /)"
             "\n--\n\n"
             "The loop of ``cortex.store.Store._stage_new`` in C, from ``prepared[start]`` on: "
             "for each new memory (version 1, its head put already) append to ``puts`` its "
             "version, index entries, pin and ``write`` journal entry (``seq + 1`` chained on "
             "``prev``, with the entries' ``shared`` parts; not its vector), and index its "
             "terms as "
             "``index_new`` does into ``docs``, ``fresh`` and ``memo``.  Stops at the first "
             "memory that is not the common case (anything ``index_keys``, "
             "``journal_entry`` or ``index_new`` leave to Python), changing nothing for it.  "
             "Returns ``(next, seq, prev, documents, total_length, postings)``: where it "
             "stopped (``len(prepared)`` when done), the journal's last seq and hash, and what "
             "the staged memories add to the lexical statistics.");

static PyObject *
sp_stage_new(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *plan, *prepared, *puts, *docs, *fresh, *memo, *shared, *prev;
    PyObject *const *sg;
    Py_ssize_t start, i, n, documents = 0, total = 0, postings = 0;
    long long seq;
    int k;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "stage_new takes ten arguments");
        return NULL;
    }
    plan = args[0];
    prepared = args[1];
    puts = args[3];
    docs = args[4];
    fresh = args[5];
    memo = args[6];
    shared = args[7];
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != SG_LEN) {
        PyErr_SetString(PyExc_TypeError, "stage_new: bad plan");
        return NULL;
    }
    sg = &PyTuple_GET_ITEM(plan, 0);
    for (k = SG_VERSION; k <= SG_JOURNAL; k++) {
        if (!PyBytes_CheckExact(sg[k])) {
            PyErr_SetString(PyExc_TypeError, "stage_new: bad plan");
            return NULL;
        }
    }
    if (PyBytes_GET_SIZE(sg[SG_V]) != 3 || !PyTuple_CheckExact(sg[SG_INDEX_PLAN]) ||
        PyTuple_GET_SIZE(sg[SG_INDEX_PLAN]) != IX_LEN ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(sg[SG_INDEX_PLAN], IX_TYPE_BYTE)) ||
        !PyType_Check(sg[SG_MEMORY_ID])) {
        PyErr_SetString(PyExc_TypeError, "stage_new: bad plan");
        return NULL;
    }
    if (!PyList_CheckExact(prepared) || !PyList_CheckExact(puts) || !PyDict_CheckExact(docs) ||
        !PyDict_CheckExact(fresh) || !PyDict_CheckExact(memo) || !PyBytes_CheckExact(shared) ||
        !PyBytes_CheckExact(args[9]) || !PyLong_CheckExact(args[2]) ||
        !PyLong_CheckExact(args[8])) {
        PyErr_SetString(PyExc_TypeError,
                        "stage_new(plan, list, int, list, dict, dict, dict, bytes, int, bytes)");
        return NULL;
    }
    start = PyLong_AsSsize_t(args[2]);
    seq = PyLong_AsLongLong(args[8]);
    if ((start == -1 || seq == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0 || seq < 0) {
        PyErr_SetString(PyExc_ValueError, "stage_new: start and seq must be >= 0");
        return NULL;
    }
    prev = args[9];
    Py_INCREF(prev);
    n = PyList_GET_SIZE(prepared);
    for (i = start; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(prepared, i);
        Py_ssize_t length = 0, nterms = 0;
        int rc;
        Py_INCREF(p);
        rc = stage_one(module, sg, p, puts, docs, fresh, memo, shared, &seq, &prev, &length,
                       &nterms);
        Py_DECREF(p);
        if (rc < 0) {
            Py_DECREF(prev);
            return NULL;
        }
        if (rc == 0) {
            break;
        }
        documents += 1;
        total += length;
        postings += nterms;
        n = PyList_GET_SIZE(prepared);
    }
    return Py_BuildValue("(nLNnnn)", i, seq, prev, documents, total, postings);
}

PyDoc_STRVAR(unseal_doc,
             "unseal(value, /)\n--\n\n"
             "``cortex.kv.unseal``'s check in C: the payload of bytes ``payload || "
             "crc32(payload)`` (4 bytes, big-endian, zlib's CRC-32), or None when the value is "
             "shorter than 5 bytes or fails the checksum.");

static PyObject *
sp_unseal(PyObject *module, PyObject *value)
{
    const unsigned char *p;
    Py_ssize_t n;
    uint32_t c;
    (void)module;
    if (!PyBytes_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "unseal(bytes)");
        return NULL;
    }
    n = PyBytes_GET_SIZE(value) - 4;
    if (n < 1) {
        Py_RETURN_NONE;
    }
    p = (const unsigned char *)PyBytes_AS_STRING(value);
    c = crc32_of(p, n);
    if (p[n] != (unsigned char)(c >> 24) || p[n + 1] != (unsigned char)(c >> 16) ||
        p[n + 2] != (unsigned char)(c >> 8) || p[n + 3] != (unsigned char)c) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)p, n);
}

typedef struct {
    const char *key;
    Py_ssize_t len, at;
    PyObject *item;
} KeyRef;

static int
keyref_cmp(const void *a, const void *b)
{
    const KeyRef *x = (const KeyRef *)a, *y = (const KeyRef *)b;
    int c = memcmp(x->key, y->key, (size_t)(x->len < y->len ? x->len : y->len));
    if (c != 0) {
        return c;
    }
    if (x->len != y->len) {
        return x->len < y->len ? -1 : 1;
    }
    return x->at < y->at ? -1 : x->at > y->at; /* equal keys keep their order */
}

PyDoc_STRVAR(sort_pairs_doc,
             "sort_pairs(pairs, /)\n--\n\n"
             "Sort a list of ``(key, value)`` tuples in place by key (bytes, in byte order), "
             "stably: ``pairs.sort(key=itemgetter(0))`` without a Python call per item.");

static PyObject *
sp_sort_pairs(PyObject *module, PyObject *pairs)
{
    Py_ssize_t n, i;
    KeyRef *refs;
    (void)module;
    if (!PyList_CheckExact(pairs)) {
        PyErr_SetString(PyExc_TypeError, "sort_pairs(list)");
        return NULL;
    }
    n = PyList_GET_SIZE(pairs);
    refs = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(KeyRef));
    if (refs == NULL) {
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(pairs, i), *key;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_CheckExact(key = PyTuple_GET_ITEM(item, 0))) {
            PyMem_Free(refs);
            PyErr_SetString(PyExc_TypeError, "sort_pairs: items are (bytes, value) tuples");
            return NULL;
        }
        refs[i].key = PyBytes_AS_STRING(key);
        refs[i].len = PyBytes_GET_SIZE(key);
        refs[i].at = i;
        refs[i].item = item;
    }
    qsort(refs, (size_t)n, sizeof(KeyRef), keyref_cmp);
    /* the list holds the same items: only their places change (no reference counts move) */
    for (i = 0; i < n; i++) {
        PyList_SET_ITEM(pairs, i, refs[i].item);
    }
    PyMem_Free(refs);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))sp_decode, METH_FASTCALL, decode_doc},
    {"ascii_tokens", (PyCFunction)sp_ascii_tokens, METH_O, ascii_tokens_doc},
    {"count_terms", (PyCFunction)sp_count_terms, METH_O, count_terms_doc},
    {"add_postings", (PyCFunction)(void (*)(void))sp_add_postings, METH_FASTCALL,
     add_postings_doc},
    {"encode_ascii_texts", (PyCFunction)(void (*)(void))sp_encode_ascii_texts, METH_FASTCALL,
     encode_ascii_texts_doc},
    {"posting_run", (PyCFunction)sp_posting_run, METH_O, posting_run_doc},
    {"cut_blocks", (PyCFunction)(void (*)(void))sp_cut_blocks, METH_FASTCALL, cut_blocks_doc},
    {"merge_run", (PyCFunction)(void (*)(void))sp_merge_run, METH_FASTCALL, merge_run_doc},
    {"block_append", (PyCFunction)(void (*)(void))sp_block_append, METH_FASTCALL,
     block_append_doc},
    {"append_runs", (PyCFunction)(void (*)(void))sp_append_runs, METH_FASTCALL,
     append_runs_doc},
    {"df_updates", (PyCFunction)(void (*)(void))sp_df_updates, METH_FASTCALL, df_updates_doc},
    {"ascii_term_counts", (PyCFunction)(void (*)(void))sp_ascii_term_counts, METH_FASTCALL,
     ascii_term_counts_doc},
    {"full_term_counts", (PyCFunction)(void (*)(void))sp_full_term_counts, METH_FASTCALL,
     full_term_counts_doc},
    {"index_doc", (PyCFunction)(void (*)(void))sp_index_doc, METH_FASTCALL, index_doc_doc},
    {"index_new", (PyCFunction)(void (*)(void))sp_index_new, METH_FASTCALL, index_new_doc},
    {"encode_new_pair", (PyCFunction)(void (*)(void))sp_encode_new_pair, METH_FASTCALL,
     encode_new_pair_doc},
    {"index_keys", (PyCFunction)(void (*)(void))sp_index_keys, METH_FASTCALL, index_keys_doc},
    {"journal_entry", (PyCFunction)(void (*)(void))sp_journal_entry, METH_FASTCALL,
     journal_entry_doc},
    {"seal", (PyCFunction)sp_seal, METH_O, seal_doc},
    {"sort_pairs", (PyCFunction)sp_sort_pairs, METH_O, sort_pairs_doc},
    {"encode", (PyCFunction)(void (*)(void))sp_encode, METH_FASTCALL, encode_doc},
    {"sha256", (PyCFunction)(void (*)(void))sp_sha256, METH_FASTCALL | METH_KEYWORDS, sha256_doc},
    {"unseal", (PyCFunction)sp_unseal, METH_O, unseal_doc},
    {"stage_new", (PyCFunction)(void (*)(void))sp_stage_new, METH_FASTCALL, stage_new_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cortex._speedups",
    .m_doc = "Strict one-pass decoder of canonical CBOR records and the lexical index's hot "
             "loops (optional accelerator).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m, *ud;
    crc_init();
    sha256_init();
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return NULL;
    }
    if (PyType_Ready(&Plan_Type) < 0 || PyType_Ready(&StemTable_Type) < 0) {
        return NULL;
    }
    m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (Reject == NULL) {
        Reject = PyErr_NewExceptionWithDoc(
            "cortex._speedups.Reject",
            "The bytes are not a canonical record of the plan (the Python decoder says why).",
            PyExc_ValueError, NULL);
        if (Reject == NULL) {
            goto fail;
        }
    }
    if (is_normalized == NULL) {
        ud = PyImport_ImportModule("unicodedata");
        if (ud == NULL) {
            goto fail;
        }
        is_normalized = PyObject_GetAttrString(ud, "is_normalized");
        Py_DECREF(ud);
        if (is_normalized == NULL) {
            goto fail;
        }
    }
    if (one_obj == NULL) {
        one_obj = PyLong_FromLong(1);
        if (one_obj == NULL) {
            goto fail;
        }
    }
    if (str_NFC == NULL) {
        str_NFC = PyUnicode_InternFromString("NFC");
        if (str_NFC == NULL) {
            goto fail;
        }
    }
    if (m_set_range == NULL) {
        m_set_range = PyUnicode_InternFromString("set_range");
        m_key = PyUnicode_InternFromString("key");
        m_value = PyUnicode_InternFromString("value");
        m_prev = PyUnicode_InternFromString("prev");
        m_last = PyUnicode_InternFromString("last");
        m_next = PyUnicode_InternFromString("next");
        m_set_key = PyUnicode_InternFromString("set_key");
        if (m_set_key == NULL || m_set_range == NULL || m_key == NULL || m_value == NULL || m_prev == NULL ||
            m_last == NULL || m_next == NULL) {
            goto fail;
        }
    }
    if (attr[0] == NULL) {
        int i;
        for (i = 0; i < N_ATTRS; i++) {
            attr[i] = PyUnicode_InternFromString(attr_names[i]);
            if (attr[i] == NULL) {
                goto fail;
            }
        }
    }
    Py_INCREF(Reject);
    if (PyModule_AddObject(m, "Reject", Reject) < 0) {
        Py_DECREF(Reject);
        goto fail;
    }
    Py_INCREF(&Plan_Type);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&Plan_Type) < 0) {
        Py_DECREF(&Plan_Type);
        goto fail;
    }
    Py_INCREF(&StemTable_Type);
    if (PyModule_AddObject(m, "StemTable", (PyObject *)&StemTable_Type) < 0) {
        Py_DECREF(&StemTable_Type);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
