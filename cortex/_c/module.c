/*
 * cortex._speedups: the optional C accelerator of cortex (see common.h for its parts).  The
 * module is built by setup.py from the files of this directory as one extension; without a C
 * compiler cortex runs its pure-Python path with the same results.
 */

#include "common.h"

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cortex._speedups",
    .m_doc = "Strict one-pass decoder of canonical CBOR records and the lexical index's hot "
             "loops (optional accelerator).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    /* kv first: its CRC tables are filled before any part can seal */
    if (cx_kv_init(m) < 0 || cx_plan_init(m) < 0 || cx_decode_init(m) < 0 ||
        cx_encode_init(m) < 0 || cx_tokenize_init(m) < 0 || cx_staging_init(m) < 0 ||
        cx_postings_init(m) < 0 || cx_bm25_init(m) < 0 || cx_cursor_init(m) < 0 || cx_write_init(m) < 0 ||
        cx_mapread_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
