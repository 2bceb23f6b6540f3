/* tensormap.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_tensormap(lua_State *L) { (void)L; }
#include "objects.h"
gl_tensormap *gl_test_tensormap(lua_State *L, int idx) { (void)L; (void)idx; return NULL; }
