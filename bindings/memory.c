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
 * all call the one release function, which is idempotent and never raises.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "objects.h"
#include "stream.h"

#define HOST_ALIGN 64 /* cache line; also enough for any vector load a test might do */

/* luaL_error with the C library's printf formats (lua_pushfstring knows no %zu or %llu). */
__attribute__((noreturn, format(printf, 2, 3)))
static void mem_error(lua_State *L, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    luaL_where(L, 1);
    lua_pushstring(L, msg);
    lua_concat(L, 2);
    lua_error(L);
    abort(); /* not reached: lua_error does not return */
}

/* The type name for messages: a userdata's __name ("cuda.host"), else the Lua type. */
static const char *type_name(lua_State *L, int idx) {
    int t = luaL_getmetafield(L, idx, "__name");
    if (t == LUA_TSTRING) {
        const char *n = lua_tostring(L, -1);
        lua_pop(L, 1); /* the metatable keeps the string alive */
        return n;
    }
    if (t != LUA_TNIL) lua_pop(L, 1);
    return luaL_typename(L, idx);
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
        mem_error(L, "bad argument #%d to '%s' (dtype name expected, got %s)", idx, fn,
                   luaL_typename(L, idx));
    int t = gl_dtype_from_name(lua_tostring(L, idx));
    if (t < 0)
        mem_error(L, "bad argument #%d to '%s' (unknown dtype '%s'; known: f16, bf16, f32, f64, "
                      "i8, i16, i32, i64, u8, u16, u32, u64)", idx, fn, lua_tostring(L, idx));
    return (gl_dtype)t;
}

/* One dimension from the value at the top of the stack: a positive integer (2.0 is fine). */
static int64_t check_dim(lua_State *L, int argno, int dim, const char *fn) {
    char where[32] = "";
    if (dim > 0) snprintf(where, sizeof where, "dimension %d ", dim);
    if (lua_type(L, -1) != LUA_TNUMBER)
        mem_error(L, "bad argument #%d to '%s' (%ssize must be an integer, got %s)", argno, fn,
                   where, luaL_typename(L, -1));
    int isint = 0;
    lua_Integer n = lua_tointegerx(L, -1, &isint);
    if (!isint)
        mem_error(L, "bad argument #%d to '%s' (%ssize must be an integer, got %s)", argno, fn,
                   where, lua_tostring(L, -1));
    if (n <= 0)
        mem_error(L, "bad argument #%d to '%s' (%ssize must be positive, got %lld; zero-element "
                      "arrays are not supported)", argno, fn, where, n);
    return (int64_t)n;
}

static void check_shape(lua_State *L, int idx, gl_dtype dtype, shape_spec *s, const char *fn) {
    s->dtype = dtype;
    if (lua_type(L, idx) == LUA_TTABLE) {
        lua_Integer n = luaL_len(L, idx);
        if (n < 1 || n > GL_MAX_DIMS)
            mem_error(L, "bad argument #%d to '%s' (shape must have 1 to %d dimensions, got %lld)",
                       idx, fn, GL_MAX_DIMS, n);
        s->ndim = (int)n;
        for (int i = 0; i < s->ndim; i++) {
            lua_geti(L, idx, i + 1);
            s->dims[i] = check_dim(L, idx, i + 1, fn);
            lua_pop(L, 1);
        }
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
        lua_pushvalue(L, idx);
        s->ndim = 1;
        s->dims[0] = check_dim(L, idx, 0, fn);
        lua_pop(L, 1);
    } else {
        mem_error(L, "bad argument #%d to '%s' (element count or shape table expected, got %s)",
                   idx, fn, luaL_typename(L, idx));
    }
    uint64_t numel = 1;
    for (int i = 0; i < s->ndim; i++)
        if (__builtin_mul_overflow(numel, (uint64_t)s->dims[i], &numel) || numel > INT64_MAX)
            mem_error(L, "bad argument #%d to '%s' (the element count overflows 64 bits)", idx, fn);
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)gl_dtype_size(dtype), &nbytes) ||
        nbytes > INT64_MAX || nbytes > SIZE_MAX)
        mem_error(L, "bad argument #%d to '%s' (%llu %s elements: the byte size overflows 64 bits)",
                   idx, fn, (unsigned long long)numel, gl_dtype_name(dtype));
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
    if (gl_dtype_is_float(t)) {
        lua_pushnumber(L, gl_dtype_load_double(t, p));
    } else if (t == GL_U64 && gl_dtype_load_bits(t, p) < 0) {
        lua_pushnumber(L, gl_dtype_load_double(t, p)); /* above 2^63-1: no Lua integer holds it */
    } else {
        lua_pushinteger(L, (lua_Integer)gl_dtype_load_bits(t, p));
    }
}

/* Converts the number at idx to dtype t into out[0..size). Returns NULL on success or a static
 * reason ("expected a number, got string", "2.5 is not an integer", "300 is out of range ...")
 * formatted into msg. */
static const char *encode_value(lua_State *L, int idx, gl_dtype t, void *out, char *msg, size_t len) {
    if (lua_type(L, idx) != LUA_TNUMBER) {
        snprintf(msg, len, "expected a number, got %s", luaL_typename(L, idx));
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

/* encode_value, raising "fn: argument N: reason" */
static void check_value(lua_State *L, int idx, gl_dtype t, void *out, const char *fn, const char *what) {
    char msg[160];
    if (encode_value(L, idx, t, out, msg, sizeof msg))
        mem_error(L, "%s: %s: %s", fn, what, msg);
}

static void fill_pattern(void *data, size_t numel, size_t esize, const void *elem) {
    unsigned char *p = data;
    for (size_t i = 0; i < numel; i++) memcpy(p + i * esize, elem, esize);
}

/* ------------------------------------------------------------------------------------------
 * Type checks shared with other bindings
 * ------------------------------------------------------------------------------------------ */
gl_array *gl_test_array(lua_State *L, int idx) {
    gl_array *a = luaL_testudata(L, idx, GL_ARRAY_T);
    return a && a->ptr ? a : NULL;
}

gl_array *gl_check_array(lua_State *L, int idx, const char *fn) {
    gl_array *a = luaL_testudata(L, idx, GL_ARRAY_T);
    if (a == NULL)
        mem_error(L, "%s: argument #%d: expected cuda.array, got %s", fn, idx, type_name(L, idx));
    if (a->ptr == 0) mem_error(L, "%s: argument #%d: cuda.array was freed", fn, idx);
    return a;
}

gl_host *gl_test_host(lua_State *L, int idx) {
    gl_host *h = luaL_testudata(L, idx, GL_HOST_T);
    return h && h->data ? h : NULL;
}

gl_host *gl_check_host(lua_State *L, int idx, const char *fn) {
    gl_host *h = luaL_testudata(L, idx, GL_HOST_T);
    if (h == NULL)
        mem_error(L, "%s: argument #%d: expected cuda.host, got %s", fn, idx, type_name(L, idx));
    if (h->data == NULL) mem_error(L, "%s: argument #%d: cuda.host was freed", fn, idx);
    return h;
}

/* ------------------------------------------------------------------------------------------
 * Releasing
 * ------------------------------------------------------------------------------------------ */
static void free_device_memory(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuMemFree((CUdeviceptr)(uintptr_t)handle);
}

static void free_pinned_memory(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuMemFreeHost(handle);
}

static void array_release(gl_array *a) {
    if (a->ptr == 0) return;
    gl_release(&a->use, free_device_memory, (void *)(uintptr_t)a->ptr, 0);
    a->ptr = 0;
    gl_live.arrays--;
    gl_live.device_bytes -= (long long)a->nbytes;
}

static void host_release(gl_host *h) {
    if (h->data == NULL) return;
    if (h->pinned) {
        gl_release(&h->use, free_pinned_memory, h->data, 0);
        gl_live.pinned_bytes -= (long long)h->nbytes;
    } else {
        free(h->data); /* pageable memory is only ever used synchronously */
    }
    h->data = NULL;
    gl_live.hosts--;
}

/* __gc, __close and :free() (never raise; a wrong type is ignored). */
static int array_free(lua_State *L) {
    gl_array *a = luaL_testudata(L, 1, GL_ARRAY_T);
    if (a) array_release(a);
    return 0;
}

static int host_free(lua_State *L) {
    gl_host *h = luaL_testudata(L, 1, GL_HOST_T);
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
    mem_ref m = {luaL_testudata(L, idx, GL_ARRAY_T), luaL_testudata(L, idx, GL_HOST_T)};
    if (m.dev == NULL && m.host == NULL)
        mem_error(L, "%s: argument #%d: expected cuda.array or cuda.host, got %s", fn, idx,
                   type_name(L, idx));
    if (m.dev) gl_check_array(L, idx, fn);
    if (m.host) gl_check_host(L, idx, fn);
    return m;
}

static size_t mem_nbytes(mem_ref m) { return m.dev ? m.dev->nbytes : m.host->nbytes; }

static void mark_copy_uses(mem_ref dst, mem_ref src, gl_stream_track *track, bool on_stream) {
    uint64_t seq = gl_next_seq();
    mem_ref both[2] = {dst, src};
    for (int i = 0; i < 2; i++) {
        if (both[i].dev) gl_use_mark(&both[i].dev->use, track, seq);
        else if (on_stream && both[i].host->pinned) gl_use_mark(&both[i].host->use, track, seq);
    }
}

/* Copies src (stack index 2) into dst (index 1); the optional stream is at stream_idx. */
static void copy_mem(lua_State *L, mem_ref dst, mem_ref src, int stream_idx, const char *fn) {
    if (mem_nbytes(dst) != mem_nbytes(src))
        mem_error(L, "%s: argument #2: size mismatch (destination %zu bytes, source %zu bytes)", fn,
                  mem_nbytes(dst), mem_nbytes(src));
    bool on_stream = !lua_isnoneornil(L, stream_idx);
    if (dst.host && src.host) {
        if (on_stream)
            mem_error(L, "%s: argument #%d: a host-to-host copy takes no stream", fn, stream_idx);
        memmove(dst.host->data, src.host->data, dst.host->nbytes);
        return;
    }
    gl_stream_track *track = gl_opt_stream_track(L, stream_idx, fn);
    gl_require_gpu(L, fn);
    CUstream s = gl_track_handle(track);
    size_t n = mem_nbytes(dst);
    if (dst.dev && src.dev) {
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyDtoDAsync(dst.dev->ptr, src.dev->ptr, n, s), fn, "cuMemcpyDtoDAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyDtoD(dst.dev->ptr, src.dev->ptr, n), fn, "cuMemcpyDtoD");
    } else if (dst.dev) {
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyHtoDAsync(dst.dev->ptr, src.host->data, n, s), fn, "cuMemcpyHtoDAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyHtoD(dst.dev->ptr, src.host->data, n), fn, "cuMemcpyHtoD");
    } else {
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyDtoHAsync(dst.host->data, src.dev->ptr, n, s), fn, "cuMemcpyDtoHAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyDtoH(dst.host->data, src.dev->ptr, n), fn, "cuMemcpyDtoH");
    }
    mark_copy_uses(dst, src, on_stream ? track : gl_default_track(), on_stream);
    gl_capture_note(L, 1);
    gl_capture_note(L, 2);
}

/* ------------------------------------------------------------------------------------------
 * Device arrays
 * ------------------------------------------------------------------------------------------ */
static gl_array *check_self_array(lua_State *L, const char *fn) {
    gl_array *a = luaL_testudata(L, 1, GL_ARRAY_T);
    if (a == NULL)
        mem_error(L, "%s: bad self: expected cuda.array, got %s (call it with ':')", fn,
                   type_name(L, 1));
    if (a->ptr == 0) mem_error(L, "%s: cuda.array was freed", fn);
    return a;
}

static int l_array(lua_State *L) {
    const char *fn = "cuda.array";
    gl_dtype t = check_dtype(L, 1, fn);
    shape_spec s;
    check_shape(L, 2, t, &s, fn);
    gl_require_gpu(L, fn);
    gl_array *a = lua_newuserdatauv(L, sizeof *a, 0);
    memset(a, 0, sizeof *a);
    a->dtype = t;
    a->ndim = s.ndim;
    memcpy(a->shape, s.dims, sizeof s.dims);
    a->numel = s.numel;
    a->nbytes = s.nbytes;
    a->device = gl_current_device();
    luaL_setmetatable(L, GL_ARRAY_T);
    CUdeviceptr p = 0;
    GL_CHECK(L, gl_cu.cuMemAlloc(&p, s.nbytes), fn, "cuMemAlloc");
    a->ptr = p;
    gl_live.arrays++;
    gl_live.device_bytes += (long long)s.nbytes;
    return 1;
}

/* d:fill(v[, stream]): memset for 1/2/4-byte patterns (and 8-byte ones whose halves agree),
 * otherwise a copy from a filled host staging buffer. The staging buffer is pageable, so the
 * driver has taken its bytes when the copy call returns and it can be freed at once; that also
 * means it cannot be captured into a graph, whose replays would read the freed buffer. */
static int array_fill(lua_State *L) {
    const char *fn = "d:fill";
    gl_array *a = check_self_array(L, fn);
    unsigned char elem[8] = {0};
    check_value(L, 2, a->dtype, elem, fn, "argument #2");
    bool on_stream = !lua_isnoneornil(L, 3);
    gl_stream_track *track = gl_opt_stream_track(L, 3, fn);
    gl_require_gpu(L, fn);
    CUstream s = gl_track_handle(track);
    size_t esize = gl_dtype_size(a->dtype);
    uint32_t lo, hi;
    memcpy(&lo, elem, 4);
    memcpy(&hi, elem + 4, 4);
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
            mem_error(L, "%s: this %s value needs a host staging copy, which a graph capture "
                         "cannot hold (use a kernel to fill inside a capture)", fn, gl_dtype_name(a->dtype));
        void *stage = malloc(a->nbytes);
        if (stage == NULL) mem_error(L, "%s: cannot allocate %zu bytes of host staging memory", fn, a->nbytes);
        fill_pattern(stage, a->numel, esize, elem);
        CUresult r = on_stream ? gl_cu.cuMemcpyHtoDAsync(a->ptr, stage, a->nbytes, s)
                               : gl_cu.cuMemcpyHtoD(a->ptr, stage, a->nbytes);
        free(stage);
        GL_CHECK(L, r, fn, on_stream ? "cuMemcpyHtoDAsync" : "cuMemcpyHtoD");
    }
    gl_use_mark(&a->use, on_stream ? track : gl_default_track(), gl_next_seq());
    gl_capture_note(L, 1);
    lua_settop(L, 1);
    return 1;
}

static int array_copy_from(lua_State *L) {
    const char *fn = "d:copy_from";
    gl_array *a = check_self_array(L, fn);
    mem_ref dst = {a, NULL};
    copy_mem(L, dst, check_mem(L, 2, fn), 3, fn);
    lua_settop(L, 1);
    return 1;
}

static int array_tostring(lua_State *L) {
    gl_array *a = luaL_checkudata(L, 1, GL_ARRAY_T);
    char type[160], size[32];
    format_type(type, sizeof type, a->dtype, a->ndim, a->shape);
    if (a->ptr == 0) {
        lua_pushfstring(L, "cuda.array %s (freed)", type);
        return 1;
    }
    format_bytes(size, sizeof size, a->nbytes);
    char addr[32];
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)a->ptr);
    lua_pushfstring(L, "cuda.array %s (%s) %s", type, size, addr);
    return 1;
}

static const luaL_Reg array_methods[] = {
    {"fill", array_fill}, {"copy_from", array_copy_from}, {"free", array_free}, {NULL, NULL},
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
    gl_array *a = luaL_checkudata(L, 1, GL_ARRAY_T);
    if (lua_type(L, 2) != LUA_TSTRING) return 0; /* device memory has no d[i]: copy to a host array */
    const char *k = lua_tostring(L, 2);
    if (push_method(L, array_methods, k)) return 1;
    if (a->ptr == 0) mem_error(L, "cuda.array: field '%s': cuda.array was freed", k);
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
    gl_host *h = luaL_testudata(L, 1, GL_HOST_T);
    if (h == NULL)
        mem_error(L, "%s: bad self: expected cuda.host, got %s (call it with ':')", fn,
                   type_name(L, 1));
    if (h->data == NULL) mem_error(L, "%s: cuda.host was freed", fn);
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
        luaL_checktype(L, 3, LUA_TTABLE);
        static const char *const known[] = {"pinned", NULL};
        gl_check_known_fields(L, 3, known, fn);
        pinned = gl_opt_bool_field(L, 3, "pinned", false, fn);
    }
    if (pinned) gl_require_gpu(L, fn);
    gl_host *h = lua_newuserdatauv(L, sizeof *h, 0);
    memset(h, 0, sizeof *h);
    h->dtype = t;
    h->ndim = s.ndim;
    memcpy(h->shape, s.dims, sizeof s.dims);
    h->numel = s.numel;
    h->nbytes = s.nbytes;
    h->pinned = pinned;
    luaL_setmetatable(L, GL_HOST_T);
    if (pinned) {
        void *p = NULL;
        GL_CHECK(L, gl_cu.cuMemAllocHost(&p, s.nbytes), fn, "cuMemAllocHost");
        memset(p, 0, s.nbytes);
        h->data = p;
        gl_live.pinned_bytes += (long long)s.nbytes;
    } else {
        /* With overcommit a huge malloc can succeed and the zeroing then gets the process
         * killed, so sizes beyond the machine's memory are refused up front. */
        unsigned long long phys = physical_memory();
        if (phys && s.nbytes > phys)
            mem_error(L, "%s: cannot allocate %zu bytes (this machine has %llu bytes of memory)", fn,
                      s.nbytes, phys);
        h->data = alloc_pageable(s.nbytes);
        if (h->data == NULL)
            mem_error(L, "%s: cannot allocate %zu bytes of host memory", fn, s.nbytes);
    }
    gl_live.hosts++;
    return 1;
}

/* The element index at idx as a 0-based offset; raises for non-integers and out of range. */
static size_t check_index(lua_State *L, gl_host *h, int idx, const char *fn) {
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER)
        mem_error(L, "%s: index must be an integer, got %s", fn,
                   lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
    if (i < 1 || (uint64_t)i > h->numel)
        mem_error(L, "%s: index %lld out of range 1..%lld", fn, i, (lua_Integer)h->numel);
    return (size_t)(i - 1);
}

static void *element_ptr(gl_host *h, size_t i) {
    return (unsigned char *)h->data + i * gl_dtype_size(h->dtype);
}

static int host_fill(lua_State *L) {
    const char *fn = "h:fill";
    gl_host *h = check_self_host(L, fn);
    unsigned char elem[8];
    check_value(L, 2, h->dtype, elem, fn, "argument #2");
    fill_pattern(h->data, h->numel, gl_dtype_size(h->dtype), elem);
    lua_settop(L, 1);
    return 1;
}

/* An optional number argument; strings are refused rather than converted. */
static double opt_strict_number(lua_State *L, int idx, double def, const char *fn) {
    if (lua_isnoneornil(L, idx)) return def;
    if (lua_type(L, idx) != LUA_TNUMBER)
        mem_error(L, "bad argument #%d to '%s' (number expected, got %s)", idx, fn, type_name(L, idx));
    return lua_tonumber(L, idx);
}

/* h:iota([start[, step]]): h[i] = start + (i-1)*step (defaults 0 and 1). Integer dtypes need
 * integer start and step, and every value must fit the dtype (checked at both ends, since the
 * sequence is monotonic). Float dtypes compute each value in double, then round once. */
static int host_iota(lua_State *L) {
    const char *fn = "h:iota";
    gl_host *h = check_self_host(L, fn);
    size_t esize = gl_dtype_size(h->dtype);
    if (gl_dtype_is_float(h->dtype)) {
        double start = opt_strict_number(L, 2, 0, fn), step = opt_strict_number(L, 3, 1, fn);
        if (isnan(start) || isnan(step)) mem_error(L, "%s: start and step must not be NaN", fn);
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_double(h->dtype, element_ptr(h, i), start + (double)i * step);
    } else {
        opt_strict_number(L, 2, 0, fn); /* type checks: numbers only, no string coercion */
        opt_strict_number(L, 3, 1, fn);
        lua_Integer start = luaL_optinteger(L, 2, 0), step = luaL_optinteger(L, 3, 1);
        lua_Integer last;
        if (__builtin_mul_overflow(step, (lua_Integer)(h->numel - 1), &last) ||
            __builtin_add_overflow(last, start, &last))
            mem_error(L, "%s: the sequence overflows 64-bit integers", fn);
        unsigned char tmp[8];
        char msg[160];
        for (int end = 0; end < 2; end++) {
            lua_pushinteger(L, end ? last : start);
            const char *bad = encode_value(L, -1, h->dtype, tmp, msg, sizeof msg);
            lua_pop(L, 1);
            if (bad) mem_error(L, "%s: %s value %s", fn, end ? "last" : "first", bad);
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

static int host_random(lua_State *L) {
    const char *fn = "h:random";
    gl_host *h = check_self_host(L, fn);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    else { lua_settop(L, 1); lua_newtable(L); }
    static const char *const known[] = {"seed", "lo", "hi", NULL};
    gl_check_known_fields(L, 2, known, fn);
    uint64_t seed = (uint64_t)gl_opt_int_field(L, 2, "seed", 0, fn);
    rng r;
    rng_seed(&r, seed);
    if (gl_dtype_is_float(h->dtype)) {
        double lo = gl_opt_num_field(L, 2, "lo", 0, fn), hi = gl_opt_num_field(L, 2, "hi", 1, fn);
        if (!(lo < hi) || !isfinite(hi - lo))
            mem_error(L, "%s: need finite lo < hi, got lo=%f hi=%f", fn, lo, hi);
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_double(h->dtype, element_ptr(h, i), lo + (hi - lo) * rng_uniform(&r));
    } else {
        lua_Integer lo = gl_opt_int_field(L, 2, "lo", 0, fn), hi = gl_opt_int_field(L, 2, "hi", 100, fn);
        if (lo >= hi) mem_error(L, "%s: need lo < hi, got lo=%lld hi=%lld", fn, lo, hi);
        unsigned char tmp[8];
        char msg[160];
        for (int end = 0; end < 2; end++) {
            lua_pushinteger(L, end ? hi - 1 : lo);
            const char *bad = encode_value(L, -1, h->dtype, tmp, msg, sizeof msg);
            lua_pop(L, 1);
            if (bad) mem_error(L, "%s: %s %s", fn, end ? "hi-1" : "lo", bad);
        }
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
    if (h->numel > INT32_MAX) mem_error(L, "h:totable: %zu elements do not fit a Lua table", h->numel);
    lua_createtable(L, (int)h->numel, 0);
    for (size_t i = 0; i < h->numel; i++) {
        push_element(L, h->dtype, element_ptr(h, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int host_copy_from(lua_State *L) {
    const char *fn = "h:copy_from";
    gl_host *h = check_self_host(L, fn);
    mem_ref dst = {NULL, h};
    copy_mem(L, dst, check_mem(L, 2, fn), 3, fn);
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg host_methods[] = {
    {"fill", host_fill},       {"iota", host_iota},           {"random", host_random},
    {"totable", host_totable}, {"copy_from", host_copy_from}, {"free", host_free},
    {NULL, NULL},
};

static int host_index(lua_State *L) {
    gl_host *h = luaL_checkudata(L, 1, GL_HOST_T);
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        if (push_method(L, host_methods, k)) return 1;
        if (h->data == NULL) mem_error(L, "cuda.host: field '%s': cuda.host was freed", k);
        if (push_common_field(L, k, h->dtype, h->ndim, h->shape, h->numel, h->nbytes)) return 1;
        if (strcmp(k, "pinned") == 0) {
            lua_pushboolean(L, h->pinned);
            return 1;
        }
        return 0;
    }
    if (h->data == NULL) mem_error(L, "cuda.host: cuda.host was freed");
    size_t i = check_index(L, h, 2, "cuda.host");
    push_element(L, h->dtype, element_ptr(h, i));
    return 1;
}

static int host_newindex(lua_State *L) {
    gl_host *h = luaL_checkudata(L, 1, GL_HOST_T);
    if (lua_type(L, 2) == LUA_TSTRING)
        mem_error(L, "cuda.host: cannot assign field '%s' (only elements h[i] are writable)",
                   lua_tostring(L, 2));
    if (h->data == NULL) mem_error(L, "cuda.host: cuda.host was freed");
    size_t i = check_index(L, h, 2, "cuda.host");
    unsigned char elem[8];
    char what[48];
    snprintf(what, sizeof what, "element %zu", i + 1);
    check_value(L, 3, h->dtype, elem, "cuda.host", what);
    memcpy(element_ptr(h, i), elem, gl_dtype_size(h->dtype));
    return 0;
}

static int host_len(lua_State *L) {
    gl_host *h = luaL_checkudata(L, 1, GL_HOST_T);
    if (h->data == NULL) mem_error(L, "cuda.host: cuda.host was freed");
    lua_pushinteger(L, (lua_Integer)h->numel);
    return 1;
}

/* "cuda.host f32[4] pinned (16 B) {0, 1, 2, 3}", at most 8 values shown. */
static int host_tostring(lua_State *L) {
    gl_host *h = luaL_checkudata(L, 1, GL_HOST_T);
    char type[160], size[32];
    format_type(type, sizeof type, h->dtype, h->ndim, h->shape);
    if (h->data == NULL) {
        lua_pushfstring(L, "cuda.host %s (freed)", type);
        return 1;
    }
    format_bytes(size, sizeof size, h->nbytes);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "cuda.host %s%s (%s) {", type, h->pinned ? " pinned" : "", size);
    luaL_addvalue(&b);
    size_t shown = h->numel < 8 ? h->numel : 8;
    for (size_t i = 0; i < shown; i++) {
        if (i) luaL_addstring(&b, ", ");
        if (h->data == NULL) break; /* an allocation above ran a finalizer that freed it */
        push_element(L, h->dtype, element_ptr(h, i));
        char num[40];
        if (lua_isinteger(L, -1)) snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, -1));
        else snprintf(num, sizeof num, "%.7g", lua_tonumber(L, -1));
        lua_pop(L, 1);
        luaL_addstring(&b, num);
    }
    if (shown < h->numel) luaL_addstring(&b, ", ...");
    luaL_addchar(&b, '}');
    luaL_pushresult(&b);
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
    gl_array *a = luaL_testudata(L, idx, GL_ARRAY_T);
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
    view a = check_view(L, 1, fn), b = check_view(L, 2, fn);
    if (a.numel != b.numel)
        mem_error(L, "%s: element counts differ (%zu and %zu)", fn, a.numel, b.numel);
    double atol = 0, rtol = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        static const char *const known[] = {"atol", "rtol", NULL};
        gl_check_known_fields(L, 3, known, fn);
        atol = gl_opt_num_field(L, 3, "atol", 0, fn);
        rtol = gl_opt_num_field(L, 3, "rtol", 0, fn);
        if (atol < 0 || rtol < 0) mem_error(L, "%s: atol and rtol must not be negative", fn);
    }
    if (a.data == NULL || b.data == NULL) gl_require_gpu(L, fn);
    /* from here on nothing may raise until the host copies are freed */
    CUresult r = CUDA_SUCCESS;
    bool allocated = fetch_device(L, 1, &a, &r);
    if (allocated && r == CUDA_SUCCESS) allocated = fetch_device(L, 2, &b, &r);
    compare_result c = {0, 0, 0, 0};
    if (allocated && r == CUDA_SUCCESS) c = compare_views(&a, &b, atol, rtol);
    free(a.owned);
    free(b.owned);
    if (!allocated) mem_error(L, "%s: cannot allocate host memory to copy a device array into", fn);
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
