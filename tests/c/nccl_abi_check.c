/* The NCCL ABI gpulab declares itself (bindings/nccl_abi.h) against a real nccl.h: every value
 * and layout it relies on. Built only where the build finds an nccl.h; a mismatch fails to compile. */
#include <nccl.h>
#include <stddef.h>

#include "nccl_abi.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)
SAME(GL_NCCL_SUCCESS, ncclSuccess);
SAME(GL_NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError);
SAME(GL_NCCL_SYSTEM_ERROR, ncclSystemError);
SAME(GL_NCCL_INTERNAL_ERROR, ncclInternalError);
SAME(GL_NCCL_INVALID_ARGUMENT, ncclInvalidArgument);
SAME(GL_NCCL_INVALID_USAGE, ncclInvalidUsage);
SAME(GL_NCCL_REMOTE_ERROR, ncclRemoteError);
SAME(GL_NCCL_IN_PROGRESS, ncclInProgress);
SAME(GL_NCCL_INT8, ncclInt8);
SAME(GL_NCCL_UINT8, ncclUint8);
SAME(GL_NCCL_INT32, ncclInt32);
SAME(GL_NCCL_UINT32, ncclUint32);
SAME(GL_NCCL_INT64, ncclInt64);
SAME(GL_NCCL_UINT64, ncclUint64);
SAME(GL_NCCL_FLOAT16, ncclFloat16);
SAME(GL_NCCL_FLOAT32, ncclFloat32);
SAME(GL_NCCL_FLOAT64, ncclFloat64);
SAME(GL_NCCL_BFLOAT16, ncclBfloat16);
SAME(GL_NCCL_SUM, ncclSum);
SAME(GL_NCCL_PROD, ncclProd);
SAME(GL_NCCL_MAX, ncclMax);
SAME(GL_NCCL_MIN, ncclMin);
SAME(GL_NCCL_AVG, ncclAvg);
SAME(GL_NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES);
_Static_assert(sizeof(gl_ncclUniqueId) == sizeof(ncclUniqueId), "ncclUniqueId size");
_Static_assert(offsetof(gl_ncclConfig_t, size) == offsetof(ncclConfig_t, size), "config.size");
_Static_assert(offsetof(gl_ncclConfig_t, magic) == offsetof(ncclConfig_t, magic), "config.magic");
_Static_assert(offsetof(gl_ncclConfig_t, version) == offsetof(ncclConfig_t, version), "config.version");
_Static_assert(offsetof(gl_ncclConfig_t, blocking) == offsetof(ncclConfig_t, blocking), "config.blocking");
_Static_assert(sizeof(ncclComm_t) == sizeof(gl_ncclComm_t), "ncclComm_t is a pointer");
_Static_assert(sizeof(ncclDataType_t) == sizeof(gl_ncclDataType_t), "enum size");
_Static_assert(sizeof(ncclResult_t) == sizeof(gl_ncclResult_t), "enum size");
_Static_assert(GL_NCCL_VERSION(2, 14, 0) == NCCL_VERSION(2, 14, 0), "NCCL_VERSION");

/* A config as gpulab fills it must pass NCCL's checks: the magic is the initializer's. */
static const ncclConfig_t reference = NCCL_CONFIG_INITIALIZER;

int main(void) { return reference.magic == GL_NCCL_CONFIG_MAGIC ? 0 : 1; }
