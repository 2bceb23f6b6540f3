/*
 * observe.h — watching submissions: the timeline (trace.c) and the per-kernel profiler
 * (profile.c) see each launch, copy, memset, sync and graph launch through these calls.
 *
 * A submission site does
 *     long obs = gl_observers ? gl_observe_begin(stream, true) : -1;
 *     ... submit ...
 *     if (obs >= 0) gl_observe_launch(obs, ...);
 * so nothing but one load and compare is paid while nobody watches.
 */
#ifndef GPULAB_OBSERVE_H
#define GPULAB_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

extern int gl_observers; /* number of active watchers (trace, profile, pcsample) */

/* Before a submission on `stream` (NULL: the default stream). Returns a token (>= 0) for the
 * matching call below; never raises. A submission that fails leaves the token unused.
 * device_times: bracket the submission with events to time it on the GPU (not for syncs). */
long gl_observe_begin(CUstream stream, bool device_times);
/* kernel: the name as the script asked for it ("scale<2>"), shown in traces and rows; entry: its
 * symbol in the module (mangled for C++), the name CUPTI reports. */
void gl_observe_launch(long token, const char *kernel, const char *entry, const unsigned grid[3],
                       const unsigned block[3], CUstream stream);
/* what: "HtoD", "DtoH", "DtoD", "memset" ... */
void gl_observe_copy(long token, const char *what, size_t bytes, CUstream stream);
void gl_observe_sync(long token, const char *what, CUstream stream);
void gl_observe_graph(long token, CUstream stream);

/* profile.c: a launch seen while cuda.profile runs its function. */
void gl_profile_note_launch(const char *kernel, const unsigned grid[3], const unsigned block[3]);
bool gl_profile_running(void);
/* pcsample.c: the same for cuda.pcsample; the two refuse to run inside each other. */
void gl_pcsample_note_launch(const char *kernel, const char *entry);
bool gl_pcsample_running(void);

#endif
