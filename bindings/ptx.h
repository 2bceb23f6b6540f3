/*
 * ptx.h — reading a kernel's parameter list from PTX text (no driver needed). ptx.c
 */
#ifndef GPULAB_PTX_H
#define GPULAB_PTX_H

#include <stddef.h>

typedef struct gl_param {
    char kind[8];      /* "u8".."u64", "s8".."s64", "f16", "f32", "f64", "b8".."b64", "pred" */
    unsigned size;     /* bytes */
    unsigned align;    /* bytes */
    unsigned offset;   /* byte offset in the packed parameter buffer, with alignment */
} gl_param;

/* Parses the .entry named `entry` in `ptx` (len bytes). Returns the parameter count (>= 0,
 * at most max written to out) or -1 with a message in err. */
int gl_ptx_params(const char *ptx, size_t len, const char *entry, gl_param *out, int max,
                  char *err, size_t errlen);

#endif
