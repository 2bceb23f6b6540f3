/*
 * fake_nccl.c — a libnccl stand-in for CI (selected by GPULAB_LIBNCCL), used beside the driver
 * stand-in, whose "device" memory is host memory: collectives of a single-process group really
 * combine the ranks' buffers when the group ends, so dtype and op mapping, counts and in-place
 * use are checked by values. It never claims anything about a GPU.
 *
 * What it models:
 *   ncclCommInitAll               one clique of ranks 0..n-1 (one per listed device)
 *   ncclCommInitRankConfig        checks the config's size/magic/version; non-blocking configs
 *                                 answer ncclInProgress, then ncclSuccess on the first poll
 *   collectives                   validated (type, op, count, root, comm); a single-process group
 *                                 computes at ncclGroupEnd (every rank of the clique must be in
 *                                 it); a one-rank communicator computes at once; a rank of a
 *                                 multi-process communicator only logs (its peers are elsewhere)
 *   ncclCommDestroy/ncclCommAbort a communicator used after either, or freed twice, is refused
 *                                 (ncclInvalidArgument) and logged as "bad comm"
 * Environment:
 *   GPULAB_FAKENCCL_LOG=path      one line per call
 *   GPULAB_FAKENCCL_FAIL=name:code   every call of `name` returns `code` (several, comma-separated)
 *   GPULAB_FAKENCCL_ABSENT_PEERS=1   a multi-process init never completes (peers never join)
 *   GPULAB_FAKENCCL_ASYNC_ERROR=code ncclCommGetAsyncError reports `code` once work was enqueued
 *   GPULAB_FAKENCCL_CONNECT=n     a collective on a non-blocking communicator answers ncclInProgress
 *                                 (connecting to its peers) and the next n polls say so too; -1: forever
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int res_t;
enum { OK = 0, CUDA_ERR = 1, SYS_ERR = 2, INTERNAL = 3, INVALID_ARG = 4, INVALID_USAGE = 5,
       REMOTE = 6, IN_PROGRESS = 7 };
typedef struct { char internal[128]; } unique_id;
typedef struct {
    size_t size;
    unsigned magic, version;
    int blocking;
} config_prefix;

typedef struct fake_comm {
    int rank, nranks, device, clique; /* clique: ranks made by one ncclCommInitAll, else -1 */
    bool multi_process, absent_peers, init_polled, blocking, used;
    int connecting; /* polls left that answer ncclInProgress after a collective; -1: forever */
    struct fake_comm *next;
} fake_comm;

static fake_comm *live;
static int next_clique = 1;
static char last_error[256];

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    const char *p = getenv("GPULAB_FAKENCCL_LOG");
    if (p == NULL || *p == '\0') return;
    FILE *f = fopen(p, "a");
    if (f == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* GPULAB_FAKENCCL_FAIL=name:code[,name:code]: the injected result of `name`, or OK. */
static res_t injected(const char *name) {
    const char *s = getenv("GPULAB_FAKENCCL_FAIL");
    size_t n = strlen(name);
    for (const char *p = s; p && *p;) {
        if (strncmp(p, name, n) == 0 && p[n] == ':') {
            res_t r = atoi(p + n + 1);
            snprintf(last_error, sizeof last_error, "fake failure injected into %s", name);
            logf_("fail %s %d", name, r);
            return r;
        }
        p = strchr(p, ',');
        if (p) p++;
    }
    return OK;
}

static bool is_live(const fake_comm *c) {
    for (const fake_comm *p = live; p; p = p->next)
        if (p == c) return true;
    return false;
}

static res_t bad_comm(const char *fn) {
    logf_("bad comm %s", fn);
    snprintf(last_error, sizeof last_error, "%s: the communicator is not live", fn);
    return INVALID_ARG;
}

static fake_comm *add_comm(int rank, int nranks, int device, int clique) {
    fake_comm *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    c->clique = clique;
    c->next = live;
    live = c;
    return c;
}

static void drop_comm(fake_comm *c) {
    for (fake_comm **p = &live; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            free(c);
            return;
        }
}

API res_t ncclGetVersion(int *v) {
    if (v == NULL) return INVALID_ARG;
    *v = 22809;
    return OK;
}

API const char *ncclGetErrorString(res_t r) {
    static const char *const text[] = {"no error", "unhandled cuda error (fake)", "unhandled system error (fake)",
                                       "internal error (fake)", "invalid argument (fake)", "invalid usage (fake)",
                                       "remote process exited or there was a network error (fake)",
                                       "NCCL operation in progress (fake)"};
    return r >= 0 && r <= 7 ? text[r] : "unknown result code (fake)";
}

API const char *ncclGetLastError(void *comm) {
    (void)comm;
    return last_error;
}

API res_t ncclGetUniqueId(unique_id *id) {
    res_t r = injected("ncclGetUniqueId");
    if (r != OK) return r;
    if (id == NULL) return INVALID_ARG;
    static unsigned counter;
    for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + counter);
    counter++;
    logf_("unique_id");
    return OK;
}

API res_t ncclCommInitAll(fake_comm **comms, int n, const int *devs) {
    res_t r = injected("ncclCommInitAll");
    if (r != OK) return r;
    if (comms == NULL || n < 1) return INVALID_ARG;
    int clique = next_clique++;
    for (int i = 0; i < n; i++) {
        int d = devs ? devs[i] : i;
        comms[i] = add_comm(i, n, d, clique);
        if (comms[i] == NULL) return SYS_ERR;
        logf_("init_all rank %d of %d device %d", i, n, d);
    }
    return OK;
}

API res_t ncclCommInitRankConfig(fake_comm **comm, int nranks, unique_id id, int rank, config_prefix *cfg) {
    (void)id;
    res_t r = injected("ncclCommInitRankConfig");
    if (r != OK) return r;
    if (comm == NULL || nranks < 1 || rank < 0 || rank >= nranks) return INVALID_ARG;
    if (cfg && (cfg->magic != 0xcafebeefu || cfg->size < offsetof(config_prefix, blocking) + sizeof(int) ||
                cfg->version < 21400)) {
        snprintf(last_error, sizeof last_error, "ncclConfig_t argument not initialized");
        return INVALID_ARG;
    }
    fake_comm *c = add_comm(rank, nranks, -1, -1);
    if (c == NULL) return SYS_ERR;
    c->multi_process = nranks > 1;
    const char *absent = getenv("GPULAB_FAKENCCL_ABSENT_PEERS");
    c->absent_peers = c->multi_process && absent && strcmp(absent, "1") == 0;
    c->blocking = cfg == NULL || cfg->blocking != 0;
    *comm = c;
    logf_("init_rank rank %d of %d blocking %d", rank, nranks, c->blocking ? 1 : 0);
    if (c->absent_peers && c->blocking) return REMOTE; /* cannot hang here: report it */
    return c->blocking ? OK : IN_PROGRESS;
}

API res_t ncclCommGetAsyncError(fake_comm *c, res_t *state) {
    if (!is_live(c)) return bad_comm("ncclCommGetAsyncError");
    if (state == NULL) return INVALID_ARG;
    if (c->absent_peers || c->connecting != 0) {
        if (c->connecting > 0) c->connecting--;
        *state = IN_PROGRESS;
        return OK;
    }
    const char *e = getenv("GPULAB_FAKENCCL_ASYNC_ERROR");
    if (e && *e && c->used) {
        *state = atoi(e);
        snprintf(last_error, sizeof last_error, "fake asynchronous error");
        return OK;
    }
    c->init_polled = true;
    *state = OK;
    return OK;
}

API res_t ncclCommDestroy(fake_comm *c) {
    if (!is_live(c)) return bad_comm("ncclCommDestroy");
    logf_("destroy rank %d", c->rank);
    drop_comm(c);
    return OK;
}

API res_t ncclCommAbort(fake_comm *c) {
    if (!is_live(c)) return bad_comm("ncclCommAbort");
    logf_("abort rank %d", c->rank);
    drop_comm(c);
    return OK;
}

/* ---- collectives ---------------------------------------------------------------------------- */
enum { K_ALL_REDUCE, K_BROADCAST, K_ALL_GATHER, K_REDUCE_SCATTER };
static const char *const kind_name[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};

typedef struct op_rec {
    int kind;
    fake_comm *comm;
    const void *send;
    void *recv;
    size_t count;
    int type, op, root;
} op_rec;

#define MAX_GROUP 64
static op_rec group_ops[MAX_GROUP];
static int group_n, group_depth;
static bool group_failed;

static size_t type_size(int t) {
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return t >= 0 && t <= 9 ? sizes[t] : 0;
}

static long double load(int t, const unsigned char *p) {
    switch (t) {
    case 0: return *(const int8_t *)p;
    case 1: return *(const uint8_t *)p;
    case 2: { int32_t v; memcpy(&v, p, 4); return v; }
    case 3: { uint32_t v; memcpy(&v, p, 4); return v; }
    case 4: { int64_t v; memcpy(&v, p, 8); return v; }
    case 5: { uint64_t v; memcpy(&v, p, 8); return v; }
    case 6: { _Float16 v; memcpy(&v, p, 2); return (long double)v; }
    case 7: { float v; memcpy(&v, p, 4); return v; }
    case 8: { double v; memcpy(&v, p, 8); return v; }
    default: { uint16_t h; memcpy(&h, p, 2); uint32_t b = (uint32_t)h << 16; float v; memcpy(&v, &b, 4); return v; }
    }
}

static void store(int t, unsigned char *p, long double x) {
    switch (t) {
    case 0: *(int8_t *)p = (int8_t)x; break;
    case 1: *(uint8_t *)p = (uint8_t)x; break;
    case 2: { int32_t v = (int32_t)x; memcpy(p, &v, 4); break; }
    case 3: { uint32_t v = (uint32_t)x; memcpy(p, &v, 4); break; }
    case 4: { int64_t v = (int64_t)x; memcpy(p, &v, 8); break; }
    case 5: { uint64_t v = (uint64_t)x; memcpy(p, &v, 8); break; }
    case 6: { _Float16 v = (_Float16)x; memcpy(p, &v, 2); break; }
    case 7: { float v = (float)x; memcpy(p, &v, 4); break; }
    case 8: { double v = (double)x; memcpy(p, &v, 8); break; }
    default: { float f = (float)x; uint32_t b; memcpy(&b, &f, 4); uint16_t h = (uint16_t)(b >> 16); memcpy(p, &h, 2); break; }
    }
}

static long double combine(int op, long double a, long double b) {
    switch (op) {
    case 1: return a * b;
    case 2: return a > b ? a : b;
    case 3: return a < b ? a : b;
    default: return a + b; /* sum, and avg before the division */
    }
}

/* Reduces element j of the ranks' buffers (at element offset off of each send) into out. */
static long double reduce_at(op_rec *const *byrank, int n, size_t idx) {
    int t = byrank[0]->type;
    size_t es = type_size(t);
    long double acc = load(t, (const unsigned char *)byrank[0]->send + idx * es);
    for (int r = 1; r < n; r++) acc = combine(byrank[0]->op, acc, load(t, (const unsigned char *)byrank[r]->send + idx * es));
    if (byrank[0]->op == 4) {
        acc /= n;
        if (t <= 5) acc = (long double)(long long)acc;
    }
    return acc;
}

/* Runs one collective over every rank of a clique (byrank[r]: rank r's record). */
static res_t execute(op_rec *const *byrank, int n) {
    const op_rec *o = byrank[0];
    size_t es = type_size(o->type), count = o->count;
    size_t out_elems = o->kind == K_ALL_GATHER ? count * (size_t)n : count;
    unsigned char *tmp = malloc((out_elems ? out_elems : 1) * es * (size_t)n);
    if (tmp == NULL) return SYS_ERR;
    for (int r = 0; r < n; r++) { /* compute everything before writing: buffers may be in place */
        unsigned char *dst = tmp + (size_t)r * out_elems * es;
        for (size_t j = 0; j < out_elems; j++) {
            switch (o->kind) {
            case K_ALL_REDUCE: store(o->type, dst + j * es, reduce_at(byrank, n, j)); break;
            case K_REDUCE_SCATTER: store(o->type, dst + j * es, reduce_at(byrank, n, (size_t)r * count + j)); break;
            case K_BROADCAST: memcpy(dst + j * es, (const unsigned char *)byrank[o->root]->send + j * es, es); break;
            default: memcpy(dst + j * es, (const unsigned char *)byrank[j / count]->send + (j % count) * es, es); break;
            }
        }
    }
    for (int r = 0; r < n; r++) memcpy(byrank[r]->recv, tmp + (size_t)r * out_elems * es, out_elems * es);
    free(tmp);
    return OK;
}

static res_t run_clique(op_rec *first) {
    int n = first->comm->nranks;
    op_rec *byrank[MAX_GROUP] = {0};
    for (int i = 0; i < group_n; i++) {
        op_rec *o = &group_ops[i];
        if (o->comm->clique != first->comm->clique || o->kind != first->kind) continue;
        if (byrank[o->comm->rank] || o->count != first->count || o->type != first->type || o->op != first->op ||
            o->root != first->root) {
            snprintf(last_error, sizeof last_error, "ranks of one group disagree on the collective");
            return INVALID_USAGE;
        }
        byrank[o->comm->rank] = o;
    }
    for (int r = 0; r < n; r++)
        if (byrank[r] == NULL) {
            snprintf(last_error, sizeof last_error, "rank %d of the clique is missing from the group", r);
            return INVALID_USAGE;
        }
    return execute(byrank, n);
}

static res_t enqueue(const char *name, int kind, const void *send, void *recv, size_t count, int type, int op,
                     int root, fake_comm *c) {
    res_t r = injected(name);
    if (r != OK) return r;
    if (!is_live(c)) return bad_comm(name);
    if (type_size(type) == 0 || op < 0 || op > 4 || send == NULL || recv == NULL || root < 0 || root >= c->nranks) {
        snprintf(last_error, sizeof last_error, "%s: invalid type %d, op %d or root %d", name, type, op, root);
        return INVALID_ARG;
    }
    c->used = true;
    logf_("%s rank %d of %d type %d op %d count %zu root %d", kind_name[kind], c->rank, c->nranks, type, op, count, root);
    op_rec rec = {kind, c, send, recv, count, type, op, root};
    const char *connect = getenv("GPULAB_FAKENCCL_CONNECT");
    if (!c->blocking && connect && *connect) {
        c->connecting = atoi(connect);
        logf_("connecting rank %d", c->rank);
        return IN_PROGRESS;
    }
    if (c->multi_process) return OK; /* its peers are other processes: nothing to combine here */
    if (group_depth > 0) {
        if (group_n == MAX_GROUP) return INTERNAL;
        group_ops[group_n++] = rec;
        return OK;
    }
    if (c->nranks != 1) {
        snprintf(last_error, sizeof last_error, "several ranks in one process need ncclGroupStart/End");
        return INVALID_USAGE;
    }
    op_rec *one[1] = {&rec};
    return execute(one, 1);
}

API res_t ncclAllReduce(const void *s, void *r, size_t n, int t, int op, fake_comm *c, void *stream) {
    (void)stream;
    return enqueue("ncclAllReduce", K_ALL_REDUCE, s, r, n, t, op, 0, c);
}
API res_t ncclBroadcast(const void *s, void *r, size_t n, int t, int root, fake_comm *c, void *stream) {
    (void)stream;
    return enqueue("ncclBroadcast", K_BROADCAST, s, r, n, t, 0, root, c);
}
API res_t ncclAllGather(const void *s, void *r, size_t n, int t, fake_comm *c, void *stream) {
    (void)stream;
    return enqueue("ncclAllGather", K_ALL_GATHER, s, r, n, t, 0, 0, c);
}
API res_t ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, fake_comm *c, void *stream) {
    (void)stream;
    return enqueue("ncclReduceScatter", K_REDUCE_SCATTER, s, r, n, t, op, 0, c);
}

API res_t ncclGroupStart(void) {
    res_t r = injected("ncclGroupStart");
    if (r != OK) return r;
    if (group_depth++ == 0) {
        group_n = 0;
        group_failed = false;
    }
    return OK;
}

API res_t ncclGroupEnd(void) {
    if (group_depth == 0) return INVALID_USAGE;
    if (--group_depth > 0) return OK;
    res_t r = injected("ncclGroupEnd");
    bool done[MAX_GROUP] = {false};
    for (int i = 0; r == OK && i < group_n; i++) {
        if (done[i]) continue;
        r = run_clique(&group_ops[i]);
        for (int j = i; j < group_n; j++)
            if (group_ops[j].comm->clique == group_ops[i].comm->clique && group_ops[j].kind == group_ops[i].kind)
                done[j] = true;
    }
    group_n = 0;
    logf_("group_end %d", r);
    return r;
}
