/*
 * errors.h — the one way gpulab reports a bad argument, on lauxlib's rules.
 *
 * Every message reads
 *     bad argument #N to 'fn' (what is wrong)
 * with the caller's "file:line:" in front, as luaL_argerror writes it. `fn` is the name the
 * API contract uses ("cuda.array", "d:copy_from", "k:launch"), so the message names the
 * function as the documentation does whatever the script called it. `arg` is the stack index of
 * the argument; N is counted as luaL_argerror counts it: when the running function was called
 * as a method (obj:fn(...)), self is not counted, and a bad self reads
 *     calling 'fn' on bad self (what is wrong)
 * A field of an options table is reported against the table's argument:
 *     bad argument #2 to 'd:copy_from' (field 'count': integer expected, got string)
 * Type mismatches read "X expected, got Y" with Y a userdata's __name ("cuda.host").
 *
 * Argument errors are plain strings; CUDA and NVRTC failures raise cuda.error objects
 * (gl_raise_cuda and friends in gpulab.h).
 */
#ifndef GPULAB_ERRORS_H
#define GPULAB_ERRORS_H

#include <lua.h>

/* The message is formatted with the C library's printf (so %zu, %lld and %.17g work). */
__attribute__((noreturn, format(printf, 4, 5)))
void gl_argerror(lua_State *L, int arg, const char *fn, const char *fmt, ...);

/* "EXPECTED expected, got TYPE", TYPE being the argument's gl_typename. */
__attribute__((noreturn))
void gl_typeerror(lua_State *L, int arg, const char *fn, const char *expected);

/* "field 'FIELD': ..." for the options table at argument `arg`. */
__attribute__((noreturn, format(printf, 5, 6)))
void gl_fielderror(lua_State *L, int arg, const char *fn, const char *field, const char *fmt, ...);

/* "field 'FIELD': EXPECTED expected, got TYPE" for the value at stack index `value`. */
__attribute__((noreturn))
void gl_fieldtypeerror(lua_State *L, int arg, const char *fn, const char *field, int value,
                       const char *expected);

/* An argument of the right type that can no longer be used (freed). The object a method works
 * on (argument 1 of a function named "x:m") is no bad argument: as liolib's "attempt to use a
 * closed file" it reads "fn: ..."; any other argument raises as gl_argerror. */
__attribute__((noreturn, format(printf, 4, 5)))
void gl_freederror(lua_State *L, int arg, const char *fn, const char *fmt, ...);

/* The type name for messages: a userdata's (or table's) __name string, else the Lua type name
 * ("no value" for a missing argument). Runs no Lua code; may leave the name on the stack. */
const char *gl_typename(lua_State *L, int idx);

#endif
