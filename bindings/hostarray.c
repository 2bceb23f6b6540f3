/*
 * hostarray.c — host arrays (cuda.host): pageable or pinned allocation, elements h[i] (1-based),
 * h:fill, h:iota, h:random (a fixed generator, so results are reproducible), h:totable,
 * h:copy_from (copy.c), views, the text of an array and its release. The operations on host
 * arrays (transpose, arithmetic, reductions, matmul) are in hostops.c.
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
#include "memory.h"
#include "objects.h"
#include "options.h"

#define HOST_ALIGN 64 /* cache line; also enough for any vector load a test might do */

gl_host *gl_test_host(lua_State *L, int idx) {
    gl_host *h = gl_testudata(L, idx, GL_HOST_T);
    return h && h->data ? h : NULL;
}

gl_host *gl_check_host(lua_State *L, int idx, const char *fn) {
    gl_host *h = gl_testudata(L, idx, GL_HOST_T);
    if (h == NULL)
        gl_typeerror(L, idx, fn, "cuda.host");
    if (h->data == NULL) gl_freederror(L, idx, fn, "cuda.host was freed");
    return h;
}

static void host_release(gl_host *h) {
    if (h->data == NULL) return;
    h->data = NULL;
    gl_live.hosts--;
    gl_block_release(h->block, &h->use);
    h->block = NULL;
}

static int host_free(lua_State *L) {
    gl_host *h = gl_testudata(L, 1, GL_HOST_T);
    if (h) host_release(h);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Host arrays
 * ------------------------------------------------------------------------------------------ */
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
    gl_dtype t = gl_check_dtype(L, 1, fn);
    gl_shape_spec s;
    gl_check_shape(L, 2, t, &s, fn);
    bool pinned = false;
    if (!lua_isnoneornil(L, 3)) {
        if (!lua_istable(L, 3)) gl_typeerror(L, 3, fn, "table");
        static const char *const known[] = {"pinned", NULL};
        gl_check_known_fields(L, 3, known, fn);
        pinned = gl_raw_opt_bool(L, 3, "pinned", false, fn);
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
    gl_mem_block *b = gl_block_new(pinned ? GL_BLOCK_PINNED : GL_BLOCK_PAGEABLE, s.nbytes);
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
    gl_host *h = gl_check_host(L, 1, fn);
    unsigned char elem[8];
    gl_check_value(L, 2, h->dtype, elem, fn, NULL);
    gl_fill_pattern(h->data, h->numel, gl_dtype_size(h->dtype), elem);
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

/* The same for an integer array's start or step: a number with an integer value. */
static lua_Integer opt_strict_integer(lua_State *L, int idx, lua_Integer def, gl_dtype t, const char *fn) {
    if (lua_isnoneornil(L, idx)) return def;
    opt_strict_number(L, idx, 0, fn);
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint) gl_argerror(L, idx, fn, "integer expected for the %s array, got %s", gl_dtype_name(t),
                            lua_tostring(L, idx));
    return v;
}

/* h:iota([start[, step]]): h[i] = start + (i-1)*step (defaults 0 and 1). Integer dtypes need
 * integer start and step, and every value must fit the dtype (checked at both ends, since the
 * sequence is monotonic). Float dtypes compute each value in double, then round once. */
static int host_iota(lua_State *L) {
    const char *fn = "h:iota";
    gl_host *h = gl_check_host(L, 1, fn);
    if (gl_dtype_is_bool(h->dtype)) gl_argerror(L, 1, fn, "a bool array has no sequence (use fill or random)");
    size_t esize = gl_dtype_size(h->dtype);
    if (gl_dtype_is_float(h->dtype)) {
        double start = opt_strict_number(L, 2, 0, fn), step = opt_strict_number(L, 3, 1, fn);
        if (isnan(start) || isnan(step)) gl_argerror(L, isnan(start) ? 2 : 3, fn, "number expected, got NaN");
        for (size_t i = 0; i < h->numel; i++)
            gl_dtype_store_double(h->dtype, element_ptr(h, i), start + (double)i * step);
    } else {
        lua_Integer start = opt_strict_integer(L, 2, 0, h->dtype, fn);
        lua_Integer step = opt_strict_integer(L, 3, 1, h->dtype, fn);
        /* the argument a bad last value is blamed on: the step, else the start, else the array */
        int last_arg = !lua_isnoneornil(L, 3) ? 3 : !lua_isnoneornil(L, 2) ? 2 : 1;
        lua_Integer last;
        if (__builtin_mul_overflow(step, (lua_Integer)(h->numel - 1), &last) ||
            __builtin_add_overflow(last, start, &last))
            gl_argerror(L, last_arg, fn, "the sequence overflows 64-bit integers");
        unsigned char tmp[8];
        char msg[160];
        for (int end = 0; end < 2; end++) {
            lua_pushinteger(L, end ? last : start);
            const char *bad = gl_encode_value(L, -1, h->dtype, tmp, msg, sizeof msg);
            lua_pop(L, 1);
            if (bad) gl_argerror(L, end ? last_arg : 2, fn, "%s value %s", end ? "last" : "first", bad);
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
    o->seed = (uint64_t)gl_raw_opt_int(L, 2, "seed", 0, fn);
    o->has_lo = gl_raw_field(L, 2, "lo") != LUA_TNIL;
    o->has_hi = gl_raw_field(L, 2, "hi") != LUA_TNIL;
    bool has_p = gl_raw_field(L, 2, "p") != LUA_TNIL;
    lua_pop(L, 3);
    if (gl_dtype_is_bool(t)) {
        if (o->has_lo || o->has_hi)
            gl_fielderror(L, 2, fn, o->has_lo ? "lo"
                          : "hi", "a bool array takes {p=} (the chance of true), not lo/hi");
        o->p = gl_raw_opt_num(L, 2, "p", 0.5, fn);
        if (!(o->p >= 0 && o->p <= 1)) gl_fielderror(L, 2, fn, "p", "must be 0 <= p <= 1, got %g", o->p);
        return;
    }
    if (has_p) gl_fielderror(L, 2, fn, "p", "is for bool arrays (this one is %s)", gl_dtype_name(t));
    if (gl_dtype_is_float(t)) {
        o->lo_f = gl_raw_opt_num(L, 2, "lo", 0, fn);
        o->hi_f = gl_raw_opt_num(L, 2, "hi", 1, fn);
    } else {
        o->lo_i = gl_raw_opt_int(L, 2, "lo", 0, fn);
        o->hi_i = gl_raw_opt_int(L, 2, "hi", 100, fn);
    }
}

static int host_random(lua_State *L) {
    const char *fn = "h:random";
    gl_dtype t = gl_check_host(L, 1, fn)->dtype;
    random_opts o = {0, false, false, 0, 1, 0.5, 0, 100};
    read_random_opts(L, t, &o, fn);
    gl_host *h = gl_check_host(L, 1, fn); /* the options were read: nothing runs Lua from here */
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
        bool lo_ok = gl_int_fits(h->dtype, lo, false);
        if (!lo_ok || !gl_int_fits(h->dtype, hi - 1, false))
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
    gl_host *h = gl_check_host(L, 1, "h:totable");
    if (h->numel > INT32_MAX) gl_argerror(L, 1, "h:totable", "%zu elements do not fit a Lua table", h->numel);
    size_t n = h->numel;
    lua_createtable(L, (int)n, 0); /* may run a finalizer that frees h: check it again */
    h = gl_check_host(L, 1, "h:totable");
    for (size_t i = 0; i < n && i < h->numel; i++) {
        gl_push_element(L, h->dtype, element_ptr(h, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int host_copy_from(lua_State *L) {
    gl_check_host(L, 1, "h:copy_from");
    return gl_copy_from(L, "h:copy_from");
}

/* ------------------------------------------------------------------------------------------
 * Host views (as d:view, array.c)
 * ------------------------------------------------------------------------------------------ */
static int host_view(lua_State *L) {
    const char *fn = "h:view";
    gl_host *h = gl_check_host(L, 1, fn);
    gl_shape_spec s;
    size_t off = gl_check_view_args(L, h->numel, h->dtype, &s, fn);
    gl_host *v = gl_newuserdatauv(L, sizeof *v, 1);
    memset(v, 0, sizeof *v);
    h = gl_check_host(L, 1, fn); /* the allocation may have run a finalizer that freed it */
    v->dtype = h->dtype;
    gl_set_view_shape(&v->ndim, v->shape, &v->numel, &v->nbytes, &s);
    v->data = (unsigned char *)h->data + off * gl_dtype_size(h->dtype);
    v->pinned = h->pinned;
    v->is_view = true;
    v->block = h->block;
    gl_block_hold(v->block);
    gl_live.hosts++;
    gl_setmetatable(L, GL_HOST_T);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* A new zeroed pageable host array on the stack top (for results). */
gl_host *gl_push_new_host(lua_State *L, gl_dtype t, int ndim, const int64_t *dims, const char *fn) {
    gl_shape_spec s = {ndim, {0}, 1, 0, t};
    memcpy(s.dims, dims, (size_t)ndim * sizeof *dims);
    for (int i = 0; i < ndim; i++) s.numel *= (size_t)dims[i];
    s.nbytes = s.numel * gl_dtype_size(t);
    gl_host *h = gl_newuserdatauv(L, sizeof *h, 0);
    memset(h, 0, sizeof *h);
    h->dtype = t;
    gl_set_view_shape(&h->ndim, h->shape, &h->numel, &h->nbytes, &s);
    gl_mem_block *b = gl_block_new(GL_BLOCK_PAGEABLE, s.nbytes);
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

/* The methods of this file; hostops.c adds the operations (transpose, arithmetic, reductions). */
static const luaL_Reg host_methods[] = {
    {"fill", host_fill},       {"iota", host_iota},           {"random", host_random},
    {"totable", host_totable}, {"copy_from", host_copy_from}, {"view", host_view},
    {"free", host_free},       {NULL, NULL},
};

/* h.pinned; the other fields are both kinds' (elements.c). */
static int field_pinned(lua_State *L) {
    const gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    if (h->data == NULL) gl_freed_field(L, GL_HOST_T, "pinned");
    lua_pushboolean(L, h->pinned);
    return 1;
}

static const luaL_Reg host_fields[] = {
    {"dtype", gl_field_dtype}, {"shape", gl_field_shape},   {"ndim", gl_field_ndim},
    {"numel", gl_field_numel}, {"nbytes", gl_field_nbytes}, {"pinned", field_pinned},
    {NULL, NULL},
};

/* h[i] reads an element; a name is a method or a field (the class's __methods and __fields). */
static int host_index(lua_State *L) {
    gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    if (lua_type(L, 2) == LUA_TSTRING) {
        gl_class_lookup(L, 1, 2);
        return 1;
    }
    if (h->data == NULL) gl_error(L, "cuda.host: cuda.host was freed");
    size_t i = check_index(L, h, 2, "cuda.host");
    gl_push_element(L, h->dtype, element_ptr(h, i));
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
    gl_check_value(L, 3, h->dtype, elem, "cuda.host", what);
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
    gl_format_type(type, sizeof type, h->dtype, h->ndim, h->shape);
    if (h->data == NULL) {
        lua_pushfstring(L, "cuda.host %s (freed)", type);
        return 1;
    }
    gl_format_bytes(size, sizeof size, h->nbytes);
    /* Everything is read into C memory first: the Lua allocations below may run a finalizer
     * that frees h. */
    char text[8 * 40 + 16] = "";
    size_t shown = h->numel < 8 ? h->numel : 8, len = 0;
    for (size_t i = 0; i < shown; i++) {
        gl_push_element(L, h->dtype, element_ptr(h, i)); /* no allocation: numbers and booleans */
        char num[40];
        if (lua_isboolean(L, -1)) snprintf(num, sizeof num, "%s", lua_toboolean(L, -1) ? "true" : "false");
        else if (lua_isinteger(L, -1)) snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, -1));
        else snprintf(num, sizeof num, "%.7g", lua_tonumber(L, -1));
        lua_pop(L, 1);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i ? ", " : "", num);
    }
    if (shown < h->numel) snprintf(text + len, sizeof text - len, ", ...");
    lua_pushfstring(L, "cuda.host %s%s%s (%s) {%s}", type, h->pinned ? " pinned" : "",
                    h->is_view ? " view" : "", size, text);
    return 1;
}

static const luaL_Reg host_meta[] = {
    {"__index", host_index}, {"__newindex", host_newindex}, {"__len", host_len},
    {"__tostring", host_tostring}, {"__gc", host_free}, {"__close", host_free},
    {NULL, NULL},
};

void gl_open_hosts(lua_State *L) {
    gl_new_class(L, GL_HOST_T, host_meta, host_methods, host_fields);
    lua_pushcfunction(L, l_host);
    lua_setfield(L, -2, "host");
}
