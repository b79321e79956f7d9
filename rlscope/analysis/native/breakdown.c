/* The breakdown's loops (rlscope/analysis/breakdown.py and noise.py): the sums over a timeline's
 * counted rows, those of positive duration whose pair (RowGroups.row_pair) is >= 0, and over its
 * operation instances for the noise of each sum. The pairs come a run of rows at a time (RowGroups.runs:
 * each run's first row, ascending, from row 0; run_pair: the run's pair), as the rows of a run share
 * theirs: no column of a pair per row is made, and the rows of a run of no pair are never read. A row
 * is on the main thread when it lies in [main_lo, main_hi) (Timeline.main_rows: a timeline's rows are
 * grouped by thread). The rows' times and segment ends are read off ``Segments`` (segments.h: a
 * segment ends where the next row on its thread starts; n rows). Last, the instances' loops of the
 * interval tables (rlscope/analysis/intervals.py), which read the same operation begins. */
#include <stdint.h>

#include "segments.h"

/* _counted_sums' loop: per counted row, its duration (ns) added to sums[(pair * ncat + cat) * 2 + main]
 * and, where its pair is an operation's (is_op), to inst_cat[op * width + col[cat]] (col: each
 * category's column among the width an instance has, CountedSums.inst_col). Every value is a whole
 * number of ns, so the sums are exact in any order, as the numpy version's bincounts per block are.
 * With full (with_full: 1; else an empty array, as full_sums), also the duration times the row's share
 * in full windows added to full_sums at the sums' cell, in row order (the products are fractions of a
 * ns: the additions are those np.add.at makes in _full_window_sums). Returns whether a counted row is
 * off the main thread (CountedSums.off_main); -1 at an operation's row of a category of no column. */
int64_t breakdown_counted_sums(const Segments *s, int64_t n_runs, const int64_t *runs, const int32_t *run_pair,
                               const int8_t *cat, const int32_t *op, int64_t main_lo, int64_t main_hi,
                               const uint8_t *is_op, int64_t ncat, double *sums, int64_t width, const int64_t *col,
                               double *inst_cat, int64_t with_full, const double *full, double *full_sums) {
    const int64_t n = s->n, *ts = s->ts;
    SegWalk at = seg_walk(s, 0);
    int64_t off_main = 0;
    for (int64_t k = 0; k < n_runs; k++) {
        int32_t pair = run_pair[k];
        if (pair < 0)
            continue;
        int64_t hi = k + 1 < n_runs ? runs[k + 1] : n;
        for (int64_t i = runs[k]; i < hi; i++) {
            int64_t d = seg_walk_end(&at, i) - ts[i];
            if (d <= 0)
                continue;
            int64_t main = i >= main_lo && i < main_hi;
            off_main |= !main;
            int64_t cell = ((int64_t)pair * ncat + cat[i]) * 2 + main;
            double w = (double)d;
            sums[cell] += w;
            if (is_op[pair] && op[i] >= 0) { /* op >= 0 in an operation's pair: kept in bounds regardless */
                if (col[cat[i]] < 0)
                    return -1;
                inst_cat[(int64_t)op[i] * width + col[cat[i]]] += w;
            }
            if (with_full)
                full_sums[cell] += w * full[i];
        }
    }
    return off_main;
}

/* Each row's share in full windows, in ascending rows (FullFraction): crossing row cross_rows[k]
 * (ascending) has cross_val[k], any other at_mode[w], w its window: how many of the n_win switches
 * win_ts (ascending) come at or before its time t. The walk keeps the last window's bounds [lo, hi)
 * and its share, searched again only where t falls outside, and the next crossing row. */
typedef struct {
    int64_t n_win, n_cross, k, next, lo, hi;
    const int64_t *win_ts, *cross_rows;
    const double *at_mode, *cross_val;
    double share;
} ShareWalk;

static inline ShareWalk share_walk(int64_t n_win, const int64_t *win_ts, const double *at_mode, int64_t n_cross,
                                   const int64_t *cross_rows, const double *cross_val) {
    ShareWalk s = {n_win, n_cross, 0, n_cross > 0 ? cross_rows[0] : INT64_MAX, 0, -1, win_ts, cross_rows,
                   at_mode, cross_val, 0.0};
    return s; /* lo > hi: the first row searches */
}

/* Row i's share (t: its time; rows ascending). Mirrors FullFraction.column: at_mode[row_window], the
 * crossing rows' values written over it. */
static inline double share_at(ShareWalk *s, int64_t i, int64_t t) {
    if (__builtin_expect(i >= s->next, 0)) {
        while (s->k < s->n_cross && s->cross_rows[s->k] < i)
            s->k++;
        s->next = s->k < s->n_cross ? s->cross_rows[s->k] : INT64_MAX;
        if (s->next == i)
            return s->cross_val[s->k];
    }
    if (__builtin_expect(t < s->lo || t >= s->hi, 0)) {
        int64_t lo = search_right(s->win_ts, s->n_win, t); /* the first switch after t */
        s->lo = lo > 0 ? s->win_ts[lo - 1] : INT64_MIN;
        s->hi = lo < s->n_win ? s->win_ts[lo] : INT64_MAX;
        s->share = s->at_mode[lo];
    }
    return s->share;
}

/* breakdown_counted_sums over two timelines of the same rows, grouped alike (the raw one, a, ``s``, and
 * its corrected one, b, ``s_b``: the correction retimes the rows and keeps them, so the two have the
 * same threads' last rows, read off a's), in one pass: a row's pair,
 * category, operation instance and thread side read once for both. Per timeline, the sums
 * breakdown_counted_sums writes, each cell's additions in row order as there; with_full and
 * full_sums as there, of b, each row's share in full windows worked out on the way (share_at: the
 * windows' switches win_ts, at_mode per window, the crossing rows and their shares; no column of
 * them). Returns whether a counted row of a is off the main thread (bit 0),
 * and of b (bit 1); -1 at an operation's row of a category of no column. */
int64_t breakdown_counted_pair(const Segments *s, int64_t n_runs, const int64_t *runs, const int32_t *run_pair,
                               const int8_t *cat, const int32_t *op, int64_t main_lo, int64_t main_hi,
                               const uint8_t *is_op, int64_t ncat, double *sums, int64_t width, const int64_t *col,
                               double *inst_cat, const Segments *s_b, double *sums_b, double *inst_cat_b,
                               int64_t with_full, int64_t n_win, const int64_t *win_ts, const double *at_mode,
                               int64_t n_cross, const int64_t *cross_rows, const double *cross_val,
                               double *full_sums) {
    const int64_t n = s->n, *ts = s->ts, *ts_b = s_b->ts;
    ShareWalk shares = share_walk(n_win, win_ts, at_mode, n_cross, cross_rows, cross_val);
    const int64_t *end_b = s_b->end;
    SegWalk at = seg_walk(s, 0); /* b's rows end where a's do: at the next row, or at b's thread's end */
    int64_t off_main = 0, off_main_b = 0;
    for (int64_t k = 0; k < n_runs; k++) {
        int32_t pair = run_pair[k];
        if (pair < 0)
            continue;
        int64_t hi = k + 1 < n_runs ? runs[k + 1] : n;
        for (int64_t i = runs[k]; i < hi; i++) {
            int64_t d, d_b;
            if (__builtin_expect(i < at.next, 1)) {
                d = ts[i + 1] - ts[i], d_b = ts_b[i + 1] - ts_b[i];
            } else {
                d = seg_walk_end(&at, i) - ts[i];
                d_b = (at.next == i ? end_b[at.k] : ts_b[i + 1]) - ts_b[i];
            }
            if (d <= 0 && d_b <= 0)
                continue;
            int64_t main = i >= main_lo && i < main_hi;
            int64_t cell = ((int64_t)pair * ncat + cat[i]) * 2 + main;
            /* op >= 0 in an operation's pair: kept in bounds regardless */
            int64_t inst = -1;
            if (is_op[pair] && op[i] >= 0) {
                if (col[cat[i]] < 0)
                    return -1;
                inst = (int64_t)op[i] * width + col[cat[i]];
            }
            if (d > 0) {
                double w = (double)d;
                off_main |= !main;
                sums[cell] += w;
                if (inst >= 0)
                    inst_cat[inst] += w;
            }
            if (d_b > 0) {
                double w = (double)d_b;
                off_main_b |= !main;
                sums_b[cell] += w;
                if (inst >= 0)
                    inst_cat_b[inst] += w;
                if (with_full)
                    full_sums[cell] += w * share_at(&shares, i, ts[i]);
            }
        }
    }
    return off_main | off_main_b << 1;
}

/* The noise's per-instance passes (rlscope/analysis/noise.py, _moments): over the instances whose
 * group is >= 0 (x: n_inst by ncol, row-major), those in the spread (spread) and those left out.
 * Writes, per group and column: mean, the spread instances' mean (their sum in instance order over
 * n, the count in the spread: np.bincount then np.divide); ss, their squared deviations from it;
 * excess, what each instance left out is above it, floored at 0 (np.maximum keeps a NaN); and per
 * batch-means block (max_blocks a group: each spread instance's rank in its group by time, from
 * order, the spread instances sorted by (group, time), times the group's blocks over n), its sum
 * (bsum) and instances (size). Every sum in instance order, as numpy's bincounts over the gathered
 * instances make them. key: scratch, one per instance. mean, ss, excess, bsum, size: zeroed. */
void breakdown_noise_moments(int64_t n_inst, int64_t ncol, const int64_t *group, const uint8_t *spread,
                             const double *x, int64_t m, const int64_t *order, int64_t n_groups, const double *n,
                             const int64_t *blocks, int64_t max_blocks, double *mean, double *ss, double *excess,
                             int64_t *key, double *bsum, double *size) {
    for (int64_t i = 0; i < n_inst; i++) {
        if (group[i] < 0 || !spread[i])
            continue;
        const double *row = x + i * ncol;
        double *cell = mean + group[i] * ncol;
        for (int64_t c = 0; c < ncol; c++)
            cell[c] += row[c];
    }
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t c = 0; c < ncol; c++)
            mean[g * ncol + c] = n[g] > 0 ? mean[g * ncol + c] / n[g] : 0.0;
    for (int64_t i = 0; i < n_inst; i++) {
        if (group[i] < 0)
            continue;
        const double *row = x + i * ncol, *mu = mean + group[i] * ncol;
        double *cell = (spread[i] ? ss : excess) + group[i] * ncol;
        for (int64_t c = 0; c < ncol; c++) {
            double d = row[c] - mu[c];
            cell[c] += spread[i] ? d * d : (d >= 0.0 || d != d) ? d : 0.0;
        }
    }
    for (int64_t i = 0; i < n_inst; i++)
        key[i] = -1;
    for (int64_t k = 0, first = 0; k < m; k++) {
        int64_t i = order[k], g = group[i];
        if (k > 0 && g != group[order[k - 1]])
            first = k;
        int64_t nb = blocks[g];
        if (nb >= 2)
            key[i] = g * max_blocks + (k - first) * nb / (int64_t)(n[g] > 1.0 ? n[g] : 1.0);
    }
    for (int64_t i = 0; i < n_inst; i++) {
        if (key[i] < 0)
            continue;
        const double *row = x + i * ncol;
        double *cell = bsum + key[i] * ncol;
        size[key[i]] += 1.0;
        for (int64_t c = 0; c < ncol; c++)
            cell[c] += row[c];
    }
}

/* noise.variance_and_one_time's split of the instances (noise._spread) where the kept ones (group >= 0)
 * come in time order: their (group, time) order is then their order by group, ties in instance order,
 * made by counting where numpy sorts. Per group: total, its kept instances; n, those in the spread. Per
 * instance, in_spread: kept, not one_time (with_one_time), not its group's first, as _spread leaves
 * them; every kept one of a group with fewer than min_spread such. order: the spread instances by
 * group, in instance order within one (first: scratch, n_groups). total, n, in_spread: zeroed. Returns
 * how many are in the spread; -1 where a kept instance's time is below the one's before it, -2 at a
 * group of n_groups or more (numpy's sort and counts run). */
int64_t breakdown_noise_spread(int64_t n_inst, const int64_t *group, const int64_t *when, int64_t with_one_time,
                               const uint8_t *one_time, int64_t n_groups, int64_t min_spread, int64_t *total,
                               double *n, uint8_t *in_spread, int64_t *first, int64_t *order) {
    int64_t last = INT64_MIN;
    for (int64_t g = 0; g < n_groups; g++)
        first[g] = -1;
    for (int64_t i = 0; i < n_inst; i++) {
        int64_t g = group[i];
        if (g < 0)
            continue;
        if (g >= n_groups)
            return -2;
        if (when[i] < last)
            return -1;
        last = when[i];
        if (total[g]++ == 0)
            first[g] = i;
        in_spread[i] = !(with_one_time && one_time[i]);
    }
    for (int64_t g = 0; g < n_groups; g++)
        if (first[g] >= 0)
            in_spread[first[g]] = 0;
    for (int64_t i = 0; i < n_inst; i++)
        if (group[i] >= 0)
            n[group[i]] += in_spread[i];
    for (int64_t i = 0; i < n_inst; i++)
        if (group[i] >= 0 && n[group[i]] < (double)min_spread)
            in_spread[i] = 1;
    int64_t m = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        if (n[g] < (double)min_spread)
            n[g] = (double)total[g];
        first[g] = m; /* the group's first place in order */
        m += (int64_t)n[g];
    }
    for (int64_t i = 0; i < n_inst; i++)
        if (group[i] >= 0 && in_spread[i])
            order[first[group[i]]++] = i;
    return m;
}

/* Per group and column: whether a row of the group has a nonzero value there (out, (groups, ncol),
 * zeroed by the caller): np.bincount(g, weights=x[:, c] != 0) > 0 per column. */
void breakdown_group_nonzero(int64_t m, int64_t ncol, const int64_t *g, const double *x, uint8_t *out) {
    for (int64_t i = 0; i < m; i++) {
        if (g[i] < 0)
            continue;
        const double *row = x + i * ncol;
        uint8_t *cell = out + g[i] * ncol;
        for (int64_t c = 0; c < ncol; c++)
            cell[c] |= row[c] != 0.0;
    }
}

/* _noise's columns of each operation instance, in one pass over the begins and one over the instances:
 * per OP_BEGIN (m of them: its instance b_inst, pair b_pair, time b_ts, inclusive time b_incl),
 * inst_pair[inst] = pair, inst_ts[inst] = time and x[inst, 0] = its inclusive time (numpy's scatters:
 * the last begin of an instance wins; an instance below 0 counts from the end, as numpy's index does);
 * then per instance x[i, 2 + j] = inst_cat[i, at[j]] (inst_cat: n_inst by width) for the n_cpu
 * categories' columns at, x[i, 1] their sum (x: n_inst by ncol, row-major; inst_pair, inst_ts, x
 * filled by the caller: -1, 0, 0). Whole ns, so the sum is exact in any order, as numpy's
 * x[:, 2:2 + n_cpu].sum(axis=1) is. Returns 0; -1 at an instance outside [-n_inst, n_inst) (numpy's
 * index raises; the caller's numpy version runs). */
#define INSTANCE_COLUMNS(NAME, T)                                                                         \
    int64_t NAME(int64_t m, const T *b_inst, const int64_t *b_pair, const int64_t *b_ts, const int64_t *b_incl, \
                 int64_t n_inst, int64_t width, const double *inst_cat, int64_t n_cpu, const int64_t *at,    \
                 int64_t ncol, double *x, int64_t *inst_pair, int64_t *inst_ts) {                           \
        for (int64_t k = 0; k < m; k++)                                                                   \
            if (b_inst[k] < -n_inst || b_inst[k] >= n_inst)                                               \
                return -1;                                                                                \
        for (int64_t k = 0; k < m; k++) {                                                                 \
            int64_t i = b_inst[k] < 0 ? (int64_t)b_inst[k] + n_inst : (int64_t)b_inst[k];               \
            inst_pair[i] = b_pair[k];                                                                     \
            inst_ts[i] = b_ts[k];                                                                         \
            x[i * ncol] = (double)b_incl[k];                                                              \
        }                                                                                                 \
        for (int64_t i = 0; i < n_inst; i++) {                                                            \
            const double *in = inst_cat + i * width;                                                      \
            double *row = x + i * ncol, sum = 0.0;                                                        \
            for (int64_t j = 0; j < n_cpu; j++) {                                                         \
                row[2 + j] = in[at[j]];                                                                   \
                sum += in[at[j]];                                                                         \
            }                                                                                             \
            row[1] = sum;                                                                                 \
        }                                                                                                 \
        return 0;                                                                                         \
    }
INSTANCE_COLUMNS(breakdown_instance_columns_i32, int32_t)
INSTANCE_COLUMNS(breakdown_instance_columns_i64, int64_t)

/* breakdown_timeline's CPU segments for the overlap sweep: the counted rows whose pair is chosen,
 * each as (group[pair], its start, its end), in row order, those of one thread (thread_starts: each
 * thread's first row, ascending; a run never spans two threads) and group that touch (one begins
 * where the one before ends) joined into one: _counted_rows, then merge_adjacent by group and thread.
 * Writes the first cap segments to out_*; returns how many there are (the caller asks again with room
 * for all where that is more). */
int64_t breakdown_merged_segments(const Segments *s, int64_t n_runs, const int64_t *runs, const int32_t *run_pair,
                                  const int64_t *thread_starts, int64_t n_threads, const uint8_t *chosen,
                                  const int64_t *group, int64_t *out_g, int64_t *out_start, int64_t *out_end,
                                  int64_t cap) {
    const int64_t n = s->n, *ts = s->ts;
    SegWalk at = seg_walk(s, 0);
    int64_t count = 0, t = 0;
    int64_t last_g = -1, last_end = 0, any = 0;  /* the thread's last segment */
    for (int64_t k = 0; k < n_runs; k++) {
        while (t + 1 < n_threads && thread_starts[t + 1] <= runs[k]) {  /* the run's thread: a new one */
            t++;
            any = 0;
        }
        int32_t pair = run_pair[k];
        if (pair < 0 || !chosen[pair])
            continue;
        int64_t g = group[pair], hi = k + 1 < n_runs ? runs[k + 1] : n;
        for (int64_t i = runs[k]; i < hi; i++) {
            int64_t end = seg_walk_end(&at, i);
            if (end <= ts[i])
                continue;
            if (any && ts[i] == last_end && g == last_g) {
                if (count <= cap)
                    out_end[count - 1] = end;
            } else {
                if (count < cap) {
                    out_g[count] = g;
                    out_start[count] = ts[i];
                    out_end[count] = end;
                }
                count++;
                any = 1;
                last_g = g;
            }
            last_end = end;
        }
    }
    return count;
}

/* _threads_per_pair: per pair, on how many threads (thread_starts, as above) its counted rows are.
 * out: zeroed; seen: scratch, one byte per pair (cleared at each thread's first run). */
void breakdown_threads_per_pair(const Segments *s, int64_t n_runs, const int64_t *runs, const int32_t *run_pair,
                                const int64_t *thread_starts, int64_t n_threads, int64_t n_pairs, int64_t *out,
                                uint8_t *seen) {
    const int64_t n = s->n, *ts = s->ts;
    SegWalk at = seg_walk(s, 0);
    for (int64_t p = 0; p < n_pairs; p++)
        seen[p] = 0;
    for (int64_t k = 0, t = 0; k < n_runs; k++) {
        if (t + 1 < n_threads && thread_starts[t + 1] <= runs[k]) {
            while (t + 1 < n_threads && thread_starts[t + 1] <= runs[k])
                t++;
            for (int64_t p = 0; p < n_pairs; p++)
                seen[p] = 0;
        }
        int32_t pair = run_pair[k];
        if (pair < 0 || seen[pair])
            continue;
        int64_t hi = k + 1 < n_runs ? runs[k + 1] : n;
        for (int64_t i = runs[k]; i < hi; i++) {
            if (seg_walk_end(&at, i) > ts[i]) {
                seen[pair] = 1;
                out[pair]++;
                break;
            }
        }
    }
}

/* breakdown.row_groups' numbering of the (phase name, operation name) pairs, in a hash table of the
 * pairs seen, numbered as first seen (row_groups sorts the few pairs and renumbers them after): slots
 * (n_slots, a power of 2, each -1 or a pair's number), the pairs' names (ph_tab, op_tab: room for
 * n_slots / 2) and their count (state[0]). Returns the pair's number, or -1 where the table is full
 * (the caller starts again with a larger one). */
static int64_t pair_number(int64_t ph, int64_t op, int32_t *slots, int64_t n_slots, int64_t *ph_tab, int64_t *op_tab,
                           int64_t *state) {
    uint64_t h = ((uint64_t)ph * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)op * 0xC2B2AE3D27D4EB4Full);
    h ^= h >> 29;
    for (int64_t k = (int64_t)(h & (uint64_t)(n_slots - 1));; k = (k + 1) & (n_slots - 1)) {
        int32_t s = slots[k];
        if (s < 0) {
            if (state[0] >= n_slots / 2)
                return -1;
            s = (int32_t)state[0]++;
            ph_tab[s] = ph;
            op_tab[s] = op;
            slots[k] = s;
            return s;
        }
        if (ph_tab[s] == ph && op_tab[s] == op)
            return s;
    }
}

/* row_groups' runs and their pairs, in one pass over the rows: the rows where the operation instance,
 * the phase instance or the thread index changes from the row before (and row 0), in order
 * (np.flatnonzero of _numbered's new_run mask); each run's pair number (pair_number) where it can hold
 * counted time (inside an operation, or on the main thread: thread index main_idx, -1 for none), of
 * its operation's and phase's name ids (inst_name of the instance, -1 for none: numpy's lookup in
 * inst_name with -1 appended); else -1. With with_cats, also the categories (cat) of the rows of runs
 * inside a named operation, a bit each (bit c for 0 <= c < 63, bit 63 for any other) in op_cats[0]:
 * those an operation instance's counted time can be of (CountedSums.inst_col). Writes up to cap
 * runs; returns the number of runs (above cap: called again with that many places), or -1 where the
 * pairs' table is full. */
#define RUN_PAIRS(NAME, T, U)                                                                             \
    int64_t NAME(int64_t n, const T *op, const T *phase, const U *thread_idx, int64_t main_idx,          \
                 const int64_t *inst_name, int64_t *runs, int32_t *run_pair, int64_t cap, int32_t *slots,     \
                 int64_t n_slots, int64_t *ph_tab, int64_t *op_tab, int64_t *state, const int8_t *cat,       \
                 int64_t with_cats, int64_t *op_cats) {                                                      \
        int64_t m = 0, last_op = 0, last_ph = 0, last_pair = -1; /* the last pair looked up */            \
        uint8_t seen[256] = {0}; /* per category: met in a named operation */                             \
        int in_op = 0;           /* whether the run is in a named operation, its categories read */       \
        for (int64_t i = 0; i < n; i++) {                                                                 \
            if (i > 0 && op[i] == op[i - 1] && phase[i] == phase[i - 1] && thread_idx[i] == thread_idx[i - 1]) { \
                if (in_op)                                                                                \
                    seen[(uint8_t)cat[i]] = 1;                                                            \
                continue;                                                                                 \
            }                                                                                             \
            if (m < cap) {                                                                                \
                int64_t op_name = op[i] >= 0 ? inst_name[op[i]] : -1, pair = -1;                          \
                in_op = with_cats && op_name >= 0;                                                        \
                if (in_op)                                                                                \
                    seen[(uint8_t)cat[i]] = 1;                                                            \
                if (op_name >= 0 || thread_idx[i] == main_idx) {                                          \
                    int64_t ph_name = phase[i] >= 0 ? inst_name[phase[i]] : -1;                           \
                    if (last_pair < 0 || op_name != last_op || ph_name != last_ph) {                      \
                        last_pair = pair_number(ph_name, op_name, slots, n_slots, ph_tab, op_tab, state); \
                        if (last_pair < 0)                                                                \
                            return -1;                                                                    \
                        last_op = op_name;                                                                \
                        last_ph = ph_name;                                                                \
                    }                                                                                     \
                    pair = last_pair;                                                                     \
                }                                                                                         \
                runs[m] = i;                                                                              \
                run_pair[m] = (int32_t)pair;                                                              \
            }                                                                                             \
            m++;                                                                                          \
        }                                                                                                 \
        uint64_t cats = 0;                                                                                \
        for (int c = 0; c < 256; c++)                                                                     \
            cats |= (uint64_t)seen[c] << (c < 63 ? c : 63);                                               \
        op_cats[0] = (int64_t)cats;                                                                       \
        return m;                                                                                         \
    }
RUN_PAIRS(breakdown_run_pairs_i32_i16, int32_t, int16_t)
RUN_PAIRS(breakdown_run_pairs_i32_i32, int32_t, int32_t)

/* row_groups' operation instances: of the scope begins rows (m, ascending), those of kind OP_BEGIN
 * (begin_kind) into begins, and each one's pair number (pair_number) of its phase's name id (inst_name
 * of the phase instance, -1 for none) and its own name id into b_pair. Returns how many, or -1 where
 * the pairs' table is full. */
#define BEGIN_PAIRS(NAME, T)                                                                              \
    int64_t NAME(int64_t m, const int64_t *rows, const int8_t *kind, int64_t begin_kind, const int32_t *name, \
                 const T *phase, const int64_t *inst_name, int64_t *begins, int64_t *b_pair, int32_t *slots,   \
                 int64_t n_slots, int64_t *ph_tab, int64_t *op_tab, int64_t *state) {                        \
        int64_t c = 0;                                                                                    \
        for (int64_t k = 0; k < m; k++) {                                                                 \
            int64_t r = rows[k];                                                                          \
            if (kind[r] != begin_kind)                                                                    \
                continue;                                                                                 \
            int64_t ph_name = phase[r] >= 0 ? inst_name[phase[r]] : -1;                                   \
            int64_t pair = pair_number(ph_name, name[r], slots, n_slots, ph_tab, op_tab, state);          \
            if (pair < 0)                                                                                 \
                return -1;                                                                                \
            begins[c] = r;                                                                                \
            b_pair[c++] = pair;                                                                           \
        }                                                                                                 \
        return c;                                                                                         \
    }
BEGIN_PAIRS(breakdown_begin_pairs_i32, int32_t)
BEGIN_PAIRS(breakdown_begin_pairs_i64, int64_t)

/* row_groups' GPU records: each one's pair number (pair_number) of its phase's and operation's name
 * ids (ph, op) into out. Returns 0, or -1 where the pairs' table is full. */
int64_t breakdown_pair_numbers(int64_t m, const int64_t *ph, const int64_t *op, int64_t *out, int32_t *slots,
                               int64_t n_slots, int64_t *ph_tab, int64_t *op_tab, int64_t *state) {
    for (int64_t k = 0; k < m; k++) {
        out[k] = pair_number(ph[k], op[k], slots, n_slots, ph_tab, op_tab, state);
        if (out[k] < 0)
            return -1;
    }
    return 0;
}

/* row_groups' renumbering: each pair number (>= 0; -1 stays) of ids (m of them) as rank gives it,
 * in place. */
void breakdown_renumber_pairs(int64_t m, int32_t *ids, const int32_t *rank) {
    for (int64_t k = 0; k < m; k++)
        if (ids[k] >= 0)
            ids[k] = rank[ids[k]];
}

/* intervals._instances: of the scope begins rows (m, ascending), those of kind begin_kind, each
 * instance's thread (threads, the table of OS thread ids, at its row's thread_idx), id, name id,
 * start, end (inst_end at its id, of n_inst: an id of -1 reads the last, as numpy's index does),
 * parent (parent_state on the row before, where that row is on the same thread; else -1) and phase,
 * in one loop over them: the numpy version's filter and nine gathers, each from a column of every
 * row. Returns how many. */
#define INSTANCES(NAME, T)                                                                                \
    int64_t NAME(int64_t m, const int64_t *rows, const int8_t *kind, int64_t begin_kind,                   \
                 const int16_t *thread_idx, const int32_t *threads, const T *id, const int32_t *name,       \
                 const int64_t *ts, const int64_t *inst_end, int64_t n_inst,                               \
                 const T *parent_state, const T *phase, int32_t *o_thread, T *o_id, int64_t *o_name,         \
                 int64_t *o_start, int64_t *o_end, T *o_parent, T *o_phase) {                              \
        int64_t c = 0;                                                                                    \
        for (int64_t k = 0; k < m; k++) {                                                                 \
            int64_t r = rows[k];                                                                          \
            if (kind[r] != begin_kind)                                                                    \
                continue;                                                                                 \
            int16_t th = thread_idx[r];                                                                   \
            T ident = id[r];                                                                              \
            o_thread[c] = threads[th];                                                                    \
            o_id[c] = ident;                                                                              \
            o_name[c] = name[r];                                                                          \
            o_start[c] = ts[r];                                                                           \
            o_end[c] = inst_end[ident >= 0 ? ident : n_inst + ident];                                     \
            o_parent[c] = r > 0 && thread_idx[r - 1] == th ? parent_state[r - 1] : -1;                    \
            o_phase[c] = phase[r];                                                                        \
            c++;                                                                                          \
        }                                                                                                 \
        return c;                                                                                         \
    }
INSTANCES(intervals_instances_i32, int32_t)
INSTANCES(intervals_instances_i64, int64_t)

/* breakdown_timeline's operation instances: per OP_BEGIN row (begins, m of them), its instance (id),
 * time (ts) and inclusive time (0 where its flags hold recursive, else inst_end at its instance, of
 * n_inst: -1 reads the last, as numpy's index does, less its time), in one loop over the begins: the
 * numpy version's gathers from columns of every row and np.where. */
#define BEGINS(NAME, T)                                                                                   \
    void NAME(int64_t m, const int64_t *begins, const T *id, const int64_t *ts, const int8_t *flags,       \
              int64_t recursive, const int64_t *inst_end, int64_t n_inst, T *b_inst, int64_t *b_ts,         \
              int64_t *b_incl) {                                                                          \
        for (int64_t k = 0; k < m; k++) {                                                                 \
            int64_t r = begins[k];                                                                        \
            T ident = id[r];                                                                              \
            b_inst[k] = ident;                                                                            \
            b_ts[k] = ts[r];                                                                              \
            b_incl[k] = flags[r] & recursive ? 0 : inst_end[ident >= 0 ? ident : n_inst + ident] - ts[r];  \
        }                                                                                                 \
    }
BEGINS(breakdown_begins_i32, int32_t)
BEGINS(breakdown_begins_i64, int64_t)

/* intervals._depth over compact ids (each in [0, top)), in one pass where each instance's parent comes
 * before it (the begins in row order: a parent began earlier on its thread): its depth is 0 without
 * a parent, 1 under a parent that is no instance here, else its parent's plus 1 (numpy's pointer
 * jumping's counts of links up to the root). Returns 0, or -1 where that order does not hold, an id
 * is negative or comes twice (numpy's pointer jumping runs: it follows links in any order). seen:
 * zeroed, top bytes; depth_of: top places. */
int64_t intervals_depth(int64_t m, const int64_t *ident, const int64_t *parent, int64_t top, uint8_t *seen,
                        int64_t *depth_of, int64_t *out) {
    for (int64_t k = 0; k < m; k++) {
        if (ident[k] < 0 || ident[k] >= top || seen[ident[k]])
            return -1;
        seen[ident[k]] = 1;
    }
    for (int64_t k = 0; k < m; k++) {
        int64_t p = parent[k], d;
        if (p < 0)
            d = 0;
        else if (p >= top || !seen[p])
            d = 1;
        else if (seen[p] != 2)
            return -1;
        else
            d = depth_of[p] + 1;
        out[k] = d;
        depth_of[ident[k]] = d;
        seen[ident[k]] = 2;
    }
    return 0;
}
