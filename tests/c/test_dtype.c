/*
 * test_dtype.c — dtype names and sizes, and the f16/bf16 conversions of bindings/dtype.c
 * checked against a reference computed here with plain double arithmetic:
 *   - every one of the 65,536 bit patterns of each format decodes to the value the format's
 *     definition gives, and (NaNs aside) encodes back to the same bits;
 *   - every midpoint between neighbouring values rounds to the even neighbour, and the
 *     nearest doubles/floats on either side round to the near neighbour;
 *   - millions of random floats round to the nearest value found by binary search;
 *   - NaN, infinity, overflow and the subnormal boundaries.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"

static int failures;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            if (failures++ < 20) {                                                              \
                fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                 \
                fprintf(stderr, __VA_ARGS__);                                                   \
                fputc('\n', stderr);                                                            \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* A small float format: exponent and mantissa widths and the library's converters. */
typedef struct format {
    const char *name;
    int ebits, mbits;
    uint16_t (*from_double)(double);
    uint16_t (*from_f32)(float);
    float (*to_f32)(uint16_t);
} format;

static const format formats[] = {
    {"f16", 5, 10, gl_f16_from_double, gl_f16_from_f32, gl_f16_to_f32},
    {"bf16", 8, 7, gl_bf16_from_double, gl_bf16_from_f32, gl_bf16_to_f32},
};

/* The value of a bit pattern straight from the definition:
 * (-1)^s * 2^(e-bias) * (1 + m/2^mbits) for normal numbers, (-1)^s * 2^(1-bias) * m/2^mbits
 * for subnormals. Returns 0 and sets *special for Inf/NaN patterns. */
static double reference_value(const format *f, uint16_t bits, int *special) {
    int bias = (1 << (f->ebits - 1)) - 1;
    unsigned m = bits & ((1u << f->mbits) - 1);
    unsigned e = (bits >> f->mbits) & ((1u << f->ebits) - 1);
    int negative = (bits >> (f->ebits + f->mbits)) & 1;
    *special = e == (1u << f->ebits) - 1;
    if (*special) return 0;
    double v = e == 0 ? ldexp((double)m, 1 - bias - f->mbits)
                      : ldexp((double)((1u << f->mbits) + m), (int)e - bias - f->mbits);
    return negative ? -v : v;
}

static uint16_t inf_bits(const format *f) { return (uint16_t)(((1u << f->ebits) - 1) << f->mbits); }
static uint16_t sign_bit(const format *f) { return (uint16_t)(1u << (f->ebits + f->mbits)); }

static void test_all_patterns(const format *f) {
    int nan_count = 0;
    for (uint32_t b = 0; b <= 0xffff; b++) {
        uint16_t bits = (uint16_t)b;
        int special;
        double want = reference_value(f, bits, &special);
        float got = f->to_f32(bits);
        uint16_t mantissa = bits & ((1u << f->mbits) - 1);
        if (special && mantissa) { /* NaN: decodes to NaN with its sign, encodes to a NaN */
            nan_count++;
            CHECK(isnan(got), "%s %04x: expected NaN, got %g", f->name, b, got);
            CHECK(!!signbit(got) == !!(bits & sign_bit(f)), "%s %04x: NaN lost its sign", f->name, b);
            uint16_t back = f->from_f32(got);
            CHECK((back & inf_bits(f)) == inf_bits(f) && (back & ~sign_bit(f) & ~inf_bits(f)),
                  "%s %04x: NaN re-encoded as %04x", f->name, b, back);
            CHECK((back & sign_bit(f)) == (bits & sign_bit(f)), "%s %04x: NaN sign", f->name, b);
            CHECK(back & (1u << (f->mbits - 1)), "%s %04x: re-encoded NaN %04x is not quiet", f->name, b, back);
            continue;
        }
        if (special) {
            CHECK(isinf(got) && (got < 0) == !!(bits & sign_bit(f)), "%s %04x: expected Inf", f->name, b);
        } else {
            CHECK((double)got == want && !!signbit(got) == !!signbit(want),
                  "%s %04x: decoded %.9g, definition gives %.9g", f->name, b, got, want);
        }
        CHECK(f->from_f32(got) == bits, "%s %04x: f32 round trip gave %04x", f->name, b, f->from_f32(got));
        CHECK(f->from_double(got) == bits, "%s %04x: double round trip gave %04x", f->name, b,
              f->from_double(got));
    }
    int want_nans = 2 * ((1 << f->mbits) - 1);
    CHECK(nan_count == want_nans, "%s: %d NaN patterns, expected %d", f->name, nan_count, want_nans);
}

/* Between each pair of neighbouring finite values a < b (and between the largest finite value
 * and the first value that no longer rounds to it, 2^(bias+1)): the midpoint rounds to the
 * neighbour with an even mantissa, anything nearer to one side rounds to that side. */
static void test_midpoints(const format *f) {
    int bias = (1 << (f->ebits - 1)) - 1;
    uint16_t last_finite = (uint16_t)(inf_bits(f) - 1);
    for (uint16_t lo = 0; lo <= last_finite; lo++) {
        int special;
        double a = reference_value(f, lo, &special);
        uint16_t hi = (uint16_t)(lo + 1); /* for lo = last finite, hi is the Inf pattern */
        double b = hi == inf_bits(f) ? ldexp(1.0, bias + 1) : reference_value(f, hi, &special);
        double mid = (a + b) / 2; /* exact: a and b are short binary fractions */
        uint16_t even = (lo & 1) ? hi : lo;
        for (int neg = 0; neg < 2; neg++) {
            double s = neg ? -1 : 1;
            uint16_t sg = neg ? sign_bit(f) : 0;
            CHECK(f->from_double(s * mid) == (even | sg), "%s: midpoint %.17g -> %04x, want %04x",
                  f->name, s * mid, f->from_double(s * mid), even | sg);
            CHECK(f->from_double(s * nextafter(mid, 0)) == (lo | sg), "%s: below midpoint %.17g",
                  f->name, s * mid);
            CHECK(f->from_double(s * nextafter(mid, INFINITY)) == (hi | sg), "%s: above midpoint %.17g",
                  f->name, s * mid);
            float mf = (float)mid; /* the midpoints are exact in f32 as well */
            CHECK((double)mf == mid, "%s: midpoint %.17g not exact in f32", f->name, mid);
            CHECK(f->from_f32(s * mf) == (even | sg), "%s: f32 midpoint %.9g", f->name, mf);
            CHECK(f->from_f32(s * nextafterf(mf, 0)) == (lo | sg), "%s: f32 below %.9g", f->name, mf);
            CHECK(f->from_f32(s * nextafterf(mf, INFINITY)) == (hi | sg), "%s: f32 above %.9g", f->name, mf);
        }
    }
}

/* Sorted positive finite values of the format, indexed by bit pattern (monotonic). */
static double table[0x8000];

static uint16_t reference_round(const format *f, double x) {
    uint16_t sg = signbit(x) ? sign_bit(f) : 0;
    double a = fabs(x);
    int nfinite = inf_bits(f); /* patterns 0 .. inf-1 are the finite non-negative values */
    int bias = (1 << (f->ebits - 1)) - 1;
    double max = table[nfinite - 1], overflow = (max + ldexp(1.0, bias + 1)) / 2;
    if (a >= overflow) return sg | inf_bits(f);
    int lo = 0, hi = nfinite - 1; /* largest index with table[i] <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (table[mid] <= a) lo = mid;
        else hi = mid - 1;
    }
    if (lo == nfinite - 1) return (uint16_t)(sg | lo);
    double dl = a - table[lo], dh = table[lo + 1] - a;
    if (dl < dh || (dl == dh && (lo & 1) == 0)) return (uint16_t)(sg | lo);
    return (uint16_t)(sg | (lo + 1));
}

static uint64_t xorshift_state = 0x243F6A8885A308D3ULL;
static uint64_t xorshift(void) {
    uint64_t x = xorshift_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return xorshift_state = x;
}

static void test_random_values(const format *f) {
    int special;
    for (int i = 0; i < inf_bits(f); i++) table[i] = reference_value(f, (uint16_t)i, &special);
    for (int i = 0; i < 4000000; i++) {
        uint32_t bits = (uint32_t)xorshift();
        if (i % 2) /* half of the draws near the format's range, where the interesting cases are */
            bits = (bits & 0x807fffffu) | ((uint32_t)(100 + (xorshift() % 56)) << 23);
        float x;
        memcpy(&x, &bits, 4);
        if (isnan(x)) continue;
        uint16_t want = reference_round(f, x);
        CHECK(f->from_f32(x) == want, "%s: %.9g (%08x) -> %04x, reference %04x", f->name, x, bits,
              f->from_f32(x), want);
        double d = (double)x * (1 + ldexp((double)(xorshift() % 1000), -40));
        want = reference_round(f, d);
        CHECK(f->from_double(d) == want, "%s: double %.17g -> %04x, reference %04x", f->name, d,
              f->from_double(d), want);
    }
}

static void test_specials(void) {
    /* f16 */
    CHECK(gl_f16_from_f32(INFINITY) == 0x7c00, "f16 +Inf");
    CHECK(gl_f16_from_f32(-INFINITY) == 0xfc00, "f16 -Inf");
    CHECK(gl_f16_from_f32(65504.0f) == 0x7bff, "f16 max");
    CHECK(gl_f16_from_f32(65519.99f) == 0x7bff, "f16 just below the overflow threshold");
    CHECK(gl_f16_from_f32(65520.0f) == 0x7c00, "f16 65520 overflows to Inf");
    CHECK(gl_f16_from_double(1e300) == 0x7c00, "f16 huge double");
    CHECK(gl_f16_from_double(-1e-300) == 0x8000, "f16 tiny negative double -> -0");
    CHECK(gl_f16_from_double(4.9e-324) == 0x0000, "f16 double subnormal -> 0");
    CHECK(gl_f16_from_f32(ldexpf(1, -24)) == 0x0001, "f16 smallest subnormal");
    CHECK(gl_f16_from_f32(ldexpf(1, -25)) == 0x0000, "f16 half the smallest subnormal ties to 0");
    CHECK(gl_f16_from_f32(nextafterf(ldexpf(1, -25), 1)) == 0x0001, "f16 just above 2^-25");
    CHECK(gl_f16_from_f32(ldexpf(3, -25)) == 0x0002, "f16 1.5 * 2^-24 ties to even 2");
    CHECK(gl_f16_from_f32(ldexpf(1023, -24)) == 0x03ff, "f16 largest subnormal");
    CHECK(gl_f16_from_f32(ldexpf(2047, -25)) == 0x0400, "f16 subnormal/normal tie to even");
    CHECK(gl_f16_from_f32(ldexpf(1, -14)) == 0x0400, "f16 smallest normal");
    CHECK(gl_f16_from_f32(-0.0f) == 0x8000, "f16 -0");
    CHECK(gl_f16_from_f32(1.0f) == 0x3c00 && gl_f16_from_f32(-2.0f) == 0xc000, "f16 1, -2");
    CHECK(gl_f16_from_f32(1.0f + ldexpf(1, -11)) == 0x3c00, "f16 1 + half ulp ties to 1");
    CHECK(gl_f16_from_f32(1.0f + ldexpf(3, -11)) == 0x3c02, "f16 1 + 1.5 ulp ties to even");
    uint32_t snan_bits = 0x7f800001u, nnan_bits = 0xffc00000u;
    float snan, nnan;
    memcpy(&snan, &snan_bits, 4);
    memcpy(&nnan, &nnan_bits, 4);
    uint16_t h = gl_f16_from_f32(snan);
    CHECK((h & 0x7c00) == 0x7c00 && (h & 0x0200), "f16 signalling NaN -> quiet NaN, got %04x", h);
    h = gl_f16_from_f32(nnan);
    CHECK(h == 0xfe00, "f16 negative quiet NaN keeps its sign, got %04x", h);
    /* bf16 */
    CHECK(gl_bf16_from_f32(INFINITY) == 0x7f80 && gl_bf16_from_f32(-INFINITY) == 0xff80, "bf16 Inf");
    CHECK(gl_bf16_from_f32(FLT_MAX) == 0x7f80, "bf16 FLT_MAX rounds up to Inf");
    CHECK(gl_bf16_from_f32(3.38953139e38f) == 0x7f7f, "bf16 max");
    CHECK(gl_bf16_from_f32(1.0f) == 0x3f80, "bf16 1");
    CHECK(gl_bf16_from_f32(1.0f + ldexpf(1, -8)) == 0x3f80, "bf16 1 + half ulp ties to 1");
    CHECK(gl_bf16_from_f32(1.0f + ldexpf(3, -8)) == 0x3f82, "bf16 1 + 1.5 ulp ties to even");
    CHECK(gl_bf16_from_f32(ldexpf(1, -133)) == 0x0001, "bf16 smallest subnormal");
    CHECK(gl_bf16_from_f32(ldexpf(1, -134)) == 0x0000, "bf16 half the smallest subnormal ties to 0");
    CHECK(gl_bf16_from_f32(ldexpf(255, -134)) == 0x0080, "bf16 subnormal/normal tie to even");
    h = gl_bf16_from_f32(snan);
    CHECK((h & 0x7f80) == 0x7f80 && (h & 0x0040), "bf16 signalling NaN -> quiet NaN, got %04x", h);
    CHECK(gl_bf16_from_f32(nnan) == 0xffc0, "bf16 negative NaN");
    CHECK(isnan(gl_bf16_to_f32(0x7f81)), "bf16 signalling NaN pattern decodes to NaN");
}

static void test_bool(void) {
    unsigned char b = 0x5a;
    CHECK(!gl_dtype_is_float(GL_BOOL) && !gl_dtype_is_integer(GL_BOOL) && gl_dtype_is_bool(GL_BOOL) &&
          !gl_dtype_is_signed(GL_BOOL), "bool is its own kind");
    CHECK(gl_dtype_load_double(GL_BOOL, &b) == 1 && gl_dtype_load_bits(GL_BOOL, &b) == 1,
          "any non-zero byte reads as true");
    gl_dtype_store_double(GL_BOOL, &b, 0.0);
    CHECK(b == 0, "0.0 stores false");
    gl_dtype_store_double(GL_BOOL, &b, NAN);
    CHECK(b == 1, "NaN stores true");
    gl_dtype_store_bits(GL_BOOL, &b, 256);
    CHECK(b == 1, "256 stores true, not its low byte");
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(GL_BOOL, &min, &umax);
    CHECK(min == 0 && umax == 1, "bool range");
}

static void test_names(void) {
    static const char *names[] = {"f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64",
                                  "u8", "u16", "u32", "u64", "bool"};
    static const size_t sizes[] = {2, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1};
    CHECK(sizeof names / sizeof names[0] == GL_DTYPE_COUNT, "every dtype listed");
    for (int i = 0; i < GL_DTYPE_COUNT; i++) {
        CHECK(gl_dtype_from_name(names[i]) == i, "dtype %s", names[i]);
        CHECK(strcmp(gl_dtype_name((gl_dtype)i), names[i]) == 0, "name of %d", i);
        CHECK(gl_dtype_size((gl_dtype)i) == sizes[i], "size of %s", names[i]);
    }
    CHECK(gl_dtype_from_name("float") == -1 && gl_dtype_from_name("") == -1 &&
          gl_dtype_from_name(NULL) == -1, "unknown names");
    CHECK(gl_dtype_from_lname("f32", 3) == GL_F32 && gl_dtype_from_lname("bool", 4) == GL_BOOL,
          "counted names");
    CHECK(gl_dtype_from_lname("f32\0x", 5) == -1 && gl_dtype_from_lname("f32", 2) == -1 &&
          gl_dtype_from_lname(NULL, 0) == -1, "a counted name with an embedded NUL is unknown");
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(GL_I8, &min, &umax);
    CHECK(min == -128 && umax == 127, "i8 range");
    gl_dtype_int_range(GL_U64, &min, &umax);
    CHECK(min == 0 && umax == UINT64_MAX, "u64 range");
    gl_dtype_int_range(GL_I64, &min, &umax);
    CHECK(min == INT64_MIN && umax == INT64_MAX, "i64 range");
}

static void test_elements(void) {
    unsigned char buf[9];
    gl_dtype_store_bits(GL_I16, buf + 1, -2); /* unaligned on purpose */
    CHECK(gl_dtype_load_bits(GL_I16, buf + 1) == -2 && gl_dtype_load_double(GL_I16, buf + 1) == -2, "i16");
    gl_dtype_store_bits(GL_U16, buf + 1, 65535);
    CHECK(gl_dtype_load_bits(GL_U16, buf + 1) == 65535, "u16 zero-extends");
    gl_dtype_store_bits(GL_U64, buf + 1, -1);
    CHECK(gl_dtype_load_double(GL_U64, buf + 1) == 18446744073709551615.0, "u64 top as double");
    gl_dtype_store_double(GL_BF16, buf + 1, 1.00390625); /* tie between 1 and 1+2^-7 -> 1 */
    CHECK(gl_dtype_load_double(GL_BF16, buf + 1) == 1.0, "bf16 store rounds to even");
    gl_dtype_store_double(GL_F16, buf + 1, 0.1);
    CHECK(gl_dtype_load_double(GL_F16, buf + 1) == 0.0999755859375, "f16 0.1");
    gl_dtype_store_double(GL_F64, buf + 1, 0.1);
    CHECK(gl_dtype_load_double(GL_F64, buf + 1) == 0.1, "f64 exact");
}

int main(void) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        test_all_patterns(&formats[i]);
        test_midpoints(&formats[i]);
        test_random_values(&formats[i]);
    }
    test_specials();
    test_names();
    test_bool();
    test_elements();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("dtype: all checks passed\n");
    return 0;
}
