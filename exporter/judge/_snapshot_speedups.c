/*
 * exporter.judge._snapshot_speedups: an optional C accelerator of the snapshot's per-partition loop.
 *
 * `SnapshotBuilder._topic` walks every committed partition of a (group, topic) at every
 * snapshot: lag, lag in seconds, the lag at the evidence start, the commit rate, the drain
 * rate and the status rules of docs/status-rules.md. A snapshot of 300,000 partitions took
 * ~0.9 CPU s in Python, the first build of a catch-up and every build of the steady state.
 * `partition_loop` does the same loop in C: the same arithmetic in the same order (so the
 * float sums are the very same doubles), reading `LogEndHistory`'s array and fields
 * directly. The Python loop in exporter/judge/snapshot.py stays the reference, used when this
 * module is not built or a history is not a plain `LogEndHistory`;
 * tests/exporter/judge/test_snapshot_speedups.py compares both on random tables and histories.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define NEVER (-1)
/* a missing optional int (None in Python) */
#define NONE INT64_MIN

/* exporter.status.Status values */
enum { S_OK = 0, S_WARN = 1, S_REWIND = 2, S_STALL = 3, S_STOP = 4, S_ERR = 5 };

static PyObject *s_buf, *s_last_seen_ms, *s_resets;

typedef struct {
    int64_t window_ms;
    int64_t stall_min_commits;
    int64_t marker_tolerance;
    double warn_min_growth_ratio;
} Config;

/* offsetwatch.core.status.evaluate_partition, with NONE for None */
static int
evaluate(int64_t committed, int64_t commit_time, int64_t first_offset, int64_t commits,
         int64_t rewind, int64_t log_end, int64_t start_lag, int64_t unchanged_since, int live,
         int64_t log_end_time, int64_t now_ms, const Config *cfg)
{
    if (log_end == NONE) {
        return S_ERR;
    }
    if (committed > log_end) {
        if (log_end_time == NONE || log_end_time >= commit_time) {
            return S_ERR;
        }
        return S_OK;
    }
    int64_t lag = log_end - committed;
    if (lag == 0) {
        return S_OK;
    }
    if (lag <= cfg->marker_tolerance && unchanged_since != NONE && unchanged_since <= commit_time) {
        return S_OK;
    }
    int64_t window_start = now_ms - cfg->window_ms;
    if (rewind != NONE && rewind >= window_start) {
        return S_REWIND;
    }
    int behind;
    if (start_lag == NONE || start_lag > cfg->marker_tolerance) {
        behind = 1;
    }
    else {
        behind = start_lag > 0 && unchanged_since != NONE && unchanged_since <= window_start;
    }
    if (commit_time < window_start) {
        return (behind || !live) ? S_STOP : S_OK;
    }
    if (commits >= cfg->stall_min_commits && committed <= first_offset && behind) {
        return S_STALL;
    }
    int64_t consumed = committed - first_offset;
    if (consumed > 0 && start_lag != NONE && behind) {
        int64_t growth = lag - start_lag;
        if (growth > 0 && (double)growth > cfg->warn_min_growth_ratio * (double)consumed) {
            return S_WARN;
        }
    }
    return S_OK;
}

/* A LogEndHistory's samples: `n` (time, log end) pairs in `buf`. */
typedef struct {
    const int64_t *buf;
    Py_ssize_t n;
    int64_t last_seen_ms;
    int64_t resets;
} History;

/* LogEndHistory.log_end_at */
static int64_t
log_end_at(const History *h, int64_t time_ms)
{
    const int64_t *buf = h->buf;
    if (h->n == 0 || time_ms < buf[0]) {
        return NONE;
    }
    Py_ssize_t lo = 0, hi = h->n - 1;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi + 1) / 2;
        if (buf[2 * mid] <= time_ms) {
            lo = mid;
        }
        else {
            hi = mid - 1;
        }
    }
    return buf[2 * lo + 1];
}

/* LogEndHistory.lag_at */
static int64_t
lag_at(const History *h, int64_t time_ms, int64_t offset)
{
    int64_t end = log_end_at(h, time_ms);
    if (end != NONE) {
        return end > offset ? end - offset : 0;
    }
    if (h->n && h->resets == 0 && h->buf[1] <= offset) {
        return 0;
    }
    return NONE;
}

/* LogEndHistory.lag_s */
static double
lag_s(const History *h, int64_t offset, int64_t now_ms)
{
    const int64_t *buf = h->buf;
    if (h->n == 0 || offset >= buf[2 * h->n - 1]) {
        return 0.0;
    }
    Py_ssize_t lo = 0, hi = h->n - 1;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (buf[2 * mid + 1] > offset) {
            hi = mid;
        }
        else {
            lo = mid + 1;
        }
    }
    int64_t produced;
    if (lo == 0) {
        produced = buf[0];
    }
    else {
        int64_t t_before = buf[2 * lo - 2], end_before = buf[2 * lo - 1];
        int64_t t_after = buf[2 * lo];
        __int128 k = (__int128)offset - end_before + 1;
        __int128 n = (__int128)buf[2 * lo + 1] - end_before;
        produced = (int64_t)(t_before + ((__int128)(t_after - t_before) * k) / (n + 1));
    }
    int64_t age_ms = now_ms - produced;
    return age_ms > 0 ? (double)age_ms / 1000.0 : 0.0;
}

/* a writable 1-d buffer of `count` items of `code` ('q', 'i', 'd', 'B'), or -1 */
static int
get_column(PyObject *obj, Py_buffer *view, char code, Py_ssize_t count, int writable)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) | PyBUF_FORMAT) <
        0) {
        return -1;
    }
    const char *format = view->format == NULL ? "B" : view->format;
    Py_ssize_t itemsize = code == 'q' || code == 'd' ? 8 : code == 'i' ? 4 : 1;
    if (format[0] != code || format[1] != '\0' || view->itemsize != itemsize ||
        view->len / itemsize < count) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "partition_loop(): expected a column of '%c' with %zd items",
                     code, count);
        return -1;
    }
    return 0;
}

/* Read a LogEndHistory (exactly of `history_type`); 1 done, 0 another kind of object, -1
 * error. The buffer stays held in `view` on 1. */
static int
read_history(PyObject *obj, PyObject *history_type, History *h, Py_buffer *view)
{
    if ((PyObject *)Py_TYPE(obj) != history_type) {
        return 0;
    }
    PyObject *buf = PyObject_GetAttr(obj, s_buf);
    if (buf == NULL) {
        return -1;
    }
    int got = get_column(buf, view, 'q', 0, 0);
    Py_DECREF(buf);
    if (got < 0) {
        return -1;
    }
    PyObject *seen = PyObject_GetAttr(obj, s_last_seen_ms);
    PyObject *resets = seen == NULL ? NULL : PyObject_GetAttr(obj, s_resets);
    int status = 1;
    if (resets == NULL) {
        status = -1;
    }
    else {
        h->last_seen_ms = PyLong_AsLongLong(seen);
        h->resets = PyLong_AsLongLong(resets);
        if (PyErr_Occurred()) {
            status = -1;
        }
    }
    Py_XDECREF(seen);
    Py_XDECREF(resets);
    if (status < 0) {
        PyBuffer_Release(view);
        return -1;
    }
    h->buf = (const int64_t *)view->buf;
    h->n = view->len / 16;
    return 1;
}

enum {
    A_PARTITIONS, A_COMMITTED, A_COMMIT_TS, A_WINDOW_OFFSET, A_FIRST_COMMIT_TS, A_WINDOW_COMMITS,
    A_NEXT_COMMITS, A_BUCKET_COMMITS, A_REWIND_TS, A_LOG_END, A_LAGS, A_LAG_S, A_STATUS, A_COUNT
};

PyDoc_STRVAR(partition_loop_doc,
"partition_loop(topic, histories, history_type, now_ms, window_start_ms, live, config,\n"
"               partitions, committed, commit_ts, window_offset, first_commit_ts,\n"
"               window_commits, next_commits, bucket_commits, rewind_ts,\n"
"               log_end, lags, lag_s, status)\n"
"    -> (commits_per_ms, shared_commits, drain_per_ms, shared_drain, drain_known) | None\n\n"
"The per-partition loop of SnapshotBuilder._topic: fills log_end, lags, lag_s and status\n"
"(row i is partition partitions[i]; committed and commit_ts by row, the table's columns by\n"
"partition). config: (window_ms, stall_min_commits, marker_tolerance,\n"
"warn_min_growth_ratio). None when a history is not a plain LogEndHistory: the Python loop\n"
"then runs and writes every row again.");

static PyObject *
partition_loop(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 20) {
        PyErr_SetString(PyExc_TypeError, "partition_loop() takes 20 arguments");
        return NULL;
    }
    PyObject *topic = args[0], *histories = args[1], *history_type = args[2];
    if (!PyUnicode_Check(topic) || !PyDict_Check(histories) || !PyTuple_Check(args[6]) ||
        PyTuple_GET_SIZE(args[6]) != 4) {
        PyErr_SetString(PyExc_TypeError, "partition_loop(): bad arguments");
        return NULL;
    }
    int64_t now_ms = PyLong_AsLongLong(args[3]);
    int64_t window_start_ms = PyLong_AsLongLong(args[4]);
    int live = PyObject_IsTrue(args[5]);
    Config cfg;
    PyObject *c = args[6];
    cfg.window_ms = PyLong_AsLongLong(PyTuple_GET_ITEM(c, 0));
    cfg.stall_min_commits = PyLong_AsLongLong(PyTuple_GET_ITEM(c, 1));
    cfg.marker_tolerance = PyLong_AsLongLong(PyTuple_GET_ITEM(c, 2));
    cfg.warn_min_growth_ratio = PyFloat_AsDouble(PyTuple_GET_ITEM(c, 3));
    if (live < 0 || PyErr_Occurred()) {
        return NULL;
    }
    static const char codes[A_COUNT] = {'q', 'q', 'q', 'q', 'q', 'i', 'i', 'i', 'q',
                                        'q', 'q', 'd', 'B'};
    static const int by_row[A_COUNT] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    Py_buffer views[A_COUNT];
    int taken[A_COUNT] = {0};
    int held;
    PyObject *result = NULL;
    /* rows first: the table's columns must reach the highest partition number */
    Py_ssize_t rows = PyObject_Length(args[7]);
    if (rows < 0) {
        return NULL;
    }
    for (held = 0; held < A_COUNT; held++) {
        if (!by_row[held]) {
            continue;
        }
        int writable = held >= A_LOG_END;
        if (get_column(args[7 + held], &views[held], codes[held], rows, writable) < 0) {
            goto done;
        }
        taken[held] = 1;
    }
    const int64_t *partitions = (const int64_t *)views[A_PARTITIONS].buf;
    Py_ssize_t slots = rows ? partitions[rows - 1] + 1 : 0; /* partitions ascend */
    for (held = 0; held < A_COUNT; held++) {
        if (by_row[held]) {
            continue;
        }
        if (get_column(args[7 + held], &views[held], codes[held], slots, 0) < 0) {
            goto done;
        }
        taken[held] = 1;
    }
    const int64_t *committed = views[A_COMMITTED].buf, *commit_ts = views[A_COMMIT_TS].buf;
    const int64_t *window_offset = views[A_WINDOW_OFFSET].buf;
    const int64_t *first_commit_ts = views[A_FIRST_COMMIT_TS].buf;
    const int32_t *window_commits = views[A_WINDOW_COMMITS].buf;
    const int32_t *next_commits = views[A_NEXT_COMMITS].buf;
    const int32_t *bucket_commits = views[A_BUCKET_COMMITS].buf;
    const int64_t *rewind_ts = views[A_REWIND_TS].buf;
    int64_t *log_end = views[A_LOG_END].buf, *lags = views[A_LAGS].buf;
    double *lag_seconds = views[A_LAG_S].buf;
    unsigned char *status = views[A_STATUS].buf;

    int64_t min_span_ms = cfg.window_ms;
    int64_t shared_commits = 0, shared_drain = 0;
    double commits_per_ms = 0.0, drain_per_ms = 0.0;
    int drain_known = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t p = partitions[i];
        if (p < 0 || p >= slots) {
            PyErr_SetString(PyExc_ValueError, "partition_loop(): partitions must ascend");
            goto done;
        }
        int64_t offset = committed[i];
        int64_t rewind = rewind_ts[p] == NEVER ? NONE : rewind_ts[p];
        int64_t commits = (int64_t)window_commits[p] + next_commits[p] + bucket_commits[p];
        int64_t start_ms = first_commit_ts[p];
        int shared = start_ms <= window_start_ms;
        if (shared) {
            start_ms = window_start_ms;
            shared_commits += commits;
        }
        else {
            int64_t span = now_ms - start_ms;
            commits_per_ms += (double)commits / (double)(span > min_span_ms ? span : min_span_ms);
        }
        PyObject *pn = PyLong_FromLongLong(p);
        PyObject *key = pn == NULL ? NULL : PyTuple_Pack(2, topic, pn);
        Py_XDECREF(pn);
        if (key == NULL) {
            goto done;
        }
        PyObject *obj = PyDict_GetItemWithError(histories, key); /* borrowed */
        Py_DECREF(key);
        if (obj == NULL && PyErr_Occurred()) {
            goto done;
        }
        History h = {NULL, 0, 0, 0};
        Py_buffer hview;
        int have = 0;
        if (obj != NULL && obj != Py_None) {
            have = read_history(obj, history_type, &h, &hview);
            if (have < 0) {
                goto done;
            }
            if (have == 0) {
                result = Py_NewRef(Py_None); /* not a LogEndHistory: the Python loop */
                goto done;
            }
            if (h.n == 0) {
                PyBuffer_Release(&hview);
                have = 0;
            }
        }
        if (!have) {
            /* no sample: rule 1 */
            status[i] = S_ERR;
            continue;
        }
        int64_t end = h.buf[2 * h.n - 1];
        int64_t sampled_at = h.last_seen_ms;
        log_end[i] = end;
        int64_t lag = end - offset;
        if (lag < 0) {
            lag = 0;
        }
        lags[i] = lag;
        lag_seconds[i] = lag_s(&h, offset, now_ms);
        int64_t start_lag = lag_at(&h, start_ms, window_offset[p]);
        if (start_lag != NONE) {
            drain_known = 1;
            if (shared) {
                shared_drain += start_lag - lag;
            }
            else {
                int64_t span = now_ms - start_ms;
                drain_per_ms += (double)(start_lag - lag) / (double)(span > 1 ? span : 1);
            }
        }
        int64_t run_start = h.buf[2 * h.n - 2];
        int64_t unchanged = h.last_seen_ms > run_start ? run_start : NONE;
        PyBuffer_Release(&hview);
        status[i] = (unsigned char)evaluate(offset, commit_ts[i], window_offset[p], commits, rewind,
                                            end, start_lag, unchanged, live, sampled_at, now_ms,
                                            &cfg);
    }
    result = Py_BuildValue("(dLdLO)", commits_per_ms, (long long)shared_commits, drain_per_ms,
                           (long long)shared_drain, drain_known ? Py_True : Py_False);
done:
    for (int k = 0; k < A_COUNT; k++) {
        if (taken[k]) {
            PyBuffer_Release(&views[k]);
        }
    }
    return result;
}

static PyMethodDef methods[] = {
    {"partition_loop", (PyCFunction)(void (*)(void))partition_loop, METH_FASTCALL,
     partition_loop_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_snapshot_speedups",
    "C accelerator of the snapshot's per-partition loop (exporter/judge/_snapshot_speedups.c).", -1,
    methods,
};

#ifndef OFFSETWATCH_SPEEDUPS_SOURCE
#define OFFSETWATCH_SPEEDUPS_SOURCE ""
#endif

PyMODINIT_FUNC
PyInit__snapshot_speedups(void)
{
    if (s_buf == NULL) {
        s_buf = PyUnicode_InternFromString("_buf");
        s_last_seen_ms = PyUnicode_InternFromString("_last_seen_ms");
        s_resets = PyUnicode_InternFromString("_resets");
        if (s_buf == NULL || s_last_seen_ms == NULL || s_resets == NULL) {
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddStringConstant(module, "SOURCE_SHA256", OFFSETWATCH_SPEEDUPS_SOURCE) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
