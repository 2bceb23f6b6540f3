/*
 * lifetime.h — stream tracking and deferred releases (lifetime.c). An object that queued work
 * may use embeds a gl_use. Submitting work that uses it calls gl_use_mark(); releasing calls
 * gl_release(), which frees at once when no work is pending and otherwise defers the free until
 * that work is known complete. Also the live-object counts behind cuda.stats().
 */
#ifndef GPULAB_LIFETIME_H
#define GPULAB_LIFETIME_H

#include <stdint.h>

#include <cuda.h>

typedef struct gl_stream_track gl_stream_track; /* one per stream, outlives it while referenced */

#define GL_USE_STREAMS 4
typedef struct gl_use {
    uint64_t last_seq;                          /* gl_work_seq at the last submission using it */
    gl_stream_track *streams[GL_USE_STREAMS];   /* streams it was used on since that */
    int nstreams;                               /* -1: too many to track, wait for a full sync */
} gl_use;

/* Monotonic count of submissions; gl_done_seq is the count known complete (full sync). */
extern uint64_t gl_work_seq;
extern uint64_t gl_done_seq;

/* The track of the legacy default stream (never destroyed). */
gl_stream_track *gl_default_track(void);
gl_stream_track *gl_track_new(CUstream h);
/* The stream object is going away: record a final event, destroy the handle (deferred by
 * the driver until its work is done), and drop the stream's reference. */
void gl_track_retire(gl_stream_track *t);
CUstream gl_track_handle(const gl_stream_track *t);
void gl_track_ref(gl_stream_track *t);
void gl_track_unref(gl_stream_track *t);

/* The last submission on each device (the current device's at submission time), so that a sync of
 * one device's context proves only that device's work complete. */
#define GL_SEQ_DEVICES 64
extern uint64_t gl_last_seq_on[GL_SEQ_DEVICES];
extern int gl_seq_device; /* the current device, kept by driver.c; beyond the table: the last slot */

/* Call before submitting: returns the new submission's sequence number. */
static inline uint64_t gl_next_seq(void) {
    uint64_t seq = ++gl_work_seq;
    gl_last_seq_on[gl_seq_device] = seq;
    return seq;
}

/* After a sync of device d's whole context: gl_done_seq moves up to the newest submission that
 * every device's last sync (or idleness since) proves complete. */
void gl_mark_device_synced(int d);

/* Called once per submission that uses `u` on stream track `t` (cheap: no driver calls). */
static inline void gl_use_mark(gl_use *u, gl_stream_track *t, uint64_t seq) {
    if (u->last_seq <= gl_done_seq) { /* everything before was completed */
        for (int i = 0; i < u->nstreams; i++) gl_track_unref(u->streams[i]);
        u->nstreams = 0;
    }
    u->last_seq = seq;
    if (u->nstreams < 0) return;
    for (int i = 0; i < u->nstreams; i++)
        if (u->streams[i] == t) return;
    if (u->nstreams == GL_USE_STREAMS) {
        for (int i = 0; i < u->nstreams; i++) gl_track_unref(u->streams[i]);
        u->nstreams = -1;
        return;
    }
    gl_track_ref(t);
    u->streams[u->nstreams++] = t;
}

/* Drops the uses recorded in u (their stream references) without waiting for anything: for an
 * object no GPU work can touch, which a graph may still have marked as used. */
void gl_use_forget(gl_use *u);

typedef void (*gl_release_fn)(void *handle, uintptr_t extra);
/* Releases `handle` with fn(handle, extra) now, or once the work recorded in `u` is done.
 * Never raises; without a usable context (poisoned, or no driver) the handle is dropped, and fn
 * is called only when it was declared to run without one (below). */
void gl_release(gl_use *u, gl_release_fn fn, void *handle, uintptr_t extra);
/* fn checks gl_context_usable() itself and frees host bookkeeping in any case: a release that
 * finds the context poisoned (a parked one included) still calls it. */
void gl_release_runs_without_context(gl_release_fn fn);
/* Frees deferred objects whose work completed (non-blocking; nothing during a capture). */
void gl_release_drain(void);
/* Releases made while a stream capture was under way are parked without any driver call;
 * the stream binding calls this when the capture has ended to release them for real. */
void gl_release_after_capture(void);
/* Number of releases still waiting for work to finish. */
int gl_release_pending(void);
/* One non-blocking query of the legacy default stream and every live gpulab stream:
 * CUDA_ERROR_NOT_READY while any has work pending, else the first error or CUDA_SUCCESS. */
CUresult gl_query_all_streams(void);

/* Live objects, for cuda.stats() and the leak checks in the tests. */
typedef struct gl_stats {
    long arrays, hosts, modules, streams, events, graphs, tensormaps, prepared, partitions;
    long long device_bytes, pinned_bytes;
} gl_stats;
extern gl_stats gl_live;

#endif
