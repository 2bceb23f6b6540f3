/*
 * wait.h — waiting for the GPU with a deadline, and the one watchdog thread (driver.c).
 * No wait in gpulab blocks without a deadline the script chose or one of these bounds.
 */
#ifndef GPULAB_WAIT_H
#define GPULAB_WAIT_H

#include <stdbool.h>

#include <cuda.h>
#include <lua.h>

/* Waits for `stream` (NULL = whole context) with a deadline in seconds (<0: no deadline).
 * Raises "fn: timed out after Xs; pending: ..." or the CUDA error of the work. */
void gl_wait(lua_State *L, CUstream stream, double timeout_s, const char *fn);
/* Waits for the whole context with a deadline (<0: none) without raising: true when done
 * (*res: the sync's result), false when the deadline passed. One watchdog thread does the
 * blocking cuCtxSynchronize; without it, every stream is polled until the deadline. */
bool gl_ctx_sync_deadline(double timeout_s, CUresult *res);
/* True while a context sync asked of the watchdog has not finished (a timed-out cuda.sync whose
 * work still runs): a stream capture begun now would be invalidated by that sync. */
bool gl_watchdog_pending(void);
/* Ends an idle watchdog and waits for it (the Lua state is closing); one still waiting in the
 * driver is left alone. */
void gl_watchdog_stop(void);
/* Raises "fn: timed out after t s waiting for the GPU; <launches in flight> ...". */
__attribute__((noreturn)) void gl_raise_timeout(lua_State *L, const char *fn, double t);

#endif
