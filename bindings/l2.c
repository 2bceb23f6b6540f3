/*
 * l2.c — L2 residency: the persisting set-aside (cuda.l2_persisting, cuda.l2_reset) and
 * access-policy windows, on a launch (the l2_window key, launch.c) or on a stream
 * (s:set_l2_window, s:l2_window). One reader checks the window table for both.
 *
 * A stream's window lifetime: the stream keeps the window's cuda.array object alive (a table in
 * the private store with weak keys: stream -> array, so the array lives as long as the stream
 * object does) until the window is removed or replaced, or the stream object is collected. On
 * removal the array's use is marked on the stream, so memory released afterwards waits for the
 * work queued while the window was set. A window is a cache hint over an address range: the
 * driver never reads or writes memory through it; the memory is touched only by work that got
 * the array (or a view) as an argument, and that work marks it. So a:free() of a window's array
 * is allowed and frees as for any array; the stream's window then covers an address gpulab no
 * longer owns until it is removed (s:l2_window() says freed=true).
 *
 * The default stream has no stream object: windows go on cuda.stream objects, and launches on
 * the default stream take the l2_window launch key.
 */
#include "l2.h"

#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "identity.h"
#include "lifetime.h"
#include "module.h"
#include "objects.h"
#include "options.h"
#include "results.h"
#include "stream.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOWS_KEY "gpulab.l2_windows" /* private store: stream -> the array of its window */
#define WINDOW_SHAPE "{array= | ptr=, bytes=, hit_ratio=, hit=, miss=}"

/* ------------------------------------------------------------------------------------------
 * The window table
 * ------------------------------------------------------------------------------------------ */
/* "field 'l2_window': MESSAGE" for the launch key, the bare MESSAGE for an argument. */
static __attribute__((noreturn, format(printf, 5, 6))) void window_error(lua_State *L, int arg, const char *fn,
                                                                           const char *field, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (field) gl_fielderror(L, arg, fn, field, "%s", msg);
    gl_argerror(L, arg, fn, "%s", msg);
    abort();
}

/* An L2 access property by name; "persisting" only where allowed (a miss cannot persist). */
static CUaccessProperty read_access_property(lua_State *L, int arg, int value, const char *what,
                                             bool persisting_ok, const char *field, const char *fn) {
    size_t len = 0;
    const char *s = lua_type(L, value) == LUA_TSTRING ? lua_tolstring(L, value, &len) : NULL;
    if (s && len == strlen(s)) {
        if (strcmp(s, "normal") == 0) return CU_ACCESS_PROPERTY_NORMAL;
        if (strcmp(s, "streaming") == 0) return CU_ACCESS_PROPERTY_STREAMING;
        if (persisting_ok && strcmp(s, "persisting") == 0) return CU_ACCESS_PROPERTY_PERSISTING;
    }
    const char *got = s ? lua_pushfstring(L, "\"%s\"%s", s, len == strlen(s) ? "" : " (with a NUL byte)")
                        : gl_typename(L, value);
    window_error(L, arg, fn, field, "%s: %s expected, got %s", what,
                 persisting_ok ? "\"persisting\", \"streaming\" or \"normal\"" : "\"streaming\" or \"normal\"",
                 got);
}

static uint64_t read_window_int(lua_State *L, int arg, int value, const char *what, const char *field,
                                const char *fn) {
    int isint = 0;
    lua_Integer v = lua_type(L, value) == LUA_TNUMBER ? lua_tointegerx(L, value, &isint) : 0;
    if (!isint || v < 0)
        window_error(L, arg, fn, field, "%s: non-negative integer expected, got %s", what,
                     lua_type(L, value) == LUA_TNUMBER ? lua_tostring(L, value) : gl_typename(L, value));
    return (uint64_t)v;
}

enum { W_ARRAY, W_PTR, W_BYTES, W_RATIO, W_HIT, W_MISS, W_KEYS };

/* Stack indices of the known keys' values (0 when absent); they stay on the stack. */
static void collect_keys(lua_State *L, int value, int at[W_KEYS], const char *fn) {
    static const char *const known[] = {"array", "ptr", "bytes", "hit_ratio", "hit", "miss", NULL};
    bool unknown = false;
    /* a value and a key copy for each known key, and the walk's key: the launch path calls this
       with most of a C function's LUA_MINSTACK slots taken by the configuration's values */
    luaL_checkstack(L, 2 * W_KEYS + 2, fn);
    lua_pushnil(L);
    while (lua_next(L, value)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int i = 0;
        while (key && known[i] && strcmp(key, known[i]) != 0) i++;
        if (key && known[i] && lua_rawlen(L, -2) == strlen(known[i])) {
            at[i] = lua_gettop(L); /* the value stays; a copy of the key goes on for lua_next */
            lua_pushvalue(L, -2);
        } else {
            unknown = true;
            lua_pop(L, 1);
        }
    }
    if (unknown) gl_check_known_fields(L, value, known, fn);
}

/* base and bytes from array= or ptr= (with bytes=); *limit is the array's size, else UINT64_MAX. */
static void read_range(lua_State *L, int arg, const int at[W_KEYS], const char *field, const char *fn,
                       gl_l2_window *out, uint64_t *base, uint64_t *bytes, uint64_t *limit) {
    if (at[W_ARRAY] && at[W_PTR]) window_error(L, arg, fn, field, "give array= or ptr=, not both");
    *limit = UINT64_MAX;
    if (at[W_ARRAY]) {
        gl_array *a = gl_test_array(L, at[W_ARRAY]);
        if (a == NULL || a->ptr == 0)
            window_error(L, arg, fn, field, "array: %s",
                         gl_testudata(L, at[W_ARRAY], GL_ARRAY_T)
                             ? "the cuda.array was freed"
                             : lua_pushfstring(L, "cuda.array expected, got %s", gl_typename(L, at[W_ARRAY])));
        if (a->device != gl_current_device())
            window_error(L, arg, fn, field, "array: the cuda.array belongs to device %d, but device %d is current",
                         a->device, gl_current_device());
        *base = (uint64_t)a->ptr;
        *bytes = *limit = a->nbytes;
        out->array = a;
        out->array_at = at[W_ARRAY];
    } else if (at[W_PTR]) {
        *base = read_window_int(L, arg, at[W_PTR], "ptr", field, fn);
        if (!at[W_BYTES]) window_error(L, arg, fn, field, "bytes: required with ptr=");
    } else {
        window_error(L, arg, fn, field, "array= (a cuda.array) or ptr= (a device address) required");
    }
}

void gl_read_l2_window(lua_State *L, int arg, int value, const gl_device_limits *d, const char *field,
                       const char *fn, gl_l2_window *out) {
    memset(out, 0, sizeof *out);
    if (lua_type(L, value) != LUA_TTABLE) {
        if (field) gl_fieldtypeerror(L, arg, fn, field, value, "table " WINDOW_SHAPE);
        gl_argerror(L, arg, fn, "table " WINDOW_SHAPE " expected, got %s", gl_typename(L, value));
    }
    int at[W_KEYS] = {0};
    collect_keys(L, value, at, fn);
    if (d->max_window_bytes <= 0)
        window_error(L, arg, fn, field, "device %d has no L2 access-policy window", d->ordinal);
    uint64_t base = 0, bytes = 0, limit = UINT64_MAX;
    read_range(L, arg, at, field, fn, out, &base, &bytes, &limit);
    if (at[W_BYTES]) bytes = read_window_int(L, arg, at[W_BYTES], "bytes", field, fn);
    if (bytes < 1 && !at[W_ARRAY])
        window_error(L, arg, fn, field, "bytes = %llu: a window covers at least 1 byte", (unsigned long long)bytes);
    if (bytes < 1 || bytes > limit)
        window_error(L, arg, fn, field, "bytes = %llu is outside the array's 1..%llu bytes",
                     (unsigned long long)bytes, (unsigned long long)limit);
    if (bytes > (uint64_t)d->max_window_bytes)
        window_error(L, arg, fn, field, "bytes = %llu exceeds device %d's largest access-policy window, %d bytes",
                     (unsigned long long)bytes, d->ordinal, d->max_window_bytes);
    double ratio = 1.0;
    if (at[W_RATIO]) {
        if (lua_type(L, at[W_RATIO]) != LUA_TNUMBER)
            window_error(L, arg, fn, field, "hit_ratio: number expected, got %s", gl_typename(L, at[W_RATIO]));
        ratio = lua_tonumber(L, at[W_RATIO]);
        if (!(ratio >= 0.0 && ratio <= 1.0))
            window_error(L, arg, fn, field, "hit_ratio = %s is outside 0..1", lua_tostring(L, at[W_RATIO]));
    }
    out->w.base_ptr = (void *)(uintptr_t)base;
    out->w.num_bytes = (size_t)bytes;
    out->w.hitRatio = (float)ratio;
    out->w.hitProp = at[W_HIT] ? read_access_property(L, arg, at[W_HIT], "hit", true, field, fn)
                               : CU_ACCESS_PROPERTY_PERSISTING;
    out->w.missProp = at[W_MISS] ? read_access_property(L, arg, at[W_MISS], "miss", false, field, fn)
                                 : CU_ACCESS_PROPERTY_STREAMING;
}

/* ------------------------------------------------------------------------------------------
 * Driver entry points
 * ------------------------------------------------------------------------------------------ */
static void require_entry(lua_State *L, const void *entry, const char *name, const char *fn) {
    if (entry == NULL)
        luaL_error(L, "%s: needs the driver entry point %s (a CUDA 11.0 driver or newer); this driver is %d.%d", fn,
                   name, gl_driver_version() / 1000, gl_driver_version() % 1000 / 10);
}

static void refuse_in_capture(lua_State *L, const char *fn) {
    if (gl_capture_active()) luaL_error(L, "%s: not available while a stream capture is under way", fn);
}

/* ------------------------------------------------------------------------------------------
 * cuda.l2_persisting([bytes]), cuda.l2_reset()
 * ------------------------------------------------------------------------------------------ */
static int max_persisting(lua_State *L, const char *fn) {
    CUdevice dev;
    int max = 0;
    GL_CHECK(L, gl_cu.cuDeviceGet(&dev, gl_current_device()), fn, "cuDeviceGet");
    GL_CHECK(L, gl_cu.cuDeviceGetAttribute(&max, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev), fn,
             "cuDeviceGetAttribute (MAX_PERSISTING_L2_CACHE_SIZE)");
    return max;
}

static lua_Integer read_set_aside(lua_State *L, const char *fn) {
    int isint = 0;
    lua_Integer v = lua_type(L, 1) == LUA_TNUMBER ? lua_tointegerx(L, 1, &isint) : 0;
    if (!isint || v < 0)
        gl_argerror(L, 1, fn, "bytes: non-negative integer expected, got %s",
                    lua_type(L, 1) == LUA_TNUMBER ? lua_tostring(L, 1) : gl_typename(L, 1));
    return v;
}

static int l_l2_persisting(lua_State *L) {
    const char *fn = "cuda.l2_persisting";
    bool set = !lua_isnoneornil(L, 1);
    lua_Integer want = set ? read_set_aside(L, fn) : 0;
    gl_require_gpu(L, fn);
    refuse_in_capture(L, fn);
    require_entry(L, (const void *)gl_cu.cuCtxGetLimit, "cuCtxGetLimit", fn);
    if (set) {
        require_entry(L, (const void *)gl_cu.cuCtxSetLimit, "cuCtxSetLimit", fn);
        int max = max_persisting(L, fn);
        if (want > max)
            gl_argerror(L, 1, fn, "bytes = %lld exceeds device %d's largest persisting L2 set-aside, %d bytes "
                                  "(MAX_PERSISTING_L2_CACHE_SIZE)", (long long)want, gl_current_device(), max);
        GL_CHECK(L, gl_cu.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, (size_t)want), fn,
                 "cuCtxSetLimit (PERSISTING_L2_CACHE_SIZE)");
    }
    size_t granted = 0;
    GL_CHECK(L, gl_cu.cuCtxGetLimit(&granted, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), fn,
             "cuCtxGetLimit (PERSISTING_L2_CACHE_SIZE)");
    lua_pushinteger(L, (lua_Integer)granted);
    return 1;
}

static int l_l2_reset(lua_State *L) {
    const char *fn = "cuda.l2_reset";
    gl_require_gpu(L, fn);
    refuse_in_capture(L, fn);
    require_entry(L, (const void *)gl_cu.cuCtxResetPersistingL2Cache, "cuCtxResetPersistingL2Cache", fn);
    GL_CHECK(L, gl_cu.cuCtxResetPersistingL2Cache(), fn, "cuCtxResetPersistingL2Cache");
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Stream windows
 * ------------------------------------------------------------------------------------------ */
/* Pushes the stream -> array table (made again if a script removed it from the registry). */
static void push_windows(lua_State *L) {
    if (gl_private_get(L, WINDOWS_KEY) == LUA_TTABLE) return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    gl_lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    gl_private_set(L, WINDOWS_KEY);
}

static gl_stream *check_stream(lua_State *L, const char *fn) {
    gl_stream *s = gl_test_stream(L, 1);
    if (s == NULL) gl_typeerror(L, 1, fn, "cuda.stream");
    if (s->track == NULL) gl_freederror(L, 1, fn, "the cuda.stream was freed");
    return s;
}

/* The window's array leaves the stream: work queued while it was set must finish before the
 * array's memory may go. */
static void drop_window_array(lua_State *L, int windows, gl_stream *s) {
    lua_pushvalue(L, 1);
    lua_rawget(L, windows);
    gl_array *old = gl_test_array(L, -1);
    if (old && old->ptr) gl_use_mark(&old->use, s->track, gl_work_seq);
    lua_pop(L, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    lua_rawset(L, windows);
}

static void set_stream_window(lua_State *L, gl_stream *s, const CUaccessPolicyWindow *w, const char *fn) {
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow = *w;
    GL_CHECK(L, gl_cu.cuStreamSetAttribute(s->handle, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v), fn,
             "cuStreamSetAttribute (ACCESS_POLICY_WINDOW)");
}

/* s:set_l2_window{array=d | ptr=, bytes=, hit_ratio=1, hit="persisting", miss="streaming"}, or nil. */
static int l_set_l2_window(lua_State *L) {
    const char *fn = "s:set_l2_window";
    lua_settop(L, 2);
    gl_stream *s = check_stream(L, fn);
    if (s->device != gl_current_device()) gl_refuse_other_device(L, fn, 1, "cuda.stream", s->device);
    bool remove = lua_isnil(L, 2);
    if (!remove && lua_type(L, 2) != LUA_TTABLE)
        gl_argerror(L, 2, fn, "table " WINDOW_SHAPE " or nil expected, got %s", gl_typename(L, 2));
    gl_l2_window win;
    memset(&win, 0, sizeof win);
    if (!remove) gl_read_l2_window(L, 2, 2, gl_device_limits_current(L, fn), NULL, fn, &win);
    refuse_in_capture(L, fn);
    require_entry(L, (const void *)gl_cu.cuStreamSetAttribute, "cuStreamSetAttribute", fn);
    push_windows(L); /* may allocate, and so run finalizers: the objects are checked again */
    int windows = lua_gettop(L);
    s = check_stream(L, fn);
    if (win.array && win.array->ptr == 0) gl_argerror(L, 2, fn, "array: the cuda.array was freed during the call");
    set_stream_window(L, s, &win.w, fn); /* removing: a window of 0 bytes */
    drop_window_array(L, windows, s);
    if (win.array) { /* the array checked, from this call's stack: the table may hold another by now */
        lua_pushvalue(L, 1);
        lua_pushvalue(L, win.array_at);
        lua_rawset(L, windows);
    }
    return 0;
}

static const char *access_property_name(CUaccessProperty p) {
    switch (p) {
    case CU_ACCESS_PROPERTY_NORMAL: return "normal";
    case CU_ACCESS_PROPERTY_STREAMING: return "streaming";
    case CU_ACCESS_PROPERTY_PERSISTING: return "persisting";
    default: return "unknown";
    }
}

/* array= (and freed=) in the table on top: the array the stream keeps, while the driver's window
 * is still over it (a window set past gpulab, with ptr=, has none). */
static void push_window_array(lua_State *L, const CUaccessPolicyWindow *w) {
    push_windows(L);
    lua_pushvalue(L, 1);
    lua_rawget(L, -2);
    gl_array *a = gl_testudata(L, -1, GL_ARRAY_T); /* freed ones too */
    uint64_t base = (uint64_t)(uintptr_t)w->base_ptr;
    if (a && (a->ptr == 0 || (base >= a->ptr && base < a->ptr + a->nbytes))) {
        lua_setfield(L, -3, "array");
        lua_pushboolean(L, a->ptr == 0);
        lua_setfield(L, -3, "freed");
    } else {
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* s:l2_window() -> {ptr=, bytes=, hit_ratio=, hit=, miss=, array=, freed=} or nil (none set). */
static int l_l2_window(lua_State *L) {
    const char *fn = "s:l2_window";
    gl_stream *s = check_stream(L, fn);
    if (s->device != gl_current_device()) gl_refuse_other_device(L, fn, 1, "cuda.stream", s->device);
    require_entry(L, (const void *)gl_cu.cuStreamGetAttribute, "cuStreamGetAttribute", fn);
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    GL_CHECK(L, gl_cu.cuStreamGetAttribute(s->handle, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v), fn,
             "cuStreamGetAttribute (ACCESS_POLICY_WINDOW)");
    const CUaccessPolicyWindow *w = &v.accessPolicyWindow;
    if (w->num_bytes == 0) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 7);
    gl_set_integer_field(L, "ptr", (lua_Integer)(uintptr_t)w->base_ptr);
    gl_set_integer_field(L, "bytes", (lua_Integer)w->num_bytes);
    gl_set_number_field(L, "hit_ratio", (lua_Number)w->hitRatio);
    gl_set_string_field(L, "hit", access_property_name(w->hitProp));
    gl_set_string_field(L, "miss", access_property_name(w->missProp));
    push_window_array(L, w);
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
void gl_open_l2(lua_State *L) {
    static const luaL_Reg f[] = {{"l2_persisting", l_l2_persisting}, {"l2_reset", l_l2_reset}, {NULL, NULL}};
    luaL_setfuncs(L, f, 0);
    static const luaL_Reg stream_methods[] = {{"set_l2_window", l_set_l2_window}, {"l2_window", l_l2_window},
                                              {NULL, NULL}};
    gl_class_add_methods(L, GL_STREAM_T, stream_methods);
    push_windows(L);
    lua_pop(L, 1);
}
