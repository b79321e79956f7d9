/* Binary searches over a sorted int64 array, as numpy's searchsorted makes them: the one copy the
 * analysis's C files share. */
#ifndef RLSCOPE_SEARCH_H
#define RLSCOPE_SEARCH_H
#include <stdint.h>

/* The first index of sorted a[0..n) whose value is not below t (n where none): side="left". */
static inline int64_t search_left(const int64_t *a, int64_t n, int64_t t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The first index of sorted a[0..n) whose value is after t (n where none): side="right". */
static inline int64_t search_right(const int64_t *a, int64_t n, int64_t t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#endif
