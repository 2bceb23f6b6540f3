/*
 * errors.c — argument errors on lauxlib's rules (see errors.h for the format).
 */
#include "errors.h"
#include "identity.h"
#include "results.h"

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

void gl_error(lua_State *L, const char *fmt, ...) {
    luaL_where(L, 1);
    va_list ap;
    va_start(ap, fmt);
    push_vformat(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    lua_error(L);
    abort(); /* not reached: lua_error does not return */
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

/* ------------------------------------------------------------------------------------------
 * cuda.error objects
 * ------------------------------------------------------------------------------------------ */
#define ERROR_T "cuda.error"

/* Pushes the message of the error object at idx: always a string (a script may have replaced
 * the field). */
static const char *push_message(lua_State *L, int idx) {
    lua_pushliteral(L, "message");
    if (lua_rawget(L, idx) == LUA_TSTRING) return lua_tostring(L, -1);
    lua_pop(L, 1);
    return lua_pushliteral(L, ERROR_T);
}

/* idx must hold a cuda.error (gl_is_error). */
const char *gl_error_message(lua_State *L, int idx) { return push_message(L, lua_absindex(L, idx)); }

static int error_tostring(lua_State *L) {
    if (!gl_is_error(L, 1)) gl_typeerror(L, 1, "cuda.error.__tostring", ERROR_T); /* called by hand */
    push_message(L, 1);
    return 1;
}

/* Replaces the error object at idx (if it is one) by its message. */
static void message_in_place(lua_State *L, int idx) {
    if (!gl_is_error(L, idx)) return;
    push_message(L, idx);
    lua_replace(L, idx);
}

/* "text" .. e and e .. "text": what the string message gave before. */
static int error_concat(lua_State *L) {
    lua_settop(L, 2);
    message_in_place(L, 1);
    message_in_place(L, 2);
    lua_concat(L, 2);
    return 1;
}

/* e:find(...), e:match(...): the string function (upvalue 1) applied to the message. */
static int error_string_method(lua_State *L) {
    if (lua_gettop(L) >= 1) message_in_place(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* e.find, e.match: the loaded string library's function of that name, applied to the message;
 * looked up on each read, so the string library a script loads or replaces is the one used. */
static int error_index(lua_State *L) {
    if (lua_type(L, 2) != LUA_TSTRING) return 0;
    lua_pushliteral(L, LUA_LOADED_TABLE);
    if (lua_rawget(L, LUA_REGISTRYINDEX) != LUA_TTABLE) return 0; /* a script can replace it */
    lua_pushliteral(L, "string");
    if (lua_rawget(L, -2) != LUA_TTABLE) return 0;
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) != LUA_TFUNCTION) return 0;
    lua_pushcclosure(L, error_string_method, 1);
    return 1;
}

/* Fills the methods table at idx, for readers (REPL completion, help()), with one method per
 * function of the string library as it is when the class is made (read raw: a script may have
 * replaced package.loaded); none when there is no string library. An error answers through
 * error_index, which finds the same functions while the string library stays the same. */
static void add_string_methods(lua_State *L, int methods) {
    lua_pushliteral(L, LUA_LOADED_TABLE);
    if (lua_rawget(L, LUA_REGISTRYINDEX) == LUA_TTABLE) {
        lua_pushliteral(L, "string");
        if (lua_rawget(L, -2) == LUA_TTABLE) {
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TFUNCTION) {
                    lua_pushvalue(L, -2);
                    lua_insert(L, -2);
                    lua_pushcclosure(L, error_string_method, 1);
                    lua_rawset(L, methods);
                } else {
                    lua_pop(L, 1);
                }
            }
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* Pushes the error class, made on first use (errors can be raised before the cuda module opens)
 * and kept in the private store: a script replacing registry["cuda.error"] changes nothing, and
 * one that reaches the private store makes the next error start a new class. An error is a
 * table whose fields (code, name, fn, ...) are its own; its methods are the string library's,
 * applied to the message, named in the class's __methods (gl_new_class) for readers. */
static void push_error_class(lua_State *L) {
    if (gl_private_get(L, ERROR_T) == LUA_TTABLE) return;
    lua_pop(L, 1);
    static const luaL_Reg meta[] = {{"__tostring", error_tostring}, {"__concat", error_concat},
                                    {"__index", error_index}, {NULL, NULL}};
    gl_new_class(L, ERROR_T, meta, NULL, NULL);
    gl_getmetatable(L, ERROR_T); /* just made: no script has reached it yet */
    lua_pushliteral(L, ERROR_T); /* getmetatable(e) == "cuda.error"; the class stays ours */
    lua_setfield(L, -2, "__metatable");
    lua_pushliteral(L, "__methods");
    lua_rawget(L, -2);
    add_string_methods(L, lua_gettop(L));
    lua_pop(L, 1);
}

bool gl_is_error(lua_State *L, int idx) {
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return false;
    push_error_class(L);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

void gl_push_error(lua_State *L, int message, int code, const char *name, const char *fn, bool poisoned) {
    message = lua_absindex(L, message);
    lua_createtable(L, 0, 9);
    gl_set_integer_field(L, "code", code);
    gl_set_string_field(L, "name", name); /* NULL: no field */
    gl_set_string_field(L, "fn", fn);
    gl_set_boolean_field(L, "poisoned", poisoned);
    lua_pushvalue(L, message);
    lua_setfield(L, -2, "message");
    push_error_class(L);
    gl_lua_setmetatable(L, -2);
}

static int l_is_error(lua_State *L) {
    lua_pushboolean(L, gl_is_error(L, 1));
    return 1;
}

void gl_open_errors(lua_State *L) {
    push_error_class(L);
    lua_pop(L, 1);
    lua_pushcfunction(L, l_is_error);
    lua_setfield(L, -2, "is_error");
}
