/* rlscope's scope and category boundaries in C (built on first use by scope_native.py).
 *
 * Why: a scope pair in Python costs ~1 us in a tight loop but 3.6-4.0 us inside a real RL loop on
 * a 2-core CPU machine (timed in the eager simulator): a dozen bytecode-level steps, each with its own inline
 * caches, run cold after tens of microseconds of the job's own work. The same steps here are a few
 * hundred bytes of machine code and a handful of dict/list operations.
 *
 * The semantics are annotate.py's, exactly: the same events, the same per-thread stacks, the same
 * window and tick checks. Three paths: the lean one for a session bound here at its start (its
 * state in C, see "the lean session path"), the full one for any other session (annotate's
 * ThreadState lists and dict, shared with the Python code), and validate's timer path. Anything
 * off the common path (phases; on the full path, closing a scope that is not the innermost one or
 * an active object that is not a session with ``_tls``) is handed to annotate.py's Python
 * implementation, passed in by install().
 *
 * install() puts method descriptors for __enter__/__exit__ on annotate._Scope and
 * annotate._Category, so every scope object, including those created before, takes this path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>

#define ABI_VERSION 6

/* event kinds and flags: rlscope/trace/schema.py's, checked by install() */
#define OP_BEGIN 0
#define OP_END 1
#define CAT_BEGIN 2
#define CAT_END 3
#define FLAG_RECURSIVE 1
#define FLAG_FORCED_CLOSE 2
#define CAT_PYTHON 0

/* Scope exits (operations, not phases or categories) on the lean and timer paths, every thread:
 * how far a program has run, the same count in its timed and its profiled run (rlscope/overhead/validate/twin.py:
 * validate's twin runs take turns at the same point of the program). One add a scope. */
static long long scope_exits;

static PyObject *annotate_dict;   /* rlscope.annotate.__dict__: "_active" read on every boundary */
static PyObject *perf_counter_ns; /* time.perf_counter_ns: a session clock read as CLOCK_MONOTONIC */
static PyObject *py_scope_enter, *py_scope_exit, *py_close_stack; /* annotate.py's fallbacks */
static PyObject *py_cat_enter, *py_cat_exit;
static Py_ssize_t off_name, off_name_id, off_begin, off_code; /* slot offsets in _Scope/_Category */
static PyObject *s_active, *s_tls, *s_clock, *s_events, *s_ids, *s_nvtx_push, *s_nvtx_pop;
static PyObject *s_window_due, *s_tick_due, *s_main_tid, *s_thread_state, *s_switch_window,
    *s_run_tick, *s_append, *s_ops, *s_open_names, *s_cats, *s_thread, *s_long_ops, *s_long_op_ns,
    *s_long_op_entry, *s_long_op_done;

/* Per-thread cache of the active object's ThreadState. Strong references: the cached session and
 * its threading.local cannot be freed and their addresses reused while cached (no ABA), and a new
 * threading.local (Session._restart_in_child after fork) misses the cache. A thread that ends keeps
 * its references (C11 thread-locals have no destructor that could take the GIL): one stopped session
 * object per such thread, until the process ends; Session._stop drops its own thread's. */
typedef struct {
    PyObject *session, *tls, *ops, *open_names, *cats, *thread;
} TState;
static _Thread_local TState tstate;

/* the boundary in progress on this thread (see "self-timed boundaries" below) */
struct EventBuffer_;
static _Thread_local struct EventBuffer_ *row_buf; /* the buffer and row of its event, */
static _Thread_local Py_ssize_t row_idx;           /* -1: none yet */
static _Thread_local long long row_ts;
static _Thread_local int row_count, row_real_clock, row_python;

static inline long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* what time.perf_counter_ns reads on Linux */
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline PyObject *slot(PyObject *o, Py_ssize_t off) { return *(PyObject **)((char *)o + off); }

/* The active object's instance dict (borrowed), or NULL (not a plain object). ``s``: annotate's
 * ``_active``, read once per boundary by the timed wrappers, neither NULL nor None. */
static PyObject *active_dict(PyObject *s) {
    PyObject **dp = _PyObject_GetDictPtr(s);
    if (dp == NULL || *dp == NULL) {
        /* 3.11+ may keep attributes inline until __dict__ is asked for: materialize it once */
        PyObject *d = PyObject_GenericGetDict(s, NULL);
        if (d == NULL) {
            PyErr_Clear();
            return NULL;
        }
        Py_DECREF(d); /* the object keeps it */
        dp = _PyObject_GetDictPtr(s);
        if (dp == NULL || *dp == NULL) return NULL;
    }
    return *dp;
}

/* Read ``clock``: CLOCK_MONOTONIC directly for time.perf_counter_ns (NULL: none set, the same),
 * else a call (a test's fake clock, or another clock). */
static inline long long read_clock(PyObject *clock, int *err) {
    if (clock == NULL || clock == perf_counter_ns) {
        row_real_clock = 1;
        return now_ns();
    }
    PyObject *r = PyObject_CallNoArgs(clock);
    if (r == NULL) {
        *err = 1;
        return 0;
    }
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) *err = 1;
    return v;
}

static long long session_clock(PyObject *d, int *err) { return read_clock(PyDict_GetItemWithError(d, s_clock), err); }

static int call_if_set(PyObject *d, PyObject *key, PyObject *arg) {
    PyObject *f = PyDict_GetItemWithError(d, key);
    if (f == NULL || f == Py_None) return PyErr_Occurred() ? -1 : 0;
    row_python = 1;
    PyObject *r = arg ? PyObject_CallOneArg(f, arg) : PyObject_CallNoArgs(f);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static void tstate_clear(void) {
    Py_CLEAR(tstate.session);
    Py_CLEAR(tstate.tls);
    Py_CLEAR(tstate.ops);
    Py_CLEAR(tstate.open_names);
    Py_CLEAR(tstate.cats);
    Py_CLEAR(tstate.thread);
}

/* This thread's ThreadState of session ``s`` (its threading.local ``tls``), cached; 0 on success,
 * -1 on error, 1 when the state is not what annotate.ThreadState holds (the caller falls back). */
static int thread_state(PyObject *s, PyObject *tls) {
    if (tstate.session == s && tstate.tls == tls) return 0;
    row_python = 1;
    PyObject *st = PyObject_CallMethodNoArgs(s, s_thread_state);
    if (st == NULL) return -1;
    PyObject *ops = PyObject_GetAttr(st, s_ops), *open_names = PyObject_GetAttr(st, s_open_names),
             *cats = PyObject_GetAttr(st, s_cats), *thread = PyObject_GetAttr(st, s_thread);
    Py_DECREF(st);
    if (!ops || !open_names || !cats || !thread || !PyList_CheckExact(ops) || !PyDict_CheckExact(open_names) ||
        !PyList_CheckExact(cats)) {
        Py_XDECREF(ops);
        Py_XDECREF(open_names);
        Py_XDECREF(cats);
        Py_XDECREF(thread);
        return PyErr_Occurred() ? -1 : 1;
    }
    tstate_clear();
    Py_INCREF(s);
    Py_INCREF(tls);
    tstate.session = s;
    tstate.tls = tls;
    tstate.ops = ops;
    tstate.open_names = open_names;
    tstate.cats = cats;
    tstate.thread = thread;
    return 0;
}

/* ---------------------------------------------------------------------------- EventBuffer */

/* The session's event queue: rows of 7 int64 (the events schema's columns, in order) in one
 * growing array, appended under the GIL (every caller holds it) and drained by the writer thread
 * in one copy. Against a deque of tuples: no Python objects kept per event (a tuple and two ints
 * that the job's own code would find in its caches' way), and the writer converts a batch with one
 * numpy view instead of a Python loop over tuples, while holding the GIL beside the job. */
#define WIDTH 8 /* the events schema's 7 columns, then ``cost`` (schema.EVENT_COST_COLUMN) */
typedef struct EventBuffer_ {
    PyObject_HEAD
    long long *rows;
    Py_ssize_t len, cap; /* in rows */
} EventBuffer;

static int eb_reserve(EventBuffer *b) {
    if (b->len < b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap * 2 : 4096;
    long long *rows = PyMem_RawRealloc(b->rows, (size_t)cap * WIDTH * sizeof(long long));
    if (rows == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->rows = rows;
    b->cap = cap;
    return 0;
}

static inline int eb_push(EventBuffer *b, long long ts, long long thread, long long kind, long long a, long long p,
                          long long c, long long flags) {
    if (eb_reserve(b) < 0) return -1;
    long long *r = b->rows + b->len * WIDTH;
    r[0] = ts;
    r[1] = thread;
    r[2] = kind;
    r[3] = a;
    r[4] = p;
    r[5] = c;
    r[6] = flags;
    r[7] = 0; /* not measured: the analyzer uses the calibrated cost */
    b->len += 1;
    return 0;
}

static PyObject *eb_append(EventBuffer *b, PyObject *row) {
    /* a 7-tuple (the events' columns, as Python code appends them; cost 0) or an 8-tuple */
    Py_ssize_t n = PyTuple_Check(row) ? PyTuple_GET_SIZE(row) : 0;
    if (n != WIDTH - 1 && n != WIDTH) {
        PyErr_SetString(PyExc_TypeError, "EventBuffer.append: a 7- or 8-tuple of ints");
        return NULL;
    }
    long long v[WIDTH] = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(row, i));
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
    }
    if (eb_push(b, v[0], v[1], v[2], v[3], v[4], v[5], v[6]) < 0) return NULL;
    b->rows[(b->len - 1) * WIDTH + 7] = v[7];
    Py_RETURN_NONE;
}

static PyObject *eb_drain(EventBuffer *b, PyObject *unused) {
    /* the rows so far as bytes (n * 8 int64, native order); the buffer keeps its memory */
    PyObject *out = PyBytes_FromStringAndSize((const char *)b->rows, b->len * WIDTH * (Py_ssize_t)sizeof(long long));
    if (out != NULL) b->len = 0;
    return out;
}

static PyObject *eb_drain_into(EventBuffer *b, PyObject *out) {
    /* copy as many rows as fit into ``out`` (a writable C-contiguous buffer, e.g. an (m, 7) int64
     * array kept by the writer), keep the rest for the next drain; returns how many were copied */
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t row_bytes = WIDTH * (Py_ssize_t)sizeof(long long);
    Py_ssize_t n = view.len / row_bytes;
    if (n > b->len) n = b->len;
    memcpy(view.buf, b->rows, (size_t)(n * row_bytes));
    if (n < b->len) memmove(b->rows, b->rows + n * WIDTH, (size_t)((b->len - n) * row_bytes));
    b->len -= n;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(n);
}

static PyObject *eb_reserve_ahead(EventBuffer *b, PyObject *arg) {
    /* grow to ``rows`` of capacity now, from the writer's thread, with every page of the new block
     * touched while the GIL is released: an append that grows the buffer itself takes its page
     * faults on the job's thread (about 100 ns per scope pair on a 2-core CPU machine, where a minor
     * fault costs 3-4 us), so the writer keeps twice the last flush interval's rows ready. The
     * rows so far are copied under the GIL (the appenders hold it). True if it grew. */
    Py_ssize_t want = PyLong_AsSsize_t(arg);
    if (want == -1 && PyErr_Occurred()) return NULL;
    if (want <= b->cap) Py_RETURN_FALSE;
    size_t bytes = (size_t)want * WIDTH * sizeof(long long);
    long long *fresh;
    Py_BEGIN_ALLOW_THREADS
    fresh = PyMem_RawMalloc(bytes);
    if (fresh != NULL) {
        /* one volatile write per page: a memset of zeros after malloc may be turned into calloc,
         * whose pages stay untouched */
        volatile char *page = (volatile char *)fresh;
        for (size_t i = 0; i < bytes; i += 4096) page[i] = 0;
    }
    Py_END_ALLOW_THREADS
    if (fresh == NULL) return PyErr_NoMemory();
    if (want <= b->cap || want < b->len) { /* the appenders grew it meanwhile */
        PyMem_RawFree(fresh);
        Py_RETURN_FALSE;
    }
    if (b->len) memcpy(fresh, b->rows, (size_t)b->len * WIDTH * sizeof(long long));
    PyMem_RawFree(b->rows);
    b->rows = fresh;
    b->cap = want;
    Py_RETURN_TRUE;
}

static PyObject *eb_capacity(EventBuffer *b, PyObject *unused) { return PyLong_FromSsize_t(b->cap); }

static PyObject *eb_release(EventBuffer *b, PyObject *unused) {
    /* the writer is closed: give the memory back (rows not drained are dropped) */
    PyMem_RawFree(b->rows);
    b->rows = NULL;
    b->len = b->cap = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t eb_length(EventBuffer *b) { return b->len; }

static void eb_dealloc(EventBuffer *b) {
    PyMem_RawFree(b->rows);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyMethodDef eb_methods[] = {
    {"append", (PyCFunction)eb_append, METH_O, "append one event row (a 7-tuple of ints)"},
    {"drain", (PyCFunction)eb_drain, METH_NOARGS, "take every row so far, as bytes of n*7 int64"},
    {"drain_into", (PyCFunction)eb_drain_into, METH_O, "copy rows into a writable buffer; how many"},
    {"reserve_ahead", (PyCFunction)eb_reserve_ahead, METH_O, "grow to n rows, pages touched off the GIL"},
    {"capacity", (PyCFunction)eb_capacity, METH_NOARGS, "rows the buffer holds before it must grow"},
    {"release", (PyCFunction)eb_release, METH_NOARGS, "free the buffer's memory (after the last drain)"},
    {NULL, NULL, 0, NULL},
};
static PySequenceMethods eb_as_sequence = {.sq_length = (lenfunc)eb_length};
static PyTypeObject EventBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlscope_scope_native.EventBuffer",
    .tp_basicsize = sizeof(EventBuffer),
    .tp_dealloc = (destructor)eb_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "rlscope's event rows, appended under the GIL, drained by the writer in one copy",
    .tp_methods = eb_methods,
    .tp_as_sequence = &eb_as_sequence,
    .tp_new = PyType_GenericNew,
};


/* ---------------------------------------------------------------------- self-timed boundaries
 *
 * Each boundary measures what it costs on the job's thread and writes it into its own event row
 * (the ``cost`` column): the time from entering the C method to the event's timestamp (``pre``,
 * paid before it) and from the timestamp to the method's return (``post``, after it), packed as
 * pre | post << 32. A boundary in a real loop costs several times its tight-loop calibration (the
 * job's own work between two boundaries evicts what a boundary touches: 0.45 us per pair beside a
 * little Python, 1.0 us beside a numpy pass over 1 MB, on a 2-core CPU machine), and most of that is
 * inside these methods, so the analyzer removes what each boundary measured, plus the calibrated
 * dispatch around the methods (docs/overhead.md). Two more clock reads per boundary pay for it.
 *
 * Not measured (cost 0, the calibrated cost applies): a boundary that ran Python code of rlscope's
 * on the way (a window switch, a tick, NVTX ranges, a forced close: their own time is marked or
 * calibrated apart), one that wrote more or less than one row, and a session on another clock. */

static inline void boundary_start(void) {
    row_buf = NULL;
    row_idx = -1;
    row_count = 0;
    row_python = 0;
    row_real_clock = 0;
}

static inline void boundary_stamp(long long t0) {
    if (row_buf == NULL || row_count != 1 || row_python || !row_real_clock) return;
    long long t1 = now_ns();
    EventBuffer *b = row_buf;
    if (row_idx >= b->len) return; /* drained meanwhile */
    long long *r = b->rows + row_idx * WIDTH;
    if (r[0] != row_ts) return; /* another row now: drained and refilled */
    long long pre = row_ts - t0, post = t1 - row_ts, cap = 0x7fffffffLL;
    if (pre < 0 || post < 0) return;
    r[7] = (pre < cap ? pre : cap) | ((post < cap ? post : cap) << 32);
}

/* session.events.append((ts, thread, kind, a, b, c, flags)); steals nothing. */
static int append_event(PyObject *d, long long ts, PyObject *thread, long kind, PyObject *a, PyObject *b,
                        PyObject *c, long flags) {
    PyObject *events = PyDict_GetItemWithError(d, s_events);
    if (events == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "rlscope: session has no events");
        return -1;
    }
    if (Py_IS_TYPE(events, &EventBufferType)) {
        long long v[4];
        PyObject *objs[4] = {thread, a, b, c};
        for (int i = 0; i < 4; i++) {
            v[i] = PyLong_AsLongLong(objs[i]);
            if (v[i] == -1 && PyErr_Occurred()) return -1;
        }
        int rc = eb_push((EventBuffer *)events, ts, v[0], kind, v[1], v[2], v[3], flags);
        if (rc == 0) {
            row_buf = (EventBuffer *)events;
            row_idx = row_buf->len - 1;
            row_ts = ts;
            row_count += 1;
        }
        return rc;
    }
    PyObject *t = PyTuple_New(7);
    if (t == NULL) return -1;
    PyObject *tsv = PyLong_FromLongLong(ts);
    if (tsv == NULL) {
        Py_DECREF(t);
        return -1;
    }
    PyTuple_SET_ITEM(t, 0, tsv);
    Py_INCREF(thread);
    PyTuple_SET_ITEM(t, 1, thread);
    PyTuple_SET_ITEM(t, 2, PyLong_FromLong(kind)); /* small ints: cached, cannot fail */
    Py_INCREF(a);
    PyTuple_SET_ITEM(t, 3, a);
    Py_INCREF(b);
    PyTuple_SET_ITEM(t, 4, b);
    Py_INCREF(c);
    PyTuple_SET_ITEM(t, 5, c);
    PyTuple_SET_ITEM(t, 6, PyLong_FromLong(flags));
    /* ints only: no cycle can run through it, so the collector need not traverse it (CPython
     * untracks such tuples itself, but only when a collection first visits them) */
    PyObject_GC_UnTrack(t);
    PyObject *r;
    if (PyList_CheckExact(events)) {
        int rc = PyList_Append(events, t);
        Py_DECREF(t);
        return rc;
    }
    r = PyObject_CallMethodOneArg(events, s_append, t);
    Py_DECREF(t);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *minus_one, *cat_python, *op_begin; /* -1, categories.PYTHON, OP_BEGIN */
/* -------------------------------------------------------------------------------- scopes */

/* The main thread's open top-level operation's start (for Session.long_op_done); only the main
 * thread of the active session writes it, under the GIL. */
static long long top_begin_ns;

static int is_main_thread(PyObject *d) {
    PyObject *main_tid = PyDict_GetItemWithError(d, s_main_tid);
    if (main_tid == NULL) return PyErr_Occurred() ? -1 : 0;
    return PyObject_RichCompareBool(main_tid, tstate.thread, Py_EQ);
}

/* Whether ``nid`` is in the session's long_ops (1, the dict in *out), not (0), or an error (-1). */
static int long_op_known(PyObject *d, PyObject *nid, PyObject **out) {
    PyObject *long_ops = PyDict_GetItemWithError(d, s_long_ops);
    if (long_ops == NULL || !PyDict_CheckExact(long_ops) || PyDict_GET_SIZE(long_ops) == 0)
        return PyErr_Occurred() ? -1 : 0;
    *out = long_ops;
    return PyDict_Contains(long_ops, nid);
}

/* A top-level entry on the main thread: a long operation's call may switch the window first. */
static int long_op_entry(PyObject *s, PyObject *d, PyObject *nid) {
    PyObject *long_ops;
    int known = long_op_known(d, nid, &long_ops);
    if (known <= 0) return known;
    row_python = 1;
    PyObject *r = PyObject_CallMethodOneArg(s, s_long_op_entry, nid);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* A top-level exit: on the main thread, a call that lasted long_op_ns or more is remembered; a
 * short call of an operation remembered as long is forgotten (annotate.py's __exit__). */
static int long_op_done(PyObject *s, PyObject *d, PyObject *nid, long long ts) {
    PyObject *threshold = PyDict_GetItemWithError(d, s_long_op_ns);
    if (threshold == NULL) return PyErr_Occurred() ? -1 : 0;
    long long t = PyLong_AsLongLong(threshold);
    if (t == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* beyond int64: no windows */
        return 0;
    }
    int main = is_main_thread(d);
    if (main <= 0) return main;
    if (ts - top_begin_ns < t) {
        PyObject *long_ops;
        int known = long_op_known(d, nid, &long_ops);
        return known > 0 ? PyDict_DelItem(long_ops, nid) : known;
    }
    row_python = 1;
    PyObject *r = PyObject_CallMethodOneArg(s, s_long_op_done, nid);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* annotate.py's __exit__ (``fn``) called as the method it is: self, then the exception triple */
static PyObject *python_exit(PyObject *fn, PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *full[4] = {self, Py_None, Py_None, Py_None};
    Py_ssize_t n = nargs < 3 ? nargs : 3;
    for (Py_ssize_t i = 0; i < n; i++) full[i + 1] = args[i];
    return PyObject_Vectorcall(fn, full, 1 + n, NULL);
}

static PyObject *scope_enter_impl(PyObject *self, PyObject *s) {
    PyObject *d = active_dict(s);
    if (d == NULL) {
        if (PyErr_Occurred()) return NULL;
        return PyObject_CallOneArg(py_scope_enter, self);
    }
    PyObject *begin = slot(self, off_begin), *nid = slot(self, off_name_id);
    PyObject *tls = PyDict_GetItemWithError(d, s_tls);
    if (begin != op_begin || nid == NULL || tls == NULL) {
        if (PyErr_Occurred()) return NULL;
        return PyObject_CallOneArg(py_scope_enter, self); /* a phase, or not a Session-like object */
    }
    int rc = thread_state(s, tls); /* before the clock: a first call's set-up is not the operation's */
    if (rc < 0) return NULL;
    if (rc > 0) return PyObject_CallOneArg(py_scope_enter, self);
    int top = PyList_GET_SIZE(tstate.ops) == 0 ? is_main_thread(d) : 0;
    if (top < 0) return NULL;
    if (top && long_op_entry(s, d, nid) < 0) return NULL; /* may switch first (Session.long_op_entry) */
    int err = 0;
    long long ts = session_clock(d, &err);
    if (err) return NULL;
    if (top) top_begin_ns = ts;
    if (call_if_set(d, s_nvtx_pop, NULL) < 0) return NULL;
    PyObject *open_names = tstate.open_names, *ops = tstate.ops;
    PyObject *nobj = PyDict_GetItemWithError(open_names, nid);
    long n = 0;
    if (nobj == NULL) {
        if (PyErr_Occurred()) return NULL;
    } else {
        n = PyLong_AsLong(nobj);
    }
    PyObject *n1 = PyLong_FromLong(n + 1);
    if (n1 == NULL) return NULL;
    rc = PyDict_SetItem(open_names, nid, n1);
    Py_DECREF(n1);
    if (rc < 0) return NULL;
    PyObject *ids = PyDict_GetItemWithError(d, s_ids);
    if (ids == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "rlscope: session has no ids");
        return NULL;
    }
    PyObject *inst = PyIter_Next(ids);
    if (inst == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "rlscope: session ids exhausted");
        return NULL;
    }
    Py_ssize_t depth = PyList_GET_SIZE(ops);
    PyObject *parent = depth ? PyTuple_GET_ITEM(PyList_GET_ITEM(ops, depth - 1), 0) : minus_one;
    if (append_event(d, ts, tstate.thread, OP_BEGIN, inst, parent, nid, n ? FLAG_RECURSIVE : 0) < 0) {
        Py_DECREF(inst);
        return NULL;
    }
    PyObject *entry = PyTuple_Pack(2, inst, nid);
    Py_DECREF(inst);
    if (entry == NULL) return NULL;
    PyObject_GC_UnTrack(entry);
    rc = PyList_Append(ops, entry);
    Py_DECREF(entry);
    if (rc < 0) return NULL;
    PyObject *name = slot(self, off_name);
    if (name != NULL && call_if_set(d, s_nvtx_push, name) < 0) return NULL;
    return Py_NewRef(self);
}

static PyObject *scope_exit_impl(PyObject *self, PyObject *s, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *d = active_dict(s);
    if (d == NULL) {
        if (PyErr_Occurred()) return NULL;
        goto fallback;
    }
    PyObject *begin = slot(self, off_begin), *nid = slot(self, off_name_id);
    PyObject *tls = PyDict_GetItemWithError(d, s_tls);
    if (begin != op_begin || nid == NULL || tls == NULL) {
        if (PyErr_Occurred()) return NULL;
        goto fallback;
    }
    int err = 0;
    long long ts = session_clock(d, &err);
    if (err) return NULL;
    int rc = thread_state(s, tls); /* a cache hit: two compares */
    if (rc < 0) return NULL;
    if (rc > 0) goto fallback; /* not reached once the thread's state was cached at its enter */
    if (call_if_set(d, s_nvtx_pop, NULL) < 0) return NULL;
    PyObject *ops = tstate.ops, *open_names = tstate.open_names;
    Py_ssize_t depth = PyList_GET_SIZE(ops);
    PyObject *top = depth ? PyList_GET_ITEM(ops, depth - 1) : NULL;
    int innermost = top != NULL && PyTuple_GET_ITEM(top, 1) == nid;
    if (!innermost && top != NULL) {
        innermost = PyObject_RichCompareBool(PyTuple_GET_ITEM(top, 1), nid, Py_EQ);
        if (innermost < 0) return NULL;
    }
    if (innermost) {
        PyObject *inst = Py_NewRef(PyTuple_GET_ITEM(top, 0));
        if (PyList_SetSlice(ops, depth - 1, depth, NULL) < 0) {
            Py_DECREF(inst);
            return NULL;
        }
        PyObject *nobj = PyDict_GetItemWithError(open_names, nid);
        long n = nobj ? PyLong_AsLong(nobj) - 1 : 0;
        if (n > 0) {
            PyObject *nn = PyLong_FromLong(n);
            rc = nn ? PyDict_SetItem(open_names, nid, nn) : -1;
            Py_XDECREF(nn);
        } else {
            rc = PyDict_DelItem(open_names, nid);
        }
        if (rc < 0) {
            Py_DECREF(inst);
            return NULL;
        }
        depth -= 1;
        PyObject *parent = depth ? PyTuple_GET_ITEM(PyList_GET_ITEM(ops, depth - 1), 0) : minus_one;
        rc = append_event(d, ts, tstate.thread, OP_END, inst, parent, nid, 0);
        Py_DECREF(inst);
        if (rc < 0) return NULL;
        if (depth == 0 && long_op_done(s, d, nid, ts) < 0) return NULL; /* before a switch due now */
    } else {
        row_python = 1;
        PyObject *st = PyObject_CallMethodNoArgs(s, s_thread_state);
        if (st == NULL) return NULL;
        PyObject *tsv = PyLong_FromLongLong(ts), *kind = PyLong_FromLong(OP_END);
        PyObject *r = tsv ? PyObject_CallFunctionObjArgs(py_close_stack, s, st, ops, nid, kind, tsv, NULL) : NULL;
        Py_DECREF(st);
        Py_XDECREF(tsv);
        Py_DECREF(kind);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
    PyObject *due = PyDict_GetItemWithError(d, s_window_due);
    if (due != NULL && ts >= PyLong_AsLongLong(due)) {
        int same = is_main_thread(d);
        if (same < 0) return NULL;
        if (same) {
            row_python = 1;
            PyObject *r = PyObject_CallMethodNoArgs(s, s_switch_window);
            if (r == NULL) return NULL;
            Py_DECREF(r);
        }
    }
    if (PyErr_Occurred()) return NULL;
    due = PyDict_GetItemWithError(d, s_tick_due);
    if (due != NULL && ts >= PyLong_AsLongLong(due)) {
        PyObject *tsv = PyLong_FromLongLong(ts);
        row_python = 1;
        PyObject *r = tsv ? PyObject_CallMethodOneArg(s, s_run_tick, tsv) : NULL;
        Py_XDECREF(tsv);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
fallback:
    return python_exit(py_scope_exit, self, args, nargs);
}

/* ---------------------------------------------------------------------------- categories */

static PyObject *cat_enter_impl(PyObject *self, PyObject *s) {
    PyObject *d = active_dict(s);
    if (d == NULL) {
        if (PyErr_Occurred()) return NULL;
        return PyObject_CallOneArg(py_cat_enter, self);
    }
    PyObject *code = slot(self, off_code);
    PyObject *tls = PyDict_GetItemWithError(d, s_tls);
    if (code == NULL || tls == NULL) {
        if (PyErr_Occurred()) return NULL;
        return PyObject_CallOneArg(py_cat_enter, self);
    }
    int rc = thread_state(s, tls);
    if (rc < 0) return NULL;
    if (rc > 0) return PyObject_CallOneArg(py_cat_enter, self);
    int err = 0;
    long long ts = session_clock(d, &err);
    if (err) return NULL;
    PyObject *cats = tstate.cats;
    Py_ssize_t n = PyList_GET_SIZE(cats);
    PyObject *parent = n ? PyList_GET_ITEM(cats, n - 1) : cat_python;
    if (append_event(d, ts, tstate.thread, CAT_BEGIN, code, parent, minus_one, 0) < 0) return NULL;
    if (PyList_Append(cats, code) < 0) return NULL;
    return Py_NewRef(self);
}

static PyObject *cat_exit_impl(PyObject *self, PyObject *s, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *d = active_dict(s);
    if (d == NULL) {
        if (PyErr_Occurred()) return NULL;
        goto fallback;
    }
    PyObject *code = slot(self, off_code);
    PyObject *tls = PyDict_GetItemWithError(d, s_tls);
    if (code == NULL || tls == NULL) {
        if (PyErr_Occurred()) return NULL;
        goto fallback;
    }
    int err = 0;
    long long ts = session_clock(d, &err);
    if (err) return NULL;
    int rc = thread_state(s, tls);
    if (rc < 0) return NULL;
    if (rc > 0) goto fallback;
    PyObject *cats = tstate.cats;
    Py_ssize_t n = PyList_GET_SIZE(cats);
    int found = PySequence_Contains(cats, code);
    if (found < 0) return NULL;
    if (!found) Py_RETURN_NONE;
    while (n > 0) {
        PyObject *c = Py_NewRef(PyList_GET_ITEM(cats, n - 1));
        if (PyList_SetSlice(cats, n - 1, n, NULL) < 0) {
            Py_DECREF(c);
            return NULL;
        }
        n -= 1;
        PyObject *parent = n ? PyList_GET_ITEM(cats, n - 1) : cat_python;
        int same = PyObject_RichCompareBool(c, code, Py_EQ);
        if (same < 0 || append_event(d, ts, tstate.thread, CAT_END, c, parent, minus_one,
                                     same ? 0 : FLAG_FORCED_CLOSE) < 0) {
            Py_DECREF(c);
            return NULL;
        }
        Py_DECREF(c);
        if (same) break;
    }
    Py_RETURN_NONE;
fallback:
    return python_exit(py_cat_exit, self, args, nargs);
}

/* ------------------------------------------------------------------ the lean session path
 *
 * The full path above keeps a session's per-thread state where annotate.py keeps it: Python lists
 * and dictionaries (ThreadState), instance ids from an itertools.count, due times and thresholds
 * as the session's attributes. Each boundary touches a dozen of those objects, and the job's code
 * after it pays to bring its own data back: ~1.5 us a scope pair beyond what the boundary measures
 * of itself in the eager simulator's loop, ~2% of that loop after correction, no single touch
 * accounting for it (each removed in turn),
 * while validate's timer path (one clock read and one row) costs the loop nothing measurable.
 *
 * So a session that starts with the native methods binds itself here (Session.start, bind()): its
 * operation and category stacks live in a C struct per thread (ints), its instance ids in a C
 * counter (the session's ``ids`` becomes an Ids iterator over the same counter, for phases), its
 * due times and long-operation threshold in C globals that the session's setters keep current
 * (set_due). A boundary then reads the clock, compares with its thread's stack, writes one row and
 * checks two due times. Phases, window switches, ticks, long operations and NVTX ranges still call
 * the session's Python code, as on the full path. The rows are the full path's, bit for bit
 * (tests/test_scope_native.py compares the three paths). RLSCOPE_LEAN_SCOPES=0: no binding. */
typedef struct LeanThread {
    struct LeanThread *next; /* every thread's state, for the closes at a session's stop */
    long long gen, tid;      /* the lean session it belongs to; threading.get_native_id() */
    int is_main;
    volatile int gone; /* its thread ended (lean_thread_gone): the struct may serve another */
    Py_ssize_t depth, cap, cdepth, ccap;
    long long *inst, *nid; /* open operations: instance and name ids, innermost last */
    long long *cat;        /* open categories, innermost last */
} LeanThread;

static struct {
    PyObject *session, *clock, *long_ops, *nvtx_push, *nvtx_pop; /* strong references */
    EventBuffer *buf;
    long long gen, next_id, main_tid, window_due, tick_due, long_op_ns, top_begin;
} B;
static LeanThread *lean_threads;
static _Thread_local LeanThread *lean_me;
/* A thread's end marks its struct free (a pthread key's destructor: C11 thread-locals have none),
 * so a program that starts threads without end keeps as many structs as it has threads at once,
 * not one per thread it ever ran. Runs without the GIL: it only sets the flag. */
static pthread_key_t lean_key;
static int lean_key_ok;
static void lean_thread_gone(void *p) { ((LeanThread *)p)->gone = 1; }

/* A struct whose thread ended and that holds nothing the lean session's stop must close. */
static LeanThread *lean_reusable(void) {
    for (LeanThread *t = lean_threads; t != NULL; t = t->next)
        if (t->gone && (t->gen != B.gen || (t->depth == 0 && t->cdepth == 0))) return t;
    return NULL;
}

static inline long long lean_clock(int *err) { return read_clock(B.clock, err); }

/* This thread's state under the lean session; its first boundary registers the thread with the
 * session (Session.thread_state: the GPU collectors map CUPTI's thread ids through it). */
static LeanThread *lean_thread(void) {
    LeanThread *t = lean_me;
    if (t != NULL && t->gen == B.gen) return t;
    if (t == NULL) {
        t = lean_reusable();
        if (t != NULL) {
            t->gone = 0;
            t->gen = B.gen - 1; /* set up below, as a new thread's */
        } else {
            t = PyMem_RawCalloc(1, sizeof(LeanThread));
            if (t == NULL) {
                PyErr_NoMemory();
                return NULL;
            }
            t->next = lean_threads;
            lean_threads = t;
        }
        lean_me = t;
        if (lean_key_ok) pthread_setspecific(lean_key, t);
    }
    row_python = 1;
    PyObject *st = PyObject_CallMethodNoArgs(B.session, s_thread_state);
    if (st == NULL) return NULL;
    PyObject *thread = PyObject_GetAttr(st, s_thread);
    Py_DECREF(st);
    if (thread == NULL) return NULL;
    long long tid = PyLong_AsLongLong(thread);
    Py_DECREF(thread);
    if (tid == -1 && PyErr_Occurred()) return NULL;
    t->gen = B.gen;
    t->tid = tid;
    t->is_main = tid == B.main_tid;
    t->depth = t->cdepth = 0;
    return t;
}

static int lean_grow(long long **a, long long **b, Py_ssize_t *cap) {
    Py_ssize_t n = *cap ? *cap * 2 : 16;
    long long *na = PyMem_RawRealloc(*a, (size_t)n * sizeof(long long));
    if (na == NULL) goto oom;
    *a = na;
    if (b != NULL) {
        long long *nb = PyMem_RawRealloc(*b, (size_t)n * sizeof(long long));
        if (nb == NULL) goto oom;
        *b = nb;
    }
    *cap = n;
    return 0;
oom:
    PyErr_NoMemory();
    return -1;
}

static inline int lean_row(long long ts, long long tid, long kind, long long a, long long p, long long c,
                           long flags) {
    if (eb_push(B.buf, ts, tid, kind, a, p, c, flags) < 0) return -1;
    row_buf = B.buf;
    row_idx = B.buf->len - 1;
    row_ts = ts;
    row_count += 1;
    return 0;
}

static int lean_call(PyObject *fn, PyObject *arg) {
    row_python = 1;
    PyObject *r = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static int lean_method(PyObject *name, PyObject *arg) {
    row_python = 1;
    PyObject *r = arg ? PyObject_CallMethodOneArg(B.session, name, arg) : PyObject_CallMethodNoArgs(B.session, name);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* Close the thread's open operations down to stack position ``pos``, innermost first, at ``ts``:
 * the one at ``pos`` with ``flags``, those left open inside it flagged as forced closes. */
static int lean_pop_ops(LeanThread *t, Py_ssize_t pos, long long ts, long flags) {
    while (t->depth > pos) {
        t->depth -= 1;
        long long parent = t->depth ? t->inst[t->depth - 1] : -1;
        long f = t->depth == pos ? flags : FLAG_FORCED_CLOSE;
        if (lean_row(ts, t->tid, OP_END, t->inst[t->depth], parent, t->nid[t->depth], f) < 0) return -1;
    }
    return 0;
}

/* The same for the thread's open categories. */
static int lean_pop_cats(LeanThread *t, Py_ssize_t pos, long long ts, long flags) {
    while (t->cdepth > pos) {
        long long c = t->cat[--t->cdepth];
        long long parent = t->cdepth ? t->cat[t->cdepth - 1] : CAT_PYTHON;
        if (lean_row(ts, t->tid, CAT_END, c, parent, -1, t->cdepth == pos ? flags : FLAG_FORCED_CLOSE) < 0) return -1;
    }
    return 0;
}

/* Close the innermost open operation named ``nid`` and, flagged, any left open inside it
 * (annotate._close_stack); nothing when none is open (opened before the session). */
static int lean_close_ops(LeanThread *t, long long nid, long long ts) {
    Py_ssize_t pos = t->depth - 1;
    while (pos >= 0 && t->nid[pos] != nid) pos--;
    return pos < 0 ? 0 : lean_pop_ops(t, pos, ts, 0);
}

static PyObject *lean_scope_enter(PyObject *self) {
    PyObject *begin = slot(self, off_begin), *nido = slot(self, off_name_id);
    if (begin != op_begin || nido == NULL) return PyObject_CallOneArg(py_scope_enter, self); /* a phase */
    long long nid = PyLong_AsLongLong(nido);
    if (nid == -1 && PyErr_Occurred()) return NULL;
    LeanThread *t = lean_thread(); /* before the clock: a first call's set-up is not the operation's */
    if (t == NULL) return NULL;
    int top = t->depth == 0 && t->is_main;
    if (top && PyDict_GET_SIZE(B.long_ops) > 0) {
        int known = PyDict_Contains(B.long_ops, nido);
        if (known < 0 || (known && lean_method(s_long_op_entry, nido) < 0)) return NULL; /* may switch */
    }
    int err = 0;
    long long ts = lean_clock(&err);
    if (err) return NULL;
    if (top) B.top_begin = ts;
    if (B.nvtx_pop != NULL && lean_call(B.nvtx_pop, NULL) < 0) return NULL;
    long flags = 0;
    for (Py_ssize_t i = 0; i < t->depth; i++) {
        if (t->nid[i] == nid) {
            flags = FLAG_RECURSIVE;
            break;
        }
    }
    if (t->depth == t->cap && lean_grow(&t->inst, &t->nid, &t->cap) < 0) return NULL;
    long long inst = B.next_id++, parent = t->depth ? t->inst[t->depth - 1] : -1;
    if (lean_row(ts, t->tid, OP_BEGIN, inst, parent, nid, flags) < 0) return NULL;
    t->inst[t->depth] = inst;
    t->nid[t->depth] = nid;
    t->depth += 1;
    PyObject *name = slot(self, off_name);
    if (B.nvtx_push != NULL && name != NULL && lean_call(B.nvtx_push, name) < 0) return NULL;
    return Py_NewRef(self);
}

/* The main thread's top-level operation ``nido`` ended at ``ts``: a long one is done with (its calls
 * alternate window kinds, Session.long_op_done); a short one no longer alternates. Before a switch
 * due now, so that the kind the call ran in is the one it is counted in. */
static int lean_top_ended(PyObject *nido, long long ts) {
    if (ts - B.top_begin >= B.long_op_ns) return lean_method(s_long_op_done, nido);
    if (PyDict_GET_SIZE(B.long_ops) == 0) return 0;
    int known = PyDict_Contains(B.long_ops, nido);
    return (known < 0 || (known && PyDict_DelItem(B.long_ops, nido) < 0)) ? -1 : 0;
}

static PyObject *lean_scope_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *begin = slot(self, off_begin), *nido = slot(self, off_name_id);
    if (begin != op_begin || nido == NULL) return python_exit(py_scope_exit, self, args, nargs);
    long long nid = PyLong_AsLongLong(nido);
    if (nid == -1 && PyErr_Occurred()) return NULL;
    scope_exits++;
    int err = 0;
    long long ts = lean_clock(&err);
    if (err) return NULL;
    LeanThread *t = lean_thread();
    if (t == NULL) return NULL;
    if (B.nvtx_pop != NULL && lean_call(B.nvtx_pop, NULL) < 0) return NULL;
    if (t->depth && t->nid[t->depth - 1] == nid) { /* the common case: the innermost scope */
        if (lean_pop_ops(t, t->depth - 1, ts, 0) < 0) return NULL;
        if (t->depth == 0 && t->is_main && lean_top_ended(nido, ts) < 0) return NULL; /* before a switch */
    } else if (lean_close_ops(t, nid, ts) < 0) {
        return NULL;
    }
    if (ts >= B.window_due && t->is_main && lean_method(s_switch_window, NULL) < 0) return NULL;
    if (ts >= B.tick_due) {
        PyObject *tsv = PyLong_FromLongLong(ts);
        int rc = tsv ? lean_method(s_run_tick, tsv) : -1;
        Py_XDECREF(tsv);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* A category boundary on the lean path: ``end`` 0 opens ``code``; 1 closes it and, flagged, any
 * left open inside it (annotate.category_exit), or nothing when it is not open. */
static int lean_cat(long long code, int end) {
    int err = 0;
    long long ts = lean_clock(&err);
    if (err) return -1;
    LeanThread *t = lean_thread();
    if (t == NULL) return -1;
    if (!end) {
        if (t->cdepth == t->ccap && lean_grow(&t->cat, NULL, &t->ccap) < 0) return -1;
        long long parent = t->cdepth ? t->cat[t->cdepth - 1] : CAT_PYTHON;
        if (lean_row(ts, t->tid, CAT_BEGIN, code, parent, -1, 0) < 0) return -1;
        t->cat[t->cdepth++] = code;
        return 0;
    }
    Py_ssize_t pos = t->cdepth - 1;
    while (pos >= 0 && t->cat[pos] != code) pos--;
    return pos < 0 ? 0 : lean_pop_cats(t, pos, ts, 0);
}

static PyObject *lean_cat_method(PyObject *self, int end) {
    PyObject *code = slot(self, off_code);
    long long c = code ? PyLong_AsLongLong(code) : -1;
    if (c == -1 && PyErr_Occurred()) return NULL;
    if (lean_cat(c, end) < 0) return NULL;
    return Py_NewRef(end ? Py_None : self);
}

/* Instance ids from the lean session's counter, for Python code (phases): ``next(session.ids)``. */
typedef struct {
    PyObject_HEAD
} Ids;
static PyObject *ids_next(PyObject *self) {
    if (B.session == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "rlscope: no session bound to the native scopes");
        return NULL;
    }
    return PyLong_FromLongLong(B.next_id++);
}
static PyTypeObject IdsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlscope_scope_native.Ids",
    .tp_basicsize = sizeof(Ids),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = ids_next,
    .tp_new = PyType_GenericNew,
};

/* bind(session, buffer, clock, long_ops, main_tid, window_due, tick_due, long_op_ns, next_id) */
static PyObject *bind(PyObject *mod, PyObject *args) {
    PyObject *s, *buf, *clock, *long_ops;
    long long main_tid, window_due, tick_due, long_op_ns, next_id;
    if (!PyArg_ParseTuple(args, "OOOO!LLLLL", &s, &buf, &clock, &PyDict_Type, &long_ops, &main_tid, &window_due,
                          &tick_due, &long_op_ns, &next_id))
        return NULL;
    if (!Py_IS_TYPE(buf, &EventBufferType)) {
        PyErr_SetString(PyExc_TypeError, "bind: the buffer must be an EventBuffer");
        return NULL;
    }
    Py_XSETREF(B.session, Py_NewRef(s));
    Py_XSETREF(B.buf, (EventBuffer *)Py_NewRef(buf));
    Py_XSETREF(B.clock, Py_NewRef(clock));
    Py_XSETREF(B.long_ops, Py_NewRef(long_ops));
    Py_CLEAR(B.nvtx_push);
    Py_CLEAR(B.nvtx_pop);
    B.gen += 1; /* every thread's state starts empty under this session */
    B.main_tid = main_tid;
    B.window_due = window_due;
    B.tick_due = tick_due;
    B.long_op_ns = long_op_ns;
    B.next_id = next_id;
    B.top_begin = 0;
    return PyObject_CallNoArgs((PyObject *)&IdsType);
}

static PyObject *unbind(PyObject *mod, PyObject *unused) {
    Py_CLEAR(B.session);
    Py_CLEAR(B.buf);
    Py_CLEAR(B.clock);
    Py_CLEAR(B.long_ops);
    Py_CLEAR(B.nvtx_push);
    Py_CLEAR(B.nvtx_pop);
    B.gen += 1;
    Py_RETURN_NONE;
}

static PyObject *set_due(PyObject *mod, PyObject *args) {
    if (!PyArg_ParseTuple(args, "LLL", &B.window_due, &B.tick_due, &B.long_op_ns)) return NULL;
    Py_RETURN_NONE;
}

static PyObject *set_nvtx(PyObject *mod, PyObject *args) {
    PyObject *push, *pop;
    if (!PyArg_ParseTuple(args, "OO", &push, &pop)) return NULL;
    Py_XSETREF(B.nvtx_push, push == Py_None ? NULL : Py_NewRef(push));
    Py_XSETREF(B.nvtx_pop, pop == Py_None ? NULL : Py_NewRef(pop));
    Py_RETURN_NONE;
}

/* close_open(thread, ts, categories): at the lean session's stop, what ``thread`` left open,
 * closed at ``ts`` and flagged (Session._stop): its operations, or its categories. */
static PyObject *close_open(PyObject *mod, PyObject *args) {
    long long tid, ts;
    int cats;
    if (!PyArg_ParseTuple(args, "LLp", &tid, &ts, &cats)) return NULL;
    if (B.session == NULL) Py_RETURN_NONE;
    for (LeanThread *t = lean_threads; t != NULL; t = t->next) {
        if (t->gen != B.gen || t->tid != tid) continue;
        if ((cats ? lean_pop_cats(t, 0, ts, FLAG_FORCED_CLOSE) : lean_pop_ops(t, 0, ts, FLAG_FORCED_CLOSE)) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* open_ops(thread): how many operations ``thread`` has open under the lean session (0: none, or no
 * session bound); the session's window timer asks it of the main thread (Session.switch_on_schedule). */
static PyObject *open_ops(PyObject *mod, PyObject *arg) {
    long long tid = PyLong_AsLongLong(arg);
    if (tid == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t depth = 0;
    if (B.session != NULL)
        for (LeanThread *t = lean_threads; t != NULL; t = t->next)
            if (t->gen == B.gen && t->tid == tid) depth += t->depth;
    return PyLong_FromSsize_t(depth);
}

/* category_enter(code) / category_exit(code): annotate.category_enter/exit under the lean session
 * (collectors, the session's own PROFILER marks); not self-timed, as their Python versions. */
static PyObject *category_call(PyObject *arg, int end) {
    long long c = PyLong_AsLongLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    if (B.session == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "rlscope: no session bound to the native scopes");
        return NULL;
    }
    /* called from Python, maybe inside a boundary (a window switch's PROFILER mark): its row
     * bookkeeping is the outer boundary's, which ran Python and so stamps nothing */
    struct EventBuffer_ *buf = row_buf;
    Py_ssize_t idx = row_idx;
    long long ts = row_ts;
    int count = row_count, real = row_real_clock;
    int rc = lean_cat(c, end);
    row_buf = buf, row_idx = idx, row_ts = ts, row_count = count, row_real_clock = real, row_python = 1;
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *category_enter(PyObject *mod, PyObject *arg) { return category_call(arg, 0); }
static PyObject *category_exit(PyObject *mod, PyObject *arg) { return category_call(arg, 1); }

/* ------------------------------------------------------------------ validate's timer mode */

/* `rlscope validate`'s timer runs (rlscope/overhead/validate/runner.py, TimerSession) take the per-operation truth
 * through these methods. There a boundary reads the clock and writes one row (thread, kind, name or
 * category), stamped with its own cost like any measured row, and nothing else: no instance ids,
 * stacks, open counts or window checks. The session's full path costs the job's code around it
 * ~2-3 us a pair in a torch loop, 5x its tight-loop cost, spread over its dozen dictionary and list
 * touches; a truth taken through it read +0.9% high. The
 * fold (TimerAggregate.feed) matches ends to begins by name, per thread. */
static PyObject *timer_session;      /* the TimerSession whose boundaries take this path */
static EventBuffer *timer_buf;       /* its event buffer */
static long long timer_tick_due;     /* when its next fold is due (TimerSession.run_tick) */
static _Thread_local long long my_tid = -1; /* threading.get_native_id(), as ThreadState.thread */

static int timer_row(PyObject *s, long kind, long long a, long long name) {
    long long t0 = now_ns();
    boundary_start();
    if (my_tid < 0) my_tid = (long long)PyThread_get_thread_native_id();
    long long ts = now_ns();
    if (eb_push(timer_buf, ts, my_tid, kind, a, -1, name, 0) < 0) return -1;
    row_buf = timer_buf;
    row_idx = timer_buf->len - 1;
    row_ts = ts;
    row_count = 1;
    row_real_clock = 1;
    boundary_stamp(t0);
    if ((kind & 1) && ts >= timer_tick_due) { /* an end (OP_END, CAT_END, PHASE_END are odd) */
        PyObject *tsv = PyLong_FromLongLong(ts);
        PyObject *r = tsv ? PyObject_CallMethodOneArg(s, s_run_tick, tsv) : NULL; /* pauses itself */
        Py_XDECREF(tsv);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* A scope or phase boundary on the timer path; ``end``: 0 enter, 1 exit. */
static int timer_scope(PyObject *self, PyObject *s, int end) {
    PyObject *begin = slot(self, off_begin), *nid = slot(self, off_name_id);
    long b = begin ? PyLong_AsLong(begin) : -1;
    long long name = nid ? PyLong_AsLongLong(nid) : -1;
    if (PyErr_Occurred()) return -1;
    if (end && b == OP_BEGIN) scope_exits++;
    return timer_row(s, b + end, -1, name);
}

static int timer_cat(PyObject *self, PyObject *s, int end) {
    PyObject *code = slot(self, off_code);
    long long c = code ? PyLong_AsLongLong(code) : -1;
    if (PyErr_Occurred()) return -1;
    return timer_row(s, CAT_BEGIN + end, c, -1);
}

/* annotate's _active (borrowed; NULL on error, Py_None when no session), read once a boundary:
 * validate's timer session takes the timer path, the lean session (bound here) the lean path, any other the
 * full path, none returns at once. */
static inline PyObject *active(void) {
    PyObject *s = PyDict_GetItemWithError(annotate_dict, s_active);
    return s != NULL ? s : (PyErr_Occurred() ? NULL : Py_None);
}

enum { SCOPE_ENTER, SCOPE_EXIT, CAT_ENTER, CAT_EXIT };

/* One boundary: ``which`` is a constant at each call below, so each method inlines its own path. */
static inline PyObject *boundary(int which, PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *s = active();
    if (s == NULL) return NULL;
    int enter = which == SCOPE_ENTER || which == CAT_ENTER, scope = which == SCOPE_ENTER || which == SCOPE_EXIT;
    PyObject *done = enter ? self : Py_None; /* what the method returns */
    if (s == Py_None) return Py_NewRef(done);
    if (s == timer_session) {
        int rc = scope ? timer_scope(self, s, !enter) : timer_cat(self, s, !enter);
        return rc < 0 ? NULL : Py_NewRef(done);
    }
    long long t0 = now_ns();
    boundary_start();
    int lean = s == B.session;
    PyObject *r;
    switch (which) {
    case SCOPE_ENTER:
        r = lean ? lean_scope_enter(self) : scope_enter_impl(self, s);
        break;
    case SCOPE_EXIT:
        r = lean ? lean_scope_exit(self, args, nargs) : scope_exit_impl(self, s, args, nargs);
        break;
    case CAT_ENTER:
        r = lean ? lean_cat_method(self, 0) : cat_enter_impl(self, s);
        break;
    default:
        r = lean ? lean_cat_method(self, 1) : cat_exit_impl(self, s, args, nargs);
    }
    if (r != NULL) boundary_stamp(t0);
    return r;
}

static PyObject *scope_enter(PyObject *self, PyObject *unused) { return boundary(SCOPE_ENTER, self, NULL, 0); }
static PyObject *cat_enter(PyObject *self, PyObject *unused) { return boundary(CAT_ENTER, self, NULL, 0); }
static PyObject *scope_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return boundary(SCOPE_EXIT, self, args, nargs);
}
static PyObject *cat_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return boundary(CAT_EXIT, self, args, nargs);
}

/* set_timer(session, buffer, tick_due): boundaries while ``session`` is annotate's _active take
 * the timer path into ``buffer``; set_timer(None, None, 0) ends it. */
static PyObject *set_timer(PyObject *mod, PyObject *args) {
    PyObject *s, *buf;
    long long due;
    if (!PyArg_ParseTuple(args, "OOL", &s, &buf, &due)) return NULL;
    if (s == Py_None) {
        Py_CLEAR(timer_session);
        Py_CLEAR(timer_buf);
        Py_RETURN_NONE;
    }
    if (!Py_IS_TYPE(buf, &EventBufferType)) {
        PyErr_SetString(PyExc_TypeError, "set_timer: the buffer must be an EventBuffer");
        return NULL;
    }
    Py_XSETREF(timer_session, Py_NewRef(s));
    Py_XSETREF(timer_buf, (EventBuffer *)Py_NewRef(buf));
    timer_tick_due = due;
    Py_RETURN_NONE;
}

static PyObject *set_timer_tick(PyObject *mod, PyObject *arg) {
    long long due = PyLong_AsLongLong(arg);
    if (due == -1 && PyErr_Occurred()) return NULL;
    timer_tick_due = due;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------ install */

static PyMethodDef scope_defs[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS, "rlscope scope enter (native)"},
    {"__exit__", (PyCFunction)(void (*)(void))scope_exit, METH_FASTCALL, "rlscope scope exit (native)"},
};
static PyMethodDef cat_defs[] = {
    {"__enter__", (PyCFunction)cat_enter, METH_NOARGS, "rlscope category enter (native)"},
    {"__exit__", (PyCFunction)(void (*)(void))cat_exit, METH_FASTCALL, "rlscope category exit (native)"},
};

static int slot_offset(PyTypeObject *cls, const char *name, Py_ssize_t *out) {
    PyObject *descr = PyDict_GetItemString(cls->tp_dict, name);
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", cls->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", cls->tp_name, name);
        return -1;
    }
    *out = m->offset;
    return 0;
}

static int set_methods(PyTypeObject *cls, PyMethodDef *defs) {
    for (int i = 0; i < 2; i++) {
        PyObject *descr = PyDescr_NewMethod(cls, &defs[i]);
        if (descr == NULL) return -1;
        int rc = PyObject_SetAttrString((PyObject *)cls, defs[i].ml_name, descr);
        Py_DECREF(descr);
        if (rc < 0) return -1;
    }
    return 0;
}

/* install(scope_cls, category_cls, annotate_dict, perf_counter_ns, py_scope_enter, py_scope_exit,
 *         py_close_stack, py_cat_enter, py_cat_exit, kinds) */
static PyObject *install(PyObject *mod, PyObject *args) {
    PyTypeObject *scope_cls, *cat_cls;
    PyObject *adict, *pc, *se, *sx, *cs, *ce, *cx, *kinds;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOOO", &PyType_Type, &scope_cls, &PyType_Type, &cat_cls, &PyDict_Type,
                          &adict, &pc, &se, &sx, &cs, &ce, &cx, &kinds))
        return NULL;
    long want[7] = {OP_BEGIN, OP_END, CAT_BEGIN, CAT_END, FLAG_RECURSIVE, FLAG_FORCED_CLOSE, CAT_PYTHON};
    if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) != 7) {
        PyErr_SetString(PyExc_TypeError, "kinds: a 7-tuple");
        return NULL;
    }
    for (int i = 0; i < 7; i++) {
        if (PyLong_AsLong(PyTuple_GET_ITEM(kinds, i)) != want[i]) {
            PyErr_SetString(PyExc_ValueError, "rlscope native scopes: event kinds differ from schema.py");
            return NULL;
        }
    }
    if (slot_offset(scope_cls, "name", &off_name) < 0 || slot_offset(scope_cls, "name_id", &off_name_id) < 0 ||
        slot_offset(scope_cls, "_begin", &off_begin) < 0 || slot_offset(cat_cls, "code", &off_code) < 0)
        return NULL;
    Py_XSETREF(annotate_dict, Py_NewRef(adict));
    Py_XSETREF(perf_counter_ns, Py_NewRef(pc));
    Py_XSETREF(py_scope_enter, Py_NewRef(se));
    Py_XSETREF(py_scope_exit, Py_NewRef(sx));
    Py_XSETREF(py_close_stack, Py_NewRef(cs));
    Py_XSETREF(py_cat_enter, Py_NewRef(ce));
    Py_XSETREF(py_cat_exit, Py_NewRef(cx));
    if (set_methods(scope_cls, scope_defs) < 0 || set_methods(cat_cls, cat_defs) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *abi_version(PyObject *mod, PyObject *unused) { return PyLong_FromLong(ABI_VERSION); }

/* How many operations are open on this thread under the lean session (-1: none bound): automatic
 * operations (rlscope/runtime/auto_ops.py) close only when none opened inside them is still open. */
static PyObject *op_depth(PyObject *mod, PyObject *unused) {
    if (B.session == NULL) return PyLong_FromLong(-1);
    LeanThread *t = lean_thread();
    if (t == NULL) return NULL;
    return PyLong_FromSsize_t(t->depth);
}

/* op_end_at(name_id, ts): end this thread's innermost operation, named ``name_id``, at ``ts``, a time
 * already past (an automatic inference's last module call, rlscope/runtime/auto_ops.py), when nothing
 * was recorded on this thread after ``ts``: its rows stay in time order, as the writer's fold and the
 * analysis read them. True when it ended it; False leaves it open (the caller ends it now). No window
 * switch or tick here: the next boundary makes the one due. Its row's cost is not measured (0: the
 * calibrated cost of a scope exit applies). */
#define LATE_SCAN 256 /* rows looked back for this thread's last one; older ones were written before ts */
static PyObject *op_end_at(PyObject *mod, PyObject *args) {
    long long nid, ts;
    if (!PyArg_ParseTuple(args, "LL", &nid, &ts)) return NULL;
    if (B.session == NULL) Py_RETURN_FALSE;
    LeanThread *t = lean_thread();
    if (t == NULL) return NULL;
    if (t->depth == 0 || t->nid[t->depth - 1] != nid) Py_RETURN_FALSE;
    EventBuffer *b = B.buf;
    for (Py_ssize_t i = b->len - 1, seen = 0; i >= 0 && seen < LATE_SCAN; i--, seen++) {
        long long *r = b->rows + i * WIDTH;
        if (r[1] == t->tid) {
            if (r[0] > ts) Py_RETURN_FALSE;
            break;
        }
    }
    boundary_start();
    scope_exits++;
    if (B.nvtx_pop != NULL && lean_call(B.nvtx_pop, NULL) < 0) return NULL; /* its NVTX range ends now */
    if (lean_pop_ops(t, t->depth - 1, ts, 0) < 0) return NULL;
    if (t->depth == 0 && t->is_main) {
        PyObject *nido = PyLong_FromLongLong(nid);
        int rc = nido ? lean_top_ended(nido, ts) : -1;
        Py_XDECREF(nido);
        if (rc < 0) return NULL;
    }
    Py_RETURN_TRUE;
}

/* op_open(name_id): whether an operation of that name is open on this thread under the lean session
 * (rlscope/runtime/auto_ops.py opens no automatic operation inside a user's one of the same name). */
static PyObject *op_open(PyObject *mod, PyObject *arg) {
    long long nid = PyLong_AsLongLong(arg);
    if (nid == -1 && PyErr_Occurred()) return NULL;
    if (B.session == NULL) Py_RETURN_FALSE;
    LeanThread *t = lean_thread();
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < t->depth; i++)
        if (t->nid[i] == nid) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* The name id of the innermost operation open on this thread under the lean session (-1: none, or no
 * lean session): the operation an outermost module call's count goes to (rlscope/runtime/auto_ops.py). */
static PyObject *op_top(PyObject *mod, PyObject *unused) {
    if (B.session == NULL) return PyLong_FromLong(-1);
    LeanThread *t = lean_thread();
    if (t == NULL) return NULL;
    return PyLong_FromLongLong(t->depth > 0 ? (long long)t->nid[t->depth - 1] : -1);
}

static PyObject *lean_structs(PyObject *mod, PyObject *unused) {
    Py_ssize_t n = 0;
    for (LeanThread *t = lean_threads; t != NULL; t = t->next) n++;
    return PyLong_FromSsize_t(n);
}

static PyObject *exits(PyObject *mod, PyObject *unused) { return PyLong_FromLongLong(scope_exits); }

static PyObject *forget_thread(PyObject *mod, PyObject *unused) {
    tstate_clear(); /* drop this thread's cached references (tests; a session's end) */
    Py_RETURN_NONE;
}

/* ---- the signal relay (rlscope/runtime/child_signal.py) -----------------------------------------------------
 * A child that its parent ends with SIGTERM flushes its trace first, in a Python handler. CPython
 * runs such a handler only on the main thread, between bytecodes: a main thread that blocks in C
 * (a pool worker waiting on its task queue's semaphore) after the signal was taken, but before it
 * saw it, or a signal the kernel gave to another thread, leaves the handler pending for ever and
 * the process hung where it would have died (`with Pool()` never returned). This C handler chains
 * to the one it replaced (CPython's: the Python handler still runs where it can) and writes the
 * signal's number to a pipe that rlscope's relay thread waits on; that thread ends the process
 * itself when the main thread has not started the Python handler within a grace period. Only
 * async-signal-safe calls here (getpid, fstat, write). A forked child inherits the handler and the pipe:
 * the pid check keeps its signals out of its parent's pipe until it installs its own. */
#define RELAY_MAX_SIG 65
static struct sigaction relay_old[RELAY_MAX_SIG];
static volatile sig_atomic_t relay_fd[RELAY_MAX_SIG];
static volatile pid_t relay_pid[RELAY_MAX_SIG];
static dev_t relay_dev[RELAY_MAX_SIG]; /* the pipe's identity: a program that closed the fd and */
static ino_t relay_ino[RELAY_MAX_SIG]; /* opened a file of its own there gets no byte from us */

static void relay_handler(int sig, siginfo_t *info, void *ctx) {
    int saved = errno;
    if (sig > 0 && sig < RELAY_MAX_SIG) {
        struct sigaction *old = &relay_old[sig];
        if (old->sa_flags & SA_SIGINFO) {
            if (old->sa_sigaction != NULL) old->sa_sigaction(sig, info, ctx);
        } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN && old->sa_handler != NULL) {
            old->sa_handler(sig);
        }
        int fd = relay_fd[sig];
        struct stat st;
        if (fd >= 0 && relay_pid[sig] == getpid() && fstat(fd, &st) == 0 && st.st_dev == relay_dev[sig] &&
            st.st_ino == relay_ino[sig]) {
            unsigned char b = (unsigned char)sig;
            ssize_t r = write(fd, &b, 1);
            (void)r; /* a full pipe already holds a wake-up */
        }
    }
    errno = saved;
}

static PyObject *relay_signal(PyObject *mod, PyObject *args) {
    int sig, fd;
    if (!PyArg_ParseTuple(args, "ii", &sig, &fd)) return NULL;
    if (sig <= 0 || sig >= RELAY_MAX_SIG) {
        PyErr_SetString(PyExc_ValueError, "signal number out of range");
        return NULL;
    }
    struct sigaction cur, act;
    struct stat st;
    if (sigaction(sig, NULL, &cur) < 0 || fstat(fd, &st) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    relay_fd[sig] = -1;
    int ours = (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == relay_handler;
    if (!ours) relay_old[sig] = cur; /* re-installing (a forked child) keeps the one it chains to */
    relay_dev[sig] = st.st_dev;
    relay_ino[sig] = st.st_ino;
    relay_pid[sig] = getpid();
    relay_fd[sig] = fd;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = relay_handler;
    act.sa_flags = (relay_old[sig].sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    act.sa_mask = relay_old[sig].sa_mask;
    if (sigaction(sig, &act, NULL) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *default_signal(PyObject *mod, PyObject *arg) {
    /* SIG_DFL from any thread (Python's signal.signal works on the main thread only) */
    int sig = PyLong_AsLong(arg);
    if (sig == -1 && PyErr_Occurred()) return NULL;
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = SIG_DFL;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, NULL) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    if (sig > 0 && sig < RELAY_MAX_SIG) relay_fd[sig] = -1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"install", install, METH_VARARGS, "put the native __enter__/__exit__ on annotate's classes"},
    {"abi_version", abi_version, METH_NOARGS, "the C side's version (checked against the Python side)"},
    {"exits", exits, METH_NOARGS, "scope exits so far on the lean and timer paths (rlscope/overhead/validate/twin.py)"},
    {"forget_thread", forget_thread, METH_NOARGS, "drop this thread's cached session references"},
    {"lean_structs", lean_structs, METH_NOARGS, "how many per-thread structs the lean path holds (tests)"},
    {"op_depth", op_depth, METH_NOARGS, "operations open on this thread under the lean session (-1: none)"},
    {"op_end_at", op_end_at, METH_VARARGS, "end this thread's innermost operation at a time already past"},
    {"op_open", op_open, METH_O, "whether an operation of this name id is open on this thread"},
    {"op_top", op_top, METH_NOARGS, "name id of the innermost operation open on this thread (-1: none)"},
    {"set_timer", set_timer, METH_VARARGS, "validate's timer session: its boundaries' path and buffer"},
    {"set_timer_tick", set_timer_tick, METH_O, "when the timer session's next fold is due"},
    {"bind", bind, METH_VARARGS, "a session's boundaries take the lean path; returns its Ids"},
    {"unbind", unbind, METH_NOARGS, "no session on the lean path"},
    {"set_due", set_due, METH_VARARGS, "the lean session's window and tick due times, long-op threshold"},
    {"set_nvtx", set_nvtx, METH_VARARGS, "the lean session's NVTX push and pop (None: off)"},
    {"close_open", close_open, METH_VARARGS, "at the lean session's stop: a thread's open ops or categories"},
    {"open_ops", open_ops, METH_O, "how many operations a thread has open under the lean session"},
    {"category_enter", category_enter, METH_O, "annotate.category_enter under the lean session"},
    {"category_exit", category_exit, METH_O, "annotate.category_exit under the lean session"},
    {"relay_signal", relay_signal, METH_VARARGS, "chain a C handler that writes the signal to a pipe"},
    {"default_signal", default_signal, METH_O, "the signal's default action, from any thread"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "rlscope_scope_native", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit_rlscope_scope_native(void) {
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    INTERN(s_active, "_active");
    INTERN(s_tls, "_tls");
    INTERN(s_clock, "clock");
    INTERN(s_events, "events");
    INTERN(s_ids, "ids");
    INTERN(s_nvtx_push, "nvtx_push");
    INTERN(s_nvtx_pop, "nvtx_pop");
    INTERN(s_window_due, "window_due_ns");
    INTERN(s_tick_due, "tick_due_ns");
    INTERN(s_main_tid, "main_tid");
    INTERN(s_thread_state, "thread_state");
    INTERN(s_switch_window, "switch_window");
    INTERN(s_run_tick, "run_tick");
    INTERN(s_append, "append");
    INTERN(s_ops, "ops");
    INTERN(s_open_names, "open_names");
    INTERN(s_cats, "cats");
    INTERN(s_thread, "thread");
    INTERN(s_long_ops, "long_ops");
    INTERN(s_long_op_ns, "long_op_ns");
    INTERN(s_long_op_entry, "long_op_entry");
    INTERN(s_long_op_done, "long_op_done");
#undef INTERN
    if ((minus_one = PyLong_FromLong(-1)) == NULL || (cat_python = PyLong_FromLong(CAT_PYTHON)) == NULL ||
        (op_begin = PyLong_FromLong(OP_BEGIN)) == NULL)
        return NULL;
    if (PyType_Ready(&EventBufferType) < 0 || PyType_Ready(&IdsType) < 0) return NULL;
    lean_key_ok = pthread_key_create(&lean_key, lean_thread_gone) == 0;
    for (int i = 0; i < RELAY_MAX_SIG; i++) relay_fd[i] = -1;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Py_INCREF(&EventBufferType);
    if (PyModule_AddObject(m, "EventBuffer", (PyObject *)&EventBufferType) < 0) {
        Py_DECREF(&EventBufferType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
