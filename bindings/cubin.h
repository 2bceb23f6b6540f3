/*
 * cubin.h — what the compiler made of a kernel, read without a GPU: the resource attributes
 * ptxas writes into a cubin's ELF (.nv.info sections, section sizes) and the per-kernel lines
 * of ptxas's verbose report ("Used 32 registers", "360 bytes spill stores"). cubin.c
 *
 * No Lua and no CUDA in here: bytes and text in, numbers out.
 */
#ifndef GPULAB_CUBIN_H
#define GPULAB_CUBIN_H

#include <stdbool.h>
#include <stddef.h>

#define GL_CUBIN_BANKS 18 /* constant banks 0..17 */

/* -1 marks a value the image does not record. */
typedef struct gl_cubin_kernel {
    long regs;          /* registers per thread (EIATTR_REGCOUNT) */
    long frame;         /* stack frame bytes per thread: local arrays and spills (EIATTR_FRAME_SIZE) */
    long min_stack;     /* EIATTR_MIN_STACK_SIZE */
    long max_stack;     /* EIATTR_MAX_STACK_SIZE (calls through pointers or recursion) */
    long max_regs;      /* register cap: --maxrregcount or __launch_bounds__ (EIATTR_MAXREG_COUNT) */
    long max_threads;   /* __launch_bounds__ / __maxnthreads__ product (EIATTR_MAX_THREADS) */
    long barriers;      /* named barriers used (EIATTR_NUM_BARRIERS); absent means 0 */
    long param_bytes;   /* the parameter buffer's size (EIATTR_CBANK_PARAM_SIZE) */
    long smem_section;  /* size of .nv.shared.<kernel>: static shared memory, plus on sm_90 and
                           later the 1 KiB the system reserves per block (see reserved_smem) */
    bool reserved_smem; /* the image has a .nv.shared.reserved.* section */
    long code_bytes;    /* size of .text.<kernel> */
    long cmem[GL_CUBIN_BANKS]; /* constant bank sizes: the kernel's own .nv.constantN.<kernel>
                                  and the module's shared .nv.constantN (bank 3: __constant__) */
} gl_cubin_kernel;

/* Reads kernel `name` (its mangled name) from the ELF image (len bytes). Returns true, or false
 * with the reason in err (not an ELF image, truncated, no such kernel). */
bool gl_cubin_kernel_info(const void *image, size_t len, const char *name, gl_cubin_kernel *out, char *err,
                          size_t errlen);

/* True when the image has a section of that exact name (".nv_debug_line_sass": line info). */
bool gl_cubin_has_section(const void *image, size_t len, const char *name);

/* The numbers ptxas -v prints for one entry function; -1 where the report has none. */
typedef struct gl_ptxas_info {
    long regs, barriers, smem, stack_frame, spill_stores, spill_loads, cumulative_stack;
    long cmem[GL_CUBIN_BANKS];
} gl_ptxas_info;

/* Parses the report for entry `name` out of a compile log. Returns false when the log has no
 * "Compiling entry function 'name'" block. */
bool gl_ptxas_info_parse(const char *log, const char *name, gl_ptxas_info *out);

/* True for a line of ptxas's verbose report ("ptxas info    : ..." or its continuation
 * "ptxas         .     200 bytes stack frame ..."); warnings and errors are not. */
bool gl_ptxas_is_report_line(const char *line, size_t len);

#endif
