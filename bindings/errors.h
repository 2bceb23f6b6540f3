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
#include <stdbool.h>

/* The message is formatted with the C library's printf (so %zu, %lld and %.17g work). */
__attribute__((noreturn, format(printf, 4, 5)))
void gl_argerror(lua_State *L, int arg, const char *fn, const char *fmt, ...);

/* An error that is no bad argument (out of host memory, a value that cannot be converted, ...):
 * "file:line: " and the printf-formatted message, as luaL_error writes it but with the C
 * library's formats and no length limit. A bad argument goes through gl_argerror instead. */
__attribute__((noreturn, format(printf, 2, 3)))
void gl_error(lua_State *L, const char *fmt, ...);

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

/* ---- CUDA and NVRTC failures ------------------------------------------------------------
 * raise a cuda.error object: a table with the metatable "cuda.error" (getmetatable(e) answers
 * "cuda.error"; cuda.is_error(e) tells) and the fields
 *     code (number), name ("CUDA_ERROR_ILLEGAL_ADDRESS", "NVRTC_ERROR_COMPILATION"), fn (the
 *     gpulab function), call (the driver step, when there is one), poisoned (the context is
 *     lost), launches (the launches in flight, as the message lists them), message
 * tostring(e) is e.message, the text a string error had before (with the caller's "file:line:"
 * where luaL_error would have put one); `..` and the string methods (e:find) work on it. */

/* Pushes a new cuda.error with the string at index `message` and the fields given (name and
 * fn may be NULL). The caller adds further fields and raises it. */
void gl_push_error(lua_State *L, int message, int code, const char *name, const char *fn, bool poisoned);
/* True for a value made by gl_push_error. Runs no Lua code. */
bool gl_is_error(lua_State *L, int idx);
/* Pushes the message of the cuda.error at idx (tostring's text) and returns it; runs no Lua
 * code. For reporting an error outside protected mode. */
const char *gl_error_message(lua_State *L, int idx);
/* Creates the class and adds cuda.is_error to the table at the top of the stack. */
void gl_open_errors(lua_State *L);

/* The type name for messages: a userdata's (or table's) __name string, else the Lua type name
 * ("no value" for a missing argument). Runs no Lua code; may leave the name on the stack. */
const char *gl_typename(lua_State *L, int idx);

#endif
