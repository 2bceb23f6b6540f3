/*
 * gpulab.h — what every binding shares: the run-time driver table, the one error path,
 * the lazily created context, the launch log, object lifetimes and live-object counts.
 *
 * bindings/ knows CUDA; host/ only calls luaopen_cuda() and the gl_host_* hooks.
 */
#ifndef GPULAB_H
#define GPULAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <lauxlib.h>
#include <lua.h>

#include "errors.h"

/* ------------------------------------------------------------------------------------------
 * Object identity (identity.c): every userdata made by gpulab ends with a tag naming its type,
 * and every type check compares it besides the metatable, so a forged metatable
 * (debug.setmetatable) never makes one type's block read as another's. The Lua names are
 * mapped for every file that includes this header.
 * ------------------------------------------------------------------------------------------ */
void *gl_newuserdatauv(lua_State *L, size_t size, int nuv);
void gl_setmetatable(lua_State *L, const char *tname);
int gl_lua_setmetatable(lua_State *L, int idx);
void *gl_testudata(lua_State *L, int idx, const char *tname);
void *gl_checkudata(lua_State *L, int idx, const char *tname);
/* True for a userdata created by gpulab with its class metatable still in place. */
bool gl_is_gpulab_object(lua_State *L, int idx);
/* Replaces debug.setuservalue (if the debug library is loaded) by one that refuses gpulab objects. */
void gl_guard_debug_library(lua_State *L);
#ifndef GL_IDENTITY_IMPL
#undef lua_newuserdatauv
#define lua_newuserdatauv gl_newuserdatauv
#define luaL_setmetatable gl_setmetatable
#define lua_setmetatable gl_lua_setmetatable
#define luaL_testudata gl_testudata
#define luaL_checkudata gl_checkudata
#endif

/* ------------------------------------------------------------------------------------------
 * The driver, opened at run time. Each entry is fetched with cuGetProcAddress under its base
 * name; the field's type follows cuda.h's versioned macro (cuMemAlloc -> cuMemAlloc_v2), and
 * asking with CUDA_VERSION returns that same version, so the pointer type matches.
 * ------------------------------------------------------------------------------------------ */
#define GL_DRIVER_FUNCS(X)                                                                      \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                       \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute)               \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuCtxGetStreamPriorityRange)    \
    X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal)         \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)  \
    X(cuLaunchKernel)                                                                           \
    X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemGetInfo)               \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)                                             \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)                              \
    X(cuMemsetD8) X(cuMemsetD16) X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemsetD16Async)          \
    X(cuMemsetD32Async)                                                                         \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)    \
    X(cuStreamWaitEvent) X(cuStreamBeginCapture) X(cuStreamEndCapture)                          \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                         \
    X(cuEventSynchronize) X(cuEventElapsedTime)                                                 \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)     \
    X(cuGraphGetNodes)                                                                          \
    X(cuTensorMapEncodeTiled) X(cuTensorMapReplaceAddress)

/* Entry points gpulab works without (newer than the oldest driver it supports): NULL when the
 * driver lacks them, and every caller checks. cuFuncGetParamInfo came with CUDA 12.4. */
#define GL_DRIVER_OPTIONAL_FUNCS(X) X(cuFuncGetParamInfo)

#define GL_DRIVER_FIELD(name) __typeof__(&name) name;
typedef struct gl_driver {
    GL_DRIVER_FUNCS(GL_DRIVER_FIELD)
    GL_DRIVER_OPTIONAL_FUNCS(GL_DRIVER_FIELD)
} gl_driver;
#undef GL_DRIVER_FIELD

/* Filled by gl_driver_open(); every required field is non-NULL once it returned true. */
extern gl_driver gl_cu;

/* Opens libcuda (GPULAB_LIBCUDA or libcuda.so.1) once and calls cuInit. Never raises.
 * On failure returns false and *reason (static text) says why. */
bool gl_driver_open(const char **reason);

/* Driver version as reported by cuDriverGetVersion (e.g. 13000), or 0 without a driver. */
int gl_driver_version(void);

/* ------------------------------------------------------------------------------------------
 * The one error path. `fn` names the Lua function ("k:launch", "cuda.array"), `what` the
 * step ("cuMemAlloc"). Raises a cuda.error (errors.h) whose message reads
 *     fn: what: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory
 * and, for execution errors, appends the launches since the last good sync and poisons the
 * context (sticky errors: every later GPU call raises one "context poisoned" error).
 * ------------------------------------------------------------------------------------------ */
#define GL_CHECK(L, call, fn, what)                                                             \
    do {                                                                                        \
        CUresult gl_r_ = (call);                                                                \
        if (gl_r_ != CUDA_SUCCESS) gl_raise_cuda((L), gl_r_, (fn), (what));                     \
    } while (0)

__attribute__((noreturn)) void gl_raise_cuda(lua_State *L, CUresult r, const char *fn,
                                             const char *what);
/* The same cuda.error (errors.h) for a failure whose message the caller wrote: the string at
 * the top of the stack. `call` (the driver step) may be NULL. Does not poison the context. */
__attribute__((noreturn)) void gl_raise_cuda_message(lua_State *L, CUresult r, const char *fn,
                                                     const char *call);
/* Writes "CUDA_ERROR_X (n)" into buf (works without a driver too). */
const char *gl_cuda_error_name(CUresult r, char *buf, size_t len);
bool gl_is_sticky_error(CUresult r);

/* Makes sure the driver is open, the primary context of the current device is current and
 * the context is not poisoned; raises "fn: ..." otherwise. Every GPU entry point calls it. */
void gl_require_gpu(lua_State *L, const char *fn);
/* True once a context exists and is not poisoned: finalizers use it before touching handles. */
bool gl_context_usable(void);
/* The current device ordinal (0 until cuda.device(i) changes it). */
int gl_current_device(void);
/* Makes device `ordinal` current (retains its primary context). Raises on failure. */
void gl_select_device(lua_State *L, int ordinal, const char *fn);
/* Non-NULL once a sticky error was seen: the text every later GPU call raises. */
const char *gl_poisoned_reason(void);

/* ------------------------------------------------------------------------------------------
 * The launch log: what was submitted since the last sync that succeeded, so an execution
 * error or a timeout can name the kernels that were in flight.
 * ------------------------------------------------------------------------------------------ */
void gl_log_launch(const char *kernel, const unsigned grid[3], const unsigned block[3],
                   CUstream stream);
/* Called after a sync that covered everything (context) or one stream succeeded. */
void gl_log_sync_ok(CUstream stream_or_null_for_all);
/* Appends "; launches since the last good sync: k<<<grid,block>>> on stream ..., ..." */
void gl_log_describe(luaL_Buffer *b);

/* Waits for `stream` (NULL = whole context) with a deadline in seconds (<0: no deadline).
 * Raises "fn: timed out after Xs; pending: ..." or the CUDA error of the work. */
void gl_wait(lua_State *L, CUstream stream, double timeout_s, const char *fn);
/* Waits for the whole context with a deadline (<0: none) without raising: true when done
 * (*res: the sync's result), false when the deadline passed. One watchdog thread does the
 * blocking cuCtxSynchronize; without it, every stream is polled until the deadline. */
bool gl_ctx_sync_deadline(double timeout_s, CUresult *res);
/* Watchdog threads running now (0 or 1). */
int gl_watchdog_threads(void);
/* True while a context sync asked of the watchdog has not finished (a timed-out cuda.sync whose
 * work still runs): a stream capture begun now would be invalidated by that sync. */
bool gl_watchdog_pending(void);
/* Ends an idle watchdog and waits for it (the Lua state is closing); one still waiting in the
 * driver is left alone. */
void gl_watchdog_stop(void);
/* Raises "fn: timed out after t s waiting for the GPU; <launches in flight> ...". */
__attribute__((noreturn)) void gl_raise_timeout(lua_State *L, const char *fn, double t);

/* ------------------------------------------------------------------------------------------
 * Lifetimes. An object that queued work may use embeds a gl_use. Submitting work that uses
 * it calls gl_use_mark(); releasing calls gl_release(), which frees at once when no work is
 * pending and otherwise defers the free until that work is known complete.
 * ------------------------------------------------------------------------------------------ */
typedef struct gl_stream_track gl_stream_track; /* one per stream, outlives it while referenced */

#define GL_USE_STREAMS 4
typedef struct gl_use {
    uint64_t last_seq;                          /* gl_work_seq at the last submission using it */
    gl_stream_track *streams[GL_USE_STREAMS];   /* streams it was used on since that */
    int nstreams;                               /* -1: too many to track, wait for a full sync */
} gl_use;

/* Monotonic count of submissions; gl_done_seq is the count known complete (full sync). */
extern uint64_t gl_work_seq;
extern uint64_t gl_done_seq;

/* The track of the legacy default stream (never destroyed). */
gl_stream_track *gl_default_track(void);
gl_stream_track *gl_track_new(CUstream h);
/* The stream object is going away: record a final event, destroy the handle (deferred by
 * the driver until its work is done), and drop the stream's reference. */
void gl_track_retire(gl_stream_track *t);
CUstream gl_track_handle(const gl_stream_track *t);

/* Called once per submission that uses `u` on stream track `t` (cheap: no driver calls). */
static inline void gl_use_mark(gl_use *u, gl_stream_track *t, uint64_t seq);
/* Call before submitting: returns the new submission's sequence number. */
static inline uint64_t gl_next_seq(void) { return ++gl_work_seq; }

typedef void (*gl_release_fn)(void *handle, uintptr_t extra);
/* Releases `handle` with fn(handle, extra) now, or once the work recorded in `u` is done.
 * Never raises; without a usable context (poisoned, or no driver) the handle is dropped. */
void gl_release(gl_use *u, gl_release_fn fn, void *handle, uintptr_t extra);
/* Frees deferred objects whose work completed (non-blocking; nothing during a capture). */
void gl_release_drain(void);
/* Releases made while a stream capture was under way are parked without any driver call;
 * the stream binding calls this when the capture has ended to release them for real. */
void gl_release_after_capture(void);
/* Number of releases still waiting for work to finish. */
int gl_release_pending(void);
/* One non-blocking query of the legacy default stream and every live gpulab stream:
 * CUDA_ERROR_NOT_READY while any has work pending, else the first error or CUDA_SUCCESS. */
CUresult gl_query_all_streams(void);

void gl_track_ref(gl_stream_track *t);
void gl_track_unref(gl_stream_track *t);

static inline void gl_use_mark(gl_use *u, gl_stream_track *t, uint64_t seq) {
    if (u->last_seq <= gl_done_seq) { /* everything before was completed */
        for (int i = 0; i < u->nstreams; i++) gl_track_unref(u->streams[i]);
        u->nstreams = 0;
    }
    u->last_seq = seq;
    if (u->nstreams < 0) return;
    for (int i = 0; i < u->nstreams; i++)
        if (u->streams[i] == t) return;
    if (u->nstreams == GL_USE_STREAMS) {
        for (int i = 0; i < u->nstreams; i++) gl_track_unref(u->streams[i]);
        u->nstreams = -1;
        return;
    }
    gl_track_ref(t);
    u->streams[u->nstreams++] = t;
}

/* ------------------------------------------------------------------------------------------
 * Live objects, for cuda.stats() and the leak checks in the tests.
 * ------------------------------------------------------------------------------------------ */
typedef struct gl_stats {
    long arrays, hosts, modules, streams, events, graphs, tensormaps, prepared;
    long long device_bytes, pinned_bytes;
} gl_stats;
extern gl_stats gl_live;

/* ------------------------------------------------------------------------------------------
 * Small helpers for argument checking shared by every binding.
 * ------------------------------------------------------------------------------------------ */
/* Optional field readers of the options table at argument t: a wrong type raises
 * "bad argument #N to 'fn' (field 'name': integer expected, got string)" (errors.h). */
lua_Integer gl_opt_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *fn);
double gl_opt_num_field(lua_State *L, int t, const char *name, double def, const char *fn);
bool gl_opt_bool_field(lua_State *L, int t, const char *name, bool def, const char *fn);
const char *gl_opt_str_field(lua_State *L, int t, const char *name, const char *def, const char *fn);
/* Raises "bad argument #N to 'fn' (unknown field 'x' (known: a, b, c))" for keys of the options
 * table at argument t not in `known` (NULL-ended). */
void gl_check_known_fields(lua_State *L, int t, const char *const known[], const char *fn);
/* Creates a metatable named `tname` with methods, __index = methods, __name = tname. */
void gl_new_class(lua_State *L, const char *tname, const luaL_Reg *meta, const luaL_Reg *methods);

/* ------------------------------------------------------------------------------------------
 * Registration: each binding adds its functions to the `cuda` table at the top of the stack.
 * ------------------------------------------------------------------------------------------ */
void gl_open_driver(lua_State *L);    /* available, version, sync, stats      (driver.c)    */
void gl_open_device(lua_State *L);    /* count, device                         (device.c)    */
void gl_open_nvrtc(lua_State *L);     /* compile, compile_file                 (nvrtc.c)     */
void gl_open_module(lua_State *L);    /* load; module and kernel classes       (module.c)    */
void gl_open_launch(lua_State *L);    /* launch/prepare methods on kernels     (launch.c)    */
void gl_open_memory(lua_State *L);    /* array, host, compare                  (memory.c)    */
void gl_open_stream(lua_State *L);    /* stream, event, graphs, bench          (stream.c)    */
void gl_open_tensormap(lua_State *L); /* tensormap, tensormap_check            (tensormap.c) */
void gl_open_isolate(lua_State *L);   /* run_isolated                          (host/isolate.c) */

int luaopen_cuda(lua_State *L);

#endif
