/*
 * module.h — devices' launch limits (device.c), modules and kernels (module.c), shared with
 * launch.c, which packs arguments against a kernel's parameter list.
 */
#ifndef GPULAB_MODULE_H
#define GPULAB_MODULE_H

#include <stdbool.h>

#include <cuda.h>
#include <lua.h>

#include "identity.h"
#include "launchlog.h"
#include "lifetime.h"
#include "ptx.h"

/* Limits of one device, read once per device (launch checks must not query the driver). */
typedef struct gl_device_limits {
    int ordinal;
    int max_threads_per_block;
    int max_block[3], max_grid[3];
    int smem_per_block;       /* without opt-in (48 KB) */
    int smem_optin;           /* per block with cuFuncSetAttribute (227 KB on Hopper) */
    int smem_per_sm, smem_reserved;
    int regs_per_sm, threads_per_sm, blocks_per_sm, warp_size, sm_count;
    int cc_major, cc_minor;
    int cluster_launch, cooperative_launch; /* 1 when the device supports them */
    int max_window_bytes;    /* largest L2 access-policy window, 0 when none */
    int priority_least, priority_greatest; /* launch priority range (greatest <= least) */
} gl_device_limits;

/* The limits of the current device (gl_require_gpu first). Raises "fn: ..." on a driver error. */
const gl_device_limits *gl_device_limits_current(lua_State *L, const char *fn);

/* Compute capability of the current device without raising: 1 and the numbers, or 0 when no
 * usable device (no driver, no device, poisoned context). For picking an NVRTC arch. */
int gl_device_cc(int *major, int *minor);

/* Module "cuda.module" ---------------------------------------------------------- module.c */
#define GL_MODULE_T "cuda.module"
typedef struct gl_module {
    CUmodule handle;  /* NULL once freed */
    int ordinal;      /* device it was loaded on */
    int nkernels;     /* kernels taken from it so far (for __tostring) */
    int views;        /* live mod:global views into its variables */
    CUmodule unload_pending; /* freed while views were alive: unloaded when the last one goes */
    gl_use use;       /* launches of its kernels mark it; released views add their uses */
} gl_module;
/* uservalue 1: PTX text (string) or nil; uservalue 2: lowered-name table or nil;
 * uservalue 3: a short description of where it came from; uservalue 4: the source text NVRTC
 * compiled it from, or nil */

/* Kernel "cuda.kernel" ---------------------------------------------------------- module.c */
#define GL_KERNEL_T "cuda.kernel"
#define GL_MAX_PARAMS 1024
#define GL_LAUNCH_CACHE_BYTES 1280
typedef struct gl_kernel {
    CUfunction fn;
    gl_module *module;      /* kept alive by uservalue 1 */
    const gl_device_limits *limits;
    const char *name;       /* as the script asked for it ("scale<2>", "scale"), for messages */
    char log_name[GL_LOG_NAME]; /* name as the launch log keeps it (launchlog.h), made once */
    const char *entry;      /* the symbol in the module (mangled for C++) */
    const char *decls;      /* nparams declarations ("float* x"), each NUL-terminated, "" where
                               unknown (declared.h); the three strings are stored after params */
    int nparams;
    bool typed;             /* params' kinds came from PTX (else only sizes are known) */
    unsigned argbytes;      /* size of the packed parameter buffer */
    int regs, static_smem, local_bytes, const_bytes, max_threads;
    int max_dynamic_smem;   /* as last set/read; re-read before refusing a launch */
    unsigned char *arg_class; /* nparams bytes for launch.c's packing rule per parameter,
                                 zero until launch.c classifies them on first use */
    const void *launch_keys[16]; /* launch.c's cache: its Lua state's configuration key strings */
    int cluster_dims[3];    /* REQUIRED_CLUSTER_*: the shape every launch uses, compiled in by
                               __cluster_dims__ or set at run time; all 0 when none */
    bool cluster_compiled;  /* the shape is compiled in (it cannot be set) */
    bool cluster_must_be_set; /* CLUSTER_SIZE_MUST_BE_SET: launches need a cluster */
    int nonportable_cluster; /* NON_PORTABLE_CLUSTER_SIZE_ALLOWED as last set/read: 1 lets
                               clusters above 8 launch; re-read before refusing a launch */
    struct gl_launch_checked { /* launch.c's cache of the last cluster/cooperative check that
                                  passed, so repeated launches ask the driver nothing */
        unsigned block_threads, smem, cluster[3];
        int limit;
    } checked_cluster, checked_coop;
    uint64_t attributes_seen; /* gl_kernel_sync_attributes: the attribute sets it has caught up with */
    /* launch.c's: the last two configuration tables whose checks passed for this kernel, and what the
       checks concluded (launch.c's cfg_cache; the size is checked there) */
    uint64_t launch_cache[GL_LAUNCH_CACHE_BYTES / 8]; /* 8-byte aligned, as a userdata is */
    /* launch.c's: k:launch packs its arguments here, inside the kernel object (64-byte aligned,
       the padding between parameters zero for good), and hands the driver launch_ptrs, one
       pointer per parameter into it, made once. NULL when argbytes exceeds GL_MAX_ARG_BYTES. */
    unsigned char *launch_args;
    void **launch_ptrs;
    gl_param params[];      /* nparams entries, then arg_class, then the strings' bytes */
} gl_kernel;

/* The driver's limit for a kernel's parameters (CUDA 12.1 and later, Volta and later). */
#define GL_MAX_ARG_BYTES 32764

/* launch.c: every kernel forgets the configuration check it remembers (a kernel attribute was
 * set: the limits it was checked against may have changed). */
void gl_forget_launch_checks(void);

/* Kernel attributes belong to the function, which every kernel object made for it shares. After
 * k sets one (k's cached copy already updated): k forgets its occupancy answers, every kernel its
 * remembered configuration check, and every other kernel object re-reads what it cached before
 * its next check (gl_kernel_sync_attributes). */
void gl_kernel_attribute_set(gl_kernel *k);
/* Before a check that uses k's cached attributes: when any kernel object set an attribute since
 * k last looked, re-reads the dynamic shared memory limit, the non-portable cluster flag and a
 * cluster shape not compiled in from the driver, and forgets k's occupancy answers. Raises nothing (a failed read keeps the cached
 * value; the driver then has the last word). */
void gl_kernel_sync_attributes(gl_kernel *k);

/* The cluster shape a launch of k without cluster= runs in (REQUIRED_CLUSTER_*, compiled in or
 * set with k:set_attribute), axes a compiled-in shape leaves out as 1, in out. Returns false when
 * k has none. A shape set at run time with some axes 0 is refused ("fn: ..."): the driver refuses
 * such a launch (on the H200, driver 580.159, with CUDA_ERROR_INVALID_CLUSTER_SIZE). */
bool gl_kernel_required_cluster(lua_State *L, const gl_kernel *k, unsigned out[3], const char *fn);
/* Whether a launch's cluster shape c contradicts k's required one on an axis that one sets (a
 * run-time shape's axes left 0 take any size, as the driver lets them). shape gets k's shape
 * (0 for such axes) for the message. */
bool gl_kernel_cluster_contradicts(const gl_kernel *k, const unsigned c[3], unsigned shape[3]);
/* Where k's required cluster shape comes from, for messages: "compiled-in __cluster_dims__" or
 * "run-time required_cluster_*". */
const char *gl_kernel_cluster_origin(const gl_kernel *k);

/* Pushes and returns "scale<2> parameter 1 (float* x)": parameter i (from 0) of k named by its
 * declaration, else by its PTX type ("scale parameter 2 (u64)"), for messages about it. */
const char *gl_push_param_name(lua_State *L, const gl_kernel *k, int i);

/* Looks `asked` up in the lowered-name table at index `lowered` (a program's `lowered`), read
 * raw: first exactly, then with white space normalised (gl_name_normalize). Returns the lowered
 * name (anchored in the table) or NULL. Runs no Lua code. */
const char *gl_lookup_lowered(lua_State *L, int lowered, const char *asked);
/* Pushes "a, b, c" (the registered name expressions of table `lowered`, sorted) or "none". */
void gl_push_registered_names(lua_State *L, int lowered);
/* True when `name` looks like a name expression rather than a plain symbol (has <, (, : or space). */
bool gl_is_name_expression(const char *name);

gl_kernel *gl_check_kernel(lua_State *L, int idx, const char *fn);
/* The kernel at idx, or NULL (also under a metatable other than its own: identity.c). */
gl_kernel *gl_test_kernel(lua_State *L, int idx);
/* gl_check_kernel inline, for k:launch and k:prepare, where the call cost a launch about 20
 * instructions: the same test, and gl_kernel_check_failed raises the same errors. */
__attribute__((noreturn))
void gl_kernel_check_failed(lua_State *L, int idx, const char *fn, const gl_kernel *k);
static inline gl_kernel *gl_check_kernel_inline(lua_State *L, int idx, const char *fn) {
    static uint64_t tag; /* this file's copy of GL_KERNEL_T's tag */
    gl_kernel *k = gl_testudata_fast(L, idx, GL_KERNEL_T, &tag);
    if (k == NULL || k->module->handle == NULL) gl_kernel_check_failed(L, idx, fn, k);
    return k;
}

#endif
