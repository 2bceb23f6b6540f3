/*
 * stream.h — stream capture hooks (stream.c) for bindings that submit work.
 *
 * While s:capture(fn) runs, submitted work is recorded into a graph instead of running. The
 * graph must keep every object that work reads or writes alive, and each replay must mark
 * their uses, so a binding that submits work calls gl_capture_note() for each such object
 * (the kernel and each cuda.array / cuda.tensormap argument of a launch, the arrays of a copy).
 */
#ifndef GPULAB_STREAM_H
#define GPULAB_STREAM_H

#include <stdbool.h>

#include <lua.h>


/* True between the begin and the end of a capture (cheap: a flag). */
bool gl_capture_active(void);

/* Keeps the object at idx alive as long as the graph being captured, and marks its use on
 * each replay. Known types: cuda.array, cuda.host, cuda.tensormap, cuda.kernel, cuda.module,
 * cuda.event, cuda.graph; other values are only kept alive. No-op without an active capture. */
void gl_capture_note(lua_State *L, int idx);

#endif
