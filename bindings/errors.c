/*
 * errors.c — argument errors on lauxlib's rules (see errors.h for the format).
 */
#include "errors.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gl_typename(lua_State *L, int idx) {
    int t = luaL_getmetafield(L, idx, "__name");
    if (t == LUA_TSTRING) return lua_tostring(L, -1); /* left on the stack: the caller raises */
    if (t != LUA_TNIL) lua_pop(L, 1);
    if (lua_type(L, idx) == LUA_TLIGHTUSERDATA) return "light userdata";
    return luaL_typename(L, idx);
}

/* Pushes the printf-formatted text. Arguments that point into Lua strings stay valid: nothing
 * is popped, and a failed allocation raises before anything is written. */
static const char *push_vformat(lua_State *L, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        va_end(again);
        return lua_pushliteral(L, "(message could not be formatted)");
    }
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, again);
    va_end(again);
    luaL_pushresultsize(&b, (size_t)n);
    return lua_tostring(L, -1);
}

/* luaL_argerror's decision: self is not counted when the running C function was called with
 * method syntax (its call site's namewhat is "method"). */
static int visible_arg_number(lua_State *L, int arg) {
    lua_Debug ar;
    if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.namewhat &&
        strcmp(ar.namewhat, "method") == 0)
        return arg - 1;
    return arg;
}

/* Raises with the detail at the stack top. */
__attribute__((noreturn)) static void raise_arg(lua_State *L, int arg, const char *fn) {
    const char *detail = lua_tostring(L, -1);
    int n = visible_arg_number(L, arg);
    if (n == 0)
        luaL_error(L, "calling '%s' on bad self (%s)", fn, detail);
    else
        luaL_error(L, "bad argument #%d to '%s' (%s)", n, fn, detail);
    abort(); /* not reached: luaL_error does not return */
}

void gl_argerror(lua_State *L, int arg, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    push_vformat(L, fmt, ap);
    va_end(ap);
    raise_arg(L, arg, fn);
}

void gl_freederror(lua_State *L, int arg, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *detail = push_vformat(L, fmt, ap);
    va_end(ap);
    if (arg == 1 && strchr(fn, ':')) luaL_error(L, "%s: %s", fn, detail);
    raise_arg(L, arg, fn);
}

void gl_typeerror(lua_State *L, int arg, const char *fn, const char *expected) {
    const char *got = gl_typename(L, arg);
    lua_pushfstring(L, "%s expected, got %s", expected, got);
    raise_arg(L, arg, fn);
}

void gl_fielderror(lua_State *L, int arg, const char *fn, const char *field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *detail = push_vformat(L, fmt, ap);
    va_end(ap);
    lua_pushfstring(L, "field '%s': %s", field, detail);
    raise_arg(L, arg, fn);
}

void gl_fieldtypeerror(lua_State *L, int arg, const char *fn, const char *field, int value,
                       const char *expected) {
    value = lua_absindex(L, value);
    const char *got = gl_typename(L, value);
    lua_pushfstring(L, "field '%s': %s expected, got %s", field, expected, got);
    raise_arg(L, arg, fn);
}
