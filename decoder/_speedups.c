/*
 * decoder._speedups: an optional C accelerator of decoder.codec.Codec.decode / decode_many.
 *
 * It covers the hot path of `__consumer_offsets` and nothing else:
 *
 *   - key types 0/1 (offset commits): the key (decoded and put into the Codec's key cache on
 *     a miss) and the non-flexible OffsetCommitValue versions 0-3;
 *   - key type 2 (classic group metadata): the non-flexible GroupMetadataValue versions 0-3
 *     with their MemberMetadata arrays (subscription/assignment stay bytes);
 *   - tombstones of any cached key.
 *
 * Anything else - another key type, a flexible or unknown version, a wrong length, a
 * negative length where none is allowed, invalid UTF-8 (Python keeps such bytes with
 * surrogateescape), trailing bytes, a type other than bytes - returns None, and the caller
 * runs the pure-Python path, which is the reference: it produces the same record or the
 * DecodeError. This module never raises DecodeError itself and never reads a byte it has not
 * checked is there.
 *
 * Objects are built the way decoder.codegen builds them (no frozen __init__, no
 * __setattr__): allocated with the class's tp_alloc, then every slot is stored at the offset
 * of its member descriptor. `configure()` receives the classes and the defaults from Python,
 * which also checks that the layouts are the ones this file reads (decoder/codec.py). Keys,
 * commit values, members and group values hold only str/bytes/int/None/NO_TAGS, so they are
 * untracked by the cyclic GC, as CPython does for tuples of such values (the collector
 * otherwise re-walks the ~10,000 members of a batch of group metadata again and again).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "_wire.h" /* be16/be32/be64, shared with the exporter's modules */

#ifdef Py_T_OBJECT_EX
#define SLOT_MEMBER_TYPE Py_T_OBJECT_EX
#else
#define SLOT_MEMBER_TYPE T_OBJECT_EX
#endif
#ifdef Py_READONLY
#define SLOT_READONLY Py_READONLY
#else
#define SLOT_READONLY READONLY
#endif

/* ------------------------------------------------------------------------------------------
 * Classes and their slot offsets */

typedef struct {
    const char *const *names;
    int count;
    PyTypeObject *type;
    Py_ssize_t offsets[12];
} ClassInfo;

static const char *const RECORD_SLOTS[] = {
    "key_type", "key", "value_version", "value", "partition", "offset", "timestamp",
};
enum { R_KEY_TYPE, R_KEY, R_VERSION, R_VALUE, R_PARTITION, R_OFFSET, R_TIMESTAMP, R_COUNT };

static const char *const KEY_SLOTS[] = {"group", "topic", "partition"};
enum { K_GROUP, K_TOPIC, K_PARTITION, K_COUNT };

static const char *const COMMIT_SLOTS[] = {
    "offset", "leader_epoch", "metadata", "commit_timestamp",
    "expire_timestamp", "topic_id", "tags",
};
enum { C_OFFSET, C_EPOCH, C_METADATA, C_COMMIT_TS, C_EXPIRE_TS, C_TOPIC_ID, C_TAGS, C_COUNT };

static const char *const MEMBER_SLOTS[] = {
    "member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout",
    "session_timeout", "subscription", "assignment", "tags",
};
enum {
    M_MEMBER_ID, M_INSTANCE_ID, M_CLIENT_ID, M_CLIENT_HOST, M_REBALANCE, M_SESSION,
    M_SUBSCRIPTION, M_ASSIGNMENT, M_TAGS, M_COUNT
};

static const char *const GROUP_SLOTS[] = {
    "protocol_type", "generation", "protocol", "leader", "current_state_timestamp",
    "members", "tags",
};
enum { G_PROTOCOL_TYPE, G_GENERATION, G_PROTOCOL, G_LEADER, G_STATE_TS, G_MEMBERS, G_TAGS, G_COUNT };

static ClassInfo record_info = {RECORD_SLOTS, R_COUNT, NULL, {0}};
static ClassInfo key_info = {KEY_SLOTS, K_COUNT, NULL, {0}};
static ClassInfo commit_info = {COMMIT_SLOTS, C_COUNT, NULL, {0}};
static ClassInfo member_info = {MEMBER_SLOTS, M_COUNT, NULL, {0}};
static ClassInfo group_info = {GROUP_SLOTS, G_COUNT, NULL, {0}};

/* decoder.segments._RecordSlots; objects are made as its subclass RawRecord, which adds no
 * slots (the Python hot loop switches __class__ instead) */
static const char *const RAW_SLOTS[] = {
    "offset", "timestamp", "key", "value", "headers", "sequence", "producer_id",
    "is_transactional",
};
enum { W_OFFSET, W_TIMESTAMP, W_KEY, W_VALUE, W_HEADERS, W_SEQUENCE, W_PRODUCER, W_TXN, W_COUNT };
static ClassInfo raw_info = {RAW_SLOTS, W_COUNT, NULL, {0}};
static PyTypeObject *raw_record_type; /* RawRecord */
static PyObject *raw_empty_headers;   /* segments._EMPTY_HEADERS */

/* defaults of the fields a version does not carry (objects from decoder.layout) */
static PyObject *no_tags;             /* Tags() of every non-flexible struct */
static PyObject *commit_epoch_default; /* OffsetCommitValue.leader_epoch before v3 */
static PyObject *commit_expire_default;
static PyObject *commit_topic_id_default;
static PyObject *member_instance_default; /* MemberMetadata.group_instance_id before v3 */
static PyObject *member_rebalance_default;
static PyObject *group_state_ts_default; /* GroupMetadataValue.current_state_timestamp < v2 */
static int configured;

/* Find the offsets of `info->names` among the object slots of `type`, which must have
 * exactly those slots (so that every slot of a built object is filled). */
static int
load_class(ClassInfo *info, PyObject *obj)
{
    if (!PyType_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "configure() expects classes");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)obj;
    /* a class of its own (no inherited slots), collected by the cyclic GC, fixed size */
    if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(type->tp_flags & Py_TPFLAGS_HAVE_GC) ||
        type->tp_base != &PyBaseObject_Type || type->tp_members == NULL ||
        type->tp_alloc == NULL || type->tp_itemsize != 0) {
        PyErr_Format(PyExc_TypeError, "%s is not a plain slots class", type->tp_name);
        return -1;
    }
    int found[12] = {0};
    int object_slots = 0;
    for (PyMemberDef *m = type->tp_members; m->name != NULL; m++) {
        if (m->type != SLOT_MEMBER_TYPE) {
            continue;
        }
        object_slots++;
        for (int i = 0; i < info->count; i++) {
            if (strcmp(m->name, info->names[i]) == 0) {
                if (found[i] || (m->flags & SLOT_READONLY) ||
                    m->offset < (Py_ssize_t)sizeof(PyObject) ||
                    m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
                    PyErr_Format(PyExc_TypeError, "%s.%s is not a plain slot", type->tp_name,
                                 m->name);
                    return -1;
                }
                found[i] = 1;
                info->offsets[i] = m->offset;
            }
        }
    }
    for (int i = 0; i < info->count; i++) {
        if (!found[i]) {
            PyErr_Format(PyExc_TypeError, "%s has no slot %s", type->tp_name, info->names[i]);
            return -1;
        }
    }
    if (object_slots != info->count) {
        PyErr_Format(PyExc_TypeError, "%s has %d slots, expected %d", type->tp_name,
                     object_slots, info->count);
        return -1;
    }
    Py_INCREF(type);
    Py_XSETREF(info->type, type);
    return 0;
}

/* Store `v` (a new reference, stolen) into slot `i` of a freshly allocated `obj`. */
#define SET_SLOT(info, obj, i, v) (*(PyObject **)((char *)(obj) + (info).offsets[i]) = (v))

static inline PyObject *
alloc(ClassInfo *info)
{
    return info->type->tp_alloc(info->type, 0);
}

static inline PyObject *
newref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}

/* ------------------------------------------------------------------------------------------
 * Big-endian readers over a checked cursor. Every read checks what is left first. */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Cursor;

#define LEFT(c) ((Py_ssize_t)((c)->end - (c)->p))

/* results of the field readers */
#define OK 1
#define BAIL 0   /* not this module's business: the Python path decides */
#define FAIL -1  /* a Python exception is set (MemoryError...) */

static inline int
read_i32(Cursor *c, PyObject **out)
{
    if (LEFT(c) < 4) {
        return BAIL;
    }
    *out = PyLong_FromLong(be32(c->p));
    c->p += 4;
    return *out == NULL ? FAIL : OK;
}

/* The int of the last value read at one place: timeouts, epochs and generations repeat from
 * one struct to the next, and an int shared by equal values is the same int to Python. */
typedef struct {
    int32_t value;
    PyObject *obj;
} IntMemo;

static IntMemo epoch_memo, rebalance_memo, session_memo;

static inline int
read_i32_memo(Cursor *c, PyObject **out, IntMemo *memo)
{
    if (LEFT(c) < 4) {
        return BAIL;
    }
    int32_t v = be32(c->p);
    c->p += 4;
    if (memo->obj == NULL || memo->value != v) {
        PyObject *obj = PyLong_FromLong(v);
        if (obj == NULL) {
            return FAIL;
        }
        Py_XSETREF(memo->obj, obj);
        memo->value = v;
    }
    *out = newref(memo->obj);
    return OK;
}

static inline int
read_i64(Cursor *c, PyObject **out)
{
    if (LEFT(c) < 8) {
        return BAIL;
    }
    *out = PyLong_FromLongLong(be64(c->p));
    c->p += 8;
    return *out == NULL ? FAIL : OK;
}

/* int16 length + strict UTF-8; -1 is None where `nullable`, any other negative bails */
static inline int
read_string(Cursor *c, PyObject **out, int nullable)
{
    if (LEFT(c) < 2) {
        return BAIL;
    }
    Py_ssize_t n = be16(c->p);
    c->p += 2;
    if (n < 0) {
        if (nullable && n == -1) {
            *out = newref(Py_None);
            return OK;
        }
        return BAIL;
    }
    if (LEFT(c) < n) {
        return BAIL;
    }
    *out = PyUnicode_DecodeUTF8((const char *)c->p, n, NULL);
    if (*out == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* Python keeps invalid bytes with surrogateescape */
            return BAIL;
        }
        return FAIL;
    }
    c->p += n;
    return OK;
}

/* int32 length + raw bytes, not nullable */
static inline int
read_bytes(Cursor *c, PyObject **out)
{
    if (LEFT(c) < 4) {
        return BAIL;
    }
    Py_ssize_t n = be32(c->p);
    c->p += 4;
    if (n < 0 || LEFT(c) < n) {
        return BAIL;
    }
    *out = PyBytes_FromStringAndSize((const char *)c->p, n);
    if (*out == NULL) {
        return FAIL;
    }
    c->p += n;
    return OK;
}

/* run a reader; on anything but OK jump to `done` with `status` holding the result */
#define READ(call)          \
    do {                    \
        status = (call);    \
        if (status != OK) { \
            goto done;      \
        }                   \
    } while (0)

static void
clear_fields(PyObject **fields, int count)
{
    for (int i = 0; i < count; i++) {
        Py_CLEAR(fields[i]);
    }
}

/* Build an object of `info` from `fields` (new references, all set; stolen). */
static PyObject *
build(ClassInfo *info, PyObject **fields)
{
    PyObject *obj = alloc(info);
    if (obj == NULL) {
        clear_fields(fields, info->count);
        return NULL;
    }
    for (int i = 0; i < info->count; i++) {
        SET_SLOT(*info, obj, i, fields[i]);
        fields[i] = NULL;
    }
    return obj;
}

/* An object the cyclic GC need not look at: it refers to nothing it could be in a cycle
 * with. str/bytes/int/None are atomic; NO_TAGS holds two empty tuples; an untracked member
 * or tuple of members is one this module (or, for the tuple, CPython) found to hold only
 * such values. */
static inline int
is_leaf(PyObject *o)
{
    return o == Py_None || o == no_tags || PyUnicode_CheckExact(o) || PyLong_CheckExact(o) ||
           PyBytes_CheckExact(o) ||
           ((Py_IS_TYPE(o, member_info.type) || PyTuple_CheckExact(o)) &&
            !PyObject_GC_IsTracked(o));
}

/* Untrack a freshly built frozen struct whose slots are all leaves, the way CPython untracks
 * tuples and dicts of atomic values: the collector then never traverses the thousands of
 * members a batch of group metadata holds. (Only object.__setattr__, which the frozen
 * dataclass forbids, could make such an object part of a cycle.) */
static inline void
untrack_leaf(ClassInfo *info, PyObject *obj)
{
    for (int i = 0; i < info->count; i++) {
        if (!is_leaf(*(PyObject **)((char *)obj + info->offsets[i]))) {
            return;
        }
    }
    PyObject_GC_UnTrack(obj);
}

/* ------------------------------------------------------------------------------------------
 * Values */

/* OffsetCommitValue, versions 0-3 (not flexible). `*out` is set when OK. */
static int
parse_commit(Cursor *c, int version, PyObject **out)
{
    PyObject *f[C_COUNT] = {NULL};
    int status;
    READ(read_i64(c, &f[C_OFFSET]));
    if (version >= 3) {
        READ(read_i32_memo(c, &f[C_EPOCH], &epoch_memo));
    }
    else {
        f[C_EPOCH] = newref(commit_epoch_default);
    }
    READ(read_string(c, &f[C_METADATA], 0));
    READ(read_i64(c, &f[C_COMMIT_TS]));
    if (version == 1) {
        READ(read_i64(c, &f[C_EXPIRE_TS]));
    }
    else {
        f[C_EXPIRE_TS] = newref(commit_expire_default);
    }
    if (c->p != c->end) {
        status = BAIL; /* trailing bytes */
        goto done;
    }
    f[C_TOPIC_ID] = newref(commit_topic_id_default);
    f[C_TAGS] = newref(no_tags);
    *out = build(&commit_info, f);
    if (*out == NULL) {
        return FAIL;
    }
    untrack_leaf(&commit_info, *out);
    return OK;
done:
    clear_fields(f, C_COUNT);
    return status;
}

/* One MemberMetadata of a GroupMetadataValue, versions 0-3 (not flexible). */
static int
parse_member(Cursor *c, int version, PyObject **out)
{
    PyObject *f[M_COUNT] = {NULL};
    int status;
    READ(read_string(c, &f[M_MEMBER_ID], 0));
    if (version >= 3) {
        READ(read_string(c, &f[M_INSTANCE_ID], 1));
    }
    else {
        f[M_INSTANCE_ID] = newref(member_instance_default);
    }
    READ(read_string(c, &f[M_CLIENT_ID], 0));
    READ(read_string(c, &f[M_CLIENT_HOST], 0));
    if (version >= 1) {
        READ(read_i32_memo(c, &f[M_REBALANCE], &rebalance_memo));
    }
    else {
        f[M_REBALANCE] = newref(member_rebalance_default);
    }
    READ(read_i32_memo(c, &f[M_SESSION], &session_memo));
    READ(read_bytes(c, &f[M_SUBSCRIPTION]));
    READ(read_bytes(c, &f[M_ASSIGNMENT]));
    f[M_TAGS] = newref(no_tags);
    *out = build(&member_info, f);
    if (*out == NULL) {
        return FAIL;
    }
    untrack_leaf(&member_info, *out);
    return OK;
done:
    clear_fields(f, M_COUNT);
    return status;
}

/* GroupMetadataValue, versions 0-3 (not flexible). */
static int
parse_group(Cursor *c, int version, PyObject **out)
{
    PyObject *f[G_COUNT] = {NULL};
    int status;
    READ(read_string(c, &f[G_PROTOCOL_TYPE], 0));
    READ(read_i32(c, &f[G_GENERATION]));
    READ(read_string(c, &f[G_PROTOCOL], 1));
    READ(read_string(c, &f[G_LEADER], 1));
    if (version >= 2) {
        READ(read_i64(c, &f[G_STATE_TS]));
    }
    else {
        f[G_STATE_TS] = newref(group_state_ts_default);
    }
    if (LEFT(c) < 4) {
        status = BAIL;
        goto done;
    }
    Py_ssize_t n = be32(c->p);
    c->p += 4;
    /* not nullable; every member takes more than one byte, so a count above the bytes left
     * is a lie (and no reason to allocate) */
    if (n < 0 || n > LEFT(c)) {
        status = BAIL;
        goto done;
    }
    PyObject *members = PyTuple_New(n);
    if (members == NULL) {
        status = FAIL;
        goto done;
    }
    f[G_MEMBERS] = members;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *member = NULL;
        READ(parse_member(c, version, &member));
        PyTuple_SET_ITEM(members, i, member);
    }
    if (c->p != c->end) {
        status = BAIL;
        goto done;
    }
    /* a tuple of untracked members is one CPython's collector would untrack itself (n == 0
     * is the shared empty tuple: left alone) */
    if (n > 0) {
        int leaves = 1;
        for (Py_ssize_t i = 0; i < n && leaves; i++) {
            leaves = is_leaf(PyTuple_GET_ITEM(members, i));
        }
        if (leaves) {
            PyObject_GC_UnTrack(members);
        }
    }
    f[G_TAGS] = newref(no_tags);
    *out = build(&group_info, f);
    if (*out == NULL) {
        return FAIL;
    }
    untrack_leaf(&group_info, *out);
    return OK;
done:
    clear_fields(f, G_COUNT);
    return status;
}

/* ------------------------------------------------------------------------------------------
 * Keys and records */

/* OffsetCommitKey of key types 0/1: the bytes after the int16 type must be exactly
 * group (string), topic (string), partition (int32). */
static int
parse_commit_key(const unsigned char *b, Py_ssize_t n, PyObject **out)
{
    PyObject *f[K_COUNT] = {NULL};
    int status;
    Cursor c = {b + 2, b + n};
    READ(read_string(&c, &f[K_GROUP], 0));
    READ(read_string(&c, &f[K_TOPIC], 0));
    READ(read_i32(&c, &f[K_PARTITION]));
    if (c.p != c.end) {
        status = BAIL;
        goto done;
    }
    *out = build(&key_info, f);
    if (*out == NULL) {
        return FAIL;
    }
    untrack_leaf(&key_info, *out);
    return OK;
done:
    clear_fields(f, K_COUNT);
    return status;
}

/* The decoded key of `key`: from the cache, or (offset commit keys only) decoded and cached
 * the way Codec._cache_key does (the cache is cleared when it holds `limit` keys). */
static int
lookup_key(PyObject *cache, PyObject *limit, PyObject *key, PyObject **out)
{
    PyObject *found = PyDict_GetItemWithError(cache, key);
    if (found != NULL) {
        *out = newref(found);
        return OK;
    }
    if (PyErr_Occurred()) {
        return FAIL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(key);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(key);
    if (n < 2 || b[0] != 0 || b[1] > 1) {
        return BAIL;
    }
    Py_ssize_t max_size = PyLong_AsSsize_t(limit);
    if (max_size == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return BAIL;
    }
    PyObject *key_obj = NULL;
    int status = parse_commit_key(b, n, &key_obj);
    if (status != OK) {
        return status;
    }
    if (PyDict_GET_SIZE(cache) >= max_size) {
        PyDict_Clear(cache);
    }
    if (PyDict_SetItem(cache, key, key_obj) < 0) {
        Py_DECREF(key_obj);
        return FAIL;
    }
    *out = key_obj;
    return OK;
}

/* The whole of Codec.decode for what this module covers: a new Record, Py_None (borrowed,
 * not a new reference) to let the Python path decide, or NULL with an exception set. */
static PyObject *
decode_one(PyObject *cache, PyObject *limit, PyObject *key, PyObject *value,
           PyObject *partition, PyObject *offset, PyObject *timestamp)
{
    if (!PyBytes_CheckExact(key) || (value != Py_None && !PyBytes_CheckExact(value))) {
        return Py_None;
    }
    PyObject *key_obj = NULL;
    int status = lookup_key(cache, limit, key, &key_obj);
    if (status != OK) {
        return status == FAIL ? NULL : Py_None;
    }
    /* a cached key is of a known type (0..255): its int16 type is its second byte */
    if (PyBytes_GET_SIZE(key) < 2 || ((const unsigned char *)PyBytes_AS_STRING(key))[0] != 0) {
        Py_DECREF(key_obj);
        return Py_None;
    }
    int key_type = ((const unsigned char *)PyBytes_AS_STRING(key))[1];
    PyObject *version_obj;
    PyObject *value_obj;
    if (value == Py_None) {
        version_obj = newref(Py_None);
        value_obj = newref(Py_None);
    }
    else {
        Py_ssize_t n = PyBytes_GET_SIZE(value);
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(value);
        if (n < 2) {
            Py_DECREF(key_obj);
            return Py_None;
        }
        int version = be16(b);
        Cursor c = {b + 2, b + n};
        value_obj = NULL;
        if (key_type <= 1 && version >= 0 && version <= 3) {
            status = parse_commit(&c, version, &value_obj);
        }
        else if (key_type == 2 && version >= 0 && version <= 3) {
            status = parse_group(&c, version, &value_obj);
        }
        else {
            status = BAIL;
        }
        if (status != OK) {
            Py_DECREF(key_obj);
            return status == FAIL ? NULL : Py_None;
        }
        version_obj = PyLong_FromLong(version);
        if (version_obj == NULL) {
            Py_DECREF(key_obj);
            Py_DECREF(value_obj);
            return NULL;
        }
    }
    PyObject *type_obj = PyLong_FromLong(key_type);
    if (type_obj == NULL) {
        Py_DECREF(key_obj);
        Py_DECREF(version_obj);
        Py_DECREF(value_obj);
        return NULL;
    }
    PyObject *f[R_COUNT] = {
        type_obj, key_obj, version_obj, value_obj,
        newref(partition), newref(offset), newref(timestamp),
    };
    return build(&record_info, f);
}

/* ------------------------------------------------------------------------------------------
 * Module functions */

PyDoc_STRVAR(decode_doc,
"decode(cache, limit, key, value, partition, offset, timestamp) -> Record | None\n\n"
"Codec.decode for what this module covers; None: run the Python path.");

static PyObject *
speedups_decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "decode() takes 7 arguments");
        return NULL;
    }
    if (!configured) {
        Py_RETURN_NONE;
    }
    if (!PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "decode(): the key cache must be a dict");
        return NULL;
    }
    PyObject *result = decode_one(args[0], args[1], args[2], args[3], args[4], args[5], args[6]);
    if (result == Py_None) {
        Py_RETURN_NONE;
    }
    return result;
}

PyDoc_STRVAR(decode_many_doc,
"decode_many(cache, limit, messages, fallback) -> list\n\n"
"Codec.decode over (key, value, partition, offset, timestamp) tuples; any message this\n"
"module does not cover (or that is not such a tuple) is fallback(message).");

static PyObject *
speedups_decode_many(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_many() takes 4 arguments");
        return NULL;
    }
    PyObject *cache = args[0], *limit = args[1], *fallback = args[3];
    if (!PyDict_CheckExact(cache)) {
        PyErr_SetString(PyExc_TypeError, "decode_many(): the key cache must be a dict");
        return NULL;
    }
    PyObject *it = PyObject_GetIter(args[2]);
    if (it == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *record = Py_None;
        if (configured && PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 5) {
            record = decode_one(cache, limit, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1),
                                PyTuple_GET_ITEM(item, 2), PyTuple_GET_ITEM(item, 3),
                                PyTuple_GET_ITEM(item, 4));
        }
        if (record == Py_None) {
            record = PyObject_CallOneArg(fallback, item);
        }
        Py_DECREF(item);
        if (record == NULL) {
            goto error;
        }
        int appended = PyList_Append(out, record);
        Py_DECREF(record);
        if (appended < 0) {
            goto error;
        }
    }
    if (PyErr_Occurred()) {
        goto error;
    }
    Py_DECREF(it);
    return out;
error:
    Py_DECREF(it);
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(configure_doc,
"configure(record, key, commit, member, group, no_tags, commit_epoch, commit_expire,\n"
"          commit_topic_id, member_instance_id, member_rebalance, group_state_ts)\n\n"
"The classes to build (Record, OffsetCommitKey, OffsetCommitValue, MemberMetadata,\n"
"GroupMetadataValue) and the defaults of the fields a version does not carry. Until it\n"
"succeeds, decode() returns None for everything.");

static PyObject *
speedups_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "configure() takes 12 arguments");
        return NULL;
    }
    configured = 0;
    if (load_class(&record_info, args[0]) < 0 || load_class(&key_info, args[1]) < 0 ||
        load_class(&commit_info, args[2]) < 0 || load_class(&member_info, args[3]) < 0 ||
        load_class(&group_info, args[4]) < 0) {
        return NULL;
    }
    PyObject **defaults[] = {
        &no_tags, &commit_epoch_default, &commit_expire_default, &commit_topic_id_default,
        &member_instance_default, &member_rebalance_default, &group_state_ts_default,
    };
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        Py_INCREF(args[5 + i]);
        Py_XSETREF(*defaults[i], args[5 + i]);
    }
    configured = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(commit_v3_lines_doc,
"commit_v3_lines(items, record_type, prefixes, others) -> list\n\n"
"kafka_json.RawCommitLines.lines: the dump-log line of each item of exactly `record_type`\n"
"(a tuple: key bytes at 3, value bytes at 4) whose value is an OffsetCommitValue v3 with\n"
"empty metadata and whose key is in `prefixes` (key -> the line up to the offset's digits);\n"
"`others(run)` for each run of the other items, in order.");

/* out += others(pending); pending is consumed */
static int
flush_others(PyObject *out, PyObject **pending, PyObject *others)
{
    PyObject *done = PyObject_CallOneArg(others, *pending);
    Py_CLEAR(*pending);
    if (done == NULL) {
        return -1;
    }
    Py_ssize_t end = PyList_GET_SIZE(out);
    int status = PyList_SetSlice(out, end, end, done);
    Py_DECREF(done);
    return status;
}

static PyObject *
speedups_commit_v3_lines(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "commit_v3_lines() takes 4 arguments");
        return NULL;
    }
    PyObject *items = args[0], *record_type = args[1], *prefixes = args[2], *others = args[3];
    if (!PyList_Check(items) || !PyType_Check(record_type) || !PyDict_Check(prefixes) ||
        !PyType_IsSubtype((PyTypeObject *)record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "commit_v3_lines(list, tuple type, dict, callable) expected");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    PyObject *pending = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (Py_TYPE(item) == (PyTypeObject *)record_type && PyTuple_GET_SIZE(item) > 4) {
            PyObject *value = PyTuple_GET_ITEM(item, 4);
            if (PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) == 24) {
                PyObject *prefix = PyDict_GetItemWithError(prefixes, PyTuple_GET_ITEM(item, 3));
                if (prefix == NULL && PyErr_Occurred()) {
                    goto fail;
                }
                const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(value);
                /* >hqihq: version, offset, leader epoch, metadata length, commit timestamp */
                if (prefix != NULL && PyUnicode_Check(prefix) && be16(b) == 3 &&
                    be16(b + 14) == 0) {
                    if (pending != NULL && flush_others(out, &pending, others) < 0) {
                        goto fail;
                    }
                    PyObject *line = PyUnicode_FromFormat(
                        "%U%lld,\"leaderEpoch\":%d,\"metadata\":\"\",\"commitTimestamp\":%lld}}}",
                        prefix, (long long)be64(b + 2), (int)be32(b + 10),
                        (long long)be64(b + 16));
                    if (line == NULL) {
                        goto fail;
                    }
                    int status = PyList_Append(out, line);
                    Py_DECREF(line);
                    if (status < 0) {
                        goto fail;
                    }
                    continue;
                }
            }
        }
        if (pending == NULL && (pending = PyList_New(0)) == NULL) {
            goto fail;
        }
        if (PyList_Append(pending, item) < 0) {
            goto fail;
        }
    }
    if (pending != NULL && flush_others(out, &pending, others) < 0) {
        goto fail;
    }
    return out;
fail:
    Py_XDECREF(pending);
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(configure_raw_records_doc,
"configure_raw_records(slots_class, record_class, empty_headers)\n\n"
"decoder.segments' _RecordSlots, RawRecord (a subclass without slots of its own) and the\n"
"headers of a record without headers, for decode_records().");

static PyObject *
speedups_configure_raw_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "configure_raw_records() takes 3 arguments");
        return NULL;
    }
    if (load_class(&raw_info, args[0]) < 0) {
        return NULL;
    }
    PyTypeObject *record = (PyTypeObject *)args[1];
    if (!PyType_Check(args[1]) || !PyType_IsSubtype(record, raw_info.type) ||
        record->tp_basicsize != raw_info.type->tp_basicsize || record->tp_dictoffset != 0 ||
        record->tp_itemsize != 0 || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_raw_records(): the record class must add no slots");
        return NULL;
    }
    Py_INCREF(record);
    Py_XSETREF(raw_record_type, record);
    Py_INCREF(args[2]);
    Py_XSETREF(raw_empty_headers, args[2]);
    Py_RETURN_NONE;
}

/* Kafka's zig-zag varint at *p (at most `max_bytes` bytes): BAIL when it is longer, runs past
 * `end`, or does not fit in 64 bits; the Python path then decides (and names the error). */
static inline int
read_zigzag(const unsigned char **p, const unsigned char *end, int max_bytes, int64_t *out)
{
    uint64_t raw = 0;
    const unsigned char *q = *p;
    for (int i = 0; i < max_bytes; i++) {
        if (q >= end) {
            return BAIL;
        }
        unsigned char b = *q++;
        if (i == 9 && (b & 0x7E)) {
            return BAIL; /* bits past the 64th */
        }
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *p = q;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return OK;
        }
    }
    return BAIL;
}

/* key or value: length -1 is None, >= 0 that many bytes */
static inline int
read_blob(const unsigned char **p, const unsigned char *end, PyObject **out)
{
    int64_t n;
    if (read_zigzag(p, end, 5, &n) != OK || n < -1 || n > end - *p) {
        return BAIL;
    }
    if (n == -1) {
        *out = newref(Py_None);
        return OK;
    }
    *out = PyBytes_FromStringAndSize((const char *)*p, (Py_ssize_t)n);
    if (*out == NULL) {
        return FAIL;
    }
    *p += n;
    return OK;
}

PyDoc_STRVAR(decode_records_doc,
"decode_records(buf, p, count, base_offset, base_ts, base_seq, producer_id, transactional)\n"
"-> list[RawRecord] | None\n\n"
"decoder.segments._decode_records_fast for records without headers; None (the Python path\n"
"decides, and names any error) for anything else.");

static PyObject *
speedups_decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "decode_records() takes 8 arguments");
        return NULL;
    }
    if (raw_record_type == NULL || !PyBytes_CheckExact(args[0])) {
        Py_RETURN_NONE;
    }
    PyObject *buf = args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    long long base_offset = PyLong_AsLongLong(args[3]);
    long long base_ts = PyLong_AsLongLong(args[4]);
    long long base_seq = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) {
        PyErr_Clear(); /* out of range for C: the Python path */
        Py_RETURN_NONE;
    }
    PyObject *producer_id = args[6], *transactional = args[7];
    Py_ssize_t size = PyBytes_GET_SIZE(buf);
    if (start < 0 || start > size || count < 0) {
        Py_RETURN_NONE;
    }
    const unsigned char *base = (const unsigned char *)PyBytes_AS_STRING(buf);
    const unsigned char *p = base + start, *end = base + size;
    long long seq_step = base_seq == -1 ? 0 : 1;
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, tsd, od;
        PyObject *key = NULL, *value = NULL;
        if (read_zigzag(&p, end, 5, &length) != OK || length < 0 || length > end - p) {
            goto bail;
        }
        const unsigned char *rend = p + length;
        p += 1; /* attributes */
        if (p > end || read_zigzag(&p, end, 10, &tsd) != OK ||
            read_zigzag(&p, end, 5, &od) != OK) {
            goto bail;
        }
        int status = read_blob(&p, end, &key);
        if (status != OK) {
            if (status == FAIL) {
                goto fail;
            }
            goto bail;
        }
        status = read_blob(&p, end, &value);
        if (status != OK) {
            Py_DECREF(key);
            if (status == FAIL) {
                goto fail;
            }
            goto bail;
        }
        /* headers: none (a count of 0), else the Python path; then the length must match */
        long long offset, timestamp, sequence;
        if (p >= end || *p != 0 || p + 1 != rend ||
            __builtin_add_overflow(base_offset, (long long)od, &offset) ||
            __builtin_add_overflow(base_ts, (long long)tsd, &timestamp) ||
            __builtin_add_overflow(base_seq, (long long)od * seq_step, &sequence)) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto bail;
        }
        p += 1;
        PyObject *f[W_COUNT] = {
            PyLong_FromLongLong(offset), PyLong_FromLongLong(timestamp), key, value,
            newref(raw_empty_headers), PyLong_FromLongLong(sequence), newref(producer_id),
            newref(transactional),
        };
        if (f[W_OFFSET] == NULL || f[W_TIMESTAMP] == NULL || f[W_SEQUENCE] == NULL) {
            clear_fields(f, W_COUNT);
            goto fail;
        }
        PyObject *record = raw_record_type->tp_alloc(raw_record_type, 0);
        if (record == NULL) {
            clear_fields(f, W_COUNT);
            goto fail;
        }
        for (int j = 0; j < W_COUNT; j++) {
            SET_SLOT(raw_info, record, j, f[j]);
        }
        PyList_SET_ITEM(out, i, record);
    }
    if (p != end) {
        goto bail;
    }
    return out;
bail:
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef speedups_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))speedups_decode, METH_FASTCALL, decode_doc},
    {"decode_many", (PyCFunction)(void (*)(void))speedups_decode_many, METH_FASTCALL,
     decode_many_doc},
    {"configure", (PyCFunction)(void (*)(void))speedups_configure, METH_FASTCALL, configure_doc},
    {"commit_v3_lines", (PyCFunction)(void (*)(void))speedups_commit_v3_lines, METH_FASTCALL,
     commit_v3_lines_doc},
    {"configure_raw_records", (PyCFunction)(void (*)(void))speedups_configure_raw_records,
     METH_FASTCALL, configure_raw_records_doc},
    {"decode_records", (PyCFunction)(void (*)(void))speedups_decode_records, METH_FASTCALL,
     decode_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "offsetwatch.decoder._speedups",
    "Optional C accelerator of decoder.codec.Codec (see decoder/_speedups.c).",
    -1,
    speedups_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

/* sha256 of this file, passed by setup.py: decoder/codec.py ignores a build whose source is
 * not the decoder/_speedups.c beside it (an editable install not rebuilt after a change) */
#ifndef OFFSETWATCH_SPEEDUPS_SOURCE
#define OFFSETWATCH_SPEEDUPS_SOURCE ""
#endif

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddStringConstant(module, "SOURCE_SHA256", OFFSETWATCH_SPEEDUPS_SOURCE) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
