/*
 * options.h — readers for the option tables every binding takes (cuda.c).
 */
#ifndef GPULAB_OPTIONS_H
#define GPULAB_OPTIONS_H

#include <stdbool.h>

#include <lua.h>

/* Optional table field readers: raise "fn: option 'name' must be ..." on a wrong type. */
lua_Integer gl_opt_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *fn);
double gl_opt_num_field(lua_State *L, int t, const char *name, double def, const char *fn);
bool gl_opt_bool_field(lua_State *L, int t, const char *name, bool def, const char *fn);
/* The returned string stays valid while table t holds it. */
const char *gl_opt_str_field(lua_State *L, int t, const char *name, const char *def, const char *fn);
/* Raises "fn: unknown option 'x' (known: a, b, c)" for keys of table t not in `known` (NULL-ended). */
void gl_check_known_fields(lua_State *L, int t, const char *const known[], const char *fn);

#endif
