/*
 * context.h — the current device and its lazily created primary context (driver.c).
 */
#ifndef GPULAB_CONTEXT_H
#define GPULAB_CONTEXT_H

#include <stdbool.h>

#include <cuda.h>

#include <lua.h>

/* Makes sure the driver is open, the primary context of the current device is current and
 * the context is not poisoned; raises "fn: ..." otherwise. Every GPU entry point calls it. */
void gl_require_gpu(lua_State *L, const char *fn);
/* Opens the driver, or raises the cuda.error "fn: no CUDA driver: ..." (code
 * CUDA_ERROR_NO_DEVICE (100) when there is no libcuda gpulab can use, cuInit's code when that
 * fails); the text is the string this error was before it became a cuda.error. */
void gl_require_driver(lua_State *L, const char *fn);
/* True once a context exists and is not poisoned: finalizers use it before touching handles. */
bool gl_context_usable(void);
/* The current device ordinal (0 until cuda.device(i) changes it). */
int gl_current_device(void);
/* Makes device `ordinal` current (retains its primary context). Raises on failure. */
void gl_select_device(lua_State *L, int ordinal, const char *fn);
/* The primary context of device `ordinal`, retained once per process (the first call retains
 * it; it is not made current). Raises on failure. */
CUcontext gl_device_context(lua_State *L, int ordinal, const char *fn);
/* The same without retaining or raising: NULL when that context was never retained. */
CUcontext gl_device_context_retained(int ordinal);
/* Devices gpulab keeps a context slot for (ordinals 0..GL_MAX_DEVICES-1). */
#define GL_MAX_DEVICES 64
/* gl_poisoned_reason() is part of the public interface: gpulab.h. */

#endif
