/*
 * dtype.h — element types of arrays: names and sizes, the f16 and bf16
 * conversions, and loads/stores of one element of any dtype (dtype.c). Pure C: no Lua and no
 * driver header is reachable from here (tools/include_check.lua keeps it so), so unit tests and
 * other bindings can use it directly.
 */
#ifndef GPULAB_DTYPE_H
#define GPULAB_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gl_dtype {
    GL_F16, GL_BF16, GL_F32, GL_F64,
    GL_I8, GL_I16, GL_I32, GL_I64,
    GL_U8, GL_U16, GL_U32, GL_U64,
    GL_BOOL,              /* one byte: 0 is false, anything else reads as true */
    GL_DTYPE_COUNT
} gl_dtype;
/* Returns -1 for an unknown name. */
int gl_dtype_from_name(const char *name);
/* The same for a counted name (a Lua string): one with an embedded NUL is unknown. */
int gl_dtype_from_lname(const char *name, size_t len);
const char *gl_dtype_name(gl_dtype t);
size_t gl_dtype_size(gl_dtype t);

/* IEEE binary16 and bfloat16 <-> float/double. Encoding rounds to nearest, ties to even,
 * straight from the double (no double rounding when the source is a double); values past the
 * largest finite number round to infinity; NaN becomes a quiet NaN with its sign and the top
 * payload bits kept. Decoding is exact. */
uint16_t gl_f16_from_double(double x);
uint16_t gl_bf16_from_double(double x);
uint16_t gl_f16_from_f32(float x);
uint16_t gl_bf16_from_f32(float x);
float gl_f16_to_f32(uint16_t h);
float gl_bf16_to_f32(uint16_t h);

bool gl_dtype_is_float(gl_dtype t);
bool gl_dtype_is_bool(gl_dtype t);
bool gl_dtype_is_integer(gl_dtype t); /* i8..u64 (bool is neither integer nor float) */
bool gl_dtype_is_signed(gl_dtype t); /* integer dtypes only */
/* Smallest and largest value of an integer dtype (u64's top is carried in *umax; bool: 0..1). */
void gl_dtype_int_range(gl_dtype t, int64_t *min, uint64_t *umax);

/* One element at p (any alignment) as a double. u64 values above 2^53 lose precision; a bool
 * reads as 0 or 1 (any non-zero byte is true). */
double gl_dtype_load_double(gl_dtype t, const void *p);
/* One element of an integer dtype as its exact 64-bit pattern: signed types sign-extended,
 * unsigned zero-extended (u64 above 2^63 comes back as the same bits in an int64_t). */
int64_t gl_dtype_load_bits(gl_dtype t, const void *p);
/* Stores a double into a float dtype (rounded as above for f16/bf16, as C does for f32), or
 * into bool (non-zero, NaN included, is true). */
void gl_dtype_store_double(gl_dtype t, void *p, double x);
/* Stores the low bytes of an integer into an integer dtype (the caller range-checks); into
 * bool, non-zero is true. */
void gl_dtype_store_bits(gl_dtype t, void *p, int64_t v);

#endif
