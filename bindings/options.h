/*
 * options.h — readers for the option tables the bindings take (defined in cuda.c).
 *
 * `t` is the options table's stack index: a bad field is reported against that argument, in
 * errors.h's format, e.g.
 *     bad argument #1 to 'cuda.stream' (field 'priority': integer expected, got string)
 * A missing or nil field gives the default.
 *
 * Every field is read raw, as the launch configuration is: a script's __index on an options table
 * runs no code inside a binding, where it could free an object the binding holds (part:stream with
 * an __index that called part:free() crashed the process before).
 */
#ifndef GPULAB_OPTIONS_H
#define GPULAB_OPTIONS_H

#include <stdbool.h>

#include <lua.h>

/* Pushes t[name], read raw, and returns its type; nil when t is no table. */
int gl_rawgetfield(lua_State *L, int t, const char *name);
/* The type of t[name], read raw, pushing nothing: LUA_TNIL for a field not given. */
int gl_rawfieldtype(lua_State *L, int t, const char *name);
/* Optional field readers. A value of another type raises "field 'name': integer expected, got
 * string" (number, boolean, string likewise); a number that is no integer "field 'name': integer
 * expected, got 1.5"; NaN "field 'name': number expected, got NaN". Ranges are the caller's. */
lua_Integer gl_opt_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *fn);
double gl_opt_num_field(lua_State *L, int t, const char *name, double def, const char *fn);
bool gl_opt_bool_field(lua_State *L, int t, const char *name, bool def, const char *fn);
/* The returned string stays valid while table t holds it. */
const char *gl_opt_str_field(lua_State *L, int t, const char *name, const char *def, const char *fn);
/* Raises "unknown field 'x' (known: a, b, c)" for a string key of table t not in `known`
 * (NULL-ended; compared with its length, so "arch\0x" is no "arch"), and "unexpected number key
 * in the options table (known: a, b, c)" for a key that is no string. */
void gl_check_known_fields(lua_State *L, int t, const char *const known[], const char *fn);

#endif
