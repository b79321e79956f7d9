/* A timeline row's segment, [ts[i], end): the timeline keeps no column of the ends. A row's segment
 * ends where the next row on its thread starts, and a thread's last row's where the thread ends, so
 * the loops read ts[i + 1], or at the few rows that are a thread's last, that thread's end
 * (Timeline.segments in analysis/timeline.py builds this struct). */
#ifndef RLSCOPE_SEGMENTS_H
#define RLSCOPE_SEGMENTS_H
#include <stdint.h>

typedef struct {
    const int64_t *ts;   /* the rows' starts, n of them */
    int64_t n;
    int64_t n_last;      /* the threads */
    const int64_t *last; /* each thread's last row, ascending (the last is n - 1) */
    const int64_t *end;  /* its segment's end */
} Segments;

/* The end of row i's segment, rows read in any order: a binary search among the threads' last rows. */
static inline int64_t seg_end_at(const Segments *s, int64_t i) {
    int64_t lo = 0, hi = s->n_last;
    while (lo < hi) {
        int64_t m = (lo + hi) >> 1;
        if (s->last[m] < i) lo = m + 1;
        else hi = m;
    }
    return lo < s->n_last && s->last[lo] == i ? s->end[lo] : s->ts[i + 1];
}

/* Rows read in ascending order: the next thread's last row kept at hand, so a row's end costs one
 * comparison (seg_walk_end). */
typedef struct {
    const Segments *s;
    int64_t k, next; /* the first thread whose last row is not below the rows asked, and that row */
} SegWalk;

static inline SegWalk seg_walk(const Segments *s, int64_t from) {
    SegWalk w = {s, 0, 0};
    while (w.k < s->n_last && s->last[w.k] < from) w.k++;
    w.next = w.k < s->n_last ? s->last[w.k] : INT64_MAX;
    return w;
}

/* The end of row i's segment, i not below the row asked before. */
static inline int64_t seg_walk_end(SegWalk *w, int64_t i) {
    if (__builtin_expect(i < w->next, 1)) return w->s->ts[i + 1];
    const Segments *s = w->s;
    while (w->k < s->n_last && s->last[w->k] < i) w->k++;
    w->next = w->k < s->n_last ? s->last[w->k] : INT64_MAX;
    return w->next == i ? s->end[w->k] : s->ts[i + 1];
}

#endif
