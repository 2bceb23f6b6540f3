/* module.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_module(lua_State *L) { (void)L; }
