/* tensormap.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_tensormap(lua_State *L) { (void)L; }
