/* The residual overhead correction's row loops (rlscope/overhead/correct/residual.py and
 * module_calls.py), each one pass over the rows where the numpy version makes several. Floats are
 * added in the order numpy adds them (np.bincount and np.cumsum: one after another in row order),
 * and rounded as np.rint does (nearbyint: half to even), so both give the same bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* np.minimum of two doubles: NaN when either is, else the smaller (the second when they are equal) */
static inline double min_nan(double a, double b) { return (a < b || isnan(a)) ? a : b; }

/* The cost one row pays before and after its timestamp, and its class: residual.correct_timeline's
 * ``before_of[code]``, ``after_of[code]`` and ``paying`` per row, where ``code`` is the row's class
 * (event_classes: by kind, a category row by its category, forced closes none) plus 5 where the row
 * opens; a measured row (``measured``, sorted, read through ``*j``) takes its own figures. */
typedef struct {
    const int8_t *kind, *cat, *flags;
    const int32_t *id;
    const int8_t *kind_class;
    const uint8_t *kind_opens;
    int64_t n_kinds;
    int64_t backend_cat, profiler_cat, forced_flag, category_class, backend_class, n_classes;
    const double *before_of, *after_of;
    const uint8_t *pays;
    const int64_t *measured;
    const double *m_before, *m_after;
    int64_t n_measured;
} RowCosts;

static inline int row_costs(const RowCosts *c, int64_t i, int64_t *j, double *before, double *after, int *cls) {
    uint8_t k = (uint8_t)c->kind[i];
    int cl = k < c->n_kinds ? c->kind_class[k] : 0;
    int opens = k < c->n_kinds ? c->kind_opens[k] : 0;
    if (cl == c->category_class) {
        if (c->id[i] == c->backend_cat)
            cl = (int)c->backend_class;
        else if (c->id[i] == c->profiler_cat)
            cl = 0;
    }
    if (c->flags[i] & c->forced_flag) cl = 0;
    *cls = cl;
    int code = cl + opens * (int)c->n_classes;
    if (*j < c->n_measured && c->measured[*j] == i) {
        *before = c->m_before[*j];
        *after = c->m_after[*j];
        ++*j;
        return 1;
    }
    if (!c->pays[code]) return 0;
    *before = c->before_of[code];
    *after = c->after_of[code];
    return 1;
}

/* residual.correct_timeline's planned removal, up to _place's first step, in one pass:
 * ``dur`` (the segments' lengths, Timeline.float_duration); ``planned[i]`` = row i's cost after its
 * timestamp, plus the next row's before it where that row is on the same thread, plus ``mem[i]`` and
 * ``mods[i]`` where given (n_mem, n_mods = n), in that order; the whole segment for a ``profiler`` row
 * (the ``rlscope`` category off the writer's threads, written here); ``removal`` = np.minimum(planned,
 * dur); ``per_class``: np.bincount(cls, weights=before + after) over the paying rows. Returns the
 * number of rows whose planned removal does not fit (not planned <= dur): _place's neighbours. */
int64_t residual_planned(
    int64_t n, const int64_t *ts, const int64_t *seg_end, const int8_t *kind, const int8_t *cat,
    const int8_t *flags, const int32_t *id, const uint8_t *last, const uint8_t *on_writer,
    const int8_t *kind_class, const uint8_t *kind_opens, int64_t n_kinds, int64_t n_classes,
    int64_t category_class, int64_t backend_class, int64_t backend_cat, int64_t profiler_cat,
    int64_t forced_flag, const double *before_of, const double *after_of, const uint8_t *pays,
    int64_t n_measured, const int64_t *measured, const double *m_before, const double *m_after,
    int64_t n_mem, const double *mem, int64_t n_mods, const double *mods, double *dur, double *planned,
    double *removal, uint8_t *profiler, double *per_class) {
    RowCosts c = {kind, cat, flags, id, kind_class, kind_opens, n_kinds, backend_cat, profiler_cat,
                  forced_flag, category_class, backend_class, n_classes, before_of, after_of, pays,
                  measured, m_before, m_after, n_measured};
    int64_t j = 0, over = 0;
    double b0 = 0.0, a0 = 0.0, b1 = 0.0, a1 = 0.0;
    int cls0 = 0, cls1 = 0;
    int pay0 = n > 0 ? row_costs(&c, 0, &j, &b0, &a0, &cls0) : 0, pay1 = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (i + 1 < n) pay1 = row_costs(&c, i + 1, &j, &b1, &a1, &cls1);
        if (pay0) per_class[cls0] += b0 + a0;
        double p = pay0 ? a0 : 0.0;
        if (i + 1 < n && pay1 && !last[i]) p += b1;
        if (n_mem == n) p += mem[i];
        if (n_mods == n) p += mods[i];
        double d = (double)(seg_end[i] - ts[i]);
        uint8_t prof = cat[i] == profiler_cat && !on_writer[i];
        if (prof) p = d;
        dur[i] = d;
        planned[i] = p;
        profiler[i] = prof;
        removal[i] = min_nan(p, d);
        over += !(p <= d);
        pay0 = pay1, b0 = b1, a0 = a1, cls0 = cls1;
    }
    return over;
}

/* ``out[i]`` = ``values[i]`` where ``mask[i]``, else 0.0: np.where(mask, values, 0.0), for numpy to
 * sum (pairwise) as it sums its own. */
void residual_where(int64_t n, const uint8_t *mask, const double *values, double *out) {
    for (int64_t i = 0; i < n; ++i) out[i] = mask[i] ? values[i] : 0.0;
}

/* ``values[~mask]`` written to the front of ``out``; returns their count (numpy then sums them). */
int64_t residual_unmasked(int64_t n, const double *values, const uint8_t *mask, double *out) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i)
        if (!mask[i]) out[m++] = values[i];
    return m;
}

/* residual.rebuild's per-thread pass: ``seg_end`` holds, as doubles, the running sum of ``new_dur``
 * (np.cumsum, row i included) on entry. Thread k's rows [first[k], first[k + 1]) start at rel0[k]
 * plus the sum of the thread's new durations before each row; ``ts`` and ``seg_end`` (overwritten
 * row by row, the sum read first) get the start and the end, rounded (np.rint), plus ``start_ns``. */
void residual_rebuild(int64_t n, const double *new_dur, int64_t *ts, int64_t *seg_end, int64_t n_threads,
                      const int64_t *first, const double *rel0, int64_t start_ns) {
    double before = 0.0; /* the running sum before row i */
    for (int64_t k = 0; k < n_threads; ++k) {
        int64_t a = first[k], b = k + 1 < n_threads ? first[k + 1] : n;
        double base = before, start = rel0[k];
        for (int64_t i = a; i < b; ++i) {
            double after;
            memcpy(&after, &seg_end[i], sizeof after);
            double t = before - base;
            t += start;
            double e = t + new_dur[i];
            ts[i] = (int64_t)nearbyint(t) + start_ns;
            seg_end[i] = (int64_t)nearbyint(e) + start_ns;
            before = after;
        }
    }
}

/* residual.correct_windows' durations: ``factor`` becomes the new ones (dur * factor), ``gone`` gets
 * dur - new (for numpy's sum) and, where ``keep_ratio``, ``ratio`` new / dur (1 where dur is 0). */
void residual_scale(int64_t n, const int64_t *ts, const int64_t *seg_end, double *factor, double *gone,
                    int64_t keep_ratio, double *ratio) {
    for (int64_t i = 0; i < n; ++i) {
        double d = (double)(seg_end[i] - ts[i]);
        double nd = d * factor[i];
        factor[i] = nd;
        gone[i] = d - nd;
        if (keep_ratio) ratio[i] = d > 0 ? nd / d : 1.0;
    }
}

static inline int64_t wrap(int64_t i, int64_t len) { return i < 0 ? i + len : i; }

/* module_calls.planned's first pass over rows [a, b) of one thread: for the rows inside a costed
 * instance (table[op] > 0, op -1 reading the last entry), their segment's length added to
 * ``all_sum[op]`` and, where the interpreter ran (``not_python[cat]`` false), to ``python_sum[op]``.
 * Sums of whole ns: exact in any order. Returns the number of such rows. */
int64_t residual_module_sums(int64_t a, int64_t b, const int32_t *op, const int64_t *ts,
                             const int64_t *seg_end, const int8_t *cat, const uint8_t *not_python,
                             const double *table, int64_t len, double *python_sum, double *all_sum) {
    int64_t costed = 0;
    for (int64_t i = a; i < b; ++i) {
        int64_t o = wrap(op[i], len);
        if (!(table[o] > 0)) continue;
        double d = (double)(seg_end[i] - ts[i]);
        all_sum[o] += d;
        python_sum[o] += d * (double)!not_python[(uint8_t)cat[i]];
        ++costed;
    }
    return costed;
}

/* module_calls.planned's second pass over rows [a, b) of one thread: each row's share of its
 * instance's cost, out[i] = (total[op] > 0 ? weight / total[op] : 0) * table[op], where the weight is
 * the segment's length where the interpreter ran or the instance has no such segment, else 0. */
void residual_module_spread(int64_t a, int64_t b, const int32_t *op, const int64_t *ts,
                            const int64_t *seg_end, const int8_t *cat, const uint8_t *not_python,
                            const uint8_t *has_python, const double *total, const double *table,
                            int64_t len, double *out) {
    for (int64_t i = a; i < b; ++i) {
        int64_t o = wrap(op[i], len);
        double d = (double)(seg_end[i] - ts[i]);
        double w = d * (double)(!not_python[(uint8_t)cat[i]] || !has_python[o]);
        double t = total[o];
        w = t > 0 ? w / t : 0.0;
        w *= table[o];
        out[i] = w;
    }
}
