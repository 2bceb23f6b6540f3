/*
 * array.c — device arrays (cuda.array): allocation, d:fill, d:copy_from (copy.c), views of an
 * array (d:view) and of memory another object owns (a module's variables), the fields and the
 * text of an array, and its release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "context.h"
#include "driver.h"
#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "lifetime.h"
#include "memory.h"
#include "objects.h"
#include "observe.h"
#include "stream.h"

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

static void array_release(gl_array *a) {
    if (a->ptr == 0) return;
    if (a->release_view) { /* a view: its owner frees the memory */
        a->ptr = 0;
        a->release_view(a, a->view_owner);
        return;
    }
    a->ptr = 0;
    gl_live.arrays--;
    gl_block_release(a->block, &a->use);
    a->block = NULL;
}

/* __gc, __close and :free() (never raise; a wrong type is ignored). */
static int array_free(lua_State *L) {
    gl_array *a = gl_testudata(L, 1, GL_ARRAY_T);
    if (a) array_release(a);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Device arrays
 * ------------------------------------------------------------------------------------------ */
static int l_array(lua_State *L) {
    const char *fn = "cuda.array";
    gl_dtype t = gl_check_dtype(L, 1, fn);
    gl_shape_spec s;
    gl_check_shape(L, 2, t, &s, fn);
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
    gl_mem_block *b = gl_block_new(GL_BLOCK_DEVICE, s.nbytes);
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
    gl_dtype t = gl_check_dtype(L, dtype_idx, fn);
    gl_shape_spec s;
    gl_check_shape(L, shape_idx, t, &s, fn);
    if (s.nbytes > limit) {
        char type[160];
        gl_format_type(type, sizeof type, t, s.ndim, s.dims);
        gl_argerror(L, shape_idx, fn, "%s needs %zu bytes, but '%s' holds %zu bytes", type, s.nbytes, what,
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
    gl_array *a = gl_check_array(L, 1, fn);
    unsigned char elem[8] = {0};
    gl_check_value(L, 2, a->dtype, elem, fn, NULL);
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
        gl_fill_pattern(stage, a->numel, esize, elem);
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
    gl_check_array(L, 1, "d:copy_from");
    return gl_copy_from(L, "d:copy_from");
}

static int array_tostring(lua_State *L) {
    gl_array *a = gl_checkudata(L, 1, GL_ARRAY_T);
    char type[160], size[32];
    gl_format_type(type, sizeof type, a->dtype, a->ndim, a->shape);
    if (a->ptr == 0) {
        lua_pushfstring(L, "cuda.array %s (freed)", type);
        return 1;
    }
    gl_format_bytes(size, sizeof size, a->nbytes);
    char addr[32];
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)a->ptr);
    lua_pushfstring(L, "cuda.array %s%s (%s) %s", type, a->is_view ? " view" : "", size, addr);
    return 1;
}

static int array_view(lua_State *L) {
    const char *fn = "d:view";
    gl_array *a = gl_check_array(L, 1, fn);
    gl_shape_spec s;
    size_t off = gl_check_view_args(L, a->numel, a->dtype, &s, fn);
    gl_array *v = gl_newuserdatauv(L, sizeof *v, 1);
    memset(v, 0, sizeof *v);
    a = gl_check_array(L, 1, fn); /* the allocation may have run a finalizer that freed it */
    v->dtype = a->dtype;
    gl_set_view_shape(&v->ndim, v->shape, &v->numel, &v->nbytes, &s);
    v->ptr = a->ptr + off * gl_dtype_size(a->dtype);
    v->device = a->device;
    v->is_view = true;
    v->block = a->block;
    if (v->block) gl_block_hold(v->block);
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

/* d.ptr; the other fields are both kinds' (elements.c). Device memory has no d[i]: a copy to a
 * host array reads it. */
static int field_ptr(lua_State *L) {
    const gl_array *a = gl_checkudata(L, 1, GL_ARRAY_T);
    if (a->ptr == 0) gl_freed_field(L, GL_ARRAY_T, "ptr");
    lua_pushinteger(L, (lua_Integer)a->ptr);
    return 1;
}

static const luaL_Reg array_fields[] = {
    {"ptr", field_ptr},      {"dtype", gl_field_dtype}, {"shape", gl_field_shape},
    {"ndim", gl_field_ndim}, {"numel", gl_field_numel}, {"nbytes", gl_field_nbytes},
    {NULL, NULL},
};

static const luaL_Reg array_meta[] = {
    {"__tostring", array_tostring}, {"__gc", array_free}, {"__close", array_free}, {NULL, NULL},
};

void gl_open_arrays(lua_State *L) {
    gl_new_class(L, GL_ARRAY_T, array_meta, array_methods, array_fields);
    lua_pushcfunction(L, l_array);
    lua_setfield(L, -2, "array");
}
