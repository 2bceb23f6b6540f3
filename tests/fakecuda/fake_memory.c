/*
 * fake_memory.c — memory entry points of the driver stand-in. "Device" memory is host memory
 * whose address is handed out as the CUdeviceptr, so copies through the stand-in move real
 * bytes and round trips can be checked. Every allocation is registered: a free of an unknown
 * address, or a copy or memset that leaves an allocation, fails with CUDA_ERROR_INVALID_VALUE
 * instead of corrupting memory, which is what lets the tests catch double frees and overruns.
 * Async variants complete before returning.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "fake_stream.h"

#define FAKE_TOTAL_BYTES 150754820096ULL /* as cuDeviceTotalMem reports */

typedef struct allocation {
    uintptr_t base;
    size_t size;
    int pinned;
    int device; /* the current context's device at cuMemAlloc */
} allocation;

static allocation *allocs;
static size_t nallocs, capallocs;
static unsigned long long device_in_use;

static int track(void *p, size_t size, int pinned) {
    if (nallocs == capallocs) {
        size_t cap = capallocs ? capallocs * 2 : 64;
        allocation *n = realloc(allocs, cap * sizeof *n);
        if (n == NULL) return 0;
        allocs = n;
        capallocs = cap;
    }
    allocs[nallocs++] = (allocation){(uintptr_t)p, size, pinned, fake_current_device()};
    return 1;
}

/* The allocation of the given kind that starts exactly at p, or -1. */
static long find_base(uintptr_t p, int pinned) {
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].base == p && allocs[i].pinned == pinned) return (long)i;
    return -1;
}

/* Whether [p, p+n) lies inside one device allocation. */
static int device_range_ok(CUdeviceptr p, size_t n) {
    for (size_t i = 0; i < nallocs; i++) {
        const allocation *a = &allocs[i];
        if (a->pinned || p < a->base) continue;
        if (p - a->base <= a->size && n <= a->size - (p - a->base)) return 1;
    }
    return 0;
}

int fake_device_of(CUdeviceptr p, size_t n) {
    for (size_t i = 0; i < nallocs; i++) {
        const allocation *a = &allocs[i];
        if (a->pinned || p < a->base) continue;
        if (p - a->base <= a->size && n <= a->size - (p - a->base)) return a->device;
    }
    return -1;
}

static void untrack(long i) { allocs[i] = allocs[--nallocs]; }

bool fake_track_device(void *p, size_t size) { return track(p, size, 0) != 0; }

void fake_untrack_device(void *p) {
    long i = find_base((uintptr_t)p, 0);
    if (i >= 0) untrack(i);
}

CUresult fake_cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
    FAKE_ENTER("cuMemAlloc");
    if (dptr == NULL || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (fake_capture_forbids("cuMemAlloc")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (bytesize > FAKE_TOTAL_BYTES - device_in_use) return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = malloc(bytesize);
    if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!track(p, bytesize, 0)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    device_in_use += bytesize;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    fake_log("alloc 0x%llx %zu", (unsigned long long)*dptr, bytesize);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemFree(CUdeviceptr dptr) {
    FAKE_ENTER("cuMemFree");
    long i = find_base((uintptr_t)dptr, 0);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE;
    device_in_use -= allocs[i].size;
    untrack(i);
    fake_log("free 0x%llx", (unsigned long long)dptr);
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemAllocHost(void **pp, size_t bytesize) {
    FAKE_ENTER("cuMemAllocHost");
    if (pp == NULL || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (fake_capture_forbids("cuMemAllocHost")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    void *p = malloc(bytesize);
    if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!track(p, bytesize, 1)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    fake_log("alloc_host %p %zu", p, bytesize);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemFreeHost(void *p) {
    FAKE_ENTER("cuMemFreeHost");
    long i = find_base((uintptr_t)p, 1);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE;
    untrack(i);
    fake_log("free_host %p", p);
    free(p);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemGetInfo(size_t *free_bytes, size_t *total) {
    FAKE_ENTER("cuMemGetInfo");
    if (free_bytes == NULL || total == NULL) return CUDA_ERROR_INVALID_VALUE;
    *total = (size_t)FAKE_TOTAL_BYTES;
    *free_bytes = (size_t)(FAKE_TOTAL_BYTES - device_in_use);
    return CUDA_SUCCESS;
}

/* ---- copies ---------------------------------------------------------------------------- */
static CUresult copy_checked(const char *name, void *dst, const void *src, size_t n,
                             CUdeviceptr dev_dst, CUdeviceptr dev_src) {
    FAKE_ENTER(name);
    if ((dev_dst && !device_range_ok(dev_dst, n)) || (dev_src && !device_range_ok(dev_src, n)))
        return CUDA_ERROR_INVALID_VALUE;
    if (dst == NULL || src == NULL) return CUDA_ERROR_INVALID_VALUE;
    memmove(dst, src, n);
    fake_log("%s %p %p %zu", name, dst, src, n);
    return CUDA_SUCCESS;
}

#define DEV(p) ((void *)(uintptr_t)(p))

CUresult fake_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    return copy_checked("cuMemcpyHtoD", DEV(dst), src, n, dst, 0);
}
CUresult fake_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    return copy_checked("cuMemcpyDtoH", dst, DEV(src), n, 0, src);
}
CUresult fake_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    return copy_checked("cuMemcpyDtoD", DEV(dst), DEV(src), n, dst, src);
}
CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    (void)s;
    return copy_checked("cuMemcpyHtoDAsync", DEV(dst), src, n, dst, 0);
}
CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    (void)s;
    return copy_checked("cuMemcpyDtoHAsync", dst, DEV(src), n, 0, src);
}
CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    (void)s;
    return copy_checked("cuMemcpyDtoDAsync", DEV(dst), DEV(src), n, dst, src);
}

/* ---- memsets ----------------------------------------------------------------------------- */
static CUresult memset_checked(const char *name, CUdeviceptr dst, const void *value, size_t width,
                               size_t count) {
    FAKE_ENTER(name);
    size_t bytes;
    if (__builtin_mul_overflow(count, width, &bytes) || !device_range_ok(dst, bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (dst % width != 0) return CUDA_ERROR_INVALID_VALUE;
    unsigned char *p = DEV(dst);
    for (size_t i = 0; i < count; i++) memcpy(p + i * width, value, width);
    fake_log("%s 0x%llx %zu", name, (unsigned long long)dst, count);
    return CUDA_SUCCESS;
}

CUresult fake_cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
    return memset_checked("cuMemsetD8", d, &v, 1, n);
}
CUresult fake_cuMemsetD16(CUdeviceptr d, unsigned short v, size_t n) {
    return memset_checked("cuMemsetD16", d, &v, 2, n);
}
CUresult fake_cuMemsetD32(CUdeviceptr d, unsigned int v, size_t n) {
    return memset_checked("cuMemsetD32", d, &v, 4, n);
}
CUresult fake_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
    (void)s;
    return memset_checked("cuMemsetD8Async", d, &v, 1, n);
}
CUresult fake_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
    (void)s;
    return memset_checked("cuMemsetD16Async", d, &v, 2, n);
}
CUresult fake_cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
    (void)s;
    return memset_checked("cuMemsetD32Async", d, &v, 4, n);
}
