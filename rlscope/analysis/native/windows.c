/* The window estimate's loops (rlscope/overhead/correct/windows.py and pieces.py).
 *
 * Each function mirrors a chain of numpy passes over every row of a timeline (or every instance,
 * piece or window), done here in one pass that writes only its results. Floats are added one after
 * another in row order, as np.add.at and np.bincount(weights=) add them, so the sums have the same
 * bits; sorts keep the order of ties as numpy's stable sorts do.
 *
 * Several columns are int16, int32 or int64 depending on the trace (Timeline's narrowed ids, the
 * row_window lookup): such a function is made once per type by a macro, its name ending in the type.
 *
 * "The main thread's rows" are given as ``ranges``: sorted [start, stop) pairs of rows, ``n_ranges``
 * of them (the blocks of the threads that are the main thread, tl.on_threads).
 */
#include <stdint.h>

#include "segments.h"

/* Walks the rows in order and says whether each is in one of ``ranges``. */
typedef struct {
    const int64_t *ranges;
    int64_t n, k;
} Ranges;

static inline int in_ranges(Ranges *m, int64_t r) {
    while (m->k < m->n && r >= m->ranges[2 * m->k + 1]) m->k++;
    return m->k < m->n && r >= m->ranges[2 * m->k];
}

/* The rows [0, n) walked in order in segments on and off the main thread's ``ranges``: MAIN_AT(r)
 * moves on to the segment of row r, which ends at main_stop, on_main saying whether its rows are the
 * main thread's. A pass works a segment at a time: a test per row (in_ranges) took a third of it. */
#define MAIN_INIT                                                                                      \
    int64_t main_q = 0, main_stop = n_ranges > 0 && ranges[0] < n ? ranges[0] : n;                     \
    int on_main = 0
#define MAIN_AT(r)                                                                                     \
    while ((r) >= main_stop && main_q < 2 * n_ranges) {                                                \
        main_q++;                                                                                      \
        on_main = (int)(main_q & 1);                                                                   \
        main_stop = main_q < 2 * n_ranges && ranges[main_q] < n ? ranges[main_q] : n;                  \
    }

/* full_row[r] = ts[r] >= from_ts[wi[r]]; row_mode[r] = full_row[r] ? full_mode : light_mode.
 * Mirrors estimate's block loop of np.greater_equal(ref.ts, from_ts[wi]) and the np.where after it. */
#define FULL_ROWS(T, SUFFIX)                                                                           \
    void windows_full_rows_##SUFFIX(int64_t n, const int64_t *ts, const T *wi, const int64_t *from_ts, \
                                    uint8_t *full_row, int8_t *row_mode, int64_t full_mode,            \
                                    int64_t light_mode) {                                              \
        for (int64_t r = 0; r < n; r++) {                                                              \
            uint8_t full = ts[r] >= from_ts[wi[r]];                                                    \
            full_row[r] = full;                                                                        \
            row_mode[r] = (int8_t)(full ? full_mode : light_mode);                                     \
        }                                                                                              \
    }
FULL_ROWS(int16_t, i16)
FULL_ROWS(int32_t, i32)
FULL_ROWS(int64_t, i64)

/* Per instance + 1 (index 0: the rows outside every instance), over every row in order:
 * excl += dur, events += coll, rows += 1, and held = 1 where the row is counted (full_row and in an
 * instance or on the main thread). Mirrors estimate's np.add.at loop (excl, events) and its loop
 * marking ``held``; ``rows`` sizes the list of rows that a switch transient shortens. */
#define INSTANCE_SUMS(T, SUFFIX)                                                                       \
    void windows_instance_sums_##SUFFIX(int64_t n, const T *op, const double *dur, const uint8_t *coll, \
                                        const uint8_t *full_row, int64_t n_ranges, const int64_t *ranges, \
                                        double *excl, int64_t *events, int64_t *rows, uint8_t *held) {  \
        Ranges main = {ranges, n_ranges, 0};                                                           \
        for (int64_t r = 0; r < n; r++) {                                                              \
            int64_t i = (int64_t)op[r] + 1;                                                            \
            int on_main = in_ranges(&main, r);                                                         \
            excl[i] += dur[r];                                                                         \
            events[i] += coll[r];                                                                      \
            rows[i] += 1;                                                                              \
            if (full_row[r] && (op[r] >= 0 || on_main)) held[i] = 1;                                   \
        }                                                                                              \
    }
INSTANCE_SUMS(int16_t, i16)
INSTANCE_SUMS(int32_t, i32)
INSTANCE_SUMS(int64_t, i64)

/* The estimate's first pass over every row, in row order: d, the length of row r's segment as a
 * double (its end: the next row's start, but at a thread's last row the thread's end, from ``seg``;
 * worked out here and in the later passes, not written: a column of every row at the analysis's
 * peak of memory), full_row[r] = raw_ts[r] >= from_ts[w] (w: the row's window, row_window's value, read from the
 * rows where it changes as windows_collector_live reads it), then the sums of windows_instance_sums
 * over them. A window's rows start at or after its switch (win_ts[w - 1]) and before the next one
 * (win_ts[w]): where from_ts[w] is past the next switch (a light window's, but the last) none of
 * them is full, where it is at or before its own switch all of them are, and their raw_ts is not
 * read (a column of every row).
 * Mirrors Timeline.float_duration, windows_full_rows' full_row and windows_instance_sums one after
 * another (estimate's numpy path: float_duration, _full_rows and _instance_sums); the row modes
 * are full_row's bytes (_row_mode), not a column of their own. */
#define INSTANCE_ROWS(FULL, END)                                                                       \
    for (; r < stop; r++) {                                                                            \
        double d = (double)((END) - ts[r]);                                                            \
        uint8_t full = (FULL);                                                                         \
        int64_t i = (int64_t)op[r] + 1;                                                                \
        full_row[r] = full;                                                                            \
        if (i != cur) {                                                                                \
            excl[cur] = x, events[cur] += ev, rows[cur] += k, held[cur] |= h;                          \
            cur = i, x = excl[i], ev = 0, k = 0, h = 0;                                                \
        }                                                                                              \
        x += d;                                                                                        \
        ev += coll[r];                                                                                 \
        k += 1;                                                                                        \
        h |= full & (i > 0 || on_main);                                                                \
    }
#define INSTANCE_PASS(T, SUFFIX)                                                                       \
    void windows_instance_rows_##SUFFIX(                                                               \
        int64_t n, const Segments *seg, const int64_t *raw_ts, int64_t n_changes,                      \
        const int64_t *change_row, const int64_t *change_w, int64_t n_win, const int64_t *win_ts,      \
        const int64_t *from_ts, const T *op, const uint8_t *coll, int64_t n_ranges,                    \
        const int64_t *ranges, uint8_t *full_row, double *excl, int64_t *events, int64_t *rows,        \
        uint8_t *held) {                                                                               \
        MAIN_INIT;                                                                                     \
        const int64_t *ts = seg->ts;                                                                   \
        SegWalk ends = seg_walk(seg, 0);                                                               \
        /* the current instance's sums, held while its rows run (the same additions in the same     \
         * order as into its entries) and written back where another instance's rows begin */        \
        int64_t cur = n > 0 ? (int64_t)op[0] + 1 : 0;                                                  \
        double x = n > 0 ? excl[cur] : 0.0;                                                            \
        int64_t ev = 0, k = 0, r = 0, w = 0;                                                           \
        uint8_t h = 0;                                                                                 \
        for (int64_t c = 0; c <= n_changes; c++) { /* the rows of one window, then the next's */      \
            int64_t run = c < n_changes ? change_row[c] : n, from = from_ts[w];                        \
            int none = w < n_win && from >= win_ts[w], all = w > 0 && from <= win_ts[w - 1];           \
            while (r < run) { /* the window's rows on or off the main thread */                        \
                MAIN_AT(r);                                                                            \
                int64_t stop = run < main_stop ? run : main_stop;                                      \
                stop = stop < ends.next ? stop : ends.next; /* rows ending where the next starts */    \
                if (r == stop) { /* a thread's last row: its segment ends where the thread does */     \
                    stop = r + 1;                                                                      \
                    INSTANCE_ROWS(none ? 0 : all ? 1 : raw_ts[r] >= from, ends.end[ends.k])            \
                    ends = seg_walk_from(ends, r); /* the walk past it (r: the row after it) */        \
                } else if (none)                                                                       \
                    INSTANCE_ROWS(0, ts[r + 1])                                                        \
                else if (all)                                                                          \
                    INSTANCE_ROWS(1, ts[r + 1])                                                        \
                else                                                                                   \
                    INSTANCE_ROWS(raw_ts[r] >= from, ts[r + 1])                                        \
            }                                                                                          \
            if (c < n_changes) w = change_w[c];                                                        \
        }                                                                                              \
        if (n > 0) excl[cur] = x, events[cur] += ev, rows[cur] += k, held[cur] |= h;                   \
    }
INSTANCE_PASS(int16_t, i16)
INSTANCE_PASS(int32_t, i32)
INSTANCE_PASS(int64_t, i64)

/* Over every row in order, its segment's length d as a double (as windows_instance_rows works it
 * out, from ``seg``); where its instance is ``kept`` (indexed by instance + 1), d times what the
 * instance keeps, keep[instance + 1] (1 - cut / excl, made by numpy), and the row is listed in
 * ``kept_rows``; then where the row is counted (as in instance_sums), its key's (key[instance + 1])
 * full_time += d and full_events += coll: the current key's sums held while its rows run (the
 * same additions in the same order), written back where another key's rows begin. Returns the rows
 * listed. Mirrors estimate's ``dur[kept_rows] *= kept`` over Timeline.float_duration's column and
 * its loop of np.add.at(full_time) and np.bincount(full_events). */
#define COUNTED_ROWS                                                                                   \
    for (; r < main_stop; r++) {                                                                       \
        int64_t o = (int64_t)op[r];                                                                    \
        double d = (double)(seg_walk_end(&ends, r) - ts[r]);                                           \
        if (kept[o + 1]) {                                                                             \
            d *= keep[o + 1];                                                                          \
            kept_rows[n_kept++] = r;                                                                   \
        }                                                                                              \
        if (full_row[r] && (o >= 0 || on_main)) {                                                      \
            int64_t k = key[o + 1];                                                                    \
            if (k != cur) {                                                                            \
                if (cur >= 0) full_time[cur] = x, full_events[cur] += ev;                              \
                cur = k, x = full_time[k], ev = 0;                                                     \
            }                                                                                          \
            x += d;                                                                                    \
            ev += coll[r];                                                                             \
        }                                                                                              \
    }
#define COUNTED_SUMS(T, SUFFIX)                                                                        \
    int64_t windows_counted_sums_##SUFFIX(                                                             \
        int64_t n, const T *op, const Segments *seg, const uint8_t *coll, const uint8_t *full_row,     \
        int64_t n_ranges, const int64_t *ranges, const uint8_t *kept, const double *keep,              \
        const int64_t *key, double *full_time, int64_t *full_events, int64_t *kept_rows) {             \
        MAIN_INIT;                                                                                     \
        const int64_t *ts = seg->ts;                                                                   \
        SegWalk ends = seg_walk(seg, 0);                                                               \
        int64_t n_kept = 0, cur = -1, ev = 0, r = 0;                                                   \
        double x = 0.0;                                                                                \
        while (r < n) { /* the rows on or off the main thread */                                       \
            MAIN_AT(r);                                                                                \
            COUNTED_ROWS                                                                               \
        }                                                                                              \
        if (cur >= 0) full_time[cur] = x, full_events[cur] += ev;                                      \
        return n_kept;                                                                                 \
    }
COUNTED_SUMS(int16_t, i16)
COUNTED_SUMS(int32_t, i32)
COUNTED_SUMS(int64_t, i64)

/* out[r] = per_inst[op[r] + 1] where the row is counted (as in instance_sums), else 1.
 * Mirrors _counted_factor's np.where(counted, per_op[op], 1.0). */
#define COUNTED_FACTOR(T, SUFFIX)                                                                      \
    void windows_counted_factor_##SUFFIX(int64_t n, const T *op, const uint8_t *full_row,              \
                                         int64_t n_ranges, const int64_t *ranges,                      \
                                         const double *per_inst, double *out) {                        \
        Ranges main = {ranges, n_ranges, 0};                                                           \
        for (int64_t r = 0; r < n; r++) {                                                              \
            int64_t o = (int64_t)op[r];                                                                \
            int on_main = in_ranges(&main, r);                                                         \
            out[r] = full_row[r] && (o >= 0 || on_main) ? per_inst[o + 1] : 1.0;                       \
        }                                                                                              \
    }
COUNTED_FACTOR(int16_t, i16)
COUNTED_FACTOR(int32_t, i32)
COUNTED_FACTOR(int64_t, i64)

/* Per window (wi: row_window's value, 0 before the first switch), when its collectors were first
 * seen: over the collector rows (coll) in order, the first of each run of one thread and one window
 * starts at its thread's previous row (its own start on a thread's first row), never before its
 * window's start ``lo[wi]``, and ``live[wi]`` keeps the earliest. ``starts``: each thread's first
 * row, then the row count (tl.thread_starts). Mirrors _live_from's numpy passes and np.minimum.at. */
#define LIVE_FROM(T, SUFFIX)                                                                           \
    void windows_live_from_##SUFFIX(int64_t n, const uint8_t *coll, const T *wi, const int64_t *ts,    \
                                    int64_t n_threads, const int64_t *starts, const int64_t *lo,       \
                                    int64_t *live) {                                                   \
        int64_t t = 0, last_w = -1, last_t = -1;                                                       \
        for (int64_t r = 0; r < n; r++) {                                                              \
            if (!coll[r]) continue;                                                                    \
            while (t < n_threads && r >= starts[t + 1]) t++;                                           \
            int64_t w = (int64_t)wi[r];                                                                \
            if (w == last_w && t == last_t) continue;                                                  \
            last_w = w, last_t = t;                                                                    \
            int64_t start = r > starts[t] ? ts[r - 1] : ts[r];                                         \
            if (start < lo[w]) start = lo[w];                                                          \
            if (start < live[w]) live[w] = start;                                                      \
        }                                                                                              \
    }
LIVE_FROM(int16_t, i16)
LIVE_FROM(int32_t, i32)
LIVE_FROM(int64_t, i64)

/* Per piece p = chosen[j] (ascending; its rows: bounds[p] to bounds[p + 1], after ``first``), in
 * row order, with d its segment's length as a double (from ``seg``), times kept[k] where r is
 * kept_rows[k] (ascending: the rows whose instance keeps less than its time, and that share; walked
 * beside the pieces' rows): time[j] += d, full_time[j] += (full_row ? d : 0), full_events[j] +=
 * coll && full_row. Mirrors _piece_sums' three np.bincount calls over the rows of each group of
 * pieces, on the column of lengths the numpy loops make and scale at kept_rows (_counted_sums). */
void windows_chosen_piece_sums(int64_t n_chosen, const int64_t *chosen, const int64_t *bounds,
                               int64_t first, const Segments *seg, int64_t n_kept, const int64_t *kept_rows,
                               const double *kept, const uint8_t *coll, const uint8_t *full_row,
                               double *time, double *full_time, int64_t *full_events) {
    const int64_t *ts = seg->ts;
    SegWalk ends = seg_walk(seg, n_chosen > 0 ? first + bounds[chosen[0]] : 0);
    int64_t k = 0;
    for (int64_t j = 0; j < n_chosen; j++) {
        int64_t p = chosen[j], r = first + bounds[p], stop = first + bounds[p + 1];
        double s = 0.0, f = 0.0;
        int64_t e = 0;
        while (k < n_kept && kept_rows[k] < r) k++;
        for (;;) { /* the rows up to the next kept one (a few of the rows), then that one */
            int64_t until = k < n_kept && kept_rows[k] < stop ? kept_rows[k] : stop;
            for (; r < until; r++) {
                double d = (double)(seg_walk_end(&ends, r) - ts[r]);
                s += d;
                f += full_row[r] ? d : 0.0;
                e += coll[r] & full_row[r];
            }
            if (r == stop) break;
            double d = (double)(seg_walk_end(&ends, r) - ts[r]) * kept[k++];
            s += d;
            f += full_row[r] ? d : 0.0;
            e += coll[r] & full_row[r];
            r++;
        }
        time[j] = s, full_time[j] = f, full_events[j] = e;
    }
}

/* factor[r] = piece_factor[j] over the rows of each piece p = chosen[j] whose row_mode is
 * ``full_mode``. Mirrors PieceEstimate.set_factors' loop over groups of pieces. */
void windows_set_piece_factors(int64_t n_chosen, const int64_t *chosen, const int64_t *bounds,
                               int64_t first, const int8_t *row_mode, int64_t full_mode,
                               const double *piece_factor, double *factor) {
    for (int64_t j = 0; j < n_chosen; j++) {
        int64_t p = chosen[j];
        for (int64_t r = first + bounds[p]; r < first + bounds[p + 1]; r++)
            if (row_mode[r] == full_mode) factor[r] = piece_factor[j];
    }
}

/* The rows (of ``n``, from the main thread's first) that begin a piece: the first, and each whose
 * kind is an anchor (anchor[(uint8_t)kind]) but for category rows (category[(uint8_t)kind]) of one
 * of the ``n_full_only`` categories. Writes up to ``cap`` of them into ``out``, returns how many
 * there are. Mirrors pieces()' kinds_among passes, its np.isin over the category rows and the
 * np.flatnonzero of the anchors. */
#define PIECE_STARTS(T, SUFFIX)                                                                        \
    int64_t windows_piece_starts_##SUFFIX(int64_t n, const int8_t *kind, const T *id,                  \
                                          const uint8_t *anchor, const uint8_t *category,              \
                                          int64_t n_full_only, const int64_t *full_only, int64_t cap,  \
                                          int64_t *out) {                                              \
        int64_t count = 0;                                                                             \
        for (int64_t r = 0; r < n; r++) {                                                              \
            uint8_t k = (uint8_t)kind[r];                                                              \
            int is = r == 0 || anchor[k];                                                              \
            if (is && r > 0 && category[k])                                                            \
                for (int64_t c = 0; c < n_full_only; c++)                                              \
                    if ((int64_t)id[r] == full_only[c]) is = 0;                                        \
            if (is) {                                                                                  \
                if (count < cap) out[count] = r;                                                       \
                count++;                                                                               \
            }                                                                                          \
        }                                                                                              \
        return count;                                                                                  \
    }
PIECE_STARTS(int16_t, i16)
PIECE_STARTS(int32_t, i32)
PIECE_STARTS(int64_t, i64)

/* Moves the k-th smallest of a[0..n) to a[k], the smaller ones before it, the larger after
 * (quickselect, the pivot the median of three). */
static void select_kth(double *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (hi > lo) {
        double x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi];
        double p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < p) i++;
            while (a[j] > p) j--;
            if (i <= j) {
                double t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
}

/* The k-th of v[0..n) in a stable sort's order, to the bit: selected in ``a`` (a copy of v, reordered),
 * and where it is a zero, the zero of that rank in v's order (0.0 and -0.0 compare equal: a stable
 * sort keeps them in the order they came). */
static double kth_stable(const double *v, double *a, int64_t n, int64_t k) {
    select_kth(a, n, k);
    if (a[k] != 0.0) return a[k];
    int64_t rank = k;
    for (int64_t i = 0; i < n; i++) rank -= v[i] < 0.0;
    for (int64_t i = 0; i < n; i++)
        if (v[i] == 0.0 && rank-- == 0) return v[i];
    return a[k];
}

/* Per group k (v[starts[k] .. starts[k] + count[k]), no NaN), its middle values, the ((count - 1) / 2)-th
 * and the (count / 2)-th of a stable sort, written to those places of the group in ``s`` (a copy of
 * v; its other places are left in any order). Mirrors the values _group_medians reads from
 * v[np.lexsort((v, g))] (g sorted: one run per group), without sorting the rest. */
void windows_group_middles(int64_t n_groups, const int64_t *starts, const int64_t *count, const double *v,
                           double *s) {
    for (int64_t k = 0; k < n_groups; k++) {
        int64_t a = starts[k], m = count[k];
        if (m <= 0) continue;
        double lo = kth_stable(v + a, s + a, m, (m - 1) / 2);
        double hi = kth_stable(v + a, s + a, m, m / 2);
        s[a + (m - 1) / 2] = lo;
        s[a + m / 2] = hi;
    }
}

/* Whether sorted a[0..n) holds v. */
static inline int sorted_has(const int64_t *a, int64_t n, int64_t v) {
    int64_t lo = search_left(a, n, v);
    return lo < n && a[lo] == v;
}

/* Per piece p (its rows: first + bounds[p] to first + bounds[p + 1]) whose owner is one of the
 * ``n_owners`` (sorted; n_owners < 0: every piece), in order, the j-th of them: index[j] = p;
 * owner[j] = inst_name[op[r]] of its first row r (-1 outside every instance); sig[j] = the
 * signature of r, kind * 2^32 + what it names (for a kind in ``named``, the name of instance id[r]
 * where there is one; for a kind in ``category``, id[r]; else 0); after[j] = the next piece's sig
 * (-1 for the last piece); start[j] = ts[r], end[j] = the end of its last row's segment, both on the
 * clock of ``raw`` (its segments: segments.h, the pieces' last rows read in order). Writes up to ``cap``
 * of them, returns how many there are. Mirrors pieces()' gathers, _signature's numpy passes over the
 * pieces' first rows and the selection of the owners' pieces (of_owners): columns of the pieces
 * asked only, not of every piece (the analysis's peak of memory is at them). */
#define PIECE_SIG(r, out)                                                                              \
    do {                                                                                               \
        int8_t k_ = kind[r];                                                                           \
        int64_t i_ = (int64_t)id[r], what_ = 0;                                                        \
        if (named[(uint8_t)k_] && i_ >= 0 && i_ < n_inst)                                              \
            what_ = inst_name[i_];                                                                     \
        else if (category[(uint8_t)k_])                                                                \
            what_ = i_;                                                                                \
        out = (int64_t)k_ * ((int64_t)1 << 32) + what_;                                                \
    } while (0)
#define PIECE_COLUMNS(T, SUFFIX)                                                                       \
    int64_t windows_piece_columns_##SUFFIX(                                                            \
        int64_t n_pieces, const int64_t *bounds, int64_t first, const T *op, const int8_t *kind,      \
        const T *id, const int64_t *inst_name, int64_t n_inst, const Segments *raw,                   \
        const uint8_t *named, const uint8_t *category, int64_t n_owners,                               \
        const int64_t *owners, int64_t cap, int64_t *index, int64_t *owner, int64_t *sig,              \
        int64_t *after, int64_t *start, int64_t *end) {                                                \
        int64_t m = 0;                                                                                 \
        SegWalk ends = seg_walk(raw, first);                                                           \
        for (int64_t p = 0; p < n_pieces; p++) {                                                       \
            int64_t r = first + bounds[p], o = (int64_t)op[r];                                         \
            int64_t own = o >= 0 ? inst_name[o] : -1;                                                  \
            if (n_owners >= 0 && !sorted_has(owners, n_owners, own)) continue;                         \
            if (m < cap) {                                                                             \
                int64_t next = first + bounds[p + 1];                                                  \
                index[m] = p;                                                                          \
                owner[m] = own;                                                                        \
                PIECE_SIG(r, sig[m]);                                                                  \
                if (p + 1 < n_pieces) PIECE_SIG(next, after[m]);                                       \
                else after[m] = -1;                                                                    \
                start[m] = raw->ts[r];                                                                 \
                end[m] = seg_walk_end(&ends, next - 1);                                                \
            }                                                                                          \
            m++;                                                                                       \
        }                                                                                              \
        return m;                                                                                      \
    }
PIECE_COLUMNS(int16_t, i16)
PIECE_COLUMNS(int32_t, i32)
PIECE_COLUMNS(int64_t, i64)

/* Per interval i (start[i], end[i]: an instance's or a piece's), with w = the switches (win_ts) at or
 * before its start: whether no switch falls inside it (whole[i], w == the switches before its end),
 * its mode (full where mode_of[w], the window's, is ``full`` and its collectors were live by then,
 * start >= live[w]; else ``light``) and its group, 2 w + (mode == full). Mirrors the searchsorted
 * calls and _effective_mode of estimate and piece_estimates (_placed). Each search is made only where
 * the last interval's answer is not this one's (pieces come in time order: hundreds of thousands
 * of them among hundreds of switches). */
void windows_place(int64_t n, const int64_t *start, const int64_t *end, int64_t n_win, const int64_t *win_ts,
                   const int64_t *mode_of, const int64_t *live, int64_t full, int64_t light, uint8_t *whole,
                   int64_t *mode, int64_t *group) {
    int64_t w = 0, w_end = 0; /* the last interval's */
    for (int64_t i = 0; i < n; i++) {
        int64_t t = start[i], u = end[i];
        /* w: win_ts[w - 1] <= t < win_ts[w]; w_end: win_ts[w_end - 1] < u <= win_ts[w_end] */
        if ((w > 0 && win_ts[w - 1] > t) || (w < n_win && t >= win_ts[w])) w = search_right(win_ts, n_win, t);
        if ((w_end > 0 && win_ts[w_end - 1] >= u) || (w_end < n_win && u > win_ts[w_end]))
            w_end = search_left(win_ts, n_win, u);
        int64_t m = mode_of[w] == full && t >= live[w] ? full : light;
        whole[i] = w == w_end;
        mode[i] = m;
        group[i] = 2 * w + (m == full);
    }
}

/* out[r] = the switches (win_ts, sorted) at or before ts[r]: np.searchsorted(win_ts, ts, "right"), a
 * search only where the last row's answer is not this one's (a thread's rows come in time order).
 * Mirrors row_window's searches per thread (both of its ways give these values). */
#define ROW_WINDOW(T, SUFFIX)                                                                          \
    void windows_row_window_##SUFFIX(int64_t n, const int64_t *ts, int64_t n_win, const int64_t *win_ts, \
                                     T *out) {                                                         \
        int64_t w = 0;                                                                                 \
        for (int64_t r = 0; r < n; r++) {                                                              \
            int64_t t = ts[r];                                                                         \
            if ((w > 0 && win_ts[w - 1] > t) || (w < n_win && t >= win_ts[w]))                         \
                w = search_right(win_ts, n_win, t);                                                    \
            out[r] = (T)w;                                                                             \
        }                                                                                              \
    }
ROW_WINDOW(int16_t, i16)
ROW_WINDOW(int32_t, i32)
ROW_WINDOW(int64_t, i64)

/* One more value into a hash. */
static inline uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 29);
}

/* The dense id of each distinct (a[i], b[i], c[i]) in order of first appearance: id[i], and rep[k] =
 * the first i of id k; returns the number of ids, or -1 where they fill more than half of the hash
 * table ``slot`` (``n_slots`` entries, a power of two, each -1 on entry; of 2 n entries or more, it is
 * never that full): the caller asks again with a larger one. The ids, ranked by their triples, are
 * pieces()' factorize_rows(np.stack([a, b, c])) classes (pieces.py sorts the few distinct triples). */
int64_t windows_distinct_triples(int64_t n, const int64_t *a, const int64_t *b, const int64_t *c,
                                 int64_t n_slots, int64_t *slot, int64_t *id, int64_t *rep) {
    int64_t count = 0;
    uint64_t mask = (uint64_t)n_slots - 1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t s = mix(mix(mix(0, (uint64_t)a[i]), (uint64_t)b[i]), (uint64_t)c[i]) & mask;
        for (;; s = (s + 1) & mask) {
            int64_t k = slot[s];
            if (k < 0) {
                if (2 * (count + 1) > n_slots) return -1;
                slot[s] = count;
                rep[count] = i;
                id[i] = count++;
                break;
            }
            int64_t j = rep[k];
            if (a[j] == a[i] && b[j] == b[i] && c[j] == c[i]) {
                id[i] = k;
                break;
            }
        }
    }
    return count;
}

/* The collector loops' row tests. Per expensive collector c (0: the backend's rows, a BACKEND_BEGIN
 * row or a CAT_BEGIN row of the backend category; 1: the GPU's, an API_BEGIN row): whether a row
 * opens one of its intervals (COLLECTOR_ROW). Rows are read COLLECTOR_BLOCK at a time in a loop of
 * fixed length that the compiler turns into vector instructions (nearly half the rows of a trace are
 * the backend's: a branch per row would be mispredicted); a block within one window (nearly all)
 * looks its window up once. */
#define COLLECTOR_BLOCK 64
/* The codes in the columns' own types (compared at their width: the vectors hold more rows), each
 * with whether it fits there (a code that does not is in no row). */
#define COLLECTOR_CODES(T)                                                                             \
    const int8_t kb = (int8_t)backend_begin, kc = (int8_t)cat_begin, ka = (int8_t)api_begin;           \
    const T be = (T)backend;                                                                           \
    const uint8_t kb_ok = kb == backend_begin, kc_ok = kc == cat_begin && be == backend,               \
                  ka_ok = ka == api_begin
#define COLLECTOR_ROW(k, id_r, b, g)                                                                   \
    uint8_t b = (uint8_t)((((k) == kb) & kb_ok) | (((k) == kc) & ((id_r) == be) & kc_ok));             \
    uint8_t g = (uint8_t)(((k) == ka) & ka_ok)

/* out[r] = whether row r opens an interval of a switched collector: the backend's (backend_on) or
 * the GPU's (gpu_on), as COLLECTOR_ROW tells them. Mirrors collector_rows' OR of the
 * collector_kinds columns; in blocks of fixed length, as windows_collector_flags_ts. */
#define COLLECTOR_ROWS(T, SUFFIX)                                                                      \
    void windows_collector_rows_##SUFFIX(int64_t n, const int8_t *restrict kind, const T *restrict id, \
                                         int64_t backend_on, int64_t gpu_on, int64_t backend_begin,    \
                                         int64_t cat_begin, int64_t backend, int64_t api_begin,        \
                                         uint8_t *restrict out) {                                      \
        COLLECTOR_CODES(T);                                                                            \
        uint8_t b_on = backend_on != 0, g_on = gpu_on != 0;                                            \
        int64_t r = 0;                                                                                 \
        for (; r + COLLECTOR_BLOCK <= n; r += COLLECTOR_BLOCK)                                         \
            for (int j = 0; j < COLLECTOR_BLOCK; j++) {                                                \
                int8_t k = kind[r + j];                                                                \
                COLLECTOR_ROW(k, id[r + j], b, g);                                                     \
                out[r + j] = (uint8_t)((b & b_on) | (g & g_on));                                       \
            }                                                                                          \
        for (; r < n; r++) {                                                                           \
            int8_t k = kind[r];                                                                        \
            COLLECTOR_ROW(k, id[r], b, g);                                                             \
            out[r] = (uint8_t)((b & b_on) | (g & g_on));                                               \
        }                                                                                              \
    }
COLLECTOR_ROWS(int16_t, i16)
COLLECTOR_ROWS(int32_t, i32)
COLLECTOR_ROWS(int64_t, i64)

/* Over rows [start, stop) (the main thread's): out[0] = the sum of their segments' lengths (seg:
 * segments.h), out[1] = that sum over the rows whose row_mode is ``full_mode``. Whole ns in
 * integers, exact in any order. Mirrors full_share's integer sums a block of rows at a time. */
void windows_full_share(int64_t start, int64_t stop, const Segments *seg, const int8_t *row_mode,
                        int64_t full_mode, int64_t *out) {
    int64_t total = 0, full = 0;
    SegWalk ends = seg_walk(seg, start);
    for (int64_t r = start; r < stop; r++) {
        int64_t d = seg_walk_end(&ends, r) - seg->ts[r];
        total += d;
        full += row_mode[r] == full_mode ? d : 0;
    }
    out[0] = total, out[1] = full;
}

/* windows_collector_rows and windows_live_from in one pass: out[r] as windows_collector_rows writes it
 * (its blocks of fixed length), and over the rows it marks, in order, live[w] as windows_live_from
 * keeps it (``starts``: each thread's first row, then the row count; ``lo``: each window's start).
 * Each row's window w (row_window's value) is read from the rows where it changes (change_row[],
 * ascending from row 0, with their w in change_w[]: windows_collector_flags_ts), not from a column of
 * every row. In a block of one window and one thread (nearly all), only its first collector row can
 * begin a run: the rows after it are not visited (a test per row, the collector rows a random half
 * of them, was most of the pass). Mirrors estimate's collector_rows then _live_from. */
#define COLLECTOR_LIVE(T, SUFFIX)                                                                      \
    void windows_collector_live_##SUFFIX(                                                              \
        int64_t n, const int8_t *restrict kind, const T *restrict id, int64_t backend_on,              \
        int64_t gpu_on, int64_t backend_begin, int64_t cat_begin, int64_t backend, int64_t api_begin,  \
        int64_t n_changes, const int64_t *restrict change_row, const int64_t *restrict change_w,       \
        const int64_t *restrict ts, int64_t n_threads, const int64_t *restrict starts,                 \
        const int64_t *restrict lo, uint8_t *restrict out, int64_t *restrict live) {                   \
        COLLECTOR_CODES(T);                                                                            \
        uint8_t b_on = backend_on != 0, g_on = gpu_on != 0;                                            \
        int64_t t = 0, last_w = -1, last_t = -1, w = 0, k = 0;                                         \
        for (int64_t r = 0; r < n; r += COLLECTOR_BLOCK) {                                             \
            int64_t m = n - r < COLLECTOR_BLOCK ? n - r : COLLECTOR_BLOCK;                             \
            uint8_t any = 0;                                                                           \
            while (k < n_changes && change_row[k] <= r) w = change_w[k++]; /* the window at r */       \
            if (m == COLLECTOR_BLOCK)                                                                  \
                for (int j = 0; j < COLLECTOR_BLOCK; j++) {                                            \
                    int8_t kk = kind[r + j];                                                           \
                    COLLECTOR_ROW(kk, id[r + j], b, g);                                                \
                    uint8_t x = (uint8_t)((b & b_on) | (g & g_on));                                    \
                    out[r + j] = x;                                                                    \
                    any |= x;                                                                          \
                }                                                                                      \
            else                                                                                       \
                for (int64_t j = 0; j < m; j++) {                                                      \
                    int8_t kk = kind[r + j];                                                           \
                    COLLECTOR_ROW(kk, id[r + j], b, g);                                                \
                    uint8_t x = (uint8_t)((b & b_on) | (g & g_on));                                    \
                    out[r + j] = x;                                                                    \
                    any |= x;                                                                          \
                }                                                                                      \
            if (!any) continue;                                                                        \
            while (t < n_threads && r >= starts[t + 1]) t++;                                           \
            if ((k >= n_changes || change_row[k] >= r + m) && r + m <= starts[t + 1]) {                \
                /* one window and one thread: only the block's first collector row can begin a run    \
                 * (the others are of the same one), the others are not visited */                    \
                int64_t q = r;                                                                         \
                while (!out[q]) q++;                                                                   \
                if (w == last_w && t == last_t) continue;                                              \
                last_w = w, last_t = t;                                                                \
                int64_t start = q > starts[t] ? ts[q - 1] : ts[q];                                     \
                if (start < lo[w]) start = lo[w];                                                      \
                if (start < live[w]) live[w] = start;                                                  \
                continue;                                                                              \
            }                                                                                          \
            int64_t kq = k, v = w; /* the block's rows' windows, from its first row's on */            \
            for (int64_t q = r; q < r + m; q++) { /* windows_live_from's step, at a collector row */   \
                while (kq < n_changes && change_row[kq] <= q) v = change_w[kq++];                      \
                if (!out[q]) continue;                                                                 \
                while (t < n_threads && q >= starts[t + 1]) t++;                                       \
                if (v == last_w && t == last_t) continue;                                              \
                last_w = v, last_t = t;                                                                \
                int64_t start = q > starts[t] ? ts[q - 1] : ts[q];                                     \
                if (start < lo[v]) start = lo[v];                                                      \
                if (start < live[v]) live[v] = start;                                                  \
            }                                                                                          \
        }                                                                                              \
    }
COLLECTOR_LIVE(int16_t, i16)
COLLECTOR_LIVE(int32_t, i32)
COLLECTOR_LIVE(int64_t, i64)

/* The estimate's factors in one pass over every row: out[r] = counted[op[r] + 1] where the row is
 * counted (as in instance_sums), else rest[op[r] + 1]; on the main thread's rows of each piece
 * p = compared[j] (ascending; its rows: first + bounds[p] to first + bounds[p + 1]), where full_row
 * is set, piece_factor[j] * rest[op[r] + 1] instead. With counted = per_inst * keep and rest = keep
 * (per instance + 1; 1 where it keeps all its time: x * 1 is x), these are _counted_factor's
 * factors, then PieceEstimate.set_factors' of each estimate, then ``factor[kept_rows] *= kept``, one
 * after another. The rows are walked a compared piece at a time: a test per row cost more than the
 * pass. */
#define FACTOR_ROW(r)                                                                                  \
    int64_t o = (int64_t)op[r];                                                                        \
    double f = full_row[r] && (o >= 0 || on_main) ? counted[o + 1] : rest[o + 1]
#define FACTOR_PASS(T, SUFFIX)                                                                         \
    void windows_factor_pass_##SUFFIX(int64_t n, const T *op, const uint8_t *full_row, int64_t n_ranges, \
                                      const int64_t *ranges, const double *counted, const double *rest,  \
                                      int64_t n_compared, const int64_t *compared, const int64_t *bounds, \
                                      int64_t first, const double *piece_factor, double *out) {          \
        MAIN_INIT;                                                                                     \
        int64_t r = 0, j = 0;                                                                          \
        while (r < n) { /* up to the next compared piece or its end, on or off the main thread */      \
            MAIN_AT(r);                                                                                \
            while (j < n_compared && r >= first + bounds[compared[j] + 1]) j++;                        \
            int64_t start = j < n_compared ? first + bounds[compared[j]] : n;                          \
            int in_piece = r >= start;                                                                 \
            int64_t stop = in_piece ? first + bounds[compared[j] + 1] : start;                         \
            stop = stop < main_stop ? stop : main_stop;                                                \
            if (!in_piece)                                                                             \
                for (; r < stop; r++) {                                                                \
                    FACTOR_ROW(r);                                                                     \
                    out[r] = f;                                                                        \
                }                                                                                      \
            else                                                                                       \
                for (; r < stop; r++) {                                                                \
                    FACTOR_ROW(r);                                                                     \
                    out[r] = full_row[r] ? piece_factor[j] * rest[o + 1] : f;                          \
                }                                                                                      \
        }                                                                                              \
    }
FACTOR_PASS(int16_t, i16)
FACTOR_PASS(int32_t, i32)
FACTOR_PASS(int64_t, i64)

/* Per begin row r = begins[i] (ascending: each search goes on from the last one's answer; else it
 * starts again): e, the last of ``ends`` at or before r (-1: none); w, the last of ``wins`` at or
 * before r (-1: none); s, its thread's first row (the last of ``starts``, each thread's first row
 * then the row count, at or before r). Then after[i] = w >= s && w > (e >= s ? e : -1) and pred[i]
 * = names[id[e]] where e >= s, else names[-1], with numpy's indexing of ``names`` (n_names + 1
 * entries, the last -2: id -1 reads it). Returns -1 where an index falls outside (numpy raises:
 * the caller runs it), else 0. Mirrors after_switch's searchsorted calls and gathers. */
#define AFTER_SWITCH(T, SUFFIX)                                                                        \
    int64_t windows_after_switch_##SUFFIX(                                                             \
        int64_t n, const int64_t *begins, int64_t n_ends, const int64_t *ends, int64_t n_wins,         \
        const int64_t *wins, int64_t n_threads, const int64_t *starts, const T *id, int64_t n_names,   \
        const int64_t *names, uint8_t *after, int64_t *pred) {                                         \
        int64_t a = 0, b = 0, t = 0, last = INT64_MIN;                                                 \
        for (int64_t i = 0; i < n; i++) {                                                              \
            int64_t r = begins[i];                                                                     \
            if (r < last) a = b = t = 0; /* not ascending: from the start again */                    \
            last = r;                                                                                  \
            while (a < n_ends && ends[a] <= r) a++;                                                    \
            while (b < n_wins && wins[b] <= r) b++;                                                    \
            while (t < n_threads && starts[t + 1] <= r) t++;                                           \
            int64_t e = a > 0 ? ends[a - 1] : -1, w = b > 0 ? wins[b - 1] : -1, s = starts[t];         \
            int has_pred = e >= s;                                                                     \
            after[i] = w >= s && w > (has_pred ? e : -1);                                              \
            int64_t k = has_pred ? (int64_t)id[e] : -1;                                                \
            if (k < 0) k += n_names + 1;                                                               \
            if (k < 0 || k > n_names) return -1;                                                       \
            pred[i] = names[k];                                                                        \
        }                                                                                              \
        return 0;                                                                                      \
    }
AFTER_SWITCH(int16_t, i16)
AFTER_SWITCH(int32_t, i32)
AFTER_SWITCH(int64_t, i64)

/* Per collector c (as COLLECTOR_ROW): whether a row opens one of its intervals (out[c]) and whether
 * one does in a light window (out[2 + c]: light[w], per row_window value); out[4]: whether any row is
 * in a light window. Mirrors toggled's columns of every row (collector_kinds, and ``light`` from
 * mode_table and row_window) and its any() over them, in one pass over the rows without row_window's
 * column: each row's window w found as windows_row_window finds it, a block's windows into a block
 * of their own. The rows where w changes (the first row, then each whose w is not the row before's)
 * are listed, up to ``cap`` of them, in change_row[] with their w in change_w[]; returns how many
 * there are. row_window's column is then made from them when asked (windows_fill_runs), not held
 * through the per-event correction that follows these flags, the analysis's peak of memory. */
#define COLLECTOR_FLAGS_TS(T, SUFFIX)                                                               \
    int64_t windows_collector_flags_ts_##SUFFIX(                                                          \
        int64_t n, const int8_t *restrict kind, const T *restrict id, const int64_t *restrict ts,      \
        int64_t n_win, const int64_t *restrict win_ts, const uint8_t *restrict light,                 \
        int64_t backend_begin, int64_t cat_begin, int64_t backend, int64_t api_begin,                  \
        uint8_t *restrict out, int64_t cap, int64_t *restrict change_row, int64_t *restrict change_w) { \
        COLLECTOR_CODES(T);                                                                            \
        uint8_t seen_b = 0, seen_g = 0, light_b = 0, light_g = 0, any_light = 0;                       \
        int64_t w = 0, last = -1, changes = 0;                                                         \
        int32_t wi[COLLECTOR_BLOCK]; /* the block's windows (fewer than 2^31: windows.py checks) */    \
        for (int64_t r = 0; r < n; r += COLLECTOR_BLOCK) {                                             \
            int64_t m = n - r < COLLECTOR_BLOCK ? n - r : COLLECTOR_BLOCK;                             \
            for (int64_t j = r; j < r + m; j++) { /* the block's windows, as windows_row_window */    \
                int64_t t = ts[j];                                                                     \
                if ((w > 0 && win_ts[w - 1] > t) || (w < n_win && t >= win_ts[w]))                     \
                    w = search_right(win_ts, n_win, t);                                                \
                wi[j - r] = (int32_t)w;                                                                \
                if (w != last) {                                                                       \
                    if (changes < cap) change_row[changes] = j, change_w[changes] = w;                 \
                    changes++;                                                                         \
                    last = w;                                                                          \
                }                                                                                      \
            }                                                                                          \
            if (m == COLLECTOR_BLOCK) {                                                                \
                uint8_t xb = 0, xg = 0;                                                                \
                int32_t lo = wi[0], hi = wi[0];                                                        \
                for (int j = 0; j < COLLECTOR_BLOCK; j++) {                                            \
                    int8_t k = kind[r + j];                                                            \
                    COLLECTOR_ROW(k, id[r + j], b, g);                                                 \
                    xb |= b;                                                                           \
                    xg |= g;                                                                           \
                    int32_t v = wi[j];                                                                 \
                    lo = v < lo ? v : lo;                                                              \
                    hi = v > hi ? v : hi;                                                              \
                }                                                                                      \
                seen_b |= xb;                                                                          \
                seen_g |= xg;                                                                          \
                if (lo == hi) {                                                                        \
                    uint8_t l = light[lo];                                                             \
                    light_b |= xb & l;                                                                 \
                    light_g |= xg & l;                                                                 \
                    any_light |= l;                                                                    \
                    continue;                                                                          \
                }                                                                                      \
            }                                                                                          \
            for (int64_t j = r; j < r + m; j++) { /* a block across a switch, or the last one */      \
                int8_t k = kind[j];                                                                    \
                COLLECTOR_ROW(k, id[j], b, g);                                                         \
                uint8_t l = light[wi[j - r]];                                                          \
                seen_b |= b;                                                                           \
                seen_g |= g;                                                                           \
                light_b |= b & l;                                                                      \
                light_g |= g & l;                                                                      \
                any_light |= l;                                                                        \
            }                                                                                          \
        }                                                                                              \
        out[0] = seen_b;                                                                               \
        out[1] = seen_g;                                                                               \
        out[2] = light_b;                                                                              \
        out[3] = light_g;                                                                              \
        out[4] = any_light;                                                                            \
        return changes;                                                                                \
    }
COLLECTOR_FLAGS_TS(int16_t, i16)
COLLECTOR_FLAGS_TS(int32_t, i32)
COLLECTOR_FLAGS_TS(int64_t, i64)

/* out[change_row[k] .. change_row[k + 1]) = change_w[k] (the last run to n): row_window's column
 * from the rows where it changes (windows_collector_flags_ts). Mirrors row_window's searches. */
#define FILL_RUNS(W, SUFFIX)                                                                           \
    void windows_fill_runs_##SUFFIX(int64_t n_runs, const int64_t *change_row, const int64_t *change_w, \
                                    int64_t n, W *out) {                                               \
        for (int64_t k = 0; k < n_runs; k++) {                                                         \
            int64_t stop = k + 1 < n_runs ? change_row[k + 1] : n;                                     \
            W v = (W)change_w[k];                                                                      \
            for (int64_t r = change_row[k]; r < stop; r++) out[r] = v;                                 \
        }                                                                                              \
    }
FILL_RUNS(int16_t, i16)
FILL_RUNS(int32_t, i32)

/* Per row r, with w its window (the switches at or before ts[r], as windows_row_window finds it):
 * the rows whose segment may end in another window than it starts in (the next row in another window
 * or not starting at the row's segment end (seg: segments.h), and the last row), up to ``cap`` of
 * them into rows[] with their w in row_w[]. Returns how many there are. Mirrors full_fraction's
 * _crossing_rows and wi[rows] (over row_window's column), without that column. */
int64_t windows_full_fraction_rows(int64_t n, const Segments *seg, int64_t n_win, const int64_t *win_ts,
                                   int64_t cap, int64_t *rows, int64_t *row_w) {
    const int64_t *ts = seg->ts;
    SegWalk ends = seg_walk(seg, 0);
    int64_t m = 0, next = n > 0 ? search_right(win_ts, n_win, ts[0]) : 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t w = next;
        int cross = r + 1 == n;
        if (!cross) {
            int64_t t = ts[r + 1];
            if ((next > 0 && win_ts[next - 1] > t) || (next < n_win && t >= win_ts[next]))
                next = search_right(win_ts, n_win, t);
            cross = next != w;
            if (r == ends.next) { /* a thread's last row: its segment ends where the thread does */
                cross |= ends.end[ends.k] != t;
                ends = seg_walk_from(ends, r + 1);
            }
        }
        if (cross) {
            if (m < cap) rows[m] = r, row_w[m] = w;
            m++;
        }
    }
    return m;
}

/* Per begin row b = begins[i]: before[i] = op[b - 1] where that row is on b's thread (thread[b - 1]
 * == thread[b]; b > 0), else -1; with k = id[b] (numpy's indexing: -1 reads the last of the n_inst
 * + 1 entries), parent_of[k] = before[i] (a later begin of the same k over an earlier one's) and
 * inner[i] = names[k]. Returns -1 where k falls outside (numpy raises: the caller runs it), else 0.
 * Mirrors nested_names' gathers of the begins' rows and the rows before them. */
#define NESTED_BEGINS(T, H, SUFFIX)                                                                    \
    int64_t windows_nested_begins_##SUFFIX(int64_t n, const int64_t *begins, const T *op, const T *id, \
                                           const H *thread, int64_t n_inst, const int64_t *names,      \
                                           int64_t *before, int64_t *parent_of, int64_t *inner) {      \
        for (int64_t i = 0; i < n; i++) {                                                              \
            int64_t b = begins[i], k = (int64_t)id[b];                                                 \
            before[i] = b > 0 && thread[b - 1] == thread[b] ? (int64_t)op[b - 1] : -1;                 \
            if (k < 0) k += n_inst + 1;                                                                \
            if (k < 0 || k > n_inst) return -1;                                                        \
            parent_of[k] = before[i];                                                                  \
            inner[i] = names[k];                                                                       \
        }                                                                                              \
        return 0;                                                                                      \
    }
NESTED_BEGINS(int16_t, int16_t, i16_i16)
NESTED_BEGINS(int32_t, int16_t, i32_i16)
NESTED_BEGINS(int64_t, int16_t, i64_i16)
NESTED_BEGINS(int16_t, int32_t, i16_i32)
NESTED_BEGINS(int32_t, int32_t, i32_i32)
NESTED_BEGINS(int64_t, int32_t, i64_i32)
NESTED_BEGINS(int16_t, int64_t, i16_i64)
NESTED_BEGINS(int32_t, int64_t, i32_i64)
NESTED_BEGINS(int64_t, int64_t, i64_i64)
