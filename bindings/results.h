/*
 * results.h — setting the fields of a table a binding returns (cuda.compare's result, a device's
 * description, cuda.version, cuda.stats, ...): each sets field k of the table at the top of the
 * stack, so a result reads as one line per field instead of a push and a lua_setfield each.
 */
#ifndef GPULAB_RESULTS_H
#define GPULAB_RESULTS_H

#include <stdbool.h>

#include <lua.h>

static inline void gl_set_integer_field(lua_State *L, const char *k, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static inline void gl_set_number_field(lua_State *L, const char *k, lua_Number v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

/* v NULL sets the field to nil: a new table leaves it out. */
static inline void gl_set_string_field(lua_State *L, const char *k, const char *v) {
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static inline void gl_set_boolean_field(lua_State *L, const char *k, bool v) {
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

#endif
