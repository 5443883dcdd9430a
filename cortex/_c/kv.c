/*
 * The KV layer's helpers (cortex/storage/kv.py keeps the definitions): a sealed value is its payload
 * and the CRC-32 of zlib.crc32 (4 bytes, big-endian): ``seal`` makes one, ``unseal`` checks one;
 * ``sort_pairs`` orders a transaction's puts by key, stably.
 */

#include "common.h"

#include <structmember.h>

uint32_t crc_table[8][256];

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

int crc_clmul = 0;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

/* The CRC-32 of zlib.crc32 by folding (the method of Gopal et al., "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction", Intel, 2009), for the bit-reflected
 * polynomial P = 0x1DB710641: the 128-bit remainder so far is carried forward over the next
 * 128 bits by multiplying its halves by x^(T+64) and x^T mod P (T the distance folded, bits
 * reflected), four lanes of 128 bits at once, then one; the last 128 bits are reduced to 64 and
 * 32, and a Barrett reduction (mu = floor(x^64 / P)) gives the remainder. The bytes past the
 * last whole 16 go through the tables. Each constant is checked against the tables in
 * tests/test_speedups.py (every length from 0 to 1,100, at every alignment). */
__attribute__((target("pclmul,sse2"))) uint32_t
crc32_clmul(const uint8_t *p, Py_ssize_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL); /* fold by 512 bits */
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL); /* fold by 128 bits */
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);                /* 64 -> 32 bits */
    const __m128i pu = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);    /* mu, P */
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x0, x1, x2, x3, t;
    uint32_t c;

    x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)0xFFFFFFFFu));
    x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    n -= 64;
#define CX_FOLD(x, k, next)                                                                     \
    do {                                                                                        \
        t = _mm_clmulepi64_si128((x), (k), 0x11);                                               \
        (x) = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128((x), (k), 0x00), t), (next));   \
    } while (0)
    while (n >= 64) {
        CX_FOLD(x0, k1k2, _mm_loadu_si128((const __m128i *)p));
        CX_FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        CX_FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        CX_FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    CX_FOLD(x0, k3k4, x1);
    CX_FOLD(x0, k3k4, x2);
    CX_FOLD(x0, k3k4, x3);
    while (n >= 16) {
        CX_FOLD(x0, k3k4, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
#undef CX_FOLD
    /* 128 -> 64 bits (and 32 zero bits appended) */
    t = _mm_clmulepi64_si128(x0, k3k4, 0x10);
    x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);
    /* 64 -> 32 bits */
    t = _mm_clmulepi64_si128(_mm_and_si128(x0, mask32), k5, 0x00);
    x0 = _mm_xor_si128(_mm_srli_si128(x0, 4), t);
    /* Barrett reduction */
    t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x0, mask32), pu, 0x10), mask32);
    t = _mm_clmulepi64_si128(t, pu, 0x00);
    x0 = _mm_xor_si128(x0, t);
    c = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x0, 4));
    return crc32_tables(c, p, n) ^ 0xFFFFFFFFu;
}

static void
crc_clmul_init(void)
{
    __builtin_cpu_init();
    crc_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
}
#else
uint32_t
crc32_clmul(const uint8_t *p, Py_ssize_t n)
{
    return crc32_tables(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

static void
crc_clmul_init(void)
{
    crc_clmul = 0;
}
#endif

/* ``payload || crc32(payload)`` (4 bytes, big-endian): kv.seal. */
PyObject *
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
             "``payload + zlib.crc32(payload).to_bytes(4, 'big')`` (cortex.storage.kv.seal) for bytes.");

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

/* Append the checksum of ``cortex.storage.kv.seal`` to b, a new bytes object of the payload and 4 more
 * bytes: big-endian zlib.crc32 of the payload. */
int
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

PyDoc_STRVAR(unseal_doc,
             "unseal(value, /)\n--\n\n"
             "``cortex.storage.kv.unseal``'s check in C: the payload of bytes ``payload || "
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

PyDoc_STRVAR(crc32_doc,
             "crc32(data, /, tables=False)\n--\n\n"
             "``zlib.crc32(data)`` for bytes, as every sealed value is checked: by carry-less "
             "multiplication from 64 bytes on where the CPU has it, else (or with ``tables``) "
             "through the tables (tests compare both with zlib).");

static PyObject *
sp_crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    const uint8_t *p;
    Py_ssize_t n;
    int tables = 0;
    (void)module;
    if (nargs < 1 || nargs > 2 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "crc32(data: bytes, tables=False)");
        return NULL;
    }
    if (nargs == 2 && (tables = PyObject_IsTrue(args[1])) < 0) {
        return NULL;
    }
    p = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    n = PyBytes_GET_SIZE(args[0]);
    return PyLong_FromUnsignedLong(
        tables ? crc32_tables(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu : crc32_of(p, n));
}

/* MemoryId's hash and comparisons in C (cortex/model/ids.py keeps the definitions, which
 * ``id_slots`` puts these in front of): hash(self._b); == and != between ids by their bytes, an
 * id equal to nothing else; <, <=, >, >= between ids by their bytes, NotImplemented with
 * anything else (Python then tries the other operand, as it does for the class's own methods,
 * which define < and <= and leave > and >= to the reflection). */
static PyTypeObject *id_type = NULL;
static Py_ssize_t id_offset = 0; /* of the slot of the raw bytes */

static PyObject *
id_raw(PyObject *obj)
{
    PyObject *raw = *(PyObject **)((char *)obj + id_offset); /* borrowed */
    if (raw == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_b");
    }
    return raw;
}

static Py_hash_t
id_hash(PyObject *self)
{
    PyObject *raw = id_raw(self);
    return raw == NULL ? -1 : PyObject_Hash(raw);
}

static PyObject *
id_richcompare(PyObject *self, PyObject *other, int op)
{
    PyObject *a, *b;
    if (!PyObject_TypeCheck(other, id_type) || !PyObject_TypeCheck(self, id_type)) {
        if (op == Py_EQ) {
            Py_RETURN_FALSE;
        }
        if (op == Py_NE) {
            Py_RETURN_TRUE;
        }
        Py_RETURN_NOTIMPLEMENTED;
    }
    if ((a = id_raw(self)) == NULL || (b = id_raw(other)) == NULL) {
        return NULL;
    }
    return PyObject_RichCompare(a, b, op);
}

PyDoc_STRVAR(id_slots_doc, "id_slots(cls, /)\n--\n\n"
                           "Give ``cortex.model.ids.MemoryId`` (``cls``: one object slot, ``_b``, "
                           "no __dict__) its hash and comparisons in C, as its methods define "
                           "them; once, at import.");

static PyObject *
sp_id_slots(PyObject *module, PyObject *cls)
{
    PyTypeObject *t;
    PyObject *d;
    PyMemberDef *m;
    (void)module;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "id_slots: a class");
        return NULL;
    }
    t = (PyTypeObject *)cls;
    d = PyDict_GetItemString(t->tp_dict, "_b"); /* borrowed */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type) || PyDescr_TYPE(d) != t ||
        t->tp_dictoffset != 0 ||
        t->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + sizeof(PyObject *))) {
        PyErr_SetString(PyExc_TypeError, "id_slots: a class of one slot, _b, and no __dict__");
        return NULL;
    }
    m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_SetString(PyExc_TypeError, "id_slots: _b is an object slot");
        return NULL;
    }
    if (id_type != NULL && id_type != t) {
        PyErr_SetString(PyExc_RuntimeError, "id_slots: given another class already");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XDECREF((PyObject *)id_type);
    id_type = t;
    id_offset = m->offset;
    t->tp_hash = id_hash;
    t->tp_richcompare = id_richcompare;
    PyType_Modified(t);
    Py_RETURN_NONE;
}

static PyMethodDef kv_methods[] = {
    {"id_slots", (PyCFunction)sp_id_slots, METH_O, id_slots_doc},
    {"crc32", (PyCFunction)(void (*)(void))sp_crc32, METH_FASTCALL, crc32_doc},
    {"seal", (PyCFunction)sp_seal, METH_O, seal_doc},
    {"sort_pairs", (PyCFunction)sp_sort_pairs, METH_O, sort_pairs_doc},
    {"unseal", (PyCFunction)sp_unseal, METH_O, unseal_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_kv_init(PyObject *m)
{
    crc_init();
    crc_clmul_init();
    if (PyModule_AddIntConstant(m, "_CRC_CLMUL", crc_clmul) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(m, kv_methods);
}
