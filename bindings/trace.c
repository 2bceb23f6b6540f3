/*
 * trace.c — the timeline: cuda.trace(FILE) / gpulab --trace FILE record every launch, copy,
 * memset, graph launch and sync with its host enqueue time and, for GPU work, its device start
 * and end (a pair of events around each submission), and write a Chrome-trace JSON that
 * Perfetto (ui.perfetto.dev) and chrome://tracing load.
 *
 * Host spans are on the "host" process; device spans on "GPU n", one track per stream. Device
 * times are placed on the host clock through a base event recorded when the first GPU span is
 * opened: ts = host time of that record + cuEventElapsedTime(base, start). They are exact
 * relative to each other and off by the queue delay of the base event in absolute terms.
 *
 * Also the dispatch of gl_observe_* to cuda.profile's launch notes (profile.c).
 */
#define _GNU_SOURCE
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "identity.h"
#include "observe.h"
#include "register.h"
#include "stream.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FN "cuda.trace"
#define MAX_EVENTS 1000000       /* spans kept; later ones are counted as dropped */
#define MAX_DEVICE_TIMED 200000  /* spans with an event pair (each holds two driver events) */

int gl_observers;

typedef enum { EV_LAUNCH, EV_COPY, EV_SYNC, EV_GRAPH } ev_kind;

typedef struct trace_event {
    ev_kind kind;
    bool filled; /* the submission succeeded */
    char name[128];
    unsigned grid[3], block[3];
    size_t bytes;
    CUstream stream;
    double host_begin, host_end; /* µs since the trace started */
    CUevent ev0, ev1;             /* NULL: not timed on the device */
} trace_event;

static struct {
    bool on;
    char path[4096];
    double t0;
    trace_event *ev;
    size_t n, cap, dropped, timed;
    CUevent base;
    double base_host;
    bool atexit_set;
    bool atexit_after_driver; /* registered again once the driver is up (record_event) */
} tr;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static trace_event *new_event(void) {
    if (tr.n >= MAX_EVENTS) {
        tr.dropped++;
        return NULL;
    }
    if (tr.n == tr.cap) {
        size_t cap = tr.cap ? tr.cap * 2 : 1024;
        trace_event *e = realloc(tr.ev, cap * sizeof *e);
        if (e == NULL) {
            tr.dropped++;
            return NULL;
        }
        tr.ev = e;
        tr.cap = cap;
    }
    trace_event *e = &tr.ev[tr.n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* An event pair is only recorded outside captures (a record there would become a graph node)
 * and while the context is healthy. */
static void trace_at_exit(void);

static CUevent record_event(CUstream stream) {
    if (!gl_context_usable() || gl_capture_active() || tr.timed >= MAX_DEVICE_TIMED) return NULL;
    if (tr.base == NULL) {
        CUevent b = NULL;
        if (gl_cu.cuEventCreate(&b, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return NULL;
        if (gl_cu.cuEventRecord(b, NULL) != CUDA_SUCCESS) {
            gl_cu.cuEventDestroy(b);
            return NULL;
        }
        tr.base = b;
        tr.base_host = now_us() - tr.t0;
        /* exit handlers run in reverse order: one registered now, after libcuda's own (it tears
         * the context down at exit), writes the file while the events can still be read. On the
         * H200 a lab ending in os.exit() lost every device span without it. */
        if (!tr.atexit_after_driver) tr.atexit_after_driver = atexit(trace_at_exit) == 0;
    }
    CUevent e = NULL;
    if (gl_cu.cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return NULL;
    if (gl_cu.cuEventRecord(e, stream) != CUDA_SUCCESS) {
        gl_cu.cuEventDestroy(e);
        return NULL;
    }
    return e;
}

static void copy_name(char *dst, size_t cap, const char *name);

/* A token that names no span: the submission is still seen (cuda.profile notes it). */
#define NO_SPAN LONG_MAX

long gl_observe_begin(CUstream stream, bool device_times) {
    if (!tr.on) return NO_SPAN;
    trace_event *e = new_event();
    if (e == NULL) return NO_SPAN;
    e->stream = stream;
    e->host_begin = now_us() - tr.t0;
    if (device_times) e->ev0 = record_event(stream);
    return (long)(tr.n - 1);
}

static trace_event *finish(long token, ev_kind kind, const char *name, CUstream stream) {
    if (!tr.on || token < 0 || (size_t)token >= tr.n) return NULL;
    trace_event *e = &tr.ev[token];
    e->kind = kind;
    e->filled = true;
    e->host_end = now_us() - tr.t0;
    copy_name(e->name, sizeof e->name, name);
    if (e->ev0) {
        e->ev1 = record_event(stream);
        if (e->ev1) tr.timed++;
    }
    return e;
}

void gl_observe_launch(long token, const char *kernel, const char *entry, const unsigned grid[3],
                       const unsigned block[3], CUstream stream) {
    gl_profile_note_launch(kernel, grid, block);
    gl_pcsample_note_launch(kernel, entry);
    trace_event *e = finish(token, EV_LAUNCH, kernel, stream);
    if (e == NULL) return;
    memcpy(e->grid, grid, sizeof e->grid);
    memcpy(e->block, block, sizeof e->block);
}

void gl_observe_copy(long token, const char *what, size_t bytes, CUstream stream) {
    trace_event *e = finish(token, EV_COPY, what, stream);
    if (e) e->bytes = bytes;
}

void gl_observe_sync(long token, const char *what, CUstream stream) {
    finish(token, EV_SYNC, what, stream);
}

void gl_observe_graph(long token, CUstream stream) {
    finish(token, EV_GRAPH, "graph launch", stream);
}

/* ------------------------------------------------------------------------------------------
 * Writing the JSON
 * ------------------------------------------------------------------------------------------ */
/* Length of the well-formed UTF-8 sequence at c (1-4), or 0 when it is not one (overlong forms,
 * surrogates, code points above U+10FFFF and cut sequences included). */
static int utf8_length(const unsigned char *c) {
    if (c[0] < 0x80) return 1;
    int n = c[0] >= 0xc2 && c[0] <= 0xdf ? 2 : c[0] >= 0xe0 && c[0] <= 0xef ? 3 : c[0] >= 0xf0 && c[0] <= 0xf4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((c[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((c[0] == 0xe0 && c[1] < 0xa0) || (c[0] == 0xed && c[1] >= 0xa0))) return 0;
    if (n == 4 && ((c[0] == 0xf0 && c[1] < 0x90) || (c[0] == 0xf4 && c[1] >= 0x90))) return 0;
    return n;
}

/* A JSON string: quotes, backslashes and control characters escaped, and every byte that is not
 * part of well-formed UTF-8 (a kernel name is any bytes a script chose) written as U+FFFD, so the
 * file is always valid JSON for Perfetto and chrome://tracing. */
static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        int n = utf8_length(c);
        if (n == 0) {
            fputs("\\ufffd", f);
            c++;
            continue;
        }
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fwrite(c, 1, (size_t)n, f);
        c += n;
    }
    fputc('"', f);
}

/* Copies name into dst (cap bytes), cut at a character boundary when it does not fit. */
static void copy_name(char *dst, size_t cap, const char *name) {
    size_t len = strlen(name);
    if (len >= cap) {
        len = cap - 1;
        while (len > 0 && ((unsigned char)name[len] & 0xc0) == 0x80) len--; /* inside a character */
    }
    memcpy(dst, name, len);
    dst[len] = '\0';
}

/* Small ids for the device tracks, in order of first use; 0 is the default stream. */
static int stream_tid(CUstream *seen, int *nseen, CUstream s) {
    if (s == NULL) return 1;
    for (int i = 0; i < *nseen; i++)
        if (seen[i] == s) return i + 2;
    if (*nseen < 256) {
        seen[(*nseen)++] = s;
        return *nseen + 1;
    }
    return 258;
}

static const char *kind_name(ev_kind k) {
    switch (k) {
    case EV_LAUNCH: return "launch";
    case EV_COPY: return "copy";
    case EV_SYNC: return "sync";
    default: return "graph";
    }
}

static void put_args(FILE *f, const trace_event *e, int tid) {
    fprintf(f, "\"args\":{\"stream\":\"%#lx\",\"track\":%d", (unsigned long)(uintptr_t)e->stream, tid);
    if (e->kind == EV_LAUNCH)
        fprintf(f, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", e->grid[0], e->grid[1], e->grid[2],
                e->block[0], e->block[1], e->block[2]);
    if (e->kind == EV_COPY) fprintf(f, ",\"bytes\":%zu", e->bytes);
    fputc('}', f);
}

/* Waits up to `budget_s` in total for the closing events, then reads the device times of the
 * spans whose work completed; every event is destroyed. */
static bool device_span(trace_event *e, double *start, double *end, double deadline) {
    bool ok = false;
    if (e->ev0 && e->ev1 && tr.base && gl_context_usable()) {
        CUresult r;
        while ((r = gl_cu.cuEventQuery(e->ev1)) == CUDA_ERROR_NOT_READY && now_us() < deadline) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        float a = 0, b = 0;
        /* a driver's NaN or infinite elapsed time would write "ts":nan, which is no JSON */
        if (r == CUDA_SUCCESS && gl_cu.cuEventElapsedTime(&a, tr.base, e->ev0) == CUDA_SUCCESS &&
            gl_cu.cuEventElapsedTime(&b, tr.base, e->ev1) == CUDA_SUCCESS && isfinite(a) && isfinite(b)) {
            *start = tr.base_host + a * 1e3;
            *end = tr.base_host + b * 1e3;
            ok = true;
        }
    }
    if (gl_context_usable()) {
        if (e->ev0) gl_cu.cuEventDestroy(e->ev0);
        if (e->ev1) gl_cu.cuEventDestroy(e->ev1);
    }
    e->ev0 = e->ev1 = NULL;
    return ok;
}

typedef struct trace_summary { size_t spans, device_spans, dropped; bool written; } trace_summary;

static void write_events(FILE *f, trace_summary *sum) {
    CUstream seen[256];
    int nseen = 0;
    double deadline = now_us() + 2e6;
    bool first = true;
    for (size_t i = 0; i < tr.n; i++) {
        trace_event *e = &tr.ev[i];
        if (!e->filled) {
            device_span(e, &(double){0}, &(double){0}, 0);
            continue;
        }
        int tid = stream_tid(seen, &nseen, e->stream);
        fprintf(f, "%s\n{\"name\":", first ? "" : ",");
        first = false;
        put_string(f, e->name);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,",
                kind_name(e->kind), e->host_begin, e->host_end - e->host_begin);
        put_args(f, e, tid);
        fputc('}', f);
        sum->spans++;
        double s0, s1;
        if (device_span(e, &s0, &s1, deadline)) {
            fputs(",\n{\"name\":", f);
            put_string(f, e->name);
            fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":2,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,",
                    e->kind == EV_LAUNCH ? "kernel" : kind_name(e->kind), tid, s0, s1 - s0);
            put_args(f, e, tid);
            fputc('}', f);
            sum->device_spans++;
        }
    }
    fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"host\"}}",
            first ? "" : ",");
    fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"GPU %d "
               "(device time from events)\"}}", gl_current_device());
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":1,\"args\":{\"name\":"
               "\"default stream\"}}");
    for (int i = 0; i < nseen; i++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"args\":{\"name\":"
                   "\"stream %#lx\"}}", i + 2, (unsigned long)(uintptr_t)seen[i]);
}

/* Ends the trace and writes the file; returns false (errno set) when the file cannot be written. */
static bool trace_stop(trace_summary *sum) {
    memset(sum, 0, sizeof *sum);
    if (!tr.on) return true;
    tr.on = false;
    gl_observers--;
    FILE *f = fopen(tr.path, "w");
    if (f) {
        fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"gpulab " GPULAB_VERSION "\"},"
              "\"traceEvents\":[", f);
        write_events(f, sum);
        sum->dropped = tr.dropped;
        fprintf(f, "\n],\"gpulab\":{\"spans\":%zu,\"device_spans\":%zu,\"dropped\":%zu}}\n",
                sum->spans, sum->device_spans, sum->dropped);
        sum->written = fclose(f) == 0;
    } else {
        for (size_t i = 0; i < tr.n; i++) device_span(&tr.ev[i], &(double){0}, &(double){0}, 0);
    }
    if (tr.base && gl_context_usable()) gl_cu.cuEventDestroy(tr.base);
    tr.base = NULL;
    free(tr.ev);
    tr.ev = NULL;
    tr.n = tr.cap = tr.dropped = tr.timed = 0;
    return sum->written;
}

static void trace_at_exit(void) {
    trace_summary sum;
    if (tr.on && !trace_stop(&sum)) fprintf(stderr, "gpulab: cannot write the trace %s\n", tr.path);
}

static int trace_sentinel_gc(lua_State *L) {
    (void)L;
    trace_at_exit();
    return 0;
}

/* cuda.trace(path) starts a timeline; cuda.trace(false) ends it, writes the file and returns
 * {path=, spans=, device_spans=, dropped=}; cuda.trace() returns the file being written or nil. */
static int l_trace(lua_State *L) {
    if (lua_isnone(L, 1)) {
        if (tr.on) lua_pushstring(L, tr.path); else lua_pushnil(L);
        return 1;
    }
    if (lua_type(L, 1) == LUA_TBOOLEAN && !lua_toboolean(L, 1)) {
        if (!tr.on) luaL_error(L, FN ": no trace is being recorded");
        trace_summary sum;
        lua_pushstring(L, tr.path);
        if (!trace_stop(&sum)) luaL_error(L, FN ": cannot write %s", lua_tostring(L, -1));
        lua_createtable(L, 0, 4);
        lua_insert(L, -2);
        lua_setfield(L, -2, "path");
        lua_pushinteger(L, (lua_Integer)sum.spans);
        lua_setfield(L, -2, "spans");
        lua_pushinteger(L, (lua_Integer)sum.device_spans);
        lua_setfield(L, -2, "device_spans");
        lua_pushinteger(L, (lua_Integer)sum.dropped);
        lua_setfield(L, -2, "dropped");
        return 1;
    }
    if (lua_type(L, 1) != LUA_TSTRING)
        gl_typeerror(L, 1, FN, "file name or false");
    size_t len;
    const char *path = lua_tolstring(L, 1, &len);
    if (len == 0 || len >= sizeof tr.path || strlen(path) != len)
        gl_argerror(L, 1, FN, "file name of 1..%d bytes without a NUL byte expected",
                    (int)sizeof tr.path - 1);
    if (tr.on) luaL_error(L, FN ": already tracing to %s (cuda.trace(false) ends it)", tr.path);
    FILE *probe = fopen(path, "w"); /* fail now, not when the script is over */
    if (probe == NULL) luaL_error(L, FN ": cannot write %s", path);
    fclose(probe);
    memcpy(tr.path, path, len + 1);
    tr.t0 = now_us();
    tr.on = true;
    gl_observers++;
    if (!tr.atexit_set) {
        tr.atexit_set = true;
        atexit(trace_at_exit); /* os.exit() does not close the Lua state */
    }
    return 0;
}

void gl_open_trace(lua_State *L) {
    gl_newuserdatauv(L, 0, 0);
    lua_newtable(L);
    lua_pushcfunction(L, trace_sentinel_gc);
    lua_setfield(L, -2, "__gc");
    gl_lua_setmetatable(L, -2);
    gl_private_set(L, "gpulab.trace_sentinel");
    lua_pushcfunction(L, l_trace);
    lua_setfield(L, -2, "trace");
}
