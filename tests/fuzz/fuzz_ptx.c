/*
 * fuzz_ptx.c — the PTX signature parser on arbitrary text: first line of the input is the entry
 * name to look for, the rest is the PTX.
 */
#include <stdint.h>
#include <string.h>

#include "ptx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t name_len = nl ? (size_t)(nl - text) : 0;
    char entry[128];
    if (name_len >= sizeof entry) name_len = sizeof entry - 1;
    memcpy(entry, text, name_len);
    entry[name_len] = '\0';
    const char *ptx = nl ? nl + 1 : text;
    size_t ptx_len = size - (size_t)(ptx - text);
    gl_param params[64];
    char err[256];
    int n = gl_ptx_params(ptx, ptx_len, entry, params, 64, err, sizeof err);
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++)
        if (params[i].size == 0 || params[i].align == 0 || (params[i].align & (params[i].align - 1)))
            __builtin_trap(); /* a parameter must have a size and a power-of-two alignment */
    (void)gl_ptx_entry_has_directive(ptx, ptx_len, entry, ".reqnctapercluster"); /* reads within ptx_len */
    return 0;
}
