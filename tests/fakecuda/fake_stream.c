/*
 * fake_stream.c — streams, events, stream capture and graphs of the driver stand-in.
 *
 * Nothing runs, so "work" is a state of the whole stand-in: it is complete unless
 * fake_work_blocked() says otherwise (GPULAB_FAKE_HANG, or GPULAB_FAKE_BUSY_FILE exists; see
 * fake_stream.h). Handles are checked against the live objects so that a use after destroy
 * answers CUDA_ERROR_INVALID_HANDLE instead of touching freed memory.
 *
 * cuEventElapsedTime answers the host time between the two cuEventRecord calls (or the times
 * scripted in GPULAB_FAKE_ELAPSED_FILE, fake_measure.c): a plausible shape for tests of the
 * API, never a GPU measurement.
 */
#define _GNU_SOURCE
#include "fake.h"
#include "fake_stream.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_PRIORITY_LEAST 0     /* as an H100/H200 reports */
#define FAKE_PRIORITY_GREATEST (-5)

/* A graph's nodes: how many, and the log text of each captured launch (NULL for other kinds). */
typedef struct fake_nodes {
    size_t nodes, cap;
    char **texts;
} fake_nodes;

typedef struct fake_graph {
    struct fake_graph *next;
    fake_nodes n;
} fake_graph;

typedef struct fake_exec {
    struct fake_exec *next;
    fake_nodes n;
} fake_exec;

typedef struct fake_stream {
    struct fake_stream *next;
    unsigned flags;
    int priority;
    fake_graph *capture;      /* non-NULL while capturing */
    bool capture_invalidated; /* an operation not allowed during capture was attempted */
    CUstreamCaptureMode capture_mode;
    int device;               /* the device of the context it was created in */
} fake_stream;

typedef struct fake_event {
    struct fake_event *next;
    unsigned flags;
    bool recorded;
    double recorded_at; /* host seconds of the last cuEventRecord */
    int device;         /* the device of the stream it was last recorded on */
} fake_event;

static fake_stream *streams;
/* gpulab's watchdog thread calls cuCtxSynchronize while the script's thread goes on, and that call
 * looks at every stream's capture (fake_capture_forbids): the list's changes, the captures' start
 * and end and their invalidation happen under this lock. The script's thread reads the list
 * without it, being its only writer. */
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_event *events;
static fake_graph *graphs;
static fake_exec *execs;

/* ------------------------------------------------------------------------------------------
 * Completion
 * ------------------------------------------------------------------------------------------ */
/* GPULAB_FAKE_BUSY_FILE: while the file exists, work does not complete: on every device when it
 * is empty, else on the devices it lists ("1", "0 2"), so tests can hold one device's work. */
bool fake_device_blocked(int device) {
    if (fake_hang()) return true;
    const char *busy = getenv("GPULAB_FAKE_BUSY_FILE");
    if (busy == NULL || *busy == '\0') return false;
    FILE *f = fopen(busy, "r");
    if (f == NULL) return false;
    int d = 0;
    bool any = false, listed = false;
    while (fscanf(f, "%d", &d) == 1) {
        any = true;
        if (d == device) listed = true;
    }
    fclose(f);
    return any ? listed : true;
}

bool fake_work_blocked(void) { return fake_device_blocked(fake_current_device()); }

static int stream_device(const fake_stream *s) { return s ? s->device : fake_current_device(); }

/* Waits as a sync would: forever under GPULAB_FAKE_HANG, until the busy file goes otherwise. */
static void wait_until_unblocked(int device) {
    while (fake_device_blocked(device)) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static double host_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------------------------
 * Handle lookup: each list holds the live objects of one kind.
 * ------------------------------------------------------------------------------------------ */
#define FIND_IN(list, type, h)                                                                  \
    for (type *it_ = (list); it_; it_ = it_->next)                                              \
        if ((void *)it_ == (void *)(h)) return it_;                                             \
    return NULL;

static fake_stream *find_stream(CUstream h) { FIND_IN(streams, fake_stream, h) }
static fake_event *find_event(CUevent h) { FIND_IN(events, fake_event, h) }
static fake_graph *find_graph(CUgraph h) { FIND_IN(graphs, fake_graph, h) }
static fake_exec *find_exec(CUgraphExec h) { FIND_IN(execs, fake_exec, h) }

#define UNLINK(list, type, obj)                                                                 \
    for (type **p_ = &(list); *p_; p_ = &(*p_)->next)                                           \
        if (*p_ == (obj)) {                                                                     \
            *p_ = (obj)->next;                                                                  \
            break;                                                                              \
        }

/* The default stream (NULL, or the legacy / per-thread handles) is always valid. */
static bool is_default_stream(CUstream h) {
    return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

bool fake_stream_live(CUstream h) { return is_default_stream(h) || find_stream(h) != NULL; }

/* 0 for a usable stream handle (*out NULL for the default stream), else the error. */
static CUresult stream_of(CUstream h, fake_stream **out) {
    *out = NULL;
    if (is_default_stream(h)) return CUDA_SUCCESS;
    *out = find_stream(h);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Adds one node; a launch keeps a copy of its text (when memory runs out, the node is still
 * counted and only its text is lost: the count is what most tests rely on). */
static void add_node(fake_nodes *n, const char *text) {
    if (n->nodes >= n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 8;
        char **t = realloc(n->texts, cap * sizeof *t);
        if (t) {
            memset(t + n->cap, 0, (cap - n->cap) * sizeof *t);
            n->texts = t;
            n->cap = cap;
        }
    }
    if (n->nodes < n->cap) n->texts[n->nodes] = text ? strdup(text) : NULL;
    n->nodes++;
}

static void free_nodes(fake_nodes *n) {
    for (size_t i = 0; i < n->cap; i++) free(n->texts[i]);
    free(n->texts);
    memset(n, 0, sizeof *n);
}

static void copy_nodes(fake_nodes *to, const fake_nodes *from) {
    memset(to, 0, sizeof *to);
    for (size_t i = 0; i < from->nodes; i++) add_node(to, i < from->cap ? from->texts[i] : NULL);
}

/* Invalidates every capture in global or thread-local mode (only those on blocking streams when
 * blocking_only), logging "TAG STREAM[ CALL]" for each; returns whether there was any. */
static bool invalidate_captures(bool blocking_only, const char *tag, const char *call) {
    bool any = false;
    pthread_mutex_lock(&streams_mu);
    for (fake_stream *s = streams; s; s = s->next) {
        if (!s->capture || s->capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
        if (blocking_only && (s->flags & CU_STREAM_NON_BLOCKING)) continue;
        s->capture_invalidated = true;
        any = true;
        fake_log("%s %p%s%s", tag, (void *)s, call ? " " : "", call ? call : "");
    }
    pthread_mutex_unlock(&streams_mu);
    return any;
}

/* Work on the legacy default stream while a blocking stream captures in global or thread-local
 * mode (one thread here): the legacy stream would wait for the capturing stream, so the driver
 * refuses it with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates the capture. A non-blocking
 * stream has no such dependency: the work runs at once, outside the graph (H200, 580.159). */
bool fake_capture_implicit(CUstream h) {
    if (h != NULL && h != CU_STREAM_LEGACY) return false;
    return invalidate_captures(true, "capture_implicit", NULL);
}

bool fake_capture_forbids(const char *call) { return invalidate_captures(false, "capture_unsupported", call); }

bool fake_stream_known(CUstream h) { return !is_default_stream(h) && find_stream(h) != NULL; }

bool fake_capture_add(CUstream h, const char *line) {
    fake_stream *s = is_default_stream(h) ? NULL : find_stream(h);
    if (s == NULL || s->capture == NULL) return false;
    add_node(&s->capture->n, line);
    return true;
}

/* ------------------------------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------------------------------ */
CUresult fake_cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    FAKE_ENTER("cuCtxGetStreamPriorityRange");
    if (least) *least = FAKE_PRIORITY_LEAST;
    if (greatest) *greatest = FAKE_PRIORITY_GREATEST;
    return CUDA_SUCCESS;
}

CUresult fake_cuStreamCreateWithPriority(CUstream *out, unsigned flags, int priority) {
    FAKE_ENTER("cuStreamCreateWithPriority");
    if (out == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
    fake_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    /* like the driver, an out-of-range priority is clamped */
    if (priority > FAKE_PRIORITY_LEAST) priority = FAKE_PRIORITY_LEAST;
    if (priority < FAKE_PRIORITY_GREATEST) priority = FAKE_PRIORITY_GREATEST;
    s->flags = flags;
    s->priority = priority;
    s->device = fake_current_device();
    pthread_mutex_lock(&streams_mu);
    s->next = streams;
    streams = s;
    pthread_mutex_unlock(&streams_mu);
    fake_log("stream_create %p flags=%u priority=%d", (void *)s, flags, priority);
    *out = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult fake_cuStreamDestroy(CUstream h) {
    FAKE_ENTER("cuStreamDestroy");
    fake_stream *s = is_default_stream(h) ? NULL : find_stream(h);
    if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&streams_mu);
    UNLINK(streams, fake_stream, s);
    pthread_mutex_unlock(&streams_mu);
    if (s->capture) free_nodes(&s->capture->n);
    if (s->capture) free(s->capture); /* an abandoned capture's graph was never handed out */
    fake_log("stream_destroy %p", (void *)s);
    fake_l2_stream_destroyed(h);
    free(s);
    return CUDA_SUCCESS;
}

/* Syncs and queries of any stream are refused while a stream captures; they invalidate the
 * capture (a relaxed capture allows them, except on the capturing stream itself). */
static CUresult refuse_in_capture(fake_stream *s, const char *call) {
    if (fake_capture_forbids(call)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s == NULL || s->capture == NULL) return CUDA_SUCCESS;
    pthread_mutex_lock(&streams_mu);
    s->capture_invalidated = true;
    pthread_mutex_unlock(&streams_mu);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult fake_cuStreamQuery(CUstream h) {
    FAKE_ENTER("cuStreamQuery");
    fake_stream *s;
    CUresult r = stream_of(h, &s);
    if (r == CUDA_SUCCESS) r = refuse_in_capture(s, "cuStreamQuery");
    if (r != CUDA_SUCCESS) return r;
    return fake_device_blocked(stream_device(s)) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult fake_cuStreamSynchronize(CUstream h) {
    FAKE_ENTER("cuStreamSynchronize");
    fake_stream *s;
    CUresult r = stream_of(h, &s);
    if (r == CUDA_SUCCESS) r = refuse_in_capture(s, "cuStreamSynchronize");
    if (r != CUDA_SUCCESS) return r;
    wait_until_unblocked(stream_device(s));
    fake_log("stream_sync %p", (void *)h);
    return CUDA_SUCCESS;
}

CUresult fake_cuStreamWaitEvent(CUstream h, CUevent e, unsigned flags) {
    FAKE_ENTER("cuStreamWaitEvent");
    fake_stream *s;
    CUresult r = stream_of(h, &s);
    if (r != CUDA_SUCCESS) return r;
    if (find_event(e) == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (s && s->capture) add_node(&s->capture->n, NULL);
    fake_log("stream_wait_event %p %p", (void *)h, (void *)e);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------ */
CUresult fake_cuEventCreate(CUevent *out, unsigned flags) {
    FAKE_ENTER("cuEventCreate");
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (out == NULL || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    fake_event *e = calloc(1, sizeof *e);
    if (e == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = flags;
    e->next = events;
    events = e;
    fake_log("event_create %p flags=%u", (void *)e, flags);
    *out = (CUevent)e;
    return CUDA_SUCCESS;
}

CUresult fake_cuEventDestroy(CUevent h) {
    FAKE_ENTER("cuEventDestroy");
    fake_event *e = find_event(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    UNLINK(events, fake_event, e);
    fake_log("event_destroy %p", (void *)e);
    free(e);
    return CUDA_SUCCESS;
}

CUresult fake_cuEventRecord(CUevent h, CUstream sh) {
    FAKE_ENTER("cuEventRecord");
    fake_event *e = find_event(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    fake_stream *s;
    CUresult r = stream_of(sh, &s);
    if (r != CUDA_SUCCESS) return r;
    if (s && s->capture) add_node(&s->capture->n, NULL);
    e->recorded = true;
    e->recorded_at = host_seconds();
    e->device = stream_device(s);
    fake_log("event_record %p stream=%p", (void *)e, (void *)sh);
    return CUDA_SUCCESS;
}

/* An event never recorded has no work to wait for, as with the driver. */
CUresult fake_cuEventQuery(CUevent h) {
    FAKE_ENTER("cuEventQuery");
    fake_event *e = find_event(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (fake_capture_forbids("cuEventQuery")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return e->recorded && fake_device_blocked(e->device) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult fake_cuEventSynchronize(CUevent h) {
    FAKE_ENTER("cuEventSynchronize");
    fake_event *e = find_event(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (fake_capture_forbids("cuEventSynchronize")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (e->recorded) wait_until_unblocked(e->device);
    return CUDA_SUCCESS;
}

CUresult fake_cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    FAKE_ENTER("cuEventElapsedTime");
    fake_event *a = find_event(start), *b = find_event(end);
    if (ms == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (a == NULL || b == NULL || !a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (fake_device_blocked(a->device) || fake_device_blocked(b->device)) return CUDA_ERROR_NOT_READY;
    if (fake_scripted_elapsed(ms)) return CUDA_SUCCESS;
    *ms = (float)((b->recorded_at - a->recorded_at) * 1e3);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Capture and graphs: a graph knows how many nodes it has and the log text of its launches.
 * ------------------------------------------------------------------------------------------ */
CUresult fake_cuStreamBeginCapture(CUstream h, CUstreamCaptureMode mode) {
    FAKE_ENTER("cuStreamBeginCapture");
    if (is_default_stream(h)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    fake_stream *s = find_stream(h);
    if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
    fake_graph *g = calloc(1, sizeof *g);
    if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&streams_mu);
    s->capture = g;
    s->capture_invalidated = false;
    s->capture_mode = mode;
    pthread_mutex_unlock(&streams_mu);
    fake_log("capture_begin %p mode=%d", (void *)s, (int)mode);
    return CUDA_SUCCESS;
}

/* An injected failure still ends the capture, as an invalidated capture does. */
CUresult fake_cuStreamEndCapture(CUstream h, CUgraph *out) {
    CUresult injected = fake_enter("cuStreamEndCapture");
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    *out = NULL;
    fake_stream *s = is_default_stream(h) ? NULL : find_stream(h);
    if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (s->capture == NULL) return CUDA_ERROR_ILLEGAL_STATE;
    pthread_mutex_lock(&streams_mu);
    fake_graph *g = s->capture;
    s->capture = NULL;
    bool invalidated = s->capture_invalidated;
    pthread_mutex_unlock(&streams_mu);
    fake_log("capture_end %p nodes=%zu%s", (void *)s, g->n.nodes, invalidated ? " invalidated" : "");
    if (invalidated || injected != CUDA_SUCCESS) {
        free_nodes(&g->n);
        free(g);
        return injected != CUDA_SUCCESS ? injected : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    g->next = graphs;
    graphs = g;
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphGetNodes(CUgraph h, CUgraphNode *nodes, size_t *count) {
    FAKE_ENTER("cuGraphGetNodes");
    fake_graph *g = find_graph(h);
    if (g == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (nodes != NULL) { /* no node objects exist here: only counting is supported */
        for (size_t i = 0; i < *count; i++) nodes[i] = NULL;
        if (*count > g->n.nodes) *count = g->n.nodes;
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *count = g->n.nodes;
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphDestroy(CUgraph h) {
    FAKE_ENTER("cuGraphDestroy");
    fake_graph *g = find_graph(h);
    if (g == NULL) return CUDA_ERROR_INVALID_HANDLE;
    UNLINK(graphs, fake_graph, g);
    fake_log("graph_destroy %p", (void *)g);
    free_nodes(&g->n);
    free(g);
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph h, unsigned long long flags) {
    FAKE_ENTER("cuGraphInstantiateWithFlags");
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    fake_graph *g = find_graph(h);
    if (g == NULL) return CUDA_ERROR_INVALID_HANDLE;
    unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                               CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                               CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                               CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
    fake_exec *x = calloc(1, sizeof *x);
    if (x == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    copy_nodes(&x->n, &g->n);
    x->next = execs;
    execs = x;
    fake_log("graph_instantiate %p nodes=%zu", (void *)x, x->n.nodes);
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphLaunch(CUgraphExec h, CUstream sh) {
    FAKE_ENTER("cuGraphLaunch");
    fake_exec *x = find_exec(h);
    if (x == NULL) return CUDA_ERROR_INVALID_HANDLE;
    fake_stream *s;
    CUresult r = stream_of(sh, &s);
    if (r != CUDA_SUCCESS) return r;
    if (s && s->capture) add_node(&s->capture->n, NULL);
    fake_log("graph_launch %p stream=%p nodes=%zu", (void *)x, (void *)sh, x->n.nodes);
    for (size_t i = 0; i < x->n.nodes && i < x->n.cap; i++) /* "launch NAME ..." -> "graph_node NAME ..." */
        if (x->n.texts[i]) fake_log("graph_node %s", x->n.texts[i] + strlen("launch "));
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphExecDestroy(CUgraphExec h) {
    FAKE_ENTER("cuGraphExecDestroy");
    fake_exec *x = find_exec(h);
    if (x == NULL) return CUDA_ERROR_INVALID_HANDLE;
    UNLINK(execs, fake_exec, x);
    fake_log("graph_exec_destroy %p", (void *)x);
    free_nodes(&x->n);
    free(x);
    return CUDA_SUCCESS;
}
