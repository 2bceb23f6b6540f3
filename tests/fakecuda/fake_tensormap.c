/*
 * fake_tensormap.c — tensor-map encoding in the driver stand-in. The 128 bytes are not the
 * hardware format: they record the arguments (address first, so a replaced address is visible
 * at offset 0), which is enough to check packing and lifetimes. The checks the driver makes
 * on the destination and rank are made here too.
 */
#include "fake.h"

#include <stdint.h>
#include <string.h>

CUresult fake_cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                                     void *address, const cuuint64_t *dims, const cuuint64_t *strides,
                                     const cuuint32_t *box, const cuuint32_t *elem_strides,
                                     CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    FAKE_ENTER("cuTensorMapEncodeTiled");
    if (map == NULL || ((uintptr_t)map & 63) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (rank < 1 || rank > 5 || dims == NULL || box == NULL || elem_strides == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (((uintptr_t)address & 15) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t words[16] = {0};
    words[0] = (uint64_t)(uintptr_t)address;
    words[1] = ((uint64_t)dtype << 32) | rank;
    for (cuuint32_t i = 0; i < rank; i++) {
        words[2 + i] = dims[i];
        words[7 + i] = ((uint64_t)box[i] << 32) | elem_strides[i];
    }
    words[12] = rank > 1 && strides ? strides[0] : 0;
    words[13] = ((uint64_t)interleave << 48) | ((uint64_t)swizzle << 32) | ((uint64_t)l2 << 16) | oob;
    memcpy(map, words, sizeof words);
    fake_log("tensormap encode address=0x%llx rank=%u", (unsigned long long)(uintptr_t)address, rank);
    return CUDA_SUCCESS;
}

CUresult fake_cuTensorMapReplaceAddress(CUtensorMap *map, void *address) {
    FAKE_ENTER("cuTensorMapReplaceAddress");
    if (map == NULL || ((uintptr_t)map & 63) != 0 || ((uintptr_t)address & 15) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)address;
    memcpy(map, &a, sizeof a);
    fake_log("tensormap replace address=0x%llx", (unsigned long long)a);
    return CUDA_SUCCESS;
}
