/* memory.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_memory(lua_State *L) { (void)L; }
