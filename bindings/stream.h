/*
 * stream.h — stream capture hooks (stream.c) for bindings that submit work, and the stream and
 * graph functions cuda.measure calls.
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

/* The stream and graph functions other bindings call as C (cuda.measure's graph regime makes a
 * stream, captures fn into a graph, replays and frees both): each is the lua_CFunction behind
 * the Lua call of the same meaning, pushed with lua_pushcfunction and called with its Lua
 * arguments. */
int gl_stream_new(lua_State *L);     /* cuda.stream([opts]) */
int gl_stream_free(lua_State *L);    /* s:free() (also __gc and __close) */
int gl_stream_capture(lua_State *L); /* s:capture(fn) */
int gl_graph_launch(lua_State *L);   /* g:launch([stream]) */
int gl_graph_free(lua_State *L);     /* g:free() (also __gc and __close) */
lua_Integer gl_graph_node_count(lua_State *L, int idx); /* g.nodes of the graph at idx */

#endif
