/*
 * The lexical side of a write, one call each (cortex/index/lexical.py keeps the definitions:
 * ``_add_postings`` and ``Indexer.add_counted``): the postings of a transaction held in dicts
 * until its flush, and the sealed document of each memory.
 */

#include "common.h"

PyDoc_STRVAR(add_postings_doc,
             "add_postings(pending, terms, values, raw, /)\n--\n\n"
             "``pending[term][raw] = value`` for each term and value (``pending`` maps a term to "
             "a dict, created when missing); ``cortex.index.lexical._add_postings`` in C.");

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

/* The sealed posting value [tf, length] of length (as an int) from memo (length -> {tf: value}),
 * made and remembered when missing; a new reference. */
static PyObject *
posting_value(PyObject *by_length, Py_ssize_t tf, Py_ssize_t length)
{
    /* a posting's tail (cortex.index.postings.entry_tail): tf and length, u32 big-endian each */
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
             "index_doc(docs, doc_key, pending, memo, raw, version, distinct, counts, docno, /)\n"
             "--\n\n"
             "``cortex.index.lexical.Indexer.add_counted`` in C: ``docs[doc_key]`` = the sealed "
             "LexDoc(version, length, docno) and ``pending[term][raw]`` (``raw``: the "
             "docno as 4 bytes, big-endian) = the posting tail "
             "value [count, length] of each term (one object per value through ``memo``: "
             "length -> {count: value}); returns the length (the sum of the counts). None, "
             "changing nothing, unless ``distinct`` is a list of strictly "
             "increasing ASCII str of 1..255 characters without U+0000, ``counts`` a list of as "
             "many ints >= 1, ``version`` an int of 1..2**63-1 and ``docno`` the int ``raw`` "
             "holds.");

/* index_doc (fresh == 0) or index_new (fresh == 1): the same checks and document; a posting
 * goes into pending[term][raw], or onto the end of fresh[term] (a bytearray). */
static PyObject *
index_doc_into(PyObject *const *args, Py_ssize_t nargs, int fresh)
{
    PyObject *docs, *doc_key, *pending, *memo, *raw, *version, *distinct, *counts;
    PyObject *doc = NULL, *by_length = NULL, *len_obj = NULL, *res = NULL;
    PyObject *small[SMALL_TF] = {NULL};
    unsigned long long ver, docno;
    Py_ssize_t m, i, length = 0, size;
    char *p;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "index_doc takes nine arguments");
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
        !PyDict_CheckExact(memo) || !PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 4) {
        PyErr_SetString(PyExc_TypeError,
                        fresh ? "index_new(dict, bytes, dict, dict, docno4, version, distinct, "
                                "counts, docno)"
                              : "index_doc(dict, bytes, dict, dict, docno4, version, distinct, "
                                "counts, docno)");
        return NULL;
    }
    if (!PyList_CheckExact(distinct) || !PyList_CheckExact(counts) || !PyLong_CheckExact(version) ||
        !PyLong_CheckExact(args[8])) {
        Py_RETURN_NONE;
    }
    docno = PyLong_AsUnsignedLongLong(args[8]);
    if (docno == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    /* the docno is the posting key's (raw, u32 big-endian) and below 2**32 */
    if (docno > 0xFFFFFFFFu || (unsigned char)PyBytes_AS_STRING(raw)[0] != (unsigned char)(docno >> 24) ||
        (unsigned char)PyBytes_AS_STRING(raw)[1] != (unsigned char)(docno >> 16) ||
        (unsigned char)PyBytes_AS_STRING(raw)[2] != (unsigned char)(docno >> 8) ||
        (unsigned char)PyBytes_AS_STRING(raw)[3] != (unsigned char)docno) {
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
    /* check everything before changing anything */
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
    }
    if ((uint64_t)length > 0xFFFFFFFFu) { /* a posting's tail holds the length in 32 bits */
        Py_RETURN_NONE;
    }
    /* {0: 2, 1: version, 2: length, 3: docno} (format 16: the terms are not stored), sealed */
    size = 1 + 2 + 1 + put_head(NULL, 0, ver) + 1 + put_head(NULL, 0, (uint64_t)length) + 1 +
           put_head(NULL, 0, docno);
    doc = PyBytes_FromStringAndSize(NULL, size + 4);
    if (doc == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(doc);
    *p++ = (char)0xa4;
    *p++ = 0x00;
    *p++ = 0x02;
    *p++ = 0x01;
    p += put_head(p, 0, ver);
    *p++ = 0x02;
    p += put_head(p, 0, (uint64_t)length);
    *p++ = 0x03;
    p += put_head(p, 0, docno);
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
            rc = PyByteArray_Resize(group, at + 12);
            if (rc == 0) {
                char *d = PyByteArray_AS_STRING(group) + at;
                memcpy(d, PyBytes_AS_STRING(raw), 4);
                memcpy(d + 4, PyBytes_AS_STRING(value), 8);
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
             "index_new(docs, doc_key, fresh, memo, raw, version, distinct, counts, docno, /)\n"
             "--\n\n"
             "``index_doc`` for a memory new to the index (``Indexer.add_counted(new=True)``): "
             "each posting is appended to ``fresh[term]``, a bytearray of docno4 + tail8 "
             "records, instead of set in a dict.");

PyObject *
sp_index_new(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return index_doc_into(args, nargs, 1);
}

static PyMethodDef staging_methods[] = {
    {"add_postings", (PyCFunction)(void (*)(void))sp_add_postings, METH_FASTCALL, add_postings_doc},
    {"index_doc", (PyCFunction)(void (*)(void))sp_index_doc, METH_FASTCALL, index_doc_doc},
    {"index_new", (PyCFunction)(void (*)(void))sp_index_new, METH_FASTCALL, index_new_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_staging_init(PyObject *m)
{
    return PyModule_AddFunctions(m, staging_methods);
}
