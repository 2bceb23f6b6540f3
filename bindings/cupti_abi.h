/*
 * cupti_abi.h — the part of CUPTI 13's range profiler and profiler host interfaces that
 * cuda.profile uses, declared here so the build needs no CUPTI headers (libcupti is opened at
 * run time). Field order and types follow cupti_target.h, cupti_profiler_target.h,
 * cupti_range_profiler.h and cupti_profiler_host.h of CUDA 13.0; tests/c/cupti_abi_check.cpp
 * checks every struct's size and offsets against those headers where they are installed.
 *
 * Each params struct starts with structSize, which the caller sets to the *_SIZE value below
 * (offset of the last field plus its size), and pPriv = NULL.
 */
#ifndef GPULAB_CUPTI_ABI_H
#define GPULAB_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

typedef int gl_cupti_result; /* CUptiResult; 0 is CUPTI_SUCCESS */
#define GL_CUPTI_SUCCESS 0
#define GL_CUPTI_ERROR_INVALID_PARAMETER 1
#define GL_CUPTI_ERROR_INVALID_OPERATION 7
#define GL_CUPTI_ERROR_OUT_OF_MEMORY 8
#define GL_CUPTI_ERROR_INVALID_METRIC_NAME 17
#define GL_CUPTI_ERROR_NOT_SUPPORTED 27

#define GL_CUPTI_SIZE(type_, last_) (offsetof(type_, last_) + sizeof(((type_ *)0)->last_))

enum { GL_CUPTI_AUTO_RANGE = 1, GL_CUPTI_USER_RANGE = 2 };               /* CUpti_ProfilerRange */
enum { GL_CUPTI_KERNEL_REPLAY = 2, GL_CUPTI_USER_REPLAY = 3 };           /* CUpti_ProfilerReplayMode */
enum { GL_CUPTI_METRIC_COUNTER = 0, GL_CUPTI_METRIC_RATIO = 1, GL_CUPTI_METRIC_THROUGHPUT = 2 };
enum { GL_CUPTI_PROFILER_RANGE = 0 };                                   /* CUpti_ProfilerType */

typedef struct gl_cupti_rp_object gl_cupti_rp_object;     /* CUpti_RangeProfiler_Object */
typedef struct gl_cupti_host_object gl_cupti_host_object; /* CUpti_Profiler_Host_Object */

/* cupti_profiler_target.h */
typedef struct { size_t structSize; void *pPriv; } gl_cupti_init_params, gl_cupti_deinit_params;
typedef struct {
    size_t structSize; void *pPriv;
    CUcontext ctx;
    size_t counterAvailabilityImageSize;
    uint8_t *pCounterAvailabilityImage;
} gl_cupti_counter_avail_params;

/* cupti_target.h */
typedef struct {
    size_t structSize; void *pPriv;
    size_t deviceIndex;
    const char *pChipName;
} gl_cupti_chip_name_params;

/* cupti_range_profiler.h */
typedef struct {
    size_t structSize; void *pPriv;
    CUcontext ctx;
    gl_cupti_rp_object *pRangeProfilerObject;
} gl_cupti_rp_enable_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
} gl_cupti_rp_object_params; /* Disable, Start, PopRange */
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
    size_t configSize;
    const uint8_t *pConfig;
    size_t counterDataImageSize;
    uint8_t *pCounterDataImage;
    int range;      /* CUpti_ProfilerRange */
    int replayMode; /* CUpti_ProfilerReplayMode */
    size_t maxRangesPerPass;
    uint16_t numNestingLevels;
    uint16_t minNestingLevel;
    size_t passIndex;
    uint16_t targetNestingLevel;
} gl_cupti_rp_set_config_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
    const char *pRangeName;
} gl_cupti_rp_push_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
    size_t passIndex;
    size_t targetNestingLevel;
    uint8_t isAllPassSubmitted;
} gl_cupti_rp_stop_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
    size_t numOfRangeDropped;
} gl_cupti_rp_decode_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
    const char **pMetricNames;
    size_t numMetrics;
    size_t maxNumOfRanges;
    uint32_t maxNumRangeTreeNodes;
    size_t counterDataSize;
} gl_cupti_rp_data_size_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_rp_object *pRangeProfilerObject;
    size_t counterDataSize;
    uint8_t *pCounterData;
} gl_cupti_rp_data_init_params;
typedef struct {
    size_t structSize; void *pPriv;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t numTotalRanges;
} gl_cupti_rp_data_info_params;
typedef struct {
    size_t structSize; void *pPriv;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char *rangeDelimiter;
    const char *rangeName;
} gl_cupti_rp_range_info_params;

/* cupti_profiler_host.h */
typedef struct {
    size_t structSize; void *pPriv;
    int profilerType; /* CUpti_ProfilerType */
    const char *pChipName;
    const uint8_t *pCounterAvailabilityImage;
    gl_cupti_host_object *pHostObject;
} gl_cupti_host_init_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
} gl_cupti_host_deinit_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    int metricType; /* CUpti_MetricType */
    const char **ppMetricNames;
    size_t numMetrics;
} gl_cupti_host_base_metrics_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    int metricType;
    const char *pMetricName;
    size_t numOfSubmetrics;
    const char **ppSubMetrics;
} gl_cupti_host_sub_metrics_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    const char *pMetricName;
    const char *pDescription;
    const char *pHwUnit;
    const char *pDimUnit;
    int metricType;
} gl_cupti_host_metric_props_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    const char **ppMetricNames;
    size_t numMetrics;
} gl_cupti_host_add_metrics_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    size_t configImageSize;
} gl_cupti_host_config_size_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    size_t configImageSize;
    uint8_t *pConfigImage;
} gl_cupti_host_config_image_params;
typedef struct {
    size_t structSize; void *pPriv;
    size_t configImageSize;
    uint8_t *pConfigImage;
    size_t numOfPasses;
} gl_cupti_host_passes_params;
typedef struct {
    size_t structSize; void *pPriv;
    gl_cupti_host_object *pHostObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char **ppMetricNames;
    size_t numMetrics;
    double *pMetricValues;
} gl_cupti_host_evaluate_params;

/* The entry points, by their CUPTI names, with the params type each takes. */
#define GL_CUPTI_FUNCS(X)                                                                       \
    X(cuptiProfilerInitialize, gl_cupti_init_params)                                            \
    X(cuptiProfilerDeInitialize, gl_cupti_deinit_params)                                        \
    X(cuptiProfilerGetCounterAvailability, gl_cupti_counter_avail_params)                       \
    X(cuptiDeviceGetChipName, gl_cupti_chip_name_params)                                        \
    X(cuptiRangeProfilerEnable, gl_cupti_rp_enable_params)                                      \
    X(cuptiRangeProfilerDisable, gl_cupti_rp_object_params)                                     \
    X(cuptiRangeProfilerSetConfig, gl_cupti_rp_set_config_params)                              \
    X(cuptiRangeProfilerStart, gl_cupti_rp_object_params)                                       \
    X(cuptiRangeProfilerStop, gl_cupti_rp_stop_params)                                          \
    X(cuptiRangeProfilerPushRange, gl_cupti_rp_push_params)                                     \
    X(cuptiRangeProfilerPopRange, gl_cupti_rp_object_params)                                    \
    X(cuptiRangeProfilerDecodeData, gl_cupti_rp_decode_params)                                  \
    X(cuptiRangeProfilerGetCounterDataSize, gl_cupti_rp_data_size_params)                       \
    X(cuptiRangeProfilerCounterDataImageInitialize, gl_cupti_rp_data_init_params)               \
    X(cuptiRangeProfilerGetCounterDataInfo, gl_cupti_rp_data_info_params)                       \
    X(cuptiRangeProfilerCounterDataGetRangeInfo, gl_cupti_rp_range_info_params)                 \
    X(cuptiProfilerHostInitialize, gl_cupti_host_init_params)                                   \
    X(cuptiProfilerHostDeinitialize, gl_cupti_host_deinit_params)                               \
    X(cuptiProfilerHostGetBaseMetrics, gl_cupti_host_base_metrics_params)                       \
    X(cuptiProfilerHostGetSubMetrics, gl_cupti_host_sub_metrics_params)                         \
    X(cuptiProfilerHostGetMetricProperties, gl_cupti_host_metric_props_params)                  \
    X(cuptiProfilerHostConfigAddMetrics, gl_cupti_host_add_metrics_params)                      \
    X(cuptiProfilerHostGetConfigImageSize, gl_cupti_host_config_size_params)                    \
    X(cuptiProfilerHostGetConfigImage, gl_cupti_host_config_image_params)                       \
    X(cuptiProfilerHostGetNumOfPasses, gl_cupti_host_passes_params)                             \
    X(cuptiProfilerHostEvaluateToGpuValues, gl_cupti_host_evaluate_params)

/* Sizes to put in structSize. */
#define GL_CUPTI_INIT_SIZE GL_CUPTI_SIZE(gl_cupti_init_params, pPriv)
#define GL_CUPTI_COUNTER_AVAIL_SIZE GL_CUPTI_SIZE(gl_cupti_counter_avail_params, pCounterAvailabilityImage)
#define GL_CUPTI_CHIP_NAME_SIZE GL_CUPTI_SIZE(gl_cupti_chip_name_params, pChipName)
#define GL_CUPTI_RP_ENABLE_SIZE GL_CUPTI_SIZE(gl_cupti_rp_enable_params, pRangeProfilerObject)
#define GL_CUPTI_RP_OBJECT_SIZE GL_CUPTI_SIZE(gl_cupti_rp_object_params, pRangeProfilerObject)
#define GL_CUPTI_RP_SET_CONFIG_SIZE GL_CUPTI_SIZE(gl_cupti_rp_set_config_params, targetNestingLevel)
#define GL_CUPTI_RP_PUSH_SIZE GL_CUPTI_SIZE(gl_cupti_rp_push_params, pRangeName)
#define GL_CUPTI_RP_STOP_SIZE GL_CUPTI_SIZE(gl_cupti_rp_stop_params, isAllPassSubmitted)
#define GL_CUPTI_RP_DECODE_SIZE GL_CUPTI_SIZE(gl_cupti_rp_decode_params, numOfRangeDropped)
#define GL_CUPTI_RP_DATA_SIZE_SIZE GL_CUPTI_SIZE(gl_cupti_rp_data_size_params, counterDataSize)
#define GL_CUPTI_RP_DATA_INIT_SIZE GL_CUPTI_SIZE(gl_cupti_rp_data_init_params, pCounterData)
#define GL_CUPTI_RP_DATA_INFO_SIZE GL_CUPTI_SIZE(gl_cupti_rp_data_info_params, numTotalRanges)
#define GL_CUPTI_RP_RANGE_INFO_SIZE GL_CUPTI_SIZE(gl_cupti_rp_range_info_params, rangeName)
#define GL_CUPTI_HOST_INIT_SIZE GL_CUPTI_SIZE(gl_cupti_host_init_params, pHostObject)
#define GL_CUPTI_HOST_DEINIT_SIZE GL_CUPTI_SIZE(gl_cupti_host_deinit_params, pHostObject)
#define GL_CUPTI_HOST_BASE_METRICS_SIZE GL_CUPTI_SIZE(gl_cupti_host_base_metrics_params, numMetrics)
#define GL_CUPTI_HOST_SUB_METRICS_SIZE GL_CUPTI_SIZE(gl_cupti_host_sub_metrics_params, ppSubMetrics)
#define GL_CUPTI_HOST_METRIC_PROPS_SIZE GL_CUPTI_SIZE(gl_cupti_host_metric_props_params, metricType)
#define GL_CUPTI_HOST_ADD_METRICS_SIZE GL_CUPTI_SIZE(gl_cupti_host_add_metrics_params, numMetrics)
#define GL_CUPTI_HOST_CONFIG_SIZE_SIZE GL_CUPTI_SIZE(gl_cupti_host_config_size_params, configImageSize)
#define GL_CUPTI_HOST_CONFIG_IMAGE_SIZE GL_CUPTI_SIZE(gl_cupti_host_config_image_params, pConfigImage)
#define GL_CUPTI_HOST_PASSES_SIZE GL_CUPTI_SIZE(gl_cupti_host_passes_params, numOfPasses)
#define GL_CUPTI_HOST_EVALUATE_SIZE GL_CUPTI_SIZE(gl_cupti_host_evaluate_params, pMetricValues)

/* ------------------------------------------------------------------------------------------
 * cupti_pcsampling.h (CUDA 11.3 and later): PC sampling, for cuda.pcsample (pcsample.c).
 * These params structs start with `size` (not structSize), set to the *_SIZE value below.
 * The record structs are declared packed and 8-byte aligned by CUPTI; their fields fall on
 * natural boundaries, so the plain declarations below have the same layout (checked).
 * ------------------------------------------------------------------------------------------ */
#define GL_CUPTI_STALL_REASON_STRING_SIZE 128 /* CUPTI_STALL_REASON_STRING_SIZE */

enum { GL_CUPTI_PCS_MODE_CONTINUOUS = 1, GL_CUPTI_PCS_MODE_KERNEL_SERIALIZED = 2 }; /* CUpti_PCSamplingCollectionMode */
enum { GL_CUPTI_PCS_FORMAT_PARSED = 1 };                              /* CUpti_PCSamplingOutputDataFormat */
enum {                                                  /* CUpti_PCSamplingConfigurationAttributeType */
    GL_CUPTI_PCS_ATTR_SAMPLING_PERIOD = 1,
    GL_CUPTI_PCS_ATTR_STALL_REASON = 2,
    GL_CUPTI_PCS_ATTR_SCRATCH_BUFFER_SIZE = 3,
    GL_CUPTI_PCS_ATTR_HARDWARE_BUFFER_SIZE = 4,
    GL_CUPTI_PCS_ATTR_COLLECTION_MODE = 5,
    GL_CUPTI_PCS_ATTR_ENABLE_START_STOP_CONTROL = 6,
    GL_CUPTI_PCS_ATTR_OUTPUT_DATA_FORMAT = 7,
    GL_CUPTI_PCS_ATTR_SAMPLING_DATA_BUFFER = 8,
};

typedef struct { /* CUpti_PCSamplingStallReason */
    uint32_t pcSamplingStallReasonIndex;
    uint32_t samples;
} gl_cupti_pcs_stall;

typedef struct { /* CUpti_PCSamplingPCData: one PC of one function, its samples per stall reason */
    size_t size;
    uint64_t cubinCrc;
    uint64_t pcOffset;
    uint32_t functionIndex;
    uint32_t pad;
    char *functionName; /* shared by CUPTI across records; never freed by gpulab while in use */
    size_t stallReasonCount;
    gl_cupti_pcs_stall *stallReason; /* the caller's array of as many entries as reasons */
    uint32_t correlationId;
} gl_cupti_pcs_pc;

typedef struct { /* CUpti_PCSamplingData: a buffer of PC records, filled by GetData and Disable */
    size_t size;
    size_t collectNumPcs;
    uint64_t totalSamples;
    uint64_t droppedSamples;
    size_t totalNumPcs;
    size_t remainingNumPcs;
    uint64_t rangeId;
    gl_cupti_pcs_pc *pPcData;
    uint64_t nonUsrKernelsTotalSamples;
    uint8_t hardwareBufferFull;
} gl_cupti_pcs_data;

typedef struct { /* CUpti_PCSamplingConfigurationInfo */
    int attributeType;   /* GL_CUPTI_PCS_ATTR_* */
    int attributeStatus; /* CUptiResult, per attribute */
    union {
        struct { uint64_t data[3]; } invalidData;
        struct { uint32_t samplingPeriod; } samplingPeriodData; /* 2^n cycles, n in 5..31 */
        struct { size_t stallReasonCount; uint32_t *pStallReasonIndex; } stallReasonData;
        struct { size_t scratchBufferSize; } scratchBufferSizeData;
        struct { size_t hardwareBufferSize; } hardwareBufferSizeData;
        struct { int collectionMode; } collectionModeData;
        struct { uint32_t enableStartStopControl; } enableStartStopControlData;
        struct { int outputDataFormat; } outputDataFormatData;
        struct { void *samplingDataBuffer; } samplingDataBufferData;
    } attributeData;
} gl_cupti_pcs_config_info;

typedef struct {
    size_t size; void *pPriv;
    CUcontext ctx;
    size_t numAttributes;
    gl_cupti_pcs_config_info *pPCSamplingConfigurationInfo;
} gl_cupti_pcs_config_params;
typedef struct {
    size_t size; void *pPriv;
    CUcontext ctx;
    void *pcSamplingData; /* a gl_cupti_pcs_data */
} gl_cupti_pcs_get_data_params;
typedef struct {
    size_t size; void *pPriv;
    CUcontext ctx;
} gl_cupti_pcs_ctx_params; /* Enable, Disable, Start, Stop */
typedef struct {
    size_t size; void *pPriv;
    CUcontext ctx;
    size_t *numStallReasons;
} gl_cupti_pcs_num_reasons_params;
typedef struct {
    size_t size; void *pPriv;
    CUcontext ctx;
    size_t numStallReasons;
    uint32_t *stallReasonIndex;
    char **stallReasons; /* numStallReasons buffers of GL_CUPTI_STALL_REASON_STRING_SIZE bytes */
} gl_cupti_pcs_reasons_params;

#define GL_CUPTI_PCS_FUNCS(X)                                                                   \
    X(cuptiPCSamplingGetNumStallReasons, gl_cupti_pcs_num_reasons_params)                       \
    X(cuptiPCSamplingGetStallReasons, gl_cupti_pcs_reasons_params)                              \
    X(cuptiPCSamplingSetConfigurationAttribute, gl_cupti_pcs_config_params)                     \
    X(cuptiPCSamplingEnable, gl_cupti_pcs_ctx_params)                                           \
    X(cuptiPCSamplingDisable, gl_cupti_pcs_ctx_params)                                          \
    X(cuptiPCSamplingStart, gl_cupti_pcs_ctx_params)                                            \
    X(cuptiPCSamplingStop, gl_cupti_pcs_ctx_params)                                             \
    X(cuptiPCSamplingGetData, gl_cupti_pcs_get_data_params)

#define GL_CUPTI_PCS_CONFIG_SIZE GL_CUPTI_SIZE(gl_cupti_pcs_config_params, pPCSamplingConfigurationInfo)
#define GL_CUPTI_PCS_GET_DATA_SIZE GL_CUPTI_SIZE(gl_cupti_pcs_get_data_params, pcSamplingData)
#define GL_CUPTI_PCS_CTX_SIZE GL_CUPTI_SIZE(gl_cupti_pcs_ctx_params, ctx)
#define GL_CUPTI_PCS_NUM_REASONS_SIZE GL_CUPTI_SIZE(gl_cupti_pcs_num_reasons_params, numStallReasons)
#define GL_CUPTI_PCS_REASONS_SIZE GL_CUPTI_SIZE(gl_cupti_pcs_reasons_params, stallReasons)

/* profile.c opens libcupti once for both callers: its handle, or NULL with the reason (what to
 * install, where gpulab looked). path gets the file opened. */
void *gl_cupti_library(const char **path, const char **why);
/* Pushes "CUPTI_ERROR_INVALID_OPERATION (7): CUPTI's message" for r and returns it; CUPTI's own
 * names and messages when that library has them (profile.c resolves them with the library). */
struct lua_State;
const char *gl_push_cupti_error(struct lua_State *L, gl_cupti_result r);

#endif
