/*
 * kattr.c — a kernel's function attributes by short name (k:attribute, k:set_attribute,
 * k:attributes) and its cluster occupancy (k:max_active_clusters, k:max_cluster_size).
 *
 * One table names every CUfunction_attribute of the CUDA 13 header and says which can be set
 * and to what: values are checked here, with the rule and the numbers, before the driver sees
 * them. The cluster calls are optional driver entries (CUDA 12.0); each says so when missing.
 */
#include "kattr.h"
#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "module.h"
#include "options.h"

#include <ctype.h>
#include <string.h>

#define PORTABLE_CLUSTER 8     /* blocks a cluster may hold on any cluster-capable GPU */
#define NONPORTABLE_CLUSTER 16 /* with non_portable_cluster_size_allowed (Hopper) */

/* ------------------------------------------------------------------------------------------
 * The attribute table
 * ------------------------------------------------------------------------------------------ */
enum value_kind { V_INT, V_BOOL, V_POLICY, V_DYN_SMEM };

typedef struct attr_info {
    const char *name;       /* the enum name without CU_FUNC_ATTRIBUTE_, lower-cased */
    CUfunction_attribute id;
    bool writable;
    int lo, hi;             /* accepted values when writable (V_DYN_SMEM: computed per kernel) */
    enum value_kind kind;   /* what else a value may be spelled as */
    const char *help;       /* writable: what it does; read-only: who sets it */
} attr_info;

static const attr_info attrs[] = {
    {"max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, false, 0, 0, V_INT,
     "set by the compiler and the device: registers and __launch_bounds__ decide it"},
    {"shared_size_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, false, 0, 0, V_INT,
     "set by the compiler: the static __shared__ bytes"},
    {"const_size_bytes", CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, false, 0, 0, V_INT,
     "set by the compiler: the __constant__ bytes"},
    {"local_size_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, false, 0, 0, V_INT,
     "set by the compiler: local memory per thread"},
    {"num_regs", CU_FUNC_ATTRIBUTE_NUM_REGS, false, 0, 0, V_INT, "set by the compiler"},
    {"ptx_version", CU_FUNC_ATTRIBUTE_PTX_VERSION, false, 0, 0, V_INT,
     "set by the compiler: the PTX virtual architecture, e.g. 90"},
    {"binary_version", CU_FUNC_ATTRIBUTE_BINARY_VERSION, false, 0, 0, V_INT,
     "set by the compiler: the binary architecture, e.g. 90"},
    {"cache_mode_ca", CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, false, 0, 0, V_INT,
     "set by the compiler: -Xptxas -dlcm=ca"},
    {"max_dynamic_shared_size_bytes", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, true, 0, 0,
     V_DYN_SMEM, "largest dynamic shared memory a launch may ask for (as k:set_max_dynamic_smem)"},
    {"preferred_shared_memory_carveout", CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, true, -1,
     100, V_INT, "percent of the L1/shared storage to use as shared memory, -1 for no preference"},
    {"cluster_size_must_be_set", CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, false, 0, 0, V_INT,
     "set by the compiler: __cluster_dims__ or .explicitcluster"},
    {"required_cluster_width", CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, true, 0, NONPORTABLE_CLUSTER,
     V_INT, "cluster width in blocks every launch must use, 0 for none"},
    {"required_cluster_height", CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, true, 0, NONPORTABLE_CLUSTER,
     V_INT, "cluster height in blocks every launch must use, 0 for none"},
    {"required_cluster_depth", CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, true, 0, NONPORTABLE_CLUSTER,
     V_INT, "cluster depth in blocks every launch must use, 0 for none"},
    {"non_portable_cluster_size_allowed", CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, true, 0,
     1, V_BOOL, "1 (or true) lets clusters of more than 8 blocks launch (up to 16 on Hopper)"},
    {"cluster_scheduling_policy_preference", CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
     true, 0, 2, V_POLICY, "0 \"default\", 1 \"spread\" or 2 \"load_balancing\""},
};
#define NATTRS ((int)(sizeof attrs / sizeof attrs[0]))
_Static_assert(sizeof attrs / sizeof attrs[0] == CU_FUNC_ATTRIBUTE_MAX,
               "every CUfunction_attribute of cuda.h has a name");

static const char *const policy_names[] = {"default", "spread", "load_balancing"};

static bool is_cluster_attr(CUfunction_attribute a) {
    return a >= CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET &&
           a <= CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
}

/* ------------------------------------------------------------------------------------------
 * Names: exact lookup, and near matches for the error
 * ------------------------------------------------------------------------------------------ */
static int edit_distance(const char *a, const char *b) {
    enum { MAXLEN = 64 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= MAXLEN || lb >= MAXLEN) return MAXLEN;
    int row[MAXLEN] = {0};
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The asked name lower-cased (in out), without a CU_FUNC_ATTRIBUTE_ prefix, for comparing only. */
static const char *plain_name(const char *s, size_t len, char *out, size_t cap) {
    static const char prefix[] = "cu_func_attribute_";
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) out[n++] = (char)tolower((unsigned char)s[i]);
    out[n] = '\0';
    return strncmp(out, prefix, sizeof prefix - 1) == 0 ? out + sizeof prefix - 1 : out;
}

static bool near_match(const char *asked, const char *name) {
    size_t la = strlen(asked);
    if (la == 0) return false;
    if (strstr(name, asked) || (la > 3 && strstr(asked, name))) return true;
    size_t common = 0;
    while (asked[common] && asked[common] == name[common]) common++;
    if (common >= 4) return true;
    int d = edit_distance(asked, name);
    return d <= 3 || (size_t)d * 4 <= strlen(name);
}

__attribute__((noreturn)) static void unknown_attribute(lua_State *L, int arg, const char *fn,
                                                        const char *asked, size_t len) {
    char buf[96] = {0};
    const char *plain = plain_name(asked, len, buf, sizeof buf);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int n = 0;
    for (int i = 0; i < NATTRS; i++)
        if (near_match(plain, attrs[i].name)) {
            luaL_addstring(&b, n++ ? "', '" : "did you mean '");
            luaL_addstring(&b, attrs[i].name);
        }
    luaL_addstring(&b, n ? "'?" : "no attribute has a similar name");
    luaL_pushresult(&b);
    gl_argerror(L, arg, fn, "unknown attribute '%s' (%s; k:attributes() lists every attribute "
                            "with its value)", asked, lua_tostring(L, -1));
}

/* The attribute named by the string at arg: a string without NUL bytes, one of the table's. */
static const attr_info *check_attr_name(lua_State *L, int arg, const char *fn) {
    if (lua_type(L, arg) != LUA_TSTRING) gl_typeerror(L, arg, fn, "attribute name (string)");
    size_t len;
    const char *s = lua_tolstring(L, arg, &len);
    const char *nul = memchr(s, '\0', len);
    if (nul) gl_argerror(L, arg, fn, "attribute name contains a NUL byte at offset %d", (int)(nul - s));
    for (int i = 0; i < NATTRS; i++)
        if (strcmp(s, attrs[i].name) == 0) return &attrs[i];
    unknown_attribute(L, arg, fn, s, len);
}

/* ------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------ */
/* The driver's value; a cluster attribute the device or driver does not have reads as 0. */
static int read_attr(lua_State *L, CUfunction f, CUfunction_attribute a, const char *fn) {
    int v = 0;
    CUresult r = gl_cu.cuFuncGetAttribute(&v, a, f);
    if (r == CUDA_ERROR_INVALID_VALUE && is_cluster_attr(a)) return 0;
    if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, "cuFuncGetAttribute");
    return v;
}

void gl_read_cluster_attributes(lua_State *L, CUfunction f, const char *fn, int dims[3],
                                bool *must_be_set, int *nonportable) {
    dims[0] = read_attr(L, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, fn);
    dims[1] = read_attr(L, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, fn);
    dims[2] = read_attr(L, f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, fn);
    *must_be_set = read_attr(L, f, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, fn) != 0;
    *nonportable = read_attr(L, f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, fn);
}

static bool is_required_cluster_attr(CUfunction_attribute a) {
    return a == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH || a == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT ||
           a == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH;
}

/* Keeps the kernel's cached copies in step with what the driver said or was told. */
static void note_value(gl_kernel *k, CUfunction_attribute a, int v) {
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) k->max_dynamic_smem = v;
    if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) k->nonportable_cluster = v;
    if (is_required_cluster_attr(a)) k->cluster_dims[a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = v;
}

static int l_attribute(lua_State *L) {
    const char *fn = "k:attribute";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    const attr_info *a = check_attr_name(L, 2, fn);
    gl_require_gpu(L, fn);
    int v = read_attr(L, k->fn, a->id, fn);
    note_value(k, a->id, v);
    lua_pushinteger(L, v);
    return 1;
}

static int l_attributes(lua_State *L) {
    const char *fn = "k:attributes";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    gl_require_gpu(L, fn);
    int values[NATTRS];
    for (int i = 0; i < NATTRS; i++) values[i] = read_attr(L, k->fn, attrs[i].id, fn);
    for (int i = 0; i < NATTRS; i++) note_value(k, attrs[i].id, values[i]);
    lua_createtable(L, 0, NATTRS);
    for (int i = 0; i < NATTRS; i++) {
        lua_pushinteger(L, values[i]);
        lua_setfield(L, -2, attrs[i].name);
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Setting
 * ------------------------------------------------------------------------------------------ */
/* The value at arg as an integer: a number with an integer value, or the spellings the
 * attribute's kind allows (true/false, a policy name). */
static lua_Integer value_arg(lua_State *L, int arg, const char *fn, const attr_info *a) {
    int t = lua_type(L, arg);
    if (t == LUA_TBOOLEAN && a->kind == V_BOOL) return lua_toboolean(L, arg);
    if (t == LUA_TSTRING && a->kind == V_POLICY) {
        size_t len;
        const char *s = lua_tolstring(L, arg, &len);
        for (int i = 0; i < 3; i++)
            if (strlen(policy_names[i]) == len && memcmp(s, policy_names[i], len) == 0) return i;
        if (memchr(s, '\0', len))
            gl_argerror(L, arg, fn, "'%s' value contains a NUL byte at offset %d", a->name,
                        (int)((const char *)memchr(s, '\0', len) - s));
        gl_argerror(L, arg, fn, "'%s' value '%s' is not a policy (\"default\", \"spread\", "
                                "\"load_balancing\" or 0..2)", a->name, s);
    }
    int isint = 0;
    lua_Integer v = t == LUA_TNUMBER ? lua_tointegerx(L, arg, &isint) : 0;
    if (isint) return v;
    const char *expected = a->kind == V_BOOL     ? "an integer 0/1 or a boolean"
                           : a->kind == V_POLICY ? "an integer 0..2 or a policy name"
                                                 : "an integer";
    gl_argerror(L, arg, fn, "'%s' value must be %s, got %s", a->name, expected,
                t == LUA_TNUMBER ? lua_tostring(L, arg) : gl_typename(L, arg));
}

static void check_value(lua_State *L, int arg, const char *fn, gl_kernel *k, const attr_info *a,
                        lua_Integer v) {
    if (a->kind == V_DYN_SMEM) {
        lua_Integer limit = k->limits->smem_optin - k->static_smem;
        if (v < 0 || v > limit)
            gl_argerror(L, arg, fn, "'%s' = %lld: the device allows %d bytes per block with opt-in, "
                                    "and kernel '%s' uses %d statically, so 0..%lld",
                        a->name, (long long)v, k->limits->smem_optin, k->name, k->static_smem,
                        (long long)limit);
        return;
    }
    if (v < a->lo || v > a->hi)
        gl_argerror(L, arg, fn, "'%s' = %lld is out of range %d..%d (%s)", a->name, (long long)v,
                    a->lo, a->hi, a->help);
    if (is_required_cluster_attr(a->id) && k->cluster_compiled) /* the driver: CUDA_ERROR_NOT_PERMITTED */
        gl_argerror(L, arg, fn, "kernel '%s' has its cluster shape compiled in (k.cluster_dims = "
                                "{%d, %d, %d}, from __cluster_dims__): '%s' cannot be changed",
                    k->name, k->cluster_dims[0], k->cluster_dims[1], k->cluster_dims[2], a->name);
}

static int l_set_attribute(lua_State *L) {
    const char *fn = "k:set_attribute";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    const attr_info *a = check_attr_name(L, 2, fn);
    if (!a->writable) gl_argerror(L, 2, fn, "'%s' is read-only (%s)", a->name, a->help);
    if (lua_isnone(L, 3)) gl_argerror(L, 3, fn, "value for '%s' expected", a->name);
    lua_Integer v = value_arg(L, 3, fn, a);
    gl_require_gpu(L, fn);
    check_value(L, 3, fn, k, a, v);
    GL_CHECK(L, gl_cu.cuFuncSetAttribute(k->fn, a->id, (int)v), fn, "cuFuncSetAttribute");
    note_value(k, a->id, (int)v);
    gl_kernel_attribute_set(k);
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Cluster occupancy: k:max_active_clusters{block=, smem=, cluster=}, k:max_cluster_size{...}
 * ------------------------------------------------------------------------------------------ */
typedef struct cluster_query {
    unsigned block[3], cluster[3]; /* cluster: also the grid of the query (one cluster) */
    unsigned smem;
} cluster_query;

/* Table fields are read raw: a metamethod could free the kernel's module mid-call. */
static int raw_field(lua_State *L, int t, const char *name) {
    lua_pushstring(L, name);
    return lua_rawget(L, t);
}

/* An entry point of CUDA 12.0 drivers, or a clear error naming it. */
static void require_entry(lua_State *L, const void *entry, const char *name, const char *fn) {
    if (entry != NULL) return;
    int v = gl_driver_version();
    luaL_error(L, "%s: this CUDA driver (%d.%d) lacks %s, which needs a CUDA 12.0 driver", fn,
               v / 1000, v % 1000 / 10, name);
}

static void require_clusters(lua_State *L, const gl_kernel *k, const char *fn) {
    const gl_device_limits *d = k->limits;
    if (d->cc_major < 9)
        luaL_error(L, "%s: thread block clusters need a device of compute capability 9.0 or newer; "
                      "device %d is %d.%d", fn, d->ordinal, d->cc_major, d->cc_minor);
}

/* Field `what` of the table at arg: n or {x[, y[, z]]}, each entry in 1..limit[axis]. */
static void read_shape(lua_State *L, int arg, const char *fn, const char *what, const int limit[3],
                       unsigned out[3]) {
    static const char axes[] = "xyz";
    out[0] = out[1] = out[2] = 1;
    int v = lua_gettop(L), t = lua_type(L, v);
    int n = 1;
    if (t == LUA_TTABLE) {
        lua_Integer len = (lua_Integer)lua_rawlen(L, v);
        if (len < 1 || len > 3)
            gl_fielderror(L, arg, fn, what, "1 to 3 entries expected, got %lld", (long long)len);
        n = (int)len;
    } else if (t != LUA_TNUMBER) {
        gl_fieldtypeerror(L, arg, fn, what, v, "number or {x,y,z}");
    }
    for (int i = 0; i < n; i++) {
        int ti = t == LUA_TTABLE ? lua_rawgeti(L, v, i + 1) : (lua_pushvalue(L, v), LUA_TNUMBER);
        int isint = 0;
        lua_Integer x = ti == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (!isint)
            gl_fielderror(L, arg, fn, what, "%c: integer expected, got %s", axes[i],
                          ti == LUA_TNUMBER ? lua_tostring(L, -1) : gl_typename(L, -1));
        if (x < 1 || x > limit[i])
            gl_fielderror(L, arg, fn, what, "%c = %lld is out of range 1..%d", axes[i], (long long)x,
                          limit[i]);
        out[i] = (unsigned)x;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

static void check_cluster(lua_State *L, int arg, const char *fn, gl_kernel *k, const unsigned c[3]) {
    unsigned n = c[0] * c[1] * c[2];
    if (n > NONPORTABLE_CLUSTER)
        gl_fielderror(L, arg, fn, "cluster", "%ux%ux%u = %u blocks; a cluster holds at most %d", c[0],
                      c[1], c[2], n, NONPORTABLE_CLUSTER);
    if (n > PORTABLE_CLUSTER && !k->nonportable_cluster)
        gl_fielderror(L, arg, fn, "cluster", "%ux%ux%u = %u blocks; more than %d needs "
                      "k:set_attribute(\"non_portable_cluster_size_allowed\", true)", c[0], c[1], c[2],
                      n, PORTABLE_CLUSTER);
    unsigned req[3];
    if (gl_kernel_cluster_contradicts(k, c, req))
        gl_fielderror(L, arg, fn, "cluster", "%ux%ux%u contradicts kernel '%s''s %s k.cluster_dims = "
                      "{%u, %u, %u} (leave cluster out to use it)", c[0], c[1], c[2], k->name,
                      gl_kernel_cluster_origin(k), req[0], req[1], req[2]);
}

static void read_query(lua_State *L, int arg, const char *fn, gl_kernel *k, bool with_cluster,
                       cluster_query *q) {
    static const char *const with[] = {"block", "smem", "cluster", NULL};
    static const char *const without[] = {"block", "smem", NULL};
    if (lua_type(L, arg) != LUA_TTABLE)
        gl_argerror(L, arg, fn, "{block=, smem=%s} expected, got %s", with_cluster ? ", cluster=" : "",
                    gl_typename(L, arg));
    gl_check_known_fields(L, arg, with_cluster ? with : without, fn);
    gl_kernel_sync_attributes(k); /* set through another kernel object for the same function */
    const gl_device_limits *d = k->limits;
    if (raw_field(L, arg, "block") == LUA_TNIL) gl_fielderror(L, arg, fn, "block", "required (a number or {x,y,z})");
    read_shape(L, arg, fn, "block", d->max_block, q->block);
    unsigned threads = q->block[0] * q->block[1] * q->block[2];
    int max_threads = k->max_threads < d->max_threads_per_block ? k->max_threads : d->max_threads_per_block;
    if (threads > (unsigned)max_threads)
        gl_fielderror(L, arg, fn, "block", "%u threads exceed the limit of %d for kernel '%s' on this "
                      "device", threads, max_threads, k->name);
    q->smem = 0;
    if (raw_field(L, arg, "smem") != LUA_TNIL) {
        int isint = 0;
        lua_Integer s = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (!isint || s < 0)
            gl_fielderror(L, arg, fn, "smem", "non-negative integer number of bytes expected, got %s",
                          lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : gl_typename(L, -1));
        if (s > k->max_dynamic_smem)
            gl_fielderror(L, arg, fn, "smem", "%lld bytes exceed kernel '%s''s dynamic shared memory limit "
                          "of %d bytes (k:set_max_dynamic_smem raises it, up to %d minus %d static)",
                          (long long)s, k->name, k->max_dynamic_smem, d->smem_optin, k->static_smem);
        q->smem = (unsigned)s;
    }
    lua_pop(L, 1);
    if (!with_cluster) return;
    static const int cluster_limit[3] = {NONPORTABLE_CLUSTER, NONPORTABLE_CLUSTER, NONPORTABLE_CLUSTER};
    if (raw_field(L, arg, "cluster") != LUA_TNIL) {
        read_shape(L, arg, fn, "cluster", cluster_limit, q->cluster);
    } else {
        lua_pop(L, 1);
        if (!gl_kernel_required_cluster(L, k, q->cluster, fn))
            gl_fielderror(L, arg, fn, "cluster", "required: kernel '%s' has no cluster shape of its own "
                          "(k.cluster_dims is nil), so give n or {x,y,z}", k->name);
    }
    check_cluster(L, arg, fn, k, q->cluster);
}

/* The launch configuration of one cluster's worth of blocks (the driver requires the grid to be
 * a multiple of the cluster), with the cluster as its one attribute when asked. */
static CUlaunchConfig query_config(const cluster_query *q, CUlaunchAttribute *attr) {
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = q->cluster[0];
    cfg.gridDimY = q->cluster[1];
    cfg.gridDimZ = q->cluster[2];
    cfg.blockDimX = q->block[0];
    cfg.blockDimY = q->block[1];
    cfg.blockDimZ = q->block[2];
    cfg.sharedMemBytes = q->smem;
    if (attr) {
        memset(attr, 0, sizeof *attr);
        attr->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr->value.clusterDim.x = q->cluster[0];
        attr->value.clusterDim.y = q->cluster[1];
        attr->value.clusterDim.z = q->cluster[2];
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    return cfg;
}

static int l_max_active_clusters(lua_State *L) {
    const char *fn = "k:max_active_clusters";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    gl_require_gpu(L, fn);
    require_entry(L, (const void *)gl_cu.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters", fn);
    require_clusters(L, k, fn);
    cluster_query q;
    memset(&q, 0, sizeof q);
    read_query(L, 2, fn, k, true, &q); /* a compiled-in shape is passed too: it matches */
    CUlaunchAttribute attr;
    CUlaunchConfig cfg = query_config(&q, &attr);
    int n = 0;
    GL_CHECK(L, gl_cu.cuOccupancyMaxActiveClusters(&n, k->fn, &cfg), fn, "cuOccupancyMaxActiveClusters");
    lua_pushinteger(L, n);
    return 1;
}

static int l_max_cluster_size(lua_State *L) {
    const char *fn = "k:max_cluster_size";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    gl_require_gpu(L, fn);
    require_entry(L, (const void *)gl_cu.cuOccupancyMaxPotentialClusterSize,
                  "cuOccupancyMaxPotentialClusterSize", fn);
    require_clusters(L, k, fn);
    cluster_query q;
    memset(&q, 0, sizeof q);
    read_query(L, 2, fn, k, false, &q);
    /* a required shape makes the grid one cluster of it; otherwise one block */
    if (!gl_kernel_required_cluster(L, k, q.cluster, fn)) q.cluster[0] = q.cluster[1] = q.cluster[2] = 1;
    CUlaunchConfig cfg = query_config(&q, NULL);
    int n = 0;
    GL_CHECK(L, gl_cu.cuOccupancyMaxPotentialClusterSize(&n, k->fn, &cfg), fn,
             "cuOccupancyMaxPotentialClusterSize");
    lua_pushinteger(L, n);
    return 1;
}

const luaL_Reg gl_kernel_attr_methods[] = {
    {"attribute", l_attribute},
    {"set_attribute", l_set_attribute},
    {"attributes", l_attributes},
    {"max_active_clusters", l_max_active_clusters},
    {"max_cluster_size", l_max_cluster_size},
    {NULL, NULL},
};
