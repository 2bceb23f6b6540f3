/*
 * fake_core.c — the heart of the driver stand-in (libfakecuda.so): entry-point lookup, fault
 * injection, the call log, devices, the primary context, modules, functions and launches.
 *
 * Nothing here runs a kernel. cuLaunchKernel checks its arguments the way the driver does and
 * writes one log line with the packed parameter bytes, so tests can check argument packing
 * byte for byte. Module images are searched for `.entry NAME(` (PTX, or PTX text embedded in
 * any image) to learn parameter lists, `.maxnreg`/`.maxntid` and static `.shared` sizes.
 */
#define _GNU_SOURCE
#include "fake.h"
#include "fake_stream.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------
 * Environment: injected failures, hang, log, device count (read once).
 * ------------------------------------------------------------------------------------------ */
#define MAX_FAIL_SPECS 16
typedef struct {
    char name[64];
    int code;
    long nth;   /* which call fails (1-based) */
    long calls; /* calls seen so far */
} fail_spec;

static struct {
    int ready;
    fail_spec fails[MAX_FAIL_SPECS];
    int nfails;
    int hang;
    int devices;
    FILE *log;
    CUresult sticky; /* once set, every call answers it */
} env;

static int is_sticky_code(int code) {
    switch (code) {
    case 214: /* ECC_UNCORRECTABLE */
    case 700: case 702: case 709: case 710: case 714: case 715: case 716: case 717:
    case 718: case 719:
        return 1;
    default:
        return 0;
    }
}

static void parse_fail_specs(const char *s) {
    while (s && *s && env.nfails < MAX_FAIL_SPECS) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char spec[128];
        if (len < sizeof spec) {
            memcpy(spec, s, len);
            spec[len] = '\0';
            char *c1 = strchr(spec, ':');
            if (c1) {
                *c1 = '\0';
                fail_spec *f = &env.fails[env.nfails];
                snprintf(f->name, sizeof f->name, "%.63s", spec);
                char *c2 = strchr(c1 + 1, ':');
                if (c2) *c2 = '\0';
                f->code = atoi(c1 + 1);
                f->nth = c2 ? atol(c2 + 1) : 1;
                if (f->nth < 1) f->nth = 1;
                if (f->code != 0) env.nfails++;
            }
        }
        s = end ? end + 1 : NULL;
    }
}

static void env_init(void) {
    if (env.ready) return;
    env.ready = 1;
    parse_fail_specs(getenv("GPULAB_FAKE_FAIL"));
    const char *h = getenv("GPULAB_FAKE_HANG");
    env.hang = h && *h && strcmp(h, "0") != 0;
    const char *d = getenv("GPULAB_FAKE_DEVICES");
    env.devices = d && *d ? atoi(d) : 1;
    if (env.devices < 0) env.devices = 0;
    /* As the driver: CUDA_VISIBLE_DEVICES=2,0 shows those devices only (as 0 and 1); an entry
     * that is not an existing ordinal ends the list. */
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (vis) {
        int shown = 0;
        for (const char *p = vis; *p;) {
            char *end;
            long o = strtol(p, &end, 10);
            if (end == p || o < 0 || o >= env.devices) break;
            shown++;
            p = *end == ',' ? end + 1 : end;
            if (*end != ',') break;
        }
        env.devices = shown;
    }
    const char *lp = getenv("GPULAB_FAKE_LOG");
    if (lp && *lp) env.log = fopen(lp, "a");
}

/* A sticky error poisons the context; device queries, error names and the driver version do
 * not need one and keep answering, as with the real driver. */
static int context_free_call(const char *name) {
    if (strncmp(name, "cuDevicePrimaryCtx", 18) == 0) return 0;
    return strncmp(name, "cuDevice", 8) == 0 || strcmp(name, "cuDriverGetVersion") == 0 ||
           strcmp(name, "cuInit") == 0 || strncmp(name, "cuGetError", 10) == 0;
}

CUresult fake_enter(const char *name) {
    env_init();
    if (env.sticky != CUDA_SUCCESS && !context_free_call(name)) return env.sticky;
    for (int i = 0; i < env.nfails; i++) {
        fail_spec *f = &env.fails[i];
        if (strcmp(f->name, name) != 0) continue;
        if (++f->calls != f->nth) continue;
        fake_log("fail %s %d", name, f->code);
        if (is_sticky_code(f->code)) env.sticky = (CUresult)f->code;
        return (CUresult)f->code;
    }
    return CUDA_SUCCESS;
}

bool fake_hang(void) {
    env_init();
    return env.hang != 0;
}

void fake_log(const char *fmt, ...) {
    env_init();
    if (env.log == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(env.log, fmt, ap);
    va_end(ap);
    fputc('\n', env.log);
    fflush(env.log);
}

/* ------------------------------------------------------------------------------------------
 * Entry points: cuGetProcAddress hands out fake_<name>, or a function that says "not supported".
 * ------------------------------------------------------------------------------------------ */
static CUresult not_supported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

/* This library's own handle: it is loaded RTLD_LOCAL, so RTLD_DEFAULT would not see it. */
static void *self_handle(void) {
    static void *self;
    if (self == NULL) {
        Dl_info info;
        if (dladdr((void *)not_supported, &info) && info.dli_fname)
            self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
        if (self == NULL) self = RTLD_DEFAULT;
    }
    return self;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
    (void)version;
    (void)flags;
    if (symbol == NULL || pfn == NULL) return CUDA_ERROR_INVALID_VALUE;
    /* GPULAB_FAKE_NO_ENTRY=cuX,cuY: entry points this "driver" lacks, as an older one would */
    const char *missing = getenv("GPULAB_FAKE_NO_ENTRY");
    size_t slen = strlen(symbol);
    for (const char *m = missing; m && *m;) {
        const char *end = strchr(m, ',');
        size_t mlen = end ? (size_t)(end - m) : strlen(m);
        if (mlen == slen && memcmp(m, symbol, slen) == 0) {
            *pfn = NULL;
            if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            return CUDA_ERROR_NOT_FOUND;
        }
        m = end ? end + 1 : m + mlen;
    }
    char name[160];
    snprintf(name, sizeof name, "fake_%s", symbol);
    void *p = dlsym(self_handle(), name);
    if (p == NULL) p = (void *)not_supported;
    *pfn = p;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Driver, errors.
 * ------------------------------------------------------------------------------------------ */
CUresult fake_cuInit(unsigned flags) {
    FAKE_ENTER("cuInit");
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (env.devices == 0) return CUDA_ERROR_NO_DEVICE;
    /* The real driver loads a tool (compute-sanitizer) from here; the stand-in only says so. */
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    if (injection && *injection) fake_log("injection %s", injection);
    return CUDA_SUCCESS;
}

CUresult fake_cuDriverGetVersion(int *v) {
    FAKE_ENTER("cuDriverGetVersion");
    if (v == NULL) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

static const struct {
    int code;
    const char *name, *text;
} error_table[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space"},
    {718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult r) {
    for (size_t i = 0; i < sizeof error_table / sizeof error_table[0]; i++)
        if (error_table[i].code == (int)r) return (int)i;
    return -1;
}

/* Like the driver, the error-name functions answer even after a sticky error. */
CUresult fake_cuGetErrorName(CUresult r, const char **out) {
    FAKE_ENTER("cuGetErrorName");
    int i = error_index(r);
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (i < 0) {
        *out = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = error_table[i].name;
    return CUDA_SUCCESS;
}

CUresult fake_cuGetErrorString(CUresult r, const char **out) {
    FAKE_ENTER("cuGetErrorString");
    int i = error_index(r);
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (i < 0) {
        *out = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = error_table[i].text;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Devices: an H100/H200-like Hopper part.
 * ------------------------------------------------------------------------------------------ */
#define FAKE_SMEM_OPTIN (227 * 1024)
#define FAKE_SMEM_PER_SM (228 * 1024)
#define FAKE_SMEM_RESERVED 1024
#define FAKE_REGS_PER_SM 65536
#define FAKE_MAX_PERSISTING_L2 39321600      /* as an H100/H200 reports */
#define FAKE_MAX_ACCESS_POLICY_WINDOW 134213632
#define FAKE_THREADS_PER_SM 2048
#define FAKE_BLOCKS_PER_SM 32

static int valid_device(CUdevice d) { return d >= 0 && d < env.devices; }

CUresult fake_cuDeviceGetCount(int *n) {
    FAKE_ENTER("cuDeviceGetCount");
    if (n == NULL) return CUDA_ERROR_INVALID_VALUE;
    *n = env.devices;
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice *d, int ordinal) {
    FAKE_ENTER("cuDeviceGet");
    if (d == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char *name, int len, CUdevice d) {
    FAKE_ENTER("cuDeviceGetName");
    if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "gpulab stand-in");
    return CUDA_SUCCESS;
}

CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
    FAKE_ENTER("cuDeviceTotalMem");
    if (bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)150754820096ULL; /* 140.4 GiB, as an H200 reports */
    return CUDA_SUCCESS;
}

/* GPULAB_FAKE_CC="8.0" makes the stand-in an older device (default 9.0, Hopper): its compute
 * capability answers that, and without 9.x it has no clusters and no programmatic dependent
 * launch (CLUSTER_LAUNCH 0; such launches and the cluster queries answer NOT_SUPPORTED). */
static void read_cc(int *major, int *minor) {
    static int ready, maj = 9, min = 0;
    if (!ready) {
        ready = 1;
        const char *cc = getenv("GPULAB_FAKE_CC");
        int a, b;
        if (cc && sscanf(cc, "%d.%d", &a, &b) == 2 && a > 0 && b >= 0) {
            maj = a;
            min = b;
        }
    }
    *major = maj;
    *minor = min;
}

static int fake_cc_major(void) {
    int a, b;
    read_cc(&a, &b);
    return a;
}

static int fake_cc_minor(void) {
    int a, b;
    read_cc(&a, &b);
    return b;
}

static bool fake_has_clusters(void) { return fake_cc_major() >= 9; }

static int device_attribute(CUdevice_attribute a) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 48 * 1024;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x19;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 3201000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 60 * 1024 * 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return FAKE_THREADS_PER_SM;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return fake_cc_major();
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return fake_cc_minor();
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return FAKE_SMEM_PER_SM;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return FAKE_REGS_PER_SM;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return FAKE_SMEM_OPTIN;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return FAKE_BLOCKS_PER_SM;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return FAKE_MAX_PERSISTING_L2;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return FAKE_MAX_ACCESS_POLICY_WINDOW;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return FAKE_SMEM_RESERVED;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return fake_has_clusters();
    default: return 0;
    }
}

CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    FAKE_ENTER("cuDeviceGetAttribute");
    if (v == NULL || (int)a < 1 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
    *v = device_attribute(a);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Primary contexts: one static object per device; the handle is its address.
 * ------------------------------------------------------------------------------------------ */
#define FAKE_MAX_DEVICES 16
static struct fake_ctx {
    int device;
    int refs;
} contexts[FAKE_MAX_DEVICES];
/* initial-exec: the few bytes come from the static TLS glibc reserves for dlopen'ed libraries,
 * so no dynamic (__tls_get_addr) block exists. With one, LeakSanitizer (GCC 12) recorded a bad
 * range for it ("DTLS 5 at 0x37-0x800001139") and its tracer crashed at exit in some tests. */
static __thread CUcontext current __attribute__((tls_model("initial-exec")));

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    FAKE_ENTER("cuDevicePrimaryCtxRetain");
    if (c == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d) || d >= FAKE_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    contexts[d].device = d;
    contexts[d].refs++;
    *c = (CUcontext)&contexts[d];
    return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d) {
    FAKE_ENTER("cuDevicePrimaryCtxRelease");
    if (!valid_device(d) || d >= FAKE_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    if (contexts[d].refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    contexts[d].refs--;
    return CUDA_SUCCESS;
}

int fake_context_device(CUcontext c) {
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        if (c == (CUcontext)&contexts[d]) return contexts[d].refs > 0 ? d : -1;
    return -1;
}

int fake_current_device(void) { return fake_context_device(current); }

int fake_device_count(void) {
    env_init();
    return env.devices < FAKE_MAX_DEVICES ? env.devices : FAKE_MAX_DEVICES;
}

CUresult fake_cuCtxSetCurrent(CUcontext c) {
    FAKE_ENTER("cuCtxSetCurrent");
    current = c;
    return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext *c) {
    FAKE_ENTER("cuCtxGetCurrent");
    if (c == NULL) return CUDA_ERROR_INVALID_VALUE;
    *c = current;
    return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize(void) {
    FAKE_ENTER("cuCtxSynchronize");
    if (current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    if (fake_capture_forbids("cuCtxSynchronize")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    while (fake_work_blocked()) usleep(5000);
    fake_log("ctx_sync");
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Reading an image: the text of `.entry NAME(...)` when present.
 * ------------------------------------------------------------------------------------------ */
#define FAKE_MAX_PARAMS 1024 /* gpulab's GL_MAX_PARAMS; the driver's limit is 32,764 bytes */
typedef struct fake_param {
    size_t offset, size;
} fake_param;

typedef struct fake_func {
    struct fake_func *next;
    struct fake_module *module;
    char *name;
    int nparams; /* -1: unknown (binary image without PTX text) */
    fake_param params[FAKE_MAX_PARAMS];
    int regs, static_smem, max_threads, max_dynamic_smem;
    int cluster[3];         /* REQUIRED_CLUSTER_*: from .reqnctapercluster or set; 0 = none */
    bool cluster_compiled;  /* .reqnctapercluster: setting REQUIRED_CLUSTER_* is not permitted */
    bool cluster_must_be_set; /* .explicitcluster (or compiled-in dims) */
    int nonportable;        /* NON_PORTABLE_CLUSTER_SIZE_ALLOWED */
    int sched_policy;       /* CLUSTER_SCHEDULING_POLICY_PREFERENCE */
    int carveout;           /* PREFERRED_SHARED_MEMORY_CARVEOUT, -1 = no preference */
} fake_func;

typedef struct fake_global { /* a __device__ / __constant__ variable, zero-initialised */
    struct fake_global *next;
    char *name;
    void *mem;
    size_t size;
} fake_global;

typedef struct fake_module {
    struct fake_module *prev, *next; /* every loaded module, as a driver keeps them: a module
                                        left loaded (poisoned context) is still reachable */
    char *image;
    size_t len;
    fake_func *funcs;
    fake_global *globals;
} fake_module;

static fake_module *loaded_modules;

static const char *find_bytes(const char *hay, size_t hlen, const char *needle, size_t nlen) {
    return nlen == 0 ? hay : memmem(hay, hlen, needle, nlen);
}

static int is_ident(int c) { return isalnum(c) || c == '_' || c == '$' || c == '.'; }

/* The position just after `.entry NAME` (followed by a non-identifier char), or NULL. */
static const char *find_entry(const char *img, size_t len, const char *name) {
    size_t nlen = strlen(name);
    const char *p = img, *end = img + len;
    while ((p = find_bytes(p, (size_t)(end - p), ".entry", 6)) != NULL) {
        const char *q = p + 6;
        while (q < end && isspace((unsigned char)*q)) q++;
        if ((size_t)(end - q) >= nlen && memcmp(q, name, nlen) == 0 &&
            (q + nlen == end || !is_ident((unsigned char)q[nlen])))
            return q + nlen;
        p += 6;
    }
    return NULL;
}

static size_t ptx_type_size(const char *t, size_t n) {
    if (n < 2) return 0;
    if (n == 4 && memcmp(t, "pred", 4) == 0) return 1;
    /* packed types: the bits after the first letter are not the size */
    if (n == 4 && memcmp(t, "bf16", 4) == 0) return 2;
    if ((n == 6 && memcmp(t, "bf16x2", 6) == 0) || (n == 5 && memcmp(t, "f16x2", 5) == 0)) return 4;
    int bits = atoi(t + 1);
    if (strchr("usfb", t[0]) == NULL || bits < 8 || bits % 8) return 0;
    return (size_t)bits / 8;
}

/* Parses `( .param .type [.align N] name[[count]], ... )` starting at p. */
static int parse_params(const char *p, const char *end, fake_param *out) {
    while (p < end && *p != '(' && *p != '{') p++;
    if (p >= end || *p != '(') return 0;
    const char *close = memchr(p, ')', (size_t)(end - p));
    if (close == NULL) return -1;
    int n = 0;
    size_t offset = 0;
    const char *q = p + 1;
    while (n < FAKE_MAX_PARAMS) {
        const char *par = find_bytes(q, (size_t)(close - q), ".param", 6);
        if (par == NULL) break;
        const char *stop = memchr(par, ',', (size_t)(close - par));
        if (stop == NULL) stop = close;
        size_t elem = 0, align = 0, count = 1;
        for (const char *t = par + 6; t < stop;) {
            while (t < stop && isspace((unsigned char)*t)) t++;
            const char *w = t;
            while (t < stop && !isspace((unsigned char)*t) && *t != '[') t++;
            size_t wl = (size_t)(t - w);
            if (wl == 6 && memcmp(w, ".align", 6) == 0) {
                align = strtoul(t, (char **)&t, 10);
            } else if (wl > 1 && w[0] == '.' && elem == 0) {
                elem = ptx_type_size(w + 1, wl - 1);
            } else if (t < stop && *t == '[') {
                count = strtoul(t + 1, NULL, 10);
                t = memchr(t, ']', (size_t)(stop - t));
                if (t == NULL) t = stop; else t++;
            }
        }
        if (elem == 0) elem = 1;
        if (align == 0) align = elem;
        size_t size = elem * (count ? count : 1);
        offset = (offset + align - 1) / align * align;
        out[n].offset = offset;
        out[n].size = size;
        offset += size;
        n++;
        q = stop;
    }
    return n;
}

/* The body `{...}` of the entry starting after its parameter list. */
static void entry_body(const char *p, const char *end, const char **b0, const char **b1) {
    *b0 = *b1 = NULL;
    const char *open = memchr(p, '{', (size_t)(end - p));
    if (open == NULL) return;
    int depth = 0;
    for (const char *q = open; q < end; q++) {
        if (*q == '{') depth++;
        if (*q == '}' && --depth == 0) {
            *b0 = open;
            *b1 = q;
            return;
        }
    }
}

static long directive_number(const char *p, const char *end, const char *dir) {
    const char *d = find_bytes(p, (size_t)(end - p), dir, strlen(dir));
    if (d == NULL) return -1;
    return strtol(d + strlen(dir), NULL, 10);
}

/* Sum of `.shared ... name[N]` arrays declared in the body (element size times N). */
static int static_shared(const char *b0, const char *b1) {
    long total = 0;
    const char *p = b0;
    while (p && (p = find_bytes(p, (size_t)(b1 - p), ".shared", 7)) != NULL) {
        const char *semi = memchr(p, ';', (size_t)(b1 - p));
        if (semi == NULL) break;
        const char *br = memchr(p, '[', (size_t)(semi - p));
        size_t elem = 1;
        for (const char *t = p + 7; t < semi; t++)
            if (*t == '.' && (t[1] == 'b' || t[1] == 'u' || t[1] == 's' || t[1] == 'f') &&
                isdigit((unsigned char)t[2])) {
                elem = (size_t)atoi(t + 2) / 8;
                break;
            }
        if (br && br[1] != ']') total += (long)elem * strtol(br + 1, NULL, 10);
        p = semi;
    }
    return (int)total;
}

/* `.reqnctapercluster X[, Y[, Z]]` (what __cluster_dims__ compiles to) and `.explicitcluster`,
 * between the parameter list and the body: the REQUIRED_CLUSTER_* attributes and
 * CLUSTER_SIZE_MUST_BE_SET. */
static void read_cluster_directives(fake_func *f, const char *p, const char *body) {
    const char *d = find_bytes(p, (size_t)(body - p), ".reqnctapercluster", 18);
    if (d) {
        const char *q = d + 18;
        bool more = true;
        for (int i = 0; i < 3; i++) {
            char *next = (char *)q;
            long v = more ? strtol(q, &next, 10) : 1; /* omitted trailing dimensions are 1 */
            f->cluster[i] = next != q && v > 0 && v <= 1024 ? (int)v : 1;
            q = next;
            while (q < body && (*q == ' ' || *q == '\t')) q++;
            more = q < body && *q == ',';
            if (more) q++;
        }
        f->cluster_compiled = true;
        f->cluster_must_be_set = true;
    }
    if (find_bytes(p, (size_t)(body - p), ".explicitcluster", 16)) f->cluster_must_be_set = true;
}

static void describe_function(fake_func *f, const char *after_name, const char *end) {
    f->nparams = parse_params(after_name, end, f->params);
    const char *b0, *b1;
    entry_body(after_name, end, &b0, &b1);
    f->regs = 32;
    f->max_threads = 1024;
    f->static_smem = 0;
    if (b0) {
        long r = directive_number(after_name, b0, ".maxnreg");
        if (r > 0 && r <= 255) f->regs = (int)r;
        long t = directive_number(after_name, b0, ".maxntid");
        if (t > 0 && t <= 1024) f->max_threads = (int)t;
        f->static_smem = static_shared(b0, b1);
        read_cluster_directives(f, after_name, b0);
    }
    f->carveout = -1;
    f->max_dynamic_smem = 48 * 1024 - f->static_smem;
    if (f->max_dynamic_smem < 0) f->max_dynamic_smem = 0;
}

/* Length of an image handed to cuModuleLoadData: ELF and fatbin carry it in their header. */
static size_t image_length(const void *image) {
    const unsigned char *b = image;
    if (memcmp(b, "\x7f" "ELF", 4) == 0 && b[4] == 2) { /* ELF64: section table ends it */
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, b + 0x28, 8);
        memcpy(&shentsize, b + 0x3a, 2);
        memcpy(&shnum, b + 0x3c, 2);
        return (size_t)(shoff + (uint64_t)shentsize * shnum);
    }
    uint32_t magic;
    memcpy(&magic, b, 4);
    if (magic == 0xBA55ED50u) { /* fatbin: 16-byte header with the payload size */
        uint16_t hsize;
        uint64_t fsize;
        memcpy(&hsize, b + 6, 2);
        memcpy(&fsize, b + 8, 8);
        return (size_t)(hsize + fsize);
    }
    return strlen(image) + 1;
}

/* ------------------------------------------------------------------------------------------
 * Modules and functions.
 * ------------------------------------------------------------------------------------------ */
/* Writes `text` into the JIT error log buffer when the caller passed one, as ptxas would. */
static void jit_error_log(unsigned nopts, const CUjit_option *opts, void **vals, const char *text) {
    char *buf = NULL;
    size_t cap = 0;
    for (unsigned i = 0; opts && vals && i < nopts; i++) {
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER) buf = vals[i];
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) cap = (size_t)(uintptr_t)vals[i];
    }
    if (buf && cap) snprintf(buf, cap, "%s", text);
}

static int is_text_image(const void *image) {
    const unsigned char *b = image;
    uint32_t magic;
    memcpy(&magic, b, 4);
    return memcmp(b, "\x7f" "ELF", 4) != 0 && magic != 0xBA55ED50u;
}

CUresult fake_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned nopts,
                                 CUjit_option *opts, void **vals) {
    CUresult r = fake_enter("cuModuleLoadDataEx");
    if (r == CUDA_ERROR_INVALID_PTX)
        jit_error_log(nopts, opts, vals, "ptxas fatal   : failure injected by GPULAB_FAKE_FAIL");
    if (r != CUDA_SUCCESS) return r;
    if (m == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    /* text that is not PTX fails as the JIT would: every PTX module starts with .version */
    if (is_text_image(image) && strstr(image, ".version") == NULL) {
        jit_error_log(nopts, opts, vals, "ptxas application ptx input, line 1; fatal   : "
                                         "Missing .version directive at start of file");
        return CUDA_ERROR_INVALID_PTX;
    }
    fake_module *mod = calloc(1, sizeof *mod);
    if (mod == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    mod->len = image_length(image);
    mod->image = malloc(mod->len ? mod->len : 1);
    if (mod->image == NULL) {
        free(mod);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(mod->image, image, mod->len);
    mod->next = loaded_modules;
    if (loaded_modules) loaded_modules->prev = mod;
    loaded_modules = mod;
    fake_log("module_load %p bytes=%zu", (void *)mod, mod->len);
    *m = (CUmodule)mod;
    return CUDA_SUCCESS;
}

CUresult fake_cuModuleUnload(CUmodule m) {
    FAKE_ENTER("cuModuleUnload");
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    fake_module *mod = (fake_module *)m;
    if (mod->prev) mod->prev->next = mod->next; else loaded_modules = mod->next;
    if (mod->next) mod->next->prev = mod->prev;
    for (fake_func *f = mod->funcs, *next; f; f = next) {
        next = f->next;
        free(f->name);
        free(f);
    }
    for (fake_global *g = mod->globals, *next; g; g = next) {
        next = g->next;
        fake_untrack_device(g->mem);
        free(g->mem);
        free(g->name);
        free(g);
    }
    fake_log("module_unload %p", (void *)mod);
    free(mod->image);
    free(mod);
    return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name) {
    FAKE_ENTER("cuModuleGetFunction");
    if (out == NULL || m == NULL || name == NULL || *name == '\0') return CUDA_ERROR_INVALID_VALUE;
    fake_module *mod = (fake_module *)m;
    for (fake_func *f = mod->funcs; f; f = f->next)
        if (strcmp(f->name, name) == 0) {
            *out = (CUfunction)f;
            return CUDA_SUCCESS;
        }
    const char *end = mod->image + mod->len;
    const char *after = find_entry(mod->image, mod->len, name);
    if (after == NULL && find_bytes(mod->image, mod->len, name, strlen(name)) == NULL)
        return CUDA_ERROR_NOT_FOUND;
    fake_func *f = calloc(1, sizeof *f);
    if (f == NULL || (f->name = strdup(name)) == NULL) {
        free(f);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    f->module = mod;
    if (after)
        describe_function(f, after, end);
    else {
        f->nparams = -1;
        f->carveout = -1;
        f->regs = 32;
        f->max_threads = 1024;
        f->max_dynamic_smem = 48 * 1024;
    }
    f->next = mod->funcs;
    mod->funcs = f;
    *out = (CUfunction)f;
    return CUDA_SUCCESS;
}

/* The size of variable `name` declared in PTX text (`[.visible] .global|.const [.align N]
 * .TYPE NAME[N]...;`), or 0 when there is no such declaration. */
static size_t ptx_variable_size(const char *img, size_t len, const char *name) {
    size_t nlen = strlen(name);
    const char *end = img + len;
    for (const char *line = img; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL) eol = end;
        const char *q = line;
        while (q < eol && isspace((unsigned char)*q)) q++;
        if ((size_t)(eol - q) > 9 && memcmp(q, ".visible ", 9) == 0) q += 9;
        bool var = ((size_t)(eol - q) > 8 && memcmp(q, ".global ", 8) == 0) ||
                   ((size_t)(eol - q) > 7 && memcmp(q, ".const ", 7) == 0);
        const char *at = var ? find_bytes(q, (size_t)(eol - q), name, nlen) : NULL;
        while (at && !((at == q || isspace((unsigned char)at[-1])) &&
                       (at + nlen < eol && (at[nlen] == '[' || at[nlen] == ';' || at[nlen] == ' ' || at[nlen] == '='))))
            at = find_bytes(at + 1, (size_t)(eol - at - 1), name, nlen);
        if (at) {
            size_t elem = 0;
            for (const char *t = q; t < at; t++) /* the type: the last .uN/.sN/.fN/.bN word */
                if (*t == '.' && strchr("usfb", t[1]) && isdigit((unsigned char)t[2])) {
                    size_t w = 1;
                    while (t + w < at && !isspace((unsigned char)t[w])) w++;
                    size_t e = ptx_type_size(t + 1, w - 1);
                    if (e) elem = e;
                }
            size_t count = 1;
            for (const char *t = at + nlen; t < eol && *t == '['; ) {
                count *= strtoul(t + 1, (char **)&t, 10);
                if (t < eol && *t == ']') t++;
            }
            return elem * count;
        }
        line = eol + 1;
    }
    return 0;
}

/* The size of object symbol `name` in an ELF64 image's symbol table (a cubin's variables are
 * there, local or global), or 0. Every offset is checked against the image's length. */
static size_t elf_variable_size(const unsigned char *b, size_t len, const char *name) {
    if (len < 64 || memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2) return 0;
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, b + 0x28, 8);
    memcpy(&shentsize, b + 0x3a, 2);
    memcpy(&shnum, b + 0x3c, 2);
    if (shentsize < 64 || shoff > len || (uint64_t)shentsize * shnum > len - shoff) return 0;
    for (unsigned i = 0; i < shnum; i++) {
        const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
        uint32_t type, link;
        uint64_t off, size, entsize;
        memcpy(&type, sh + 4, 4);
        if (type != 2) continue; /* SHT_SYMTAB */
        memcpy(&off, sh + 0x18, 8);
        memcpy(&size, sh + 0x20, 8);
        memcpy(&link, sh + 0x28, 4);
        memcpy(&entsize, sh + 0x38, 8);
        if (link >= shnum || entsize < 24 || off > len || size > len - off) return 0;
        const unsigned char *strsh = b + shoff + (uint64_t)link * shentsize;
        uint64_t stroff, strsize;
        memcpy(&stroff, strsh + 0x18, 8);
        memcpy(&strsize, strsh + 0x20, 8);
        if (stroff > len || strsize > len - stroff) return 0;
        for (uint64_t s = 0; s + entsize <= size; s += entsize) {
            const unsigned char *sym = b + off + s;
            uint32_t nameoff;
            uint64_t symsize;
            memcpy(&nameoff, sym, 4);
            memcpy(&symsize, sym + 16, 8);
            if ((sym[4] & 0xf) != 1 || nameoff >= strsize) continue; /* STT_OBJECT */
            const char *n = (const char *)b + stroff + nameoff;
            size_t left = (size_t)(strsize - nameoff);
            if (strnlen(n, left) < left && strcmp(n, name) == 0) return (size_t)symsize;
        }
    }
    return 0;
}

CUresult fake_cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule m, const char *name) {
    FAKE_ENTER("cuModuleGetGlobal");
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (name == NULL || *name == '\0') return CUDA_ERROR_INVALID_VALUE;
    fake_module *mod = (fake_module *)m;
    fake_global *g = mod->globals;
    while (g && strcmp(g->name, name) != 0) g = g->next;
    if (g == NULL) {
        size_t size = is_text_image(mod->image)
                          ? ptx_variable_size(mod->image, mod->len, name)
                          : elf_variable_size((const unsigned char *)mod->image, mod->len, name);
        if (size == 0) return CUDA_ERROR_NOT_FOUND;
        g = calloc(1, sizeof *g);
        if (g == NULL || (g->name = strdup(name)) == NULL || (g->mem = calloc(1, size)) == NULL ||
            !fake_track_device(g->mem, size)) {
            if (g) { free(g->mem); free(g->name); free(g); }
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g->size = size;
        g->next = mod->globals;
        mod->globals = g;
    }
    if (dptr) *dptr = (CUdeviceptr)(uintptr_t)g->mem;
    if (bytes) *bytes = g->size;
    fake_log("module_get_global %s bytes=%zu", name, g->size);
    return CUDA_SUCCESS;
}

/* The cluster attributes exist from compute capability 9.0; an older device answers
 * CUDA_ERROR_INVALID_VALUE for them. */
static bool is_cluster_attribute(CUfunction_attribute a) {
    return a >= CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET &&
           a <= CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
}

CUresult fake_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction fn) {
    FAKE_ENTER("cuFuncGetAttribute");
    if (v == NULL || fn == NULL) return CUDA_ERROR_INVALID_VALUE;
    const fake_func *f = (const fake_func *)fn;
    if (is_cluster_attribute(a) && !fake_has_clusters()) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = f->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = f->static_smem; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = f->regs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dynamic_smem; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *v = f->carveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *v = f->cluster_must_be_set; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *v = f->cluster[0]; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *v = f->cluster[1]; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *v = f->cluster[2]; break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *v = f->nonportable; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *v = f->sched_policy; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* The settable attributes, checked as the driver does; the rest are read-only (INVALID_VALUE).
 * REQUIRED_CLUSTER_* compiled in by __cluster_dims__ cannot be changed (NOT_PERMITTED). */
CUresult fake_cuFuncSetAttribute(CUfunction fn, CUfunction_attribute a, int v) {
    FAKE_ENTER("cuFuncSetAttribute");
    if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
    fake_func *f = (fake_func *)fn;
    if (is_cluster_attribute(a) && !fake_has_clusters()) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (v < 0 || v + f->static_smem > FAKE_SMEM_OPTIN) return CUDA_ERROR_INVALID_VALUE;
        f->max_dynamic_smem = v;
        fake_log("func_set_attribute %s max_dynamic_smem=%d", f->name, v);
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (v < -1 || v > 100) return CUDA_ERROR_INVALID_VALUE;
        f->carveout = v;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        if (f->cluster_compiled) return CUDA_ERROR_NOT_PERMITTED;
        if (v < 0) return CUDA_ERROR_INVALID_VALUE;
        f->cluster[a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = v;
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        if (v != 0 && v != 1) return CUDA_ERROR_INVALID_VALUE;
        f->nonportable = v;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        if (v < 0 || v > 2) return CUDA_ERROR_INVALID_VALUE;
        f->sched_policy = v;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    fake_log("func_set_attribute %s attr%d=%d", f->name, (int)a, v);
    return CUDA_SUCCESS;
}

CUresult fake_cuFuncGetParamInfo(CUfunction fn, size_t index, size_t *offset, size_t *size) {
    FAKE_ENTER("cuFuncGetParamInfo");
    if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
    const fake_func *f = (const fake_func *)fn;
    if (f->nparams < 0) return CUDA_ERROR_NOT_SUPPORTED; /* a binary image: not read here */
    if (index >= (size_t)f->nparams || offset == NULL || size == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *offset = f->params[index].offset;
    *size = f->params[index].size;
    return CUDA_SUCCESS;
}

/* The occupancy model gpulab's k:occupancy documents: threads, registers (allocated per warp in
 * units of 256), shared memory (with the per-block reservation) and the blocks-per-SM cap. */
static int blocks_per_sm(const fake_func *f, int block, size_t dyn_smem) {
    if (block > f->max_threads) return 0;
    int warps = (block + 31) / 32;
    long best = FAKE_BLOCKS_PER_SM;
    long by_threads = FAKE_THREADS_PER_SM / (warps * 32);
    if (by_threads < best) best = by_threads;
    long regs_per_warp = ((long)f->regs * 32 + 255) / 256 * 256;
    long by_regs = (FAKE_REGS_PER_SM / regs_per_warp) / warps;
    if (by_regs < best) best = by_regs;
    long smem = ((long)f->static_smem + (long)dyn_smem + FAKE_SMEM_RESERVED + 127) / 128 * 128;
    long by_smem = FAKE_SMEM_PER_SM / smem;
    if (by_smem < best) best = by_smem;
    return (int)best;
}

CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction fn, int block,
                                                          size_t dyn_smem) {
    FAKE_ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (n == NULL || fn == NULL || block <= 0) return CUDA_ERROR_INVALID_VALUE;
    *n = blocks_per_sm((const fake_func *)fn, block, dyn_smem);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Clusters. A model for plumbing tests only: no GPU result is claimed from it.
 *
 * A cluster's blocks run in one GPC (graphics processing cluster). The stand-in's 132 SMs are
 * laid out as 7 GPCs of 18 SMs and one of 6 (the H100/H200 SXM parts ship 8 GPCs with some
 * TPCs fused off, so their GPCs are uneven; this layout keeps the sum and the largest GPC).
 * Clusters per GPC = floor(SMs in the GPC × blocks per SM / blocks per cluster), summed over the
 * GPCs where at least one cluster fits. Portable clusters hold up to 8 blocks, non-portable
 * ones (NON_PORTABLE_CLUSTER_SIZE_ALLOWED) up to 16.
 * ------------------------------------------------------------------------------------------ */
static const int gpc_sms[] = {18, 18, 18, 18, 18, 18, 18, 6};
#define FAKE_NGPC ((int)(sizeof gpc_sms / sizeof gpc_sms[0]))
#define FAKE_CLUSTER_PORTABLE 8
#define FAKE_CLUSTER_NONPORTABLE 16

static unsigned long cluster_blocks(const int c[3]) {
    return (unsigned long)c[0] * (unsigned long)c[1] * (unsigned long)c[2];
}

/* The function's required shape (REQUIRED_CLUSTER_*), in out: 0 when none, 1 when out holds it,
 * -1 when one set at run time is partial (the driver wants all three 0 or all positive; axes a
 * compiled-in shape leaves out are 1). */
static int required_cluster(const fake_func *f, int out[3]) {
    int positive = 0;
    for (int i = 0; i < 3; i++) positive += f->cluster[i] > 0;
    if (positive == 0) return 0;
    if (positive < 3 && !f->cluster_compiled) return -1;
    for (int i = 0; i < 3; i++) out[i] = f->cluster[i] > 0 ? f->cluster[i] : 1;
    return 1;
}

/* The size checks every cluster use shares (CUDA_ERROR_INVALID_CLUSTER_SIZE when broken). */
static CUresult check_cluster_size(const fake_func *f, const int c[3]) {
    if (c[0] <= 0 || c[1] <= 0 || c[2] <= 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    unsigned long n = cluster_blocks(c);
    if (n > FAKE_CLUSTER_NONPORTABLE) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (n > FAKE_CLUSTER_PORTABLE && !f->nonportable) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    /* against the required shape: every axis of a whole one; of one set at run time with axes left
       0, only the axes it sets (a launch with a cluster attribute, as the H200's driver takes it) */
    for (int i = 0; i < 3; i++)
        if ((f->cluster[i] > 0 && c[i] != f->cluster[i]) || (f->cluster_compiled && f->cluster[i] <= 0 && c[i] != 1))
            return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    return CUDA_SUCCESS;
}

static bool grid_divisible(const unsigned g[3], const int c[3]) {
    for (int i = 0; i < 3; i++)
        if (g[i] % (unsigned)c[i] != 0) return false;
    return true;
}

/* The cluster a configuration asks for: its CLUSTER_DIMENSION attribute, else the function's
 * required one. False when there is neither. */
static bool config_cluster(const fake_func *f, const CUlaunchConfig *cfg, int c[3]) {
    for (unsigned i = 0; cfg->attrs && i < cfg->numAttrs; i++)
        if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            c[0] = (int)cfg->attrs[i].value.clusterDim.x;
            c[1] = (int)cfg->attrs[i].value.clusterDim.y;
            c[2] = (int)cfg->attrs[i].value.clusterDim.z;
            return true;
        }
    return required_cluster(f, c) == 1; /* a partial one: INVALID_VALUE, as none */
}

static int clusters_in_gpcs(long per_sm, unsigned long blocks) {
    long total = 0;
    for (int i = 0; i < FAKE_NGPC; i++) {
        long fit = gpc_sms[i] * per_sm;
        if (blocks <= (unsigned long)fit) total += fit / (long)blocks;
    }
    return (int)total;
}

static CUresult check_cluster_query(const CUlaunchConfig *cfg, CUfunction fn) {
    if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (cfg == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_has_clusters()) return CUDA_ERROR_NOT_SUPPORTED;
    const unsigned b[3] = {cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ};
    if (!b[0] || !b[1] || !b[2] || (unsigned long long)b[0] * b[1] * b[2] > 1024) return CUDA_ERROR_INVALID_VALUE;
    if (cfg->sharedMemBytes > (unsigned)((const fake_func *)fn)->max_dynamic_smem) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult fake_cuOccupancyMaxActiveClusters(int *n, CUfunction fn, const CUlaunchConfig *cfg) {
    FAKE_ENTER("cuOccupancyMaxActiveClusters");
    if (n == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_cluster_query(cfg, fn);
    if (r != CUDA_SUCCESS) return r;
    const fake_func *f = (const fake_func *)fn;
    int c[3];
    if (!config_cluster(f, cfg, c)) return CUDA_ERROR_INVALID_VALUE; /* no cluster given */
    if ((r = check_cluster_size(f, c)) != CUDA_SUCCESS) return r;
    const unsigned g[3] = {cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ};
    if (!g[0] || !g[1] || !g[2] || !grid_divisible(g, c)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    int block = (int)(cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ);
    *n = clusters_in_gpcs(blocks_per_sm(f, block, cfg->sharedMemBytes), cluster_blocks(c));
    return CUDA_SUCCESS;
}

/* 16 with NON_PORTABLE_CLUSTER_SIZE_ALLOWED, else 8, less while the cluster does not fit in
 * the largest GPC; the configuration's cluster attribute is ignored, as by the driver. */
CUresult fake_cuOccupancyMaxPotentialClusterSize(int *n, CUfunction fn, const CUlaunchConfig *cfg) {
    FAKE_ENTER("cuOccupancyMaxPotentialClusterSize");
    if (n == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_cluster_query(cfg, fn);
    if (r != CUDA_SUCCESS) return r;
    const fake_func *f = (const fake_func *)fn;
    int req[3]; /* a required shape: the grid must hold whole clusters of it; a partial one is refused */
    int has = required_cluster(f, req);
    const unsigned g[3] = {cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ};
    if (has < 0 || (has && !grid_divisible(g, req))) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    int block = (int)(cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ);
    long fit = (long)gpc_sms[0] * blocks_per_sm(f, block, cfg->sharedMemBytes);
    int size = f->nonportable ? FAKE_CLUSTER_NONPORTABLE : FAKE_CLUSTER_PORTABLE;
    while (size > 0 && size > fit) size--;
    *n = size;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Launches: checked like the driver, logged with their parameter bytes, never run.
 * ------------------------------------------------------------------------------------------ */
static void hex_append(char *out, size_t cap, size_t *pos, const unsigned char *b, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n && *pos + 3 <= cap; i++) {
        out[(*pos)++] = digits[b[i] >> 4];
        out[(*pos)++] = digits[b[i] & 15];
    }
    out[*pos] = '\0';
}

static CUresult read_extra(void **extra, const unsigned char **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    int have_size = 0;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            *buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            *size = *(size_t *)extra[i + 1];
            have_size = 1;
        } else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (*buf == NULL || !have_size) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static int launch_dims_ok(const unsigned g[3], const unsigned b[3]) {
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2]) return 0;
    if (g[0] > 2147483647u || g[1] > 65535 || g[2] > 65535) return 0;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64) return 0;
    return (unsigned long long)b[0] * b[1] * b[2] <= 1024;
}

/* The launch's parameter bytes in hex, one group per parameter, into hex (cap bytes). */
static CUresult format_args(const fake_func *f, void **params, void **extra, char *hex, size_t cap) {
    size_t pos = 0;
    hex[0] = '\0';
    if (extra) {
        const unsigned char *buf;
        size_t size;
        CUresult r = read_extra(extra, &buf, &size);
        if (r != CUDA_SUCCESS) return r;
        if (f->nparams < 0) {
            hex_append(hex, cap, &pos, buf, size);
        } else {
            for (int i = 0; i < f->nparams; i++) {
                if (f->params[i].offset + f->params[i].size > size) return CUDA_ERROR_INVALID_VALUE;
                if (i && pos + 1 < cap) hex[pos++] = ' ';
                hex_append(hex, cap, &pos, buf + f->params[i].offset, f->params[i].size);
            }
        }
    } else if (params && f->nparams > 0) {
        for (int i = 0; i < f->nparams; i++) {
            if (params[i] == NULL) return CUDA_ERROR_INVALID_VALUE;
            if (i && pos + 1 < cap) hex[pos++] = ' ';
            hex_append(hex, cap, &pos, params[i], f->params[i].size);
        }
    }
    return CUDA_SUCCESS;
}

/* What cuLaunchKernel and cuLaunchKernelEx share: the driver's checks, then the log line (with
 * ` attrs=LIST` when attrs is not NULL), the capture, measurement and observer hooks. `cluster`
 * is the launch's cluster shape (NULL: none asked for; a function with a required one uses it). */
static CUresult launch_common(const fake_func *f, const unsigned g[3], const unsigned b[3],
                              unsigned smem, CUstream stream, void **params, void **extra,
                              const int *cluster, const char *attrs) {
    if (!launch_dims_ok(g, b) || b[0] * b[1] * b[2] > (unsigned)f->max_threads)
        return CUDA_ERROR_INVALID_VALUE;
    if (smem > (unsigned)f->max_dynamic_smem) return CUDA_ERROR_INVALID_VALUE;
    if (params && extra) return CUDA_ERROR_INVALID_VALUE;
    if (f->nparams > 0 && !params && !extra) return CUDA_ERROR_INVALID_VALUE;
    int required[3];
    if (cluster == NULL) { /* the driver uses the required shape, compiled in or set */
        int has = required_cluster(f, required);
        if (has < 0 || (has == 0 && f->cluster_must_be_set)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        if (has) cluster = required;
    }
    if (cluster && !grid_divisible(g, cluster)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;

    /* 1,024 parameters of up to 32,764 bytes in all: two hex digits a byte and the spaces */
    if (fake_capture_implicit(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    static char hex[2 * 32764 + FAKE_MAX_PARAMS + 16];
    CUresult r = format_args(f, params, extra, hex, sizeof hex);
    if (r != CUDA_SUCCESS) return r;
    char *line = NULL;
    int n = asprintf(&line, "launch %s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%#lx%s%s args=%s",
                     f->name, g[0], g[1], g[2], b[0], b[1], b[2], smem,
                     (unsigned long)(uintptr_t)stream, attrs ? " attrs=" : "", attrs ? attrs : "", hex);
    if (n < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!fake_capture_add(stream, line)) fake_measure_launch(f->name, params);
    fake_observe_launch(f->name, g, b);
    fake_log("%s", line);
    free(line);
    return CUDA_SUCCESS;
}

CUresult fake_cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned smem, CUstream stream,
                             void **params, void **extra) {
    FAKE_ENTER("cuLaunchKernel");
    if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
    const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    return launch_common((const fake_func *)fn, g, b, smem, stream, params, extra, NULL, NULL);
}

/* ------------------------------------------------------------------------------------------
 * cuLaunchKernelEx: the attributes gpulab passes, checked as the driver does on an H200.
 * ------------------------------------------------------------------------------------------ */
static const char *access_property_name(CUaccessProperty p) {
    switch (p) {
    case CU_ACCESS_PROPERTY_NORMAL: return "normal";
    case CU_ACCESS_PROPERTY_STREAMING: return "streaming";
    case CU_ACCESS_PROPERTY_PERSISTING: return "persisting";
    default: return NULL;
    }
}

static CUresult check_access_window(const CUaccessPolicyWindow *w) {
    if (w->num_bytes > FAKE_MAX_ACCESS_POLICY_WINDOW) return CUDA_ERROR_INVALID_VALUE;
    if (!(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f)) return CUDA_ERROR_INVALID_VALUE;
    if (access_property_name(w->hitProp) == NULL) return CUDA_ERROR_INVALID_VALUE;
    /* a miss may only be normal or streaming */
    if (w->missProp != CU_ACCESS_PROPERTY_NORMAL && w->missProp != CU_ACCESS_PROPERTY_STREAMING)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Cooperative launches: every block must be resident at once. */
static CUresult check_cooperative(const fake_func *f, const unsigned g[3], const unsigned b[3],
                                  unsigned smem) {
    unsigned long long blocks = (unsigned long long)g[0] * g[1] * g[2];
    int per_sm = blocks_per_sm(f, (int)(b[0] * b[1] * b[2]), smem);
    if (blocks > (unsigned long long)per_sm * device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    return CUDA_SUCCESS;
}

/* Checks one attribute and appends its log entry to text. */
static CUresult read_launch_attribute(const fake_func *f, const CUlaunchConfig *cfg,
                                      const CUlaunchAttribute *a, int cluster[3], bool *has_cluster,
                                      char *text, size_t cap) {
    const unsigned g[3] = {cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ};
    const unsigned b[3] = {cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ};
    size_t len = strlen(text);
    const char *sep = len ? ";" : "";
    CUresult r;
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        if (!fake_has_clusters()) return CUDA_ERROR_NOT_SUPPORTED;
        cluster[0] = (int)a->value.clusterDim.x;
        cluster[1] = (int)a->value.clusterDim.y;
        cluster[2] = (int)a->value.clusterDim.z;
        if ((r = check_cluster_size(f, cluster)) != CUDA_SUCCESS) return r;
        *has_cluster = true;
        snprintf(text + len, cap - len, "%scluster:%dx%dx%d", sep, cluster[0], cluster[1], cluster[2]);
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        if (a->value.cooperative && launch_dims_ok(g, b) &&
            (r = check_cooperative(f, g, b, cfg->sharedMemBytes)) != CUDA_SUCCESS)
            return r;
        snprintf(text + len, cap - len, "%scooperative:%d", sep, a->value.cooperative);
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        if (!fake_has_clusters()) return CUDA_ERROR_NOT_SUPPORTED; /* PDL: 9.0 and newer */
        snprintf(text + len, cap - len, "%spdl:%d", sep, a->value.programmaticStreamSerializationAllowed);
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        snprintf(text + len, cap - len, "%spriority:%d", sep, a->value.priority);
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
        const CUaccessPolicyWindow *w = &a->value.accessPolicyWindow;
        if ((r = check_access_window(w)) != CUDA_SUCCESS) return r;
        snprintf(text + len, cap - len, "%sl2_window:%#lx+%zu@%.3g/%s/%s", sep,
                 (unsigned long)(uintptr_t)w->base_ptr, w->num_bytes, (double)w->hitRatio,
                 access_property_name(w->hitProp), access_property_name(w->missProp));
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult fake_cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction fn, void **params, void **extra) {
    FAKE_ENTER("cuLaunchKernelEx");
    if (fn == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (cfg == NULL || (cfg->numAttrs > 0 && cfg->attrs == NULL)) return CUDA_ERROR_INVALID_VALUE;
    const fake_func *f = (const fake_func *)fn;
    char text[4096] = "";
    int cluster[3];
    bool has_cluster = false;
    for (unsigned i = 0; i < cfg->numAttrs; i++) {
        if (strlen(text) + 256 > sizeof text) return CUDA_ERROR_INVALID_VALUE;
        CUresult r = read_launch_attribute(f, cfg, &cfg->attrs[i], cluster, &has_cluster, text, sizeof text);
        if (r != CUDA_SUCCESS) return r;
    }
    const unsigned g[3] = {cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ};
    const unsigned b[3] = {cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ};
    return launch_common(f, g, b, cfg->sharedMemBytes, cfg->hStream, params, extra,
                         has_cluster ? cluster : NULL, text);
}
