/*
 * exporter.state._ingest_speedups: an optional C accelerator of the exporter's ingest.
 *
 * A catch-up is millions of plain offset commits: a key of type 0/1 with an OffsetCommitValue
 * of versions 0-4 (v4, flexible, is what Kafka 4.1+ writes, with the topic id tag from 4.2)
 * and its metadata (Java's consumer and Admin send none, librdkafka appends a NUL to what the
 * application sets). `apply_commits` applies such records straight from confluent-kafka's
 * Message objects into the `PartitionTable` columns, without building Record objects,
 * exactly as `OffsetState.apply_many` would, making the group and table a commit names when
 * the state has none yet (given the classes that make them). It stops at the first message
 * it does not cover (another key type, a tombstone, metadata that is not strict UTF-8, a
 * negative partition, bytes it cannot read to the last) and returns its index: the Python
 * path (exporter/state/ingest.py) handles that one message - decoding it, or quarantining
 * it with the decoder's DecodeError - and calls back. The Python path is the reference; the
 * tests compare both on the same streams (tests/exporter/state/test_ingest_speedups.py).
 *
 * `split_batch` is the per-message loop of `OffsetsTopicSource.poll_batch`.
 *
 * Buffers of the columns are held (so nothing can resize them) only while one run of
 * records of one table is applied; nothing is cached across calls, so a rolled window
 * (new column arrays), a deleted table or a cleared state is seen at the next run.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_wire.h" /* decoder/_wire.h: be16/be32/be64, read_uvarint32 */

static PyObject *s_key, *s_value, *s_partition, *s_offset, *s_timestamp, *s_error;
static PyObject *s_topics, *s_commits_total, *s_last_record_ts, *s_metadata, *s_grow;
static PyObject *empty_str;

/* PartitionTable's columns, in the order of COLUMN_NAMES */
enum {
    T_PRESENT, T_COMMITTED, T_COMMIT_TS, T_LEADER_EPOCH, T_WINDOW_OFFSET, T_WINDOW_COMMITS,
    T_NEXT_OFFSET, T_NEXT_COMMITS, T_BUCKET_OFFSET, T_BUCKET_COMMITS, T_FIRST_COMMIT_TS,
    T_REWIND_TS, T_MOVE_TS, T_COUNT
};
static const char *const COLUMN_NAMES[T_COUNT] = {
    "present", "committed", "commit_ts", "leader_epoch", "window_offset", "window_commits",
    "next_offset", "next_commits", "bucket_offset", "bucket_commits", "first_commit_ts",
    "rewind_ts", "move_ts",
};
/* the array typecode of each column (bytearray: "B") */
static const char COLUMN_FORMATS[T_COUNT] = {
    'B', 'q', 'q', 'i', 'q', 'i', 'q', 'i', 'q', 'i', 'q', 'q', 'q',
};
static PyObject *column_names[T_COUNT];

#define NEVER (-1)
/* value versions this loop covers (0-4), and the (key type 0/1, version) kinds it counts */
#define VERSIONS 5
#define KINDS (2 * VERSIONS)

/* ------------------------------------------------------------------------------------------
 * One run: the records of one (group, topic) table */

typedef struct {
    PyObject *prefix;  /* the key bytes (held) whose first prefix_len bytes name the table */
    Py_ssize_t prefix_len;
    PyObject *group;   /* GroupState (held) */
    PyObject *table;   /* PartitionTable (held) */
    PyObject *metadata; /* the table's metadata list, or Py_None (held) */
    Py_buffer views[T_COUNT];
    Py_ssize_t size;   /* slots every column has */
    long long commits; /* commits applied in this run, not yet added to the group */
    long long max_ts;  /* the newest message timestamp of the run */
    int open;
    int held; /* the views are held */
} Run;

static void
release_views(Run *run, int count)
{
    for (int i = 0; i < count; i++) {
        PyBuffer_Release(&run->views[i]);
    }
}

/* Add the run's commits to its group (commits_total, last_record_ts) and let go of it. */
static int
close_run(Run *run)
{
    if (!run->open) {
        return 0;
    }
    int status = 0;
    if (run->held) {
        release_views(run, T_COUNT);
        run->held = 0;
    }
    run->open = 0;
    if (run->commits) {
        PyObject *total = PyObject_GetAttr(run->group, s_commits_total);
        PyObject *added = NULL, *add = NULL, *last = NULL;
        if (total == NULL || (add = PyLong_FromLongLong(run->commits)) == NULL ||
            (added = PyNumber_Add(total, add)) == NULL ||
            PyObject_SetAttr(run->group, s_commits_total, added) < 0 ||
            (last = PyObject_GetAttr(run->group, s_last_record_ts)) == NULL) {
            status = -1;
        }
        else {
            long long previous = PyLong_AsLongLong(last);
            if (previous == -1 && PyErr_Occurred()) {
                status = -1;
            }
            else if (run->max_ts > previous) {
                PyObject *ts = PyLong_FromLongLong(run->max_ts);
                if (ts == NULL || PyObject_SetAttr(run->group, s_last_record_ts, ts) < 0) {
                    status = -1;
                }
                Py_XDECREF(ts);
            }
        }
        Py_XDECREF(total);
        Py_XDECREF(add);
        Py_XDECREF(added);
        Py_XDECREF(last);
    }
    run->commits = 0;
    Py_CLEAR(run->prefix);
    Py_CLEAR(run->group);
    Py_CLEAR(run->table);
    Py_CLEAR(run->metadata);
    return status;
}

/* The (group id, topic) of an offset-commit key's prefix: group string, topic string, both
 * strict UTF-8 with non-negative lengths, then exactly 4 bytes of partition. 0 when the key
 * is not such a key. */
static int
parse_prefix(const unsigned char *b, Py_ssize_t n, PyObject **group_id, PyObject **topic)
{
    if (n < 2 + 2 + 2 + 4) {
        return 0;
    }
    Py_ssize_t group_len = be16(b + 2);
    if (group_len < 0 || n < 4 + group_len + 2 + 4) {
        return 0;
    }
    Py_ssize_t topic_len = be16(b + 4 + group_len);
    if (topic_len < 0 || n != 4 + group_len + 2 + topic_len + 4) {
        return 0;
    }
    *group_id = PyUnicode_DecodeUTF8((const char *)b + 4, group_len, NULL);
    if (*group_id == NULL) {
        return -1;
    }
    *topic = PyUnicode_DecodeUTF8((const char *)b + 6 + group_len, topic_len, NULL);
    if (*topic == NULL) {
        Py_CLEAR(*group_id);
        return -1;
    }
    return 1;
}

/* Hold the buffers of `table`'s columns (and its metadata list) in `run`: 1 done, 0 not
 * columns this module can write (nothing held), -1 error. */
static int
load_columns(Run *run, PyObject *table)
{
    PyObject *metadata = PyObject_GetAttr(table, s_metadata);
    if (metadata == NULL) {
        return -1;
    }
    if (metadata != Py_None && !PyList_CheckExact(metadata)) {
        Py_DECREF(metadata);
        return 0;
    }
    Py_ssize_t size = PY_SSIZE_T_MAX;
    for (int i = 0; i < T_COUNT; i++) {
        PyObject *column = PyObject_GetAttr(table, column_names[i]);
        if (column == NULL) {
            release_views(run, i);
            Py_DECREF(metadata);
            return -1;
        }
        int got = PyObject_GetBuffer(column, &run->views[i], PyBUF_WRITABLE | PyBUF_FORMAT);
        Py_DECREF(column);
        if (got < 0) {
            release_views(run, i);
            Py_DECREF(metadata);
            PyErr_Clear(); /* not a column this module can write: the Python path */
            return 0;
        }
        Py_buffer *view = &run->views[i];
        const char *format = view->format == NULL ? "B" : view->format;
        char code = COLUMN_FORMATS[i];
        Py_ssize_t itemsize = code == 'q' ? 8 : code == 'i' ? 4 : 1;
        if (format[0] != code || format[1] != '\0' || view->ndim != 1 ||
            view->itemsize != itemsize) {
            release_views(run, i + 1);
            Py_DECREF(metadata);
            return 0;
        }
        if (view->len / itemsize < size) {
            size = view->len / itemsize;
        }
    }
    if (metadata != Py_None && PyList_GET_SIZE(metadata) < size) {
        size = PyList_GET_SIZE(metadata);
    }
    run->size = size;
    Py_XSETREF(run->metadata, metadata);
    return 1;
}

/* Open the run of the table named by `key`: 1 done, 0 not covered (no such group or topic
 * and no `new_group` / `new_table` to make one; not a table shape; invalid UTF-8), -1 error.
 * A missing group is made as `new_group(group_id)` and a missing table as `new_table()`, put
 * where OffsetState.apply_many puts them (state.groups, group.topics): the caller makes sure
 * first that the message will be applied, as apply_many only makes them for a commit. */
static int
open_run(Run *run, PyObject *key, PyObject *groups, PyObject *new_group, PyObject *new_table)
{
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(key);
    Py_ssize_t n = PyBytes_GET_SIZE(key);
    PyObject *group_id = NULL, *topic = NULL;
    int found = parse_prefix(b, n, &group_id, &topic);
    if (found < 0) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            return -1;
        }
        PyErr_Clear(); /* Python keeps invalid bytes with surrogateescape */
        return 0;
    }
    if (found == 0) {
        return 0;
    }
    int status = 0;
    PyObject *topics = NULL, *made = NULL;
    PyObject *group = PyDict_GetItemWithError(groups, group_id); /* borrowed */
    if (group == NULL) {
        if (PyErr_Occurred()) {
            status = -1;
            goto done;
        }
        if (new_group == Py_None) {
            goto done;
        }
        made = PyObject_CallOneArg(new_group, group_id);
        if (made == NULL || PyDict_SetItem(groups, group_id, made) < 0) {
            status = -1;
            goto done;
        }
        group = made; /* held by `groups` too */
    }
    topics = PyObject_GetAttr(group, s_topics);
    if (topics == NULL) {
        status = -1;
        goto done;
    }
    if (!PyDict_Check(topics)) {
        goto done;
    }
    PyObject *table = PyDict_GetItemWithError(topics, topic); /* borrowed */
    if (table == NULL) {
        if (PyErr_Occurred()) {
            status = -1;
            goto done;
        }
        if (new_table == Py_None) {
            goto done;
        }
        PyObject *fresh = PyObject_CallNoArgs(new_table);
        int put = fresh == NULL ? -1 : PyDict_SetItem(topics, topic, fresh);
        Py_XDECREF(fresh); /* held by `topics` */
        if (put < 0) {
            status = -1;
            goto done;
        }
        table = fresh;
    }
    status = load_columns(run, table);
    if (status == 1) {
        run->prefix = Py_NewRef(key);
        run->prefix_len = n - 4;
        run->group = Py_NewRef(group);
        run->table = Py_NewRef(table);
        run->commits = 0;
        run->max_ts = NEVER;
        run->open = 1;
        run->held = 1;
    }
done:
    Py_XDECREF(made);
    Py_XDECREF(topics);
    Py_DECREF(group_id);
    Py_DECREF(topic);
    return status;
}

/* PartitionTable._grow(slot + 1) for a slot past the table's end, with the buffers let go
 * (an array cannot resize while exported): 1 grown and held again, 0 not covered, -1 error.
 * On 0 and -1 the run stays open with nothing held, for close_run to settle. */
static int
grow_table(Run *run, int32_t slot)
{
    release_views(run, T_COUNT);
    run->held = 0;
    PyObject *size = PyLong_FromLong((long)slot + 1);
    PyObject *grown = size == NULL ? NULL : PyObject_CallMethodOneArg(run->table, s_grow, size);
    Py_XDECREF(size);
    int status = grown == NULL ? -1 : load_columns(run, run->table);
    Py_XDECREF(grown);
    if (status == 1) {
        run->held = 1;
        if (slot >= run->size) {
            release_views(run, T_COUNT);
            run->held = 0;
            status = 0;
        }
    }
    return status;
}

/* the int a method of the message returns (None -> `none`); -1 with an exception set on error */
static inline int
call_int(PyObject *message, PyObject *name, long long none, long long *out)
{
    PyObject *args[1] = {message};
    PyObject *result =
        PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (result == NULL) {
        return -1;
    }
    if (result == Py_None) {
        *out = none;
    }
    else {
        *out = PyLong_AsLongLong(result);
        if (*out == -1 && PyErr_Occurred()) {
            Py_DECREF(result);
            return -1;
        }
    }
    Py_DECREF(result);
    return 0;
}

static inline PyObject *
call(PyObject *message, PyObject *name)
{
    PyObject *args[1] = {message};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* A commit value this loop covers: 1 with its fields (`*meta`, `*meta_len`: the metadata's
 * UTF-8 bytes inside `value`), 0 when not: other versions, a null metadata, short or trailing
 * bytes, a varint this module does not read (see read_uvarint32), a topic id tag that is not
 * 16 bytes. v0-v3 are plain (int16 string length), v4 (Kafka 4.1+) is flexible: compact
 * string, tagged fields at the end. Whatever returns 0 here takes the Python path, which
 * decodes it or raises its DecodeError: nothing is guessed. */
static inline int
parse_value(PyObject *value, int *version, int64_t *offset, int32_t *epoch, int64_t *commit_ts,
            const char **meta, Py_ssize_t *meta_len, int64_t *expire_ts,
            const unsigned char **topic_id, int *other_tags)
{
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(value);
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    if (n < 2) {
        return 0;
    }
    const unsigned char *end = b + n;
    int v = be16(b);
    if (v < 0 || v > 4) {
        return 0;
    }
    const unsigned char *p = b + 2;
    /* offset, [epoch v3+] */
    if (end - p < 8 + (v >= 3 ? 4 : 0)) {
        return 0;
    }
    *offset = be64(p);
    p += 8;
    if (v >= 3) {
        *epoch = be32(p);
        p += 4;
    }
    else {
        *epoch = -1; /* OffsetCommitValue.leader_epoch before v3 (checked by the caller) */
    }
    /* metadata: int16 length (v0-v3), or unsigned varint length + 1 (v4; 0 is null) */
    Py_ssize_t len;
    if (v < 4) {
        if (end - p < 2) {
            return 0;
        }
        len = be16(p);
        p += 2;
    }
    else {
        uint32_t plus_one;
        if (!read_uvarint32(&p, end, &plus_one) || plus_one == 0) {
            return 0;
        }
        len = (Py_ssize_t)plus_one - 1;
    }
    if (len < 0 || end - p < len) {
        return 0;
    }
    *meta = (const char *)p;
    *meta_len = len;
    p += len;
    /* commit ts, [expire ts v1] */
    Py_ssize_t rest = 8 + (v == 1 ? 8 : 0);
    if (end - p < rest) {
        return 0;
    }
    *commit_ts = be64(p);
    *expire_ts = v == 1 ? be64(p + 8) : -1; /* OffsetCommitValue.expire_timestamp (v1) */
    p += rest;
    *topic_id = NULL;
    *other_tags = 0;
    if (v == 4) {
        /* the tagged fields, read as decoder.codegen reads them: a count, then per field its
         * tag, its size and that many bytes. Tag 0, the topic id, must be a 16-byte UUID (the
         * Python path raises for another size); any other tag is kept by Python as an unknown
         * tag the state never reads, so it is skipped. Every field takes at least 2 bytes,
         * so a huge count runs out of bytes and falls back. */
        uint32_t tags, tag, size;
        if (!read_uvarint32(&p, end, &tags)) {
            return 0;
        }
        for (uint32_t t = 0; t < tags; t++) {
            if (!read_uvarint32(&p, end, &tag) || !read_uvarint32(&p, end, &size) ||
                (uint64_t)size > (uint64_t)(end - p) || (tag == 0 && size != 16)) {
                return 0;
            }
            if (tag == 0 && *topic_id == NULL) {
                *topic_id = p;
            }
            else {
                *other_tags = 1; /* kept by Python as unknown tags (or a second topic id) */
            }
            p += size; /* the topic id too: the state does not keep it */
        }
    }
    if (p != end) {
        return 0;
    }
    *version = v;
    return 1;
}

/* The metadata string of a commit: the previous one when the bytes are the same (a client
 * sends the same metadata with every commit), else decoded as strict UTF-8. NULL, with no
 * error set, when the bytes are not strict UTF-8: the Python path keeps them its own way. */
static PyObject *
metadata_str(const char *bytes, Py_ssize_t len, PyObject **last)
{
    if (len == 0) {
        return Py_NewRef(empty_str);
    }
    if (*last != NULL) {
        Py_ssize_t had;
        const char *was = PyUnicode_AsUTF8AndSize(*last, &had);
        if (was != NULL && had == len && memcmp(was, bytes, (size_t)len) == 0) {
            return Py_NewRef(*last);
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8(bytes, len, NULL);
    if (text == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_XSETREF(*last, Py_NewRef(text));
    return text;
}

#define COL64(run, i) ((int64_t *)(run)->views[i].buf)
#define COL32(run, i) ((int32_t *)(run)->views[i].buf)

PyDoc_STRVAR(apply_commits_doc,
"apply_commits(messages, start, groups, positions, counts[, new_group, new_table[, clock]])\n"
"-> int\n\n"
"Apply messages[start:] to the state while they are plain offset commits (of tracked\n"
"tables, or of any when new_group() and new_table() make the missing ones); returns the\n"
"index of the first message not applied (len(messages) when all were). positions[partition] becomes offset + 1 of the last message applied per partition;\n"
"counts[key_type * 5 + version] counts the records applied and counts[10] all of them,\n"
"also when an exception is raised. clock: (window_ms, next_ms, bucket_ms) of the state's\n"
"WindowClock; a commit counts in the bucket its commit time is in (PartitionTable.commit);\n"
"without it, in the current bucket.");

static PyObject *
apply_commits(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 && nargs != 7 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "apply_commits() takes 5, 7 or 8 arguments");
        return NULL;
    }
    /* the window clock's boundaries (PartitionTable.commit's `clock`); NEVER: none */
    long long clock_window = NEVER, clock_next = NEVER, clock_bucket = NEVER;
    if (nargs == 8) {
        PyObject *clock = args[7];
        if (!PyTuple_Check(clock) || PyTuple_GET_SIZE(clock) != 3) {
            PyErr_SetString(PyExc_TypeError, "apply_commits(): clock must be a 3-tuple of ints");
            return NULL;
        }
        clock_window = PyLong_AsLongLong(PyTuple_GET_ITEM(clock, 0));
        clock_next = PyLong_AsLongLong(PyTuple_GET_ITEM(clock, 1));
        clock_bucket = PyLong_AsLongLong(PyTuple_GET_ITEM(clock, 2));
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *messages = args[0], *groups = args[2], *positions = args[3], *counts = args[4];
    /* what makes a missing group and table (GroupState, PartitionTable); None: stop there */
    PyObject *new_group = nargs >= 7 ? args[5] : Py_None;
    PyObject *new_table = nargs >= 7 ? args[6] : Py_None;
    if (!PyList_CheckExact(messages) || !PyDict_CheckExact(groups) ||
        !PyDict_CheckExact(positions) || !PyList_CheckExact(counts) ||
        PyList_GET_SIZE(counts) != KINDS + 1) {
        PyErr_SetString(PyExc_TypeError,
                        "apply_commits(list, int, dict, dict, list of 11 ints) expected");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long applied[KINDS + 1] = {0};
    Run run = {0};
    long long run_partition = -1, run_position = 0;
    int failed = 0;
    Py_ssize_t n = PyList_GET_SIZE(messages);
    /* the metadata of the message being applied, and the last one decoded */
    PyObject *metadata = NULL, *last_metadata = NULL;
    for (; i < n; i++) {
        Py_CLEAR(metadata);
        PyObject *message = PyList_GET_ITEM(messages, i);
        PyObject *key = call(message, s_key);
        if (key == NULL) {
            failed = 1;
            break;
        }
        const unsigned char *kb;
        Py_ssize_t kn;
        if (!PyBytes_CheckExact(key) || (kn = PyBytes_GET_SIZE(key)) < 2 + 2 + 2 + 4 ||
            (kb = (const unsigned char *)PyBytes_AS_STRING(key))[0] != 0 || kb[1] > 1) {
            Py_DECREF(key);
            break;
        }
        PyObject *value = call(message, s_value);
        if (value == NULL) {
            Py_DECREF(key);
            failed = 1;
            break;
        }
        int version;
        int64_t offset, commit_ts;
        int32_t epoch;
        const char *meta = NULL;
        Py_ssize_t meta_len = 0;
        int64_t expire_ts;
        const unsigned char *topic_id;
        int other_tags;
        int plain = PyBytes_CheckExact(value) &&
                    parse_value(value, &version, &offset, &epoch, &commit_ts, &meta, &meta_len,
                                &expire_ts, &topic_id, &other_tags);
        /* decoded while the value's bytes are held (cleared at the next message or the end
         * of the loop when this one is not applied) */
        if (plain) {
            metadata = metadata_str(meta, meta_len, &last_metadata);
        }
        Py_DECREF(value);
        if (metadata == NULL) {
            Py_DECREF(key);
            break;
        }
        int32_t slot = be32(kb + kn - 4);
        int key_type = kb[1];
        if (slot < 0) {
            Py_DECREF(key); /* Python's table.commit indexes from the end: let it */
            break;
        }
        /* the message's own fields, before a group or table may be made for it: once one is
         * made, the message must be applied (apply_many makes them only for a commit) */
        long long partition, position, timestamp;
        if (call_int(message, s_partition, 0, &partition) < 0 ||
            call_int(message, s_offset, 0, &position) < 0) {
            Py_DECREF(key);
            failed = 1;
            break;
        }
        PyObject *ts = call(message, s_timestamp);
        if (ts == NULL) {
            Py_DECREF(key);
            failed = 1;
            break;
        }
        if (!PyTuple_Check(ts) || PyTuple_GET_SIZE(ts) != 2) {
            Py_DECREF(ts);
            Py_DECREF(key);
            break;
        }
        timestamp = PyLong_AsLongLong(PyTuple_GET_ITEM(ts, 1));
        Py_DECREF(ts);
        if (timestamp == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            failed = 1;
            break;
        }
        /* the same table as the record before: same key bytes but for the partition */
        if (!run.open || run.prefix_len != kn - 4 ||
            memcmp(PyBytes_AS_STRING(run.prefix), kb, kn - 4) != 0) {
            if (close_run(&run) < 0) {
                Py_DECREF(key);
                failed = 1;
                break;
            }
            int opened = open_run(&run, key, groups, new_group, new_table);
            if (opened <= 0) {
                Py_DECREF(key);
                failed = opened < 0;
                break;
            }
        }
        Py_DECREF(key); /* kb is not read after this: a key() may return a new object */
        if (slot >= run.size) {
            int grown = grow_table(&run, slot);
            if (grown <= 0) {
                failed = grown < 0;
                break;
            }
        }
        if (metadata != empty_str && run.metadata == Py_None) {
            /* PartitionTable.commit: the table's first non-empty metadata allocates its
             * list, one "" per slot (after the growth, as there) */
            Py_ssize_t slots = run.views[T_PRESENT].len;
            PyObject *list = PyList_New(slots);
            if (list == NULL) {
                failed = 1;
                break;
            }
            for (Py_ssize_t k = 0; k < slots; k++) {
                PyList_SET_ITEM(list, k, Py_NewRef(empty_str));
            }
            if (PyObject_SetAttr(run.table, s_metadata, list) < 0) {
                Py_DECREF(list);
                failed = 1;
                break;
            }
            Py_SETREF(run.metadata, list);
        }
        /* PartitionTable.commit: 3 the current bucket, 2 the one before, 1 the window's
         * first, 0 before the window start */
        int which = 3;
        if (commit_ts >= 0 && commit_ts < clock_bucket) {
            which = commit_ts >= clock_next ? 2 : commit_ts >= clock_window ? 1 : 0;
        }
        unsigned char *present = (unsigned char *)run.views[T_PRESENT].buf;
        if (present[slot]) {
            int64_t previous = COL64(&run, T_COMMITTED)[slot];
            if (offset < previous) {
                COL64(&run, T_REWIND_TS)[slot] = commit_ts;
            }
            else if (offset > previous) {
                COL64(&run, T_MOVE_TS)[slot] = commit_ts;
            }
            if (which > 0) {
                int32_t *count = &COL32(&run, which == 3   ? T_BUCKET_COMMITS
                                              : which == 2 ? T_NEXT_COMMITS
                                                           : T_WINDOW_COMMITS)[slot];
                if (*count == INT32_MAX) {
                    break; /* Python's array raises OverflowError: let it */
                }
                *count += 1;
            }
            if (which < 3) {
                COL64(&run, T_BUCKET_OFFSET)[slot] = offset;
                if (which < 2) {
                    COL64(&run, T_NEXT_OFFSET)[slot] = offset;
                    if (which == 0) {
                        COL64(&run, T_WINDOW_OFFSET)[slot] = offset;
                    }
                }
            }
        }
        else {
            present[slot] = 1;
            COL64(&run, T_WINDOW_OFFSET)[slot] = offset;
            COL64(&run, T_NEXT_OFFSET)[slot] = offset;
            COL64(&run, T_BUCKET_OFFSET)[slot] = offset;
            COL32(&run, T_WINDOW_COMMITS)[slot] = which == 1;
            COL32(&run, T_NEXT_COMMITS)[slot] = which == 2;
            COL32(&run, T_BUCKET_COMMITS)[slot] = which == 3;
            COL64(&run, T_FIRST_COMMIT_TS)[slot] = commit_ts;
            COL64(&run, T_MOVE_TS)[slot] = commit_ts;
            COL64(&run, T_REWIND_TS)[slot] = NEVER;
        }
        COL64(&run, T_COMMITTED)[slot] = offset;
        COL64(&run, T_COMMIT_TS)[slot] = commit_ts;
        COL32(&run, T_LEADER_EPOCH)[slot] = epoch;
        if (run.metadata != Py_None) {
            PyObject *old = PyList_GET_ITEM(run.metadata, slot);
            PyList_SET_ITEM(run.metadata, slot, metadata); /* steals it */
            metadata = NULL;
            Py_DECREF(old);
        }
        /* OffsetState.apply_many's bookkeeping */
        run.commits++;
        if (timestamp > run.max_ts) {
            run.max_ts = timestamp;
        }
        applied[key_type * VERSIONS + version]++;
        applied[KINDS]++;
        /* Ingestor's position of the partition */
        if (partition != run_partition) {
            if (run_partition >= 0) {
                PyObject *p = PyLong_FromLongLong(run_partition);
                PyObject *o = p == NULL ? NULL : PyLong_FromLongLong(run_position);
                int set = o == NULL ? -1 : PyDict_SetItem(positions, p, o);
                Py_XDECREF(p);
                Py_XDECREF(o);
                if (set < 0) {
                    run_partition = -1;
                    failed = 1;
                    i++; /* this message was applied */
                    break;
                }
            }
            run_partition = partition;
        }
        run_position = position + 1;
    }
    Py_CLEAR(metadata);
    Py_CLEAR(last_metadata);
    /* settle what was applied, also after an error (keep its exception) */
    PyObject *type = NULL, *exc = NULL, *tb = NULL;
    if (failed) {
        PyErr_Fetch(&type, &exc, &tb);
    }
    int settled = close_run(&run);
    if (settled == 0 && run_partition >= 0) {
        PyObject *p = PyLong_FromLongLong(run_partition);
        PyObject *o = p == NULL ? NULL : PyLong_FromLongLong(run_position);
        settled = o == NULL ? -1 : PyDict_SetItem(positions, p, o);
        Py_XDECREF(p);
        Py_XDECREF(o);
    }
    for (int k = 0; settled == 0 && k <= KINDS; k++) {
        if (!applied[k]) {
            continue;
        }
        PyObject *had = PyList_GET_ITEM(counts, k);
        PyObject *add = PyLong_FromLongLong(applied[k]);
        PyObject *sum = add == NULL ? NULL : PyNumber_Add(had, add);
        Py_XDECREF(add);
        if (sum == NULL) {
            settled = -1;
            break;
        }
        PyList_SetItem(counts, k, sum); /* steals sum, drops had */
    }
    if (failed) {
        if (settled < 0) {
            PyErr_Clear();
        }
        PyErr_Restore(type, exc, tb);
        return NULL;
    }
    if (settled < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(split_batch_doc,
"split_batch(messages) -> (records, last, errors)\n\n"
"The messages without error() (the list itself when none has one), the offset of the last\n"
"of them per partition, and the messages with an error, in order.");

static PyObject *
split_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "split_batch() takes a list");
        return NULL;
    }
    PyObject *messages = args[0];
    PyObject *last = PyDict_New();
    PyObject *errors = PyList_New(0);
    PyObject *records = NULL;
    if (last == NULL || errors == NULL) {
        goto error;
    }
    Py_ssize_t n = PyList_GET_SIZE(messages);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i);
        PyObject *err = call(message, s_error);
        if (err == NULL) {
            goto error;
        }
        int bad = err != Py_None;
        Py_DECREF(err);
        if (bad) {
            if (records == NULL) {
                /* the records before the first error */
                records = PyList_GetSlice(messages, 0, i);
                if (records == NULL) {
                    goto error;
                }
            }
            if (PyList_Append(errors, message) < 0) {
                goto error;
            }
            continue;
        }
        if (records != NULL && PyList_Append(records, message) < 0) {
            goto error;
        }
        PyObject *p_obj = call(message, s_partition);
        if (p_obj == NULL) {
            goto error;
        }
        PyObject *o_obj = call(message, s_offset);
        if (o_obj == NULL) {
            Py_DECREF(p_obj);
            goto error;
        }
        int set = PyDict_SetItem(last, p_obj, o_obj);
        Py_DECREF(p_obj);
        Py_DECREF(o_obj);
        if (set < 0) {
            goto error;
        }
    }
    if (records == NULL) {
        records = Py_NewRef(messages);
    }
    PyObject *result = PyTuple_Pack(3, records, last, errors);
    Py_DECREF(records);
    Py_DECREF(last);
    Py_DECREF(errors);
    return result;
error:
    Py_XDECREF(records);
    Py_XDECREF(last);
    Py_XDECREF(errors);
    return NULL;
}

/* ------------------------------------------------------------------------------------------
 * encode_commits: the canonical JSON of plain offset commits, for the sinks
 *
 * What decoder/canonical.py's `Canonical.to_json(record)` and `identity_key(record)` give for
 * the Record the Python path decodes from the same message, byte for byte: the envelope in
 * contract.ENVELOPE's order, the key and value fields in records.py's order, integers in
 * decimal, strings escaped as json.dumps(ensure_ascii=False) escapes them (\" \\ \b \f \n \r
 * \t, other control characters as \u00XX, everything else as it is). Only what it reads to
 * the last byte is encoded: a key or value whose strings are not strict UTF-8 (Python's
 * dumps writes U+FFFD for such bytes), a tombstone, a v4 tag other than one topic id (the
 * Python path writes `unknown_tags`) stop it, and that message takes the Python path. */

typedef struct {
    char *buf;
    size_t len, cap;
} Json;

static int
json_reserve(Json *out, size_t extra)
{
    if (out->len + extra <= out->cap) {
        return 0;
    }
    size_t cap = out->cap ? out->cap : 512;
    while (cap < out->len + extra) {
        cap *= 2;
    }
    char *grown = PyMem_Realloc(out->buf, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->buf = grown;
    out->cap = cap;
    return 0;
}

/* a literal; the caller reserved room for it */
#define JSON_LIT(out, text)                                                                    \
    do {                                                                                       \
        memcpy((out)->buf + (out)->len, text, sizeof(text) - 1);                               \
        (out)->len += sizeof(text) - 1;                                                        \
    } while (0)

/* an integer in decimal as Python's int.__repr__ writes it; 20 bytes reserved by the caller */
static void
json_int(Json *out, int64_t value)
{
    char digits[24];
    int n = 0;
    uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        digits[n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    char *p = out->buf + out->len;
    if (value < 0) {
        *p++ = '-';
    }
    while (n) {
        *p++ = digits[--n];
    }
    out->len = (size_t)(p - out->buf);
}

/* a JSON string of strict UTF-8 bytes (checked by the caller); reserves its own room */
static int
json_str(Json *out, const unsigned char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (json_reserve(out, 6 * n + 2) < 0) {
        return -1;
    }
    char *p = out->buf + out->len;
    *p++ = '"';
    for (size_t k = 0; k < n; k++) {
        unsigned char c = s[k];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default:
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p++ = '"';
    out->len = (size_t)(p - out->buf);
    return 0;
}

/* Kafka's Uuid.toString() of 16 bytes: URL-safe base64 without padding (22 characters), as
 * decoder.codegen.uuid_text writes it, at `p` (22 bytes of room) */
#define UUID_TEXT_LEN 22
static char *
uuid_text(char *p, const unsigned char *raw)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (int k = 0; k < 15; k += 3) {
        uint32_t v = ((uint32_t)raw[k] << 16) | ((uint32_t)raw[k + 1] << 8) | raw[k + 2];
        *p++ = alphabet[(v >> 18) & 63];
        *p++ = alphabet[(v >> 12) & 63];
        *p++ = alphabet[(v >> 6) & 63];
        *p++ = alphabet[v & 63];
    }
    *p++ = alphabet[raw[15] >> 2];
    *p++ = alphabet[(raw[15] & 3) << 4];
    return p;
}

/* the topic id as a JSON string; 24 bytes reserved by the caller */
static void
json_uuid(Json *out, const unsigned char *raw)
{
    char *p = out->buf + out->len;
    *p++ = '"';
    p = uuid_text(p, raw);
    *p++ = '"';
    out->len = (size_t)(p - out->buf);
}

/* the fields of one commit that the JSON needs */
typedef struct {
    int key_type, version;
    const unsigned char *group, *topic, *meta, *topic_id;
    size_t group_len, topic_len, meta_len;
    int32_t key_partition, epoch;
    long long partition, position, timestamp;
    int64_t offset, commit_ts, expire_ts;
} Commit;

/* {"type":"offset_commit","group":..,"topic":..,"partition":..}: identity_key's bytes */
static PyObject *
identity_json(Json *out, const Commit *c)
{
    out->len = 0;
    if (json_reserve(out, 64) < 0) {
        return NULL;
    }
    JSON_LIT(out, "{\"type\":\"offset_commit\",\"group\":");
    if (json_str(out, c->group, c->group_len) < 0 || json_reserve(out, 64) < 0) {
        return NULL;
    }
    JSON_LIT(out, ",\"topic\":");
    if (json_str(out, c->topic, c->topic_len) < 0 || json_reserve(out, 64) < 0) {
        return NULL;
    }
    JSON_LIT(out, ",\"partition\":");
    json_int(out, c->key_partition);
    JSON_LIT(out, "}");
    return PyBytes_FromStringAndSize(out->buf, (Py_ssize_t)out->len);
}

/* Canonical.to_json of the commit's Record, as UTF-8 bytes */
static PyObject *
record_json(Json *out, const Commit *c)
{
    out->len = 0;
    if (json_reserve(out, 256) < 0) {
        return NULL;
    }
    JSON_LIT(out, "{\"type\":\"offset_commit\",\"key_type\":");
    json_int(out, c->key_type);
    JSON_LIT(out, ",\"value_version\":");
    json_int(out, c->version);
    JSON_LIT(out, ",\"tombstone\":false,\"newer_version\":false,\"partition\":");
    json_int(out, c->partition);
    JSON_LIT(out, ",\"offset\":");
    json_int(out, c->position);
    JSON_LIT(out, ",\"timestamp\":");
    json_int(out, c->timestamp);
    JSON_LIT(out, ",\"group\":");
    if (json_str(out, c->group, c->group_len) < 0 || json_reserve(out, 64) < 0) {
        return NULL;
    }
    JSON_LIT(out, ",\"key\":{\"group\":");
    if (json_str(out, c->group, c->group_len) < 0 || json_reserve(out, 64) < 0) {
        return NULL;
    }
    JSON_LIT(out, ",\"topic\":");
    if (json_str(out, c->topic, c->topic_len) < 0 || json_reserve(out, 128) < 0) {
        return NULL;
    }
    JSON_LIT(out, ",\"partition\":");
    json_int(out, c->key_partition);
    JSON_LIT(out, "},\"value\":{\"offset\":");
    json_int(out, c->offset);
    JSON_LIT(out, ",\"leader_epoch\":");
    json_int(out, c->epoch);
    JSON_LIT(out, ",\"metadata\":");
    if (json_str(out, c->meta, c->meta_len) < 0 || json_reserve(out, 160) < 0) {
        return NULL;
    }
    JSON_LIT(out, ",\"commit_timestamp\":");
    json_int(out, c->commit_ts);
    JSON_LIT(out, ",\"expire_timestamp\":");
    json_int(out, c->expire_ts);
    JSON_LIT(out, ",\"topic_id\":");
    if (c->topic_id == NULL) {
        JSON_LIT(out, "\"AAAAAAAAAAAAAAAAAAAAAA\"");
    }
    else {
        json_uuid(out, c->topic_id);
    }
    JSON_LIT(out, "},\"transaction\":null,\"schema_version\":2}");
    return PyBytes_FromStringAndSize(out->buf, (Py_ssize_t)out->len);
}

/* A commit's key and value this encoder covers: 1 with `c` filled in (pointers into the
 * bytes, which the caller holds), 0 when not. */
static int
parse_commit(PyObject *key, PyObject *value, Commit *c)
{
    if (!PyBytes_CheckExact(key) || !PyBytes_CheckExact(value)) {
        return 0;
    }
    const unsigned char *kb = (const unsigned char *)PyBytes_AS_STRING(key);
    Py_ssize_t kn = PyBytes_GET_SIZE(key);
    if (kn < 2 + 2 + 2 + 4 || kb[0] != 0 || kb[1] > 1) {
        return 0;
    }
    Py_ssize_t group_len = be16(kb + 2);
    if (group_len < 0 || kn < 4 + group_len + 2 + 4) {
        return 0;
    }
    Py_ssize_t topic_len = be16(kb + 4 + group_len);
    if (topic_len < 0 || kn != 4 + group_len + 2 + topic_len + 4) {
        return 0;
    }
    c->key_type = kb[1];
    c->group = kb + 4;
    c->group_len = (size_t)group_len;
    c->topic = kb + 6 + group_len;
    c->topic_len = (size_t)topic_len;
    c->key_partition = be32(kb + kn - 4);
    if (!is_strict_utf8(c->group, c->group_len) || !is_strict_utf8(c->topic, c->topic_len)) {
        return 0;
    }
    const char *meta;
    Py_ssize_t meta_len;
    int other_tags;
    if (!parse_value(value, &c->version, &c->offset, &c->epoch, &c->commit_ts, &meta, &meta_len,
                     &c->expire_ts, &c->topic_id, &other_tags) ||
        other_tags) {
        return 0;
    }
    c->meta = (const unsigned char *)meta;
    c->meta_len = (size_t)meta_len;
    return is_strict_utf8(c->meta, c->meta_len);
}

PyDoc_STRVAR(encode_commits_doc,
"encode_commits(messages, start, out[, json]) -> int\n\n"
"Append (partition, offset, timestamp, identity key, canonical JSON) to `out` for\n"
"messages[start:] while they are offset commits this encoder covers; returns the index of\n"
"the first message not encoded (len(messages) when all were). The two byte strings are\n"
"what canonical.identity_key and Canonical.to_json(...).encode() give for the record the\n"
"Python path decodes from the message. With json false the JSON is b'' (the same\n"
"messages are covered): for sinks that want only the keys and the Avro bodies.");

static PyObject *
encode_commits(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 3 && nargs != 4) || !PyList_CheckExact(args[0]) ||
        !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "encode_commits(list, int, list[, bool]) expected");
        return NULL;
    }
    PyObject *messages = args[0], *out = args[2];
    int with_json = nargs == 4 ? PyObject_IsTrue(args[3]) : 1;
    if (with_json < 0) {
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(messages);
    Json json = {0};
    int failed = 0;
    for (; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i);
        PyObject *key = call(message, s_key);
        if (key == NULL) {
            failed = 1;
            break;
        }
        PyObject *value = call(message, s_value);
        if (value == NULL) {
            Py_DECREF(key);
            failed = 1;
            break;
        }
        Commit c;
        int covered = parse_commit(key, value, &c);
        PyObject *ts = NULL, *ident = NULL, *body = NULL, *item = NULL;
        if (!covered) {
            Py_DECREF(key);
            Py_DECREF(value);
            break;
        }
        if (call_int(message, s_partition, 0, &c.partition) < 0 ||
            call_int(message, s_offset, 0, &c.position) < 0 ||
            (ts = call(message, s_timestamp)) == NULL) {
            failed = 1;
        }
        else if (!PyTuple_Check(ts) || PyTuple_GET_SIZE(ts) != 2) {
            covered = 0;
        }
        else if ((c.timestamp = PyLong_AsLongLong(PyTuple_GET_ITEM(ts, 1))) == -1 &&
                 PyErr_Occurred()) {
            failed = 1;
        }
        else if ((ident = identity_json(&json, &c)) == NULL ||
                 (body = with_json ? record_json(&json, &c)
                                   : PyBytes_FromStringAndSize(NULL, 0)) == NULL) {
            failed = 1;
        }
        else {
            item = PyTuple_New(5);
            PyObject *fields[3] = {PyLong_FromLongLong(c.partition),
                                   PyLong_FromLongLong(c.position),
                                   PyLong_FromLongLong(c.timestamp)};
            if (item == NULL || fields[0] == NULL || fields[1] == NULL || fields[2] == NULL) {
                for (int f = 0; f < 3; f++) {
                    Py_XDECREF(fields[f]);
                }
                failed = 1;
            }
            else {
                for (int f = 0; f < 3; f++) {
                    PyTuple_SET_ITEM(item, f, fields[f]); /* steals it */
                }
                PyTuple_SET_ITEM(item, 3, ident);
                PyTuple_SET_ITEM(item, 4, body);
                ident = body = NULL; /* held by the tuple now */
                if (PyList_Append(out, item) < 0) {
                    failed = 1;
                }
            }
        }
        Py_XDECREF(item);
        Py_XDECREF(ident);
        Py_XDECREF(body);
        Py_XDECREF(ts);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed || !covered) {
            break;
        }
    }
    PyMem_Free(json.buf);
    if (failed) {
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* ------------------------------------------------------------------------------------------
 * encode_commits_avro: the Avro binary body of the same commits, for the Avro sinks
 *
 * What decoder/avro.py's `AvroCodec.encode` (fastavro's schemaless writer) gives for the
 * canonical dict of the Record the Python path decodes, byte for byte: the fields in the
 * schema's order, int and long as zigzag varints, strings and bytes as a long length and
 * the bytes, booleans as one byte, a union as the long index of its branch then the value.
 * The union branches are not written here: the caller derives them from `avro_schema()`
 * (decoder/avro.py `commit_branches`, which also checks that the schema's fields are the
 * ones written below, in this order) and passes them in, so a schema change cannot make
 * this encoder write another schema's numbers. The records covered are encode_commits'
 * (`parse_commit`): every string strict UTF-8, so nothing needs fastavro's U+FFFD scrub. */

/* the union branches and constants, from the caller's spec tuple */
typedef struct {
    const char *type_name;
    Py_ssize_t type_len;
    long long version_int, group_string, key_branch, value_branch, tags_null, txn_null;
    long long schema_version;
} AvroSpec;

static int
parse_avro_spec(PyObject *spec, AvroSpec *s)
{
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 8 ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(spec, 0))) {
        PyErr_SetString(PyExc_TypeError, "encode_commits_avro: spec must be (bytes, 7 ints)");
        return -1;
    }
    s->type_name = PyBytes_AS_STRING(PyTuple_GET_ITEM(spec, 0));
    s->type_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(spec, 0));
    long long *fields[7] = {&s->version_int, &s->group_string, &s->key_branch, &s->value_branch,
                            &s->tags_null, &s->txn_null, &s->schema_version};
    for (int k = 0; k < 7; k++) {
        *fields[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, k + 1));
        if (*fields[k] == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (*fields[k] < 0) {
            PyErr_SetString(PyExc_ValueError, "encode_commits_avro: negative spec value");
            return -1;
        }
    }
    return 0;
}

/* an Avro int or long (zigzag varint: an int's 32-bit zigzag is the same bytes as the
 * 64-bit one of the same value); 10 bytes reserved by the caller */
static inline void
avro_long(Json *out, int64_t value)
{
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    char *p = out->buf + out->len;
    while (z > 0x7F) {
        *p++ = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    out->len = (size_t)(p - out->buf);
}

/* an Avro string: its length, then its bytes; reserves its own room and 128 bytes after */
static inline int
avro_str(Json *out, const void *s, size_t n)
{
    if (json_reserve(out, n + 10 + 128) < 0) {
        return -1;
    }
    avro_long(out, (int64_t)n);
    memcpy(out->buf + out->len, s, n);
    out->len += n;
    return 0;
}

/* `header` then the Avro body of the commit's canonical record, as bytes */
static PyObject *
record_avro(Json *out, const Commit *c, const AvroSpec *s, const char *header,
            Py_ssize_t header_len)
{
    out->len = 0;
    if (json_reserve(out, (size_t)header_len + 128) < 0) {
        return NULL;
    }
    memcpy(out->buf, header, (size_t)header_len);
    out->len = (size_t)header_len;
    /* type, key_type, value_version (int branch), tombstone, newer_version, partition,
     * offset, timestamp */
    if (avro_str(out, s->type_name, (size_t)s->type_len) < 0) {
        return NULL;
    }
    avro_long(out, c->key_type);
    avro_long(out, s->version_int);
    avro_long(out, c->version);
    out->buf[out->len++] = 0; /* false */
    out->buf[out->len++] = 0; /* false */
    avro_long(out, c->partition);
    avro_long(out, c->position);
    avro_long(out, c->timestamp);
    /* group (string branch) */
    avro_long(out, s->group_string);
    if (avro_str(out, c->group, c->group_len) < 0) {
        return NULL;
    }
    /* key: OffsetCommitKey {group, topic, partition} */
    avro_long(out, s->key_branch);
    if (avro_str(out, c->group, c->group_len) < 0 || avro_str(out, c->topic, c->topic_len) < 0) {
        return NULL;
    }
    avro_long(out, c->key_partition);
    /* value: OffsetCommitValue {offset, leader_epoch, metadata, commit_timestamp,
     * expire_timestamp, topic_id, unknown_tags (null branch)} */
    avro_long(out, s->value_branch);
    avro_long(out, c->offset);
    avro_long(out, c->epoch);
    if (avro_str(out, c->meta, c->meta_len) < 0 || json_reserve(out, 128) < 0) {
        return NULL;
    }
    avro_long(out, c->commit_ts);
    avro_long(out, c->expire_ts);
    avro_long(out, UUID_TEXT_LEN);
    if (c->topic_id == NULL) {
        memset(out->buf + out->len, 'A', UUID_TEXT_LEN); /* the zero UUID's text */
        out->len += UUID_TEXT_LEN;
    }
    else {
        out->len = (size_t)(uuid_text(out->buf + out->len, c->topic_id) - out->buf);
    }
    avro_long(out, s->tags_null);
    /* transaction (null branch), schema_version */
    avro_long(out, s->txn_null);
    avro_long(out, s->schema_version);
    return PyBytes_FromStringAndSize(out->buf, (Py_ssize_t)out->len);
}

PyDoc_STRVAR(encode_commits_avro_doc,
"encode_commits_avro(messages, items, start, spec, header, out) -> int\n\n"
"For k from `start` while messages[k] is an offset commit encode_commits covers, append\n"
"(partition, offset, timestamp, identity key, header + Avro body) to `out`, the first four\n"
"taken from items[k] (encode_commits' tuple of the same message); returns the first k not\n"
"encoded (len(items) when all were). The body is what AvroCodec.encode writes for the\n"
"record's canonical dict; `spec` is decoder.avro.commit_branches' tuple.");

static PyObject *
encode_commits_avro(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) ||
        !PyBytes_CheckExact(args[4]) || !PyList_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_commits_avro(list, list, int, tuple, bytes, list) expected");
        return NULL;
    }
    PyObject *messages = args[0], *items = args[1], *out = args[5];
    Py_ssize_t k = PyLong_AsSsize_t(args[2]);
    if (k == -1 && PyErr_Occurred()) {
        return NULL;
    }
    AvroSpec spec;
    if (parse_avro_spec(args[3], &spec) < 0) {
        return NULL;
    }
    const char *header = PyBytes_AS_STRING(args[4]);
    Py_ssize_t header_len = PyBytes_GET_SIZE(args[4]);
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (PyList_GET_SIZE(messages) < n) {
        n = PyList_GET_SIZE(messages);
    }
    Json buf = {0};
    int failed = 0;
    for (; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(items, k);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 5) {
            PyErr_SetString(PyExc_TypeError, "encode_commits_avro: not an encoded item");
            failed = 1;
            break;
        }
        PyObject *message = PyList_GET_ITEM(messages, k);
        PyObject *key = call(message, s_key);
        if (key == NULL) {
            failed = 1;
            break;
        }
        PyObject *value = call(message, s_value);
        if (value == NULL) {
            Py_DECREF(key);
            failed = 1;
            break;
        }
        Commit c;
        int covered = parse_commit(key, value, &c);
        PyObject *body = NULL, *made = NULL;
        if (covered) {
            c.partition = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
            c.position = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
            c.timestamp = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
            if (PyErr_Occurred() || (body = record_avro(&buf, &c, &spec, header, header_len)) == NULL ||
                (made = PyTuple_Pack(5, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1),
                                     PyTuple_GET_ITEM(item, 2), PyTuple_GET_ITEM(item, 3),
                                     body)) == NULL ||
                PyList_Append(out, made) < 0) {
                failed = 1;
            }
        }
        Py_XDECREF(made);
        Py_XDECREF(body);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed || !covered) {
            break;
        }
    }
    PyMem_Free(buf.buf);
    if (failed) {
        return NULL;
    }
    return PyLong_FromSsize_t(k);
}

/* ------------------------------------------------------------------------------------------
 * produce_encoded: the publisher's produce loop over encoded commits */

static PyObject *s_headers_kw, *s_on_delivery_kw;

PyDoc_STRVAR(produce_encoded_doc,
"produce_encoded(produce, topic, items, start, end, head, name, tail, on_delivery[, prefix])\n"
"    -> (int, exc)\n\n"
"produce(topic, value, key, headers=[*head, (name, prefix + b'<offset>'), *tail],\n"
"on_delivery=on_delivery) for items[start:end] (encode_commits' tuples), in order (name\n"
"None: no headers at all, head and tail empty); returns the index of the first item not\n"
"produced (end when all were) and the exception that stopped there (None when none did):\n"
"the caller decides (a BufferError is waited out).");

static PyObject *
produce_encoded(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 9 && nargs != 10) || !PyList_CheckExact(args[2]) ||
        !PyTuple_CheckExact(args[5]) || !PyTuple_CheckExact(args[7]) ||
        (nargs == 10 && !PyBytes_CheckExact(args[9])) ||
        (args[6] == Py_None && (PyTuple_GET_SIZE(args[5]) || PyTuple_GET_SIZE(args[7])))) {
        PyErr_SetString(PyExc_TypeError, "produce_encoded(callable, str, list, int, int, "
                                         "tuple, str | None, tuple, callable[, bytes]) expected");
        return NULL;
    }
    PyObject *produce = args[0], *topic = args[1], *items = args[2], *head = args[5];
    PyObject *offset_name = args[6], *tail = args[7], *on_delivery = args[8];
    const char *prefix = nargs == 10 ? PyBytes_AS_STRING(args[9]) : "";
    Py_ssize_t n_prefix = nargs == 10 ? PyBytes_GET_SIZE(args[9]) : 0;
    /* the value is built in a stack buffer; a longer prefix than any topic and cluster id
     * make is the caller's mistake */
    if (n_prefix > 480) {
        PyErr_SetString(PyExc_ValueError, "produce_encoded: header prefix too long");
        return NULL;
    }
    int no_headers = offset_name == Py_None;
    Py_ssize_t i = PyLong_AsSsize_t(args[3]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[4]);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (end > PyList_GET_SIZE(items)) {
        end = PyList_GET_SIZE(items);
    }
    Py_ssize_t n_head = PyTuple_GET_SIZE(head), n_tail = PyTuple_GET_SIZE(tail);
    PyObject *kwnames = no_headers ? PyTuple_Pack(1, s_on_delivery_kw)
                                   : PyTuple_Pack(2, s_headers_kw, s_on_delivery_kw);
    if (kwnames == NULL) {
        return NULL;
    }
    PyObject *stopped = NULL;
    for (; i < end; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 5) {
            PyErr_SetString(PyExc_TypeError, "produce_encoded: not an encoded item");
            break;
        }
        long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        if (offset == -1 && PyErr_Occurred()) {
            break;
        }
        if (no_headers) {
            PyObject *call_args[4] = {topic, PyTuple_GET_ITEM(item, 4), PyTuple_GET_ITEM(item, 3),
                                      on_delivery};
            PyObject *done = PyObject_Vectorcall(produce, call_args, 3, kwnames);
            if (done == NULL) {
                break;
            }
            Py_DECREF(done);
            continue;
        }
        char digits[512];
        memcpy(digits, prefix, (size_t)n_prefix);
        int len = snprintf(digits + n_prefix, sizeof digits - (size_t)n_prefix, "%lld", offset);
        PyObject *headers = PyList_New(n_head + 1 + n_tail);
        PyObject *text = PyBytes_FromStringAndSize(digits, n_prefix + len);
        PyObject *pair = text == NULL ? NULL : PyTuple_Pack(2, offset_name, text);
        Py_XDECREF(text);
        if (headers == NULL || pair == NULL) {
            Py_XDECREF(headers);
            Py_XDECREF(pair);
            break;
        }
        for (Py_ssize_t k = 0; k < n_head; k++) {
            PyList_SET_ITEM(headers, k, Py_NewRef(PyTuple_GET_ITEM(head, k)));
        }
        PyList_SET_ITEM(headers, n_head, pair);
        for (Py_ssize_t k = 0; k < n_tail; k++) {
            PyList_SET_ITEM(headers, n_head + 1 + k, Py_NewRef(PyTuple_GET_ITEM(tail, k)));
        }
        /* produce(topic, value, key, headers=..., on_delivery=...) */
        PyObject *call_args[5] = {topic, PyTuple_GET_ITEM(item, 4), PyTuple_GET_ITEM(item, 3),
                                  headers, on_delivery};
        PyObject *done = PyObject_Vectorcall(produce, call_args, 3, kwnames);
        Py_DECREF(headers);
        if (done == NULL) {
            break;
        }
        Py_DECREF(done);
    }
    Py_DECREF(kwnames);
    if (i < end) {
        if (!PyErr_Occurred()) {
            return NULL; /* cannot happen: every break above sets an exception */
        }
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value == NULL) {
            value = Py_NewRef(Py_None);
        }
        else if (tb != NULL) {
            PyException_SetTraceback(value, tb);
        }
        Py_XDECREF(type);
        Py_XDECREF(tb);
        stopped = value;
    }
    else {
        stopped = Py_NewRef(Py_None);
    }
    PyObject *result = Py_BuildValue("(nN)", i, stopped);
    return result;
}

/* ------------------------------------------------------------------------------------------
 * join_lines: one archive block of encoded commits */

PyDoc_STRVAR(join_lines_doc,
"join_lines(items, start, bucket, hour_ms, now_ms, limit, unsynced[, newline])\n"
"    -> (end, bytes)\n\n"
"The canonical JSON lines (each + b'\\n') of items[start:end] (encode_commits' tuples;\n"
"with newline false, the items' bodies as they are: an Avro block's records):\n"
"from `start`, while an item's timestamp (now_ms when negative) // hour_ms is `bucket`,\n"
"up to the item that takes the block to `limit` bytes (at least one item). unsynced[p] is\n"
"set to the offset of the block's first item of partition p >= 0 where it has none, as\n"
"ArchiveWriter.write_encoded's Python loop does.");

static PyObject *
join_lines(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 7 && nargs != 8) || !PyList_CheckExact(args[0]) ||
        !PyDict_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "join_lines(list, int, int, int, int, int, dict[, bool]) expected");
        return NULL;
    }
    int newline = nargs == 8 ? PyObject_IsTrue(args[7]) : 1;
    if (newline < 0) {
        return NULL;
    }
    PyObject *items = args[0], *unsynced = args[6];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    long long bucket = PyLong_AsLongLong(args[2]);
    long long hour_ms = PyLong_AsLongLong(args[3]);
    long long now_ms = PyLong_AsLongLong(args[4]);
    long long limit = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (hour_ms <= 0) {
        PyErr_SetString(PyExc_ValueError, "join_lines: hour_ms must be positive");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items), end = start;
    long long size = 0;
    /* the block's extent, and the first offset per partition */
    while (end < n) {
        PyObject *item = PyList_GET_ITEM(items, end);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 5 ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 4))) {
            PyErr_SetString(PyExc_TypeError, "join_lines: not an encoded item");
            return NULL;
        }
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        long long partition = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
        if (PyErr_Occurred()) {
            return NULL;
        }
        if (ts < 0) {
            ts = now_ms;
        }
        if (ts / hour_ms != bucket) {
            break;
        }
        size += PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 4)) + newline;
        if (partition >= 0) {
            PyObject *key = PyTuple_GET_ITEM(item, 0);
            int has = PyDict_Contains(unsynced, key);
            if (has < 0 ||
                (!has && PyDict_SetItem(unsynced, key, PyTuple_GET_ITEM(item, 1)) < 0)) {
                return NULL;
            }
        }
        end++;
        if (size >= limit) {
            break;
        }
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (data == NULL) {
        return NULL;
    }
    char *p = PyBytes_AS_STRING(data);
    for (Py_ssize_t k = start; k < end; k++) {
        PyObject *body = PyTuple_GET_ITEM(PyList_GET_ITEM(items, k), 4);
        Py_ssize_t len = PyBytes_GET_SIZE(body);
        memcpy(p, PyBytes_AS_STRING(body), (size_t)len);
        p += len;
        if (newline) {
            *p++ = '\n';
        }
    }
    return Py_BuildValue("(nN)", end, data);
}

static PyMethodDef methods[] = {
    {"join_lines", (PyCFunction)(void (*)(void))join_lines, METH_FASTCALL, join_lines_doc},
    {"produce_encoded", (PyCFunction)(void (*)(void))produce_encoded, METH_FASTCALL,
     produce_encoded_doc},
    {"encode_commits", (PyCFunction)(void (*)(void))encode_commits, METH_FASTCALL,
     encode_commits_doc},
    {"encode_commits_avro", (PyCFunction)(void (*)(void))encode_commits_avro, METH_FASTCALL,
     encode_commits_avro_doc},
    {"apply_commits", (PyCFunction)(void (*)(void))apply_commits, METH_FASTCALL,
     apply_commits_doc},
    {"split_batch", (PyCFunction)(void (*)(void))split_batch, METH_FASTCALL, split_batch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_ingest_speedups",
    "C accelerator of the exporter's ingest (exporter/state/_ingest_speedups.c).", -1, methods,
};

#ifndef OFFSETWATCH_SPEEDUPS_SOURCE
#define OFFSETWATCH_SPEEDUPS_SOURCE ""
#endif

PyMODINIT_FUNC
PyInit__ingest_speedups(void)
{
    struct {
        PyObject **target;
        const char *name;
    } names[] = {
        {&s_key, "key"}, {&s_value, "value"}, {&s_partition, "partition"},
        {&s_offset, "offset"}, {&s_timestamp, "timestamp"}, {&s_error, "error"},
        {&s_topics, "topics"}, {&s_commits_total, "commits_total"},
        {&s_last_record_ts, "last_record_ts"}, {&s_metadata, "metadata"}, {&s_grow, "_grow"},
        {&empty_str, ""}, {&s_headers_kw, "headers"}, {&s_on_delivery_kw, "on_delivery"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        if (*names[k].target == NULL) {
            *names[k].target = PyUnicode_InternFromString(names[k].name);
            if (*names[k].target == NULL) {
                return NULL;
            }
        }
    }
    for (int k = 0; k < T_COUNT; k++) {
        if (column_names[k] == NULL) {
            column_names[k] = PyUnicode_InternFromString(COLUMN_NAMES[k]);
            if (column_names[k] == NULL) {
                return NULL;
            }
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
