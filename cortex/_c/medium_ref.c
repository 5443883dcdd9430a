/*
 * A version's medium form as a reference into its data (store format 18, specs/format.md
 * Forms; codec.medium_ref and codec.data_texts are the definition this mirrors).
 */

#include "common.h"

/* The first offset where t (tn > 0 bytes) is in m on character boundaries of m, or -1. */
static Py_ssize_t
occurs(const uint8_t *m, Py_ssize_t mn, const uint8_t *t, Py_ssize_t tn)
{
    const uint8_t *p = m, *end = m + mn;
    while (end - p >= tn) {
        const uint8_t *hit = memchr(p, t[0], (size_t)(end - p - tn + 1));
        Py_ssize_t i, j;
        if (hit == NULL) {
            return -1;
        }
        i = hit - m;
        j = i + tn;
        if (memcmp(hit, t, (size_t)tn) == 0 && (m[i] & 0xC0) != 0x80 &&
            (j == mn || (m[j] & 0xC0) != 0x80)) {
            return i;
        }
        p = hit + 1;
    }
    return -1;
}

#define REF_DEPTH 32

int
medium_ref(const uint8_t *d, Py_ssize_t dn, const uint8_t *m, Py_ssize_t mn, Py_ssize_t *at,
           Py_ssize_t *i, Py_ssize_t *len)
{
    /* the walk of codec.data_texts: items still to read at each open level */
    uint64_t remaining[REF_DEPTH + 2];
    int depth = 0;
    Py_ssize_t pos = 0, best_len = 0, best_at = 0, best_i = 0;
    remaining[0] = 1;
    for (;;) {
        uint8_t ib, major, info;
        uint64_t arg = 0;
        Py_ssize_t item = pos;
        if (remaining[depth] == 0) {
            if (depth == 0) {
                break;
            }
            depth--;
            continue;
        }
        remaining[depth]--;
        if (pos >= dn) {
            return 0;
        }
        ib = d[pos];
        major = ib >> 5;
        info = ib & 31;
        if (info < 24) {
            arg = info;
            pos += 1;
        }
        else if (info <= 27) {
            Py_ssize_t size = (Py_ssize_t)1 << (info - 24), k;
            if (pos + 1 + size > dn) {
                return 0;
            }
            for (k = 0; k < size; k++) {
                arg = (arg << 8) | d[pos + 1 + k];
            }
            pos += 1 + size;
        }
        else {
            return 0;
        }
        if (major == 2 || major == 3) {
            if (arg > (uint64_t)(dn - pos)) {
                return 0;
            }
            if (major == 3 && (Py_ssize_t)arg >= MEDIUM_REF_MIN && (Py_ssize_t)arg <= mn &&
                (Py_ssize_t)arg > best_len) {
                Py_ssize_t where = occurs(m, mn, d + pos, (Py_ssize_t)arg);
                if (where >= 0) {
                    best_len = (Py_ssize_t)arg;
                    best_at = item;
                    best_i = where;
                }
            }
            pos += (Py_ssize_t)arg;
        }
        else if (major == 4 || major == 5) {
            if (arg) {
                if (depth + 1 > REF_DEPTH) {
                    return 0;
                }
                if (major == 4 ? arg > (uint64_t)(dn - pos) : arg > (uint64_t)(dn - pos) / 2) {
                    return 0;
                }
                remaining[++depth] = major == 4 ? arg : 2 * arg;
            }
        }
        else if (major == 6) {
            return 0;
        }
    }
    if (pos != dn || best_len == 0) {
        return 0;
    }
    *at = best_at;
    *i = best_i;
    *len = best_len;
    return 1;
}
