/*
 * Driving an LMDB cursor from C (the py-lmdb cursor of the write transaction, through its
 * methods): the posting blocks the common cases of many terms' appends change
 * (``append_runs``, cortex.index.postings.apply), and the document frequencies of a flush
 * (``df_updates``, cortex.index.lexical.Indexer.flush).  Anything unusual is left to the Python path.
 */

#include "common.h"

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
             "``cortex.index.postings.apply``'s common case for many terms in one call: ``items`` is "
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

/* -- document frequencies (cortex.index.lexical.Indexer.flush): read, change and write the lex/t/
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

/* The document frequency stored under key (a lex/t/ key), read with the cursor: 1 with *df set
 * (0 when the key has no entry), 0 when the stored value fails its checks (*df untouched), -1
 * with an exception. */
static int
stored_df(PyObject *cursor, PyObject *key, long long *df)
{
    PyObject *value;
    long long n;
    int found = cursor_step(cursor, m_set_key, key);
    if (found <= 0) {
        if (found == 0) {
            *df = 0;
        }
        return found < 0 ? -1 : 1;
    }
    value = cursor_get(cursor, m_value);
    if (value == NULL) {
        return -1;
    }
    n = df_of(value);
    Py_DECREF(value);
    if (n < 0) {
        return 0;
    }
    *df = n;
    return 1;
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
        PyObject *item = PyList_GET_ITEM(items, t), *key;
        long long before = 0, delta, after;
        int got;
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
        got = stored_df(cursor, key, &before);
        if (got < 0) {
            goto done;
        }
        if (got == 0) {
            Py_CLEAR(puts);
            Py_CLEAR(deletes);
            Py_RETURN_NONE;
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

PyDoc_STRVAR(df_values_doc,
             "df_values(cursor, keys, /)\n--\n\n"
             "The document frequencies stored under ``keys`` (``lex/t/`` keys, bytes), each read "
             "with the cursor (set_key, value: bytes); 0 where a key has no entry. None when a "
             "stored value fails its checks (the Python path then says why).");

static PyObject *
sp_df_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *cursor, *keys, *out;
    Py_ssize_t t, n;
    (void)module;
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "df_values(cursor, list)");
        return NULL;
    }
    cursor = args[0];
    keys = args[1];
    n = PyList_GET_SIZE(keys);
    out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (t = 0; t < n; t++) {
        PyObject *key = PyList_GET_ITEM(keys, t), *df;
        long long count = 0;
        int got;
        if (!PyBytes_CheckExact(key)) {
            PyErr_SetString(PyExc_TypeError, "df_values: keys are bytes");
            goto fail;
        }
        got = stored_df(cursor, key, &count);
        if (got < 0) {
            goto fail;
        }
        if (got == 0) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        df = PyLong_FromLongLong(count);
        if (df == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, t, df);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef cursor_methods[] = {
    {"df_values", (PyCFunction)(void (*)(void))sp_df_values, METH_FASTCALL, df_values_doc},
    {"append_runs", (PyCFunction)(void (*)(void))sp_append_runs, METH_FASTCALL, append_runs_doc},
    {"df_updates", (PyCFunction)(void (*)(void))sp_df_updates, METH_FASTCALL, df_updates_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_cursor_init(PyObject *m)
{
    if (m_set_range == NULL) {
        m_set_range = PyUnicode_InternFromString("set_range");
        m_key = PyUnicode_InternFromString("key");
        m_value = PyUnicode_InternFromString("value");
        m_prev = PyUnicode_InternFromString("prev");
        m_last = PyUnicode_InternFromString("last");
        m_next = PyUnicode_InternFromString("next");
        m_set_key = PyUnicode_InternFromString("set_key");
        if (m_set_key == NULL || m_set_range == NULL || m_key == NULL || m_value == NULL ||
            m_prev == NULL || m_last == NULL || m_next == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(m, cursor_methods);
}
