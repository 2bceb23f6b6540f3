/*
 * elements.c — the elements of device and host arrays as scripts write them: dtype names, shapes
 * and sizes (with overflow checks), element values between Lua and bytes, the shape of a view,
 * the fields both kinds answer, and their text ("f32[4x3]", "4.0 KiB").
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "memory.h"
#include "objects.h"

/* ------------------------------------------------------------------------------------------
 * Shapes and sizes
 * ------------------------------------------------------------------------------------------ */
gl_dtype gl_check_dtype(lua_State *L, int idx, const char *fn) {
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

void gl_check_shape(lua_State *L, int idx, gl_dtype dtype, gl_shape_spec *s, const char *fn) {
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
void gl_format_bytes(char *buf, size_t len, size_t n) {
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
void gl_format_type(char *buf, size_t len, gl_dtype t, int ndim, const int64_t *dims) {
    int n = snprintf(buf, len, "%s[", gl_dtype_name(t));
    for (int i = 0; i < ndim && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%lld", i ? "x" : "", (long long)dims[i]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, "]");
}

/* ------------------------------------------------------------------------------------------
 * Element values: Lua <-> element bytes
 * ------------------------------------------------------------------------------------------ */
void gl_push_element(lua_State *L, gl_dtype t, const void *p) {
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
const char *gl_encode_value(lua_State *L, int idx, gl_dtype t, void *out, char *msg, size_t len) {
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

/* gl_encode_value, raising "bad argument #N to 'fn' (reason)" for argument idx, or "fn: what:
 * reason" for a value that is no argument (h[i] = v names the element). */
void gl_check_value(lua_State *L, int idx, gl_dtype t, void *out, const char *fn, const char *what) {
    char msg[160];
    if (gl_encode_value(L, idx, t, out, msg, sizeof msg) == NULL) return;
    if (what == NULL) gl_argerror(L, idx, fn, "%s", msg);
    gl_error(L, "%s: %s: %s", fn, what, msg);
}

void gl_fill_pattern(void *data, size_t numel, size_t esize, const void *elem) {
    unsigned char *p = data;
    for (size_t i = 0; i < numel; i++) memcpy(p + i * esize, elem, esize);
}

/* Whether value v (an int64, or a u64 bit pattern when from_u64) fits integer dtype t. */
bool gl_int_fits(gl_dtype t, int64_t v, bool from_u64) {
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(t, &min, &umax);
    if (from_u64 && v < 0) return (uint64_t)v <= umax;
    return v >= min && (v < 0 || (uint64_t)v <= umax);
}

/* ------------------------------------------------------------------------------------------
 * Views: x:view(first, count | {dims}) is elements first .. first+numel-1 of x (1-based) as a
 * new array of that shape. It shares x's memory (gl_mem_block), keeps x alive through its user
 * value, and keeps the memory alive even after x:free(): each of them holds a reference.
 * ------------------------------------------------------------------------------------------ */
size_t gl_check_view_args(lua_State *L, size_t parent_numel, gl_dtype t, gl_shape_spec *s,
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
    gl_check_shape(L, 3, t, s, fn);
    if (s->numel > parent_numel - off)
        gl_argerror(L, 3, fn, "elements %lld..%llu are past the end (the array has %zu)", first,
                    (unsigned long long)off + (unsigned long long)s->numel, parent_numel);
    return off;
}

void gl_set_view_shape(int *ndim, int64_t *shape, size_t *numel, size_t *nbytes, const gl_shape_spec *s) {
    *ndim = s->ndim;
    memcpy(shape, s->dims, sizeof s->dims);
    *numel = s->numel;
    *nbytes = s->nbytes;
}

/* ------------------------------------------------------------------------------------------
 * The fields both kinds answer (their classes' __fields getters): dtype, shape, numel, nbytes,
 * ndim. A getter runs with the object at 1, under the class's __index, which proved its class.
 * ------------------------------------------------------------------------------------------ */
void gl_freed_field(lua_State *L, const char *tname, const char *field) {
    luaL_where(L, 2); /* the script reading the field: level 1 is the class's __index */
    lua_pushfstring(L, "%s: field '%s': %s was freed", tname, field, tname);
    lua_concat(L, 2);
    lua_error(L);
    abort(); /* not reached: lua_error does not return */
}

typedef struct layout {
    gl_dtype dtype;
    int ndim;
    const int64_t *shape;
    size_t numel, nbytes;
} layout;

/* The layout of the device or host array at 1; raises naming `field` for a freed one. */
static layout field_layout(lua_State *L, const char *field) {
    const gl_array *a = gl_testudata(L, 1, GL_ARRAY_T);
    if (a) {
        if (a->ptr == 0) gl_freed_field(L, GL_ARRAY_T, field);
        return (layout){a->dtype, a->ndim, a->shape, a->numel, a->nbytes};
    }
    const gl_host *h = gl_checkudata(L, 1, GL_HOST_T);
    if (h->data == NULL) gl_freed_field(L, GL_HOST_T, field);
    return (layout){h->dtype, h->ndim, h->shape, h->numel, h->nbytes};
}

int gl_field_dtype(lua_State *L) {
    lua_pushstring(L, gl_dtype_name(field_layout(L, "dtype").dtype));
    return 1;
}

int gl_field_shape(lua_State *L) {
    layout l = field_layout(L, "shape");
    push_shape(L, l.ndim, l.shape);
    return 1;
}

int gl_field_numel(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)field_layout(L, "numel").numel);
    return 1;
}

int gl_field_nbytes(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)field_layout(L, "nbytes").nbytes);
    return 1;
}

int gl_field_ndim(lua_State *L) {
    lua_pushinteger(L, field_layout(L, "ndim").ndim);
    return 1;
}
