/* stream.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_stream(lua_State *L) { (void)L; }
