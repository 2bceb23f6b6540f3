/* dtype.c — dtype names and sizes, f16/bf16 rounding, element loads and stores. */
#include "dtype.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[GL_DTYPE_COUNT] = {
    [GL_F16] = {"f16", 2}, [GL_BF16] = {"bf16", 2}, [GL_F32] = {"f32", 4}, [GL_F64] = {"f64", 8},
    [GL_I8] = {"i8", 1},   [GL_I16] = {"i16", 2},   [GL_I32] = {"i32", 4}, [GL_I64] = {"i64", 8},
    [GL_U8] = {"u8", 1},   [GL_U16] = {"u16", 2},   [GL_U32] = {"u32", 4}, [GL_U64] = {"u64", 8},
    [GL_BOOL] = {"bool", 1},
};

int gl_dtype_from_name(const char *name) {
    if (name == NULL) return -1;
    for (int i = 0; i < GL_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) return i;
    return -1;
}

int gl_dtype_from_lname(const char *name, size_t len) {
    if (name == NULL || strlen(name) != len) return -1; /* "f32\0x" is not f32 */
    return gl_dtype_from_name(name);
}

const char *gl_dtype_name(gl_dtype t) {
    return (unsigned)t < GL_DTYPE_COUNT ? dtypes[t].name : "?";
}

size_t gl_dtype_size(gl_dtype t) { return (unsigned)t < GL_DTYPE_COUNT ? dtypes[t].size : 0; }

bool gl_dtype_is_float(gl_dtype t) { return t <= GL_F64; }

bool gl_dtype_is_signed(gl_dtype t) { return t >= GL_I8 && t <= GL_I64; }

bool gl_dtype_is_bool(gl_dtype t) { return t == GL_BOOL; }

bool gl_dtype_is_integer(gl_dtype t) { return t >= GL_I8 && t <= GL_U64; }

void gl_dtype_int_range(gl_dtype t, int64_t *min, uint64_t *umax) {
    if (t == GL_BOOL) {
        *min = 0;
        *umax = 1;
        return;
    }
    unsigned bits = (unsigned)gl_dtype_size(t) * 8;
    if (gl_dtype_is_signed(t)) {
        *umax = (UINT64_C(1) << (bits - 1)) - 1;
        *min = -(int64_t)*umax - 1;
    } else {
        *umax = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        *min = 0;
    }
}

/* ------------------------------------------------------------------------------------------
 * Small floats. A finite |x| is split as n * quantum, where quantum is the spacing of the
 * target format around x (2^(e-mbits) for normal numbers, 2^(emin-mbits) below the normal
 * range). n and the remainder are exact in double, since scaling by a power of two is exact
 * and n < 2^(mbits+1) fits easily in 53 bits. Rounding n to even and adding the biased
 * exponent gives the bit pattern; a carry out of the mantissa lands in the exponent, which is
 * exactly the next binade (or infinity).
 * ------------------------------------------------------------------------------------------ */
static uint16_t small_float_from_double(double x, int ebits, int mbits) {
    const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    const uint32_t inf = ((1u << ebits) - 1) << mbits;
    const uint32_t sign = signbit(x) ? 1u << (ebits + mbits) : 0;
    if (isnan(x)) {
        uint64_t b;
        memcpy(&b, &x, sizeof b);
        uint32_t payload = (uint32_t)((b & 0xFFFFFFFFFFFFFULL) >> (52 - mbits));
        return (uint16_t)(sign | inf | (1u << (mbits - 1)) | payload);
    }
    double a = fabs(x);
    if (isinf(a)) return (uint16_t)(sign | inf);
    if (a == 0) return (uint16_t)sign;
    int e2;
    (void)frexp(a, &e2); /* a = f * 2^e2, f in [0.5, 1): the unbiased exponent is e2 - 1 */
    int e = e2 - 1;
    if (e > bias) return (uint16_t)(sign | inf);
    int qexp = (e < emin ? emin : e) - mbits;
    double q = ldexp(a, -qexp);
    double n = floor(q), rem = q - n;
    if (rem > 0.5 || (rem == 0.5 && fmod(n, 2.0) == 1.0)) n += 1;
    uint32_t bits = (uint32_t)n; /* subnormal: the mantissa itself (2^mbits = smallest normal) */
    if (e >= emin) bits += (uint32_t)(e + bias - 1) << mbits;
    if (bits >= inf) return (uint16_t)(sign | inf);
    return (uint16_t)(sign | bits);
}

uint16_t gl_f16_from_double(double x) { return small_float_from_double(x, 5, 10); }
uint16_t gl_bf16_from_double(double x) { return small_float_from_double(x, 8, 7); }
/* float -> double is exact, so this is the single rounding of the float itself. */
uint16_t gl_f16_from_f32(float x) { return gl_f16_from_double((double)x); }
uint16_t gl_bf16_from_f32(float x) { return gl_bf16_from_double((double)x); }

static float f32_from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

float gl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) /* Inf, or NaN kept quiet with its payload on top of the f32 mantissa */
        return f32_from_bits(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

float gl_bf16_to_f32(uint16_t h) {
    uint32_t b = (uint32_t)h << 16; /* bf16 is the top half of an f32 */
    if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffff)) b |= 0x400000u;
    return f32_from_bits(b);
}

/* ------------------------------------------------------------------------------------------
 * Element access (memcpy: host arrays may be viewed at any offset).
 * ------------------------------------------------------------------------------------------ */
#define LOAD(type) \
    do { type v_; memcpy(&v_, p, sizeof v_); return v_; } while (0)

double gl_dtype_load_double(gl_dtype t, const void *p) {
    switch (t) {
    case GL_F16: { uint16_t h; memcpy(&h, p, 2); return gl_f16_to_f32(h); }
    case GL_BF16: { uint16_t h; memcpy(&h, p, 2); return gl_bf16_to_f32(h); }
    case GL_F32: LOAD(float);
    case GL_F64: LOAD(double);
    case GL_I8: LOAD(int8_t);
    case GL_I16: LOAD(int16_t);
    case GL_I32: LOAD(int32_t);
    case GL_I64: LOAD(int64_t);
    case GL_U8: LOAD(uint8_t);
    case GL_U16: LOAD(uint16_t);
    case GL_U32: LOAD(uint32_t);
    case GL_U64: LOAD(uint64_t);
    case GL_BOOL: return *(const unsigned char *)p != 0;
    default: return NAN;
    }
}

int64_t gl_dtype_load_bits(gl_dtype t, const void *p) {
    switch (t) {
    case GL_I8: LOAD(int8_t);
    case GL_I16: LOAD(int16_t);
    case GL_I32: LOAD(int32_t);
    case GL_I64: LOAD(int64_t);
    case GL_U8: LOAD(uint8_t);
    case GL_U16: LOAD(uint16_t);
    case GL_U32: LOAD(uint32_t);
    case GL_U64: { uint64_t v; memcpy(&v, p, 8); return (int64_t)v; }
    case GL_BOOL: return *(const unsigned char *)p != 0;
    default: return 0;
    }
}
#undef LOAD

#define STORE(type, val) \
    do { type v_ = (type)(val); memcpy(p, &v_, sizeof v_); } while (0)

void gl_dtype_store_double(gl_dtype t, void *p, double x) {
    switch (t) {
    case GL_F16: STORE(uint16_t, gl_f16_from_double(x)); break;
    case GL_BF16: STORE(uint16_t, gl_bf16_from_double(x)); break;
    case GL_F32: STORE(float, x); break;
    case GL_F64: STORE(double, x); break;
    case GL_BOOL: STORE(uint8_t, x != 0); break; /* NaN != 0 too */
    default: break;
    }
}

void gl_dtype_store_bits(gl_dtype t, void *p, int64_t v) {
    switch (t) {
    case GL_I8: case GL_U8: STORE(uint8_t, (uint64_t)v); break;
    case GL_I16: case GL_U16: STORE(uint16_t, (uint64_t)v); break;
    case GL_I32: case GL_U32: STORE(uint32_t, (uint64_t)v); break;
    case GL_I64: case GL_U64: STORE(uint64_t, (uint64_t)v); break;
    case GL_BOOL: STORE(uint8_t, v != 0); break;
    default: break;
    }
}
#undef STORE
