/*
 * fake_measure.c — scripted timings for tests of cuda.measure through the driver stand-in.
 *
 *   GPULAB_FAKE_ELAPSED_FILE=path   while the file exists, cuEventElapsedTime answers its
 *                                   numbers (ms, separated by spaces, commas or newlines) one
 *                                   after the other, cycling; rewriting the file starts over
 *   GPULAB_FAKE_CLOCK_FILE=path     the same for the SM clock (MHz) that the measurement clock
 *                                   kernel (gl_measure_clock) reports; without it, 1980 MHz
 *   GPULAB_FAKE_BLOCK_GIVEUP=1      the spin kernel (gl_measure_block) reports that its deadline
 *                                   passed before the host released it
 * The files are read again on every call, so one test process can script several cases.
 * Nothing here is a GPU measurement: it lets tests drive the stopping rule and the rejection
 * of throttled samples with known numbers.
 */
#define _GNU_SOURCE
#include "fake.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCRIPT_MAX_BYTES (1 << 20)
#define SCRIPT_MAX_VALUES 65536

typedef struct script {
    char *text;     /* the file's content when last parsed */
    double *values;
    size_t n, next;
} script;

static script elapsed_script, clock_script;

/* Reads the whole file into a NUL-terminated buffer (malloc'd), or NULL. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *buf = malloc(SCRIPT_MAX_BYTES + 1);
    size_t len = buf ? fread(buf, 1, SCRIPT_MAX_BYTES, f) : 0;
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static void parse(script *s, char *text) {
    free(s->text);
    free(s->values);
    s->text = text;
    s->values = malloc(SCRIPT_MAX_VALUES * sizeof *s->values);
    s->n = s->next = 0;
    if (s->values == NULL) return;
    char *p = text;
    while (*p && s->n < SCRIPT_MAX_VALUES) {
        p += strspn(p, " \t\r\n,");
        if (*p == '\0') break;
        char *end;
        double v = strtod(p, &end);
        if (end == p) break; /* not a number: the script ends here */
        s->values[s->n++] = v;
        p = end;
    }
}

/* The next scripted value of the file named by env var `var`; false when there is none. */
static bool next_value(script *s, const char *var, double *out) {
    const char *path = getenv(var);
    if (path == NULL || *path == '\0') return false;
    char *text = read_text(path);
    if (text == NULL) return false;
    if (s->text == NULL || strcmp(s->text, text) != 0) parse(s, text);
    else free(text);
    if (s->n == 0) return false;
    *out = s->values[s->next];
    s->next = (s->next + 1) % s->n;
    return true;
}

bool fake_scripted_elapsed(float *ms) {
    double v;
    if (!next_value(&elapsed_script, "GPULAB_FAKE_ELAPSED_FILE", &v)) return false;
    *ms = (float)v;
    return true;
}

/* The measurement kernels write what the real ones would: cycles and ns of the clock spin,
 * the spin kernel's status word. Their parameters: (u64 out, u64 spin_ns), (u64 flag, u32, u64). */
void fake_measure_launch(const char *name, void **params) {
    if (params == NULL) return;
    if (strcmp(name, "gl_measure_clock") == 0) {
        uint64_t *out = (uint64_t *)(uintptr_t)*(uint64_t *)params[0];
        uint64_t ns = *(uint64_t *)params[1];
        double mhz = 1980;
        next_value(&clock_script, "GPULAB_FAKE_CLOCK_FILE", &mhz);
        out[0] = (uint64_t)(mhz * (double)ns / 1000.0 + 0.5);
        out[1] = ns;
        fake_log("measure_clock %.1f MHz", mhz);
    } else if (strcmp(name, "gl_measure_block") == 0) {
        uint32_t *flag = (uint32_t *)(uintptr_t)*(uint64_t *)params[0];
        const char *giveup = getenv("GPULAB_FAKE_BLOCK_GIVEUP");
        flag[1] = giveup && strcmp(giveup, "1") == 0 ? 2 : 1;
    }
}
