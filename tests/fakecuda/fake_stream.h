/*
 * fake_stream.h — what the stream, event and graph side of the driver stand-in offers the
 * other fake files (fake_stream.c).
 *
 * Besides GPULAB_FAKE_HANG (work never completes), the stand-in reads
 *   GPULAB_FAKE_BUSY_FILE=path   queued work stays incomplete while this file exists: queries
 *                                answer CUDA_ERROR_NOT_READY, syncs wait; removing the file
 *                                completes all of it. Tests use it to hold work "in flight"
 *                                and then let it finish, in one process.
 */
#ifndef GPULAB_FAKE_STREAM_H
#define GPULAB_FAKE_STREAM_H

#include <cuda.h>
#include <stdbool.h>

/* True while queued work must not complete (GPULAB_FAKE_HANG, or the busy file exists). */
bool fake_work_blocked(void);         /* the current device's work */
bool fake_device_blocked(int device); /* one device's work */

/* A launch on stream s calls this after its checks: when s is being captured, the launch
 * becomes one node of the capture's graph (it is still logged) and true is returned. The graph
 * keeps a copy of `line` (the launch's log line): each cuGraphLaunch of it logs
 * `graph_node LINE-WITHOUT-"launch "` per kept node after its `graph_launch` line. */
bool fake_capture_add(CUstream s, const char *line);

/* True while h is a live stream the stand-in created (fake_green.c counts a green context's). */
bool fake_stream_known(CUstream h);
/* Green-context streams are made through the ordinary path (fake_green.c). */
CUresult fake_cuStreamCreateWithPriority(CUstream *out, unsigned flags, int priority);
/* True (and the captures invalidated) for work on the legacy default stream while a blocking
 * stream captures. */
bool fake_capture_implicit(CUstream s);
/* True (and every capture invalidated) while any stream captures in global or thread-local mode:
 * the calls the H200's driver (580.159) refuses then with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 * whichever stream or thread makes them: cuCtxSynchronize, cuStreamSynchronize and cuStreamQuery
 * of any stream, cuEventSynchronize, cuEventQuery, cuMemAlloc and cuMemAllocHost (docs/RESULTS.md
 * §43). Creating streams and events and loading modules stay allowed. `call` goes to the log. */
bool fake_capture_forbids(const char *call);

#endif
