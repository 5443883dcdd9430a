/*
 * The reads of a read snapshot (gets and cursors) straight from the LMDB data file's pages,
 * holding the interpreter lock (``MapFile``, ``MapTxn``, ``MapCursor``; cortex.storage.kv
 * ``_Shared.mapped``; specs/storage.md "Reads from the map").
 *
 * py-lmdb releases the interpreter lock around every LMDB call, so a thread reading while
 * another runs Python gives the lock away at each get and waits for it back (up to the
 * interpreter's switch interval, 5 ms): a get of 5 us took 0.5 ms beside one busy thread, and
 * four threads reading together read a third as much as one. A read snapshot's pages are
 * immutable while its transaction lives (LMDB frees no page a live reader may reach), so these
 * reads walk the B-tree in a read-only mapping of the data file of their own, without a call
 * into LMDB and without giving the lock away.
 *
 * The snapshot's roots come from its meta page (``txnid & 1``): its main tree's record, then
 * each named database's record in the main tree. A meta page is rewritten by the commit two
 * after it, so the record is taken only while the other meta page does not yet hold a newer
 * transaction (the commit that would rewrite ours comes after that one). Every page is checked
 * before it is followed (its number within the snapshot and the mapping, its header's number,
 * its kind, its bounds, each node's bounds, the depth); anything unexpected, a database of
 * integer or reversed keys or of duplicates other than fixed-size ones, declines: the caller
 * then asks LMDB, which does what it always did. Only LMDB's 0.9 data format (version 1) on a
 * little-endian 64-bit build is read (cortex.storage.pages reads the same format in Python).
 */

#include "common.h"

#include <structmember.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE_HEADER 16
#define NODE_HEADER 8
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_META 0x08
#define P_LEAF2 0x20
#define P_SUBP 0x40
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02
#define F_DUPDATA 0x04
#define DB_REVERSEKEY 0x02
#define DB_DUPSORT 0x04
#define DB_INTEGERKEY 0x08
#define DB_DUPFIXED 0x10
#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define P_INVALID UINT64_MAX
#define MAX_KEY 511
#define TREE_DEPTH 32
#define DB_RECORD 48
#define META_DBS 40   /* offset of mm_dbs[0] (the free pages' tree) in a meta page (its header first) */
#define META_LAST 136 /* mm_last_pg */
#define META_TXNID 144

static inline uint16_t
rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline uint32_t
rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t
rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t
rd64_acquire(const uint8_t *p)
{
    uint64_t v;
    __atomic_load((const uint64_t *)p, &v, __ATOMIC_ACQUIRE);
    return v;
}

/* -- MapFile: the data file mapped read-only ----------------------------------------------- */

typedef struct {
    PyObject_HEAD
    const uint8_t *base;
    size_t len;
    /* the roots of the last snapshot seen (every transaction of one txnid shares them) */
    uint64_t txnid;   /* 0: none */
    uint64_t last_pg; /* the snapshot's last page */
    uint64_t main_root;
    uint32_t psize;
    PyObject *roots; /* {database: root (int), or None when LMDB must read it} */
} MapFile;

static PyTypeObject MapFile_Type;

typedef struct {
    PyObject_HEAD
    PyObject *txn;   /* the LMDB transaction: its reader slot pins the snapshot's pages */
    MapFile *file;   /* kept alive while the transaction is */
    PyObject *names; /* {database: its name in the main tree} */
    PyObject *roots; /* the file's roots of this snapshot */
    uint64_t last_pg;
    uint64_t main_root;
    uint32_t psize;
    int live; /* 0 once ``abort`` ended the transaction: its pages may then be reused */
} MapTxn;

static PyTypeObject MapTxn_Type;

static PyObject *s_id = NULL, *s_get = NULL, *s_abort = NULL, *s_commit = NULL;

static PyObject *
mapfile_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *path;
    Py_ssize_t length;
    MapFile *self;
    struct stat st;
    void *p;
    int fd;
    static char *kwlist[] = {"path", "length", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&n", kwlist, PyUnicode_FSConverter, &path,
                                     &length)) {
        return NULL;
    }
    if (length <= 0) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_ValueError, "length must be positive");
        return NULL;
    }
    fd = open(PyBytes_AS_STRING(path), O_RDONLY | O_CLOEXEC);
    Py_DECREF(path);
    if (fd < 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        PyErr_SetString(PyExc_OSError, "not a regular file");
        return NULL;
    }
    p = mmap(NULL, (size_t)length, PROT_READ, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (p == MAP_FAILED) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self = (MapFile *)type->tp_alloc(type, 0);
    if (self == NULL) {
        munmap(p, (size_t)length);
        return NULL;
    }
    self->base = p;
    self->len = (size_t)length;
    return (PyObject *)self;
}

static void
mapfile_dealloc(MapFile *self)
{
    if (self->base != NULL) {
        munmap((void *)self->base, self->len);
    }
    Py_XDECREF(self->roots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* -- the B-tree walk ------------------------------------------------------------------------ */

enum { FOUND = 1, ABSENT = 0, DECLINE = -1 };

typedef struct {
    const uint8_t *base;
    size_t len;
    uint64_t last_pg;
    uint32_t psize;
} View;

/* page ``pgno`` of the snapshot, checked to be a branch page, or a leaf page: plain (``fixed``
 * 0) or of ``fixed``-byte duplicates (P_LEAF2, a tree of a key's duplicates); its node count
 * in ``*n``; NULL when it is not one */
static const uint8_t *
stack_page(const View *v, uint64_t pgno, Py_ssize_t fixed, Py_ssize_t *n)
{
    const uint8_t *p;
    uint16_t flags, lower, upper;
    if (pgno < 2 || pgno > v->last_pg || pgno >= v->len / v->psize) {
        return NULL;
    }
    p = v->base + pgno * (uint64_t)v->psize;
    if (rd64(p) != pgno) {
        return NULL;
    }
    flags = rd16(p + 10) & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2 | P_SUBP);
    lower = rd16(p + 12);
    upper = rd16(p + 14);
    if (lower < PAGE_HEADER + 2 || lower > upper || upper > v->psize || (lower & 1) != 0) {
        return NULL;
    }
    *n = (lower - PAGE_HEADER) / 2;
    if (flags == P_BRANCH || (flags == P_LEAF && fixed == 0)) {
        return p;
    }
    if (flags == (P_LEAF | P_LEAF2) && fixed > 0 && rd16(p + 8) == fixed &&
        PAGE_HEADER + *n * fixed <= (Py_ssize_t)v->psize) {
        return p;
    }
    return NULL;
}

static inline const uint8_t *
tree_page(const View *v, uint64_t pgno, Py_ssize_t *n)
{
    return stack_page(v, pgno, 0, n);
}

/* node ``i`` of page ``p`` (``n`` nodes), its key checked to lie within the page: NULL if not */
static inline const uint8_t *
tree_node(const View *v, const uint8_t *p, Py_ssize_t i, const uint8_t **key, Py_ssize_t *klen)
{
    uint16_t off = rd16(p + PAGE_HEADER + 2 * i), ks;
    const uint8_t *node;
    if (off < rd16(p + 14) || (size_t)off + NODE_HEADER > v->psize) {
        return NULL;
    }
    node = p + off;
    ks = rd16(node + 6);
    if (ks > MAX_KEY || (size_t)off + NODE_HEADER + ks > v->psize) {
        return NULL;
    }
    *key = node + NODE_HEADER;
    *klen = ks;
    return node;
}

/* LMDB's default order of keys (mdb_cmp_memn): bytes, then length */
static inline int
key_cmp(const uint8_t *a, Py_ssize_t na, const uint8_t *b, Py_ssize_t nb)
{
    int c = memcmp(a, b, (size_t)(na < nb ? na : nb));
    if (c != 0) {
        return c;
    }
    return na < nb ? -1 : (na > nb ? 1 : 0);
}

/* a path from a root to a leaf: the keys' tree (fixed 0) or a key's tree of duplicates */
typedef struct {
    const uint8_t *pg[TREE_DEPTH];
    Py_ssize_t ki[TREE_DEPTH], nk[TREE_DEPTH];
    int top;
    uint64_t root;
    Py_ssize_t fixed; /* > 0: the duplicates' size, the leaves P_LEAF2 */
} Stack;

static inline uint64_t
branch_child(const uint8_t *node)
{
    return (uint64_t)rd16(node) | ((uint64_t)rd16(node + 2) << 16) |
           ((uint64_t)rd16(node + 4) << 32);
}

/* key ``i`` of a path's page: a node's key, or a P_LEAF2 entry; NULL when it fails a check */
static inline const uint8_t *
page_key(const View *v, const uint8_t *p, Py_ssize_t i, Py_ssize_t fixed, const uint8_t **k,
         Py_ssize_t *kn)
{
    if (fixed > 0 && (rd16(p + 10) & P_LEAF2)) {
        *k = p + PAGE_HEADER + i * fixed;
        *kn = fixed;
        return *k;
    }
    return tree_node(v, p, i, k, kn);
}

/* from the child of node ki[level] (or the root: level -1) down to a leaf, along the first or
 * last nodes: 1, or DECLINE */
static int
stack_descend(Stack *s, const View *v, int level, int last)
{
    uint64_t pgno;
    const uint8_t *k, *node;
    Py_ssize_t kn;
    if (level < 0) {
        pgno = s->root;
    }
    else {
        node = tree_node(v, s->pg[level], s->ki[level], &k, &kn);
        if (node == NULL) {
            return DECLINE;
        }
        pgno = branch_child(node);
    }
    for (level++; level < TREE_DEPTH; level++) {
        Py_ssize_t n;
        const uint8_t *p = stack_page(v, pgno, s->fixed, &n);
        if (p == NULL) {
            return DECLINE;
        }
        s->pg[level] = p;
        s->nk[level] = n;
        s->ki[level] = last ? n - 1 : 0;
        if ((rd16(p + 10) & P_BRANCH) == 0) {
            s->top = level;
            return 1;
        }
        node = tree_node(v, p, s->ki[level], &k, &kn);
        if (node == NULL) {
            return DECLINE;
        }
        pgno = branch_child(node);
    }
    return DECLINE;
}

/* down to the leaf where ``key`` lies, at the first key >= it (maybe one past the leaf's
 * last); ``*exact`` when equal: 1, or DECLINE */
static int
stack_seek(Stack *s, const View *v, const uint8_t *key, Py_ssize_t klen, int *exact)
{
    uint64_t pgno = s->root;
    int level;
    *exact = 0;
    for (level = 0; level < TREE_DEPTH; level++) {
        Py_ssize_t n, lo, hi;
        const uint8_t *p = stack_page(v, pgno, s->fixed, &n), *node, *k;
        Py_ssize_t kn;
        if (p == NULL) {
            return DECLINE;
        }
        s->pg[level] = p;
        s->nk[level] = n;
        if (rd16(p + 10) & P_BRANCH) {
            lo = 1;
            hi = n - 1;
            while (lo <= hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (tree_node(v, p, mid, &k, &kn) == NULL) {
                    return DECLINE;
                }
                if (key_cmp(k, kn, key, klen) <= 0) {
                    lo = mid + 1;
                }
                else {
                    hi = mid - 1;
                }
            }
            s->ki[level] = lo - 1;
            node = tree_node(v, p, lo - 1, &k, &kn);
            if (node == NULL) {
                return DECLINE;
            }
            pgno = branch_child(node);
            continue;
        }
        lo = 0;
        hi = n - 1;
        while (lo <= hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            int cmp;
            if (page_key(v, p, mid, s->fixed, &k, &kn) == NULL) {
                return DECLINE;
            }
            cmp = key_cmp(k, kn, key, klen);
            if (cmp == 0) {
                lo = mid;
                *exact = 1;
                break;
            }
            if (cmp < 0) {
                lo = mid + 1;
            }
            else {
                hi = mid - 1;
            }
        }
        s->ki[level] = lo;
        s->top = level;
        return 1;
    }
    return DECLINE;
}

/* one step along the leaves: 1, ABSENT (none: the path unchanged), DECLINE */
static int
stack_step(Stack *s, const View *v, int forward)
{
    int level = s->top;
    if (forward ? s->ki[level] + 1 < s->nk[level] : s->ki[level] > 0) {
        s->ki[level] += forward ? 1 : -1;
        return 1;
    }
    while (level > 0) {
        level--;
        if (forward ? s->ki[level] + 1 < s->nk[level] : s->ki[level] > 0) {
            s->ki[level] += forward ? 1 : -1;
            return stack_descend(s, v, level, !forward);
        }
    }
    return ABSENT;
}

/* after a seek one past a leaf's last key: the next leaf's first (1), ABSENT, DECLINE */
static int
stack_settle(Stack *s, const View *v)
{
    int level = s->top;
    if (s->ki[level] < s->nk[level]) {
        return 1;
    }
    s->ki[level] = s->nk[level] - 1;
    while (level > 0) {
        level--;
        if (s->ki[level] + 1 < s->nk[level]) {
            s->ki[level]++;
            return stack_descend(s, v, level, 0);
        }
    }
    return ABSENT;
}

static inline const uint8_t *
stack_key(const Stack *s, const View *v, const uint8_t **k, Py_ssize_t *kn)
{
    return page_key(v, s->pg[s->top], s->ki[s->top], s->fixed, k, kn);
}

/* Find ``key`` in the tree of ``root``: FOUND with its leaf node in ``*out``, ABSENT, or
 * DECLINE (a page or node fails a check). */
static int
tree_find(const View *v, uint64_t root, const uint8_t *key, Py_ssize_t klen,
          const uint8_t **out)
{
    Stack s;
    const uint8_t *k;
    Py_ssize_t kn;
    int exact;
    s.root = root;
    s.fixed = 0;
    if (stack_seek(&s, v, key, klen, &exact) != 1) {
        return DECLINE;
    }
    if (!exact) {
        return ABSENT;
    }
    *out = tree_node(v, s.pg[s.top], s.ki[s.top], &k, &kn);
    return *out != NULL ? FOUND : DECLINE;
}

/* The data of leaf node ``node`` (on its page, or on its overflow pages), checked: 0, or -1
 * (DECLINE: a duplicate's or a sub-database's node, or a check failed). */
static int
node_data(const View *v, const uint8_t *node, const uint8_t **data, Py_ssize_t *dlen)
{
    uint16_t flags = rd16(node + 4), ks = rd16(node + 6);
    uint64_t size = (uint64_t)rd16(node) | ((uint64_t)rd16(node + 2) << 16);
    const uint8_t *d = node + NODE_HEADER + ks;
    size_t at = (size_t)(node - v->base) % v->psize; /* the node's offset in its page */
    if (flags & (F_SUBDATA | F_DUPDATA)) {
        return -1;
    }
    if (flags & F_BIGDATA) {
        uint64_t ov, pages;
        const uint8_t *op;
        if (at + NODE_HEADER + ks + 8 > v->psize) {
            return -1;
        }
        ov = rd64(d);
        if (ov < 2 || ov > v->last_pg || ov >= v->len / v->psize) {
            return -1;
        }
        op = v->base + ov * (uint64_t)v->psize;
        if (rd64(op) != ov || (rd16(op + 10) & P_OVERFLOW) == 0) {
            return -1;
        }
        pages = rd32(op + 12);
        if (pages == 0 || pages - 1 > v->last_pg - ov || ov + pages > v->len / v->psize ||
            size > pages * v->psize - PAGE_HEADER) {
            return -1;
        }
        *data = op + PAGE_HEADER;
        *dlen = (Py_ssize_t)size;
        return 0;
    }
    if (at + NODE_HEADER + ks + size > v->psize) {
        return -1;
    }
    *data = d;
    *dlen = (Py_ssize_t)size;
    return 0;
}

/* -- snapshots ------------------------------------------------------------------------------- */

/* The snapshot ``txnid``'s main root, last page and page size from its meta page, into the
 * file's cache: 1, or 0 when the meta page cannot be trusted for it (declined). */
static int
read_meta(MapFile *f, uint64_t txnid)
{
    const uint8_t *m, *other;
    uint64_t last_pg, main_root, psize;
    uint16_t main_flags;
    PyObject *roots;
    if (f->len < 2 * 4096) {
        return 0;
    }
    /* page 0 a meta page of data version 1 (LMDB 0.9: a 16-byte page header) before its
     * page size is trusted (another version lays the page out otherwise) */
    if (rd32(f->base + PAGE_HEADER) != LMDB_MAGIC ||
        rd32(f->base + PAGE_HEADER + 4) != LMDB_DATA_VERSION || (rd16(f->base + 10) & P_META) == 0) {
        return 0;
    }
    psize = rd32(f->base + META_DBS); /* mm_dbs[FREE].md_pad: the page size */
    if (psize < 4096 || psize > 65536 || (psize & (psize - 1)) != 0 || f->len < 2 * psize) {
        return 0;
    }
    m = f->base + (txnid & 1) * psize;
    other = f->base + ((txnid + 1) & 1) * psize;
    if (rd32(m + PAGE_HEADER) != LMDB_MAGIC || rd32(m + PAGE_HEADER + 4) != LMDB_DATA_VERSION ||
        (rd16(m + 10) & P_META) == 0 || rd64_acquire(m + META_TXNID) != txnid) {
        return 0;
    }
    main_flags = rd16(m + META_DBS + DB_RECORD + 4);
    main_root = rd64(m + META_DBS + DB_RECORD + 40);
    last_pg = rd64(m + META_LAST);
    /* ours is rewritten by the commit after the next: taken only while the other page holds
     * no newer transaction, and ours still this one (the record read before both checks) */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (rd64_acquire(other + META_TXNID) > txnid || rd64_acquire(m + META_TXNID) != txnid) {
        return 0;
    }
    if ((main_flags & (DB_REVERSEKEY | DB_DUPSORT | DB_INTEGERKEY)) != 0 ||
        rd32(m + META_DBS) != psize) {
        return 0;
    }
    roots = PyDict_New();
    if (roots == NULL) {
        return -1;
    }
    Py_XSETREF(f->roots, roots);
    f->txnid = txnid;
    f->last_pg = last_pg;
    f->main_root = main_root;
    f->psize = (uint32_t)psize;
    return 1;
}

/* MapFile.txn(txn, names) -> MapTxn | None | False: the snapshot of LMDB's read transaction
 * ``txn`` read from the map; None when it must be read through LMDB, False when the mapping is
 * too short for it (the caller maps the file again). */
static PyObject *
mapfile_txn(MapFile *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *txn, *names, *idv;
    unsigned long long txnid;
    MapTxn *t;
    if (nargs != 2 || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "txn(txn, names: dict)");
        return NULL;
    }
    txn = args[0];
    names = args[1];
    idv = PyObject_CallMethodNoArgs(txn, s_id);
    if (idv == NULL) {
        return NULL;
    }
    txnid = PyLong_AsUnsignedLongLong(idv);
    Py_DECREF(idv);
    if (txnid == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    if (txnid == 0) {
        Py_RETURN_NONE;
    }
    if (txnid != self->txnid) {
        int r = read_meta(self, txnid);
        if (r < 0) {
            return NULL;
        }
        if (r == 0) {
            Py_RETURN_NONE;
        }
    }
    if (self->last_pg >= self->len / self->psize) {
        Py_RETURN_FALSE;
    }
    t = PyObject_New(MapTxn, &MapTxn_Type);
    if (t == NULL) {
        return NULL;
    }
    Py_INCREF(txn);
    t->txn = txn;
    Py_INCREF(self);
    t->file = self;
    Py_INCREF(names);
    t->names = names;
    Py_INCREF(self->roots);
    t->roots = self->roots;
    t->last_pg = self->last_pg;
    t->main_root = self->main_root;
    t->psize = self->psize;
    t->live = 1;
    return (PyObject *)t;
}

static void
maptxn_dealloc(MapTxn *self)
{
    Py_XDECREF(self->txn);
    Py_XDECREF(self->file);
    Py_XDECREF(self->names);
    Py_XDECREF(self->roots);
    PyObject_Free(self);
}

static inline void
maptxn_view(MapTxn *t, View *v)
{
    v->base = t->file->base;
    v->len = t->file->len;
    v->last_pg = t->last_pg;
    v->psize = t->psize;
}

/* The root of database ``db`` in this snapshot: 1 (``*root``, and ``*dup`` 1 for a database of
 * fixed-size duplicates), 0 when LMDB must read it (an unknown database, one of integer or
 * reversed keys or duplicates of another kind, a page that fails a check), -1 on error. */
static int
maptxn_root(MapTxn *t, PyObject *db, uint64_t *root, int *dup)
{
    PyObject *got, *name;
    const uint8_t *node, *rec;
    Py_ssize_t rn;
    View v;
    int found;
    *dup = 0;
    if (db == Py_None) {
        *root = t->main_root;
        return 1;
    }
    got = PyDict_GetItemWithError(t->roots, db);
    if (got != NULL) {
        if (got == Py_None) {
            return 0;
        }
        *root = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(got, 0));
        *dup = PyTuple_GET_ITEM(got, 1) == Py_True;
        return 1;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    name = PyDict_GetItemWithError(t->names, db);
    if (name == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyBytes_CheckExact(name)) {
        return 0;
    }
    maptxn_view(t, &v);
    found = t->main_root == P_INVALID
                ? ABSENT
                : tree_find(&v, t->main_root, (const uint8_t *)PyBytes_AS_STRING(name),
                            PyBytes_GET_SIZE(name), &node);
    got = Py_None;
    Py_INCREF(got);
    if (found == FOUND && (rd16(node + 4) & (F_SUBDATA | F_DUPDATA | F_BIGDATA)) == F_SUBDATA) {
        uint64_t size = (uint64_t)rd16(node) | ((uint64_t)rd16(node + 2) << 16);
        rn = rd16(node + 6);
        uint16_t flags = 0xFFFF;
        rec = node + NODE_HEADER + rn;
        if (size == DB_RECORD &&
            (size_t)(node - v.base) % v.psize + NODE_HEADER + rn + DB_RECORD <= v.psize) {
            flags = rd16(rec + 4); /* read only once the record is known to lie in the page */
        }
        if (flags == 0 || flags == (DB_DUPSORT | DB_DUPFIXED)) {
            Py_DECREF(got);
            got = Py_BuildValue("(KO)", (unsigned long long)rd64(rec + 40),
                                flags != 0 ? Py_True : Py_False);
            if (got == NULL) {
                return -1;
            }
        }
    }
    /* a named database is created once and never dropped: absent means LMDB's answer */
    if (PyDict_SetItem(t->roots, db, got) < 0) {
        Py_DECREF(got);
        return -1;
    }
    if (got == Py_None) {
        Py_DECREF(got);
        return 0;
    }
    *root = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(got, 0));
    *dup = PyTuple_GET_ITEM(got, 1) == Py_True;
    Py_DECREF(got);
    return 1;
}

/* MapTxn.get(key, default=None, db=None): LMDB's ``Transaction.get``, read from the map */
static PyObject *
maptxn_get(MapTxn *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *key = NULL, *dflt = Py_None, *db = Py_None;
    uint64_t root;
    const uint8_t *node, *data;
    Py_ssize_t dlen;
    View v;
    int r, dup;
    if (!self->live || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        goto lmdb; /* ended, or keywords: LMDB's own answer */
    }
    if (nargs < 1 || nargs > 3) {
        goto lmdb;
    }
    key = args[0];
    if (nargs > 1) {
        dflt = args[1];
    }
    if (nargs > 2) {
        db = args[2];
    }
    if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) == 0 ||
        PyBytes_GET_SIZE(key) > MAX_KEY) {
        goto lmdb;
    }
    r = maptxn_root(self, db, &root, &dup);
    if (r < 0) {
        return NULL;
    }
    if (r == 0) {
        goto lmdb;
    }
    if (root == P_INVALID) {
        Py_INCREF(dflt);
        return dflt;
    }
    maptxn_view(self, &v);
    r = tree_find(&v, root, (const uint8_t *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), &node);
    if (r == ABSENT) {
        Py_INCREF(dflt);
        return dflt;
    }
    if (r == FOUND && node_data(&v, node, &data, &dlen) == 0) {
        return PyBytes_FromStringAndSize((const char *)data, dlen);
    }
lmdb:
    {
        /* LMDB's get, with the same arguments */
        PyObject *fn = PyObject_GetAttr(self->txn, s_get), *res;
        if (fn == NULL) {
            return NULL;
        }
        res = PyObject_Vectorcall(fn, args, (size_t)nargs, kwnames);
        Py_DECREF(fn);
        return res;
    }
}

/* MapTxn.abort() / commit(): end LMDB's transaction; the map is not read for it again (so
 * ``txn`` must be ended through these, never directly) */
static PyObject *
maptxn_abort(MapTxn *self, PyObject *unused)
{
    self->live = 0;
    return PyObject_CallMethodNoArgs(self->txn, s_abort);
}

static PyObject *
maptxn_commit(MapTxn *self, PyObject *unused)
{
    self->live = 0;
    return PyObject_CallMethodNoArgs(self->txn, s_commit);
}

/* every other attribute is the LMDB transaction's (cursor, id, abort, stat, ...) */
static PyObject *
maptxn_getattro(MapTxn *self, PyObject *name)
{
    PyObject *r = PyObject_GenericGetAttr((PyObject *)self, name);
    if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        return r;
    }
    PyErr_Clear();
    return PyObject_GetAttr(self->txn, name);
}


/* -- MapCursor: LMDB's cursor over the map ---------------------------------------------------- *
 *
 * The positioning operations (first, last, set_range, set_key, and for a database of
 * duplicates set_key_dup, set_range_dup, first_dup, last_dup) and the steps (next, prev,
 * next_dup, prev_dup, next_nodup) walk a stack of pages, as LMDB's cursor does: the keys' tree,
 * and for a key with several duplicates its inline page of them or their own tree (fixed-size
 * duplicates: P_LEAF2 leaves). LMDB keeps a position even where an operation found nothing (a
 * step past either end stays on the last pair it met; a failed set_range, on whatever page it
 * reached), and the step after such a failure starts from there; py-lmdb shows none of it
 * (key() is b""). So after a failure, a page that fails a check, or any operation not made
 * here, the cursor asks LMDB's own: it makes one, replays what failed (the position before it
 * and the failed step, or the failed positioning), and forwards every operation to it until
 * the next positioning, which is the map's again. Every answer is then LMDB's.
 */

enum { C_UNSET = 0, C_AT = 1, C_FAILED = 2, C_LMDB = 3 };
enum {
    OP_FIRST = 1,
    OP_LAST,
    OP_SET_RANGE,
    OP_SET_KEY,
    OP_SET_KEY_DUP,
    OP_SET_RANGE_DUP,
    OP_NEXT,
    OP_PREV,
    OP_NEXT_DUP,
    OP_PREV_DUP,
    OP_NEXT_NODUP,
    OP_FIRST_DUP,
    OP_LAST_DUP,
    OP_COUNT
};

typedef struct {
    PyObject_HEAD
    MapTxn *t;
    PyObject *db; /* the database (None: main), for LMDB's cursor */
    int dup;      /* a database of fixed-size duplicates */
    int state;
    Stack o;      /* the keys */
    int ikind;    /* dup, C_AT: 0 the key's one value, 1 an inline page of them, 2 their tree */
    const uint8_t *sp; /* ikind 1: the inline page */
    Py_ssize_t sfixed, sn, si;
    Stack in; /* ikind 2 */
    int fail_op;         /* C_FAILED: the operation that found nothing */
    PyObject *fail_key;  /* its key, or the key it stepped from */
    PyObject *fail_val;  /* its duplicate (set_key_dup, set_range_dup), or the one it left */
    PyObject *lmdb;      /* LMDB's cursor (C_LMDB) */
    int closed;          /* close() was called: every operation raises, as py-lmdb's */
    int lpos;            /* LMDB's cursor's ``positioned`` as its last operation left it (its
                          * boolean answer), -1 when unknown (an operation handed out) */
} MapCursor;

static PyTypeObject MapCursor_Type;

typedef struct {
    PyObject_HEAD
    MapCursor *c;
    int op;   /* OP_NEXT or OP_PREV */
    int what; /* 0 pairs, 1 keys, 2 values */
    int started;
} MapIter;

static PyTypeObject MapIter_Type;

static PyObject *s_cursor = NULL, *s_db = NULL, *s_key = NULL, *s_value = NULL, *s_item = NULL,
                *s_iternext = NULL, *s_iterprev = NULL, *s_close = NULL;
static PyObject *op_names[OP_COUNT];

/* -- a key's duplicates -- */

/* enter the duplicates of the key the cursor is on, at the first or the last: 1, DECLINE */
static int
dup_enter(MapCursor *c, const View *v, int last)
{
    const uint8_t *k, *node;
    Py_ssize_t kn;
    uint16_t flags, ks;
    uint64_t size;
    const uint8_t *d;
    size_t at;
    node = tree_node(v, c->o.pg[c->o.top], c->o.ki[c->o.top], &k, &kn);
    if (node == NULL) {
        return DECLINE;
    }
    flags = rd16(node + 4);
    ks = rd16(node + 6);
    size = (uint64_t)rd16(node) | ((uint64_t)rd16(node + 2) << 16);
    d = node + NODE_HEADER + ks;
    at = (size_t)(node - v->base) % v->psize;
    if (at + NODE_HEADER + ks + size > v->psize) {
        return DECLINE;
    }
    if (flags == 0) {
        c->ikind = 0;
        return 1;
    }
    if (flags == F_DUPDATA) { /* an inline page of duplicates */
        uint16_t pflags, lower, upper, fixed;
        Py_ssize_t n;
        if (size < PAGE_HEADER) {
            return DECLINE;
        }
        pflags = rd16(d + 10);
        fixed = rd16(d + 8);
        lower = rd16(d + 12);
        upper = rd16(d + 14);
        n = (lower - PAGE_HEADER) / 2;
        if ((pflags & ~0x10) != (P_LEAF | P_SUBP | P_LEAF2) || fixed == 0 ||
            lower < PAGE_HEADER + 2 || (lower & 1) != 0 || lower > upper || upper > size ||
            PAGE_HEADER + n * (Py_ssize_t)fixed > (Py_ssize_t)size) {
            return DECLINE;
        }
        c->ikind = 1;
        c->sp = d;
        c->sfixed = fixed;
        c->sn = n;
        c->si = last ? n - 1 : 0;
        return 1;
    }
    if (flags == (F_DUPDATA | F_SUBDATA)) { /* their own tree */
        if (size != DB_RECORD || rd16(d + 4) != DB_DUPFIXED || rd32(d) == 0 ||
            rd64(d + 40) == P_INVALID) {
            return DECLINE;
        }
        c->ikind = 2;
        c->in.root = rd64(d + 40);
        c->in.fixed = rd32(d);
        return stack_descend(&c->in, v, -1, last);
    }
    return DECLINE;
}

/* the current duplicate: 0, or -1 */
static int
dup_value(MapCursor *c, const View *v, const uint8_t **d, Py_ssize_t *dn)
{
    const uint8_t *k, *node;
    Py_ssize_t kn;
    switch (c->ikind) {
    case 0:
        node = tree_node(v, c->o.pg[c->o.top], c->o.ki[c->o.top], &k, &kn);
        return node == NULL ? -1 : node_data(v, node, d, dn);
    case 1:
        *d = c->sp + PAGE_HEADER + c->si * c->sfixed;
        *dn = c->sfixed;
        return 0;
    default:
        return stack_key(&c->in, v, d, dn) == NULL ? -1 : 0;
    }
}

/* a step among the key's duplicates: 1, ABSENT, DECLINE */
static int
dup_step(MapCursor *c, const View *v, int forward)
{
    switch (c->ikind) {
    case 0:
        return ABSENT;
    case 1:
        if (forward ? c->si + 1 < c->sn : c->si > 0) {
            c->si += forward ? 1 : -1;
            return 1;
        }
        return ABSENT;
    default:
        return stack_step(&c->in, v, forward);
    }
}

/* the first duplicate >= ``val`` (``exact``: == it): 1, ABSENT, DECLINE */
static int
dup_seek(MapCursor *c, const View *v, const uint8_t *val, Py_ssize_t vn, int exact)
{
    const uint8_t *d;
    Py_ssize_t dn;
    int cmp, eq, r;
    switch (c->ikind) {
    case 0:
        if (dup_value(c, v, &d, &dn) < 0) {
            return DECLINE;
        }
        cmp = key_cmp(d, dn, val, vn);
        return cmp == 0 || (!exact && cmp > 0) ? 1 : ABSENT;
    case 1: {
        Py_ssize_t lo = 0, hi = c->sn - 1;
        while (lo <= hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            cmp = key_cmp(c->sp + PAGE_HEADER + mid * c->sfixed, c->sfixed, val, vn);
            if (cmp == 0) {
                c->si = mid;
                return 1;
            }
            if (cmp < 0) {
                lo = mid + 1;
            }
            else {
                hi = mid - 1;
            }
        }
        if (exact || lo >= c->sn) {
            return ABSENT;
        }
        c->si = lo;
        return 1;
    }
    default:
        r = stack_seek(&c->in, v, val, vn, &eq);
        if (r != 1) {
            return r;
        }
        if (exact) {
            return eq ? 1 : ABSENT;
        }
        return stack_settle(&c->in, v);
    }
}

/* -- the cursor's operations -- */

static inline void
cur_view(MapCursor *c, View *v)
{
    maptxn_view(c->t, v);
}

/* the position's key and (dup) its duplicate pass their checks: the position is usable */
static int
cur_valid(MapCursor *c, const View *v)
{
    const uint8_t *k, *d;
    Py_ssize_t kn, dn;
    if (tree_node(v, c->o.pg[c->o.top], c->o.ki[c->o.top], &k, &kn) == NULL) {
        return 0;
    }
    return !c->dup || dup_value(c, v, &d, &dn) == 0;
}

/* the current key and duplicate (C_AT) as pointers into the map: its pages are fixed while
 * the snapshot lives, so a step can keep them and make bytes only if it fails */
typedef struct {
    const uint8_t *k, *d;
    Py_ssize_t kn, dn; /* dn -1: no duplicate (a database without duplicates) */
} Spot;

static int
cur_spot(MapCursor *c, const View *v, Spot *at)
{
    at->dn = -1;
    if (tree_node(v, c->o.pg[c->o.top], c->o.ki[c->o.top], &at->k, &at->kn) == NULL ||
        (c->dup && dup_value(c, v, &at->d, &at->dn) < 0)) {
        PyErr_SetString(PyExc_RuntimeError, "cortex: the map's cursor lost its position");
        return -1;
    }
    return 0;
}

static int
spot_bytes(const Spot *at, PyObject **key, PyObject **val)
{
    *val = NULL;
    *key = PyBytes_FromStringAndSize((const char *)at->k, at->kn);
    if (*key == NULL) {
        return -1;
    }
    if (at->dn >= 0) {
        *val = PyBytes_FromStringAndSize((const char *)at->d, at->dn);
        if (*val == NULL) {
            Py_CLEAR(*key);
            return -1;
        }
    }
    return 0;
}

/* the current key (and duplicate) as new bytes (C_AT, valid) */
static int
cur_here(MapCursor *c, const View *v, PyObject **key, PyObject **val)
{
    Spot at;
    return cur_spot(c, v, &at) < 0 ? -1 : spot_bytes(&at, key, val);
}

/* call ``name`` on LMDB's cursor with up to two arguments; a new reference or NULL */
static PyObject *
lmdb_call(PyObject *cur, PyObject *name, PyObject *a, PyObject *b)
{
    PyObject *args[3] = {cur, a, b}, *r;
    size_t n = a == NULL ? 1 : (b == NULL ? 2 : 3);
    Py_INCREF(cur); /* py-lmdb gives the lock away in the call: a close() meanwhile drops ours */
    r = PyObject_VectorcallMethod(name, args, n, NULL);
    Py_DECREF(cur);
    return r;
}

/* operation ``op`` on LMDB's cursor; its answer is py-lmdb's ``positioned`` (kept: ``lpos``) */
static PyObject *
lmdb_step(MapCursor *c, int op, PyObject *a, PyObject *b)
{
    PyObject *r = lmdb_call(c->lmdb, op_names[op], a, b);
    if (r != NULL) {
        c->lpos = r == Py_True ? 1 : (r == Py_False ? 0 : -1);
    }
    return r;
}

/* put LMDB's cursor where ``key`` (and ``val``) are: True, or NULL */
static PyObject *
lmdb_goto(MapCursor *c, PyObject *key, PyObject *val)
{
    return val != NULL ? lmdb_step(c, OP_SET_KEY_DUP, key, val)
                       : lmdb_step(c, OP_SET_KEY, key, NULL);
}

/* LMDB's cursor, positioned as this one is: the cursor goes C_LMDB; NULL on error */
static PyObject *
cur_to_lmdb(MapCursor *c)
{
    PyObject *r = NULL;
    if (c->state == C_LMDB && c->lmdb != NULL) {
        return c->lmdb;
    }
    if (c->lmdb == NULL) {
        PyObject *fn = PyObject_GetAttr(c->t->txn, s_cursor), *kw, *none;
        if (fn == NULL) {
            return NULL;
        }
        kw = Py_BuildValue("{OO}", s_db, c->db);
        none = kw == NULL ? NULL : PyTuple_New(0);
        c->lmdb = none == NULL ? NULL : PyObject_Call(fn, none, kw);
        c->lpos = 0;
        Py_DECREF(fn);
        Py_XDECREF(kw);
        Py_XDECREF(none);
        if (c->lmdb == NULL) {
            return NULL;
        }
    }
    switch (c->state) {
    case C_AT: {
        View v;
        PyObject *k, *d;
        cur_view(c, &v);
        if (cur_here(c, &v, &k, &d) < 0) {
            return NULL;
        }
        r = lmdb_goto(c, k, d);
        Py_DECREF(k);
        Py_XDECREF(d);
        break;
    }
    case C_FAILED:
        switch (c->fail_op) {
        case OP_FIRST:
        case OP_LAST:
            r = lmdb_step(c, c->fail_op, NULL, NULL);
            break;
        case OP_SET_RANGE:
        case OP_SET_KEY:
            r = lmdb_step(c, c->fail_op, c->fail_key, NULL);
            break;
        case OP_SET_KEY_DUP:
        case OP_SET_RANGE_DUP:
            r = lmdb_step(c, c->fail_op, c->fail_key, c->fail_val);
            break;
        default: /* a step that found nothing: from where it was, then the step again */
            r = lmdb_goto(c, c->fail_key, c->fail_val);
            if (r != NULL) {
                Py_DECREF(r);
                r = lmdb_step(c, c->fail_op, NULL, NULL);
            }
        }
        break;
    default: /* C_UNSET (a new cursor of LMDB's is unset too), or C_LMDB */
        Py_INCREF(Py_True);
        r = Py_True;
    }
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_CLEAR(c->fail_key);
    Py_CLEAR(c->fail_val);
    c->state = C_LMDB;
    return c->lmdb;
}

static void
cur_fail(MapCursor *c, int op, PyObject *key, PyObject *val)
{
    Py_XINCREF(key);
    Py_XSETREF(c->fail_key, key);
    Py_XINCREF(val);
    Py_XSETREF(c->fail_val, val);
    c->fail_op = op;
    c->state = C_FAILED;
}

/* ``op`` on LMDB's cursor positioned as this one (with its arguments) */
static PyObject *
cur_lmdb_op(MapCursor *c, int op, PyObject *a, PyObject *b)
{
    PyObject *cur = cur_to_lmdb(c);
    if (cur == NULL) {
        return NULL;
    }
    return lmdb_step(c, op, a, b);
}

/* 0, or -1 with lmdb.Error set: the cursor was closed (py-lmdb's error) */
static int
cur_closed(MapCursor *c)
{
    PyObject *mod, *err;
    if (!c->closed) {
        return 0;
    }
    mod = PyImport_ImportModule("lmdb");
    err = mod == NULL ? NULL : PyObject_GetAttrString(mod, "Error");
    Py_XDECREF(mod);
    if (err != NULL) {
        PyErr_SetString(err, "Attempt to operate on closed/deleted/dropped object.");
        Py_DECREF(err);
    }
    return -1;
}

/* a positioning: first, last, set_range, set_key, set_key_dup, set_range_dup */
static PyObject *
cur_position(MapCursor *c, int op, PyObject *key, PyObject *val)
{
    View v;
    int r = 1, exact;
    if (cur_closed(c) < 0) {
        return NULL;
    }
    if (!c->t->live || ((op == OP_SET_KEY_DUP || op == OP_SET_RANGE_DUP) && !c->dup)) {
        goto lmdb;
    }
    if (key != NULL) {
        if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) > MAX_KEY ||
            (val != NULL && (!PyBytes_CheckExact(val) || PyBytes_GET_SIZE(val) == 0 ||
                             PyBytes_GET_SIZE(val) > MAX_KEY))) {
            goto lmdb;
        }
        if (PyBytes_GET_SIZE(key) == 0) {
            if (op != OP_SET_RANGE) {
                goto lmdb; /* LMDB's error */
            }
            op = OP_FIRST; /* py-lmdb: set_range(b"") is first() */
            key = NULL;
        }
    }
    if (c->o.root == P_INVALID) {
        cur_fail(c, op, key, val);
        Py_RETURN_FALSE;
    }
    cur_view(c, &v);
    if (op == OP_FIRST || op == OP_LAST) {
        if (stack_descend(&c->o, &v, -1, op == OP_LAST) != 1) {
            goto lmdb;
        }
    }
    else {
        if (stack_seek(&c->o, &v, (const uint8_t *)PyBytes_AS_STRING(key),
                       PyBytes_GET_SIZE(key), &exact) != 1) {
            goto lmdb;
        }
        r = op == OP_SET_RANGE ? stack_settle(&c->o, &v) : (exact ? 1 : ABSENT);
        if (r == DECLINE) {
            goto lmdb;
        }
    }
    if (r == 1 && c->dup) {
        if (dup_enter(c, &v, op == OP_LAST) != 1) {
            goto lmdb;
        }
        if (val != NULL) {
            r = dup_seek(c, &v, (const uint8_t *)PyBytes_AS_STRING(val), PyBytes_GET_SIZE(val),
                         op == OP_SET_KEY_DUP);
            if (r == DECLINE) {
                goto lmdb;
            }
        }
    }
    if (r == ABSENT) {
        cur_fail(c, op, key, val);
        Py_RETURN_FALSE;
    }
    if (!cur_valid(c, &v)) {
        goto lmdb;
    }
    c->state = C_AT;
    Py_CLEAR(c->fail_key);
    Py_CLEAR(c->fail_val);
    Py_RETURN_TRUE;
lmdb:
    c->state = C_LMDB; /* LMDB positions its own cursor: nothing to replay */
    if (cur_to_lmdb(c) == NULL) {
        return NULL;
    }
    return lmdb_step(c, op, key, val);
}

/* a step: next, prev, next_dup, prev_dup, next_nodup; or first_dup, last_dup */
static PyObject *
cur_move(MapCursor *c, int op)
{
    View v;
    Spot from;
    PyObject *k, *d;
    int r, forward = op == OP_NEXT || op == OP_NEXT_DUP || op == OP_NEXT_NODUP;
    int dup_op = op == OP_NEXT_DUP || op == OP_PREV_DUP || op == OP_NEXT_NODUP ||
                 op == OP_FIRST_DUP || op == OP_LAST_DUP;
    if (cur_closed(c) < 0) {
        return NULL;
    }
    if (!c->t->live || c->state == C_LMDB || c->state == C_FAILED || (dup_op && !c->dup) ||
        (c->state == C_UNSET && dup_op)) {
        return cur_lmdb_op(c, op, NULL, NULL);
    }
    if (c->state == C_UNSET) { /* LMDB: a step of an unset cursor is first / last */
        return cur_position(c, op == OP_NEXT ? OP_FIRST : OP_LAST, NULL, NULL);
    }
    cur_view(c, &v);
    if (cur_spot(c, &v, &from) < 0) { /* where a failed step leaves LMDB's cursor */
        return NULL;
    }
    if (op == OP_FIRST_DUP || op == OP_LAST_DUP) {
        r = dup_enter(c, &v, op == OP_LAST_DUP);
    }
    else if (op == OP_NEXT_NODUP) {
        r = stack_step(&c->o, &v, 1);
        if (r == 1) {
            r = dup_enter(c, &v, 0);
        }
    }
    else {
        r = c->dup ? dup_step(c, &v, forward) : ABSENT;
        if (r == ABSENT && (op == OP_NEXT || op == OP_PREV)) {
            r = stack_step(&c->o, &v, forward);
            if (r == 1 && c->dup) {
                r = dup_enter(c, &v, !forward);
            }
        }
    }
    if (r == 1 && !cur_valid(c, &v)) {
        r = DECLINE;
    }
    if (r == 1) {
        Py_RETURN_TRUE;
    }
    if (spot_bytes(&from, &k, &d) < 0) {
        return NULL;
    }
    if (r == ABSENT) {
        cur_fail(c, op, k, d);
        Py_DECREF(k);
        Py_XDECREF(d);
        Py_RETURN_FALSE;
    }
    /* a page failed its check: LMDB's cursor from where this one was, then the step */
    c->state = C_UNSET;
    if (cur_to_lmdb(c) == NULL) {
        c->state = C_LMDB; /* the path is not to be trusted: LMDB's cursor from here on */
        Py_DECREF(k);
        Py_XDECREF(d);
        return NULL;
    }
    {
        PyObject *got = lmdb_goto(c, k, d);
        Py_DECREF(k);
        Py_XDECREF(d);
        if (got == NULL) {
            return NULL;
        }
        Py_DECREF(got);
    }
    return lmdb_step(c, op, NULL, NULL);
}

/* what = 0: (key, value); 1: key; 2: value */
static PyObject *
cur_current(MapCursor *c, int what)
{
    View v;
    const uint8_t *k, *d, *node;
    Py_ssize_t kn, dn;
    PyObject *kb, *vb, *tup;
    if (cur_closed(c) < 0) {
        return NULL;
    }
    if (c->state == C_LMDB || !c->t->live) {
        PyObject *cur = cur_to_lmdb(c);
        if (cur == NULL) {
            return NULL;
        }
        return lmdb_call(cur, what == 0 ? s_item : what == 1 ? s_key : s_value, NULL, NULL);
    }
    if (c->state != C_AT) {
        if (what == 0) {
            return Py_BuildValue("(y#y#)", "", (Py_ssize_t)0, "", (Py_ssize_t)0);
        }
        return PyBytes_FromStringAndSize("", 0);
    }
    cur_view(c, &v);
    node = tree_node(&v, c->o.pg[c->o.top], c->o.ki[c->o.top], &k, &kn);
    if (node == NULL || (what != 1 && (c->dup ? dup_value(c, &v, &d, &dn)
                                              : node_data(&v, node, &d, &dn)) < 0)) {
        PyObject *cur = cur_to_lmdb(c); /* a value on pages that fail a check */
        if (cur == NULL) {
            return NULL;
        }
        return lmdb_call(cur, what == 0 ? s_item : what == 1 ? s_key : s_value, NULL, NULL);
    }
    if (what == 1) {
        return PyBytes_FromStringAndSize((const char *)k, kn);
    }
    if (what == 2) {
        return PyBytes_FromStringAndSize((const char *)d, dn);
    }
    kb = PyBytes_FromStringAndSize((const char *)k, kn);
    vb = kb == NULL ? NULL : PyBytes_FromStringAndSize((const char *)d, dn);
    tup = vb == NULL ? NULL : PyTuple_New(2);
    if (tup == NULL) {
        Py_XDECREF(kb);
        Py_XDECREF(vb);
        return NULL;
    }
    PyTuple_SET_ITEM(tup, 0, kb);
    PyTuple_SET_ITEM(tup, 1, vb);
    return tup;
}

#define CUR_NOARGS(fn, body)                                                                   \
    static PyObject *fn(MapCursor *c, PyObject *unused)                                        \
    {                                                                                          \
        return body;                                                                           \
    }

CUR_NOARGS(cur_first, cur_position(c, OP_FIRST, NULL, NULL))
CUR_NOARGS(cur_last, cur_position(c, OP_LAST, NULL, NULL))
CUR_NOARGS(cur_next, cur_move(c, OP_NEXT))
CUR_NOARGS(cur_prev, cur_move(c, OP_PREV))
CUR_NOARGS(cur_next_dup, cur_move(c, OP_NEXT_DUP))
CUR_NOARGS(cur_prev_dup, cur_move(c, OP_PREV_DUP))
CUR_NOARGS(cur_next_nodup, cur_move(c, OP_NEXT_NODUP))
CUR_NOARGS(cur_first_dup, cur_move(c, OP_FIRST_DUP))
CUR_NOARGS(cur_last_dup, cur_move(c, OP_LAST_DUP))
CUR_NOARGS(cur_key, cur_current(c, 1))
CUR_NOARGS(cur_value, cur_current(c, 2))
CUR_NOARGS(cur_item, cur_current(c, 0))

static PyObject *
cur_set_range(MapCursor *c, PyObject *key)
{
    return cur_position(c, OP_SET_RANGE, key, NULL);
}

static PyObject *
cur_set_key(MapCursor *c, PyObject *key)
{
    return cur_position(c, OP_SET_KEY, key, NULL);
}

/* set_key_dup / set_range_dup(key, value) */
static PyObject *
cur_dup_position(MapCursor *c, int op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) { /* LMDB's own refusal */
        return cur_lmdb_op(c, op, nargs > 0 ? args[0] : NULL, nargs > 1 ? args[1] : NULL);
    }
    return cur_position(c, op, args[0], args[1]);
}

static PyObject *
cur_set_key_dup(MapCursor *c, PyObject *const *args, Py_ssize_t nargs)
{
    return cur_dup_position(c, OP_SET_KEY_DUP, args, nargs);
}

static PyObject *
cur_set_range_dup(MapCursor *c, PyObject *const *args, Py_ssize_t nargs)
{
    return cur_dup_position(c, OP_SET_RANGE_DUP, args, nargs);
}

/* whether the cursor is on a pair (py-lmdb's ``positioned``) */
static int
cur_positioned(MapCursor *c)
{
    if (cur_closed(c) < 0) {
        return -1;
    }
    if (c->state == C_AT) {
        return 1;
    }
    if (c->state == C_LMDB && c->lmdb != NULL && c->lpos >= 0) {
        return c->lpos;
    }
    if (c->state == C_LMDB && c->lmdb != NULL) { /* unknown: its key says */
        PyObject *k = lmdb_call(c->lmdb, s_key, NULL, NULL);
        int r;
        if (k == NULL) {
            return -1;
        }
        r = PyBytes_Check(k) && PyBytes_GET_SIZE(k) > 0;
        Py_DECREF(k);
        return r;
    }
    return 0;
}

/* iternext / iterprev(keys=True, values=True): py-lmdb's iterators: an unset cursor is
 * positioned (first / last) when the iterator is made; each item is the current one, and each
 * after the first a step */
static PyObject *
cur_iter(MapCursor *c, PyObject *args, PyObject *kwds, int op)
{
    int keys = 1, values = 1;
    MapIter *it;
    static char *kwlist[] = {"keys", "values", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pp", kwlist, &keys, &values) ||
        cur_closed(c) < 0) {
        return NULL;
    }
    if (!c->t->live) {
        PyObject *cur = cur_to_lmdb(c), *fn, *r;
        if (cur == NULL) {
            return NULL;
        }
        fn = PyObject_GetAttr(cur, op == OP_NEXT ? s_iternext : s_iterprev);
        if (fn == NULL) {
            return NULL;
        }
        r = PyObject_Call(fn, args, kwds);
        Py_DECREF(fn);
        return r;
    }
    {
        /* py-lmdb positions an unpositioned cursor when the iterator is made; the iterator
         * steps through this cursor, on the map or on LMDB's, whichever holds the position */
        int at = cur_positioned(c);
        if (at < 0) {
            return NULL;
        }
        if (!at) {
            PyObject *r = cur_position(c, op == OP_NEXT ? OP_FIRST : OP_LAST, NULL, NULL);
            if (r == NULL) {
                return NULL;
            }
            Py_DECREF(r);
        }
    }
    it = PyObject_New(MapIter, &MapIter_Type);
    if (it == NULL) {
        return NULL;
    }
    Py_INCREF(c);
    it->c = c;
    it->op = op;
    it->what = !values ? 1 : (!keys ? 2 : 0);
    it->started = 0;
    return (PyObject *)it;
}

static PyObject *
cur_iternext(MapCursor *c, PyObject *args, PyObject *kwds)
{
    return cur_iter(c, args, kwds, OP_NEXT);
}

static PyObject *
cur_iterprev(MapCursor *c, PyObject *args, PyObject *kwds)
{
    return cur_iter(c, args, kwds, OP_PREV);
}

/* iter(cursor): iternext() */
static PyObject *
cur_tp_iter(MapCursor *c)
{
    PyObject *none = PyTuple_New(0), *r;
    if (none == NULL) {
        return NULL;
    }
    r = cur_iter(c, none, NULL, OP_NEXT);
    Py_DECREF(none);
    return r;
}

static PyObject *
mapiter_next(MapIter *it)
{
    MapCursor *c = it->c;
    if (cur_positioned(c) <= 0) { /* py-lmdb: an unpositioned cursor ends the iteration */
        return NULL;              /* StopIteration (or the error raised) */
    }
    if (it->started) {
        PyObject *r = cur_move(c, it->op);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
        if (cur_positioned(c) <= 0) {
            return NULL;
        }
    }
    it->started = 1;
    return cur_current(c, it->what);
}

static void
mapiter_dealloc(MapIter *it)
{
    Py_XDECREF(it->c);
    PyObject_Free(it);
}

static PyObject *
cur_close(MapCursor *c, PyObject *unused)
{
    c->closed = 1;
    c->state = C_UNSET;
    Py_CLEAR(c->fail_key);
    Py_CLEAR(c->fail_val);
    if (c->lmdb != NULL) {
        PyObject *r = lmdb_call(c->lmdb, s_close, NULL, NULL);
        Py_CLEAR(c->lmdb);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static PyObject *
cur_enter(MapCursor *c, PyObject *unused)
{
    Py_INCREF(c);
    return (PyObject *)c;
}

static PyObject *
cur_exit(MapCursor *c, PyObject *args)
{
    return cur_close(c, NULL);
}

/* any other attribute (count, getmulti, put, ...) is LMDB's cursor's, positioned as this one */
static PyObject *
cur_getattro(MapCursor *c, PyObject *name)
{
    PyObject *r = PyObject_GenericGetAttr((PyObject *)c, name), *cur;
    if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        return r;
    }
    PyErr_Clear();
    cur = cur_to_lmdb(c);
    if (cur == NULL) {
        return NULL;
    }
    c->lpos = -1; /* what the caller does with it is not seen here */
    return PyObject_GetAttr(cur, name);
}

static void
mapcursor_dealloc(MapCursor *c)
{
    Py_XDECREF(c->t);
    Py_XDECREF(c->db);
    Py_XDECREF(c->fail_key);
    Py_XDECREF(c->fail_val);
    Py_XDECREF(c->lmdb);
    PyObject_Free(c);
}

static PyMethodDef mapcursor_methods[] = {
    {"first", (PyCFunction)cur_first, METH_NOARGS, NULL},
    {"last", (PyCFunction)cur_last, METH_NOARGS, NULL},
    {"set_range", (PyCFunction)cur_set_range, METH_O, NULL},
    {"set_key", (PyCFunction)cur_set_key, METH_O, NULL},
    {"set_key_dup", (PyCFunction)(void (*)(void))cur_set_key_dup, METH_FASTCALL, NULL},
    {"set_range_dup", (PyCFunction)(void (*)(void))cur_set_range_dup, METH_FASTCALL, NULL},
    {"next", (PyCFunction)cur_next, METH_NOARGS, NULL},
    {"prev", (PyCFunction)cur_prev, METH_NOARGS, NULL},
    {"next_dup", (PyCFunction)cur_next_dup, METH_NOARGS, NULL},
    {"prev_dup", (PyCFunction)cur_prev_dup, METH_NOARGS, NULL},
    {"next_nodup", (PyCFunction)cur_next_nodup, METH_NOARGS, NULL},
    {"first_dup", (PyCFunction)cur_first_dup, METH_NOARGS, NULL},
    {"last_dup", (PyCFunction)cur_last_dup, METH_NOARGS, NULL},
    {"key", (PyCFunction)cur_key, METH_NOARGS, NULL},
    {"value", (PyCFunction)cur_value, METH_NOARGS, NULL},
    {"item", (PyCFunction)cur_item, METH_NOARGS, NULL},
    {"iternext", (PyCFunction)(void (*)(void))cur_iternext, METH_VARARGS | METH_KEYWORDS, NULL},
    {"iterprev", (PyCFunction)(void (*)(void))cur_iterprev, METH_VARARGS | METH_KEYWORDS, NULL},
    {"close", (PyCFunction)cur_close, METH_NOARGS, NULL},
    {"__enter__", (PyCFunction)cur_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)cur_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MapCursor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._speedups.MapCursor",
    .tp_basicsize = sizeof(MapCursor),
    .tp_dealloc = (destructor)mapcursor_dealloc,
    .tp_getattro = (getattrofunc)cur_getattro,
    .tp_iter = (getiterfunc)cur_tp_iter,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "LMDB's cursor of a read snapshot's database, over the map (mapread.c).",
    .tp_methods = mapcursor_methods,
};

static PyTypeObject MapIter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._speedups.MapIter",
    .tp_basicsize = sizeof(MapIter),
    .tp_dealloc = (destructor)mapiter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)mapiter_next,
};

/* MapTxn.cursor(db=None): the map's cursor; LMDB's where the map cannot read the database */
static PyObject *
maptxn_cursor(MapTxn *self, PyObject *args, PyObject *kwds)
{
    PyObject *db = Py_None;
    uint64_t root;
    MapCursor *c;
    int r = 0, dup = 0;
    static char *kwlist[] = {"db", NULL};
    if (self->live && PyArg_ParseTupleAndKeywords(args, kwds, "|O", kwlist, &db)) {
        r = maptxn_root(self, db, &root, &dup);
        if (r < 0) {
            return NULL;
        }
    }
    else {
        PyErr_Clear();
    }
    if (r == 0) {
        PyObject *fn = PyObject_GetAttr(self->txn, s_cursor), *res;
        if (fn == NULL) {
            return NULL;
        }
        res = PyObject_Call(fn, args, kwds);
        Py_DECREF(fn);
        return res;
    }
    c = PyObject_New(MapCursor, &MapCursor_Type);
    if (c == NULL) {
        return NULL;
    }
    Py_INCREF(self);
    c->t = self;
    Py_INCREF(db);
    c->db = db;
    c->dup = dup;
    c->state = C_UNSET;
    c->o.root = root;
    c->o.fixed = 0;
    c->o.top = 0;
    c->ikind = 0;
    c->in.fixed = 0;
    c->in.top = 0;
    c->fail_op = 0;
    c->fail_key = NULL;
    c->fail_val = NULL;
    c->lmdb = NULL;
    c->closed = 0;
    c->lpos = 0;
    return (PyObject *)c;
}
static PyMethodDef maptxn_methods[] = {
    {"get", (PyCFunction)(void (*)(void))maptxn_get, METH_FASTCALL | METH_KEYWORDS,
     "get(key, default=None, db=None): the value of key in the snapshot (LMDB's get)."},
    {"abort", (PyCFunction)maptxn_abort, METH_NOARGS, "abort(): end LMDB's transaction."},
    {"commit", (PyCFunction)maptxn_commit, METH_NOARGS, "commit(): end LMDB's transaction."},
    {"cursor", (PyCFunction)(void (*)(void))maptxn_cursor, METH_VARARGS | METH_KEYWORDS,
     "cursor(db=None): a cursor of the snapshot (the map's, or LMDB's for duplicates)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef maptxn_members[] = {
    {"txn", T_OBJECT_EX, offsetof(MapTxn, txn), READONLY, "The LMDB transaction."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject MapTxn_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._speedups.MapTxn",
    .tp_basicsize = sizeof(MapTxn),
    .tp_dealloc = (destructor)maptxn_dealloc,
    .tp_getattro = (getattrofunc)maptxn_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read snapshot of LMDB whose gets read the data file's map (mapread.c).",
    .tp_methods = maptxn_methods,
    .tp_members = maptxn_members,
};

static PyMethodDef mapfile_methods[] = {
    {"txn", (PyCFunction)(void (*)(void))mapfile_txn, METH_FASTCALL,
     "txn(txn, names) -> MapTxn | None | False: LMDB's read transaction read from the map."},
    {NULL, NULL, 0, NULL},
};

static PyObject *
mapfile_length(MapFile *self, void *closure)
{
    return PyLong_FromSize_t(self->len);
}

static PyGetSetDef mapfile_getset[] = {
    {"length", (getter)mapfile_length, NULL, "The bytes mapped.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject MapFile_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._speedups.MapFile",
    .tp_basicsize = sizeof(MapFile),
    .tp_dealloc = (destructor)mapfile_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MapFile(path, length): an LMDB data file mapped read-only (mapread.c).",
    .tp_methods = mapfile_methods,
    .tp_getset = mapfile_getset,
    .tp_new = mapfile_new,
};

CX_HIDDEN int
cx_mapread_init(PyObject *m)
{
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || UINTPTR_MAX != UINT64_MAX
    return 0; /* LMDB's 64-bit little-endian layout only: the module offers no MapFile */
#else
    if (s_id == NULL) {
        static const char *ops[OP_COUNT] = {
            NULL,        "first",    "last",       "set_range", "set_key",  "set_key_dup",
            "set_range_dup", "next", "prev",       "next_dup",  "prev_dup", "next_nodup",
            "first_dup", "last_dup"};
        int i;
        s_id = PyUnicode_InternFromString("id");
        s_get = PyUnicode_InternFromString("get");
        s_abort = PyUnicode_InternFromString("abort");
        s_commit = PyUnicode_InternFromString("commit");
        s_cursor = PyUnicode_InternFromString("cursor");
        s_db = PyUnicode_InternFromString("db");
        s_key = PyUnicode_InternFromString("key");
        s_value = PyUnicode_InternFromString("value");
        s_item = PyUnicode_InternFromString("item");
        s_iternext = PyUnicode_InternFromString("iternext");
        s_iterprev = PyUnicode_InternFromString("iterprev");
        s_close = PyUnicode_InternFromString("close");
        if (s_id == NULL || s_get == NULL || s_abort == NULL || s_commit == NULL || s_cursor == NULL || s_db == NULL || s_key == NULL ||
            s_value == NULL || s_item == NULL || s_iternext == NULL || s_iterprev == NULL ||
            s_close == NULL) {
            return -1;
        }
        for (i = 1; i < OP_COUNT; i++) {
            op_names[i] = PyUnicode_InternFromString(ops[i]);
            if (op_names[i] == NULL) {
                return -1;
            }
        }
    }
    if (PyType_Ready(&MapFile_Type) < 0 || PyType_Ready(&MapTxn_Type) < 0 ||
        PyType_Ready(&MapCursor_Type) < 0 || PyType_Ready(&MapIter_Type) < 0) {
        return -1;
    }
    Py_INCREF(&MapFile_Type);
    if (PyModule_AddObject(m, "MapFile", (PyObject *)&MapFile_Type) < 0) {
        Py_DECREF(&MapFile_Type);
        return -1;
    }
    Py_INCREF(&MapTxn_Type);
    if (PyModule_AddObject(m, "MapTxn", (PyObject *)&MapTxn_Type) < 0) {
        Py_DECREF(&MapTxn_Type);
        return -1;
    }
    Py_INCREF(&MapCursor_Type);
    if (PyModule_AddObject(m, "MapCursor", (PyObject *)&MapCursor_Type) < 0) {
        Py_DECREF(&MapCursor_Type);
        return -1;
    }
    return 0;
#endif
}
