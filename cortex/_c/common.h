/*
 * The shared header of cortex._speedups, the optional C accelerator of cortex.  The module is
 * one extension built from the files of this directory, one concern each:
 *
 *   module.c       the module: PyInit__speedups runs each part's init
 *   plan.c         record plans (the Plan type) and the value rules both codecs apply
 *   cbor_decode.c  the strict one-pass decoder of canonical CBOR records, and the read path
 *                  (a memory's sealed head and version checked and built, its data decoded)
 *   cbor_encode.c  the encoder of records: a struct by its plan, a new memory's head and
 *                  version, a list of short ASCII texts
 *   medium_ref.c   the data text a version's medium form refers to (format 18)
 *   tokenize.c     ASCII tokens, term counts, the stem table, the full form's term counts
 *   staging.c      a transaction's pending lexical documents and postings
 *   postings.c     runs of postings and posting blocks (join, merge, cut, append)
 *   bm25.c         a text query's BM25 top-k over its terms' posting lists
 *   cursor.c       driving an LMDB cursor: posting blocks and document frequencies of a flush
 *   write.c        the write path's records: index keys, journal entries, stage_new
 *   kv.c           CRC-32 sealing (cortex.storage.kv.seal / unseal) and the stable sort of puts
 *   mapread.c      a read snapshot's gets and cursors on the data file's map, holding the lock
 *
 * The Python code keeps every definition (cortex/model/codec.py, text.py, lexical.py, postings.py,
 * keys.py, kv.py, store.py): each function here returns exactly what its Python definition
 * returns, or None (or Reject) where it does not apply, and the tests compare the two.
 *
 * Names shared between files are declared here; they have hidden visibility, so the module's
 * only exported symbol stays PyInit__speedups.  Everything else is static to its file.
 */

#ifndef CORTEX_SPEEDUPS_COMMON_H
#define CORTEX_SPEEDUPS_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if FLT_RADIX != 2 || FLT_MANT_DIG != 24 || DBL_MANT_DIG != 53
#error "cortex._speedups needs IEEE 754 binary32 float and binary64 double"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CX_HIDDEN __attribute__((visibility("hidden")))
#else
#define CX_HIDDEN
#endif

/* -- the parts: each adds its functions and types to the module ---------------------------- */

CX_HIDDEN int cx_plan_init(PyObject *m);
CX_HIDDEN int cx_decode_init(PyObject *m);
CX_HIDDEN int cx_encode_init(PyObject *m);
CX_HIDDEN int cx_tokenize_init(PyObject *m);
CX_HIDDEN int cx_staging_init(PyObject *m);
CX_HIDDEN int cx_postings_init(PyObject *m);
CX_HIDDEN int cx_bm25_init(PyObject *m);
CX_HIDDEN Py_ssize_t cx_block_encode(const unsigned char *r, Py_ssize_t n, Py_ssize_t block_max,
                                     unsigned char *out);
CX_HIDDEN Py_ssize_t cx_block_decode(uint64_t first, const unsigned char *p, Py_ssize_t n,
                                     Py_ssize_t block_max, unsigned char *out);
CX_HIDDEN Py_ssize_t cx_block_scan(uint64_t first, const unsigned char *p, Py_ssize_t n,
                                   Py_ssize_t block_max, uint32_t *last);
CX_HIDDEN Py_ssize_t cx_block_extend(const unsigned char *r, Py_ssize_t n, uint32_t last,
                                     unsigned char *out);
CX_HIDDEN int cx_cursor_init(PyObject *m);
/* ``newest_ids(cursor, prefix, after, limit, head)`` (cursor.c) for read_newest */
CX_HIDDEN PyObject *cx_newest_ids(PyObject *const *args, Py_ssize_t nargs);
/* ``utf8_len`` of a str (tokenize.c): its UTF-8 length, or -1 (a lone surrogate) */
CX_HIDDEN Py_ssize_t cx_utf8_len(PyObject *text);
CX_HIDDEN int cx_write_init(PyObject *m);
CX_HIDDEN int cx_kv_init(PyObject *m);
CX_HIDDEN int cx_mapread_init(PyObject *m);

/* -- record plans (plan.c): how a record struct is decoded and encoded ---------------------- */

#define MAX_DEPTH 32
#define MAX_FIELDS 64

enum {
    K_TEXT = 1,
    K_BYTES,
    K_INT,
    K_UNIT,
    K_BOOL,
    K_TIME,
    K_ENUM,
    K_ID,
    K_LIST,
    K_PAIR,
    K_MAP,
    K_RECORD,
};

enum { CHECK_NONE = 0, CHECK_URI = 1, CHECK_DECIMAL = 2 };

typedef struct Spec {
    int kind;
    Py_ssize_t max_bytes; /* text: UTF-8 bytes; bytes: length */
    int check;            /* text: CHECK_* */
    PyObject *names;      /* text with CHECK_URI: tuple of bytes, the type names */
    Py_ssize_t exact;     /* bytes: exact length, or -1 */
    long long lo, hi;     /* int, time, pair: inclusive range */
    PyObject **members;   /* enum: members by code (NULL where no member) */
    Py_ssize_t n_members;
    PyObject *labels;     /* enum: {label: code} (the encoder takes labels), or NULL */
    PyObject *factory;    /* id: raw 16 bytes -> MemoryId */
    PyObject *idcls;      /* id: the MemoryId class (the encoder takes exactly its instances) */
    PyObject *idslot;     /* id: the class's slot of the raw bytes (a member descriptor), or NULL:
                           * the decoder then fills a new instance's slot without the factory */
    struct Spec *item;    /* list: item; map: key */
    struct Spec *value;   /* map: value */
    Py_ssize_t max_items; /* list, map */
    int unique;           /* list */
    PyObject *plan;       /* record: a Plan */
} Spec;

typedef struct {
    unsigned long long key;
    Py_ssize_t slot;    /* index into kwnames */
    int absent_ok;      /* the encoder omits the default value */
    PyObject *dflt;     /* the default (when absent_ok and no factory) */
    PyObject *factory;  /* called for the default, or NULL */
    Spec spec;
} Field;

typedef struct {
    PyObject_HEAD
    PyObject *cls;
    PyObject *kwnames; /* tuple of attribute names, the order values are passed in */
    int has_sv;
    unsigned long long sv;
    Py_ssize_t nfields;
    Field *fields; /* in key order */
    int forms;     /* the Forms record, in its compact encoding (format 15; codec.FormsCodec):
                    * fields short (key 1) and medium (key 2); keys 3 and 4 are the short
                    * form as a length of the medium's UTF-8 (with and without "…").  2: a
                    * version's (format 18; codec.VersionFormsCodec): the medium form may be
                    * key 5, a reference into the enclosing record's key 4 (its data) */
} PlanObject;

/* The fewest bytes of a data text a medium form refers to (codec.MEDIUM_REF_MIN). */
#define MEDIUM_REF_MIN 12

/* codec.medium_ref: 1 with the head offset ``at`` of the data text a version's medium form
 * ``m`` refers to, where it first occurs in ``m`` (``i``) and its ``len``; 0 when none (or
 * ``d`` is not one well-formed CBOR item). */
CX_HIDDEN int medium_ref(const uint8_t *d, Py_ssize_t dn, const uint8_t *m, Py_ssize_t mn,
                         Py_ssize_t *at, Py_ssize_t *i, Py_ssize_t *len);

CX_HIDDEN extern PyTypeObject Plan_Type;
CX_HIDDEN extern PyObject *is_normalized; /* unicodedata.is_normalized */
CX_HIDDEN extern PyObject *str_NFC;       /* "NFC" */

/* the value rules of the codecs (codec.py's checks) */
CX_HIDDEN int fits_half(double x);
CX_HIDDEN int uri_ok(const uint8_t *s, Py_ssize_t n, PyObject *names);
CX_HIDDEN int decimal_ok(const uint8_t *s, Py_ssize_t n);
CX_HIDDEN int plainly_nfc(PyObject *str);

/* -- the encoder's output buffer (cbor_encode.c, write.c) ----------------------------------- */

/* An output buffer: on the stack, moved to the heap when a record outgrows it. */
#define OUT_STACK 2048

typedef struct {
    char *p;
    Py_ssize_t len, cap;
    char stack[OUT_STACK];
} Out;

static inline void
out_init(Out *o)
{
    o->p = o->stack;
    o->len = 0;
    o->cap = OUT_STACK;
}

static inline void
out_free(Out *o)
{
    if (o->p != o->stack) {
        PyMem_Free(o->p);
    }
}

static inline int
out_reserve(Out *o, Py_ssize_t n)
{
    Py_ssize_t cap = o->cap;
    char *p;
    if (n <= cap - o->len) {
        return 0;
    }
    if (n > PY_SSIZE_T_MAX / 2 - o->len) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap - o->len < n) {
        cap *= 2;
    }
    if (o->p == o->stack) {
        p = PyMem_Malloc((size_t)cap);
        if (p != NULL) {
            memcpy(p, o->stack, (size_t)o->len);
        }
    }
    else {
        p = PyMem_Realloc(o->p, (size_t)cap);
    }
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static inline int
out_put(Out *o, const void *b, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0) {
        return -1;
    }
    memcpy(o->p + o->len, b, (size_t)n);
    o->len += n;
    return 0;
}

static inline int
out_byte(Out *o, uint8_t b)
{
    if (o->len < o->cap) {
        o->p[o->len++] = (char)b;
        return 0;
    }
    return out_put(o, &b, 1);
}

/* A CBOR head in its shortest form (codec._head). */
static inline int
out_head(Out *o, int major, uint64_t n)
{
    uint8_t b[9];
    int w, k;
    if (n < 24) {
        b[0] = (uint8_t)((major << 5) | (int)n);
        return out_put(o, b, 1);
    }
    w = n < 0x100 ? 1 : n < 0x10000 ? 2 : n < 0x100000000ULL ? 4 : 8;
    b[0] = (uint8_t)((major << 5) | (w == 1 ? 24 : w == 2 ? 25 : w == 4 ? 26 : 27));
    for (k = 0; k < w; k++) {
        b[1 + k] = (uint8_t)(n >> (8 * (w - 1 - k)));
    }
    return out_put(o, b, 1 + w);
}

/* Attribute names, interned once at import (never changed after; cbor_encode.c). */
enum {
    A_ID,
    A_TYPE,
    A_CURRENT_VERSION,
    A_ACTOR_SCOPE,
    A_VISIBILITY,
    A_IMPORTANCE,
    A_TAGS,
    A_FRAMES,
    A_TOMBSTONE,
    A_CREATED_AT,
    A_LAST_UPDATED_AT,
    A_EMBEDDING_REF,
    A_FORMS,
    A_VERSION,
    A_DATA,
    A_HASH,
    A_CREATED_BY,
    A_EXPIRES_AT,
    A_CONFIDENCE,
    A_PROVENANCE,
    A_FORMS_OVERRIDE,
    A_VALID_FROM,
    A_VALID_UNTIL,
    A_SHORT,
    A_MEDIUM,
    A_VERB,
    A_OBJ_KIND,
    A_OBJ_REF,
    A_BYTES,
    A_DIGEST,
    A_HEAD,
    A_PINNED,
    A_TERMS,
    A_VECTOR,
    A_VERSION_BYTES,
    A_SENSITIVITY,
    A_HAS_COUNTERS,
    A_ROW,
    N_ATTRS,
};

CX_HIDDEN extern PyObject *attr[N_ATTRS];

/* Where attribute ``attr[a]`` of a type's instances is kept: a slot (a member descriptor) at
 * ``offset``, while the type's version tag is ``tag`` (any change to the type, or a type of
 * another layout, takes the general lookup). A few types an attribute (a head's and a
 * version's ``type``, say). */
#define ATTR_WAYS 4
typedef struct {
    PyTypeObject *type;
    unsigned int tag;
    Py_ssize_t offset;
} AttrSlot;
CX_HIDDEN extern AttrSlot attr_slot[N_ATTRS][ATTR_WAYS];
CX_HIDDEN PyObject *attr_get_slow(PyObject *obj, int a);

/* ``getattr(obj, attr[a])``: a new reference, or NULL with an error; the slot read directly
 * when the type's is known (the value a member descriptor's get returns), else
 * PyObject_GetAttr (which learns the slot for next time). */
static inline PyObject *
attr_get(PyObject *obj, int a)
{
    PyTypeObject *t = Py_TYPE(obj);
    int i;
    for (i = 0; i < ATTR_WAYS; i++) {
        const AttrSlot *s = &attr_slot[a][i];
        if (s->type == t) {
            if (t->tp_version_tag == s->tag && PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG)) {
                PyObject *v = *(PyObject **)((char *)obj + s->offset);
                if (v != NULL) {
                    Py_INCREF(v);
                    return v;
                }
            }
            break;
        }
    }
    return attr_get_slow(obj, a);
}

CX_HIDDEN int time_micros(PyObject *v, long long *us);
CX_HIDDEN int exact_int(PyObject *v, long long lo, long long hi, long long *out);

/* -- sealing (kv.c): payload || crc32(payload), 4 bytes big-endian -------------------------- */

/* CRC-32 (ISO-HDLC, the one of zlib.crc32: reflected polynomial 0xEDB88320), eight bytes a step
 * through eight tables.  The tables are filled once at import and only read after. */
CX_HIDDEN extern uint32_t crc_table[8][256];

/* The CRC of at least 64 bytes by carry-less multiplication (kv.c), where the CPU has it
 * (crc_clmul: set once at import); the tables' result for every input. */
CX_HIDDEN extern int crc_clmul;
CX_HIDDEN uint32_t crc32_clmul(const uint8_t *p, Py_ssize_t n);

static inline uint32_t
crc32_tables(uint32_t c, const uint8_t *p, Py_ssize_t n)
{
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^
            crc_table[2][(hi >> 8) & 0xFF] ^ crc_table[1][(hi >> 16) & 0xFF] ^
            crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    }
    return c;
}

static inline uint32_t
crc32_of(const uint8_t *p, Py_ssize_t n)
{
    if (n >= 64 && crc_clmul) {
        return crc32_clmul(p, n);
    }
    return crc32_tables(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

CX_HIDDEN PyObject *sealed(const char *payload, Py_ssize_t n);
CX_HIDDEN int seal_in_place(PyObject *b);

/* -- the lexical index (tokenize.c, staging.c, postings.c) ---------------------------------- */

CX_HIDDEN int ascii_str_cmp(PyObject *a, PyObject *b);
CX_HIDDEN int is_ascii_term(PyObject *t, Py_ssize_t max);
CX_HIDDEN Py_ssize_t put_head(char *p, int major, uint64_t v);
CX_HIDDEN PyObject *sp_cut_blocks(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
CX_HIDDEN PyObject *sp_block_append(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
CX_HIDDEN PyObject *sp_index_new(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif /* CORTEX_SPEEDUPS_COMMON_H */
