/* isolate.c — placeholder until cuda.run_isolated is written. */
#include "gpulab.h"
void gl_open_isolate(lua_State *L) { (void)L; }
