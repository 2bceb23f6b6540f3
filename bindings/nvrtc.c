/* nvrtc.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_nvrtc(lua_State *L) { (void)L; }
void gl_push_nvrtc_version(lua_State *L) { lua_pushstring(L, "?"); }
