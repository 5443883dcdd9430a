/*
 * The KV layer's helpers (cortex/storage/kv.py keeps the definitions): a sealed value is its payload
 * and the CRC-32 of zlib.crc32 (4 bytes, big-endian): ``seal`` makes one, ``unseal`` checks one;
 * ``sort_pairs`` orders a transaction's puts by key, stably.
 */

#include "common.h"

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

static PyMethodDef kv_methods[] = {
    {"seal", (PyCFunction)sp_seal, METH_O, seal_doc},
    {"sort_pairs", (PyCFunction)sp_sort_pairs, METH_O, sort_pairs_doc},
    {"unseal", (PyCFunction)sp_unseal, METH_O, unseal_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_kv_init(PyObject *m)
{
    crc_init();
    return PyModule_AddFunctions(m, kv_methods);
}
