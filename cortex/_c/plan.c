/*
 * Record plans: a ``Plan`` describes one record struct (built by ``StructCodec`` from its field
 * list, see cortex/model/codec.py): its class, attribute names, schema version and, per field, the
 * key, the default and a ``Spec`` of its value.  The decoder (cbor_decode.c) and the encoder
 * (cbor_encode.c) walk the same plans, and apply the same value rules, kept here: the checks of
 * codec.py's _check_uri and _check_decimal, NFC by the characters alone, and whether a float
 * fits binary16.
 */

#include "common.h"

PyObject *is_normalized = NULL; /* unicodedata.is_normalized */
PyObject *str_NFC = NULL;       /* "NFC" */

/* ------------------------------------------------------------------------------------------ */
/* Plans */

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
    Py_CLEAR(s->idcls);
    Py_CLEAR(s->idslot);
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
        /* ("id", factory, class) or ("id", factory, class, slot): with the slot (the member
         * descriptor of the class's raw bytes, its only slot) a decoded id is a new instance
         * with the slot filled, as the factory makes it, without a Python call */
        if (PyTuple_GET_SIZE(t) != 4 && spec_arity(t, 3, "id") < 0) {
            return -1;
        }
        if (!PyCallable_Check(PyTuple_GET_ITEM(t, 1)) || !PyType_Check(PyTuple_GET_ITEM(t, 2))) {
            PyErr_SetString(PyExc_TypeError, "plan: an id spec is (\"id\", factory, class)");
            return -1;
        }
        if (PyTuple_GET_SIZE(t) == 4) {
            PyObject *slot = PyTuple_GET_ITEM(t, 3);
            PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(t, 2);
            if (!Py_IS_TYPE(slot, &PyMemberDescr_Type) ||
                PyDescr_TYPE(slot) != cls || cls->tp_dictoffset != 0 ||
                cls->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + sizeof(PyObject *))) {
                PyErr_SetString(PyExc_TypeError,
                                "plan: an id spec's slot is the class's one member descriptor");
                return -1;
            }
            Py_INCREF(slot);
            s->idslot = slot;
        }
        Py_INCREF(PyTuple_GET_ITEM(t, 1));
        s->factory = PyTuple_GET_ITEM(t, 1);
        Py_INCREF(PyTuple_GET_ITEM(t, 2));
        s->idcls = PyTuple_GET_ITEM(t, 2);
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
    int forms = 0;
    static char *kwlist[] = {"cls", "kwnames", "schema_version", "fields", "forms", NULL};

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!OO!|$i:Plan", kwlist, &cls, &PyTuple_Type,
                                     &kwnames, &sv, &PyTuple_Type, &fields, &forms)) {
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
    if (forms < 0 || forms > 2) {
        PyErr_SetString(PyExc_ValueError, "plan: forms is 0, 1 (forms) or 2 (a version's forms)");
        goto fail;
    }
    self->forms = forms;
    if (forms && (n != 2 || sv != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "plan: the forms plan has two fields and no key 0");
        goto fail;
    }
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
    if (forms && (self->fields[0].key != 1 || self->fields[0].slot != 0 ||
                  self->fields[1].key != 2 || self->fields[1].slot != 1 ||
                  self->fields[0].spec.kind != K_TEXT || self->fields[1].spec.kind != K_TEXT ||
                  self->fields[0].spec.check != CHECK_NONE ||
                  self->fields[1].spec.check != CHECK_NONE)) {
        PyErr_SetString(PyExc_ValueError, "plan: the forms are short (key 1) and medium (key 2) text");
        goto fail;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

PyTypeObject Plan_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cortex._speedups.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)Plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Plan(cls, kwnames, schema_version, fields, *, forms=0): how to decode one "
              "record struct (forms 1: the Forms record in its compact encoding; 2: a version's, "
              "whose medium form may refer into the enclosing record's key 4).",
    .tp_new = Plan_new,
};

/* ------------------------------------------------------------------------------------------ */
/* Value rules */

/* Exactly representable as IEEE binary16?  ``x`` is finite and non-negative. */
int
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
int
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
int
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

/* Whether str is NFC by its characters alone: each below U+0300 (NFC_QC=Yes, combining class
 * 0), or U+2014 EM DASH or U+2026 HORIZONTAL ELLIPSIS (the separator of a medium form and the
 * mark of a cut one: NFC_QC=Yes, combining class 0, in no canonical composition).  A string of
 * characters that are all NFC_QC=Yes with class 0 is NFC. */
int
plainly_nfc(PyObject *str)
{
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    Py_ssize_t i, n = PyUnicode_GET_LENGTH(str);
    /* one loop per kind (no kind switch per character): the forms' text is two-byte kind
     * whenever a cut form ends in its ellipsis */
    if (kind == PyUnicode_1BYTE_KIND) {
        return 1;
    }
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *u = data;
        /* blocks of 32: every character is below U+0300 when the OR of their high bytes is
         * below 3 (a loop the compiler vectorises); a block where it is not is read
         * character by character */
        for (i = 0; i + 32 <= n; i += 32) {
            unsigned hi = 0;
            int j;
            for (j = 0; j < 32; j++) {
                hi |= (unsigned)(u[i + j] >> 8);
            }
            if (hi >= 3) {
                for (j = 0; j < 32; j++) {
                    Py_UCS2 c = u[i + j];
                    if (c >= 0x300 && c != 0x2014 && c != 0x2026) {
                        return 0;
                    }
                }
            }
        }
        for (; i < n; i++) {
            if (u[i] >= 0x300 && u[i] != 0x2014 && u[i] != 0x2026) {
                return 0;
            }
        }
        return 1;
    }
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x300 && c != 0x2014 && c != 0x2026) {
            return 0;
        }
    }
    return 1;
}

int
cx_plan_init(PyObject *m)
{
    PyObject *ud;
    if (PyType_Ready(&Plan_Type) < 0) {
        return -1;
    }
    if (is_normalized == NULL) {
        ud = PyImport_ImportModule("unicodedata");
        if (ud == NULL) {
            return -1;
        }
        is_normalized = PyObject_GetAttrString(ud, "is_normalized");
        Py_DECREF(ud);
        if (is_normalized == NULL) {
            return -1;
        }
    }
    if (str_NFC == NULL) {
        str_NFC = PyUnicode_InternFromString("NFC");
        if (str_NFC == NULL) {
            return -1;
        }
    }
    Py_INCREF(&Plan_Type);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&Plan_Type) < 0) {
        Py_DECREF(&Plan_Type);
        return -1;
    }
    return 0;
}
