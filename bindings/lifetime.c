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
#include "check.h"
#include "context.h"
#include "driver.h"
#include "gpulab.h"
#include "lifetime.h"
#include "stream.h"

#include <stdlib.h>

uint64_t gl_work_seq = 0;
uint64_t gl_done_seq = 0;
uint64_t gl_last_seq_on[GL_SEQ_DEVICES];
int gl_seq_device = 0;

/* Per device, the submission count when its context was last synced: its work up to there is
 * complete. */
static uint64_t synced_seq_on[GL_SEQ_DEVICES];

void gl_mark_device_synced(int d) {
    if (d < 0 || d >= GL_SEQ_DEVICES - 1) return; /* the shared last slot never proves anything */
    synced_seq_on[d] = gl_work_seq;
    /* Every submission up to `done` is complete when each device either has nothing newer than its
       last sync, or was synced at `done` or later (syncs of other devices are remembered, so one
       device at a time proves the whole process done). */
    uint64_t done = gl_work_seq;
    for (int e = 0; e < GL_SEQ_DEVICES; e++)
        if (gl_last_seq_on[e] > synced_seq_on[e] && synced_seq_on[e] < done) done = synced_seq_on[e];
    if (done > gl_done_seq) gl_done_seq = done;
}
gl_stats gl_live;

struct gl_stream_track {
    CUstream handle;  /* NULL for the legacy default stream */
    CUevent final;    /* recorded when the stream was retired; NULL before */
    bool retired;
    bool unknown;     /* retired with work possibly pending and no final event: only a full
                         context sync proves that work complete */
    int refs;
    gl_stream_track *prev, *next; /* the live (not retired) streams, for gl_query_all_streams */
};

static gl_stream_track default_track = {.refs = 1 << 30};
static gl_stream_track *live_tracks;

gl_stream_track *gl_default_track(void) { return &default_track; }

gl_stream_track *gl_track_new(CUstream h) {
    gl_stream_track *t = calloc(1, sizeof *t);
    if (t) {
        t->handle = h;
        t->refs = 1;
        t->next = live_tracks;
        if (live_tracks) live_tracks->prev = t;
        live_tracks = t;
    }
    return t;
}

static void unlink_live(gl_stream_track *t) {
    if (t->prev) t->prev->next = t->next;
    else if (live_tracks == t) live_tracks = t->next;
    if (t->next) t->next->prev = t->prev;
    t->prev = t->next = NULL;
}

/* One non-blocking look at every stream gpulab created and the legacy default stream:
 * CUDA_ERROR_NOT_READY while any has work pending, the first error, or CUDA_SUCCESS. */
CUresult gl_query_all_streams(void) {
    CUresult r = gl_cu.cuStreamQuery(NULL);
    for (gl_stream_track *t = live_tracks; t && r == CUDA_SUCCESS; t = t->next)
        r = gl_cu.cuStreamQuery(t->handle);
    return r;
}

CUstream gl_track_handle(const gl_stream_track *t) { return t->handle; }

void gl_track_ref(gl_stream_track *t) { t->refs++; }

void gl_track_unref(gl_stream_track *t) {
    if (t == &default_track) return;
    if (--t->refs > 0) return;
    if (t->final && gl_context_usable()) gl_cu.cuEventDestroy(t->final);
    free(t);
}

/* The final event lets releases deferred on this stream wait for it after it is gone. When
 * the driver cannot make one, an idle stream needs none; otherwise the track is marked unknown
 * and every later release that used it waits for a full context sync. */
static void record_final(gl_stream_track *t) {
    if (t->refs <= 1) return; /* no object's use refers to it: nobody will wait on it */
    CUevent ev = NULL;
    if (gl_cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        if (gl_cu.cuEventRecord(ev, t->handle) == CUDA_SUCCESS) {
            t->final = ev;
            return;
        }
        gl_cu.cuEventDestroy(ev);
    }
    if (gl_cu.cuStreamQuery(t->handle) != CUDA_SUCCESS) t->unknown = true;
}

void gl_track_retire(gl_stream_track *t) {
    if (t->retired) return;
    t->retired = true;
    unlink_live(t);
    if (gl_context_usable()) {
        record_final(t);
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

/* Two growable lists: releases waiting for work, and releases made during a capture (which
 * wait for the capture to end). Kept apart so that draining one never reorders the other
 * while it is being walked. */
typedef struct deferred_list {
    deferred *items;
    int n, cap;
} deferred_list;

static deferred_list parked, in_capture;

int gl_release_pending(void) { return parked.n + in_capture.n; }

static bool record_event(gl_stream_track *t, CUevent *ev) {
    if (gl_cu.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return false;
    if (gl_cu.cuEventRecord(*ev, t->handle) != CUDA_SUCCESS) {
        gl_cu.cuEventDestroy(*ev);
        *ev = NULL;
        return false;
    }
    return true;
}

/* Whether a device other than the current one may still run work: the legacy default stream is
 * one track for every device, and an event recorded on it now lands on the current device's
 * stream, which proves nothing of another device's. */
static bool other_device_busy(void) {
    for (int e = 0; e < GL_SEQ_DEVICES; e++)
        if (e != gl_seq_device && gl_last_seq_on[e] > gl_done_seq) return true;
    return false;
}

void gl_use_forget(gl_use *u) {
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

static bool list_push(deferred_list *l, const deferred *d) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        deferred *n = realloc(l->items, (size_t)cap * sizeof *n);
        if (n == NULL) return false;
        l->items = n;
        l->cap = cap;
    }
    l->items[l->n++] = *d;
    return true;
}

static void park(deferred *d) {
    deferred_list *l = d->in_capture ? &in_capture : &parked;
    if (!list_push(l, d)) { /* cannot park: the safest remaining choice is to leak the handle */
        drop_waits(d);
        gl_use_forget(&d->use);
        return;
    }
    /* keep the list short when work completes steadily; each drain visits every entry */
    if (l == &parked && parked.n > 256 && (parked.n & 63) == 0) gl_release_drain();
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

/* The release functions that free host bookkeeping without a usable context (a few at most). */
static gl_release_fn without_context[4];

void gl_release_runs_without_context(gl_release_fn fn) {
    for (int i = 0; i < 4; i++) {
        if (without_context[i] == fn) return;
        if (without_context[i] == NULL) {
            without_context[i] = fn;
            return;
        }
    }
}

static bool runs_without_context(gl_release_fn fn) {
    for (int i = 0; i < 4 && without_context[i]; i++)
        if (without_context[i] == fn) return true;
    return false;
}

void gl_release(gl_use *u, gl_release_fn fn, void *handle, uintptr_t extra) {
    if (!gl_context_usable()) { /* poisoned or never created: the handles are not touched */
        gl_use_forget(u);
        if (runs_without_context(fn)) fn(handle, extra);
        return;
    }
    if (gl_capture_active()) {
        park_for_capture(u, fn, handle, extra);
        return;
    }
    if (u->last_seq <= gl_done_seq || u->nstreams == 0) {
        gl_use_forget(u);
        fn(handle, extra);
        return;
    }
    deferred d = {.fn = fn, .handle = handle, .extra = extra, .seq = u->last_seq};
    d.full_sync = u->nstreams < 0; /* too many streams to track */
    for (int i = 0; i < u->nstreams && !d.full_sync; i++) {
        gl_stream_track *t = u->streams[i];
        if (t->retired) { /* the stream is gone: its final event tells when its work is done */
            if (t->unknown) {
                d.full_sync = true;
                break;
            }
            if (t->final == NULL) continue; /* it was idle when it was retired */
            gl_track_ref(t);
            d.finals[d.nfinals++] = t;
        } else {
            /* the default stream's work may be another device's, which an event now would miss */
            bool covered = !(t == &default_track && other_device_busy()) && record_event(t, &d.events[d.nevents]);
            if (covered) d.nevents++;
            else d.full_sync = true;
        }
    }
    gl_use_forget(u);
    if (d.full_sync) drop_waits(&d);
    else if (d.nevents == 0 && d.nfinals == 0) { /* every stream it used had been drained */
        fn(handle, extra);
        return;
    }
    park(&d);
}

void gl_release_after_capture(void) {
    /* Take the whole list first: each release below may park again (in `parked`) or drain. */
    deferred_list taken = in_capture;
    in_capture = (deferred_list){0};
    for (int i = 0; i < taken.n; i++) {
        deferred *d = &taken.items[i];
        gl_release(&d->use, d->fn, d->handle, d->extra);
    }
    free(taken.items);
}

/* True once the work is over; an error that poisons the context also means it is over. Any
 * other error proves nothing: the entry keeps waiting (a full sync still releases it). */
static bool finished(CUevent ev) {
    CUresult r = gl_cu.cuEventQuery(ev);
    return r == CUDA_SUCCESS || gl_is_sticky_error(r);
}

static bool deferred_done(deferred *d) {
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

/* A poisoned context can run nothing again: what waits is given up without driver calls (the
 * driver reclaims everything when the process ends), so the bookkeeping reads zero. */
static void abandon_list(deferred_list *l) {
    for (int i = 0; i < l->n; i++) {
        deferred *d = &l->items[i];
        for (int j = 0; j < d->nfinals; j++)
            if (d->finals[j]) gl_track_unref(d->finals[j]);
        d->nevents = d->nfinals = 0;
        gl_use_forget(&d->use);
        if (runs_without_context(d->fn)) d->fn(d->handle, d->extra);
    }
    l->n = 0;
}

void gl_release_drain(void) {
    static bool draining; /* a release function never re-enters, but be sure */
    if (gl_poisoned_reason()) {
        abandon_list(&parked);
        abandon_list(&in_capture);
        return;
    }
    if (!gl_context_usable() || gl_capture_active() || draining) return;
    draining = true;
    int kept = 0;
    for (int i = 0; i < parked.n; i++) {
        deferred *d = &parked.items[i];
        if (deferred_done(d)) {
            drop_waits(d);
            d->fn(d->handle, d->extra);
        } else {
            parked.items[kept++] = *d;
        }
    }
    parked.n = kept;
    draining = false;
}
