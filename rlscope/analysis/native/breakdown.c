/* The breakdown's row loops (rlscope/analysis/breakdown.py): the sums over a timeline's counted rows,
 * those of positive duration whose pair (RowGroups.row_pair) is >= 0. A row is on the main thread
 * when it lies in [main_lo, main_hi) (Timeline.main_rows: a timeline's rows are grouped by thread). */
#include <stdint.h>

/* _counted_sums' loop: per counted row, its duration (ns) added to sums[(pair * ncat + cat) * 2 + main]
 * and, where its pair is an operation's (is_op), to inst_cat[op * ncat + cat]. Every value is a whole
 * number of ns, so the sums are exact in any order, as the numpy version's bincounts per block are.
 * Returns whether a counted row is off the main thread (CountedSums.off_main). */
int64_t breakdown_counted_sums(int64_t n, const int64_t *ts, const int64_t *seg_end, const int32_t *row_pair,
                               const int8_t *cat, const int32_t *op, int64_t main_lo, int64_t main_hi,
                               const uint8_t *is_op, int64_t ncat, double *sums, double *inst_cat) {
    int64_t off_main = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t d = seg_end[i] - ts[i];
        int32_t pair = row_pair[i];
        if (d <= 0 || pair < 0)
            continue;
        int64_t main = i >= main_lo && i < main_hi;
        off_main |= !main;
        double w = (double)d;
        sums[((int64_t)pair * ncat + cat[i]) * 2 + main] += w;
        if (is_op[pair])
            inst_cat[(int64_t)op[i] * ncat + cat[i]] += w;
    }
    return off_main;
}

/* _full_window_sums' loop: per counted row, its duration times its share in full windows (full) added
 * to out[rank[pair * 2 + main] * ncat + cat], in row order (the products are fractions of a ns: the
 * order of the additions is np.add.at's). */
void breakdown_full_window_sums(int64_t n, const int64_t *ts, const int64_t *seg_end, const int32_t *row_pair,
                                const int8_t *cat, const double *full, int64_t main_lo, int64_t main_hi,
                                const int64_t *rank, int64_t ncat, double *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t d = seg_end[i] - ts[i];
        int32_t pair = row_pair[i];
        if (d <= 0 || pair < 0)
            continue;
        int64_t main = i >= main_lo && i < main_hi;
        out[rank[(int64_t)pair * 2 + main] * ncat + cat[i]] += (double)d * full[i];
    }
}

/* The noise's sums per group of operation instances (rlscope/analysis/noise.py), over the rows of
 * x (m instances by ncol columns, row-major) whose group g is >= 0, in row order: per column, the
 * additions np.bincount(g, weights=x[:, c]) makes. out: (groups, ncol), added to. */
void breakdown_group_sums(int64_t m, int64_t ncol, const int64_t *g, const double *x, double *out) {
    for (int64_t i = 0; i < m; i++) {
        if (g[i] < 0)
            continue;
        const double *row = x + i * ncol;
        double *cell = out + g[i] * ncol;
        for (int64_t c = 0; c < ncol; c++)
            cell[c] += row[c];
    }
}

/* As breakdown_group_sums, of each value's squared distance from its group's mean (mean: (groups,
 * ncol)): np.bincount(g, weights=((x - mean[g]) ** 2)[:, c]) per column. */
void breakdown_group_sq_dev(int64_t m, int64_t ncol, const int64_t *g, const double *x, const double *mean,
                            double *out) {
    for (int64_t i = 0; i < m; i++) {
        if (g[i] < 0)
            continue;
        const double *row = x + i * ncol, *mu = mean + g[i] * ncol;
        double *cell = out + g[i] * ncol;
        for (int64_t c = 0; c < ncol; c++) {
            double d = row[c] - mu[c];
            cell[c] += d * d;
        }
    }
}

/* As breakdown_group_sums, of what each value is above its group's mean, floored at 0:
 * np.bincount(g, weights=np.maximum(x[:, c] - mean[g, c], 0.0)) per column (np.maximum keeps a NaN). */
void breakdown_group_excess(int64_t m, int64_t ncol, const int64_t *g, const double *x, const double *mean,
                            double *out) {
    for (int64_t i = 0; i < m; i++) {
        if (g[i] < 0)
            continue;
        const double *row = x + i * ncol, *mu = mean + g[i] * ncol;
        double *cell = out + g[i] * ncol;
        for (int64_t c = 0; c < ncol; c++) {
            double d = row[c] - mu[c];
            cell[c] += (d >= 0.0 || d != d) ? d : 0.0;
        }
    }
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

/* _noise's exclusive columns of each operation instance: x[i, 2 + j] = inst_cat[i, cats[j]] for the
 * n_cpu categories cats, x[i, 1] their sum (x: n_inst by ncol, row-major). Whole ns, so the sum is
 * exact in any order, as numpy's x[:, 2:2 + n_cpu].sum(axis=1) is. */
void breakdown_exclusive_columns(int64_t n_inst, int64_t ncat, const double *inst_cat, int64_t n_cpu,
                                 const int64_t *cats, int64_t ncol, double *x) {
    for (int64_t i = 0; i < n_inst; i++) {
        const double *in = inst_cat + i * ncat;
        double *row = x + i * ncol, sum = 0.0;
        for (int64_t j = 0; j < n_cpu; j++) {
            row[2 + j] = in[cats[j]];
            sum += in[cats[j]];
        }
        row[1] = sum;
    }
}
