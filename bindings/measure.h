/*
 * measure.h — the measurement engine behind cuda.measure (measure.c), which cuda.bench
 * (stream.c) runs in its plain form: fixed sample count, no flush, no clock kernel.
 */
#ifndef GPULAB_MEASURE_H
#define GPULAB_MEASURE_H

#include <stdbool.h>

#include <lua.h>

typedef enum { GL_REGIME_COLD, GL_REGIME_HOT, GL_REGIME_GRAPH } gl_regime;

typedef struct gl_measure_opts {
    const char *fn;            /* the Lua name errors carry ("cuda.measure", "cuda.bench") */
    gl_regime regime;
    lua_Integer warmup;        /* untimed passes before the first sample */
    lua_Integer min_samples, max_samples;
    lua_Integer batch;         /* calls per sample (hot, graph); 0: chosen from a warmup pass */
    double min_time;           /* seconds of sampling before the noise may stop it */
    double max_noise;          /* target relative noise; < 0: stop only at max_samples */
    double timeout;            /* seconds for the whole measurement; < 0: none */
    bool timeout_per_wait;     /* cuda.bench: the timeout bounds each wait, not the total */
    double throttle;           /* reject samples below throttle x reference clock; 0: off */
    bool blocking;             /* hold the stream on a host flag while the sample is enqueued */
    bool sample_clock;         /* run the clock kernel after each sample */
    bool pass_stream;          /* call fn(s) (cuda.measure) rather than fn() (cuda.bench) */
    bool require_work;         /* raise when fn enqueues nothing */
    bool l2_reset;             /* cold: reset persisting L2 lines before every sample */
} gl_measure_opts;

/* Measures the callable at fn_idx on the cuda.stream at stream_idx (0 or a nil slot: the
 * default stream). Pushes the cuda.measure result table. Raises "o->fn: ..." on errors, with
 * every event, buffer and capture it made released; an error raised by fn propagates as is. */
void gl_measure_run(lua_State *L, int fn_idx, int stream_idx, const gl_measure_opts *o);

#endif
