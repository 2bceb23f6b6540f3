/*
 * objects.h — the userdata types that more than one binding reads. Each is owned by one file
 * (named beside it), which alone creates, frees and prints it; others only use the check and test functions.
 */
#ifndef GPULAB_OBJECTS_H
#define GPULAB_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <lua.h>

#include "context.h"
#include "dtype.h"
#include "lifetime.h"

#define GL_MAX_DIMS 8

/* The allocation behind an array and all its views (memory.c): freed once the array and every
 * view of it were released and the work queued on each of them completed. Only the files of the
 * arrays (memory.h) read it. */
typedef enum gl_block_kind { GL_BLOCK_DEVICE, GL_BLOCK_PINNED, GL_BLOCK_PAGEABLE } gl_block_kind;
typedef struct gl_mem_block {
    gl_block_kind kind;
    CUdeviceptr dev;  /* GL_BLOCK_DEVICE */
    void *host;       /* GL_BLOCK_PINNED, GL_BLOCK_PAGEABLE */
    size_t nbytes;
    int device;       /* GL_BLOCK_DEVICE: the device whose context allocated it */
    int holders;      /* live arrays and views on it: the byte counts of cuda.stats() follow it */
    int refs;         /* holders plus released ones whose queued work may still run */
} gl_mem_block;

/* Device array "cuda.array" ------------------------------------------------------- array.c */
#define GL_ARRAY_T "cuda.array"
typedef struct gl_array {
    CUdeviceptr ptr;      /* 0 once freed; a view's is inside its parent's allocation */
    size_t nbytes, numel;
    gl_dtype dtype;
    int ndim;
    int64_t shape[GL_MAX_DIMS];
    gl_use use;           /* mark on every submission that reads or writes it */
    /* A view of memory another object owns (a module variable): never cuMemFree'd and not
     * counted in cuda.stats(); release_view(a, view_owner) runs once when it is freed. */
    void (*release_view)(struct gl_array *a, void *view_owner);
    void (*retain_view)(void *view_owner); /* a view of this view: the owner counts it too */
    void *view_owner;
    gl_mem_block *block;  /* shared with views; NULL for memory gpulab did not allocate */
    int device;           /* ordinal of the device whose context allocated it */
    bool is_view;         /* made by d:view (tostring says so, even at element 1) */
} gl_array;
/* Raise "bad argument #n to 'fn' (cuda.array expected, got X)" / "(cuda.array was freed)". */
gl_array *gl_check_array(lua_State *L, int idx, const char *fn);
gl_array *gl_test_array(lua_State *L, int idx); /* NULL if not an array (freed ones included) */
/* Pushes a cuda.array viewing `limit` bytes at `ptr` that another object owns: dtype and shape
 * from the stack values at dtype_idx and shape_idx, checked as cuda.array checks them; raises
 * naming both sizes when they need more than `limit` bytes of variable `what`. One uservalue
 * for the caller (to keep the owner alive). Checking the shape may run Lua code: callers
 * re-validate the owner afterwards. */
gl_array *gl_push_array_view(lua_State *L, int dtype_idx, int shape_idx, const char *fn,
                             CUdeviceptr ptr, size_t limit, const char *what,
                             void (*release_view)(gl_array *, void *), void *owner);

/* Host array "cuda.host" ------------------------------------------------------ hostarray.c */
#define GL_HOST_T "cuda.host"
typedef struct gl_host {
    void *data;           /* NULL once freed */
    size_t nbytes, numel;
    gl_dtype dtype;
    int ndim;
    int64_t shape[GL_MAX_DIMS];
    bool pinned;
    gl_use use;           /* async copies from/to pinned memory mark it */
    gl_mem_block *block;  /* shared with views */
    bool is_view;         /* made by h:view (tostring says so, even at element 1) */
} gl_host;

/* Stream "cuda.stream" ----------------------------------------------------------- stream.c */
#define GL_STREAM_T "cuda.stream"
typedef struct gl_stream {
    CUstream handle;      /* valid while track != NULL */
    gl_stream_track *track; /* NULL once freed */
    int priority;
    bool nonblocking;
    int device;           /* ordinal of the device whose context created it */
    /* Runs once when the stream is released, before its handle is destroyed: a partition's
     * streams tell its green context (partition.c). NULL for cuda.stream(). */
    void (*on_release)(struct gl_stream *s, void *arg);
    void *release_arg;
} gl_stream;
gl_stream *gl_test_stream(lua_State *L, int idx);
/* A stream over a handle another binding creates (partition.c): push the shell first (it reads
 * as a freed stream; uservalue 2 holds the object at owner_idx alive as long as the stream),
 * create the handle, then adopt it: false when out of host memory (h is then not taken). */
gl_stream *gl_push_stream_shell(lua_State *L, int owner_idx);
bool gl_stream_adopt(gl_stream *s, CUstream h, int priority, void (*on_release)(gl_stream *, void *),
                     void *arg);
/* Resolves an optional stream argument: nil/none -> the default stream's track. */
gl_stream_track *gl_opt_stream_track(lua_State *L, int idx, const char *fn);
/* The same for field `field` (its value at stack index `value`) of the options table at
 * argument t: errors name the field (errors.h). */
gl_stream_track *gl_opt_stream_field(lua_State *L, int t, int value, const char *field, const char *fn);

/* Tensor map "cuda.tensormap" -------------------------------------------------- tensormap.c */
#define GL_TENSORMAP_T "cuda.tensormap"
typedef struct gl_tensormap {
    CUtensorMap map;      /* 64-byte aligned, 128 bytes: passed by value to kernels */
    bool valid;           /* false once freed */
    gl_use use;
    const gl_array *array; /* the array it points into (kept alive by a uservalue), or NULL for
                              address= maps, which the script vouches for */
    CUdeviceptr array_ptr; /* array->ptr when encoded: differs (0) once the array was freed */
    int device;           /* ordinal of the device current when it was encoded */
} gl_tensormap;
gl_tensormap *gl_test_tensormap(lua_State *L, int idx);

/* Why a tensor map must not be used by new work: NULL when it may, else a phrase for the
 * message ("the cuda.tensormap was freed", "the cuda.array under the tensor map was freed").
 * Cheap: two loads and compares, for the launch paths. */
static inline const char *gl_tensormap_unusable(const gl_tensormap *tm) {
    if (!tm->valid) return "the cuda.tensormap was freed";
    if (tm->array && tm->array->ptr != tm->array_ptr)
        return "the cuda.array under the tensor map was freed";
    return NULL;
}

/* Device checks for work submitted on the current device (gl_current_device()): an object made
 * in another device's context is refused with a message naming both devices (arrays pass when
 * peer access to their device is on). Cheap: one compare; raises "bad argument #n to 'fn' (...)"
 * for the argument at stack index `arg` (errors.h). */
void gl_refuse_other_device(lua_State *L, const char *fn, int arg, const char *what, int device);
/* Arrays may also be on a device the current one has peer access to (peer.c, cuda.peer). */
void gl_check_array_on_device(lua_State *L, const gl_array *a, const char *fn, int arg);
static inline void gl_check_array_device(lua_State *L, const gl_array *a, const char *fn, int arg) {
    if (a->device != gl_current_device()) gl_check_array_on_device(L, a, fn, arg);
}
static inline void gl_check_tensormap_device(lua_State *L, const gl_tensormap *tm, const char *fn,
                                             int arg) {
    if (tm->device != gl_current_device())
        gl_refuse_other_device(L, fn, arg, "cuda.tensormap", tm->device);
}

#endif
