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
