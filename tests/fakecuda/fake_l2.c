/*
 * fake_l2.c — L2 residency in the driver stand-in: the persisting set-aside
 * (cuCtxSetLimit/cuCtxGetLimit with CU_LIMIT_PERSISTING_L2_CACHE_SIZE), cuCtxResetPersistingL2Cache
 * and a stream's access-policy window (cuStreamSetAttribute/cuStreamGetAttribute). Checked as the
 * driver checks them on an H200; nothing here models a cache. Log lines:
 *   l2_limit REQUESTED granted=GRANTED   a set-aside was asked for
 *   l2_reset                             persisting lines were reset
 *   stream_window HANDLE 0xBASE+BYTES@RATIO/HIT/MISS   (a window of 0 bytes: removed)
 * The set-aside is granted in whole units of 64 KiB, rounded down (the real driver rounds to its
 * own granularity), and at most MAX_PERSISTING_L2_CACHE_SIZE; other limits answer NOT_SUPPORTED.
 */
#include "fake.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_L2_GRANULE (64u * 1024u)
#define FAKE_L2_MAX_PERSISTING 39321600u /* fake_core.c's MAX_PERSISTING_L2_CACHE_SIZE */
#define FAKE_L2_MAX_WINDOW 134213632u    /* fake_core.c's MAX_ACCESS_POLICY_WINDOW_SIZE */

static size_t persisting_bytes;

CUresult fake_cuCtxSetLimit(CUlimit limit, size_t value) {
    FAKE_ENTER("cuCtxSetLimit");
    if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_ERROR_NOT_SUPPORTED;
    size_t granted = value > FAKE_L2_MAX_PERSISTING ? FAKE_L2_MAX_PERSISTING : value;
    granted -= granted % FAKE_L2_GRANULE;
    persisting_bytes = granted;
    fake_log("l2_limit %zu granted=%zu", value, granted);
    return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetLimit(size_t *value, CUlimit limit) {
    FAKE_ENTER("cuCtxGetLimit");
    if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_ERROR_NOT_SUPPORTED;
    *value = persisting_bytes;
    return CUDA_SUCCESS;
}

CUresult fake_cuCtxResetPersistingL2Cache(void) {
    FAKE_ENTER("cuCtxResetPersistingL2Cache");
    fake_log("l2_reset");
    return CUDA_SUCCESS;
}

/* ---- stream windows ------------------------------------------------------------------------ */
typedef struct stream_window {
    struct stream_window *next;
    CUstream stream;
    CUaccessPolicyWindow w;
} stream_window;

static stream_window *windows;

static stream_window *find_window(CUstream s) {
    for (stream_window *w = windows; w; w = w->next)
        if (w->stream == s) return w;
    return NULL;
}

void fake_l2_stream_destroyed(CUstream s) {
    for (stream_window **p = &windows; *p; p = &(*p)->next)
        if ((*p)->stream == s) {
            stream_window *gone = *p;
            *p = gone->next;
            free(gone);
            return;
        }
}

static const char *property_name(CUaccessProperty p) {
    switch (p) {
    case CU_ACCESS_PROPERTY_NORMAL: return "normal";
    case CU_ACCESS_PROPERTY_STREAMING: return "streaming";
    case CU_ACCESS_PROPERTY_PERSISTING: return "persisting";
    default: return NULL;
    }
}

/* As the driver: at most the largest window, a hit ratio in [0, 1], known properties, and a miss
 * that is normal or streaming. */
static CUresult check_window(const CUaccessPolicyWindow *w) {
    if (w->num_bytes > FAKE_L2_MAX_WINDOW) return CUDA_ERROR_INVALID_VALUE;
    if (w->num_bytes == 0) return CUDA_SUCCESS; /* removing: the rest is not read */
    if (!(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f)) return CUDA_ERROR_INVALID_VALUE;
    if (property_name(w->hitProp) == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (w->missProp != CU_ACCESS_PROPERTY_NORMAL && w->missProp != CU_ACCESS_PROPERTY_STREAMING)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult fake_cuStreamSetAttribute(CUstream s, CUstreamAttrID attr, const CUstreamAttrValue *value) {
    FAKE_ENTER("cuStreamSetAttribute");
    if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_stream_live(s)) return CUDA_ERROR_INVALID_HANDLE;
    if (attr != CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW) return CUDA_ERROR_NOT_SUPPORTED;
    const CUaccessPolicyWindow *w = &value->accessPolicyWindow;
    CUresult r = check_window(w);
    if (r != CUDA_SUCCESS) return r;
    stream_window *sw = find_window(s);
    if (sw == NULL) {
        sw = calloc(1, sizeof *sw);
        if (sw == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
        sw->stream = s;
        sw->next = windows;
        windows = sw;
    }
    sw->w = *w;
    if (w->num_bytes == 0) memset(&sw->w, 0, sizeof sw->w);
    fake_log("stream_window %p %#lx+%zu@%.3g/%s/%s", (void *)s, (unsigned long)(uintptr_t)sw->w.base_ptr,
             sw->w.num_bytes, (double)sw->w.hitRatio, property_name(sw->w.hitProp),
             property_name(sw->w.missProp));
    return CUDA_SUCCESS;
}

CUresult fake_cuStreamGetAttribute(CUstream s, CUstreamAttrID attr, CUstreamAttrValue *value) {
    FAKE_ENTER("cuStreamGetAttribute");
    if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_stream_live(s)) return CUDA_ERROR_INVALID_HANDLE;
    if (attr != CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW) return CUDA_ERROR_NOT_SUPPORTED;
    memset(value, 0, sizeof *value);
    const stream_window *sw = find_window(s);
    if (sw) value->accessPolicyWindow = sw->w;
    return CUDA_SUCCESS;
}
