/*
 * pcsample.c — cuda.pcsample(fn, opts): where the warps of each kernel launched by fn wait, per
 * instruction and per source line, from CUPTI's PC sampling (cupti_pcsampling.h) in this process.
 *
 * The SMs sample one warp's program counter every 2^period cycles and record why it did not
 * issue (CUPTI's stall reason names, "smsp__pcsamp_warps_issue_stalled_long_scoreboard" ...).
 * CUPTI hands back records of (function name, PC offset, samples per reason). gpulab adds what
 * only it knows: which kernels fn launched (the launch notes, observe.h), the program each came
 * from (opts.programs), the SASS instruction at each offset and its source line (prog:sass), and
 * the source text for r:annotate.
 *
 * libcupti is the one cuda.profile opens (gl_cupti_library). Every CUPTI state of a call lives in
 * one to-be-closed session: any exit (an error in fn, a coroutine that never resumes, a CUPTI
 * failure) stops and disables sampling and frees the buffers.
 */
#define _GNU_SOURCE
#include "check.h"
#include "context.h"
#include "cubin.h"
#include "cupti_abi.h"
#include "driver.h"
#include "errors.h"
#include "identity.h"
#include "module.h"
#include "observe.h"
#include "options.h"
#include "program.h"
#include "register.h"
#include "stream.h"
#include "wait.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#define FN "cuda.pcsample"
#define SESSION_T "cuda.pcsample_session"
#define RESULT_T "cuda.pcsample_result"
#define STALL_PREFIX "smsp__pcsamp_warps_issue_stalled_"
#define BATCH_PCS 4096 /* PC records asked for per cuptiPCSamplingGetData */

/* ------------------------------------------------------------------------------------------
 * The PC sampling entry points, from the libcupti cuda.profile opened
 * ------------------------------------------------------------------------------------------ */
#define PCS_FIELD(name, params) gl_cupti_result (*name)(params *);
static struct {
    bool tried, ok;
    char reason[1400];
    GL_CUPTI_PCS_FUNCS(PCS_FIELD)
} pc;
#undef PCS_FIELD

static bool pcs_open(const char **why) {
    if (!pc.tried) {
        pc.tried = true;
        const char *path = NULL, *missing = NULL;
        void *h = gl_cupti_library(&path, &missing);
        if (h == NULL) {
            snprintf(pc.reason, sizeof pc.reason, "%s", missing ? missing : "CUPTI not found");
        } else {
            pc.ok = true;
#define PCS_SYM(name, params)                                                                   \
    if (pc.ok) {                                                                                \
        void *p = dlsym(h, #name);                                                              \
        if (p == NULL) {                                                                        \
            snprintf(pc.reason, sizeof pc.reason,                                               \
                     "%s has no %s: PC sampling needs CUPTI from CUDA 11.3 or later", path, #name); \
            pc.ok = false;                                                                      \
        }                                                                                       \
        memcpy(&pc.name, &p, sizeof p);                                                         \
    }
            GL_CUPTI_PCS_FUNCS(PCS_SYM)
#undef PCS_SYM
        }
    }
    if (why) *why = pc.ok ? NULL : pc.reason;
    return pc.ok;
}

static __attribute__((noreturn)) void raise_cupti(lua_State *L, const char *step, gl_cupti_result r) {
    const char *e = gl_push_cupti_error(L, r);
    luaL_error(L, FN ": %s: %s", step, e);
    abort();
}

#define PCS_CALL(L, fn, params) \
    do { gl_cupti_result r_ = pc.fn(params); if (r_ != GL_CUPTI_SUCCESS) raise_cupti(L, #fn, r_); } while (0)

/* ------------------------------------------------------------------------------------------
 * The session: everything one call holds, released by one idempotent function
 * ------------------------------------------------------------------------------------------ */
typedef struct pcs_buffer {
    gl_cupti_pcs_data data;
    gl_cupti_pcs_pc *pcs;
    gl_cupti_pcs_stall *stalls;
} pcs_buffer;

typedef struct session {
    bool enabled, started, closed;
    CUcontext ctx;
    size_t nreasons;
    uint32_t *reason_index;
    char **reason_names;
    char *reason_text;
    pcs_buffer batch;  /* for cuptiPCSamplingGetData */
    pcs_buffer final;  /* the configured buffer: what Disable still had */
    struct { char *entry, *shown; } *launches; /* CUPTI's name, the script's (owned copies) */
    size_t nlaunches, caplaunches;
    bool launches_lost;
    char **names;      /* CUPTI's function name strings, freed once each (the caller owns them) */
    size_t nnames, capnames;
} session;

static session *active; /* the session whose fn runs: nesting, and the launch notes */

bool gl_pcsample_running(void) { return active != NULL; }

void gl_pcsample_note_launch(const char *kernel, const char *entry) {
    session *s = active;
    if (s == NULL) return;
    if (s->nlaunches == s->caplaunches) {
        size_t cap = s->caplaunches ? s->caplaunches * 2 : 64;
        void *n = cap <= 1000000 ? realloc(s->launches, cap * sizeof *s->launches) : NULL;
        if (n == NULL) {
            s->launches_lost = true;
            return;
        }
        s->launches = n;
        s->caplaunches = cap;
    }
    /* whole names: a mangled template name runs past any fixed size, and a cut one would never
       match CUPTI's record of the function */
    char *e = strdup(entry), *k = strdup(kernel);
    if (e == NULL || k == NULL) {
        free(e);
        free(k);
        s->launches_lost = true;
        return;
    }
    s->launches[s->nlaunches].entry = e;
    s->launches[s->nlaunches].shown = k;
    s->nlaunches++;
}

static void free_launches(session *s) {
    for (size_t i = 0; i < s->nlaunches; i++) {
        free(s->launches[i].entry);
        free(s->launches[i].shown);
    }
    free(s->launches);
    s->launches = NULL;
    s->nlaunches = s->caplaunches = 0;
}

/* Remembers a function name string CUPTI handed over; it is freed with the session. */
static void own_name(session *s, char *name) {
    if (name == NULL) return;
    for (size_t i = 0; i < s->nnames; i++)
        if (s->names[i] == name) return;
    if (s->nnames == s->capnames) {
        size_t cap = s->capnames ? s->capnames * 2 : 32;
        char **n = realloc(s->names, cap * sizeof *n);
        if (n == NULL) return; /* kept by CUPTI's copy: a few bytes lost, never a double free */
        s->names = n;
        s->capnames = cap;
    }
    s->names[s->nnames++] = name;
}

static void own_buffer_names(session *s, const pcs_buffer *b) {
    if (b->pcs == NULL) return;
    size_t n = b->data.totalNumPcs < b->data.collectNumPcs ? b->data.totalNumPcs : b->data.collectNumPcs;
    for (size_t i = 0; i < n; i++) own_name(s, b->pcs[i].functionName);
}

static void free_buffer(pcs_buffer *b) {
    free(b->pcs);
    free(b->stalls);
    memset(b, 0, sizeof *b);
}

static void session_release(session *s) {
    if (s->closed) return;
    s->closed = true;
    if (active == s) {
        active = NULL;
        gl_observers--;
    }
    if (s->started) {
        gl_cupti_pcs_ctx_params p = {.size = GL_CUPTI_PCS_CTX_SIZE, .ctx = s->ctx}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
        pc.cuptiPCSamplingStop(&p);
        s->started = false;
    }
    if (s->enabled) {
        s->final.data.totalNumPcs = 0;
        gl_cupti_pcs_ctx_params p = {.size = GL_CUPTI_PCS_CTX_SIZE, .ctx = s->ctx}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
        pc.cuptiPCSamplingDisable(&p); /* may still fill the configured buffer */
        s->enabled = false;
        own_buffer_names(s, &s->final);
    }
    /* CUPTI's header leaves freeing the function names to the caller, but it shares one string
       among records, and on the H200 (CUDA 13.0) freeing them corrupted the heap by the next
       session (glibc: "malloc_consolidate(): invalid chunk size"): gpulab copies what it needs
       while the session lasts and leaves the strings to CUPTI, a few bytes per kernel name. */
    free(s->names);
    s->names = NULL;
    s->nnames = 0;
    free_buffer(&s->batch);
    free_buffer(&s->final);
    free(s->reason_index);
    free(s->reason_names);
    free(s->reason_text);
    free_launches(s);
    s->reason_index = NULL;
    s->reason_names = NULL;
    s->reason_text = NULL;
}

static int session_close(lua_State *L) {
    session *s = gl_testudata(L, 1, SESSION_T);
    if (s) session_release(s);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------------------------ */
typedef struct pcs_opts {
    lua_Integer period;      /* 0: CUPTI's default */
    lua_Integer max_records; /* PC records kept */
    int mode;                /* GL_CUPTI_PCS_MODE_* */
    double timeout;
    bool baseline;           /* run fn again unsampled to measure the overhead */
    int kernels;             /* stack index of the set {name=true} or 0 for every kernel */
    int programs;            /* stack index of our list of programs */
} pcs_opts;

static bool is_program(lua_State *L, int idx) {
    if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return false;
    gl_getmetatable(L, "cuda.program");
    bool yes = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return yes;
}

/* opts.programs: one cuda.program or a list of them; pushes our list. */
static void read_programs(lua_State *L, pcs_opts *o) {
    lua_createtable(L, 4, 0);
    int out = lua_gettop(L);
    int t = gl_rawgetfield(L, 2, "programs");
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
    } else if (is_program(L, -1)) {
        lua_rawseti(L, out, 1);
    } else if (t == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            if (!is_program(L, -1))
                gl_fielderror(L, 2, FN, "programs", "item %lld: cuda.program expected, got %s", (long long)i,
                              gl_typename(L, -1));
            lua_rawseti(L, out, i);
        }
        lua_pop(L, 1);
    } else {
        gl_fieldtypeerror(L, 2, FN, "programs", -1, "cuda.program or list of them");
    }
    o->programs = out;
}

/* opts.kernels: a list of kernel names or cuda.kernel objects; pushes the set of names. */
static void read_kernels(lua_State *L, pcs_opts *o) {
    o->kernels = 0;
    int t = gl_rawgetfield(L, 2, "kernels");
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (t != LUA_TTABLE) gl_fieldtypeerror(L, 2, FN, "kernels", -1, "list of kernel names or cuda.kernels");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n < 1) gl_fielderror(L, 2, FN, "kernels", "the list is empty (leave it out to sample every kernel)");
    lua_createtable(L, 0, (int)(n < 1000 ? n : 1000));
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -2, i);
        gl_kernel *k = gl_test_kernel(L, -1);
        if (k) lua_pushstring(L, k->entry);
        else if (lua_type(L, -1) == LUA_TSTRING && lua_rawlen(L, -1) > 0) lua_pushvalue(L, -1);
        else
            gl_fielderror(L, 2, FN, "kernels", "item %lld: kernel name or cuda.kernel expected, got %s",
                          (long long)i, gl_typename(L, -1));
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        lua_pop(L, 1);
    }
    lua_remove(L, -2);
    o->kernels = lua_gettop(L);
}

static void read_opts(lua_State *L, pcs_opts *o) {
    lua_settop(L, 2);
    if (!lua_isfunction(L, 1)) {
        if (luaL_getmetafield(L, 1, "__call") == LUA_TNIL) gl_typeerror(L, 1, FN, "function");
        lua_pop(L, 1);
    }
    if (lua_isnil(L, 2)) {
        lua_newtable(L);
        lua_replace(L, 2);
    }
    if (!lua_istable(L, 2)) gl_typeerror(L, 2, FN, "table or nil");
    static const char *const known[] = {"period", "kernels", "max_records", "programs", "mode",
                                        "timeout", "baseline", NULL};
    gl_check_known_fields(L, 2, known, FN);
    o->period = gl_opt_int_field(L, 2, "period", 0, FN);
    if (o->period != 0 && (o->period < 5 || o->period > 31))
        gl_fielderror(L, 2, FN, "period", "must be 5..31 (a sample every 2^period cycles), got %lld",
                      (long long)o->period);
    o->max_records = gl_opt_int_field(L, 2, "max_records", 100000, FN);
    if (o->max_records < 1 || o->max_records > 10000000)
        gl_fielderror(L, 2, FN, "max_records", "must be 1..10000000, got %lld", (long long)o->max_records);
    const char *mode = gl_opt_str_field(L, 2, "mode", "serialized", FN);
    if (strcmp(mode, "serialized") == 0) o->mode = GL_CUPTI_PCS_MODE_KERNEL_SERIALIZED;
    else if (strcmp(mode, "continuous") == 0) o->mode = GL_CUPTI_PCS_MODE_CONTINUOUS;
    else gl_fielderror(L, 2, FN, "mode", "must be \"serialized\" or \"continuous\", got \"%s\"", mode);
    o->timeout = gl_opt_num_field(L, 2, "timeout", 60, FN);
    if (!(o->timeout > 0) || o->timeout > 1e6)
        gl_fielderror(L, 2, FN, "timeout", "must be 0..1e6 seconds, got %.14g", o->timeout);
    o->baseline = gl_opt_bool_field(L, 2, "baseline", false, FN);
    read_kernels(L, o);
    read_programs(L, o);
}

/* ------------------------------------------------------------------------------------------
 * Setting up and collecting
 * ------------------------------------------------------------------------------------------ */
static void alloc_buffer(lua_State *L, pcs_buffer *b, size_t npcs, size_t nreasons) {
    b->pcs = calloc(npcs, sizeof *b->pcs);
    b->stalls = calloc(npcs * (nreasons ? nreasons : 1), sizeof *b->stalls);
    if (b->pcs == NULL || b->stalls == NULL) {
        luaL_error(L, FN ": out of memory for %d PC records", (int)npcs);
        return;
    }
    for (size_t i = 0; i < npcs; i++) {
        b->pcs[i].size = sizeof(gl_cupti_pcs_pc);
        b->pcs[i].stallReason = b->stalls + i * nreasons;
    }
    b->data.size = sizeof(gl_cupti_pcs_data);
    b->data.collectNumPcs = npcs;
    b->data.pPcData = b->pcs;
}

/* The device's stall reasons: pushes {[index] = name} and keeps the index list for the
 * configuration (every reason is collected). */
/* The reasons a sample is counted under. CUDA 13's CUPTI on the H200 also reports, for every stall
 * reason X, an X_not_issued reason (the same samples again, those in which the warp issued
 * nothing: a subset of X), and two entries that are no stall at all (sample_count,
 * samples_data_dropped); counting them too doubled every kernel's samples. */
static bool counted_reason(const char *name) {
    size_t len = strlen(name);
    static const char suffix[] = "_not_issued";
    if (len >= sizeof suffix - 1 && strcmp(name + len - (sizeof suffix - 1), suffix) == 0) return false;
    return strstr(name, "_stalled_") != NULL || strncmp(name, "smsp__pcsamp_", 13) != 0;
}

static void read_reasons(lua_State *L, session *s) {
    size_t n = 0;
    gl_cupti_pcs_num_reasons_params np = {.size = GL_CUPTI_PCS_NUM_REASONS_SIZE, .ctx = s->ctx,
                                          .numStallReasons = &n};
    PCS_CALL(L, cuptiPCSamplingGetNumStallReasons, &np);
    if (n == 0 || n > 4096) luaL_error(L, FN ": CUPTI reports %d stall reasons", (int)n);
    s->nreasons = n;
    s->reason_index = calloc(n, sizeof *s->reason_index);
    s->reason_names = calloc(n, sizeof *s->reason_names);
    s->reason_text = calloc(n, GL_CUPTI_STALL_REASON_STRING_SIZE);
    if (!s->reason_index || !s->reason_names || !s->reason_text) {
        luaL_error(L, FN ": out of memory for %d stall reasons", (int)n);
        return;
    }
    for (size_t i = 0; i < n; i++) s->reason_names[i] = s->reason_text + i * GL_CUPTI_STALL_REASON_STRING_SIZE;
    gl_cupti_pcs_reasons_params rp = {.size = GL_CUPTI_PCS_REASONS_SIZE, .ctx = s->ctx, .numStallReasons = n,
                                      .stallReasonIndex = s->reason_index, .stallReasons = s->reason_names};
    PCS_CALL(L, cuptiPCSamplingGetStallReasons, &rp);
    lua_createtable(L, 0, (int)n);
    for (size_t i = 0; i < n; i++) {
        s->reason_names[i][GL_CUPTI_STALL_REASON_STRING_SIZE - 1] = '\0';
        if (counted_reason(s->reason_names[i])) lua_pushstring(L, s->reason_names[i]);
        else lua_pushboolean(L, 0); /* known, and left out of the counts */
        lua_rawseti(L, -2, (lua_Integer)s->reason_index[i]);
    }
}

static const char *attribute_name(int type) {
    switch (type) {
    case GL_CUPTI_PCS_ATTR_SAMPLING_PERIOD: return "sampling period";
    case GL_CUPTI_PCS_ATTR_STALL_REASON: return "stall reasons";
    case GL_CUPTI_PCS_ATTR_SCRATCH_BUFFER_SIZE: return "scratch buffer size";
    case GL_CUPTI_PCS_ATTR_HARDWARE_BUFFER_SIZE: return "hardware buffer size";
    case GL_CUPTI_PCS_ATTR_COLLECTION_MODE: return "collection mode";
    case GL_CUPTI_PCS_ATTR_ENABLE_START_STOP_CONTROL: return "start/stop control";
    case GL_CUPTI_PCS_ATTR_OUTPUT_DATA_FORMAT: return "output data format";
    case GL_CUPTI_PCS_ATTR_SAMPLING_DATA_BUFFER: return "sampling data buffer";
    default: return "?";
    }
}

static void configure(lua_State *L, session *s, const pcs_opts *o) {
    gl_cupti_pcs_config_info a[8];
    memset(a, 0, sizeof a);
    size_t n = 0;
    a[n].attributeType = GL_CUPTI_PCS_ATTR_STALL_REASON;
    a[n].attributeData.stallReasonData.stallReasonCount = s->nreasons;
    a[n++].attributeData.stallReasonData.pStallReasonIndex = s->reason_index;
    a[n].attributeType = GL_CUPTI_PCS_ATTR_COLLECTION_MODE;
    a[n++].attributeData.collectionModeData.collectionMode = o->mode;
    a[n].attributeType = GL_CUPTI_PCS_ATTR_ENABLE_START_STOP_CONTROL;
    a[n++].attributeData.enableStartStopControlData.enableStartStopControl = 1;
    a[n].attributeType = GL_CUPTI_PCS_ATTR_OUTPUT_DATA_FORMAT;
    a[n++].attributeData.outputDataFormatData.outputDataFormat = GL_CUPTI_PCS_FORMAT_PARSED;
    a[n].attributeType = GL_CUPTI_PCS_ATTR_SAMPLING_DATA_BUFFER;
    a[n++].attributeData.samplingDataBufferData.samplingDataBuffer = &s->final.data;
    /* CUPTI's 1 MiB default holds about 5500 PCs with every reason: room for max_records */
    size_t scratch = (size_t)o->max_records * (32 + 16 * s->nreasons);
    if (scratch > ((size_t)1 << 20)) {
        a[n].attributeType = GL_CUPTI_PCS_ATTR_SCRATCH_BUFFER_SIZE;
        a[n++].attributeData.scratchBufferSizeData.scratchBufferSize =
            scratch < ((size_t)256 << 20) ? scratch : ((size_t)256 << 20);
    }
    if (o->period) {
        a[n].attributeType = GL_CUPTI_PCS_ATTR_SAMPLING_PERIOD;
        a[n++].attributeData.samplingPeriodData.samplingPeriod = (uint32_t)o->period;
    }
    gl_cupti_pcs_config_params cp = {.size = GL_CUPTI_PCS_CONFIG_SIZE, .ctx = s->ctx, .numAttributes = n, // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
                                     .pPCSamplingConfigurationInfo = a};
    gl_cupti_result r = pc.cuptiPCSamplingSetConfigurationAttribute(&cp);
    if (r == GL_CUPTI_SUCCESS) return;
    for (size_t i = 0; i < n; i++)
        if (a[i].attributeStatus != GL_CUPTI_SUCCESS) {
            char step[128];
            snprintf(step, sizeof step, "cuptiPCSamplingSetConfigurationAttribute (%s)",
                     attribute_name(a[i].attributeType));
            raise_cupti(L, step, a[i].attributeStatus);
        }
    raise_cupti(L, "cuptiPCSamplingSetConfigurationAttribute", r);
}

typedef struct totals {
    uint64_t total, dropped, non_user;
    size_t records;
    bool buffer_full, truncated;
} totals;

/* Adds a buffer's records to raw[name] = {crc=, index=, pcs={[offset]={[reason]=n}}}.
 * `reasons` is {[index]=name}. */
static void absorb(lua_State *L, session *s, const pcs_buffer *b, int raw, int reasons, totals *t,
                   lua_Integer max_records) {
    const gl_cupti_pcs_data *d = &b->data;
    t->total += d->totalSamples;
    t->dropped += d->droppedSamples;
    t->non_user += d->nonUsrKernelsTotalSamples;
    t->buffer_full |= d->hardwareBufferFull != 0;
    size_t n = d->totalNumPcs < d->collectNumPcs ? d->totalNumPcs : d->collectNumPcs;
    for (size_t i = 0; i < n; i++) {
        const gl_cupti_pcs_pc *p = &b->pcs[i];
        own_name(s, p->functionName);
        if (t->records >= (size_t)max_records) {
            t->truncated = true;
            continue;
        }
        t->records++;
        const char *fname = p->functionName ? p->functionName : "?";
        if (gl_rawgetfield(L, raw, fname) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_createtable(L, 0, 3);
            lua_pushinteger(L, (lua_Integer)p->cubinCrc);
            lua_setfield(L, -2, "crc");
            lua_pushinteger(L, (lua_Integer)p->functionIndex);
            lua_setfield(L, -2, "index");
            lua_newtable(L);
            lua_setfield(L, -2, "pcs");
            lua_pushvalue(L, -1);
            lua_setfield(L, raw, fname);
        }
        gl_rawgetfield(L, -1, "pcs");
        if (lua_rawgeti(L, -1, (lua_Integer)p->pcOffset) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, -1);
            lua_rawseti(L, -3, (lua_Integer)p->pcOffset);
        }
        size_t nr = p->stallReasonCount < s->nreasons ? p->stallReasonCount : s->nreasons;
        for (size_t k = 0; k < nr; k++) {
            const gl_cupti_pcs_stall *st = &p->stallReason[k];
            if (st->samples == 0) continue;
            int kind = lua_rawgeti(L, reasons, st->pcSamplingStallReasonIndex);
            if (kind == LUA_TBOOLEAN) { /* not counted (counted_reason) */
                lua_pop(L, 1);
                continue;
            }
            if (kind != LUA_TSTRING) {
                lua_pop(L, 1);
                lua_pushfstring(L, "reason %d", (int)st->pcSamplingStallReasonIndex);
            }
            lua_pushvalue(L, -1);
            lua_Integer have = lua_rawget(L, -3) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
            lua_pop(L, 1);
            lua_pushinteger(L, have + st->samples);
            lua_rawset(L, -3);
        }
        lua_pop(L, 3);
    }
}

/* After Stop: every PC record CUPTI has, batch by batch. */
static void drain(lua_State *L, session *s, int raw, int reasons, totals *t, lua_Integer max_records) {
    for (int guard = 0; guard < 100000; guard++) {
        s->batch.data.totalNumPcs = 0;
        s->batch.data.remainingNumPcs = 0;
        gl_cupti_pcs_get_data_params gp = {.size = GL_CUPTI_PCS_GET_DATA_SIZE, .ctx = s->ctx,
                                           .pcSamplingData = &s->batch.data};
        gl_cupti_result r = pc.cuptiPCSamplingGetData(&gp);
        /* a full hardware buffer is reported as an error with the data still delivered: keep the
         * records and say so (hardware_buffer_full) rather than lose them */
        if (r != GL_CUPTI_SUCCESS && !(r == GL_CUPTI_ERROR_OUT_OF_MEMORY && s->batch.data.hardwareBufferFull))
            raise_cupti(L, "cuptiPCSamplingGetData", r);
        absorb(L, s, &s->batch, raw, reasons, t, max_records);
        if (s->batch.data.remainingNumPcs == 0) return;
    }
    luaL_error(L, FN ": CUPTI kept reporting PC records after 100000 batches");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------------------------
 * The result: one row per sampled kernel
 * ------------------------------------------------------------------------------------------ */
static void add_count(lua_State *L, int t, const char *key, lua_Integer n) {
    lua_Integer have = gl_rawgetfield(L, t, key) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    lua_pushinteger(L, have + n);
    lua_setfield(L, t, key);
}

/* Adds every count of table `from` into table `into`; returns their sum. */
static lua_Integer merge_stalls(lua_State *L, int into, int from) {
    lua_Integer sum = 0;
    lua_pushnil(L);
    while (lua_next(L, from)) {
        lua_Integer n = lua_tointeger(L, -1);
        sum += n;
        add_count(L, into, lua_tostring(L, -2), n);
        lua_pop(L, 1);
    }
    return sum;
}

/* The sum of the counts of every PC of a raw {[offset]={[reason]=n}} table. */
static lua_Integer sum_all(lua_State *L, int pcs) {
    lua_Integer sum = 0;
    lua_pushnil(L);
    while (lua_next(L, pcs)) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            sum += lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return sum;
}

/* The program of `prog_list` whose cubin has entry `name`, pushed; nil when none. */
static void push_program_of(lua_State *L, int prog_list, const char *name) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, prog_list);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, prog_list, i);
        int prog = lua_gettop(L);
        size_t len = 0;
        const char *cubin = NULL;
        if (gl_program_private(L, prog) == LUA_TTABLE && gl_rawgetfield(L, -1, "cubin") == LUA_TSTRING)
            cubin = lua_tolstring(L, -1, &len);
        gl_cubin_kernel info;
        char err[256];
        bool has = cubin && gl_cubin_kernel_info(cubin, len, name, &info, err, sizeof err);
        lua_settop(L, prog);
        if (has) return;
        lua_pop(L, 1);
    }
    lua_pushnil(L);
}

/* prog:sass(name) as {[offset] = entry}, pushed; or nil and the reason, pushed. */
static void push_sass_map(lua_State *L, int prog, const char *name) {
    lua_pushcfunction(L, gl_program_sass);
    lua_pushvalue(L, prog);
    lua_pushstring(L, name);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return;
    }
    int list = lua_gettop(L);
    lua_newtable(L);
    int map = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, list);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, list, i) == LUA_TTABLE && gl_rawgetfield(L, -1, "offset") == LUA_TNUMBER) {
            lua_Integer off = lua_tointeger(L, -1);
            lua_pop(L, 1);
            lua_rawseti(L, map, off);
        }
        lua_settop(L, map);
    }
    lua_remove(L, -2);
    lua_pushnil(L);
}

/* Sorting the report's lists in C: the global table.sort is the script's to replace, and a
 * binding runs none of a script's code while it builds a result. */
typedef enum { BY_OFFSET, BY_SAMPLES_DESC, BY_NAME } sort_order;
typedef struct {
    lua_Integer first, second; /* BY_OFFSET: offset; BY_SAMPLES_DESC: samples, then line */
    const char *name;          /* BY_NAME: the string, anchored in the list's copy */
    size_t len;
    lua_Integer at;            /* the entry's place before sorting: ties keep their order */
} sort_key;

static int compare_keys(const sort_key *a, const sort_key *b, sort_order order) {
    int c = 0;
    if (order == BY_NAME) {
        size_t n = a->len < b->len ? a->len : b->len;
        c = memcmp(a->name, b->name, n);
        if (c == 0) c = (a->len > b->len) - (a->len < b->len);
    } else if (order == BY_SAMPLES_DESC) {
        c = (a->first < b->first) - (a->first > b->first);
        if (c == 0) c = (a->second > b->second) - (a->second < b->second);
    } else {
        c = (a->first > b->first) - (a->first < b->first);
    }
    return c != 0 ? c : (a->at > b->at) - (a->at < b->at);
}
static int by_offset(const void *a, const void *b) { return compare_keys(a, b, BY_OFFSET); }
static int by_samples_desc(const void *a, const void *b) { return compare_keys(a, b, BY_SAMPLES_DESC); }
static int by_name(const void *a, const void *b) { return compare_keys(a, b, BY_NAME); }

static lua_Integer int_field(lua_State *L, int row, const char *name) {
    lua_Integer v = gl_rawgetfield(L, row, name) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    return v;
}

/* Sorts the list at index t (entries 1..n, made by this file) in place. */
static void sort_list(lua_State *L, int t, sort_order order) {
    t = lua_absindex(L, t);
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    if (n < 2) return;
    sort_key *keys = gl_newuserdatauv(L, (size_t)n * sizeof *keys, 0);
    lua_createtable(L, (int)n, 0);
    int copy = lua_gettop(L);
    for (lua_Integer i = 1; i <= n; i++) {
        sort_key *k = &keys[i - 1];
        memset(k, 0, sizeof *k);
        k->at = i;
        int type = lua_rawgeti(L, t, i);
        if (order == BY_NAME && type == LUA_TSTRING) k->name = lua_tolstring(L, -1, &k->len);
        else if (order == BY_NAME) k->name = "";
        else if (type == LUA_TTABLE) {
            int row = lua_gettop(L);
            k->first = int_field(L, row, order == BY_OFFSET ? "offset" : "samples");
            if (order == BY_SAMPLES_DESC) k->second = int_field(L, row, "line");
        }
        lua_rawseti(L, copy, i); /* anchors the entry (and a name's string) */
    }
    qsort(keys, (size_t)n, sizeof *keys,
          order == BY_OFFSET ? by_offset : order == BY_SAMPLES_DESC ? by_samples_desc : by_name);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, copy, keys[i - 1].at);
        lua_rawseti(L, t, i);
    }
    lua_pop(L, 2);
}

/* pcs and lines of one kernel from its raw {[offset]={[reason]=n}}, at index pcs_raw; the row
 * is at index row, the offset map (or nil) at index map. */
static void fill_pcs_and_lines(lua_State *L, int row, int pcs_raw, int map) {
    lua_newtable(L);
    int pcs = lua_gettop(L);
    lua_newtable(L);
    int lines = lua_gettop(L);
    lua_newtable(L);
    int by_line = lua_gettop(L); /* "file:line" -> the line's entry */
    lua_newtable(L);
    int stalls = lua_gettop(L);
    lua_Integer total = 0, npcs = 0, nlines = 0;
    lua_pushnil(L);
    while (lua_next(L, pcs_raw)) {
        lua_Integer off = lua_tointeger(L, -2);
        int st = lua_gettop(L);
        lua_createtable(L, 0, 7);
        int e = lua_gettop(L);
        lua_pushinteger(L, off);
        lua_setfield(L, e, "offset");
        lua_newtable(L);
        lua_Integer n = merge_stalls(L, lua_gettop(L), st);
        lua_setfield(L, e, "stalls");
        merge_stalls(L, stalls, st);
        total += n;
        lua_pushinteger(L, n);
        lua_setfield(L, e, "samples");
        if (!lua_isnil(L, map) && lua_rawgeti(L, map, off) == LUA_TTABLE) {
            int ins = lua_gettop(L);
            static const char *const keep[] = {"text", "opcode", "file", "line", NULL};
            for (int k = 0; keep[k]; k++) {
                gl_rawgetfield(L, ins, keep[k]);
                lua_setfield(L, e, keep[k]);
            }
            if (gl_rawgetfield(L, ins, "file") == LUA_TSTRING && gl_rawgetfield(L, ins, "line") == LUA_TNUMBER) {
                lua_pushfstring(L, "%s:%I", lua_tostring(L, -2), lua_tointeger(L, -1));
                if (lua_rawget(L, by_line) != LUA_TTABLE) {
                    lua_pop(L, 1);
                    lua_createtable(L, 0, 4);
                    lua_pushvalue(L, -3);
                    lua_setfield(L, -2, "file");
                    lua_pushvalue(L, -2);
                    lua_setfield(L, -2, "line");
                    lua_newtable(L);
                    lua_setfield(L, -2, "stalls");
                    lua_pushfstring(L, "%s:%I", lua_tostring(L, -3), lua_tointeger(L, -2));
                    lua_pushvalue(L, -2);
                    lua_rawset(L, by_line);
                    lua_pushvalue(L, -1);
                    lua_rawseti(L, lines, ++nlines);
                }
                int le = lua_gettop(L);
                add_count(L, le, "samples", n);
                gl_rawgetfield(L, le, "stalls");
                merge_stalls(L, lua_gettop(L), st);
            }
        }
        lua_settop(L, e);
        lua_rawseti(L, pcs, ++npcs);
        lua_settop(L, st - 1);
    }
    sort_list(L, pcs, BY_OFFSET);
    sort_list(L, lines, BY_SAMPLES_DESC);
    lua_pushinteger(L, total);
    lua_setfield(L, row, "samples");
    lua_pushvalue(L, stalls);
    lua_setfield(L, row, "stalls");
    lua_pushvalue(L, pcs);
    lua_setfield(L, row, "pcs");
    lua_pushvalue(L, lines);
    lua_setfield(L, row, "lines");
    lua_settop(L, pcs - 1);
}

/* One row for function `name` (the symbol CUPTI reports; its raw entry at index fr), shown as
 * `as_asked` when the script launched it under that name (NULL: the symbol). */
static void push_row(lua_State *L, const char *name, const char *as_asked, int fr, lua_Integer launches,
                     const pcs_opts *o) {
    lua_createtable(L, 0, 11);
    int row = lua_gettop(L);
    lua_pushstring(L, as_asked ? as_asked : name);
    lua_setfield(L, row, "kernel");
    lua_pushstring(L, name);
    lua_setfield(L, row, "entry");
    lua_pushinteger(L, launches);
    lua_setfield(L, row, "launches");
    gl_rawgetfield(L, fr, "crc");
    lua_setfield(L, row, "cubin_crc");
    gl_rawgetfield(L, fr, "index");
    lua_setfield(L, row, "function_index");
    push_program_of(L, o->programs, name);
    int prog = lua_gettop(L);
    if (lua_isnil(L, prog)) {
        lua_pushnil(L);
        lua_pushfstring(L, "no cuda.program given holds kernel '%s' (pass programs={prog} for SASS and source lines)",
                        name);
    } else {
        lua_pushvalue(L, prog);
        lua_setfield(L, row, "program");
        push_sass_map(L, prog, name);
    }
    /* stack: prog, map-or-nil, why-or-nil */
    if (!lua_isnil(L, -1)) {
        lua_pushvalue(L, -1);
        lua_setfield(L, row, "lines_missing");
    }
    lua_pop(L, 1);
    int map = lua_gettop(L);
    gl_rawgetfield(L, fr, "pcs");
    fill_pcs_and_lines(L, row, lua_gettop(L), map);
    lua_settop(L, row);
}

/* Launch counts per kernel symbol, in order of first launch: pushes {entry, ...}, {[entry]=n}
 * and {[entry]=the name the script asked for}. */
static void push_launches(lua_State *L, const session *s) {
    lua_newtable(L);
    lua_newtable(L);
    lua_newtable(L);
    lua_Integer order = 0;
    for (size_t i = 0; i < s->nlaunches; i++) {
        const char *entry = s->launches[i].entry;
        if (gl_rawgetfield(L, -2, entry) == LUA_TNIL) {
            lua_pushstring(L, entry);
            lua_rawseti(L, -5, ++order);
            lua_pushstring(L, s->launches[i].shown);
            lua_setfield(L, -3, entry);
        }
        lua_Integer n = lua_tointeger(L, -1);
        lua_pop(L, 1);
        lua_pushinteger(L, n + 1);
        lua_setfield(L, -3, entry);
    }
}

/* opts.kernels names a kernel by its symbol or by the name the script asked for (shown). */
static bool wanted(lua_State *L, const pcs_opts *o, const char *entry, const char *shown) {
    if (o->kernels == 0) return true;
    return gl_rawfieldtype(L, o->kernels, entry) != LUA_TNIL ||
           (shown && gl_rawfieldtype(L, o->kernels, shown) != LUA_TNIL);
}

/* The rows: launched kernels first (in launch order), then other sampled functions by name. */
static void push_rows(lua_State *L, int raw, int order, int counts, int shown, const pcs_opts *o, int out) {
    lua_Integer nrow = 0, other = 0;
    lua_Integer n = (lua_Integer)lua_rawlen(L, order);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, order, i);
        const char *name = lua_tostring(L, -1);
        gl_rawgetfield(L, shown, name); /* anchored in `shown` */
        const char *as_asked = lua_tostring(L, -1);
        lua_pop(L, 1);
        if (gl_rawgetfield(L, raw, name) == LUA_TTABLE && wanted(L, o, name, as_asked)) {
            gl_rawgetfield(L, counts, name);
            lua_Integer launches = lua_tointeger(L, -1);
            lua_pop(L, 1);
            push_row(L, name, as_asked, lua_gettop(L), launches, o);
            lua_rawseti(L, out, ++nrow);
        } else if (lua_istable(L, -1)) {
            gl_rawgetfield(L, -1, "pcs");
            other += sum_all(L, lua_gettop(L));
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        lua_pushnil(L);
        lua_setfield(L, raw, name); /* done with it */
        lua_pop(L, 1);
    }
    /* sampled but never launched through gpulab in fn (a graph's kernels, another library's) */
    lua_newtable(L);
    int names = lua_gettop(L);
    lua_Integer nn = 0;
    lua_pushnil(L);
    while (lua_next(L, raw)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, names, ++nn);
    }
    sort_list(L, names, BY_NAME);
    for (lua_Integer i = 1; i <= nn; i++) {
        lua_rawgeti(L, names, i);
        const char *name = lua_tostring(L, -1);
        gl_rawgetfield(L, raw, name);
        if (wanted(L, o, name, NULL)) {
            push_row(L, name, NULL, lua_gettop(L), 0, o);
            lua_rawseti(L, out, ++nrow);
        } else {
            gl_rawgetfield(L, -1, "pcs");
            other += sum_all(L, lua_gettop(L));
            lua_pop(L, 1);
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    lua_pushinteger(L, other);
    lua_setfield(L, out, "other_samples");
}

/* ------------------------------------------------------------------------------------------
 * cuda.pcsample
 * ------------------------------------------------------------------------------------------ */
static void setup(lua_State *L, session *s, const pcs_opts *o) {
    GL_CHECK(L, gl_cu.cuCtxGetCurrent(&s->ctx), FN, "cuCtxGetCurrent");
    if (s->ctx == NULL) luaL_error(L, FN ": no current CUDA context");
    /* CUPTI names the stall reasons only once sampling is enabled on the context (CUDA 13 on the
       H200 answered CUPTI_ERROR_INVALID_OPERATION before) */
    gl_cupti_pcs_ctx_params en = {.size = GL_CUPTI_PCS_CTX_SIZE, .ctx = s->ctx}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
    PCS_CALL(L, cuptiPCSamplingEnable, &en);
    s->enabled = true;
    read_reasons(L, s); /* pushes {[index] = name} */
    size_t batch = (size_t)o->max_records < BATCH_PCS ? (size_t)o->max_records : BATCH_PCS;
    alloc_buffer(L, &s->batch, batch, s->nreasons);
    alloc_buffer(L, &s->final, batch, s->nreasons);
    configure(L, s, o);
}

/* Runs fn and waits for its work; returns the seconds it took. */
static double run_fn(lua_State *L, const pcs_opts *o) {
    double t0 = now_s();
    lua_pushvalue(L, 1);
    lua_call(L, 0, 0); /* an error unwinds through the to-be-closed session */
    gl_wait(L, NULL, o->timeout, FN);
    return now_s() - t0;
}

static void set_totals(lua_State *L, int out, const totals *t, const session *s, double elapsed) {
    lua_pushinteger(L, (lua_Integer)t->total);
    lua_setfield(L, out, "total_samples");
    lua_pushinteger(L, (lua_Integer)t->dropped);
    lua_setfield(L, out, "dropped_samples");
    lua_pushinteger(L, (lua_Integer)t->non_user);
    lua_setfield(L, out, "non_user_samples");
    lua_pushboolean(L, t->buffer_full);
    lua_setfield(L, out, "hardware_buffer_full");
    lua_pushinteger(L, (lua_Integer)t->records);
    lua_setfield(L, out, "records");
    lua_pushinteger(L, (lua_Integer)s->nlaunches);
    lua_setfield(L, out, "launches");
    lua_pushnumber(L, elapsed);
    lua_setfield(L, out, "elapsed");
    if (t->truncated || s->launches_lost) {
        lua_pushboolean(L, 1);
        lua_setfield(L, out, "truncated");
    }
}

/* The sampled run, called protected by l_pcsample: 1 fn, 2 the session, 3 the kernels set or
 * nil, 4 the programs list, 5 the options (light userdata). */
static int pcsample_body(lua_State *L) {
    /* the result is built about 33 slots deep (rows, their PCs, lines and stall counts): past the
       20 a C function is promised (a Lua built with API checks aborts there) */
    luaL_checkstack(L, 48, FN);
    session *s = lua_touserdata(L, 2);
    pcs_opts o = *(const pcs_opts *)lua_touserdata(L, 5);
    o.kernels = lua_isnil(L, 3) ? 0 : 3;
    o.programs = 4;
    lua_settop(L, 5);
    setup(L, s, &o);
    int reasons = lua_gettop(L);

    gl_cupti_pcs_ctx_params st = {.size = GL_CUPTI_PCS_CTX_SIZE, .ctx = s->ctx}; // NOLINT(bugprone-sizeof-expression): CUPTI's size runs to a pointer field
    PCS_CALL(L, cuptiPCSamplingStart, &st);
    s->started = true;
    active = s;
    gl_observers++;
    double elapsed = run_fn(L, &o);
    if (s->closed) /* fn reached the session (debug.getlocal) and ended it: the buffers are gone */
        luaL_error(L, "%s: the session was ended before fn returned (its __close or __gc was called "
                      "by hand); nothing was sampled", FN);
    active = NULL;
    gl_observers--;
    s->started = false;
    PCS_CALL(L, cuptiPCSamplingStop, &st);

    lua_newtable(L);
    int raw = lua_gettop(L);
    totals t = {0};
    drain(L, s, raw, reasons, &t, o.max_records);
    s->final.data.totalNumPcs = 0;
    s->enabled = false;
    PCS_CALL(L, cuptiPCSamplingDisable, &st);
    absorb(L, s, &s->final, raw, reasons, &t, o.max_records); /* what Disable still had */

    push_launches(L, s);
    int shown = lua_gettop(L), counts = shown - 1, order = shown - 2;
    lua_newtable(L);
    int out = lua_gettop(L);
    set_totals(L, out, &t, s, elapsed);
    lua_createtable(L, (int)s->nreasons, 0); /* every reason the device reports, by index order */
    for (size_t i = 0; i < s->nreasons; i++) {
        lua_pushstring(L, s->reason_names[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, out, "reasons");
    session_release(s); /* CUPTI is done: the rest needs no session (nvdisasm runs next) */
    push_rows(L, raw, order, counts, shown, &o, out);
    if (o.baseline) {
        /* the same work without sampling: overhead = elapsed / baseline */
        double plain = run_fn(L, &o);
        lua_pushnumber(L, plain);
        lua_setfield(L, out, "baseline");
        lua_pushnumber(L, plain > 0 ? elapsed / plain : 0);
        lua_setfield(L, out, "overhead");
    }
    gl_setmetatable(L, RESULT_T);
    return 1;
}

/* Every check that needs no CUPTI first; then the run, protected, so that whatever ends it (an
 * error in fn, a yield across it, a CUPTI failure, out of memory), inside a coroutine or not,
 * releases the session before the error goes on: a to-be-closed slot alone is not closed when a
 * coroutine dies of an error. */
static int l_pcsample(lua_State *L) {
    pcs_opts o;
    read_opts(L, &o);
    if (active) luaL_error(L, FN ": already sampling (cuda.pcsample cannot be nested)");
    if (gl_profile_running())
        luaL_error(L, FN ": cuda.profile is running (CUPTI's PC sampling and counters do not mix)");
    if (gl_capture_active())
        luaL_error(L, FN ": cannot sample during a stream capture (sample the graph's launch instead)");
    gl_require_gpu(L, FN);
    const char *why;
    if (!pcs_open(&why)) luaL_error(L, FN ": %s", why);

    session *s = gl_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    gl_setmetatable(L, SESSION_T); /* __gc: the last resort */
    int sidx = lua_gettop(L);
    lua_pushcfunction(L, pcsample_body);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, sidx);
    if (o.kernels) lua_pushvalue(L, o.kernels);
    else lua_pushnil(L);
    lua_pushvalue(L, o.programs);
    lua_pushlightuserdata(L, &o);
    int status = lua_pcall(L, 5, 1, 0);
    session_release(s);
    if (status != LUA_OK) return lua_error(L); /* the error as raised, unchanged */
    return 1;
}

/* cuda.pcsample_available() --> true, library | false, reason  (needs no GPU) */
static int l_pcsample_available(lua_State *L) {
    const char *why;
    if (!pcs_open(&why)) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, why);
        return 2;
    }
    const char *path = NULL;
    gl_cupti_library(&path, NULL);
    lua_pushboolean(L, 1);
    lua_pushstring(L, path);
    return 2;
}

/* ------------------------------------------------------------------------------------------
 * r:annotate(kernel) --> the kernel's source, each line with its share of samples and its top
 * stall reasons; without lines, its PCs by offset and why the lines are missing
 * ------------------------------------------------------------------------------------------ */
static const char *short_reason(const char *name) {
    size_t n = strlen(STALL_PREFIX);
    return strncmp(name, STALL_PREFIX, n) == 0 && name[n] ? name + n : name;
}

/* "long_scoreboard 80%, wait 12%" for the (up to) three largest counts of stalls table t. The
 * result is the script's table: what it changed is shown as far as it still reads as
 * {reason = count}, and the rest is left out (an empty string for a stalls value that is no table). */
static void push_top_stalls(lua_State *L, int t, lua_Integer total) {
    const char *name[3] = {NULL, NULL, NULL};
    lua_Integer best[3] = {0, 0, 0};
    if (lua_type(L, t) != LUA_TTABLE) {
        lua_pushliteral(L, "");
        return;
    }
    lua_pushnil(L);
    while (lua_next(L, t)) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_isinteger(L, -1)) { /* lua_tostring would convert a key in place */
            lua_pop(L, 1);
            continue;
        }
        lua_Integer n = lua_tointeger(L, -1);
        const char *k = lua_tostring(L, -2); /* anchored by the table */
        for (int i = 0; i < 3; i++) {
            if (n > best[i] || (n == best[i] && name[i] && strcmp(k, name[i]) < 0) || !name[i]) {
                for (int j = 2; j > i; j--) {
                    best[j] = best[j - 1];
                    name[j] = name[j - 1];
                }
                best[i] = n;
                name[i] = k;
                break;
            }
        }
        lua_pop(L, 1);
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < 3 && name[i]; i++) {
        char part[200];
        snprintf(part, sizeof part, "%s%s %.0f%%", i ? ", " : "", short_reason(name[i]),
                 total > 0 ? 100.0 * (double)best[i] / (double)total : 0.0);
        luaL_addstring(&b, part);
    }
    luaL_pushresult(&b);
}

/* The row for `which` (a name, a cuda.kernel or a row number) of result r at index 1. */
static int find_row(lua_State *L, int which) {
    const char *want = NULL;
    gl_kernel *k = gl_test_kernel(L, which);
    if (k) want = k->entry;
    else if (lua_type(L, which) == LUA_TSTRING) want = lua_tostring(L, which);
    else if (lua_isinteger(L, which)) {
        if (lua_rawgeti(L, 1, lua_tointeger(L, which)) == LUA_TTABLE) return lua_gettop(L);
        gl_argerror(L, which, "r:annotate", "no row %d (the result has %d)", (int)lua_tointeger(L, which),
                    (int)lua_rawlen(L, 1));
    } else {
        gl_typeerror(L, which, "r:annotate", "kernel name, cuda.kernel or row number");
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    for (lua_Integer i = 1; i <= n; i++) { /* a kernel object by its symbol, a name by either */
        if (lua_rawgeti(L, 1, i) != LUA_TTABLE) {
            lua_settop(L, which > 2 ? which : 2);
            continue;
        }
        int row = lua_gettop(L);
        bool same = gl_rawgetfield(L, row, "entry") == LUA_TSTRING && strcmp(lua_tostring(L, -1), want) == 0;
        if (!same && k == NULL)
            same = gl_rawgetfield(L, row, "kernel") == LUA_TSTRING && strcmp(lua_tostring(L, -1), want) == 0;
        if (same) {
            lua_settop(L, row);
            return row;
        }
        lua_settop(L, which > 2 ? which : 2);
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1) luaL_addstring(&b, ", ");
        lua_rawgeti(L, 1, i);
        gl_rawgetfield(L, -1, "kernel");
        lua_remove(L, -2);
        if (lua_isstring(L, -1)) luaL_addvalue(&b);
        else lua_pop(L, 1);
    }
    luaL_pushresult(&b);
    luaL_error(L, "r:annotate: no samples of kernel '%s' (sampled: %s)", k ? k->name : want,
               n ? lua_tostring(L, -1) : "none");
    return 0;
}

/* The file of the program's own source among the row's lines: the one named like the program,
 * else the one with the most samples. Pushes it (or nil). */
static void push_main_file(lua_State *L, int lines, const char *prog_name) {
    const char *base = prog_name ? strrchr(prog_name, '/') : NULL;
    base = base ? base + 1 : prog_name;
    lua_pushnil(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, lines);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, lines, i);
        gl_rawgetfield(L, -1, "file");
        const char *f = lua_tostring(L, -1);
        const char *fb = f ? strrchr(f, '/') : NULL;
        fb = fb ? fb + 1 : f;
        bool named = f && base && strcmp(fb, base) == 0;
        if (named || (i == 1 && f)) {
            lua_replace(L, -3);
            lua_pop(L, 1);
            if (named) return;
        } else {
            lua_pop(L, 2);
        }
    }
}

/* Text is built as a list of parts (the stack is used freely between them), joined at the end. */
static void emit(lua_State *L, int parts) { lua_rawseti(L, parts, (lua_Integer)lua_rawlen(L, parts) + 1); }

static void push_joined(lua_State *L, int parts) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_Integer n = (lua_Integer)lua_rawlen(L, parts);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, parts, i);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
}

static void add_pcs_listing(lua_State *L, int parts, int row, lua_Integer total) {
    gl_rawgetfield(L, row, "pcs");
    int pcs = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, pcs);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, pcs, i);
        int e = lua_gettop(L);
        gl_rawgetfield(L, e, "offset");
        gl_rawgetfield(L, e, "samples");
        gl_rawgetfield(L, e, "text");
        gl_rawgetfield(L, e, "stalls");
        push_top_stalls(L, lua_gettop(L), lua_tointeger(L, e + 2));
        char head[200];
        lua_Integer s = lua_tointeger(L, e + 2);
        snprintf(head, sizeof head, "%5.1f%%  /*%04llx*/  ", total > 0 ? 100.0 * (double)s / (double)total : 0.0,
                 (unsigned long long)lua_tointeger(L, e + 1));
        lua_pushstring(L, head);
        lua_pushstring(L, lua_isstring(L, e + 3) ? lua_tostring(L, e + 3) : "");
        lua_pushliteral(L, "  | ");
        lua_pushvalue(L, e + 5);
        lua_pushliteral(L, "\n");
        lua_concat(L, 5);
        emit(L, parts);
        lua_settop(L, pcs);
    }
    lua_pop(L, 1);
}

/* One source line: "share  top stalls | nnnn  text". */
static void add_source_line(lua_State *L, int parts, int by_line, lua_Integer lineno, const char *text,
                            size_t len, lua_Integer total) {
    char head[160];
    if (lua_rawgeti(L, by_line, lineno) == LUA_TTABLE) {
        int e = lua_gettop(L);
        gl_rawgetfield(L, e, "samples");
        lua_Integer s = lua_tointeger(L, -1);
        gl_rawgetfield(L, e, "stalls");
        push_top_stalls(L, lua_gettop(L), s);
        snprintf(head, sizeof head, "%5.1f%%  %-46.100s | %4lld  ",
                 total > 0 ? 100.0 * (double)s / (double)total : 0.0, lua_tostring(L, -1), (long long)lineno);
        lua_settop(L, e - 1);
    } else {
        lua_pop(L, 1);
        snprintf(head, sizeof head, "%6s  %-46s | %4lld  ", "", "", (long long)lineno);
    }
    lua_pushstring(L, head);
    lua_pushlstring(L, text, len);
    lua_pushliteral(L, "\n");
    lua_concat(L, 3);
    emit(L, parts);
}

static int l_annotate(lua_State *L) {
    if (!lua_istable(L, 1)) gl_typeerror(L, 1, "r:annotate", "cuda.pcsample result");
    luaL_checkstack(L, 40, "r:annotate"); /* the listing is built about 24 slots deep */
    lua_settop(L, 2);
    if (lua_isnil(L, 2) && lua_rawlen(L, 1) == 1) { /* the only kernel */
        lua_pushinteger(L, 1);
        lua_replace(L, 2);
    }
    int row = find_row(L, 2);
    gl_rawgetfield(L, row, "samples");
    lua_Integer total = lua_tointeger(L, -1);
    gl_rawgetfield(L, row, "kernel");
    gl_rawgetfield(L, row, "launches");
    lua_newtable(L);
    int parts = lua_gettop(L);
    lua_pushfstring(L, "%s: %I samples, %I launches\n", lua_tostring(L, parts - 2), total,
                    lua_tointeger(L, parts - 1));
    emit(L, parts);
    const char *source = NULL, *prog_name = NULL;
    size_t srclen = 0;
    if (gl_rawgetfield(L, row, "program") == LUA_TTABLE && gl_program_private(L, -1) == LUA_TTABLE) {
        if (gl_rawgetfield(L, -1, "source") == LUA_TSTRING) source = lua_tolstring(L, -1, &srclen);
        if (gl_rawgetfield(L, -2, "name") == LUA_TSTRING) prog_name = lua_tostring(L, -1);
    }
    gl_rawgetfield(L, row, "lines");
    int lines = lua_gettop(L);
    bool have_lines = lua_rawlen(L, lines) > 0;
    if (!have_lines || source == NULL) {
        if (gl_rawgetfield(L, row, "lines_missing") == LUA_TSTRING)
            lua_pushfstring(L, "(no source lines: %s)\n", lua_tostring(L, -1));
        else
            lua_pushstring(L, have_lines ? "(the program's source text is gone; lines by number below)\n"
                                         : "(no source lines: the SASS carries no line information)\n");
        emit(L, parts);
        lua_pop(L, 1);
        add_pcs_listing(L, parts, row, total);
        push_joined(L, parts);
        return 1;
    }
    push_main_file(L, lines, prog_name);
    const char *file = lua_tostring(L, -1);
    lua_newtable(L); /* line number -> the line's entry, for the main file */
    int by_line = lua_gettop(L);
    lua_Integer elsewhere = 0, nl = (lua_Integer)lua_rawlen(L, lines);
    for (lua_Integer i = 1; i <= nl; i++) {
        lua_rawgeti(L, lines, i);
        gl_rawgetfield(L, -1, "file");
        gl_rawgetfield(L, -2, "line");
        if (file && lua_isstring(L, -2) && strcmp(lua_tostring(L, -2), file) == 0) {
            lua_pushvalue(L, -3);
            lua_rawseti(L, by_line, lua_tointeger(L, -2));
        } else {
            elsewhere++;
        }
        lua_pop(L, 3);
    }
    char head[200];
    snprintf(head, sizeof head, "%6s  %-46s | line  source (%.100s)\n", "share", "top stalls", file ? file : "?");
    lua_pushstring(L, head);
    emit(L, parts);
    lua_Integer lineno = 0;
    for (const char *p = source, *end = source + srclen; p < end;) {
        const char *nlc = memchr(p, '\n', (size_t)(end - p));
        size_t len = nlc ? (size_t)(nlc - p) : (size_t)(end - p);
        add_source_line(L, parts, by_line, ++lineno, p, len, total);
        p += len + 1;
    }
    if (elsewhere) {
        lua_pushfstring(L, "%I more line(s) in other files (headers): see the row's lines\n", elsewhere);
        emit(L, parts);
    }
    push_joined(L, parts);
    return 1;
}

static int l_result_tostring(lua_State *L) {
    if (!lua_istable(L, 1)) gl_typeerror(L, 1, "cuda.pcsample result __tostring", "cuda.pcsample result");
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    gl_rawgetfield(L, 1, "elapsed");
    lua_pushfstring(L, "cuda.pcsample: %I kernel(s), %f s", n, lua_tonumber(L, -1));
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        gl_rawgetfield(L, -1, "kernel");
        gl_rawgetfield(L, -2, "samples");
        gl_rawgetfield(L, -3, "stalls");
        push_top_stalls(L, lua_gettop(L), lua_tointeger(L, -2));
        lua_pushfstring(L, "\n  %s: %I samples, %s", lua_tostring(L, -4), lua_tointeger(L, -3), lua_tostring(L, -1));
        lua_replace(L, -6);
        lua_pop(L, 4);
        lua_concat(L, 2);
    }
    return 1;
}

void gl_open_pcsample(lua_State *L) {
    static const luaL_Reg session_meta[] = {{"__gc", session_close}, {"__close", session_close}, {NULL, NULL}};
    gl_new_class(L, SESSION_T, session_meta, NULL, NULL);
    static const luaL_Reg result_meta[] = {{"__tostring", l_result_tostring}, {NULL, NULL}};
    static const luaL_Reg result_methods[] = {{"annotate", l_annotate}, {NULL, NULL}};
    gl_new_class(L, RESULT_T, result_meta, result_methods, NULL);
    static const luaL_Reg fns[] = {{"pcsample", l_pcsample}, {"pcsample_available", l_pcsample_available},
                                   {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
