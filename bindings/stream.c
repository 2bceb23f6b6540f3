/* stream.c — placeholder until this binding is written. */
#include "gpulab.h"
void gl_open_stream(lua_State *L) { (void)L; }
#include "objects.h"
gl_stream *gl_test_stream(lua_State *L, int idx) { (void)L; (void)idx; return NULL; }
gl_stream_track *gl_opt_stream_track(lua_State *L, int idx, const char *fn) {
    (void)L; (void)idx; (void)fn; return gl_default_track();
}
