/* A timeline row's segment, [ts[i], end): the timeline keeps no column of the ends. A row's segment
 * ends where the next row on its thread starts, and a thread's last row's where the thread ends, so
 * the loops read ts[i + 1], or at the few rows that are a thread's last, that thread's end
 * (Timeline.segments in analysis/timeline.py builds this struct). */
#ifndef RLSCOPE_SEGMENTS_H
#define RLSCOPE_SEGMENTS_H
#include <stdint.h>

#include "search.h"

typedef struct {
    const int64_t *ts;   /* the rows' starts, n of them */
    int64_t n;
    int64_t n_last;      /* the threads */
    const int64_t *last; /* each thread's last row, ascending (the last is n - 1) */
    const int64_t *end;  /* its segment's end */
} Segments;

/* The end of row i's segment, rows read in any order: a binary search among the threads' last rows. */
static inline int64_t seg_end_at(const Segments *s, int64_t i) {
    int64_t lo = search_left(s->last, s->n_last, i);
    return lo < s->n_last && s->last[lo] == i ? s->end[lo] : s->ts[i + 1];
}

/* Rows read in ascending order, the walk held by value: the next thread's last row at hand
 * (``next``), so that a row before it (its end the next row's start) costs one comparison, and a pass
 * over every row can run its rows up to it with no test at all. (Read through a pointer to the
 * Segments, the last rows would be reloaded after each byte a pass writes.) */
typedef struct {
    const int64_t *ts, *last, *end;
    int64_t n_last;
    int64_t k;    /* the first thread whose last row is not below the rows asked */
    int64_t next; /* its last row (INT64_MAX past the last thread) */
} SegWalk;

/* The walk moved on to the first thread whose last row is not below row ``from``. */
static inline SegWalk seg_walk_from(SegWalk w, int64_t from) {
    while (w.k < w.n_last && w.last[w.k] < from) w.k++;
    w.next = w.k < w.n_last ? w.last[w.k] : INT64_MAX;
    return w;
}

/* A walk of ``s`` from row ``from`` on. */
static inline SegWalk seg_walk(const Segments *s, int64_t from) {
    SegWalk w = {s->ts, s->last, s->end, s->n_last, 0, INT64_MAX};
    return seg_walk_from(w, from);
}

/* The end of row i's segment, i not below the row asked before. */
static inline int64_t seg_walk_end(SegWalk *w, int64_t i) {
    if (__builtin_expect(i < w->next, 1)) return w->ts[i + 1];
    *w = seg_walk_from(*w, i);
    return w->next == i ? w->end[w->k] : w->ts[i + 1];
}

#endif
