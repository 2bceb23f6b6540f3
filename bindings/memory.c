/* memory.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_memory(lua_State *L) { (void)L; }
#include "objects.h"
gl_array *gl_test_array(lua_State *L, int idx) { (void)L; (void)idx; return NULL; }
gl_array *gl_check_array(lua_State *L, int idx, const char *fn) { luaL_error(L, "%s: argument #%d: no arrays yet", fn, idx); return NULL; }
gl_host *gl_test_host(lua_State *L, int idx) { (void)L; (void)idx; return NULL; }
gl_host *gl_check_host(lua_State *L, int idx, const char *fn) { luaL_error(L, "%s: argument #%d: no host arrays yet", fn, idx); return NULL; }
