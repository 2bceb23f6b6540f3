/*
 * lifetime.c — objects that queued work depends on stay alive until that work is done.
 *
 * Each submission gets a sequence number; an object remembers the last one that used it and
 * the streams it was used on. Releasing an object whose work may still be running records one
 * event per such stream and parks the free until every event has completed (or a full sync
 * proved everything complete). Streams are represented by refcounted tracks that outlive the
 * stream object: when a stream goes away, its track keeps a final event for late releases,
 * which hold a reference to the track and wait on that event.
 */
#include "gpulab.h"
#include "stream.h"

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
    uint64_t seq;                          /* done once gl_done_seq >= seq ... */
    CUevent events[GL_USE_STREAMS];        /* ... or once all these completed, */
    gl_stream_track *finals[GL_USE_STREAMS]; /* and the final events of these retired streams */
    int nevents, nfinals;                  /* (one reference held per track) */
    bool full_sync;                        /* only a full sync will do */
    bool in_capture;  /* released while a capture was under way: released again at its end */
    gl_use use;       /* the uses moved out of the object, for that second release */
} deferred;

static deferred *parked;
static int nparked, capparked;

int gl_release_pending(void) { return nparked; }

static bool record_event(gl_stream_track *t, CUevent *ev) {
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

/* Gives back what a parked entry holds besides its handle: events and track references. */
static void drop_waits(deferred *d) {
    for (int i = 0; i < d->nevents; i++)
        if (d->events[i]) gl_cu.cuEventDestroy(d->events[i]);
    for (int i = 0; i < d->nfinals; i++)
        if (d->finals[i]) gl_track_unref(d->finals[i]);
    d->nevents = d->nfinals = 0;
}

static void park(deferred *d) {
    if (nparked == capparked) {
        int cap = capparked ? capparked * 2 : 32;
        deferred *n = realloc(parked, (size_t)cap * sizeof *n);
        if (n == NULL) { /* cannot park: the safest remaining choice is to leak the handle */
            drop_waits(d);
            forget_use(&d->use);
            return;
        }
        parked = n;
        capparked = cap;
    }
    parked[nparked++] = *d;
    if (nparked > 256) gl_release_drain();
}

/* The driver must not be called while this thread captures (a free or an event record on the
 * capturing stream would end up in, or invalidate, the graph): the object's uses move into a
 * parked entry and gl_release_after_capture() releases it again once the capture has ended. */
static void park_for_capture(gl_use *u, gl_release_fn fn, void *handle, uintptr_t extra) {
    deferred d = {.fn = fn, .handle = handle, .extra = extra, .in_capture = true, .use = *u};
    u->nstreams = 0; /* the references moved with it */
    u->last_seq = 0;
    park(&d);
}

void gl_release(gl_use *u, gl_release_fn fn, void *handle, uintptr_t extra) {
    if (!gl_context_usable()) { /* poisoned or never created: the handles are not touched */
        forget_use(u);
        return;
    }
    if (gl_capture_active()) {
        park_for_capture(u, fn, handle, extra);
        return;
    }
    if (u->last_seq <= gl_done_seq || u->nstreams == 0) {
        forget_use(u);
        fn(handle, extra);
        return;
    }
    deferred d = {.fn = fn, .handle = handle, .extra = extra, .seq = u->last_seq};
    d.full_sync = u->nstreams < 0; /* too many streams to track */
    for (int i = 0; i < u->nstreams && !d.full_sync; i++) {
        gl_stream_track *t = u->streams[i];
        if (t->retired) { /* the stream is gone: its final event tells when its work is done */
            if (t->final == NULL) continue; /* nothing was pending when it was retired */
            gl_track_ref(t);
            d.finals[d.nfinals++] = t;
        } else if (record_event(t, &d.events[d.nevents])) {
            d.nevents++;
        } else {
            d.full_sync = true;
        }
    }
    forget_use(u);
    if (d.full_sync) drop_waits(&d);
    else if (d.nevents == 0 && d.nfinals == 0) { /* every stream it used had been drained */
        fn(handle, extra);
        return;
    }
    park(&d);
}

void gl_release_after_capture(void) {
    int i = 0;
    while (i < nparked) {
        if (!parked[i].in_capture) {
            i++;
            continue;
        }
        deferred d = parked[i];
        parked[i] = parked[--nparked]; /* order does not matter; entry i is looked at again */
        gl_release(&d.use, d.fn, d.handle, d.extra);
    }
}

/* True once the work is over; an error that poisons the context also means it is over. */
static bool finished(CUevent ev) { return gl_cu.cuEventQuery(ev) != CUDA_ERROR_NOT_READY; }

static bool deferred_done(deferred *d) {
    if (d->in_capture) return false;
    if (d->seq <= gl_done_seq) return true;
    if (d->full_sync) return false;
    for (int i = 0; i < d->nevents; i++) {
        if (d->events[i] == NULL) continue;
        if (!finished(d->events[i])) return false;
        gl_cu.cuEventDestroy(d->events[i]);
        d->events[i] = NULL;
    }
    for (int i = 0; i < d->nfinals; i++) {
        if (d->finals[i] == NULL) continue;
        if (!finished(d->finals[i]->final)) return false;
        gl_track_unref(d->finals[i]);
        d->finals[i] = NULL;
    }
    return true;
}

void gl_release_drain(void) {
    if (!gl_context_usable() || gl_capture_active()) return;
    int kept = 0;
    for (int i = 0; i < nparked; i++) {
        deferred *d = &parked[i];
        if (deferred_done(d)) {
            drop_waits(d);
            d->fn(d->handle, d->extra);
        } else {
            parked[kept++] = *d;
        }
    }
    nparked = kept;
}
