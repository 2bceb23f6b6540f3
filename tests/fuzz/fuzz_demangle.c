/*
 * fuzz_demangle.c — the entry-name demangler and the declaration reader on arbitrary bytes: the
 * first line of the input is the entry name, the rest the kernel's source text. Either may
 * refuse; neither may crash, read past its input or write anything but well-formed results.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "demangle.h"

/* n + 1 NUL-terminated strings (the name, then each type) inside out[0..cap) */
static void check_demangled(const char *out, size_t cap, int n) {
    if (n < -1) __builtin_trap();
    if (n == -1) {
        if (out[0] != '\0') __builtin_trap(); /* a refusal leaves the empty string */
        return;
    }
    size_t at = 0;
    for (int i = 0; i <= n; i++) {
        const char *nul = memchr(out + at, '\0', cap - at);
        if (nul == NULL) __builtin_trap();
        at = (size_t)(nul - out) + 1;
        if (i <= n - 1 && at >= cap) __builtin_trap();
    }
}

/* n declarations, each NUL-terminated and at most GL_DECL_MAX bytes, inside out[0..cap) */
static void check_declarations(const char *out, size_t cap, int n, int known) {
    if (known < -1 || known > n) __builtin_trap();
    size_t at = 0;
    int nonempty = 0;
    for (int i = 0; i < n; i++) {
        const char *nul = memchr(out + at, '\0', cap - at);
        if (nul == NULL || (size_t)(nul - (out + at)) > GL_DECL_MAX) __builtin_trap();
        nonempty += nul > out + at;
        at = (size_t)(nul - out) + 1;
    }
    if (known >= 0 && nonempty != known) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t name_len = nl ? (size_t)(nl - text) : size;
    char entry[4096];
    if (name_len >= sizeof entry) name_len = sizeof entry - 1;
    memcpy(entry, text, name_len);
    entry[name_len] = '\0';
    const char *src = nl ? nl + 1 : NULL;
    size_t src_len = nl ? size - (size_t)(src - text) : 0;

    char out[1024];
    int n = gl_demangle(entry, out, sizeof out);
    check_demangled(out, sizeof out, n);

    /* parameters as the PTX might have them: sizes from the input's bytes */
    static const unsigned sizes[] = {1, 2, 4, 8, 16, 24, 128};
    int np = n >= 0 && n <= 64 ? n : 3;
    gl_param params[64];
    for (int i = 0; i < np; i++) {
        memset(&params[i], 0, sizeof params[i]);
        params[i].size = sizes[(size > (size_t)i ? data[i] : (uint8_t)i) % (sizeof sizes / sizeof sizes[0])];
        memcpy(params[i].kind, "b8", 3);
    }
    size_t cap = gl_declarations_cap(np);
    char *decls = malloc(cap);
    if (decls == NULL) return 0;
    int known = gl_param_declarations(entry, src, src_len, params, np, decls, cap);
    check_declarations(decls, cap, np, known);
    free(decls);
    return 0;
}
