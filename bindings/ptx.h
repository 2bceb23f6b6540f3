/*
 * ptx.h — reading a kernel's parameter list from PTX text (no driver needed). ptx.c
 */
#ifndef GPULAB_PTX_H
#define GPULAB_PTX_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gl_param {
    char kind[8];      /* "u8".."u64", "s8".."s64", "f16", "f32", "f64", "b8".."b64", "pred" */
    unsigned size;     /* bytes */
    unsigned align;    /* bytes */
    unsigned offset;   /* byte offset in the packed parameter buffer, with alignment */
    unsigned flags;    /* GL_PARAM_* facts read from the entry's body */
} gl_param;

/* The body loads every byte of this parameter with ld.param and never takes its address: the
 * kernel works on a copy (a by-value struct in registers or local memory). For a 128-byte
 * tensor map that means it was not declared const __grid_constant__, so the TMA unit would be
 * handed the address of the copy. Set only for parameters of 64 bytes or more. */
#define GL_PARAM_COPIED 1u

/* Parses the .entry named `entry` in `ptx` (len bytes). Returns the parameter count (>= 0,
 * at most max written to out) or -1 with a message in err. */
int gl_ptx_params(const char *ptx, size_t len, const char *entry, gl_param *out, int max,
                  char *err, size_t errlen);

/* Whether the .entry named `entry` in `ptx` (len bytes) carries `directive` (".reqnctapercluster")
 * between its parameter list and its body. False when there is no such entry. */
bool gl_ptx_entry_has_directive(const char *ptx, size_t len, const char *entry, const char *directive);

/* Writes `name` with insignificant white space removed into out (cap bytes): spaces survive
 * only between two identifier characters, collapsed to one ("scale<2, float>" and
 * "scale< 2,float >" both become "scale<2,float>"; "unsigned  int" stays "unsigned int").
 * Returns false when it does not fit. */
bool gl_name_normalize(const char *name, char *out, size_t cap);

#endif
