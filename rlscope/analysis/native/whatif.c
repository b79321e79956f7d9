/* The what-if's passes over a main thread's rows and runs (rlscope/analysis/whatif.py): each one
 * loop where numpy makes a chain of full-length temporaries, to numpy's bits. The times summed per
 * key are whole ns, summed here in integers: numpy sums them in doubles, to the same integer where
 * every partial sum is a whole number below 2**53, which each loop shows (KeySums) or hands back. A
 * function that meets input its numpy version would read otherwise (times out of order, a key
 * outside its table, a stretch of 2**53 ns) returns -1: the numpy version then runs. */
#include <stdint.h>
#include <stdlib.h>

/* whatif.py _main_codes: present[code] = 1 for each row's code inst_code[op] + cat (op -1 reads
 * inst_code's last entry, as numpy's index does), as numpy's present[inst_code[op] + cat] = True.
 * Returns 0; -1 for an op outside inst_code or a code outside [0, size). */
int64_t whatif_main_codes(const int32_t *op, const int8_t *cat, int64_t n, const int64_t *inst_code,
                          int64_t n_code, uint8_t *present, int64_t size) {
    for (int64_t i = 0; i < n; i++) {
        int64_t o = op[i] < 0 ? op[i] + n_code : op[i];
        if (o < 0 || o >= n_code) return -1;
        int64_t code = inst_code[o] + cat[i];
        if (code < 0 || code >= size) return -1;
        present[code] = 1;
    }
    return 0;
}

/* whatif.py _main_runs, over every row at once: the runs of one code (inst_code[op] + cat; a parent's
 * also of one instance) as (start, key_of[code], instance), each run of one instance's start, and
 * where n_idle > 0 the idle flips (_flips: each run's start whose idle[key] differs from the run
 * before's); times clamped to end, the first one start. counts: (runs, instance runs, flips, whether
 * a run is in an instance). op -1 reads inst_code's last entry, as numpy's index does. Returns 0; -1
 * for an op outside inst_code, a code outside key_of or a key outside idle. whatif_main_runs calls it
 * with with_flips a constant, so that each loop is made without the other's work. */
static inline int64_t main_runs(const int32_t *op, const int64_t *ts, const int8_t *cat, int64_t n,
                                 const int64_t *inst_code, int64_t n_code, const int32_t *key_of,
                                 int64_t n_keys, const uint8_t *idle, int64_t n_idle, int64_t start, int64_t end,
                                 int64_t is_parent, int64_t *run_t, int32_t *run_key, int32_t *run_inst,
                                 int64_t *inst_t, int64_t *flips, int64_t *counts, const int with_flips) {
    int64_t k = 0, j = 0, m = 0, prev_code = 0, working = 0;
    int32_t prev_op = 0;
    uint8_t prev_idle = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v = op[i];
        int64_t o = v + (v < 0 ? n_code : 0);
        if (o < 0 || o >= n_code) return -1;
        int64_t code = inst_code[o] + cat[i];
        if (code < 0 || code >= n_keys) return -1;
        int32_t key = key_of[code];
        int64_t new_op = i == 0 || v != prev_op;
        int64_t new_run = i == 0 || code != prev_code || (is_parent && new_op);
        int64_t t = ts[i] < end ? ts[i] : end;
        /* written at every row, kept (k moved on) where a run begins: no branch to mispredict */
        run_t[k] = t;
        run_key[k] = key;
        run_inst[k] = v;
        working |= new_run & (v >= 0);
        k += new_run;
        inst_t[j] = t;
        j += new_op;
        if (with_flips) {
            /* a run's rows share its key: idle differs from the row before's only where a run begins */
            if (key < 0 || key >= n_idle) return -1;
            uint8_t now = idle[key];
            flips[m] = t; /* flips has n places: kept (m moved on) where it flips */
            m += i > 0 && now != prev_idle;
            prev_idle = now;
        }
        prev_code = code;
        prev_op = v;
    }
    if (n > 0) run_t[0] = inst_t[0] = start;
    counts[0] = k;
    counts[1] = j;
    counts[2] = m;
    counts[3] = working;
    return 0;
}

/* whatif.py _main_runs: main_runs, with the idle flips where n_idle > 0. */
int64_t whatif_main_runs(const int32_t *op, const int64_t *ts, const int8_t *cat, int64_t n,
                         const int64_t *inst_code, int64_t n_code, const int32_t *key_of, int64_t n_keys,
                         const uint8_t *idle, int64_t n_idle, int64_t start, int64_t end, int64_t is_parent,
                         int64_t *run_t, int32_t *run_key, int32_t *run_inst, int64_t *inst_t, int64_t *flips,
                         int64_t *counts) {
    if (n_idle > 0)
        return main_runs(op, ts, cat, n, inst_code, n_code, key_of, n_keys, idle, n_idle, start, end, is_parent,
                         run_t, run_key, run_inst, inst_t, flips, counts, 1);
    return main_runs(op, ts, cat, n, inst_code, n_code, key_of, n_keys, idle, n_idle, start, end, is_parent,
                     run_t, run_key, run_inst, inst_t, flips, counts, 0);
}

/* whatif.py _flips: t[i] of each run i >= 1 whose idle[key] differs from the run
 * before's, as run_t[np.flatnonzero(idle[1:] != idle[:-1]) + 1] of idle = idle_key[run_key]. Returns
 * their number, -1 for a key outside idle. */
int64_t whatif_flips(const int64_t *t, const int32_t *key, int64_t n, const uint8_t *idle, int64_t nkeys,
                     int64_t *out) {
    if (n == 0) return 0;
    if (key[0] < 0 || key[0] >= nkeys) return -1;
    int64_t m = 0;
    uint8_t before = idle[key[0]];
    for (int64_t i = 1; i < n; i++) {
        if (key[i] < 0 || key[i] >= nkeys) return -1;
        uint8_t now = idle[key[i]];
        out[m] = t[i];  /* out has n - 1 places, m < i: kept where it flips, no branch to mispredict */
        m += now != before;
        before = now;
    }
    return m;
}

/* Per-key sums of a stretch's parts (its runs clipped to it), in whole ns, the keys touched listed
 * (seen marks them). numpy sums them in doubles, in its order; the same integer: each part is >= 0
 * (the runs in order) and a stretch's parts total its length, below 2**53 (checked), so every partial
 * sum is a whole number a double holds exactly, in any order. */
typedef struct {
    int64_t *sum;
    int32_t *touched;
    uint8_t *seen;
    int64_t nkeys;
} KeySums;

#define LONGEST ((int64_t)1 << 53) /* a stretch's length from which sums are no longer shown exact */

static int key_sums_open(KeySums *ks, int64_t nkeys) {
    ks->nkeys = nkeys;
    ks->sum = calloc((size_t)nkeys + 1, sizeof(int64_t));
    ks->touched = calloc((size_t)nkeys + 1, sizeof(int32_t));
    ks->seen = calloc((size_t)nkeys + 1, 1);
    return ks->sum && ks->touched && ks->seen;
}

static void key_sums_close(KeySums *ks) {
    free(ks->sum);
    free(ks->touched);
    free(ks->seen);
}

/* Key k's ns as _key_sums keeps them (a sum above 0; 0: none kept), its sum reset. */
static int64_t key_sums_take(KeySums *ks, int32_t k) {
    int64_t ns = ks->sum[k];
    ks->sum[k] = 0;
    ks->seen[k] = 0;
    return ns > 0 ? ns : 0;
}

/* The touched keys (seen marks them) in key order: insertion-sorted where they are few, else read
 * off the table. */
static void sort_touched(int32_t *k, const uint8_t *seen, int64_t nkeys, int64_t nt) {
    if (nt * nt > nkeys) {
        int64_t j = 0;
        for (int32_t c = 0; c < nkeys; c++)
            if (seen[c]) k[j++] = c;
        return;
    }
    for (int64_t a = 1; a < nt; a++) {
        int32_t v = k[a];
        int64_t z = a - 1;
        for (; z >= 0 && k[z] > v; z--) k[z + 1] = k[z];
        k[z + 1] = v;
    }
}

/* Elastic intervals [lo[j], hi[j]) (lo sorted) and the last one seen: a part's start is in one where
 * it lies in the last one starting at or before it (as _within finds it); the starts only grow. */
typedef struct {
    const int64_t *lo, *hi;
    int64_t n, at;
} Elastic;

/* The parts of the runs starting at t (the last lasting to end) from run r on (t[r] <= lo) that start
 * before hi, clipped to [lo, hi), added to their keys' sums (ELASTIC, 0, for a part starting in an
 * elastic interval); *nt: the keys touched so far. Returns the first run starting at or after hi
 * (or n). *bad: set where a run starts before the one before it (every run up to the one returned
 * is compared with the one before it) or a key is outside [0, nkeys). */
static inline int64_t key_sums_parts(KeySums *ks, const int64_t *t, const int32_t *key, int64_t n,
                                     int64_t end, int64_t r, int64_t lo, int64_t hi, Elastic *el,
                                     int64_t *nt, int *bad) {
    /* locals, not the pointers' fields: a store into sum could be one of them for the compiler */
    int64_t *sum = ks->sum, nkeys = ks->nkeys, q = r, count = *nt, at = el->at, ne = el->n;
    int32_t *touched = ks->touched;
    uint8_t *seen = ks->seen;
    const int64_t *elo = el->lo, *ehi = el->hi;
    int wrong = *bad;
    for (; q < n; q++) {
        wrong |= q > 0 && t[q] < t[q - 1];
        if (t[q] >= hi) break;
        int32_t k = key[q];
        if (k < 0 || k >= nkeys) {
            wrong = 1;
            break;
        }
        int64_t x = t[q] > lo ? t[q] : lo, y = q + 1 < n ? t[q + 1] : end;
        if (ne) {
            while (at + 1 < ne && elo[at + 1] <= x) at++;
            if (elo[at] <= x && x < ehi[at]) k = 0;
        }
        sum[k] += (y < hi ? y : hi) - x;
        if (!seen[k]) {
            seen[k] = 1;
            touched[count++] = k;
        }
    }
    *nt = count;
    el->at = at;
    *bad = wrong;
    return q;
}

/* Whether a[0:n] is in order (non-decreasing). */
static int in_order(const int64_t *a, int64_t n) {
    for (int64_t i = 1; i < n; i++)
        if (a[i] < a[i - 1]) return 0;
    return 1;
}

/* Where a sweep of the stretches stopped at run q: whether the runs from q on (not compared yet)
 * are in order too. */
static int in_order_from(const int64_t *t, int64_t n, int64_t q) {
    return q >= n || in_order(t + (q > 0 ? q - 1 : 0), n - (q > 0 ? q - 1 : 0));
}

/* whatif.py _stretches: the runs starting at t (the last lasting to end) between the points inner
 * (sorted, distinct, above t[0], below end): per stretch (t[0] to inner[0], ..., inner[m - 1] to
 * end), each key's time, those above 0 in key order: ent_off (m + 2), ent_key, ent_ns (cap each);
 * time in the intervals [elo[j], ehi[j]) (elo sorted) in ELASTIC, as KeySums' parts take it.
 * Returns the entries' number; -1 where t, inner or elo is out of order, t ends after end, a key is
 * outside [0, nkeys), a stretch lasts 2**53 ns or more or cap is short; -2 without memory.
 *
 * numpy adds the parts in row order where every point falls on a run's start (_aligned_stretches),
 * in another one where points cut runs (_stretch_block: the runs' parts, then the points'); this
 * pass in time order, to the same sums (KeySums). */
int64_t whatif_stretches(const int64_t *t, const int32_t *key, int64_t n, int64_t end, const int64_t *inner,
                         int64_t m, const int64_t *elo, const int64_t *ehi, int64_t ne, int64_t nkeys,
                         int64_t *ent_off, int32_t *ent_key, int64_t *ent_ns, int64_t cap) {
    if (n == 0 || t[n - 1] > end || !in_order(elo, ne)) return -1;
    for (int64_t s = 0; s < m; s++)
        if (inner[s] <= (s ? inner[s - 1] : t[0]) || inner[s] >= end) return -1;
    KeySums ks;
    Elastic el = {elo, ehi, ne, 0};
    int bad = !key_sums_open(&ks, nkeys);
    int64_t count = 0, r = 0, q = 0;  /* run r: the stretch's first (t[r] <= lo) */
    for (int64_t s = 0; s <= m && !bad; s++) {
        int64_t lo = s ? inner[s - 1] : t[0], hi = s < m ? inner[s] : end, nt = 0;
        bad |= hi - lo >= LONGEST;
        ent_off[s] = count;
        q = key_sums_parts(&ks, t, key, n, end, r, lo, hi, &el, &nt, &bad);
        sort_touched(ks.touched, ks.seen, nkeys, nt);
        for (int64_t z = 0; z < nt; z++) {
            int32_t k = ks.touched[z];
            int64_t ns = key_sums_take(&ks, k);
            if (ns <= 0 || bad) continue;
            if (count >= cap) {
                bad = 1;
                continue;
            }
            ent_key[count] = k;
            ent_ns[count++] = ns;
        }
        r = q < n && t[q] == hi ? q : (q > r ? q - 1 : r);  /* the run at hi: starting there, or before */
    }
    if (bad || !in_order_from(t, n, q)) count = -1;
    else ent_off[m + 1] = count;
    key_sums_close(&ks);
    return count;
}

/* The smallest value above after in the sorted lists a and b, read on from their cursors i and j;
 * INT64_MAX when none is left. Each step takes the smaller head (both where equal) without a branch
 * on which: the lists interleave at random. */
static inline int64_t next_point(const int64_t *a, int64_t na, int64_t *i, const int64_t *b, int64_t nb,
                                 int64_t *j, int64_t after) {
    for (;;) {
        int64_t va = *i < na ? a[*i] : INT64_MAX, vb = *j < nb ? b[*j] : INT64_MAX;
        int64_t v = va < vb ? va : vb;
        if (v == INT64_MAX) return v;
        *i += va == v;
        *j += vb == v;
        if (v > after) return v;
    }
}

/* whatif.py _drawn: the runs starting at t (the last lasting to end) cut at the points of the sorted
 * lists a and b (those above t[0] and below end, each once: distinct_times), each stretch between
 * points as its largest key (each key's time in it as _key_sums keeps it, as KeySums' parts take it;
 * the smallest key of equal ones, 0 with none above 0), consecutive stretches of one key joined:
 * (start, key) into out_t, out_key (na + nb + 1 each). Returns their number; -1 where t, a or b is
 * out of order, t ends after end, a key is outside [0, nkeys) or a stretch lasts 2**53 ns or more;
 * -2 without memory. numpy's two ways (points on runs' starts: _aligned_largest_keys; points in
 * runs: _stretches) give the same sums (KeySums). */
int64_t whatif_drawn(const int64_t *t, const int32_t *key, int64_t n, int64_t end, const int64_t *a,
                     int64_t na, const int64_t *b, int64_t nb, int64_t nkeys, int64_t *out_t,
                     int32_t *out_key) {
    if (n == 0 || end <= t[0] || t[n - 1] > end) return -1;
    if (!in_order(a, na) || !in_order(b, nb)) return -1;
    KeySums ks;
    Elastic none = {0, 0, 0, 0};
    int bad = !key_sums_open(&ks, nkeys);
    int64_t count = 0, lo = t[0], r = 0, q = 0, i = 0, j = 0;  /* run r: the stretch's first (t[r] <= lo) */
    while (!bad) {
        int64_t hi = next_point(a, na, &i, b, nb, &j, lo);
        hi = hi < end ? hi : end;
        bad |= hi - lo >= LONGEST;
        int32_t best = 0;
        q = r + 1;
        if (q >= n || t[q] >= hi) {
            /* one run (most stretches): from lo or its start on, to hi, a time above 0 (it starts
             * before hi; it is the one at lo, lasting past it, or it starts there) */
            bad |= key[r] < 0 || key[r] >= nkeys || (q < n && t[q] < t[r]);
            best = key[r];
        } else {
            int64_t nt = 0, most = 0;
            q = key_sums_parts(&ks, t, key, n, end, r, lo, hi, &none, &nt, &bad);
            for (int64_t z = 0; z < nt; z++) {
                int32_t k = ks.touched[z];
                int64_t ns = key_sums_take(&ks, k);
                if (ns > most || (ns == most && ns > 0 && k < best)) {
                    most = ns;
                    best = k;
                }
            }
        }
        if (count == 0 || out_key[count - 1] != best) {
            out_t[count] = lo;
            out_key[count++] = best;
        }
        if (hi == end) break;
        r = q < n && t[q] == hi ? q : q - 1;  /* the run at hi: one starting there, else the one before */
        lo = hi;
    }
    if (bad || !in_order_from(t, n, q)) count = -1;
    key_sums_close(&ks);
    return count;
}

/* The first index in [0, n) of a sorted array get(i) whose value is >= v (left) or > v (right):
 * np.searchsorted's answer on a sorted array. ds's ends are ds[i + 1], the last one end. */
static int64_t search(const int64_t *ds, int64_t n, int64_t end, int ends, int right, int64_t v) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int64_t x = ends ? (mid + 1 < n ? ds[mid + 1] : end) : ds[mid];
        if (right ? x <= v : x < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* whatif.py _clip: the drawn runs (start ds, key dk; each lasting to the next, the last to end)
 * within each interval [lo[j], hi[j]) in turn, clipped to it, keys not shown left out, as are empty
 * ones, each touching the one before with its key joined to it: (start, end, key) into out_s, out_e,
 * out_k (cap each). Returns their number; -1 where ds or its end is out of order, a key is outside
 * [0, nshown) or more than cap are kept. */
int64_t whatif_clip(const int64_t *ds, const int32_t *dk, int64_t nd, int64_t end, const int64_t *lo,
                    const int64_t *hi, int64_t nint, const uint8_t *shown, int64_t nshown, int64_t *out_s,
                    int64_t *out_e, int32_t *out_k, int64_t cap) {
    for (int64_t i = 1; i < nd; i++)
        if (ds[i] < ds[i - 1]) return -1;
    if (nd > 0 && end < ds[nd - 1]) return -1;
    int64_t count = 0;
    for (int64_t j = 0; j < nint; j++) {
        int64_t i0 = search(ds, nd, end, 1, 1, lo[j]);  /* the first run ending after lo */
        int64_t i1 = search(ds, nd, end, 0, 0, hi[j]);  /* the first run starting at or after hi */
        for (int64_t r = i0; r < i1; r++) {
            int32_t k = dk[r];
            if (k < 0 || k >= nshown) return -1;
            int64_t de = r + 1 < nd ? ds[r + 1] : end;
            int64_t s = ds[r] > lo[j] ? ds[r] : lo[j];
            int64_t e = de < hi[j] ? de : hi[j];
            if (!shown[k] || e <= s) continue;
            if (count > 0 && out_k[count - 1] == k && out_e[count - 1] == s) {
                out_e[count - 1] = e;
                continue;
            }
            if (count >= cap) return -1;
            out_s[count] = s;
            out_e[count] = e;
            out_k[count++] = k;
        }
    }
    return count;
}

/* Whether runs [a, b) of whatif_clip's are each at or before the next one (ds[r + 1], the last one end). */
static inline int runs_in_order(const int64_t *ds, int64_t nd, int64_t end, int64_t a, int64_t b) {
    int ok = 1;
    for (int64_t r = a; r < b; r++) ok &= ds[r] <= (r + 1 < nd ? ds[r + 1] : end);
    return ok;
}

/* The piece of run r (start ds[r], lasting to the next or end) within [lo, hi): its start, end and
 * whether whatif_clip keeps it (shown, not empty). Returns 0; -1 for a key outside shown. */
static inline int clip_piece(const int64_t *ds, const int32_t *dk, int64_t nd, int64_t end, int64_t lo,
                             int64_t hi, const uint8_t *shown, int64_t nshown, int64_t r, int64_t *s, int64_t *e,
                             int *kept) {
    int32_t k = dk[r];
    if (k < 0 || k >= nshown) return -1;
    int64_t de = r + 1 < nd ? ds[r + 1] : end;
    *s = ds[r] > lo ? ds[r] : lo;
    *e = de < hi ? de : hi;
    *kept = shown[k] && *e > *s;
    return 0;
}

/* The k longest intervals so far as whatif_first_sorted keeps the smallest values (start - end): m of
 * them, in order of value, equal ones in the order offered (index, start, end, key). */
typedef struct {
    int64_t k, m, *v, *idx, *s, *e;
    int32_t *key;
} Longest;

static inline void longest_offer(Longest *l, int64_t j, int64_t s, int64_t e, int32_t key) {
    int64_t val = (int64_t)((uint64_t)s - (uint64_t)e); /* numpy's int64 difference, wrapping */
    if (l->k <= 0 || (l->m == l->k && val >= l->v[l->m - 1])) return;
    int64_t p = l->m < l->k ? l->m++ : l->m - 1; /* the last place, taken over when full */
    for (; p > 0 && l->v[p - 1] > val; p--) {
        l->v[p] = l->v[p - 1], l->idx[p] = l->idx[p - 1];
        l->s[p] = l->s[p - 1], l->e[p] = l->e[p - 1], l->key[p] = l->key[p - 1];
    }
    l->v[p] = val, l->idx[p] = j, l->s[p] = s, l->e[p] = e, l->key[p] = key;
}

/* whatif.py _PathPart.longest: of the intervals whatif_clip writes (the drawn runs ds, dk clipped to
 * [lo[j], hi[j]), keys not shown left out, touching ones of one key joined), the k longest as
 * whatif_first_sorted picks them of start - end (in order of that value, equal ones in index order:
 * their index, start, end and key into out_*, k places each), no other written. Returns the number
 * of intervals (those picked: the smaller of it and k); -1 where whatif_clip's would (ds out of
 * order, a key outside shown) or without memory. ds's order is checked as the runs are read, those
 * outside every interval on their own: one pass over them. */
int64_t whatif_clip_longest(const int64_t *ds, const int32_t *dk, int64_t nd, int64_t end, const int64_t *lo,
                            const int64_t *hi, int64_t nint, const uint8_t *shown, int64_t nshown, int64_t k,
                            int64_t *out_i, int64_t *out_s, int64_t *out_e, int32_t *out_k) {
    Longest l = {k, 0, malloc(sizeof(int64_t) * (size_t)(k > 0 ? k : 1)), out_i, out_s, out_e, out_k};
    if (!l.v) return -1;
    /* once k are kept, an interval's value (start - end) enters where below the k-th's: bound */
    int64_t count = 0, cs = 0, ce = 0, checked = 0, bound = INT64_MIN;
    int32_t ck = 0;
    int ok = 1;
    for (int64_t j = 0; j <= nint && ok; j++) { /* j == nint: the runs after the last interval */
        int64_t i0 = j < nint ? search(ds, nd, end, 1, 1, lo[j]) : nd; /* the first run ending after lo */
        int64_t i1 = j < nint ? search(ds, nd, end, 0, 0, hi[j]) : nd; /* the first starting at or after hi */
        if (i0 > checked) ok &= runs_in_order(ds, nd, end, checked, i0);
        int64_t jlo = j < nint ? lo[j] : 0, jhi = j < nint ? hi[j] : 0, a = i0 < i1 ? ds[i0] : 0;
        for (int64_t r = i0; r < i1 && ok; r++) {
            int64_t de = r + 1 < nd ? ds[r + 1] : end;
            int32_t key = dk[r];
            ok &= (a <= de) & (key >= 0) & (key < nshown);
            if (!ok) break;
            int64_t s = a > jlo ? a : jlo, e = de < jhi ? de : jhi;
            a = de;
            if (!shown[key] || e <= s) continue;
            if (count > 0 && ck == key && ce == s) {
                ce = e;
                continue;
            }
            if (count > 0 && (l.m < k || (int64_t)((uint64_t)cs - (uint64_t)ce) < bound)) {
                longest_offer(&l, count - 1, cs, ce, ck);
                if (l.m == k) bound = l.v[k - 1];
            }
            cs = s, ce = e, ck = key, count++;
        }
        if (i1 > checked) checked = i1;
    }
    if (ok && count > 0) longest_offer(&l, count - 1, cs, ce, ck);
    free(l.v);
    return ok ? count : -1;
}

/* Whether no interval of whatif_clip's holds pieces of both runs r - 1 and r (both of interval
 * [lo, hi)): both pieces have time and one is not shown, or their keys differ. */
static inline int clip_cut(const int64_t *ds, const int32_t *dk, int64_t nd, int64_t end, int64_t lo, int64_t hi,
                           const uint8_t *shown, int64_t nshown, int64_t r, int *bad) {
    int64_t s0, e0, s1, e1;
    int kept0, kept1;
    if (clip_piece(ds, dk, nd, end, lo, hi, shown, nshown, r - 1, &s0, &e0, &kept0) ||
        clip_piece(ds, dk, nd, end, lo, hi, shown, nshown, r, &s1, &e1, &kept1)) {
        *bad = 1;
        return 1;
    }
    return e0 > s0 && e1 > s1 && (!kept0 || !kept1 || dk[r - 1] != dk[r]);
}

/* whatif.py _PathPart.overlapping: of the intervals whatif_clip writes, those overlapping [wlo, whi)
 * (end > wlo, start < whi): their start, end and key into out_* (cap places each), in order. Only
 * the runs about the window are read: from the first whose piece ends after wlo back to a run no
 * interval spans from the one before (clip_cut), on to the first piece at or after whi that does not
 * join the one before. checked: a pass over every run found ds in order and their keys in shown
 * (whatif_clip_longest's answer); else this one checks them first. Returns their number; -1 where
 * ds is out of order, a key outside shown, or cap is short. */
int64_t whatif_clip_window(const int64_t *ds, const int32_t *dk, int64_t nd, int64_t end, const int64_t *lo,
                           const int64_t *hi, int64_t nint, const uint8_t *shown, int64_t nshown, int64_t wlo,
                           int64_t whi, int64_t checked, int64_t *out_s, int64_t *out_e, int32_t *out_k,
                           int64_t cap) {
    if (!checked) {
        if (!runs_in_order(ds, nd, end, 0, nd)) return -1;
        for (int64_t r = 0; r < nd; r++)
            if (dk[r] < 0 || dk[r] >= nshown) return -1;
    }
    int64_t a = 0, b = nint; /* the first interval ending after wlo: j */
    while (a < b) {
        int64_t mid = a + (b - a) / 2;
        if (hi[mid] <= wlo) a = mid + 1;
        else b = mid;
    }
    int64_t j = a;
    int64_t r = j < nint ? search(ds, nd, end, 1, 1, lo[j] > wlo ? lo[j] : wlo) : nd; /* its piece after wlo */
    int bad = 0;
    if (j < nint) {
        int64_t i0 = search(ds, nd, end, 1, 1, lo[j]);
        while (r > i0 && !clip_cut(ds, dk, nd, end, lo[j], hi[j], shown, nshown, r, &bad)) r--;
        if (r <= i0 && j > 0 && hi[j - 1] == lo[j]) j = 0, r = nint > 0 ? search(ds, nd, end, 1, 1, lo[0]) : nd;
    }
    int64_t count = 0, cs = 0, ce = 0, open = 0;
    int32_t ck = 0;
    for (int64_t from = r; j < nint && !bad; j++, from = 0) { /* the first interval's runs from r on */
        int64_t i0 = search(ds, nd, end, 1, 1, lo[j]), i1 = search(ds, nd, end, 0, 0, hi[j]);
        for (r = from > i0 ? from : i0; r < i1; r++) {
            int64_t s, e;
            int kept;
            if (clip_piece(ds, dk, nd, end, lo[j], hi[j], shown, nshown, r, &s, &e, &kept)) return -1;
            if (kept && open && ck == dk[r] && ce == s) {
                ce = e;
                continue;
            }
            /* a piece with time that does not join the open interval ends it: from whi on, so do all */
            if (e > s && s >= whi) goto done;
            if (!kept) continue;
            if (open && ce > wlo && cs < whi) {
                if (count >= cap) return -1;
                out_s[count] = cs, out_e[count] = ce, out_k[count++] = ck;
            }
            cs = s, ce = e, ck = dk[r], open = 1;
        }
    }
done:
    if (bad) return -1;
    if (open && ce > wlo && cs < whi) {
        if (count >= cap) return -1;
        out_s[count] = cs, out_e[count] = ce, out_k[count++] = ck;
    }
    return count;
}

/* whatif.py _first_sorted: np.argsort(v, kind="stable")[:k], the indices of the k smallest values,
 * equal ones in index order, in one pass: out holds the best so far in order, a value is put in
 * after those it does not beat (most values beat none: one comparison each). Returns min(n, k). */
int64_t whatif_first_sorted(const int64_t *v, int64_t n, int64_t k, int64_t *out) {
    int64_t m = 0;
    for (int64_t i = 0; i < n && k > 0; i++) {
        if (m == k && v[i] >= v[out[m - 1]]) continue;
        int64_t p = m < k ? m++ : m - 1;  /* the last place, taken over when full */
        for (; p > 0 && v[out[p - 1]] > v[i]; p--) out[p] = out[p - 1];
        out[p] = i;
    }
    return m;
}

/* A node stretch being summed in whatif_main_pass: its start and its keys' sums. */
typedef struct {
    KeySums ks;
    int64_t lo, nt;
} Open;

/* whatif_main_pass's node stretch s [lo, hi) closed: its keys' time above 0 in key order as
 * whatif_stretches writes them (ent_key, ent_ns; ent_off[s + 1] their count so far), hi a node where
 * it is below end. Returns 0; -1 where the stretch lasts 2**53 ns or more or a cap is short. */
static inline int node_close(Open *s, int64_t hi, int64_t end, int64_t *stretch, int64_t *node_t,
                             int64_t cap_nodes, int64_t *ent_off, int32_t *ent_key, int64_t *ent_ns,
                             int64_t *count, int64_t cap) {
    sort_touched(s->ks.touched, s->ks.seen, s->ks.nkeys, s->nt);
    int bad = hi - s->lo >= LONGEST;
    for (int64_t z = 0; z < s->nt; z++) {
        int32_t k = s->ks.touched[z];
        int64_t ns = key_sums_take(&s->ks, k);
        if (ns <= 0) continue;
        if (*count >= cap) {
            bad = 1;
            continue;
        }
        ent_key[*count] = k;
        ent_ns[(*count)++] = ns;
    }
    s->nt = 0;
    ent_off[++*stretch] = *count;
    if (hi < end) {
        if (*stretch > cap_nodes) return -1;
        node_t[*stretch - 1] = hi;
    }
    s->lo = hi;
    return bad ? -1 : 0;
}

#define NCAT 16 /* whatif.py's _NCODE: a row's code is its instance's code plus a category below it */

/* The rows of one operation instance (op), a segment, as whatif_main_pass reads them: a category
 * c's code is base + c, its key and idle flag read at its first row in the segment (known) and kept,
 * so that a row reads no table. */
typedef struct {
    int64_t base;
    uint32_t known, idle;
    int32_t key[NCAT];
} Segment;

/* A segment of instance v (-1 reads inst_code's last entry, as numpy's index does). Returns 0; -1 for
 * an instance outside inst_code. */
static inline int segment_open(Segment *sg, int32_t v, const int64_t *inst_code, int64_t n_code) {
    int64_t o = v < 0 ? (int64_t)v + n_code : v;
    if (o < 0 || o >= n_code) return -1;
    sg->base = inst_code[o];
    sg->known = sg->idle = 0;
    return 0;
}

/* Category c's first row in the segment: its code and key checked as whatif_main_runs checks a row's,
 * kept, its code marked present. Returns 0; -1 for a category outside [0, NCAT), a code outside
 * key_of, a key outside idle, or a key of another category of the segment (a table that joins codes:
 * sums per category would not be sums per key). */
static inline int segment_learn(Segment *sg, int c, const int32_t *key_of, int64_t n_keys,
                                const uint8_t *idle, int64_t n_idle, uint8_t *present) {
    if (c < 0 || c >= NCAT) return -1;
    int64_t code = sg->base + c;
    if (code < 0 || code >= n_keys) return -1;
    int32_t key = key_of[code];
    if (key < 0 || key >= n_idle) return -1;
    for (uint32_t m = sg->known; m; m &= m - 1)
        if (sg->key[__builtin_ctz(m)] == key) return -1;
    present[code] = 1;
    sg->key[c] = key;
    sg->known |= 1u << c;
    sg->idle |= (uint32_t)(idle[key] != 0) << c;
    return 0;
}

/* Whole ns per category of one segment (seen: those added to since the last take). */
typedef struct {
    int64_t sum[NCAT];
    uint32_t seen;
} CatSums;

static inline void cat_add(CatSums *p, int c, int64_t ns) {
    p->sum[c] += ns;
    p->seen |= 1u << c;
}

/* The drawn stretch [*lo, hi) closed, its parts all of segment sg (by category: d): its largest key,
 * the smallest of equal ones (whatif_drawn's choice), written where it differs from the one before;
 * *lo becomes hi. Returns 0; -1 where the stretch lasts 2**53 ns or more or cap is short. */
static inline int drawn_close(CatSums *d, const Segment *sg, int64_t *lo, int64_t hi, int64_t *out_t,
                              int32_t *out_key, int64_t *count, int64_t cap) {
    int32_t best = 0;
    int64_t most = 0;
    for (uint32_t m = d->seen; m; m &= m - 1) {
        int c = __builtin_ctz(m);
        int64_t ns = d->sum[c];
        int32_t k = sg->key[c];
        d->sum[c] = 0;
        if (ns > most || (ns == most && ns > 0 && k < best)) {
            most = ns;
            best = k;
        }
    }
    d->seen = 0;
    if (hi - *lo >= LONGEST) return -1;
    if (*count == 0 || out_key[*count - 1] != best) {
        if (*count >= cap) return -1;
        out_t[*count] = *lo;
        out_key[(*count)++] = best;
    }
    *lo = hi;
    return 0;
}

/* The node stretch's parts of segment sg (by category: p) added to its keys' sums. */
static inline void node_add(Open *s, CatSums *p, const Segment *sg) {
    for (uint32_t m = p->seen; m; m &= m - 1) {
        int c = __builtin_ctz(m);
        int32_t k = sg->key[c];
        s->ks.sum[k] += p->sum[c];
        p->sum[c] = 0;
        if (!s->ks.seen[k]) {
            s->ks.seen[k] = 1;
            s->ks.touched[s->nt++] = k;
        }
    }
    p->seen = 0;
}

/* The drawn path being written by whatif_main_pass: its stretches (out_t, out_key; count of cap) and
 * the start of the open one (lo). */
typedef struct {
    int64_t *t;
    int32_t *key;
    int64_t count, cap, lo;
} Drawn;

/* whatif_main_pass's rows from i on that end no node stretch: of its instance sv, a category known in
 * the segment, at or after the row before's time (*mark) and before limit (the next node, or end),
 * where ``flips`` (no node at a flip) of any idle flag, else as idle as the row before (*prev_idle):
 * each one's time since the row before added to the row before's category (*pc), the drawn stretch
 * ended where the idle flag flips (and the stretch has time). Returns the first other row (or n);
 * -1 where the drawn path's close fails (a stretch of 2**53 ns, cap short). Most rows are such rows:
 * this loop reads their instance, category and time only. None begins the segment's first run of a
 * code other than its first row's (that row's category is not known yet): whether a run begins in
 * an instance (working) is found at the rows before the loop. */
__attribute__((noinline)) /* a loop of its own: its state in registers, not the caller's spills */
static int64_t segment_rows(const int32_t *op, const int64_t *ts, const int8_t *cat, int64_t i, int64_t n,
                            int32_t sv, const Segment *sg, int flips, uint32_t *prev_idle, int64_t limit,
                            int *pc, int64_t *mark, CatSums *d, CatSums *p, Drawn *dr) {
    uint32_t ok = flips ? sg->known : sg->known & (*prev_idle ? sg->idle : ~sg->idle), was = *prev_idle;
    uint32_t idle = sg->idle, d_seen = d->seen, p_seen = p->seen;
    int64_t m = *mark, lo = dr->lo;
    int64_t *d_sum = d->sum, *p_sum = p->sum;
    int b = *pc;
    for (; i < n; i++) {
        int c = cat[i];
        int64_t t = ts[i];
        if (op[i] != sv || (unsigned)c >= NCAT || !((ok >> c) & 1) || t < m || t >= limit) break;
        d_sum[b] += t - m;
        p_sum[b] += t - m;
        d_seen |= 1u << b;
        p_seen |= 1u << b;
        uint32_t now = (idle >> c) & 1;
        if (now != was && t > lo) {
            d->seen = d_seen;
            if (drawn_close(d, sg, &lo, t, dr->t, dr->key, &dr->count, dr->cap)) {
                i = -1;
                break;
            }
            d_seen = 0;
        }
        m = t, b = c, was = now;
    }
    d->seen = d_seen, p->seen = p_seen, dr->lo = lo;
    *mark = m, *pc = b, *prev_idle = was;
    return i;
}

/* whatif.py process_inputs for a process that keeps no runs (not a parent) and has no waiting calls,
 * from the main thread's rows in one pass, no run written: the runs as whatif_main_runs makes them
 * (not a parent's: one of each code, key key_of[code]), their idle flips, then what whatif_drawn
 * draws of them cut at each run of one instance's start and at the flips (out_t, out_key: cap_d
 * places), and what whatif_stretches sums of them between the nodes (``nodes``, sorted, distinct,
 * and with flip_nodes the flips too; those above start and below end: node_t, cap_nodes places):
 * ent_off (cap_nodes + 2), ent_key, ent_ns (cap_e). Each stretch's parts are the runs' parts in it,
 * added in whole ns: the same sums (KeySums). counts: (drawn, nodes, entries, whether a run is in an
 * instance). present (n_keys, zeroed): 1 at each row's code, as whatif_main_codes marks it. Returns
 * 0; -1 where the times are out of order, a table is short (op, code, key), a category is outside
 * [0, NCAT), two categories of an instance share a key, a stretch lasts 2**53 ns or more or a cap is
 * short; -2 without memory.
 *
 * Each row's time since the row before counts in the row before's category, summed per category
 * within the instance (a drawn stretch never spans two: it ends where the instance does, but for
 * stretches of no time) and handed to the node stretch's keys where the instance ends or the
 * stretch does: a row reads no key table, only its instance, category and time. From the first row
 * at end on, every part is of no time: those rows are only checked and their codes marked. */
int64_t whatif_main_pass(const int32_t *op, const int64_t *ts, const int8_t *cat, int64_t n,
                         const int64_t *inst_code, int64_t n_code, const int32_t *key_of, int64_t n_keys,
                         uint8_t *present, const uint8_t *idle, int64_t n_idle, int64_t start, int64_t end,
                         const int64_t *nodes, int64_t n_nodes, int64_t flip_nodes, int64_t *out_t,
                         int32_t *out_key, int64_t cap_d, int64_t *node_t, int64_t cap_nodes,
                         int64_t *ent_off, int32_t *ent_key, int64_t *ent_ns, int64_t cap_e, int64_t *counts) {
    if (n == 0 || end <= start) return -1;
    Open s = {{0}, start, 0};
    int64_t result = key_sums_open(&s.ks, n_idle) ? 0 : -2;
    int64_t stretch = 0, n_ent = 0, g = 0, mark = start;
    Drawn dr = {out_t, out_key, 0, cap_d, start};
    ent_off[0] = 0;
    while (g < n_nodes && nodes[g] <= start) g++;
    int64_t next = g < n_nodes ? nodes[g] : INT64_MAX; /* the next node */
    Segment sg;
    CatSums d = {{0}, 0}, p = {{0}, 0}; /* the drawn stretch's parts, the node stretch's not yet keyed */
    int32_t sv = op[0];
    int pc = cat[0]; /* the category of the row before: the one its time counts in */
    if (result == 0 && (segment_open(&sg, sv, inst_code, n_code) ||
                        segment_learn(&sg, pc, key_of, n_keys, idle, n_idle, present)))
        result = -1;
    int64_t prev_code = result == 0 ? sg.base + pc : 0, working = sv >= 0;
    uint32_t prev_idle = result == 0 ? (sg.idle >> pc) & 1 : 0;
    int64_t i = 1;
    for (; i < n && result == 0; i++) {
        int64_t limit = next < end ? next : end;
        i = segment_rows(op, ts, cat, i, n, sv, &sg, !flip_nodes, &prev_idle, limit, &pc, &mark, &d, &p, &dr);
        if (i < 0) {
            result = -1;
            break;
        }
        if (i >= n) break;
        int32_t v = op[i];
        int c = cat[i];
        int64_t t = ts[i] < end ? ts[i] : end;
        if (t < mark) {
            result = -1;
            break;
        }
        if (t >= end) break; /* the rows from here on are of no time */
        int at_node = 0;
        if (t >= next) { /* the nodes before t cut the node stretch; one at t ends it below */
            for (; g < n_nodes && nodes[g] < t && result == 0; g++) {
                cat_add(&d, pc, nodes[g] - mark);
                cat_add(&p, pc, nodes[g] - mark);
                mark = nodes[g];
                node_add(&s, &p, &sg);
                if (node_close(&s, nodes[g], end, &stretch, node_t, cap_nodes, ent_off, ent_key, ent_ns,
                               &n_ent, cap_e))
                    result = -1;
            }
            if (result) break;
            at_node = g < n_nodes && nodes[g] == t;
            g += at_node;
            next = g < n_nodes ? nodes[g] : INT64_MAX;
        }
        cat_add(&d, pc, t - mark);
        cat_add(&p, pc, t - mark);
        mark = t;
        if (v != sv) {
            /* another instance: the drawn stretch ends there (one of no time goes on, its parts all 0,
             * kept by no category), the node stretch's parts are keyed */
            if (t > dr.lo) {
                if (drawn_close(&d, &sg, &dr.lo, t, dr.t, dr.key, &dr.count, dr.cap)) result = -1;
            } else {
                d.seen = 0;
            }
            node_add(&s, &p, &sg);
            if (segment_open(&sg, v, inst_code, n_code)) result = -1;
            sv = v;
        }
        if (result == 0 && ((unsigned)c >= NCAT || !((sg.known >> c) & 1)) &&
            segment_learn(&sg, c, key_of, n_keys, idle, n_idle, present))
            result = -1;
        if (result) break;
        uint32_t now = (sg.idle >> c) & 1;
        int flip = now != prev_idle;
        /* a flip ends the drawn stretch (at another instance's first row it has ended, or it is of no
         * time) */
        if (flip && t > dr.lo && drawn_close(&d, &sg, &dr.lo, t, dr.t, dr.key, &dr.count, dr.cap))
            result = -1;
        if ((at_node || (flip_nodes && flip)) && t > s.lo) {
            node_add(&s, &p, &sg);
            if (node_close(&s, t, end, &stretch, node_t, cap_nodes, ent_off, ent_key, ent_ns, &n_ent, cap_e))
                result = -1;
        }
        int64_t code = sg.base + c;
        working |= (code != prev_code) & (v >= 0);
        prev_code = code, pc = c, prev_idle = now;
    }
    /* the nodes after the last row before end, then the last stretches, to end */
    for (; g < n_nodes && nodes[g] < end && result == 0; g++) {
        cat_add(&d, pc, nodes[g] - mark);
        cat_add(&p, pc, nodes[g] - mark);
        mark = nodes[g];
        node_add(&s, &p, &sg);
        if (node_close(&s, nodes[g], end, &stretch, node_t, cap_nodes, ent_off, ent_key, ent_ns, &n_ent,
                       cap_e))
            result = -1;
    }
    if (result == 0) {
        cat_add(&d, pc, end - mark);
        cat_add(&p, pc, end - mark);
        node_add(&s, &p, &sg);
        if (drawn_close(&d, &sg, &dr.lo, end, dr.t, dr.key, &dr.count, dr.cap) ||
            node_close(&s, end, end, &stretch, node_t, cap_nodes, ent_off, ent_key, ent_ns, &n_ent, cap_e))
            result = -1;
    }
    /* the rows at end: checked, their codes marked */
    for (; i < n && result == 0; i++) {
        int32_t v = op[i];
        int c = cat[i];
        if (ts[i] < end || (v != sv && segment_open(&sg, v, inst_code, n_code))) {
            result = -1;
            break;
        }
        sv = v;
        if (((unsigned)c >= NCAT || !((sg.known >> c) & 1)) &&
            segment_learn(&sg, c, key_of, n_keys, idle, n_idle, present)) {
            result = -1;
            break;
        }
        int64_t code = sg.base + c;
        working |= (code != prev_code) & (v >= 0);
        prev_code = code;
    }
    counts[0] = dr.count, counts[1] = stretch - 1, counts[2] = n_ent, counts[3] = working;
    key_sums_close(&s.ks);
    return result;
}

/* whatif.py _renumber: keys[i] = to_key[keys[i]] in place, as numpy's to_key[keys] a block at a time
 * (a key below 0 from the end, as numpy's index reads it). Returns 0; -1 at a key outside to_key's
 * n_to entries (numpy's index raises; so does the caller). */
int64_t whatif_renumber(int64_t n, int32_t *keys, const int32_t *to_key, int64_t n_to) {
    for (int64_t i = 0; i < n; i++) {
        int64_t k = keys[i] < 0 ? keys[i] + n_to : keys[i];
        if (k < 0 || k >= n_to) return -1;
        keys[i] = to_key[k];
    }
    return 0;
}
