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

/* The read path's one shared value (read_memory, read_current): a memory's forms are stored in
 * its head and again in its version, byte for byte; the version's are the head's object when
 * their bytes are the same (equal bytes decode to equal values; Forms is frozen). */
typedef struct {
    PyObject *plan;   /* the Plan of the shared record (Forms) */
    PyObject *obj;    /* the first one decoded (a reference held), or NULL */
    const uint8_t *p; /* its bytes (in a value the caller keeps alive) */
    Py_ssize_t n;
    /* the first time decoded (a reference held), or NULL: a head's created and updated times
     * and its version's are one instant until the memory changes (datetime is immutable) */
    PyObject *time;
    long long time_us;
    /* the first id decoded (a reference held), or NULL: a head's id, its version's and the
     * URI's are one MemoryId when their bytes are the same (a MemoryId is immutable) */
    PyObject *id;
    uint8_t id_raw[16];
} Share;

typedef struct {
    const uint8_t *b;
    Py_ssize_t len;
    Py_ssize_t pos;
    Share *share; /* NULL but on the read path */
    const uint8_t *data; /* a version's data while its forms are read (format 18), or NULL */
    Py_ssize_t data_len;
    PyObject *like; /* the head's Forms while its version's are read on the read path, or NULL */
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

/* Howard Hinnant's days_from_civil: day number (0 = 1970-01-01) of a proleptic Gregorian date. */
static long long
days_from_civil(long long y, unsigned m, unsigned d)
{
    long long era;
    unsigned yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

PyDoc_STRVAR(micros_doc,
             "micros(when, /)\n--\n\n"
             "``cortex.model.codec.to_micros`` of a ``datetime`` (not a subclass) whose tzinfo "
             "is ``datetime.timezone.utc``: microseconds since the epoch; None for anything "
             "else (the Python path decides).");

static PyObject *
sp_micros(PyObject *module, PyObject *when)
{
    long long days, us;
    (void)module;
    if (!PyDateTime_CheckExact(when) || !((_PyDateTime_BaseTZInfo *)when)->hastzinfo ||
        PyDateTime_DATE_GET_TZINFO(when) != PyDateTime_TimeZone_UTC) {
        Py_RETURN_NONE;
    }
    days = days_from_civil(PyDateTime_GET_YEAR(when), (unsigned)PyDateTime_GET_MONTH(when),
                           (unsigned)PyDateTime_GET_DAY(when));
    us = ((days * 86400LL + PyDateTime_DATE_GET_HOUR(when) * 3600LL +
           PyDateTime_DATE_GET_MINUTE(when) * 60LL + PyDateTime_DATE_GET_SECOND(when)) *
              1000000LL +
          PyDateTime_DATE_GET_MICROSECOND(when));
    return PyLong_FromLongLong(us);
}

/* micros of a datetime (not a subclass) in UTC into *us: 1, or 0 for anything else */
static int
utc_micros(PyObject *when, long long *us)
{
    long long days;
    if (!PyDateTime_CheckExact(when) || !((_PyDateTime_BaseTZInfo *)when)->hastzinfo ||
        PyDateTime_DATE_GET_TZINFO(when) != PyDateTime_TimeZone_UTC) {
        return 0;
    }
    days = days_from_civil(PyDateTime_GET_YEAR(when), (unsigned)PyDateTime_GET_MONTH(when),
                           (unsigned)PyDateTime_GET_DAY(when));
    *us = ((days * 86400LL + PyDateTime_DATE_GET_HOUR(when) * 3600LL +
            PyDateTime_DATE_GET_MINUTE(when) * 60LL + PyDateTime_DATE_GET_SECOND(when)) *
               1000000LL +
           PyDateTime_DATE_GET_MICROSECOND(when));
    return 1;
}

/* a number (int or float, not bool) as a double into *x: 1, 0 when not one (or an int a double
 * does not hold exactly) */
static int
exact_double(PyObject *v, double *x)
{
    if (PyFloat_CheckExact(v)) {
        *x = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (n == -1 && PyErr_Occurred()) || n > (1LL << 53) || n < -(1LL << 53)) {
            PyErr_Clear();
            return 0;
        }
        *x = (double)n;
        return 1;
    }
    return 0;
}

PyDoc_STRVAR(salience_doc,
             "salience(head, now_us, decay, permanent, half_lives, weights, w_vector=None, "
             "vector=None, /)\n--\n\n"
             "``cortex.rules.salience.salience_at(head, NEVER_USED, now_us, "
             "decay=decay[head.type], weights=w, vector=vector)`` for a head without use "
             "counters: ``weights`` is ``(w.recency, w.access, w.citation, w.importance)``, "
             "``w_vector`` ``w.vector`` (with a ``vector``, a float; both None: no vector), "
             "``permanent`` the decay class that never decays, ``half_lives`` its "
             "``HALF_LIFE_DAYS``. None where the Python path must decide (counters, a time or a "
             "number out of the ordinary).");

static PyObject *
sp_salience(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *head, *decay, *half_lives, *weights, *v, *cls;
    long long now_us, last_us, age;
    double w[4], r, d, half, wv = 0.0, cos = 0.0;
    volatile double t0, t1, t2, t3, t4, total, norm;
    int i, ok, with_vector = 0;
    (void)module;
    if (nargs != 6 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "salience(head, now_us, decay, permanent, half_lives, "
                                         "weights, w_vector=None, vector=None)");
        return NULL;
    }
    if (nargs == 8 && args[7] != Py_None) {
        /* the cosine, clamped as salience_at clamps it: max(0.0, min(1.0, vector)) */
        if (!exact_double(args[6], &wv) || !PyFloat_CheckExact(args[7])) {
            Py_RETURN_NONE;
        }
        cos = PyFloat_AS_DOUBLE(args[7]);
        if (isnan(cos)) {
            Py_RETURN_NONE;
        }
        cos = cos < 1.0 ? cos : 1.0;
        cos = cos > 0.0 ? cos : 0.0;
        with_vector = 1;
    }
    head = args[0];
    decay = args[2];
    half_lives = args[4];
    weights = args[5];
    if (!PyLong_CheckExact(args[1]) || !PyDict_CheckExact(decay) ||
        !PyDict_CheckExact(half_lives) || !PyTuple_CheckExact(weights) ||
        PyTuple_GET_SIZE(weights) != 4) {
        PyErr_SetString(PyExc_TypeError, "salience: an int time, two dicts and four weights");
        return NULL;
    }
    now_us = PyLong_AsLongLong(args[1]);
    if (now_us == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    for (i = 0; i < 4; i++) {
        if (!exact_double(PyTuple_GET_ITEM(weights, i), &w[i])) {
            Py_RETURN_NONE;
        }
    }
    /* a tombstone scores 0 */
    v = attr_get(head, A_TOMBSTONE);
    if (v == NULL) {
        return NULL;
    }
    ok = v == Py_None;
    Py_DECREF(v);
    if (!ok) {
        return PyFloat_FromDouble(0.0);
    }
    /* use counters: the Python path reads them */
    v = attr_get(head, A_HAS_COUNTERS);
    if (v == NULL) {
        return NULL;
    }
    ok = v == Py_False;
    Py_DECREF(v);
    if (!ok) {
        Py_RETURN_NONE;
    }
    v = attr_get(head, A_LAST_UPDATED_AT);
    if (v == NULL) {
        return NULL;
    }
    ok = utc_micros(v, &last_us);
    Py_DECREF(v);
    if (!ok) {
        Py_RETURN_NONE;
    }
    /* the decay class of the head's type */
    v = attr_get(head, A_TYPE);
    if (v == NULL) {
        return NULL;
    }
    cls = PyDict_GetItemWithError(decay, v); /* borrowed */
    Py_DECREF(v);
    if (cls == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (cls == args[3]) {
        r = 1.0;
    }
    else {
        v = PyDict_GetItemWithError(half_lives, cls); /* borrowed */
        if (v == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        if (!exact_double(v, &half) || half == 0.0) {
            Py_RETURN_NONE;
        }
        /* max(0, now - last) / _US_PER_DAY: an int quotient a double divides exactly alike */
        if ((last_us > 0 && now_us < LLONG_MIN + last_us) ||
            (last_us < 0 && now_us > LLONG_MAX + last_us)) {
            Py_RETURN_NONE;
        }
        age = now_us - last_us;
        if (age < 0) {
            age = 0;
        }
        if (age > (1LL << 53)) {
            Py_RETURN_NONE;
        }
        r = pow(0.5, ((double)age / 86400000000.0) / half);
    }
    /* the importance */
    v = attr_get(head, A_IMPORTANCE);
    if (v == NULL) {
        return NULL;
    }
    ok = PyLong_CheckExact(v) && exact_double(v, &d);
    Py_DECREF(v);
    if (!ok) {
        Py_RETURN_NONE;
    }
    d = d / 10.0;
    /* salience_at's sum, term by term in its order (no fused multiply-add) */
    t0 = w[0] * r;
    t1 = w[1] * (log1p(0.0) / log(1001.0));
    t2 = w[2] * (log1p(0.0) / log(1001.0));
    t3 = w[3] * d;
    total = t0 + t1;
    total = total + t2;
    total = total + t3;
    norm = w[0] + w[1];
    norm = norm + w[2];
    norm = norm + w[3];
    if (with_vector) {
        t4 = wv * cos;
        total = total + t4;
        norm = norm + wv;
    }
    return PyFloat_FromDouble(total / norm);
}

/* Integer microseconds since the epoch -> aware UTC datetime (equal to _EPOCH + timedelta). */
static PyObject *
read_time(const Spec *s, Reader *r)
{
    long long us, rem, days;
    int y, mo, d;
    PyObject *t;
    if (read_int(r, s->lo, s->hi, &us) < 0) {
        return NULL;
    }
    if (r->share != NULL && r->share->time != NULL && r->share->time_us == us) {
        return Py_NewRef(r->share->time);
    }
    days = floor_div(us, 86400000000LL, &rem);
    civil_from_days(days, &y, &mo, &d);
    if (y < 1 || y > 9999) {
        return reject_null(r, "time out of range");
    }
    t = PyDateTimeAPI->DateTime_FromDateAndTime(
        y, mo, d, (int)(rem / 3600000000LL), (int)(rem / 60000000LL % 60),
        (int)(rem / 1000000LL % 60), (int)(rem % 1000000LL), PyDateTime_TimeZone_UTC,
        PyDateTimeAPI->DateTimeType);
    if (t != NULL && r->share != NULL && r->share->time == NULL) {
        r->share->time = Py_NewRef(t);
        r->share->time_us = us;
    }
    return t;
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

/* A new instance of ``cls`` (a class of one slot, no __dict__) with ``slot`` set to ``value``;
 * steals the reference to ``value``.  ``object.__new__(cls)`` and the slot's ``__set__``, as
 * ``MemoryId._trusted`` and ``Uri._trusted`` do, without a Python call. */
static PyObject *
new_id(PyObject *cls, PyObject *slot, PyObject *value)
{
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *obj = t->tp_alloc(t, 0);
    if (obj == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    if (Py_TYPE(slot)->tp_descr_set(slot, obj, value) < 0) {
        Py_DECREF(value);
        Py_DECREF(obj);
        return NULL;
    }
    Py_DECREF(value);
    return obj;
}

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
        if (s->idslot != NULL && r->share != NULL && r->share->id != NULL &&
            Py_TYPE(r->share->id) == (PyTypeObject *)s->idcls &&
            memcmp(p, r->share->id_raw, 16) == 0) {
            return Py_NewRef(r->share->id);
        }
        raw = PyBytes_FromStringAndSize((const char *)p, 16);
        if (raw == NULL) {
            return NULL;
        }
        if (s->idslot != NULL) { /* what the factory does: a new instance, its slot filled */
            id = new_id(s->idcls, s->idslot, raw);
            if (id != NULL && r->share != NULL && r->share->id == NULL) {
                r->share->id = Py_NewRef(id);
                memcpy(r->share->id_raw, p, 16);
            }
            return id;
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
        if (r->share != NULL && s->plan == r->share->plan) {
            Share *sh = r->share;
            Py_ssize_t at = r->pos;
            PyObject *v;
            /* CBOR items delimit themselves: bytes that begin with a whole item are that item */
            if (sh->obj != NULL && r->len - at >= sh->n && memcmp(r->b + at, sh->p, (size_t)sh->n) == 0) {
                r->pos += sh->n;
                Py_INCREF(sh->obj);
                return sh->obj;
            }
            v = decode_record((PlanObject *)s->plan, r, depth);
            if (v != NULL && sh->obj == NULL) {
                Py_INCREF(v);
                sh->obj = v;
                sh->p = r->b + at;
                sh->n = r->pos - at;
            }
            return v;
        }
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

/* The UTF-8 of "…" (U+2026), the mark of a cut short form. */
static const uint8_t ELLIPSIS[3] = {0xE2, 0x80, 0xA6};

/* 1 when ``str`` is NFC (see read_text), 0 when not, -1 on an error. */
static int
text_nfc(PyObject *str)
{
    PyObject *args[2] = {str_NFC, str};
    PyObject *ok;
    int nfc;
    if (PyUnicode_KIND(str) == PyUnicode_1BYTE_KIND || plainly_nfc(str)) {
        return 1;
    }
    ok = PyObject_Vectorcall(is_normalized, args, 2, NULL);
    if (ok == NULL) {
        return -1;
    }
    nfc = ok == Py_True;
    Py_DECREF(ok);
    return nfc;
}

/* The UTF-8 of a text item just read, which began at ``at``. */
static const uint8_t *
text_body(const Reader *r, Py_ssize_t at, Py_ssize_t *n)
{
    Reader t = *r;
    uint64_t len = 0;
    t.pos = at;
    (void)expect(&t, 3, &len); /* read once already: cannot fail */
    *n = (Py_ssize_t)len;
    return t.b + t.pos;
}

/* One of the head's form texts (``like``, its UTF-8 ``lb``/``ln``) when ``b``/``n`` are its
 * bytes: a new reference to it (equal bytes are an equal, valid text), else NULL. */
static PyObject *
same_text(PyObject *like, const char *lb, Py_ssize_t ln, const uint8_t *b, Py_ssize_t n)
{
    if (like != NULL && lb != NULL && ln == n && memcmp(lb, b, (size_t)n) == 0) {
        Py_INCREF(like);
        return like;
    }
    return NULL;
}

/* read_text, or the head's text ``like`` where the item holds its bytes (the read path). */
static PyObject *
read_text_like(const Spec *s, Reader *r, PyObject *like, const char *lb, Py_ssize_t ln)
{
    if (like != NULL) {
        Reader t = *r;
        uint64_t n;
        const uint8_t *p;
        PyObject *v;
        if (expect(&t, 3, &n) == 0 && take(&t, n, &p) == 0 &&
            (v = same_text(like, lb, ln, p, (Py_ssize_t)n)) != NULL) {
            r->pos = t.pos;
            return v;
        }
        PyErr_Clear(); /* read_text below says what is wrong */
    }
    return read_text(s, r);
}

/* A version's medium form as a reference into its data (format 18, codec.VersionFormsCodec):
 * key 5 = [prefix, at, suffix], the medium being prefix, the text item at offset ``at`` of
 * r->data, then suffix; only the reference medium_ref takes is accepted. */
static PyObject *
read_medium_ref(PlanObject *pl, Reader *r, PyObject *like, const char *lb, Py_ssize_t ln)
{
    uint64_t n, pn, sfn, tn = 0;
    long long at;
    Py_ssize_t start = r->pos, ref_at, ref_i, ref_len, total;
    const uint8_t *pre, *suf, *t;
    uint8_t small[512], *buf = small;
    PyObject *str;
    if (expect(r, 4, &n) < 0) {
        return NULL;
    }
    if (n != 3) {
        r->pos = start;
        return reject_null(r, "the medium form's reference is [prefix, at, suffix]");
    }
    if (expect(r, 3, &pn) < 0 || take(r, pn, &pre) < 0 || read_int(r, 0, LLONG_MAX, &at) < 0 ||
        expect(r, 3, &sfn) < 0 || take(r, sfn, &suf) < 0) {
        return NULL;
    }
    if (r->data == NULL || at >= r->data_len) {
        r->pos = start;
        return reject_null(r, "the medium form refers past the version's data");
    }
    {
        const uint8_t *d = r->data + at;
        Py_ssize_t left = r->data_len - (Py_ssize_t)at - 1;
        int info = d[0] & 31, k, size;
        if ((d[0] >> 5) != 3 || info > 27) {
            r->pos = start;
            return reject_null(r, "the medium form refers to no text of the version's data");
        }
        size = info < 24 ? 0 : 1 << (info - 24);
        tn = info < 24 ? (uint64_t)info : 0;
        for (k = 0; k < size && k < left; k++) {
            tn = (tn << 8) | d[1 + k];
        }
        if (size > left || tn > (uint64_t)(left - size)) {
            r->pos = start;
            return reject_null(r, "the medium form refers to no text of the version's data");
        }
        t = d + 1 + size;
    }
    if (pn + tn + sfn > (uint64_t)pl->fields[1].spec.max_bytes) {
        r->pos = start;
        return reject_null(r, "text too long");
    }
    total = (Py_ssize_t)(pn + tn + sfn);
    if (total > (Py_ssize_t)sizeof(small) && (buf = PyMem_Malloc((size_t)total)) == NULL) {
        return PyErr_NoMemory();
    }
    memcpy(buf, pre, (size_t)pn);
    memcpy(buf + pn, t, (size_t)tn);
    memcpy(buf + pn + tn, suf, (size_t)sfn);
    if (!medium_ref(r->data, r->data_len, buf, total, &ref_at, &ref_i, &ref_len) ||
        ref_at != (Py_ssize_t)at || ref_i != (Py_ssize_t)pn) {
        if (buf != small) {
            PyMem_Free(buf);
        }
        r->pos = start;
        return reject_null(r, "not the reference the medium form takes");
    }
    if ((str = same_text(like, lb, ln, buf, total)) != NULL) { /* the head's medium form */
        if (buf != small) {
            PyMem_Free(buf);
        }
        return str;
    }
    str = PyUnicode_DecodeUTF8((const char *)buf, total, NULL);
    if (buf != small) {
        PyMem_Free(buf);
    }
    if (str == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            r->pos = start;
            return reject_null(r, "invalid UTF-8");
        }
        return NULL;
    }
    switch (text_nfc(str)) {
    case -1:
        Py_DECREF(str);
        return NULL;
    case 0:
        Py_DECREF(str);
        r->pos = start;
        return reject_null(r, "text is not NFC");
    default:
        return str;
    }
}

/* The head's forms as UTF-8, read from their CBOR (``sh->p``, the compact encoding its decode
 * checked): the medium's bytes, and the short form's, ``*sb``/``*sn`` with ``*cut`` 0, or, when
 * it is stored as a length, the medium's first ``*sn`` bytes (``*cut`` 1 when "…" follows).
 * 1, or 0 when they do not read so (nothing is then shared). Spares PyUnicode_AsUTF8AndSize,
 * which encodes a non-ASCII str afresh (about 4,000 instructions a get). */
static int
head_form_bytes(const Share *sh, const uint8_t **mb, Py_ssize_t *mn, const uint8_t **sb,
                Py_ssize_t *sn, int *cut)
{
    Reader t;
    uint64_t n, key, len;
    const uint8_t *p;
    t.b = sh->p;
    t.len = sh->n;
    t.pos = 0;
    t.share = NULL;
    t.data = NULL;
    t.data_len = 0;
    t.like = NULL;
    if (sh->p == NULL || expect(&t, 5, &n) < 0 || n != 2 || expect(&t, 0, &key) < 0) {
        goto no;
    }
    if (key == 1) {
        if (expect(&t, 3, &len) < 0 || take(&t, len, &p) < 0) {
            goto no;
        }
        *sb = p;
        *sn = (Py_ssize_t)len;
        *cut = 0;
        if (expect(&t, 0, &key) < 0 || key != 2 || expect(&t, 3, &len) < 0 ||
            take(&t, len, &p) < 0) {
            goto no;
        }
        *mb = p;
        *mn = (Py_ssize_t)len;
        return 1;
    }
    if (key != 2 || expect(&t, 3, &len) < 0 || take(&t, len, &p) < 0) {
        goto no;
    }
    *mb = p;
    *mn = (Py_ssize_t)len;
    if (expect(&t, 0, &key) < 0 || (key != 3 && key != 4) || expect(&t, 0, &len) < 0 ||
        len > (uint64_t)*mn) {
        goto no;
    }
    *sb = p;
    *sn = (Py_ssize_t)len;
    *cut = key == 3;
    return 1;
no:
    PyErr_Clear();
    return 0;
}

/* Forms in their compact encoding (format 15, codec.FormsCodec): {1: short, 2: medium} when
 * the short form is no prefix of the medium, else {2: medium, 4: n} (short = the medium's
 * first n bytes) or {2: medium, 3: n} (short = those bytes then "…"); anything else, including
 * the wide encoding where a compact one applies, is refused.  A version's (pl->forms == 2,
 * format 18) hold the medium as key 5 (read_medium_ref) where a text of its data occurs in
 * it: {1: short, 5: ref}, {3: n, 5: ref}, {4: n, 5: ref}; key 2 there is refused. */
static PyObject *
read_forms(PlanObject *pl, Reader *r)
{
    uint64_t n, key, skey;
    Py_ssize_t at = r->pos, sat = 0, mat, kat, sn, mn;
    const uint8_t *s, *m;
    long long len = 0;
    PyObject *vals[2] = {NULL, NULL}, *out = NULL;
    /* on the read path, the head's forms: texts equal to theirs are theirs (one object) */
    PyObject *ls = NULL, *lm = NULL;
    const char *lsb = NULL, *lmb = NULL;
    Py_ssize_t lsn = 0, lmn = 0;
    int lcut = 0; /* the head's short form is lsb's lsn bytes then "…" */
    if (expect(r, 5, &n) < 0) {
        return NULL;
    }
    if (n != 2) {
        r->pos = at;
        return reject_null(r, "forms are a map of two entries");
    }
    if (pl->forms == 2 && r->like != NULL && Py_TYPE(r->like) == (PyTypeObject *)pl->cls &&
        r->share != NULL && r->share->obj == r->like) {
        const uint8_t *hm, *hs;
        if (head_form_bytes(r->share, &hm, &lmn, &hs, &lsn, &lcut)) {
            ls = attr_get(r->like, A_SHORT);
            lm = ls != NULL ? attr_get(r->like, A_MEDIUM) : NULL;
            if (lm == NULL || !PyUnicode_CheckExact(ls) || !PyUnicode_CheckExact(lm)) {
                PyErr_Clear();
                Py_CLEAR(ls);
                Py_CLEAR(lm);
            }
            else {
                lsb = (const char *)hs;
                lmb = (const char *)hm;
            }
        }
    }
    kat = r->pos;
    if (expect(r, 0, &key) < 0) {
        return NULL;
    }
    if (key == 1 || ((key == 3 || key == 4) && pl->forms == 2)) { /* the short form first */
        skey = key;
        sat = r->pos;
        if (key == 1) {
            if ((vals[0] = read_text_like(&pl->fields[0].spec, r, ls, lcut ? NULL : lsb, lsn)) ==
                NULL) {
                goto fail;
            }
        }
        else if (read_int(r, key == 4 ? 1 : 0, LLONG_MAX, &len) < 0) {
            goto fail;
        }
        kat = r->pos;
        if (expect(r, 0, &key) < 0) {
            goto fail;
        }
        if (key == 5 && pl->forms == 2) {
            if ((vals[1] = read_medium_ref(pl, r, lm, lmb, lmn)) == NULL) {
                goto fail;
            }
            if (vals[1] == lm && lmb != NULL) { /* the head's: its bytes, not encoded again */
                m = (const uint8_t *)lmb;
                mn = lmn;
            }
            else if ((m = (const uint8_t *)PyUnicode_AsUTF8AndSize(vals[1], &mn)) == NULL) {
                goto fail;
            }
        }
        else if (key == 2 && skey == 1) {
            mat = r->pos;
            if ((vals[1] = read_text_like(&pl->fields[1].spec, r, lm, lmb, lmn)) == NULL) {
                goto fail;
            }
            m = text_body(r, mat, &mn);
        }
        else {
            r->pos = kat;
            reject(r, "forms lack their medium form (key 2 or 5)");
            goto fail;
        }
    }
    else if (key == 2) {
        mat = r->pos;
        if ((vals[1] = read_text_like(&pl->fields[1].spec, r, lm, lmb, lmn)) == NULL) {
            goto fail;
        }
        m = text_body(r, mat, &mn);
        kat = r->pos;
        if (expect(r, 0, &skey) < 0) {
            goto fail;
        }
        if (skey != 3 && skey != 4) {
            r->pos = kat;
            reject(r, "forms lack their short form (key 1, 3 or 4)");
            goto fail;
        }
        sat = r->pos;
        if (read_int(r, skey == 4 ? 1 : 0, LLONG_MAX, &len) < 0) {
            goto fail;
        }
    }
    else {
        r->pos = kat;
        return reject_null(r, "forms lack their short form (key 1, 3 or 4)");
    }
    if (key == 2 && pl->forms == 2 && r->data != NULL) {
        Py_ssize_t ra, ri, rl;
        if (medium_ref(r->data, r->data_len, m, mn, &ra, &ri, &rl)) {
            r->pos = at;
            reject(r, "a medium form that holds a text of the version's data refers to it");
            goto fail;
        }
    }
    if (skey == 1) {
        s = text_body(r, sat, &sn);
        if ((sn <= mn && memcmp(s, m, (size_t)sn) == 0) ||
            (sn >= 3 && memcmp(s + sn - 3, ELLIPSIS, 3) == 0 && sn - 3 <= mn &&
             memcmp(s, m, (size_t)(sn - 3)) == 0)) {
            r->pos = sat;
            reject(r, "a short form that begins the medium form is stored as its length");
            goto fail;
        }
    }
    else {
        uint8_t small[256];
        uint8_t *buf = small;
        if (len > mn) {
            r->pos = sat;
            reject(r, "the short form's length runs past the medium form");
            goto fail;
        }
        if (len < mn && (m[len] & 0xC0) == 0x80) {
            r->pos = sat;
            reject(r, "the short form's length ends inside a character of the medium form");
            goto fail;
        }
        if (skey == 3 && mn - len >= 3 && memcmp(m + len, ELLIPSIS, 3) == 0) {
            r->pos = sat;
            reject(r, "a short form that begins the medium form is stored with key 4");
            goto fail;
        }
        sn = (Py_ssize_t)len + (skey == 3 ? 3 : 0);
        if (sn > pl->fields[0].spec.max_bytes) {
            r->pos = sat;
            reject(r, "text too long");
            goto fail;
        }
        if (skey == 4 && sn == mn) { /* the whole medium form: the same text, one str */
            vals[0] = Py_NewRef(vals[1]);
            goto built;
        }
        if (sn > (Py_ssize_t)sizeof(small) && (buf = PyMem_Malloc((size_t)sn)) == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        memcpy(buf, m, (size_t)len);
        if (skey == 3) {
            memcpy(buf + len, ELLIPSIS, 3);
        }
        if ((skey == 3) == lcut && /* the head's short form: the same bytes, cut alike */
            (vals[0] = same_text(ls, lsb, lsn, buf, (Py_ssize_t)len)) != NULL) {
            if (buf != small) {
                PyMem_Free(buf);
            }
            goto built;
        }
        vals[0] = PyUnicode_DecodeUTF8((const char *)buf, sn, NULL);
        if (buf != small) {
            PyMem_Free(buf);
        }
        if (vals[0] == NULL) {
            goto fail; /* the medium is valid UTF-8 and the cut on a boundary: only memory */
        }
        /* a prefix of a medium form of one-byte kind, and the ellipsis: plainly NFC (all its
         * characters are below U+0300 or U+2026), as text_nfc would find character by
         * character */
        switch (PyUnicode_KIND(vals[1]) == PyUnicode_1BYTE_KIND ? 1 : text_nfc(vals[0])) {
        case -1:
            goto fail;
        case 0:
            r->pos = sat;
            reject(r, "text is not NFC");
            goto fail;
        default:
            break;
        }
    }
built:
    if (vals[0] != NULL && vals[0] == ls && vals[1] == lm) { /* the head's forms, the same */
        Py_INCREF(r->like);
        out = r->like;
    }
    else {
        out = PyObject_Vectorcall(pl->cls, vals, 0, pl->kwnames);
    }
fail:
    Py_XDECREF(vals[0]);
    Py_XDECREF(vals[1]);
    Py_XDECREF(ls);
    Py_XDECREF(lm);
    return out;
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
    if (pl->forms) {
        return read_forms(pl, r);
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
        if (f->spec.kind == K_RECORD && ((PlanObject *)f->spec.plan)->forms == 2) {
            /* a version's forms may refer into its data, key 4 (format 18) */
            r->data = NULL;
            for (j = 0; j < nf; j++) {
                PyObject *d = pl->fields[j].key == 4 ? vals[pl->fields[j].slot] : NULL;
                if (d != NULL && PyBytes_CheckExact(d)) {
                    r->data = (const uint8_t *)PyBytes_AS_STRING(d);
                    r->data_len = PyBytes_GET_SIZE(d);
                }
            }
            r->like = r->share != NULL ? r->share->obj : NULL; /* read_forms: one object */
            v = decode_value(&f->spec, r, depth + 1);
            r->data = NULL;
            r->like = NULL;
        }
        else {
            v = decode_value(&f->spec, r, depth + 1);
        }
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
        r.share = NULL;
        r.data = NULL;
        r.like = NULL;
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
    r.share = NULL;
    r.data = NULL;
    r.like = NULL;
    out = decode_record((PlanObject *)args[0], &r, 0);
    if (out != NULL && r.pos != r.len) {
        Py_CLEAR(out);
        reject(&r, "trailing bytes");
    }
    PyBuffer_Release(&view);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* The read path: a memory's head, version and data from their stored values in one call
 * (cortex/engine/store.py keeps the definitions: Store._head_from, _checked_version, _memory).
 *
 * Each function returns the value the Python path returns, or None where it declines (a value
 * that fails its checksum or does not decode, a record of another id or version, anything
 * unusual): the caller then runs the Python path, which raises the error that names it.  The
 * read checks of specs/storage.md §"What a read checks" apply: every value's CRC, the ids and
 * version numbers the keys promise; not the sha256 of the data (verify checks it). */

/* the read context (cortex.engine.store._READ): what the functions build and check */
enum {
    RC_HEAD,         /* the Plan of a head */
    RC_VERSION,      /* the Plan of a version */
    RC_DATA,         /* the Plans of the data, by type code (None where none) */
    RC_MEMORY,       /* the Memory class */
    RC_URI,          /* the Uri class and its slots type, id, version */
    RC_URI_TYPE,
    RC_URI_ID,
    RC_URI_VERSION,
    RC_ID_BYTES,     /* the MemoryId slot of the raw bytes */
    RC_VPREFIX,      /* b"mv/" */
    RC_IDPREFIX,     /* b"id/" (format 21: id16 -> the sealed u32 row) */
    RC_HPREFIX,      /* b"m/" */
    RC_FORMS,        /* the Plan of the forms (a head's and its version's: one object) */
    RC_N,
};

static PyObject *memory_kwnames = NULL; /* ("uri", "head", "version", "data") */

static int
read_ctx_ok(PyObject *ctx)
{
    Py_ssize_t i;
    if (!PyTuple_CheckExact(ctx) || PyTuple_GET_SIZE(ctx) != RC_N ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(ctx, RC_HEAD), &Plan_Type) ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(ctx, RC_VERSION), &Plan_Type) ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(ctx, RC_FORMS), &Plan_Type) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(ctx, RC_DATA)) ||
        !PyType_Check(PyTuple_GET_ITEM(ctx, RC_MEMORY)) ||
        !PyType_Check(PyTuple_GET_ITEM(ctx, RC_URI)) ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(ctx, RC_VPREFIX)) ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(ctx, RC_IDPREFIX)) ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(ctx, RC_HPREFIX))) {
        PyErr_SetString(PyExc_TypeError, "the read context is malformed");
        return 0;
    }
    for (i = RC_URI_TYPE; i <= RC_ID_BYTES; i++) {
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(ctx, i), &PyMemberDescr_Type)) {
            PyErr_SetString(PyExc_TypeError, "the read context's slots are member descriptors");
            return 0;
        }
    }
    return 1;
}

/* A read's Share, empty: the forms of the read context's plan, nothing decoded yet */
static void
share_start(Share *share, PyObject *ctx)
{
    share->plan = PyTuple_GET_ITEM(ctx, RC_FORMS);
    share->obj = NULL;
    share->time = NULL;
    share->id = NULL;
}

/* The references a read's Share holds, dropped */
static void
share_release(Share *share)
{
    Py_CLEAR(share->obj);
    Py_CLEAR(share->time);
    Py_CLEAR(share->id);
}

/* 1 when ``raw`` is bytes ``payload || crc32(payload)`` (kv.unseal), with the payload's span */
static int
unsealed(PyObject *raw, Reader *r, Share *share)
{
    const uint8_t *p;
    Py_ssize_t n;
    uint32_t c;
    if (!PyBytes_CheckExact(raw)) {
        return 0;
    }
    n = PyBytes_GET_SIZE(raw) - 4;
    if (n < 1) {
        return 0;
    }
    p = (const uint8_t *)PyBytes_AS_STRING(raw);
    c = crc32_of(p, n);
    if (p[n] != (uint8_t)(c >> 24) || p[n + 1] != (uint8_t)(c >> 16) ||
        p[n + 2] != (uint8_t)(c >> 8) || p[n + 3] != (uint8_t)c) {
        return 0;
    }
    r->b = p;
    r->len = n;
    r->pos = 0;
    r->share = share;
    r->data = NULL;
    r->like = NULL;
    return 1;
}

/* The record ``plan`` describes in all of ``r``; NULL without an error where it declines. */
static PyObject *
whole_record(PyObject *plan, Reader *r)
{
    PyObject *out = decode_record((PlanObject *)plan, r, 0);
    if (out == NULL) {
        if (PyErr_ExceptionMatches(Reject)) {
            PyErr_Clear();
        }
        return NULL;
    }
    if (r->pos != r->len) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* 1 when ``obj.id`` holds the 16 bytes of ``mid``, 0 when not, -1 on error */
static int
has_id(PyObject *ctx, PyObject *obj, PyObject *mid)
{
    PyObject *id = attr_get(obj, A_ID), *raw, *slot;
    int same;
    if (id == NULL) {
        return -1;
    }
    slot = PyTuple_GET_ITEM(ctx, RC_ID_BYTES);
    if (!PyObject_TypeCheck(id, PyDescr_TYPE(slot))) {
        Py_DECREF(id);
        return 0;
    }
    raw = Py_TYPE(slot)->tp_descr_get(slot, id, (PyObject *)Py_TYPE(id));
    Py_DECREF(id);
    if (raw == NULL) {
        return -1;
    }
    same = PyBytes_CheckExact(raw) && PyBytes_GET_SIZE(raw) == 16 &&
           memcmp(PyBytes_AS_STRING(raw), PyBytes_AS_STRING(mid), 16) == 0;
    Py_DECREF(raw);
    return same;
}

/* ``obj.<attr[a]>`` as a C integer in [1, 2**63 - 1]; 0 when it is not one, -1 on error */
static long long
positive_attr(PyObject *obj, int a)
{
    PyObject *v = attr_get(obj, a);
    long long n;
    if (v == NULL) {
        return -1;
    }
    n = PyLong_CheckExact(v) ? PyLong_AsLongLong(v) : 0;
    Py_DECREF(v);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return n < 1 ? 0 : n;
}

/* the head of ``mid`` stored as ``hraw``: a new reference, or NULL (an error set or not) */
static PyObject *
head_of(PyObject *ctx, PyObject *mid, PyObject *hraw, Share *share)
{
    Reader r;
    PyObject *head;
    int same;
    if (!unsealed(hraw, &r, share)) {
        return NULL;
    }
    head = whole_record(PyTuple_GET_ITEM(ctx, RC_HEAD), &r);
    if (head == NULL) {
        return NULL;
    }
    same = has_id(ctx, head, mid);
    if (same != 1) {
        Py_DECREF(head);
        return NULL;
    }
    return head;
}

/* version ``n`` of ``mid`` stored as ``vraw``: a new reference, or NULL (an error set or not) */
static PyObject *
version_of(PyObject *ctx, PyObject *mid, long long n, PyObject *vraw, Share *share)
{
    Reader r;
    PyObject *v;
    if (!unsealed(vraw, &r, share)) {
        return NULL;
    }
    v = whole_record(PyTuple_GET_ITEM(ctx, RC_VERSION), &r);
    if (v == NULL) {
        return NULL;
    }
    if (has_id(ctx, v, mid) != 1 || positive_attr(v, A_VERSION) != n) {
        Py_DECREF(v);
        return NULL;
    }
    return v;
}

/* The Memory of a head and one of its versions, the data decoded: a new reference, or NULL */
static PyObject *
memory_from(PyObject *ctx, PyObject *head, PyObject *v)
{
    PyObject *data, *type = NULL, *id = NULL, *num = NULL, *uri = NULL, *out = NULL;
    PyObject *args[4];
    PyTypeObject *ut = (PyTypeObject *)PyTuple_GET_ITEM(ctx, RC_URI);
    data = attr_get(v, A_DATA);
    if (data == NULL) {
        return NULL;
    }
    type = attr_get(v, A_TYPE);
    if (type == NULL) {
        goto done;
    }
    if (data != Py_None) {
        PyObject *plans = PyTuple_GET_ITEM(ctx, RC_DATA), *plan, *value;
        long code = PyLong_Check(type) ? PyLong_AsLong(type) : -1;
        Reader r;
        if (code == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        }
        if (!PyBytes_CheckExact(data) || code < 0 || code >= PyTuple_GET_SIZE(plans)) {
            goto done;
        }
        plan = PyTuple_GET_ITEM(plans, code);
        if (!PyObject_TypeCheck(plan, &Plan_Type)) {
            goto done;
        }
        r.b = (const uint8_t *)PyBytes_AS_STRING(data);
        r.len = PyBytes_GET_SIZE(data);
        r.pos = 0;
        r.share = NULL;
        r.data = NULL;
        r.like = NULL;
        value = whole_record(plan, &r);
        if (value == NULL) {
            goto done;
        }
        Py_SETREF(data, value);
    }
    id = attr_get(v, A_ID);
    num = id != NULL ? attr_get(v, A_VERSION) : NULL;
    if (num == NULL) {
        goto done;
    }
    uri = ut->tp_alloc(ut, 0);
    if (uri == NULL) {
        goto done;
    }
    {
        PyObject *st = PyTuple_GET_ITEM(ctx, RC_URI_TYPE), *si = PyTuple_GET_ITEM(ctx, RC_URI_ID),
                 *sv = PyTuple_GET_ITEM(ctx, RC_URI_VERSION);
        if (Py_TYPE(st)->tp_descr_set(st, uri, type) < 0 ||
            Py_TYPE(si)->tp_descr_set(si, uri, id) < 0 ||
            Py_TYPE(sv)->tp_descr_set(sv, uri, num) < 0) {
            goto done;
        }
    }
    args[0] = uri;
    args[1] = head;
    args[2] = v;
    args[3] = data;
    out = PyObject_Vectorcall(PyTuple_GET_ITEM(ctx, RC_MEMORY), args, 0, memory_kwnames);
done:
    Py_XDECREF(uri);
    Py_XDECREF(num);
    Py_XDECREF(id);
    Py_XDECREF(type);
    Py_DECREF(data);
    return out;
}

/* NULL with an error: raise it; NULL without: None (decline) */
static PyObject *
or_none(PyObject *v)
{
    if (v == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return v;
}

static int
is_mid(PyObject *mid)
{
    if (!PyBytes_CheckExact(mid) || PyBytes_GET_SIZE(mid) != 16) {
        PyErr_SetString(PyExc_TypeError, "the id is 16 raw bytes");
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(read_head_doc,
             "read_head(ctx, mid, hraw, /)\n--\n\n"
             "``Store._head_from``: the head of the memory of raw id ``mid`` stored as ``hraw``, "
             "or None where the Python path must decide (no value, a failed checksum, a head "
             "that does not decode or is another memory's).");

static PyObject *
sp_read_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read_head(ctx, mid, hraw)");
        return NULL;
    }
    if (!read_ctx_ok(args[0]) || !is_mid(args[1])) {
        return NULL;
    }
    return or_none(head_of(args[0], args[1], args[2], NULL));
}

PyDoc_STRVAR(read_version_doc,
             "read_version(ctx, mid, n, vraw, /)\n--\n\n"
             "``Store._checked_version`` of version ``n`` of the memory of raw id ``mid`` stored "
             "as ``vraw``, without the data's sha256 (storage.md: what a read checks), or None "
             "where the Python path must decide.");

static PyObject *
sp_read_version(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    long long n;
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "read_version(ctx, mid, n, vraw)");
        return NULL;
    }
    if (!read_ctx_ok(args[0]) || !is_mid(args[1])) {
        return NULL;
    }
    n = PyLong_CheckExact(args[2]) ? PyLong_AsLongLong(args[2]) : 0;
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        n = 0;
    }
    if (n < 1) {
        Py_RETURN_NONE;
    }
    return or_none(version_of(args[0], args[1], n, args[3], NULL));
}

/* read_memory after the head: version n (0: the head's current one) read as (vkey, vraw) */
static PyObject *
memory_at(PyObject *ctx, PyObject *mid, PyObject *head, PyObject *vkey, PyObject *vraw,
          long long n, Share *share)
{
    PyObject *pre, *v, *out;
    long long cur = positive_attr(head, A_CURRENT_VERSION);
    Py_ssize_t lp;
    const char *k;
    int i;
    if (cur <= 0 || (n != 0 && n > cur)) {
        return NULL; /* an error set (cur < 0) or not */
    }
    if (n == 0) {
        n = cur;
    }
    /* the key read must be version n's: mv/ u32(row) u64(n) (format 21; the version record
     * names its memory, which version_of checks against mid) */
    pre = PyTuple_GET_ITEM(ctx, RC_VPREFIX);
    lp = PyBytes_GET_SIZE(pre);
    if (!PyBytes_CheckExact(vkey) || PyBytes_GET_SIZE(vkey) != lp + 4 + 8) {
        return NULL;
    }
    k = PyBytes_AS_STRING(vkey);
    if (memcmp(k, PyBytes_AS_STRING(pre), (size_t)lp) != 0) {
        return NULL;
    }
    for (i = 0; i < 8; i++) {
        if ((uint8_t)k[lp + 4 + i] != (uint8_t)((unsigned long long)n >> (56 - 8 * i))) {
            return NULL;
        }
    }
    v = version_of(ctx, mid, n, vraw, share);
    if (v == NULL) {
        return NULL;
    }
    out = memory_from(ctx, head, v);
    Py_DECREF(v);
    return out;
}

PyDoc_STRVAR(read_memory_doc,
             "read_memory(ctx, mid, hraw, vkey, vraw, n, /)\n--\n\n"
             "``Store.resolve`` (``n`` >= 1) or ``resolve_latest`` (``n`` = 0: the head's current "
             "version) from the stored head ``hraw`` of the memory of raw id ``mid`` and the "
             "pair ``(vkey, vraw)`` read for its version: the Memory, its data decoded, or None "
             "where the Python path must decide (anything missing, damaged or unusual, a key "
             "that is not the version's, a version past the head's current one).");

static PyObject *
sp_read_memory(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *ctx, *mid, *head, *out;
    long long n;
    Share share;
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "read_memory(ctx, mid, hraw, vkey, vraw, n)");
        return NULL;
    }
    ctx = args[0];
    mid = args[1];
    if (!read_ctx_ok(ctx) || !is_mid(mid)) {
        return NULL;
    }
    n = PyLong_CheckExact(args[5]) ? PyLong_AsLongLong(args[5]) : -1;
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
    }
    if (n < 0) {
        Py_RETURN_NONE;
    }
    share_start(&share, ctx);
    head = head_of(ctx, mid, args[2], &share);
    if (head == NULL) {
        share_release(&share);
        return or_none(NULL);
    }
    out = memory_at(ctx, mid, head, args[3], args[4], n, &share);
    Py_DECREF(head);
    share_release(&share);
    return or_none(out);
}

PyDoc_STRVAR(read_row_memory_doc,
             "memory_of(ctx, head, version, /)\n--\n\n"
             "``cortex.query.planner.memory_of``: the Memory of a head and a version the read "
             "path built, its data decoded, or None where the Python path must decide.");

static PyObject *
sp_memory_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "memory_of(ctx, head, version)");
        return NULL;
    }
    if (!read_ctx_ok(args[0])) {
        return NULL;
    }
    return or_none(memory_from(args[0], args[1], args[2]));
}

/* ``prefix || part[0:np]`` then, with ``n >= 0``, ``u64(n)``: a new bytes object (``id/``
 * id16, ``m/`` u32(row), ``mv/`` u32(row) u64(n)) */
static PyObject *
key_of(PyObject *prefix, const char *part, Py_ssize_t np, long long n)
{
    Py_ssize_t lp = PyBytes_GET_SIZE(prefix);
    PyObject *k = PyBytes_FromStringAndSize(NULL, lp + np + (n >= 0 ? 8 : 0));
    char *p;
    int i;
    if (k == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(k);
    memcpy(p, PyBytes_AS_STRING(prefix), (size_t)lp);
    memcpy(p + lp, part, (size_t)np);
    if (n >= 0) {
        for (i = 0; i < 8; i++) {
            p[lp + np + i] = (char)(uint8_t)((unsigned long long)n >> (56 - 8 * i));
        }
    }
    return k;
}

/* The row a sealed ``id/`` value holds (``payload || crc32``, the payload a u32): 1 with
 * ``row4`` set, 0 when it is not one (missing, damaged: the Python path says what) */
static int
row_of_value(PyObject *raw, char row4[4])
{
    const uint8_t *p;
    uint32_t c;
    if (!PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 8) {
        return 0;
    }
    p = (const uint8_t *)PyBytes_AS_STRING(raw);
    c = crc32_of(p, 4);
    if (p[4] != (uint8_t)(c >> 24) || p[5] != (uint8_t)(c >> 16) || p[6] != (uint8_t)(c >> 8) ||
        p[7] != (uint8_t)c) {
        return 0;
    }
    memcpy(row4, p, 4);
    return 1;
}

PyDoc_STRVAR(read_current_doc,
             "read_current(ctx, get, mid, /)\n--\n\n"
             "The head of the memory of raw id ``mid`` and the version it points at, read with "
             "``get`` (a read transaction's ``get``: key -> bytes or None; or a pair "
             "``(get, heads)``: heads read as ``get(key, None, heads)``) and checked as "
             "``Store._head`` and ``Store._version`` check them: ``(head, version)``, or None "
             "where the Python path must decide (anything missing, damaged or unusual).");

/* ``get(key)`` of a head: with ``get`` a pair ``(get, heads)``, ``get(key, None, heads)`` (the
 * heads in a named database of their own, format 19: LMDB's transaction ``get`` with its db) */
static PyObject *
get_in(PyObject *get, PyObject *key, Py_ssize_t which)
{
    if (PyTuple_CheckExact(get)) {
        PyObject *args[3];
        Py_ssize_t n = PyTuple_GET_SIZE(get);
        if (n != 2 && n != 3) {
            PyErr_SetString(PyExc_TypeError,
                            "get is a callable, a pair (get, heads) or (get, heads, ids)");
            return NULL;
        }
        if (which >= n) { /* no database of its own: the main one's */
            return PyObject_CallOneArg(PyTuple_GET_ITEM(get, 0), key);
        }
        args[0] = key;
        args[1] = Py_None;
        args[2] = PyTuple_GET_ITEM(get, which);
        return PyObject_Vectorcall(PyTuple_GET_ITEM(get, 0), args, 3, NULL);
    }
    return PyObject_CallOneArg(get, key);
}

static PyObject *
get_head(PyObject *get, PyObject *key)
{
    return get_in(get, key, 1);
}

/* ``get(key)`` of an ``id/`` record (format 21: with ``get`` a triple, in its database) */
static PyObject *
get_id(PyObject *get, PyObject *key)
{
    return get_in(get, key, 2);
}

/* ``get(key)`` of a version (``get``'s callable where it is a pair ``(get, heads)``) */
static PyObject *
get_version(PyObject *get, PyObject *key)
{
    if (PyTuple_CheckExact(get)) {
        Py_ssize_t n = PyTuple_GET_SIZE(get);
        if (n != 2 && n != 3) {
            PyErr_SetString(PyExc_TypeError,
                            "get is a callable, a pair (get, heads) or (get, heads, ids)");
            return NULL;
        }
        get = PyTuple_GET_ITEM(get, 0);
    }
    return PyObject_CallOneArg(get, key);
}

/* ``(head, version)``: the version ``head`` (of raw id ``mid``, at row ``row4``) points at, read
 * with ``get`` and checked; NULL (an error set or not) */
static PyObject *
with_current(PyObject *ctx, PyObject *get, PyObject *mid, PyObject *head, const char row4[4],
             Share *share)
{
    PyObject *key, *vraw, *v, *out;
    long long cur = positive_attr(head, A_CURRENT_VERSION);
    if (cur <= 0) {
        return NULL;
    }
    key = key_of(PyTuple_GET_ITEM(ctx, RC_VPREFIX), row4, 4, cur);
    if (key == NULL) {
        return NULL;
    }
    vraw = get_version(get, key);
    Py_DECREF(key);
    if (vraw == NULL) {
        return NULL;
    }
    v = version_of(ctx, mid, cur, vraw, share);
    Py_DECREF(vraw);
    if (v == NULL) {
        return NULL;
    }
    out = PyTuple_Pack(2, head, v);
    Py_DECREF(v);
    return out;
}

/* The row the ``id/`` record of raw id ``mid16`` holds into ``row4``: 1, 0 where there is none
 * or it is damaged (the Python path says which), -1 on error */
static int
row_of_id(PyObject *ctx, PyObject *get, const char *mid16, char row4[4])
{
    PyObject *key = key_of(PyTuple_GET_ITEM(ctx, RC_IDPREFIX), mid16, 16, -1), *rraw;
    int found;
    if (key == NULL) {
        return -1;
    }
    rraw = get_id(get, key);
    Py_DECREF(key);
    if (rraw == NULL) {
        return -1;
    }
    found = row_of_value(rraw, row4);
    Py_DECREF(rraw);
    return found;
}

/* The stored head at row ``row4`` (``m/`` u32(row)): a new reference (None where there is none),
 * NULL on error; ``share`` set up for decoding it */
static PyObject *
head_raw_at(PyObject *ctx, PyObject *get, const char row4[4], Share *share)
{
    PyObject *key = key_of(PyTuple_GET_ITEM(ctx, RC_HPREFIX), row4, 4, -1), *hraw;
    if (key == NULL) {
        return NULL;
    }
    hraw = get_head(get, key);
    Py_DECREF(key);
    share_start(share, ctx);
    return hraw;
}

/* read_current after its argument checks: (head, version), or NULL (an error set or not) */
static PyObject *
current_pair(PyObject *ctx, PyObject *get, PyObject *mid)
{
    PyObject *hraw, *head, *out = NULL;
    Share share;
    char row4[4];
    /* format 21: the row (id/), then the head and the version by row */
    if (row_of_id(ctx, get, PyBytes_AS_STRING(mid), row4) <= 0) {
        return NULL; /* an error, no such memory, or a damaged record */
    }
    hraw = head_raw_at(ctx, get, row4, &share);
    if (hraw == NULL) {
        return NULL;
    }
    head = head_of(ctx, mid, hraw, &share); /* hraw is kept: share.p points into it */
    if (head == NULL) {
        goto done;
    }
    out = with_current(ctx, get, mid, head, row4, &share);
done:
    Py_XDECREF(head);
    share_release(&share);
    Py_DECREF(hraw);
    return out;
}

static PyObject *
sp_read_current(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read_current(ctx, get, mid)");
        return NULL;
    }
    if (!read_ctx_ok(args[0]) || !is_mid(args[2])) {
        return NULL;
    }
    return or_none(current_pair(args[0], args[1], args[2]));
}

PyDoc_STRVAR(read_rows_doc,
             "read_rows(ctx, get, rows, /)\n--\n\n"
             "The memories at document numbers ``rows`` (4-byte big-endian rows: the lexical "
             "index's postings), read with ``get`` as ``read_current`` reads: for each row its "
             "head, which must be the head of a memory whose ``id/`` record names that row "
             "back, and the version the head points at: a list of ``(head, version)`` in the "
             "order of ``rows``, or None where the Python path must decide for any of them "
             "(anything missing, damaged or unusual: ``lexical._ids_of`` says what).");

/* read_rows of one row: (head, version), or NULL (an error set or not) */
static PyObject *
row_pair(PyObject *ctx, PyObject *get, PyObject *raw)
{
    PyObject *hraw, *head = NULL, *id = NULL, *mid = NULL, *out = NULL;
    PyObject *slot = PyTuple_GET_ITEM(ctx, RC_ID_BYTES);
    Share share;
    char row4[4];
    Reader r;
    if (!PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 4) {
        return NULL;
    }
    hraw = head_raw_at(ctx, get, PyBytes_AS_STRING(raw), &share);
    if (hraw == NULL) {
        return NULL;
    }
    if (!unsealed(hraw, &r, &share)) {
        goto done;
    }
    head = whole_record(PyTuple_GET_ITEM(ctx, RC_HEAD), &r); /* hraw is kept: r points in it */
    if (head == NULL) {
        goto done;
    }
    /* the memory the head names, and its id/ record naming this row back (storage.md §2) */
    id = attr_get(head, A_ID);
    if (id == NULL || !PyObject_TypeCheck(id, PyDescr_TYPE(slot))) {
        goto done;
    }
    mid = Py_TYPE(slot)->tp_descr_get(slot, id, (PyObject *)Py_TYPE(id));
    if (mid == NULL || !PyBytes_CheckExact(mid) || PyBytes_GET_SIZE(mid) != 16) {
        goto done;
    }
    if (row_of_id(ctx, get, PyBytes_AS_STRING(mid), row4) <= 0 ||
        memcmp(row4, PyBytes_AS_STRING(raw), 4) != 0) {
        goto done;
    }
    out = with_current(ctx, get, mid, head, row4, &share);
done:
    Py_XDECREF(mid);
    Py_XDECREF(id);
    Py_XDECREF(head);
    share_release(&share);
    Py_DECREF(hraw);
    return out;
}

static PyObject *
sp_read_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *rows, *out;
    Py_ssize_t i, n;
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read_rows(ctx, get, rows)");
        return NULL;
    }
    if (!read_ctx_ok(args[0])) {
        return NULL;
    }
    rows = args[2];
    if (!PyList_CheckExact(rows)) {
        PyErr_SetString(PyExc_TypeError, "read_rows: rows is a list of bytes");
        return NULL;
    }
    n = PyList_GET_SIZE(rows);
    out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *pair = row_pair(args[0], args[1], PyList_GET_ITEM(rows, i));
        if (pair == NULL) {
            Py_DECREF(out);
            return or_none(NULL);
        }
        PyList_SET_ITEM(out, i, pair);
    }
    return out;
}

static PyObject *s_set_range = NULL, *s_key = NULL; /* cursor methods (interned once) */

static PyObject *s_get = NULL; /* the transaction's get (interned once) */

PyDoc_STRVAR(read_latest_doc,
             "read_latest(ctx, txn, mid, heads=None, ids=None, /)\n--\n\n"
             "``Store.resolve_latest``'s reads and ``read_memory`` (n = 0) in one call, in the "
             "LMDB read transaction ``txn`` (begun without buffers): the row of the memory of "
             "id ``mid`` (16 raw bytes, or a MemoryId: the Memory's ids are then that object) "
             "in ``id/`` (format 21; read in the named database ``ids``, None: the main one), "
             "its head under that row in ``heads`` (None: the main one), and the version the "
             "head points at by its key (``mv/`` u32(row) u64(current)) in the main database "
             "(a later version stored is not looked for). The Memory, or "
             "None where it declines (anything missing, damaged or unusual): the Python path "
             "then reads again and decides.");

/* a method of ``obj`` called with ``arg`` (or none): a new reference or NULL */
static PyObject *
call_method(PyObject *obj, PyObject *name, PyObject *arg)
{
    PyObject *args[2] = {obj, arg};
    return PyObject_VectorcallMethod(name, args, (arg != NULL ? 2 : 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                     NULL);
}

static PyObject *
sp_read_latest(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *ctx, *txn, *mid, *key, *hraw = NULL, *k = NULL, *v = NULL, *head;
    PyObject *rraw = NULL, *out = NULL, *given = NULL, *slot;
    Share share;
    char row4[4];
    (void)module;
    if (nargs < 3 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "read_latest(ctx, txn, mid, heads=None, ids=None)");
        return NULL;
    }
    ctx = args[0];
    txn = args[1];
    mid = args[2];
    if (!read_ctx_ok(ctx)) {
        return NULL;
    }
    slot = PyTuple_GET_ITEM(ctx, RC_ID_BYTES);
    if (Py_TYPE(mid) == PyDescr_TYPE(slot)) { /* a MemoryId: its raw bytes, and it is shared */
        given = mid;
        mid = Py_TYPE(slot)->tp_descr_get(slot, given, (PyObject *)Py_TYPE(given));
        if (mid == NULL) {
            return NULL;
        }
        if (!is_mid(mid)) {
            Py_DECREF(mid);
            return NULL;
        }
    }
    else if (!is_mid(mid)) {
        return NULL;
    }
    else {
        Py_INCREF(mid);
    }
    /* the row: id/ id16 (format 21) */
    key = key_of(PyTuple_GET_ITEM(ctx, RC_IDPREFIX), PyBytes_AS_STRING(mid), 16, -1);
    if (key == NULL) {
        Py_DECREF(mid);
        return NULL;
    }
    if (nargs == 5 && args[4] != Py_None) { /* txn.get(key, None, ids) */
        PyObject *gargs[4] = {txn, key, Py_None, args[4]};
        rraw = PyObject_VectorcallMethod(s_get, gargs, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    else {
        rraw = call_method(txn, s_get, key);
    }
    Py_DECREF(key);
    if (rraw == NULL) {
        goto done;
    }
    if (rraw != Py_None && !PyBytes_CheckExact(rraw)) {
        PyErr_SetString(PyExc_TypeError, "read_latest: the transaction must not use buffers");
        goto done;
    }
    if (!row_of_value(rraw, row4)) {
        out = Py_NewRef(Py_None); /* declined */
        goto done;
    }
    key = key_of(PyTuple_GET_ITEM(ctx, RC_HPREFIX), row4, 4, -1);
    if (key == NULL) {
        goto done;
    }
    if (nargs >= 4 && args[3] != Py_None) { /* txn.get(key, None, heads) */
        PyObject *gargs[4] = {txn, key, Py_None, args[3]};
        hraw = PyObject_VectorcallMethod(s_get, gargs, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    else {
        hraw = call_method(txn, s_get, key);
    }
    Py_DECREF(key);
    if (hraw == NULL) {
        goto done;
    }
    if (hraw == Py_None) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    /* the version the head points at, by its key: mv/ u32(row) u64(current) (a stray version
     * past it is verify's and history's to report: specs/storage.md, "What a read checks") */
    share_start(&share, ctx);
    if (given != NULL) {
        share.id = Py_NewRef(given);
        memcpy(share.id_raw, PyBytes_AS_STRING(mid), 16);
    }
    head = head_of(ctx, mid, hraw, &share);
    if (head != NULL) {
        long long n = positive_attr(head, A_CURRENT_VERSION);
        if (n > 0) {
            k = key_of(PyTuple_GET_ITEM(ctx, RC_VPREFIX), row4, 4, n);
            if (k != NULL) {
                v = call_method(txn, s_get, k);
            }
            if (v != NULL && v != Py_None) {
                if (PyBytes_CheckExact(v)) {
                    out = memory_at(ctx, mid, head, k, v, 0, &share);
                }
                else {
                    PyErr_SetString(PyExc_TypeError,
                                    "read_latest: the transaction must not use buffers");
                }
            }
        }
        Py_DECREF(head);
    }
    share_release(&share);
    if (out != NULL || PyErr_Occurred()) {
        goto done;
    }
    out = Py_NewRef(Py_None); /* declined: the Python path reads again and decides */
done:
    Py_XDECREF(v);
    Py_XDECREF(k);
    Py_XDECREF(hraw);
    Py_XDECREF(rraw);
    Py_DECREF(mid);
    return out;
}

/* 1 when the cursor has a key starting with ``probe`` at or after it, 0 when not, -1 on error */
static int
has_key_under(PyObject *cursor, PyObject *probe)
{
    PyObject *r = PyObject_CallMethodOneArg(cursor, s_set_range, probe), *k;
    int ok;
    if (r == NULL) {
        return -1;
    }
    ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (ok <= 0) {
        return ok;
    }
    k = PyObject_CallMethodNoArgs(cursor, s_key);
    if (k == NULL) {
        return -1;
    }
    if (!PyBytes_CheckExact(k)) {
        Py_DECREF(k);
        PyErr_SetString(PyExc_TypeError, "read_accepted: the cursor must give bytes");
        return -1;
    }
    ok = PyBytes_GET_SIZE(k) >= PyBytes_GET_SIZE(probe) &&
         memcmp(PyBytes_AS_STRING(k), PyBytes_AS_STRING(probe),
                (size_t)PyBytes_GET_SIZE(probe)) == 0;
    Py_DECREF(k);
    return ok;
}

/* 1 when attribute ``a`` of ``obj`` is None, 0 when not, -1 on error */
static int
attr_is_none(PyObject *obj, int a)
{
    PyObject *v = attr_get(obj, a);
    int none;
    if (v == NULL) {
        return -1;
    }
    none = v == Py_None;
    Py_DECREF(v);
    return none;
}

PyDoc_STRVAR(read_accepted_doc,
             "read_accepted(ctx, get, cursor, edge_to, into, types, tags, mid, /)\n--\n\n"
             "``read_current`` of the memory of raw id ``mid`` and the first filters of "
             "``cortex.query.planner.Executor.passes`` for a plan of ``types`` and ``tags`` "
             "alone, read by the store's owner: False when the head's type is not one of "
             "``types`` or a tag of ``tags`` is missing (and no superseder was looked for); "
             "``(head, version, True)`` when the row passes (no tombstone, no key under "
             "``edge_to || mid || into`` at ``cursor`` (None: superseded memories pass), every "
             "tag, no expiry); ``(head, version, False)`` where ``passes`` must decide; None "
             "where read_current declines.");

/* read_accepted's filters of a memory's head and version (``pair``): False, (head, version,
 * passes), or NULL with an error */
static PyObject *
accepted_of(PyObject *pair, PyObject *cursor, PyObject *edge_to, PyObject *into, PyObject *types,
            PyObject *tags, PyObject *mid)
{
    PyObject *head = PyTuple_GET_ITEM(pair, 0), *v = PyTuple_GET_ITEM(pair, 1), *t;
    PyObject *out = NULL;
    Py_ssize_t i;
    int r;
    /* the type (passes' first filter) */
    t = attr_get(head, A_TYPE);
    if (t == NULL) {
        goto done;
    }
    r = PySet_Contains(types, t);
    Py_DECREF(t);
    if (r <= 0) {
        if (r == 0) {
            out = Py_NewRef(Py_False);
        }
        goto done;
    }
    /* a tombstone: visible() decides */
    r = attr_is_none(head, A_TOMBSTONE);
    if (r < 0) {
        goto done;
    }
    if (r == 0) {
        goto defer;
    }
    /* a key under the memory's supersedes edges: heads.superseder decides */
    if (cursor != Py_None) {
        PyObject *probe = PyBytes_FromStringAndSize(
            NULL, PyBytes_GET_SIZE(edge_to) + 16 + PyBytes_GET_SIZE(into));
        char *p;
        if (probe == NULL) {
            goto done;
        }
        p = PyBytes_AS_STRING(probe);
        memcpy(p, PyBytes_AS_STRING(edge_to), (size_t)PyBytes_GET_SIZE(edge_to));
        memcpy(p + PyBytes_GET_SIZE(edge_to), PyBytes_AS_STRING(mid), 16);
        memcpy(p + PyBytes_GET_SIZE(edge_to) + 16, PyBytes_AS_STRING(into),
               (size_t)PyBytes_GET_SIZE(into));
        r = has_key_under(cursor, probe);
        Py_DECREF(probe);
        if (r < 0) {
            goto done;
        }
        if (r) {
            goto defer;
        }
    }
    /* every tag */
    if (PyTuple_GET_SIZE(tags) > 0) {
        PyObject *have = attr_get(head, A_TAGS);
        if (have == NULL) {
            goto done;
        }
        for (i = 0; i < PyTuple_GET_SIZE(tags); i++) {
            r = PySequence_Contains(have, PyTuple_GET_ITEM(tags, i));
            if (r <= 0) {
                break;
            }
        }
        Py_DECREF(have);
        if (r < 0) {
            goto done;
        }
        if (r == 0) {
            out = Py_NewRef(Py_False);
            goto done;
        }
    }
    /* an expiry: passes compares it with the query's time */
    r = attr_is_none(v, A_EXPIRES_AT);
    if (r < 0) {
        goto done;
    }
    out = PyTuple_Pack(3, head, v, r ? Py_True : Py_False);
    goto done;
defer:
    out = PyTuple_Pack(3, head, v, Py_False);
done:
    return out;
}

static int
accepted_args_ok(PyObject *edge_to, PyObject *into, PyObject *types, PyObject *tags)
{
    if (!PyBytes_CheckExact(edge_to) || !PyBytes_CheckExact(into) ||
        !PyAnySet_CheckExact(types) || !PyTuple_CheckExact(tags)) {
        PyErr_SetString(PyExc_TypeError,
                        "read_accepted: edge_to and into are bytes, types a set, tags a tuple");
        return 0;
    }
    return 1;
}

static PyObject *
sp_read_accepted(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *pair, *out;
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "read_accepted(ctx, get, cursor, edge_to, into, types, tags, mid)");
        return NULL;
    }
    if (!read_ctx_ok(args[0]) || !is_mid(args[7]) ||
        !accepted_args_ok(args[3], args[4], args[5], args[6])) {
        return NULL;
    }
    pair = current_pair(args[0], args[1], args[7]);
    if (pair == NULL) {
        return or_none(NULL);
    }
    out = accepted_of(pair, args[2], args[3], args[4], args[5], args[6], args[7]);
    Py_DECREF(pair);
    return out;
}

PyDoc_STRVAR(accept_pair_doc,
             "accept_pair(ctx, get, cursor, edge_to, into, types, tags, mid, pair, /)\n--\n\n"
             "``read_accepted`` of a memory whose head and version the caller has read in this "
             "snapshot as ``read_current`` reads them (``pair``: ``(head, version)``, the "
             "lexical hits' ``read_rows``): the same answer, without reading them again.");

static PyObject *
sp_accept_pair(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *pair;
    (void)module;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "accept_pair(ctx, get, cursor, edge_to, into, types, tags, mid, pair)");
        return NULL;
    }
    pair = args[8];
    if (!read_ctx_ok(args[0]) || !is_mid(args[7]) ||
        !accepted_args_ok(args[3], args[4], args[5], args[6])) {
        return NULL;
    }
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "accept_pair: pair is (head, version)");
        return NULL;
    }
    return accepted_of(pair, args[2], args[3], args[4], args[5], args[6], args[7]);
}

PyDoc_STRVAR(read_page_doc,
             "read_page(ctx, get, cursor, edge_to, into, types, tags, ids, want, now_us, decay, "
             "permanent, half_lives, weights, /)\n--\n\n"
             "``read_accepted`` of each raw id of the list ``ids`` in order until ``want`` pass, "
             "with the ``salience`` and the ``memory_of`` of each that passes: a list of "
             "``(head, version, memory, salience)`` (memory or salience None where those "
             "decline: the Python path computes it), dropping the ids whose type or tags do not "
             "match; or None (nothing decided) at the first id that is not 16 bytes, that "
             "read_accepted declines or leaves to ``passes`` (``planner.newest_first``).");

static PyObject *hit_kwnames = NULL; /* ("memory", "text", "tokens", "salience", "score") */

/* The Hit of a row read_accepted passed, its memory and salience built: ``Hit(memory=mem,
 * text=text, tokens=n, salience=sal, score=sal)``, the text the form ``form`` (0 short, 1
 * medium) of the version's forms, or of the head's where the version has none (``planner.
 * newest_first``), with its token count added to ``*total``. A new reference; NULL without an
 * error where the Python path builds it (a text that is not str, or holds a lone surrogate:
 * count_tokens says what), NULL with an error on failure. */
static PyObject *
hit_of(PyObject *cls, PyObject *head, PyObject *v, PyObject *mem, PyObject *sal, int form,
       long long *total)
{
    PyObject *forms, *text, *tok, *out, *hargs[5];
    Py_ssize_t n;
    int truth;
    forms = attr_get(v, A_FORMS);
    if (forms == NULL) {
        return NULL;
    }
    truth = PyObject_IsTrue(forms);
    if (truth < 0) {
        Py_DECREF(forms);
        return NULL;
    }
    if (!truth) {
        Py_DECREF(forms);
        forms = attr_get(head, A_FORMS);
        if (forms == NULL) {
            return NULL;
        }
    }
    if (forms == Py_None) {
        text = PyUnicode_New(0, 0);
    }
    else {
        text = attr_get(forms, form ? A_MEDIUM : A_SHORT);
    }
    Py_DECREF(forms);
    if (text == NULL) {
        return NULL;
    }
    if (!PyUnicode_CheckExact(text)) {
        Py_DECREF(text);
        return NULL; /* the Python path says what */
    }
    n = PyUnicode_IS_ASCII(text) ? PyUnicode_GET_LENGTH(text) : cx_utf8_len(text);
    if (n < 0) {
        Py_DECREF(text);
        return NULL; /* a lone surrogate: count_tokens raises */
    }
    n = n / 4 + (n % 4 != 0);
    tok = PyLong_FromSsize_t(n);
    if (tok == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    hargs[0] = mem;
    hargs[1] = text;
    hargs[2] = tok;
    hargs[3] = sal;
    hargs[4] = sal;
    out = PyObject_Vectorcall(cls, hargs, 0, hit_kwnames);
    Py_DECREF(tok);
    Py_DECREF(text);
    if (out != NULL) {
        *total += n;
    }
    return out;
}

/* The rows of the raw ids of the list ``ids`` appended to ``out`` until it holds ``want``:
 * ``acc`` read_accepted's first 7 arguments, ``rest`` salience's 5 after the head. Each row
 * ``(head, version, memory, salience)`` (memory or salience None where those decline); with
 * ``cls``, the Hit of each row whose memory and salience were built (hit_of), the rows left
 * counted in ``*left``. 0 done, 1 declined (an id not 16 bytes, a row read_accepted declines
 * or leaves to passes), -1 error. */
static int
read_rows(PyObject *module, PyObject *const *acc_in, PyObject *const *rest, PyObject *ids,
          Py_ssize_t want, PyObject *out, PyObject *cls, int form, long long *total,
          Py_ssize_t *left)
{
    PyObject *row, *head, *v, *mem, *sal, *item, *acc[8], *sargs[6];
    Py_ssize_t i, n;
    int k;
    for (k = 0; k < 7; k++) {
        acc[k] = acc_in[k];
    }
    for (k = 0; k < 5; k++) {
        sargs[k + 1] = rest[k];
    }
    n = PyList_GET_SIZE(ids);
    for (i = 0; i < n && PyList_GET_SIZE(out) < want; i++) {
        acc[7] = PyList_GET_ITEM(ids, i);
        if (!PyBytes_CheckExact(acc[7]) || PyBytes_GET_SIZE(acc[7]) != 16) {
            return 1; /* a damaged index key: the general path says what is wrong */
        }
        Py_INCREF(acc[7]); /* the list is the caller's: keep the id while it is read */
        row = sp_read_accepted(module, acc, 8);
        Py_DECREF(acc[7]);
        if (row == NULL) {
            return -1;
        }
        if (row == Py_False) {
            Py_DECREF(row);
            continue;
        }
        if (!PyTuple_CheckExact(row) || PyTuple_GET_ITEM(row, 2) != Py_True) {
            Py_DECREF(row);
            return 1; /* declined, or left to passes */
        }
        head = PyTuple_GET_ITEM(row, 0);
        v = PyTuple_GET_ITEM(row, 1);
        sargs[0] = head;
        sal = sp_salience(module, sargs, 6);
        if (sal == NULL) {
            Py_DECREF(row);
            return -1;
        }
        mem = or_none(memory_from(acc[0], head, v));
        if (mem == NULL) {
            Py_DECREF(sal);
            Py_DECREF(row);
            return -1;
        }
        item = NULL;
        if (cls != NULL && mem != Py_None && sal != Py_None) {
            item = hit_of(cls, head, v, mem, sal, form, total);
            if (item == NULL && PyErr_Occurred()) {
                Py_DECREF(mem);
                Py_DECREF(sal);
                Py_DECREF(row);
                return -1;
            }
        }
        if (item == NULL) {
            item = PyTuple_Pack(4, head, v, mem, sal);
            *left += 1;
        }
        Py_DECREF(mem);
        Py_DECREF(sal);
        Py_DECREF(row);
        if (item == NULL) {
            return -1;
        }
        k = PyList_Append(out, item);
        Py_DECREF(item);
        if (k < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
sp_read_page(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *ids, *out;
    Py_ssize_t want, left = 0;
    long long total = 0;
    int r;
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError,
                        "read_page(ctx, get, cursor, edge_to, into, types, tags, ids, want, "
                        "now_us, decay, permanent, half_lives, weights)");
        return NULL;
    }
    ids = args[7];
    if (!PyList_CheckExact(ids) || !PyLong_CheckExact(args[8])) {
        PyErr_SetString(PyExc_TypeError, "read_page: ids is a list, want an int");
        return NULL;
    }
    want = PyLong_AsSsize_t(args[8]);
    if (want == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (want < 1) {
        PyErr_SetString(PyExc_ValueError, "read_page: want is at least 1");
        return NULL;
    }
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    r = read_rows(module, args, args + 9, ids, want, out, NULL, 0, &total, &left);
    if (r == 0) {
        return out;
    }
    Py_DECREF(out);
    if (r < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(read_newest_doc,
             "read_newest(ctx, get, cursor, edge_to, into, types, tags, icur, prefix, head, want, "
             "now_us, decay, permanent, half_lives, weights, hit, form, /)\n--\n\n"
             "``planner.newest_first``'s reads in one call: the ids of ``prefix`` newest first "
             "in pages (``newest_ids(icur, prefix, after, size, head)``, ``size`` ``max(8, "
             "want)`` then four times the last up to 512) and ``read_page`` of each page until "
             "``want`` rows pass or the index ends. With ``form`` 0 (short) or 1 (medium), each "
             "row whose memory and salience were built is its hit, ``hit(memory=memory, "
             "text=text, tokens=n, salience=s, score=s)`` (the text the form of the version's "
             "forms, or the head's where the version has none; ``n`` its tokens); ``form`` -1: "
             "rows only. ``(items, tokens, left)``: the hits and the rows ``(head, version, "
             "memory, salience)`` in order, the hits' token total, and how many rows the caller "
             "must still make hits of; or None (nothing decided) where newest_ids or read_page "
             "declines.");

static PyObject *
sp_read_newest(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *out, *after, *pg = NULL, *cls, *pargs[5];
    Py_ssize_t want, size, left = 0;
    long long total = 0, form;
    int r;
    if (nargs != 18) {
        PyErr_SetString(PyExc_TypeError,
                        "read_newest(ctx, get, cursor, edge_to, into, types, tags, icur, prefix, "
                        "head, want, now_us, decay, permanent, half_lives, weights, hit, form)");
        return NULL;
    }
    if (!PyLong_CheckExact(args[10]) || !PyLong_CheckExact(args[17]) || !PyType_Check(args[16])) {
        PyErr_SetString(PyExc_TypeError, "read_newest: want and form are ints, hit a class");
        return NULL;
    }
    want = PyLong_AsSsize_t(args[10]);
    if (want == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (want < 1) {
        PyErr_SetString(PyExc_ValueError, "read_newest: want is at least 1");
        return NULL;
    }
    form = PyLong_AsLongLong(args[17]);
    if (form == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (form < -1 || form > 1) {
        PyErr_SetString(PyExc_ValueError, "read_newest: form is -1, 0 or 1");
        return NULL;
    }
    cls = form >= 0 ? args[16] : NULL;
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    size = want > 8 ? want : 8;
    after = Py_NewRef(Py_None);
    pargs[0] = args[7];
    pargs[1] = args[8];
    pargs[4] = args[9];
    for (;;) {
        PyObject *n = PyLong_FromSsize_t(size);
        if (n == NULL) {
            goto fail;
        }
        pargs[2] = after;
        pargs[3] = n;
        pg = cx_newest_ids(pargs, 5);
        Py_DECREF(n);
        if (pg == NULL) {
            goto fail;
        }
        if (pg == Py_None) {
            goto declined;
        }
        r = read_rows(module, args, args + 11, PyTuple_GET_ITEM(pg, 0), want, out, cls,
                      (int)form, &total, &left);
        if (r < 0) {
            goto fail;
        }
        if (r > 0) {
            goto declined;
        }
        Py_SETREF(after, Py_NewRef(PyTuple_GET_ITEM(pg, 1)));
        Py_CLEAR(pg);
        if (after == Py_None || PyList_GET_SIZE(out) >= want) {
            break;
        }
        size = size * 4 < 512 ? size * 4 : 512;
    }
    Py_DECREF(after);
    {
        PyObject *res = Py_BuildValue("(NLn)", out, total, left);
        return res;
    }
declined:
    Py_XDECREF(pg);
    Py_DECREF(after);
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(pg);
    Py_DECREF(after);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef decode_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))sp_decode, METH_FASTCALL, decode_doc},
    {"read_head", (PyCFunction)(void (*)(void))sp_read_head, METH_FASTCALL, read_head_doc},
    {"read_version", (PyCFunction)(void (*)(void))sp_read_version, METH_FASTCALL,
     read_version_doc},
    {"read_memory", (PyCFunction)(void (*)(void))sp_read_memory, METH_FASTCALL, read_memory_doc},
    {"memory_of", (PyCFunction)(void (*)(void))sp_memory_of, METH_FASTCALL,
     read_row_memory_doc},
    {"read_current", (PyCFunction)(void (*)(void))sp_read_current, METH_FASTCALL,
     read_current_doc},
    {"read_latest", (PyCFunction)(void (*)(void))sp_read_latest, METH_FASTCALL,
     read_latest_doc},
    {"read_rows", (PyCFunction)(void (*)(void))sp_read_rows, METH_FASTCALL, read_rows_doc},
    {"micros", (PyCFunction)sp_micros, METH_O, micros_doc},
    {"salience", (PyCFunction)(void (*)(void))sp_salience, METH_FASTCALL, salience_doc},
    {"read_accepted", (PyCFunction)(void (*)(void))sp_read_accepted, METH_FASTCALL,
     read_accepted_doc},
    {"accept_pair", (PyCFunction)(void (*)(void))sp_accept_pair, METH_FASTCALL, accept_pair_doc},
    {"read_page", (PyCFunction)(void (*)(void))sp_read_page, METH_FASTCALL, read_page_doc},
    {"read_newest", (PyCFunction)(void (*)(void))sp_read_newest, METH_FASTCALL, read_newest_doc},
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
    if (memory_kwnames == NULL) {
        static const char *names[4] = {"uri", "head", "version", "data"};
        int i;
        memory_kwnames = PyTuple_New(4);
        if (memory_kwnames == NULL) {
            return -1;
        }
        for (i = 0; i < 4; i++) {
            PyObject *name = PyUnicode_InternFromString(names[i]);
            if (name == NULL) {
                Py_CLEAR(memory_kwnames);
                return -1;
            }
            PyTuple_SET_ITEM(memory_kwnames, i, name);
        }
    }
    if (s_set_range == NULL) {
        s_set_range = PyUnicode_InternFromString("set_range");
        s_key = PyUnicode_InternFromString("key");
        if (s_set_range == NULL || s_key == NULL) {
            return -1;
        }
    }
    if (hit_kwnames == NULL) {
        static const char *names[5] = {"memory", "text", "tokens", "salience", "score"};
        int i;
        hit_kwnames = PyTuple_New(5);
        if (hit_kwnames == NULL) {
            return -1;
        }
        for (i = 0; i < 5; i++) {
            PyObject *name = PyUnicode_InternFromString(names[i]);
            if (name == NULL) {
                Py_CLEAR(hit_kwnames);
                return -1;
            }
            PyTuple_SET_ITEM(hit_kwnames, i, name);
        }
    }
    if (s_get == NULL) {
        s_get = PyUnicode_InternFromString("get");
        if (s_get == NULL) {
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
