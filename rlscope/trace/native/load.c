/* Passes of the trace's load over a table's rows that numpy makes in several: what a check or a
 * lookup reads of the rows in one pass, read-only. Each mirrors the numpy code named at it; the
 * reader runs that numpy code where the library cannot be had (rlscope/trace/native/__init__.py). */
#include <stdint.h>

#define MAX_TS_NS ((uint64_t)1 << 60) /* validate.MAX_TS_NS */
enum { OP_BEGIN = 0, OP_END = 1, PHASE_BEGIN = 4, PHASE_END = 5 };

/* validate_table's reductions over a table of times, where every time is one a clock gives: 0 where
 * a time is not (``_any_no_clock`` of a column: the numpy reductions then run), else 1 and
 * ``out[0]`` 1 where an interval ends before it starts (``_any_less(end, start)``), ``out[1]`` 1
 * where ``start`` strictly increases (``_copies``' first test, ``not _any_less(t[1:], t[:-1],
 * np.less_equal)``), ``out[2]`` 1 where an end is past ``after`` (``end.max() > after``; ``after`` a
 * time a clock gives). ``end``: NULL for a table of one time column (out[0], out[2] then 0).
 *
 * Branch-free on the bits: with every time in [0, 2**60), a difference of two is negative exactly
 * where the first is the smaller, so each test ORs (or ANDs) the sign bits of differences. */
int64_t trace_times_scan(int64_t n, const int64_t *start, const int64_t *end, int64_t after,
                         int64_t *out) {
    const uint64_t *s = (const uint64_t *)start, *e = (const uint64_t *)end;
    uint64_t bits = 0, before = 0, late = 0, rise = ~(uint64_t)0;
    uint64_t prev = n ? s[0] - 1 : 0;
    if (e) {
        for (int64_t i = 0; i < n; i++) {
            const uint64_t a = s[i], b = e[i];
            bits |= a | b;
            rise &= prev - a; /* negative while each start is above the one before */
            prev = a;
            before |= b - a;
            late |= (uint64_t)after - b;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            const uint64_t a = s[i];
            bits |= a;
            rise &= prev - a;
            prev = a;
        }
    }
    if (bits >= MAX_TS_NS) return 0;
    out[0] = (int64_t)(before >> 63);
    out[1] = (int64_t)(rise >> 63);
    out[2] = (int64_t)(late >> 63);
    return 1;
}

/* Marks ``used[i] = 1`` for each name id ``i`` in [0, n_names) of an operation's or a phase's row
 * (OP_BEGIN, OP_END, PHASE_BEGIN, PHASE_END): auto_names._used_ids' ``np.unique`` of the names of
 * those rows, less the ids out of range it then drops. */
void trace_names_used(int64_t n, const int8_t *kind, const int32_t *name, int64_t n_names, uint8_t *used) {
    for (int64_t i = 0; i < n; i++) {
        const int k = kind[i];
        const int64_t v = name[i];
        if ((k == OP_BEGIN || k == OP_END || k == PHASE_BEGIN || k == PHASE_END) && v >= 0 && v < n_names)
            used[v] = 1;
    }
}

