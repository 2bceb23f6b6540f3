/*
 * lifetime.c — objects that queued work depends on stay alive until that work is done.
 *
 * Each submission gets a sequence number; an object remembers the last one that used it and
 * the streams it was used on. Releasing an object whose work may still be running records one
 * event per such stream and parks the free until every event has completed (or a full sync
 * proved everything complete). Streams are represented by refcounted tracks that outlive the
 * stream object: when a stream goes away, its track keeps a final event for late releases.
 */
#include "gpulab.h"

#include <stdlib.h>
#include <string.h>

uint64_t gl_work_seq = 0;
uint64_t gl_done_seq = 0;
gl_stats gl_live;

struct gl_stream_track {
    CUstream handle;  /* NULL for the legacy default stream */
    CUevent final;    /* recorded when the stream was retired; NULL before */
    bool retired;
    int refs;
};

static gl_stream_track default_track = {NULL, NULL, false, 1 << 30};

gl_stream_track *gl_default_track(void) { return &default_track; }

gl_stream_track *gl_track_new(CUstream h) {
    gl_stream_track *t = calloc(1, sizeof *t);
    if (t) {
        t->handle = h;
        t->refs = 1;
    }
    return t;
}

CUstream gl_track_handle(const gl_stream_track *t) { return t->handle; }

void gl_track_ref(gl_stream_track *t) { t->refs++; }

void gl_track_unref(gl_stream_track *t) {
    if (t == &default_track) return;
    if (--t->refs > 0) return;
    if (t->final && gl_context_usable()) gl_cu.cuEventDestroy(t->final);
    free(t);
}

void gl_track_retire(gl_stream_track *t) {
    if (t->retired) return;
    t->retired = true;
    if (gl_context_usable()) {
        /* The final event lets releases deferred on this stream wait for it after it is gone. */
        if (t->refs > 1 && gl_cu.cuEventCreate(&t->final, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
            gl_cu.cuEventRecord(t->final, t->handle) != CUDA_SUCCESS) {
            gl_cu.cuEventDestroy(t->final);
            t->final = NULL;
        }
        gl_cu.cuStreamDestroy(t->handle); /* the driver frees it once its work is done */
    }
    t->handle = NULL;
    gl_track_unref(t);
}

/* ---------------------------------------------------------------------------------------- */

typedef struct deferred {
    gl_release_fn fn;
    void *handle;
    uintptr_t extra;
    uint64_t seq;                  /* done once gl_done_seq >= seq ... */
    CUevent events[GL_USE_STREAMS]; /* ... or once all these completed */
    int nevents;                   /* -1: only a full sync will do */
} deferred;

static deferred *parked;
static int nparked, capparked;

int gl_release_pending(void) { return nparked; }

static bool record_on(gl_stream_track *t, CUevent *ev) {
    if (t->retired) {
        if (t->final == NULL) return true; /* nothing was pending when it was retired */
        /* Share nothing: make our own event that waits behind the stream's final one is not
         * possible without a stream, so query the final event directly when draining. */
        *ev = NULL;
        return false;
    }
    if (gl_cu.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return false;
    if (gl_cu.cuEventRecord(*ev, t->handle) != CUDA_SUCCESS) {
        gl_cu.cuEventDestroy(*ev);
        *ev = NULL;
        return false;
    }
    return true;
}

static void forget_use(gl_use *u) {
    for (int i = 0; i < u->nstreams; i++) gl_track_unref(u->streams[i]);
    u->nstreams = 0;
    u->last_seq = 0;
}

void gl_release(gl_use *u, gl_release_fn fn, void *handle, uintptr_t extra) {
    if (!gl_context_usable()) { /* poisoned or never created: the handles are not touched */
        forget_use(u);
        return;
    }
    if (u->last_seq <= gl_done_seq || u->nstreams == 0) {
        forget_use(u);
        fn(handle, extra);
        return;
    }
    deferred d = {fn, handle, extra, u->last_seq, {0}, 0};
    if (u->nstreams > 0) {
        for (int i = 0; i < u->nstreams; i++) {
            CUevent ev = NULL;
            if (!record_on(u->streams[i], &ev)) {
                if (ev == NULL && u->streams[i]->retired && u->streams[i]->final == NULL) continue;
                d.nevents = -1;
                break;
            }
            if (ev) d.events[d.nevents++] = ev;
        }
    } else {
        d.nevents = -1;
    }
    if (d.nevents == 0) { /* every stream it used had already been drained */
        forget_use(u);
        fn(handle, extra);
        return;
    }
    if (d.nevents < 0) /* a retired stream's final event or an untracked use: full sync only */
        for (int i = 0; i < GL_USE_STREAMS; i++)
            if (d.events[i]) { gl_cu.cuEventDestroy(d.events[i]); d.events[i] = NULL; }
    forget_use(u);
    if (nparked == capparked) {
        int cap = capparked ? capparked * 2 : 32;
        deferred *n = realloc(parked, (size_t)cap * sizeof *n);
        if (n == NULL) { /* cannot park: the safest remaining choice is to leak the handle */
            for (int i = 0; i < d.nevents; i++) gl_cu.cuEventDestroy(d.events[i]);
            return;
        }
        parked = n;
        capparked = cap;
    }
    parked[nparked++] = d;
    if (nparked > 256) gl_release_drain();
}

static bool deferred_done(deferred *d) {
    if (d->seq <= gl_done_seq) return true;
    if (d->nevents < 0) return false;
    for (int i = 0; i < d->nevents; i++) {
        if (d->events[i] == NULL) continue;
        CUresult r = gl_cu.cuEventQuery(d->events[i]);
        if (r == CUDA_ERROR_NOT_READY) return false;
        /* success, or an error that poisons the context: either way the work is over */
        gl_cu.cuEventDestroy(d->events[i]);
        d->events[i] = NULL;
    }
    return true;
}

void gl_release_drain(void) {
    if (!gl_context_usable()) return;
    int kept = 0;
    for (int i = 0; i < nparked; i++) {
        deferred *d = &parked[i];
        if (deferred_done(d)) {
            for (int j = 0; j < d->nevents; j++)
                if (d->events[j]) gl_cu.cuEventDestroy(d->events[j]);
            d->fn(d->handle, d->extra);
        } else {
            parked[kept++] = *d;
        }
    }
    nparked = kept;
}
