/*
 * test_demangle.c — bindings/demangle.c and bindings/declared.c:
 *   - entry names NVRTC gives template, namespaced and extern "C" kernels demangle to the
 *     signature c++filt prints (cv-qualifiers written first: "const float*");
 *   - malformed, truncated and mutated names are refused (never a crash; the empty string);
 *   - declarations combine demangled types with the source's parameter names, read an
 *     extern "C" kernel's types from its source, and leave out whatever is unsure;
 *   - with a directory argument, every file in it goes through the fuzz target's checks (the
 *     checked-in corpus of tests/fuzz/corpus/demangle, run by test fuzz_demangle_corpus).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_demangle.c"

static int failures;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            if (failures++ < 40) {                                                              \
                fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                 \
                fprintf(stderr, __VA_ARGS__);                                                   \
                fputc('\n', stderr);                                                            \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* "name(type, type)" from gl_demangle's parts, or "-" when it refuses */
static const char *signature(const char *mangled) {
    static char sig[4096];
    char out[2048];
    int n = gl_demangle(mangled, out, sizeof out);
    if (n < 0) {
        CHECK(out[0] == '\0', "%s: refused but wrote '%s'", mangled, out);
        return "-";
    }
    const char *s = out;
    size_t used = (size_t)snprintf(sig, sizeof sig, "%s(", s);
    for (int i = 0; i < n; i++) {
        s += strlen(s) + 1;
        used += (size_t)snprintf(sig + used, sizeof sig - used, "%s%s", i ? ", " : "", s);
    }
    snprintf(sig + used, sizeof sig - used, ")");
    return sig;
}

static void expect_signature(const char *mangled, const char *want) {
    const char *got = signature(mangled);
    CHECK(strcmp(got, want) == 0, "%s: got '%s', want '%s'", mangled, got, want);
}

static void test_names_nvrtc_gives(void) {
    /* scale<2>, scale<-3> and friends, as NVRTC 13 lowers their name expressions */
    expect_signature("_Z5scaleILi2EEvPffi", "scale<2>(float*, float, int)");
    expect_signature("_Z5scaleILin3EEvPffi", "scale<-3>(float*, float, int)");
    expect_signature("_Z6plaincPf", "plainc(float*)");
    expect_signature("_Z8noparamsv", "noparams()");
    expect_signature("_Z3addPfS_S_i", "add(float*, float*, float*, int)");
    expect_signature("_ZN2ns5inner4axpyIfLi4EEEvPT_PKS2_S2_i",
                     "ns::inner::axpy<float, 4>(float*, const float*, float, int)");
    expect_signature("_ZN41_GLOBAL__N__00000000_9_kernel_cu_4b1225654anonILi1EEEvPiS1_",
                     "(anonymous namespace)::anon<1>(int*, int*)");
    expect_signature("_Z3ptsI2PtEvT_PS1_S0_6__halfPK7__half2PS2_",
                     "pts<Pt>(Pt, Pt*, Pt, __half, const __half2*, Pt**)");
    expect_signature("_Z4flagILb1EdEvPT0_ybS1_PKS0_",
                     "flag<true, double>(double*, unsigned long long, bool, double*, const double*)");
    expect_signature("_Z3chrILc97EEvPi", "chr<(char)97>(int*)");
    expect_signature("_Z3negILi0EEvcahstlmxdPvPKvPVi",
                     "neg<0>(char, signed char, unsigned char, short, unsigned short, long, unsigned long, "
                     "long long, double, void*, const void*, volatile int*)");
    expect_signature("_Z2knILj7ELln2ELb1EEvPKjxh", "kn<7u, -2l, true>(const unsigned int*, long long, unsigned char)");
    /* class templates, template arguments in parameter types, X T_ E expressions, enum literals */
    expect_signature("_Z2kvIfLi3EEvN1a1b1VIT_XT0_EEEPS4_1WIS3_EPS6_IS7_ES3_",
                     "kv<float, 3>(a::b::V<float, 3>, a::b::V<float, 3>*, W<float>, W<W<float>>*, float)");
    expect_signature("_Z2keILN1a1b1EE1EEvPiS2_", "ke<(a::b::E)1>(int*, a::b::E)");
    expect_signature("_Z2k2IN1a1b1VIiLi2EEE1WIcEEvPT_PKT0_S6_S8_NS1_1SEPKSB_",
                     "k2<a::b::V<int, 2>, W<char>>(a::b::V<int, 2>*, const W<char>*, a::b::V<int, 2>, W<char>, "
                     "a::b::S, const a::b::S*)");
    expect_signature("_Z2kkIyEvPKPT_PVS0_PVKS0_",
                     "kk<unsigned long long>(unsigned long long* const*, volatile unsigned long long*, "
                     "const volatile unsigned long long*)");
    /* parameter packs: Ts... expands to one parameter per type, an empty pack to none */
    expect_signature("_Z4packIJiPfiEEvDpT_", "pack<int, float*, int>(int, float*, int)");
    expect_signature("_ZN1q2kpIJfPiN1a1b1SEEEEviDpT_",
                     "q::kp<float, int*, a::b::S>(int, float, int*, a::b::S)");
    expect_signature("_Z1fIJEEvDpT_", "f<>()");
    /* std::, substitutions of template names, literal suffixes */
    expect_signature("_Z1fSt4pairIifE", "f(std::pair<int, float>)");
    expect_signature("_Z1fIN2ns3VecIiEEEvT_S2_S1_", "f<ns::Vec<int>>(ns::Vec<int>, ns::Vec<int>, ns::Vec)");
    expect_signature("_Z1fILj4ELl5ELm6ELx7ELy8ELs9ELb0EEvv", "f<4u, 5l, 6ul, 7ll, 8ull, (short)9, false>()");
    expect_signature("_Z1fIL4Mode1EEvv", "f<(Mode)1>()");
    expect_signature("_Z3fooPKPVKf", "foo(const volatile float* const*)");
    expect_signature("_Z1fDhDnPDF16_", "f(half, decltype(nullptr), _Float16*)");
}

static void test_malformed_names(void) {
    static const char *const bad[] = {
        "", "_", "_Z", "_Z1", "x", "scale", "_Y5scalev", "_Z5scale", "_Z5scal", "_Z0v", "_Z99999999f",
        "_Z3fooIiEvT0_",      /* template parameter out of range */
        "_Z1fS_",             /* substitution with no candidate */
        "_Z1fS0_S_",          /* forward reference */
        "_Z1fvv",             /* void among parameters */
        "_Z1fv_",             /* trailing bytes */
        "_Z1fILi2E",          /* unterminated template arguments */
        "_Z1fIEvv",           /* empty template arguments */
        "_Z1fIJJiEEEvv",      /* a pack inside a pack */
        "_Z1fIiEvT_IiE",      /* a template template parameter with arguments */
        "_Z1fIJiEEvT_",       /* a pack outside a pack expansion */
        "_Z1fIiEvDpT_",       /* a pack expansion of no pack */
        "_Z1fIXadL_Z1gvEEEvv", /* an expression */
        "_ZZ1fvE1gv",         /* a local name */
        "_ZNK1S1fEv",         /* a member function */
        "_ZN1SC1Ev",          /* a constructor */
        "_Z1fPFviE",          /* a function type */
        "_Z1fA4_i",           /* an array type */
        "_Z1fM1Si",           /* a pointer to member */
        "_Z1fU3fooi",         /* a vendor qualifier */
        "_Z1fz",              /* an ellipsis */
        "_Z1fLi2E",           /* a literal where a type belongs */
        "_Z1fILb2EEvv",       /* a bool that is neither 0 nor 1 */
        "_Z1fILf3f800000EEvv", /* a float literal */
        "_Z4a\x01" "bcv",     /* bytes no identifier has */
        "_Z3\xff\xfe\xfdv",
        "_Z1fIi", "_Z1fN", "_Z1fN1a", "_Z1fN1aEE", "_ZN1aE", "_Z1fS", "_Z1fT_", "_Z1fPK", "_Z1fD", "_Z1fDp",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(strcmp(signature(bad[i]), "-") == 0, "'%s' was read as %s", bad[i], signature(bad[i]));

    /* nesting deeper than the reader follows: refused, not a stack overflow */
    char deep[5000];
    strcpy(deep, "_Z1f");
    memset(deep + 4, 'P', 4000);
    strcpy(deep + 4004, "i");
    CHECK(strcmp(signature(deep), "-") == 0, "4000 pointer levels were read");
    strcpy(deep, "_Z1fI");
    memset(deep + 5, 'I', 2000);
    deep[2005] = 'i';
    memset(deep + 2006, 'E', 2001);
    strcpy(deep + 4007, "vv");
    CHECK(strcmp(signature(deep), "-") == 0, "2000 nested template argument lists were read");
    /* more text than the reader's arena holds (each P of a 200-character name is a new string):
     * refused as a whole, never cut */
    static char wide[2048], big_out[1 << 20];
    strcpy(wide, "_Z1f200"); /* f(aaa...a, aaa...a*, aaa...a*, ...) */
    memset(wide + 7, 'a', 200);
    wide[207] = '\0';
    for (int i = 0; i < 400; i++) strcat(wide, "PS_");
    CHECK(gl_demangle(wide, big_out, sizeof big_out) == -1 && big_out[0] == '\0', "an oversized result was read");
    wide[207 + 3 * 100] = '\0';
    CHECK(gl_demangle(wide, big_out, sizeof big_out) == 101, "101 parameters of a 200-character name");

    /* packs whose elements fill the argument list, then one more argument: refused */
    char packs[512] = "_Z1fIJ";
    for (int i = 0; i < 64; i++) strcat(packs, "i");
    strcat(packs, "EfEvv");
    CHECK(strcmp(signature(packs), "-") == 0, "65 template arguments were read");
    packs[strlen(packs) - 4] = '\0';
    strcat(packs, "EvDpT_"); /* 64 of them, expanded as parameters: fits */
    CHECK(gl_demangle(packs, big_out, sizeof big_out) == 64, "a pack of 64 int parameters");

    /* a result that does not fit the caller's buffer: -1 and the empty string */
    char small[12];
    CHECK(gl_demangle("_Z5scaleILi2EEvPffi", small, sizeof small) == -1 && small[0] == '\0', "small buffer");
    CHECK(gl_demangle("_Z5scaleILi2EEvPffi", small, 0) == -1, "no buffer");
    CHECK(gl_demangle(NULL, small, sizeof small) == -1 && small[0] == '\0', "NULL name");
}

/* Every prefix and many one-byte changes of good names: each refused or well-formed. */
static void test_mutations(void) {
    static const char *const good[] = {
        "_Z5scaleILi2EEvPffi", "_ZN2ns5inner4axpyIfLi4EEEvPT_PKS2_S2_i", "_Z4packIJiPfiEEvDpT_",
        "_Z2kvIfLi3EEvN1a1b1VIT_XT0_EEEPS4_1WIS3_EPS6_IS7_ES3_", "_Z2keILN1a1b1EE1EEvPiS2_",
        "_Z3ptsI2PtEvT_PS1_S0_6__halfPK7__half2PS2_", "_Z1fSt4pairIifE"};
    static const char replacements[] = "_SZTILNEPKVJXDp0159AZaz\x01\xff";
    char buf[256], out[512];
    long runs = 0;
    for (size_t g = 0; g < sizeof good / sizeof good[0]; g++) {
        size_t len = strlen(good[g]);
        for (size_t cut = 0; cut <= len; cut++) {
            memcpy(buf, good[g], cut);
            buf[cut] = '\0';
            check_demangled(out, sizeof out, gl_demangle(buf, out, sizeof out));
            runs++;
        }
        for (size_t at = 0; at < len; at++)
            for (size_t r = 0; r < sizeof replacements - 1; r++) {
                strcpy(buf, good[g]);
                buf[at] = replacements[r];
                check_demangled(out, sizeof out, gl_demangle(buf, out, sizeof out));
                runs++;
            }
    }
    CHECK(runs > 1000, "only %ld mutations ran", runs);
}

/* ---- declarations ---------------------------------------------------------------------------- */
static gl_param param(const char *kind, unsigned size) {
    gl_param p;
    memset(&p, 0, sizeof p);
    snprintf(p.kind, sizeof p.kind, "%s", kind);
    p.size = size;
    p.align = size < 8 ? size : 8;
    return p;
}

/* The declarations joined by " | " ("?" for an unknown one), or "-1" when it failed. */
static const char *declarations(const char *entry, const char *src, const gl_param *params, int n) {
    static char joined[4096];
    size_t cap = gl_declarations_cap(n);
    char *out = malloc(cap);
    int known = gl_param_declarations(entry, src, src ? strlen(src) : 0, params, n, out, cap);
    check_declarations(out, cap, n, known);
    if (known < 0) {
        free(out);
        return "-1";
    }
    size_t used = 0;
    joined[0] = '\0';
    const char *s = out;
    for (int i = 0; i < n; i++, s += strlen(s) + 1)
        used += (size_t)snprintf(joined + used, sizeof joined - used, "%s%s", i ? " | " : "", *s ? s : "?");
    free(out);
    return joined;
}

#define EXPECT_DECLS(entry, src, params, want)                                                  \
    do {                                                                                        \
        const char *got_ = declarations(entry, src, params, (int)(sizeof params / sizeof params[0])); \
        CHECK(strcmp(got_, want) == 0, "%s: got '%s', want '%s'", entry, got_, want);            \
    } while (0)

static const char *const SOURCE =
    "// __global__ void scale(int wrong) in a comment\n"
    "#include <cuda_fp16.h>\n"
    "#define NOT_THIS \"__global__ void scale(double q) {}\"\n"
    "/* __global__ void scale(char c) {} */\n"
    "template <int N> __global__ void __launch_bounds__(256) scale(float *x, float s, int n) { x[0] = s * N; }\n"
    "extern \"C\" __global__ void plain(const float * __restrict__ in, float *out, unsigned n, long long m,\n"
    "                                  __half h, int) {}\n"
    "extern \"C\" __global__ void dflt(int n = 3, float *p = nullptr) {}\n"
    "extern \"C\" __global__ void awkward(void (*f)(int), int a[4], int b) {}\n"
    "extern \"C\" __global__ void angled(int n = (1 < 2), int m) {}\n"
    "extern \"C\" __global__ void none(void) {}\n"
    "namespace ns {\n"
    "template <typename T> __global__ void tk(T* y, const T* x, T a, unsigned long long n);\n"
    "template <typename T> __global__ void tk(T* y, const T* x, T a, unsigned long long n) {}\n"
    "}\n"
    "#if 0\n"
    "extern \"C\" __global__ void twice(int a) {}\n"
    "#else\n"
    "extern \"C\" __global__ void twice(int b) {}\n"
    "#endif\n"
    "const char *raw = R\"x(__global__ void inraw(int a) {})x\";\n"
    "extern \"C\" __global__ void __cluster_dims__(2, 1, 1) clustered(const __grid_constant__ CUtensorMap m, int*) {}\n";

static void test_declarations(void) {
    gl_param scale[] = {param("u64", 8), param("f32", 4), param("u32", 4)};
    /* a template: types from the mangled name, names from its one definition */
    EXPECT_DECLS("_Z5scaleILi2EEvPffi", SOURCE, scale, "float* x | float s | int n");
    /* no source (a PTX or cubin load): the mangled name still gives the types */
    EXPECT_DECLS("_Z5scaleILi2EEvPffi", NULL, scale, "float* | float | int");
    /* extern "C": types and names from the source, qualifiers kept, pointers attached */
    gl_param plain[] = {param("u64", 8), param("u64", 8), param("u32", 4), param("u64", 8), param("b8", 2),
                        param("u32", 4)};
    EXPECT_DECLS("plain", SOURCE, plain,
                 "const float* __restrict__ in | float* out | unsigned n | long long m | __half h | int");
    EXPECT_DECLS("plain", NULL, plain, "? | ? | ? | ? | ? | ?");
    gl_param dflt[] = {param("u32", 4), param("u64", 8)};
    EXPECT_DECLS("dflt", SOURCE, dflt, "int n | float* p");
    /* a function pointer and an array are left out; the plain one next to them is kept */
    gl_param awkward[] = {param("u64", 8), param("u64", 8), param("u32", 4)};
    EXPECT_DECLS("awkward", SOURCE, awkward, "? | ? | int b");
    /* a default argument with a comparison: the list cannot be split for sure */
    EXPECT_DECLS("angled", SOURCE, dflt, "? | ?");
    /* a size that contradicts the PTX: none of the definition's names are used */
    gl_param wrong[] = {param("u64", 8), param("u64", 8)};
    EXPECT_DECLS("dflt", SOURCE, wrong, "? | ?");
    /* a count that differs from the PTX's */
    gl_param one[] = {param("u32", 4)};
    EXPECT_DECLS("dflt", SOURCE, one, "?");
    /* a namespaced template declared before it is defined: the definition counts */
    gl_param tk[] = {param("u64", 8), param("u64", 8), param("f64", 8), param("u64", 8)};
    EXPECT_DECLS("_ZN2ns2tkIdEEvPT_PKS1_S1_y", SOURCE, tk,
                 "double* y | const double* x | double a | unsigned long long n");
    /* two definitions (#if branches are not evaluated): unsure */
    EXPECT_DECLS("twice", SOURCE, one, "?");
    /* definitions inside comments, strings and raw strings are not definitions */
    EXPECT_DECLS("inraw", SOURCE, one, "?");
    /* attribute macros before the name; a type gpulab has no size for is taken as declared */
    gl_param clustered[] = {param("b8", 128), param("u64", 8)};
    EXPECT_DECLS("clustered", SOURCE, clustered, "const __grid_constant__ CUtensorMap m | int*");
    /* a mangled name that does not demangle, or to another count: nothing is known */
    EXPECT_DECLS("_Z5scaleILi2EEvPff", SOURCE, scale, "? | ? | ?");
    EXPECT_DECLS("_Z5scaleILi2EEvPffiQ", SOURCE, scale, "? | ? | ?");
    /* an entry that is no identifier is not looked up in the source */
    EXPECT_DECLS("plain.x", SOURCE, one, "?");
    /* a demangled type that contradicts the PTX (int for an 8-byte parameter) is left out, and
     * the source, which says int too, names none of them */
    gl_param mismatch[] = {param("u64", 8), param("f32", 4), param("u64", 8)};
    EXPECT_DECLS("_Z5scaleILi2EEvPffi", SOURCE, mismatch, "float* | float | ?");
    /* no parameters at all */
    EXPECT_DECLS("none", SOURCE, one, "?");
    CHECK(strcmp(declarations("none", SOURCE, one, 0), "") == 0, "none: no declarations");
    /* a buffer below gl_declarations_cap(n) */
    char small[4];
    CHECK(gl_param_declarations("dflt", SOURCE, strlen(SOURCE), dflt, 2, small, sizeof small) == -1 &&
              small[0] == '\0' && small[1] == '\0',
          "small buffer");
}

/* Arbitrary source text around a definition: cut anywhere, every result well-formed. */
static void test_source_mutations(void) {
    size_t len = strlen(SOURCE);
    char *buf = malloc(len + 1);
    gl_param plain[] = {param("u64", 8), param("u64", 8), param("u32", 4), param("u64", 8), param("b8", 2),
                        param("u32", 4)};
    char out[4096];
    for (size_t cut = 0; cut <= len; cut += 3) {
        memcpy(buf, SOURCE, cut);
        int known = gl_param_declarations("plain", buf, cut, plain, 6, out, sizeof out);
        check_declarations(out, sizeof out, 6, known);
    }
    static const char flips[] = "\"'/*#\\\n(){}<>,=;\0";
    for (size_t at = 0; at < len; at += 7)
        for (size_t f = 0; f < sizeof flips - 1; f++) {
            memcpy(buf, SOURCE, len);
            buf[at] = flips[f];
            int known = gl_param_declarations("plain", buf, len, plain, 6, out, sizeof out);
            check_declarations(out, sizeof out, 6, known);
        }
    free(buf);
}

/* Every file of a corpus directory through the fuzz target. */
static int run_corpus(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "cannot open %s\n", dir);
        return 1;
    }
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (f == NULL) continue;
        static unsigned char data[1 << 16];
        size_t n = fread(data, 1, sizeof data, f);
        fclose(f);
        LLVMFuzzerTestOneInput(data, n);
        files++;
    }
    closedir(d);
    printf("fuzz_demangle corpus: %d files, no finding\n", files);
    return files > 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1) return run_corpus(argv[1]);
    test_names_nvrtc_gives();
    test_malformed_names();
    test_mutations();
    test_declarations();
    test_source_mutations();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("demangle and declarations: all checks passed\n");
    return 0;
}
