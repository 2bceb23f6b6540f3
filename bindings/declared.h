/*
 * declared.h — a kernel's parameters as its author declared them ("float* x"), for messages and
 * tostring (declared.c). Pure C: no Lua and no driver header.
 */
#ifndef GPULAB_DECLARED_H
#define GPULAB_DECLARED_H

#include <stddef.h>

#include "ptx.h"

/* The longest declaration kept ("const float* __restrict__ x"); a longer one counts as unknown. */
#define GL_DECL_MAX 160

/* The bytes gl_param_declarations needs for n parameters. */
size_t gl_declarations_cap(int n);

/* Writes n declarations, each NUL-terminated, one after another into out (cap bytes), for the
 * kernel whose entry name is `entry` and whose parameters (from its PTX or the driver) are
 * params[0..n-1]:
 *   - types from the entry's mangled name (gl_demangle), when it demangles to n parameters;
 *   - names, and for an extern "C" entry the types, from the one __global__ definition of that
 *     function in `src` (the source text NVRTC compiled; NULL when unknown), when it declares n
 *     parameters. Comments, literals and preprocessor lines are skipped; two definitions of the
 *     name (overloads, #if branches) or a parameter this reader does not follow (function
 *     pointers, arrays, attributes) leave the names out.
 * A type whose size contradicts its PTX parameter (a pointer that is not 8 bytes, an int that is
 * not 4) is dropped with its name. An unknown declaration is the empty string.
 * Returns how many declarations are known, or -1 when cap is less than gl_declarations_cap(n)
 * or memory ran out (out then holds n empty strings when cap allows). */
int gl_param_declarations(const char *entry, const char *src, size_t src_len, const gl_param *params,
                          int n, char *out, size_t cap);

#endif
