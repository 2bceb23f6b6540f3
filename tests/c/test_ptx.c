/*
 * test_ptx.c — unit tests for the pure-C parts under cuda.compile: the PTX signature parser
 * (on PTX made by NVRTC and nvcc, checked in under tests/c/ptx/, and on hand-written edge
 * cases), SHA-256 against published vectors, cache entries (round trip, every truncation,
 * every bit flip) and the cache key's sensitivity to each of its inputs.
 *
 * usage: test_ptx FIXTURE_DIR SCRATCH_DIR
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "ptx.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        checks++;                                                                               \
        if (!(cond)) {                                                                          \
            failures++;                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
        }                                                                                       \
    } while (0)

static const char *fixture_dir, *scratch_dir;

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(2);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* One expected parameter: "kind size align offset". */
typedef struct want {
    const char *kind;
    unsigned size, align, offset;
} want;

static void expect_params(const char *what, const char *ptx, size_t len, const char *entry, const want *w,
                          int n) {
    gl_param got[64];
    char err[256];
    int count = gl_ptx_params(ptx, len, entry, got, 64, err, sizeof err);
    CHECK(count == n, "%s: %s: %d params, want %d (%s)", what, entry, count, n, err);
    for (int i = 0; i < n && i < count; i++) {
        CHECK(strcmp(got[i].kind, w[i].kind) == 0 && got[i].size == w[i].size && got[i].align == w[i].align &&
                  got[i].offset == w[i].offset,
              "%s: %s param %d: got %s/%u/%u@%u, want %s/%u/%u@%u", what, entry, i, got[i].kind, got[i].size,
              got[i].align, got[i].offset, w[i].kind, w[i].size, w[i].align, w[i].offset);
    }
}

static void expect_error(const char *ptx, const char *entry, const char *needle) {
    gl_param got[8];
    char err[256] = "";
    int n = gl_ptx_params(ptx, strlen(ptx), entry, got, 8, err, sizeof err);
    CHECK(n == -1, "expected failure for entry %s, got %d", entry, n);
    CHECK(strstr(err, needle) != NULL, "error '%s' lacks '%s'", err, needle);
}

/* ---- signatures of the checked-in PTX files in tests/c/ptx (kernels from the same CUDA source) ---------------- */
static void test_fixture(const char *file, unsigned tensormap_align) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, file);
    size_t len;
    char *ptx = slurp(path, &len);

    expect_params(file, ptx, len, "empty_kernel", NULL, 0);
    const want scalars[] = {{"u8", 1, 1, 0},  {"u16", 2, 2, 2},  {"u32", 4, 4, 4},  {"u64", 8, 8, 8},
                            {"u8", 1, 1, 16}, {"u16", 2, 2, 18}, {"u32", 4, 4, 20}, {"u64", 8, 8, 24},
                            {"f32", 4, 4, 32}, {"f64", 8, 8, 40}, {"u8", 1, 1, 48}};
    expect_params(file, ptx, len, "scalars", scalars, 11);
    const want pointers[] = {{"u64", 8, 8, 0}, {"u64", 8, 8, 8}, {"u32", 4, 4, 16}};
    expect_params(file, ptx, len, "pointers", pointers, 3);
    const want aggregates[] = {{"b8", 3, 1, 0}, {"b8", 16, 16, 16}, {"b8", 48, 8, 32}, {"u8", 1, 1, 80}};
    expect_params(file, ptx, len, "aggregates", aggregates, 4);
    const want tensormap[] = {{"b8", 128, tensormap_align, 0}, {"u64", 8, 8, 128}};
    expect_params(file, ptx, len, "tensormap", tensormap, 2);
    const want tmpl_f[] = {{"u64", 8, 8, 0}, {"f32", 4, 4, 8}};
    expect_params(file, ptx, len, "_Z4tmplILi4EfEvPT0_S0_", tmpl_f, 2);
    const want tmpl_d[] = {{"u64", 8, 8, 0}, {"f64", 8, 8, 8}};
    expect_params(file, ptx, len, "_Z4tmplILi1EdEvPT0_S0_", tmpl_d, 2);
    const want ns[] = {{"u32", 4, 4, 0}, {"u64", 8, 8, 8}};
    expect_params(file, ptx, len, "_ZN2ns12in_namespaceEiPi", ns, 2);

    /* a name that is a prefix of a real one is not found, and the message lists the entries */
    gl_param p[4];
    char err[256];
    CHECK(gl_ptx_params(ptx, len, "scalar", p, 4, err, sizeof err) == -1, "prefix found");
    CHECK(strstr(err, "scalars") && strstr(err, "pointers"), "entry list missing in '%s'", err);

    /* every prefix of real PTX parses or fails cleanly (never a size-0 or odd-aligned param) */
    for (size_t cut = 0; cut < len; cut += 7) {
        gl_param q[16];
        int n = gl_ptx_params(ptx, cut, "aggregates", q, 16, err, sizeof err);
        CHECK(n == -1 || n == 4, "%s cut at %zu: %d", file, cut, n);
        for (int i = 0; i < n && i < 16; i++) CHECK(q[i].size > 0 && q[i].align > 0, "bad param after cut");
    }
    free(ptx);
}

/* ---- hand-written edge cases ----------------------------------------------------------- */
static void test_edge_cases(void) {
    const char *ptx =
        "// .entry commented(.param .u8 x)\n"
        "/* .entry blocked(.param .u8 y) */\n"
        ".file 1 \"weird .entry inside(.param .u8 z) string.cu\"\n"
        ".func (.param .b32 r) helper(.param .b64 a)\n{ ret; }\n"
        ".weak .entry w$eird$name ( .param .u64 .ptr .global .align 16 p , // trailing comment\n"
        "   .param /* inline */ .f32 x,.param .align 8 .b8 arr[2][3], .param .f16 h, .param .b32 v[4] )\n"
        "{ ret; }\n"
        ".visible .entry noparens\n{ ret; }\n"
        ".entry emptyparens( )\n{ ret; }\n"
        ".visible .entry shared_ptr(.param .u32 .ptr .shared .align 8 s, .param .pred flag, .param .s16 t)\n"
        "{ ret; }\n"
        ".entry big(.param .align 64 .b8 tm[128], .param .u8 after)\n{ ret; }\n"
        ".entry ptrs(.param .u64 .ptr .global .align 4096 a, .param .u64 .ptr .align 16 b, .param .u32 n)\n"
        "{ ret; }\n"
        ".entry literals(.param .b8 oct[010], .param .b8 hex[0x10], .param .b8 bin[0b11], .param .align 0x8 .b8 u[2U])\n"
        "{ ret; }\n";
    size_t len = strlen(ptx);
    /* .align 16 after .ptr is the pointee's: the pointer keeps 8 */
    const want weird[] = {{"u64", 8, 8, 0}, {"f32", 4, 4, 8}, {"b8", 6, 8, 16}, {"f16", 2, 2, 22},
                          {"b32", 16, 4, 24}};
    expect_params("edge", ptx, len, "w$eird$name", weird, 5);
    expect_params("edge", ptx, len, "noparens", NULL, 0);
    expect_params("edge", ptx, len, "emptyparens", NULL, 0);
    /* after .ptr, .align is the pointed-to memory's: the parameter keeps its natural alignment */
    const want shared[] = {{"u32", 4, 4, 0}, {"pred", 1, 1, 4}, {"s16", 2, 2, 6}};
    expect_params("edge", ptx, len, "shared_ptr", shared, 3);
    const want big[] = {{"b8", 128, 64, 0}, {"u8", 1, 1, 128}};
    expect_params("edge", ptx, len, "big", big, 2);
    const want ptrs[] = {{"u64", 8, 8, 0}, {"u64", 8, 8, 8}, {"u32", 4, 4, 16}};
    expect_params("edge", ptx, len, "ptrs", ptrs, 3);
    /* PTX integer literals: 010 is octal (eight), 0x10 sixteen, 0b11 three, a U suffix */
    const want literals[] = {{"b8", 8, 1, 0}, {"b8", 16, 1, 8}, {"b8", 3, 1, 24}, {"b8", 2, 8, 32}};
    expect_params("edge", ptx, len, "literals", literals, 4);
    expect_error(ptx, "commented", "no .entry named 'commented'");
    expect_error(ptx, "inside", "no .entry named");
    expect_error(ptx, "helper", "no .entry named"); /* a .func is not a kernel */

    /* fewer slots than parameters: the full count comes back, only max are written */
    gl_param two[2];
    memset(two, 0xAB, sizeof two);
    char err[128];
    CHECK(gl_ptx_params(ptx, len, "w$eird$name", two, 1, err, sizeof err) == 5, "count with max=1");
    CHECK(two[1].size == 0xABABABABu, "wrote past max");
    CHECK(gl_ptx_params(ptx, len, "w$eird$name", NULL, 0, err, sizeof err) == 5, "count with NULL out");

    /* malformed signatures */
    expect_error(".entry k(.param .u32 a", "k", "expected ',' or ')'");
    expect_error(".entry k(.param .u32 a .param .u32 b)", "k", "expected ',' or ')'");
    expect_error(".entry k(.param .align 0 .b8 a[4])", "k", "bad .align");
    expect_error(".entry k(.param .align 3 .b8 a[4])", "k", "bad .align");
    expect_error(".entry k(.param .align 99999999999 .b8 a[4])", "k", "bad .align");
    expect_error(".entry k(.param .align .b8 a[4])", "k", "bad .align");
    expect_error(".entry k(.param .q32 a)", "k", "unsupported parameter attribute");
    expect_error(".entry k(.param a)", "k", "no type");
    expect_error(".entry k(.param .u32 .u64 a)", "k", "two types");
    expect_error(".entry k(.param .b8 a[0])", "k", "bad array size");
    expect_error(".entry k(.param .b8 a[-4])", "k", "bad array size");
    expect_error(".entry k(.param .b8 a[4)", "k", "bad array size");
    expect_error(".entry k(.param .b64 a[4294967295])", "k", "larger than");
    expect_error(".entry k(.param .b64 a[65536][65536])", "k", "larger than");
    expect_error(".entry k(.param .b8 a[900000], .param .b8 b[900000])", "k", "larger than");
    expect_error(".entry k(.param .u32 )", "k", "expected a name");
    expect_error(".entry k(.u32 a)", "k", "expected .param");
    expect_error(".entry k(,)", "k", "expected .param");
    expect_error(".entry k(.param .u32", "k", "unexpected end");
    expect_error(".entry k(/* never closed", "k", "expected .param");
    expect_error(".entry (", "k", ".entry without a name");
    expect_error("", "k", "has no entries");
    expect_error(".entry k()", "", "no .entry named ''");

    /* NUL bytes and binary junk stay inside the given length */
    const char junk[] = ".entry k(\0.param .u32 a)";
    gl_param q[2];
    CHECK(gl_ptx_params(junk, sizeof junk - 1, "k", q, 2, err, sizeof err) == -1, "NUL accepted");
    CHECK(gl_ptx_params(".entry k(.param .u32 a)", 14, "k", q, 2, err, sizeof err) == -1, "read past len");
    CHECK(gl_ptx_params(NULL, 0, "k", q, 2, err, sizeof err) == -1, "NULL ptx");
    CHECK(gl_ptx_params("x", 1, "k", q, 2, NULL, 0) == -1, "NULL err buffer");
    char tiny[4];
    CHECK(gl_ptx_params("x", 1, "a_very_long_entry_name", q, 2, tiny, sizeof tiny) == -1 && strlen(tiny) == 3,
          "message not cut to the buffer");

    /* many entries: the not-found list is cut, not overflowed */
    char many[8192] = "";
    for (int i = 0; i < 200; i++) {
        char one[64];
        snprintf(one, sizeof one, ".entry kernel_number_%d()\n{ ret; }\n", i);
        strcat(many, one);
    }
    char big_err[256];
    CHECK(gl_ptx_params(many, strlen(many), "missing", q, 2, big_err, sizeof big_err) == -1, "found missing");
    CHECK(strstr(big_err, "kernel_number_0") && strstr(big_err, "..."), "entry list: %s", big_err);
    expect_params("many", many, strlen(many), "kernel_number_199", NULL, 0);
}

/* ---- SHA-256 --------------------------------------------------------------------------- */
static void expect_sha(const char *msg, size_t len, const char *hex) {
    unsigned char d[32];
    char got[65];
    gl_sha256_bytes(msg, len, d);
    gl_hex(d, 32, got);
    CHECK(strcmp(got, hex) == 0, "sha256 of %zu bytes: %s", len, got);
}

static void test_sha256(void) {
    expect_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_sha(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopq"
                       "rsmnopqrstnopqrstu";
    expect_sha(four, strlen(four), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    /* one million 'a', fed in uneven pieces to exercise the block buffering */
    gl_sha256 c;
    gl_sha256_init(&c);
    char as[1000];
    memset(as, 'a', sizeof as);
    size_t fed = 0, step = 1;
    while (fed < 1000000) {
        size_t n = step < 1000000 - fed ? step : 1000000 - fed;
        if (n > sizeof as) n = sizeof as;
        gl_sha256_update(&c, as, n);
        fed += n;
        step = step * 7 % 997 + 1;
    }
    unsigned char d[32];
    char hex[65];
    gl_sha256_final(&c, d);
    gl_hex(d, 32, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "million a: %s", hex);
    /* lengths around the padding boundary agree between one call and byte-at-a-time */
    for (size_t n = 50; n < 70; n++) {
        unsigned char one[32], many[32];
        gl_sha256_bytes(as, n, one);
        gl_sha256_init(&c);
        for (size_t i = 0; i < n; i++) gl_sha256_update(&c, as + i, 1);
        gl_sha256_final(&c, many);
        CHECK(memcmp(one, many, 32) == 0, "incremental differs at %zu", n);
    }
}

/* ---- cache entries --------------------------------------------------------------------- */
static void test_entries(void) {
    char *names[] = {"f<2>", "g"};
    char *lowered[] = {"_Z1fILi2EEvv", "_Z1gv"};
    char ptx[] = ".version 9.0\n.entry k()\n{ ret; }\n";
    char cubin[] = "\x7f" "ELF\0\1\2binary\0with NULs";
    gl_cache_entry e = {ptx, sizeof ptx - 1, cubin, sizeof cubin, "warning: x", 10, 2, names, lowered};
    unsigned char key[32], other[32];
    gl_sha256_bytes("key", 3, key);
    gl_sha256_bytes("other", 5, other);
    size_t len;
    unsigned char *buf = gl_cache_serialize(&e, key, &len);
    CHECK(buf != NULL, "serialize");
    gl_cache_entry back;
    char err[128];
    CHECK(gl_cache_parse(buf, len, key, &back, err, sizeof err) == 0, "round trip: %s", err);
    CHECK(back.ptx_len == e.ptx_len && memcmp(back.ptx, ptx, e.ptx_len) == 0, "ptx");
    CHECK(back.cubin_len == e.cubin_len && memcmp(back.cubin, cubin, e.cubin_len) == 0, "cubin with NULs");
    CHECK(back.log_len == 10 && strcmp(back.log, "warning: x") == 0, "log");
    CHECK(back.nlowered == 2 && strcmp(back.names[0], "f<2>") == 0 && strcmp(back.lowered[1], "_Z1gv") == 0,
          "lowered names");
    gl_cache_entry_free(&back);
    CHECK(gl_cache_parse(buf, len, NULL, &back, err, sizeof err) == 0, "parse without key check");
    gl_cache_entry_free(&back);
    CHECK(gl_cache_parse(buf, len, other, &back, err, sizeof err) == -1 && strstr(err, "another key"),
          "wrong key accepted");

    for (size_t cut = 0; cut < len; cut++)
        CHECK(gl_cache_parse(buf, cut, key, &back, err, sizeof err) == -1, "truncated at %zu accepted", cut);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            int rc = gl_cache_parse(buf, len, key, &back, err, sizeof err);
            CHECK(rc == -1, "bit %d of byte %zu flipped and accepted", bit, i);
            if (rc == 0) gl_cache_entry_free(&back);
            buf[i] ^= (unsigned char)(1u << bit);
        }
    }
    CHECK(gl_cache_parse(buf, len, key, &back, err, sizeof err) == 0, "restored entry");
    gl_cache_entry_free(&back);
    free(buf);

    /* a virtual-arch entry has no cubin and keeps having none */
    gl_cache_entry v = {ptx, sizeof ptx - 1, NULL, 0, "", 0, 0, NULL, NULL};
    buf = gl_cache_serialize(&v, key, &len);
    CHECK(gl_cache_parse(buf, len, key, &back, err, sizeof err) == 0 && back.cubin == NULL, "no cubin");
    gl_cache_entry_free(&back);
    free(buf);

    /* store + load through a directory */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/entries", scratch_dir);
    mkdir(dir, 0700);
    CHECK(gl_cache_store(dir, key, &e), "store");
    CHECK(gl_cache_load(dir, key, &back) == GL_CACHE_HIT && back.nlowered == 2, "load after store");
    gl_cache_entry_free(&back);
    CHECK(gl_cache_load(dir, other, &back) == GL_CACHE_MISS, "absent key is a miss");
}

/* ---- the key --------------------------------------------------------------------------- */
static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

static int seen_files;
static void count_file(const char *path, void *ctx) {
    (void)ctx;
    if (strstr(path, "/inc/")) seen_files++;
}

static void key_of(gl_cache_key_input in, unsigned char out[32]) { gl_cache_key(&in, out, count_file, NULL); }

/* The key of `src` (otherwise as `base`) follows header c.h, wherever the spelling hides it. */
static void key_follows(gl_cache_key_input base, const char *c, const char *src, const char *what) {
    unsigned char k0[32], k1[32];
    base.source = src;
    base.source_len = strlen(src);
    write_text(c, "#define C 1\n");
    CHECK(gl_cache_key(&base, k0, NULL, NULL), "%s: the key covers the compile", what);
    write_text(c, "#define C 2\n");
    gl_cache_key(&base, k1, NULL, NULL);
    CHECK(memcmp(k0, k1, 32) != 0, "key ignores a header included by %s", what);
}

static void test_key_spellings(gl_cache_key_input base, const char *inc) {
    char c[1100];
    snprintf(c, sizeof c, "%s/c.h", inc);
    key_follows(base, c, "#include \\\n\"c.h\"\n", "a directive continued on the next line");
    key_follows(base, c, "#inc\\\nlude \"c.h\"\n", "a keyword split by a line splice");
    key_follows(base, c, "/**/#include \"c.h\"\n", "a directive after a comment");
    key_follows(base, c, "#/* x */include /* y */ \"c.h\"\n", "comments inside the directive");
    key_follows(base, c, "%:include \"c.h\"\n", "the %: digraph");
    const char *pre[] = {"c.h"};
    gl_cache_key_input with_pre = base;
    with_pre.pre_includes = pre;
    with_pre.npre_includes = 1;
    key_follows(with_pre, c, "__global__ void k(){}\n", "a pre-include option");
    /* a header named by a macro cannot be followed: the key says it does not cover the compile */
    unsigned char k[32];
    gl_cache_key_input by_macro = base;
    by_macro.source = "#define H \"c.h\"\n#include H\n";
    by_macro.source_len = strlen(by_macro.source);
    CHECK(!gl_cache_key(&by_macro, k, NULL, NULL), "an include by macro was taken as covered");
    CHECK(gl_cache_key(&base, k, NULL, NULL), "a plain source was not taken as covered");
    unlink(c);
}

static void test_key(void) {
    char inc[1024], a[1100], b[1100];
    snprintf(inc, sizeof inc, "%s/inc", scratch_dir);
    mkdir(inc, 0700);
    snprintf(a, sizeof a, "%s/a.h", inc);
    snprintf(b, sizeof b, "%s/b.h", inc);
    write_text(a, "#pragma once\n  #  include \"b.h\"\n#define A 1\n");
    write_text(b, "#define B 2\n");
    const char *src = "#include <a.h>\n#include \"mem.h\"\n#include <cuda_fp16.h>\n__global__ void k(){}\n";
    const char *opts[] = {"--gpu-architecture=sm_90a", "-DK=4", "-lineinfo"};
    const char *swapped[] = {"--gpu-architecture=sm_90a", "-lineinfo", "-DK=4"};
    const char *dirs[] = {inc};
    const char *names[] = {"k"};
    gl_cache_header mem[] = {{"mem.h", "#define M 3\n", 12}, {"unused.h", "x", 1}};
    gl_cache_key_input base = {.gpulab_version = "0.1.0", .nvrtc_version = "13.0", .arch = "sm_90a", .options = opts,
                               .noptions = 3, .source_name = "k.cu", .source = src, .source_len = strlen(src),
                               .source_dir = ".", .names = names, .nnames = 1, .headers = mem, .nheaders = 2,
                               .include_dirs = dirs, .ninclude_dirs = 1};
    unsigned char k0[32], k1[32];
    key_of(base, k0);
    CHECK(seen_files == 2, "a.h and b.h reported (%d)", seen_files);
    key_of(base, k1);
    CHECK(memcmp(k0, k1, 32) == 0, "key not deterministic");

#define DIFFERS(field_change, what)                                                             \
    do {                                                                                        \
        gl_cache_key_input in = base;                                                           \
        field_change;                                                                           \
        key_of(in, k1);                                                                         \
        CHECK(memcmp(k0, k1, 32) != 0, "key ignores %s", what);                                 \
    } while (0)
    DIFFERS(in.nvrtc_version = "13.1", "the NVRTC version");
    DIFFERS(in.gpulab_version = "0.1.1", "the gpulab version");
    DIFFERS(in.arch = "sm_90", "the arch suffix");
    DIFFERS(in.options = swapped, "the option order");
    DIFFERS(in.noptions = 2, "a dropped option");
    DIFFERS(in.nnames = 0, "the name expressions");
    DIFFERS(in.source_len -= 1, "the source");
    DIFFERS(in.source_name = "other.cu", "the source's name (__FILE__, line info)");
    gl_cache_header mem2[] = {{"mem.h", "#define M 4\n", 12}, {"unused.h", "x", 1}};
    DIFFERS(in.headers = mem2, "an in-memory header's contents");

    /* an in-memory header nobody includes does not matter */
    gl_cache_header mem3[] = {{"mem.h", "#define M 3\n", 12}, {"unused.h", "y", 1}};
    gl_cache_key_input same = base;
    same.headers = mem3;
    key_of(same, k1);
    CHECK(memcmp(k0, k1, 32) == 0, "an unused in-memory header changed the key");

    /* one byte of a header two includes deep */
    write_text(b, "#define B 3\n");
    key_of(base, k1);
    CHECK(memcmp(k0, k1, 32) != 0, "key ignores a nested header's contents");
    write_text(b, "#define B 2\n");
    key_of(base, k1);
    CHECK(memcmp(k0, k1, 32) == 0, "key does not return with the header's contents");

    /* a header that appears where an include was unresolved changes the key */
    char fp16[1100];
    snprintf(fp16, sizeof fp16, "%s/cuda_fp16.h", inc);
    write_text(fp16, "// shadowing\n");
    key_of(base, k1);
    CHECK(memcmp(k0, k1, 32) != 0, "key ignores a newly resolvable include");
    unlink(fp16);

    /* include cycles and self-includes terminate (and still key on the cycle's contents) */
    write_text(b, "#include \"a.h\"\n#include \"b.h\"\n");
    key_of(base, k1);
    CHECK(memcmp(k0, k1, 32) != 0, "key ignores a cyclic header's contents");
    write_text(b, "#define B 2\n");

    /* headers under a system folder are keyed by identity: a rewrite of the same size still
     * changes the key (modification time), and their includes are still followed */
    gl_cache_key_input sys = base;
    const char *sysdirs[] = {inc};
    sys.system_dirs = sysdirs;
    sys.nsystem_dirs = 1;
    unsigned char s0[32], s1[32];
    key_of(sys, s0);
    CHECK(memcmp(s0, k0, 32) != 0, "identity keying did not apply to a system header");
    key_of(sys, s1);
    CHECK(memcmp(s0, s1, 32) == 0, "identity key not deterministic");
    struct stat st0;
    stat(b, &st0);
    do { /* same size, new contents: wait until the file system's clock moves */
        write_text(b, "#define B 9\n");
        struct stat st1;
        stat(b, &st1);
        if (st1.st_mtim.tv_sec != st0.st_mtim.tv_sec || st1.st_mtim.tv_nsec != st0.st_mtim.tv_nsec) break;
        usleep(2000);
    } while (1);
    key_of(sys, s1);
    CHECK(memcmp(s0, s1, 32) != 0, "identity key ignores an edited system header two includes deep");
    write_text(b, "#define B 2\n");
    test_key_spellings(base, inc);
}

/* The body analysis behind GL_PARAM_COPIED: a 128-byte parameter copied whole is flagged, one
 * whose address is taken (grid constant) or that is only partly read is not. */
static void test_copied_params(void) {
    const char *ptx =
        ".version 8.0\n.target sm_90a\n.address_size 64\n"
        ".visible .entry copy(.param .align 64 .b8 m[128], .param .u64 o)\n{\n"
        "  .local .align 64 .b8 __local_depot0[128];\n"
        "  ld.param.v2.u64 {%rd1, %rd2}, [m];\n  ld.param.v2.u64 {%rd1, %rd2}, [m+16];\n"
        "  ld.param.v4.u32 {%r1, %r2, %r3, %r4}, [m+32];\n  ld.param.v4.u32 {%r1, %r2, %r3, %r4}, [m+48];\n"
        "  ld.param.u64 %rd3, [m+64];\n ld.param.u64 %rd3, [m+72];\n ld.param.u64 %rd3, [m+80];\n"
        "  ld.param.u64 %rd3, [m+88];\n@%p1 ld.param.u64 %rd3, [m+96];\n ld.param.u64 %rd3, [m+104];\n"
        "  ld.param.u64 %rd3, [m+112];\n ld.param.u64 %rd3, [m+120];\n  { ret; }\n}\n"
        ".visible .entry inplace(.param .align 64 .b8 m[128])\n{\n  mov.b64 %rd2, m;\n"
        "  cvta.param.u64 %rd1, %rd2;\n  prefetch.tensormap [%rd1];\n  ld.param.u64 %rd3, [m+8];\n  ret;\n}\n"
        ".visible .entry partial(.param .align 64 .b8 m[128])\n.maxntid 128, 1, 1\n{\n"
        "  ld.param.u64 %rd3, [m+8];\n  ret;\n}\n";
    gl_param p[4];
    char err[256];
    int n = gl_ptx_params(ptx, strlen(ptx), "copy", p, 4, err, sizeof err);
    CHECK(n == 2 && (p[0].flags & GL_PARAM_COPIED) && !(p[1].flags & GL_PARAM_COPIED), "copy: n=%d %s", n, err);
    n = gl_ptx_params(ptx, strlen(ptx), "inplace", p, 4, err, sizeof err);
    CHECK(n == 1 && !(p[0].flags & GL_PARAM_COPIED), "inplace flagged (n=%d %s)", n, err);
    n = gl_ptx_params(ptx, strlen(ptx), "partial", p, 4, err, sizeof err);
    CHECK(n == 1 && !(p[0].flags & GL_PARAM_COPIED), "partial flagged (n=%d %s)", n, err);
    /* a body cut short claims nothing */
    n = gl_ptx_params(ptx, strstr(ptx, "ld.param.u64 %rd3, [m+120]") - ptx, "copy", p, 4, err, sizeof err);
    CHECK(n == 2 && !(p[0].flags & GL_PARAM_COPIED), "truncated body flagged");
}

static void test_normalize(void) {
    static const char *const cases[][2] = {
        {"scale<2, float>", "scale<2,float>"}, {" scale < 2 ,float > ", "scale<2,float>"},
        {"f<unsigned  int>", "f<unsigned int>"}, {"f<g<1> >", "f<g<1>>"}, {"ns :: k", "ns::k"},
        {"f<const char *>", "f<const char*>"}, {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        CHECK(gl_name_normalize(cases[i][0], out, sizeof out) && strcmp(out, cases[i][1]) == 0,
              "'%s' -> '%s', want '%s'", cases[i][0], out, cases[i][1]);
    }
    char tiny[4];
    CHECK(!gl_name_normalize("abcdef", tiny, sizeof tiny), "overflow not reported");
}

/* The directives between an entry's parameters and its body, found for that entry only. */
static void test_entry_directives(void) {
    static const char ptx[] =
        ".visible .entry plain(.param .u32 n) { ret; }\n"
        ".visible .entry fixed(.param .u32 n)\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{ ret; }\n"
        ".visible .entry bare\n.maxntid 128, 1, 1\n{ .reg .b32 r; ret; }\n"
        ".visible .entry explicit_only(.param .u64 p)\n.explicitcluster\n{ ret; }\n"
        "// .entry fake(.param .u32 n) .reqnctapercluster 4\n";
    size_t len = sizeof ptx - 1;
    CHECK(gl_ptx_entry_has_directive(ptx, len, "fixed", ".reqnctapercluster"), "fixed");
    CHECK(gl_ptx_entry_has_directive(ptx, len, "fixed", ".explicitcluster"), "fixed explicit");
    CHECK(!gl_ptx_entry_has_directive(ptx, len, "plain", ".reqnctapercluster"), "plain");
    CHECK(!gl_ptx_entry_has_directive(ptx, len, "explicit_only", ".reqnctapercluster"), "explicit_only");
    CHECK(gl_ptx_entry_has_directive(ptx, len, "explicit_only", ".explicitcluster"), "explicit_only explicit");
    CHECK(gl_ptx_entry_has_directive(ptx, len, "bare", ".maxntid"), "no parameter list");
    CHECK(!gl_ptx_entry_has_directive(ptx, len, "bare", ".reg"), "a body's statement is no directive");
    CHECK(!gl_ptx_entry_has_directive(ptx, len, "fake", ".reqnctapercluster"), "inside a comment");
    CHECK(!gl_ptx_entry_has_directive(ptx, len, "missing", ".reqnctapercluster"), "no such entry");
    CHECK(!gl_ptx_entry_has_directive(ptx, 40, "fixed", ".reqnctapercluster"), "read past len");
    CHECK(!gl_ptx_entry_has_directive(NULL, 0, "fixed", ".reqnctapercluster"), "NULL ptx");
    for (size_t cut = 0; cut < len; cut++) (void)gl_ptx_entry_has_directive(ptx, cut, "fixed", ".reqnctapercluster");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    scratch_dir = argv[2];
    mkdir(scratch_dir, 0700);
    test_fixture("nvrtc_sm90a.ptx", 64);
    test_fixture("nvrtc_compute90_debug.ptx", 64);
    test_fixture("nvcc_sm90a.ptx", 128);
    test_edge_cases();
    test_sha256();
    test_entries();
    test_key();
    test_copied_params();
    test_normalize();
    test_entry_directives();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
