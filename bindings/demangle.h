/*
 * demangle.h — a kernel's entry name back to C++ (demangle.c), for naming kernels and their
 * parameters in messages. Pure C: no Lua and no driver header, so unit tests and the fuzzer use it
 * directly.
 */
#ifndef GPULAB_DEMANGLE_H
#define GPULAB_DEMANGLE_H

#include <stddef.h>

/* Reads `mangled` (NUL-terminated, any bytes) as the Itanium C++ ABI name of a function, in the
 * subset NVRTC gives __global__ functions: builtin types, pointers and references, const and
 * volatile, namespaces (the anonymous one too), class and enum types, templates with type,
 * integer, bool and pack arguments, and substitutions. Writes the qualified name
 * ("ns::scale<2>") and then each parameter's type ("const float*"), each NUL-terminated, one
 * after another into out (cap bytes). Returns the number of parameters; -1 when `mangled` is
 * not such a name, uses a part of the grammar outside the subset, or does not fit (out then
 * holds the empty string, when cap > 0). Never reads past the NUL, never recurses without
 * bound. */
int gl_demangle(const char *mangled, char *out, size_t cap);

#endif
