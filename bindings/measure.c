/*
 * measure.c — cuda.measure(fn, opts): device time of the work fn enqueues, with a named
 * regime, the SM clock of every sample, throttled samples rejected, a stopping rule and a 95%
 * interval; cuda.stats_of(samples): the same statistics for any list of times.
 *
 * One sample, in stream order on the measurement stream:
 *     [cold: reset persisting L2 lines, memset of a buffer 2x L2] [blocking: spin on a host flag]
 *     start event, k calls of fn (or k replays of its graph), end event,
 *     clock kernel (%clock64 over a %globaltimer interval -> MHz), done event
 * The cold flush writes a new value over a buffer of twice the L2 size: the dirty lines of the
 * flush displace whatever the previous sample left. Lines made persisting by an access-policy
 * window (cuda.l2_persisting) would survive it, so cuCtxResetPersistingL2Cache first turns them
 * back into normal lines (not stream ordered: it runs when the previous sample has completed);
 * the result says whether it ran (l2_reset) and what the flush was (flush).
 * The flush, the spin and the clock kernel lie outside the two timed events. With blocking,
 * the host enqueues the whole sample while the stream is held, then releases the flag, so
 * the sample starts with everything queued: launch overhead stays out of it. The spin kernel
 * gives up after a device-side deadline, so a host that never releases it cannot hang the GPU;
 * a sample whose spin gave up is rejected.
 *
 * Noise is the relative half-width of the 95% interval of the mean: t(0.975, n-1) * s / sqrt(n)
 * / mean (Student's t, s the sample standard deviation). It shrinks as samples accumulate, so
 * max_noise=0.005 means "the mean is known to +-0.5%". stdev/mean of the samples (nvbench's
 * stdrel) is reported beside it as `stdrel`.
 *
 * Stopping: after at least min_samples accepted samples and min_time seconds of sampling, stop
 * when noise <= max_noise ("converged"), or when the noise stopped improving because the
 * samples drift ("plateau": doubling the samples gained less than 5% of noise, where
 * independent samples gain 29%, and the two halves' means are apart by more than twice their
 * intervals; see plateaued()), or at
 * max_samples, or when the timeout has passed ("timeout"; a sample in flight then gets 1 s of
 * grace before the wait raises).
 *
 * The engine calls no replaceable global: the stream and graph functions it uses are taken
 * from their metatables when the module opens (the metatables are locked against scripts).
 */
#define _GNU_SOURCE
#include "errors.h"
#include "measure.h"
#include "check.h"
#include "context.h"
#include "driver.h"
#include "identity.h"
#include "l2.h"
#include "launchlog.h"
#include "lifetime.h"
#include "objects.h"
#include "options.h"
#include "register.h"
#include "stream.h"
#include "wait.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MEASURE_MAX_SAMPLES 1000000
#define MEASURE_MAX_BATCH 1000
#define MEASURE_MAX_BATCH_BLOCKING 256 /* stays well inside the driver's launch queue */
#define MEASURE_SAMPLE_TARGET_MS 1.0   /* hot/graph batches last at least this (event resolution ~0.5 us) */
#define MEASURE_GRACE_S 1.0            /* a sample in flight at the timeout may finish within this */
#define CLOCK_SPIN_NS 50000ull         /* clock kernel interval: 2% at a 1 us %globaltimer tick */
#define BLOCK_LIMIT_NS 1000000000ull   /* the spin kernel gives up after 1 s */
#define MAX_DEVICES 64
#define PLATEAU_MIN_GAIN 0.05


static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------------------------ */
typedef struct sample_stats {
    size_t n;
    double mean, median, min, max, stdev, t95, half, noise, stdrel;
} sample_stats;

/* Student's t quantile at 0.975 for df degrees of freedom: exact table to 30, then the
 * Cornish-Fisher expansion around the normal quantile (error < 1e-6 beyond 30). */
static double t975(double df) {
    static const double table[30] = {
        12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851,
        2.364624252,  2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830,
        2.160368656,  2.144786688, 2.131449546, 2.119905299, 2.109815578, 2.100922040,
        2.093024054,  2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
        2.059538553,  2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456};
    if (!(df >= 1)) return INFINITY;
    if (df <= 30 && df == floor(df)) return table[(int)df - 1];
    const double z = 1.959963984540054;
    double z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
    double g1 = (z3 + z) / 4;
    double g2 = (5 * z5 + 16 * z3 + 3 * z) / 96;
    double g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384;
    double g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
    return z + g1 / df + g2 / (df * df) + g3 / (df * df * df) + g4 / (df * df * df * df);
}

/* Relative half-width of the 95% interval; 0 when there is no spread, inf when unknown. */
static double relative_noise(double half, double mean) {
    if (half == 0) return 0;
    if (!(mean > 0) || !isfinite(half)) return INFINITY;
    return half / mean;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Statistics of v[0..n) (n >= 1); sorts v in place. */
static void stats_compute(double *v, size_t n, sample_stats *s) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    double mean = sum / (double)n;
    if (isinf(mean)) { /* the sum overflowed where the mean need not: sum the shares instead */
        mean = 0;
        for (size_t i = 0; i < n; i++) mean += v[i] / (double)n;
    }
    s->n = n;
    s->mean = mean;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - s->mean) * (v[i] - s->mean);
    qsort(v, n, sizeof *v, cmp_double);
    s->min = v[0];
    s->max = v[n - 1];
    s->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    if (n < 2) {
        s->stdev = 0;
        s->t95 = s->half = s->noise = INFINITY;
    } else {
        s->stdev = sqrt(ss / (double)(n - 1));
        s->t95 = t975((double)(n - 1));
        s->half = s->t95 * s->stdev / sqrt((double)n);
        s->noise = relative_noise(s->half, s->mean);
    }
    s->stdrel = s->stdev == 0 ? 0 : s->mean > 0 ? s->stdev / s->mean : INFINITY;
}

static void set_num(lua_State *L, const char *k, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

/* Adds the statistics fields to the table on top. */
static void push_stats_fields(lua_State *L, const sample_stats *s) {
    set_num(L, "mean", s->mean);
    set_num(L, "median", s->median);
    set_num(L, "min", s->min);
    set_num(L, "max", s->max);
    set_num(L, "stdev", s->stdev);
    set_num(L, "noise", s->noise);
    set_num(L, "stdrel", s->stdrel);
    set_num(L, "t95", s->t95);
    lua_createtable(L, 2, 2);
    double lo = s->mean - s->half, hi = s->mean + s->half;
    lua_pushnumber(L, lo);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, hi);
    lua_rawseti(L, -2, 2);
    set_num(L, "lo", lo);
    set_num(L, "hi", hi);
    lua_setfield(L, -2, "ci95");
    lua_pushinteger(L, (lua_Integer)s->n);
    lua_setfield(L, -2, "samples");
}

/* cuda.stats_of(samples): the statistics cuda.measure reports, for a list of times (ms). */
static int l_stats_of(lua_State *L) {
    const char *fn = "cuda.stats_of";
    if (lua_type(L, 1) != LUA_TTABLE)
        gl_typeerror(L, 1, fn, "table of sample times");
    size_t n = lua_rawlen(L, 1);
    if (n == 0) gl_argerror(L, 1, fn, "no samples: the table is empty");
    if (n > MEASURE_MAX_SAMPLES)
        gl_argerror(L, 1, fn, "%d samples at most, got %zu", MEASURE_MAX_SAMPLES, n);
    double *v = gl_newuserdatauv(L, n * sizeof *v, 0); /* scratch, collected later */
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, 1, (lua_Integer)i + 1) != LUA_TNUMBER)
            gl_argerror(L, 1, fn, "sample %zu: number expected, got %s", i + 1, gl_typename(L, -1));
        v[i] = lua_tonumber(L, -1);
        lua_pop(L, 1);
        if (!isfinite(v[i]) || v[i] < 0)
            gl_argerror(L, 1, fn, "sample %zu must be a finite time >= 0, got %.14g", i + 1, v[i]);
    }
    lua_createtable(L, 0, 10);
    sample_stats s;
    stats_compute(v, n, &s);
    push_stats_fields(L, &s);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * The clock and spin kernels (PTX, JIT-compiled once per device)
 * ------------------------------------------------------------------------------------------ */
static const char measure_ptx[] =
    ".version 7.8\n.target sm_75\n.address_size 64\n"
    /* out[0] = clock64 cycles, out[1] = globaltimer ns, over a spin of at least spin_ns */
    ".visible .entry gl_measure_clock(.param .u64 out, .param .u64 spin_ns)\n{\n"
    "  .reg .u64 %rd<10>;\n  .reg .pred %p1;\n"
    "  ld.param.u64 %rd1, [out];\n  ld.param.u64 %rd2, [spin_ns];\n"
    "  mov.u64 %rd3, %globaltimer;\n  mov.u64 %rd4, %clock64;\n"
    "SPIN:\n  mov.u64 %rd5, %globaltimer;\n  sub.u64 %rd6, %rd5, %rd3;\n"
    "  setp.lt.u64 %p1, %rd6, %rd2;\n  @%p1 bra SPIN;\n"
    "  mov.u64 %rd7, %clock64;\n  sub.u64 %rd8, %rd7, %rd4;\n"
    "  st.volatile.global.u64 [%rd1], %rd8;\n  st.volatile.global.u64 [%rd1+8], %rd6;\n"
    "  membar.sys;\n  ret;\n}\n"
    /* waits until flag[0] == expect (status 1) or limit_ns passed (status 2); flag[1] = status */
    ".visible .entry gl_measure_block(.param .u64 flag, .param .u32 expect, .param .u64 limit_ns)\n{\n"
    "  .reg .u64 %rd<8>;\n  .reg .u32 %r<4>;\n  .reg .pred %p<3>;\n"
    "  ld.param.u64 %rd1, [flag];\n  ld.param.u32 %r1, [expect];\n  ld.param.u64 %rd2, [limit_ns];\n"
    "  mov.u64 %rd3, %globaltimer;\n"
    "WAIT:\n  ld.volatile.global.u32 %r2, [%rd1];\n  setp.eq.u32 %p1, %r2, %r1;\n"
    "  @%p1 bra RELEASED;\n  mov.u64 %rd4, %globaltimer;\n  sub.u64 %rd5, %rd4, %rd3;\n"
    "  setp.lt.u64 %p2, %rd5, %rd2;\n  @%p2 bra WAIT;\n  mov.u32 %r3, 2;\n  bra.uni DONE;\n"
    "RELEASED:\n  mov.u32 %r3, 1;\n"
    "DONE:\n  st.volatile.global.u32 [%rd1+4], %r3;\n  membar.sys;\n  ret;\n}\n";

typedef struct measure_kernels {
    CUmodule module;
    CUfunction clock, block;
} measure_kernels;

static measure_kernels kernels[MAX_DEVICES];

static const measure_kernels *load_kernels(lua_State *L, int device, const char *fn) {
    if (device < 0 || device >= MAX_DEVICES)
        luaL_error(L, "%s: device %d is beyond the %d this build supports", fn, device, MAX_DEVICES);
    measure_kernels *k = &kernels[device];
    if (k->module) return k;
    CUmodule m;
    GL_CHECK(L, gl_cu.cuModuleLoadDataEx(&m, measure_ptx, 0, NULL, NULL), fn,
             "cuModuleLoadDataEx (the clock kernel)");
    CUresult r = gl_cu.cuModuleGetFunction(&k->clock, m, "gl_measure_clock");
    if (r == CUDA_SUCCESS) r = gl_cu.cuModuleGetFunction(&k->block, m, "gl_measure_block");
    if (r != CUDA_SUCCESS) {
        gl_cu.cuModuleUnload(m);
        gl_raise_cuda(L, r, fn, "cuModuleGetFunction (the clock kernel)");
    }
    k->module = m;
    return k;
}

/* ------------------------------------------------------------------------------------------
 * NVML (optional, opened at run time): the SM clock as the driver reports it, and its maximum
 * ------------------------------------------------------------------------------------------ */
#define NVML_CLOCK_SM 1
typedef int (*nvml_void_fn)(void);
typedef int (*nvml_handle_fn)(const char *, void **);
typedef int (*nvml_clock_fn)(void *, int, unsigned *);

static struct {
    bool tried, ok;
    nvml_handle_fn by_pci;
    nvml_clock_fn clock, max_clock;
    void *dev[MAX_DEVICES];
    bool dev_tried[MAX_DEVICES];
} nvml;

static void nvml_open(void) {
    nvml.tried = true;
    const char *off = getenv("GPULAB_NVML");
    if (off && strcmp(off, "0") == 0) return;
    const char *path = getenv("GPULAB_LIBNVML");
    void *lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return;
    nvml_void_fn init;
    void *p = dlsym(lib, "nvmlInit_v2");
    memcpy(&init, &p, sizeof p);
    p = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    memcpy(&nvml.by_pci, &p, sizeof p);
    p = dlsym(lib, "nvmlDeviceGetClockInfo");
    memcpy(&nvml.clock, &p, sizeof p);
    p = dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    memcpy(&nvml.max_clock, &p, sizeof p);
    nvml.ok = init && nvml.by_pci && nvml.clock && nvml.max_clock && init() == 0;
}

/* NVML's handle for a CUDA device ordinal (found by PCI address), or NULL. Never raises. */
static void *nvml_device(int ordinal) {
    if (!nvml.tried) nvml_open();
    if (!nvml.ok || ordinal < 0 || ordinal >= MAX_DEVICES) return NULL;
    if (nvml.dev_tried[ordinal]) return nvml.dev[ordinal];
    nvml.dev_tried[ordinal] = true;
    CUdevice d;
    int domain = 0, bus = 0, slot = 0;
    if (gl_cu.cuDeviceGet(&d, ordinal) != CUDA_SUCCESS ||
        gl_cu.cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d) != CUDA_SUCCESS ||
        gl_cu.cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d) != CUDA_SUCCESS ||
        gl_cu.cuDeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d) != CUDA_SUCCESS)
        return NULL;
    char id[32];
    snprintf(id, sizeof id, "%08x:%02x:%02x.0", (unsigned)domain, (unsigned)bus, (unsigned)slot);
    void *h = NULL;
    if (nvml.by_pci(id, &h) == 0) nvml.dev[ordinal] = h;
    return nvml.dev[ordinal];
}

static double nvml_mhz(void *dev, bool max) {
    unsigned mhz = 0;
    if (dev == NULL || (max ? nvml.max_clock : nvml.clock)(dev, NVML_CLOCK_SM, &mhz) != 0) return NAN;
    return mhz > 0 ? (double)mhz : NAN;
}

/* ------------------------------------------------------------------------------------------
 * A measurement under way
 * ------------------------------------------------------------------------------------------ */
/* Pinned words the GPU reads and writes (mapped: unified addressing makes the host pointer
 * valid on the device): the spin kernel's flag and status, the clock kernel's two counts. */
typedef struct measure_words {
    volatile uint32_t flag, status;
    volatile uint64_t cycles, ns;
} measure_words;

typedef struct measure_run {
    const gl_measure_opts *o;
    int device;
    gl_stream *stream;            /* NULL: the default stream; re-checked after every call */
    const measure_kernels *k;     /* clock and spin kernels, when needed */
    CUevent start, end, done;
    CUdeviceptr flush;
    size_t flush_words;
    gl_use flush_use;
    size_t l2_bytes;              /* the device's L2 size (0: unknown) */
    bool l2_reset;                /* cold: cuCtxResetPersistingL2Cache before every flush */
    const char *l2_reset_why;     /* why not, when not */
    lua_Integer flushes, l2_resets;
    measure_words *words;
    gl_use words_use;
    uint32_t flag_seq;
    bool flag_armed;
    bool first_record;
    lua_Integer batch;
    double ref_mhz;
    const char *ref_source;
    void *nvml_dev;
    double t_begin, t_sampling;
    /* accepted samples, per call (ms), their SM clock, NVML's clock and the noise after each */
    double *times, *clocks, *nvml_clocks, *noise;
    double *p1, *p2;              /* prefix sums of (t - times[0]) and its square: n + 1 entries */
    size_t n, cap;
    double wmean, wm2;            /* Welford over accepted times */
    lua_Integer taken, rejected, block_timeouts;
    const char *stop;
} measure_run;

typedef struct pass_result {
    double ms;         /* per call */
    double mhz;        /* the clock kernel's SM clock; NaN when not measured */
    double nvml_mhz;   /* NaN without NVML */
    bool block_gave_up;
} pass_result;

/* Body stack slots (under lua_pcall): */
enum { SLOT_RUN = 1, SLOT_FN, SLOT_STREAM, SLOT_HOLDER, SLOT_GRAPH };

static gl_stream_track *run_track(lua_State *L, const measure_run *r) {
    if (r->stream == NULL) return gl_default_track();
    if (r->stream->track == NULL) luaL_error(L, "%s: the cuda.stream was freed", r->o->fn);
    return r->stream->track;
}

static CUstream run_stream(lua_State *L, const measure_run *r) {
    return gl_track_handle(run_track(L, r));
}

static void mark(lua_State *L, measure_run *r, gl_use *u) {
    gl_use_mark(u, run_track(L, r), gl_next_seq());
}

static void record(lua_State *L, measure_run *r, CUevent ev) {
    CUresult res = gl_cu.cuEventRecord(ev, run_stream(L, r));
    if (res != CUDA_SUCCESS && r->first_record && r->stream &&
        (res == CUDA_ERROR_INVALID_HANDLE || res == CUDA_ERROR_INVALID_CONTEXT)) {
        char name[64];
        luaL_where(L, 1);
        lua_pushfstring(L, "%s: option 'stream': the cuda.stream belongs to another device's context "
                           "(cuEventRecord: %s); measure on a stream of the current device",
                        r->o->fn, gl_cuda_error_name(res, name, sizeof name));
        lua_concat(L, 2);
        gl_raise_cuda_message(L, res, r->o->fn, "cuEventRecord");
    }
    GL_CHECK(L, res, r->o->fn, "cuEventRecord");
    r->first_record = false;
}

static void launch_one(lua_State *L, measure_run *r, CUfunction f, const char *name, void **args) {
    static const unsigned one[3] = {1, 1, 1};
    CUstream h = run_stream(L, r);
    mark(L, r, &r->words_use);
    gl_log_launch(name, one, one, h);
    GL_CHECK(L, gl_cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, h, args, NULL), r->o->fn,
             "cuLaunchKernel (measurement kernel)");
}

/* Holds the stream until the host releases the flag (or the kernel's deadline passes). */
static void arm_block(lua_State *L, measure_run *r) {
    r->flag_seq++;
    if (r->flag_seq == 0) r->flag_seq = 1;
    r->words->status = 0;
    uint64_t flag = (uint64_t)(uintptr_t)&r->words->flag;
    uint32_t expect = r->flag_seq;
    uint64_t limit = BLOCK_LIMIT_NS;
    void *args[] = {&flag, &expect, &limit};
    launch_one(L, r, r->k->block, "gl_measure_block", args);
    r->flag_armed = true;
}

static void release_block(measure_run *r) {
    if (!r->flag_armed) return;
    __atomic_store_n(&r->words->flag, r->flag_seq, __ATOMIC_SEQ_CST);
    r->flag_armed = false;
}

static void launch_clock(lua_State *L, measure_run *r) {
    r->words->cycles = 0;
    r->words->ns = 0;
    uint64_t out = (uint64_t)(uintptr_t)&r->words->cycles;
    uint64_t spin = CLOCK_SPIN_NS;
    void *args[] = {&out, &spin};
    launch_one(L, r, r->k->clock, "gl_measure_clock", args);
}

/* fn(s) (or fn()), or one replay of the captured graph; then re-validate what fn may change. */
static void call_work(lua_State *L, measure_run *r) {
    if (r->o->regime == GL_REGIME_GRAPH) {
        lua_pushcfunction(L, gl_graph_launch);
        lua_pushvalue(L, SLOT_GRAPH);
        lua_pushvalue(L, SLOT_STREAM);
        lua_call(L, 2, 0);
    } else {
        lua_pushvalue(L, SLOT_FN);
        if (r->o->pass_stream) lua_pushvalue(L, SLOT_STREAM);
        lua_call(L, r->o->pass_stream ? 1 : 0, 0);
    }
    if (gl_current_device() != r->device)
        luaL_error(L, "%s: fn changed the current device (cuda.device) during the measurement",
                   r->o->fn);
    run_track(L, r);
}

/* Waits for ev within what the measurement's deadline leaves (plus a grace for the sample). */
static void wait_for(lua_State *L, measure_run *r, CUevent ev) {
    const gl_measure_opts *o = r->o;
    CUresult res;
    if (o->timeout < 0) {
        res = gl_cu.cuEventSynchronize(ev);
        GL_CHECK(L, res, o->fn, "cuEventSynchronize");
        return;
    }
    double end = o->timeout_per_wait ? now_s() + o->timeout
                                     : r->t_begin + o->timeout + MEASURE_GRACE_S;
    long sleep_ns = 2000;
    while ((res = gl_cu.cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {
        if (now_s() >= end) {
            release_block(r);
            gl_raise_timeout(L, o->fn, o->timeout);
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 500000) sleep_ns *= 2;
    }
    GL_CHECK(L, res, o->fn, "cuEventQuery");
}

/* One pass: k calls between the events, with the flush, spin and clock around them. */
static void run_pass(lua_State *L, measure_run *r, lua_Integer k, pass_result *out) {
    const gl_measure_opts *o = r->o;
    if (o->regime == GL_REGIME_COLD) {
        if (r->l2_reset) {
            GL_CHECK(L, gl_cu.cuCtxResetPersistingL2Cache(), o->fn, "cuCtxResetPersistingL2Cache");
            r->l2_resets++;
        }
        r->flushes++;
        mark(L, r, &r->flush_use);
        GL_CHECK(L, gl_cu.cuMemsetD32Async(r->flush, (unsigned)r->taken, r->flush_words,
                                           run_stream(L, r)),
                 o->fn, "cuMemsetD32Async (the L2 flush)");
    }
    if (o->blocking) arm_block(L, r);
    record(L, r, r->start);
    uint64_t before = gl_work_seq;
    for (lua_Integer i = 0; i < k; i++) call_work(L, r);
    if (o->require_work && gl_work_seq == before)
        luaL_error(L, "%s: fn enqueued no GPU work (it must launch kernels or copies, on the "
                      "stream it is given when it measures on one)", o->fn);
    record(L, r, r->end);
    if (o->sample_clock) {
        launch_clock(L, r);
        record(L, r, r->done);
    }
    release_block(r);
    wait_for(L, r, o->sample_clock ? r->done : r->end);
    gl_log_sync_ok(run_stream(L, r)); /* what it queued there is complete */
    float ms = 0;
    GL_CHECK(L, gl_cu.cuEventElapsedTime(&ms, r->start, r->end), o->fn, "cuEventElapsedTime");
    if (!(ms >= 0) || !isfinite(ms))
        luaL_error(L, "%s: the driver reported an elapsed time of %f ms", o->fn, (double)ms);
    out->ms = (double)ms / (double)k;
    out->mhz = NAN;
    if (o->sample_clock && r->words->ns > 0)
        out->mhz = (double)r->words->cycles * 1000.0 / (double)r->words->ns;
    out->nvml_mhz = nvml_mhz(r->nvml_dev, false);
    out->block_gave_up = o->blocking && r->words->status != 1;
}

static void grow(lua_State *L, measure_run *r) {
    if (r->n < r->cap) return;
    size_t cap = r->cap ? r->cap * 2 : 64;
    double **arrays[] = {&r->times, &r->clocks, &r->nvml_clocks, &r->noise, &r->p1, &r->p2};
    for (int i = 0; i < 6; i++) {
        double *p = realloc(*arrays[i], (cap + 1) * sizeof *p);
        if (p == NULL) luaL_error(L, "%s: out of host memory", r->o->fn);
        *arrays[i] = p;
    }
    r->cap = cap;
}

static void accept(lua_State *L, measure_run *r, const pass_result *p) {
    grow(L, r);
    size_t i = r->n++;
    r->times[i] = p->ms;
    r->clocks[i] = p->mhz;
    r->nvml_clocks[i] = p->nvml_mhz;
    double d = p->ms - r->wmean;
    r->wmean += d / (double)r->n;
    r->wm2 += d * (p->ms - r->wmean);
    double noise = INFINITY;
    if (r->n >= 2) {
        double sd = sqrt(r->wm2 / (double)(r->n - 1));
        noise = relative_noise(t975((double)(r->n - 1)) * sd / sqrt((double)r->n), r->wmean);
    }
    r->noise[i] = noise;
    if (i == 0) r->p1[0] = r->p2[0] = 0;
    double x = p->ms - r->times[0];
    r->p1[i + 1] = r->p1[i] + x;
    r->p2[i + 1] = r->p2[i] + x * x;
}

static bool throttled(const measure_run *r, const pass_result *p) {
    return r->o->throttle > 0 && r->ref_mhz > 0 && isfinite(p->mhz) &&
           p->mhz < r->o->throttle * r->ref_mhz;
}

/* Mean and 95% half-width of accepted samples [a, b), from the prefix sums (b - a >= 2). */
static void range_interval(const measure_run *r, size_t a, size_t b, double *mean, double *half) {
    double m = (double)(b - a);
    double s1 = r->p1[b] - r->p1[a], s2 = r->p2[b] - r->p2[a];
    double var = (s2 - s1 * s1 / m) / (m - 1);
    *mean = r->times[0] + s1 / m;
    *half = t975(m - 1) * sqrt(var > 0 ? var : 0) / sqrt(m);
}

/* The noise stopped improving because the samples drift: doubling the samples gained less
 * than PLATEAU_MIN_GAIN of noise (independent samples gain 29%), and the means of the two
 * halves lie further apart than twice their intervals. A lone outlier widens its half's
 * interval as much as it moves its mean, so it does not stop the measurement. */
static bool plateaued(const measure_run *r) {
    size_t n = r->n, window = (size_t)(r->o->min_samples > 10 ? r->o->min_samples : 10);
    if (n < 2 * window) return false;
    double now = r->noise[n - 1], then = r->noise[n / 2 - 1];
    if (!isfinite(now) || !isfinite(then) || !(then > 0) || now <= (1 - PLATEAU_MIN_GAIN) * then)
        return false;
    double m1, h1, m2, h2;
    range_interval(r, 0, n / 2, &m1, &h1);
    range_interval(r, n / 2, n, &m2, &h2);
    return fabs(m1 - m2) > 2 * (h1 + h2);
}

static const char *stop_reason(const measure_run *r) {
    const gl_measure_opts *o = r->o;
    double t = now_s();
    if ((lua_Integer)r->n >= o->min_samples && t - r->t_sampling >= o->min_time &&
        o->max_noise >= 0 && r->n > 0) {
        if (r->noise[r->n - 1] <= o->max_noise) return "converged";
        if (plateaued(r)) return "plateau";
    }
    if ((lua_Integer)r->n >= o->max_samples) return "max_samples";
    if (o->timeout >= 0 && !o->timeout_per_wait && t - r->t_begin >= o->timeout) return "timeout";
    return NULL;
}

/* ------------------------------------------------------------------------------------------
 * Setup, the sampling loop, the result
 * ------------------------------------------------------------------------------------------ */
static void create_event(lua_State *L, measure_run *r, CUevent *ev) {
    GL_CHECK(L, gl_cu.cuEventCreate(ev, CU_EVENT_DEFAULT), r->o->fn, "cuEventCreate");
}

static void reference_clock(lua_State *L, measure_run *r) {
    r->nvml_dev = nvml_device(r->device);
    r->ref_mhz = nvml_mhz(r->nvml_dev, true);
    r->ref_source = "nvml max";
    if (isfinite(r->ref_mhz)) return;
    CUdevice d;
    int khz = 0;
    GL_CHECK(L, gl_cu.cuDeviceGet(&d, r->device), r->o->fn, "cuDeviceGet");
    if (gl_cu.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d) != CUDA_SUCCESS) khz = 0;
    r->ref_mhz = khz > 0 ? khz / 1000.0 : 0;
    r->ref_source = khz > 0 ? "device attribute" : "none";
}

static void setup(lua_State *L, measure_run *r) {
    const gl_measure_opts *o = r->o;
    create_event(L, r, &r->start);
    create_event(L, r, &r->end);
    if (o->sample_clock) create_event(L, r, &r->done);
    if (o->sample_clock || o->blocking) {
        r->k = load_kernels(L, r->device, o->fn);
        void *p = NULL;
        GL_CHECK(L, gl_cu.cuMemAllocHost(&p, sizeof(measure_words)), o->fn,
                 "cuMemAllocHost (measurement words)");
        r->words = p;
        memset(p, 0, sizeof(measure_words));
    }
    if (o->regime == GL_REGIME_COLD) {
        CUdevice d;
        int l2 = 0;
        GL_CHECK(L, gl_cu.cuDeviceGet(&d, r->device), o->fn, "cuDeviceGet");
        GL_CHECK(L, gl_cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d), o->fn,
                 "cuDeviceGetAttribute (L2 size)");
        size_t bytes = l2 > 0 ? 2 * (size_t)l2 : (size_t)64 << 20;
        r->l2_bytes = l2 > 0 ? (size_t)l2 : 0;
        r->l2_reset = o->l2_reset && gl_cu.cuCtxResetPersistingL2Cache != NULL;
        r->l2_reset_why = !o->l2_reset ? "l2_reset=false: persisting L2 lines survive the flush"
                          : !r->l2_reset ? "the driver lacks cuCtxResetPersistingL2Cache" : NULL;
        r->flush_words = (bytes + 3) / 4;
        GL_CHECK(L, gl_cu.cuMemAlloc(&r->flush, r->flush_words * 4), o->fn,
                 "cuMemAlloc (the L2 flush buffer, 2x L2)");
    }
    if (o->sample_clock) reference_clock(L, r);
    /* A stream of another context fails its first use: make that use one that says so. */
    if (r->stream && o->pass_stream) record(L, r, r->start);
}

/* The graph regime: fn(s) captured once on the measurement stream. */
static int capture_body(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_call(L, 1, 0);
    return 0;
}

static void capture_graph(lua_State *L, measure_run *r) {
    lua_pushcfunction(L, gl_stream_capture);
    lua_pushvalue(L, SLOT_STREAM);
    lua_pushvalue(L, SLOT_FN);
    lua_pushvalue(L, SLOT_STREAM);
    lua_pushcclosure(L, capture_body, 2);
    lua_call(L, 2, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, SLOT_HOLDER, 1); /* freed by the caller, whatever happens next */
    lua_replace(L, SLOT_GRAPH);
    lua_Integer nodes = gl_graph_node_count(L, SLOT_GRAPH);
    if (nodes == 0)
        luaL_error(L, "%s: fn enqueued no GPU work on the stream it was given (the captured "
                      "graph is empty)", r->o->fn);
    run_track(L, r);
}

static void choose_batch(lua_State *L, measure_run *r, const pass_result *last, bool have_last) {
    const gl_measure_opts *o = r->o;
    r->batch = 1;
    if (o->regime == GL_REGIME_COLD) return;
    if (o->batch > 0) {
        r->batch = o->batch;
        return;
    }
    pass_result p = have_last ? *last : (pass_result){0};
    if (!have_last) run_pass(L, r, 1, &p);
    lua_Integer cap = o->blocking ? MEASURE_MAX_BATCH_BLOCKING : MEASURE_MAX_BATCH;
    double want = p.ms > 0 ? ceil(MEASURE_SAMPLE_TARGET_MS / p.ms) : (double)cap;
    r->batch = want > (double)cap ? cap : want < 1 ? 1 : (lua_Integer)want;
}

static void push_result(lua_State *L, measure_run *r);

/* Runs under lua_pcall with (run, fn, stream or nil, holder); returns the result table. */
static int measure_body(lua_State *L) {
    measure_run *r = lua_touserdata(L, SLOT_RUN);
    const gl_measure_opts *o = r->o;
    lua_settop(L, SLOT_GRAPH);
    setup(L, r);
    if (o->regime == GL_REGIME_GRAPH) capture_graph(L, r);
    pass_result p = {0};
    for (lua_Integer i = 0; i < o->warmup; i++) run_pass(L, r, 1, &p);
    choose_batch(L, r, &p, o->warmup > 0);
    r->t_sampling = now_s();
    while ((r->stop = stop_reason(r)) == NULL) {
        run_pass(L, r, r->batch, &p);
        r->taken++;
        if (throttled(r, &p) || p.block_gave_up) {
            r->rejected++;
            if (p.block_gave_up) r->block_timeouts++;
        } else {
            accept(L, r, &p);
        }
    }
    gl_release_drain();
    if (r->n == 0)
        luaL_error(L, "%s: no sample accepted within %f s (%I taken, %I rejected: SM clock below "
                      "%f x %f MHz, or a spin that gave up)", o->fn, o->timeout, r->taken,
                   r->rejected, o->throttle, r->ref_mhz);
    push_result(L, r);
    return 1;
}

static void free_device(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuMemFree((CUdeviceptr)(uintptr_t)handle);
}

static void free_host(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuMemFreeHost(handle);
}

/* Calls one of stream.c's free functions on holder[i], if set. Never raises. */
static void free_held(lua_State *L, int holder, int i, lua_CFunction f) {
    lua_pushcfunction(L, f);
    lua_rawgeti(L, holder, i);
    if (lua_isnil(L, -1)) lua_pop(L, 2);
    else lua_pcall(L, 1, 0, 0) == LUA_OK ? (void)0 : lua_pop(L, 1);
}

static void cleanup(lua_State *L, measure_run *r, int holder) {
    release_block(r);
    if (gl_context_usable()) {
        CUevent evs[] = {r->start, r->end, r->done};
        for (int i = 0; i < 3; i++)
            if (evs[i]) gl_cu.cuEventDestroy(evs[i]);
    }
    free_held(L, holder, 1, gl_graph_free);
    free_held(L, holder, 2, gl_stream_free);
    if (r->flush) gl_release(&r->flush_use, free_device, (void *)(uintptr_t)r->flush, 0);
    if (r->words) gl_release(&r->words_use, free_host, r->words, 0);
    free(r->times);
    free(r->clocks);
    free(r->nvml_clocks);
    free(r->noise);
    free(r->p1);
    free(r->p2);
}

static void push_list(lua_State *L, const double *v, size_t n, const char *key) {
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushnumber(L, v[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, key);
}

/* Median of the finite values of v[0..n), or NaN. */
static double finite_median(lua_State *L, const double *v, size_t n) {
    double *c = gl_newuserdatauv(L, (n ? n : 1) * sizeof *c, 0);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) c[m++] = v[i];
    double med = NAN;
    if (m > 0) {
        qsort(c, m, sizeof *c, cmp_double);
        med = m % 2 ? c[m / 2] : (c[m / 2 - 1] + c[m / 2]) / 2;
    }
    lua_pop(L, 1);
    return med;
}

static const char *regime_name(gl_regime g) {
    return g == GL_REGIME_COLD ? "cold" : g == GL_REGIME_HOT ? "hot" : "graph";
}

static void set_opt_num(lua_State *L, const char *k, double v) {
    if (isfinite(v)) set_num(L, k, v);
}

/* What the cold regime did before every sample: l2_reset (and why not), flush = {...}. */
static void push_cold_fields(lua_State *L, const measure_run *r) {
    lua_pushboolean(L, r->l2_reset);
    lua_setfield(L, -2, "l2_reset");
    if (r->l2_reset_why) {
        lua_pushstring(L, r->l2_reset_why);
        lua_setfield(L, -2, "l2_reset_reason");
    }
    lua_pushinteger(L, r->l2_resets);
    lua_setfield(L, -2, "l2_resets");
    size_t bytes = r->flush_words * 4;
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, (lua_Integer)r->l2_bytes);
    lua_setfield(L, -2, "l2_bytes");
    if (r->l2_bytes) set_num(L, "l2_multiple", (double)bytes / (double)r->l2_bytes);
    lua_pushinteger(L, r->flushes);
    lua_setfield(L, -2, "count");
    lua_pushstring(L, "write");
    lua_setfield(L, -2, "access");
    lua_pushstring(L, r->l2_bytes ? "cuMemsetD32Async of a new value over 2x the L2 size (device attribute) "
                                    "before every sample, on the measurement stream"
                                  : "cuMemsetD32Async of a new value over 64 MiB before every sample (the "
                                    "device did not report its L2 size)");
    lua_setfield(L, -2, "how");
    lua_setfield(L, -2, "flush");
}

static void push_result(lua_State *L, measure_run *r) {
    const gl_measure_opts *o = r->o;
    lua_createtable(L, 0, 28);
    double *sorted = gl_newuserdatauv(L, r->n * sizeof *sorted, 0);
    memcpy(sorted, r->times, r->n * sizeof *sorted);
    sample_stats s;
    stats_compute(sorted, r->n, &s);
    lua_pop(L, 1); /* s holds copies: nothing points into the scratch any more */
    push_stats_fields(L, &s);
    lua_pushinteger(L, r->rejected);
    lua_setfield(L, -2, "rejected");
    lua_pushinteger(L, r->block_timeouts);
    lua_setfield(L, -2, "block_timeouts");
    lua_pushinteger(L, r->taken);
    lua_setfield(L, -2, "taken");
    set_opt_num(L, "sm_clock_mhz", finite_median(L, r->clocks, r->n));
    set_opt_num(L, "nvml_sm_clock_mhz", finite_median(L, r->nvml_clocks, r->n));
    if (o->sample_clock) {
        set_opt_num(L, "clock_ref_mhz", r->ref_mhz > 0 ? r->ref_mhz : NAN);
        lua_pushstring(L, r->ref_source);
        lua_setfield(L, -2, "clock_ref");
        set_num(L, "throttle", o->throttle);
        push_list(L, r->clocks, r->n, "clocks");
    }
    lua_pushstring(L, regime_name(o->regime));
    lua_setfield(L, -2, "regime");
    lua_pushstring(L, r->stop);
    lua_setfield(L, -2, "stop");
    lua_pushinteger(L, r->batch);
    lua_setfield(L, -2, "batch");
    lua_pushinteger(L, o->warmup);
    lua_setfield(L, -2, "warmup");
    lua_pushboolean(L, o->blocking);
    lua_setfield(L, -2, "blocking");
    set_num(L, "max_noise", o->max_noise);
    set_num(L, "elapsed_s", now_s() - r->t_begin);
    if (o->regime == GL_REGIME_COLD) push_cold_fields(L, r);
    push_list(L, r->times, r->n, "times");
}

void gl_measure_run(lua_State *L, int fn_idx, int stream_idx, const gl_measure_opts *o) {
    fn_idx = lua_absindex(L, fn_idx);
    if (stream_idx) stream_idx = lua_absindex(L, stream_idx);
    if (gl_capture_active())
        luaL_error(L, "%s: not available while a stream capture is under way", o->fn);
    gl_require_gpu(L, o->fn);
    measure_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.device = gl_current_device();
    r.first_record = true;
    r.t_begin = now_s();
    lua_newtable(L); /* holder: [1] the captured graph, [2] a stream made for the graph regime */
    int holder = lua_gettop(L);
    if (stream_idx && !lua_isnil(L, stream_idx)) {
        lua_pushvalue(L, stream_idx);
    } else if (o->regime == GL_REGIME_GRAPH) { /* the default stream cannot be captured */
        lua_pushcfunction(L, gl_stream_new);
        lua_call(L, 0, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, holder, 2);
    } else {
        lua_pushnil(L);
    }
    int stream_slot = lua_gettop(L);
    r.stream = gl_test_stream(L, stream_slot);
    lua_pushcfunction(L, measure_body);
    lua_pushlightuserdata(L, &r);
    lua_pushvalue(L, fn_idx);
    lua_pushvalue(L, stream_slot);
    lua_pushvalue(L, holder);
    int status = lua_pcall(L, 4, 1, 0); /* the result, or the error */
    cleanup(L, &r, holder);
    if (status != LUA_OK) lua_error(L);
}

/* ------------------------------------------------------------------------------------------
 * cuda.measure(fn, opts)
 * ------------------------------------------------------------------------------------------ */
static bool is_callable(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TFUNCTION) return true;
    if (luaL_getmetafield(L, idx, "__call") == LUA_TNIL) return false;
    lua_pop(L, 1);
    return true;
}

static lua_Integer int_opt(lua_State *L, int t, const char *name, lua_Integer def, lua_Integer lo,
                           lua_Integer hi, const char *fn) {
    lua_Integer v = gl_opt_int_field(L, t, name, def, fn);
    if (v < lo || v > hi)
        gl_fielderror(L, t, fn, name, "must be %lld..%lld, got %lld", (long long)lo, (long long)hi,
                      (long long)v);
    return v;
}

/* A finite number >= lo (> lo when open_lo), at most hi. NaN and infinities are refused. */
static double num_opt(lua_State *L, int t, const char *name, double def, double lo, bool open_lo,
                      double hi, const char *fn) {
    double v = gl_opt_num_field(L, t, name, def, fn);
    if (!isfinite(v) || v < lo || (open_lo && v == lo) || v > hi) {
        char range[64];
        if (hi < HUGE_VAL) snprintf(range, sizeof range, "in [%g, %g]", lo, hi);
        else snprintf(range, sizeof range, "%s %g", open_lo ? ">" : ">=", lo);
        gl_fielderror(L, t, fn, name, "must be a finite number %s, got %.14g", range, v);
    }
    return v;
}

static gl_regime regime_opt(lua_State *L, int t, const char *fn) {
    const char *g = gl_opt_str_field(L, t, "regime", "cold", fn);
    if (strcmp(g, "cold") == 0) return GL_REGIME_COLD;
    if (strcmp(g, "hot") == 0) return GL_REGIME_HOT;
    if (strcmp(g, "graph") == 0) return GL_REGIME_GRAPH;
    gl_fielderror(L, t, fn, "regime", "must be \"cold\", \"hot\" or \"graph\", got \"%s\"", g);
    return GL_REGIME_COLD;
}

/* Reads the options table at idx (or none) into o; pushes the stream option (or nil). */
static void measure_options(lua_State *L, int idx, gl_measure_opts *o) {
    const char *fn = o->fn;
    static const char *const known[] = {"regime", "min_samples", "max_samples", "min_time",
                                        "max_noise", "timeout", "stream", "throttle", "blocking",
                                        "warmup", "batch", "l2_reset", NULL};
    bool have = !lua_isnoneornil(L, idx);
    if (have && lua_type(L, idx) != LUA_TTABLE)
        gl_argerror(L, idx, fn, "options table {regime=, min_samples=, min_time=, max_noise=, "
                                "timeout=, stream=, throttle=, ...} expected, got %s", gl_typename(L, idx));
    if (!have) {
        lua_newtable(L);
        lua_replace(L, idx);
    }
    gl_check_known_fields(L, idx, known, fn);
    o->regime = regime_opt(L, idx, fn);
    o->min_samples = int_opt(L, idx, "min_samples", 10, 2, MEASURE_MAX_SAMPLES, fn);
    o->max_samples = int_opt(L, idx, "max_samples", o->min_samples > 10000 ? o->min_samples : 10000,
                             o->min_samples, MEASURE_MAX_SAMPLES, fn);
    o->warmup = int_opt(L, idx, "warmup", 2, 0, 1000, fn);
    o->min_time = num_opt(L, idx, "min_time", 0.5, 0, false, HUGE_VAL, fn);
    o->max_noise = num_opt(L, idx, "max_noise", 0.005, 0, true, HUGE_VAL, fn);
    o->timeout = num_opt(L, idx, "timeout", 15, 0, true, HUGE_VAL, fn);
    o->throttle = num_opt(L, idx, "throttle", 0.75, 0, false, 1, fn);
    o->blocking = gl_opt_bool_field(L, idx, "blocking", false, fn);
    bool have_batch = gl_rawfieldtype(L, idx, "batch") != LUA_TNIL;
    o->batch = have_batch ? int_opt(L, idx, "batch", 1, 1, MEASURE_MAX_BATCH, fn) : 0;
    if (o->blocking && o->batch > MEASURE_MAX_BATCH_BLOCKING) /* the spin holds the queue: it must not fill */
        gl_fielderror(L, idx, fn, "batch", "%lld calls with blocking=true exceed the %d that fit behind the "
                                           "spin kernel in the driver's launch queue", (long long)o->batch,
                      MEASURE_MAX_BATCH_BLOCKING);
    if (have_batch && o->regime == GL_REGIME_COLD && o->batch != 1)
        gl_fielderror(L, idx, fn, "batch", "applies to the hot and graph regimes (cold flushes L2 "
                                           "before every call)");
    bool have_reset = gl_rawfieldtype(L, idx, "l2_reset") != LUA_TNIL;
    o->l2_reset = gl_opt_bool_field(L, idx, "l2_reset", true, fn);
    if (have_reset && o->regime != GL_REGIME_COLD)
        gl_fielderror(L, idx, fn, "l2_reset", "applies to the cold regime (hot and graph samples keep what "
                                              "is in L2 on purpose)");
    if (o->min_time > o->timeout)
        gl_fielderror(L, idx, fn, "min_time", "%.14g s is longer than 'timeout' (%.14g s)", o->min_time,
                      o->timeout);
    gl_rawgetfield(L, idx, "stream");
    if (!lua_isnil(L, -1)) {
        gl_stream *s = gl_test_stream(L, -1);
        if (s == NULL) gl_fieldtypeerror(L, idx, fn, "stream", -1, "cuda.stream");
        if (s->track == NULL) gl_fielderror(L, idx, fn, "stream", "the cuda.stream was freed");
    }
}

static int l_measure(lua_State *L) {
    gl_measure_opts o;
    memset(&o, 0, sizeof o);
    o.fn = "cuda.measure";
    lua_settop(L, 2);
    if (lua_isnoneornil(L, 1))
        gl_argerror(L, 1, o.fn, "function or callable expected, got no value");
    if (!is_callable(L, 1)) gl_typeerror(L, 1, o.fn, "function or callable");
    measure_options(L, 2, &o); /* pushes the stream option: 3 */
    o.sample_clock = true;
    o.pass_stream = true;
    o.require_work = true;
    gl_measure_run(L, 1, 3, &o);
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
void gl_open_measure(lua_State *L) {
    static const luaL_Reg f[] = {{"measure", l_measure}, {"stats_of", l_stats_of}, {NULL, NULL}};
    luaL_setfuncs(L, f, 0);
    gl_open_l2(L); /* the cold regime resets what cuda.l2_persisting sets aside */
}
