/*
 * fake_uuid.c — cuDeviceGetUuid for the driver stand-in: device n has the UUID whose 16 bytes are
 * 0x60 + n followed by 1..15, so tests can check the text gpulab makes of it (dev.uuid).
 */
#include "fake.h"

CUresult fake_cuDeviceGetUuid(CUuuid *uuid, CUdevice d) {
    FAKE_ENTER("cuDeviceGetUuid");
    if (uuid == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    uuid->bytes[0] = (char)(0x60 + d);
    for (int i = 1; i < 16; i++) uuid->bytes[i] = (char)i;
    return CUDA_SUCCESS;
}
