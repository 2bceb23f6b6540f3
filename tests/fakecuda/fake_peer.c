/*
 * fake_peer.c — peer access and peer copies in the driver stand-in, for the multi-device
 * bookkeeping tests (GPULAB_FAKE_DEVICES=n).
 *
 * GPULAB_FAKE_PEER says which ordered pairs can access each other: "all" (default), "none", or
 * a list "0-1,1-0". cuCtxEnablePeerAccess follows the driver's rules: it needs a current context,
 * refuses the same device (CUDA_ERROR_INVALID_DEVICE), a pair that cannot access
 * (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) and a second enable (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED).
 * cuMemcpyPeer(Async) checks that each address lies in an allocation made on its context's
 * device, so a copy handed the wrong context fails as it would on a GPU.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define MAX_PEER 16
static bool peer_enabled[MAX_PEER][MAX_PEER];

static bool pair_listed(const char *spec, int a, int b) {
    for (const char *p = spec; p && *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || *end != '-') return false;
        const char *q = end + 1;
        long y = strtol(q, &end, 10);
        if (end == q) return false;
        if (x == a && y == b) return true;
        p = *end == ',' ? end + 1 : NULL;
    }
    return false;
}

static bool can_access(int a, int b) {
    const char *spec = getenv("GPULAB_FAKE_PEER");
    if (spec == NULL || *spec == '\0' || strcmp(spec, "all") == 0) return a != b;
    if (strcmp(spec, "none") == 0) return false;
    return a != b && pair_listed(spec, a, b);
}

static bool valid(int d) { return d >= 0 && d < fake_device_count() && d < MAX_PEER; }

CUresult fake_cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    FAKE_ENTER("cuDeviceCanAccessPeer");
    if (can == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!valid(dev) || !valid(peer)) return CUDA_ERROR_INVALID_DEVICE;
    *can = can_access(dev, peer);
    return CUDA_SUCCESS;
}

CUresult fake_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    FAKE_ENTER("cuCtxEnablePeerAccess");
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    int from = fake_current_device(), to = fake_context_device(peer);
    if (from < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (to < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (from == to) return CUDA_ERROR_INVALID_DEVICE;
    if (!can_access(from, to)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (peer_enabled[from][to]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    peer_enabled[from][to] = true;
    fake_log("peer_enable %d %d", from, to);
    return CUDA_SUCCESS;
}

static CUresult peer_copy(const char *name, CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                          CUcontext sctx, size_t n) {
    FAKE_ENTER(name);
    int dd = fake_context_device(dctx), sd = fake_context_device(sctx);
    if (dd < 0 || sd < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (n == 0) return CUDA_SUCCESS;
    if (fake_device_of(dst, n) != dd || fake_device_of(src, n) != sd) return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    fake_log("%s %d<-%d %zu", name, dd, sd, n);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
    return peer_copy("cuMemcpyPeer", dst, dctx, src, sctx, n);
}

CUresult fake_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                size_t n, CUstream s) {
    (void)s;
    return peer_copy("cuMemcpyPeerAsync", dst, dctx, src, sctx, n);
}
