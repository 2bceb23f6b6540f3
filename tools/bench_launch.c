/*
 * bench_launch_raw — the baseline for tools/bench_launch.lua: a plain C loop over cuLaunchKernel.
 * Loads a cubin or PTX file holding `empty_kernel` and `args4` (kernels/bench_launch.cu), launches
 * each N times on the default stream and prints microseconds per launch (best of 3 runs), for a
 * sustained loop (N back to back, then a sync) and for bursts of 256 launches after a sync
 * (only the launching timed: the host's cost, with the queue never full):
 *     empty <us>          args4 <us>
 *     empty_burst <us>    args4_burst <us>
 * Usage: bench_launch_raw FILE [N]   (libcuda is opened at run time, as gpulab does)
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

/* Seconds per launch for n launches of f, the queue drained before and after. */
static double time_launches(CUfunction f, void **params, long n) {
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    double t0 = now_s();
    for (long i = 0; i < n; i++)
        check(gl_cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
    check(gl_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    return (now_s() - t0) / (double)n;
}

#define BURST 256

/* Seconds per launch over bursts of BURST launches, each after a drained queue; only the
 * launches are timed. */
static double time_bursts(CUfunction f, void **params, long n) {
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

static double best_of_3(double (*timer)(CUfunction, void **, long), CUfunction f, void **params, long n) {
    timer(f, params, n / 10 + 1); /* warm-up */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t = timer(f, params, n);
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.cubin|FILE.ptx [N]\n", argv[0]);
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 200000;
    if (n <= 0) n = 200000;
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

    printf("empty %.4f\n", best_of_3(time_launches, empty, NULL, n) * 1e6);
    printf("args4 %.4f\n", best_of_3(time_launches, args4, params, n) * 1e6);
    printf("empty_burst %.4f\n", best_of_3(time_bursts, empty, NULL, n) * 1e6);
    printf("args4_burst %.4f\n", best_of_3(time_bursts, args4, params, n) * 1e6);
    gl_cu.cuModuleUnload(mod);
    free(image);
    return 0;
}
