/*
 * profile.c — cuda.profile(fn, {metrics={...}}): hardware counters for each kernel launched by fn,
 * through CUPTI's range profiler (auto range: one range per launch; kernel replay: a launch whose
 * metrics need several passes is replayed by CUPTI before the next one starts).
 *
 * libcupti is opened at run time (GPULAB_CUPTI, then beside NVRTC and the usual CUDA folders);
 * its own dependency libnvperf_host is loaded first from the same folder so CUPTI finds it without
 * LD_LIBRARY_PATH. Every CUPTI object of a call lives in one to-be-closed session, so any exit
 * (an error in fn included) ends the session and frees the images.
 */
#define _GNU_SOURCE
#include "check.h"
#include "context.h"
#include "cupti_abi.h"
#include "driver.h"
#include "errors.h"
#include "identity.h"
#include "observe.h"
#include "options.h"
#include "register.h"
#include "stream.h"
#include "wait.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SESSION_T "cuda.profile_session"
#define FN "cuda.profile"
#ifndef GPULAB_NVRTC_DIR
#define GPULAB_NVRTC_DIR ""
#endif

/* ------------------------------------------------------------------------------------------
 * Opening libcupti
 * ------------------------------------------------------------------------------------------ */
typedef gl_cupti_result (*gl_cupti_str_fn)(gl_cupti_result, const char **);
#define GL_CUPTI_FIELD(name, params) gl_cupti_result (*name)(params *);
static struct {
    GL_CUPTI_FUNCS(GL_CUPTI_FIELD)
    gl_cupti_str_fn cuptiGetResultString, cuptiGetErrorMessage;
} cp;
#undef GL_CUPTI_FIELD

static struct {
    bool tried, ok;
    void *handle;
    char path[1024];
    char reason[2048];
} lib;

/* out = dir/name; false when it does not fit (a cut path would name another file). */
static bool join_path(char *out, size_t size, const char *dir, const char *name) {
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < size;
}

static void *open_in(const char *dir) {
    char p[1024], nvperf[1024];
    if (!join_path(p, sizeof p, dir, "libcupti.so.13") || access(p, R_OK) != 0) return NULL;
    /* CUPTI dlopens libnvperf_host by its bare name: have the one beside it loaded already. */
    if (join_path(nvperf, sizeof nvperf, dir, "libnvperf_host.so")) dlopen(nvperf, RTLD_NOW | RTLD_GLOBAL);
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (h) snprintf(lib.path, sizeof lib.path, "%s", p);
    return h;
}

static void *find_cupti(void) {
    const char *env = getenv("GPULAB_CUPTI");
    if (env && *env) {
        char dir[1024], p[1100];
        int n = snprintf(dir, sizeof dir, "%s", env);
        char *slash = n >= 0 && (size_t)n < sizeof dir ? strrchr(dir, '/') : NULL;
        if (slash) {
            *slash = '\0';
            if (join_path(p, sizeof p, dir, "libnvperf_host.so")) dlopen(p, RTLD_NOW | RTLD_GLOBAL);
        }
        snprintf(lib.path, sizeof lib.path, "%s", env);
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    /* Entries are the toolkit folder with a suffix pasted on: no comma is missing. */
    // NOLINTBEGIN(bugprone-suspicious-missing-comma)
    static const char *const dirs[] = {
        GPULAB_NVRTC_DIR, GPULAB_NVRTC_DIR "/../extras/CUPTI/lib64",
        GPULAB_NVRTC_DIR "/../../../extras/CUPTI/lib64", "/usr/local/cuda/extras/CUPTI/lib64",
        "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda-13.0/extras/CUPTI/lib64", "/usr/local/cuda-13.0/lib64",
        "/usr/lib/x86_64-linux-gnu", NULL};
    // NOLINTEND(bugprone-suspicious-missing-comma)
    static const char *const homes[] = {"CUDA_HOME", "CUDA_PATH", NULL};
    for (int i = 0; homes[i]; i++) { /* a toolkit named by the environment comes first */
        const char *home = getenv(homes[i]);
        if (!home || !*home) continue; /* too long a folder fails join_path */
        char dir[1024];
        void *h = NULL;
        if (join_path(dir, sizeof dir, home, "extras/CUPTI/lib64") && (h = open_in(dir))) return h;
        if (join_path(dir, sizeof dir, home, "lib64") && (h = open_in(dir))) return h;
    }
    for (int i = 0; dirs[i]; i++) {
        if (!dirs[i][0]) continue;
        void *h = open_in(dirs[i]);
        if (h) return h;
    }
    snprintf(lib.path, sizeof lib.path, "libcupti.so.13");
    return dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
}

static bool cupti_open(const char **reason) {
    if (!lib.tried) {
        lib.tried = true;
        void *h = find_cupti();
        if (h == NULL) {
            const char *why = dlerror();
            snprintf(lib.reason, sizeof lib.reason,
                     "CUPTI not found: cannot open %s (%s); install the CUDA 13 toolkit's CUPTI "
                     "(libcupti.so.13 and libnvperf_host.so, e.g. the cuda-cupti-13-0 package) or set "
                     "GPULAB_CUPTI=/path/to/libcupti.so.13",
                     lib.path, why ? why : "not found");
        } else {
            lib.ok = true;
            lib.handle = h;
#define GL_CUPTI_SYM(name, params)                                                              \
    if (lib.ok) {                                                                               \
        void *p = dlsym(h, #name);                                                              \
        if (p == NULL) {                                                                        \
            snprintf(lib.reason, sizeof lib.reason,                                             \
                     "%s has no %s: the range profiler needs CUPTI from CUDA 12.6 or later",     \
                     lib.path, #name);                                                          \
            lib.ok = false;                                                                     \
        }                                                                                       \
        memcpy(&cp.name, &p, sizeof p);                                                         \
    }
            GL_CUPTI_FUNCS(GL_CUPTI_SYM)
#undef GL_CUPTI_SYM
            void *p = dlsym(h, "cuptiGetResultString");
            memcpy(&cp.cuptiGetResultString, &p, sizeof p);
            p = dlsym(h, "cuptiGetErrorMessage");
            memcpy(&cp.cuptiGetErrorMessage, &p, sizeof p);
        }
    }
    if (reason) *reason = lib.ok ? NULL : lib.reason;
    return lib.ok;
}

void *gl_cupti_library(const char **path, const char **why) {
    if (!lib.tried) cupti_open(NULL);
    if (path) *path = lib.path;
    if (why) *why = lib.handle ? NULL : lib.reason;
    return lib.handle;
}

/* "CUPTI_ERROR_INVALID_OPERATION (7): message" */
const char *gl_push_cupti_error(lua_State *L, gl_cupti_result r) {
    const char *name = NULL, *msg = NULL;
    if (cp.cuptiGetResultString && cp.cuptiGetResultString(r, &name) != GL_CUPTI_SUCCESS) name = NULL;
    if (cp.cuptiGetErrorMessage && cp.cuptiGetErrorMessage(r, &msg) != GL_CUPTI_SUCCESS) msg = NULL;
    if (msg && name && strcmp(msg, name) == 0) msg = NULL;
    return lua_pushfstring(L, "%s (%d)%s%s", name ? name : "CUPTI error", (int)r, msg ? ": " : "",
                           msg ? msg : "");
}

static __attribute__((noreturn)) void raise_cupti(lua_State *L, const char *step, gl_cupti_result r) {
    const char *e = gl_push_cupti_error(L, r);
    luaL_error(L, FN ": %s: %s", step, e);
    abort();
}

#define CUPTI_CALL(L, fn, params) \
    do { gl_cupti_result r_ = cp.fn(params); if (r_ != GL_CUPTI_SUCCESS) raise_cupti(L, #fn, r_); } while (0)

/* ------------------------------------------------------------------------------------------
 * The session: everything one call holds, released by one idempotent function.
 * ------------------------------------------------------------------------------------------ */
typedef struct launch_rec {
    char *kernel; /* the whole name, as the launch gave it */
    unsigned grid[3], block[3];
} launch_rec;

/* The range pushed around fn. NVIDIA's range profiling sample pushes one in auto-range mode as
 * well; {outer_range=false} (or GPULAB_CUPTI_PUSH_RANGE=0) leaves it out. It is not a row. */
#define OUTER_RANGE "gpulab.profile"

typedef struct session {
    bool initialized, started, pushed, closed;
    gl_cupti_host_object *host;
    gl_cupti_rp_object *rp;
    uint8_t *avail, *config, *counter;
    size_t counter_size, config_size;
    launch_rec *recs;
    size_t nrecs, caprecs;
    size_t keep_recs;   /* the ranges CUPTI has room for: past that it keeps no range, so gpulab
                           no record */
    size_t launches;    /* every launch fn made, kept or not */
    bool recs_overflow;
} session;

static session *active; /* the session whose fn is running, for nesting and the launch notes */

bool gl_profile_running(void) { return active != NULL; }

static void session_release(session *s) {
    if (s->closed) return;
    s->closed = true;
    if (active == s) {
        active = NULL;
        gl_observers--;
    }
    if (s->pushed && s->started) {
        gl_cupti_rp_object_params p = {.structSize = GL_CUPTI_RP_OBJECT_SIZE, .pRangeProfilerObject = s->rp}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
        cp.cuptiRangeProfilerPopRange(&p);
    }
    s->pushed = false;
    if (s->started) {
        gl_cupti_rp_stop_params p = {.structSize = GL_CUPTI_RP_STOP_SIZE, .pRangeProfilerObject = s->rp};
        cp.cuptiRangeProfilerStop(&p);
        s->started = false;
    }
    if (s->rp) {
        gl_cupti_rp_object_params p = {.structSize = GL_CUPTI_RP_OBJECT_SIZE, .pRangeProfilerObject = s->rp}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
        cp.cuptiRangeProfilerDisable(&p);
        s->rp = NULL;
    }
    if (s->host) {
        gl_cupti_host_deinit_params p = {.structSize = GL_CUPTI_HOST_DEINIT_SIZE, .pHostObject = s->host}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
        cp.cuptiProfilerHostDeinitialize(&p);
        s->host = NULL;
    }
    if (s->initialized) {
        gl_cupti_deinit_params p = {.structSize = GL_CUPTI_INIT_SIZE};
        cp.cuptiProfilerDeInitialize(&p);
        s->initialized = false;
        /* Deinitialised, CUPTI stays attached to the driver. cuptiFinalize would detach it, but
         * then the next cuptiProfilerInitialize fails with CUPTI_ERROR_NOT_INITIALIZED (seen on
         * the H200), and repeated profiles in one session matter more (docs/API.md). */
    }
    free(s->avail);
    free(s->config);
    free(s->counter);
    for (size_t i = 0; i < s->nrecs; i++) free(s->recs[i].kernel);
    free(s->recs);
    s->avail = s->config = s->counter = NULL;
    s->recs = NULL;
}

static int session_close(lua_State *L) {
    session *s = gl_testudata(L, 1, SESSION_T);
    if (s) session_release(s);
    return 0;
}

void gl_profile_note_launch(const char *kernel, const unsigned grid[3], const unsigned block[3]) {
    session *s = active;
    if (s == NULL) return;
    s->launches++;
    if (s->nrecs >= s->keep_recs) { /* no row can match it: memory stays bounded by max_launches */
        s->recs_overflow = true;
        return;
    }
    if (s->nrecs == s->caprecs) {
        size_t cap = s->caprecs ? s->caprecs * 2 : 64;
        launch_rec *n = realloc(s->recs, cap * sizeof *n);
        if (n == NULL) {
            s->recs_overflow = true;
            return;
        }
        s->recs = n;
        s->caprecs = cap;
    }
    char *name = strdup(kernel);
    if (name == NULL) {
        s->recs_overflow = true;
        return;
    }
    launch_rec *r = &s->recs[s->nrecs++];
    r->kernel = name;
    memcpy(r->grid, grid, sizeof r->grid);
    memcpy(r->block, block, sizeof r->block);
}

/* ------------------------------------------------------------------------------------------
 * Metric names: checked against the chip's list, with near matches for a misspelt one
 * ------------------------------------------------------------------------------------------ */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 200) la = 200;
    if (lb > 200) lb = 200;
    size_t row[201];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Pushes a table {name, ...} of every metric name the chip knows: "base.submetric" for each
 * base metric of every type. */
static void push_chip_metrics(lua_State *L, session *s) {
    lua_newtable(L);
    int out = lua_gettop(L);
    lua_Integer n = 0;
    for (int type = GL_CUPTI_METRIC_COUNTER; type <= GL_CUPTI_METRIC_THROUGHPUT; type++) {
        gl_cupti_host_base_metrics_params b = {.structSize = GL_CUPTI_HOST_BASE_METRICS_SIZE,
                                                .pHostObject = s->host, .metricType = type};
        if (cp.cuptiProfilerHostGetBaseMetrics(&b) != GL_CUPTI_SUCCESS) continue;
        for (size_t i = 0; i < b.numMetrics; i++) {
            const char *base = b.ppMetricNames[i];
            gl_cupti_host_sub_metrics_params sm = {.structSize = GL_CUPTI_HOST_SUB_METRICS_SIZE,
                                                    .pHostObject = s->host, .metricType = type,
                                                    .pMetricName = base};
            if (cp.cuptiProfilerHostGetSubMetrics(&sm) != GL_CUPTI_SUCCESS || sm.numOfSubmetrics == 0) {
                lua_pushstring(L, base);
                lua_rawseti(L, out, ++n);
                continue;
            }
            for (size_t j = 0; j < sm.numOfSubmetrics; j++) {
                const char *sub = sm.ppSubMetrics[j];
                lua_pushfstring(L, "%s%s%s", base, sub[0] == '.' ? "" : ".", sub);
                lua_rawseti(L, out, ++n);
            }
        }
    }
}

/* Raises "unknown metric 'x' (did you mean: a, b, c?)" for the first name of `names` (a table
 * at index `names`) that is not in the chip's list; returns when all are listed (or the list
 * cannot be read). Called once CUPTI has refused the metric set. */
static void check_metric_names(lua_State *L, session *s, int names) {
    push_chip_metrics(L, s);
    int known = lua_gettop(L);
    lua_Integer nk = (lua_Integer)lua_rawlen(L, known);
    if (nk == 0) {
        lua_pop(L, 1);
        return;
    }
    lua_newtable(L); /* set of known names */
    int set = lua_gettop(L);
    for (lua_Integer i = 1; i <= nk; i++) {
        lua_rawgeti(L, known, i);
        lua_pushboolean(L, 1);
        lua_rawset(L, set);
    }
    lua_Integer nn = (lua_Integer)lua_rawlen(L, names);
    for (lua_Integer i = 1; i <= nn; i++) {
        lua_rawgeti(L, names, i);
        const char *want = lua_tostring(L, -1);
        lua_pushvalue(L, -1);
        bool ok = lua_rawget(L, set) != LUA_TNIL;
        lua_pop(L, 1);
        if (ok) {
            lua_pop(L, 1);
            continue;
        }
        const char *best[3] = {NULL, NULL, NULL};
        size_t bestd[3] = {(size_t)-1, (size_t)-1, (size_t)-1};
        for (lua_Integer k = 1; k <= nk; k++) {
            lua_rawgeti(L, known, k);
            const char *cand = lua_tostring(L, -1);
            lua_pop(L, 1); /* still referenced by the table */
            size_t d = edit_distance(want, cand);
            for (int slot = 0; slot < 3; slot++)
                if (d < bestd[slot]) {
                    for (int m = 2; m > slot; m--) { best[m] = best[m - 1]; bestd[m] = bestd[m - 1]; }
                    best[slot] = cand;
                    bestd[slot] = d;
                    break;
                }
        }
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (int slot = 0; slot < 3 && best[slot]; slot++) {
            if (slot) luaL_addstring(&b, ", ");
            luaL_addstring(&b, best[slot]);
        }
        luaL_pushresult(&b);
        luaL_error(L, FN ": unknown metric '%s' for this GPU (did you mean: %s?)", want,
                   lua_tostring(L, -1));
    }
    lua_pop(L, 2);
}

/* ------------------------------------------------------------------------------------------
 * Setting up, running, reading back
 * ------------------------------------------------------------------------------------------ */
typedef struct profile_opts {
    int metrics;      /* stack index of our own copy of the metric names */
    size_t nmetrics;
    lua_Integer max_launches;
    double timeout;
    bool outer_range;
} profile_opts;

/* The ranges CUPTI is given room for: max_launches, and one more for the outer range, which
 * CUPTI may report as a range of its own. */
static size_t room_for_ranges(const profile_opts *o) {
    return (size_t)o->max_launches + (o->outer_range ? 1 : 0);
}

static void read_opts(lua_State *L, profile_opts *o) {
    lua_settop(L, 2); /* first: a __call found below must not take the place of the options */
    if (!lua_isfunction(L, 1)) {
        if (luaL_getmetafield(L, 1, "__call") == LUA_TNIL) gl_typeerror(L, 1, FN, "function");
        lua_pop(L, 1);
    }
    if (!lua_istable(L, 2)) gl_typeerror(L, 2, FN, "table");
    static const char *const known[] = {"metrics", "max_launches", "timeout", "outer_range", NULL};
    gl_check_known_fields(L, 2, known, FN);
    o->max_launches = gl_opt_int_field(L, 2, "max_launches", 256, FN);
    if (o->max_launches < 1 || o->max_launches > 100000)
        gl_fielderror(L, 2, FN, "max_launches", "must be 1..100000, got %lld", (long long)o->max_launches);
    const char *env = getenv("GPULAB_CUPTI_PUSH_RANGE");
    o->outer_range = gl_opt_bool_field(L, 2, "outer_range", !(env && strcmp(env, "0") == 0), FN);
    o->timeout = gl_opt_num_field(L, 2, "timeout", 60, FN);
    if (!(o->timeout > 0) || o->timeout > 1e6)
        gl_fielderror(L, 2, FN, "timeout", "must be 0..1e6 seconds, got %.14g", o->timeout);
    if (gl_rawgetfield(L, 2, "metrics") != LUA_TTABLE)
        gl_fieldtypeerror(L, 2, FN, "metrics", -1, "list of metric names");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n < 1) gl_fielderror(L, 2, FN, "metrics", "the list is empty");
    if (n > 512) gl_fielderror(L, 2, FN, "metrics", "%lld names; at most 512", (long long)n);
    lua_createtable(L, (int)n, 0); /* our copy keeps the strings alive whatever fn does */
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, -2, i) != LUA_TSTRING)
            gl_fielderror(L, 2, FN, "metrics", "item %lld: string expected, got %s", (long long)i,
                          gl_typename(L, -1));
        if (lua_rawlen(L, -1) == 0 || lua_rawlen(L, -1) > 200)
            gl_fielderror(L, 2, FN, "metrics", "item %lld must be a metric name of 1..200 characters",
                          (long long)i);
        if (strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1)) /* CUPTI would read only its prefix */
            gl_fielderror(L, 2, FN, "metrics", "item %lld contains a NUL byte", (long long)i);
        lua_rawseti(L, -2, i);
    }
    lua_remove(L, -2);
    o->metrics = lua_gettop(L);
    o->nmetrics = (size_t)n;
}

static const char **metric_array(lua_State *L, const profile_opts *o) {
    const char **a = gl_newuserdatauv(L, o->nmetrics * sizeof *a, 0);
    for (size_t i = 0; i < o->nmetrics; i++) {
        lua_rawgeti(L, o->metrics, (lua_Integer)i + 1);
        a[i] = lua_tostring(L, -1); /* held by the copy table */
        lua_pop(L, 1);
    }
    return a;
}

static void host_config(lua_State *L, session *s, const profile_opts *o, const char **names,
                        size_t *passes) {
    gl_cupti_host_add_metrics_params am = {.structSize = GL_CUPTI_HOST_ADD_METRICS_SIZE,
                                            .pHostObject = s->host, .ppMetricNames = names,
                                            .numMetrics = o->nmetrics};
    gl_cupti_result r = cp.cuptiProfilerHostConfigAddMetrics(&am);
    if (r != GL_CUPTI_SUCCESS) {
        /* CUPTI is the judge of a name; the chip's list only explains a refusal */
        check_metric_names(L, s, o->metrics);
        raise_cupti(L, "cuptiProfilerHostConfigAddMetrics", r);
    }
    gl_cupti_host_config_size_params cs = {.structSize = GL_CUPTI_HOST_CONFIG_SIZE_SIZE,
                                            .pHostObject = s->host};
    CUPTI_CALL(L, cuptiProfilerHostGetConfigImageSize, &cs);
    if (cs.configImageSize == 0) luaL_error(L, FN ": CUPTI returned an empty configuration image");
    s->config = calloc(1, cs.configImageSize);
    if (s->config == NULL) luaL_error(L, FN ": out of memory for the configuration image");
    s->config_size = cs.configImageSize;
    gl_cupti_host_config_image_params ci = {.structSize = GL_CUPTI_HOST_CONFIG_IMAGE_SIZE,
                                             .pHostObject = s->host,
                                             .configImageSize = cs.configImageSize,
                                             .pConfigImage = s->config};
    CUPTI_CALL(L, cuptiProfilerHostGetConfigImage, &ci);
    gl_cupti_host_passes_params np = {.structSize = GL_CUPTI_HOST_PASSES_SIZE,
                                       .configImageSize = s->config_size, .pConfigImage = s->config};
    CUPTI_CALL(L, cuptiProfilerHostGetNumOfPasses, &np);
    *passes = np.numOfPasses;
}

static void setup(lua_State *L, session *s, const profile_opts *o, const char **names,
                  size_t *passes, const char **chip) {
    CUcontext ctx = NULL;
    GL_CHECK(L, gl_cu.cuCtxGetCurrent(&ctx), FN, "cuCtxGetCurrent");
    gl_cupti_init_params ip = {.structSize = GL_CUPTI_INIT_SIZE};
    CUPTI_CALL(L, cuptiProfilerInitialize, &ip);
    s->initialized = true;

    gl_cupti_chip_name_params cn = {.structSize = GL_CUPTI_CHIP_NAME_SIZE,
                                     .deviceIndex = (size_t)gl_current_device()};
    CUPTI_CALL(L, cuptiDeviceGetChipName, &cn);
    *chip = cn.pChipName ? cn.pChipName : "?";

    gl_cupti_counter_avail_params ca = {.structSize = GL_CUPTI_COUNTER_AVAIL_SIZE, .ctx = ctx};
    CUPTI_CALL(L, cuptiProfilerGetCounterAvailability, &ca);
    s->avail = calloc(1, ca.counterAvailabilityImageSize ? ca.counterAvailabilityImageSize : 1);
    if (s->avail == NULL) luaL_error(L, FN ": out of memory for the counter availability image");
    ca.pCounterAvailabilityImage = s->avail;
    CUPTI_CALL(L, cuptiProfilerGetCounterAvailability, &ca);

    gl_cupti_host_init_params hi = {.structSize = GL_CUPTI_HOST_INIT_SIZE, // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
                                     .profilerType = GL_CUPTI_PROFILER_RANGE, .pChipName = *chip,
                                     .pCounterAvailabilityImage = s->avail};
    CUPTI_CALL(L, cuptiProfilerHostInitialize, &hi);
    s->host = hi.pHostObject;
    host_config(L, s, o, names, passes);

    gl_cupti_rp_enable_params en = {.structSize = GL_CUPTI_RP_ENABLE_SIZE, .ctx = ctx}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
    CUPTI_CALL(L, cuptiRangeProfilerEnable, &en);
    s->rp = en.pRangeProfilerObject;

    gl_cupti_rp_data_size_params ds = {.structSize = GL_CUPTI_RP_DATA_SIZE_SIZE,
                                        .pRangeProfilerObject = s->rp, .pMetricNames = names,
                                        .numMetrics = o->nmetrics,
                                        .maxNumOfRanges = room_for_ranges(o),
                                        .maxNumRangeTreeNodes = (uint32_t)room_for_ranges(o)};
    CUPTI_CALL(L, cuptiRangeProfilerGetCounterDataSize, &ds);
    s->counter = calloc(1, ds.counterDataSize ? ds.counterDataSize : 1);
    if (s->counter == NULL) luaL_error(L, FN ": out of memory for the counter data image");
    s->counter_size = ds.counterDataSize;
    gl_cupti_rp_data_init_params di = {.structSize = GL_CUPTI_RP_DATA_INIT_SIZE,
                                        .pRangeProfilerObject = s->rp,
                                        .counterDataSize = s->counter_size, .pCounterData = s->counter};
    CUPTI_CALL(L, cuptiRangeProfilerCounterDataImageInitialize, &di);

    gl_cupti_rp_set_config_params sc = {.structSize = GL_CUPTI_RP_SET_CONFIG_SIZE,
                                         .pRangeProfilerObject = s->rp,
                                         .configSize = s->config_size, .pConfig = s->config,
                                         .counterDataImageSize = s->counter_size,
                                         .pCounterDataImage = s->counter,
                                         .range = GL_CUPTI_AUTO_RANGE,
                                         .replayMode = GL_CUPTI_KERNEL_REPLAY,
                                         .maxRangesPerPass = room_for_ranges(o),
                                         .numNestingLevels = 1, .minNestingLevel = 1,
                                         .passIndex = 0, .targetNestingLevel = 1};
    CUPTI_CALL(L, cuptiRangeProfilerSetConfig, &sc);
}

static void push_dims(lua_State *L, const unsigned d[3]) {
    lua_createtable(L, 3, 0);
    for (int i = 0; i < 3; i++) {
        lua_pushinteger(L, d[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* One row per range: {kernel=, range=, grid=, block=, metrics={}, passes=} */
static void push_rows(lua_State *L, session *s, const profile_opts *o, const char **names,
                      size_t passes, size_t dropped, const char *chip) {
    gl_cupti_rp_data_info_params info = {.structSize = GL_CUPTI_RP_DATA_INFO_SIZE,
                                          .pCounterDataImage = s->counter,
                                          .counterDataImageSize = s->counter_size};
    CUPTI_CALL(L, cuptiRangeProfilerGetCounterDataInfo, &info);
    double *vals = gl_newuserdatauv(L, o->nmetrics * sizeof(double), 0);
    size_t n = info.numTotalRanges;
    lua_createtable(L, (int)(n < 100000 ? n : 100000), 4);
    int out = lua_gettop(L);
    /* the outer range, where CUPTI reports it as a range of its own, is no launch */
    size_t outer = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        gl_cupti_rp_range_info_params ri = {.structSize = GL_CUPTI_RP_RANGE_INFO_SIZE,
                                             .pCounterDataImage = s->counter,
                                             .counterDataImageSize = s->counter_size,
                                             .rangeIndex = i, .rangeDelimiter = "/"};
        CUPTI_CALL(L, cuptiRangeProfilerCounterDataGetRangeInfo, &ri);
        if (ri.rangeName && strcmp(ri.rangeName, OUTER_RANGE) == 0) outer = i;
    }
    size_t launches = n - (outer != (size_t)-1);
    bool matched = launches == s->nrecs && !s->recs_overflow;
    lua_Integer row = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == outer) continue;
        if (row == o->max_launches) { /* the outer range's room, taken by a launch: not a row */
            dropped++;
            continue;
        }
        gl_cupti_rp_range_info_params ri = {.structSize = GL_CUPTI_RP_RANGE_INFO_SIZE,
                                             .pCounterDataImage = s->counter,
                                             .counterDataImageSize = s->counter_size,
                                             .rangeIndex = i, .rangeDelimiter = "/"};
        CUPTI_CALL(L, cuptiRangeProfilerCounterDataGetRangeInfo, &ri);
        gl_cupti_host_evaluate_params ev = {.structSize = GL_CUPTI_HOST_EVALUATE_SIZE,
                                             .pHostObject = s->host, .pCounterDataImage = s->counter,
                                             .counterDataImageSize = s->counter_size, .rangeIndex = i,
                                             .ppMetricNames = names, .numMetrics = o->nmetrics,
                                             .pMetricValues = vals};
        CUPTI_CALL(L, cuptiProfilerHostEvaluateToGpuValues, &ev);
        lua_createtable(L, 0, 7);
        lua_pushstring(L, ri.rangeName ? ri.rangeName : "");
        lua_setfield(L, -2, "range");
        if (matched) {
            const launch_rec *rec = &s->recs[row];
            lua_pushstring(L, rec->kernel);
            lua_setfield(L, -2, "kernel");
            push_dims(L, rec->grid);
            lua_setfield(L, -2, "grid");
            push_dims(L, rec->block);
            lua_setfield(L, -2, "block");
        } else {
            lua_pushstring(L, ri.rangeName ? ri.rangeName : "");
            lua_setfield(L, -2, "kernel");
        }
        lua_createtable(L, 0, (int)o->nmetrics);
        for (size_t m = 0; m < o->nmetrics; m++) {
            lua_pushnumber(L, vals[m]);
            lua_setfield(L, -2, names[m]);
        }
        lua_setfield(L, -2, "metrics");
        lua_pushinteger(L, (lua_Integer)passes);
        lua_setfield(L, -2, "passes");
        lua_rawseti(L, out, ++row);
    }
    lua_pushinteger(L, (lua_Integer)passes);
    lua_setfield(L, out, "passes");
    /* CUPTI's own count misses the ranges past the room it was given (the H200's CUPTI reported
       none dropped for 5 launches into room for 3): every launch without a row was dropped */
    size_t rowless = s->launches > (size_t)row ? s->launches - (size_t)row : 0;
    if (rowless > dropped) dropped = rowless;
    lua_pushinteger(L, (lua_Integer)dropped);
    lua_setfield(L, out, "dropped");
    lua_pushinteger(L, (lua_Integer)s->launches);
    lua_setfield(L, out, "launches");
    lua_pushstring(L, chip);
    lua_setfield(L, out, "chip");
    lua_pushboolean(L, s->pushed);
    lua_setfield(L, out, "outer_range");
}

static int l_profile(lua_State *L) {
    profile_opts o;
    read_opts(L, &o);
    if (active) luaL_error(L, FN ": already profiling (cuda.profile cannot be nested)");
    if (gl_pcsample_running())
        luaL_error(L, FN ": cuda.pcsample is running (CUPTI's PC sampling and counters do not mix)");
    if (gl_capture_active())
        luaL_error(L, FN ": cannot profile during a stream capture (profile the graph's launch instead)");
    gl_require_gpu(L, FN);
    const char *why;
    if (!cupti_open(&why)) luaL_error(L, FN ": %s", why);
    const char **names = metric_array(L, &o);

    session *s = gl_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    gl_setmetatable(L, SESSION_T);
    int sidx = lua_gettop(L);
    lua_toclose(L, sidx); /* every exit from here on releases the session */

    size_t passes = 0;
    const char *chip = NULL;
    setup(L, s, &o, names, &passes, &chip);
    gl_cupti_rp_object_params st = {.structSize = GL_CUPTI_RP_OBJECT_SIZE, .pRangeProfilerObject = s->rp}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
    CUPTI_CALL(L, cuptiRangeProfilerStart, &st);
    s->started = true;
    if (o.outer_range) {
        gl_cupti_rp_push_params pr = {.structSize = GL_CUPTI_RP_PUSH_SIZE,
                                       .pRangeProfilerObject = s->rp, .pRangeName = OUTER_RANGE};
        s->pushed = cp.cuptiRangeProfilerPushRange(&pr) == GL_CUPTI_SUCCESS; /* optional: see OUTER_RANGE */
    }
    s->keep_recs = room_for_ranges(&o);
    active = s;
    gl_observers++;

    /* protected: a coroutine that dies of an error never closes its to-be-closed slots, and the
       CUPTI session must end whatever fn does */
    lua_pushvalue(L, 1);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        session_release(s);
        lua_error(L);
    }
    if (s->closed) /* fn reached the session (debug.getlocal) and ended it: CUPTI's objects are gone */
        luaL_error(L, FN ": the session was ended before fn returned (its __close or __gc was called "
                      "by hand); nothing was profiled");

    active = NULL;
    gl_observers--;
    gl_wait(L, NULL, o.timeout, FN);
    bool pushed = s->pushed;
    if (pushed) {
        gl_cupti_rp_object_params pp = {.structSize = GL_CUPTI_RP_OBJECT_SIZE, .pRangeProfilerObject = s->rp}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
        s->pushed = false;
        CUPTI_CALL(L, cuptiRangeProfilerPopRange, &pp);
    }
    gl_cupti_rp_stop_params sp = {.structSize = GL_CUPTI_RP_STOP_SIZE, .pRangeProfilerObject = s->rp};
    s->started = false;
    CUPTI_CALL(L, cuptiRangeProfilerStop, &sp);
    if (!sp.isAllPassSubmitted)
        luaL_error(L, FN ": CUPTI did not finish all %d passes in kernel replay", (int)passes);
    gl_cupti_rp_decode_params dp = {.structSize = GL_CUPTI_RP_DECODE_SIZE, .pRangeProfilerObject = s->rp};
    CUPTI_CALL(L, cuptiRangeProfilerDecodeData, &dp);
    s->pushed = pushed; /* for the result's outer_range field */
    push_rows(L, s, &o, names, passes, dp.numOfRangeDropped, chip);
    if (s->launches > (size_t)o.max_launches || dp.numOfRangeDropped > 0) {
        /* keep the rows but say what was lost: counts are part of the result */
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "truncated");
    }
    lua_closeslot(L, sidx); /* ends the session now; the rows stay on top */
    return 1;
}

/* cuda.profile_available() --> true | false, reason  (opens CUPTI; needs no GPU) */
static int l_profile_available(lua_State *L) {
    const char *why;
    if (!cupti_open(&why)) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, why);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_pushstring(L, lib.path);
    return 2;
}

void gl_open_profile(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", session_close}, {"__close", session_close}, {NULL, NULL}};
    gl_new_class(L, SESSION_T, meta, NULL, NULL);
    static const luaL_Reg fns[] = {{"profile", l_profile},
                                   {"profile_available", l_profile_available},
                                   {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
