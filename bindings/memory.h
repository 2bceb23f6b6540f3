/*
 * memory.h — what the files behind cuda.array, cuda.host and cuda.compare share:
 *   memory.c     the allocation behind an array and its views, option tables read raw, and the
 *                registration of the three
 *   elements.c   dtype names, shapes and sizes, element values between Lua and bytes
 *   copy.c       x:copy_from between any two arrays
 *   array.c      device arrays (cuda.array) and their views
 *   hostarray.c  host arrays (cuda.host): elements, fill, iota, random, views
 *   hostops.c    the operations on host arrays: transpose, arithmetic, apply, reductions, matmul
 *   compare.c    cuda.compare
 * Other bindings see the arrays only through objects.h.
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
#ifndef GPULAB_MEMORY_H
#define GPULAB_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "dtype.h"
#include "lifetime.h"
#include "objects.h"

/* ---- memory.c: the allocation behind arrays (its layout: objects.h) ------------------------ */
/* A block with one holder and no memory yet (the caller allocates it); NULL when out of memory. */
gl_mem_block *gl_block_new(gl_block_kind kind, size_t nbytes);
/* One more holder: a view. */
void gl_block_hold(gl_mem_block *b);
/* One holder lets go; the memory goes once the work recorded in u is complete and no other
 * holder is left. b NULL (memory gpulab did not allocate): only the recorded uses go. */
void gl_block_release(gl_mem_block *b, gl_use *u);

/* Options read raw (no __index or __pairs runs). gl_raw_field pushes the field and returns its
 * type; the readers raise naming the field of the options table at argument t. */
int gl_raw_field(lua_State *L, int t, const char *name);
lua_Integer gl_raw_opt_int(lua_State *L, int t, const char *name, lua_Integer def, const char *fn);
double gl_raw_opt_num(lua_State *L, int t, const char *name, double def, const char *fn);
bool gl_raw_opt_bool(lua_State *L, int t, const char *name, bool def, const char *fn);

/* Each adds its functions and class to the `cuda` table at the stack top. */
void gl_open_arrays(lua_State *L);  /* array.c */
void gl_open_hosts(lua_State *L);   /* hostarray.c */
void gl_open_hostops(lua_State *L); /* hostops.c: methods of cuda.host, after gl_open_hosts */
void gl_open_compare(lua_State *L); /* compare.c */

/* ---- elements.c ---------------------------------------------------------------------------- */
typedef struct gl_shape_spec {
    int ndim;
    int64_t dims[GL_MAX_DIMS];
    size_t numel, nbytes;
    gl_dtype dtype;
} gl_shape_spec;
/* The dtype name at idx ("f32"); raises naming the known ones. */
gl_dtype gl_check_dtype(lua_State *L, int idx, const char *fn);
/* The shape at idx (a count or a table of dimensions, read raw) for dtype, into *s. */
void gl_check_shape(lua_State *L, int idx, gl_dtype dtype, gl_shape_spec *s, const char *fn);
/* "4.0 KiB" and "f32[4x3]" */
void gl_format_bytes(char *buf, size_t len, size_t n);
void gl_format_type(char *buf, size_t len, gl_dtype t, int ndim, const int64_t *dims);
/* Pushes the element of dtype t at p: a boolean, an integer, or a number. */
void gl_push_element(lua_State *L, gl_dtype t, const void *p);
/* The value at idx as an element of dtype t, into out: NULL, or the reason it does not fit,
 * formatted into msg. */
const char *gl_encode_value(lua_State *L, int idx, gl_dtype t, void *out, char *msg, size_t len);
/* gl_encode_value, raising for argument idx, or naming `what` for a value that is no argument. */
void gl_check_value(lua_State *L, int idx, gl_dtype t, void *out, const char *fn, const char *what);
void gl_fill_pattern(void *data, size_t numel, size_t esize, const void *elem);
/* Whether v (an int64, or a u64 bit pattern when from_u64) fits integer dtype t. */
bool gl_int_fits(gl_dtype t, int64_t v, bool from_u64);
/* x:view(first, count | shape) (arguments 2 and 3): the shape into *s; returns the offset. */
size_t gl_check_view_args(lua_State *L, size_t parent_numel, gl_dtype t, gl_shape_spec *s,
                          const char *fn);
void gl_set_view_shape(int *ndim, int64_t *shape, size_t *numel, size_t *nbytes, const gl_shape_spec *s);
/* The __fields getters both classes share (the object at 1): d.dtype, d.shape, d.ndim, d.numel,
 * d.nbytes. */
int gl_field_dtype(lua_State *L);
int gl_field_shape(lua_State *L);
int gl_field_ndim(lua_State *L);
int gl_field_numel(lua_State *L);
int gl_field_nbytes(lua_State *L);
/* A field of a freed array: raises "file:line: cuda.array: field 'dtype': cuda.array was freed"
 * at the script's line, for a getter running under the class's __index. */
__attribute__((noreturn)) void gl_freed_field(lua_State *L, const char *tname, const char *field);

/* ---- copy.c -------------------------------------------------------------------------------- */
typedef struct gl_mem_ref {
    gl_array *dev;  /* exactly one of dev/host is set */
    gl_host *host;
} gl_mem_ref;
/* The device or host array at idx, not freed. */
gl_mem_ref gl_check_mem(lua_State *L, int idx, const char *fn);
/* x:copy_from(src[, stream | options]) once the method has checked x (argument 1): returns x. */
int gl_copy_from(lua_State *L, const char *fn);

/* ---- hostarray.c --------------------------------------------------------------------------- */
gl_host *gl_test_host(lua_State *L, int idx); /* NULL if not a host array (freed ones included) */
gl_host *gl_check_host(lua_State *L, int idx, const char *fn);
/* A new zeroed pageable host array on the stack top (for results). */
gl_host *gl_push_new_host(lua_State *L, gl_dtype t, int ndim, const int64_t *dims, const char *fn);

#endif
