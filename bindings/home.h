/*
 * home.h — where the `cuda` module finds gpulab's own files, and what it holds in place of the
 * host's functions when Lua 5.4's own interpreter loaded it as cuda.so (home.c).
 */
#ifndef GPULAB_HOME_H
#define GPULAB_HOME_H

#include <lua.h>

/* Sets `home` on the cuda table on top of the stack: $GPULAB_HOME when it names a folder; else
 * the data folder beside the file the code was loaded from (module_file, cuda.so as require found
 * it: <dir>/<the install's module-to-data path>; NULL: the executable, <dir>/../share/gpulab);
 * else the source folder the build was configured from; else the configured install folder. */
void gl_open_home(lua_State *L, const char *module_file);

/* What a program without gpulab's host gets (lua5.4's require "cuda"): the global `cuda` when
 * no global has that name, and cuda.run_isolated raising an error that names it (gpulab's host
 * replaces it with the real one). */
void gl_open_hostless(lua_State *L);

#endif
