/*
 * memory.c — device arrays (cuda.array), host arrays (cuda.host) and cuda.compare.
 *
 * Sizes: a shape is a positive element count n or a table {d1, d2, ...} of up to GL_MAX_DIMS
 * positive integers. Zero-element arrays are refused (cuMemAlloc cannot allocate 0 bytes and a
 * 0 address is how a freed array is recognised). The element count and the byte size are
 * computed with overflow checks, so a shape whose size does not fit 64 bits raises.
 *
 * Host arrays are 1-based: h[1] .. h[#h]. Integer dtypes take integers (or floats with an
 * integral value) in the dtype's range; float dtypes take any number, f16/bf16 rounded to
 * nearest even straight from the double. u64 elements above 2^63-1 read back as floats.
 *
 * Lifetimes: device memory and pinned host memory go through gl_release, so a buffer that
 * queued work still uses is freed only once that work completed. __gc, __close and :free()
 * all call the one release function, which is idempotent and never raises. An array and its
 * views (x:view) share one gl_mem_block: each holds a reference, dropped once the work queued
 * on that object completed, and the memory goes when the last reference does.
 *
 * Calls back into Lua: option tables are read raw (no __index), and any Lua allocation (it can
 * run a finalizer that frees the very array being worked on) happens before the data pointer is
 * taken, or the array is checked again after it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "context.h"
#include "driver.h"
#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "lifetime.h"
#include "objects.h"
#include "peer.h"
#include "observe.h"
#include "options.h"
#include "register.h"
#include "stream.h"

#define HOST_ALIGN 64 /* cache line; also enough for any vector load a test might do */

/* ------------------------------------------------------------------------------------------
 * Options, read raw: an __index (or __pairs) on an options table never runs, so nothing a
 * script defines can free an array half-way through a call. The value goes on the stack top.
 * ------------------------------------------------------------------------------------------ */
static int raw_field(lua_State *L, int t, const char *name) {
    lua_pushstring(L, name);
    return lua_rawget(L, t);
}

static lua_Integer raw_opt_int(lua_State *L, int t, const char *name, lua_Integer def, const char *fn) {
    int ty = raw_field(L, t, name);
    lua_Integer v = def;
    if (ty != LUA_TNIL) {
        int isint = 0;
        v = lua_tointegerx(L, -1, &isint);
        if (!isint || ty != LUA_TNUMBER)
            gl_fielderror(L, t, fn, name, "integer expected, got %s",
                          ty == LUA_TNUMBER ? lua_tostring(L, -1) : gl_typename(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

static double raw_opt_num(lua_State *L, int t, const char *name, double def, const char *fn) {
    int ty = raw_field(L, t, name);
    double v = def;
    if (ty != LUA_TNIL) {
        if (ty != LUA_TNUMBER)
            gl_fieldtypeerror(L, t, fn, name, -1, "number");
        v = lua_tonumber(L, -1);
        if (isnan(v)) gl_fielderror(L, t, fn, name, "number expected, got NaN");
    }
    lua_pop(L, 1);
    return v;
}

static bool raw_opt_bool(lua_State *L, int t, const char *name, bool def, const char *fn) {
    int ty = raw_field(L, t, name);
    bool v = def;
    if (ty != LUA_TNIL) {
        if (ty != LUA_TBOOLEAN)
            gl_fieldtypeerror(L, t, fn, name, -1, "boolean");
        v = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/* ------------------------------------------------------------------------------------------
 * Shapes and sizes
 * ------------------------------------------------------------------------------------------ */
typedef struct shape_spec {
    int ndim;
    int64_t dims[GL_MAX_DIMS];
    size_t numel, nbytes;
    gl_dtype dtype;
} shape_spec;

static gl_dtype check_dtype(lua_State *L, int idx, const char *fn) {
    if (lua_type(L, idx) != LUA_TSTRING)
        gl_typeerror(L, idx, fn, "dtype name");
    size_t len;
    const char *name = lua_tolstring(L, idx, &len);
    int t = gl_dtype_from_lname(name, len);
    if (t < 0 && strlen(name) != len)
        gl_argerror(L, idx, fn, "dtype name contains a NUL byte: '%s\\0...'", name);
    if (t < 0)
        gl_argerror(L, idx, fn, "unknown dtype '%s'; known: f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, "
                                "u32, u64, bool", name);
    return (gl_dtype)t;
}

/* One dimension from the value at the top of the stack: a positive integer (2.0 is fine). */
static int64_t check_dim(lua_State *L, int argno, int dim, const char *fn) {
    char where[32] = "";
    if (dim > 0) snprintf(where, sizeof where, "dimension %d ", dim);
    if (lua_type(L, -1) != LUA_TNUMBER)
        gl_argerror(L, argno, fn, "%ssize must be an integer, got %s", where, gl_typename(L, -1));
    int isint = 0;
    lua_Integer n = lua_tointegerx(L, -1, &isint);
    if (!isint)
        gl_argerror(L, argno, fn, "%ssize must be an integer, got %s", where, lua_tostring(L, -1));
    if (n <= 0)
        gl_argerror(L, argno, fn, "%ssize must be positive, got %lld; zero-element arrays are not supported",
                    where, n);
    return (int64_t)n;
}

static void check_shape(lua_State *L, int idx, gl_dtype dtype, shape_spec *s, const char *fn) {
    s->dtype = dtype;
    if (lua_type(L, idx) == LUA_TTABLE) { /* read raw: no metamethod runs */
        lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
        if (n < 1 || n > GL_MAX_DIMS)
            gl_argerror(L, idx, fn, "shape must have 1 to %d dimensions, got %lld", GL_MAX_DIMS, n);
        s->ndim = (int)n;
        for (int i = 0; i < s->ndim; i++) {
            lua_rawgeti(L, idx, i + 1);
            s->dims[i] = check_dim(L, idx, i + 1, fn);
            lua_pop(L, 1);
        }
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
        lua_pushvalue(L, idx);
        s->ndim = 1;
        s->dims[0] = check_dim(L, idx, 0, fn);
        lua_pop(L, 1);
    } else {
        gl_typeerror(L, idx, fn, "element count or shape table");
    }
    uint64_t numel = 1;
    for (int i = 0; i < s->ndim; i++)
        if (__builtin_mul_overflow(numel, (uint64_t)s->dims[i], &numel) || numel > INT64_MAX)
            gl_argerror(L, idx, fn, "the element count overflows 64 bits");
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)gl_dtype_size(dtype), &nbytes) ||
        nbytes > INT64_MAX || nbytes > SIZE_MAX)
        gl_argerror(L, idx, fn, "%llu %s elements: the byte size overflows 64 bits",
                    (unsigned long long)numel, gl_dtype_name(dtype));
    s->numel = (size_t)numel;
    s->nbytes = (size_t)nbytes;
}

static void push_shape(lua_State *L, int ndim, const int64_t *dims) {
    lua_createtable(L, ndim, 0);
    for (int i = 0; i < ndim; i++) {
        lua_pushinteger(L, (lua_Integer)dims[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* "4.0 KiB" */
static void format_bytes(char *buf, size_t len, size_t n) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, len, "%zu B", n);
        return;
    }
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 6) { v /= 1024; u++; }
    snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* "f32[4x3]" */
static void format_type(char *buf, size_t len, gl_dtype t, int ndim, const int64_t *dims) {
    int n = snprintf(buf, len, "%s[", gl_dtype_name(t));
    for (int i = 0; i < ndim && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%lld", i ? "x" : "", (long long)dims[i]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "]");
}

/* ------------------------------------------------------------------------------------------
 * Element values: Lua <-> element bytes
 * ------------------------------------------------------------------------------------------ */
static void push_element(lua_State *L, gl_dtype t, const void *p) {
    if (gl_dtype_is_bool(t)) {
        lua_pushboolean(L, *(const unsigned char *)p != 0);
    } else if (gl_dtype_is_float(t) || (t == GL_U64 && gl_dtype_load_bits(t, p) < 0)) {
        lua_pushnumber(L, gl_dtype_load_double(t, p)); /* a u64 above 2^63-1: no Lua integer holds it */
    } else {
        lua_pushinteger(L, (lua_Integer)gl_dtype_load_bits(t, p));
    }
}

/* Converts the number at idx to dtype t into out[0..size). Returns NULL on success or a static
 * reason ("number expected, got string", "2.5 is not an integer", "300 is out of range ...")
 * formatted into msg. */
static const char *encode_value(lua_State *L, int idx, gl_dtype t, void *out, char *msg, size_t len) {
    if (gl_dtype_is_bool(t)) {
        if (lua_type(L, idx) != LUA_TBOOLEAN) {
            snprintf(msg, len, "bool takes true or false, got %s", gl_typename(L, idx));
            return msg;
        }
        *(unsigned char *)out = (unsigned char)lua_toboolean(L, idx);
        return NULL;
    }
    if (lua_type(L, idx) != LUA_TNUMBER) {
        snprintf(msg, len, "number expected, got %s", gl_typename(L, idx));
        return msg;
    }
    if (gl_dtype_is_float(t)) {
        gl_dtype_store_double(t, out, lua_tonumber(L, idx));
        return NULL;
    }
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(t, &min, &umax);
    if (lua_isinteger(L, idx)) {
        lua_Integer v = lua_tointeger(L, idx);
        if (v < min || (v > 0 && (uint64_t)v > umax)) {
            snprintf(msg, len, "%lld is out of range for %s (%lld..%llu)", (long long)v,
                     gl_dtype_name(t), (long long)min, (unsigned long long)umax);
            return msg;
        }
        gl_dtype_store_bits(t, out, (int64_t)v);
        return NULL;
    }
    double x = lua_tonumber(L, idx);
    if (!isfinite(x) || floor(x) != x) {
        snprintf(msg, len, "%s takes integers, got %.17g", gl_dtype_name(t), x);
        return msg;
    }
    /* umax + 1 is a power of two, exact as a double: compare against it, not umax */
    double top = ldexp(1.0, (int)gl_dtype_size(t) * 8 - (gl_dtype_is_signed(t) ? 1 : 0));
    if (x < (double)min || x >= top) {
        snprintf(msg, len, "%.17g is out of range for %s (%lld..%llu)", x, gl_dtype_name(t),
                 (long long)min, (unsigned long long)umax);
        return msg;
    }
    if (x >= 0x1p63) gl_dtype_store_bits(t, out, (int64_t)(uint64_t)x);
    else gl_dtype_store_bits(t, out, (int64_t)x);
    return NULL;
}

/* encode_value, raising "bad argument #N to 'fn' (reason)" for argument idx, or "fn: what:
 * reason" for a value that is no argument (h[i] = v names the element). */
static void check_value(lua_State *L, int idx, gl_dtype t, void *out, const char *fn, const char *what) {
    char msg[160];
    if (encode_value(L, idx, t, out, msg, sizeof msg) == NULL) return;
    if (what == NULL) gl_argerror(L, idx, fn, "%s", msg);
    gl_error(L, "%s: %s: %s", fn, what, msg);
}

static void fill_pattern(void *data, size_t numel, size_t esize, const void *elem) {
    unsigned char *p = data;
    for (size_t i = 0; i < numel; i++) memcpy(p + i * esize, elem, esize);
}

/* ------------------------------------------------------------------------------------------
 * Type checks shared with other bindings
 * ------------------------------------------------------------------------------------------ */
gl_array *gl_test_array(lua_State *L, int idx) {
    gl_array *a = gl_testudata(L, idx, GL_ARRAY_T);
    return a && a->ptr ? a : NULL;
}

gl_array *gl_check_array(lua_State *L, int idx, const char *fn) {
    gl_array *a = gl_testudata(L, idx, GL_ARRAY_T);
    if (a == NULL)
        gl_typeerror(L, idx, fn, "cuda.array");
    if (a->ptr == 0) gl_freederror(L, idx, fn, "cuda.array was freed");
    return a;
}

static gl_host *gl_test_host(lua_State *L, int idx) {
    gl_host *h = gl_testudata(L, idx, GL_HOST_T);
    return h && h->data ? h : NULL;
}

static gl_host *gl_check_host(lua_State *L, int idx, const char *fn) {
    gl_host *h = gl_testudata(L, idx, GL_HOST_T);
    if (h == NULL)
        gl_typeerror(L, idx, fn, "cuda.host");
    if (h->data == NULL) gl_freederror(L, idx, fn, "cuda.host was freed");
    return h;
}

/* ------------------------------------------------------------------------------------------
 * Releasing
 * ------------------------------------------------------------------------------------------ */
typedef enum block_kind { BLOCK_DEVICE, BLOCK_PINNED, BLOCK_PAGEABLE } block_kind;

struct gl_mem_block {
    block_kind kind;
    CUdeviceptr dev;  /* BLOCK_DEVICE */
    void *host;       /* BLOCK_PINNED, BLOCK_PAGEABLE */
    size_t nbytes;
    int device;       /* BLOCK_DEVICE: the device whose context allocated it */
    int holders;      /* live arrays and views on it: the byte counts of cuda.stats() follow it */
    int refs;         /* holders plus released ones whose queued work may still run */
};

static gl_mem_block *block_new(block_kind kind, size_t nbytes) {
    gl_mem_block *b = calloc(1, sizeof *b);
    if (b) {
        b->kind = kind;
        b->nbytes = nbytes;
        b->holders = b->refs = 1;
    }
    return b;
}

static void block_hold(gl_mem_block *b) {
    b->holders++;
    b->refs++;
}

/* Device memory is freed with its own device's context current (another device may be current
 * by then); the current context is put back. */
static void free_in_own_context(gl_mem_block *b) {
    CUcontext own = gl_device_context_retained(b->device), cur = NULL;
    bool swap = own && gl_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != own &&
                gl_cu.cuCtxSetCurrent(own) == CUDA_SUCCESS;
    gl_cu.cuMemFree(b->dev);
    if (swap) gl_cu.cuCtxSetCurrent(cur);
}

/* A gl_release_fn: drops one reference once the releasing object's work is done. */
static void block_unref(void *handle, uintptr_t extra) {
    (void)extra;
    gl_mem_block *b = handle;
    if (--b->refs > 0) return;
    if (b->kind == BLOCK_PAGEABLE) free(b->host);
    else if (gl_context_usable() && b->kind == BLOCK_DEVICE) free_in_own_context(b);
    else if (gl_context_usable()) gl_cu.cuMemFreeHost(b->host);
    free(b);
}

static void release_nothing(void *handle, uintptr_t extra) { (void)handle; (void)extra; }

/* One holder of b lets go; its reference is dropped once the work in u is complete. Without a
 * usable context gl_release forgets the work and calls nothing, so the reference goes now. */
static void block_release(gl_mem_block *b, gl_use *u) {
    if (b == NULL) { /* memory gpulab did not allocate: only the recorded uses go */
        gl_release(u, release_nothing, NULL, 0);
        return;
    }
    if (--b->holders == 0) {
        if (b->kind == BLOCK_DEVICE) gl_live.device_bytes -= (long long)b->nbytes;
        else if (b->kind == BLOCK_PINNED) gl_live.pinned_bytes -= (long long)b->nbytes;
    }
    if (b->kind == BLOCK_PAGEABLE) { /* pageable memory is only ever used synchronously */
        block_unref(b, 0);
        return;
    }
    bool usable = gl_context_usable();
    gl_release(u, block_unref, b, 0);
    if (!usable) block_unref(b, 0);
}

static void array_release(gl_array *a) {
    if (a->ptr == 0) return;
    if (a->release_view) { /* a view: its owner frees the memory */
        a->ptr = 0;
        a->release_view(a, a->view_owner);
        return;
    }
    a->ptr = 0;
    gl_live.arrays--;
    block_release(a->block, &a->use);
    a->block = NULL;
}

static void host_release(gl_host *h) {
    if (h->data == NULL) return;
    h->data = NULL;
    gl_live.hosts--;
    block_release(h->block, &h->use);
    h->block = NULL;
}

/* __gc, __close and :free() (never raise; a wrong type is ignored). */
static int array_free(lua_State *L) {
    gl_array *a = gl_testudata(L, 1, GL_ARRAY_T);
    if (a) array_release(a);
    return 0;
}

static int host_free(lua_State *L) {
    gl_host *h = gl_testudata(L, 1, GL_HOST_T);
    if (h) host_release(h);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Copies. Without a stream a copy runs on the legacy default stream with the synchronous
 * driver calls. With a stream it uses the Async calls on that stream, so it is ordered after
 * the stream's earlier work; it overlaps with the host only when the host side is pinned (for
 * pageable memory the driver copies through a staging buffer and returns when the host
 * buffer may be reused: host-synchronous, still in stream order). Device arrays, and pinned
 * buffers of async copies, are marked in use so a free waits for the copy.
 * ------------------------------------------------------------------------------------------ */
typedef struct mem_ref {
    gl_array *dev;  /* exactly one of dev/host is set */
    gl_host *host;
} mem_ref;

static mem_ref check_mem(lua_State *L, int idx, const char *fn) {
    mem_ref m = {gl_testudata(L, idx, GL_ARRAY_T), gl_testudata(L, idx, GL_HOST_T)};
    if (m.dev == NULL && m.host == NULL)
        gl_typeerror(L, idx, fn, "cuda.array or cuda.host");
    if (m.dev) gl_check_array(L, idx, fn);
    if (m.host) gl_check_host(L, idx, fn);
    return m;
}

static size_t mem_numel(mem_ref m) { return m.dev ? m.dev->numel : m.host->numel; }
static gl_dtype mem_dtype(mem_ref m) { return m.dev ? m.dev->dtype : m.host->dtype; }

static void mark_copy_uses(mem_ref dst, mem_ref src, gl_stream_track *track, bool on_stream) {
    uint64_t seq = gl_next_seq();
    mem_ref both[2] = {dst, src};
    for (int i = 0; i < 2; i++) {
        if (both[i].dev) gl_use_mark(&both[i].dev->use, track, seq);
        else if (on_stream && both[i].host->pinned) gl_use_mark(&both[i].host->use, track, seq);
    }
}

/* x:copy_from(src[, stream | {stream=, count=, dst_offset=, src_offset=, reinterpret=, convert=}]) */
typedef struct copy_opts {
    int stream_idx;          /* stack index of the stream, 0 for none */
    lua_Integer count;       /* -1: everything from the offsets on (both sides must agree) */
    lua_Integer dst_offset, src_offset; /* elements skipped, each in its own array's dtype */
    bool reinterpret, convert;
    lua_Integer rows;        /* > 0: a 2-D copy of `rows` rows of `count` elements ... */
    lua_Integer dst_pitch, src_pitch; /* ... starting this many elements apart (0: default) */
} copy_opts;

static void read_copy_opts(lua_State *L, int idx, copy_opts *o, const char *fn) {
    *o = (copy_opts){0, -1, 0, 0, false, false, 0, 0, 0};
    if (lua_isnoneornil(L, idx)) return;
    if (lua_type(L, idx) != LUA_TTABLE) { /* the stream itself, checked by the copy */
        o->stream_idx = idx;
        return;
    }
    static const char *const known[] = {"stream", "count", "dst_offset", "src_offset", "reinterpret",
                                        "convert", "rows", "dst_pitch", "src_pitch", NULL};
    gl_check_known_fields(L, idx, known, fn);
    bool has_count = raw_field(L, idx, "count") != LUA_TNIL;
    lua_pop(L, 1);
    o->count = has_count ? raw_opt_int(L, idx, "count", 0, fn) : -1;
    if (has_count && o->count < 0)
        gl_fielderror(L, idx, fn, "count", "must not be negative, got %lld", (long long)o->count);
    o->dst_offset = raw_opt_int(L, idx, "dst_offset", 0, fn);
    o->src_offset = raw_opt_int(L, idx, "src_offset", 0, fn);
    o->reinterpret = raw_opt_bool(L, idx, "reinterpret", false, fn);
    o->convert = raw_opt_bool(L, idx, "convert", false, fn);
    if (o->dst_offset < 0 || o->src_offset < 0)
        gl_fielderror(L, idx, fn, o->dst_offset < 0 ? "dst_offset" : "src_offset",
                      "must not be negative, got %lld",
                      (long long)(o->dst_offset < 0 ? o->dst_offset : o->src_offset));
    if (o->reinterpret && o->convert)
        gl_fielderror(L, idx, fn, "convert", "excludes 'reinterpret'");
    o->rows = raw_opt_int(L, idx, "rows", 0, fn);
    o->dst_pitch = raw_opt_int(L, idx, "dst_pitch", 0, fn);
    o->src_pitch = raw_opt_int(L, idx, "src_pitch", 0, fn);
    if (o->rows < 0 || o->dst_pitch < 0 || o->src_pitch < 0)
        gl_fielderror(L, idx, fn, o->rows < 0 ? "rows" : o->dst_pitch < 0 ? "dst_pitch" : "src_pitch",
                      "must not be negative");
    if (o->rows > 0 && !has_count)
        gl_fielderror(L, idx, fn, "rows", "a 2-D copy needs 'count', the elements of each row");
    if (o->rows == 0 && (o->dst_pitch || o->src_pitch))
        gl_fielderror(L, idx, fn, o->dst_pitch ? "dst_pitch" : "src_pitch",
                      "belongs to a 2-D copy: give 'rows' too");
    if (raw_field(L, idx, "stream") != LUA_TNIL) { /* stays on the stack for the copy */
        o->stream_idx = lua_gettop(L);
        gl_opt_stream_field(L, idx, o->stream_idx, "stream", fn);
    } else {
        lua_pop(L, 1);
    }
}

/* Whether value v (an int64, or a u64 bit pattern when from_u64) fits integer dtype t. */
static bool int_fits(gl_dtype t, int64_t v, bool from_u64) {
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(t, &min, &umax);
    if (from_u64 && v < 0) return (uint64_t)v <= umax;
    return v >= min && (v < 0 || (uint64_t)v <= umax);
}

/* Whether the double x is an integer that fits integer dtype t. */
static bool double_fits_int(gl_dtype t, double x) {
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(t, &min, &umax);
    double top = ldexp(1.0, (int)gl_dtype_size(t) * 8 - (gl_dtype_is_signed(t) ? 1 : 0));
    return isfinite(x) && floor(x) == x && x >= (double)min && x < top;
}

/* One element of dtype st at sp converted to dtype dt at dp; false (nothing written) when the
 * destination cannot hold the value (integers: a fraction, NaN or out of range). */
static bool convert_one(gl_dtype dt, void *dp, gl_dtype st, const void *sp, bool write) {
    if (gl_dtype_is_float(dt) || gl_dtype_is_bool(dt)) {
        if (write) gl_dtype_store_double(dt, dp, gl_dtype_load_double(st, sp));
        return true;
    }
    if (gl_dtype_is_float(st)) {
        double x = gl_dtype_load_double(st, sp);
        if (!double_fits_int(dt, x)) return false;
        if (write) gl_dtype_store_bits(dt, dp, x >= 0x1p63 ? (int64_t)(uint64_t)x : (int64_t)x);
        return true;
    }
    int64_t v = gl_dtype_load_bits(st, sp);
    if (!int_fits(dt, v, st == GL_U64)) return false;
    if (write) gl_dtype_store_bits(dt, dp, v);
    return true;
}

/* Converting host copy of n elements: every value is checked before anything is written, so
 * a refused conversion leaves the destination as it was. */
static void convert_elements(lua_State *L, void *dp, gl_dtype dt, const void *sp, gl_dtype st,
                             size_t n, size_t first, const char *fn) {
    size_t de = gl_dtype_size(dt), se = gl_dtype_size(st);
    const unsigned char *s = sp;
    unsigned char *d = dp;
    bool can_fail = gl_dtype_is_integer(dt) && !gl_dtype_is_bool(st);
    for (size_t i = 0; can_fail && i < n; i++)
        if (!convert_one(dt, NULL, st, s + i * se, false))
            gl_error(L, "%s: source element %zu (%.17g) does not convert to %s exactly", fn, first + i + 1,
                     gl_dtype_load_double(st, s + i * se), gl_dtype_name(dt));
    for (size_t i = 0; i < n; i++) convert_one(dt, d + i * de, st, s + i * se, true);
}

/* Element ranges of a copy, from the options: checks dtypes, offsets and counts. */
typedef struct copy_plan {
    size_t dst_byte, src_byte, nbytes, count;
    bool convert; /* element-wise conversion (host to host only) */
} copy_plan;

static copy_plan plan_copy(lua_State *L, mem_ref dst, mem_ref src, const copy_opts *o, const char *fn) {
    gl_dtype dt = mem_dtype(dst), st = mem_dtype(src);
    size_t de = gl_dtype_size(dt), se = gl_dtype_size(st);
    size_t dn = mem_numel(dst), sn = mem_numel(src);
    copy_plan p = {0, 0, 0, 0, false};
    if (dt != st && !o->reinterpret && !o->convert)
        gl_argerror(L, 2, fn, "dtype mismatch (destination %s, source %s); pass {reinterpret=true} to copy "
                              "the bytes as they are, or {convert=true} to convert the values (host arrays)",
                    gl_dtype_name(dt), gl_dtype_name(st));
    p.convert = o->convert && dt != st;
    if (p.convert && (dst.dev || src.dev))
        gl_error(L, "%s: {convert=true} converts between host arrays only (destination %s %s, "
                    "source %s %s): convert into a host array, then copy that", fn,
                 dst.dev ? "cuda.array" : "cuda.host", gl_dtype_name(dt),
                 src.dev ? "cuda.array" : "cuda.host", gl_dtype_name(st));
    if ((size_t)o->dst_offset > dn || (size_t)o->src_offset > sn)
        gl_error(L, "%s: offset past the end (dst_offset %lld of %zu elements, src_offset %lld "
                    "of %zu elements)", fn, o->dst_offset, dn, o->src_offset, sn);
    size_t davail = dn - (size_t)o->dst_offset, savail = sn - (size_t)o->src_offset;
    p.dst_byte = (size_t)o->dst_offset * de;
    p.src_byte = (size_t)o->src_offset * se;
    bool by_bytes = o->reinterpret && dt != st;
    if (o->count < 0) {
        size_t dsize = by_bytes ? davail * de : davail, ssize = by_bytes ? savail * se : savail;
        if (dsize != ssize) {
            if (o->dst_offset == 0 && o->src_offset == 0)
                gl_argerror(L, 2, fn, "size mismatch (destination %zu bytes, source %zu bytes)",
                            davail * de, savail * se);
            gl_argerror(L, 2, fn, "size mismatch after the offsets (destination %zu elements of %s left, "
                                  "source %zu elements of %s)",
                        davail, gl_dtype_name(dt), savail, gl_dtype_name(st));
        }
        p.count = davail;
    } else {
        p.count = (size_t)o->count;
        if (p.count > davail || (!by_bytes && p.count > savail) ||
            (by_bytes && (p.count > SIZE_MAX / de || p.count * de > savail * se)))
            gl_error(L, "%s: count %lld does not fit (destination has %zu elements of %s after "
                        "dst_offset, source %zu elements of %s after src_offset)", fn, o->count,
                     davail, gl_dtype_name(dt), savail, gl_dtype_name(st));
    }
    p.nbytes = p.count * de;
    return p;
}

/* A 2-D copy's rows: pitches (default: the innermost dimension of a 2-D or higher array, else
 * the row length), and the last row must fit each array. */
typedef struct row_plan {
    size_t rows, dst_step, src_step; /* bytes between the starts of consecutive rows */
} row_plan;

static size_t default_pitch(mem_ref m, size_t count) {
    int ndim = m.dev ? m.dev->ndim : m.host->ndim;
    const int64_t *shape = m.dev ? m.dev->shape : m.host->shape;
    return ndim >= 2 ? (size_t)shape[ndim - 1] : count;
}

static row_plan plan_rows(lua_State *L, mem_ref dst, mem_ref src, const copy_opts *o,
                          const copy_plan *p, const char *fn) {
    row_plan r = {1, 0, 0};
    if (o->rows <= 0) return r;
    if (o->reinterpret && mem_dtype(dst) != mem_dtype(src))
        gl_error(L, "%s: a 2-D copy ({rows=}) between different dtypes converts only ({convert=true})", fn);
    size_t dp = o->dst_pitch ? (size_t)o->dst_pitch : default_pitch(dst, p->count);
    size_t sp = o->src_pitch ? (size_t)o->src_pitch : default_pitch(src, p->count);
    if (dp < p->count)
        gl_error(L, "%s: dst_pitch %zu is shorter than a row (count %zu): rows would overlap", fn,
                 dp, p->count);
    r.rows = (size_t)o->rows;
    const struct { size_t pitch, offset, numel; const char *name; } side[2] = {
        {dp, (size_t)o->dst_offset, mem_numel(dst), "destination"},
        {sp, (size_t)o->src_offset, mem_numel(src), "source"},
    };
    for (int i = 0; i < 2; i++) {
        size_t last;
        if (__builtin_mul_overflow(r.rows - 1, side[i].pitch, &last) ||
            __builtin_add_overflow(last, side[i].offset, &last) ||
            __builtin_add_overflow(last, p->count, &last) || last > side[i].numel)
            gl_error(L, "%s: %zu rows of %zu elements, %zu apart from offset %zu, do not fit the "
                        "%s (%zu elements)", fn, r.rows, p->count, side[i].pitch, side[i].offset,
                     side[i].name, side[i].numel);
    }
    r.dst_step = dp * gl_dtype_size(mem_dtype(dst));
    r.src_step = sp * gl_dtype_size(mem_dtype(src));
    return r;
}

/* One contiguous span of a copy: the driver call for it, or memmove / conversion on the host. */
static void copy_span(lua_State *L, mem_ref dst, mem_ref src, size_t dbyte, size_t sbyte,
                      const copy_plan *p, CUstream s, bool on_stream, const CUcontext *peer,
                      const char *fn) {
    size_t n = p->nbytes;
    if (peer) { /* arrays of two devices: peer[0] the destination's context, peer[1] the source's */
        CUdeviceptr d = dst.dev->ptr + dbyte, sp = src.dev->ptr + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyPeerAsync(d, peer[0], sp, peer[1], n, s), fn, "cuMemcpyPeerAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyPeer(d, peer[0], sp, peer[1], n), fn, "cuMemcpyPeer");
    } else if (dst.host && src.host) {
        unsigned char *d = (unsigned char *)dst.host->data + dbyte;
        const unsigned char *sp = (const unsigned char *)src.host->data + sbyte;
        if (p->convert)
            convert_elements(L, d, dst.host->dtype, sp, src.host->dtype, p->count,
                             sbyte / gl_dtype_size(src.host->dtype), fn);
        else if (n) memmove(d, sp, n);
    } else if (dst.dev && src.dev) {
        CUdeviceptr d = dst.dev->ptr + dbyte, sp = src.dev->ptr + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyDtoDAsync(d, sp, n, s), fn, "cuMemcpyDtoDAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyDtoD(d, sp, n), fn, "cuMemcpyDtoD");
    } else if (dst.dev) {
        CUdeviceptr d = dst.dev->ptr + dbyte;
        const void *sp = (const unsigned char *)src.host->data + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyHtoDAsync(d, sp, n, s), fn, "cuMemcpyHtoDAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyHtoD(d, sp, n), fn, "cuMemcpyHtoD");
    } else {
        void *d = (unsigned char *)dst.host->data + dbyte;
        CUdeviceptr sp = src.dev->ptr + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyDtoHAsync(d, sp, n, s), fn, "cuMemcpyDtoHAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyDtoH(d, sp, n), fn, "cuMemcpyDtoH");
    }
}

/* The copy itself: src (stack index 2) into dst (index 1). */
static void copy_mem(lua_State *L, const copy_opts *o, const char *fn) {
    bool on_stream = o->stream_idx != 0;
    bool any_dev = gl_testudata(L, 1, GL_ARRAY_T) || gl_testudata(L, 2, GL_ARRAY_T);
    if (any_dev) gl_require_gpu(L, fn);
    /* no Lua runs from here to the driver calls: the pointers stay valid */
    mem_ref dst = check_mem(L, 1, fn), src = check_mem(L, 2, fn);
    copy_plan p = plan_copy(L, dst, src, o, fn);
    row_plan rp = plan_rows(L, dst, src, o, &p, fn);
    bool host_only = dst.host && src.host;
    if (host_only && on_stream && o->stream_idx == 3)
        gl_argerror(L, 3, fn, "a host-to-host copy takes no stream");
    if (host_only && on_stream)
        gl_fielderror(L, 3, fn, "stream", "a host-to-host copy takes no stream");
    if (p.convert && rp.rows > 1) { /* check every row before writing any */
        for (size_t r = 0; r < rp.rows; r++) {
            const unsigned char *sp = (const unsigned char *)src.host->data + p.src_byte + r * rp.src_step;
            for (size_t i = 0; i < p.count; i++)
                if (!convert_one(dst.host->dtype, NULL, src.host->dtype, sp + i * gl_dtype_size(src.host->dtype), false))
                    gl_error(L, "%s: source element %zu (%.17g) does not convert to %s exactly", fn,
                             (p.src_byte + r * rp.src_step) / gl_dtype_size(src.host->dtype) + i + 1,
                             gl_dtype_load_double(src.host->dtype, sp + i * gl_dtype_size(src.host->dtype)),
                             gl_dtype_name(dst.host->dtype));
        }
    }
    CUcontext peer_ctx[2];
    bool peer = !host_only && gl_copy_devices(L, dst.dev, src.dev, fn);
    if (peer) {
        peer_ctx[0] = gl_device_context(L, dst.dev->device, fn);
        peer_ctx[1] = gl_device_context(L, src.dev->device, fn);
    }
    gl_stream_track *track = on_stream ? gl_opt_stream_track(L, o->stream_idx, fn) : gl_default_track();
    CUstream s = host_only ? NULL : gl_track_handle(track);
    if (p.nbytes == 0) return;
    long obs = !host_only && gl_observers ? gl_observe_begin(s, true) : -1; /* cuda.trace */
    for (size_t r = 0; r < rp.rows; r++)
        copy_span(L, dst, src, p.dst_byte + r * rp.dst_step, p.src_byte + r * rp.src_step, &p, s,
                  on_stream, peer ? peer_ctx : NULL, fn);
    if (obs >= 0)
        gl_observe_copy(obs, peer ? "copy peer" : dst.dev && src.dev ? "copy DtoD" : dst.dev ? "copy HtoD" : "copy DtoH",
                        p.nbytes * rp.rows, s);
    if (host_only) return;
    mark_copy_uses(dst, src, track, on_stream);
    gl_capture_note(L, 1);
    gl_capture_note(L, 2);
}

/* ------------------------------------------------------------------------------------------
 * Device arrays
 * ------------------------------------------------------------------------------------------ */
static gl_array *check_self_array(lua_State *L, const char *fn) {
    gl_array *a = gl_testudata(L, 1, GL_ARRAY_T);
    if (a == NULL) gl_typeerror(L, 1, fn, "cuda.array");
    if (a->ptr == 0) gl_freederror(L, 1, fn, "cuda.array was freed");
    return a;
}

static int l_array(lua_State *L) {
    const char *fn = "cuda.array";
    gl_dtype t = check_dtype(L, 1, fn);
    shape_spec s;
    check_shape(L, 2, t, &s, fn);
    gl_require_gpu(L, fn);
    gl_array *a = gl_newuserdatauv(L, sizeof *a, 0);
    memset(a, 0, sizeof *a);
    a->dtype = t;
    a->ndim = s.ndim;
    memcpy(a->shape, s.dims, sizeof s.dims);
    a->numel = s.numel;
    a->nbytes = s.nbytes;
    a->device = gl_current_device();
    gl_setmetatable(L, GL_ARRAY_T);
    gl_mem_block *b = block_new(BLOCK_DEVICE, s.nbytes);
    if (b == NULL) gl_error(L, "%s: out of host memory", fn);
    b->device = a->device;
    CUresult r = gl_cu.cuMemAlloc(&b->dev, s.nbytes);
    if (r != CUDA_SUCCESS) {
        free(b);
        gl_raise_cuda(L, r, fn, "cuMemAlloc");
    }
    a->block = b;
    a->ptr = b->dev;
    gl_live.arrays++;
    gl_live.device_bytes += (long long)s.nbytes;
    return 1;
}

gl_array *gl_push_array_view(lua_State *L, int dtype_idx, int shape_idx, const char *fn,
                             CUdeviceptr ptr, size_t limit, const char *what,
                             void (*release_view)(gl_array *, void *), void *owner) {
    gl_dtype t = check_dtype(L, dtype_idx, fn);
    shape_spec s;
    check_shape(L, shape_idx, t, &s, fn);
    if (s.nbytes > limit) {
        char type[160];
        format_type(type, sizeof type, t, s.ndim, s.dims);
        gl_error(L, "%s: %s needs %zu bytes, but '%s' holds %zu bytes", fn, type, s.nbytes, what,
                 limit);
    }
    gl_array *a = gl_newuserdatauv(L, sizeof *a, 1);
    memset(a, 0, sizeof *a);
    a->dtype = t;
    a->ndim = s.ndim;
    memcpy(a->shape, s.dims, sizeof s.dims);
    a->numel = s.numel;
    a->nbytes = s.nbytes;
    a->ptr = ptr;
    a->release_view = release_view;
    a->view_owner = owner;
    gl_setmetatable(L, GL_ARRAY_T);
    return a;
}

/* d:fill(v[, stream]): memset for 1/2/4-byte patterns (and 8-byte ones whose halves agree),
 * otherwise a copy from a filled host staging buffer. The staging buffer is pageable, so the
 * driver has taken its bytes when the copy call returns and it can be freed at once; that also
 * means it cannot be captured into a graph, whose replays would read the freed buffer. */
static int array_fill(lua_State *L) {
    const char *fn = "d:fill";
    gl_array *a = check_self_array(L, fn);
    unsigned char elem[8] = {0};
    check_value(L, 2, a->dtype, elem, fn, NULL);
    bool on_stream = !lua_isnoneornil(L, 3);
    gl_stream_track *track = gl_opt_stream_track(L, 3, fn);
    gl_require_gpu(L, fn);
    gl_check_array_device(L, a, fn, 1);
    CUstream s = gl_track_handle(track);
    size_t esize = gl_dtype_size(a->dtype);
    uint32_t lo, hi;
    memcpy(&lo, elem, 4);
    memcpy(&hi, elem + 4, 4);
    long obs = gl_observers ? gl_observe_begin(s, true) : -1; /* cuda.trace */
    if (esize == 1) {
        if (on_stream) GL_CHECK(L, gl_cu.cuMemsetD8Async(a->ptr, elem[0], a->numel, s), fn, "cuMemsetD8Async");
        else GL_CHECK(L, gl_cu.cuMemsetD8(a->ptr, elem[0], a->numel), fn, "cuMemsetD8");
    } else if (esize == 2) {
        uint16_t v;
        memcpy(&v, elem, 2);
        if (on_stream) GL_CHECK(L, gl_cu.cuMemsetD16Async(a->ptr, v, a->numel, s), fn, "cuMemsetD16Async");
        else GL_CHECK(L, gl_cu.cuMemsetD16(a->ptr, v, a->numel), fn, "cuMemsetD16");
    } else if (esize == 4 || lo == hi) {
        size_t words = a->numel * (esize / 4);
        if (on_stream) GL_CHECK(L, gl_cu.cuMemsetD32Async(a->ptr, lo, words, s), fn, "cuMemsetD32Async");
        else GL_CHECK(L, gl_cu.cuMemsetD32(a->ptr, lo, words), fn, "cuMemsetD32");
    } else {
        if (gl_capture_active())
            gl_error(L, "%s: this %s value needs a host staging copy, which a graph capture "
                        "cannot hold (use a kernel to fill inside a capture)", fn, gl_dtype_name(a->dtype));
        void *stage = malloc(a->nbytes);
        if (stage == NULL) gl_error(L, "%s: cannot allocate %zu bytes of host staging memory", fn, a->nbytes);
        fill_pattern(stage, a->numel, esize, elem);
        CUresult r = on_stream ? gl_cu.cuMemcpyHtoDAsync(a->ptr, stage, a->nbytes, s)
                               : gl_cu.cuMemcpyHtoD(a->ptr, stage, a->nbytes);
        free(stage);
        GL_CHECK(L, r, fn, on_stream ? "cuMemcpyHtoDAsync" : "cuMemcpyHtoD");
    }
    if (obs >= 0) gl_observe_copy(obs, "memset", a->nbytes, s);
    gl_use_mark(&a->use, on_stream ? track : gl_default_track(), gl_next_seq());
    gl_capture_note(L, 1);
    lua_settop(L, 1);
    return 1;
}

static int array_copy_from(lua_State *L) {
    const char *fn = "d:copy_from";
    check_self_array(L, fn);
    copy_opts o;
    read_copy_opts(L, 3, &o, fn);
    copy_mem(L, &o, fn);
    lua_settop(L, 1);
    return 1;
}

static int array_tostring(lua_State *L) {
    gl_array *a = gl_checkudata(L, 1, GL_ARRAY_T);
    char type[160], size[32];
    format_type(type, sizeof type, a->dtype, a->ndim, a->shape);
    if (a->ptr == 0) {
        lua_pushfstring(L, "cuda.array %s (freed)", type);
        return 1;
    }
    format_bytes(size, sizeof size, a->nbytes);
    char addr[32];
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)a->ptr);
    bool is_view = a->block && a->ptr != a->block->dev;
    lua_pushfstring(L, "cuda.array %s%s (%s) %s", type, is_view ? " view" : "", size, addr);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Views: x:view(first, count | {dims}) is elements first .. first+numel-1 of x (1-based) as a
 * new array of that shape. It shares x's memory (gl_mem_block), keeps x alive through its user
 * value, and keeps the memory alive even after x:free(): each of them holds a reference.
 * ------------------------------------------------------------------------------------------ */
static size_t check_view_args(lua_State *L, size_t parent_numel, gl_dtype t, shape_spec *s,
                              const char *fn) {
    if (lua_type(L, 2) != LUA_TNUMBER || !lua_isinteger(L, 2))
        gl_argerror(L, 2, fn, "first element must be an integer, got %s",
                    lua_type(L, 2) == LUA_TNUMBER ? lua_tostring(L, 2) : gl_typename(L, 2));
    lua_Integer first = lua_tointeger(L, 2);
    if (first < 1 || (uint64_t)first > parent_numel)
        gl_argerror(L, 2, fn, "first element %lld out of range 1..%zu", first, parent_numel);
    size_t off = (size_t)(first - 1);
    if (lua_isnoneornil(L, 3)) { /* to the end */
        lua_settop(L, 2);
        lua_pushinteger(L, (lua_Integer)(parent_numel - off));
    }
    check_shape(L, 3, t, s, fn);
    if (s->numel > parent_numel - off)
        gl_error(L, "%s: elements %lld..%lld are past the end (the array has %zu)", fn, first,
                 first - 1 + (lua_Integer)s->numel, parent_numel);
    return off;
}

static void set_view_shape(int *ndim, int64_t *shape, size_t *numel, size_t *nbytes, const shape_spec *s) {
    *ndim = s->ndim;
    memcpy(shape, s->dims, sizeof s->dims);
    *numel = s->numel;
    *nbytes = s->nbytes;
}

static int array_view(lua_State *L) {
    const char *fn = "d:view";
    gl_array *a = check_self_array(L, fn);
    shape_spec s;
    size_t off = check_view_args(L, a->numel, a->dtype, &s, fn);
    gl_array *v = gl_newuserdatauv(L, sizeof *v, 1);
    memset(v, 0, sizeof *v);
    a = check_self_array(L, fn); /* the allocation may have run a finalizer that freed it */
    v->dtype = a->dtype;
    set_view_shape(&v->ndim, v->shape, &v->numel, &v->nbytes, &s);
    v->ptr = a->ptr + off * gl_dtype_size(a->dtype);
    v->device = a->device;
    v->block = a->block;
    if (v->block) block_hold(v->block);
    if (a->release_view) { /* a view of memory another object owns (a module variable): the owner
                              counts this view too, so freeing the parent view cannot release it */
        v->release_view = a->release_view;
        v->retain_view = a->retain_view;
        v->view_owner = a->view_owner;
        if (v->retain_view) v->retain_view(v->view_owner);
    } else {
        gl_live.arrays++;
    }
    gl_setmetatable(L, GL_ARRAY_T);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static const luaL_Reg array_methods[] = {
    {"fill", array_fill}, {"copy_from", array_copy_from}, {"view", array_view},
    {"free", array_free}, {NULL, NULL},
};

static bool push_method(lua_State *L, const luaL_Reg *methods, const char *k) {
    for (const luaL_Reg *m = methods; m->name; m++)
        if (strcmp(m->name, k) == 0) {
            lua_pushcfunction(L, m->func);
            return true;
        }
    return false;
}

/* Fields common to both kinds: dtype, shape, numel, nbytes, ndim. */
static bool push_common_field(lua_State *L, const char *k, gl_dtype t, int ndim, const int64_t *dims,
                              size_t numel, size_t nbytes) {
    if (strcmp(k, "dtype") == 0) lua_pushstring(L, gl_dtype_name(t));
    else if (strcmp(k, "shape") == 0) push_shape(L, ndim, dims);
    else if (strcmp(k, "numel") == 0) lua_pushinteger(L, (lua_Integer)numel);
    else if (strcmp(k, "nbytes") == 0) lua_pushinteger(L, (lua_Integer)nbytes);
    else if (strcmp(k, "ndim") == 0) lua_pushinteger(L, ndim);
    else return false;
    return true;
}

static int array_index(lua_State *L) {
    gl_array *a = gl_checkudata(L, 1, GL_ARRAY_T);
    if (lua_type(L, 2) != LUA_TSTRING) return 0; /* device memory has no d[i]: copy to a host array */
    const char *k = lua_tostring(L, 2);
    if (push_method(L, array_methods, k)) return 1;
    if (a->ptr == 0) gl_error(L, "cuda.array: field '%s': cuda.array was freed", k);
    if (push_common_field(L, k, a->dtype, a->ndim, a->shape, a->numel, a->nbytes)) return 1;
    if (strcmp(k, "ptr") == 0) {
        lua_pushinteger(L, (lua_Integer)a->ptr);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Host arrays
 * ------------------------------------------------------------------------------------------ */
static gl_host *check_self_host(lua_State *L, const char *fn) {
    gl_host *h = gl_testudata(L, 1, GL_HOST_T);
    if (h == NULL) gl_typeerror(L, 1, fn, "cuda.host");
    if (h->data == NULL) gl_freederror(L, 1, fn, "cuda.host was freed");
    return h;
}

static void *alloc_pageable(size_t nbytes) {
    size_t rounded = (nbytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    if (rounded < nbytes) return NULL;
    void *p = aligned_alloc(HOST_ALIGN, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

/* Bytes of physical memory, or 0 when unknown. */
static unsigned long long physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
}

static int l_host(lua_State *L) {
    const char *fn = "cuda.host";
    gl_dtype t = check_dtype(L, 1, fn);
    shape_spec s;
    check_shape(L, 2, t, &s, fn);
    bool pinned = false;
    if (!lua_isnoneornil(L, 3)) {
        if (!lua_istable(L, 3)) gl_typeerror(L, 3, fn, "table");
        static const char *const known[] = {"pinned", NULL};
        gl_check_known_fields(L, 3, known, fn);
        pinned = raw_opt_bool(L, 3, "pinned", false, fn);
    }
    if (pinned) gl_require_gpu(L, fn);
    gl_host *h = gl_newuserdatauv(L, sizeof *h, 0);
    memset(h, 0, sizeof *h);
    h->dtype = t;
    h->ndim = s.ndim;
    memcpy(h->shape, s.dims, sizeof s.dims);
    h->numel = s.numel;
    h->nbytes = s.nbytes;
    h->pinned = pinned;
    gl_setmetatable(L, GL_HOST_T);
    gl_mem_block *b = block_new(pinned ? BLOCK_PINNED : BLOCK_PAGEABLE, s.nbytes);
    if (b == NULL) gl_error(L, "%s: out of host memory", fn);
    if (pinned) {
        CUresult r = gl_cu.cuMemAllocHost(&b->host, s.nbytes);
        if (r != CUDA_SUCCESS) {
            free(b);
            gl_raise_cuda(L, r, fn, "cuMemAllocHost");
        }
        memset(b->host, 0, s.nbytes);
        gl_live.pinned_bytes += (long long)s.nbytes;
    } else {
        /* With overcommit a huge malloc can succeed and the zeroing then gets the process
         * killed, so sizes beyond the machine's memory are refused up front. */
        unsigned long long phys = physical_memory();
        b->host = phys && s.nbytes > phys ? NULL : alloc_pageable(s.nbytes);
        if (b->host == NULL) {
            free(b);
            if (phys && s.nbytes > phys)
                gl_error(L, "%s: cannot allocate %zu bytes (this machine has %llu bytes of memory)",
                         fn, s.nbytes, phys);
            gl_error(L, "%s: cannot allocate %zu bytes of host memory", fn, s.nbytes);
        }
    }
    h->block = b;
    h->data = b->host;
    gl_live.hosts++;
    return 1;
}

/* The element index at idx as a 0-based offset; raises for non-integers and out of range. */
static size_t check_index(lua_State *L, gl_host *h, int idx, const char *fn) {
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER)
        gl_error(L, "%s: index must be an integer, got %s", fn,
                  lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : gl_typename(L, idx));
    if (i < 1 || (uint64_t)i > h->numel)
        gl_error(L, "%s: index %lld out of range 1..%lld", fn, i, (lua_Integer)h->numel);
    return (size_t)(i - 1);
}

static void *element_ptr(gl_host *h, size_t i) {
    return (unsigned char *)h->data + i * gl_dtype_size(h->dtype);
}

static int host_fill(lua_State *L) {
    const char *fn = "h:fill";
    gl_host *h = check_self_host(L, fn);
    unsigned char elem[8];
    check_value(L, 2, h->dtype, elem, fn, NULL);
    fill_pattern(h->data, h->numel, gl_dtype_size(h->dtype), elem);
    lua_settop(L, 1);
    return 1;
}

/* An optional number argument; strings are refused rather than converted. */
static double opt_strict_number(lua_State *L, int idx, double def, const char *fn) {
    if (lua_isnoneornil(L, idx)) return def;
    if (lua_type(L, idx) != LUA_TNUMBER)
        gl_typeerror(L, idx, fn, "number");
    return lua_tonumber(L, idx);
}

/* h:iota([start[, step]]): h[i] = start + (i-1)*step (defaults 0 and 1). Integer dtypes need
 * integer start and step, and every value must fit the dtype (checked at both ends, since the
 * sequence is monotonic). Float dtypes compute each value in double, then round once. */
static int host_iota(lua_State *L) {
    const char *fn = "h:iota";
    gl_host *h = check_self_host(L, fn);
    if (gl_dtype_is_bool(h->dtype)) gl_error(L, "%s: a bool array has no sequence (use fill or random)", fn);
    size_t esize = gl_dtype_size(h->dtype);
    if (gl_dtype_is_float(h->dtype)) {
        double start = opt_strict_number(L, 2, 0, fn), step = opt_strict_number(L, 3, 1, fn);
        if (isnan(start) || isnan(step)) gl_argerror(L, isnan(start) ? 2 : 3, fn, "number expected, got NaN");
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_double(h->dtype, element_ptr(h, i), start + (double)i * step);
    } else {
        opt_strict_number(L, 2, 0, fn); /* type checks: numbers only, no string coercion */
        opt_strict_number(L, 3, 1, fn);
        lua_Integer start = luaL_optinteger(L, 2, 0), step = luaL_optinteger(L, 3, 1);
        lua_Integer last;
        if (__builtin_mul_overflow(step, (lua_Integer)(h->numel - 1), &last) ||
            __builtin_add_overflow(last, start, &last))
            gl_error(L, "%s: the sequence overflows 64-bit integers", fn);
        unsigned char tmp[8];
        char msg[160];
        for (int end = 0; end < 2; end++) {
            lua_pushinteger(L, end ? last : start);
            const char *bad = encode_value(L, -1, h->dtype, tmp, msg, sizeof msg);
            lua_pop(L, 1);
            if (bad) gl_error(L, "%s: %s value %s", fn, end ? "last" : "first", bad);
        }
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_bits(h->dtype, (unsigned char *)h->data + i * esize,
                                (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step));
    }
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * The random generator of h:random{seed=, lo=, hi=}, fixed so results are reproducible:
 *   state: four 64-bit words s[0..3] = four successive outputs of splitmix64 started at `seed`
 *          (splitmix64: x += 0x9E3779B97F4A7C15; z = x; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *           z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31))
 *   next:  xoshiro256** (Blackman & Vigna): result = rotl(s[1] * 5, 7) * 9; t = s[1] << 17;
 *          s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)
 *   u:     (next >> 11) * 2^-53, uniform in [0, 1)
 *   value: float dtypes lo + (hi - lo) * u computed in double, then rounded to the dtype
 *          (so f16/bf16/f32 may round up to hi); integer dtypes lo + floor((hi - lo) * u),
 *          an integer in [lo, hi). One draw per element, in index order.
 * Defaults: seed 0, lo 0, hi 1 (float dtypes) or 100 (integer dtypes). Integer bounds are Lua
 * integers, so u64 values drawn this way stay below 2^63.
 * ------------------------------------------------------------------------------------------ */
typedef struct rng { uint64_t s[4]; } rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static void rng_seed(rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

typedef struct random_opts {
    uint64_t seed;
    bool has_lo, has_hi;
    double lo_f, hi_f, p;
    lua_Integer lo_i, hi_i;
} random_opts;

/* Reads the options raw and before the data pointer is taken; the dtype picks the kinds. */
static void read_random_opts(lua_State *L, gl_dtype t, random_opts *o, const char *fn) {
    static const char *const known[] = {"seed", "lo", "hi", "p", NULL};
    if (!lua_isnoneornil(L, 2)) {
        if (!lua_istable(L, 2)) gl_typeerror(L, 2, fn, "table");
        gl_check_known_fields(L, 2, known, fn);
    } else {
        lua_settop(L, 1);
        lua_newtable(L);
    }
    o->seed = (uint64_t)raw_opt_int(L, 2, "seed", 0, fn);
    o->has_lo = raw_field(L, 2, "lo") != LUA_TNIL;
    o->has_hi = raw_field(L, 2, "hi") != LUA_TNIL;
    bool has_p = raw_field(L, 2, "p") != LUA_TNIL;
    lua_pop(L, 3);
    if (gl_dtype_is_bool(t)) {
        if (o->has_lo || o->has_hi)
            gl_fielderror(L, 2, fn, o->has_lo ? "lo"
                          : "hi", "a bool array takes {p=} (the chance of true), not lo/hi");
        o->p = raw_opt_num(L, 2, "p", 0.5, fn);
        if (!(o->p >= 0 && o->p <= 1)) gl_fielderror(L, 2, fn, "p", "must be 0 <= p <= 1, got %g", o->p);
        return;
    }
    if (has_p) gl_fielderror(L, 2, fn, "p", "is for bool arrays (this one is %s)", gl_dtype_name(t));
    if (gl_dtype_is_float(t)) {
        o->lo_f = raw_opt_num(L, 2, "lo", 0, fn);
        o->hi_f = raw_opt_num(L, 2, "hi", 1, fn);
    } else {
        o->lo_i = raw_opt_int(L, 2, "lo", 0, fn);
        o->hi_i = raw_opt_int(L, 2, "hi", 100, fn);
    }
}

static int host_random(lua_State *L) {
    const char *fn = "h:random";
    gl_dtype t = check_self_host(L, fn)->dtype;
    random_opts o = {0, false, false, 0, 1, 0.5, 0, 100};
    read_random_opts(L, t, &o, fn);
    gl_host *h = check_self_host(L, fn); /* the options were read: nothing runs Lua from here */
    rng r;
    rng_seed(&r, o.seed);
    if (gl_dtype_is_bool(h->dtype)) {
        unsigned char *p = h->data;
        for (size_t i = 0; i < h->numel; i++) p[i] = rng_uniform(&r) < o.p;
    } else if (gl_dtype_is_float(h->dtype)) {
        double lo = o.lo_f, hi = o.hi_f;
        if (!(lo < hi) || !isfinite(hi - lo))
            gl_argerror(L, 2, fn, "need finite lo < hi, got lo=%g hi=%g", lo, hi);
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_double(h->dtype, element_ptr(h, i), lo + (hi - lo) * rng_uniform(&r));
    } else {
        lua_Integer lo = o.lo_i, hi = o.hi_i;
        if (lo >= hi) gl_argerror(L, 2, fn, "need lo < hi, got lo=%lld hi=%lld",
                                  (long long)lo, (long long)hi);
        int64_t min;
        uint64_t umax;
        gl_dtype_int_range(h->dtype, &min, &umax);
        bool lo_ok = int_fits(h->dtype, lo, false);
        if (!lo_ok || !int_fits(h->dtype, hi - 1, false))
            gl_fielderror(L, 2, fn, lo_ok ? "hi" : "lo", "%s %lld is out of range for %s (%lld..%llu)",
                          lo_ok ? "hi-1" : "lo", (long long)(lo_ok ? hi - 1 : lo), gl_dtype_name(h->dtype),
                          (long long)min, (unsigned long long)umax);
        uint64_t span = (uint64_t)hi - (uint64_t)lo;
        for (size_t i = 0; i < h->numel; i++) {
            uint64_t off = (uint64_t)floor((double)span * rng_uniform(&r));
            if (off >= span) off = span - 1; /* (double)span may round up past span */
            gl_dtype_store_bits(h->dtype, element_ptr(h, i), (int64_t)((uint64_t)lo + off));
        }
    }
    lua_settop(L, 1);
    return 1;
}

static int host_totable(lua_State *L) {
    gl_host *h = check_self_host(L, "h:totable");
    if (h->numel > INT32_MAX) gl_error(L, "h:totable: %zu elements do not fit a Lua table", h->numel);
    size_t n = h->numel;
    lua_createtable(L, (int)n, 0); /* may run a finalizer that frees h: check it again */
    h = check_self_host(L, "h:totable");
    for (size_t i = 0; i < n && i < h->numel; i++) {
        push_element(L, h->dtype, element_ptr(h, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int host_copy_from(lua_State *L) {
    const char *fn = "h:copy_from";
    check_self_host(L, fn);
    copy_opts o;
    read_copy_opts(L, 3, &o, fn);
    copy_mem(L, &o, fn);
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Host views (see d:view above)
 * ------------------------------------------------------------------------------------------ */
static int host_view(lua_State *L) {
    const char *fn = "h:view";
    gl_host *h = check_self_host(L, fn);
    shape_spec s;
    size_t off = check_view_args(L, h->numel, h->dtype, &s, fn);
    gl_host *v = gl_newuserdatauv(L, sizeof *v, 1);
    memset(v, 0, sizeof *v);
    h = check_self_host(L, fn); /* the allocation may have run a finalizer that freed it */
    v->dtype = h->dtype;
    set_view_shape(&v->ndim, v->shape, &v->numel, &v->nbytes, &s);
    v->data = (unsigned char *)h->data + off * gl_dtype_size(h->dtype);
    v->pinned = h->pinned;
    v->block = h->block;
    block_hold(v->block);
    gl_live.hosts++;
    gl_setmetatable(L, GL_HOST_T);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* A new zeroed pageable host array on the stack top (for results). */
static gl_host *push_new_host(lua_State *L, gl_dtype t, int ndim, const int64_t *dims, const char *fn) {
    shape_spec s = {ndim, {0}, 1, 0, t};
    memcpy(s.dims, dims, (size_t)ndim * sizeof *dims);
    for (int i = 0; i < ndim; i++) s.numel *= (size_t)dims[i];
    s.nbytes = s.numel * gl_dtype_size(t);
    gl_host *h = gl_newuserdatauv(L, sizeof *h, 0);
    memset(h, 0, sizeof *h);
    h->dtype = t;
    set_view_shape(&h->ndim, h->shape, &h->numel, &h->nbytes, &s);
    gl_mem_block *b = block_new(BLOCK_PAGEABLE, s.nbytes);
    if (b == NULL || (b->host = alloc_pageable(s.nbytes)) == NULL) {
        free(b);
        gl_error(L, "%s: cannot allocate %zu bytes of host memory for the result", fn, s.nbytes);
    }
    h->block = b;
    h->data = b->host;
    gl_live.hosts++;
    gl_setmetatable(L, GL_HOST_T);
    return h;
}

/* Whether two host arrays share bytes. */
static bool host_overlap(const gl_host *a, const gl_host *b) {
    const unsigned char *p = a->data, *q = b->data;
    return a->block == b->block && p < q + b->nbytes && q < p + a->nbytes;
}

/* ------------------------------------------------------------------------------------------
 * Transpose: h:transpose([dst]) with h of shape {rows, cols} writes dst (default: a new host
 * array of shape {cols, rows}) with dst[c][r] = h[r][c]. 64x64 tiles keep both sides in cache;
 * inside a tile the stores run along a destination row (measured 0.14 s against 0.28 s for
 * 32x32 tiles stored along the source row, 8192x8192 f32).
 * ------------------------------------------------------------------------------------------ */
#define TILE 64
#define TRANSPOSE_LOOP(type)                                                                    \
    do {                                                                                        \
        const type *s_ = src;                                                                   \
        type *d_ = dst;                                                                         \
        for (size_t r0 = 0; r0 < rows; r0 += TILE)                                              \
            for (size_t c0 = 0; c0 < cols; c0 += TILE) {                                        \
                size_t r1 = r0 + TILE < rows ? r0 + TILE : rows;                                \
                size_t c1 = c0 + TILE < cols ? c0 + TILE : cols;                                \
                for (size_t c = c0; c < c1; c++)                                                \
                    for (size_t r = r0; r < r1; r++) d_[c * rows + r] = s_[r * cols + c];       \
            }                                                                                   \
    } while (0)

static void transpose_bytes(void *dst, const void *src, size_t rows, size_t cols, size_t esize) {
    switch (esize) {
    case 1: TRANSPOSE_LOOP(uint8_t); break;
    case 2: TRANSPOSE_LOOP(uint16_t); break;
    case 4: TRANSPOSE_LOOP(uint32_t); break;
    default: TRANSPOSE_LOOP(uint64_t); break;
    }
}
#undef TRANSPOSE_LOOP

static int host_transpose(lua_State *L) {
    const char *fn = "h:transpose";
    gl_host *h = check_self_host(L, fn);
    if (h->ndim != 2)
        gl_error(L, "%s: needs a 2-D array {rows, cols}, got %d dimensions (h:view(1, {rows, "
                    "cols}) gives one)", fn, h->ndim);
    int64_t out_shape[2] = {h->shape[1], h->shape[0]};
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        push_new_host(L, h->dtype, 2, out_shape, fn);
        h = check_self_host(L, fn); /* the allocation may have run a finalizer */
    }
    gl_host *d = gl_check_host(L, 2, fn);
    if (d->dtype != h->dtype)
        gl_argerror(L, 2, fn, "dtype mismatch (destination %s, source %s)",
                    gl_dtype_name(d->dtype), gl_dtype_name(h->dtype));
    if (d->numel != h->numel || (d->ndim == 2 && (d->shape[0] != out_shape[0] || d->shape[1] != out_shape[1])))
        gl_argerror(L, 2, fn, "the result is %lldx%lld (%zu elements), the destination holds %zu",
                    (long long)out_shape[0], (long long)out_shape[1], h->numel, d->numel);
    if (host_overlap(d, h)) gl_error(L, "%s: the destination overlaps the source", fn);
    transpose_bytes(d->data, h->data, (size_t)h->shape[0], (size_t)h->shape[1], gl_dtype_size(h->dtype));
    lua_settop(L, 2);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Element-wise arithmetic, in place: h:add(x), h:sub(x), h:mul(x), h:div(x), h:scale(a),
 * h:axpy(a, x) (h = a*x + h). x is a number or a host array of the same element count (any
 * dtype). Float destinations compute in double and round once to their dtype. Integer
 * destinations take integer operands only and wrap around like the GPU's integer units;
 * division truncates toward zero and a zero divisor is refused before anything is written.
 * Bool arrays take no arithmetic.
 * ------------------------------------------------------------------------------------------ */
typedef enum arith_op { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_AXPY } arith_op;

typedef struct operand {
    bool scalar;
    double f;            /* scalar value as a double */
    __int128 i;          /* scalar value as an integer (integer destinations) */
    const void *data;    /* array operand */
    void *copy;          /* a private copy when it overlapped the destination */
    gl_dtype dtype;
} operand;

static double apply_f(arith_op op, double h, double x, double a) {
    switch (op) {
    case OP_ADD: return h + x;
    case OP_SUB: return h - x;
    case OP_MUL: return h * x;
    case OP_DIV: return h / x;
    default: return a * x + h;
    }
}

static __int128 apply_i(arith_op op, __int128 h, __int128 x, __int128 a) {
    unsigned __int128 uh = (unsigned __int128)h, ux = (unsigned __int128)x, ua = (unsigned __int128)a;
    switch (op) { /* unsigned arithmetic: wraps instead of overflowing */
    case OP_ADD: return (__int128)(uh + ux);
    case OP_SUB: return (__int128)(uh - ux);
    case OP_MUL: return (__int128)(uh * ux);
    case OP_DIV: return h / x;
    default: return (__int128)(ua * ux + uh);
    }
}

/* An element of an integer (or bool) dtype as its exact value. */
static __int128 load_int(gl_dtype t, const void *p) {
    int64_t v = gl_dtype_load_bits(t, p);
    return t == GL_U64 ? (__int128)(uint64_t)v : (__int128)v;
}

/* The scalar at idx for destination dtype t. */
static void check_scalar(lua_State *L, int idx, gl_dtype t, operand *o, const char *fn, const char *what) {
    if (lua_type(L, idx) != LUA_TNUMBER)
        gl_argerror(L, idx, fn, "%s: number or cuda.host expected, got %s", what, gl_typename(L, idx));
    o->scalar = true;
    o->f = lua_tonumber(L, idx);
    if (gl_dtype_is_float(t)) return;
    if (lua_isinteger(L, idx)) {
        o->i = lua_tointeger(L, idx);
    } else if (isfinite(o->f) && floor(o->f) == o->f && fabs(o->f) < 0x1p63) {
        o->i = (__int128)o->f;
    } else {
        gl_argerror(L, idx, fn, "%s must be an integer for a %s array, got %.17g",
                    what, gl_dtype_name(t), o->f);
    }
}

/* The operand at idx (number or host array) for destination h. Takes no Lua allocation, so
 * h stays valid; the private copy (for a partial overlap) is the caller's to free. */
static bool check_operand(lua_State *L, int idx, gl_host *h, operand *o, const char *fn) {
    memset(o, 0, sizeof *o);
    if (!gl_testudata(L, idx, GL_HOST_T)) {
        check_scalar(L, idx, h->dtype, o, fn, "the operand");
        return true;
    }
    gl_host *x = gl_check_host(L, idx, fn);
    if (x->numel != h->numel)
        gl_argerror(L, idx, fn, "element counts differ (destination %zu, operand %zu)", h->numel, x->numel);
    if (!gl_dtype_is_float(h->dtype) && gl_dtype_is_float(x->dtype))
        gl_argerror(L, idx, fn, "a %s destination takes integer operands, got %s (convert first: "
                                "copy_from(x, {convert=true}))", gl_dtype_name(h->dtype), gl_dtype_name(x->dtype));
    if (gl_dtype_is_bool(x->dtype)) gl_argerror(L, idx, fn, "a bool array takes no arithmetic");
    o->dtype = x->dtype;
    o->data = x->data;
    if (host_overlap(h, x) && x->data != h->data) { /* a shifted view: read the old values */
        o->copy = malloc(x->nbytes);
        if (o->copy == NULL) return false;
        memcpy(o->copy, x->data, x->nbytes);
        o->data = o->copy;
    }
    return true;
}

static double operand_f(const operand *o, size_t i) {
    return o->scalar ? o->f
                     : gl_dtype_load_double(o->dtype, (const unsigned char *)o->data + i * gl_dtype_size(o->dtype));
}

static __int128 operand_i(const operand *o, size_t i) {
    return o->scalar ? o->i : load_int(o->dtype, (const unsigned char *)o->data + i * gl_dtype_size(o->dtype));
}

/* The same-dtype f32 and f64 cases, without a per-element dtype switch. */
#define ARITH_FAST(type)                                                                        \
    do {                                                                                        \
        type *d_ = h->data;                                                                     \
        const type *x_ = x->data;                                                               \
        for (size_t i = 0; i < n; i++)                                                          \
            d_[i] = (type)apply_f(op, (double)d_[i], x->scalar ? x->f : (double)x_[i], a);      \
    } while (0)

static void arith_float(gl_host *h, arith_op op, const operand *x, double a) {
    size_t n = h->numel, es = gl_dtype_size(h->dtype);
    bool same = x->scalar || x->dtype == h->dtype;
    if (same && h->dtype == GL_F32) ARITH_FAST(float);
    else if (same && h->dtype == GL_F64) ARITH_FAST(double);
    else
        for (size_t i = 0; i < n; i++) {
            unsigned char *p = (unsigned char *)h->data + i * es;
            gl_dtype_store_double(h->dtype, p, apply_f(op, gl_dtype_load_double(h->dtype, p), operand_f(x, i), a));
        }
}
#undef ARITH_FAST

static void arith_int(gl_host *h, arith_op op, const operand *x, __int128 a) {
    size_t n = h->numel, es = gl_dtype_size(h->dtype);
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = (unsigned char *)h->data + i * es;
        __int128 r = apply_i(op, load_int(h->dtype, p), operand_i(x, i), a);
        gl_dtype_store_bits(h->dtype, p, (int64_t)(uint64_t)(unsigned __int128)r);
    }
}

/* h op= operand at x_idx; for OP_AXPY the scalar a is at a_idx. */
static int host_arith(lua_State *L, arith_op op, int a_idx, int x_idx, const char *fn) {
    gl_host *h = check_self_host(L, fn);
    if (gl_dtype_is_bool(h->dtype)) gl_error(L, "%s: a bool array takes no arithmetic", fn);
    operand alpha = {0};
    if (a_idx) check_scalar(L, a_idx, h->dtype, &alpha, fn, "the scale factor");
    operand x;
    if (!check_operand(L, x_idx, h, &x, fn))
        gl_error(L, "%s: cannot allocate host memory for a copy of the operand", fn);
    if (op == OP_DIV && !gl_dtype_is_float(h->dtype)) { /* refuse before writing anything */
        size_t zero = 0;
        for (size_t i = 0; i < h->numel && !zero; i++)
            if (operand_i(&x, i) == 0) zero = i + 1;
        if (zero) {
            free(x.copy);
            gl_error(L, "%s: integer division by zero (operand element %zu)", fn, x.scalar ? 1 : zero);
        }
    }
    if (gl_dtype_is_float(h->dtype)) arith_float(h, op, &x, alpha.f);
    else arith_int(h, op, &x, alpha.i);
    free(x.copy);
    lua_settop(L, 1);
    return 1;
}

static int host_add(lua_State *L) { return host_arith(L, OP_ADD, 0, 2, "h:add"); }
static int host_sub(lua_State *L) { return host_arith(L, OP_SUB, 0, 2, "h:sub"); }
static int host_mul(lua_State *L) { return host_arith(L, OP_MUL, 0, 2, "h:mul"); }
static int host_div(lua_State *L) { return host_arith(L, OP_DIV, 0, 2, "h:div"); }
static int host_axpy(lua_State *L) { return host_arith(L, OP_AXPY, 2, 3, "h:axpy"); }

static int host_scale(lua_State *L) {
    if (gl_testudata(L, 2, GL_HOST_T))
        gl_argerror(L, 2, "h:scale", "the factor must be a number (h:mul(x) multiplies by an array)");
    return host_arith(L, OP_MUL, 0, 2, "h:scale");
}

/* h:apply(name): a named function applied to every element of a float array, in double and
 * rounded once (for references of activations, softmax and the like). */
static double relu(double x) { return x > 0 || isnan(x) ? x : 0.0; } /* NaN stays visible */
static double sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double negate_d(double x) { return -x; }
static double square(double x) { return x * x; }
static double recip(double x) { return 1 / x; }

static const struct unary_fn {
    const char *name;
    double (*fn)(double);
} unary_fns[] = {
    {"abs", fabs},   {"neg", negate_d}, {"sqrt", sqrt},    {"exp", exp},        {"log", log},
    {"sin", sin},    {"cos", cos},      {"tanh", tanh},    {"relu", relu},      {"sigmoid", sigmoid},
    {"floor", floor}, {"ceil", ceil},   {"rint", nearbyint}, {"square", square}, {"recip", recip},
    {NULL, NULL},
};

static int host_apply(lua_State *L) {
    const char *fn = "h:apply";
    gl_host *h = check_self_host(L, fn);
    size_t len;
    const char *name = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &len) : NULL;
    const struct unary_fn *u = unary_fns;
    while (name && u->name && (strlen(u->name) != len || strcmp(u->name, name) != 0)) u++;
    if (name == NULL || u->name == NULL)
        gl_argerror(L, 2, fn, "unknown function %s%s%s (known: abs, neg, sqrt, exp, log, sin, cos, tanh, "
                              "relu, sigmoid, floor, ceil, rint, square, recip)",
                    name ? "'" : "", name ? name : gl_typename(L, 2), name ? "'" : "");
    if (!gl_dtype_is_float(h->dtype))
        gl_error(L, "%s: needs a float array, got %s", fn, gl_dtype_name(h->dtype));
    size_t es = gl_dtype_size(h->dtype);
    unsigned char *p = h->data;
    if (h->dtype == GL_F32) {
        float *f = h->data;
        for (size_t i = 0; i < h->numel; i++) f[i] = (float)u->fn((double)f[i]);
    } else {
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_double(h->dtype, p + i * es, u->fn(gl_dtype_load_double(h->dtype, p + i * es)));
    }
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Reductions: h:sum(), h:min(), h:max(), h:dot(x). Floats are summed pairwise in double (the
 * error grows with log n, not n); integers exactly (128-bit), returned as integers when they
 * fit 64 bits, else as floats; bool sums count the true elements. min/max return the value
 * and its 1-based index (the first one on ties); a NaN wins, so NaNs are not hidden.
 * ------------------------------------------------------------------------------------------ */
static double pairwise_sum(gl_dtype t, const unsigned char *p, size_t n, size_t es) {
    if (n <= 128) {
        double acc = 0;
        if (t == GL_F32) {
            const float *f = (const float *)(const void *)p;
            for (size_t i = 0; i < n; i++) acc += f[i];
        } else if (t == GL_F64) {
            const double *f = (const double *)(const void *)p;
            for (size_t i = 0; i < n; i++) acc += f[i];
        } else {
            for (size_t i = 0; i < n; i++) acc += gl_dtype_load_double(t, p + i * es);
        }
        return acc;
    }
    size_t half = n / 2;
    return pairwise_sum(t, p, half, es) + pairwise_sum(t, p + half * es, n - half, es);
}

static double pairwise_dot(gl_dtype ta, const unsigned char *a, gl_dtype tb, const unsigned char *b, size_t n) {
    size_t ea = gl_dtype_size(ta), eb = gl_dtype_size(tb);
    if (n <= 128) {
        double acc = 0;
        if (ta == GL_F32 && tb == GL_F32) {
            const float *x = (const float *)(const void *)a, *y = (const float *)(const void *)b;
            for (size_t i = 0; i < n; i++) acc += (double)x[i] * (double)y[i];
        } else {
            for (size_t i = 0; i < n; i++)
                acc += gl_dtype_load_double(ta, a + i * ea) * gl_dtype_load_double(tb, b + i * eb);
        }
        return acc;
    }
    size_t half = n / 2;
    return pairwise_dot(ta, a, tb, b, half) + pairwise_dot(ta, a + half * ea, tb, b + half * eb, n - half);
}

static void push_int128(lua_State *L, __int128 v) {
    if (v >= INT64_MIN && v <= INT64_MAX) lua_pushinteger(L, (lua_Integer)v);
    else lua_pushnumber(L, (double)v);
}

static int host_sum(lua_State *L) {
    gl_host *h = check_self_host(L, "h:sum");
    size_t es = gl_dtype_size(h->dtype);
    const unsigned char *p = h->data;
    if (gl_dtype_is_float(h->dtype)) {
        lua_pushnumber(L, pairwise_sum(h->dtype, p, h->numel, es));
        return 1;
    }
    __int128 acc = 0; /* 2^64 * 2^63 elements cannot overflow it */
    for (size_t i = 0; i < h->numel; i++) acc += load_int(h->dtype, p + i * es);
    push_int128(L, acc);
    return 1;
}

static int host_extreme(lua_State *L, bool want_max, const char *fn) {
    gl_host *h = check_self_host(L, fn);
    size_t es = gl_dtype_size(h->dtype), best = 0;
    const unsigned char *p = h->data;
    if (gl_dtype_is_float(h->dtype)) {
        double b = gl_dtype_load_double(h->dtype, p);
        for (size_t i = 1; i < h->numel && !isnan(b); i++) {
            double v = gl_dtype_load_double(h->dtype, p + i * es);
            if (isnan(v) || (want_max ? v > b : v < b)) { b = v; best = i; }
        }
        lua_pushnumber(L, b);
    } else {
        __int128 b = load_int(h->dtype, p);
        for (size_t i = 1; i < h->numel; i++) {
            __int128 v = load_int(h->dtype, p + i * es);
            if (want_max ? v > b : v < b) { b = v; best = i; }
        }
        if (gl_dtype_is_bool(h->dtype)) lua_pushboolean(L, b != 0);
        else push_int128(L, b);
    }
    lua_pushinteger(L, (lua_Integer)best + 1);
    return 2;
}

static int host_max(lua_State *L) { return host_extreme(L, true, "h:max"); }
static int host_min(lua_State *L) { return host_extreme(L, false, "h:min"); }

static int host_dot(lua_State *L) {
    const char *fn = "h:dot";
    gl_host *h = check_self_host(L, fn), *x = gl_check_host(L, 2, fn);
    if (x->numel != h->numel)
        gl_error(L, "%s: element counts differ (%zu and %zu)", fn, h->numel, x->numel);
    if (gl_dtype_is_bool(h->dtype) || gl_dtype_is_bool(x->dtype))
        gl_error(L, "%s: bool arrays have no dot product (h:sum() counts the true elements)", fn);
    if (gl_dtype_is_float(h->dtype) || gl_dtype_is_float(x->dtype)) {
        lua_pushnumber(L, pairwise_dot(h->dtype, h->data, x->dtype, x->data, h->numel));
        return 1;
    }
    size_t eh = gl_dtype_size(h->dtype), ex = gl_dtype_size(x->dtype);
    __int128 acc = 0;
    for (size_t i = 0; i < h->numel; i++) {
        __int128 prod;
        if (__builtin_mul_overflow(load_int(h->dtype, (unsigned char *)h->data + i * eh),
                                   load_int(x->dtype, (unsigned char *)x->data + i * ex), &prod) ||
            __builtin_add_overflow(acc, prod, &acc))
            gl_error(L, "%s: the integer dot product exceeds 128 bits", fn);
    }
    push_int128(L, acc);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * c:matmul(a, b[, {alpha=1, beta=0}]): c = alpha * a·b + beta * c for row-major 2-D arrays
 * a {M, K}, b {K, N}, c {M, N}; any non-bool dtypes, accumulated in double (integers are exact
 * while partial sums stay below 2^53; integer results wrap to c's dtype). A naive i-k-j loop
 * over double copies of a and b, so c may alias either: a reference for small sizes.
 * ------------------------------------------------------------------------------------------ */
static double *to_doubles(const gl_host *h) {
    double *d = malloc(h->numel * sizeof *d);
    if (d == NULL) return NULL;
    size_t es = gl_dtype_size(h->dtype);
    for (size_t i = 0; i < h->numel; i++)
        d[i] = gl_dtype_load_double(h->dtype, (const unsigned char *)h->data + i * es);
    return d;
}

static void check_matrix(lua_State *L, const gl_host *h, int argno, const char *fn) {
    if (h->ndim != 2)
        gl_argerror(L, argno, fn, "2-D array expected, got %d dimensions (h:view(1, {rows, cols}) gives one)",
                    h->ndim);
    if (gl_dtype_is_bool(h->dtype)) gl_argerror(L, argno, fn, "bool arrays take no arithmetic");
}

static void matmul_rows(gl_host *c, const double *A, const double *B, double *row, size_t M,
                        size_t K, size_t N, double alpha, double beta) {
    size_t es = gl_dtype_size(c->dtype);
    bool int_out = !gl_dtype_is_float(c->dtype);
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) row[j] = 0;
        for (size_t k = 0; k < K; k++) {
            double aik = A[i * K + k];
            const double *brow = B + k * N;
            for (size_t j = 0; j < N; j++) row[j] += aik * brow[j];
        }
        unsigned char *out = (unsigned char *)c->data + i * N * es;
        for (size_t j = 0; j < N; j++) {
            double v = alpha * row[j];
            if (beta != 0) v += beta * gl_dtype_load_double(c->dtype, out + j * es);
            if (int_out) gl_dtype_store_bits(c->dtype, out + j * es, isfinite(v) && fabs(v) < 0x1p63 ? (int64_t)llround(v) : 0);
            else gl_dtype_store_double(c->dtype, out + j * es, v);
        }
    }
}

static int host_matmul(lua_State *L) {
    const char *fn = "h:matmul";
    double alpha = 1, beta = 0;
    check_self_host(L, fn);
    if (!lua_isnoneornil(L, 4)) { /* raw reads, before any data pointer is taken */
        if (!lua_istable(L, 4)) gl_typeerror(L, 4, fn, "table");
        static const char *const known[] = {"alpha", "beta", NULL};
        gl_check_known_fields(L, 4, known, fn);
        alpha = raw_opt_num(L, 4, "alpha", 1, fn);
        beta = raw_opt_num(L, 4, "beta", 0, fn);
    }
    gl_host *c = check_self_host(L, fn), *a = gl_check_host(L, 2, fn), *b = gl_check_host(L, 3, fn);
    check_matrix(L, a, 2, fn);
    check_matrix(L, b, 3, fn);
    check_matrix(L, c, 1, fn);
    size_t M = (size_t)a->shape[0], K = (size_t)a->shape[1], N = (size_t)b->shape[1];
    if ((size_t)b->shape[0] != K || (size_t)c->shape[0] != M || (size_t)c->shape[1] != N)
        gl_error(L, "%s: shapes do not fit: a %lldx%lld times b %lldx%lld into c %lldx%lld", fn,
                 (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0],
                 (long long)b->shape[1], (long long)c->shape[0], (long long)c->shape[1]);
    double *A = to_doubles(a), *B = to_doubles(b), *row = malloc(N * sizeof *row);
    if (A && B && row) matmul_rows(c, A, B, row, M, K, N, alpha, beta);
    bool ok = A && B && row;
    free(A);
    free(B);
    free(row);
    if (!ok) gl_error(L, "%s: cannot allocate host memory for double copies of a and b", fn);
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg host_methods[] = {
    {"fill", host_fill},       {"iota", host_iota},           {"random", host_random},
    {"totable", host_totable}, {"copy_from", host_copy_from}, {"free", host_free},
    {"view", host_view},       {"transpose", host_transpose}, {"add", host_add},
    {"sub", host_sub},         {"mul", host_mul},             {"div", host_div},
    {"scale", host_scale},     {"axpy", host_axpy},           {"sum", host_sum},
    {"min", host_min},         {"max", host_max},             {"dot", host_dot},
    {"matmul", host_matmul},   {"apply", host_apply},         {NULL, NULL},
};

static int host_index(lua_State *L) {
    gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        if (push_method(L, host_methods, k)) return 1;
        if (h->data == NULL) gl_error(L, "cuda.host: field '%s': cuda.host was freed", k);
        if (push_common_field(L, k, h->dtype, h->ndim, h->shape, h->numel, h->nbytes)) return 1;
        if (strcmp(k, "pinned") == 0) {
            lua_pushboolean(L, h->pinned);
            return 1;
        }
        return 0;
    }
    if (h->data == NULL) gl_error(L, "cuda.host: cuda.host was freed");
    size_t i = check_index(L, h, 2, "cuda.host");
    push_element(L, h->dtype, element_ptr(h, i));
    return 1;
}

static int host_newindex(lua_State *L) {
    gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    if (lua_type(L, 2) == LUA_TSTRING)
        gl_error(L, "cuda.host: cannot assign field '%s' (only elements h[i] are writable)",
                  lua_tostring(L, 2));
    if (h->data == NULL) gl_error(L, "cuda.host: cuda.host was freed");
    size_t i = check_index(L, h, 2, "cuda.host");
    unsigned char elem[8];
    char what[48];
    snprintf(what, sizeof what, "element %zu", i + 1);
    check_value(L, 3, h->dtype, elem, "cuda.host", what);
    memcpy(element_ptr(h, i), elem, gl_dtype_size(h->dtype));
    return 0;
}

static int host_len(lua_State *L) {
    gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    if (h->data == NULL) gl_error(L, "cuda.host: cuda.host was freed");
    lua_pushinteger(L, (lua_Integer)h->numel);
    return 1;
}

/* "cuda.host f32[4] pinned (16 B) {0, 1, 2, 3}", at most 8 values shown. */
static int host_tostring(lua_State *L) {
    gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    char type[160], size[32];
    format_type(type, sizeof type, h->dtype, h->ndim, h->shape);
    if (h->data == NULL) {
        lua_pushfstring(L, "cuda.host %s (freed)", type);
        return 1;
    }
    format_bytes(size, sizeof size, h->nbytes);
    /* Everything is read into C memory first: the Lua allocations below may run a finalizer
     * that frees h. */
    char text[8 * 40 + 16] = "";
    size_t shown = h->numel < 8 ? h->numel : 8, len = 0;
    for (size_t i = 0; i < shown; i++) {
        push_element(L, h->dtype, element_ptr(h, i)); /* no allocation: numbers and booleans */
        char num[40];
        if (lua_isboolean(L, -1)) snprintf(num, sizeof num, "%s", lua_toboolean(L, -1) ? "true" : "false");
        else if (lua_isinteger(L, -1)) snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, -1));
        else snprintf(num, sizeof num, "%.7g", lua_tonumber(L, -1));
        lua_pop(L, 1);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i ? ", " : "", num);
    }
    if (shown < h->numel) snprintf(text + len, sizeof text - len, ", ...");
    lua_pushfstring(L, "cuda.host %s%s%s (%s) {%s}", type, h->pinned ? " pinned" : "",
                    h->block && h->data != h->block->host ? " view" : "", size, text);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * cuda.compare(a, b, {atol=0, rtol=0}): element i mismatches when |a-b| > atol + rtol*|b|,
 * compared as doubles; equal values (infinities included) always match, NaN matches NaN
 * only. max_abs/max_rel cover the pairs that are both numbers (NaN pairs are left out);
 * max_rel is |a-b|/|b| (infinite when b is 0 and a is not).
 * ------------------------------------------------------------------------------------------ */
typedef struct view {
    const void *data;
    void *owned; /* host copy of a device array, freed by the caller */
    size_t numel;
    gl_dtype dtype;
} view;

/* Reads the operand at idx; a device array is copied to host memory first. Nothing is
 * allocated before every argument check has passed, so a raise cannot leak `owned`. */
static view check_view(lua_State *L, int idx, const char *fn) {
    mem_ref m = check_mem(L, idx, fn);
    view v = {NULL, NULL, 0, 0};
    if (m.host) {
        v.data = m.host->data;
        v.numel = m.host->numel;
        v.dtype = m.host->dtype;
    } else {
        v.numel = m.dev->numel;
        v.dtype = m.dev->dtype;
    }
    return v;
}

/* Copies a device operand to host memory. Returns false when the host buffer cannot be
 * allocated; *r carries the copy's result. */
static bool fetch_device(lua_State *L, int idx, view *v, CUresult *r) {
    gl_array *a = gl_testudata(L, idx, GL_ARRAY_T);
    if (a == NULL) return true;
    v->owned = malloc(a->nbytes);
    if (v->owned == NULL) return false;
    v->data = v->owned;
    *r = gl_cu.cuMemcpyDtoH(v->owned, a->ptr, a->nbytes);
    return true;
}

typedef struct compare_result {
    double max_abs, max_rel;
    size_t mismatches, first_bad; /* first_bad: 1-based, 0 for none */
} compare_result;

static compare_result compare_views(const view *a, const view *b, double atol, double rtol) {
    size_t ea = gl_dtype_size(a->dtype), eb = gl_dtype_size(b->dtype);
    compare_result c = {0, 0, 0, 0};
    for (size_t i = 0; i < a->numel; i++) {
        double x = gl_dtype_load_double(a->dtype, (const unsigned char *)a->data + i * ea);
        double y = gl_dtype_load_double(b->dtype, (const unsigned char *)b->data + i * eb);
        bool bad;
        if (isnan(x) || isnan(y)) {
            bad = !(isnan(x) && isnan(y));
        } else if (x == y) {
            bad = false;
        } else {
            double d = fabs(x - y), rel = y == 0 ? INFINITY : d / fabs(y);
            if (d > c.max_abs) c.max_abs = d;
            if (rel > c.max_rel) c.max_rel = rel;
            bad = !(d <= atol + rtol * fabs(y));
        }
        if (bad && c.mismatches++ == 0) c.first_bad = i + 1;
    }
    return c;
}

static void push_compare_result(lua_State *L, const compare_result *c) {
    lua_createtable(L, 0, 5);
    lua_pushnumber(L, c->max_abs);
    lua_setfield(L, -2, "max_abs");
    lua_pushnumber(L, c->max_rel);
    lua_setfield(L, -2, "max_rel");
    lua_pushinteger(L, (lua_Integer)c->mismatches);
    lua_setfield(L, -2, "mismatches");
    if (c->first_bad) {
        lua_pushinteger(L, (lua_Integer)c->first_bad);
        lua_setfield(L, -2, "first_bad");
    }
    lua_pushboolean(L, c->mismatches == 0);
    lua_setfield(L, -2, "ok");
}

static int l_compare(lua_State *L) {
    const char *fn = "cuda.compare";
    check_view(L, 1, fn);
    check_view(L, 2, fn);
    double atol = 0, rtol = 0;
    if (!lua_isnoneornil(L, 3)) { /* raw reads, before any data pointer is taken */
        if (!lua_istable(L, 3)) gl_typeerror(L, 3, fn, "table");
        static const char *const known[] = {"atol", "rtol", NULL};
        gl_check_known_fields(L, 3, known, fn);
        atol = raw_opt_num(L, 3, "atol", 0, fn);
        rtol = raw_opt_num(L, 3, "rtol", 0, fn);
        if (atol < 0 || rtol < 0)
            gl_fielderror(L, 3, fn, atol < 0 ? "atol"
                          : "rtol", "must not be negative, got %g", atol < 0 ? atol : rtol);
    }
    if (!gl_test_host(L, 1) || !gl_test_host(L, 2)) gl_require_gpu(L, fn);
    view a = check_view(L, 1, fn), b = check_view(L, 2, fn);
    if (a.numel != b.numel)
        gl_error(L, "%s: element counts differ (%zu and %zu)", fn, a.numel, b.numel);
    /* from here on nothing may raise until the host copies are freed */
    CUresult r = CUDA_SUCCESS;
    bool allocated = fetch_device(L, 1, &a, &r);
    if (allocated && r == CUDA_SUCCESS) allocated = fetch_device(L, 2, &b, &r);
    compare_result c = {0, 0, 0, 0};
    if (allocated && r == CUDA_SUCCESS) c = compare_views(&a, &b, atol, rtol);
    free(a.owned);
    free(b.owned);
    if (!allocated) gl_error(L, "%s: cannot allocate host memory to copy a device array into", fn);
    GL_CHECK(L, r, fn, "cuMemcpyDtoH");
    push_compare_result(L, &c);
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
static const luaL_Reg array_meta[] = {
    {"__index", array_index}, {"__tostring", array_tostring}, {"__gc", array_free},
    {"__close", array_free},  {NULL, NULL},
};

static const luaL_Reg host_meta[] = {
    {"__index", host_index}, {"__newindex", host_newindex}, {"__len", host_len},
    {"__tostring", host_tostring}, {"__gc", host_free}, {"__close", host_free},
    {NULL, NULL},
};

void gl_open_memory(lua_State *L) {
    gl_new_class(L, GL_ARRAY_T, array_meta, NULL);
    gl_new_class(L, GL_HOST_T, host_meta, NULL);
    static const luaL_Reg funcs[] = {
        {"array", l_array}, {"host", l_host}, {"compare", l_compare}, {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}
