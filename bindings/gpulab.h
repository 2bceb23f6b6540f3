/*
 * gpulab.h — the bindings library's whole interface to a program that embeds it (host/ uses
 * nothing else). bindings/ knows CUDA and never includes host/: what the host adds (the
 * --watch dependency file, cuda.run_isolated, cuda.home) it sets through the calls below or on
 * the table luaopen_cuda returns.
 */
#ifndef GPULAB_H
#define GPULAB_H

#include <lua.h>

/* Opens the `cuda` module: pushes its table. */
int luaopen_cuda(lua_State *L);

/* Called with the path of every file a compile reads: the source file of cuda.compile_file
 * (even when it fails to compile) and every header the compile cache key followed. NULL
 * (the default) turns it off; while it is NULL no key is computed for it. */
typedef void (*gl_compile_observer)(const char *path, void *ctx);
void gl_set_compile_observer(gl_compile_observer fn, void *ctx);

/* Non-NULL once a sticky error was seen: the text every later GPU call raises. */
const char *gl_poisoned_reason(void);

#endif
