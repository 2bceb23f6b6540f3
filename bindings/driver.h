/*
 * driver.h — the CUDA driver, opened at run time (driver.c). Each entry is fetched with
 * cuGetProcAddress under its base name; the field's type follows cuda.h's versioned macro
 * (cuMemAlloc -> cuMemAlloc_v2), and asking with CUDA_VERSION returns that same version, so the
 * pointer type matches.
 */
#ifndef GPULAB_DRIVER_H
#define GPULAB_DRIVER_H

#include <stdbool.h>

#include <cuda.h>

#define GL_DRIVER_FUNCS(X)                                                                      \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                       \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute)               \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuCtxGetStreamPriorityRange)    \
    X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal)         \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)  \
    X(cuLaunchKernel)                                                                           \
    X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemGetInfo)               \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)                                             \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)                              \
    X(cuMemsetD8) X(cuMemsetD16) X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemsetD16Async)          \
    X(cuMemsetD32Async)                                                                         \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)    \
    X(cuStreamWaitEvent) X(cuStreamBeginCapture) X(cuStreamEndCapture)                          \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                         \
    X(cuEventSynchronize) X(cuEventElapsedTime)                                                 \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)     \
    X(cuGraphGetNodes)                                                                          \
    X(cuTensorMapEncodeTiled) X(cuTensorMapReplaceAddress)                                     \
    X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuMemcpyPeer) X(cuMemcpyPeerAsync)

/* Entry points gpulab works without (newer than the oldest driver it supports): NULL when the
 * driver lacks them, and every caller checks. cuFuncGetParamInfo came with CUDA 12.4; the
 * launch-attribute and cluster-occupancy calls with CUDA 12.0; the L2 persistence calls with 11.0;
 * the green-context (SM partition) calls with 12.4. */
#define GL_DRIVER_OPTIONAL_FUNCS(X)                                                             \
    X(cuFuncGetParamInfo) X(cuLaunchKernelEx) X(cuOccupancyMaxActiveClusters)                   \
    X(cuOccupancyMaxPotentialClusterSize)                                                        \
    X(cuCtxSetLimit) X(cuCtxGetLimit) X(cuCtxResetPersistingL2Cache)                             \
    X(cuStreamSetAttribute) X(cuStreamGetAttribute)                                              \
    X(cuDeviceGetDevResource) X(cuDevSmResourceSplitByCount) X(cuDevResourceGenerateDesc)        \
    X(cuGreenCtxCreate) X(cuGreenCtxDestroy) X(cuCtxFromGreenCtx) X(cuGreenCtxGetDevResource)    \
    X(cuGreenCtxStreamCreate) X(cuDeviceGetUuid)

#define GL_DRIVER_FIELD(name) __typeof__(&name) name;
typedef struct gl_driver {
    GL_DRIVER_FUNCS(GL_DRIVER_FIELD)
    GL_DRIVER_OPTIONAL_FUNCS(GL_DRIVER_FIELD)
} gl_driver;
#undef GL_DRIVER_FIELD

/* Filled by gl_driver_open(); every required field is non-NULL once it returned true. */
extern gl_driver gl_cu;

/* Opens libcuda (GPULAB_LIBCUDA or libcuda.so.1) once and calls cuInit. Never raises.
 * On failure returns false and *reason (static text) says why. */
bool gl_driver_open(const char **reason);
/* The driver's version (12080 for 12.8), 0 when it was not opened. */
int gl_driver_version(void);

#endif
