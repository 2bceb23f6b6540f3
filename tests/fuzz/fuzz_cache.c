/*
 * fuzz_cache.c — the compile-cache entry reader on arbitrary bytes. Whatever it accepts must
 * survive a serialize/parse round trip unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

static int same(const char *a, size_t na, const char *b, size_t nb) {
    if (na != nb || (a == NULL) != (b == NULL)) return 0;
    return na == 0 || memcmp(a, b, na) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gl_cache_entry e, again;
    char err[256];
    if (gl_cache_parse(data, size, NULL, &e, err, sizeof err) != 0) return 0;
    unsigned char key[32] = {0};
    size_t len = 0;
    unsigned char *buf = gl_cache_serialize(&e, key, &len);
    if (buf == NULL) __builtin_trap();
    if (gl_cache_parse(buf, len, key, &again, err, sizeof err) != 0) __builtin_trap();
    if (!same(e.ptx, e.ptx_len, again.ptx, again.ptx_len) ||
        !same(e.cubin, e.cubin_len, again.cubin, again.cubin_len) ||
        !same(e.log, e.log_len, again.log, again.log_len) || e.nlowered != again.nlowered)
        __builtin_trap();
    for (int i = 0; i < e.nlowered; i++)
        if (strcmp(e.names[i], again.names[i]) || strcmp(e.lowered[i], again.lowered[i]))
            __builtin_trap();
    gl_cache_entry_free(&again);
    gl_cache_entry_free(&e);
    free(buf);
    return 0;
}
