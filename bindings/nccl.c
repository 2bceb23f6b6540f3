/*
 * nccl.c — cuda.nccl: NCCL communicators and collectives on gpulab arrays and streams.
 *
 * libnccl.so.2 is opened at run time (GPULAB_LIBNCCL overrides the name), like libcuda: no link
 * dependency and no NCCL header (nccl_abi.h declares what is used). NVLink multicast (NVLS) is
 * kept off: NCCL_NVLS_ENABLE=0 is put in the environment before NCCL reads it, unless the user
 * set it; gpulab never creates multicast objects itself.
 *
 * Two forms:
 *   cuda.nccl.init{devices={0,1,...}}  one process drives every listed GPU (ncclCommInitAll);
 *                                      collectives take one array (and stream) per device
 *   cuda.nccl.init{rank=r, nranks=n, id=hex, device=d}
 *                                      one rank per process (a child of cuda.run_isolated, or
 *                                      mpirun/Slurm): the id comes from cuda.nccl.unique_id() in
 *                                      one process and is handed to the others
 * Waiting is bounded: the multi-process init is non-blocking and polled until its deadline, and
 * comm:sync{timeout=} polls the completion events of the last collectives and NCCL's async error;
 * a deadline that passes aborts the communicator (ncclCommAbort) and raises, naming what was
 * waited for. Free, __close and __gc share one idempotent release that never raises.
 */
#define _GNU_SOURCE
#include "nccl_abi.h"
#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "dtype.h"
#include "identity.h"
#include "lifetime.h"
#include "objects.h"
#include "options.h"
#include "peer.h"

#include <lauxlib.h>
#include "stream.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COMM_T "cuda.nccl.comm"
#define MAX_LOCAL 16
#define DEFAULT_TIMEOUT_S 60.0

/* ------------------------------------------------------------------------------------------
 * Opening libnccl
 * ------------------------------------------------------------------------------------------ */
#define GL_NCCL_FIELD(name, ret, params) ret(*name) params;
static struct {
    GL_NCCL_FUNCS(GL_NCCL_FIELD)
    GL_NCCL_OPTIONAL_FUNCS(GL_NCCL_FIELD)
} nc;
#undef GL_NCCL_FIELD

static struct {
    bool tried, ok;
    char reason[1024];
    char path[512];
    int version;
} lib;

static bool fetch_nccl(void *h) {
#define GL_NCCL_FETCH(name, ret, params)                                                        \
    {                                                                                           \
        void *p = dlsym(h, #name);                                                              \
        if (p == NULL) {                                                                        \
            snprintf(lib.reason, sizeof lib.reason, "%s has no %s (NCCL older than 2.14?)",     \
                     lib.path, #name);                                                          \
            return false;                                                                       \
        }                                                                                       \
        memcpy(&nc.name, &p, sizeof p);                                                         \
    }
    GL_NCCL_FUNCS(GL_NCCL_FETCH)
#undef GL_NCCL_FETCH
#define GL_NCCL_FETCH_OPTIONAL(name, ret, params)                                               \
    {                                                                                           \
        void *p = dlsym(h, #name);                                                              \
        memcpy(&nc.name, &p, sizeof p);                                                         \
    }
    GL_NCCL_OPTIONAL_FUNCS(GL_NCCL_FETCH_OPTIONAL)
#undef GL_NCCL_FETCH_OPTIONAL
    return true;
}

static bool nccl_open(const char **why) {
    if (!lib.tried) {
        lib.tried = true;
        /* NCCL reads its environment once, at its first init: multicast stays off unless the
         * user asked otherwise (NVLS objects can take a shared machine's GPUs out of service). */
        setenv("NCCL_NVLS_ENABLE", "0", 0);
        const char *path = getenv("GPULAB_LIBNCCL");
        if (path == NULL || *path == '\0') path = "libnccl.so.2";
        snprintf(lib.path, sizeof lib.path, "%s", path);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            const char *e = dlerror();
            snprintf(lib.reason, sizeof lib.reason,
                     "no NCCL: cannot open %s (%s); set GPULAB_LIBNCCL=/path/to/libnccl.so.2", path,
                     e ? e : "unknown reason");
        } else if (fetch_nccl(h)) {
            int v = 0;
            if (nc.ncclGetVersion(&v) == GL_NCCL_SUCCESS) lib.version = v;
            lib.ok = true;
        }
        if (!lib.ok) memset(&nc, 0, sizeof nc);
    }
    if (why) *why = lib.ok ? NULL : lib.reason;
    return lib.ok;
}

static void require_nccl(lua_State *L, const char *fn) {
    const char *why;
    if (!nccl_open(&why)) luaL_error(L, "%s: %s", fn, why);
}

/* ------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------ */
static const char *result_name(gl_ncclResult_t r) {
    static const char *const names[] = {"ncclSuccess",         "ncclUnhandledCudaError",
                                        "ncclSystemError",     "ncclInternalError",
                                        "ncclInvalidArgument", "ncclInvalidUsage",
                                        "ncclRemoteError",     "ncclInProgress"};
    return r >= 0 && r < (int)(sizeof names / sizeof names[0]) ? names[r] : "ncclResult";
}

/* Raises "fn: what: ncclInvalidArgument (4): <NCCL's text>[; <NCCL's last error>]". */
__attribute__((noreturn)) static void raise_nccl(lua_State *L, gl_ncclResult_t r, const char *fn,
                                                 const char *what, gl_ncclComm_t comm) {
    const char *text = nc.ncclGetErrorString ? nc.ncclGetErrorString(r) : NULL;
    const char *last = nc.ncclGetLastError ? nc.ncclGetLastError(comm) : NULL;
    luaL_error(L, "%s: %s: %s (%d): %s%s%s", fn, what, result_name(r), r, text ? text : "no text",
               last && *last ? "; " : "", last && *last ? last : "");
    abort();
}

/* ------------------------------------------------------------------------------------------
 * The communicator object
 * ------------------------------------------------------------------------------------------ */
typedef struct nccl_comm {
    int nlocal;                      /* communicators held by this process */
    int nranks;                      /* ranks in the whole communicator */
    gl_ncclComm_t comm[MAX_LOCAL];
    int device[MAX_LOCAL], rank[MAX_LOCAL];
    CUevent done[MAX_LOCAL];         /* recorded after each collective, on the stream it used */
    bool live;                       /* false once released */
    bool aborted;                    /* ncclCommAbort ran (a deadline passed, or an async error) */
    bool pending;                    /* collectives enqueued since the last completed sync */
    double timeout;                  /* default deadline of comm:sync, seconds */
} nccl_comm;

static long live_comms;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pause_briefly(long *ns) {
    struct timespec ts = {0, *ns};
    nanosleep(&ts, NULL);
    if (*ns < 1000000) *ns *= 2;
}

/* NCCL switches devices through the runtime: put gpulab's current device back afterwards. */
static void restore_current(lua_State *L, const char *fn) {
    CUcontext c = gl_device_context(L, gl_current_device(), fn);
    GL_CHECK(L, gl_cu.cuCtxSetCurrent(c), fn, "cuCtxSetCurrent (back to the current device)");
}

static void abort_all(nccl_comm *c) {
    if (c->aborted) return;
    c->aborted = true;
    c->pending = false;
    for (int i = 0; i < c->nlocal; i++)
        if (c->comm[i]) nc.ncclCommAbort(c->comm[i]);
}

static bool work_done(const nccl_comm *c) {
    if (!c->pending) return true;
    for (int i = 0; i < c->nlocal; i++)
        if (c->done[i] && gl_cu.cuEventQuery(c->done[i]) != CUDA_SUCCESS) return false;
    return true;
}

/* Never raises: destroys idle communicators, aborts busy ones (a destroy would wait for work
 * whose peers may never come), frees the completion events (made before the communicator, so a
 * failed init frees them too) and drops everything without a usable context. Idempotent. */
static void comm_release(nccl_comm *c) {
    bool was_live = c->live;
    c->live = false;
    if (was_live) live_comms--;
    if (gl_context_usable() && lib.ok) {
        CUcontext saved = NULL; /* NCCL may switch devices: the caller's context is put back */
        bool have_saved = gl_cu.cuCtxGetCurrent(&saved) == CUDA_SUCCESS;
        if (was_live && !c->aborted) {
            bool idle = work_done(c);
            for (int i = 0; i < c->nlocal; i++) {
                if (c->comm[i] == NULL) continue;
                if (idle) nc.ncclCommDestroy(c->comm[i]);
                else nc.ncclCommAbort(c->comm[i]);
            }
            c->aborted = !idle;
        }
        for (int i = 0; i < MAX_LOCAL; i++)
            if (c->done[i]) gl_cu.cuEventDestroy(c->done[i]);
        if (have_saved && saved) gl_cu.cuCtxSetCurrent(saved);
    }
    for (int i = 0; i < MAX_LOCAL; i++) {
        c->done[i] = NULL;
        c->comm[i] = NULL;
    }
}

static nccl_comm *check_comm(lua_State *L, int idx, const char *fn) {
    nccl_comm *c = gl_testudata(L, idx, COMM_T);
    if (c == NULL) gl_typeerror(L, idx, fn, COMM_T);
    if (!c->live) gl_freederror(L, idx, fn, "the communicator was freed");
    if (c->aborted) /* as unusable as a freed one */
        gl_freederror(L, idx, fn, "the communicator was aborted after an earlier timeout or error; "
                                  "make a new one with cuda.nccl.init");
    return c;
}

static nccl_comm *new_comm(lua_State *L) {
    nccl_comm *c = gl_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    gl_setmetatable(L, COMM_T);
    return c;
}

/* One completion event per local device, made in that device's context. */
static void make_events(lua_State *L, nccl_comm *c, const char *fn) {
    for (int i = 0; i < c->nlocal; i++) {
        GL_CHECK(L, gl_cu.cuCtxSetCurrent(gl_device_context(L, c->device[i], fn)), fn, "cuCtxSetCurrent");
        CUresult r = gl_cu.cuEventCreate(&c->done[i], CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            c->done[i] = NULL;
            restore_current(L, fn);
            gl_raise_cuda(L, r, fn, "cuEventCreate");
        }
    }
    restore_current(L, fn);
}

/* ------------------------------------------------------------------------------------------
 * cuda.nccl.init
 * ------------------------------------------------------------------------------------------ */
static int device_count(lua_State *L, const char *fn) {
    int n = 0;
    GL_CHECK(L, gl_cu.cuDeviceGetCount(&n), fn, "cuDeviceGetCount");
    return n;
}

/* A required integer field of the options table t, within lo..hi. */
static int int_field(lua_State *L, int t, const char *name, int lo, int hi, const char *fn) {
    gl_rawgetfield(L, t, name);
    if (lua_isnil(L, -1)) gl_fielderror(L, t, fn, name, "integer expected, got no value");
    if (lua_type(L, -1) != LUA_TNUMBER) gl_fieldtypeerror(L, t, fn, name, -1, "integer"); /* not "2" */
    lua_Integer v = gl_opt_int_field(L, t, name, 0, fn);
    if (v < lo || v > hi)
        gl_fielderror(L, t, fn, name, "%lld is out of range %d..%d", (long long)v, lo, hi);
    lua_pop(L, 1);
    return (int)v;
}

static double read_timeout(lua_State *L, int t, const char *fn) {
    double s = gl_opt_num_field(L, t, "timeout", DEFAULT_TIMEOUT_S, fn);
    if (!(s > 0) || s > 1e9) gl_fielderror(L, t, fn, "timeout", "must be 0 < seconds <= 1e9, got %.14g", s);
    return s;
}

/* Entry i of the list at idx as an integer; raises naming field `field` of table t. */
static lua_Integer int_entry(lua_State *L, int t, int idx, lua_Integer i, const char *field,
                             const char *fn) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (isint && lua_type(L, idx) == LUA_TNUMBER) return v;
    if (lua_type(L, idx) == LUA_TNUMBER)
        gl_fielderror(L, t, fn, field, "entry %lld: device ordinal expected, got %s", (long long)i,
                      lua_tostring(L, idx));
    gl_fielderror(L, t, fn, field, "entry %lld: device ordinal expected, got %s", (long long)i,
                  gl_typename(L, idx));
}

static void read_devices(lua_State *L, int t, nccl_comm *c, const char *fn) {
    gl_rawgetfield(L, t, "devices");
    if (!lua_istable(L, -1)) gl_fieldtypeerror(L, t, fn, "devices", -1, "list of device ordinals");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n < 1 || n > MAX_LOCAL)
        gl_fielderror(L, t, fn, "devices", "lists %lld devices; 1..%d are supported", (long long)n, MAX_LOCAL);
    int count = device_count(L, fn);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        lua_Integer d = int_entry(L, t, -1, i, "devices", fn);
        if (d < 0 || d >= count || d >= GL_MAX_DEVICES)
            gl_fielderror(L, t, fn, "devices", "entry %lld: device %lld does not exist (%d device%s present)",
                          (long long)i, (long long)d, count, count == 1 ? "" : "s");
        for (int j = 0; j < (int)i - 1; j++)
            if (c->device[j] == d)
                gl_fielderror(L, t, fn, "devices", "device %lld is listed twice", (long long)d);
        c->device[i - 1] = (int)d;
        c->rank[i - 1] = (int)i - 1;
        lua_pop(L, 1);
    }
    c->nlocal = c->nranks = (int)n;
    lua_pop(L, 1);
}

static void init_all(lua_State *L, nccl_comm *c, const char *fn) {
    gl_ncclComm_t comms[MAX_LOCAL] = {0};
    gl_ncclResult_t r = nc.ncclCommInitAll(comms, c->nlocal, c->device);
    restore_current(L, fn);
    if (r != GL_NCCL_SUCCESS) raise_nccl(L, r, fn, "ncclCommInitAll", NULL);
    memcpy(c->comm, comms, sizeof comms);
    c->live = true;
    live_comms++;
}

static void parse_id(lua_State *L, int t, gl_ncclUniqueId *id, const char *fn) {
    const size_t want = 2 * (size_t)GL_NCCL_UNIQUE_ID_BYTES;
    gl_rawgetfield(L, t, "id");
    if (lua_type(L, -1) != LUA_TSTRING)
        gl_fielderror(L, t, fn, "id", "the %zu-character hex string of cuda.nccl.unique_id() expected, got %s",
                      want, gl_typename(L, -1));
    size_t len = 0;
    const char *hex = lua_tolstring(L, -1, &len);
    if (len != want)
        gl_fielderror(L, t, fn, "id", "the %zu-character hex string of cuda.nccl.unique_id() expected, got a "
                                      "string of %zu characters", want, len);
    for (size_t i = 0; i < GL_NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned v = 0;
        for (size_t k = 0; k < 2; k++) {
            char ch = hex[2 * i + k];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                  : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
            if (d < 0) gl_fielderror(L, t, fn, "id", "non-hex character at position %zu", 2 * i + k + 1);
            v = v * 16 + (unsigned)d;
        }
        id->internal[i] = (char)v;
    }
    lua_pop(L, 1);
}

/* Polls a non-blocking init until it is done or the deadline passes (then aborts, makes device
 * `previous` current again as it was before the init, and raises). */
static void await_init(lua_State *L, nccl_comm *c, double timeout, int previous, const char *fn) {
    double end = now_s() + timeout;
    long ns = 20000;
    for (;;) {
        gl_ncclResult_t st = GL_NCCL_IN_PROGRESS;
        gl_ncclResult_t r = nc.ncclCommGetAsyncError(c->comm[0], &st);
        if (r != GL_NCCL_SUCCESS) st = r;
        if (st == GL_NCCL_SUCCESS) return;
        if (st != GL_NCCL_IN_PROGRESS) {
            gl_ncclComm_t h = c->comm[0];
            abort_all(c);
            comm_release(c); /* a failed init leaves no communicator behind */
            gl_select_device(L, previous, fn); /* nor another device current */
            raise_nccl(L, st, fn, "ncclCommInitRankConfig (the communicator was aborted)", h);
        }
        if (now_s() >= end) {
            abort_all(c);
            comm_release(c);
            gl_select_device(L, previous, fn);
            luaL_error(L, "%s: timed out after %f s waiting for the other %d rank%s to join (rank %d "
                          "of %d on device %d); the communicator was aborted (ncclCommAbort)",
                       fn, timeout, c->nranks - 1, c->nranks == 2 ? "" : "s", c->rank[0], c->nranks,
                       c->device[0]);
        }
        pause_briefly(&ns);
    }
}

static void init_rank(lua_State *L, int t, nccl_comm *c, double timeout, const char *fn) {
    int count = device_count(L, fn);
    c->nranks = int_field(L, t, "nranks", 1, 1 << 20, fn);
    c->rank[0] = int_field(L, t, "rank", 0, c->nranks - 1, fn);
    c->device[0] = int_field(L, t, "device", 0, count - 1, fn);
    c->nlocal = 1;
    gl_ncclUniqueId id;
    parse_id(L, t, &id, fn);
    int previous = gl_current_device();
    make_events(L, c, fn); /* in the device's own context, and back: a failure leaves `previous` current */
    gl_select_device(L, c->device[0], fn); /* this process works on that device from now on */
    gl_ncclConfig_t cfg = {.size = offsetof(gl_ncclConfig_t, blocking) + sizeof(int),
                           .magic = GL_NCCL_CONFIG_MAGIC,
                           .version = GL_NCCL_VERSION(2, 14, 0),
                           .blocking = 0};
    gl_ncclComm_t h = NULL;
    gl_ncclResult_t r = nc.ncclCommInitRankConfig(&h, c->nranks, id, c->rank[0], &cfg);
    if (r != GL_NCCL_SUCCESS && r != GL_NCCL_IN_PROGRESS) {
        if (h) nc.ncclCommAbort(h);
        gl_select_device(L, previous, fn); /* a failed init leaves the device it found current */
        raise_nccl(L, r, fn, "ncclCommInitRankConfig", NULL);
    }
    c->comm[0] = h;
    c->live = true; /* from here the object owns the handle: errors below still release it */
    live_comms++;
    await_init(L, c, timeout, previous, fn);
    restore_current(L, fn);
}

static int l_init(lua_State *L) {
    const char *fn = "cuda.nccl.init";
    if (lua_type(L, 1) != LUA_TTABLE)
        gl_argerror(L, 1, fn, "options table {devices=} or {rank=, nranks=, id=, device=} expected, got %s",
                    gl_typename(L, 1));
    static const char *const known[] = {"devices", "rank", "nranks", "id", "device", "timeout", NULL};
    gl_check_known_fields(L, 1, known, fn);
    require_nccl(L, fn);
    gl_require_gpu(L, fn);
    bool single = gl_rawfieldtype(L, 1, "devices") != LUA_TNIL;
    double timeout = read_timeout(L, 1, fn);
    nccl_comm *c = new_comm(L);
    c->timeout = timeout;
    if (single) {
        static const char *const alone[] = {"rank", "nranks", "id", "device"};
        for (size_t i = 0; i < sizeof alone / sizeof alone[0]; i++) {
            if (gl_rawfieldtype(L, 1, alone[i]) != LUA_TNIL)
                gl_fielderror(L, 1, fn, alone[i], "belongs to the multi-process form; field 'devices' "
                                                  "makes one process drive every listed device");
        }
        read_devices(L, 1, c, fn);
        make_events(L, c, fn);
        init_all(L, c, fn);
    } else {
        init_rank(L, 1, c, timeout, fn);
    }
    return 1;
}

static int l_unique_id(lua_State *L) {
    const char *fn = "cuda.nccl.unique_id";
    require_nccl(L, fn);
    gl_ncclUniqueId id;
    memset(&id, 0, sizeof id);
    gl_ncclResult_t r = nc.ncclGetUniqueId(&id);
    if (r != GL_NCCL_SUCCESS) raise_nccl(L, r, fn, "ncclGetUniqueId", NULL);
    char hex[2 * GL_NCCL_UNIQUE_ID_BYTES + 1];
    for (size_t i = 0; i < GL_NCCL_UNIQUE_ID_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
    lua_pushlstring(L, hex, sizeof hex - 1);
    return 1;
}

static int l_available(lua_State *L) {
    const char *why;
    if (!nccl_open(&why)) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, why);
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int l_version(lua_State *L) {
    require_nccl(L, "cuda.nccl.version");
    int v = lib.version;
    if (v >= 10000) lua_pushfstring(L, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    else lua_pushfstring(L, "%d.%d.%d", v / 1000, (v / 100) % 10, v % 100);
    return 1;
}

static int l_stats(lua_State *L) {
    lua_createtable(L, 0, 1);
    lua_pushinteger(L, live_comms);
    lua_setfield(L, -2, "communicators");
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Collectives
 * ------------------------------------------------------------------------------------------ */
typedef enum { COLL_ALL_REDUCE, COLL_BROADCAST, COLL_ALL_GATHER, COLL_REDUCE_SCATTER } coll_kind;

typedef struct coll {
    coll_kind kind;
    const char *fn, *nccl_name;
    gl_ncclRedOp_t op;
    int root;
    double timeout;        /* < 0: do not wait */
    const char *streams_field; /* "stream" or "streams": the option read, for messages */
    gl_array *send[MAX_LOCAL], *recv[MAX_LOCAL];
    gl_stream_track *track[MAX_LOCAL];
    CUstream stream[MAX_LOCAL];
    size_t count;          /* the count NCCL is given */
    gl_ncclDataType_t type;
} coll;

/* The NCCL type of the send arrays' dtype (argument 2). */
static int nccl_type(lua_State *L, gl_dtype t, const char *fn) {
    switch (t) {
    case GL_I8: return GL_NCCL_INT8;
    case GL_U8: return GL_NCCL_UINT8;
    case GL_I32: return GL_NCCL_INT32;
    case GL_U32: return GL_NCCL_UINT32;
    case GL_I64: return GL_NCCL_INT64;
    case GL_U64: return GL_NCCL_UINT64;
    case GL_F16: return GL_NCCL_FLOAT16;
    case GL_F32: return GL_NCCL_FLOAT32;
    case GL_F64: return GL_NCCL_FLOAT64;
    case GL_BF16: return GL_NCCL_BFLOAT16;
    default:
        gl_argerror(L, 2, fn, "send: dtype %s has no NCCL type (NCCL reduces i8, u8, i32, u32, i64, u64, "
                              "f16, bf16, f32, f64)", gl_dtype_name(t));
    }
}

static gl_ncclRedOp_t read_op(lua_State *L, int t, const char *fn) {
    static const char *const names[] = {"sum", "prod", "max", "min", "avg", NULL};
    const char *op = gl_opt_str_field(L, t, "op", "sum", fn);
    for (int i = 0; names[i]; i++)
        if (strcmp(op, names[i]) == 0) return i; /* the values of ncclRedOp_t, in this order */
    gl_fielderror(L, t, fn, "op", "must be one of sum, prod, max, min, avg, got '%s'", op);
}

/* Options first (reading them may run Lua); values that must stay alive are left on the stack at
 * *streams_idx. Returns nothing; fills k. */
static void read_coll_opts(lua_State *L, int t, nccl_comm *c, coll *k, int *streams_idx) {
    *streams_idx = 0;
    k->timeout = -1;
    k->op = GL_NCCL_SUM;
    k->root = 0;
    if (lua_isnoneornil(L, t)) return;
    if (!lua_istable(L, t))
        gl_argerror(L, t, k->fn, "options table {op=, root=, stream=, streams=, timeout=} expected, got %s",
                    gl_typename(L, t));
    static const char *const known[] = {"op", "root", "stream", "streams", "timeout", NULL};
    gl_check_known_fields(L, t, known, k->fn);
    bool reduces = k->kind == COLL_ALL_REDUCE || k->kind == COLL_REDUCE_SCATTER;
    bool has_op = gl_rawfieldtype(L, t, "op") != LUA_TNIL;
    if (has_op && !reduces) gl_fielderror(L, t, k->fn, "op", "is for reductions (all_reduce, reduce_scatter)");
    if (has_op) k->op = read_op(L, t, k->fn);
    bool has_root = gl_rawfieldtype(L, t, "root") != LUA_TNIL;
    if (has_root && k->kind != COLL_BROADCAST) gl_fielderror(L, t, k->fn, "root", "is for broadcast");
    if (has_root) k->root = int_field(L, t, "root", 0, c->nranks - 1, k->fn);
    bool has_timeout = gl_rawfieldtype(L, t, "timeout") != LUA_TNIL;
    if (has_timeout) k->timeout = read_timeout(L, t, k->fn);
    gl_rawgetfield(L, t, "stream");
    gl_rawgetfield(L, t, "streams");
    if (!lua_isnil(L, -1) && !lua_isnil(L, -2))
        gl_argerror(L, t, k->fn, "give field 'stream' (one device) or 'streams' (one per device), not both");
    k->streams_field = lua_isnil(L, -1) ? "stream" : "streams";
    if (lua_isnil(L, -1)) lua_pop(L, 1); /* leave 'stream' */
    else lua_remove(L, -2);              /* leave 'streams' */
    *streams_idx = lua_gettop(L);
}

/* The stream of local rank i: from the value at idx (a stream, or a list of them: field
 * k->streams_field of the options table opts), or the default stream of that device. Raw reads
 * only: no Lua runs. */
static void rank_stream(lua_State *L, int opts, int idx, nccl_comm *c, coll *k, int i) {
    k->track[i] = gl_default_track();
    k->stream[i] = NULL;
    if (idx == 0 || lua_isnil(L, idx)) return;
    const char *field = k->streams_field;
    int v = idx;
    if (lua_istable(L, idx)) {
        if ((int)lua_rawlen(L, idx) != c->nlocal)
            gl_fielderror(L, opts, k->fn, field, "one cuda.stream per device (%d) expected, got %d", c->nlocal,
                          (int)lua_rawlen(L, idx));
        lua_rawgeti(L, idx, i + 1);
        v = lua_gettop(L);
    } else if (c->nlocal > 1) {
        gl_fielderror(L, opts, k->fn, field, "this communicator drives %d devices; give 'streams', one per "
                                             "device", c->nlocal);
    }
    gl_stream *s = gl_test_stream(L, v);
    if (s == NULL)
        gl_fielderror(L, opts, k->fn, field, "stream of rank %d: cuda.stream expected, got %s", c->rank[i],
                      gl_typename(L, v));
    if (s->track == NULL)
        gl_fielderror(L, opts, k->fn, field, "stream of rank %d: the cuda.stream was freed", c->rank[i]);
    if (s->device != c->device[i])
        gl_fielderror(L, opts, k->fn, field, "stream of rank %d: the cuda.stream belongs to device %d, but "
                                             "that rank's communicator is on device %d", c->rank[i],
                      s->device, c->device[i]);
    k->track[i] = s->track;
    k->stream[i] = gl_track_handle(s->track);
    if (v != idx) lua_pop(L, 1); /* the list keeps it alive */
}

/* The array of local rank i from argument arg (an array, or a list of one per device). */
static gl_array *rank_array(lua_State *L, int arg, nccl_comm *c, coll *k, int i, const char *what) {
    int v = arg;
    bool list = lua_istable(L, arg);
    if (list) {
        if (lua_rawlen(L, arg) == 0 && arg == 3 && lua_isnoneornil(L, 4))
            gl_argerror(L, arg, k->fn, "recv: a cuda.array or a list of them expected, got a table without "
                                       "entries (options go after recv, which may be nil for in place)");
        if ((int)lua_rawlen(L, arg) != c->nlocal)
            gl_argerror(L, arg, k->fn, "%s: one cuda.array per device (%d) expected, got %d", what, c->nlocal,
                        (int)lua_rawlen(L, arg));
        lua_rawgeti(L, arg, i + 1);
        v = lua_gettop(L);
    } else if (c->nlocal > 1) {
        gl_argerror(L, arg, k->fn, "%s: this communicator drives %d devices; give a list of one cuda.array "
                                   "per device", what, c->nlocal);
    }
    gl_array *a = gl_testudata(L, v, GL_ARRAY_T); /* freed ones too, to say so */
    if (a == NULL)
        gl_argerror(L, arg, k->fn, "%s of rank %d: cuda.array expected, got %s", what, c->rank[i],
                    gl_typename(L, v));
    if (a->ptr == 0) gl_argerror(L, arg, k->fn, "%s of rank %d: the cuda.array was freed", what, c->rank[i]);
    if (a->device != c->device[i])
        gl_argerror(L, arg, k->fn, "%s of rank %d: the cuda.array belongs to device %d, but that rank's "
                                   "communicator is on device %d", what, c->rank[i], a->device, c->device[i]);
    if (list) lua_pop(L, 1);
    return a;
}

/* Sizes: NCCL's count and what each side must hold, per collective. A mismatch is reported
 * against the argument that does not fit: recv (3) where it must follow send, send (2) where
 * send must follow recv or rank 0's arrays. */
static void check_sizes(lua_State *L, nccl_comm *c, coll *k, int i) {
    gl_array *s = k->send[i], *r = k->recv[i];
    if (s->dtype != r->dtype)
        gl_argerror(L, 3, k->fn, "rank %d: dtype mismatch (send %s, recv %s)", c->rank[i],
                    gl_dtype_name(s->dtype), gl_dtype_name(r->dtype));
    size_t n = (size_t)c->nranks;
    size_t count = 0;
    switch (k->kind) {
    case COLL_ALL_REDUCE:
    case COLL_BROADCAST:
        if (s->numel != r->numel)
            gl_argerror(L, 3, k->fn, "rank %d: send has %zu elements, recv %zu: they must be equal",
                        c->rank[i], s->numel, r->numel);
        count = s->numel;
        break;
    case COLL_ALL_GATHER:
        if (r->numel / n != s->numel || r->numel % n != 0)
            gl_argerror(L, 3, k->fn, "rank %d: recv must hold nranks (%d) x send (%zu elements) = %zu "
                                     "elements, got %zu", c->rank[i], c->nranks, s->numel, s->numel * n,
                        r->numel);
        count = s->numel;
        break;
    case COLL_REDUCE_SCATTER:
        if (s->numel / n != r->numel || s->numel % n != 0)
            gl_argerror(L, 2, k->fn, "rank %d: send must hold nranks (%d) x recv (%zu elements) = %zu "
                                     "elements, got %zu", c->rank[i], c->nranks, r->numel, r->numel * n,
                        s->numel);
        count = r->numel;
        break;
    }
    if (i > 0 && count != k->count)
        gl_argerror(L, 2, k->fn, "rank %d's arrays give %zu elements, rank %d's %zu: every rank moves the "
                                 "same count", c->rank[i], count, c->rank[0], k->count);
    if (i > 0 && s->dtype != k->send[0]->dtype)
        gl_argerror(L, 2, k->fn, "rank %d's dtype %s differs from rank %d's %s", c->rank[i],
                    gl_dtype_name(s->dtype), c->rank[0], gl_dtype_name(k->send[0]->dtype));
    k->count = count;
}

static gl_ncclResult_t call_one(const coll *k, nccl_comm *c, int i) {
    const void *s = (const void *)(uintptr_t)k->send[i]->ptr;
    void *r = (void *)(uintptr_t)k->recv[i]->ptr;
    switch (k->kind) {
    case COLL_ALL_REDUCE: return nc.ncclAllReduce(s, r, k->count, k->type, k->op, c->comm[i], k->stream[i]);
    case COLL_BROADCAST: return nc.ncclBroadcast(s, r, k->count, k->type, k->root, c->comm[i], k->stream[i]);
    case COLL_ALL_GATHER: return nc.ncclAllGather(s, r, k->count, k->type, c->comm[i], k->stream[i]);
    case COLL_REDUCE_SCATTER:
        return nc.ncclReduceScatter(s, r, k->count, k->type, k->op, c->comm[i], k->stream[i]);
    }
    return GL_NCCL_INVALID_ARGUMENT;
}

/* A non-blocking communicator may answer ncclInProgress while it connects: poll until it is
 * ready, within the deadline. */
static void await_ready(lua_State *L, nccl_comm *c, double timeout, const char *fn, const char *what) {
    double end = now_s() + timeout;
    long ns = 2000;
    for (int i = 0; i < c->nlocal; i++) {
        for (;;) {
            gl_ncclResult_t st = GL_NCCL_IN_PROGRESS;
            gl_ncclResult_t r = nc.ncclCommGetAsyncError(c->comm[i], &st);
            if (r != GL_NCCL_SUCCESS) st = r;
            if (st == GL_NCCL_SUCCESS) break;
            if (st != GL_NCCL_IN_PROGRESS) {
                gl_ncclComm_t h = c->comm[i];
                abort_all(c);
                raise_nccl(L, st, fn, what, h);
            }
            if (now_s() >= end) {
                abort_all(c);
                luaL_error(L, "%s: timed out after %f s while %s was being set up (connecting to its "
                              "peers); the communicator was aborted (ncclCommAbort)", fn, timeout, what);
            }
            pause_briefly(&ns);
        }
    }
}

static void submit(lua_State *L, nccl_comm *c, coll *k) {
    bool group = c->nlocal > 1;
    gl_ncclResult_t r = group ? nc.ncclGroupStart() : GL_NCCL_SUCCESS;
    if (r != GL_NCCL_SUCCESS) raise_nccl(L, r, k->fn, "ncclGroupStart", NULL);
    for (int i = 0; i < c->nlocal; i++) {
        r = call_one(k, c, i);
        if (r != GL_NCCL_SUCCESS && r != GL_NCCL_IN_PROGRESS) {
            if (group) nc.ncclGroupEnd();
            restore_current(L, k->fn);
            raise_nccl(L, r, k->fn, k->nccl_name, c->comm[i]);
        }
    }
    bool in_progress = r == GL_NCCL_IN_PROGRESS;
    if (group) {
        r = nc.ncclGroupEnd();
        if (r != GL_NCCL_SUCCESS && r != GL_NCCL_IN_PROGRESS) {
            restore_current(L, k->fn);
            raise_nccl(L, r, k->fn, "ncclGroupEnd", c->comm[0]);
        }
        in_progress = r == GL_NCCL_IN_PROGRESS;
    }
    if (in_progress) await_ready(L, c, k->timeout >= 0 ? k->timeout : c->timeout, k->fn, k->nccl_name);
    uint64_t seq = gl_next_seq();
    for (int i = 0; i < c->nlocal; i++) {
        gl_use_mark(&k->send[i]->use, k->track[i], seq);
        gl_use_mark(&k->recv[i]->use, k->track[i], seq);
    }
    /* the completion events: the legacy default stream is per context, so record in each */
    for (int i = 0; i < c->nlocal; i++) {
        GL_CHECK(L, gl_cu.cuCtxSetCurrent(gl_device_context(L, c->device[i], k->fn)), k->fn, "cuCtxSetCurrent");
        CUresult er = gl_cu.cuEventRecord(c->done[i], k->stream[i]);
        if (er != CUDA_SUCCESS) {
            restore_current(L, k->fn);
            gl_raise_cuda(L, er, k->fn, "cuEventRecord");
        }
    }
    c->pending = true;
    restore_current(L, k->fn);
}

/* Waits for the last collectives with a deadline; a passing deadline or an async NCCL error
 * aborts the communicator and raises. */
static void comm_wait(lua_State *L, nccl_comm *c, double timeout, const char *fn) {
    double end = now_s() + timeout;
    long ns = 2000;
    while (c->pending) {
        bool done = true;
        for (int i = 0; i < c->nlocal; i++) {
            CUresult r = gl_cu.cuEventQuery(c->done[i]);
            if (r == CUDA_ERROR_NOT_READY) done = false;
            else if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, "cuEventQuery (collective)");
        }
        for (int i = 0; i < c->nlocal; i++) {
            gl_ncclResult_t st = GL_NCCL_SUCCESS;
            gl_ncclResult_t r = nc.ncclCommGetAsyncError(c->comm[i], &st);
            if (r != GL_NCCL_SUCCESS) st = r;
            if (st != GL_NCCL_SUCCESS && st != GL_NCCL_IN_PROGRESS) {
                gl_ncclComm_t h = c->comm[i];
                abort_all(c);
                raise_nccl(L, st, fn, "the collective failed (the communicator was aborted)", h);
            }
        }
        if (done) {
            c->pending = false;
            break;
        }
        if (now_s() >= end) {
            abort_all(c);
            luaL_error(L, "%s: timed out after %f s waiting for a collective of rank%s %d..%d of %d "
                          "(peers that never arrived?); the communicator was aborted (ncclCommAbort)",
                       fn, timeout, c->nlocal > 1 ? "s" : "", c->rank[0], c->rank[c->nlocal - 1],
                       c->nranks);
        }
        pause_briefly(&ns);
    }
}

static int run_collective(lua_State *L, coll_kind kind, const char *fn, const char *nccl_name) {
    coll k;
    memset(&k, 0, sizeof k);
    k.kind = kind;
    k.fn = fn;
    k.nccl_name = nccl_name;
    check_comm(L, 1, fn);
    if (gl_capture_active())
        luaL_error(L, "%s: collectives are not captured into graphs by gpulab (the completion events "
                      "and deadlines need live work); run it outside s:capture", fn);
    bool needs_recv = kind == COLL_ALL_GATHER || kind == COLL_REDUCE_SCATTER;
    if (lua_isnoneornil(L, 2))
        gl_argerror(L, 2, fn, "send: a cuda.array or a list of one per device expected, got %s",
                    gl_typename(L, 2));
    if (needs_recv && lua_isnoneornil(L, 3))
        gl_argerror(L, 3, fn, "recv: a cuda.array or a list of one per device expected, got %s",
                    gl_typename(L, 3));
    int streams_idx;
    nccl_comm *c = gl_testudata(L, 1, COMM_T);
    read_coll_opts(L, 4, c, &k, &streams_idx);
    c = check_comm(L, 1, fn); /* reading the options may have run Lua: check again */
    for (int i = 0; i < c->nlocal; i++) { /* raw reads from here on: no Lua runs */
        rank_stream(L, 4, streams_idx, c, &k, i);
        k.send[i] = rank_array(L, 2, c, &k, i, "send");
        k.recv[i] = lua_isnoneornil(L, 3) ? k.send[i] : rank_array(L, 3, c, &k, i, "recv");
        check_sizes(L, c, &k, i);
        if (i == 0) k.type = nccl_type(L, k.send[0]->dtype, fn); /* every rank's dtype is rank 0's */
    }
    submit(L, c, &k);
    if (k.timeout >= 0) comm_wait(L, c, k.timeout, fn);
    lua_settop(L, 1);
    return 1;
}

static int l_all_reduce(lua_State *L) { return run_collective(L, COLL_ALL_REDUCE, "comm:all_reduce", "ncclAllReduce"); }
static int l_broadcast(lua_State *L) { return run_collective(L, COLL_BROADCAST, "comm:broadcast", "ncclBroadcast"); }
static int l_all_gather(lua_State *L) { return run_collective(L, COLL_ALL_GATHER, "comm:all_gather", "ncclAllGather"); }
static int l_reduce_scatter(lua_State *L) {
    return run_collective(L, COLL_REDUCE_SCATTER, "comm:reduce_scatter", "ncclReduceScatter");
}

/* comm:sync{timeout=} */
static int l_sync(lua_State *L) {
    const char *fn = "comm:sync";
    nccl_comm *c = check_comm(L, 1, fn);
    double timeout = c->timeout;
    if (!lua_isnoneornil(L, 2)) {
        if (!lua_istable(L, 2))
            gl_argerror(L, 2, fn, "options table {timeout=seconds} expected, got %s", gl_typename(L, 2));
        static const char *const known[] = {"timeout", NULL};
        gl_check_known_fields(L, 2, known, fn);
        bool given = gl_rawfieldtype(L, 2, "timeout") != LUA_TNIL;
        if (given) timeout = read_timeout(L, 2, fn);
        c = check_comm(L, 1, fn);
    }
    comm_wait(L, c, timeout, fn);
    return 0;
}

static int l_free(lua_State *L) {
    nccl_comm *c = gl_testudata(L, 1, COMM_T);
    if (c) comm_release(c);
    return 0;
}

static void push_int_list(lua_State *L, const int *v, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* The fields (the class's __fields, read through gl_class_index); a freed communicator keeps
 * answering them (freed = true). */
static const nccl_comm *field_comm(lua_State *L) { return gl_checkudata(L, 1, COMM_T); }

static int f_nranks(lua_State *L) {
    lua_pushinteger(L, field_comm(L)->nranks);
    return 1;
}
static int f_rank(lua_State *L) {
    lua_pushinteger(L, field_comm(L)->rank[0]);
    return 1;
}
static int f_ranks(lua_State *L) {
    const nccl_comm *c = field_comm(L);
    push_int_list(L, c->rank, c->nlocal);
    return 1;
}
static int f_devices(lua_State *L) {
    const nccl_comm *c = field_comm(L);
    push_int_list(L, c->device, c->nlocal);
    return 1;
}
static int f_aborted(lua_State *L) {
    lua_pushboolean(L, field_comm(L)->aborted);
    return 1;
}
static int f_freed(lua_State *L) {
    lua_pushboolean(L, !field_comm(L)->live);
    return 1;
}

static int comm_tostring(lua_State *L) {
    nccl_comm *c = gl_testudata(L, 1, COMM_T);
    if (c == NULL) return lua_pushstring(L, COMM_T), 1;
    if (!c->live) return lua_pushstring(L, COMM_T " (freed)"), 1;
    lua_pushfstring(L, COMM_T ": %d of %d rank%s on device%s", c->nlocal, c->nranks,
                    c->nranks == 1 ? "" : "s", c->nlocal == 1 ? "" : "s");
    for (int i = 0; i < c->nlocal; i++) lua_pushfstring(L, "%s%d", i ? ", " : " ", c->device[i]);
    if (c->aborted) lua_pushliteral(L, " (aborted)");
    lua_concat(L, lua_gettop(L) - 1);
    return 1;
}

void gl_open_nccl(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", l_free}, {"__close", l_free}, {"__tostring", comm_tostring},
                                    {NULL, NULL}};
    static const luaL_Reg methods[] = {{"all_reduce", l_all_reduce}, {"broadcast", l_broadcast},
                                       {"all_gather", l_all_gather}, {"reduce_scatter", l_reduce_scatter},
                                       {"sync", l_sync},             {"free", l_free},
                                       {NULL, NULL}};
    static const luaL_Reg fields[] = {{"nranks", f_nranks},   {"rank", f_rank},       {"ranks", f_ranks},
                                      {"devices", f_devices}, {"aborted", f_aborted}, {"freed", f_freed},
                                      {NULL, NULL}};
    gl_new_class(L, COMM_T, meta, methods, fields);
    static const luaL_Reg fns[] = {{"init", l_init},           {"unique_id", l_unique_id},
                                   {"available", l_available}, {"version", l_version},
                                   {"stats", l_stats},         {NULL, NULL}};
    lua_createtable(L, 0, 5);
    luaL_setfuncs(L, fns, 0);
    lua_setfield(L, -2, "nccl");
}
