/*
 * driver.c — opening libcuda at run time, the one error path, the lazily created primary
 * context, the poisoned state after a sticky error, the launch log and deadline waits.
 */
#define _GNU_SOURCE
#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "gpulab.h"
#include "launchlog.h"
#include "lifetime.h"
#include "observe.h"
#include "options.h"
#include "register.h"
#include "results.h"
#include "wait.h"

#include <lauxlib.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

gl_driver gl_cu;

static struct {
    bool tried, ok;
    const char *reason;
    char reason_buf[512];
    int version;
    CUresult code;      /* the cuda.error code without a driver (gl_require_driver) */
    char code_name[96]; /* and its name: no cuGetErrorName to ask then */
} drv;

/* Records why there is no driver: the code and name its cuda.error carries. */
static void no_driver_code(CUresult r, const char *name) {
    drv.code = r;
    snprintf(drv.code_name, sizeof drv.code_name, "%s", name);
}

static struct {
    bool created;
    int ordinal;
    CUcontext ctx;
    CUdevice dev;
    char poisoned[2048]; /* empty while healthy */
    CUresult poison_code; /* the sticky error behind it */
} ctx;

static void push_launch_list(lua_State *L);
static void push_poison_launches(lua_State *L);
static void snapshot_poison_launches(void);

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

/* cuda.h's plain prototype is what gl_cu's field types follow. Where CUDA 13 added a new version
 * under the same base name with a different signature and no macro (cuCtxSynchronize_v2 takes a
 * context), ask for the version that matches the plain prototype. */
static int proc_version(const char *name) {
    if (strcmp(name, "cuCtxSynchronize") == 0) return 2000;
    return CUDA_VERSION;
}

static bool fetch_entry_points(get_proc_fn get_proc) {
#define GL_FETCH(name)                                                                          \
    {                                                                                           \
        void *p = NULL;                                                                         \
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;                        \
        if (get_proc(#name, &p, proc_version(#name), CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS \
            || p == NULL) {                                                                     \
            snprintf(drv.reason_buf, sizeof drv.reason_buf,                                     \
                     "the CUDA driver has no entry point %s for CUDA %d (driver too old?)",     \
                     #name, CUDA_VERSION);                                                      \
            return false;                                                                       \
        }                                                                                       \
        memcpy(&gl_cu.name, &p, sizeof p);                                                      \
    }
    GL_DRIVER_FUNCS(GL_FETCH)
#undef GL_FETCH
#define GL_FETCH_OPTIONAL(name)                                                                 \
    {                                                                                           \
        void *p = NULL;                                                                         \
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;                        \
        if (get_proc(#name, &p, proc_version(#name), CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS \
            || st != CU_GET_PROC_ADDRESS_SUCCESS)                                               \
            p = NULL;                                                                           \
        memcpy(&gl_cu.name, &p, sizeof p);                                                      \
    }
    GL_DRIVER_OPTIONAL_FUNCS(GL_FETCH_OPTIONAL)
#undef GL_FETCH_OPTIONAL
    return true;
}

/* libcuda opens its JIT compilers (PTX, NVVM) by soname when it first needs them. Found by the
 * loader's search, libcuda and they sit in the same system folder. A libcuda given by path
 * outside it (GPULAB_LIBCUDA=/usr/local/cuda/compat/libcuda.so.1, the forward-compatibility
 * package) would get the system driver's copies, another version, or none: those beside it
 * are loaded first, by full path, so the soname lookups find them. */
static void preload_driver_siblings(const char *libcuda_path) {
    static const char *const siblings[] = {"libnvidia-ptxjitcompiler.so.1", "libnvidia-nvvm.so.4"};
    const char *slash = strrchr(libcuda_path, '/');
    if (slash == NULL) return;
    for (size_t i = 0; i < sizeof siblings / sizeof siblings[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - libcuda_path), libcuda_path, siblings[i]);
        if (access(path, F_OK) == 0 && dlopen(path, RTLD_NOW | RTLD_LOCAL) == NULL) (void)dlerror();
    }
}

bool gl_driver_open(const char **reason) {
    if (!drv.tried) {
        drv.tried = true;
        const char *path = getenv("GPULAB_LIBCUDA");
        if (path == NULL || *path == '\0') path = "libcuda.so.1";
        preload_driver_siblings(path);
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) {
            const char *why = dlerror();
            snprintf(drv.reason_buf, sizeof drv.reason_buf,
                     "no CUDA driver: cannot open %s (%s)", path, why ? why : "unknown reason");
            no_driver_code(CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
        } else {
            get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
            if (get_proc == NULL) {
                snprintf(drv.reason_buf, sizeof drv.reason_buf,
                         "no CUDA driver: %s has no cuGetProcAddress_v2 (driver older than 12.0)",
                         path);
                no_driver_code(CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
            } else if (fetch_entry_points(get_proc)) {
                CUresult r = gl_cu.cuInit(0);
                if (r != CUDA_SUCCESS) {
                    char name[96];
                    snprintf(drv.reason_buf, sizeof drv.reason_buf,
                             "CUDA driver %s present but cuInit failed: %s", path,
                             gl_cuda_error_name(r, name, sizeof name));
                    const char *rname = NULL;
                    if (gl_cu.cuGetErrorName(r, &rname) != CUDA_SUCCESS || rname == NULL) rname = "CUDA error";
                    no_driver_code(r, rname);
                } else {
                    int v = 0;
                    if (gl_cu.cuDriverGetVersion(&v) == CUDA_SUCCESS) drv.version = v;
                    drv.ok = true;
                }
            }
            if (!drv.ok) memset(&gl_cu, 0, sizeof gl_cu);
        }
        drv.reason = drv.ok ? NULL : drv.reason_buf;
    }
    if (reason) *reason = drv.reason;
    return drv.ok;
}

/* Driver version as reported by cuDriverGetVersion (e.g. 13000), or 0 without a driver. */
int gl_driver_version(void) { return drv.ok ? drv.version : 0; }

/* ---------------------------------------------------------------------------------------- */

/* Appends "; launches since the last good sync: k<<<grid,block>>> on stream ..., ..." */
static void gl_log_describe(luaL_Buffer *b);

const char *gl_cuda_error_name(CUresult r, char *buf, size_t len) {
    const char *name = NULL;
    if (drv.ok && gl_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (name)
        snprintf(buf, len, "%s (%d)", name, (int)r);
    else
        snprintf(buf, len, "CUDA error %d", (int)r);
    return buf;
}

bool gl_is_sticky_error(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return true;
    default:
        return false;
    }
}

/* "CUDA_ERROR_OUT_OF_MEMORY", or "CUDA error 2" when the driver cannot name it. */
static const char *plain_error_name(CUresult r, char *buf, size_t len) {
    const char *name = NULL;
    if (drv.ok && gl_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (!drv.ok && r == drv.code && drv.code_name[0]) name = drv.code_name;
    if (name) snprintf(buf, len, "%s", name);
    else snprintf(buf, len, "CUDA error %d", (int)r);
    return buf;
}

/* Raises the cuda.error for `r` whose message is the string at the top of the stack. */
__attribute__((noreturn)) static void raise_error_object(lua_State *L, CUresult r, const char *fn,
                                                         const char *call, bool poisoned) {
    char name[128];
    plain_error_name(r, name, sizeof name);
    gl_push_error(L, -1, (int)r, name, fn, poisoned);
    if (call) gl_set_string_field(L, "call", call);
    if (poisoned && r == ctx.poison_code) push_poison_launches(L);
    else push_launch_list(L);
    lua_setfield(L, -2, "launches");
    lua_error(L);
    abort(); /* not reached */
}

void gl_require_driver(lua_State *L, const char *fn) {
    const char *why;
    if (gl_driver_open(&why)) return;
    if (drv.code == CUDA_SUCCESS) /* an entry point missing: no driver gpulab can use */
        no_driver_code(CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
    luaL_where(L, 1); /* the text users saw when this was a string from luaL_error */
    lua_pushfstring(L, "%s: %s", fn, why);
    lua_concat(L, 2);
    raise_error_object(L, drv.code, fn, NULL, false);
}

void gl_raise_cuda_message(lua_State *L, CUresult r, const char *fn, const char *call) {
    raise_error_object(L, r, fn, call, false);
}

void gl_raise_cuda(lua_State *L, CUresult r, const char *fn, const char *what) {
    char name[128];
    const char *desc = NULL;
    if (drv.ok && gl_cu.cuGetErrorString(r, &desc) != CUDA_SUCCESS) desc = NULL;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "%s: %s: %s", fn, what, gl_cuda_error_name(r, name, sizeof name));
    luaL_addvalue(&b);
    if (desc) {
        luaL_addstring(&b, ": ");
        luaL_addstring(&b, desc);
    }
    if (gl_is_sticky_error(r)) {
        gl_log_describe(&b);
        luaL_pushresult(&b);
        snprintf(ctx.poisoned, sizeof ctx.poisoned,
                 "context poisoned by %s; restart the process (a sticky CUDA error cannot be "
                 "recovered in-process)", lua_tostring(L, -1));
        ctx.poison_code = r;
        snapshot_poison_launches();
        lua_pushfstring(L, "\n(the context is now poisoned: every later GPU call fails; "
                           "restart the process)");
        lua_concat(L, 2);
        raise_error_object(L, r, fn, what, true);
    }
    luaL_pushresult(&b);
    raise_error_object(L, r, fn, what, false);
}

const char *gl_poisoned_reason(void) { return ctx.poisoned[0] ? ctx.poisoned : NULL; }

bool gl_context_usable(void) { return drv.ok && ctx.created && ctx.poisoned[0] == '\0'; }

int gl_current_device(void) { return ctx.ordinal; }

/* Primary contexts retained so far, one per ordinal: switching back and forth retains nothing new. */
static CUcontext retained[GL_MAX_DEVICES];

CUcontext gl_device_context(lua_State *L, int ordinal, const char *fn) {
    if (ordinal < 0 || ordinal >= GL_MAX_DEVICES)
        luaL_error(L, "%s: device %d is beyond the %d devices gpulab tracks", fn, ordinal, GL_MAX_DEVICES);
    if (retained[ordinal] == NULL) {
        CUdevice dev;
        GL_CHECK(L, gl_cu.cuDeviceGet(&dev, ordinal), fn, "cuDeviceGet");
        CUcontext c;
        GL_CHECK(L, gl_cu.cuDevicePrimaryCtxRetain(&c, dev), fn, "cuDevicePrimaryCtxRetain");
        retained[ordinal] = c;
    }
    return retained[ordinal];
}

CUcontext gl_device_context_retained(int ordinal) {
    return ordinal >= 0 && ordinal < GL_MAX_DEVICES ? retained[ordinal] : NULL;
}

static void make_current(lua_State *L, int ordinal, const char *fn) {
    CUdevice dev;
    GL_CHECK(L, gl_cu.cuDeviceGet(&dev, ordinal), fn, "cuDeviceGet");
    CUcontext c = gl_device_context(L, ordinal, fn);
    GL_CHECK(L, gl_cu.cuCtxSetCurrent(c), fn, "cuCtxSetCurrent");
    /* The previous device's context stays retained: its objects may still be alive. */
    ctx.created = true;
    ctx.ordinal = ordinal;
    gl_seq_device = ordinal < GL_SEQ_DEVICES ? ordinal : GL_SEQ_DEVICES - 1;
    ctx.ctx = c;
    ctx.dev = dev;
}

void gl_require_gpu(lua_State *L, const char *fn) {
    /* every launch comes here: the usable context, which the checks below would all pass, is
       three tests and no call (drv.ok is set once, when the driver opened) */
    if (drv.ok && ctx.created && ctx.poisoned[0] == '\0') return;
    gl_require_driver(L, fn);
    if (ctx.poisoned[0]) {
        luaL_where(L, 1); /* where luaL_error put it: this error is raised on every later call */
        lua_pushfstring(L, "%s: %s", fn, ctx.poisoned);
        lua_concat(L, 2);
        raise_error_object(L, ctx.poison_code, fn, NULL, true);
    }
    if (!ctx.created) make_current(L, ctx.ordinal, fn);
}

void gl_select_device(lua_State *L, int ordinal, const char *fn) {
    gl_require_gpu(L, fn);
    if (ordinal != ctx.ordinal) make_current(L, ordinal, fn);
}

/* ------------------------------------------------------------------------------------------
 * Launch log: a ring of the most recent submissions since the last good sync.
 * ------------------------------------------------------------------------------------------ */
#define LOG_SLOTS 8
typedef struct {
    char kernel[GL_LOG_NAME];
    unsigned grid[3], block[3];
    CUstream stream;
} log_entry;
typedef struct launch_log {
    log_entry ring[LOG_SLOTS];
    unsigned long long count; /* launches since the last sync covering everything */
    unsigned valid;           /* of those, the newest this many are in the ring (<= LOG_SLOTS) */
} launch_log;
static launch_log lg;

void gl_log_name(char out[GL_LOG_NAME], const char *name) {
    size_t n = strnlen(name, GL_LOG_NAME - 1);
    memset(out, 0, GL_LOG_NAME); /* the padding too: entries are copied whole */
    memcpy(out, name, n);
    out[n] = '\0';
}

/* The next entry of the ring with everything but the kernel's name written. */
static log_entry *next_log_entry(const unsigned grid[3], const unsigned block[3], CUstream stream) {
    log_entry *e = &lg.ring[lg.count++ % LOG_SLOTS];
    if (lg.valid < LOG_SLOTS) lg.valid++;
    memcpy(e->grid, grid, sizeof e->grid);
    memcpy(e->block, block, sizeof e->block);
    e->stream = stream;
    return e;
}

void gl_log_launch_padded(const char name[GL_LOG_NAME], const unsigned grid[3], const unsigned block[3],
                          CUstream stream) {
    memcpy(next_log_entry(grid, block, stream)->kernel, name, GL_LOG_NAME);
}

void gl_log_launch(const char *kernel, const unsigned grid[3], const unsigned block[3],
                   CUstream stream) {
    gl_log_name(next_log_entry(grid, block, stream)->kernel, kernel);
}

void gl_log_sync_ok(CUstream stream) {
    /* A stream sync proves only that stream's work done; keep it simple and exact: forget
     * everything only on a full sync, and on a stream sync drop that stream's trailing entries. */
    if (stream == NULL) {
        lg.count = 0;
        lg.valid = 0;
        return;
    }
    /* only entries still in the ring: past them, the stream of older launches is unknown */
    while (lg.valid > 0 && lg.ring[(lg.count - 1) % LOG_SLOTS].stream == stream) {
        lg.count--;
        lg.valid--;
    }
}

static launch_log poison_log; /* the launch log when the context was poisoned */

static void snapshot_poison_launches(void) { poison_log = lg; }

static void push_dim(lua_State *L, const unsigned d[3]) {
    lua_createtable(L, 3, 0);
    for (int i = 0; i < 3; i++) {
        lua_pushinteger(L, d[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* The entries the message lists (the most recent LOG_SLOTS), oldest first, as
 * {kernel=, grid={x,y,z}, block={x,y,z}, stream="default"|"stream"}; n = all since the last
 * good sync. The entries are copied before the first allocation (which may run a finalizer). */
static void push_launches(lua_State *L, const launch_log *log) {
    launch_log snap = *log;
    const log_entry *copy = snap.ring;
    unsigned long long count = snap.count;
    unsigned long long shown = count < snap.valid ? count : snap.valid;
    lua_createtable(L, (int)shown, 1);
    for (unsigned long long i = count - shown; i < count; i++) {
        const log_entry *e = &copy[i % LOG_SLOTS];
        lua_createtable(L, 0, 4);
        gl_set_string_field(L, "kernel", e->kernel);
        push_dim(L, e->grid);
        lua_setfield(L, -2, "grid");
        push_dim(L, e->block);
        lua_setfield(L, -2, "block");
        gl_set_string_field(L, "stream", e->stream ? "stream" : "default");
        lua_rawseti(L, -2, (lua_Integer)(i - (count - shown)) + 1);
    }
    gl_set_integer_field(L, "n", (lua_Integer)count);
}

static void push_launch_list(lua_State *L) { push_launches(L, &lg); }
static void push_poison_launches(lua_State *L) { push_launches(L, &poison_log); }

static void fmt_dim(char *buf, size_t len, const unsigned d[3]) {
    if (d[1] == 1 && d[2] == 1)
        snprintf(buf, len, "%u", d[0]);
    else
        snprintf(buf, len, "(%u,%u,%u)", d[0], d[1], d[2]);
}

static void gl_log_describe(luaL_Buffer *b) {
    if (lg.count == 0) {
        luaL_addstring(b, "; no launches since the last good sync");
        return;
    }
    char line[256], g[48], k[48];
    snprintf(line, sizeof line, "; %llu launch%s since the last good sync", lg.count,
             lg.count == 1 ? "" : "es");
    luaL_addstring(b, line);
    unsigned long long shown = lg.count < lg.valid ? lg.count : lg.valid;
    if (shown == 0) return; /* the ones kept were another stream's, since synced */
    if (lg.count > shown) {
        snprintf(line, sizeof line, " (last %llu shown)", shown);
        luaL_addstring(b, line);
    }
    luaL_addstring(b, ":");
    for (unsigned long long i = lg.count - shown; i < lg.count; i++) {
        const log_entry *e = &lg.ring[i % LOG_SLOTS];
        fmt_dim(g, sizeof g, e->grid);
        fmt_dim(k, sizeof k, e->block);
        snprintf(line, sizeof line, " %s<<<%s, %s>>>%s", e->kernel, g, k,
                 e->stream ? " on a stream" : " on the default stream");
        luaL_addstring(b, line);
        if (i + 1 < lg.count) luaL_addstring(b, ",");
    }
}

/* ------------------------------------------------------------------------------------------
 * Waiting with a deadline. A stream is polled with cuStreamQuery. The driver offers no query
 * for a whole context, so one long-lived watchdog thread runs the blocking cuCtxSynchronize:
 * a waiter asks for a sync that starts after its request and waits, with its deadline, for
 * the watchdog to report one. A timed-out wait leaves the watchdog inside cuCtxSynchronize;
 * later requests are served by the next sync it starts, so there is never more than one
 * thread, however many waits time out. When the thread cannot be started (or
 * GPULAB_NO_WATCHDOG=1 says to behave as if it could not), the waiter polls every stream
 * gpulab knows (gl_query_all_streams) until the deadline, so the deadline holds either way.
 * ------------------------------------------------------------------------------------------ */
#define WATCHDOG_IDLE_S 5 /* an idle watchdog ends after this; the next timed wait starts one */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, done;   /* work: a request came (or stop); done: a sync finished */
    bool started;                /* a thread exists (running, or ended and not yet joined) */
    bool ended;                  /* it returned: join it before starting another */
    bool stop;                   /* asked to end (gl_watchdog_stop) */
    bool failed;
    pthread_t thread;
    uint64_t requested, completed; /* sync generations */
    CUresult result;               /* of the sync that completed `completed` */
    CUcontext ctx;                 /* the context the latest request is about */
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
        .done = PTHREAD_COND_INITIALIZER, .result = CUDA_SUCCESS};

/* Waits for a request; false when idle for WATCHDOG_IDLE_S or asked to stop. wd.mu held. */
static bool watchdog_next(void) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WATCHDOG_IDLE_S;
    while (wd.completed == wd.requested && !wd.stop)
        if (pthread_cond_timedwait(&wd.work, &wd.mu, &until) == ETIMEDOUT) break;
    return wd.completed != wd.requested && !wd.stop;
}

static void *watchdog_main(void *arg) {
    (void)arg;
    CUcontext current = NULL;
    pthread_mutex_lock(&wd.mu);
    while (watchdog_next()) {
        uint64_t target = wd.requested; /* this sync starts after every request so far */
        CUcontext c = wd.ctx;
        pthread_mutex_unlock(&wd.mu);
        CUresult r = CUDA_SUCCESS;
        if (c != current) r = gl_cu.cuCtxSetCurrent(c);
        if (r == CUDA_SUCCESS) {
            current = c;
            r = gl_cu.cuCtxSynchronize();
        }
        pthread_mutex_lock(&wd.mu);
        wd.completed = target;
        wd.result = r;
        pthread_cond_broadcast(&wd.done);
    }
    wd.ended = true;
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

/* Starts the watchdog if none runs; false when no thread can be had (then waiters poll).
 * Called with wd.mu held. A failed start is retried on later waits, so a passing shortage heals. */
static bool watchdog_ready(void) {
    if (wd.started && wd.ended) { /* it ended while idle: reap it (returns at once) */
        pthread_join(wd.thread, NULL);
        wd.started = wd.ended = false;
    }
    if (wd.started) return true;
    const char *no = getenv("GPULAB_NO_WATCHDOG");
    if (no && *no && strcmp(no, "0") != 0) {
        wd.failed = true;
        return false;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)256 * 1024); /* it only waits in the driver */
    wd.stop = false;
    /* born with every signal blocked: a Ctrl-C meant for the main thread (which blocks it at the
     * prompt) must not be taken here, where no one waits for it */
    sigset_t all, mask;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &mask);
    wd.started = pthread_create(&wd.thread, &attr, watchdog_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    pthread_attr_destroy(&attr);
    static bool at_exit_registered; /* os.exit() skips the Lua state's close: end it there too */
    if (wd.started && !at_exit_registered) at_exit_registered = atexit(gl_watchdog_stop) == 0;
    wd.failed = !wd.started;
    return wd.started;
}

void gl_watchdog_stop(void) {
    pthread_mutex_lock(&wd.mu);
    bool idle = wd.completed == wd.requested;
    if (!wd.started || !idle) { /* one still inside cuCtxSynchronize is left to the process end */
        pthread_mutex_unlock(&wd.mu);
        return;
    }
    wd.stop = true;
    pthread_cond_broadcast(&wd.work);
    pthread_mutex_unlock(&wd.mu);
    pthread_join(wd.thread, NULL);
    pthread_mutex_lock(&wd.mu);
    wd.started = wd.ended = wd.stop = false;
    pthread_mutex_unlock(&wd.mu);
}

bool gl_watchdog_pending(void) {
    pthread_mutex_lock(&wd.mu);
    bool pending = wd.started && wd.completed != wd.requested;
    pthread_mutex_unlock(&wd.mu);
    return pending;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timespec realtime_after(double seconds) {
    struct timespec abs;
    clock_gettime(CLOCK_REALTIME, &abs);
    if (seconds > 1e9) seconds = 1e9;
    double frac = (double)abs.tv_nsec * 1e-9 + seconds;
    abs.tv_sec += (time_t)frac;
    abs.tv_nsec = (long)((frac - (double)(time_t)frac) * 1e9);
    if (abs.tv_nsec >= 1000000000L) abs.tv_nsec = 999999999L;
    return abs;
}

/* No watchdog: poll every stream until all are idle or the deadline passes. */
static bool poll_all_streams(double timeout_s, CUresult *res) {
    double end = now_s() + timeout_s;
    long sleep_ns = 2000;
    for (;;) {
        CUresult r = gl_query_all_streams();
        if (r != CUDA_ERROR_NOT_READY) {
            *res = r;
            return true;
        }
        if (now_s() >= end) return false;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
}

bool gl_ctx_sync_deadline(double timeout_s, CUresult *res) {
    if (timeout_s < 0) {
        *res = gl_cu.cuCtxSynchronize();
        return true;
    }
    pthread_mutex_lock(&wd.mu);
    if (!watchdog_ready()) {
        pthread_mutex_unlock(&wd.mu);
        return poll_all_streams(timeout_s, res);
    }
    uint64_t mine = ++wd.requested;
    wd.ctx = ctx.ctx;
    pthread_cond_signal(&wd.work);
    struct timespec abs = realtime_after(timeout_s);
    double end = now_s() + timeout_s;
    while (wd.completed < mine && now_s() < end)
        if (pthread_cond_timedwait(&wd.done, &wd.mu, &abs) == ETIMEDOUT) break;
    bool done = wd.completed >= mine;
    *res = wd.result;
    pthread_mutex_unlock(&wd.mu);
    if (!done) { /* a deadline of 0 (or one shorter than the watchdog's wake-up) on idle streams */
        CUresult q = gl_query_all_streams();
        if (q != CUDA_ERROR_NOT_READY) {
            *res = q;
            done = true;
        }
    }
    return done;
}

void gl_raise_timeout(lua_State *L, const char *fn, double t) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "%s: timed out after %f s waiting for the GPU", fn, t);
    luaL_addvalue(&b);
    gl_log_describe(&b);
    luaL_addstring(&b, " (the work is still running; a kernel that never ends needs a restart)");
    luaL_pushresult(&b);
    /* no CUresult came back: the driver's code for a lapsed wait names what happened */
    gl_push_error(L, -1, CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", fn, false);
    gl_set_number_field(L, "timeout", t);
    push_launch_list(L);
    lua_setfield(L, -2, "launches");
    lua_error(L);
    abort();
}

void gl_wait(lua_State *L, CUstream stream, double timeout_s, const char *fn) {
    gl_require_gpu(L, fn);
    long obs = gl_observers ? gl_observe_begin(stream, false) : -1; /* cuda.trace */
    CUresult r;
    if (timeout_s < 0) {
        r = stream ? gl_cu.cuStreamSynchronize(stream) : gl_cu.cuCtxSynchronize();
    } else if (stream == NULL) {
        if (!gl_ctx_sync_deadline(timeout_s, &r)) gl_raise_timeout(L, fn, timeout_s);
    } else {
        double end = now_s() + timeout_s;
        long sleep_ns = 2000;
        for (;;) {
            r = gl_cu.cuStreamQuery(stream);
            if (r != CUDA_ERROR_NOT_READY) break;
            if (now_s() >= end) gl_raise_timeout(L, fn, timeout_s);
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
    }
    if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, stream ? "stream sync" : "context sync");
    if (obs >= 0) gl_observe_sync(obs, fn, stream);
    if (stream == NULL) gl_mark_device_synced(gl_current_device());
    gl_log_sync_ok(stream);
    gl_release_drain();
}

/* ------------------------------------------------------------------------------------------
 * cuda.available, cuda.version, cuda.sync, cuda.stats
 * ------------------------------------------------------------------------------------------ */
static int l_available(lua_State *L) {
    const char *why;
    if (!gl_driver_open(&why)) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, why);
        return 2;
    }
    int n = 0;
    CUresult r = gl_cu.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n == 0) {
        char name[96];
        lua_pushboolean(L, 0);
        if (r != CUDA_SUCCESS)
            lua_pushfstring(L, "the CUDA driver reports no device: %s",
                            gl_cuda_error_name(r, name, sizeof name));
        else
            lua_pushstring(L, "the CUDA driver reports no device");
        return 2;
    }
    if (ctx.poisoned[0]) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, ctx.poisoned);
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

extern void gl_push_nvrtc_version(lua_State *L); /* nvrtc.c */

#ifndef GPULAB_COMMIT
#define GPULAB_COMMIT "unknown" /* set by CMake from git at configure time */
#endif

static int l_version(lua_State *L) {
    lua_createtable(L, 0, 5);
    gl_set_string_field(L, "gpulab", GPULAB_VERSION);
    gl_set_string_field(L, "commit", GPULAB_COMMIT);
    gl_set_string_field(L, "lua", LUA_RELEASE);
    gl_push_nvrtc_version(L);
    lua_setfield(L, -2, "nvrtc");
    if (gl_driver_open(NULL)) {
        int v = gl_driver_version();
        lua_pushfstring(L, "%d.%d", v / 1000, (v % 1000) / 10);
        lua_setfield(L, -2, "driver");
    }
    return 1;
}

static int l_sync(lua_State *L) {
    double timeout = -1;
    if (!lua_isnoneornil(L, 1)) {
        if (!lua_istable(L, 1)) gl_typeerror(L, 1, "cuda.sync", "table");
        static const char *const known[] = {"timeout", NULL};
        gl_check_known_fields(L, 1, known, "cuda.sync");
        bool given = gl_rawfieldtype(L, 1, "timeout") != LUA_TNIL;
        if (given) {
            timeout = gl_opt_num_field(L, 1, "timeout", -1, "cuda.sync");
            if (!(timeout >= 0) || timeout > 1e9)
                gl_fielderror(L, 1, "cuda.sync", "timeout", "must be 0..1e9 seconds, got %.14g", timeout);
        }
    }
    gl_wait(L, NULL, timeout, "cuda.sync");
    return 0;
}

static int l_stats(lua_State *L) {
    gl_release_drain();
    lua_createtable(L, 0, 12);
#define F(name) gl_set_integer_field(L, #name, gl_live.name);
    F(arrays) F(hosts) F(modules) F(streams) F(events) F(graphs) F(tensormaps) F(prepared) F(partitions)
    F(device_bytes) F(pinned_bytes)
#undef F
    gl_set_integer_field(L, "deferred", gl_release_pending());
    return 1;
}

/* Device memory as the driver sees it: free, total (bytes). */
static int l_mem_info(lua_State *L) {
    gl_require_gpu(L, "cuda.mem_info");
    size_t fr = 0, total = 0;
    GL_CHECK(L, gl_cu.cuMemGetInfo(&fr, &total), "cuda.mem_info", "cuMemGetInfo");
    lua_pushinteger(L, (lua_Integer)fr);
    lua_pushinteger(L, (lua_Integer)total);
    return 2;
}

static int l_poisoned(lua_State *L) {
    const char *p = gl_poisoned_reason();
    if (p) lua_pushstring(L, p); else lua_pushnil(L);
    return 1;
}

void gl_open_driver(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"available", l_available}, {"version", l_version}, {"sync", l_sync},
        {"stats", l_stats},         {"mem_info", l_mem_info}, {"poisoned", l_poisoned},
        {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
