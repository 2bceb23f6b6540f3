/*
 * fake_green.c — green contexts (SM partitions) of the driver stand-in.
 *
 * The stand-in's device has 132 SMs, as an H200. Its SM resource reports the split rules cuda.h
 * documents for compute capability 9.0: at least 8 SMs, in multiples of 8
 * (minSmPartitionSize = smCoscheduledAlignment = 8). cuDevSmResourceSplitByCount rounds minCount
 * up to a multiple of 8 (at least 8) and makes as many groups of that size as fit and were asked
 * for; what is left goes to `remaining`. Failure codes follow the driver's documentation:
 * CUDA_ERROR_INVALID_VALUE for bad pointers or flags and a minCount above the input's SMs,
 * CUDA_ERROR_INVALID_RESOURCE_TYPE for a resource that is not an SM resource,
 * CUDA_ERROR_INVALID_DEVICE for a bad device.
 *
 * A green context's streams are ordinary stand-in streams (fake_stream.c), non-blocking, made
 * through fake_cuStreamCreateWithPriority, so every stream call works on them. The log gets
 * "green_create sms=N", "green_stream STREAM sms=N" and "green_destroy sms=N live_streams=K",
 * K counting its streams not yet destroyed (the real driver leaks them: tests check K is 0).
 * Destroying a green context twice answers CUDA_ERROR_INVALID_CONTEXT.
 */
#include "fake.h"
#include "fake_stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_SMS 132
#define FAKE_SM_GRANULARITY 8

/* A resource's "internal" bytes carry a marker, so that a resource the stand-in did not fill
 * in is refused as the driver refuses one. */
#define RESOURCE_MARK 0x47524e31u /* "GRN1" */

typedef struct fake_desc {
    struct fake_desc *next;
    unsigned sms;
    int device;
} fake_desc;

#define MAX_GREEN_STREAMS 256
typedef struct fake_green {
    struct fake_green *next;
    unsigned sms;
    int device;
    CUstream streams[MAX_GREEN_STREAMS]; /* made in it, NULL once seen destroyed */
    int nstreams;
} fake_green;

static fake_desc *descs;
static fake_green *greens;

static void mark_resource(CUdevResource *r, unsigned sms, int device) {
    memset(r, 0, sizeof *r);
    r->type = CU_DEV_RESOURCE_TYPE_SM;
    uint32_t mark = RESOURCE_MARK;
    memcpy(r->_internal_padding, &mark, sizeof mark);
    memcpy(r->_internal_padding + sizeof mark, &device, sizeof device);
    r->sm.smCount = sms;
    r->sm.minSmPartitionSize = FAKE_SM_GRANULARITY;
    r->sm.smCoscheduledAlignment = FAKE_SM_GRANULARITY;
}

static bool valid_resource(const CUdevResource *r, int *device) {
    uint32_t mark;
    memcpy(&mark, r->_internal_padding, sizeof mark);
    memcpy(device, r->_internal_padding + sizeof mark, sizeof *device);
    return mark == RESOURCE_MARK;
}

CUresult fake_cuDeviceGetDevResource(CUdevice dev, CUdevResource *resource, CUdevResourceType type) {
    FAKE_ENTER("cuDeviceGetDevResource");
    if (resource == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    mark_resource(resource, FAKE_SMS, (int)dev);
    return CUDA_SUCCESS;
}

CUresult fake_cuDevSmResourceSplitByCount(CUdevResource *result, unsigned *nbGroups, const CUdevResource *input,
                                          CUdevResource *remaining, unsigned useFlags, unsigned minCount) {
    FAKE_ENTER("cuDevSmResourceSplitByCount");
    int device = -1;
    if (nbGroups == NULL || input == NULL || useFlags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (input->type != CU_DEV_RESOURCE_TYPE_SM || !valid_resource(input, &device))
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    unsigned total = input->sm.smCount;
    if (minCount > total) return CUDA_ERROR_INVALID_VALUE;
    unsigned size = minCount < FAKE_SM_GRANULARITY ? FAKE_SM_GRANULARITY : minCount;
    size = (size + FAKE_SM_GRANULARITY - 1) / FAKE_SM_GRANULARITY * FAKE_SM_GRANULARITY;
    unsigned fit = size <= total ? total / size : 0;
    if (result == NULL) { /* a query of how many groups would be made */
        *nbGroups = fit;
        return CUDA_SUCCESS;
    }
    unsigned made = *nbGroups < fit ? *nbGroups : fit;
    for (unsigned i = 0; i < made; i++) mark_resource(&result[i], size, device);
    if (remaining) mark_resource(remaining, total - made * size, device);
    *nbGroups = made;
    fake_log("sm_split min=%u size=%u groups=%u", minCount, size, made);
    return CUDA_SUCCESS;
}

CUresult fake_cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned nbResources) {
    FAKE_ENTER("cuDevResourceGenerateDesc");
    if (phDesc == NULL || resources == NULL || nbResources == 0) return CUDA_ERROR_INVALID_VALUE;
    int device = -1;
    unsigned sms = 0;
    for (unsigned i = 0; i < nbResources; i++) {
        int d = -1;
        if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM || !valid_resource(&resources[i], &d))
            return CUDA_ERROR_INVALID_RESOURCE_TYPE;
        if (i > 0 && d != device) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
        device = d;
        sms += resources[i].sm.smCount;
    }
    fake_desc *desc = calloc(1, sizeof *desc);
    if (desc == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    desc->sms = sms;
    desc->device = device;
    desc->next = descs; /* the driver has no call to free a descriptor: kept for the process */
    descs = desc;
    *phDesc = (CUdevResourceDesc)desc;
    return CUDA_SUCCESS;
}

static fake_desc *find_desc(CUdevResourceDesc h) {
    for (fake_desc *d = descs; d; d = d->next)
        if ((void *)d == (void *)h) return d;
    return NULL;
}

static fake_green *find_green(CUgreenCtx h) {
    for (fake_green *g = greens; g; g = g->next)
        if ((void *)g == (void *)h) return g;
    return NULL;
}

CUresult fake_cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned flags) {
    FAKE_ENTER("cuGreenCtxCreate");
    if (phCtx == NULL || flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    fake_desc *d = find_desc(desc);
    if (d == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (d->device != (int)dev) return CUDA_ERROR_INVALID_DEVICE;
    fake_green *g = calloc(1, sizeof *g);
    if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    g->sms = d->sms;
    g->device = (int)dev;
    g->next = greens;
    greens = g;
    fake_log("green_create %p sms=%u device=%d", (void *)g, g->sms, g->device);
    *phCtx = (CUgreenCtx)g;
    return CUDA_SUCCESS;
}

CUresult fake_cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned flags, int priority) {
    FAKE_ENTER("cuGreenCtxStreamCreate");
    if (phStream == NULL || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
    fake_green *g = find_green(greenCtx);
    if (g == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    if (g->nstreams == MAX_GREEN_STREAMS) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = fake_cuStreamCreateWithPriority(phStream, CU_STREAM_NON_BLOCKING, priority);
    if (r != CUDA_SUCCESS) return r;
    g->streams[g->nstreams++] = *phStream;
    fake_log("green_stream %p sms=%u", (void *)*phStream, g->sms);
    return CUDA_SUCCESS;
}

/* Streams of g the stand-in still knows: a destroyed one answers INVALID_HANDLE to a query. */
static int live_streams(fake_green *g) {
    int n = 0;
    for (int i = 0; i < g->nstreams; i++) {
        if (g->streams[i] && fake_stream_known(g->streams[i])) n++;
    }
    return n;
}

CUresult fake_cuGreenCtxDestroy(CUgreenCtx hCtx) {
    FAKE_ENTER("cuGreenCtxDestroy");
    fake_green *g = find_green(hCtx);
    if (g == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    for (fake_green **p = &greens; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    fake_log("green_destroy %p sms=%u live_streams=%d", (void *)g, g->sms, live_streams(g));
    free(g);
    return CUDA_SUCCESS;
}
