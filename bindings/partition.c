/*
 * partition.c — SM partitions ("cuda.partition"): part of the current device's SMs, from the
 * driver's green-context calls (CUDA 12.4 and newer, resolved at run time).
 *
 * cuda.partition{sms=n} asks the driver for the device's SM resource, splits one group of at
 * least n SMs off it (cuDevSmResourceSplitByCount rounds up to its granularity; n equal to the
 * device's SM count takes the whole resource unsplit), and creates a green context over that
 * group. part:stream{priority=} makes a cuda.stream in that green context: kernels launched
 * there run on the partition's SMs only.
 *
 * Modules: a green context retains the device's primary context and its streams belong to it
 * (cuStreamGetCtx_v2 answers the primary context for them), so kernels of modules gpulab loaded
 * in the primary context, and arrays allocated there, are used on a partition's streams as on
 * any other stream of the device. cuda.sync() covers their work too: cuCtxSynchronize on the
 * primary context synchronizes the green contexts made from it (cuda.h), and the deadline path
 * polls every live stream gpulab made, these included.
 *
 * Lifetime: the green context is a small refcounted record held by the partition object and by
 * each of its streams (whose uservalue also holds the partition object). part:free() drops the
 * partition's hold only: its streams keep working, and the green context is destroyed once the
 * last of them is freed and the work queued on them completed (the driver requires the streams
 * destroyed first). Freeing never raises and is idempotent.
 */
#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "identity.h"
#include "lifetime.h"
#include "module.h"
#include "objects.h"
#include "options.h"
#include "register.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#define PARTITION_T "cuda.partition"

typedef struct green_ctx {
    CUgreenCtx handle;
    int refs;   /* the partition object's hold (until it is freed) and one per live stream */
    int streams; /* live streams made in it */
    gl_use use; /* the retired streams' work, which must complete before the destroy */
} green_ctx;

typedef struct gl_partition {
    green_ctx *g;  /* NULL once freed */
    int sm_count;  /* granted by the driver */
    int requested; /* the sms asked for */
    int granularity, minimum; /* the driver's split rules for this device */
    bool rounded;  /* sm_count differs from requested */
    int device;
} gl_partition;

static void destroy_green(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuGreenCtxDestroy((CUgreenCtx)handle);
}

static void green_unref(green_ctx *g) {
    if (--g->refs > 0) return;
    gl_release(&g->use, destroy_green, g->handle, 0);
    free(g);
}

/* A partition stream is going away: the green context waits for its work, then may go. */
static void stream_released(gl_stream *s, void *arg) {
    green_ctx *g = arg;
    gl_use_mark(&g->use, s->track, gl_work_seq);
    g->streams--;
    green_unref(g);
}

static gl_partition *test_partition(lua_State *L, int idx) { return gl_testudata(L, idx, PARTITION_T); }

static gl_partition *check_partition(lua_State *L, int idx, const char *fn) {
    gl_partition *p = test_partition(L, idx);
    if (p == NULL) gl_typeerror(L, idx, fn, PARTITION_T);
    if (p->g == NULL) gl_freederror(L, idx, fn, "the cuda.partition was freed");
    return p;
}

/* One release path for __gc, __close and part:free(): never raises, idempotent. */
static int partition_free(lua_State *L) {
    gl_partition *p = test_partition(L, 1);
    if (p == NULL || p->g == NULL) return 0;
    green_unref(p->g);
    p->g = NULL;
    gl_live.partitions--;
    return 0;
}

/* An older driver lacks the green-context calls: one error naming the first one missing. */
static void require_entry_points(lua_State *L, const char *fn) {
    struct {
        const void *entry;
        const char *name;
    } needed[] = {
        {(const void *)gl_cu.cuDeviceGetDevResource, "cuDeviceGetDevResource"},
        {(const void *)gl_cu.cuDevSmResourceSplitByCount, "cuDevSmResourceSplitByCount"},
        {(const void *)gl_cu.cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc"},
        {(const void *)gl_cu.cuGreenCtxCreate, "cuGreenCtxCreate"},
        {(const void *)gl_cu.cuGreenCtxDestroy, "cuGreenCtxDestroy"},
        {(const void *)gl_cu.cuGreenCtxStreamCreate, "cuGreenCtxStreamCreate"},
    };
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (needed[i].entry == NULL)
            luaL_error(L, "%s: needs %s (a CUDA 12.4 driver or newer); this driver (%d) lacks it", fn,
                       needed[i].name, gl_driver_version());
}

/* The split rules: the driver's fields where it fills them (CUDA 12.8 and newer), else the
 * values cuda.h documents per architecture (9.0 and newer: at least 8, multiples of 8). */
static void split_rules(const CUdevSmResource *sm, int cc_major, int *minimum, int *granularity) {
    *minimum = (int)sm->minSmPartitionSize;
    *granularity = (int)sm->smCoscheduledAlignment;
    if (*minimum > 0 && *granularity > 0) return;
    if (cc_major >= 9) *minimum = 8, *granularity = 8;
    else if (cc_major == 8) *minimum = 4, *granularity = 2;
    else *minimum = 2, *granularity = 2;
}

static lua_Integer sms_field(lua_State *L, const char *fn) {
    int type = gl_rawfieldtype(L, 1, "sms");
    if (type == LUA_TNIL) gl_fielderror(L, 1, fn, "sms", "required: the number of SMs, e.g. {sms=16}");
    if (type != LUA_TNUMBER) /* no string coercion */
        gl_fielderror(L, 1, fn, "sms", "integer expected, got %s", lua_typename(L, type));
    lua_Integer sms = gl_opt_int_field(L, 1, "sms", 0, fn);
    if (sms <= 0) gl_fielderror(L, 1, fn, "sms", "must be a positive number of SMs, got %lld", (long long)sms);
    return sms;
}

/* Splits one group of at least sms SMs off `all` (the device's resource) into *group. */
static void split_group(lua_State *L, const CUdevResource *all, int sms, int minimum, int granularity,
                        CUdevResource *group, const char *fn) {
    int total = (int)all->sm.smCount;
    if (sms == total) { /* the whole device: nothing to split */
        *group = *all;
        return;
    }
    unsigned groups = 1;
    CUdevResource rest;
    memset(group, 0, sizeof *group);
    memset(&rest, 0, sizeof rest);
    CUresult r = gl_cu.cuDevSmResourceSplitByCount(group, &groups, all, &rest, 0, (unsigned)sms);
    if (r == CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION || (r == CUDA_SUCCESS && groups == 0)) {
        int largest = total / granularity * granularity;
        if (largest == total) largest -= granularity;
        gl_fielderror(L, 1, fn, "sms", "%d SMs cannot be split off this device's %d (the driver splits at "
                      "least %d SMs, in multiples of %d): ask for at most %d, or %d for the whole device",
                      sms, total, minimum, granularity, largest, total);
    }
    GL_CHECK(L, r, fn, "cuDevSmResourceSplitByCount");
}

static int l_partition(lua_State *L) {
    const char *fn = "cuda.partition";
    static const char *const known[] = {"sms", NULL};
    if (test_partition(L, 1))
        gl_argerror(L, 1, fn, "partitions do not nest: cuda.partition splits the current device "
                              "(pass {sms=n})");
    if (lua_type(L, 1) != LUA_TTABLE)
        gl_argerror(L, 1, fn, "options table {sms=n} expected, got %s", gl_typename(L, 1));
    gl_check_known_fields(L, 1, known, fn);
    lua_Integer sms = sms_field(L, fn);
    gl_require_gpu(L, fn);
    require_entry_points(L, fn);
    const gl_device_limits *lim = gl_device_limits_current(L, fn);
    const int ordinal = gl_current_device();
    CUdevice dev;
    GL_CHECK(L, gl_cu.cuDeviceGet(&dev, ordinal), fn, "cuDeviceGet");
    CUdevResource all;
    memset(&all, 0, sizeof all);
    GL_CHECK(L, gl_cu.cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), fn,
             "cuDeviceGetDevResource");
    int total = (int)all.sm.smCount, minimum, granularity;
    split_rules(&all.sm, lim->cc_major, &minimum, &granularity);
    if (sms > total)
        gl_fielderror(L, 1, fn, "sms", "%lld is above this device's %d SMs", (long long)sms, total);
    if (sms < minimum)
        gl_fielderror(L, 1, fn, "sms", "%lld is below the driver's minimum partition of %d SMs "
                      "(granularity: multiples of %d)", (long long)sms, minimum, granularity);
    CUdevResource group;
    split_group(L, &all, (int)sms, minimum, granularity, &group, fn);
    CUdevResourceDesc desc = NULL;
    GL_CHECK(L, gl_cu.cuDevResourceGenerateDesc(&desc, &group, 1), fn, "cuDevResourceGenerateDesc");

    gl_partition *p = gl_newuserdatauv(L, sizeof *p, 0);
    memset(p, 0, sizeof *p);
    gl_setmetatable(L, PARTITION_T);
    green_ctx *g = calloc(1, sizeof *g);
    if (g == NULL) return luaL_error(L, "%s: out of host memory", fn);
    CUresult r = gl_cu.cuGreenCtxCreate(&g->handle, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    if (r != CUDA_SUCCESS) {
        free(g);
        gl_raise_cuda(L, r, fn, "cuGreenCtxCreate");
    }
    g->refs = 1;
    p->g = g;
    p->sm_count = (int)group.sm.smCount;
    p->requested = (int)sms;
    p->rounded = p->sm_count != p->requested;
    p->minimum = minimum;
    p->granularity = granularity;
    p->device = ordinal; /* dev's, whatever a finalizer run by the allocation made current */
    gl_live.partitions++;
    return 1;
}

/* part:stream{priority=}: a non-blocking cuda.stream in the partition's green context. */
static int l_partition_stream(lua_State *L) {
    const char *fn = "part:stream";
    static const char *const known[] = {"priority", NULL};
    gl_partition *p = check_partition(L, 1, fn);
    bool have_priority = false;
    lua_Integer priority = 0;
    if (!lua_isnoneornil(L, 2)) {
        if (lua_type(L, 2) != LUA_TTABLE)
            gl_argerror(L, 2, fn, "options table {priority=} expected, got %s", gl_typename(L, 2));
        gl_check_known_fields(L, 2, known, fn);
        int type = gl_rawfieldtype(L, 2, "priority");
        have_priority = type != LUA_TNIL;
        if (have_priority && type != LUA_TNUMBER)
            gl_fielderror(L, 2, fn, "priority", "integer expected, got %s", lua_typename(L, type));
        priority = gl_opt_int_field(L, 2, "priority", 0, fn);
    }
    gl_require_gpu(L, fn);
    if (p->device != gl_current_device()) gl_refuse_other_device(L, fn, 1, PARTITION_T, p->device);
    const gl_device_limits *lim = gl_device_limits_current(L, fn);
    int least = lim->priority_least, greatest = lim->priority_greatest;
    if (!have_priority) priority = least;
    if (priority < greatest || priority > least)
        gl_fielderror(L, 2, fn, "priority", "%lld is out of this device's range %d..%d (%d is the highest "
                      "priority, %d the default)", (long long)priority, greatest, least, greatest, least);
    gl_stream *s = gl_push_stream_shell(L, 1);
    /* the allocation may have run a finalizer that freed the partition or changed the device */
    if (p->g == NULL) luaL_error(L, "%s: the cuda.partition was freed during the call", fn);
    if (p->device != gl_current_device()) gl_refuse_other_device(L, fn, 1, PARTITION_T, p->device);
    CUstream h = NULL;
    GL_CHECK(L, gl_cu.cuGreenCtxStreamCreate(&h, p->g->handle, CU_STREAM_NON_BLOCKING, (int)priority), fn,
             "cuGreenCtxStreamCreate");
    if (!gl_stream_adopt(s, h, (int)priority, stream_released, p->g)) {
        gl_cu.cuStreamDestroy(h);
        return luaL_error(L, "%s: out of host memory", fn);
    }
    p->g->refs++;
    p->g->streams++;
    return 1;
}

/* The fields (the class's __fields, read through gl_class_index); a freed partition keeps
 * answering them (freed = true, streams = 0). */
static const gl_partition *field_self(lua_State *L) { return gl_checkudata(L, 1, PARTITION_T); }

static int f_sm_count(lua_State *L) {
    lua_pushinteger(L, field_self(L)->sm_count);
    return 1;
}
static int f_requested(lua_State *L) {
    lua_pushinteger(L, field_self(L)->requested);
    return 1;
}
static int f_rounded(lua_State *L) {
    lua_pushboolean(L, field_self(L)->rounded);
    return 1;
}
static int f_granularity(lua_State *L) {
    lua_pushinteger(L, field_self(L)->granularity);
    return 1;
}
static int f_minimum(lua_State *L) {
    lua_pushinteger(L, field_self(L)->minimum);
    return 1;
}
static int f_device(lua_State *L) {
    lua_pushinteger(L, field_self(L)->device);
    return 1;
}
static int f_streams(lua_State *L) {
    const gl_partition *p = field_self(L);
    lua_pushinteger(L, p->g ? p->g->streams : 0);
    return 1;
}
static int f_freed(lua_State *L) {
    lua_pushboolean(L, field_self(L)->g == NULL);
    return 1;
}

static int partition_tostring(lua_State *L) {
    gl_partition *p = gl_checkudata(L, 1, PARTITION_T);
    if (p->g == NULL) {
        lua_pushfstring(L, "cuda.partition (freed; was %d SMs of device %d)", p->sm_count, p->device);
        return 1;
    }
    if (p->rounded)
        lua_pushfstring(L, "cuda.partition %p (%d SMs of device %d: %d asked for, rounded up by the driver "
                        "to its multiples of %d; %d streams)", (void *)p->g->handle, p->sm_count, p->device,
                        p->requested, p->granularity, p->g->streams);
    else
        lua_pushfstring(L, "cuda.partition %p (%d SMs of device %d; %d streams)", (void *)p->g->handle,
                        p->sm_count, p->device, p->g->streams);
    return 1;
}

void gl_open_partition(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", partition_free}, {"__close", partition_free},
                                    {"__tostring", partition_tostring}, {NULL, NULL}};
    static const luaL_Reg methods[] = {{"stream", l_partition_stream}, {"free", partition_free},
                                      {NULL, NULL}};
    static const luaL_Reg fields[] = {{"sm_count", f_sm_count}, {"requested", f_requested},
                                      {"rounded", f_rounded},   {"granularity", f_granularity},
                                      {"minimum", f_minimum},   {"device", f_device},
                                      {"streams", f_streams},   {"freed", f_freed},
                                      {NULL, NULL}};
    gl_new_class(L, PARTITION_T, meta, methods, fields);
    lua_pushcfunction(L, l_partition);
    lua_setfield(L, -2, "partition");
}
