/*
 * check.h — the one path for CUDA failures (driver.c). `fn` names the Lua function
 * ("k:launch", "cuda.array"), `what` the argument or step ("argument 3", "cuMemAlloc"). Raises
 *     fn: what: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory
 * and, for execution errors, appends the launches since the last good sync and poisons the
 * context (sticky errors: every later GPU call raises one "context poisoned" error).
 */
#ifndef GPULAB_CHECK_H
#define GPULAB_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>
#include <lua.h>

#define GL_CHECK(L, call, fn, what)                                                             \
    do {                                                                                        \
        CUresult gl_r_ = (call);                                                                \
        if (gl_r_ != CUDA_SUCCESS) gl_raise_cuda((L), gl_r_, (fn), (what));                     \
    } while (0)

__attribute__((noreturn)) void gl_raise_cuda(lua_State *L, CUresult r, const char *fn,
                                             const char *what);
/* The same cuda.error (errors.h) for a failure whose message the caller wrote: the string at
 * the top of the stack. `call` (the driver step) may be NULL. Does not poison the context. */
__attribute__((noreturn)) void gl_raise_cuda_message(lua_State *L, CUresult r, const char *fn,
                                                     const char *call);
/* Writes "CUDA_ERROR_X (n)" into buf (works without a driver too). */
const char *gl_cuda_error_name(CUresult r, char *buf, size_t len);
bool gl_is_sticky_error(CUresult r);

#endif
