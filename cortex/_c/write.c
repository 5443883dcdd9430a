/*
 * The records of a new memory besides its head and version (cbor_encode.c): its index keys
 * (cortex/storage/keys.py index_keys) and its journal entry (cortex/engine/journal.py
 * JournalWriter.write_entry), and
 * the loop of Store._stage_new over a batch of new memories.  The Python code keeps the
 * definitions: these return the same bytes, or None wherever they are not sure, and the
 * Python path then runs and names any error.  A journal entry's digest is hashlib's sha256.
 */

#include "common.h"

static PyObject *one_obj = NULL;     /* 1 */
static PyObject *sha256_blank = NULL; /* hashlib.sha256(): copied for each digest */
static PyObject *str_copy = NULL, *str_update = NULL, *str_digest = NULL;

/* The plan of index_keys (built once by cortex/storage/keys.py, see INDEX_PLAN). */
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
             "``cortex.storage.keys.index_keys`` for a list or tuple of str tags and of FrameRefs whose "
             "verb and kind are codes 0..255; None otherwise.  ``plan`` is "
             "cortex.storage.keys.INDEX_PLAN.");

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
             "(``cortex.engine.store._Journal.write_entry``): ``(key, value, digest)``; None when an "
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
    /* the chain hash: hashlib.sha256(payload).digest(), as a copy of a blank hashlib object
     * updated with the payload (a copy skips OpenSSL's per-object set-up) */
    {
        PyObject *h = PyObject_CallMethodNoArgs(sha256_blank, str_copy), *r;
        if (h == NULL) {
            goto done;
        }
        r = PyObject_CallMethodOneArg(h, str_update, payload);
        if (r != NULL) {
            Py_DECREF(r);
            digest = PyObject_CallMethodNoArgs(h, str_digest);
        }
        Py_DECREF(h);
        if (digest == NULL) {
            goto done;
        }
        if (!PyBytes_CheckExact(digest) || PyBytes_GET_SIZE(digest) != 32) {
            PyErr_SetString(PyExc_RuntimeError, "journal_entry: hashlib.sha256 gave no digest");
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

/* The plan of stage_new (built once by cortex/engine/store.py, see _STAGE_PLAN). */
enum {
    SG_VERSION,   /* the prefixes: mv/, b"" (format 21: nothing between row and number),
                   * idx/pin/, lex/d/, j/ */
    SG_V,
    SG_PIN,
    SG_LEX_DOC,
    SG_JOURNAL,
    SG_INDEX_PLAN, /* cortex.storage.keys.INDEX_PLAN */
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
    PyObject *docno_raw = NULL, *docno_obj = NULL;
    PyObject *head = NULL, *id = NULL, *raw = NULL, *mtype = NULL;
    PyObject *created = NULL, *tags = NULL, *frames = NULL, *us_obj = NULL, *keys = NULL;
    PyObject *version = NULL, *hash = NULL, *vbytes = NULL, *pinned = NULL, *terms = NULL;
    PyObject *entry = NULL, *seq_obj = NULL, *doc_key = NULL, *n = NULL, *vkey = NULL;
    PyObject *tb, *empty = NULL, *row = NULL;
    long long us;
    unsigned long long docno;
    Py_ssize_t i, nk, lv, lsep;
    int rc = -1;
    if ((head = get_attr(p, A_HEAD)) == NULL || (id = get_attr(head, A_ID)) == NULL ||
        (row = get_attr(p, A_ROW)) == NULL) {
        goto done;
    }
    /* the memory's row (format 21, given in the transaction): its document number and the
     * key of its version and lexical document */
    if (!PyLong_CheckExact(row)) {
        rc = 0;
        goto done;
    }
    docno = PyLong_AsUnsignedLongLong(row);
    if (docno == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        rc = 0;
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
        !time_micros(created, &us) || us < 0 || *seq >= LLONG_MAX || docno > 0xFFFFFFFFu) {
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
    {
        char d4[4];
        d4[0] = (char)(docno >> 24);
        d4[1] = (char)(docno >> 16);
        d4[2] = (char)(docno >> 8);
        d4[3] = (char)docno;
        docno_raw = PyBytes_FromStringAndSize(d4, 4);
        docno_obj = PyLong_FromUnsignedLongLong(docno);
        if (docno_raw == NULL || docno_obj == NULL) {
            goto done;
        }
        doc_key = join3(sg[SG_LEX_DOC], "", 0, d4, 4);
        if (doc_key == NULL) {
            goto done;
        }
    }
    {
        PyObject *a[9] = {docs, doc_key, fresh, memo, docno_raw, one_obj,
                          PyTuple_GET_ITEM(terms, 0), PyTuple_GET_ITEM(terms, 1), docno_obj};
        n = sp_index_new(module, a, 9);
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
    /* mv/ u32(row) u64(1) (format 21) */
    lv = PyBytes_GET_SIZE(sg[SG_VERSION]);
    lsep = PyBytes_GET_SIZE(sg[SG_V]);
    vkey = PyBytes_FromStringAndSize(NULL, lv + 4 + lsep + 8);
    if (vkey == NULL) {
        goto done;
    }
    {
        char *q = PyBytes_AS_STRING(vkey);
        memcpy(q, PyBytes_AS_STRING(sg[SG_VERSION]), (size_t)lv);
        memcpy(q + lv, PyBytes_AS_STRING(docno_raw), 4);
        memcpy(q + lv + 4, PyBytes_AS_STRING(sg[SG_V]), (size_t)lsep);
        memset(q + lv + 4 + lsep, 0, 7);
        q[lv + 4 + lsep + 7] = 1;
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
    Py_XDECREF(row);
    Py_XDECREF(docno_raw);
    Py_XDECREF(docno_obj);
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
             "The loop of ``cortex.engine.store.Store._stage_new`` in C, from ``prepared[start]`` on: "
             "for each new memory (version 1, its head put already) append to ``puts`` its "
             "version, index entries, pin and ``write`` journal entry (``seq + 1`` chained on "
             "``prev``, with the entries' ``shared`` parts; not its vector), and index its "
             "terms under its row (``p.row``, format 21: its document number; its version "
             "and lexical document are keyed by it) as ``index_new`` does "
             "into ``docs``, ``fresh`` and ``memo``.  Stops at the first "
             "memory that is not the common case (anything ``index_keys``, "
             "``journal_entry`` or ``index_new`` leave to Python), changing nothing for it.  "
             "Returns ``(next, seq, prev, documents, total_length, postings)``: "
             "where it stopped (``len(prepared)`` when done), the journal's last seq and hash, "
             "and what the staged memories add to the lexical statistics.");

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
    if (PyBytes_GET_SIZE(sg[SG_V]) > 3 || !PyTuple_CheckExact(sg[SG_INDEX_PLAN]) ||
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

/* -- float16: a vec/ record's values (cortex.index.vectors.vector_record) --------------------- */

/* The IEEE binary16 bits nearest the binary32 value of bits f, ties to even, for a finite f of
 * magnitude below 65520 (the caller declines the rest): the conversion numpy's astype makes. */
static uint16_t
half_of(uint32_t f)
{
    uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
    int e = (int)((f >> 23) & 0xFFu) - 127; /* unbiased exponent */
    uint32_t m = f & 0x7FFFFFu, h, rem, mid;
    int s;
    if (e >= -14) { /* a normal half: 10 of the 23 mantissa bits, the 13 below rounded */
        h = ((uint32_t)(e + 15) << 10) | (m >> 13);
        rem = m & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
            h++; /* a carry into the exponent is the next binade's first value */
        }
        return (uint16_t)(sign | h);
    }
    if (e < -25) { /* below half the smallest subnormal (2**-25): zero */
        return sign;
    }
    /* a subnormal half: the value in units of 2**-24 is (2**23 + m) / 2**s */
    m |= 0x800000u;
    s = -e - 1; /* 14..24 */
    h = m >> s;
    rem = m & ((1u << s) - 1u);
    mid = 1u << (s - 1);
    if (rem > mid || (rem == mid && (h & 1u))) {
        h++;
    }
    return (uint16_t)(sign | h);
}

static int f16c = 0; /* the CPU converts 8 values an instruction (set once at import) */

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* half_of for 8 values at once: the CPU's conversion, rounding to nearest even (the same
 * bits for finite values below 65520: tests compare both with numpy) */
__attribute__((target("avx,f16c"))) static void
halves_f16c(const unsigned char *p, unsigned char *q, Py_ssize_t n)
{
    Py_ssize_t i;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps((const float *)(p + 4 * i));
        _mm_storeu_si128((__m128i *)(q + 2 * i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
}

static void
f16c_init(void)
{
    __builtin_cpu_init();
    f16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}
#else
static void
halves_f16c(const unsigned char *p, unsigned char *q, Py_ssize_t n)
{
    (void)p, (void)q, (void)n;
}

static void
f16c_init(void)
{
    f16c = 0;
}
#endif

PyDoc_STRVAR(float16_doc,
             "float16(data, /, scalar=False)\n--\n\n"
             "``numpy.frombuffer(data, '<f4').astype('<f2').tobytes()`` for bytes of finite "
             "values below 65520 in magnitude (rounded to nearest, ties to even): by the CPU's "
             "conversion where it has one, else (or with ``scalar``) value by value. None for "
             "anything else (a length not a multiple of 4, an infinity, a NaN, a value that "
             "overflows): numpy's path then runs.");

static PyObject *
sp_float16(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *p;
    unsigned char *q;
    Py_ssize_t n, i = 0;
    PyObject *data, *out;
    int scalar = 0;
    (void)module;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "float16(data, scalar=False)");
        return NULL;
    }
    if (nargs == 2 && (scalar = PyObject_IsTrue(args[1])) < 0) {
        return NULL;
    }
    data = args[0];
    if (!PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) % 4 != 0) {
        Py_RETURN_NONE;
    }
    n = PyBytes_GET_SIZE(data) / 4;
    p = (const unsigned char *)PyBytes_AS_STRING(data);
    for (i = 0; i < n; i++) {
        uint32_t f;
        memcpy(&f, p + 4 * i, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        f = __builtin_bswap32(f);
#endif
        if ((f & 0x7FFFFFFFu) >= 0x477FF000u) { /* >= 65520, an infinity or a NaN */
            Py_RETURN_NONE;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, 2 * n);
    if (out == NULL) {
        return NULL;
    }
    q = (unsigned char *)PyBytes_AS_STRING(out);
    i = 0;
    if (f16c && !scalar) {
        halves_f16c(p, q, n);
        i = n - n % 8;
    }
    for (; i < n; i++) {
        uint32_t f = (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
                     ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24);
        uint16_t h = half_of(f);
        q[2 * i] = (unsigned char)(h & 0xFFu);
        q[2 * i + 1] = (unsigned char)(h >> 8);
    }
    return out;
}

static PyMethodDef write_methods[] = {
    {"float16", (PyCFunction)(void (*)(void))sp_float16, METH_FASTCALL, float16_doc},
    {"index_keys", (PyCFunction)(void (*)(void))sp_index_keys, METH_FASTCALL, index_keys_doc},
    {"journal_entry", (PyCFunction)(void (*)(void))sp_journal_entry, METH_FASTCALL,
     journal_entry_doc},
    {"stage_new", (PyCFunction)(void (*)(void))sp_stage_new, METH_FASTCALL, stage_new_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_write_init(PyObject *m)
{
    f16c_init();
    if (one_obj == NULL) {
        one_obj = PyLong_FromLong(1);
        if (one_obj == NULL) {
            return -1;
        }
    }
    if (sha256_blank == NULL) {
        PyObject *hashlib = PyImport_ImportModule("hashlib");
        if (hashlib == NULL) {
            return -1;
        }
        sha256_blank = PyObject_CallMethod(hashlib, "sha256", NULL);
        Py_DECREF(hashlib);
        if (sha256_blank == NULL) {
            return -1;
        }
    }
    if (str_digest == NULL) {
        str_copy = PyUnicode_InternFromString("copy");
        str_update = PyUnicode_InternFromString("update");
        str_digest = PyUnicode_InternFromString("digest");
        if (str_copy == NULL || str_update == NULL || str_digest == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(m, write_methods);
}
