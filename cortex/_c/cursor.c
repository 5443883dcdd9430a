/*
 * Driving an LMDB cursor from C (the py-lmdb cursor of the write transaction, through its
 * methods): the document frequencies of a flush (``df_updates``,
 * cortex.index.lexical.Indexer.flush) and the newest ids of a scan.  Anything unusual is left
 * to the Python path.
 */

#include "common.h"

/* the cursor methods called (interned once) */
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
        PyErr_SetString(PyExc_TypeError, "the cursor must give bytes");
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

/* -- new postings appended to the last block of their terms (format 14: blocks by docno) -- */

PyDoc_STRVAR(append_fresh_doc,
             "append_fresh(cursor, items, block_max, /)\n--\n\n"
             "``cortex.index.postings._append`` for many terms in one call: ``items`` is "
             "``[(prefix, records), ...]`` (a term's posting prefix, and new postings as bytes "
             "or a bytearray of 12-byte records: docno, tf, dl, u32 big-endian each; or as a "
             "dict docno4 -> tail8, whose records are taken in docno order, and which is left "
             "over when a value is anything else, as a removal's None; any other value is left "
             "over too). For each "
             "whose docnos ascend strictly and come after every posting of the term (no block "
             "at or after the first; the last block, if any, ends before it), the term's last "
             "block is read with the cursor (set_range, key, value, prev, last: bytes), the "
             "records appended, and the postings cut again every ``block_max`` from that "
             "block's first. ``(puts, leftover)``: the ``(key, sealed value)`` pairs that "
             "change, in key order, and the indexes of the items left to the Python path.");

static int
append_one(PyObject *cursor, PyObject *prefix, const unsigned char *r, Py_ssize_t nr,
           Py_ssize_t block_max, PyObject *puts)
{
    /* 1 done, 0 left to Python, -1 error */
    PyObject *key = NULL, *k0 = NULL, *v0 = NULL, *k1 = NULL;
    unsigned char *enc = NULL;
    Py_ssize_t plen = PyBytes_GET_SIZE(prefix), m0 = 0, at, step = block_max * 12, i;
    uint32_t last = 0;
    int found, rc = -1;
    if (nr == 0 || nr % 12 != 0) {
        return 0;
    }
    for (i = 12; i < nr; i += 12) {
        if (memcmp(r + i - 12, r + i, 4) >= 0) {
            return 0;
        }
    }
    key = PyBytes_FromStringAndSize(NULL, plen + 4);
    if (key == NULL) {
        return -1;
    }
    memcpy(PyBytes_AS_STRING(key), PyBytes_AS_STRING(prefix), (size_t)plen);
    memcpy(PyBytes_AS_STRING(key) + plen, r, 4);
    found = cursor_step(cursor, m_set_range, key);
    if (found < 0) {
        goto done;
    }
    if (found) {
        k1 = cursor_get(cursor, m_key);
        if (k1 == NULL) {
            goto done;
        }
        if (starts_with(k1, prefix)) {
            rc = 0; /* a block at or after the first new docno: not an append */
            goto done;
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
    if (k0 != NULL) {
        const unsigned char *v;
        Py_ssize_t nv;
        uint32_t c;
        v0 = cursor_get(cursor, m_value);
        if (v0 == NULL) {
            goto done;
        }
        v = (const unsigned char *)PyBytes_AS_STRING(v0);
        nv = PyBytes_GET_SIZE(v0);
        if (PyBytes_GET_SIZE(k0) != plen + 4 || nv < 5) {
            rc = 0;
            goto done;
        }
        c = crc32_of(v, nv - 4);
        if (v[nv - 4] != (unsigned char)(c >> 24) || v[nv - 3] != (unsigned char)(c >> 16) ||
            v[nv - 2] != (unsigned char)(c >> 8) || v[nv - 1] != (unsigned char)c) {
            rc = 0; /* the block fails its checksum: the Python path says so */
            goto done;
        }
        {
            const unsigned char *f = (const unsigned char *)PyBytes_AS_STRING(k0) + plen;
            uint64_t first = ((uint64_t)f[0] << 24) | ((uint64_t)f[1] << 16) |
                             ((uint64_t)f[2] << 8) | f[3];
            /* checked as a decode checks it, without its records: a canonical payload is the
             * encoding of its postings, so the extended block is its bytes and the varints of
             * the new postings after them (cut_runs from the block's first posting) */
            m0 = cx_block_scan(first, v, nv - 4, block_max, &last);
        }
        if (m0 < 0 || (((uint32_t)r[0] << 24) | ((uint32_t)r[1] << 16) |
                       ((uint32_t)r[2] << 8) | r[3]) <= last) {
            rc = 0; /* damaged, or the new postings do not come after it */
            goto done;
        }
    }
    enc = PyMem_Malloc((size_t)(k0 != NULL ? PyBytes_GET_SIZE(v0) : 0) +
                       (size_t)(step / 12) * 15 + 4);
    if (enc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    at = 0;
    while (at < nr) {
        Py_ssize_t len, size;
        const unsigned char *kb;
        PyObject *k, *val, *pair;
        uint32_t c;
        if (at == 0 && k0 != NULL && m0 < block_max) {
            /* the stored block, extended with as many new postings as it has room for */
            Py_ssize_t old = PyBytes_GET_SIZE(v0) - 4, ext;
            len = (block_max - m0) * 12 < nr ? (block_max - m0) * 12 : nr;
            memcpy(enc, PyBytes_AS_STRING(v0), (size_t)old);
            ext = cx_block_extend(r, len, last, enc + old);
            size = ext < 0 ? -1 : old + ext;
            kb = (const unsigned char *)PyBytes_AS_STRING(k0) + plen;
        }
        else { /* a new block (a full stored block stays as it is) */
            len = nr - at < step ? nr - at : step;
            size = cx_block_encode(r + at, len, block_max, enc);
            kb = r + at;
        }
        if (size < 0) {
            PyErr_SetString(PyExc_RuntimeError, "append_fresh: a run that does not encode");
            goto done;
        }
        c = crc32_of(enc, size);
        enc[size] = (unsigned char)(c >> 24);
        enc[size + 1] = (unsigned char)(c >> 16);
        enc[size + 2] = (unsigned char)(c >> 8);
        enc[size + 3] = (unsigned char)c;
        k = PyBytes_FromStringAndSize(NULL, plen + 4);
        val = PyBytes_FromStringAndSize((const char *)enc, size + 4);
        if (k == NULL || val == NULL) {
            Py_XDECREF(k);
            Py_XDECREF(val);
            goto done;
        }
        memcpy(PyBytes_AS_STRING(k), PyBytes_AS_STRING(prefix), (size_t)plen);
        memcpy(PyBytes_AS_STRING(k) + plen, kb, 4);
        pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(k);
            Py_DECREF(val);
            goto done;
        }
        PyTuple_SET_ITEM(pair, 0, k);
        PyTuple_SET_ITEM(pair, 1, val);
        if (PyList_Append(puts, pair) < 0) {
            Py_DECREF(pair);
            goto done;
        }
        Py_DECREF(pair);
        at += len;
    }
    rc = 1;
done:
    PyMem_Free(enc);
    Py_XDECREF(key);
    Py_XDECREF(k0);
    Py_XDECREF(v0);
    Py_XDECREF(k1);
    return rc;
}

static int
cmp_docno4(const void *a, const void *b)
{
    return memcmp(a, b, 4);
}

/* A dict of new postings (docno4 -> tail8: a fold's additions) as 12-byte records in docno
 * order, into *out (PyMem, freed by the caller) with *n set to their size: 1, or 0 when it
 * holds anything else (a removal's None: left to the Python path), -1 on error. */
static int
dict_records(PyObject *held, unsigned char **out, Py_ssize_t *n)
{
    Py_ssize_t pos = 0, at = 0, size = PyDict_GET_SIZE(held);
    PyObject *k, *v;
    unsigned char *buf;
    *out = NULL;
    *n = 0;
    if (size == 0) {
        return 0;
    }
    buf = PyMem_Malloc((size_t)size * 12);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    while (PyDict_Next(held, &pos, &k, &v)) {
        if (!PyBytes_CheckExact(k) || PyBytes_GET_SIZE(k) != 4 || !PyBytes_CheckExact(v) ||
            PyBytes_GET_SIZE(v) != 8) {
            PyMem_Free(buf);
            return 0;
        }
        memcpy(buf + at, PyBytes_AS_STRING(k), 4);
        memcpy(buf + at + 4, PyBytes_AS_STRING(v), 8);
        at += 12;
    }
    qsort(buf, (size_t)size, 12, cmp_docno4);
    *out = buf;
    *n = at;
    return 1;
}

static PyObject *
sp_append_fresh(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *cursor, *items, *puts = NULL, *leftover = NULL, *res = NULL;
    Py_ssize_t t, n, block_max;
    (void)module;
    if (nargs != 3 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "append_fresh(cursor, list, block_max)");
        return NULL;
    }
    cursor = args[0];
    items = args[1];
    block_max = PyLong_AsSsize_t(args[2]);
    if (block_max == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (block_max < 1 || block_max > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "append_fresh: 1 <= block_max <= 2**20");
        return NULL;
    }
    puts = PyList_New(0);
    leftover = PyList_New(0);
    if (puts == NULL || leftover == NULL) {
        goto done;
    }
    n = PyList_GET_SIZE(items);
    for (t = 0; t < n; t++) {
        PyObject *item = PyList_GET_ITEM(items, t), *prefix, *records;
        const unsigned char *r = NULL;
        Py_ssize_t nr = 0;
        int rc;
        unsigned char *sorted = NULL;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "append_fresh: items are (bytes, records) pairs");
            goto done;
        }
        prefix = PyTuple_GET_ITEM(item, 0);
        records = PyTuple_GET_ITEM(item, 1);
        if (!PyBytes_CheckExact(records) && !PyByteArray_CheckExact(records) &&
            !PyDict_CheckExact(records)) {
            rc = 0; /* another mapping of changes: the Python path */
        }
        else if (PyDict_CheckExact(records)) {
            rc = dict_records(records, &sorted, &nr);
            if (rc < 0) {
                goto done;
            }
            r = sorted;
        }
        else if (PyByteArray_CheckExact(records)) {
            rc = 1;
            r = (const unsigned char *)PyByteArray_AS_STRING(records);
            nr = PyByteArray_GET_SIZE(records);
        }
        else {
            rc = 1;
            r = (const unsigned char *)PyBytes_AS_STRING(records);
            nr = PyBytes_GET_SIZE(records);
        }
        if (rc == 1) {
            rc = append_one(cursor, prefix, r, nr, block_max, puts);
        }
        PyMem_Free(sorted);
        if (rc < 0) {
            goto done;
        }
        if (rc == 0) {
            PyObject *index = PyLong_FromSsize_t(t);
            if (index == NULL || PyList_Append(leftover, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
    }
    res = PyTuple_Pack(2, puts, leftover);
done:
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

/* -- newest_ids: an index of (u64 created, id16) keys, newest first ---------------------------- */

#define NEWEST_RUN 64 /* planner._RUN: the longest run of one time read backwards */

/* How the scan moves: over the keys of a cursor (``head`` NULL), or over the duplicates of the
 * key ``head`` of a database of duplicates (format 20: an index keyspace's head is LMDB's key,
 * the rest of each index key a duplicate), the duplicates standing for the keys under an empty
 * prefix. */
typedef struct {
    PyObject *cursor;
    PyObject *head;
} Nav;

static PyObject *m_set_range_dup = NULL, *m_prev_dup = NULL, *m_next_dup = NULL,
                *m_last_dup = NULL;

static int
nav_prev(Nav *nav)
{
    return cursor_step(nav->cursor, nav->head != NULL ? m_prev_dup : m_prev, NULL);
}

static int
nav_next(Nav *nav)
{
    return cursor_step(nav->cursor, nav->head != NULL ? m_next_dup : m_next, NULL);
}

/* the last key (the head's last duplicate) */
static int
nav_last(Nav *nav)
{
    int ok;
    if (nav->head == NULL) {
        return cursor_step(nav->cursor, m_last, NULL);
    }
    ok = cursor_step(nav->cursor, m_set_key, nav->head);
    return ok > 0 ? cursor_step(nav->cursor, m_last_dup, NULL) : ok;
}

/* the first key >= k (the head's first duplicate >= k) */
static int
nav_set_range(Nav *nav, PyObject *k)
{
    PyObject *r;
    int ok;
    if (nav->head == NULL) {
        return cursor_step(nav->cursor, m_set_range, k);
    }
    r = PyObject_CallMethodObjArgs(nav->cursor, m_set_range_dup, nav->head, k, NULL);
    if (r == NULL) {
        return -1;
    }
    ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

/* the cursor's key (its duplicate, over a head's): a new reference to bytes, or NULL */
static PyObject *
nav_get(Nav *nav)
{
    return cursor_get(nav->cursor, nav->head != NULL ? m_value : m_key);
}

/* the cursor's key when it starts with ``prefix`` and is ``keylen`` bytes long: a new
 * reference; Py_None (a new reference) at the end of the prefix; NULL with an error, or NULL
 * without one for a key of another length under the prefix (the caller declines) */
static PyObject *
newest_key(Nav *nav, int ok, PyObject *prefix, Py_ssize_t keylen)
{
    PyObject *k;
    if (ok < 0) {
        return NULL;
    }
    if (!ok) {
        Py_RETURN_NONE;
    }
    k = nav_get(nav);
    if (k == NULL) {
        return NULL;
    }
    if (!starts_with(k, prefix)) {
        Py_DECREF(k);
        Py_RETURN_NONE;
    }
    if (PyBytes_GET_SIZE(k) != keylen) {
        Py_DECREF(k);
        return NULL;
    }
    return k;
}

/* the last key <= ``bound`` under ``prefix`` (``bound`` NULL: the prefix's last key), as
 * newest_key gives it; kv._LmdbTxn._position(reverse=True) */
static PyObject *
newest_seek(Nav *nav, PyObject *prefix, PyObject *bound)
{
    int ok;
    if (bound == NULL) {
        Py_ssize_t n = PyBytes_GET_SIZE(prefix);
        const char *p = PyBytes_AS_STRING(prefix);
        PyObject *end;
        while (n > 0 && (uint8_t)p[n - 1] == 0xFF) {
            n--;
        }
        if (n == 0) {
            ok = nav_last(nav);
            return newest_key(nav, ok, prefix, PyBytes_GET_SIZE(prefix) + 24);
        }
        end = PyBytes_FromStringAndSize(NULL, n); /* a new object (never a shared one) */
        if (end == NULL) {
            return NULL;
        }
        memcpy(PyBytes_AS_STRING(end), p, (size_t)n);
        PyBytes_AS_STRING(end)[n - 1] = (char)((uint8_t)p[n - 1] + 1);
        ok = nav_set_range(nav, end);
        Py_DECREF(end);
        ok = ok < 0 ? ok : (ok ? nav_prev(nav) : nav_last(nav));
        return newest_key(nav, ok, prefix, PyBytes_GET_SIZE(prefix) + 24);
    }
    ok = nav_set_range(nav, bound);
    if (ok > 0) {
        PyObject *k = nav_get(nav);
        int same;
        if (k == NULL) {
            return NULL;
        }
        same = PyBytes_GET_SIZE(k) == PyBytes_GET_SIZE(bound) &&
               memcmp(PyBytes_AS_STRING(k), PyBytes_AS_STRING(bound),
                      (size_t)PyBytes_GET_SIZE(k)) == 0;
        Py_DECREF(k);
        if (!same) {
            ok = nav_prev(nav);
        }
    }
    else if (ok == 0) {
        ok = nav_last(nav);
    }
    return newest_key(nav, ok, prefix, PyBytes_GET_SIZE(prefix) + 24);
}

/* append key k's id (its last 16 bytes) to ids; 1 when ids holds ``limit`` (``last`` set to
 * k's suffix, a new reference), 0 when not, -1 on error */
static int
newest_emit(PyObject *ids, PyObject *k, Py_ssize_t n, Py_ssize_t limit, PyObject **last)
{
    PyObject *id = PyBytes_FromStringAndSize(PyBytes_AS_STRING(k) + n + 8, 16);
    int full;
    if (id == NULL) {
        return -1;
    }
    full = PyList_Append(ids, id);
    Py_DECREF(id);
    if (full < 0) {
        return -1;
    }
    if (PyList_GET_SIZE(ids) < limit) {
        return 0;
    }
    *last = PyBytes_FromStringAndSize(PyBytes_AS_STRING(k) + n, 24);
    return *last == NULL ? -1 : 1;
}

/* the u64 created time of key k under a prefix of n bytes */
static uint64_t
newest_time(PyObject *k, Py_ssize_t n)
{
    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(k) + n;
    uint64_t t = 0;
    int i;
    for (i = 0; i < 8; i++) {
        t = t << 8 | p[i];
    }
    return t;
}

/* ``prefix || u64(t)``, then 16 bytes 0xFF when ``ff`` (the last key the run of t can have) */
static PyObject *
newest_bound(PyObject *prefix, uint64_t t, int ff)
{
    Py_ssize_t n = PyBytes_GET_SIZE(prefix);
    PyObject *b = PyBytes_FromStringAndSize(NULL, n + 8 + (ff ? 16 : 0));
    char *p;
    int i;
    if (b == NULL) {
        return NULL;
    }
    p = PyBytes_AS_STRING(b);
    memcpy(p, PyBytes_AS_STRING(prefix), (size_t)n);
    for (i = 0; i < 8; i++) {
        p[n + i] = (char)(uint8_t)(t >> (56 - 8 * i));
    }
    if (ff) {
        memset(p + n + 8, 0xFF, 16);
    }
    return b;
}

/* keys of run t read forward from ``from`` (exclusive when ``skip``), emitted until the run
 * ends or ids holds ``limit``: 1 full, 0 not, -1 error, -2 decline */
static int
newest_forward(Nav *nav, PyObject *prefix, uint64_t t, PyObject *from, int skip,
               PyObject *ids, Py_ssize_t limit, PyObject **last)
{
    Py_ssize_t n = PyBytes_GET_SIZE(prefix);
    PyObject *run = newest_bound(prefix, t, 0), *k;
    int ok, r = 0;
    if (run == NULL) {
        return -1;
    }
    ok = nav_set_range(nav, from);
    k = newest_key(nav, ok, run, PyBytes_GET_SIZE(prefix) + 24);
    while (k != NULL && k != Py_None) {
        if (skip && PyBytes_GET_SIZE(k) == PyBytes_GET_SIZE(from) &&
            memcmp(PyBytes_AS_STRING(k), PyBytes_AS_STRING(from), (size_t)PyBytes_GET_SIZE(k)) == 0) {
            r = 0;
        }
        else {
            r = newest_emit(ids, k, n, limit, last);
        }
        Py_DECREF(k);
        if (r != 0) {
            Py_DECREF(run);
            return r;
        }
        ok = nav_next(nav);
        k = newest_key(nav, ok, run, PyBytes_GET_SIZE(prefix) + 24);
    }
    Py_DECREF(run);
    if (k == NULL) {
        return PyErr_Occurred() ? -1 : -2;
    }
    Py_DECREF(k);
    return 0;
}

PyDoc_STRVAR(newest_ids_doc,
             "newest_ids(cursor, prefix, after, limit, head=0, /)\n--\n\n"
             "``cortex.query.planner.Executor.created_scan(prefix, True)`` without bounds, in "
             "pages: the raw ids of up to ``limit`` keys ``prefix || u64 created || id16`` after "
             "the key whose suffix is ``after`` (None: from the newest), newest first, ties by id "
             "ascending, read with ``cursor`` (an LMDB cursor). ``(ids, last)``: ``last`` the "
             "suffix of the last key given, to pass as ``after`` (None: the index has no more); "
             "or None where the Python path must decide (a key of another length under the "
             "prefix). With ``head`` > 0, ``cursor`` is of a database of duplicates (format 20) "
             "and ``prefix`` begins with one of its keys (an index keyspace's head, ``head`` "
             "bytes): the keys read are that key joined with each of its duplicates.");

static PyObject *newest_page(Nav *nav_in, PyObject *prefix, PyObject *after, Py_ssize_t limit);

static PyObject *
sp_newest_ids(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *prefix, *after, *rest, *out;
    Py_ssize_t limit, head = 0;
    Nav nav;
    (void)module;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "newest_ids(cursor, prefix, after, limit, head=0)");
        return NULL;
    }
    nav.cursor = args[0];
    nav.head = NULL;
    prefix = args[1];
    after = args[2];
    if (!PyBytes_CheckExact(prefix) || (after != Py_None && (!PyBytes_CheckExact(after) ||
                                                             PyBytes_GET_SIZE(after) != 24))) {
        PyErr_SetString(PyExc_TypeError, "newest_ids: the prefix is bytes, after 24 bytes or None");
        return NULL;
    }
    limit = PyLong_Check(args[3]) ? PyLong_AsSsize_t(args[3]) : -1;
    if (limit < 1) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "newest_ids: the limit is an int >= 1");
        }
        return NULL;
    }
    if (nargs == 5) {
        head = PyLong_Check(args[4]) ? PyLong_AsSsize_t(args[4]) : -1;
        if (head < 0 || head > PyBytes_GET_SIZE(prefix)) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError,
                                "newest_ids: the head is an int from 0 to the prefix's length");
            }
            return NULL;
        }
    }
    if (head > 0) {
        /* the head's duplicates are the keys, under the rest of the prefix */
        nav.head = PyBytes_FromStringAndSize(PyBytes_AS_STRING(prefix), head);
        rest = PyBytes_FromStringAndSize(PyBytes_AS_STRING(prefix) + head,
                                         PyBytes_GET_SIZE(prefix) - head);
        if (nav.head == NULL || rest == NULL) {
            Py_XDECREF(nav.head);
            Py_XDECREF(rest);
            return NULL;
        }
        prefix = rest;
        out = newest_page(&nav, prefix, after, limit);
        Py_DECREF(nav.head);
        Py_DECREF(rest);
        return out;
    }
    return newest_page(&nav, prefix, after, limit);
}

/* newest_ids's page over ``nav`` (its arguments checked) */
static PyObject *
newest_page(Nav *nav_in, PyObject *prefix, PyObject *after, Py_ssize_t limit)
{
    PyObject *ids = NULL, *last = NULL, *k = NULL, *bound = NULL;
    PyObject *run[NEWEST_RUN];
    Py_ssize_t n, nrun = 0, i;
    uint64_t t;
    int r, ok;
    Nav nav = *nav_in;
    n = PyBytes_GET_SIZE(prefix);
    ids = PyList_New(0);
    if (ids == NULL) {
        return NULL;
    }
    if (after != Py_None) {
        /* the rest of after's run (ids above after's), then the runs before it */
        PyObject *from = PyBytes_FromStringAndSize(NULL, n + 24);
        if (from == NULL) {
            goto fail;
        }
        memcpy(PyBytes_AS_STRING(from), PyBytes_AS_STRING(prefix), (size_t)n);
        memcpy(PyBytes_AS_STRING(from) + n, PyBytes_AS_STRING(after), 24);
        t = newest_time(from, n);
        r = newest_forward(&nav, prefix, t, from, 1, ids, limit, &last);
        Py_DECREF(from);
        if (r != 0) {
            goto done_r;
        }
        if (t == 0) {
            goto exhausted;
        }
        bound = newest_bound(prefix, t - 1, 1);
        if (bound == NULL) {
            goto fail;
        }
    }
    k = newest_seek(&nav, prefix, bound);
    Py_CLEAR(bound);
    for (;;) {
        /* k: the newest key of a run (or the end) */
        if (k == NULL) {
            goto decline_or_fail;
        }
        if (k == Py_None) {
            Py_CLEAR(k);
            goto exhausted;
        }
        t = newest_time(k, n);
        nrun = 0;
        run[nrun++] = k; /* the run holds k's reference */
        k = NULL;
        for (;;) {
            ok = nav_prev(&nav);
            k = newest_key(&nav, ok, prefix, n + 24);
            if (k == NULL || k == Py_None || newest_time(k, n) != t) {
                break; /* the run ended: k the next run's newest key, or the end */
            }
            if (nrun == NEWEST_RUN) {
                break; /* a long run: read forward from its start */
            }
            run[nrun++] = k;
            k = NULL;
        }
        if (k != NULL && k != Py_None && newest_time(k, n) == t) {
            /* long: from the run's first key forward, then the runs before it */
            PyObject *start = newest_bound(prefix, t, 0);
            Py_CLEAR(k);
            for (i = 0; i < nrun; i++) {
                Py_DECREF(run[i]);
            }
            nrun = 0;
            if (start == NULL) {
                goto fail;
            }
            r = newest_forward(&nav, prefix, t, start, 0, ids, limit, &last);
            Py_DECREF(start);
            if (r != 0) {
                goto done_r;
            }
            if (t == 0) {
                goto exhausted;
            }
            bound = newest_bound(prefix, t - 1, 1);
            if (bound == NULL) {
                goto fail;
            }
            k = newest_seek(&nav, prefix, bound);
            Py_CLEAR(bound);
            continue;
        }
        if (k == NULL && PyErr_Occurred()) {
            goto fail;
        }
        if (k == NULL) {
            goto decline;
        }
        /* a short run: its keys in reverse (ids ascending) */
        r = 0;
        for (i = nrun - 1; i >= 0 && r == 0; i--) {
            r = newest_emit(ids, run[i], n, limit, &last);
        }
        for (i = 0; i < nrun; i++) {
            Py_DECREF(run[i]);
        }
        nrun = 0;
        if (r != 0) {
            Py_DECREF(k);
            k = NULL;
            goto done_r;
        }
    }
exhausted:
    {
        PyObject *out = PyTuple_Pack(2, ids, Py_None);
        Py_DECREF(ids);
        return out;
    }
done_r:
    if (r == 1) {
        PyObject *out = PyTuple_Pack(2, ids, last);
        Py_DECREF(ids);
        Py_DECREF(last);
        return out;
    }
    if (r == -2) {
        goto decline;
    }
    goto fail;
decline_or_fail:
    if (PyErr_Occurred()) {
        goto fail;
    }
decline:
    for (i = 0; i < nrun; i++) {
        Py_DECREF(run[i]);
    }
    Py_XDECREF(k);
    Py_XDECREF(bound);
    Py_DECREF(ids);
    Py_RETURN_NONE;
fail:
    for (i = 0; i < nrun; i++) {
        Py_DECREF(run[i]);
    }
    Py_XDECREF(k);
    Py_XDECREF(bound);
    Py_XDECREF(last);
    Py_XDECREF(ids);
    return NULL;
}

/* newest_ids for the other parts (cbor_decode.c's read_newest): its arguments, its answer */
PyObject *
cx_newest_ids(PyObject *const *args, Py_ssize_t nargs)
{
    return sp_newest_ids(NULL, args, nargs);
}

static PyMethodDef cursor_methods[] = {
    {"df_values", (PyCFunction)(void (*)(void))sp_df_values, METH_FASTCALL, df_values_doc},
    {"append_fresh", (PyCFunction)(void (*)(void))sp_append_fresh, METH_FASTCALL,
     append_fresh_doc},
    {"df_updates", (PyCFunction)(void (*)(void))sp_df_updates, METH_FASTCALL, df_updates_doc},
    {"newest_ids", (PyCFunction)(void (*)(void))sp_newest_ids, METH_FASTCALL, newest_ids_doc},
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
        m_set_range_dup = PyUnicode_InternFromString("set_range_dup");
        m_prev_dup = PyUnicode_InternFromString("prev_dup");
        m_next_dup = PyUnicode_InternFromString("next_dup");
        m_last_dup = PyUnicode_InternFromString("last_dup");
        if (m_set_range_dup == NULL || m_prev_dup == NULL || m_next_dup == NULL ||
            m_last_dup == NULL || m_set_key == NULL || m_set_range == NULL || m_key == NULL || m_value == NULL ||
            m_prev == NULL || m_last == NULL || m_next == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(m, cursor_methods);
}
