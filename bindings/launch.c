/* launch.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_launch(lua_State *L) { (void)L; }
