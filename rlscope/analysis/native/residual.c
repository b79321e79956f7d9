/* The residual overhead correction's row loops (rlscope/overhead/correct/residual.py and
 * module_calls.py), each one pass over the rows where the numpy version makes several. Floats are
 * added in the order numpy adds them (np.bincount and np.cumsum: one after another in row order),
 * and rounded as np.rint does (half to even), so both give the same bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "segments.h"

/* np.rint, as a whole number's int64: round half to even, as nearbyint does under the default
 * rounding mode, without a call into libm per value. Below 2**52 adding 2**52 leaves no fraction
 * (rounded by the addition itself, half to even), and taking it away again is exact; from 2**52 up
 * every double is whole already. */
static inline int64_t rint_i64(double x) {
    const double whole = 4503599627370496.0; /* 2**52 */
    if (!(fabs(x) < whole)) return (int64_t)x;
    return (int64_t)(x >= 0 ? (x + whole) - whole : (x - whole) + whole);
}

static inline int64_t wrap(int64_t i, int64_t len) { return i < 0 ? i + len : i; }

/* np.minimum of two doubles: NaN when either is, else the smaller (the second when they are equal) */
static inline double min_nan(double a, double b) { return (a < b || isnan(a)) ? a : b; }

/* A row's cost class and whether it opens a pair, per byte of its kind: residual._KIND_CLASS and
 * residual._KIND_OPENS, 0 past their end (a negative kind, read as a byte, among them): looked up
 * without a bounds check per row. */
typedef struct {
    int8_t cls[256];
    uint8_t opens[256];
} KindTable;

static void kind_table(KindTable *t, const int8_t *kind_class, const uint8_t *kind_opens, int64_t n_kinds) {
    for (int k = 0; k < 256; ++k) {
        t->cls[k] = k < n_kinds ? kind_class[k] : 0;
        t->opens[k] = k < n_kinds ? kind_opens[k] : 0;
    }
}

typedef struct {
    const int8_t *kind, *cat, *flags;
    const int32_t *id;
    const KindTable *kinds;
    int64_t n_classes, scope_class, category_class, backend_class;
    int64_t backend_cat, profiler_cat, forced_flag;
    const double *before_of, *after_of;
    const uint8_t *pays;
    int64_t n_cost, every_row;
    const int64_t *cost_rows, *cost_values;
    const double *half_d_in, *half_d_out;
} RowCosts;

/* The cost row i pays before and after its timestamp, and its class: residual.correct_timeline's
 * ``before_of[code]``, ``after_of[code]`` and ``paying`` per row, where ``code`` is the row's class
 * (event_classes: by kind, a category row by its category, forced closes none) plus n_classes where
 * the row opens. A scope or category boundary that measured its own cost (its packed ``cost`` value
 * above 0: pre and post ns, schema.unpack_cost) with a calibrated dispatch (``half_d_in`` not NaN,
 * residual.measured_rows) pays what it measured plus half that dispatch on each side instead
 * (residual._planned's measured rows). The ``cost`` values are at the rows ``cost_rows`` (sorted;
 * ``*j`` is the first of them not before i, kept as the rows go by), or at every row where
 * ``every_row``; n_cost 0: none. Returns whether the row pays anything. */
__attribute__((always_inline)) static inline int row_costs(const RowCosts *c, int64_t i, int64_t *j,
                                                           double *before, double *after, int *cls) {
    uint8_t k = (uint8_t)c->kind[i];
    int cl = c->kinds->cls[k], opens = c->kinds->opens[k];
    if (cl == c->category_class) {
        if (c->id[i] == c->backend_cat)
            cl = (int)c->backend_class;
        else if (c->id[i] == c->profiler_cat)
            cl = 0;
    }
    if (c->flags[i] & c->forced_flag) cl = 0;
    *cls = cl;
    int64_t v = 0;
    if (c->every_row) {
        if (c->n_cost) v = c->cost_values[i];
    } else if (*j < c->n_cost && c->cost_rows[*j] <= i) {
        while (*j < c->n_cost && c->cost_rows[*j] < i) ++*j;
        if (*j < c->n_cost && c->cost_rows[*j] == i) v = c->cost_values[*j];
    }
    if (v > 0 && (cl == c->scope_class || cl == c->category_class) && !isnan(c->half_d_in[cl])) {
        double pre = (double)(v & 0xFFFFFFFF), post = (double)(v >> 32);
        *before = pre + (opens ? c->half_d_out[cl] : c->half_d_in[cl]);
        *after = post + (opens ? c->half_d_in[cl] : c->half_d_out[cl]);
        return 1;
    }
    int code = cl + opens * (int)c->n_classes;
    if (!c->pays[code]) return 0;
    *before = c->before_of[code];
    *after = c->after_of[code];
    return 1;
}

/* numpy's pairwise sum of a column of n doubles (np.sum's: 0.0 plus pairwise_sum, numpy/_core/src/umath/
 * loops_utils.h.src; sums.c walks the same tree over given rows), taken one value at a time in row order
 * by a pass that works the values out, with no column of them: the tree's leaves (blocks of at most
 * PAIRWISE_BLOCK values: eight running sums over the values 8 apart, joined ((r0+r1)+(r2+r3))+((r4+r5)+
 * (r6+r7)), the rest added one after another; under 8 values, one after another) are summed as their
 * values come, and each joins its sibling's sum as numpy's recursion does (a node above PAIRWISE_BLOCK
 * splits at half its length rounded down to a multiple of 8: every leaf starts at a multiple of 8).
 * The running sums start at +0.0 where numpy takes the first 8 values: only a zero's sign differs,
 * which the final 0.0 + drops. Each leaf's sum may be kept (``leaves``, in order): residual_changed_sum
 * then sums the column again after a few of its values change, reading only the leaves that hold them.
 * residual.py checks both against np.sum once per process (sums.streams_agree). */
#define PAIRWISE_BLOCK 128
#define PLANNED_CHUNK 2048 /* residual_planned's rows between two sums of what they write */

typedef struct {
    int64_t k, stop;         /* values taken; below stop, a value goes to r[k % 8] */
    int64_t lo, tail, end;   /* the current leaf's start, first value added one after another, end */
    int in_tail, depth, done; /* done: the last leaf's sum taken up to the root (``total``) */
    double r[8], res, total;
    double *leaves;          /* where not NULL: each leaf's sum, in order */
    int64_t n_leaves;
    struct {
        int64_t lo, n, n2;   /* a node of the tree above a leaf, split at lo + n2 */
        double left;         /* its first half's sum, once taken */
        int has_left;
    } stack[64];
} Pairwise;

/* down the tree from node [lo, lo + n) to its first leaf, the nodes passed kept on the stack */
static void pairwise_descend(Pairwise *p, int64_t lo, int64_t n) {
    while (n > PAIRWISE_BLOCK) {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        p->stack[p->depth].lo = lo, p->stack[p->depth].n = n, p->stack[p->depth].n2 = n2;
        p->stack[p->depth].has_left = 0;
        ++p->depth;
        n = n2;
    }
    p->lo = lo, p->end = lo + n;
    p->tail = n < 8 ? lo : lo + n - n % 8;
    p->stop = p->tail;
    p->in_tail = 0;
    for (int j = 0; j < 8; ++j) p->r[j] = 0.0;
    p->res = 0.0;
}

static void pairwise_begin(Pairwise *p, int64_t n) {
    p->k = 0, p->depth = 0, p->done = 0, p->total = 0.0, p->leaves = NULL, p->n_leaves = 0;
    if (n > 0) pairwise_descend(p, 0, n);
    else p->stop = p->lo = p->tail = p->end = 0, p->in_tail = 1;
}

/* a leaf's sum ``s`` taken up the tree: the first half's kept on its node, the second's joined to it */
static void pairwise_leaf_done(Pairwise *p, double s) {
    if (p->leaves) p->leaves[p->n_leaves++] = s;
    while (p->depth > 0) {
        int t = p->depth - 1;
        if (!p->stack[t].has_left) {
            p->stack[t].left = s, p->stack[t].has_left = 1;
            pairwise_descend(p, p->stack[t].lo + p->stack[t].n2, p->stack[t].n - p->stack[t].n2);
            return;
        }
        s = p->stack[t].left + s;
        --p->depth;
    }
    p->total = s, p->done = 1;
}

/* the eight running sums joined where the leaf's rest begins */
static inline void pairwise_join(Pairwise *p) {
    p->res = ((p->r[0] + p->r[1]) + (p->r[2] + p->r[3])) + ((p->r[4] + p->r[5]) + (p->r[6] + p->r[7]));
    p->in_tail = 1;
    p->stop = -1;
}

static void pairwise_take_slow(Pairwise *p, double v) {
    for (;;) {
        if (p->k == p->tail && !p->in_tail) pairwise_join(p);
        if (p->k == p->end) {
            pairwise_leaf_done(p, p->res);
            continue;
        }
        if (p->in_tail) p->res += v;
        else p->r[p->k & 7] += v;
        ++p->k;
        return;
    }
}

/* numpy's sum of a leaf of the tree, its ``len`` values at x (numpy's own loop: pairwise_sum's block) */
static inline double leaf_sum(const double *x, int64_t len) {
    double res = 0.0;
    int64_t e = 0;
    if (len >= 8) {
        double r0 = x[0], r1 = x[1], r2 = x[2], r3 = x[3], r4 = x[4], r5 = x[5], r6 = x[6], r7 = x[7];
        for (e = 8; e + 8 <= len; e += 8) {
            r0 += x[e], r1 += x[e + 1], r2 += x[e + 2], r3 += x[e + 3];
            r4 += x[e + 4], r5 += x[e + 5], r6 += x[e + 6], r7 += x[e + 7];
        }
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
    }
    for (; e < len; ++e) res += x[e];
    return res;
}

/* the next m values of the column: runs of them into the eight running sums in a loop of their own,
 * eight values a step (a leaf's running sums start at a multiple of 8: the step's values go to r[0] to
 * r[7] in turn, as in numpy's loop) */
static void pairwise_take_block(Pairwise *p, const double *v, int64_t m) {
    int64_t j = 0;
    while (j < m) {
        int64_t k = p->k, len = p->end - k;
        if (k == p->lo && len <= m - j) { /* a whole leaf among the values: numpy's loop over it */
            double res = leaf_sum(v + j, len);
            p->k = k + len, j += len;
            pairwise_leaf_done(p, res);
            continue;
        }
        int64_t run = p->stop - k;
        if (run > m - j) run = m - j;
        if (run <= 0) {
            pairwise_take_slow(p, v[j++]);
            continue;
        }
        int64_t e = 0;
        for (; e < run && ((k + e) & 7); ++e) p->r[(k + e) & 7] += v[j + e];
        double r0 = p->r[0], r1 = p->r[1], r2 = p->r[2], r3 = p->r[3];
        double r4 = p->r[4], r5 = p->r[5], r6 = p->r[6], r7 = p->r[7];
        const double *x = v + j;
        for (; e + 8 <= run; e += 8) {
            r0 += x[e], r1 += x[e + 1], r2 += x[e + 2], r3 += x[e + 3];
            r4 += x[e + 4], r5 += x[e + 5], r6 += x[e + 6], r7 += x[e + 7];
        }
        p->r[0] = r0, p->r[1] = r1, p->r[2] = r2, p->r[3] = r3;
        p->r[4] = r4, p->r[5] = r5, p->r[6] = r6, p->r[7] = r7;
        for (; e < run; ++e) p->r[(k + e) & 7] += v[j + e];
        p->k = k + run, j += run;
    }
}

/* np.sum of the n values taken (all of them: k == n) */
static double pairwise_end(Pairwise *p) {
    if (p->end == 0) return 0.0; /* no values */
    if (!p->done) {              /* the last leaf taken a value at a time: its sum up the tree */
        if (p->k == p->tail && !p->in_tail) pairwise_join(p);
        pairwise_leaf_done(p, p->res);
    }
    return 0.0 + p->total;
}

/* np.sum of ``values`` (n of them) taken ``chunk`` at a time (residual_planned's way) by the stream
 * above, each leaf's sum kept in ``leaves`` (n / 64 + 2 of them) where not NULL: what
 * sums.streams_agree compares with np.sum */
double residual_pairwise(int64_t n, const double *values, int64_t chunk, double *leaves) {
    Pairwise p;
    pairwise_begin(&p, n);
    p.leaves = leaves;
    for (int64_t i = 0; i < n; i += chunk) pairwise_take_block(&p, values + i, n - i < chunk ? n - i : chunk);
    return pairwise_end(&p);
}

/* the sum of node [lo, lo + n) of the tree: its leaves' kept sums (``*leaf``: the next leaf's index),
 * but a leaf holding one of rows[a, b) summed again from the column */
static double changed_node(const double *column, const double *leaves, int64_t *leaf, int64_t lo, int64_t n,
                           const int64_t *rows, int64_t a, int64_t b) {
    if (n <= PAIRWISE_BLOCK) {
        int64_t k = (*leaf)++;
        return a < b ? leaf_sum(column + lo, n) : leaves[k];
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    int64_t split = a;
    while (split < b && rows[split] < lo + n2) ++split;
    double left = changed_node(column, leaves, leaf, lo, n2, rows, a, split);
    return left + changed_node(column, leaves, leaf, lo + n2, n - n2, rows, split, b);
}

/* np.sum of ``column`` (n values) whose leaves' sums were kept by a Pairwise over it (``leaves``) before
 * the values at ``rows`` (m of them, sorted, in [0, n); a row perhaps more than once) changed: those rows'
 * leaves summed again from the column, the others' kept sums taken, joined as numpy's tree joins them. */
double residual_changed_sum(int64_t n, const double *column, const double *leaves, int64_t m, const int64_t *rows) {
    if (n == 0) return 0.0;
    int64_t leaf = 0;
    return 0.0 + changed_node(column, leaves, &leaf, 0, n, rows, 0, m);
}

/* residual_changed_sum's node over the values kept at some rows only (``saved_rows``, ascending, their
 * values in ``saved``): a leaf holding one of rows[a, b) summed again from them, where they hold its rows
 * one after another (else *ok = 0) */
static double changed_node_saved(int64_t n_saved, const int64_t *saved_rows, const double *saved,
                                 const double *leaves, int64_t *leaf, int64_t lo, int64_t n, const int64_t *rows,
                                 int64_t a, int64_t b, int64_t *ok) {
    if (n <= PAIRWISE_BLOCK) {
        int64_t k = (*leaf)++;
        if (a >= b) return leaves[k];
        int64_t l = 0, h = n_saved; /* the first saved row at or after lo */
        while (l < h) {
            int64_t mid = l + (h - l) / 2;
            if (saved_rows[mid] < lo) l = mid + 1;
            else h = mid;
        }
        if (l + n > n_saved || saved_rows[l] != lo || saved_rows[l + n - 1] != lo + n - 1) {
            *ok = 0;
            return 0.0;
        }
        return leaf_sum(saved + l, n);
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    int64_t split = a;
    while (split < b && rows[split] < lo + n2) ++split;
    double left = changed_node_saved(n_saved, saved_rows, saved, leaves, leaf, lo, n2, rows, a, split, ok);
    return left + changed_node_saved(n_saved, saved_rows, saved, leaves, leaf, lo + n2, n - n2, rows, split, b, ok);
}

/* residual_changed_sum of a column of n values kept at ``saved_rows`` only (n_saved of them, ascending;
 * values ``saved``): np.sum of the column whose leaves' sums were kept (``leaves``) before the values at
 * ``rows`` (m, sorted; a row perhaps more than once) changed, the leaves holding those summed again from
 * the saved values.
 * ok[0] = 0 where a leaf to sum again is not among the saved rows whole (the sum is then not made). */
double residual_changed_sum_saved(int64_t n, int64_t n_saved, const int64_t *saved_rows, const double *saved,
                                  const double *leaves, int64_t m, const int64_t *rows, int64_t *ok) {
    ok[0] = 1;
    if (n == 0) return 0.0;
    int64_t leaf = 0;
    return 0.0 + changed_node_saved(n_saved, saved_rows, saved, leaves, &leaf, 0, n, rows, 0, m, ok);
}

#define PLANNED_RING 4096 /* residual_planned's plans kept of the rows last taken, where no column holds them */
#define PLANNED_NEAR 136  /* the rows either side of a listed row whose plans are kept (a leaf's 128 and more) */

/* residual_planned's plans kept (``ring``: the last PLANNED_RING rows') of the rows in [*from, to) within
 * PLANNED_NEAR of a listed row (over_rows[*q..n_over), ascending): written to saved_rows/saved (cap of
 * them; *n_saved counts past it); *from becomes ``to`` */
static void planned_save(const double *ring, int64_t *from, int64_t to, const int64_t *over_rows, int64_t n_over,
                         int64_t *q, int64_t cap, int64_t *saved_rows, double *saved, int64_t *n_saved) {
    if (to <= *from) return;
    int64_t r = *from;
    while (*q < n_over && r < to) {
        int64_t o = over_rows[*q];
        if (o + PLANNED_NEAR < r) {
            ++*q;
            continue;
        }
        int64_t a = o - PLANNED_NEAR > r ? o - PLANNED_NEAR : r;
        int64_t b = o + PLANNED_NEAR + 1 < to ? o + PLANNED_NEAR + 1 : to;
        if (a >= to) break;
        for (int64_t i = a; i < b; ++i, ++*n_saved)
            if (*n_saved < cap) saved_rows[*n_saved] = i, saved[*n_saved] = ring[i & (PLANNED_RING - 1)];
        r = b;
        if (b == o + PLANNED_NEAR + 1) ++*q;
    }
    *from = to;
}

/* residual_planned's state from one row to the next: the row's costs (read one row ahead: a
 * segment pays the next row's cost before its timestamp), the class sum and the instance run. */
typedef struct {
    RowCosts c;
    int64_t j, over, odd, cur, run_ns, n_kept, n_prof;
    double b0, a0, b1, a1, run;
    int cls0, cls1, run_cls, pay0, pay1;
} Planned;

/* One row of residual_planned (see there). ``spread``: 0 no module-call costs worked out here, 1 a row
 * off the costed threads' rows (its cost 0), 2 a row among them (table ``tab``); ``on_main``: a row
 * of the main thread. Inlined into loops over runs of rows alike in both, where they are constants. */
__attribute__((always_inline)) static inline void planned_row(
    Planned *st, int64_t n, int64_t i, const int64_t *ts, int64_t last_row, int64_t last_end, const int8_t *cat,
    const uint8_t *on_writer, int64_t profiler_cat, const double *mem, const double *mods,
    const int spread, const double *tab, int64_t len, const uint8_t *has_python, const double *total,
    const uint8_t *not_python, double *kept, const int on_main, const int32_t *op, int64_t n_inst, double *excl,
    double *per_class, double *planned, int64_t ring_mask, double *left, uint8_t *profiler, int64_t cap,
    int64_t *over_rows, int64_t *prof_rows) {
    if (i + 1 < n) st->pay1 = row_costs(&st->c, i + 1, &st->j, &st->b1, &st->a1, &st->cls1);
    if (st->pay0) {
        if (st->cls0 != st->run_cls)
            per_class[st->run_cls] = st->run, st->run_cls = st->cls0, st->run = per_class[st->cls0];
        st->run += st->b0 + st->a0;
    }
    double p = st->pay0 ? st->a0 : 0.0;
    if (i != last_row && st->pay1) p += st->b1; /* the next row, on the same thread */
    if (mem) p += mem[i];
    int64_t di = (i == last_row ? last_end : ts[i + 1]) - ts[i];
    double d = (double)di;
    uint8_t prof = cat[i] == profiler_cat && !on_writer[i];
    if (mods) p += mods[i];
    if (spread) { /* residual_module_spread's figure, 0 off the costed threads' rows */
        double w = 0.0;
        if (spread == 2) {
            int64_t o = wrap(op[i], len);
            w = d * (double)(!not_python[(uint8_t)cat[i]] || !has_python[o]);
            double t = total[o];
            w = t > 0 ? w / t : 0.0;
            w *= tab[o];
        }
        p += w;
        if (!prof) kept[st->n_kept++] = w;
    }
    if (prof) p = d;
    double r = min_nan(p, d), l = d - r;
    planned[i & ring_mask] = p;
    if (profiler) profiler[i] = prof;
    if (prof) {
        if (st->n_prof < cap) prof_rows[st->n_prof] = i;
        ++st->n_prof;
    }
    left[i] = l;
    st->odd += isnan(l) || signbit(l);
    if (!(p <= d) || memcmp(&r, &p, sizeof r) != 0) {
        if (st->over < cap) over_rows[st->over] = i;
        ++st->over;
    }
    if (on_main) {
        int64_t o = op[i];
        if (o != st->cur) {
            if (st->cur >= 0) excl[st->cur] += (double)st->run_ns;
            st->cur = o >= 0 && o < n_inst ? o : -1;
            st->run_ns = 0;
        }
        st->run_ns += di;
    }
    st->pay0 = st->pay1, st->b0 = st->b1, st->a0 = st->a1, st->cls0 = st->cls1;
}

/* residual.correct_timeline's planned removal, up to _place's first step, in one pass (residual._planned,
 * and the figures the steps after it read, residual._planned_native):
 * ``planned[i]`` = row i's cost after its timestamp, plus the next row's before it where that row is on
 * the same thread, plus ``mem[i]`` and ``mods[i]`` where given (n_mem, n_mods = n; or each row's
 * module-call cost worked out as residual_module_spread does, from the n_spans costed threads' rows
 * [span_a[s], span_b[s]) (sorted), each with its table of ``len`` entries in ``tables``, 0 off them),
 * in that order; the whole segment (its length d, Timeline.float_duration) for a ``profiler`` row
 * (the ``rlscope`` category off the writer's threads: marked in ``profiler`` where n_mask = n, and
 * listed, the first ``cap`` of them in ``prof_rows``, their number in ``irregular[2]``); ``left`` = d - removal, where
 * removal = np.minimum(planned, d) (not written: it is ``planned`` itself but at the rows listed
 * below); ``per_class``: np.bincount(cls, weights=before + after) over the paying rows; ``excl``:
 * Timeline.instance_time over the main thread's rows [main_start, main_stop) (each instance's segments
 * summed as whole ns, a run of rows of one instance at a time; op outside 0 to n_inst - 1: none).
 * ``irregular[0]`` gets the number of rows whose ``left`` is NaN or carries a sign bit (where
 * np.minimum(0, left) is not +0). With n_spans, ``kept`` gets the module-call costs of the rows that
 * are not ``profiler`` ones (mods[~profiler], for numpy to sum), their number in ``irregular[1]``; where
 * ``stream``, ``kept[0]`` gets numpy's sum of them instead (np.sum, taken as they come: Pairwise, the
 * rows that are not ``profiler`` ones counted first for the sum's tree), no column of them; and
 * ``sums[0]`` numpy's sum of ``planned``, taken a chunk of rows at a time as they are written, each
 * leaf of its tree's sum kept in ``leaves`` (n / 64 + 2 of them: residual_changed_sum's). ``planned`` is
 * that column where n_planned = n; else, with ``stream``, no column is written: the plans of the rows
 * within PLANNED_NEAR of the first ``cap`` listed rows (each leaf of the sum's tree a changed row of the
 * removal lies in: residual_changed_sum_saved's) go to ``saved_rows`` and ``saved``, ascending, the
 * first ``save_cap`` of them, their number in ``irregular[3]``.
 * Returns the number of rows whose removal is not their plan to the bit, or whose plan does not fit
 * (not planned <= d: _place's neighbours); the first ``cap`` of them go to ``over_rows`` (in order,
 * without a pass of their own). The rows are taken in runs alike in whether they are costed threads'
 * and the main thread's, each run by a loop made for its case (planned_row), and ending at the latest
 * at a thread's last row: the segments (``segs``, segments.h) end where the next row starts but at
 * that row, whose end is its thread's. */
int64_t residual_planned(
    int64_t n, const Segments *segs, const int8_t *kind, const int8_t *cat,
    const int8_t *flags, const int32_t *id, const uint8_t *on_writer,
    const int8_t *kind_class, const uint8_t *kind_opens, int64_t n_kinds, int64_t n_classes,
    int64_t scope_class, int64_t category_class, int64_t backend_class, int64_t backend_cat,
    int64_t profiler_cat, int64_t forced_flag, const double *before_of, const double *after_of,
    const uint8_t *pays, int64_t n_cost, int64_t every_row, const int64_t *cost_rows,
    const int64_t *cost_values, const double *half_d_in, const double *half_d_out, int64_t n_mem,
    const double *mem, int64_t n_mods, const double *mods, int64_t n_spans, const int64_t *span_a,
    const int64_t *span_b, const double *tables, int64_t len, const uint8_t *has_python, const double *total,
    const uint8_t *not_python, int64_t stream, double *kept, int64_t main_start, int64_t main_stop,
    const int32_t *op, int64_t n_inst, double *excl, int64_t n_planned, double *planned, int64_t save_cap,
    int64_t *saved_rows, double *saved, double *left, int64_t n_mask, uint8_t *profiler, int64_t *prof_rows,
    double *per_class, int64_t cap, int64_t *over_rows, int64_t *irregular, double *sums, double *leaves) {
    KindTable kinds;
    kind_table(&kinds, kind_class, kind_opens, n_kinds);
    Planned st = {{kind, cat, flags, id, &kinds, n_classes, scope_class, category_class, backend_class,
                   backend_cat, profiler_cat, forced_flag, before_of, after_of, pays, n_cost, every_row,
                   cost_rows, cost_values, half_d_in, half_d_out}};
    const int64_t *ts = segs->ts;
    int64_t t_last = 0; /* the thread whose last row is the next at or after the rows taken */
    st.cur = -1;
    st.run = per_class[0]; /* per_class[run_cls], summed in a register while the class repeats */
    if (n > 0) st.pay0 = row_costs(&st.c, 0, &st.j, &st.b0, &st.a0, &st.cls0);
    const double *mem_at = n_mem == n ? mem : NULL, *mods_at = n_mods == n ? mods : NULL;
    /* no column of the plans (n_planned != n, the sum taken as they come): the last rows' in a ring, those
     * near the listed rows kept */
    double ring[PLANNED_RING];
    int64_t kept_plans = n_planned != n && stream, ring_mask = kept_plans ? PLANNED_RING - 1 : -1;
    int64_t save_from = 0, save_q = 0, n_saved = 0;
    if (kept_plans) planned = ring;
    uint8_t *mask = n_mask == n ? profiler : NULL;
    /* where ``stream``, the kept costs go to ``chunk`` and are summed a chunk of rows at a time (no call
     * in the loop over the rows), the sum's tree as long as the rows that are not the periodic work's */
    Pairwise kept_sum, planned_sum;
    double chunk[PLANNED_CHUNK];
    int64_t n_kept = 0, stream_kept = stream && n_spans;
    if (stream) {
        pairwise_begin(&planned_sum, n);
        planned_sum.leaves = leaves;
    }
    if (stream_kept) { /* the periodic work's rows counted 128 at a time in a byte (a loop the compiler widens) */
        int64_t m = n, i = 0;
        int8_t pc = (int8_t)profiler_cat;
        if (pc != profiler_cat) i = n; /* no category byte is it: no such rows */
        for (; i + 128 <= n; i += 128) {
            uint8_t c = 0;
            for (int e = 0; e < 128; ++e) c += (uint8_t)((cat[i + e] == pc) & (on_writer[i + e] == 0));
            m -= c;
        }
        for (; i < n && pc == profiler_cat; ++i) m -= (cat[i] == pc) & (on_writer[i] == 0);
        pairwise_begin(&kept_sum, m);
    }
    double *kept_to = stream_kept ? chunk : kept;
    int64_t s = 0;
    for (int64_t i = 0; i < n;) {
        /* the run of rows from i alike in both: up to the next span's or the main thread's bound */
        while (s < n_spans && span_b[s] <= i) ++s;
        int spread = s < n_spans && span_a[s] <= i;
        int64_t stop = s >= n_spans ? n : spread ? span_b[s] : span_a[s];
        int on_main = i >= main_start && i < main_stop;
        int64_t bound = on_main ? main_stop : i < main_start ? main_start : n;
        if (bound < stop) stop = bound;
        /* nor past a thread's last row: the rows before it end where the next row starts, it where its
         * thread ends (segments.h) */
        while (t_last < segs->n_last && segs->last[t_last] < i) ++t_last;
        int64_t last_row = t_last < segs->n_last ? segs->last[t_last] : n, last_end = 0;
        if (last_row < n) last_end = segs->end[t_last];
        if (last_row + 1 < stop) stop = last_row + 1;
        const double *tab = spread ? tables + s * len : NULL;
#define PLANNED_RUN(SPREAD, ON_MAIN)                                                                         \
    do {                                                                                                  \
    while (i < stop) {                                                                                    \
        int64_t from = i, to = stream && stop - i > PLANNED_CHUNK ? i + PLANNED_CHUNK : stop;             \
        for (; i < to; ++i)                                                                               \
            planned_row(&st, n, i, ts, last_row, last_end, cat, on_writer, profiler_cat, mem_at, mods_at, SPREAD,  \
                        tab, len, has_python, total, not_python, kept_to, ON_MAIN, op, n_inst, excl, per_class, \
                        planned, ring_mask, left, mask, cap, over_rows, prof_rows);                            \
        if (kept_plans) {                                                                                 \
            int64_t a = from & ring_mask, m = i - from, first = PLANNED_RING - a < m ? PLANNED_RING - a : m;   \
            pairwise_take_block(&planned_sum, ring + a, first);                                           \
            if (first < m) pairwise_take_block(&planned_sum, ring, m - first);                            \
            planned_save(ring, &save_from, i - PLANNED_NEAR, over_rows, st.over < cap ? st.over : cap,    \
                         &save_q, save_cap, saved_rows, saved, &n_saved);                                 \
        } else if (stream)                                                                                \
            pairwise_take_block(&planned_sum, planned + from, i - from);                                  \
        if (stream_kept) pairwise_take_block(&kept_sum, chunk, st.n_kept), n_kept += st.n_kept, st.n_kept = 0; \
    }                                                                                                     \
    } while (0)
        if (spread && on_main)
            PLANNED_RUN(2, 1);
        else if (spread)
            PLANNED_RUN(2, 0);
        else if (n_spans && on_main)
            PLANNED_RUN(1, 1);
        else if (n_spans)
            PLANNED_RUN(1, 0);
        else if (on_main)
            PLANNED_RUN(0, 1);
        else
            PLANNED_RUN(0, 0);
#undef PLANNED_RUN
    }
    if (kept_plans)
        planned_save(ring, &save_from, n, over_rows, st.over < cap ? st.over : cap, &save_q, save_cap,
                     saved_rows, saved, &n_saved);
    irregular[3] = n_saved;
    if (st.cur >= 0) excl[st.cur] += (double)st.run_ns;
    per_class[st.run_cls] = st.run;
    irregular[0] = st.odd;
    irregular[1] = stream_kept ? n_kept : st.n_kept;
    if (stream_kept) kept[0] = pairwise_end(&kept_sum);
    if (stream) sums[0] = pairwise_end(&planned_sum);
    irregular[2] = st.n_prof;
    return st.over;
}

/* Each segment's length over its new one: ratio[i] = new_dur[i] / d where d > 0, else 1 (np.divide with
 * out=np.ones(n), where=dur > 0), d its length (Timeline.float_duration). */
void residual_ratio(int64_t n, const Segments *segs, const double *new_dur, double *ratio) {
    SegWalk seg = seg_walk(segs, 0);
    for (int64_t i = 0; i < n; ++i) {
        double d = (double)(seg_walk_end(&seg, i) - segs->ts[i]);
        ratio[i] = d > 0 ? new_dur[i] / d : 1.0;
    }
}

/* residual.flush_intervals' counts over one thread's rows from ``a``: counts[k] = the rows of
 * [edges[k - 1], edges[k]) (edges[-1] being a; m edges, sorted) whose kind is among the table's (a
 * byte's entry, a negative one from the end), as np.count_nonzero(kinds_among(kind, ...)[p:q]). */
void residual_count_kinds(int64_t a, int64_t m, const int64_t *edges, const int8_t *kind, const uint8_t *table,
                          int64_t *counts) {
    /* where the table's kinds are one run of bytes [lo, lo + span] (the kinds written: 0 to 11), each
     * row compared with it, 128 rows at a time counted in a byte (a loop the compiler widens), not
     * looked up one at a time */
    int lo = 0, hi = -1, run = 1;
    for (int v = 0; v < 256; ++v) {
        if (!table[v]) continue;
        if (hi < 0) lo = v;
        else if (v != hi + 1) run = 0;
        hi = v;
    }
    uint8_t span = (uint8_t)(hi - lo);
    int64_t i = a;
    for (int64_t k = 0; k < m; ++k) {
        int64_t c = 0;
        if (run && hi >= 0) {
            for (; i + 128 <= edges[k]; i += 128) {
                uint8_t b = 0;
                for (int e = 0; e < 128; ++e) b += (uint8_t)((uint8_t)((uint8_t)kind[i + e] - lo) <= span);
                c += b;
            }
        }
        for (; i < edges[k]; ++i) c += table[(uint8_t)kind[i]];
        counts[k] = c;
    }
}

/* ``values[~mask]`` written to the front of ``out``; returns their count (numpy then sums them). */
int64_t residual_unmasked(int64_t n, const double *values, const uint8_t *mask, double *out) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i)
        if (!mask[i]) out[m++] = values[i];
    return m;
}

/* A windows estimate's factor of each row, worked out from the tables it is made of, no column of
 * every row (windows.py's RowFactors, as windows_factor_pass writes them): per instance + 1 ``counted``
 * (the counted rows' factor) and ``rest`` (the others'), the main thread's rows as [start, stop) pairs,
 * flat, and the compared pieces (ascending; piece p's rows: first + bounds[p] to first + bounds[p + 1])
 * with their factors. */
typedef struct {
    const int32_t *op;
    const uint8_t *full_row;
    int64_t n;
    int64_t n_ranges;
    const int64_t *ranges;
    const double *counted;
    const double *rest;
    int64_t n_compared;
    const int64_t *compared;
    const int64_t *bounds;
    int64_t first;
    const double *piece_factor;
    /* where the rebuild sums the time gone (GoneLeaf): numpy's tree's leaves, each one's first row
     * then n (residual_gone_leaves), their sums, and LEAF_SLOTS slots for leaves cut by a pass */
    int64_t n_leaves;
    const int64_t *leaf_lo;
    double *leaves;
    double *slots;
} RowFactors;

/* Rows read in ascending order (a row before the last one asked starts the walk again): the main
 * thread's next bound and the current compared piece's rows at hand. Held by value, the tables
 * copied in: a pass that writes a column through a pointer would otherwise reload them at each row. */
typedef struct {
    RowFactors f;
    int64_t last, main_q, main_stop, j, piece_start, piece_stop;
    int on_main;
} FactorWalk;

/* the walk's compared piece j's rows [piece_start, piece_stop) (none past the last) */
static inline void factor_piece(FactorWalk *w) {
    int has = w->j < w->f.n_compared;
    int64_t p = has ? w->f.compared[w->j] : 0;
    w->piece_start = has ? w->f.first + w->f.bounds[p] : INT64_MAX;
    w->piece_stop = has ? w->f.first + w->f.bounds[p + 1] : INT64_MAX;
}

__attribute__((always_inline)) static inline FactorWalk factor_walk(const RowFactors *f) {
    FactorWalk w;
    w.f = *f;
    w.last = -1, w.main_q = 0, w.j = 0, w.on_main = 0;
    w.main_stop = f->n_ranges > 0 && f->ranges[0] < f->n ? f->ranges[0] : f->n;
    factor_piece(&w);
    return w;
}

/* Row r's factor: windows_factor_pass's out[r] (the same expressions: the same bits). */
__attribute__((always_inline)) static inline double factor_at(FactorWalk *w, int64_t r) {
    if (__builtin_expect(r < w->last, 0)) *w = factor_walk(&w->f);
    w->last = r;
    while (__builtin_expect(r >= w->main_stop, 0) && w->main_q < 2 * w->f.n_ranges) {
        w->main_q++;
        w->on_main = (int)(w->main_q & 1);
        int64_t b = w->main_q < 2 * w->f.n_ranges ? w->f.ranges[w->main_q] : w->f.n;
        w->main_stop = b < w->f.n ? b : w->f.n;
    }
    while (__builtin_expect(r >= w->piece_stop, 0)) {
        w->j++;
        factor_piece(w);
    }
    int64_t o = (int64_t)w->f.op[r];
    double rest = w->f.rest[o + 1];
    if (!w->f.full_row[r]) return rest;
    if (r >= w->piece_start) return w->f.piece_factor[w->j] * rest;
    return o >= 0 || w->on_main ? w->f.counted[o + 1] : rest;
}

/* out[k] = row rows[k]'s factor (any order), for the few rows rebuild reads apart. */
void residual_factors_at(const RowFactors *f, int64_t m, const int64_t *rows, double *out) {
    FactorWalk w = factor_walk(f);
    for (int64_t k = 0; k < m; ++k) out[k] = factor_at(&w, rows[k]);
}

/* The leaves of numpy's pairwise tree over n values (Pairwise's, changed_node's): each one's first
 * row into lo (then n after the last); returns their count (at most n / 32 + 2). */
static int64_t leaf_starts(int64_t lo, int64_t n, int64_t *out, int64_t k) {
    if (n <= PAIRWISE_BLOCK) {
        out[k] = lo;
        return k + 1;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return leaf_starts(lo + n2, n - n2, out, leaf_starts(lo, n2, out, k));
}

int64_t residual_gone_leaves(int64_t n, int64_t *lo) {
    int64_t k = n > 0 ? leaf_starts(0, n, lo, 0) : 0;
    lo[k] = n;
    return k;
}

#define LEAF_SLOTS 8
#define SLOT_SIZE (2 + PAIRWISE_BLOCK) /* a slot: its leaf, the values in it so far, the values */

/* The rebuild's passes' time gone of each row (length - new), summed as np.sum sums their column:
 * each leaf of numpy's tree summed as numpy sums it (leaf_sum) once its values are in, into
 * ``leaves`` (residual_changed_sum joins them). A pass takes rows [s, e) (the main thread's first,
 * then those before and after it): a leaf within them gathers its values in the pass's own buffer,
 * one that s or e cuts in a slot, found by its leaf, where the other pass's values join them. */
typedef struct {
    int64_t idx, lo, end, s, e;
    double *buf;
    double *slot; /* the leaf's slot, or NULL: the pass's own buffer */
} GoneLeaf;

static double *gone_slot(const RowFactors *f, int64_t idx) {
    for (int64_t k = 0; k < LEAF_SLOTS; ++k) {
        double *sl = f->slots + k * SLOT_SIZE;
        if (sl[0] == (double)idx) return sl;
        if (sl[0] < 0) {
            sl[0] = (double)idx, sl[1] = 0.0;
            return sl;
        }
    }
    return NULL; /* not reached: a pass cuts two leaves, and there are three passes */
}

/* the leaf ``idx`` opened for the pass's rows (``local``: its own buffer) */
static inline void gone_open(GoneLeaf *g, const RowFactors *f, int64_t idx, double *local) {
    g->idx = idx, g->lo = f->leaf_lo[idx], g->end = f->leaf_lo[idx + 1];
    g->slot = g->lo >= g->s && g->end <= g->e ? NULL : gone_slot(f, idx);
    g->buf = g->slot ? g->slot + 2 : local;
}

/* the pass's values of the open leaf are in (its rows up to ``stop``): its sum where it has all */
static inline void gone_close(GoneLeaf *g, const RowFactors *f, int64_t stop) {
    int64_t len = g->end - g->lo;
    if (!g->slot) {
        f->leaves[g->idx] = leaf_sum(g->buf, len);
        return;
    }
    double *sl = g->slot;
    sl[1] += (double)(stop - (g->lo > g->s ? g->lo : g->s));
    if (sl[1] == (double)len) f->leaves[g->idx] = leaf_sum(g->buf, len);
}

/* the pass over rows [s, e): the leaf holding s opened */
static inline GoneLeaf gone_begin(const RowFactors *f, int64_t s, int64_t e, double *local) {
    GoneLeaf g = {0, 0, 0, s, e, NULL, NULL};
    if (s >= e) return g;
    int64_t lo = 0, hi = f->n_leaves; /* the last leaf whose first row is not past s */
    while (hi - lo > 1) {
        int64_t m = (lo + hi) >> 1;
        if (f->leaf_lo[m] <= s) lo = m;
        else hi = m;
    }
    gone_open(&g, f, lo, local);
    return g;
}

/* row i's time gone taken; the leaf closed (and the next opened) at its end */
__attribute__((always_inline)) static inline void gone_take(GoneLeaf *g, const RowFactors *f, int64_t i, double v,
                                                            double *local) {
    g->buf[i - g->lo] = v;
    if (__builtin_expect(i + 1 == g->end, 0)) {
        gone_close(g, f, g->end);
        if (g->end < g->e) gone_open(g, f, g->idx + 1, local);
    }
}

/* the pass ends at e: a leaf it cut keeps its values in its slot */
static inline void gone_end(GoneLeaf *g, const RowFactors *f) {
    if (g->s < g->e && g->e < g->end) gone_close(g, f, g->e);
}

/* The running sum of the new durations (np.cumsum's: one addition after another, from row 0; ``x``,
 * or where ``scaled`` (residual.correct_windows') each segment's length in ``old`` times x[i], its
 * window factor, as residual_scale works it out; with ``factors`` (not NULL) read there, not in x)
 * before each of ``rows`` (m of them, sorted): out[k] = np.cumsum(new)[rows[k] - 1], 0 for row 0. */
void residual_sums_before(const double *x, int64_t m, const int64_t *rows, double *out, int64_t scaled,
                          const Segments *old, const RowFactors *factors) {
    double s = 0.0;
    int64_t i = 0;
    SegWalk seg = seg_walk(old, 0);
    FactorWalk fw = factors ? factor_walk(factors) : (FactorWalk){0};
    for (int64_t k = 0; k < m; ++k) {
        for (; i < rows[k]; ++i) {
            double f = factors ? factor_at(&fw, i) : x[i];
            double v = scaled ? (double)(seg_walk_end(&seg, i) - old->ts[i]) * f : f;
            s = i == 0 ? v : s + v;
        }
        out[k] = s;
    }
}

/* rebuild_pass over one thread's rows [a, b) from the running sum ``before`` (returned after them):
 * their starts written, the last row's end to ``*end_ns``, the new lengths summed where ``counted``
 * (row_mode given). A segment ends where the next row on its thread starts (that row's own sum,
 * rounded alike), so each row's length is taken at the next row; the thread's last ends where its
 * length takes it. Inlined into a loop for each case of ``scaled`` and ``counted``, where they are
 * constants. */
__attribute__((always_inline)) static inline double rebuild_rows(
    int64_t a, int64_t b, double before, double start, const double *new_dur, int64_t *ts, int64_t start_ns,
    int64_t *j, int64_t m, const int64_t *rows, double *sums, const int scaled, SegWalk *seg, double *gone,
    int64_t keep_ratio, double *ratio, const int counted, const int8_t *row_mode, int64_t full_mode,
    int64_t *all_ns, int64_t *full_ns, int64_t *end_ns, FactorWalk *fw, GoneLeaf *gl, double *local) {
    double base = before, t = 0.0, nd = 0.0;
    int64_t prev_ns = 0, all = 0, full = 0;
    FactorWalk walk = {0}; /* held here by value (the rows' writes through ts cannot reach it) */
    GoneLeaf g = {0, 0, 0, 0, 0, NULL, NULL};
    if (scaled && fw) walk = *fw, g = *gl;
    for (int64_t i = a; i < b; ++i) {
        while (*j < m && rows[*j] == i) sums[(*j)++] = before;
        nd = scaled && fw ? factor_at(&walk, i) : new_dur[i];
        if (scaled) {
            double d = (double)(seg_walk_end(seg, i) - seg->ts[i]);
            nd = d * nd;
            if (fw) gone_take(&g, &walk.f, i, d - nd, local);
            else gone[i] = d - nd;
            if (keep_ratio) ratio[i] = d > 0 ? nd / d : 1.0;
        }
        double after = i == 0 ? nd : before + nd;
        t = before - base;
        t += start;
        int64_t t_ns = rint_i64(t) + start_ns;
        ts[i] = t_ns;
        if (counted && i > a) { /* the previous row's length: it ends where this row starts */
            int64_t d = t_ns - prev_ns;
            all += d;
            full += row_mode[i - 1] == full_mode ? d : 0;
        }
        prev_ns = t_ns;
        before = after;
    }
    if (a < b) {
        int64_t e_ns = rint_i64(t + nd) + start_ns;
        *end_ns = e_ns;
        if (counted) {
            int64_t d = e_ns - prev_ns;
            all += d;
            full += row_mode[b - 1] == full_mode ? d : 0;
        }
    }
    *all_ns += all, *full_ns += full;
    if (scaled && fw) *fw = walk, *gl = g;
    return before;
}

/* residual.rebuild's per-thread pass over threads k0 to k1 - 1 of n_threads: thread k's rows
 * [first[k], first[k + 1]) start at rel0[k] plus the sum of the thread's new durations before each
 * row (``new_dur``, or where ``scaled`` the segments' lengths in ``old`` times it), read off the
 * running sum of them over every row (np.cumsum's, kept as it goes on from ``before``: its value
 * before row first[k0], any at row 0); ``ts`` gets each row's start, rounded (np.rint), plus
 * ``start_ns``, and ``thread_end[k]`` the thread's last row's end, its start plus its new duration
 * (rounded alike): a segment ends where the next row on its thread starts, so no other end is
 * written. Where ``scaled`` (residual.correct_windows, its residual_scale in this pass), ``gone[i]``
 * gets length - new and, where ``keep_ratio``, ``ratio[i]`` new / length (1 where the length is 0);
 * with ``factors`` (not NULL) the factors are worked out there (RowFactors), not read in ``new_dur``,
 * and the time gone is summed into their leaves (GoneLeaf), not written to ``gone``; ``gone`` may
 * else be ``new_dur`` itself, and ``ts`` be ``old``'s starts (each row's and the next row's are read
 * before its own are written). On the way, ``sums`` gets the running sum before each
 * of ``rows`` (m of them, sorted, among these threads' rows): residual_sums_before's figures,
 * without a pass of their own. Then, at each of the n_ends rows ``ends`` (sorted; the scope ends,
 * Timeline.scope_ends) among these threads', the instance ``id[i]`` (numpy's index: from the end
 * where below 0) ends at the row's new start: ``inst_end[id[i]]`` = ts[i] where the row is after the
 * row ``end_row[id[i]]`` that wrote it last (-1: none), which it then becomes, as numpy's
 * ``inst_end[id[ends]] = ts[ends]`` leaves the last row's over every row's (in row order, whichever
 * threads a call takes first); one pass over those rows, no gathers of their own. An id outside
 * -n_inst to n_inst - 1 is counted in ``bad[0]`` (numpy raises there) and skipped. With ``row_mode``
 * (int8, each row's kind of window), the new lengths (end - start, whole ns) of the rows written are
 * summed into mode_ns[0], those whose row_mode[i] is ``full_mode`` into mode_ns[1]. Returns the
 * running sum after these threads' rows. */
static inline double rebuild_pass(int64_t n, const double *new_dur, int64_t *ts, int64_t *thread_end,
                                  int64_t n_threads, const int64_t *first, const double *rel0, int64_t start_ns,
                                  int64_t k0, int64_t k1, double before, int64_t m, const int64_t *rows,
                                  double *sums, int64_t scaled, const Segments *old, double *gone,
                                  int64_t keep_ratio, double *ratio, int64_t n_ends, const int64_t *ends,
                                  const int32_t *id, int64_t n_inst, int64_t *inst_end, int64_t *end_row,
                                  int64_t *bad, const int8_t *row_mode, int64_t full_mode, int64_t *mode_ns,
                                  const RowFactors *factors) {
    int64_t j = 0, q = k0 < k1 ? search_left(ends, n_ends, first[k0]) : n_ends;
    int64_t all_ns = 0, full_ns = 0;
    SegWalk seg = seg_walk(old, k0 < k1 ? first[k0] : n);
    FactorWalk walk = factors ? factor_walk(factors) : (FactorWalk){0};
    FactorWalk *fw = factors ? &walk : NULL;
    double local[PAIRWISE_BLOCK];
    int64_t stop = k1 < n_threads ? first[k1] : n;
    GoneLeaf gl = factors && scaled ? gone_begin(factors, k0 < k1 ? first[k0] : stop, stop, local) : (GoneLeaf){0};
    for (int64_t k = k0; k < k1; ++k) {
        int64_t a = first[k], b = k + 1 < n_threads ? first[k + 1] : n;
#define REBUILD_ROWS(SCALED, COUNTED)                                                                     \
    rebuild_rows(a, b, before, rel0[k], new_dur, ts, start_ns, &j, m, rows, sums, SCALED, &seg, gone, keep_ratio, \
                 ratio, COUNTED, row_mode, full_mode, &all_ns, &full_ns, thread_end + k, fw, &gl, local)
        if (scaled && row_mode)
            before = REBUILD_ROWS(1, 1);
        else if (scaled)
            before = REBUILD_ROWS(1, 0);
        else if (row_mode)
            before = REBUILD_ROWS(0, 1);
        else
            before = REBUILD_ROWS(0, 0);
#undef REBUILD_ROWS
    }
    if (row_mode) mode_ns[0] += all_ns, mode_ns[1] += full_ns;
    if (factors && scaled) gone_end(&gl, factors);
    for (; q < n_ends && ends[q] < stop; ++q) {
        int64_t i = ends[q], o = id[i];
        if (o < -n_inst || o >= n_inst) {
            ++bad[0];
            continue;
        }
        o = wrap(o, n_inst);
        if (i > end_row[o]) inst_end[o] = ts[i], end_row[o] = i;
    }
    return before;
}

/* rebuild_pass as one function: with ``n_mode`` 0 nothing is counted; with ``n_mode`` n (row_mode)
 * the new lengths of the rows it writes are summed by kind of window into mode_ns: what
 * full_windows.full_share sums off the corrected main thread's rows, without a pass of its own.
 * ``factors``: NULL, or where ``scaled`` the rows' factors (RowFactors), no column of them. */
double residual_rebuild(int64_t n, const double *new_dur, int64_t *ts, int64_t *thread_end, int64_t n_threads,
                        const int64_t *first, const double *rel0, int64_t start_ns, int64_t k0, int64_t k1,
                        double before, int64_t m, const int64_t *rows, double *sums, int64_t scaled,
                        const Segments *old, double *gone, int64_t keep_ratio, double *ratio, int64_t n_ends,
                        const int64_t *ends, const int32_t *id, int64_t n_inst, int64_t *inst_end,
                        int64_t *end_row, int64_t *bad, int64_t n_mode, const int8_t *row_mode, int64_t full_mode,
                        int64_t *mode_ns, const RowFactors *factors) {
    return rebuild_pass(n, new_dur, ts, thread_end, n_threads, first, rel0, start_ns, k0, k1, before, m, rows,
                        sums, scaled, old, gone, keep_ratio, ratio, n_ends, ends, id, n_inst, inst_end, end_row,
                        bad, n_mode == n ? row_mode : NULL, full_mode, mode_ns, factors);
}

/* module_calls.planned's first pass over rows [a, b) of one thread: for the rows inside a costed
 * instance (table[op] > 0, op -1 reading the last entry), their segment's length added to
 * ``all_sum[op]`` and, where the interpreter ran (``not_python[cat]`` false), to ``python_sum[op]``.
 * Sums of whole ns, exact in any order: a run of rows of one instance is summed as integers, then
 * added. Returns the number of such rows. */
int64_t residual_module_sums(int64_t a, int64_t b, const int32_t *op, const Segments *segs, const int8_t *cat,
                             const uint8_t *not_python, const double *table, int64_t len, double *python_sum,
                             double *all_sum) {
    int64_t costed = 0, cur = -1, run_all = 0, run_python = 0;
    SegWalk seg = seg_walk(segs, a);
    for (int64_t i = a; i < b; ++i) {
        int64_t o = wrap(op[i], len);
        if (o != cur) {
            if (cur >= 0) all_sum[cur] += (double)run_all, python_sum[cur] += (double)run_python;
            cur = table[o] > 0 ? o : -1;
            run_all = run_python = 0;
        }
        if (cur < 0) continue;
        int64_t d = seg_walk_end(&seg, i) - segs->ts[i];
        run_all += d;
        if (!not_python[(uint8_t)cat[i]]) run_python += d;
        ++costed;
    }
    if (cur >= 0) all_sum[cur] += (double)run_all, python_sum[cur] += (double)run_python;
    return costed;
}

/* module_calls.planned's second pass over rows [a, b) of one thread: each row's share of its
 * instance's cost, out[i] = (total[op] > 0 ? weight / total[op] : 0) * table[op], where the weight is
 * the segment's length where the interpreter ran or the instance has no such segment, else 0. */
void residual_module_spread(int64_t a, int64_t b, const int32_t *op, const Segments *segs, const int8_t *cat,
                            const uint8_t *not_python, const uint8_t *has_python, const double *total,
                            const double *table, int64_t len, double *out) {
    SegWalk seg = seg_walk(segs, a);
    for (int64_t i = a; i < b; ++i) {
        int64_t o = wrap(op[i], len);
        double d = (double)(seg_walk_end(&seg, i) - segs->ts[i]);
        double w = d * (double)(!not_python[(uint8_t)cat[i]] || !has_python[o]);
        double t = total[o];
        w = t > 0 ? w / t : 0.0;
        w *= table[o];
        out[i] = w;
    }
}

/* flush_stall.measure's figures per instance over rows [a, b) of one thread: ``excl[op]`` += the
 * segment's length (Timeline.instance_time: sums of whole ns, exact in any order) and ``over[op]`` +=
 * ``bound[i]`` where it is not 0 (np.bincount over those rows: one after another, in row order), for
 * the rows inside an instance (0 <= op < n_inst). A run of rows of one instance is summed in
 * registers (the same additions in the same order), not through memory at each row. */
void residual_instance_sums(int64_t a, int64_t b, const int32_t *op, const Segments *segs, const double *bound,
                            int64_t n_inst, double *excl, double *over) {
    int64_t cur = -1, run_ns = 0;
    SegWalk seg = seg_walk(segs, a);
    double run_over = 0.0;
    for (int64_t i = a; i < b; ++i) {
        int64_t o = op[i];
        if (o != cur) {
            if (cur >= 0) excl[cur] += (double)run_ns, over[cur] = run_over;
            cur = o >= 0 && o < n_inst ? o : -1;
            run_ns = 0;
            if (cur >= 0) run_over = over[cur];
        }
        if (cur < 0) continue;
        run_ns += seg_walk_end(&seg, i) - segs->ts[i];
        if (bound[i] != 0) run_over += bound[i];
    }
    if (cur >= 0) excl[cur] += (double)run_ns, over[cur] = run_over;
}

/* The first row of [lo, hi) whose time is after ``t`` (hi where none): np.searchsorted(side="right"). */
static inline int64_t after_time(const int64_t *ts, int64_t lo, int64_t hi, int64_t t) {
    return lo + search_right(ts + lo, hi - lo, t);
}

/* residual.Correction.remap's lookups: each query, a raw time t[q] on the thread whose rows are
 * [first[k], first[k + 1]) with k = block[q], takes the last of those rows starting at or before it
 * (the numpy version's search of its (thread, time) keys); where there is one, the query moves to
 * that row's corrected start plus the time into its raw segment (at most the segment) times the
 * row's ``ratio``, rounded (np.rint); else (an empty block among them) it stays. A query after the previous one on the same
 * thread is searched for from the previous one's row onward, in steps that double (launches come
 * in time order, mostly): a few rows read in the CPU's cache instead of a search of the thread. */
void residual_remap(int64_t m, const int64_t *block, const int64_t *t, const int64_t *first, const Segments *raw,
                    const int64_t *new_ts, const double *ratio, int64_t *out) {
    const int64_t *ts = raw->ts;
    int64_t prev_k = -1, prev_p = 0, prev_t = 0;
    for (int64_t q = 0; q < m; ++q) {
        int64_t k = block[q], tq = t[q], a = first[k], b = first[k + 1], lo = a, hi = b;
        if (k == prev_k && tq >= prev_t) { /* the row is at prev_p - 1 or later */
            int64_t probe = prev_p, step = 1;
            lo = prev_p;
            while (probe < b && ts[probe] <= tq) lo = probe + 1, probe = lo + step, step <<= 1;
            hi = probe < b ? probe : b;
        }
        int64_t p = after_time(ts, lo, hi, tq);
        prev_k = k, prev_p = p, prev_t = tq;
        int64_t row = p - 1;
        if (row < a) {
            out[q] = tq;
            continue;
        }
        int64_t into = tq - ts[row], length = seg_end_at(raw, row) - ts[row];
        if (length < into) into = length;
        out[q] = new_ts[row] + rint_i64((double)into * ratio[row]);
    }
}

