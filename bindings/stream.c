/*
 * stream.c — streams ("cuda.stream"), events ("cuda.event"), captured graphs ("cuda.graph")
 * and cuda.bench.
 *
 * A stream owns a track (lifetime.c) that outlives it while deferred releases still refer to
 * it. Waits take a deadline and, when it passes, name the launches still pending.
 *
 * s:capture(fn) captures in CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: only the calling thread is
 * barred from calls that would break the capture (syncs, allocations, frees), so a library or
 * helper thread elsewhere in the process (driver.c waits for the context from one) is never
 * disturbed, while a mistake inside fn itself still invalidates the capture and raises.
 * GLOBAL would also fail other threads' innocent calls for the duration.
 */
#include "errors.h"
#include "stream.h"
#include "check.h"
#include "context.h"
#include "driver.h"
#include "identity.h"
#include "launchlog.h"
#include "lifetime.h"
#include "measure.h"
#include "module.h"
#include "objects.h"
#include "observe.h"
#include "options.h"
#include "register.h"
#include "wait.h"


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENT_T "cuda.event"
#define GRAPH_T "cuda.graph"
#define NOTES_KEY "gpulab.capture_notes" /* private store: objects used by the capture under way */
#define RESULT_KEY "gpulab.capture_graph" /* private store: the graph the capture under way fills */
#define BENCH_MAX_REPS 1000000

typedef struct gl_event {
    CUevent handle; /* NULL once freed */
    bool timing;
    bool recorded;
} gl_event;

typedef enum { REF_ARRAY, REF_HOST, REF_TENSORMAP, REF_MODULE, REF_EVENT, REF_GRAPH } ref_kind;
typedef struct graph_ref {
    ref_kind kind;
    void *obj; /* kept alive by the graph's uservalue table */
} graph_ref;

typedef struct gl_graph {
    CUgraphExec exec; /* NULL once freed, or before instantiation */
    size_t nodes;
    int nrefs;
    graph_ref *refs;  /* what each replay uses (malloc'd) */
    gl_use use;       /* replays mark it: the executable graph outlives queued replays */
    int device;       /* ordinal of the device it was captured on */
} gl_graph;
/* uservalue 1: table whose keys are every object the captured work used */

static struct {
    bool active;
    gl_stream *stream;
    bool free_after; /* the capturing stream was freed inside fn: release it after the capture */
    const void *guard; /* the guard object of the capture under way (see capture_guard_gc) */
} cap;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------------------------ */
/* Validates an options table at idx (nil/none allowed) and its keys. */
static bool opt_table(lua_State *L, int idx, const char *const known[], const char *fn,
                      const char *shape) {
    if (lua_isnoneornil(L, idx)) return false;
    if (lua_type(L, idx) != LUA_TTABLE)
        gl_argerror(L, idx, fn, "options table %s expected, got %s", shape, gl_typename(L, idx));
    gl_check_known_fields(L, idx, known, fn);
    return true;
}

/* The 'timeout' field of table t in seconds; -1 when absent or infinite (wait for ever). */
static double timeout_field(lua_State *L, int t, const char *fn) {
    bool present = gl_rawfieldtype(L, t, "timeout") != LUA_TNIL;
    if (!present) return -1;
    double v = gl_opt_num_field(L, t, "timeout", -1, fn);
    if (!(v >= 0)) gl_fielderror(L, t, fn, "timeout", "must be >= 0 seconds, got %.14g", v);
    return isinf(v) ? -1 : v;
}

/* {timeout=seconds} at idx, or nil. */
static double opt_timeout(lua_State *L, int idx, const char *fn) {
    static const char *const known[] = {"timeout", NULL};
    if (!opt_table(L, idx, known, fn, "{timeout=seconds}")) return -1;
    return timeout_field(L, idx, fn);
}


/* ------------------------------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------------------------------ */
gl_stream *gl_test_stream(lua_State *L, int idx) { return gl_testudata(L, idx, GL_STREAM_T); }

static gl_stream *check_stream(lua_State *L, int idx, const char *fn) {
    gl_stream *s = gl_test_stream(L, idx);
    if (s == NULL)
        gl_typeerror(L, idx, fn, "cuda.stream");
    if (s->track == NULL) gl_freederror(L, idx, fn, "the cuda.stream was freed");
    return s;
}

/* For submissions: the stream must belong to the current device's context. */
gl_stream_track *gl_opt_stream_track(lua_State *L, int idx, const char *fn) {
    if (lua_isnoneornil(L, idx)) return gl_default_track();
    gl_stream *s = check_stream(L, idx, fn);
    if (s->device != gl_current_device()) gl_refuse_other_device(L, fn, idx, "cuda.stream", s->device);
    return s->track;
}

/* One release path for __gc, __close and s:free(): never raises, idempotent. */
static void stream_release(gl_stream *s) {
    if (s->track == NULL) return;
    if (cap.active && cap.stream == s) { /* the capture still needs the handle to end */
        cap.free_after = true;
        return;
    }
    if (s->on_release) s->on_release(s, s->release_arg);
    s->on_release = NULL;
    gl_track_retire(s->track);
    s->track = NULL;
    s->handle = NULL;
    gl_live.streams--;
}

int gl_stream_free(lua_State *L) {
    gl_stream *s = gl_testudata(L, 1, GL_STREAM_T);
    if (s == NULL) return 0;
    stream_release(s);
    if (s->on_release == NULL && lua_getiuservalue(L, 1, 2) != LUA_TNONE) { /* owner: no longer held */
        lua_pushnil(L);
        lua_setiuservalue(L, 1, 2);
    }
    lua_settop(L, 1);
    return 0;
}

gl_stream_track *gl_opt_stream_field(lua_State *L, int t, int value, const char *field, const char *fn) {
    if (lua_isnoneornil(L, value)) return gl_default_track();
    gl_stream *s = gl_test_stream(L, value);
    if (s == NULL) gl_fieldtypeerror(L, t, fn, field, value, "cuda.stream");
    if (s->track == NULL) gl_fielderror(L, t, fn, field, "the cuda.stream was freed");
    if (s->device != gl_current_device())
        gl_fielderror(L, t, fn, field, "the cuda.stream belongs to device %d, but device %d is current",
                      s->device, gl_current_device());
    return s->track;
}

int gl_stream_new(lua_State *L) {
    const char *fn = "cuda.stream";
    static const char *const known[] = {"nonblocking", "priority", NULL};
    bool nonblocking = false, have_priority = false;
    lua_Integer priority = 0;
    if (opt_table(L, 1, known, fn, "{nonblocking=, priority=}")) {
        nonblocking = gl_opt_bool_field(L, 1, "nonblocking", false, fn);
        int type = gl_rawfieldtype(L, 1, "priority");
        have_priority = type != LUA_TNIL;
        if (have_priority && type != LUA_TNUMBER) /* no string coercion */
            gl_fielderror(L, 1, fn, "priority", "integer expected, got %s", lua_typename(L, type));
        priority = gl_opt_int_field(L, 1, "priority", 0, fn);
    }
    gl_require_gpu(L, fn);
    int least = 0, greatest = 0; /* numerically: greatest <= least; lower is more urgent */
    GL_CHECK(L, gl_cu.cuCtxGetStreamPriorityRange(&least, &greatest), fn,
             "cuCtxGetStreamPriorityRange");
    if (!have_priority) priority = least;
    if (priority < greatest || priority > least)
        gl_fielderror(L, 1, fn, "priority", "%lld is out of this device's range %d..%d (%d is the highest "
                      "priority, %d the default)", (long long)priority, greatest, least, greatest, least);
    gl_stream *s = gl_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    gl_setmetatable(L, GL_STREAM_T);
    CUstream h;
    GL_CHECK(L, gl_cu.cuStreamCreateWithPriority(&h, nonblocking ? CU_STREAM_NON_BLOCKING : 0,
                                                 (int)priority),
             fn, "cuStreamCreateWithPriority");
    gl_stream_track *t = gl_track_new(h);
    if (t == NULL) {
        gl_cu.cuStreamDestroy(h);
        luaL_error(L, "%s: out of host memory", fn);
    }
    s->handle = h;
    s->track = t;
    s->priority = (int)priority;
    s->nonblocking = nonblocking;
    s->device = gl_current_device();
    gl_live.streams++;
    return 1;
}

gl_stream *gl_push_stream_shell(lua_State *L, int owner_idx) {
    owner_idx = lua_absindex(L, owner_idx);
    gl_stream *s = gl_newuserdatauv(L, sizeof *s, 2); /* 1 stays free, as on every stream */
    memset(s, 0, sizeof *s);
    gl_setmetatable(L, GL_STREAM_T);
    lua_pushvalue(L, owner_idx);
    lua_setiuservalue(L, -2, 2);
    return s;
}

/* Streams of another binding's handle are non-blocking (green-context streams must be). */
bool gl_stream_adopt(gl_stream *s, CUstream h, int priority, void (*on_release)(gl_stream *, void *),
                     void *arg) {
    gl_stream_track *t = gl_track_new(h);
    if (t == NULL) return false;
    s->handle = h;
    s->track = t;
    s->priority = priority;
    s->nonblocking = true;
    s->device = gl_current_device();
    s->on_release = on_release;
    s->release_arg = arg;
    gl_live.streams++;
    return true;
}

/* Syncs and queries are not allowed on a stream while it is being captured. */
static void refuse_in_capture(lua_State *L, const gl_stream *s, const char *fn) {
    if (cap.active && cap.stream == s)
        luaL_error(L, "%s: the stream is being captured (s:capture records work, nothing runs "
                      "until g:launch; sync after the capture)", fn);
}

static int l_stream_sync(lua_State *L) {
    const char *fn = "s:sync";
    gl_stream *s = check_stream(L, 1, fn);
    double timeout = opt_timeout(L, 2, fn);
    refuse_in_capture(L, s, fn);
    gl_wait(L, s->handle, timeout, fn);
    return 0;
}

static int l_stream_query(lua_State *L) {
    const char *fn = "s:query";
    gl_stream *s = check_stream(L, 1, fn);
    gl_require_gpu(L, fn);
    refuse_in_capture(L, s, fn);
    CUresult r = gl_cu.cuStreamQuery(s->handle);
    if (r == CUDA_ERROR_NOT_READY) {
        lua_pushboolean(L, 0);
        return 1;
    }
    GL_CHECK(L, r, fn, "cuStreamQuery");
    gl_log_sync_ok(s->handle); /* idle: everything it ran is complete */
    gl_release_drain();
    lua_pushboolean(L, 1);
    return 1;
}

static gl_event *check_event(lua_State *L, int idx, const char *fn);

static int l_stream_wait(lua_State *L) {
    const char *fn = "s:wait";
    gl_stream *s = check_stream(L, 1, fn);
    gl_event *e = check_event(L, 2, fn);
    gl_require_gpu(L, fn);
    GL_CHECK(L, gl_cu.cuStreamWaitEvent(s->handle, e->handle, 0), fn, "cuStreamWaitEvent");
    gl_capture_note(L, 2);
    lua_settop(L, 1);
    return 1;
}

static int stream_tostring(lua_State *L) {
    gl_stream *s = gl_checkudata(L, 1, GL_STREAM_T);
    if (s->track == NULL) {
        lua_pushliteral(L, "cuda.stream (freed)");
        return 1;
    }
    lua_pushfstring(L, "cuda.stream %p (%s, priority %d%s)", (void *)s->handle,
                    s->nonblocking ? "non-blocking" : "blocking", s->priority,
                    cap.active && cap.stream == s ? ", capturing" : "");
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------ */
static gl_event *check_event(lua_State *L, int idx, const char *fn) {
    gl_event *e = gl_testudata(L, idx, EVENT_T);
    if (e == NULL)
        gl_typeerror(L, idx, fn, "cuda.event");
    if (e->handle == NULL) gl_freederror(L, idx, fn, "the cuda.event was freed");
    return e;
}

static void event_release(gl_event *e) {
    if (e->handle == NULL) return;
    /* the driver keeps an event alive until work recorded on it completes */
    if (gl_context_usable()) gl_cu.cuEventDestroy(e->handle);
    e->handle = NULL;
    gl_live.events--;
}

static int event_free(lua_State *L) {
    gl_event *e = gl_testudata(L, 1, EVENT_T);
    if (e) event_release(e);
    return 0;
}

static int l_event(lua_State *L) {
    const char *fn = "cuda.event";
    static const char *const known[] = {"timing", NULL};
    bool timing = true;
    if (opt_table(L, 1, known, fn, "{timing=true|false}"))
        timing = gl_opt_bool_field(L, 1, "timing", true, fn);
    gl_require_gpu(L, fn);
    gl_event *e = gl_newuserdatauv(L, sizeof *e, 0);
    memset(e, 0, sizeof *e);
    gl_setmetatable(L, EVENT_T);
    CUevent h;
    GL_CHECK(L, gl_cu.cuEventCreate(&h, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING), fn,
             "cuEventCreate");
    e->handle = h;
    e->timing = timing;
    gl_live.events++;
    return 1;
}

static int l_event_record(lua_State *L) {
    const char *fn = "e:record";
    gl_event *e = check_event(L, 1, fn);
    gl_stream_track *t = gl_opt_stream_track(L, 2, fn);
    gl_require_gpu(L, fn);
    GL_CHECK(L, gl_cu.cuEventRecord(e->handle, gl_track_handle(t)), fn, "cuEventRecord");
    e->recorded = true;
    gl_capture_note(L, 1);
    lua_settop(L, 1);
    return 1;
}

/* Waits for an event; with a deadline (seconds >= 0) by polling, as gl_wait does for streams. */
static void wait_event(lua_State *L, CUevent ev, double timeout, const char *fn) {
    CUresult r;
    if (timeout < 0) {
        r = gl_cu.cuEventSynchronize(ev);
    } else {
        double end = now_s() + timeout;
        long sleep_ns = 2000;
        while ((r = gl_cu.cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {
            if (now_s() >= end) gl_raise_timeout(L, fn, timeout);
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
    }
    GL_CHECK(L, r, fn, timeout < 0 ? "cuEventSynchronize" : "cuEventQuery");
}

static int l_event_sync(lua_State *L) {
    const char *fn = "e:sync";
    gl_event *e = check_event(L, 1, fn);
    double timeout = opt_timeout(L, 2, fn);
    gl_require_gpu(L, fn);
    wait_event(L, e->handle, timeout, fn);
    gl_release_drain();
    return 0;
}

static int l_event_query(lua_State *L) {
    const char *fn = "e:query";
    gl_event *e = check_event(L, 1, fn);
    gl_require_gpu(L, fn);
    CUresult r = gl_cu.cuEventQuery(e->handle);
    if (r != CUDA_ERROR_NOT_READY) GL_CHECK(L, r, fn, "cuEventQuery");
    lua_pushboolean(L, r == CUDA_SUCCESS);
    return 1;
}

/* e:elapsed(e0): milliseconds from e0 to e, both recorded with timing and complete. */
static int l_event_elapsed(lua_State *L) {
    const char *fn = "e:elapsed";
    gl_event *end = check_event(L, 1, fn);
    gl_event *start = check_event(L, 2, fn);
    gl_require_gpu(L, fn);
    if (!start->timing || !end->timing)
        luaL_error(L, "%s: the %s event was created with timing=false", fn,
                   start->timing ? "end" : "start");
    if (!start->recorded) luaL_error(L, "%s: start event was never recorded (e0:record(s) first)", fn);
    if (!end->recorded) luaL_error(L, "%s: end event was never recorded (e:record(s) first)", fn);
    float ms = 0;
    CUresult r = gl_cu.cuEventElapsedTime(&ms, start->handle, end->handle);
    if (r == CUDA_ERROR_NOT_READY)
        luaL_error(L, "%s: the work before the events has not completed yet (e:sync() first)", fn);
    GL_CHECK(L, r, fn, "cuEventElapsedTime");
    lua_pushnumber(L, (lua_Number)ms);
    return 1;
}

static int event_tostring(lua_State *L) {
    gl_event *e = gl_checkudata(L, 1, EVENT_T);
    if (e->handle == NULL)
        lua_pushliteral(L, "cuda.event (freed)");
    else
        lua_pushfstring(L, "cuda.event %p (%s, %s)", (void *)e->handle,
                        e->timing ? "timing" : "no timing", e->recorded ? "recorded" : "never recorded");
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Capture and graphs
 * ------------------------------------------------------------------------------------------ */
bool gl_capture_active(void) { return cap.active; }

void gl_capture_note(lua_State *L, int idx) {
    if (!cap.active || lua_type(L, idx) != LUA_TUSERDATA) return;
    idx = lua_absindex(L, idx);
    if (gl_private_get(L, NOTES_KEY) != LUA_TTABLE) /* unreachable from scripts; never trusted */
        luaL_error(L, "s:capture: the capture's list of objects is gone");
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static gl_graph *check_graph(lua_State *L, int idx, const char *fn) {
    gl_graph *g = gl_testudata(L, idx, GRAPH_T);
    if (g == NULL)
        gl_typeerror(L, idx, fn, "cuda.graph");
    if (g->exec == NULL) gl_freederror(L, idx, fn, "the cuda.graph was freed");
    return g;
}

static void destroy_exec(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuGraphExecDestroy((CUgraphExec)handle);
}

int gl_graph_free(lua_State *L) {
    gl_graph *g = gl_testudata(L, 1, GRAPH_T);
    if (g == NULL) return 0;
    free(g->refs);
    g->refs = NULL;
    g->nrefs = 0;
    lua_pushnil(L); /* the objects it used may go now: each waits for its own marked work */
    lua_setiuservalue(L, 1, 1);
    if (g->exec == NULL) return 0;
    gl_release(&g->use, destroy_exec, g->exec, 0);
    g->exec = NULL;
    gl_live.graphs--;
    return 0;
}

/* The C view of what the captured work used: one entry per object of a known type. */
static bool collect_refs(lua_State *L, int notes, gl_graph *g) {
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, notes)) {
        lua_pop(L, 1);
        n++;
    }
    if (n == 0) return true;
    g->refs = calloc((size_t)n, sizeof *g->refs);
    if (g->refs == NULL) return false;
    lua_pushnil(L);
    while (lua_next(L, notes)) {
        lua_pop(L, 1);
        graph_ref r = {REF_ARRAY, NULL};
        gl_kernel *k;
        if ((r.obj = gl_testudata(L, -1, GL_ARRAY_T))) r.kind = REF_ARRAY;
        else if ((r.obj = gl_testudata(L, -1, GL_HOST_T))) r.kind = REF_HOST;
        else if ((r.obj = gl_test_tensormap(L, -1))) r.kind = REF_TENSORMAP;
        else if ((r.obj = gl_testudata(L, -1, GL_MODULE_T))) r.kind = REF_MODULE;
        else if ((k = gl_test_kernel(L, -1))) r.kind = REF_MODULE, r.obj = k->module;
        else if ((r.obj = gl_testudata(L, -1, EVENT_T))) r.kind = REF_EVENT;
        else if ((r.obj = gl_testudata(L, -1, GRAPH_T))) r.kind = REF_GRAPH;
        if (r.obj) g->refs[g->nrefs++] = r;
    }
    return true;
}

/* Ends the capture begun on s whatever happened in fn; returns the captured graph or NULL. */
static CUgraph end_capture(lua_State *L, gl_stream *s, CUresult *r) {
    CUgraph graph = NULL;
    *r = gl_cu.cuStreamEndCapture(s->handle, &graph);
    cap.active = false;
    cap.stream = NULL;
    cap.guard = NULL;
    lua_pushnil(L);
    gl_private_set(L, NOTES_KEY);
    if (cap.free_after) stream_release(s);
    gl_release_after_capture();
    return *r == CUDA_SUCCESS ? graph : NULL;
}

/* A capture under way belongs to a guard object in s:capture's own stack slot. When fn never
 * returns (os.exit(code, true) closes the Lua state from inside it), the guard's finalizer ends
 * the capture, so the stream is released and the releases parked during the capture run; without
 * it the stream, and what its release lets go (a partition's block), outlived the state. Only the
 * guard of the capture under way ends it: one finalized after its capture, or called by hand with
 * another object, does nothing. */
static int capture_guard_gc(lua_State *L) {
    if (!cap.active || cap.guard == NULL || cap.guard != lua_touserdata(L, 1)) return 0;
    CUresult r;
    CUgraph graph = end_capture(L, cap.stream, &r);
    if (graph) gl_cu.cuGraphDestroy(graph);
    return 0;
}

static const void *push_capture_guard(lua_State *L) {
    const void *guard = gl_newuserdatauv(L, 0, 0);
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, capture_guard_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushliteral(L, "gpulab object");
    lua_setfield(L, -2, "__metatable");
    gl_lua_setmetatable(L, -2);
    return guard;
}

/* Pushes the graph the capture under way fills, and takes it out of the private store (which
 * held it while fn ran). */
static gl_graph *take_capture_result(lua_State *L) {
    gl_private_get(L, RESULT_KEY);
    gl_graph *g = gl_testudata(L, -1, GRAPH_T);
    lua_pushnil(L);
    gl_private_set(L, RESULT_KEY);
    return g;
}

/* gl_select_device for a protected call: makes the stream's device current. */
static int select_stream_device(lua_State *L) {
    const gl_stream *s = lua_touserdata(L, 1);
    gl_select_device(L, s->device, "s:capture");
    return 0;
}

int gl_stream_capture(lua_State *L) {
    const char *fn = "s:capture";
    gl_stream *s = gl_testudata(L, 1, GL_STREAM_T);
    if (s == NULL)
        gl_argerror(L, 1, fn, "cuda.stream expected, got %s; the default stream cannot be captured: "
                              "use cuda.stream()", gl_typename(L, 1));
    check_stream(L, 1, fn);
    if (lua_type(L, 2) != LUA_TFUNCTION)
        gl_typeerror(L, 2, fn, "function");
    if (cap.active) luaL_error(L, "%s: a capture is already under way (captures do not nest)", fn);
    gl_require_gpu(L, fn);
    /* A context sync still running for a timed-out cuda.sync{timeout=}: a capture begun meanwhile
     * was invalidated by it (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED in the H200 stress run) */
    if (gl_watchdog_pending())
        luaL_error(L, "%s: a timed-out cuda.sync is still waiting for the GPU, and its context sync "
                      "would invalidate the capture: let that work finish (cuda.sync()) first", fn);
    lua_settop(L, 2);
    /* The result, made now (no allocation can fail once the driver holds a captured graph), and
       the table of the objects the work uses (its user value) are kept in the private store while
       fn runs, not in this function's stack slots: debug.getlocal reads those, and fn could free
       the unfinished graph or empty the table (the replays would then use freed memory). */
    gl_graph *g = gl_newuserdatauv(L, sizeof *g, 1);
    memset(g, 0, sizeof *g);
    gl_setmetatable(L, GRAPH_T);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, -3, 1);
    gl_private_set(L, NOTES_KEY);
    gl_private_set(L, RESULT_KEY);
    const void *guard = push_capture_guard(L);        /* 3: ends the capture if fn never returns */
    CUresult r = gl_cu.cuStreamBeginCapture(s->handle, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) {
        lua_pushnil(L);
        gl_private_set(L, NOTES_KEY);
        take_capture_result(L);
        gl_raise_cuda(L, r, fn, "cuStreamBeginCapture");
    }
    cap.active = true;
    cap.stream = s;
    cap.free_after = false;
    cap.guard = guard;
    /* Finalizers free memory, which the driver refuses while this thread captures (and would
     * invalidate the capture): the automatic collector waits until the capture ends. */
    bool collecting = lua_gc(L, LUA_GCISRUNNING);
    lua_gc(L, LUA_GCSTOP);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 1); /* fn(s): the stream to launch on, as cuda.measure passes it */
    int status = lua_pcall(L, 1, 0, 0); /* on an error, its value is at 4 */
    if (collecting) lua_gc(L, LUA_GCRESTART);
    g = take_capture_result(L); /* pushes it (4, or 5 above the error) */
    if (!cap.active || cap.guard != guard) /* its guard's finalizer, called by hand, ended it */
        luaL_error(L, "%s: the capture was ended before fn returned (its guard's finalizer was called "
                      "by hand); nothing was captured", fn);
    CUgraph graph = end_capture(L, s, &r);
    if (status != LUA_OK || g == NULL) { /* the original error, with the partial graph discarded */
        if (graph) gl_cu.cuGraphDestroy(graph);
        if (status == LUA_OK) return luaL_error(L, "%s: the capture's graph is gone", fn); /* never by a script */
        lua_pop(L, 1);
        return lua_error(L);
    }
    int result = lua_gettop(L);
    /* fn may have made another device current: the graph is made executable, and labelled, in
       the context of the stream's device, and fn's choice is restored after */
    int fn_device = gl_current_device();
    bool moved = fn_device != s->device;
    if (moved && graph) {
        lua_pushvalue(L, 2); /* keeps the stack shape for the protected call */
        lua_pushcfunction(L, select_stream_device);
        lua_pushlightuserdata(L, s);
        if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
            gl_cu.cuGraphDestroy(graph);
            lua_error(L);
        }
        lua_pop(L, 1);
    }
    if (r != CUDA_SUCCESS) {
        if (moved) gl_select_device(L, fn_device, fn); /* every exit leaves fn's choice current */
        gl_raise_cuda(L, r, fn, "cuStreamEndCapture (the function did something that cannot be "
                                "captured: a sync, a synchronous copy, an allocation or a free)");
    }
    size_t nodes = 0;
    r = gl_cu.cuGraphGetNodes(graph, NULL, &nodes);
    const char *step = "cuGraphGetNodes";
    CUgraphExec exec = NULL;
    if (r == CUDA_SUCCESS) {
        step = "cuGraphInstantiateWithFlags";
        r = gl_cu.cuGraphInstantiateWithFlags(&exec, graph, 0);
    }
    gl_cu.cuGraphDestroy(graph); /* the executable graph does not need it */
    if (r != CUDA_SUCCESS) {
        if (moved) gl_select_device(L, fn_device, fn);
        gl_raise_cuda(L, r, fn, step);
    }
    g->exec = exec;
    g->nodes = nodes;
    g->device = s->device;
    gl_live.graphs++;
    if (moved) gl_select_device(L, fn_device, fn); /* as fn left it */
    lua_getiuservalue(L, result, 1); /* the objects the work used: unreachable from scripts */
    if (!collect_refs(L, lua_gettop(L), g)) luaL_error(L, "%s: out of host memory", fn); /* __gc frees it */
    lua_settop(L, result);
    return 1;
}

/* Raises if an object the graph's work uses was freed since the capture. */
static void check_refs_alive(lua_State *L, const gl_graph *g, const char *fn) {
    static const char *const names[] = {GL_ARRAY_T, GL_HOST_T, GL_TENSORMAP_T, GL_MODULE_T,
                                        EVENT_T, GRAPH_T};
    for (int i = 0; i < g->nrefs; i++) {
        const graph_ref *r = &g->refs[i];
        bool alive = true;
        switch (r->kind) {
        case REF_ARRAY: alive = ((gl_array *)r->obj)->ptr != 0; break;
        case REF_HOST: alive = ((gl_host *)r->obj)->data != NULL; break;
        case REF_TENSORMAP: {
            const char *unusable = gl_tensormap_unusable(r->obj);
            if (unusable) luaL_error(L, "%s: the graph uses a cuda.tensormap: %s", fn, unusable);
            break;
        }
        case REF_MODULE: alive = ((gl_module *)r->obj)->handle != NULL; break;
        case REF_EVENT: alive = ((gl_event *)r->obj)->handle != NULL; break;
        case REF_GRAPH: alive = ((gl_graph *)r->obj)->exec != NULL; break;
        }
        if (!alive)
            luaL_error(L, "%s: the graph uses a %s that was freed after the capture", fn, names[r->kind]);
    }
}

static void mark_refs(gl_graph *g, gl_stream_track *t, uint64_t seq) {
    for (int i = 0; i < g->nrefs; i++) {
        void *o = g->refs[i].obj;
        switch (g->refs[i].kind) {
        case REF_ARRAY: gl_use_mark(&((gl_array *)o)->use, t, seq); break;
        case REF_HOST: gl_use_mark(&((gl_host *)o)->use, t, seq); break;
        case REF_TENSORMAP: gl_use_mark(&((gl_tensormap *)o)->use, t, seq); break;
        case REF_MODULE: gl_use_mark(&((gl_module *)o)->use, t, seq); break;
        case REF_GRAPH: gl_use_mark(&((gl_graph *)o)->use, t, seq); break;
        case REF_EVENT: break; /* the driver keeps events alive while work refers to them */
        }
    }
    gl_use_mark(&g->use, t, seq);
}

int gl_graph_launch(lua_State *L) {
    const char *fn = "g:launch";
    gl_graph *g = check_graph(L, 1, fn);
    gl_require_gpu(L, fn);
    if (g->device != gl_current_device()) gl_refuse_other_device(L, fn, 1, "cuda.graph", g->device);
    gl_stream_track *t = gl_opt_stream_track(L, 2, fn);
    check_refs_alive(L, g, fn);
    mark_refs(g, t, gl_next_seq());
    gl_capture_note(L, 1); /* a replay inside a capture becomes a child graph */
    static const unsigned one[3] = {1, 1, 1};
    char name[64];
    snprintf(name, sizeof name, "cuda.graph[%zu nodes]", g->nodes);
    gl_log_launch(name, one, one, gl_track_handle(t));
    long obs = gl_observers ? gl_observe_begin(gl_track_handle(t), true) : -1; /* cuda.trace */
    GL_CHECK(L, gl_cu.cuGraphLaunch(g->exec, gl_track_handle(t)), fn, "cuGraphLaunch");
    if (obs >= 0) gl_observe_graph(obs, gl_track_handle(t));
    return 0;
}

lua_Integer gl_graph_node_count(lua_State *L, int idx) {
    return (lua_Integer)((const gl_graph *)gl_checkudata(L, idx, GRAPH_T))->nodes;
}

/* The fields (the class's __fields, read through gl_class_index). */
static int f_graph_nodes(lua_State *L) {
    lua_pushinteger(L, gl_graph_node_count(L, 1));
    return 1;
}

static int f_graph_objects(lua_State *L) {
    const gl_graph *g = gl_checkudata(L, 1, GRAPH_T);
    lua_pushinteger(L, g->nrefs);
    return 1;
}

static int graph_tostring(lua_State *L) {
    gl_graph *g = gl_checkudata(L, 1, GRAPH_T);
    if (g->exec == NULL)
        lua_pushliteral(L, "cuda.graph (freed)");
    else
        lua_pushfstring(L, "cuda.graph %p (%d nodes, holds %d objects)", (void *)g->exec,
                        (int)g->nodes, g->nrefs);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * cuda.bench(fn, {warmup=3, reps=20, stream=s, timeout=}): the plain form of cuda.measure
 * (measure.c): device time of the work fn enqueues, one event pair per call and a wait on the
 * end event, so each sample starts on an idle stream (it includes the host's time to enqueue
 * the work: for tiny kernels, launch overhead). Exactly `reps` samples, none rejected, no L2
 * flush, no clock kernel; the timeout bounds each wait. The result is cuda.measure's, with
 * `samples` the list of times (ms) and `reps`, `warmup` beside it.
 * ------------------------------------------------------------------------------------------ */
static lua_Integer count_field(lua_State *L, int t, const char *name, lua_Integer def,
                               lua_Integer lo, const char *fn) {
    lua_Integer v = gl_opt_int_field(L, t, name, def, fn);
    if (v < lo || v > BENCH_MAX_REPS)
        gl_fielderror(L, t, fn, name, "must be %lld..%d, got %lld", (long long)lo, BENCH_MAX_REPS,
                      (long long)v);
    return v;
}

static int l_bench(lua_State *L) {
    const char *fn = "cuda.bench";
    static const char *const known[] = {"warmup", "reps", "stream", "timeout", NULL};
    if (lua_type(L, 1) != LUA_TFUNCTION)
        gl_typeerror(L, 1, fn, "function");
    gl_measure_opts o = {.fn = fn, .regime = GL_REGIME_HOT, .warmup = 3, .min_samples = 20,
                         .batch = 1, .max_noise = -1, .timeout = -1, .timeout_per_wait = true};
    lua_settop(L, 2);
    if (opt_table(L, 2, known, fn, "{warmup=, reps=, stream=, timeout=}")) {
        o.warmup = count_field(L, 2, "warmup", 3, 0, fn);
        o.min_samples = count_field(L, 2, "reps", 20, 1, fn);
        o.timeout = timeout_field(L, 2, fn);
        gl_rawgetfield(L, 2, "stream"); /* 3: kept on the stack while fn runs */
        if (!lua_isnil(L, 3) && gl_test_stream(L, 3) == NULL)
            gl_fieldtypeerror(L, 2, fn, "stream", 3, "cuda.stream");
        gl_opt_stream_field(L, 2, 3, "stream", fn);
    }
    lua_settop(L, 3);
    o.max_samples = o.min_samples;
    gl_measure_run(L, 1, 3, &o);
    int result = lua_gettop(L);
    gl_rawgetfield(L, result, "times");
    lua_setfield(L, result, "samples");
    lua_pushinteger(L, o.min_samples);
    lua_setfield(L, result, "reps");
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
void gl_open_stream(lua_State *L) {
    static const luaL_Reg stream_meta[] = {{"__gc", gl_stream_free}, {"__close", gl_stream_free},
                                           {"__tostring", stream_tostring}, {NULL, NULL}};
    static const luaL_Reg stream_methods[] = {
        {"sync", l_stream_sync}, {"query", l_stream_query}, {"wait", l_stream_wait},
        {"capture", gl_stream_capture}, {"free", gl_stream_free}, {NULL, NULL}};
    gl_new_class(L, GL_STREAM_T, stream_meta, stream_methods, NULL);

    static const luaL_Reg event_meta[] = {{"__gc", event_free}, {"__close", event_free},
                                          {"__tostring", event_tostring}, {NULL, NULL}};
    static const luaL_Reg event_methods[] = {
        {"record", l_event_record}, {"sync", l_event_sync}, {"query", l_event_query},
        {"elapsed", l_event_elapsed}, {"free", event_free}, {NULL, NULL}};
    gl_new_class(L, EVENT_T, event_meta, event_methods, NULL);

    static const luaL_Reg graph_meta[] = {{"__gc", gl_graph_free}, {"__close", gl_graph_free},
                                          {"__tostring", graph_tostring}, {NULL, NULL}};
    static const luaL_Reg graph_methods[] = {{"launch", gl_graph_launch}, {"free", gl_graph_free},
                                             {NULL, NULL}};
    static const luaL_Reg graph_fields[] = {{"nodes", f_graph_nodes}, {"objects", f_graph_objects},
                                            {NULL, NULL}};
    gl_new_class(L, GRAPH_T, graph_meta, graph_methods, graph_fields);

    static const luaL_Reg fns[] = {{"stream", gl_stream_new}, {"event", l_event}, {"bench", l_bench},
                                   {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
