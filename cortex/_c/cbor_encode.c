/*
 * The encoder of canonical CBOR (cortex/model/codec.py keeps the definitions): a record struct by its
 * plan (``encode``: StructCodec.encode), the sealed head and version of a new memory
 * (``encode_new_pair``: cortex/model/codec.py encode_new_pair, cortex/storage/kv.py seal), and a list of short
 * ASCII text strings (``encode_ascii_texts``: tags, a lexical document's terms).  Each returns the
 * same bytes as the Python path, or None wherever it is not sure (anything but the common case:
 * ASCII or NFC text, exact types, times in UTC), and the Python path then runs and names any
 * error.  They never raise for a bad record, only for bad arguments of their own.
 */

#include "common.h"

#include <structmember.h>

#include <datetime.h>

static const char *const attr_names[N_ATTRS] = {
    "id",         "type",       "current_version", "actor_scope",    "visibility",
    "importance", "tags",       "frames",          "tombstone",      "created_at",
    "last_updated_at", "embedding_ref", "forms",   "version",        "data",
    "hash",       "created_by", "expires_at",      "confidence",     "provenance",
    "forms_override", "valid_from", "valid_until", "short",          "medium",
    "verb",       "obj_kind",   "obj_ref",         "bytes",          "digest",
    "head",       "pinned",     "terms",           "vector",         "version_bytes",
    "sensitivity", "has_counters", "row",
};

PyObject *attr[N_ATTRS];

AttrSlot attr_slot[N_ATTRS][ATTR_WAYS];

PyObject *
attr_get_slow(PyObject *obj, int a)
{
    PyTypeObject *t = Py_TYPE(obj);
    /* a type of the generic attribute lookup whose attribute is an object slot: no
     * __getattribute__ or __getattr__ of its own, the member found first on its MRO (a data
     * descriptor: an instance's __dict__ cannot hide it) */
    if (t->tp_getattro == PyObject_GenericGetAttr) {
        PyObject *d = _PyType_Lookup(t, attr[a]); /* borrowed; gives the type a version tag */
        if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
            PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG)) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            if (m->type == T_OBJECT_EX && !(m->flags & PY_AUDIT_READ)) {
                int i, at = ATTR_WAYS - 1;
                for (i = 0; i < ATTR_WAYS; i++) {
                    if (attr_slot[a][i].type == t || attr_slot[a][i].type == NULL) {
                        at = i;
                        break;
                    }
                }
                /* the type is held by the instances the caller has: a stale entry only ever
                 * compares equal to a new type at the same address with the same tag, and a
                 * tag is never reused */
                attr_slot[a][at].type = t;
                attr_slot[a][at].tag = t->tp_version_tag;
                attr_slot[a][at].offset = m->offset;
            }
        }
    }
    return PyObject_GetAttr(obj, attr[a]);
}

/* The bytes of a CBOR head of major type `major` and argument v (shortest form) at p, or only
 * their count when p is NULL. */
Py_ssize_t
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

/* An exact str that is NFC, of 1..max bytes of UTF-8 (codec.TextField.enc without its check): ASCII
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
int
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
int
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

/* The plan of encode_new_pair (built once by cortex/model/codec.py, see NEW_PAIR_PLAN). */
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
    NP_SENSITIVITY,    /* the Sensitivity class (a head's level; internal is absence) */
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
        int ok = i <= NP_SENSITIVITY                          ? PyType_Check(x)
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

/* The UTF-8 of the text item at o->p + at (as out_text wrote it). */
static const char *
text_item(const Out *o, Py_ssize_t at, Py_ssize_t *n)
{
    const uint8_t *p = (const uint8_t *)o->p + at;
    int info = p[0] & 31, i, size;
    uint64_t v = 0;
    if (info < 24) {
        *n = info;
        return (const char *)p + 1;
    }
    size = 1 << (info - 24);
    for (i = 0; i < size; i++) {
        v = (v << 8) | p[1 + i];
    }
    *n = (Py_ssize_t)v;
    return (const char *)p + 1 + size;
}

/* Forms written wide at o->p + at ({1: short, 2: medium}) made compact when the short form is
 * the medium's first bytes ({2: medium, 4: n}) or those then "…" ({2: medium, 3: n}), the
 * encoding of codec.FormsCodec (format 15). */
static int
compact_forms(Out *o, Py_ssize_t at)
{
    Py_ssize_t sn, mn, mat, item;
    const char *s = text_item(o, at + 2, &sn), *m;
    int key;
    Py_ssize_t n;
    mat = (s - o->p) + sn + 1; /* past the short form and key 2 */
    m = text_item(o, mat, &mn);
    if (sn <= mn && memcmp(s, m, (size_t)sn) == 0) {
        key = 4;
        n = sn;
    }
    else if (sn >= 3 && memcmp(s + sn - 3, "\xE2\x80\xA6", 3) == 0 && sn - 3 <= mn &&
             memcmp(s, m, (size_t)(sn - 3)) == 0) {
        key = 3;
        n = sn - 3;
    }
    else {
        return 1;
    }
    item = (m - o->p) + mn - mat;
    memmove(o->p + at + 2, o->p + mat, (size_t)item);
    o->p[at + 1] = 0x02;
    o->len = at + 2 + item;
    if (out_byte(o, (uint8_t)key) < 0 || out_head(o, 0, (uint64_t)n) < 0) {
        return -1;
    }
    return 1;
}

/* Compact forms at o->p + at, the last thing written, made a version's (format 18,
 * codec.VersionFormsCodec.enc_in): the medium form a reference [prefix, at, suffix] into the
 * version's data ``d`` when medium_ref finds a text of it there. */
static int
ref_forms(Out *o, Py_ssize_t at, const uint8_t *d, Py_ssize_t dn)
{
    Py_ssize_t mn, sn, ref_at, ri, rl, short_at, short_len;
    const char *m, *s;
    char small[512], *buf = small;
    int rc = 1;
    if ((uint8_t)o->p[at + 1] == 0x01) { /* {1: short, 2: medium} */
        s = text_item(o, at + 2, &sn);
        short_at = at + 1;
        short_len = (s + sn - o->p) - short_at;
        m = text_item(o, short_at + short_len + 1, &mn);
    }
    else { /* {2: medium, 3 or 4: n} */
        m = text_item(o, at + 2, &mn);
        short_at = (m + mn) - o->p;
        short_len = o->len - short_at;
    }
    if (!medium_ref(d, dn, (const uint8_t *)m, mn, &ref_at, &ri, &rl)) {
        return 1;
    }
    if (short_len + mn > (Py_ssize_t)sizeof(small) &&
        (buf = PyMem_Malloc((size_t)(short_len + mn))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(buf, o->p + short_at, (size_t)short_len);
    memcpy(buf + short_len, m, (size_t)mn);
    o->len = at + 1; /* the map head stays: two entries */
    if (out_put(o, buf, short_len) < 0 || out_byte(o, 0x05) < 0 || out_byte(o, 0x83) < 0 ||
        out_head(o, 3, (uint64_t)ri) < 0 || out_put(o, buf + short_len, ri) < 0 ||
        out_head(o, 0, (uint64_t)ref_at) < 0 || out_head(o, 3, (uint64_t)(mn - ri - rl)) < 0 ||
        out_put(o, buf + short_len + ri + rl, mn - ri - rl) < 0) {
        rc = -1;
    }
    if (buf != small) {
        PyMem_Free(buf);
    }
    return rc;
}

/* Forms, short and medium exact str: written compact (compact_forms); 0 when the Python path
 * must look (not NFC, too long, a surrogate). */
static int
out_forms_of(Out *o, PyObject *s, PyObject *m, Py_ssize_t smax, Py_ssize_t mmax)
{
    Py_ssize_t at = o->len;
    int rc;
    if (out_byte(o, 0xA2) < 0 || out_byte(o, 0x01) < 0) {
        return -1;
    }
    if ((rc = out_text(o, s, smax)) <= 0) {
        return rc;
    }
    if (out_byte(o, 0x02) < 0) {
        return -1;
    }
    if ((rc = out_text(o, m, mmax)) <= 0) {
        return rc;
    }
    return compact_forms(o, at);
}

/* Forms (compact: out_forms_of). */
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
    rc = out_forms_of(o, s, m, LIM(pl, NP_TEXT_MAX), LIM(pl, NP_TEXT_MAX));
    Py_DECREF(s);
    Py_DECREF(m);
    return rc;
}

#define HEAD_FIELDS 15
#define VERSION_FIELDS 14

/* The fields of Head and Version in their declared order (msgspec.structs.astuple's order). */
static const int head_attrs[HEAD_FIELDS] = {
    A_ID,         A_TYPE, A_CURRENT_VERSION, A_ACTOR_SCOPE, A_VISIBILITY,
    A_IMPORTANCE, A_TAGS, A_FRAMES,          A_TOMBSTONE,   A_CREATED_AT,
    A_LAST_UPDATED_AT, A_EMBEDDING_REF, A_FORMS,   A_SENSITIVITY, A_HAS_COUNTERS,
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
    if (h[13] != Py_None) { /* a level other than internal (2, written as absence) */
        if ((PyObject *)Py_TYPE(h[13]) != pl->obj[NP_SENSITIVITY] || !PyLong_Check(h[13])) {
            return 0;
        }
        if (PyLong_AsLong(h[13]) == 2) {
            if (PyErr_Occurred()) {
                return -1;
            }
            return 0;
        }
        if (out_byte(o, 0x0E) < 0) {
            return -1;
        }
        if ((rc = out_member(o, h[13], pl->obj[NP_SENSITIVITY])) <= 0) {
            return rc;
        }
        count++;
    }
    if (h[14] == Py_True) { /* the memory has use counters (format 11; an update keeps it) */
        if (out_byte(o, 0x0F) < 0 || out_byte(o, 0xF5) < 0) {
            return -1;
        }
        count++;
    } else if (h[14] != Py_False) {
        return 0;
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
    if (forms.len > 0) { /* the head's forms, the medium a reference into data (format 18) */
        Py_ssize_t fat;
        if (out_byte(o, 0x0B) < 0) {
            return -1;
        }
        fat = o->len;
        if (out_put(o, head + forms.at, forms.len) < 0 ||
            ref_forms(o, fat, (const uint8_t *)PyBytes_AS_STRING(data), size) < 0) {
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

/* -- records by their plan: the encoder of StructCodec.encode in C (cortex/model/codec.py keeps the
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
    case K_ID: {
        /* an instance of exactly the plan's id class with its 16 bytes: a byte string of 16 */
        PyObject *raw;
        int rc;
        if ((PyObject *)Py_TYPE(x) != s->idcls) {
            return 0;
        }
        raw = PyObject_GetAttr(x, attr[A_BYTES]);
        if (raw == NULL) {
            return -1;
        }
        if (!PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 16) {
            Py_DECREF(raw);
            return 0;
        }
        rc = out_head(o, 2, 16) < 0 || out_put(o, PyBytes_AS_STRING(raw), 16) < 0 ? -1 : 1;
        Py_DECREF(raw);
        return rc;
    }
    default: /* maps and pairs: the Python encoder */
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
    if (pl->forms) {
        PyObject *sh = PyObject_GetAttr(v, PyTuple_GET_ITEM(pl->kwnames, 0)), *me;
        if (sh == NULL) {
            return -1;
        }
        me = PyObject_GetAttr(v, PyTuple_GET_ITEM(pl->kwnames, 1));
        if (me == NULL) {
            Py_DECREF(sh);
            return -1;
        }
        rc = out_forms_of(o, sh, me, pl->fields[0].spec.max_bytes, pl->fields[1].spec.max_bytes);
        Py_DECREF(sh);
        Py_DECREF(me);
        return rc;
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
        else if (f->spec.kind == K_RECORD && ((PlanObject *)f->spec.plan)->forms == 2) {
            /* a version's forms refer into its data (format 18): exact bytes, else Python */
            PyObject *d = PyObject_GetAttr(v, attr[A_DATA]);
            Py_ssize_t fat = o->len;
            if (d == NULL) {
                rc = -1;
            }
            else if (d != Py_None && !PyBytes_CheckExact(d)) {
                rc = 0;
            }
            else if ((rc = enc_value(o, &f->spec, x, depth)) > 0 && d != Py_None) {
                rc = ref_forms(o, fat, (const uint8_t *)PyBytes_AS_STRING(d), PyBytes_GET_SIZE(d));
            }
            Py_XDECREF(d);
            count++;
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
             "cortex.model.codec.NEW_PAIR_PLAN.");

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

static PyMethodDef encode_methods[] = {
    {"encode_ascii_texts", (PyCFunction)(void (*)(void))sp_encode_ascii_texts, METH_FASTCALL,
     encode_ascii_texts_doc},
    {"encode_new_pair", (PyCFunction)(void (*)(void))sp_encode_new_pair, METH_FASTCALL,
     encode_new_pair_doc},
    {"encode", (PyCFunction)(void (*)(void))sp_encode, METH_FASTCALL, encode_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_encode_init(PyObject *m)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return -1;
    }
    if (attr[0] == NULL) {
        int i;
        for (i = 0; i < N_ATTRS; i++) {
            attr[i] = PyUnicode_InternFromString(attr_names[i]);
            if (attr[i] == NULL) {
                return -1;
            }
        }
    }
    return PyModule_AddFunctions(m, encode_methods);
}
