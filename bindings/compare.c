/*
 * compare.c — cuda.compare(a, b, {atol=, rtol=}): how far two arrays of any kind and dtype are
 * apart, element by element, for checking a GPU result against a reference.
 */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "context.h"
#include "driver.h"
#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "memory.h"
#include "objects.h"
#include "options.h"
#include "results.h"

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
    gl_mem_ref m = gl_check_mem(L, idx, fn);
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
            if (isnan(rel)) rel = INFINITY; /* inf against -inf, or against a finite value: inf/inf */
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
    gl_set_number_field(L, "max_abs", c->max_abs);
    gl_set_number_field(L, "max_rel", c->max_rel);
    gl_set_integer_field(L, "mismatches", (lua_Integer)c->mismatches);
    if (c->first_bad) gl_set_integer_field(L, "first_bad", (lua_Integer)c->first_bad);
    gl_set_boolean_field(L, "ok", c->mismatches == 0);
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
        atol = gl_raw_opt_num(L, 3, "atol", 0, fn);
        rtol = gl_raw_opt_num(L, 3, "rtol", 0, fn);
        if (atol < 0 || rtol < 0)
            gl_fielderror(L, 3, fn, atol < 0 ? "atol"
                          : "rtol", "must not be negative, got %g", atol < 0 ? atol : rtol);
    }
    if (!gl_test_host(L, 1) || !gl_test_host(L, 2)) gl_require_gpu(L, fn);
    view a = check_view(L, 1, fn), b = check_view(L, 2, fn);
    if (a.numel != b.numel)
        gl_argerror(L, 2, fn, "element counts differ (%zu and %zu)", a.numel, b.numel);
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

void gl_open_compare(lua_State *L) {
    lua_pushcfunction(L, l_compare);
    lua_setfield(L, -2, "compare");
}
