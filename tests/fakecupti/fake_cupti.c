/*
 * fake_cupti.c — a CUPTI stand-in for CI (libfakecupti.so, selected by GPULAB_CUPTI), used with
 * the driver stand-in (GPULAB_LIBCUDA=libfakecuda.so). It implements the range profiler and
 * profiler host calls cuda.profile makes, with their sequencing rules, and measures nothing:
 *
 *   - the chip knows the metrics in `metrics[]` below (base "." submetric);
 *   - each launch the driver stand-in accepts between Start and Stop becomes one range, named
 *     after its kernel; past maxRangesPerPass ranges are dropped and counted;
 *   - metric m of a range evaluates to 1000 * (m's index in metrics[] + 1) + the launch's thread
 *     count (grid x block), so tests can check values are passed through per launch and name;
 *   - a configuration of n metrics needs ceil(n / 4) passes; each pass of each launch is logged
 *     ("cupti replay KERNEL pass i/n") as kernel replay would run it;
 *   - a pushed range must be popped before Stop; with GPULAB_FAKE_CUPTI_OUTER=1 it is reported as
 *     a range of its own (after the launches inside it), as a profiler might;
 *   - GPULAB_FAKE_CUPTI_FAIL=cuptiName:code makes that entry point return code;
 *   - GPULAB_FAKE_LOG gets "cupti <call>" lines for every object created and destroyed, so a test
 *     can check that nothing is left behind.
 */
#define _GNU_SOURCE
#include "cupti_abi.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static const char *const metrics[] = {
    "smsp__warps_active.avg.per_cycle_active", "smsp__warps_active.sum",
    "smsp__warps_eligible.avg.per_cycle_active", "smsp__warps_eligible.sum",
    "smsp__issue_active.avg.per_cycle_active", "smsp__issue_active.sum",
    "smsp__cycles_active.avg", "smsp__cycles_active.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__cycles_elapsed.avg",
    "dram__bytes.sum", "dram__bytes.sum.per_second", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "gpu__time_duration.sum", "launch__grid_size", "launch__block_size", NULL};

#define MAX_NAME 128
typedef struct { char kernel[MAX_NAME]; double threads; } fake_range;
typedef struct { unsigned magic; unsigned cap; unsigned n; fake_range r[]; } counter_image;
typedef struct { unsigned magic; unsigned n; int idx[]; } config_image;
#define COUNTER_MAGIC 0xc0de7e57u
#define CONFIG_MAGIC 0xc0f16u

struct gl_cupti_host_object { int nmetrics; int idx[512]; };
struct gl_cupti_rp_object { int configured; int started; size_t max_ranges; counter_image *image;
                            config_image *config; unsigned passes; size_t dropped;
                            fake_range pending[1024]; size_t npending; int depth;
                            char pushed[MAX_NAME]; };

static int initialized;
static struct gl_cupti_rp_object *enabled;

static void flog(const char *fmt, ...) {
    const char *path = getenv("GPULAB_FAKE_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fputs("cupti ", f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static gl_cupti_result enter(const char *name) {
    const char *spec = getenv("GPULAB_FAKE_CUPTI_FAIL");
    if (spec == NULL) return GL_CUPTI_SUCCESS;
    size_t n = strlen(name);
    const char *p = strstr(spec, name);
    if (p && p[n] == ':') return (gl_cupti_result)atoi(p + n + 1);
    return GL_CUPTI_SUCCESS;
}

#define ENTER(params, size)                                                                     \
    do {                                                                                        \
        gl_cupti_result r_ = enter(__func__);                                                   \
        if (r_ != GL_CUPTI_SUCCESS) return r_;                                                  \
        if ((params) == NULL || (params)->structSize != (size) || (params)->pPriv != NULL)      \
            return GL_CUPTI_ERROR_INVALID_PARAMETER;                                            \
    } while (0)

static int metric_index(const char *name) {
    for (int i = 0; metrics[i]; i++)
        if (strcmp(metrics[i], name) == 0) return i;
    return -1;
}

EXPORT gl_cupti_result cuptiGetResultString(gl_cupti_result r, const char **s) {
    switch (r) {
    case 0: *s = "CUPTI_SUCCESS"; break;
    case 1: *s = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case 7: *s = "CUPTI_ERROR_INVALID_OPERATION"; break;
    case 17: *s = "CUPTI_ERROR_INVALID_METRIC_NAME"; break;
    case 35: *s = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    default: *s = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return 0;
}

EXPORT gl_cupti_result cuptiGetErrorMessage(gl_cupti_result r, const char **s) {
    *s = r == 35 ? "the stand-in was told to refuse access to the counters" : "stand-in error";
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerInitialize(gl_cupti_init_params *p) {
    ENTER(p, GL_CUPTI_INIT_SIZE);
    initialized++;
    flog("initialize");
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerDeInitialize(gl_cupti_deinit_params *p) {
    ENTER(p, GL_CUPTI_INIT_SIZE);
    if (initialized == 0) return GL_CUPTI_ERROR_INVALID_OPERATION;
    initialized--;
    flog("deinitialize");
    return 0;
}

EXPORT gl_cupti_result cuptiDeviceGetChipName(gl_cupti_chip_name_params *p) {
    ENTER(p, GL_CUPTI_CHIP_NAME_SIZE);
    if (!initialized) return GL_CUPTI_ERROR_INVALID_OPERATION;
    p->pChipName = "FAKE100";
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerGetCounterAvailability(gl_cupti_counter_avail_params *p) {
    ENTER(p, GL_CUPTI_COUNTER_AVAIL_SIZE);
    if (p->ctx == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    if (p->pCounterAvailabilityImage == NULL) p->counterAvailabilityImageSize = 64;
    else memset(p->pCounterAvailabilityImage, 0xa5, p->counterAvailabilityImageSize);
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostInitialize(gl_cupti_host_init_params *p) {
    ENTER(p, GL_CUPTI_HOST_INIT_SIZE);
    if (p->pChipName == NULL || strcmp(p->pChipName, "FAKE100") != 0 || p->profilerType != 0)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    if (p->pCounterAvailabilityImage == NULL || p->pCounterAvailabilityImage[0] != 0xa5)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    p->pHostObject = calloc(1, sizeof *p->pHostObject);
    flog("host initialize");
    return p->pHostObject ? 0 : 999;
}

EXPORT gl_cupti_result cuptiProfilerHostDeinitialize(gl_cupti_host_deinit_params *p) {
    ENTER(p, GL_CUPTI_HOST_DEINIT_SIZE);
    if (p->pHostObject == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    free(p->pHostObject);
    flog("host deinitialize");
    return 0;
}

/* Base names and submetrics, split from metrics[] on the first '.'. */
static const char *bases[64];
static size_t nbases;
static void split_bases(void) {
    if (nbases) return;
    static char store[64][MAX_NAME];
    for (int i = 0; metrics[i]; i++) {
        size_t len = strcspn(metrics[i], ".");
        bool seen = false;
        for (size_t b = 0; b < nbases; b++)
            if (strlen(bases[b]) == len && strncmp(bases[b], metrics[i], len) == 0) seen = true;
        if (seen) continue;
        memcpy(store[nbases], metrics[i], len);
        store[nbases][len] = '\0';
        bases[nbases] = store[nbases];
        nbases++;
    }
}

EXPORT gl_cupti_result cuptiProfilerHostGetBaseMetrics(gl_cupti_host_base_metrics_params *p) {
    ENTER(p, GL_CUPTI_HOST_BASE_METRICS_SIZE);
    if (p->pHostObject == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    split_bases();
    p->ppMetricNames = p->metricType == GL_CUPTI_METRIC_COUNTER ? bases : NULL;
    p->numMetrics = p->metricType == GL_CUPTI_METRIC_COUNTER ? nbases : 0;
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostGetSubMetrics(gl_cupti_host_sub_metrics_params *p) {
    ENTER(p, GL_CUPTI_HOST_SUB_METRICS_SIZE);
    static const char *subs[32];
    size_t n = 0, len = strlen(p->pMetricName);
    for (int i = 0; metrics[i] && n < 32; i++)
        if (strncmp(metrics[i], p->pMetricName, len) == 0 && metrics[i][len] == '.')
            subs[n++] = metrics[i] + len; /* ".avg.per_cycle_active", as CUPTI gives them */
    if (n == 0) return GL_CUPTI_ERROR_INVALID_METRIC_NAME;
    p->ppSubMetrics = subs;
    p->numOfSubmetrics = n;
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostGetMetricProperties(gl_cupti_host_metric_props_params *p) {
    ENTER(p, GL_CUPTI_HOST_METRIC_PROPS_SIZE);
    p->pDescription = "stand-in metric";
    p->pHwUnit = "smsp";
    p->pDimUnit = "";
    p->metricType = GL_CUPTI_METRIC_COUNTER;
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostConfigAddMetrics(gl_cupti_host_add_metrics_params *p) {
    ENTER(p, GL_CUPTI_HOST_ADD_METRICS_SIZE);
    struct gl_cupti_host_object *h = p->pHostObject;
    if (h == NULL || p->numMetrics == 0) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < p->numMetrics; i++) {
        int k = metric_index(p->ppMetricNames[i]);
        if (k < 0) return GL_CUPTI_ERROR_INVALID_METRIC_NAME;
        if (h->nmetrics < 512) h->idx[h->nmetrics++] = k;
    }
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostGetConfigImageSize(gl_cupti_host_config_size_params *p) {
    ENTER(p, GL_CUPTI_HOST_CONFIG_SIZE_SIZE);
    if (p->pHostObject == NULL || p->pHostObject->nmetrics == 0) return GL_CUPTI_ERROR_INVALID_OPERATION;
    p->configImageSize = sizeof(config_image) + (size_t)p->pHostObject->nmetrics * sizeof(int);
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostGetConfigImage(gl_cupti_host_config_image_params *p) {
    ENTER(p, GL_CUPTI_HOST_CONFIG_IMAGE_SIZE);
    struct gl_cupti_host_object *h = p->pHostObject;
    if (h == NULL || p->pConfigImage == NULL ||
        p->configImageSize != sizeof(config_image) + (size_t)h->nmetrics * sizeof(int))
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    config_image *c = (config_image *)p->pConfigImage;
    c->magic = CONFIG_MAGIC;
    c->n = (unsigned)h->nmetrics;
    memcpy(c->idx, h->idx, (size_t)h->nmetrics * sizeof(int));
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostGetNumOfPasses(gl_cupti_host_passes_params *p) {
    ENTER(p, GL_CUPTI_HOST_PASSES_SIZE);
    const config_image *c = (const config_image *)p->pConfigImage;
    if (c == NULL || c->magic != CONFIG_MAGIC) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    p->numOfPasses = (c->n + 3) / 4;
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerEnable(gl_cupti_rp_enable_params *p) {
    ENTER(p, GL_CUPTI_RP_ENABLE_SIZE);
    if (!initialized || p->ctx == NULL) return GL_CUPTI_ERROR_INVALID_OPERATION;
    if (enabled) return GL_CUPTI_ERROR_INVALID_OPERATION; /* one per context */
    enabled = calloc(1, sizeof *enabled);
    if (!enabled) return 999;
    p->pRangeProfilerObject = enabled;
    flog("enable");
    return 0;
}

typedef void (*launch_observer)(const char *, const unsigned[3], const unsigned[3]);
static void set_observer(launch_observer fn) {
    const char *path = getenv("GPULAB_LIBCUDA");
    if (!path) return;
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    void (*set)(launch_observer) = NULL;
    void *sym = dlsym(h, "fake_set_launch_observer");
    memcpy(&set, &sym, sizeof sym);
    if (set) set(fn);
    dlclose(h);
}

EXPORT gl_cupti_result cuptiRangeProfilerDisable(gl_cupti_rp_object_params *p) {
    ENTER(p, GL_CUPTI_RP_OBJECT_SIZE);
    if (p->pRangeProfilerObject == NULL || p->pRangeProfilerObject != enabled)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    if (enabled->started) set_observer(NULL);
    free(enabled);
    enabled = NULL;
    flog("disable");
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerGetCounterDataSize(gl_cupti_rp_data_size_params *p) {
    ENTER(p, GL_CUPTI_RP_DATA_SIZE_SIZE);
    if (p->pRangeProfilerObject != enabled || p->numMetrics == 0 || p->maxNumOfRanges == 0 ||
        p->maxNumRangeTreeNodes < p->maxNumOfRanges)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    p->counterDataSize = sizeof(counter_image) + p->maxNumOfRanges * sizeof(fake_range);
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerCounterDataImageInitialize(gl_cupti_rp_data_init_params *p) {
    ENTER(p, GL_CUPTI_RP_DATA_INIT_SIZE);
    if (p->pRangeProfilerObject != enabled || p->pCounterData == NULL ||
        p->counterDataSize < sizeof(counter_image))
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    counter_image *c = (counter_image *)p->pCounterData;
    c->magic = COUNTER_MAGIC;
    c->cap = (unsigned)((p->counterDataSize - sizeof(counter_image)) / sizeof(fake_range));
    c->n = 0;
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerSetConfig(gl_cupti_rp_set_config_params *p) {
    ENTER(p, GL_CUPTI_RP_SET_CONFIG_SIZE);
    struct gl_cupti_rp_object *o = p->pRangeProfilerObject;
    if (o != enabled || o->started) return GL_CUPTI_ERROR_INVALID_OPERATION;
    const config_image *c = (const config_image *)p->pConfig;
    const counter_image *d = (const counter_image *)p->pCounterDataImage;
    if (c == NULL || c->magic != CONFIG_MAGIC || d == NULL || d->magic != COUNTER_MAGIC)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    if (p->range != GL_CUPTI_AUTO_RANGE || p->replayMode != GL_CUPTI_KERNEL_REPLAY ||
        p->numNestingLevels != 1 || p->minNestingLevel != 1 || p->targetNestingLevel != 1 ||
        p->maxRangesPerPass == 0)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    o->configured = 1;
    o->config = (config_image *)p->pConfig;
    o->image = (counter_image *)p->pCounterDataImage;
    o->max_ranges = p->maxRangesPerPass;
    o->passes = (c->n + 3) / 4;
    return 0;
}

static void on_launch(const char *kernel, const unsigned g[3], const unsigned b[3]) {
    struct gl_cupti_rp_object *o = enabled;
    if (o == NULL || !o->started) return;
    for (unsigned pass = 1; pass <= o->passes; pass++)
        flog("replay %s pass %u/%u", kernel, pass, o->passes);
    if (o->npending >= o->max_ranges || o->npending >= 1024) {
        o->dropped++;
        return;
    }
    fake_range *r = &o->pending[o->npending++];
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    r->threads = (double)g[0] * g[1] * g[2] * b[0] * b[1] * b[2];
}

EXPORT gl_cupti_result cuptiRangeProfilerStart(gl_cupti_rp_object_params *p) {
    ENTER(p, GL_CUPTI_RP_OBJECT_SIZE);
    struct gl_cupti_rp_object *o = p->pRangeProfilerObject;
    if (o != enabled || !o->configured || o->started) return GL_CUPTI_ERROR_INVALID_OPERATION;
    o->started = 1;
    o->npending = 0;
    o->dropped = 0;
    set_observer(on_launch);
    flog("start");
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerPushRange(gl_cupti_rp_push_params *p) {
    ENTER(p, GL_CUPTI_RP_PUSH_SIZE);
    struct gl_cupti_rp_object *o = p->pRangeProfilerObject;
    if (o != enabled || !o->started || p->pRangeName == NULL) return GL_CUPTI_ERROR_INVALID_OPERATION;
    if (o->depth++ == 0) snprintf(o->pushed, sizeof o->pushed, "%s", p->pRangeName);
    flog("push %s", p->pRangeName);
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerPopRange(gl_cupti_rp_object_params *p) {
    ENTER(p, GL_CUPTI_RP_OBJECT_SIZE);
    struct gl_cupti_rp_object *o = p->pRangeProfilerObject;
    if (o != enabled || !o->started || o->depth == 0) return GL_CUPTI_ERROR_INVALID_OPERATION;
    if (--o->depth == 0 && getenv("GPULAB_FAKE_CUPTI_OUTER") && o->npending < 1024) {
        fake_range *r = &o->pending[o->npending++];
        snprintf(r->kernel, sizeof r->kernel, "%s", o->pushed);
        r->threads = 0;
    }
    flog("pop");
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerStop(gl_cupti_rp_stop_params *p) {
    ENTER(p, GL_CUPTI_RP_STOP_SIZE);
    struct gl_cupti_rp_object *o = p->pRangeProfilerObject;
    if (o != enabled || !o->started || o->depth != 0) return GL_CUPTI_ERROR_INVALID_OPERATION;
    o->started = 0;
    set_observer(NULL);
    p->isAllPassSubmitted = 1;
    flog("stop");
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerDecodeData(gl_cupti_rp_decode_params *p) {
    ENTER(p, GL_CUPTI_RP_DECODE_SIZE);
    struct gl_cupti_rp_object *o = p->pRangeProfilerObject;
    if (o != enabled || o->started || !o->configured) return GL_CUPTI_ERROR_INVALID_OPERATION;
    counter_image *c = o->image;
    size_t n = o->npending < c->cap ? o->npending : c->cap;
    memcpy(c->r, o->pending, n * sizeof(fake_range));
    c->n = (unsigned)n;
    p->numOfRangeDropped = o->dropped + (o->npending - n);
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerGetCounterDataInfo(gl_cupti_rp_data_info_params *p) {
    ENTER(p, GL_CUPTI_RP_DATA_INFO_SIZE);
    const counter_image *c = (const counter_image *)p->pCounterDataImage;
    if (c == NULL || c->magic != COUNTER_MAGIC) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    p->numTotalRanges = c->n;
    return 0;
}

EXPORT gl_cupti_result cuptiRangeProfilerCounterDataGetRangeInfo(gl_cupti_rp_range_info_params *p) {
    ENTER(p, GL_CUPTI_RP_RANGE_INFO_SIZE);
    const counter_image *c = (const counter_image *)p->pCounterDataImage;
    if (c == NULL || c->magic != COUNTER_MAGIC || p->rangeIndex >= c->n || p->rangeDelimiter == NULL)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    p->rangeName = c->r[p->rangeIndex].kernel;
    return 0;
}

EXPORT gl_cupti_result cuptiProfilerHostEvaluateToGpuValues(gl_cupti_host_evaluate_params *p) {
    ENTER(p, GL_CUPTI_HOST_EVALUATE_SIZE);
    const counter_image *c = (const counter_image *)p->pCounterDataImage;
    if (p->pHostObject == NULL || c == NULL || c->magic != COUNTER_MAGIC || p->rangeIndex >= c->n ||
        p->pMetricValues == NULL)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < p->numMetrics; i++) {
        int k = metric_index(p->ppMetricNames[i]);
        if (k < 0) return GL_CUPTI_ERROR_INVALID_METRIC_NAME;
        p->pMetricValues[i] = 1000.0 * (k + 1) + c->r[p->rangeIndex].threads;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * PC sampling (cupti_pcsampling.h), for cuda.pcsample:
 *   - the device has the stall reasons in pcs_reasons[] below, with CUPTI's indices 10..16 (not
 *     0-based, so a caller that confuses positions and indices is caught);
 *   - each launch seen between Start and Stop adds GPULAB_FAKE_PCS's records to its kernel:
 *     "offset:reason_index:samples,..." (default "0x10:10:5,0x20:11:30,0x20:13:2,0x30:12:9");
 *   - with GPULAB_FAKE_PCS_EXTRA=name, Stop adds one record (0x0, reason 11, 7 samples) for a
 *     function no gpulab launch ran (another library's kernel, a graph's);
 *   - GetData hands over at most collectNumPcs records and says how many remain; Disable puts
 *     what is still pending into the buffer given with the configuration;
 *   - each function name is a malloc'd string shared by that function's records, which the
 *     caller frees (CUPTI's contract), so a leak or a double free shows in ASan runs;
 *   - the sequencing rules of the real API: Enable once per context, configure while enabled
 *     and stopped, Start/Stop only with start/stop control, no Start twice;
 *   - GPULAB_FAKE_PCS_FULL=1: GetData reports a full hardware buffer as CUPTI does (the records,
 *     hardwareBufferFull = 1 and CUPTI_ERROR_OUT_OF_MEMORY);
 *   - GPULAB_FAKE_LOG gets "cupti pcs <call>" lines.
 * ------------------------------------------------------------------------------------------ */
static const struct { uint32_t index; const char *name; } pcs_reasons[] = {
    {10, "smsp__pcsamp_warps_issue_stalled_selected"},
    {11, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"},
    {12, "smsp__pcsamp_warps_issue_stalled_wait"},
    {13, "smsp__pcsamp_warps_issue_stalled_short_scoreboard"},
    {14, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"},
    {15, "smsp__pcsamp_warps_issue_stalled_barrier"},
    {16, "smsp__pcsamp_warps_issue_stalled_no_instructions"},
};
#define PCS_NREASONS (sizeof pcs_reasons / sizeof pcs_reasons[0])
#define PCS_MAX_PENDING 8192

typedef struct { char *name; uint64_t offset; uint32_t samples[PCS_NREASONS]; } pcs_pending;

static struct {
    CUcontext ctx;
    int enabled, started, start_stop, mode, selected[PCS_NREASONS];
    gl_cupti_pcs_data *final;
    pcs_pending pending[PCS_MAX_PENDING];
    size_t npending;
} pcs;

static int reason_slot(uint32_t index) {
    for (size_t i = 0; i < PCS_NREASONS; i++)
        if (pcs_reasons[i].index == index) return (int)i;
    return -1;
}

#define PCS_ENTER(params, size_)                                                                \
    do {                                                                                        \
        gl_cupti_result r_ = enter(__func__);                                                   \
        if (r_ != GL_CUPTI_SUCCESS) return r_;                                                  \
        if ((params) == NULL || (params)->size != (size_) || (params)->pPriv != NULL)           \
            return GL_CUPTI_ERROR_INVALID_PARAMETER;                                            \
    } while (0)

/* One string per function name for the whole process, shared by every record of every session:
 * what CUDA 13's CUPTI does on the H200 (freeing the names, as its header invites, corrupted the
 * heap by the next session there), so the caller must not free them. */
static char *interned_names[256];
static size_t ninterned;

static char *pcs_name(const char *kernel) {
    for (size_t i = 0; i < ninterned; i++)
        if (strcmp(interned_names[i], kernel) == 0) return interned_names[i];
    if (ninterned == 256) return NULL;
    char *n = strdup(kernel);
    if (n) interned_names[ninterned++] = n;
    return n;
}

static void pcs_add(const char *kernel, uint64_t offset, uint32_t index, uint32_t samples) {
    int slot = reason_slot(index);
    if (slot < 0 || !pcs.selected[slot]) return;
    char *name = pcs_name(kernel);
    if (name == NULL) return;
    for (size_t i = 0; i < pcs.npending; i++)
        if (pcs.pending[i].name == name && pcs.pending[i].offset == offset) {
            pcs.pending[i].samples[slot] += samples;
            return;
        }
    if (pcs.npending == PCS_MAX_PENDING) return;
    pcs_pending *p = &pcs.pending[pcs.npending++];
    memset(p, 0, sizeof *p);
    p->name = name;
    p->offset = offset;
    p->samples[slot] = samples;
}

static void pcs_on_launch(const char *kernel, const unsigned g[3], const unsigned b[3]) {
    (void)g;
    (void)b;
    if (!pcs.started) return;
    const char *spec = getenv("GPULAB_FAKE_PCS");
    if (spec == NULL) spec = "0x10:10:5,0x20:11:30,0x20:13:2,0x30:12:9";
    for (const char *p = spec; *p;) {
        char *end;
        unsigned long long off = strtoull(p, &end, 0);
        if (*end != ':') return;
        unsigned long idx = strtoul(end + 1, &end, 0);
        if (*end != ':') return;
        unsigned long n = strtoul(end + 1, &end, 0);
        pcs_add(kernel, off, (uint32_t)idx, (uint32_t)n);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') return;
    }
}

EXPORT gl_cupti_result cuptiPCSamplingGetNumStallReasons(gl_cupti_pcs_num_reasons_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_NUM_REASONS_SIZE);
    if (p->ctx == NULL || p->numStallReasons == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    /* CUPTI answers the reasons only for a context with PC sampling enabled (CUDA 13, H200) */
    if (!pcs.enabled || pcs.ctx != p->ctx) return GL_CUPTI_ERROR_INVALID_OPERATION;
    *p->numStallReasons = PCS_NREASONS;
    return 0;
}

EXPORT gl_cupti_result cuptiPCSamplingGetStallReasons(gl_cupti_pcs_reasons_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_REASONS_SIZE);
    if (p->ctx == NULL || p->numStallReasons != PCS_NREASONS || !p->stallReasonIndex || !p->stallReasons)
        return GL_CUPTI_ERROR_INVALID_PARAMETER;
    if (!pcs.enabled || pcs.ctx != p->ctx) return GL_CUPTI_ERROR_INVALID_OPERATION;
    for (size_t i = 0; i < PCS_NREASONS; i++) {
        p->stallReasonIndex[i] = pcs_reasons[i].index;
        snprintf(p->stallReasons[i], GL_CUPTI_STALL_REASON_STRING_SIZE, "%s", pcs_reasons[i].name);
    }
    return 0;
}

EXPORT gl_cupti_result cuptiPCSamplingEnable(gl_cupti_pcs_ctx_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_CTX_SIZE);
    if (p->ctx == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    if (pcs.enabled || enabled) return GL_CUPTI_ERROR_INVALID_OPERATION; /* nor with the profiler */
    memset(&pcs, 0, sizeof pcs);
    pcs.ctx = p->ctx;
    pcs.enabled = 1;
    for (size_t i = 0; i < PCS_NREASONS; i++) pcs.selected[i] = 1;
    flog("pcs enable");
    return 0;
}

static gl_cupti_result pcs_attribute(gl_cupti_pcs_config_info *a) {
    switch (a->attributeType) {
    case GL_CUPTI_PCS_ATTR_SAMPLING_PERIOD: {
        uint32_t v = a->attributeData.samplingPeriodData.samplingPeriod;
        if (v < 5 || v > 31) return GL_CUPTI_ERROR_INVALID_PARAMETER;
        flog("pcs period %u", v);
        return 0;
    }
    case GL_CUPTI_PCS_ATTR_STALL_REASON: {
        size_t n = a->attributeData.stallReasonData.stallReasonCount;
        const uint32_t *idx = a->attributeData.stallReasonData.pStallReasonIndex;
        if (n == 0 || n > PCS_NREASONS || idx == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
        int sel[PCS_NREASONS] = {0};
        for (size_t i = 0; i < n; i++) {
            int slot = reason_slot(idx[i]);
            if (slot < 0) return GL_CUPTI_ERROR_INVALID_PARAMETER;
            sel[slot] = 1;
        }
        memcpy(pcs.selected, sel, sizeof sel);
        return 0;
    }
    case GL_CUPTI_PCS_ATTR_SCRATCH_BUFFER_SIZE:
        return a->attributeData.scratchBufferSizeData.scratchBufferSize ? 0 : GL_CUPTI_ERROR_INVALID_PARAMETER;
    case GL_CUPTI_PCS_ATTR_HARDWARE_BUFFER_SIZE:
        return a->attributeData.hardwareBufferSizeData.hardwareBufferSize ? 0 : GL_CUPTI_ERROR_INVALID_PARAMETER;
    case GL_CUPTI_PCS_ATTR_COLLECTION_MODE: {
        int m = a->attributeData.collectionModeData.collectionMode;
        if (m != GL_CUPTI_PCS_MODE_CONTINUOUS && m != GL_CUPTI_PCS_MODE_KERNEL_SERIALIZED)
            return GL_CUPTI_ERROR_INVALID_PARAMETER;
        pcs.mode = m;
        flog("pcs mode %s", m == GL_CUPTI_PCS_MODE_CONTINUOUS ? "continuous" : "serialized");
        return 0;
    }
    case GL_CUPTI_PCS_ATTR_ENABLE_START_STOP_CONTROL:
        pcs.start_stop = a->attributeData.enableStartStopControlData.enableStartStopControl != 0;
        return 0;
    case GL_CUPTI_PCS_ATTR_OUTPUT_DATA_FORMAT:
        return a->attributeData.outputDataFormatData.outputDataFormat == GL_CUPTI_PCS_FORMAT_PARSED
                   ? 0 : GL_CUPTI_ERROR_INVALID_PARAMETER;
    case GL_CUPTI_PCS_ATTR_SAMPLING_DATA_BUFFER: {
        gl_cupti_pcs_data *d = a->attributeData.samplingDataBufferData.samplingDataBuffer;
        if (d == NULL || d->size != sizeof *d || d->pPcData == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
        pcs.final = d;
        return 0;
    }
    default: return GL_CUPTI_ERROR_INVALID_PARAMETER;
    }
}

EXPORT gl_cupti_result cuptiPCSamplingSetConfigurationAttribute(gl_cupti_pcs_config_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_CONFIG_SIZE);
    if (!pcs.enabled || p->ctx != pcs.ctx || pcs.started) return GL_CUPTI_ERROR_INVALID_OPERATION;
    if (p->pPCSamplingConfigurationInfo == NULL || p->numAttributes == 0) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    gl_cupti_result worst = 0;
    for (size_t i = 0; i < p->numAttributes; i++) {
        gl_cupti_pcs_config_info *a = &p->pPCSamplingConfigurationInfo[i];
        a->attributeStatus = pcs_attribute(a);
        if (a->attributeStatus) worst = a->attributeStatus;
    }
    return worst;
}

EXPORT gl_cupti_result cuptiPCSamplingStart(gl_cupti_pcs_ctx_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_CTX_SIZE);
    if (!pcs.enabled || p->ctx != pcs.ctx || !pcs.start_stop || pcs.started) return GL_CUPTI_ERROR_INVALID_OPERATION;
    pcs.started = 1;
    set_observer(pcs_on_launch);
    flog("pcs start");
    return 0;
}

EXPORT gl_cupti_result cuptiPCSamplingStop(gl_cupti_pcs_ctx_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_CTX_SIZE);
    if (!pcs.enabled || p->ctx != pcs.ctx || !pcs.started) return GL_CUPTI_ERROR_INVALID_OPERATION;
    const char *extra = getenv("GPULAB_FAKE_PCS_EXTRA");
    if (extra && *extra) pcs_add(extra, 0, 11, 7);
    pcs.started = 0;
    set_observer(NULL);
    flog("pcs stop");
    return 0;
}

/* Moves up to collectNumPcs pending records into d. */
static gl_cupti_result pcs_hand_over(gl_cupti_pcs_data *d) {
    if (d == NULL || d->size != sizeof *d || d->pPcData == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
    size_t n = pcs.npending < d->collectNumPcs ? pcs.npending : d->collectNumPcs;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        gl_cupti_pcs_pc *out = &d->pPcData[i];
        const pcs_pending *in = &pcs.pending[i];
        if (out->size != sizeof *out || out->stallReason == NULL) return GL_CUPTI_ERROR_INVALID_PARAMETER;
        out->cubinCrc = 0x5eed0000u + strlen(in->name);
        out->pcOffset = in->offset;
        out->functionIndex = 3;
        out->functionName = in->name;
        out->correlationId = pcs.mode == GL_CUPTI_PCS_MODE_KERNEL_SERIALIZED ? 1 : 0;
        size_t k = 0;
        for (size_t r = 0; r < PCS_NREASONS; r++) {
            if (in->samples[r] == 0) continue;
            out->stallReason[k].pcSamplingStallReasonIndex = pcs_reasons[r].index;
            out->stallReason[k++].samples = in->samples[r];
            total += in->samples[r];
        }
        out->stallReasonCount = k;
    }
    memmove(pcs.pending, pcs.pending + n, (pcs.npending - n) * sizeof *pcs.pending);
    pcs.npending -= n;
    const char *nonuser = getenv("GPULAB_FAKE_PCS_NONUSER");
    d->totalNumPcs = n;
    d->remainingNumPcs = pcs.npending;
    d->totalSamples = total;
    d->droppedSamples = 0;
    d->nonUsrKernelsTotalSamples = n && nonuser ? strtoull(nonuser, NULL, 10) : 0;
    d->hardwareBufferFull = 0;
    d->rangeId = 1;
    return 0;
}

EXPORT gl_cupti_result cuptiPCSamplingGetData(gl_cupti_pcs_get_data_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_GET_DATA_SIZE);
    if (!pcs.enabled || p->ctx != pcs.ctx) return GL_CUPTI_ERROR_INVALID_OPERATION;
    flog("pcs getdata");
    gl_cupti_result r = pcs_hand_over(p->pcSamplingData);
    if (r == GL_CUPTI_SUCCESS && getenv("GPULAB_FAKE_PCS_FULL")) { /* as CUPTI: data, flag and error */
        ((gl_cupti_pcs_data *)p->pcSamplingData)->hardwareBufferFull = 1;
        return GL_CUPTI_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

EXPORT gl_cupti_result cuptiPCSamplingDisable(gl_cupti_pcs_ctx_params *p) {
    PCS_ENTER(p, GL_CUPTI_PCS_CTX_SIZE);
    if (!pcs.enabled || p->ctx != pcs.ctx) return GL_CUPTI_ERROR_INVALID_OPERATION;
    if (pcs.started) set_observer(NULL);
    /* the rest goes to the configured buffer */
    if (pcs.final && pcs.npending) pcs_hand_over(pcs.final);
    pcs.enabled = 0;
    pcs.started = 0;
    flog("pcs disable");
    return 0;
}
