/*
 * nccl_abi.h — the part of NCCL's C interface gpulab calls, declared here so the build needs no
 * NCCL headers (libnccl.so.2 is opened at run time). Values and layouts follow the NCCL 2.28
 * ABI (nccl.h of 2.28; every entry below has kept its value and signature since 2.14):
 *   ncclComm_t      opaque pointer
 *   ncclUniqueId    128 bytes (NCCL_UNIQUE_ID_BYTES), passed by value
 *   ncclResult_t    0 success, 1 unhandled CUDA error, 2 system error, 3 internal error,
 *                   4 invalid argument, 5 invalid usage, 6 remote error, 7 in progress
 *   ncclDataType_t  int8 0, uint8 1, int32 2, uint32 3, int64 4, uint64 5, float16 6,
 *                   float32 7, float64 8, bfloat16 9
 *   ncclRedOp_t     sum 0, prod 1, max 2, min 3, avg 4
 *   ncclConfig_t    begins {size_t size; unsigned magic (0xcafebeef); unsigned version; int
 *                   blocking; ...}: NCCL copies `size` bytes of it and gives every field that a
 *                   caller of an older `version` cannot know its default, so a caller declaring
 *                   the 2.14 prefix (up to `blocking`) gets defaults for all the rest.
 * cudaStream_t is the driver's CUstream.
 */
#ifndef GPULAB_NCCL_ABI_H
#define GPULAB_NCCL_ABI_H

#include <cuda.h>
#include <stddef.h>

typedef struct gl_nccl_comm_opaque *gl_ncclComm_t;
#define GL_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[GL_NCCL_UNIQUE_ID_BYTES];
} gl_ncclUniqueId;

typedef int gl_ncclResult_t;
enum {
    GL_NCCL_SUCCESS = 0,
    GL_NCCL_UNHANDLED_CUDA_ERROR = 1,
    GL_NCCL_SYSTEM_ERROR = 2,
    GL_NCCL_INTERNAL_ERROR = 3,
    GL_NCCL_INVALID_ARGUMENT = 4,
    GL_NCCL_INVALID_USAGE = 5,
    GL_NCCL_REMOTE_ERROR = 6,
    GL_NCCL_IN_PROGRESS = 7,
};

typedef int gl_ncclDataType_t;
enum {
    GL_NCCL_INT8 = 0, GL_NCCL_UINT8 = 1, GL_NCCL_INT32 = 2, GL_NCCL_UINT32 = 3,
    GL_NCCL_INT64 = 4, GL_NCCL_UINT64 = 5, GL_NCCL_FLOAT16 = 6, GL_NCCL_FLOAT32 = 7,
    GL_NCCL_FLOAT64 = 8, GL_NCCL_BFLOAT16 = 9,
};

typedef int gl_ncclRedOp_t;
enum { GL_NCCL_SUM = 0, GL_NCCL_PROD = 1, GL_NCCL_MAX = 2, GL_NCCL_MIN = 3, GL_NCCL_AVG = 4 };

#define GL_NCCL_CONFIG_MAGIC 0xcafebeefu
#define GL_NCCL_VERSION(x, y, z) ((x) * 10000 + (y) * 100 + (z))
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
} gl_ncclConfig_t;

/* The entry points, looked up by these names with dlsym. */
#define GL_NCCL_FUNCS(X)                                                                        \
    X(ncclGetVersion, gl_ncclResult_t, (int *version))                                          \
    X(ncclGetUniqueId, gl_ncclResult_t, (gl_ncclUniqueId * id))                                 \
    X(ncclCommInitAll, gl_ncclResult_t, (gl_ncclComm_t * comms, int ndev, const int *devlist))  \
    X(ncclCommInitRankConfig, gl_ncclResult_t,                                                  \
      (gl_ncclComm_t * comm, int nranks, gl_ncclUniqueId id, int rank, gl_ncclConfig_t *config)) \
    X(ncclCommDestroy, gl_ncclResult_t, (gl_ncclComm_t comm))                                   \
    X(ncclCommAbort, gl_ncclResult_t, (gl_ncclComm_t comm))                                     \
    X(ncclCommGetAsyncError, gl_ncclResult_t, (gl_ncclComm_t comm, gl_ncclResult_t * state))    \
    X(ncclGetErrorString, const char *, (gl_ncclResult_t result))                               \
    X(ncclGroupStart, gl_ncclResult_t, (void))                                                  \
    X(ncclGroupEnd, gl_ncclResult_t, (void))                                                    \
    X(ncclAllReduce, gl_ncclResult_t,                                                           \
      (const void *send, void *recv, size_t count, gl_ncclDataType_t type, gl_ncclRedOp_t op,   \
       gl_ncclComm_t comm, CUstream stream))                                                    \
    X(ncclBroadcast, gl_ncclResult_t,                                                           \
      (const void *send, void *recv, size_t count, gl_ncclDataType_t type, int root,            \
       gl_ncclComm_t comm, CUstream stream))                                                    \
    X(ncclReduceScatter, gl_ncclResult_t,                                                       \
      (const void *send, void *recv, size_t recvcount, gl_ncclDataType_t type,                  \
       gl_ncclRedOp_t op, gl_ncclComm_t comm, CUstream stream))                                 \
    X(ncclAllGather, gl_ncclResult_t,                                                           \
      (const void *send, void *recv, size_t sendcount, gl_ncclDataType_t type,                  \
       gl_ncclComm_t comm, CUstream stream))

/* Present since 2.13; looked up but optional. */
#define GL_NCCL_OPTIONAL_FUNCS(X) X(ncclGetLastError, const char *, (gl_ncclComm_t comm))

#endif
