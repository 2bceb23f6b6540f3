/*
 * launch.c — k:launch(cfg, ...) and k:prepare(cfg, ...): arguments checked against the kernel's
 * parameter list and packed into one buffer at the PTX offsets, passed to cuLaunchKernel (or
 * cuLaunchKernelEx) as one pointer per parameter. A prepared launch ("cuda.prepared") packs once;
 * calling it only re-checks that its objects are alive, marks them, logs and launches.
 *
 * Kernel arguments are numbered from 1 in messages ("argument 3" is the kernel's third
 * parameter, whatever its position on the Lua call).
 */
#include "check.h"
#include "context.h"
#include "driver.h"
#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "l2.h"
#include "launchlog.h"
#include "lifetime.h"
#include "module.h"
#include "objects.h"
#include "observe.h"
#include "options.h"
#include "ptx.h"
#include "register.h"
#include "stream.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PREPARED_T "cuda.prepared"
#define UV_KERNEL 1
#define UV_STREAM 2
#define UV_WINDOW 3 /* the array of an l2_window */
#define UV_FIRST_ARG 4

typedef enum { REF_NONE, REF_ARRAY, REF_TENSORMAP } ref_kind;
typedef struct arg_ref {
    ref_kind kind;
    void *obj; /* gl_array* or gl_tensormap*, kept alive by the caller's stack or a uservalue */
} arg_ref;

/* Launch attributes a configuration can carry: cluster, cooperative, pdl, priority, l2_window. */
#define MAX_LAUNCH_ATTRS 5

typedef struct launch_cfg {
    unsigned grid[3], block[3];
    unsigned smem;
    gl_stream *stream;       /* NULL: the default stream */
    gl_stream_track *track;
    unsigned nattrs;         /* 0: a plain cuLaunchKernel; else cuLaunchKernelEx with attrs */
    CUlaunchAttribute attrs[MAX_LAUNCH_ATTRS];
    gl_array *window_array;  /* l2_window={array=}; a prepared launch keeps it in a uservalue */
    /* The stack slots of the call that read the configuration holding the stream and the window's
     * array (0: none), as read_cfg left them: the configuration table is the script's, and a
     * finalizer run by an allocation later in the call may take either out of it. */
    int stream_at, window_at;
} launch_cfg;

/* ------------------------------------------------------------------------------------------
 * Argument checking and packing
 * ------------------------------------------------------------------------------------------ */
static unsigned elem_bytes(const gl_param *p) {
    if (strcmp(p->kind, "pred") == 0) return 1;
    if (strcmp(p->kind, "bf16") == 0) return 2;
    unsigned bits = 0;
    for (const char *c = p->kind + 1; *c >= '0' && *c <= '9'; c++) bits = bits * 10 + (unsigned)(*c - '0');
    return bits / 8;
}

/* "f32 (4 bytes)" or "b8[24] (24 bytes, align 8)" */
static const char *describe_param(lua_State *L, const gl_param *p) {
    unsigned e = elem_bytes(p);
    if (e && p->size != e)
        return lua_pushfstring(L, "%s[%d] (%d bytes, align %d)", p->kind, (int)(p->size / e),
                               (int)p->size, (int)p->align);
    return lua_pushfstring(L, "%s (%d byte%s)", p->kind, (int)p->size, p->size == 1 ? "" : "s");
}

static const char *describe_value(lua_State *L, int idx) {
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER: return lua_pushfstring(L, "%s", lua_tostring(L, idx));
    case LUA_TSTRING: return lua_pushfstring(L, "a string of %d bytes", (int)lua_rawlen(L, idx));
    default: return gl_typename(L, idx);
    }
}

/* The kernel whose parameter argno is p: the packing functions are always handed
 * &k->params[argno - 1] (pack_all, l_prepared_set), so the kernel is found from its place. */
static const gl_kernel *kernel_of_param(const gl_param *p, int argno) {
    return (const gl_kernel *)((const char *)(p - (argno - 1)) - offsetof(gl_kernel, params));
}

/* "bad argument #3 to 'k:launch' (scale<2> parameter 1 (float* x): u64 (8 bytes) expected, got ...)" */
static __attribute__((noreturn)) void arg_error(lua_State *L, const char *fn, int argno,
                                                const gl_param *p, int idx, const char *why) {
    const char *param = gl_push_param_name(L, kernel_of_param(p, argno), argno - 1);
    const char *want = describe_param(L, p);
    const char *got = describe_value(L, idx);
    gl_argerror(L, idx, fn, "%s: %s expected, got %s%s", param, want, got, why ? why : "");
    abort();
}

/* Integer parameters. NVCC declares C's signed types as .u8/.u16/.u32/.u64 in PTX, so
 * u-kinds take either signedness (-2^(n-1) .. 2^n - 1); only s-kinds (hand-written PTX) are
 * strictly signed. b-kinds are untyped bits and also accept a string of their size. The range of
 * an n-byte parameter (n < 8; an 8-byte one takes every lua_Integer): */
static void int_limits(unsigned n, bool strictly_signed, lua_Integer *lo, lua_Integer *hi) {
    *lo = -((lua_Integer)1 << (8 * n - 1));
    *hi = strictly_signed ? ((lua_Integer)1 << (8 * n - 1)) - 1 : ((lua_Integer)1 << (8 * n)) - 1;
}

static bool int_fits(lua_Integer v, unsigned n, bool strictly_signed) {
    if (n >= 8) return true;
    lua_Integer lo, hi;
    int_limits(n, strictly_signed, &lo, &hi);
    return v >= lo && v <= hi;
}

static void pack_integer(lua_State *L, int idx, const gl_param *p, unsigned char *dst,
                         const char *fn, int argno, bool strictly_signed, bool untyped) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint) arg_error(L, fn, argno, p, idx, untyped ? " (not an integer: untyped bits "
                          "take an integer or a string of the parameter's size)"
                          : p->size == 1 ? " (not an integer; a bool parameter takes true or false)"
                                         : " (not an integer)");
    if (!int_fits(v, p->size, strictly_signed)) {
        lua_Integer lo, hi;
        int_limits(p->size, strictly_signed, &lo, &hi);
        arg_error(L, fn, argno, p, idx, lua_pushfstring(L, " (out of range %I..%I)", lo, hi));
    }
    uint64_t u = (uint64_t)v; /* little-endian: the low n bytes are the value */
    memcpy(dst, &u, p->size);
}

#define F32_MAX_ROUNDED 3.4028235677973366e38 /* a double of larger magnitude rounds to an infinite f32 */

static void pack_float(lua_State *L, int idx, const gl_param *p, bool bf16, unsigned char *dst,
                       const char *fn, int argno) {
    double x = lua_tonumber(L, idx);
    if (p->size == 8) {
        memcpy(dst, &x, 8);
    } else if (p->size == 4) {
        if (isfinite(x) && fabs(x) > F32_MAX_ROUNDED)
            arg_error(L, fn, argno, p, idx, " (out of f32 range)");
        float f = (float)x;
        memcpy(dst, &f, 4);
    } else if (p->size == 2) {
        uint16_t h = bf16 ? gl_bf16_from_double(x) : gl_f16_from_double(x);
        if (isfinite(x) && (h & 0x7fff) == (bf16 ? 0x7f80 : 0x7c00))
            arg_error(L, fn, argno, p, idx, bf16 ? " (out of bf16 range)" : " (out of f16 range)");
        memcpy(dst, &h, 2);
    } else {
        arg_error(L, fn, argno, p, idx, " (no conversion to this float size; pass a string of its bytes)");
    }
}

/* A device array's address for an 8-byte pointer-sized parameter. */
static bool pack_array(lua_State *L, int idx, const gl_param *p, unsigned char *dst,
                       arg_ref *ref, const char *fn, int argno) {
    gl_array *a = gl_test_array(L, idx); /* NULL for freed arrays too: tell them apart below */
    if (a == NULL || a->ptr == 0) {
        if (!gl_testudata(L, idx, GL_ARRAY_T)) return false;
        arg_error(L, fn, argno, p, idx, " (the array was freed)");
    }
    gl_check_array_device(L, a, fn, idx);
    uint64_t ptr = (uint64_t)a->ptr;
    memcpy(dst, &ptr, 8);
    ref->kind = REF_ARRAY;
    ref->obj = a;
    return true;
}

static bool pack_tensormap(lua_State *L, int idx, const gl_param *p, unsigned char *dst,
                           arg_ref *ref, const char *fn, int argno) {
    gl_tensormap *tm = gl_test_tensormap(L, idx);
    const char *unusable = tm ? gl_tensormap_unusable(tm) : NULL;
    if (tm == NULL || unusable) {
        if (!gl_testudata(L, idx, GL_TENSORMAP_T)) return false;
        arg_error(L, fn, argno, p, idx, lua_pushfstring(L, " (%s)", unusable));
    }
    gl_check_tensormap_device(L, tm, fn, idx);
    if (p->size != sizeof tm->map)
        arg_error(L, fn, argno, p, idx, " (a tensor map is 128 bytes)");
    if (p->offset % 64 != 0)
        arg_error(L, fn, argno, p, idx, " (a tensor map parameter must be 64-byte aligned: "
                                        "declare it const __grid_constant__ CUtensorMap)");
    if (p->flags & GL_PARAM_COPIED)
        arg_error(L, fn, argno, p, idx, " (the kernel copies this parameter instead of reading it "
                                        "in place, so the TMA unit would get the copy's address: "
                                        "declare it const __grid_constant__)");
    memcpy(dst, &tm->map, sizeof tm->map);
    ref->kind = REF_TENSORMAP;
    ref->obj = tm;
    return true;
}

/* How a parameter takes a Lua value, decided once per kernel from its PTX kind and size
 * (no string compares per launch). Zero means "not classified yet". */
enum {
    ARG_UINT = 1, /* u8..u64: integers of either signedness (NVCC's C int is .u32) */
    ARG_SINT,     /* s8..s64: strictly signed integers */
    ARG_BITS,     /* b8..b64: untyped bits, integer or string */
    ARG_FLOAT,    /* f16, f32, f64 */
    ARG_BF16,
    ARG_PRED,
    ARG_BLOB      /* aggregates (b8[N], structs, tensor maps): string or tensor map */
};
/* A hint kept with an 8-byte integer parameter's class: its last argument was a userdata (an
 * array, for a pointer), so pack_common asks lua_touserdata first, whose answer is also the type
 * check (one API call fewer per array). It orders reads only: no answer depends on it. */
#define ARG_UDATA_FIRST 0x80
#define ARG_CLASS(c) ((unsigned)(c) & ~(unsigned)ARG_UDATA_FIRST)

static unsigned char classify(const gl_param *p) {
    unsigned e = elem_bytes(p);
    bool scalar = (e == 1 || e == 2 || e == 4 || e == 8) && p->size == e;
    if (!scalar) return ARG_BLOB;
    if (strcmp(p->kind, "pred") == 0) return ARG_PRED;
    if (strcmp(p->kind, "bf16") == 0) return ARG_BF16;
    switch (p->kind[0]) {
    case 'u': return ARG_UINT;
    case 's': return ARG_SINT;
    case 'f': return ARG_FLOAT;
    default: return ARG_BITS;
    }
}

static void classify_params(gl_kernel *k) {
    for (int i = 0; i < k->nparams; i++)
        if (k->arg_class[i] == 0) k->arg_class[i] = classify(&k->params[i]);
}

/* Checks the Lua value at idx against parameter p (of class cls) and writes it at dst
 * (p->size bytes, zeroed by the caller). Raises "bad argument #n to 'fn' (scale parameter N
 * (float* x): ... expected, got ...)" on a mismatch. p must be &k->params[argno - 1]. */
static void pack_arg(lua_State *L, int idx, const gl_param *p, unsigned cls, unsigned char *dst,
                     arg_ref *ref, const char *fn, int argno) {
    ref->kind = REF_NONE;
    ref->obj = NULL;
    int t = lua_type(L, idx);
    if (t == LUA_TSTRING) { /* raw bytes: a by-value struct, or exact bits of any parameter */
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (len != p->size) arg_error(L, fn, argno, p, idx, NULL);
        memcpy(dst, s, len);
        return;
    }
    switch (cls) {
    case ARG_BLOB:
        if (t == LUA_TUSERDATA && pack_tensormap(L, idx, p, dst, ref, fn, argno)) return;
        arg_error(L, fn, argno, p, idx, NULL);
    case ARG_PRED:
        if (t == LUA_TBOOLEAN) {
            *dst = (unsigned char)lua_toboolean(L, idx);
            return;
        }
        if (t != LUA_TNUMBER) arg_error(L, fn, argno, p, idx, NULL);
        pack_integer(L, idx, p, dst, fn, argno, false, false);
        if (*dst > 1) arg_error(L, fn, argno, p, idx, " (a predicate is 0 or 1)");
        return;
    case ARG_FLOAT:
    case ARG_BF16:
        if (t != LUA_TNUMBER) arg_error(L, fn, argno, p, idx, NULL);
        pack_float(L, idx, p, cls == ARG_BF16, dst, fn, argno);
        return;
    default: /* integers: 8-byte ones also take a device array's address */
        if (t == LUA_TBOOLEAN && p->size == 1) { /* C++ bool is .u8 (or .s8) in PTX */
            *dst = (unsigned char)lua_toboolean(L, idx);
            return;
        }
        if (t == LUA_TNUMBER) {
            pack_integer(L, idx, p, dst, fn, argno, cls == ARG_SINT, cls == ARG_BITS);
            return;
        }
        if (p->size == 8 && t == LUA_TUSERDATA && pack_array(L, idx, p, dst, ref, fn, argno))
            return;
        arg_error(L, fn, argno, p, idx, p->size == 1 ? " (a bool parameter takes true or false, "
                                                      "an 8-bit one an integer)" : NULL);
    }
}

/* A live device array of device dev at idx, whose lua_touserdata is u (not NULL), for an
 * 8-byte integer parameter; false for any other userdata (pack_arg names what is wrong). */
static inline bool pack_common_array(lua_State *L, int idx, void *u, unsigned char *dst, arg_ref *ref,
                                     int dev) {
    static uint64_t array_tag;
    if (array_tag == 0) array_tag = gl_type_tag(GL_ARRAY_T);
    gl_array *a = gl_testudata_block(L, idx, u, array_tag);
    if (a == NULL || a->ptr == 0 || a->device != dev) return false;
    uint64_t ptr = (uint64_t)a->ptr;
    memcpy(dst, &ptr, 8);
    ref->kind = REF_ARRAY;
    ref->obj = a;
    return true;
}

/* The commonest arguments, packed without pack_arg's general rules: an integer in range for an
 * integer parameter, a number in range for an f32 or f64, a live device array of
 * the current device (dev) for an 8-byte integer parameter. Returns false for anything else
 * (errors included): pack_arg then packs it or names what is wrong. A launch with 4 arguments
 * spends a fifth of gpulab's own instructions here, so this reads each value with as few API
 * calls as the check needs. *cls: the parameter's class, with the ARG_UDATA_FIRST hint. */
static inline bool pack_common(lua_State *L, int idx, const gl_param *p, unsigned char *cls_hint,
                               unsigned char *dst, arg_ref *ref, int dev) {
    unsigned cls = *cls_hint;
    ref->kind = REF_NONE;
    if (cls & ARG_UDATA_FIRST) { /* set only for 8-byte integer parameters */
        void *u = lua_touserdata(L, idx); /* NULL unless a full or light userdata */
        if (u != NULL) return pack_common_array(L, idx, u, dst, ref, dev);
        cls = ARG_CLASS(cls);
        *cls_hint = (unsigned char)cls; /* a number now, perhaps: lua_type first next time */
    }
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER && cls <= ARG_BITS) { /* ARG_UINT, ARG_SINT, ARG_BITS */
        int isint = 0;
        lua_Integer v = lua_tointegerx(L, idx, &isint);
        if (!isint) return false;
        uint64_t u = (uint64_t)v; /* little-endian: the low bytes are the value */
        if (p->size == 4) { /* int_fits's range for 4 bytes, without its shifts */
            if (v < INT32_MIN || v > (cls == ARG_SINT ? (lua_Integer)INT32_MAX : (lua_Integer)UINT32_MAX))
                return false;
            memcpy(dst, &u, 4); /* fixed sizes: a store, not a call */
        } else if (p->size == 8) {
            memcpy(dst, &u, 8); /* every lua_Integer fits */
        } else {
            if (!int_fits(v, p->size, cls == ARG_SINT)) return false;
            memcpy(dst, &u, p->size);
        }
        return true;
    }
    if (t == LUA_TNUMBER && cls == ARG_FLOAT) {
        double x = lua_tonumberx(L, idx, NULL);
        if (p->size == 8) {
            memcpy(dst, &x, 8);
            return true;
        }
        if (p->size != 4 || !(fabs(x) <= F32_MAX_ROUNDED)) return false; /* inf, nan: pack_float */
        float f = (float)x;
        memcpy(dst, &f, 4);
        return true;
    }
    if (t == LUA_TUSERDATA && cls <= ARG_BITS && p->size == 8) {
        *cls_hint = (unsigned char)(cls | ARG_UDATA_FIRST);
        return pack_common_array(L, idx, lua_touserdata(L, idx), dst, ref, dev);
    }
    return false;
}

/* Packs arguments at Lua stack indices first..first+nparams-1 into buf, each parameter's bytes
 * at its offset: the bytes between parameters are left as they are (zero in every buffer). Runs
 * no Lua code but an error's. */
static void pack_all(lua_State *L, gl_kernel *k, int first, unsigned char *buf,
                     arg_ref *refs, int nrefs, const char *fn) {
    const int n = k->nparams;
    if (n && k->arg_class[0] == 0) classify_params(k);
    const int dev = gl_current_device(); /* nothing here changes it */
    arg_ref scratch;
    const gl_param *p = k->params;
    unsigned char *cls = k->arg_class;
    for (int i = 0; i < n; i++, p++, cls++) {
        arg_ref *ref = i < nrefs ? &refs[i] : &scratch;
        unsigned char *dst = buf + p->offset;
        if (!pack_common(L, first + i, p, cls, dst, ref, dev))
            pack_arg(L, first + i, p, ARG_CLASS(*cls), dst, ref, fn, i + 1);
    }
}

static void check_arg_count(lua_State *L, const gl_kernel *k, int given, const char *fn) {
    if (given != k->nparams)
        luaL_error(L, "%s: kernel '%s' takes %d argument%s, got %d", fn, k->name, k->nparams,
                   k->nparams == 1 ? "" : "s", given);
}

/* ------------------------------------------------------------------------------------------
 * Configuration: {grid=n|{x,y,z}, block=n|{x,y,z}, smem=bytes, stream=s}
 * ------------------------------------------------------------------------------------------ */
/* One axis of grid/block (field `what` of the configuration at argument cfg_arg). */
/* t: the value's type, which the caller has read (a string is not coerced). */
static unsigned check_dim(lua_State *L, int cfg_arg, int idx, int t, const char *fn, const char *what,
                          int axis, int limit) {
    static const char axes[] = "xyz";
    int isint = 0;
    lua_Integer v = t == LUA_TNUMBER ? lua_tointegerx(L, idx, &isint) : 0;
    if (!isint)
        gl_fielderror(L, cfg_arg, fn, what, "%c: integer expected, got %s", axes[axis],
                      t == LUA_TNUMBER ? lua_tostring(L, idx) : gl_typename(L, idx));
    if (v < 1 || v > limit)
        gl_fielderror(L, cfg_arg, fn, what, "%c = %lld is out of range 1..%d (device limit)", axes[axis],
                      (long long)v, limit);
    return (unsigned)v;
}

/* grid/block/cluster given as {x, y, z} (or anything else, which is refused by name). */
static void read_dim_table(lua_State *L, int cfg_arg, int idx, int t, const char *fn, const char *what,
                           const int limits[3], unsigned out[3]) {
    if (t != LUA_TTABLE) {
        if (t == LUA_TNIL) gl_fielderror(L, cfg_arg, fn, what, "required (a number or {x,y,z})");
        gl_fieldtypeerror(L, cfg_arg, fn, what, idx, "number or {x,y,z}");
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    if (n < 1 || n > 3) gl_fielderror(L, cfg_arg, fn, what, "1 to 3 entries expected, got %lld",
                                      (long long)n);
    for (int i = 0; i < n; i++) {
        int ti = lua_rawgeti(L, idx, i + 1);
        out[i] = check_dim(L, cfg_arg, -1, ti, fn, what, i, limits[i]);
        lua_pop(L, 1);
    }
}

/* One of grid/block/cluster (field `what` of the configuration at cfg_arg, its value at idx): a
 * number is the common case and costs two API calls. */
static inline void read_dims(lua_State *L, int cfg_arg, int idx, const char *fn, const char *what,
                             const int limits[3], unsigned out[3]) {
    int t = lua_type(L, idx);
    out[1] = out[2] = 1;
    if (t == LUA_TNUMBER) {
        int isint = 0;
        lua_Integer v = lua_tointegerx(L, idx, &isint);
        out[0] = isint && v >= 1 && v <= limits[0] ? (unsigned)v
                                                   : check_dim(L, cfg_arg, idx, t, fn, what, 0, limits[0]);
        return;
    }
    read_dim_table(L, cfg_arg, idx, t, fn, what, limits, out);
}

/* The configuration's keys, in the order read_cfg checks their values (NULL-terminated for
 * gl_check_known_fields). */
enum { CFG_GRID, CFG_BLOCK, CFG_SMEM, CFG_STREAM, CFG_CLUSTER, CFG_COOPERATIVE, CFG_PDL,
       CFG_PRIORITY, CFG_L2_WINDOW, CFG_KEYS };
static const char *const cfg_key_names[CFG_KEYS + 1] = {
    "grid", "block", "smem", "stream", "cluster", "cooperative", "pdl", "priority", "l2_window", NULL};
/* The keys from CFG_FIRST_ATTR on make a launch go through cuLaunchKernelEx. */
#define CFG_FIRST_ATTR CFG_CLUSTER

/* k.launch and k.prepare (the only callers of read_cfg) hold the key strings and the marking
 * metatable as upvalues: pushing one runs no collector step (a private-store lookup pushes a
 * string, which can, and so run a finalizer before the table is read), and costs a third of what
 * lua_getfield's string lookup does. gpulab's debug.setupvalue refuses C functions, so a script
 * cannot replace them. */
#define KEY_UPVALUE(key) lua_upvalueindex(1 + (key))
#define MARK_UPVALUE lua_upvalueindex(1 + CFG_KEYS)

/* The addresses of this Lua state's configuration key strings ("grid", "block", ...), cached in the
 * kernel (which lives in that state). Short strings are interned, so a table key equal to one
 * of them is that very string as long as it lives, and the upvalues keep them alive. */
static const void *const *cfg_keys(lua_State *L, gl_kernel *k) {
    if (k->launch_keys[0] == NULL)
        for (int i = 0; i < CFG_KEYS; i++) k->launch_keys[i] = lua_topointer(L, KEY_UPVALUE(i));
    return k->launch_keys;
}

/* One pass over the configuration table, which is all a launch reads of it (reading grid and
 * block again by key would cost as much as the walk). at[key] gets the stack index of that
 * key's value, 0 when absent; the values stay on the stack (the caller resets its top).
 * lua_topointer on a key neither converts nor moves it, so the walk goes on. Returns whether
 * there was any other key; those values are popped, so the stack grows by at most 2 * CFG_KEYS + 1. */
static bool collect_cfg(lua_State *L, int idx, const void *const keys[CFG_KEYS], int at[CFG_KEYS]) {
    for (int i = 0; i < CFG_KEYS; i++) at[i] = 0;
    bool unknown = false;
    lua_pushnil(L);
    int key_at = lua_gettop(L); /* where lua_next leaves the key; the value is above it */
    const int first_key = key_at;
    while (lua_next(L, idx)) {
        const void *key = lua_topointer(L, key_at);
        int i = 0;
        while (i < CFG_KEYS && key != keys[i]) i++;
        if (i < CFG_KEYS) {
            /* a C function is promised LUA_MINSTACK (20) free slots: grid, block and two more
               keys fit in them; a configuration with attributes asks for room, also for the
               error paths after the walk (an unknown key's or a cluster's message: 6 more) */
            if (key_at - first_key >= 8 && !lua_checkstack(L, 12))
                luaL_error(L, "launch configuration: stack overflow");
            at[i] = key_at + 1;
            lua_pushvalue(L, key_at); /* the key, for lua_next; the value stays */
            key_at += 2;
        } else {
            lua_pop(L, 1);
            unknown = true;
        }
    }
    return unknown;
}

static void read_attrs(lua_State *L, int idx, gl_kernel *k, launch_cfg *cfg, const int at[CFG_KEYS],
                       const char *fn);
static bool check_required_cluster_grid(lua_State *L, int idx, const gl_kernel *k, const unsigned grid[3],
                                        unsigned cluster[3], const char *fn);

/* Cuts the stack back to `top`, but first moves the stream value (at stream, 0 for none) and the
 * window's array (at cfg->window_at) to the slots just above it: the call holds them from there
 * on, whatever the script's table holds by then. Lower slots to higher-or-equal ones only, so
 * nothing is overwritten before it is copied. */
static void keep_objects(lua_State *L, int top, int stream, launch_cfg *cfg) {
    cfg->stream_at = 0;
    if (stream) {
        lua_copy(L, stream, ++top);
        cfg->stream_at = top;
    }
    if (cfg->window_at) {
        lua_copy(L, cfg->window_at, ++top);
        cfg->window_at = top;
    }
    lua_settop(L, top);
}

/* ------------------------------------------------------------------------------------------
 * The checked configuration, remembered per kernel.
 * A lab launches one kernel with one table again and again, changing a value or two in between
 * (cfg.grid = n). Walking the table for misspelt keys and checking every value again cost a
 * launch with pdl=true about 1,200 instructions (callgrind), more than a third of gpulab's own.
 * So a kernel remembers the last two tables whose checks passed and the configurations they gave;
 * a launch with one of them reads just the values of the keys it had, and takes the remembered
 * configuration when every one is the same. A key added to the table is seen through a metatable
 * (the mark, only __newindex: MARK_UPVALUE) that gpulab puts on a table checked again after a check of it
 * passed, when the table has no metatable of its own: a new key makes every kernel check its next
 * configuration in full, as a kernel attribute set does (gl_forget_launch_checks). A rawset past
 * __newindex is not seen, nor a key added while a script had changed the mark's __newindex (docs/api.lua
 * says both).
 * The kernel does not keep the table alive: its address is only compared, and a table that takes
 * a forgotten one's address gets the mark only by being checked twice, which forgets every
 * remembered check (a script that copies the mark onto its own table can get only a launch that
 * an earlier check passed for this kernel).
 * ------------------------------------------------------------------------------------------ */

/* One remembered check: the table it is for, and what the check read and concluded. */
typedef struct cfg_entry {
    const void *table;   /* NULL: none */
    uint64_t epoch;      /* cfg_epoch when the check passed */
    int device;          /* the current device then */
    int nkeys;
    int stream_pos;      /* the stream's place among the keys, -1 when there is none */
    unsigned char key[CFG_KEYS]; /* the keys the table had, and their values as read_cfg took them: */
    unsigned char type[CFG_KEYS]; /* LUA_TNUMBER, LUA_TBOOLEAN, or LUA_TUSERDATA (a stream) */
    lua_Integer value[CFG_KEYS]; /* an integer, 0/1, or the stream's address */
    launch_cfg cfg;      /* what the check concluded (no l2_window: a table value is not remembered) */
} cfg_entry;

/* Two tables per kernel, the most recently checked first: a lab that alternates two shapes of
 * one kernel (a ping-pong, a launch with and without pdl) takes the remembered check for both. */
#define CFG_MEMORY 2 /* the code below reads slots 0 and 1 by name */
typedef struct cfg_cache {
    const void *seen[CFG_MEMORY]; /* the last tables whose check passed for this kernel, the
                                     newest first: checked again, one gets the mark */
    const void *mark;    /* the mark of the kernel's Lua state (k.launch's MARK_UPVALUE, which lives
                            as long as the state and so the kernel) */
    cfg_entry entry[CFG_MEMORY]; /* the newest first */
} cfg_cache;
_Static_assert(sizeof(cfg_cache) <= GL_LAUNCH_CACHE_BYTES && _Alignof(cfg_cache) <= 8,
               "gl_kernel.launch_cache cannot hold a cfg_cache");

static uint64_t cfg_epoch = 1;     /* moves on with every new key in a marked table, every mark */

void gl_forget_launch_checks(void) { cfg_epoch++; }

static cfg_cache *cache_of(gl_kernel *k) { return (cfg_cache *)(void *)k->launch_cache; }

/* __newindex of a marked configuration: a new key (or one set again after nil) is stored, and
 * every kernel's next launch checks its configuration in full. */
static int l_cfg_newindex(lua_State *L) {
    if (lua_type(L, 1) != LUA_TTABLE)
        gl_argerror(L, 1, "launch configuration __newindex", "table expected, got %s", gl_typename(L, 1));
    lua_settop(L, 3);
    cfg_epoch++;
    lua_rawset(L, 1);
    return 0;
}

/* The value at idx as the remembered check holds it: false for a value it does not remember. */
static bool remembered_value(lua_State *L, int idx, int t, int key, lua_Integer *v) {
    int isint = 1;
    if (t == LUA_TNUMBER) *v = lua_tointegerx(L, idx, &isint);
    else if (t == LUA_TBOOLEAN) *v = lua_toboolean(L, idx);
    else if (t == LUA_TUSERDATA && key == CFG_STREAM) *v = (lua_Integer)(uintptr_t)lua_topointer(L, idx);
    else return false; /* a table ({x,y,z}, l2_window) can change inside: checked every time */
    return isint;
}

/* The table at idx (address t) is checked in full. When it is one whose check passed last for
 * this kernel, it gets the mark (unless it has a metatable) and this returns true: the check can
 * be remembered. A table built for one launch costs two compares, and a table no check passed
 * (k:launch(_G), say) is never marked. Runs no Lua code and no collector step: the table is
 * read after this, as the script left it before the call. */
static bool mark_if_checked_before(lua_State *L, int idx, const void *t, gl_kernel *k) {
    const cfg_cache *c = cache_of(k);
    if (c->seen[0] != t && c->seen[1] != t) return false;
    int top = lua_gettop(L);
    if (!lua_getmetatable(L, idx)) {
        lua_pushvalue(L, MARK_UPVALUE);
        cfg_epoch++; /* a check remembered for a table that had this address is forgotten */
        gl_lua_setmetatable(L, idx);
    }
    lua_settop(L, top);
    return true;
}

/* A check of the table t passed: checked again, it gets the mark (the two newest are kept). */
static void note_seen(gl_kernel *k, const void *t) {
    cfg_cache *c = cache_of(k);
    if (c->seen[0] == t) return;
    c->seen[1] = c->seen[0];
    c->seen[0] = t;
}

/* The entry a new remembered check goes to: the first, after the one there (if any) moves to the
 * second place, replacing the older. */
static cfg_entry *newest_entry(cfg_cache *c) {
    if (c->entry[0].table != NULL) c->entry[1] = c->entry[0];
    return &c->entry[0];
}

/* After a check passed: remembers it, when the table is marked and every value is one
 * remembered_value takes. at[]: the values' stack slots, as collect_cfg found them. */
static void remember_cfg(lua_State *L, int idx, const void *t, gl_kernel *k, const launch_cfg *cfg,
                         const int at[CFG_KEYS]) {
    cfg_cache *c = cache_of(k);
    if (c->entry[0].table == t) c->entry[0].table = NULL; /* checks of t's old values */
    if (c->entry[1].table == t) c->entry[1].table = NULL;
    if (!lua_getmetatable(L, idx)) return;
    c->mark = lua_topointer(L, MARK_UPVALUE);
    bool marked = lua_topointer(L, -1) == c->mark;
    lua_pop(L, 1);
    if (!marked) return;
    cfg_entry e = {.table = NULL, .stream_pos = -1};
    int n = 0;
    for (int i = 0; i < CFG_KEYS; i++) {
        if (at[i] == 0) continue;
        int type = lua_type(L, at[i]);
        if (!remembered_value(L, at[i], type, i, &e.value[n])) return;
        if (i == CFG_STREAM) e.stream_pos = n;
        e.key[n] = (unsigned char)i;
        e.type[n] = (unsigned char)type;
        n++;
    }
    e.nkeys = n;
    e.cfg = *cfg;
    e.epoch = cfg_epoch;
    e.device = gl_current_device();
    e.table = t;
    *newest_entry(c) = e;
}

/* The value at idx is the remembered configuration's stream, alive and on the current device.
 * Its address alone proves nothing: rawset can put another object where the stream was once
 * collected (a freed stream, or its track, is what the full check names). */
static bool same_stream(lua_State *L, int idx, const launch_cfg *cfg) {
    gl_stream *s = gl_test_stream(L, idx);
    return s == cfg->stream && s->track == cfg->track && s->device == gl_current_device();
}

/* *to = *from, but only the attributes in use (a launch copies it). Fixed sizes, which the
 * compiler copies with a few moves: a memcpy of the variable length was a call, about 30
 * instructions a launch. */
static void copy_cfg(launch_cfg *to, const launch_cfg *from) {
    memcpy(to, from, offsetof(launch_cfg, attrs));
    if (from->nattrs) {
        to->attrs[0] = from->attrs[0];
        for (unsigned i = 1; i < from->nattrs; i++) to->attrs[i] = from->attrs[i];
    }
    to->window_array = from->window_array;
    to->window_at = from->window_at;
}

/* The remembered check, when the table at idx is the one it was for and holds the same values:
 * fills cfg and leaves the stream above `top` as read_cfg does. Reads only the remembered keys,
 * raw (no walk, and no metamethod runs). */
static bool reuse_cfg(lua_State *L, int idx, const void *t, gl_kernel *k, launch_cfg *cfg, int top) {
    const cfg_cache *c = cache_of(k);
    const cfg_entry *e = &c->entry[0];
    if (e->table != t) e = &c->entry[1];
    if (e->table != t || e->epoch != cfg_epoch || e->device != gl_current_device())
        return false;
    if (!lua_getmetatable(L, idx)) return false;
    if (lua_topointer(L, -1) != c->mark) {
        lua_settop(L, top);
        return false;
    }
    /* the mark and the values stay on the stack (at most 1 + CFG_KEYS slots) until keep_objects */
    for (int i = 0; i < e->nkeys; i++) {
        lua_pushvalue(L, KEY_UPVALUE(e->key[i]));
        int type = lua_rawget(L, idx);
        if (type != e->type[i]) {
            lua_settop(L, top);
            return false;
        }
        /* remembered_value, for a type the entry holds: a userdata only for the stream */
        int isint = 1;
        lua_Integer v = type == LUA_TNUMBER    ? lua_tointegerx(L, -1, &isint)
                        : type == LUA_TBOOLEAN ? lua_toboolean(L, -1)
                                               : (lua_Integer)(uintptr_t)lua_topointer(L, -1);
        if (!isint || v != e->value[i]) {
            lua_settop(L, top);
            return false;
        }
    }
    int stream_at = e->stream_pos < 0 ? 0 : top + 2 + e->stream_pos;
    if (stream_at && !same_stream(L, stream_at, &e->cfg)) {
        lua_settop(L, top);
        return false;
    }
    copy_cfg(cfg, &e->cfg);
    keep_objects(L, top, stream_at, cfg);
    return true;
}

/* Reads and checks the configuration table at idx (the kernel k is at index 1). The stream and the
 * window's array stay on the stack above its old top, `top` (cfg->stream_at, cfg->window_at): a
 * caller counts its arguments first, and passes the top it read for that. */
static void read_cfg(lua_State *L, int idx, gl_kernel *k, launch_cfg *cfg, int top, const char *fn) {
    if (lua_type(L, idx) != LUA_TTABLE)
        gl_argerror(L, idx, fn, "launch configuration {grid=, block=, ...} expected, got %s", gl_typename(L, idx));
    const void *t = lua_topointer(L, idx);
    if (reuse_cfg(L, idx, t, k, cfg, top)) return;
    bool again = mark_if_checked_before(L, idx, t, k);
    const gl_device_limits *d = k->limits;
    int at[CFG_KEYS];
    const void *const *keys = cfg_keys(L, k);
    gl_kernel_sync_attributes(k); /* set through another kernel object for the same function */
    bool unknown = collect_cfg(L, idx, keys, at);
    if (at[CFG_GRID] == 0 || at[CFG_BLOCK] == 0) { /* a nil for read_dims to name as missing */
        lua_pushnil(L);
        if (at[CFG_GRID] == 0) at[CFG_GRID] = lua_gettop(L);
        if (at[CFG_BLOCK] == 0) at[CFG_BLOCK] = lua_gettop(L);
    }
    int grid = at[CFG_GRID], block = at[CFG_BLOCK], smem = at[CFG_SMEM], stream = at[CFG_STREAM];
    read_dims(L, idx, grid, fn, "grid", d->max_grid, cfg->grid);
    read_dims(L, idx, block, fn, "block", d->max_block, cfg->block);
    unsigned long long threads = (unsigned long long)cfg->block[0] * cfg->block[1] * cfg->block[2];
    int max_threads = k->max_threads < d->max_threads_per_block ? k->max_threads : d->max_threads_per_block;
    if (threads > (unsigned long long)max_threads)
        gl_fielderror(L, idx, fn, "block", "%d threads exceed the limit of %d for kernel '%s' on this device",
                      (int)threads, max_threads, k->name);
    cfg->smem = 0;
    if (smem) {
        int isint = 0;
        lua_Integer s = lua_tointegerx(L, smem, &isint);
        if (!isint || s < 0 || lua_type(L, smem) != LUA_TNUMBER)
            gl_fielderror(L, idx, fn, "smem", "non-negative integer number of bytes expected, got %s",
                          lua_type(L, smem) == LUA_TNUMBER ? lua_tostring(L, smem) : gl_typename(L, smem));
        if (s > k->max_dynamic_smem)
            gl_fielderror(L, idx, fn, "smem",
                          "%lld bytes exceed kernel '%s''s dynamic shared memory limit of "
                          "%d bytes (k:set_max_dynamic_smem raises it, up to %d minus %d static)",
                          (long long)s, k->name, k->max_dynamic_smem, d->smem_optin, k->static_smem);
        cfg->smem = (unsigned)s;
    }
    cfg->stream = NULL;
    cfg->track = gl_default_track();
    if (stream) {
        cfg->track = gl_opt_stream_field(L, idx, stream, "stream", fn);
        cfg->stream = gl_test_stream(L, stream);
    }
    if (unknown) gl_check_known_fields(L, idx, cfg_key_names, fn); /* names the key */
    cfg->nattrs = 0;
    cfg->window_array = NULL;
    cfg->window_at = 0;
    if (at[CFG_CLUSTER] | at[CFG_COOPERATIVE] | at[CFG_PDL] | at[CFG_PRIORITY] | at[CFG_L2_WINDOW])
        read_attrs(L, idx, k, cfg, at, fn);
    else {
        unsigned cluster[3];
        check_required_cluster_grid(L, idx, k, cfg->grid, cluster, fn);
    }
    note_seen(k, t); /* checked again, it gets the mark */
    if (again) remember_cfg(L, idx, t, k, cfg, at);
    keep_objects(L, top, stream, cfg);
}

/* ------------------------------------------------------------------------------------------
 * Launch attributes: cluster=, cooperative=, pdl=, priority=, l2_window= (cuLaunchKernelEx).
 * Each is checked before the driver, against the device's limits, the kernel's compiled-in
 * cluster shape and the occupancy the driver reports; the occupancy queries are cached in the
 * kernel, so a repeated launch asks the driver nothing but the launch.
 * ------------------------------------------------------------------------------------------ */
static CUlaunchAttribute *add_attr(launch_cfg *cfg, CUlaunchAttributeID id) {
    CUlaunchAttribute *a = &cfg->attrs[cfg->nattrs++];
    memset(a, 0, sizeof *a);
    a->id = id;
    return a;
}

static unsigned long long dims_product(const unsigned d[3]) {
    return (unsigned long long)d[0] * d[1] * d[2];
}

/* "(2,1,1)" */
static const char *push_dims(lua_State *L, const unsigned d[3]) {
    return lua_pushfstring(L, "(%d,%d,%d)", (int)d[0], (int)d[1], (int)d[2]);
}

static void require_entry(lua_State *L, int idx, const char *fn, const char *key, const void *entry,
                          const char *name) {
    if (entry == NULL)
        gl_fielderror(L, idx, fn, key, "needs the driver entry point %s (a CUDA 12.0 driver or newer); "
                                       "this driver is %d.%d", name, gl_driver_version() / 1000,
                      gl_driver_version() % 1000 / 10);
}

static bool read_flag(lua_State *L, int idx, int value, const char *key, const char *fn) {
    if (lua_type(L, value) != LUA_TBOOLEAN) gl_fieldtypeerror(L, idx, fn, key, value, "true or false");
    return lua_toboolean(L, value);
}

static void check_grid_multiple(lua_State *L, int idx, const unsigned grid[3], const unsigned cluster[3],
                                const char *fn, const char *key, const char *whose) {
    static const char axes[] = "xyz";
    for (int i = 0; i < 3; i++)
        if (grid[i] % cluster[i] != 0)
            gl_fielderror(L, idx, fn, key, "grid %c = %u is not a multiple of the %s%scluster's %c = %u (grid "
                                           "is counted in blocks, and every cluster must be whole)",
                          axes[i], grid[i], whose, *whose ? " " : "", axes[i], cluster[i]);
}

/* A launch without cluster= runs in clusters of the kernel's required shape, when it has one
 * (returned in cluster; all 0 when none): the grid must be a multiple of it. */
static bool check_required_cluster_grid(lua_State *L, int idx, const gl_kernel *k, const unsigned grid[3],
                                        unsigned cluster[3], const char *fn) {
    if (!gl_kernel_required_cluster(L, k, cluster, fn)) return false;
    check_grid_multiple(L, idx, grid, cluster, fn, "grid", gl_kernel_cluster_origin(k));
    return true;
}

static bool same_check(const struct gl_launch_checked *c, unsigned threads, unsigned smem,
                       const unsigned cluster[3]) {
    return c->limit > 0 && c->block_threads == threads && c->smem == smem && c->cluster[0] == cluster[0] &&
           c->cluster[1] == cluster[1] && c->cluster[2] == cluster[2];
}

static void remember_check(struct gl_launch_checked *c, unsigned threads, unsigned smem,
                           const unsigned cluster[3], int limit) {
    c->block_threads = threads;
    c->smem = smem;
    memcpy(c->cluster, cluster, sizeof c->cluster);
    c->limit = limit;
}

/* Clusters of this shape that can be co-resident (cuOccupancyMaxActiveClusters), 0 when none fit. */
static int active_clusters(lua_State *L, gl_kernel *k, const launch_cfg *cfg, const unsigned cluster[3],
                           const char *fn) {
    CUlaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = cluster[0];
    a.value.clusterDim.y = cluster[1];
    a.value.clusterDim.z = cluster[2];
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = cluster[0]; /* one cluster's worth: the query wants a grid the cluster divides */
    c.gridDimY = cluster[1];
    c.gridDimZ = cluster[2];
    c.blockDimX = cfg->block[0];
    c.blockDimY = cfg->block[1];
    c.blockDimZ = cfg->block[2];
    c.sharedMemBytes = cfg->smem;
    c.attrs = &a;
    c.numAttrs = 1;
    int n = 0;
    GL_CHECK(L, gl_cu.cuOccupancyMaxActiveClusters(&n, k->fn, &c), fn, "cuOccupancyMaxActiveClusters");
    return n;
}

static void read_cluster(lua_State *L, int idx, gl_kernel *k, launch_cfg *cfg, int value, unsigned cluster[3],
                         const char *fn) {
    const gl_device_limits *d = k->limits;
    static const int axis_limit[3] = {16, 16, 16};
    read_dims(L, idx, value, fn, "cluster", axis_limit, cluster);
    if (!d->cluster_launch)
        gl_fielderror(L, idx, fn, "cluster", "device %d (compute capability %d.%d) cannot launch thread block "
                                             "clusters (they need 9.0 or newer)", d->ordinal, d->cc_major,
                      d->cc_minor);
    require_entry(L, idx, fn, "cluster", (const void *)gl_cu.cuLaunchKernelEx, "cuLaunchKernelEx");
    unsigned required[3];
    if (gl_kernel_cluster_contradicts(k, cluster, required)) {
        gl_fielderror(L, idx, fn, "cluster", "%s contradicts kernel '%s''s %s%s (leave cluster out, or give "
                                             "the same shape)",
                      push_dims(L, cluster), k->name, gl_kernel_cluster_origin(k), push_dims(L, required));
    }
    check_grid_multiple(L, idx, cfg->grid, cluster, fn, "cluster", "");
    unsigned long long size = dims_product(cluster);
    if (size > 16)
        gl_fielderror(L, idx, fn, "cluster", "%s is %llu blocks; the device allows at most 16 per cluster (8 "
                                             "portably)", push_dims(L, cluster), size);
    if (size > 8 && !k->nonportable_cluster)
        gl_fielderror(L, idx, fn, "cluster", "%s is %llu blocks, above the portable limit of 8: "
                                             "k:set_attribute(\"non_portable_cluster_size_allowed\", 1) allows up to 16 "
                                             "on this device", push_dims(L, cluster), size);
    unsigned threads = (unsigned)dims_product(cfg->block);
    if (gl_cu.cuOccupancyMaxActiveClusters == NULL || same_check(&k->checked_cluster, threads, cfg->smem, cluster))
        return;
    int n = active_clusters(L, k, cfg, cluster, fn);
    if (n < 1)
        gl_fielderror(L, idx, fn, "cluster", "no cluster of %llu blocks of %u threads with %u bytes of dynamic "
                                             "shared memory can be resident at once on this device "
                                             "(cuOccupancyMaxActiveClusters = 0; k:max_cluster_size{...} says "
                                             "how large one can be)", size, threads, cfg->smem);
    remember_check(&k->checked_cluster, threads, cfg->smem, cluster, n);
}

/* Blocks that can be resident at once: occupancy x SMs, or co-resident clusters x their size. */
static void check_cooperative(lua_State *L, int idx, gl_kernel *k, const launch_cfg *cfg,
                              const unsigned cluster[3], const char *fn) {
    const gl_device_limits *d = k->limits;
    if (!d->cooperative_launch)
        gl_fielderror(L, idx, fn, "cooperative", "device %d does not support cooperative launches", d->ordinal);
    require_entry(L, idx, fn, "cooperative", (const void *)gl_cu.cuLaunchKernelEx, "cuLaunchKernelEx");
    unsigned threads = (unsigned)dims_product(cfg->block);
    unsigned long long blocks = dims_product(cfg->grid);
    bool clustered = cluster[0] != 0;
    const unsigned none[3] = {0, 0, 0};
    const unsigned *key = clustered ? cluster : none;
    if (!same_check(&k->checked_coop, threads, cfg->smem, key)) {
        int limit = 0;
        if (clustered) {
            if (gl_cu.cuOccupancyMaxActiveClusters)
                limit = active_clusters(L, k, cfg, cluster, fn) * (int)dims_product(cluster);
        } else {
            int per_sm = 0;
            GL_CHECK(L, gl_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->fn, (int)threads, cfg->smem),
                     fn, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
            limit = per_sm * d->sm_count;
        }
        if (limit < 1)
            gl_fielderror(L, idx, fn, "cooperative", "no block of %u threads with %u bytes of dynamic shared "
                                                     "memory of kernel '%s' can be resident, so no cooperative "
                                                     "grid can run", threads, cfg->smem, k->name);
        remember_check(&k->checked_coop, threads, cfg->smem, key, limit);
    }
    int limit = k->checked_coop.limit;
    if (blocks <= (unsigned long long)limit) return;
    if (clustered)
        gl_fielderror(L, idx, fn, "cooperative", "a cooperative grid of %llu blocks exceeds the %d that can be "
                                                 "co-resident (%d clusters of %llu blocks, "
                                                 "cuOccupancyMaxActiveClusters); every block of a cooperative "
                                                 "grid must be resident at once, and gpulab never shrinks it",
                      blocks, limit, limit / (int)dims_product(cluster), dims_product(cluster));
    gl_fielderror(L, idx, fn, "cooperative", "a cooperative grid of %llu blocks exceeds the %d that can be "
                                             "co-resident (%d blocks of %u threads per SM with %u bytes of dynamic "
                                             "shared memory x %d SMs); every block of a cooperative grid must be "
                                             "resident at once, and gpulab never shrinks it",
                  blocks, limit, limit / d->sm_count, threads, cfg->smem, d->sm_count);
}

static void read_pdl(lua_State *L, int idx, const gl_kernel *k, const char *fn) {
    const gl_device_limits *d = k->limits;
    if (d->cc_major < 9)
        gl_fielderror(L, idx, fn, "pdl", "programmatic dependent launch needs compute capability 9.0 or newer; "
                                         "device %d is %d.%d", d->ordinal, d->cc_major, d->cc_minor);
    require_entry(L, idx, fn, "pdl", (const void *)gl_cu.cuLaunchKernelEx, "cuLaunchKernelEx");
}

static int read_priority(lua_State *L, int idx, const gl_kernel *k, int value, const char *fn) {
    const gl_device_limits *d = k->limits;
    int isint = 0;
    lua_Integer p = lua_type(L, value) == LUA_TNUMBER ? lua_tointegerx(L, value, &isint) : 0;
    if (!isint) {
        if (lua_type(L, value) == LUA_TNUMBER)
            gl_fielderror(L, idx, fn, "priority", "integer expected, got %s", lua_tostring(L, value));
        gl_fieldtypeerror(L, idx, fn, "priority", value, "integer");
    }
    if (p < d->priority_greatest || p > d->priority_least)
        gl_fielderror(L, idx, fn, "priority", "%lld is out of this device's range %d..%d (lower is more urgent: "
                                              "%d the highest, %d the default)", (long long)p,
                      d->priority_greatest, d->priority_least, d->priority_greatest, d->priority_least);
    require_entry(L, idx, fn, "priority", (const void *)gl_cu.cuLaunchKernelEx, "cuLaunchKernelEx");
    return (int)p;
}

/* l2_window = {array=d | ptr=, bytes=, hit_ratio=1, hit="persisting", miss="streaming"}: read and
 * checked by l2.c, as s:set_l2_window reads it. */
static void read_l2_window(lua_State *L, int idx, gl_kernel *k, launch_cfg *cfg, int value, const char *fn) {
    gl_l2_window w;
    gl_read_l2_window(L, idx, value, k->limits, "l2_window", fn, &w);
    require_entry(L, idx, fn, "l2_window", (const void *)gl_cu.cuLaunchKernelEx, "cuLaunchKernelEx");
    if (w.array) {
        cfg->window_array = w.array;
        cfg->window_at = w.array_at;
    }
    add_attr(cfg, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)->value.accessPolicyWindow = w.w;
}

static void read_attrs(lua_State *L, int idx, gl_kernel *k, launch_cfg *cfg, const int at[CFG_KEYS],
                       const char *fn) {
    unsigned cluster[3] = {0, 0, 0};
    if (at[CFG_CLUSTER]) {
        read_cluster(L, idx, k, cfg, at[CFG_CLUSTER], cluster, fn);
        CUlaunchAttribute *a = add_attr(cfg, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
        a->value.clusterDim.x = cluster[0];
        a->value.clusterDim.y = cluster[1];
        a->value.clusterDim.z = cluster[2];
    } else {
        check_required_cluster_grid(L, idx, k, cfg->grid, cluster, fn); /* the driver launches in these */
    }
    if (at[CFG_COOPERATIVE] && read_flag(L, idx, at[CFG_COOPERATIVE], "cooperative", fn)) {
        check_cooperative(L, idx, k, cfg, cluster, fn); /* cluster[0] == 0: no clusters */
        add_attr(cfg, CU_LAUNCH_ATTRIBUTE_COOPERATIVE)->value.cooperative = 1;
    }
    if (at[CFG_PDL] && read_flag(L, idx, at[CFG_PDL], "pdl", fn)) {
        read_pdl(L, idx, k, fn);
        add_attr(cfg, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)->value.programmaticStreamSerializationAllowed = 1;
    }
    if (at[CFG_PRIORITY]) {
        int p = read_priority(L, idx, k, at[CFG_PRIORITY], fn);
        add_attr(cfg, CU_LAUNCH_ATTRIBUTE_PRIORITY)->value.priority = p;
    }
    if (at[CFG_L2_WINDOW]) read_l2_window(L, idx, k, cfg, at[CFG_L2_WINDOW], fn);
}

/* ------------------------------------------------------------------------------------------
 * Submitting
 * ------------------------------------------------------------------------------------------ */

/* Launch timing, in builds configured with -DGPULAB_LAUNCH_TIMING=ON only: time-stamp ticks spent
 * in the driver's launch calls and in k:launch and prepared() as a whole, which
 * tools/launch_split.lua turns into a split of a launch's host time (docs/RESULTS.md §34). In
 * other builds the macros are empty and cuda.launch_timing does not exist. */
#ifdef GL_LAUNCH_TIMING
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static uint64_t timing_ticks(void) { return __rdtsc(); }
#else
static uint64_t timing_ticks(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif
static struct { uint64_t driver, driver_calls, call, call_calls; } timing;
#define TIMING_START(var) uint64_t var = timing_ticks()
#define TIMING_ADD(field, var) (timing.field += timing_ticks() - (var), timing.field##_calls++)
#else
#define TIMING_START(var) ((void)0)
#define TIMING_ADD(field, var) ((void)0)
#endif
static void check_module_usable(lua_State *L, const gl_kernel *k, const char *fn) {
    if (k->module->handle == NULL)
        luaL_error(L, "%s: the module of kernel '%s' was freed", fn, k->name);
    if (k->module->ordinal != gl_current_device())
        luaL_error(L, "%s: kernel '%s' was loaded on device %d, but device %d is current", fn,
                   k->name, k->module->ordinal, gl_current_device());
}

static void mark_ref(const arg_ref *r, gl_stream_track *t, uint64_t seq) {
    if (r->kind == REF_ARRAY) gl_use_mark(&((gl_array *)r->obj)->use, t, seq);
    else if (r->kind == REF_TENSORMAP) gl_use_mark(&((gl_tensormap *)r->obj)->use, t, seq);
}

/* The same loop over cuLaunchKernelEx, for a configuration with launch attributes. */
static void submit_with_attrs(lua_State *L, const gl_kernel *k, const launch_cfg *cfg, CUstream h, void **ptrs,
                              lua_Integer count, const char *fn) {
    CUlaunchConfig c = {.gridDimX = cfg->grid[0], .gridDimY = cfg->grid[1], .gridDimZ = cfg->grid[2],
                        .blockDimX = cfg->block[0], .blockDimY = cfg->block[1], .blockDimZ = cfg->block[2],
                        .sharedMemBytes = cfg->smem, .hStream = h, .attrs = (CUlaunchAttribute *)cfg->attrs,
                        .numAttrs = cfg->nattrs};
    void **params = k->nparams ? ptrs : NULL;
    for (lua_Integer n = 0; n < count; n++) {
        long obs = gl_observers ? gl_observe_begin(h, true) : -1;
        TIMING_START(t0);
        CUresult r = gl_cu.cuLaunchKernelEx(&c, k->fn, params, NULL);
        TIMING_ADD(driver, t0);
        GL_CHECK(L, r, fn, "cuLaunchKernelEx");
        if (obs >= 0) gl_observe_launch(obs, k->name, k->entry, cfg->grid, cfg->block, h);
    }
}

/* `count` launches of the packed arguments (ptrs: one pointer per parameter into them), one log
 * entry for them: a plain loop over cuLaunchKernel, as a C program would write it
 * (prepared:launch(n); every other launch is one). Under cuda.trace or cuda.profile each launch is
 * observed. */
static void submit(lua_State *L, gl_kernel *k, const launch_cfg *cfg, gl_stream_track *track,
                   void **ptrs, lua_Integer count, const char *fn) {
    CUstream h = gl_track_handle(track);
    gl_log_launch_padded(k->log_name, cfg->grid, cfg->block, h);
    if (cfg->nattrs) {
        submit_with_attrs(L, k, cfg, h, ptrs, count, fn);
        return;
    }
    for (lua_Integer n = 0; n < count; n++) {
        long obs = gl_observers ? gl_observe_begin(h, true) : -1; /* cuda.trace, cuda.profile */
        TIMING_START(t0);
        CUresult r = gl_cu.cuLaunchKernel(k->fn, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0],
                                          cfg->block[1], cfg->block[2], cfg->smem, h, k->nparams ? ptrs : NULL,
                                          NULL);
        TIMING_ADD(driver, t0);
        GL_CHECK(L, r, fn, "cuLaunchKernel");
        if (obs >= 0) gl_observe_launch(obs, k->name, k->entry, cfg->grid, cfg->block, h);
    }
}

/* kernelParams (one pointer per parameter into the packed buffer), not the
 * CU_LAUNCH_PARAM_BUFFER_POINTER form: on the H200 with driver 580.159 that form misplaced the
 * parameters after a 64-byte aligned 128-byte tensor map (the next pointer read as 0). */
static void point_params(const gl_kernel *k, unsigned char *buf, void **ptrs) {
    for (int i = 0; i < k->nparams; i++) ptrs[i] = buf + k->params[i].offset;
}

#define INLINE_REFS 32

static void recheck_window(lua_State *L, const launch_cfg *cfg, const char *fn) {
    if (cfg->window_array && cfg->window_array->ptr == 0)
        luaL_error(L, "%s: l2_window: the cuda.array was freed during the call", fn);
}

/* A finalizer may have freed the configuration's stream (the object itself is on the stack). */
static void recheck_stream(lua_State *L, const launch_cfg *cfg, const char *fn) {
    if (cfg->stream && cfg->stream->track != cfg->track)
        luaL_error(L, "%s: stream: the cuda.stream was freed during the call", fn);
}

/* After code that may have run Lua: the module and the packed objects must still be alive. */
static void recheck_refs(lua_State *L, const gl_kernel *k, const arg_ref *refs, int n, const char *fn) {
    check_module_usable(L, k, fn);
    for (int i = 0; i < n; i++) {
        if (refs[i].kind == REF_ARRAY && ((gl_array *)refs[i].obj)->ptr == 0)
            luaL_error(L, "%s: %s: the cuda.array was freed during the call", fn, gl_push_param_name(L, k, i));
        if (refs[i].kind == REF_TENSORMAP && !((gl_tensormap *)refs[i].obj)->valid)
            luaL_error(L, "%s: %s: the cuda.tensormap was freed during the call", fn, gl_push_param_name(L, k, i));
    }
}

/* Under s:capture the graph keeps the kernel and the launch's objects alive. Noting them
 * allocates, and a finalizer run by that may free the module, the configuration's stream or the
 * window's array: they are checked again here, and the arguments are packed (and so checked)
 * after this. */
static void note_for_capture(lua_State *L, const gl_kernel *k, const launch_cfg *cfg, const char *fn) {
    gl_capture_note(L, 1);
    for (int i = 0; i < k->nparams; i++)
        if (lua_type(L, 3 + i) == LUA_TUSERDATA) gl_capture_note(L, 3 + i);
    if (cfg->window_array) gl_capture_note(L, cfg->window_at);
    check_module_usable(L, k, fn);
    recheck_window(L, cfg, fn);
    recheck_stream(L, cfg, fn);
}

static int l_launch(lua_State *L) {
    TIMING_START(t0);
    const char *fn = "k:launch";
    gl_kernel *k = gl_check_kernel_inline(L, 1, fn);
    gl_require_gpu(L, fn);
    check_module_usable(L, k, fn);
    int top = lua_gettop(L);
    int given = top - 2; /* read_cfg leaves objects above the arguments */
    launch_cfg cfg;
    read_cfg(L, 2, k, &cfg, top, fn);
    check_arg_count(L, k, given, fn);
    if (k->launch_args == NULL)
        luaL_error(L, "%s: kernel '%s' takes %d bytes of parameters; the driver allows %d", fn,
                   k->name, (int)k->argbytes, GL_MAX_ARG_BYTES);
    if (gl_capture_active()) note_for_capture(L, k, &cfg, fn);
    /* The arguments go into the kernel's own buffer, whose pointers were made with the kernel:
       from here to the driver's copy of them no Lua code runs, so no other launch of this
       kernel (from a finalizer, say) can come between. */
    arg_ref refs[INLINE_REFS];
    pack_all(L, k, 3, k->launch_args, refs, INLINE_REFS, fn);

    uint64_t seq = gl_next_seq();
    gl_use_mark(&k->module->use, cfg.track, seq);
    if (cfg.window_array) gl_use_mark(&cfg.window_array->use, cfg.track, seq);
    int inline_refs = k->nparams < INLINE_REFS ? k->nparams : INLINE_REFS;
    for (int i = 0; i < inline_refs; i++) mark_ref(&refs[i], cfg.track, seq);
    for (int i = INLINE_REFS; i < k->nparams; i++) { /* rare: many parameters */
        gl_array *a = gl_test_array(L, 3 + i);
        if (a) gl_use_mark(&a->use, cfg.track, seq);
        gl_tensormap *tm = gl_test_tensormap(L, 3 + i);
        if (tm) gl_use_mark(&tm->use, cfg.track, seq);
    }
    submit(L, k, &cfg, cfg.track, k->launch_ptrs, 1, fn);
    TIMING_ADD(call, t0);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Prepared launches
 * ------------------------------------------------------------------------------------------ */
typedef struct prepared {
    gl_kernel *k;          /* uservalue UV_KERNEL keeps it (and its module) alive */
    launch_cfg cfg;        /* cfg.stream is kept alive by uservalue UV_STREAM */
    bool freed;
    int nargs;
    size_t bufsize;
    unsigned char *buf;    /* inside this userdata, 64-byte aligned */
    void **ptrs;           /* inside this userdata: nargs pointers into buf, for the driver */
    arg_ref refs[];        /* nargs entries; objects kept alive by uservalues UV_FIRST_ARG.. */
} prepared;

static prepared *check_prepared(lua_State *L, int idx, const char *fn) {
    prepared *P = gl_testudata(L, idx, PREPARED_T);
    if (P == NULL)
        gl_typeerror(L, idx, fn, "cuda.prepared");
    if (P->freed) /* always the object called or the method's self: no bad argument (errors.h) */
        luaL_error(L, "%s: the prepared launch was freed", fn);
    return P;
}

static int l_prepare(lua_State *L) {
    const char *fn = "k:prepare";
    gl_kernel *k = gl_check_kernel_inline(L, 1, fn);
    gl_require_gpu(L, fn);
    check_module_usable(L, k, fn);
    int top = lua_gettop(L);
    int nargs = top - 2; /* read_cfg leaves objects above the arguments */
    launch_cfg cfg;
    read_cfg(L, 2, k, &cfg, top, fn);
    check_arg_count(L, k, nargs, fn);
    if (k->argbytes > GL_MAX_ARG_BYTES)
        luaL_error(L, "%s: kernel '%s' takes %d bytes of parameters; the driver allows %d", fn,
                   k->name, (int)k->argbytes, GL_MAX_ARG_BYTES);
    size_t head = sizeof(prepared) + (size_t)nargs * (sizeof(arg_ref) + sizeof(void *));
    size_t size = head + 64 + k->argbytes;
    prepared *P = gl_newuserdatauv(L, size, UV_FIRST_ARG - 1 + nargs);
    /* the allocation may have run a finalizer that freed the module, the stream or the window's
       array (the arguments are checked as they are packed) */
    check_module_usable(L, k, fn);
    recheck_stream(L, &cfg, fn);
    recheck_window(L, &cfg, fn);
    memset(P, 0, head);
    P->k = k;
    P->cfg = cfg;
    P->nargs = nargs;
    P->bufsize = k->argbytes;
    P->ptrs = (void **)(P->refs + nargs);
    P->buf = (unsigned char *)(((uintptr_t)P + head + 63) & ~(uintptr_t)63);
    int self = lua_gettop(L);
    memset(P->buf, 0, k->argbytes); /* the bytes between parameters */
    pack_all(L, k, 3, P->buf, P->refs, nargs, fn);
    point_params(k, P->buf, P->ptrs);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, self, UV_KERNEL);
    if (cfg.stream) { /* the objects checked, from the stack: the table may hold others by now */
        lua_pushvalue(L, cfg.stream_at);
        lua_setiuservalue(L, self, UV_STREAM);
    }
    if (cfg.window_array) {
        lua_pushvalue(L, cfg.window_at);
        lua_setiuservalue(L, self, UV_WINDOW);
    }
    for (int i = 0; i < nargs; i++)
        if (P->refs[i].kind != REF_NONE) {
            lua_pushvalue(L, 3 + i);
            lua_setiuservalue(L, self, UV_FIRST_ARG + i);
        }
    gl_setmetatable(L, PREPARED_T);
    gl_live.prepared++;
    return 1;
}

/* During a capture: the graph keeps the kernel and the argument objects alive. */
static void note_prepared_objects(lua_State *L, const prepared *P) {
    lua_getiuservalue(L, 1, UV_KERNEL);
    gl_capture_note(L, -1);
    lua_pop(L, 1);
    if (P->cfg.window_array) {
        lua_getiuservalue(L, 1, UV_WINDOW);
        gl_capture_note(L, -1);
        lua_pop(L, 1);
    }
    for (int i = 0; i < P->nargs; i++)
        if (P->refs[i].kind != REF_NONE) {
            lua_getiuservalue(L, 1, UV_FIRST_ARG + i);
            gl_capture_note(L, -1);
            lua_pop(L, 1);
        }
}

/* A bound on prepared:launch(n): the loop runs in C, where Ctrl-C cannot stop it (about a minute of
 * back-to-back launches on an H200). */
#define MAX_REPEAT (1 << 24)

/* prepared() and prepared:launch(n): the hot path. Only liveness checks, marks, the log entry
 * and the launches; n launches are one C loop. with_count: prepared:launch(n) reads a count;
 * prepared(s) with a cuda.stream launches on s (cuda.measure calls any callable as fn(stream),
 * and its graph regime captures that stream), and ignores any other argument. */
static int prepared_launch(lua_State *L, const char *fn, bool with_count) {
    prepared *P = check_prepared(L, 1, fn);
    lua_Integer count = 1;
    if (with_count && !lua_isnoneornil(L, 2)) {
        int isint = 0;
        count = lua_tointegerx(L, 2, &isint);
        if (!isint || count < 1 || count > MAX_REPEAT)
            gl_argerror(L, 2, fn, "launch count 1..%d expected, got %s", MAX_REPEAT,
                        lua_type(L, 2) == LUA_TNUMBER ? lua_tostring(L, 2) : gl_typename(L, 2));
    }
    gl_kernel *k = P->k;
    gl_require_gpu(L, fn);
    check_module_usable(L, k, fn);
    gl_stream_track *track = P->cfg.track;
    gl_stream *given = with_count || lua_type(L, 2) != LUA_TUSERDATA ? NULL : gl_test_stream(L, 2);
    if (given) { /* prepared(s): cuda.measure's fn(s), so a capture of s records the launch */
        if (given->track == NULL) gl_argerror(L, 2, fn, "the cuda.stream was freed");
        if (given->device != k->module->ordinal)
            gl_argerror(L, 2, fn, "the cuda.stream belongs to device %d, the kernel to device %d", given->device,
                        k->module->ordinal);
        track = given->track;
    } else if (P->cfg.stream) {
        if (P->cfg.stream->track == NULL) luaL_error(L, "%s: its cuda.stream was freed", fn);
        track = P->cfg.stream->track;
    }
    uint64_t seq = gl_next_seq();
    for (int i = 0; i < P->nargs; i++) {
        arg_ref *r = &P->refs[i];
        if (r->kind == REF_ARRAY) {
            gl_array *a = r->obj;
            if (a->ptr == 0) luaL_error(L, "%s: %s: the cuda.array was freed", fn, gl_push_param_name(L, k, i));
            gl_use_mark(&a->use, track, seq);
        } else if (r->kind == REF_TENSORMAP) {
            gl_tensormap *tm = r->obj;
            const char *unusable = gl_tensormap_unusable(tm);
            if (unusable) luaL_error(L, "%s: %s: %s", fn, gl_push_param_name(L, k, i), unusable);
            /* tm:replace_address may have changed it since it was packed */
            memcpy(P->buf + k->params[i].offset, &tm->map, sizeof tm->map);
            gl_use_mark(&tm->use, track, seq);
        }
    }
    gl_use_mark(&k->module->use, track, seq);
    if (P->cfg.window_array) {
        if (P->cfg.window_array->ptr == 0) luaL_error(L, "%s: l2_window: the cuda.array was freed", fn);
        gl_use_mark(&P->cfg.window_array->use, track, seq);
    }
    if (gl_capture_active()) {
        note_prepared_objects(L, P); /* allocates: a finalizer may free what this launch uses */
        if (P->freed) luaL_error(L, "%s: the prepared launch was freed during the call", fn);
        recheck_refs(L, k, P->refs, P->nargs, fn);
        recheck_window(L, &P->cfg, fn);
        const gl_stream *s = given ? given : P->cfg.stream;
        if (s && s->track != track) luaL_error(L, "%s: stream: the cuda.stream was freed during the call", fn);
    }
    submit(L, k, &P->cfg, track, P->ptrs, count, fn);
    return 0;
}

static int l_prepared_call(lua_State *L) {
    TIMING_START(t0);
    int results = prepared_launch(L, "cuda.prepared", false);
    TIMING_ADD(call, t0);
    return results;
}
static int l_prepared_launch(lua_State *L) { return prepared_launch(L, "prepared:launch", true); }

/* prepared:set(i, value): repacks kernel argument i. */
static int l_prepared_set(lua_State *L) {
    const char *fn = "prepared:set";
    prepared *P = check_prepared(L, 1, fn);
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, 2, &isint);
    if (!isint || i < 1 || i > P->nargs)
        gl_argerror(L, 2, fn, "argument index 1..%d expected, got %s", P->nargs,
                    lua_type(L, 2) == LUA_TNUMBER ? lua_tostring(L, 2) : gl_typename(L, 2));
    if (lua_gettop(L) < 3) gl_argerror(L, 3, fn, "value expected");
    lua_settop(L, 3);
    const gl_param *p = &P->k->params[i - 1];
    unsigned char tmp[GL_MAX_ARG_BYTES];
    memset(tmp, 0, p->size);
    arg_ref ref;
    pack_arg(L, 3, p, ARG_CLASS(P->k->arg_class[i - 1]), tmp, &ref, fn, (int)i);
    memcpy(P->buf + p->offset, tmp, p->size);
    P->refs[i - 1] = ref;
    if (ref.kind != REF_NONE) lua_pushvalue(L, 3); else lua_pushnil(L);
    lua_setiuservalue(L, 1, UV_FIRST_ARG + (int)i - 1);
    lua_settop(L, 1);
    return 1;
}

/* __gc, __close, :free(): idempotent, never raises. */
static int prepared_free(lua_State *L) {
    prepared *P = gl_testudata(L, 1, PREPARED_T);
    if (P == NULL || P->freed) return 0;
    P->freed = true;
    gl_live.prepared--;
    /* drop the references so the arguments, stream and kernel can be collected */
    lua_pushnil(L);
    lua_setiuservalue(L, 1, UV_STREAM);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, UV_WINDOW);
    for (int i = 0; i < P->nargs; i++) {
        lua_pushnil(L);
        lua_setiuservalue(L, 1, UV_FIRST_ARG + i);
    }
    return 0;
}

static void add_dims(luaL_Buffer *b, lua_State *L, const unsigned d[3]) {
    if (d[1] == 1 && d[2] == 1) lua_pushfstring(L, "%d", (int)d[0]);
    else lua_pushfstring(L, "(%d,%d,%d)", (int)d[0], (int)d[1], (int)d[2]);
    luaL_addvalue(b);
}

/* " cluster=(2,1,1) cooperative pdl priority=-1 l2_window=4096B" for the attributes a launch carries */
static void add_attr_names(luaL_Buffer *b, lua_State *L, const launch_cfg *cfg) {
    for (unsigned i = 0; i < cfg->nattrs; i++) {
        const CUlaunchAttributeValue *v = &cfg->attrs[i].value;
        switch (cfg->attrs[i].id) {
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            lua_pushfstring(L, " cluster=(%d,%d,%d)", (int)v->clusterDim.x, (int)v->clusterDim.y,
                            (int)v->clusterDim.z);
            break;
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: lua_pushliteral(L, " cooperative"); break;
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: lua_pushliteral(L, " pdl"); break;
        case CU_LAUNCH_ATTRIBUTE_PRIORITY: lua_pushfstring(L, " priority=%d", v->priority); break;
        case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
            lua_pushfstring(L, " l2_window=%I bytes", (lua_Integer)v->accessPolicyWindow.num_bytes);
            break;
        default: lua_pushliteral(L, ""); break;
        }
        luaL_addvalue(b);
    }
}

static int prepared_tostring(lua_State *L) {
    prepared *P = gl_checkudata(L, 1, PREPARED_T);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "cuda.prepared ");
    luaL_addstring(&b, P->k->name);
    luaL_addstring(&b, "<<<");
    add_dims(&b, L, P->cfg.grid);
    luaL_addstring(&b, ", ");
    add_dims(&b, L, P->cfg.block);
    lua_pushfstring(L, ", %d>>> (%d args, %d bytes)", (int)P->cfg.smem, P->nargs, (int)P->bufsize);
    luaL_addvalue(&b);
    add_attr_names(&b, L, &P->cfg);
    if (P->freed) luaL_addstring(&b, " (freed)");
    luaL_pushresult(&b);
    return 1;
}

/* cuda.now(): a monotonic host clock in seconds, for measuring launch overhead from scripts
 * (device events time the GPU's side; this times the CPU's). */
static int l_now(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

#ifdef GL_LAUNCH_TIMING
/* cuda.launch_timing() -> {driver_ticks, driver_calls, call_ticks, call_calls, ticks}: the counts
 * since the last call (which resets them), and the tick counter now (to calibrate its rate). */
static int l_launch_timing(lua_State *L) {
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)timing.driver);
    lua_setfield(L, -2, "driver_ticks");
    lua_pushinteger(L, (lua_Integer)timing.driver_calls);
    lua_setfield(L, -2, "driver_calls");
    lua_pushinteger(L, (lua_Integer)timing.call);
    lua_setfield(L, -2, "call_ticks");
    lua_pushinteger(L, (lua_Integer)timing.call_calls);
    lua_setfield(L, -2, "call_calls");
    lua_pushinteger(L, (lua_Integer)timing_ticks());
    lua_setfield(L, -2, "ticks");
    memset(&timing, 0, sizeof timing);
    return 1;
}
#endif

void gl_open_launch(lua_State *L) {
    static const luaL_Reg meta[] = {{"__call", l_prepared_call}, {"__gc", prepared_free},
                                    {"__close", prepared_free}, {"__tostring", prepared_tostring},
                                    {NULL, NULL}};
    static const luaL_Reg methods[] = {{"set", l_prepared_set}, {"free", prepared_free},
                                       {"launch", l_prepared_launch}, {NULL, NULL}};
    gl_new_class(L, PREPARED_T, meta, methods, NULL);
    static const luaL_Reg kernel_methods[] = {{"launch", l_launch}, {"prepare", l_prepare},
                                              {NULL, NULL}};
    for (int i = 0; i < CFG_KEYS; i++) lua_pushstring(L, cfg_key_names[i]); /* KEY_UPVALUE(i) */
    lua_createtable(L, 0, 1); /* MARK_UPVALUE */
    lua_pushcfunction(L, l_cfg_newindex);
    lua_setfield(L, -2, "__newindex");
    gl_class_add_closures(L, GL_KERNEL_T, kernel_methods, CFG_KEYS + 1);
    lua_pushcfunction(L, l_now);
    lua_setfield(L, -2, "now");
#ifdef GL_LAUNCH_TIMING
    lua_pushcfunction(L, l_launch_timing);
    lua_setfield(L, -2, "launch_timing");
#endif
}
