/*
 * A schema-driven, strict, one-pass decoder of canonical CBOR records.
 *
 * A ``Plan`` describes one record struct (built by ``StructCodec`` from its field list, see
 * cortex/model/codec.py).  ``decode(plan, data)`` reads ``data`` straight into the struct and accepts
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

#include "common.h"

#include <datetime.h>

#define STACK_SPANS 32

static PyObject *Reject = NULL; /* the one exception the decoder raises on bad input */

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
/* Values */

static PyObject *decode_record(PlanObject *pl, Reader *r, int depth);

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

static PyMethodDef decode_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))sp_decode, METH_FASTCALL, decode_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_decode_init(PyObject *m)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return -1;
    }
    if (Reject == NULL) {
        Reject = PyErr_NewExceptionWithDoc(
            "cortex._speedups.Reject",
            "The bytes are not a canonical record of the plan (the Python decoder says why).",
            PyExc_ValueError, NULL);
        if (Reject == NULL) {
            return -1;
        }
    }
    Py_INCREF(Reject);
    if (PyModule_AddObject(m, "Reject", Reject) < 0) {
        Py_DECREF(Reject);
        return -1;
    }
    return PyModule_AddFunctions(m, decode_methods);
}
