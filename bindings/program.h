/*
 * program.h — what nvrtc.c shares about cuda.program tables with the bindings that read them
 * (sass.c: prog:resources, prog:sass).
 */
#ifndef GPULAB_PROGRAM_H
#define GPULAB_PROGRAM_H

#include <lua.h>

/* Raises a type error naming `fn` unless the value at idx is a cuda.program. */
void gl_check_program(lua_State *L, int idx, const char *fn);
/* Pushes the program's private record: report (ptxas's verbose lines), source, name, arch,
 * options, names, headers, cubin (the one compiled, whatever the script does to prog.cubin).
 * Returns its type: LUA_TNIL when there is none. */
int gl_program_private(lua_State *L, int prog);
/* Compiles the program's inputs again with one more NVRTC option (not through the cache) and
 * pushes the new program; raises like cuda.compile, naming fn. */
void gl_program_recompile(lua_State *L, int prog, const char *option, const char *fn);
/* prog:sass (sass.c), for a binding to call directly: a script can set its own `sass` key on a
 * program table, so the method is never looked up there. */
int gl_program_sass(lua_State *L);

#endif
