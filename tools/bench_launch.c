/*
 * bench_launch_raw — the baseline for tools/bench_launch.lua: a plain C loop over cuLaunchKernel.
 * Loads a cubin or PTX file holding `empty_kernel` and `args4` (kernels/bench_launch.cu), launches
 * each N times on the default stream and prints microseconds per launch (best of 3 runs), for a
 * sustained loop (N back to back, then a sync) and for bursts of 256 launches after a sync
 * (only the launching timed: the host's cost, with the queue never full):
 *     empty <us>          args4 <us>
 *     empty_burst <us>    args4_burst <us>
 * Then the same loops over cuLaunchKernelEx with one launch attribute each, N_EX launches per
 * run, same stream, shapes and warm-up:
 *     cluster_*      CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 2x1x1, grid 2, block 32
 *     pdl_*          CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 1, grid 1, block 32
 *     cooperative_*  CU_LAUNCH_ATTRIBUTE_COOPERATIVE 1, grid 1, block 32
 * (cluster_empty, cluster_args4, cluster_empty_burst, cluster_args4_burst, and so on). An attribute
 * the driver or device refuses gives one line "skip <kind>: <reason>" instead of its four.
 * Usage: bench_launch_raw FILE [N [N_EX]]   (libcuda is opened at run time, as gpulab does;
 * N_EX defaults to N)
 */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS) return;
    const char *name = NULL;
    gl_cu.cuGetErrorName(r, &name);
    fprintf(stderr, "bench_launch_raw: %s: %s (%d)\n", what, name ? name : "?", (int)r);
    exit(1);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    buf[n] = '\0'; /* PTX is loaded as a NUL-terminated string */
    fclose(f);
    return buf;
}

/* What one loop launches: a kernel, its arguments and, for the cuLaunchKernelEx loops, the
 * launch configuration holding the attribute (the plain loops use grid 1, block 32). */
typedef struct bench_case {
    CUfunction f;
    void **params;
    const CUlaunchConfig *ex;
} bench_case;

/* Seconds per launch for n launches, the queue drained before and after. */
static double time_launches(const bench_case *c, long n) {
    CUfunction f = c->f;
    void **params = c->params;
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    double t0 = now_s();
    for (long i = 0; i < n; i++)
        check(gl_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    return (now_s() - t0) / (double)n;
}

static double time_launches_ex(const bench_case *c, long n) {
    CUfunction f = c->f;
    void **params = c->params;
    const CUlaunchConfig *ex = c->ex;
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    double t0 = now_s();
    for (long i = 0; i < n; i++)
        check(gl_cu.cuLaunchKernelEx(ex, f, params, NULL), "cuLaunchKernelEx");
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    return (now_s() - t0) / (double)n;
}

#define BURST 256

/* Seconds per launch over bursts of BURST launches, each after a drained queue; only the
 * launches are timed. */
static double time_bursts(const bench_case *c, long n) {
    CUfunction f = c->f;
    void **params = c->params;
    double total = 0;
    long done = 0;
    while (done < n) {
        check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
        double t0 = now_s();
        for (int i = 0; i < BURST; i++)
            check(gl_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
        total += now_s() - t0;
        done += BURST;
    }
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    return total / (double)done;
}

static double time_bursts_ex(const bench_case *c, long n) {
    CUfunction f = c->f;
    void **params = c->params;
    const CUlaunchConfig *ex = c->ex;
    double total = 0;
    long done = 0;
    while (done < n) {
        check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
        double t0 = now_s();
        for (int i = 0; i < BURST; i++)
            check(gl_cu.cuLaunchKernelEx(ex, f, params, NULL), "cuLaunchKernelEx");
        total += now_s() - t0;
        done += BURST;
    }
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    return total / (double)done;
}

typedef double (*timer_fn)(const bench_case *, long);

static double best_of_3(timer_fn timer, const bench_case *c, long n) {
    timer(c, n / 10 + 1); /* warm-up */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t = timer(c, n);
        if (t < best) best = t;
    }
    return best;
}

/* The launch attributes timed over cuLaunchKernelEx, each alone, with the grid it needs. */
typedef enum { EX_CLUSTER, EX_PDL, EX_COOPERATIVE, EX_KINDS } ex_kind;
static const char *const ex_names[EX_KINDS] = {"cluster", "pdl", "cooperative"};

static CUlaunchConfig ex_config(ex_kind kind, CUlaunchAttribute *attr) {
    memset(attr, 0, sizeof *attr);
    unsigned grid = 1;
    switch (kind) {
    case EX_CLUSTER: /* a cluster of 2 needs a grid that is a multiple of 2 */
        attr->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr->value.clusterDim.x = 2;
        attr->value.clusterDim.y = 1;
        attr->value.clusterDim.z = 1;
        grid = 2;
        break;
    case EX_PDL:
        attr->id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr->value.programmaticStreamSerializationAllowed = 1;
        break;
    default:
        attr->id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attr->value.cooperative = 1;
        break;
    }
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = grid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = 0;
    cfg.hStream = NULL; /* the default stream, as the plain loops */
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

/* One launch of each kernel and a sync; false (and a "skip" line naming the error) when the
 * driver or the device refuses the attribute, so that the other attributes still run. */
static bool ex_usable(const char *name, const bench_case *cases, int ncases) {
    for (int i = 0; i < ncases; i++) {
        CUresult r = gl_cu.cuLaunchKernelEx(cases[i].ex, cases[i].f, cases[i].params, NULL);
        const char *what = "cuLaunchKernelEx";
        if (r == CUDA_SUCCESS) {
            r = gl_cu.cuCtxSynchronize();
            what = "cuCtxSynchronize after cuLaunchKernelEx";
        }
        if (r != CUDA_SUCCESS) {
            const char *err = NULL;
            gl_cu.cuGetErrorName(r, &err);
            printf("skip %s: %s: %s (%d)\n", name, what, err ? err : "?", (int)r);
            fflush(stdout);
            return false;
        }
    }
    return true;
}

/* The four cuLaunchKernelEx lines of one attribute: <name>_empty, _args4, _empty_burst,
 * _args4_burst. */
static void time_ex_kind(ex_kind kind, CUfunction empty, CUfunction args4, void **params, long n) {
    CUlaunchAttribute attr;
    CUlaunchConfig cfg = ex_config(kind, &attr);
    const char *name = ex_names[kind];
    bench_case cases[2] = {{empty, NULL, &cfg}, {args4, params, &cfg}};
    if (!ex_usable(name, cases, 2)) return;
    printf("%s_empty %.4f\n", name, best_of_3(time_launches_ex, &cases[0], n) * 1e6);
    printf("%s_args4 %.4f\n", name, best_of_3(time_launches_ex, &cases[1], n) * 1e6);
    printf("%s_empty_burst %.4f\n", name, best_of_3(time_bursts_ex, &cases[0], n) * 1e6);
    printf("%s_args4_burst %.4f\n", name, best_of_3(time_bursts_ex, &cases[1], n) * 1e6);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.cubin|FILE.ptx [N]\n", argv[0]);
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 200000;
    if (n <= 0) n = 200000;
    long n_ex = argc > 3 ? atol(argv[3]) : n;
    if (n_ex <= 0) n_ex = n;
    const char *why;
    if (!gl_driver_open(&why)) {
        fprintf(stderr, "bench_launch_raw: %s\n", why);
        return 1;
    }
    char *image = read_file(argv[1]);
    if (image == NULL) {
        fprintf(stderr, "bench_launch_raw: cannot read %s\n", argv[1]);
        return 1;
    }
    CUdevice dev;
    CUcontext ctx;
    check(gl_cu.cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(gl_cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(gl_cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    CUmodule mod;
    check(gl_cu.cuModuleLoadDataEx(&mod, image, 0, NULL, NULL), "cuModuleLoadDataEx");
    CUfunction empty, args4;
    check(gl_cu.cuModuleGetFunction(&empty, mod, "empty_kernel"), "cuModuleGetFunction(empty_kernel)");
    check(gl_cu.cuModuleGetFunction(&args4, mod, "args4"), "cuModuleGetFunction(args4)");

    /* args4 never dereferences its pointers (n is not the magic value), so no allocation:
     * the launch cost does not depend on the addresses */
    CUdeviceptr out = 0x1000, in = 0x2000;
    unsigned count = 1000;
    float scale = 2.0f;
    void *params[] = {&out, &in, &count, &scale};

    const bench_case plain_empty = {empty, NULL, NULL}, plain_args4 = {args4, params, NULL};
    printf("empty %.4f\n", best_of_3(time_launches, &plain_empty, n) * 1e6);
    printf("args4 %.4f\n", best_of_3(time_launches, &plain_args4, n) * 1e6);
    printf("empty_burst %.4f\n", best_of_3(time_bursts, &plain_empty, n) * 1e6);
    printf("args4_burst %.4f\n", best_of_3(time_bursts, &plain_args4, n) * 1e6);
    fflush(stdout);

    /* an optional entry point: NULL when the driver lacks it (driver.h) */
    if (gl_cu.cuLaunchKernelEx == NULL) {
        printf("skip cluster, pdl, cooperative: the CUDA driver has no cuLaunchKernelEx\n");
    } else {
        for (int kind = 0; kind < EX_KINDS; kind++) time_ex_kind((ex_kind)kind, empty, args4, params, n_ex);
    }
    gl_cu.cuModuleUnload(mod);
    free(image);
    return 0;
}
