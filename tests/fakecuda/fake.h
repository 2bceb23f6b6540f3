/*
 * fake.h — shared by the files of the driver stand-in (libfakecuda.so). Functions named
 * fake_<driver name> (fake_cuMemAlloc for cuMemAlloc) are what cuGetProcAddress hands out;
 * any entry point without one answers CUDA_ERROR_NOT_SUPPORTED.
 *
 * Fault injection, read from the environment once (fake_core.c):
 *   GPULAB_FAKE_FAIL=name:code[:nth]   the nth call (default 1st) of `name` returns `code`;
 *                                       several specs separated by commas
 *   GPULAB_FAKE_HANG=1                  work never completes: queries say NOT_READY, syncs block
 *                                       (cuStreamSynchronize/cuCtxSynchronize/cuEventSynchronize
 *                                       sleep forever)
 *   GPULAB_FAKE_BUSY_FILE=path          queued work stays incomplete while this file exists:
 *                                       queries say NOT_READY, syncs wait; removing the file
 *                                       completes all of it (fake_stream.h)
 *   GPULAB_FAKE_LOG=path                append one line per recorded call (launches with their
 *                                       packed arguments in hex, copies, frees)
 *   GPULAB_FAKE_DEVICES=n               number of devices (default 1); CUDA_VISIBLE_DEVICES=2,0
 *                                       then shows only those, as the driver does
 *   GPULAB_FAKE_PEER=all|none|0-1,1-0   which device pairs can access each other (default all;
 *                                       fake_peer.c)
 *   GPULAB_FAKE_NO_ENTRY=cuX[,cuY]      cuGetProcAddress does not find these (an older driver)
 *   GPULAB_FAKE_CC=8.0                  compute capability (default 9.0); below 9.0 there are no
 *                                       clusters or PDL: cluster function attributes, cluster
 *                                       launches and the cluster occupancy calls are refused
 * CUDA_INJECTION64_PATH, which a tool sets to be loaded by the driver, is not loaded; cuInit logs
 * "injection PATH" instead, so tests can tell which processes a tool would have instrumented.
 * A sticky code (700, ...) makes every later call fail with the same code, as a real context.
 */
#ifndef GPULAB_FAKE_H
#define GPULAB_FAKE_H

#include <cuda.h>
#include <stdbool.h>

/* Call first in every fake entry point: returns the injected or sticky error, or CUDA_SUCCESS. */
CUresult fake_enter(const char *name);
bool fake_hang(void);
/* printf-style line into GPULAB_FAKE_LOG (no-op without it). */
void fake_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Tells the CUPTI stand-in about an accepted launch (fake_observer.c). */
void fake_observe_launch(const char *kernel, const unsigned grid[3], const unsigned block[3]);
/* fake_measure.c: scripted elapsed times (true when scripted) and the measurement kernels'
 * effects, applied when cuLaunchKernel accepts one. */
bool fake_scripted_elapsed(float *ms);
void fake_measure_launch(const char *name, void **params);

#define FAKE_ENTER(name)                                                                        \
    do {                                                                                        \
        CUresult fr_ = fake_enter(name);                                                        \
        if (fr_ != CUDA_SUCCESS) return fr_;                                                    \
    } while (0)

/* Registers host memory standing in for a module variable as device memory (copies to and from
 * it are range-checked like any allocation), without logging an allocation. fake_memory.c */
bool fake_track_device(void *p, size_t size);
void fake_untrack_device(void *p);

/* Devices and contexts (fake_core.c): the device of a primary context (-1 for anything else),
 * of the calling thread's current context, and how many devices there are. */
int fake_context_device(CUcontext c);
int fake_current_device(void);
int fake_device_count(void);
/* The device whose context allocated the device memory at p (-1: not an allocation). */
int fake_device_of(CUdeviceptr p, size_t n);

/* Streams (fake_stream.c): true for the default stream and every live stream handle. A stream's
 * access-policy window (fake_l2.c) is forgotten when the stream is destroyed. */
bool fake_stream_live(CUstream h);
void fake_l2_stream_destroyed(CUstream h);

#endif
