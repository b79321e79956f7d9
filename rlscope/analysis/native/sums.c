/* numpy's sum of a column of doubles that is +0.0 but at a few rows, read at those rows only.
 *
 * np.sum of a contiguous float64 column is 0.0 plus numpy's pairwise sum of it (numpy/_core/src/umath/
 * loops_utils.h.src, @TYPE@_pairwise_sum): under 8 values one after another; up to 128, eight
 * running sums over the values 8 apart, joined ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the rest
 * one after another; above, the two halves' sums (the first half's length the half rounded down to
 * a multiple of 8) added. Adding +0.0 leaves a sum as it is (but for a -0.0, whose sign the final
 * 0.0 + drops where every value is 0), so the same tree walked over the rows alone gives the same
 * bits: a block without a row adds +0.0. The Python side checks it against np.sum once, and sums
 * with numpy where they differ (another numpy). */
#include <stdint.h>

#define PW_BLOCK 128

/* the first index in rows[a, b) whose row is >= x */
static int64_t lower(const int64_t *rows, int64_t a, int64_t b, int64_t x) {
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (rows[m] < x) a = m + 1; else b = m;
    }
    return a;
}

/* the pairwise sum of the column's [lo, lo + n), whose rows among rows[a, b) hold values[a, b) */
static double pairwise(int64_t lo, int64_t n, const int64_t *rows, const double *values, int64_t a, int64_t b) {
    if (a == b) return 0.0;
    if (n < 8) {
        double res = 0.0;
        for (int64_t k = a; k < b; k++) res += values[k];
        return res;
    }
    if (n <= PW_BLOCK) {
        double r[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        int64_t tail = lo + n - n % 8; /* the rows from here are added one after another */
        int64_t k = a;
        for (; k < b && rows[k] < tail; k++) r[(rows[k] - lo) % 8] += values[k];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; k < b; k++) res += values[k];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    int64_t split = lower(rows, a, b, lo + n2);
    return pairwise(lo, n2, rows, values, a, split) + pairwise(lo + n2, n - n2, rows, values, split, b);
}

/* np.sum of a column of n doubles, +0.0 but values[k] at rows[k] (m of them, strictly ascending,
 * each in [0, n)); -1.0 and *ok = 0 where the rows are not so (the caller sums with numpy) */
double sums_at_rows(int64_t n, int64_t m, const int64_t *rows, const double *values, int64_t *ok) {
    for (int64_t k = 0; k < m; k++) {
        if (rows[k] < 0 || rows[k] >= n || (k > 0 && rows[k] <= rows[k - 1])) {
            *ok = 0;
            return -1.0;
        }
    }
    *ok = 1;
    return 0.0 + pairwise(0, n, rows, values, 0, m);
}
