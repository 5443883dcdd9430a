/*
 * The lexical index's text analysis (cortex/index/text.py, cortex/index/lexical.py keep the definitions:
 * these return exactly what the pure-Python paths return, or None where they do not apply):
 * ASCII tokens, distinct terms and their counts, and the counted terms of an ASCII text or full
 * form whose tokens are all in the stem cache (through a token -> stem table).
 */

#include "common.h"

#define MAX_TOKEN_CHARS 64 /* cortex.index.text.MAX_TOKEN_CHARS */

PyDoc_STRVAR(ascii_tokens_doc,
             "ascii_tokens(text, /)\n--\n\n"
             "``tokenize(text)`` for ASCII text: the maximal runs of ASCII letters and digits, "
             "lower-cased, each cut to 64 characters; None when ``text`` is not ASCII.");

/* The next token of the ASCII text s[0..n) at or after *pos: its lower-cased first
 * MAX_TOKEN_CHARS characters are written to buf; returns their count (0: no token is left) and
 * moves *pos past the token.  The tokenizer of ``ascii_tokens`` and ``ascii_term_counts``. */
static Py_ssize_t
next_ascii_token(const Py_UCS1 *s, Py_ssize_t n, Py_ssize_t *pos, char *buf)
{
    Py_ssize_t i = *pos;
    while (i < n) {
        Py_ssize_t len = 0;
        while (i < n) {
            Py_UCS1 c = s[i];
            if (c >= 'A' && c <= 'Z') {
                c = (Py_UCS1)(c + ('a' - 'A'));
            }
            else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
                break;
            }
            if (len < MAX_TOKEN_CHARS) {
                buf[len] = (char)c;
            }
            len++;
            i++;
        }
        if (len > 0) {
            *pos = i;
            return len < MAX_TOKEN_CHARS ? len : MAX_TOKEN_CHARS;
        }
        i++; /* a separator */
    }
    *pos = i;
    return 0;
}

static PyObject *
sp_ascii_tokens(PyObject *module, PyObject *text)
{
    const Py_UCS1 *s;
    Py_ssize_t n, i = 0, len;
    PyObject *out, *tok;
    char buf[MAX_TOKEN_CHARS];
    (void)module;
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "ascii_tokens: text must be a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) {
        Py_RETURN_NONE;
    }
    s = PyUnicode_1BYTE_DATA(text);
    n = PyUnicode_GET_LENGTH(text);
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    while ((len = next_ascii_token(s, n, &i, buf)) > 0) {
        tok = PyUnicode_FromStringAndSize(buf, len);
        if (tok == NULL || PyList_Append(out, tok) < 0) {
            Py_XDECREF(tok);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(tok);
    }
    return out;
}

PyDoc_STRVAR(count_terms_doc,
             "count_terms(terms, /)\n--\n\n"
             "The distinct terms of the list ``terms`` in code point order and how often each "
             "occurs: ``(distinct, counts)``; None when an item is not a non-empty str without "
             "U+0000.");

static PyObject *
sp_count_terms(PyObject *module, PyObject *terms)
{
    PyObject *sorted, *distinct = NULL, *counts = NULL, *prev = NULL, *res = NULL;
    Py_ssize_t n, i, run = 0;
    (void)module;
    if (!PyList_CheckExact(terms)) {
        PyErr_SetString(PyExc_TypeError, "count_terms: terms must be a list");
        return NULL;
    }
    n = PyList_GET_SIZE(terms);
    for (i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(terms, i);
        Py_ssize_t len;
        if (!PyUnicode_CheckExact(t)) {
            Py_RETURN_NONE;
        }
        len = PyUnicode_GET_LENGTH(t);
        if (len == 0 || PyUnicode_FindChar(t, 0, 0, len, 1) != -1) {
            Py_RETURN_NONE;
        }
    }
    sorted = PyList_GetSlice(terms, 0, n);
    if (sorted == NULL) {
        return NULL;
    }
    /* exact str items only: the sort compares code points and cannot fail */
    if (PyList_Sort(sorted) < 0) {
        goto done;
    }
    distinct = PyList_New(0);
    counts = PyList_New(0);
    if (distinct == NULL || counts == NULL) {
        goto done;
    }
    for (i = 0; i <= n; i++) {
        PyObject *t = i < n ? PyList_GET_ITEM(sorted, i) : NULL;
        if (t != NULL && prev != NULL) {
            int eq = PyUnicode_Compare(t, prev) == 0;
            if (eq) {
                run++;
                continue;
            }
        }
        if (prev != NULL) {
            PyObject *c = PyLong_FromSsize_t(run);
            if (c == NULL || PyList_Append(distinct, prev) < 0 || PyList_Append(counts, c) < 0) {
                Py_XDECREF(c);
                goto done;
            }
            Py_DECREF(c);
        }
        prev = t;
        run = 1;
    }
    res = PyTuple_Pack(2, distinct, counts);
done:
    Py_DECREF(sorted);
    Py_XDECREF(distinct);
    Py_XDECREF(counts);
    return res;
}

/* A distinct token of a text: its lower-cased characters in a scratch buffer. */
typedef struct {
    Py_ssize_t off, len, count;
    uint32_t hash;
} TokenRun;

typedef struct {
    uint64_t prefix; /* the stem's first 8 bytes, big-endian, zero-padded: orders most pairs */
    PyObject *stem;  /* a new reference */
    Py_ssize_t count;
} StemCount;

/* Code point order of two ASCII str (their byte order). */
int
ascii_str_cmp(PyObject *a, PyObject *b)
{
    Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
    int c = memcmp(PyUnicode_1BYTE_DATA(a), PyUnicode_1BYTE_DATA(b), (size_t)(la < lb ? la : lb));
    return c != 0 ? c : (la > lb) - (la < lb);
}

/* Stems hold no U+0000, so zero padding sorts a proper prefix first, as code point order does. */
static uint64_t
ascii_prefix(PyObject *t)
{
    const Py_UCS1 *p = PyUnicode_1BYTE_DATA(t);
    Py_ssize_t len = PyUnicode_GET_LENGTH(t), i;
    uint64_t k = 0;
    for (i = 0; i < 8; i++) {
        k = (k << 8) | (i < len ? p[i] : 0);
    }
    return k;
}

static int
stem_count_cmp(const void *a, const void *b)
{
    const StemCount *x = (const StemCount *)a, *y = (const StemCount *)b;
    if (x->prefix != y->prefix) {
        return x->prefix < y->prefix ? -1 : 1;
    }
    return ascii_str_cmp(x->stem, y->stem);
}

/* Sort by stem: insertion sort for the usual few dozen terms, qsort beyond. */
static void
sort_stem_counts(StemCount *sc, Py_ssize_t n)
{
    Py_ssize_t i, j;
    if (n > 48) {
        qsort(sc, (size_t)n, sizeof(StemCount), stem_count_cmp);
        return;
    }
    for (i = 1; i < n; i++) {
        StemCount x = sc[i];
        for (j = i; j > 0 && stem_count_cmp(&sc[j - 1], &x) > 0; j--) {
            sc[j] = sc[j - 1];
        }
        sc[j] = x;
    }
}

/* Whether t is an exact str of 1..max ASCII characters without U+0000 (a term a key can hold). */
int
is_ascii_term(PyObject *t, Py_ssize_t max)
{
    Py_ssize_t len;
    if (!PyUnicode_CheckExact(t) || !PyUnicode_IS_ASCII(t)) {
        return 0;
    }
    len = PyUnicode_GET_LENGTH(t);
    return len >= 1 && len <= max && memchr(PyUnicode_1BYTE_DATA(t), 0, (size_t)len) == NULL;
}

/* A token -> stem table beside the stem cache dict: what ``ascii_term_counts`` found in the
 * dict, keyed by the token's bytes, so a token seen before costs no str object and no dict
 * lookup.  A stem is a function of its token, so an entry never goes stale (whatever the dict
 * drops); the table is emptied when half full.  It holds only str: no reference cycles. */

typedef struct {
    PyObject *token; /* an exact ASCII str (a strong reference); NULL: the slot is empty */
    PyObject *stem;  /* a strong reference */
    uint32_t hash;   /* FNV-1a of the token */
} StemSlot;

typedef struct {
    PyObject_HEAD
    StemSlot *slots;
    Py_ssize_t mask; /* slots - 1 */
    Py_ssize_t used;
} StemTableObject;

static PyTypeObject StemTable_Type;

static uint32_t
fnv1a(const char *p, Py_ssize_t n)
{
    uint32_t h = 2166136261u;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    }
    return h;
}

static void
stem_table_clear(StemTableObject *t)
{
    Py_ssize_t i;
    for (i = 0; i <= t->mask; i++) {
        PyObject *token = t->slots[i].token, *stem = t->slots[i].stem;
        t->slots[i].token = NULL;
        t->slots[i].stem = NULL;
        Py_XDECREF(token);
        Py_XDECREF(stem);
    }
    t->used = 0;
}

/* The stem of the token p[0..n) (hash h), borrowed, or NULL when the table lacks it. */
static PyObject *
stem_table_get(const StemTableObject *t, uint32_t h, const char *p, Py_ssize_t n)
{
    Py_ssize_t slot;
    for (slot = (Py_ssize_t)h & t->mask;; slot = (slot + 1) & t->mask) {
        const StemSlot *e = &t->slots[slot];
        if (e->token == NULL) {
            return NULL;
        }
        if (e->hash == h && PyUnicode_GET_LENGTH(e->token) == n &&
            memcmp(PyUnicode_1BYTE_DATA(e->token), p, (size_t)n) == 0) {
            return e->stem;
        }
    }
}

/* Remember token (an exact ASCII str, hash h) -> stem. */
static void
stem_table_put(StemTableObject *t, uint32_t h, PyObject *token, PyObject *stem)
{
    Py_ssize_t slot, n = PyUnicode_GET_LENGTH(token);
    if (t->used >= (t->mask + 1) / 2) {
        stem_table_clear(t);
    }
    for (slot = (Py_ssize_t)h & t->mask; t->slots[slot].token != NULL;
         slot = (slot + 1) & t->mask) {
        const StemSlot *e = &t->slots[slot];
        if (e->hash == h && PyUnicode_GET_LENGTH(e->token) == n &&
            memcmp(PyUnicode_1BYTE_DATA(e->token), PyUnicode_1BYTE_DATA(token), (size_t)n) == 0) {
            return; /* already there */
        }
    }
    Py_INCREF(token);
    Py_INCREF(stem);
    t->slots[slot].token = token;
    t->slots[slot].stem = stem;
    t->slots[slot].hash = h;
    t->used++;
}

static PyObject *
StemTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"slots", NULL};
    Py_ssize_t slots = 1 << 16;
    StemTableObject *self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:StemTable", kwlist, &slots)) {
        return NULL;
    }
    if (slots < 2 || slots > (1 << 24) || (slots & (slots - 1)) != 0) {
        PyErr_SetString(PyExc_ValueError, "StemTable: slots must be a power of two, 2..2**24");
        return NULL;
    }
    self = (StemTableObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->slots = PyMem_Calloc((size_t)slots, sizeof(StemSlot));
    if (self->slots == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->mask = slots - 1;
    self->used = 0;
    return (PyObject *)self;
}

static void
StemTable_dealloc(StemTableObject *self)
{
    if (self->slots != NULL) {
        stem_table_clear(self);
        PyMem_Free(self->slots);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
StemTable_len(StemTableObject *self)
{
    return self->used;
}

static PyObject *
StemTable_clear_method(StemTableObject *self, PyObject *unused)
{
    (void)unused;
    stem_table_clear(self);
    Py_RETURN_NONE;
}

static PyMethodDef StemTable_methods[] = {
    {"clear", (PyCFunction)StemTable_clear_method, METH_NOARGS, "Forget every entry."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods StemTable_as_sequence = {
    .sq_length = (lenfunc)StemTable_len,
};

static PyTypeObject StemTable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cortex._speedups.StemTable",
    .tp_basicsize = sizeof(StemTableObject),
    .tp_dealloc = (destructor)StemTable_dealloc,
    .tp_as_sequence = &StemTable_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StemTable(slots=65536): the token -> stem table of ascii_term_counts.",
    .tp_methods = StemTable_methods,
    .tp_new = StemTable_new,
};

PyDoc_STRVAR(ascii_term_counts_doc,
             "ascii_term_counts(text, stems, table, /)\n--\n\n"
             "``count_terms(terms(text))`` for ASCII text whose every token is a key of "
             "``stems`` (cortex.index.text's token -> stem cache; ``table``, a StemTable used with "
             "no other dict, remembers what was found there): the distinct stems in code point "
             "order and their counts, ``(distinct, counts)``; None when text is not ASCII, a "
             "token is not in the cache or a stem is not a non-empty ASCII str without U+0000.");

/* ascii_term_counts of the ASCII characters s[0..n) (n <= 2**40). */
static PyObject *
term_counts(const Py_UCS1 *s, Py_ssize_t n, PyObject *stems, StemTableObject *table)
{
    PyObject *distinct = NULL, *counts = NULL, *res = NULL;
    Py_ssize_t maxtok, cap = 16, nd = 0, held = 0, used = 0, pos = 0, len, i, m;
    TokenRun *runs;
    StemCount *sc;
    Py_ssize_t *index;
    char *chars;
    void *block;
    maxtok = n / 2 + 1; /* tokens are separated by at least one character */
    if (n > 4096) {     /* a long text: room for the tokens it has, not for the most it could */
        char buf[MAX_TOKEN_CHARS];
        maxtok = 1;
        while (next_ascii_token(s, n, &pos, buf) > 0) {
            maxtok++;
        }
        pos = 0;
    }
    while (cap < 2 * maxtok) {
        cap <<= 1;
    }
    /* runs, stem counts and the open-addressed index of runs (at most half full), then the
     * tokens' characters: a distinct token's come from its own part of the text, so n bytes */
    block = PyMem_Malloc((size_t)maxtok * (sizeof(TokenRun) + sizeof(StemCount)) +
                         (size_t)cap * sizeof(Py_ssize_t) + (size_t)n + 1);
    if (block == NULL) {
        return PyErr_NoMemory();
    }
    runs = (TokenRun *)block;
    sc = (StemCount *)(runs + maxtok);
    index = (Py_ssize_t *)(sc + maxtok);
    chars = (char *)(index + cap);
    memset(index, 0xff, (size_t)cap * sizeof(Py_ssize_t)); /* -1: empty */
    while ((len = next_ascii_token(s, n, &pos, chars + used)) > 0) {
        const char *t = chars + used;
        uint32_t h = fnv1a(t, len);
        Py_ssize_t slot;
        for (slot = (Py_ssize_t)(h & (uint32_t)(cap - 1));; slot = (slot + 1) & (cap - 1)) {
            Py_ssize_t k = index[slot];
            if (k < 0) {
                index[slot] = nd;
                runs[nd].off = used;
                runs[nd].len = len;
                runs[nd].count = 1;
                runs[nd].hash = h;
                nd++;
                used += len;
                break;
            }
            if (runs[k].hash == h && runs[k].len == len) {
                const char *u = chars + runs[k].off;
                for (i = 0; i < len && u[i] == t[i]; i++) {
                }
                if (i == len) {
                    runs[k].count++;
                    break;
                }
            }
        }
    }
    for (i = 0; i < nd; i++) {
        const char *t = chars + runs[i].off;
        PyObject *tok, *stem = stem_table_get(table, runs[i].hash, t, runs[i].len);
        if (stem != NULL) {
            Py_INCREF(stem);
        }
        else {
            tok = PyUnicode_New(runs[i].len, 127);
            if (tok == NULL) {
                goto done;
            }
            memcpy(PyUnicode_1BYTE_DATA(tok), t, (size_t)runs[i].len);
            stem = PyDict_GetItemWithError(stems, tok); /* borrowed */
            Py_XINCREF(stem);
            if (stem == NULL) {
                Py_ssize_t d;
                if (PyErr_Occurred()) {
                    Py_DECREF(tok);
                    goto done;
                }
                for (d = 0; d < runs[i].len && t[d] >= '0' && t[d] <= '9'; d++) {
                }
                if (d < runs[i].len) {
                    Py_DECREF(tok);
                    goto none; /* not stemmed yet: the Python path stems it into the cache */
                }
                /* digits only: Snowball English leaves them as they are (text.py _stem_words
                 * gives the same), so a number never stemmed before needs no Python pass */
                sc[held].prefix = ascii_prefix(tok);
                sc[held].stem = tok; /* the reference taken by PyUnicode_New */
                sc[held].count = runs[i].count;
                held++;
                continue;
            }
            if (!is_ascii_term(stem, PY_SSIZE_T_MAX)) {
                Py_DECREF(tok);
                Py_DECREF(stem);
                goto none;
            }
            stem_table_put(table, runs[i].hash, tok, stem);
            Py_DECREF(tok);
        }
        sc[held].prefix = ascii_prefix(stem);
        sc[held].stem = stem;
        sc[held].count = runs[i].count;
        held++;
    }
    sort_stem_counts(sc, held);
    /* tokens with the same stem ("run", "running") count as one term */
    for (i = 0, m = 0; i < held; i++) {
        if (m > 0 && stem_count_cmp(&sc[m - 1], &sc[i]) == 0) {
            sc[m - 1].count += sc[i].count;
            Py_DECREF(sc[i].stem);
        }
        else {
            sc[m++] = sc[i];
        }
    }
    held = m;
    distinct = PyList_New(m);
    counts = PyList_New(m);
    if (distinct == NULL || counts == NULL) {
        goto done;
    }
    for (i = 0; i < m; i++) {
        PyObject *c = PyLong_FromSsize_t(sc[i].count);
        if (c == NULL) {
            goto done;
        }
        PyList_SET_ITEM(counts, i, c);
    }
    for (i = 0; i < m; i++) {
        PyList_SET_ITEM(distinct, i, sc[i].stem); /* the list takes the reference */
    }
    held = 0;
    res = PyTuple_Pack(2, distinct, counts);
    goto done;
none:
    res = Py_None;
    Py_INCREF(res);
done:
    for (i = 0; i < held; i++) {
        Py_DECREF(sc[i].stem);
    }
    PyMem_Free(block);
    Py_XDECREF(distinct);
    Py_XDECREF(counts);
    return res;
}

static PyObject *
sp_ascii_term_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *text;
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "ascii_term_counts(text, stems, table) takes three arguments");
        return NULL;
    }
    text = args[0];
    if (!PyUnicode_CheckExact(text) || !PyDict_CheckExact(args[1]) ||
        !PyObject_TypeCheck(args[2], &StemTable_Type)) {
        PyErr_SetString(PyExc_TypeError, "ascii_term_counts(str, dict, StemTable)");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text) || PyUnicode_GET_LENGTH(text) > ((Py_ssize_t)1 << 40)) {
        Py_RETURN_NONE;
    }
    return term_counts(PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text), args[1],
                       (StemTableObject *)args[2]);
}

/* A growing byte buffer of ASCII text (full_term_counts). */
typedef struct {
    Py_UCS1 *p;
    Py_ssize_t len, cap;
    Py_UCS1 small[512];
} TextBuf;

/* Append n characters at p: 1, or 0 when the text would pass 2**39 characters; -1 out of
 * memory. */
static int
text_put(TextBuf *b, const Py_UCS1 *p, Py_ssize_t n)
{
    if (n > ((Py_ssize_t)1 << 39) || b->len > ((Py_ssize_t)1 << 39)) {
        return 0;
    }
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap;
        Py_UCS1 *q;
        while (cap < b->len + n) {
            cap *= 2;
        }
        q = PyMem_Malloc((size_t)cap);
        if (q == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(q, b->p, (size_t)b->len);
        if (b->p != b->small) {
            PyMem_Free(b->p);
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, (size_t)n);
    b->len += n;
    return 1;
}

/* Append the str s if it is ASCII: 1; 0 when it is not (or too long); -1 out of memory. */
static int
text_add(TextBuf *b, PyObject *s)
{
    if (!PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s)) {
        return 0;
    }
    return text_put(b, PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s));
}

PyDoc_STRVAR(full_term_counts_doc,
             "full_term_counts(head, short, prefixes, values, labels, stems, table, /)\n--\n\n"
             "``ascii_term_counts(render_full(data))`` without the full form's string: "
             "``head`` is the ``\"TypeName: \"`` of ``data``'s type, ``short`` its filled short "
             "template, ``prefixes`` the fields' line prefixes ``\"name: \"`` and ``values`` "
             "their values (cortex.model.forms.FULL_SPECS); ``labels`` maps each enum class to "
             "{member: label}.  None, for the Python path, when any text is not ASCII or a "
             "value is not one of: None, False, True, str, int, float, an empty tuple or dict, "
             "an enum member of ``labels``.");

static PyObject *
sp_full_term_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *prefixes, *values, *labels, *res = NULL;
    TextBuf b;
    Py_ssize_t i, n;
    int rc;
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "full_term_counts takes seven arguments");
        return NULL;
    }
    prefixes = args[2];
    values = args[3];
    labels = args[4];
    if (!PyTuple_CheckExact(prefixes) || !PyTuple_CheckExact(values) ||
        !PyDict_CheckExact(labels) || !PyDict_CheckExact(args[5]) ||
        !PyObject_TypeCheck(args[6], &StemTable_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "full_term_counts(str, str, tuple, tuple, dict, dict, StemTable)");
        return NULL;
    }
    n = PyTuple_GET_SIZE(prefixes);
    if (PyTuple_GET_SIZE(values) != n) {
        Py_RETURN_NONE;
    }
    b.p = b.small;
    b.len = 0;
    b.cap = (Py_ssize_t)sizeof(b.small);
    /* "TypeName: " short, then "\n" prefix value for each value that is set (render_full) */
    rc = text_add(&b, args[0]);
    if (rc > 0) {
        rc = text_add(&b, args[1]);
    }
    for (i = 0; i < n && rc > 0; i++) {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, i), *v = PyTuple_GET_ITEM(values, i);
        PyObject *text = NULL, *by_member;
        if (v == Py_None || v == Py_False) {
            continue;
        }
        if ((PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) == 0) ||
            (PyDict_CheckExact(v) && PyDict_GET_SIZE(v) == 0)) {
            continue;
        }
        if (prefix == Py_None) { /* the duration line: the Python path */
            rc = 0;
            break;
        }
        if (PyUnicode_CheckExact(v)) {
            text = v;
            Py_INCREF(text);
        }
        else if (v == Py_True) {
            text = PyUnicode_FromString("true");
        }
        else if (PyFloat_CheckExact(v)) {
            text = PyObject_Repr(v);
        }
        else if (PyLong_CheckExact(v)) {
            text = PyObject_Str(v);
        }
        else if (PyLong_Check(v) &&
                 (by_member = PyDict_GetItemWithError(labels, (PyObject *)Py_TYPE(v))) != NULL) {
            if (!PyDict_CheckExact(by_member)) {
                rc = 0;
                break;
            }
            text = PyDict_GetItemWithError(by_member, v); /* borrowed */
            if (text == NULL) {
                rc = PyErr_Occurred() ? -1 : 0;
                break;
            }
            Py_INCREF(text);
        }
        else {
            rc = PyErr_Occurred() ? -1 : 0;
            break;
        }
        if (text == NULL) {
            rc = -1;
            break;
        }
        rc = text_put(&b, (const Py_UCS1 *)"\n", 1);
        if (rc > 0) {
            rc = text_add(&b, prefix);
        }
        if (rc > 0) {
            rc = text_add(&b, text);
        }
        Py_DECREF(text);
    }
    if (rc > 0) {
        res = term_counts(b.p, b.len, args[5], (StemTableObject *)args[6]);
    }
    else if (rc == 0) {
        res = Py_None;
        Py_INCREF(res);
    }
    if (b.p != b.small) {
        PyMem_Free(b.p);
    }
    return res;
}

PyDoc_STRVAR(utf8_len_doc,
             "utf8_len(text, /)\n--\n\n"
             "``len(text.encode('utf-8'))`` without encoding (cortex.model.forms.count_tokens), "
             "or -1 where the encoding fails (a lone surrogate).");

/* ``len(text.encode('utf-8'))`` of a str, or -1 where the encoding fails (a lone surrogate) */
Py_ssize_t
cx_utf8_len(PyObject *text)
{
    Py_ssize_t i, n, extra = 0;
    int kind;
    const void *data;
    n = PyUnicode_GET_LENGTH(text);
    kind = PyUnicode_KIND(text);
    data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *u = data;
        for (i = 0; i < n; i++) {
            extra += u[i] >> 7;
        }
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *u = data;
        unsigned sur = 0;
        /* blocks of 64 with 16-bit counts (a loop the compiler vectorises), then the rest */
        for (i = 0; i + 64 <= n; i += 64) {
            uint16_t e = 0, s2 = 0;
            int j;
            for (j = 0; j < 64; j++) {
                Py_UCS2 c = u[i + j];
                e += (uint16_t)((c >= 0x80) + (c >= 0x800));
                s2 |= (uint16_t)((c & 0xF800) == 0xD800);
            }
            extra += e;
            sur |= s2;
        }
        for (; i < n; i++) {
            Py_UCS2 c = u[i];
            extra += (c >= 0x80) + (c >= 0x800);
            sur |= (c & 0xF800) == 0xD800;
        }
        if (sur) {
            return -1;
        }
    }
    else {
        const Py_UCS4 *u = data;
        for (i = 0; i < n; i++) {
            Py_UCS4 c = u[i];
            if ((c & 0xFFFFF800u) == 0xD800) {
                return -1;
            }
            extra += (c >= 0x80) + (c >= 0x800) + (c >= 0x10000);
        }
    }
    return n + extra;
}

static PyObject *
sp_utf8_len(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "utf8_len: text must be str");
        return NULL;
    }
    return PyLong_FromSsize_t(cx_utf8_len(text));
}

static PyMethodDef tokenize_methods[] = {
    {"utf8_len", (PyCFunction)sp_utf8_len, METH_O, utf8_len_doc},
    {"ascii_tokens", (PyCFunction)sp_ascii_tokens, METH_O, ascii_tokens_doc},
    {"count_terms", (PyCFunction)sp_count_terms, METH_O, count_terms_doc},
    {"ascii_term_counts", (PyCFunction)(void (*)(void))sp_ascii_term_counts, METH_FASTCALL,
     ascii_term_counts_doc},
    {"full_term_counts", (PyCFunction)(void (*)(void))sp_full_term_counts, METH_FASTCALL,
     full_term_counts_doc},
    {NULL, NULL, 0, NULL},
};

int
cx_tokenize_init(PyObject *m)
{
    if (PyType_Ready(&StemTable_Type) < 0) {
        return -1;
    }
    Py_INCREF(&StemTable_Type);
    if (PyModule_AddObject(m, "StemTable", (PyObject *)&StemTable_Type) < 0) {
        Py_DECREF(&StemTable_Type);
        return -1;
    }
    return PyModule_AddFunctions(m, tokenize_methods);
}
