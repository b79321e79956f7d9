/* The timeline's row loops (rlscope/analysis/timeline.py): the merge of a process's events with the
 * intervals recorded beside them, and the checks of their order. */
#include <stdint.h>

#include "segments.h"

/* Whether intervals are in (thread, start) order: timeline._sorted_by_thread's comparison of each
 * row with the next. Returns 1 or 0. */
int64_t timeline_sorted_by_thread(int64_t n, const int64_t *thread, const int64_t *start) {
    for (int64_t i = 0; i + 1 < n; i++) {
        if (thread[i + 1] < thread[i] || (thread[i + 1] == thread[i] && start[i + 1] < start[i])) return 0;
    }
    return 1;
}

/* One source of added intervals: its rows are begin, end, begin, end... of intervals in (thread,
 * start) order; ``name`` NULL: -1 on its rows. With ``clip``, the intervals as recorded, read as
 * timeline.backend_intervals makes them (clip_next): each start and end clipped to [lo, hi], an end
 * cut where the next interval on its thread starts, and those left no longer than zero left out. */
typedef struct {
    int64_t n;  /* rows: twice the intervals */
    const int64_t *thread, *start, *end;
    const int32_t *name;
    int8_t begin_kind, end_kind;
    int clip;
    int64_t lo, hi;
} source_t;

static inline int64_t source_ts(const source_t *s, int64_t r) {
    return (r & 1) ? s->end[r >> 1] : s->start[r >> 1];
}

/* np.clip(v, lo, hi): the larger of v and lo, then the smaller of that and hi. */
static inline int64_t clip_to(int64_t v, int64_t lo, int64_t hi) {
    v = v > lo ? v : lo;
    return v < hi ? v : hi;
}

/* A clipped source's first interval from j on that is longer than zero once clipped and cut (its
 * start and end written to *b, *e), or n / 2 past the last. Each interval's thread and clipped start
 * are checked against the one before it (prev_thread, prev_start; none before interval 0), kept or
 * not, as backend_intervals' order check reads them: -3 where the threads go down, -1 where a
 * thread's starts do (numpy sorts them). */
static inline int64_t clip_next(const source_t *s, int64_t j, int64_t prev_thread, int64_t prev_start,
                                int64_t *b, int64_t *e) {
    int64_t m = s->n >> 1;
    for (; j < m; j++) {
        int64_t t = s->thread[j], start = clip_to(s->start[j], s->lo, s->hi);
        if (j > 0 && t < prev_thread) return -3;
        if (j > 0 && t == prev_thread && start < prev_start) return -1;
        int64_t end = clip_to(s->end[j], s->lo, s->hi);
        if (j + 1 < m && s->thread[j + 1] == t) {
            int64_t next = clip_to(s->start[j + 1], s->lo, s->hi);
            end = next < end ? next : end;
        }
        if (end > start) {
            *b = start, *e = end;
            return j;
        }
        prev_thread = t, prev_start = start;
    }
    return m;
}

/* Whether a row at (thread, ts) goes before one at (q_thread, q_ts): rows are in (thread, time)
 * order, and at equal ones ``ties_first`` says (the earlier part's row goes first). */
static inline int precedes(int64_t thread, int64_t ts, int64_t q_thread, int64_t q_ts, int ties_first) {
    return thread < q_thread || (thread == q_thread && (ts < q_ts || (ts == q_ts && ties_first)));
}

#define MAX_SOURCES 3
#define I32_FITS(v) ((v) >= INT32_MIN && (v) <= INT32_MAX)

/* The states after each row, written in the merge's pass where asked: timeline.build_timeline's
 * forward fills of the operation, category and phase (timeline._state_after: a thread's first row
 * restarts each at its default) and the category's marks inside the sources' intervals
 * (timeline._mark_inside: its running count of each marked source's begins less its ends, 1 inside).
 * An event row changes the stack ``stack`` says (per kind byte: 0 operation, 1 category, 2 phase, 3
 * none; +4 where the kind opens) to its id where it opens, else to its parent; the events hold no rows
 * of the sources' kinds (timeline.build_timeline asks for the states only then). */
typedef struct {
    int on;
    const uint8_t *stack;
    int32_t *op, *phase;
    int8_t *cat;
    int64_t dflt_op, dflt_cat, dflt_phase;
    int64_t cur_op, cur_cat, cur_phase; /* the states after the row before */
    int64_t inside; /* the category code the sources' intervals mark there (states_inside); -1: none */
    int64_t keep;   /* the category no mark replaces (rlscope's own work) */
    int64_t top;    /* the largest operation or phase instance a row changes the state to, -1: none */
} states_t;

#define I8_FITS(v) ((v) >= INT8_MIN && (v) <= INT8_MAX)

/* Row i's states written, ``first`` where it is its thread's first; ``st`` the row's entry of
 * ``stack`` (3 for an added row), ``value`` the state it changes to. Returns 0, or -5 where an
 * operation or phase does not fit int32 or a category int8 (the fills of numpy's types run). */
static inline int64_t states_row(states_t *s, int64_t i, int first, uint8_t st, int64_t value) {
    if (first) s->cur_op = s->dflt_op, s->cur_cat = s->dflt_cat, s->cur_phase = s->dflt_phase;
    switch (st & 3) {
    case 0:
        if (!I32_FITS(value)) return -5;
        s->cur_op = value, s->top = value > s->top ? value : s->top;
        break;
    case 1:
        if (!I8_FITS(value)) return -5;
        s->cur_cat = value;
        break;
    case 2:
        if (!I32_FITS(value)) return -5;
        s->cur_phase = value, s->top = value > s->top ? value : s->top;
        break;
    }
    s->op[i] = (int32_t)s->cur_op, s->phase[i] = (int32_t)s->cur_phase;
    s->cat[i] = (int8_t)(s->inside >= 0 && s->cur_cat != s->keep ? s->inside : s->cur_cat);
    return 0;
}

/* The code sources [from, to) mark, from their counts (``mark``: each source's code, -1 none): the
 * first source's in order whose count is 1 wins (numpy marks them last to first, each over the ones
 * before); -1: none. */
static inline int64_t states_inside(const int64_t *mark, const uint8_t *count, int from, int to) {
    for (int k = from; k < to; k++) {
        if (mark[k] >= 0 && count[k] == 1) return mark[k];
    }
    return -1;
}

/* What the merge writes beside each row where asked (extras): each row's thread index
 * (timeline._thread_index, int16: counted on past that type, unwritten), and the rows whose kind
 * ``table`` marks (timeline._rows_of_kinds), up to ``cap`` of them, and beside each (``rows_ev``) the
 * event's row it is (of the events' columns as given; -1: an added row). No segment ends: a segment
 * ends where the next row on its thread starts (segments.h). */
typedef struct {
    int on;
    int64_t cap, n_rows, index;
    int64_t *rows, *rows_ev;
    int16_t *thread_idx;
    const uint8_t *table;
} extras_t;

/* Row i written (its kind; ``first`` where it is its thread's first; ``r`` the event's row, -1 an
 * added row): its thread index and its mark. Returns 0, or -4 where more rows are marked than ``cap``. */
static inline int64_t extras_row(extras_t *x, int64_t i, int first, int8_t kind, int64_t r) {
    if (i > 0) x->index += first;
    if (x->index <= INT16_MAX) x->thread_idx[i] = (int16_t)x->index;
    if (x->table[(uint8_t)kind]) {
        if (x->n_rows >= x->cap) return -4;
        x->rows_ev[x->n_rows] = r;
        x->rows[x->n_rows++] = i;
    }
    return 0;
}

/* A clipped source's rows on the thread of the row written before them, from an interval's begin
 * row on (its interval [b, b_end) in ``io``, clip_next's; the begin known to go before q's next row), while
 * they go before (q_thread, q_ts) (precedes, ``ties_first``) and stay on that thread: merge_rows'
 * loop over a source's rows where every value but the times and names is the same on each begin row
 * and on each end row (the thread index ``index``, the operation ``op_v``, the phase ``ph_v``, the
 * category ``cat_b`` on a begin and ``cat_e`` on an end: the source's marks the same at each) and no
 * row is marked (extras_t's table), written in a loop of few live values (``io``: merge_rows' row
 * i, the source's next row r on thread th at t_now, its interval's clipped bounds b and b_end; each
 * as the loop leaves it). Returns 0 where the next row does not go
 * before q's or is on another thread, 1 past the source's last row, or clip_next's negative answer. */
typedef struct {
    int64_t i, r, th, t_now, b, b_end;
} run_t;

static __attribute__((noinline)) int64_t
clip_run(const source_t *s, int64_t ts_min, int64_t q_thread, int64_t q_ts, int ties_first,
         int64_t *restrict ts, int8_t *restrict kind, int32_t *restrict name, int32_t *restrict id,
         int8_t *restrict flags, int16_t *restrict thread_idx,
         int32_t *restrict op, int8_t *restrict cat, int32_t *restrict phase, int16_t index, int32_t op_v,
         int32_t ph_v, int8_t cat_b, int8_t cat_e, run_t *io) {
    const int8_t k_b = s->begin_kind, k_e = s->end_kind;
    const int32_t *names = s->name;
    const int64_t th = io->th;
    int64_t i = io->i, r = io->r, b = io->b, b_end = io->b_end, ret = 0;
    for (;;) {
        int32_t nm = names ? names[r >> 1] : -1;
        ts[i] = b > ts_min ? b : ts_min; /* the begin */
        kind[i] = k_b, name[i] = nm, id[i] = 1, flags[i] = 0, thread_idx[i] = index;
        op[i] = op_v, phase[i] = ph_v, cat[i] = cat_b;
        i++, r++;
        if (!precedes(th, b_end, q_thread, q_ts, ties_first)) { /* the end after q's next row */
            io->t_now = b_end;
            break;
        }
        ts[i] = b_end > ts_min ? b_end : ts_min; /* the end, on its thread: after its start (kept) */
        kind[i] = k_e, name[i] = nm, id[i] = 1, flags[i] = 0, thread_idx[i] = index;
        op[i] = op_v, phase[i] = ph_v, cat[i] = cat_e;
        i++;
        int64_t j = clip_next(s, (r >> 1) + 1, th, b, &b, &b_end);
        if (j < 0) {
            ret = j;
            break;
        }
        r = 2 * j;
        if (r >= s->n) {
            ret = 1;
            break;
        }
        io->th = s->thread[j], io->t_now = b;
        if (s->thread[j] != th || !precedes(th, b, q_thread, q_ts, ties_first)) break;
    }
    io->i = i, io->r = r, io->b = b, io->b_end = b_end;
    return ret;
}

/* timeline_merge's parameters, those of merge_rows too (with its ``with_states`` after them) */
#define MERGE_PARAMS \
    int64_t n_ev, const int64_t *ev, const int64_t *ev_ts, const int64_t *ev_thread, \
    const int8_t *ev_kind, const int32_t *ev_name, const int64_t *ev_id, \
    const int8_t *ev_flags, \
    /* the sources: intervals, kinds, whether named */ \
    int64_t na, const int64_t *a_thread, const int64_t *a_start, const int64_t *a_end, \
    const int32_t *a_name, int64_t a_named, int64_t a_begin, int64_t a_end_kind, \
    int64_t a_clip, int64_t a_lo, int64_t a_hi, \
    int64_t nb, const int64_t *b_thread, const int64_t *b_start, const int64_t *b_end, \
    const int32_t *b_name, int64_t b_named, int64_t b_begin, int64_t b_end_kind, \
    int64_t b_clip, int64_t b_lo, int64_t b_hi, \
    int64_t nc, const int64_t *c_thread, const int64_t *c_start, const int64_t *c_end, \
    const int32_t *c_name, int64_t c_named, int64_t c_begin, int64_t c_end_kind, \
    int64_t c_clip, int64_t c_lo, int64_t c_hi, \
    /* out */ \
    int64_t *ts, int8_t *kind, int32_t *name, int32_t *thread, int64_t thread_table, \
    int32_t *id, int8_t *flags, \
    int64_t *events_at, int64_t ts_min, int64_t with_cost, const int64_t *ev_cost, \
    int64_t *cost, \
    /* the extras */ \
    int64_t extras, int16_t *thread_idx, \
    const uint8_t *table, int64_t *rows, int64_t *rows_ev, int64_t cap, int64_t *info, \
    /* the states */ \
    int64_t states, const uint8_t *stack, const int64_t *ev_parent, const int64_t *marks, \
    const int64_t *dflt, int64_t keep, int32_t *op, int8_t *cat, int32_t *phase

/* timeline_merge's rows, made for each of ``with_states`` (a constant where it is inlined: the
 * merge without the states runs none of their code). */
static inline __attribute__((always_inline)) int64_t
merge_rows(MERGE_PARAMS, int with_states) {
    source_t src[MAX_SOURCES] = {
        {2 * na, a_thread, a_start, a_end, a_named ? a_name : 0, (int8_t)a_begin, (int8_t)a_end_kind,
         (int)a_clip, a_lo, a_hi},
        {2 * nb, b_thread, b_start, b_end, b_named ? b_name : 0, (int8_t)b_begin, (int8_t)b_end_kind,
         (int)b_clip, b_lo, b_hi},
        {2 * nc, c_thread, c_start, c_end, c_named ? c_name : 0, (int8_t)c_begin, (int8_t)c_end_kind,
         (int)c_clip, c_lo, c_hi},
    };
    extras_t x = {(int)extras, cap, 0, 0, rows, rows_ev, thread_idx, table};
    states_t st = {(int)states, stack, op, phase, cat, -1, 0, -1, -1, 0, -1, -1, keep, -1};
    int64_t mark[MAX_SOURCES] = {-1, -1, -1};
    uint8_t count[MAX_SOURCES] = {0, 0, 0};
    if (states) {
        st.dflt_op = dflt[0], st.dflt_cat = dflt[1], st.dflt_phase = dflt[2];
        for (int k = 0; k < MAX_SOURCES; k++) mark[k] = marks[k];
    }
    int64_t last_thread = 0; /* the row before i's */
    int64_t at[MAX_SOURCES] = {0, 0, 0};
    /* each part's next row's (thread, ts): part 0 the events, 1 + s source s; of a clipped source,
     * its current interval's start and end as clip_next made them */
    int64_t cur_thread[1 + MAX_SOURCES], cur_ts[1 + MAX_SOURCES];
    int64_t clip_b[MAX_SOURCES] = {0, 0, 0}, clip_e[MAX_SOURCES] = {0, 0, 0};
    int64_t e = 0;
    if (n_ev > 0) cur_thread[0] = ev_thread[ev[0]], cur_ts[0] = ev_ts[ev[0]];
    for (int s = 0; s < MAX_SOURCES; s++) {
        if (src[s].clip) {
            int64_t j = clip_next(&src[s], 0, 0, 0, &clip_b[s], &clip_e[s]);
            if (j < 0) return j;
            at[s] = 2 * j;
        }
        if (at[s] < src[s].n) {
            cur_thread[1 + s] = src[s].thread[at[s] >> 1];
            cur_ts[1 + s] = src[s].clip ? clip_b[s] : src[s].start[0];
        }
    }
    int64_t i = 0;
    for (;;) {
        /* the part whose next row is first (p) and the one whose next row follows (q): p's rows go
         * out until one comes after q's next row */
        int p = -1, q = -1;
        for (int k = 0; k <= MAX_SOURCES; k++) {
            if (k == 0 ? e >= n_ev : at[k - 1] >= src[k - 1].n) continue;
            if (p < 0 || precedes(cur_thread[k], cur_ts[k], cur_thread[p], cur_ts[p], k < p)) {
                q = p, p = k;
            } else if (q < 0 || precedes(cur_thread[k], cur_ts[k], cur_thread[q], cur_ts[q], k < q)) {
                q = k;
            }
        }
        if (p < 0) break; /* every row written */
        int64_t q_thread = q < 0 ? INT64_MAX : cur_thread[q], q_ts = q < 0 ? INT64_MAX : cur_ts[q];
        int ties_first = q < 0 || p < q; /* at p's row equal to q's: p's goes first */
        if (p == 0) {
            for (;;) {
                int64_t r = ev[e], th = cur_thread[0], v = ev_id[r];
                if (!I32_FITS(th) || !I32_FITS(v)) return -2;
                int64_t t = cur_ts[0] > ts_min ? cur_ts[0] : ts_min;
                int8_t k = ev_kind[r];
                int first = i == 0 || th != last_thread;
                ts[i] = t;
                if (!thread_table) thread[i] = (int32_t)th;
                kind[i] = k, name[i] = ev_name[r], id[i] = (int32_t)v, flags[i] = ev_flags[r];
                if (x.on && extras_row(&x, i, first, k, r) < 0) return -4;
                if (first && x.index < thread_table) thread[x.index] = (int32_t)th;
                if (with_states) {
                    uint8_t code = stack[(uint8_t)k];
                    if (states_row(&st, i, first, code, (code & 4) ? v : ev_parent[r]) < 0) return -5;
                }
                last_thread = th;
                if (with_cost) cost[e] = ev_cost[r];
                events_at[e++] = i++;
                if (e >= n_ev) break;
                cur_thread[0] = ev_thread[ev[e]], cur_ts[0] = ev_ts[ev[e]];
                if (!precedes(cur_thread[0], cur_ts[0], q_thread, q_ts, ties_first)) break;
            }
        } else {
            const source_t sv = src[p - 1], *s = &sv; /* a copy: the loop's one-byte stores alias no field */
            int64_t r = at[p - 1], th = cur_thread[p], t_now = cur_ts[p];
            int64_t b = clip_b[p - 1], b_end = clip_e[p - 1];
            /* the code marked inside: another source's that goes first (hi) or after (lo) this one's */
            int64_t mark_p = mark[p - 1], hi = states_inside(mark, count, 0, p - 1);
            int64_t lo = states_inside(mark, count, p, MAX_SOURCES);
            uint8_t count_p = count[p - 1];
            /* the rows clip_run writes: a clipped source marking no row, every extra and state written */
            int run = s->clip && x.on && with_states && thread_table && !x.table[(uint8_t)s->begin_kind] &&
                      !x.table[(uint8_t)s->end_kind];
            for (;;) {
                if (run && i > 0 && th == last_thread && !(r & 1) && x.index <= INT16_MAX) {
                    /* the category at its begin rows and at its end rows, as states_row writes it: inside
                     * the intervals of the first source in order whose count is 1 (states_inside), the
                     * same at an end row as before its begin (st.inside), at a begin row this source's
                     * count one more */
                    int64_t in_b = st.inside;
                    if (mark_p >= 0) in_b = hi >= 0 ? hi : ((uint8_t)(count_p + 1) == 1 ? mark_p : lo);
                    int keep = st.cur_cat == st.keep;
                    int8_t cat_b = (int8_t)(in_b >= 0 && !keep ? in_b : st.cur_cat);
                    int8_t cat_e = (int8_t)(st.inside >= 0 && !keep ? st.inside : st.cur_cat);
                    run_t io = {i, r, th, t_now, b, b_end};
                    int64_t got = clip_run(s, ts_min, q_thread, q_ts, ties_first, ts, kind, name, id, flags,
                                           thread_idx, op, cat, phase, (int16_t)x.index,
                                           (int32_t)st.cur_op, (int32_t)st.cur_phase, cat_b, cat_e, &io);
                    i = io.i, r = io.r, th = io.th, t_now = io.t_now, b = io.b, b_end = io.b_end;
                    if (got < 0) return got;
                    if ((r & 1) && mark_p >= 0) { /* its last row a begin: the count and mark after it */
                        count_p = (uint8_t)(count_p + 1), st.inside = in_b;
                    }
                    if (got == 1) break;
                    if (!precedes(th, t_now, q_thread, q_ts, ties_first)) break;
                    continue; /* the next row on another thread */
                }
                if (!I32_FITS(th)) return -2;
                int64_t t = t_now > ts_min ? t_now : ts_min;
                int8_t k = (r & 1) ? s->end_kind : s->begin_kind;
                int first = i == 0 || th != last_thread;
                ts[i] = t, kind[i] = k, id[i] = 1, flags[i] = 0;
                if (!thread_table) thread[i] = (int32_t)th;
                name[i] = s->name ? s->name[r >> 1] : -1;
                if (x.on && extras_row(&x, i, first, k, -1) < 0) return -4;
                if (first && x.index < thread_table) thread[x.index] = (int32_t)th;
                if (with_states) {
                    if (mark_p >= 0) {
                        count_p = (uint8_t)(count_p + ((r & 1) ? -1 : 1));
                        st.inside = hi >= 0 ? hi : (count_p == 1 ? mark_p : lo);
                    }
                    states_row(&st, i, first, 3, 0);
                }
                last_thread = th;
                i++;
                if (s->clip) {
                    if (!(r & 1)) { /* the interval's end, on its thread: after its start (kept) */
                        r++, t_now = b_end;
                    } else {        /* the next interval kept: no earlier than this end (cut) */
                        int64_t j = clip_next(s, (r >> 1) + 1, th, b, &b, &b_end);
                        if (j < 0) return j;
                        r = 2 * j;
                        if (r >= s->n) break;
                        th = s->thread[j], t_now = b;
                    }
                    if (!precedes(th, t_now, q_thread, q_ts, ties_first)) break;
                    continue;
                }
                r++;
                if (r >= s->n) break;
                int64_t t_next = s->thread[r >> 1], ts_next = source_ts(s, r);
                if (t_next < th) return -3;
                if (t_next == th && ts_next < t_now) return -1;
                th = t_next, t_now = ts_next;
                if (!precedes(th, t_now, q_thread, q_ts, ties_first)) break;
            }
            at[p - 1] = r, cur_thread[p] = th, cur_ts[p] = t_now, clip_b[p - 1] = b, clip_e[p - 1] = b_end;
            count[p - 1] = count_p;
        }
    }
    if (x.on) {
        info[0] = x.n_rows;
        info[1] = i > 0 ? x.index + 1 : 0;
    }
    if (with_states) info[2] = st.top;
    return i;
}

/* timeline._with_interval_rows's merge: the events (their rows ``ev`` of the columns, in (thread,
 * time) order) and up to three sources of intervals (a, b, c; n 0: none; *_clip: clipped to
 * [*_lo, *_hi] and cut, as source_t says) into one list of rows in
 * (thread, time) order, at equal (thread, time) the events first, then the sources in order, each
 * part's rows in their own order. Writes every row's ts (np.maximum(ts, ts_min): ordered by the
 * times as given, written no earlier than ``ts_min``), kind, name, thread and id (1 on an added row)
 * and flags (0 on an added row); with ``thread_table`` > 0 (and ``extras``: the thread index
 * counted), ``thread`` holds each thread index's thread instead (entry k the k-th thread's, of the
 * first ``thread_table`` threads), no row's, and where each event's row lands (``events_at``), with
 * each event's ``ev_cost`` in that order (``cost``, where ``with_cost``); where ``extras``,
 * also what extras_t says, info[0] the rows marked and info[1] the threads; where ``states``, what
 * states_t says (``ev_parent``: the events' parents, ``marks``: each source's category code, -1 none,
 * ``dflt``: the operation's, category's and phase's defaults), info[2] its ``top``.
 *
 * Returns the rows written (fewer than the events and the intervals make where clipped ones are left
 * out); -1 where a source's rows of a thread are not in time order (overlapping
 * intervals: the numpy merge sorts them), -2 where a thread or an event's id does not fit the int32
 * output (numpy keeps them int64), -3 where a source's threads are not in order (it is sorted first),
 * -4 where more rows are marked than ``cap``, -5 where a state does not fit its column (states_row). */
#define MERGE_ARGS \
    n_ev, ev, ev_ts, ev_thread, ev_kind, ev_name, ev_id, ev_flags, na, a_thread, a_start, a_end, a_name, \
    a_named, a_begin, a_end_kind, a_clip, a_lo, a_hi, nb, b_thread, b_start, b_end, b_name, b_named, \
    b_begin, b_end_kind, b_clip, b_lo, b_hi, nc, c_thread, c_start, c_end, c_name, c_named, c_begin, \
    c_end_kind, c_clip, c_lo, c_hi, ts, kind, name, thread, thread_table, id, flags, events_at, ts_min, \
    with_cost, ev_cost, cost, extras, thread_idx, table, rows, rows_ev, cap, info, states, \
    stack, ev_parent, marks, dflt, keep, op, cat, phase
int64_t timeline_merge(MERGE_PARAMS) {
    return states ? merge_rows(MERGE_ARGS, 1) : merge_rows(MERGE_ARGS, 0);
}
#undef MERGE_ARGS
#undef MERGE_PARAMS

/* The state after each row, forward-filled along its thread: rlscope.trace.states.state_after_rows.
 * ``rows`` (sorted) change the state to ``values``; each thread's first row (``starts``, sorted)
 * and row 0 restart at ``dflt`` unless they change it themselves. A run of rows between two marks
 * is one value written out, as numpy's repeat of the held values. */
#define FILL(NAME, T)                                                                                     \
    void NAME(int64_t n, int64_t n_starts, const int64_t *starts, int64_t n_rows, const int64_t *rows,   \
              const T *values, int64_t dflt, T *out) {                                                    \
        int64_t i = 0, j = 0, k = 0;                                                                      \
        T cur = (T)dflt;                                                                                  \
        while (i < n) {                                                                                   \
            while (k < n_starts && starts[k] <= i) {                                                      \
                if (starts[k++] == i) cur = (T)dflt;                                                      \
            }                                                                                             \
            while (j < n_rows && rows[j] <= i) {                                                          \
                if (rows[j] == i) cur = values[j];                                                        \
                j++;                                                                                      \
            }                                                                                             \
            int64_t next = n;                                                                             \
            if (k < n_starts && starts[k] < next) next = starts[k];                                       \
            if (j < n_rows && rows[j] < next) next = rows[j];                                             \
            for (; i < next; i++) out[i] = cur;                                                           \
        }                                                                                                 \
    }
FILL(timeline_fill_i8, int8_t)
FILL(timeline_fill_i16, int16_t)
FILL(timeline_fill_i32, int32_t)
FILL(timeline_fill_i64, int64_t)

/* timeline._inside and its np.putmask: per row a running count of ``begin`` rows less ``end`` rows
 * (int8, wrapping as numpy's cumsum of that type), and ``cat`` set to ``code`` where the count is 1
 * and ``cat`` is not ``keep`` (rlscope's own work stays rlscope's). */
void timeline_mark_inside(int64_t n, const int8_t *kind, int64_t begin, int64_t end, int8_t *cat,
                          int64_t code, int64_t keep) {
    uint8_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        count = (uint8_t)(count + (kind[i] == begin) - (kind[i] == end));
        if (count == 1 && cat[i] != keep) cat[i] = (int8_t)code;
    }
}

/* timeline.RowValues.at for ``rows`` in order: the value kept at each row (``at_rows`` sorted, their
 * ``values``), 0 at a row not kept; one search moving forward through ``at_rows`` (in steps that
 * double, then halving: a few reads where the rows are dense, a binary search's where they are
 * few), where numpy searches each row from scratch. Returns 0, or -1 where ``rows`` are not in
 * order (numpy searches them). */
int64_t timeline_values_at(int64_t n_at, const int64_t *at_rows, const int64_t *values, int64_t n,
                           const int64_t *rows, int64_t *out) {
    int64_t j = 0; /* at_rows before j are below the current row */
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows[i];
        if (i > 0 && r < rows[i - 1]) return -1;
        if (j < n_at && at_rows[j] < r) {
            int64_t lo = j + 1, step = 1, probe = j + 1;
            while (probe < n_at && at_rows[probe] < r) {
                lo = probe + 1, step *= 2, probe = j + step;
            }
            int64_t hi = probe < n_at ? probe : n_at;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (at_rows[mid] < r) lo = mid + 1;
                else hi = mid;
            }
            j = lo;
        }
        out[i] = (j < n_at && at_rows[j] == r) ? values[j] : 0;
    }
    return 0;
}

/* How many rows have a kind marked in ``table`` (indexed by the kind's byte, a negative kind from the
 * end as numpy's take reads it); timeline_kind_rows writes them. */
int64_t timeline_count_kinds(int64_t n, const int8_t *kind, const uint8_t *table) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) count += table[(uint8_t)kind[i]];
    return count;
}

/* The rows whose kind is marked in ``table``, in order: np.flatnonzero(take(table, kind)). */
void timeline_kind_rows(int64_t n, const int8_t *kind, const uint8_t *table, int64_t *out) {
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++) {
        if (table[(uint8_t)kind[i]]) out[j++] = i;
    }
}

/* Timeline.instance_time over rows [a, b): per instance (``op`` + 1 indexes ``out``, 0 for none), the
 * time of its runs of rows, a run being rows of one instance each ending where the next begins, its
 * time its last end less its first start; added as doubles in the runs' order, as np.bincount with
 * weights adds them. ``out`` (``n_out`` entries) starts at zero. Returns 0, or -1 where an instance
 * falls outside ``out`` (numpy's bincount grows its table). */
int64_t timeline_instance_time(int64_t a, int64_t b, const Segments *s, const int32_t *op, int64_t n_out,
                               double *out) {
    const int64_t *ts = s->ts;
    SegWalk w = seg_walk(s, a);
    int64_t start = a;
    for (int64_t i = a + 1; i <= b; i++) {
        int64_t end = seg_walk_end(&w, i - 1);
        if (i == b || op[i] != op[i - 1] || end != ts[i]) {
            int64_t k = (int64_t)op[start] + 1;
            if (k < 0 || k >= n_out) return -1;
            out[k] += (double)(end - ts[start]);
            start = i;
        }
    }
    return 0;
}

/* Whether ``ts`` rises (or stays) along each block of rows ``[starts[k], starts[k + 1])`` (a thread's
 * rows), ``starts`` ending with the row count: 1 or 0. */
int64_t timeline_sorted_in_blocks(int64_t n_blocks, const int64_t *starts, const int64_t *ts) {
    for (int64_t k = 0; k < n_blocks; k++) {
        for (int64_t i = starts[k] + 1; i < starts[k + 1]; i++) {
            if (ts[i] < ts[i - 1]) return 0;
        }
    }
    return 1;
}

/* gpu.state_at: per query (thread, ts), the operation and phase instance innermost on that thread at
 * that time, i.e. the state after the thread's last row at or before ts; -1 where the thread is not
 * on the timeline or has no row by then. The timeline's rows are ``n_blocks`` blocks, block k the
 * rows ``[starts[k], starts[k + 1])`` of thread ``block_thread[k]`` (ascending), each in time order:
 * the same rows as numpy's search of (thread, time) keys over every row finds, by a search of the
 * query's thread's block alone. */
void timeline_state_at(int64_t n_blocks, const int64_t *block_thread, const int64_t *starts,
                       const int64_t *ts, const int32_t *op, const int32_t *phase, int64_t n_q,
                       const int64_t *q_thread, const int64_t *q_ts, int64_t *op_out, int64_t *phase_out) {
    for (int64_t q = 0; q < n_q; q++) {
        op_out[q] = -1, phase_out[q] = -1;
        int64_t lo = search_left(block_thread, n_blocks, q_thread[q]); /* the block of the query's thread */
        if (lo == n_blocks || block_thread[lo] != q_thread[q]) continue;
        int64_t a = starts[lo] + search_right(ts + starts[lo], starts[lo + 1] - starts[lo], q_ts[q]);
        if (a > starts[lo]) op_out[q] = op[a - 1], phase_out[q] = phase[a - 1];
    }
}

/* build_timeline's operations' and phases' begins and ends read off the events' own rows
 * (timeline._scope_rows): of the merged rows ``scoped`` (each a begin or an end; ``at``: the event's row
 * of each, of ``kind``, ``ident``, ``name`` and ``ts``), the begins' rows then the ends' (``rows``, n of
 * them, each part in order), the begins' instances and names, and the ends' instances, names and
 * times (no earlier than ``ts_min``, as merged); ``opens`` per kind byte: 1 where it begins. Returns
 * the begins. */
int64_t timeline_scope_rows(int64_t n, const int64_t *scoped, const int64_t *at, const int8_t *kind,
                            const int64_t *ident, const int32_t *name, const int64_t *ts, int64_t ts_min,
                            const uint8_t *opens, int64_t *rows, int64_t *b_ident, int32_t *b_name,
                            int64_t *e_ident, int32_t *e_name, int64_t *e_ts) {
    int64_t nb = 0, ne = 0;
    for (int64_t k = 0; k < n; k++) nb += opens[(uint8_t)kind[at[k]]] != 0;
    int64_t *ends = rows + nb;
    nb = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t r = at[k];
        if (opens[(uint8_t)kind[r]]) {
            rows[nb] = scoped[k], b_ident[nb] = ident[r], b_name[nb++] = name[r];
        } else {
            ends[ne] = scoped[k], e_ident[ne] = ident[r], e_name[ne] = name[r];
            e_ts[ne++] = ts[r] > ts_min ? ts[r] : ts_min;
        }
    }
    return nb;
}

/* Of the events' operation and phase rows (``stack`` per kind byte, as timeline_merge reads it: 0 or 2
 * in its low two bits), how many there are (out[0]) and the largest id (out[1]) and parent (out[2])
 * among them, -1 for none: what timeline._dense_instances reads to know whether the ids are compact. */
void timeline_scoped_top(int64_t n, const int8_t *kind, const int64_t *ident, const int64_t *parent,
                         const uint8_t *stack, int64_t *out) {
    int64_t count = 0, top_id = -1, top_parent = -1;
    for (int64_t i = 0; i < n; i++) {
        int s = stack[(uint8_t)kind[i]] & 3;
        if (s == 0 || s == 2) {
            count++;
            top_id = ident[i] > top_id ? ident[i] : top_id;
            top_parent = parent[i] > top_parent ? parent[i] : top_parent;
        }
    }
    out[0] = count, out[1] = top_id, out[2] = top_parent;
}

#define ORDER_THREADS 64

/* The slot of ``thread`` among the ``n`` threads seen (``last``: the slot the row before took, tried
 * first: a thread's rows come in runs); -1 where it is not among them. */
static inline int order_slot(const int64_t *threads, int n, int last, int64_t thread) {
    if (last >= 0 && threads[last] == thread) return last;
    for (int k = 0; k < n; k++) {
        if (threads[k] == thread) return k;
    }
    return -1;
}

/* timeline._events_order: np.lexsort((ts, thread)) of the events where each thread's times never fall
 * (as the reader writes them): a stable counting sort by thread, the threads in ascending order, so
 * rows of one thread keep their order, which is their times' (ties in their order, as lexsort's).
 * Returns 0, or -1 where a thread's times fall or there are more than ORDER_THREADS threads (numpy
 * sorts them). */
int64_t timeline_events_order(int64_t n, const int64_t *thread, const int64_t *ts, int64_t *out) {
    int64_t threads[ORDER_THREADS], count[ORDER_THREADS], last_ts[ORDER_THREADS];
    int n_threads = 0, slot = -1;
    for (int64_t i = 0; i < n; i++) {
        slot = order_slot(threads, n_threads, slot, thread[i]);
        if (slot < 0) {
            if (n_threads == ORDER_THREADS) return -1;
            slot = n_threads++;
            threads[slot] = thread[i], count[slot] = 0, last_ts[slot] = ts[i];
        }
        if (ts[i] < last_ts[slot]) return -1;
        last_ts[slot] = ts[i], count[slot]++;
    }
    /* each slot's first place: the slots taken in ascending order of their threads */
    int by_thread[ORDER_THREADS];
    for (int k = 0; k < n_threads; k++) {
        int j = k;
        for (; j > 0 && threads[by_thread[j - 1]] > threads[k]; j--) by_thread[j] = by_thread[j - 1];
        by_thread[j] = k;
    }
    int64_t place[ORDER_THREADS], at = 0;
    for (int k = 0; k < n_threads; k++) place[by_thread[k]] = at, at += count[by_thread[k]];
    slot = -1;
    for (int64_t i = 0; i < n; i++) {
        slot = order_slot(threads, n_threads, slot, thread[i]);
        out[place[slot]++] = i;
    }
    return 0;
}
