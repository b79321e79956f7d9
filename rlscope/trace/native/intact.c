/* One pass over a process's event rows that confirms the table intact: every invariant the checks
 * of rlscope/trace/validate.py test holds, so that they would find nothing and change nothing.
 *
 * validate_events runs this first; a table it confirms goes back as it came, without the dozen
 * numpy passes of the checks. Any table it does not confirm goes through those checks as before
 * (they find, repair, drop and say). It checks at least what they do, never less: where a property
 * is costly to follow here (a thread count past a bound, nesting deeper than a bound, category ends
 * nested deeper than a bound), the table is simply not confirmed.
 *
 * Rows are read in file order; each thread's rows keep their order there, as in the checks' rows
 * grouped by thread, so a thread's state (last time, last cost, open scopes) follows its rows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int64_t trace_native_abi(void) { return 2; }

/* kinds and codes of rlscope/trace/schema.py and rlscope/categories.py (tests/test_trace_native.py
 * checks them against those) */
enum { OP_BEGIN = 0, OP_END = 1, CAT_BEGIN = 2, CAT_END = 3, PHASE_BEGIN = 4, PHASE_END = 5,
       SESSION_START = 6, SESSION_END = 7, WINDOW = 8, DETAIL = 11 };
enum { FLAG_RECURSIVE = 1, FLAG_FORCED_CLOSE = 2, FLAG_SUMMARIZED = 4 };
#define KNOWN_FLAGS (FLAG_RECURSIVE | FLAG_FORCED_CLOSE | FLAG_SUMMARIZED)
#define MAX_TS_NS ((uint64_t)1 << 60)
#define ID_SPREAD ((int64_t)1 << 22)
#define NS_PER_SCOPE 50
#define FLUSH_CPU_MAX ((int64_t)0x7FFFFFFF)
#define PROFILER 7 /* categories.PROFILER: the writer's flush marks */
#define PYTHON 0   /* categories.PYTHON: a thread's category before its first category row */
#define REFERENCE_PS_MIN 1000
#define REFERENCE_PS_MAX 1000000000
#define MAX_THREADS 4096 /* more threads: not confirmed (the hash below has 2 * this many slots) */
#define MAX_DEPTH 4096   /* deeper nesting: not confirmed (the recursive flag walks the open scopes) */

/* why a table is not confirmed (0: intact): a number per check, for tests and diagnostics */
enum {
    INTACT = 0, R_KIND, R_TIME, R_SCOPED_ID, R_CATEGORY_CODE, R_WINDOW_MODE, R_TIME_ORDER,
    R_SESSION_ORDER, R_AFTER_END, R_END_UNMATCHED, R_PARENT, R_OPEN_AT_END, R_FLAGS, R_RECURSIVE,
    R_COST, R_ID_SPREAD, R_NO_WINDOW, R_REFERENCE_SPEED, R_CATEGORY_NESTING, R_REPEATED_ID,
    R_BOUND, R_MEMORY
};

typedef struct {
    int64_t *rows; /* the open begins' rows, innermost last */
    int64_t len, cap;
} open_t;

typedef struct {
    int64_t thread;
    int used;
    int64_t prev_ts;   /* the thread's last row's time */
    int64_t post;      /* its measured cost after the row (0: none, or not bounded) */
    open_t open[3];    /* operations, phases, categories */
    int64_t category;  /* the thread's category where no category row it wrote is open */
} thread_t;

static int push(open_t *s, int64_t row) {
    if (s->len == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 16;
        int64_t *rows = realloc(s->rows, (size_t)cap * sizeof *rows);
        if (!rows) return 0;
        s->rows = rows;
        s->cap = cap;
    }
    s->rows[s->len++] = row;
    return 1;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* whether the ids of the rows of kind ``k`` repeat: ``_drop_repeats``'s (kind, id) pairs */
static int repeats(int64_t n, const int8_t *kind, const int64_t *id, int k, int64_t count) {
    int64_t *ids = malloc((size_t)(count ? count : 1) * sizeof *ids), m = 0;
    if (!ids) return -1;
    for (int64_t i = 0; i < n; i++)
        if (kind[i] == k) ids[m++] = id[i];
    qsort(ids, (size_t)m, sizeof *ids, cmp_i64);
    int again = 0;
    for (int64_t i = 1; i < m && !again; i++) again = ids[i] == ids[i - 1];
    free(ids);
    return again;
}

/* 0 where the rows are intact (validate_events would return them unchanged, with no finding), else
 * the first check that fails (R_*). ``kind_ok``: 256 entries, 1 at each written kind;
 * ``category_ok``: ``category_len`` entries, 1 at each category code (validate._CATEGORY_OK, whose
 * last entry stands for every value past it); ``cost``: NULL without the cost column;
 * ``complete``: the session ended normally (-1: from the rows, as validate_events decides). */
int64_t trace_intact(int64_t n, const int64_t *ts, const int64_t *thread, const int8_t *kind,
                     const int64_t *id, const int64_t *parent, const int32_t *name,
                     const int8_t *flags, const int64_t *cost, const uint8_t *kind_ok,
                     const uint8_t *category_ok, int64_t category_len, int64_t complete) {
    if (n == 0) return INTACT;
    const int64_t slots = 2 * MAX_THREADS;
    thread_t *threads = calloc((size_t)slots, sizeof *threads);
    if (!threads) return R_MEMORY;
    int64_t reason = INTACT, nthreads = 0;
    thread_t *last = NULL;
    int64_t ts_min = INT64_MAX, ts_max = INT64_MIN;
    int64_t start_min = INT64_MAX, end_max = INT64_MIN, late_max = INT64_MIN; /* late: rows that may not pass the end */
    int64_t id_min = INT64_MAX, id_max = INT64_MIN;
    int has_window = 0, has_detail = 0, has_scoped = 0;
    int64_t last_begin[2] = {INT64_MIN, INT64_MIN}, begins[2] = {0, 0};
    int increasing[2] = {1, 1};

    for (int64_t i = 0; i < n && reason == INTACT; i++) {
        const int k = kind[i];
        const int64_t t = ts[i];
        /* _drop_impossible */
        if (k < 0 || !kind_ok[k]) { reason = R_KIND; break; }
        if ((uint64_t)t >= MAX_TS_NS) { reason = R_TIME; break; }
        const int scoped = k == OP_BEGIN || k == OP_END || k == PHASE_BEGIN || k == PHASE_END;
        const int cat = k == CAT_BEGIN || k == CAT_END;
        if (scoped) {
            if (id[i] < 0 || name[i] < 0) { reason = R_SCOPED_ID; break; }
            has_scoped = 1;
            if (id[i] < id_min) id_min = id[i];
            if (id[i] > id_max) id_max = id[i];
        }
        if (cat && !((uint64_t)id[i] < (uint64_t)(category_len - 1) && category_ok[id[i]] &&
                     (uint64_t)parent[i] < (uint64_t)(category_len - 1) && category_ok[parent[i]])) {
            reason = R_CATEGORY_CODE; break;
        }
        if ((k == WINDOW || k == DETAIL) && id[i] != 0 && id[i] != 1) { reason = R_WINDOW_MODE; break; }
        /* _reference_speeds */
        if ((k == SESSION_START || k == SESSION_END || k == WINDOW) && parent[i] != -1 &&
            (parent[i] < REFERENCE_PS_MIN || parent[i] > REFERENCE_PS_MAX)) {
            reason = R_REFERENCE_SPEED; break;
        }
        /* _flags: unknown bits, a closing flag on a begin */
        const int f = flags[i];
        if ((f & ~KNOWN_FLAGS) != 0) { reason = R_FLAGS; break; }
        if ((f & FLAG_FORCED_CLOSE) && (k == OP_BEGIN || k == PHASE_BEGIN)) { reason = R_FLAGS; break; }
        /* what the session checks, _compact_ids and _window_row read */
        if (t < ts_min) ts_min = t;
        if (t > ts_max) ts_max = t;
        if (k == SESSION_START && t < start_min) start_min = t;
        if (k == SESSION_END && t > end_max) end_max = t;
        if (!(cat && id[i] == PROFILER) && t > late_max) late_max = t;
        has_window |= k == WINDOW;
        has_detail |= k == DETAIL;

        /* the row's thread */
        thread_t *th = last;
        if (!th || th->thread != thread[i]) {
            uint64_t h = (uint64_t)thread[i] * 0x9E3779B97F4A7C15ull;
            int64_t s = (int64_t)(h >> 40) & (slots - 1);
            while (threads[s].used && threads[s].thread != thread[i]) s = (s + 1) & (slots - 1);
            th = &threads[s];
            if (!th->used) {
                if (++nthreads > MAX_THREADS) { reason = R_BOUND; break; }
                th->used = 1;
                th->thread = thread[i];
                th->prev_ts = INT64_MIN;
                th->category = PYTHON;
            }
            last = th;
        }
        const int first = th->prev_ts == INT64_MIN;
        /* _restore_time_order (and _drop_repeats' rows behind): a thread's rows in time order */
        if (!first && t < th->prev_ts) { reason = R_TIME_ORDER; break; }
        /* _costs: measured costs fit between the row and its thread's neighbours */
        if (cost) {
            if (!first && th->post > t - th->prev_ts) { reason = R_COST; break; }
            th->post = 0;
            const int64_t c = cost[i];
            if (c < 0) { reason = R_COST; break; }
            if (c != 0) {
                if (k == CAT_END && id[i] == PROFILER) {  /* a flush mark: the flush's CPU time */
                    if (c > FLUSH_CPU_MAX) { reason = R_COST; break; }
                } else {
                    if (!first && (c & 0xFFFFFFFF) > t - th->prev_ts) { reason = R_COST; break; }
                    th->post = c >> 32;
                }
            }
        }
        th->prev_ts = t;

        /* _stack, _nesting, _category_ends, the recursive flag: each thread's scopes a stack; a
         * begin names the innermost open scope as its parent, an end closes it, of its name and
         * parent. A category end where none is open is no damage to those checks when it leaves
         * the category its thread is in: it pairs with no begin, and its thread is then in the
         * category it names as its parent */
        if (scoped || cat) {
            const int which = (k == OP_BEGIN || k == OP_END) ? 0 : (k == PHASE_BEGIN || k == PHASE_END) ? 1 : 2;
            open_t *s = &th->open[which];
            const int begin = k == OP_BEGIN || k == PHASE_BEGIN || k == CAT_BEGIN;
            const int64_t none = which == 2 ? th->category : -1;
            const int64_t top = s->len ? s->rows[s->len - 1] : -1;
            const int64_t state = top >= 0 ? id[top] : none;
            if (begin) {
                if (parent[i] != state) { reason = R_PARENT; break; }
                if (which < 2) {
                    if (top >= 0 && parent[i] >= id[i]) { reason = R_PARENT; break; }
                    /* ids unique per kind: strictly increasing in row order, else sorted below */
                    if (id[i] <= last_begin[which]) increasing[which] = 0;
                    last_begin[which] = id[i];
                    begins[which]++;
                }
                if (which == 0) {
                    int recursive = 0;
                    for (int64_t j = 0; j < s->len && !recursive; j++) recursive = name[s->rows[j]] == name[i];
                    if (recursive != ((f & FLAG_RECURSIVE) != 0)) { reason = R_RECURSIVE; break; }
                }
                if (s->len >= MAX_DEPTH) { reason = R_BOUND; break; }
                if (!push(s, i)) { reason = R_MEMORY; break; }
            } else {
                if (top < 0 && which == 2) {
                    if (id[i] != th->category) { reason = R_CATEGORY_NESTING; break; }
                    th->category = parent[i];
                    continue;
                }
                if (top < 0) { reason = R_END_UNMATCHED; break; }
                if (id[i] != id[top] || parent[i] != parent[top] || (which < 2 && name[i] != name[top])) {
                    reason = which == 2 ? R_CATEGORY_NESTING : R_END_UNMATCHED;
                    break;
                }
                s->len--;
            }
        }
    }

    if (reason == INTACT) {
        /* _session_rows */
        if (start_min != INT64_MAX && end_max != INT64_MIN && start_min > end_max) reason = R_SESSION_ORDER;
        else if (end_max != INT64_MIN && late_max > end_max) reason = R_AFTER_END;
    }
    if (reason == INTACT) {
        /* _stack: begins still open where a session ended normally are said */
        if (complete < 0) complete = end_max != INT64_MIN;
        if (complete)
            for (int64_t s = 0; s < slots && reason == INTACT; s++)
                if (threads[s].used && (threads[s].open[0].len || threads[s].open[1].len)) reason = R_OPEN_AT_END;
    }
    if (reason == INTACT && has_scoped) {
        /* _compact_ids */
        int64_t allowed = ID_SPREAD + 16 * n;
        if (has_detail) {
            int64_t wide = ID_SPREAD + (ts_max - ts_min) / NS_PER_SCOPE;
            if (wide > allowed) allowed = wide;
        }
        if ((uint64_t)id_max - (uint64_t)id_min > (uint64_t)allowed) reason = R_ID_SPREAD;
    }
    if (reason == INTACT && !has_window) reason = R_NO_WINDOW; /* _window_row */
    /* _drop_repeats: no operation or phase begin repeats an id (an end closes an open begin of its
     * id, so ends repeat only where begins do) */
    for (int w = 0; w < 2 && reason == INTACT; w++) {
        if (increasing[w]) continue;
        int again = repeats(n, kind, id, w == 0 ? OP_BEGIN : PHASE_BEGIN, begins[w]);
        if (again) reason = again < 0 ? R_MEMORY : R_REPEATED_ID;
    }
    for (int64_t s = 0; s < slots; s++)
        for (int w = 0; w < 3; w++) free(threads[s].open[w].rows);
    free(threads);
    return reason;
}
