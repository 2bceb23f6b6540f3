/*
 * hostops.c — the operations on host arrays, references to check GPU results against:
 * h:transpose, element-wise h:add/sub/mul/div/scale/axpy, h:apply, the reductions h:sum/min/max/
 * h:dot, and h:matmul. They run on the host, in place or into a given array, and check every
 * operand before writing anything.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "memory.h"
#include "objects.h"
#include "options.h"

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
    gl_host *h = gl_check_host(L, 1, fn);
    if (h->ndim != 2)
        gl_argerror(L, 1, fn, "2-D array expected, got %d dimension%s (h:view(1, {rows, cols}) gives one)",
                    h->ndim, h->ndim == 1 ? "" : "s");
    int64_t out_shape[2] = {h->shape[1], h->shape[0]};
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        gl_push_new_host(L, h->dtype, 2, out_shape, fn);
        h = gl_check_host(L, 1, fn); /* the allocation may have run a finalizer */
    }
    gl_host *d = gl_check_host(L, 2, fn);
    if (d->dtype != h->dtype)
        gl_argerror(L, 2, fn, "dtype mismatch (destination %s, source %s)",
                    gl_dtype_name(d->dtype), gl_dtype_name(h->dtype));
    if (d->numel != h->numel || (d->ndim == 2 && (d->shape[0] != out_shape[0] || d->shape[1] != out_shape[1])))
        gl_argerror(L, 2, fn, "the result is %lldx%lld (%zu elements), the destination holds %zu",
                    (long long)out_shape[0], (long long)out_shape[1], h->numel, d->numel);
    if (host_overlap(d, h)) gl_argerror(L, 2, fn, "the destination overlaps the source");
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

/* v as a register of dtype t holds it (wrapped): a divisor the GPU's integer unit would see, so
 * that 10 / -1 into a u32 array divides by 4294967295, and 256 into a u8 array is a zero. */
static __int128 wrap_to(gl_dtype t, __int128 v) {
    unsigned char bits[8];
    gl_dtype_store_bits(t, bits, (int64_t)(uint64_t)(unsigned __int128)v);
    return load_int(t, bits);
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
    } else if (isfinite(o->f) && floor(o->f) == o->f && o->f >= -0x1p63 && o->f < 0x1p64) {
        /* every integral float a 64-bit dtype can hold: 2^63 .. 2^64 for u64 */
        o->i = o->f >= 0x1p63 ? (__int128)(uint64_t)o->f : (__int128)(int64_t)o->f;
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

/* Operand element i as the integer operation on h's dtype takes it: a divisor wrapped to that
 * dtype first (sums, differences and products come out the same wrapped or not). */
static __int128 int_operand(const gl_host *h, arith_op op, const operand *x, size_t i) {
    __int128 v = operand_i(x, i);
    return op == OP_DIV ? wrap_to(h->dtype, v) : v;
}

static void arith_int(gl_host *h, arith_op op, const operand *x, __int128 a) {
    size_t n = h->numel, es = gl_dtype_size(h->dtype);
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = (unsigned char *)h->data + i * es;
        __int128 r = apply_i(op, load_int(h->dtype, p), int_operand(h, op, x, i), a);
        gl_dtype_store_bits(h->dtype, p, (int64_t)(uint64_t)(unsigned __int128)r);
    }
}

/* h op= operand at x_idx; for OP_AXPY the scalar a is at a_idx. */
static int host_arith(lua_State *L, arith_op op, int a_idx, int x_idx, const char *fn) {
    gl_host *h = gl_check_host(L, 1, fn);
    if (gl_dtype_is_bool(h->dtype)) gl_argerror(L, 1, fn, "a bool array takes no arithmetic");
    operand alpha = {0};
    if (a_idx) check_scalar(L, a_idx, h->dtype, &alpha, fn, "the scale factor");
    operand x;
    if (!check_operand(L, x_idx, h, &x, fn))
        gl_error(L, "%s: cannot allocate host memory for a copy of the operand", fn);
    if (op == OP_DIV && !gl_dtype_is_float(h->dtype)) { /* refuse before writing anything */
        size_t zero = 0;
        for (size_t i = 0; i < h->numel && !zero; i++)
            if (int_operand(h, op, &x, i) == 0) zero = i + 1;
        if (zero) {
            free(x.copy);
            if (x.scalar && x.i != 0)
                gl_argerror(L, x_idx, fn, "integer division by zero (%lld wraps to 0 in a %s array)",
                            (long long)x.i, gl_dtype_name(h->dtype));
            if (x.scalar) gl_argerror(L, x_idx, fn, "integer division by zero");
            gl_argerror(L, x_idx, fn, "integer division by zero (operand element %zu)", zero);
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
    gl_host *h = gl_check_host(L, 1, fn);
    size_t len;
    const char *name = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &len) : NULL;
    const struct unary_fn *u = unary_fns;
    while (name && u->name && (strlen(u->name) != len || strcmp(u->name, name) != 0)) u++;
    if (name == NULL || u->name == NULL)
        gl_argerror(L, 2, fn, "unknown function %s%s%s (known: abs, neg, sqrt, exp, log, sin, cos, tanh, "
                              "relu, sigmoid, floor, ceil, rint, square, recip)",
                    name ? "'" : "", name ? name : gl_typename(L, 2), name ? "'" : "");
    if (!gl_dtype_is_float(h->dtype))
        gl_argerror(L, 1, fn, "float array expected, got %s", gl_dtype_name(h->dtype));
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
    gl_host *h = gl_check_host(L, 1, "h:sum");
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
    gl_host *h = gl_check_host(L, 1, fn);
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
    gl_host *h = gl_check_host(L, 1, fn), *x = gl_check_host(L, 2, fn);
    if (x->numel != h->numel)
        gl_argerror(L, 2, fn, "element counts differ (%zu and %zu)", h->numel, x->numel);
    if (gl_dtype_is_bool(h->dtype) || gl_dtype_is_bool(x->dtype))
        gl_argerror(L, gl_dtype_is_bool(h->dtype) ? 1 : 2, fn,
                    "bool arrays have no dot product (h:sum() counts the true elements)");
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
        gl_argerror(L, argno, fn, "2-D array expected, got %d dimension%s (h:view(1, {rows, cols}) gives one)",
                    h->ndim, h->ndim == 1 ? "" : "s");
    if (gl_dtype_is_bool(h->dtype)) gl_argerror(L, argno, fn, "bool arrays take no arithmetic");
}

/* v rounded to nearest (halves away from zero) and wrapped modulo 2^64, as an integer c gets it;
 * NaN and infinities, which have no integer, give 0. */
static int64_t round_and_wrap(double v) {
    if (!isfinite(v)) return 0;
    double w = fmod(round(v), 0x1p64); /* exact: |w| < 2^64 */
    uint64_t u = w < 0 ? (uint64_t)0 - (uint64_t)(-w) : (uint64_t)w;
    return (int64_t)u;
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
            if (int_out) gl_dtype_store_bits(c->dtype, out + j * es, round_and_wrap(v));
            else gl_dtype_store_double(c->dtype, out + j * es, v);
        }
    }
}

static int host_matmul(lua_State *L) {
    const char *fn = "h:matmul";
    double alpha = 1, beta = 0;
    gl_check_host(L, 1, fn);
    if (!lua_isnoneornil(L, 4)) { /* raw reads, before any data pointer is taken */
        if (!lua_istable(L, 4)) gl_typeerror(L, 4, fn, "table");
        static const char *const known[] = {"alpha", "beta", NULL};
        gl_check_known_fields(L, 4, known, fn);
        alpha = gl_raw_opt_num(L, 4, "alpha", 1, fn);
        beta = gl_raw_opt_num(L, 4, "beta", 0, fn);
    }
    gl_host *c = gl_check_host(L, 1, fn), *a = gl_check_host(L, 2, fn), *b = gl_check_host(L, 3, fn);
    check_matrix(L, a, 2, fn);
    check_matrix(L, b, 3, fn);
    check_matrix(L, c, 1, fn);
    size_t M = (size_t)a->shape[0], K = (size_t)a->shape[1], N = (size_t)b->shape[1];
    if ((size_t)b->shape[0] != K || (size_t)c->shape[0] != M || (size_t)c->shape[1] != N)
        gl_argerror(L, (size_t)b->shape[0] != K ? 3 : 1, fn,
                    "shapes do not fit: a %lldx%lld times b %lldx%lld into c %lldx%lld",
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

void gl_open_hostops(lua_State *L) {
    static const luaL_Reg ops[] = {
        {"transpose", host_transpose}, {"add", host_add},     {"sub", host_sub},   {"mul", host_mul},
        {"div", host_div},             {"scale", host_scale}, {"axpy", host_axpy}, {"apply", host_apply},
        {"sum", host_sum},             {"min", host_min},     {"max", host_max},   {"dot", host_dot},
        {"matmul", host_matmul},       {NULL, NULL},
    };
    gl_class_add_methods(L, GL_HOST_T, ops);
}
