/*
 * peer.c — several devices in one process: cuda.peer(a, b [, enable [, {both=true}]]), the
 * peer-access table the device checks consult, and the device rules of copies.
 *
 * Peer access is one-directional: "a -> b enabled" means kernels and copies running in device
 * a's context may touch memory allocated on device b (cuCtxEnablePeerAccess called in a's
 * context with b's). gpulab records what it enabled; it never enables anything by itself.
 * A copy between arrays of two devices needs no peer access: cuMemcpyPeer(Async) is staged
 * through the host by the driver when the devices cannot reach each other directly.
 */
#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "objects.h"
#include "options.h"
#include "peer.h"
#include "results.h"

#include <stdio.h>

#define FN "cuda.peer"

static bool enabled[GL_MAX_DEVICES][GL_MAX_DEVICES]; /* [from][to] */

static bool gl_peer_enabled(int from, int to) {
    if (from == to) return true;
    if (from < 0 || to < 0 || from >= GL_MAX_DEVICES || to >= GL_MAX_DEVICES) return false;
    return enabled[from][to];
}

void gl_check_array_on_device(lua_State *L, const gl_array *a, const char *fn, int arg) {
    int cur = gl_current_device();
    if (a->device == cur || gl_peer_enabled(cur, a->device)) return;
    gl_argerror(L, arg, fn, "the cuda.array belongs to device %d, but device %d is current and has no peer "
                            "access to it (cuda.peer(%d, %d, true) enables it, or cuda.device(%d) first)",
                a->device, cur, cur, a->device, a->device);
}

/* dst is argument 1 (the object copied into), src argument 2: a peer copy that neither
 * device can order is reported against the source. */
int gl_copy_devices(lua_State *L, const gl_array *dst, const gl_array *src, const char *fn) {
    int cur = gl_current_device();
    if (dst && src && dst->device != src->device) {
        if (dst->device != cur && src->device != cur)
            gl_argerror(L, 2, fn, "a copy from device %d to device %d is ordered on a stream of the "
                                  "current device %d, which is neither: cuda.device(%d) or "
                                  "cuda.device(%d) first",
                        src->device, dst->device, cur, dst->device, src->device);
        return 1;
    }
    if (dst) gl_check_array_on_device(L, dst, fn, 1);
    if (src) gl_check_array_on_device(L, src, fn, 2);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * cuda.peer
 * ------------------------------------------------------------------------------------------ */
static int check_device_arg(lua_State *L, int idx, int count) {
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, idx, &isint);
    if (lua_type(L, idx) != LUA_TNUMBER || !isint)
        gl_argerror(L, idx, FN, "device ordinal expected, got %s",
                    lua_type(L, idx) == LUA_TNUMBER ? "a non-integer number" : gl_typename(L, idx));
    if (i < 0 || i >= count || i >= GL_MAX_DEVICES)
        gl_argerror(L, idx, FN, "device %lld does not exist; %d device%s present", (long long)i, count,
                    count == 1 ? "" : "s");
    return (int)i;
}

/* Runs cuCtxEnablePeerAccess in `from`'s context and puts the current device back. */
static void enable_one(lua_State *L, int from, int to) {
    if (enabled[from][to]) return;
    CUcontext ctx_from = gl_device_context(L, from, FN);
    CUcontext ctx_to = gl_device_context(L, to, FN);
    CUcontext back = gl_device_context(L, gl_current_device(), FN);
    GL_CHECK(L, gl_cu.cuCtxSetCurrent(ctx_from), FN, "cuCtxSetCurrent");
    CUresult r = gl_cu.cuCtxEnablePeerAccess(ctx_to, 0);
    CUresult rb = gl_cu.cuCtxSetCurrent(back);
    if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) r = CUDA_SUCCESS; /* enabled outside gpulab */
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "cuCtxEnablePeerAccess(%d -> %d)", from, to);
        gl_raise_cuda(L, r, FN, what);
    }
    enabled[from][to] = true;
    GL_CHECK(L, rb, FN, "cuCtxSetCurrent (back to the current device)");
}

static bool can_access(lua_State *L, int from, int to) {
    if (from == to) return true;
    CUdevice a, b;
    GL_CHECK(L, gl_cu.cuDeviceGet(&a, from), FN, "cuDeviceGet");
    GL_CHECK(L, gl_cu.cuDeviceGet(&b, to), FN, "cuDeviceGet");
    int can = 0;
    GL_CHECK(L, gl_cu.cuDeviceCanAccessPeer(&can, a, b), FN, "cuDeviceCanAccessPeer");
    return can != 0;
}

static bool read_both_option(lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return false;
    if (!lua_istable(L, idx)) gl_argerror(L, idx, FN, "options table {both=true} expected, got %s", gl_typename(L, idx));
    static const char *const known[] = {"both", NULL};
    gl_check_known_fields(L, idx, known, FN);
    return gl_opt_bool_field(L, idx, "both", false, FN);
}

/* cuda.peer(a, b) --> {can=, enabled=}; cuda.peer(a, b, true[, {both=true}]) enables a -> b
 * (and b -> a) first. */
static int l_peer(lua_State *L) {
    gl_require_gpu(L, FN);
    int count = 0;
    GL_CHECK(L, gl_cu.cuDeviceGetCount(&count), FN, "cuDeviceGetCount");
    int a = check_device_arg(L, 1, count), b = check_device_arg(L, 2, count);
    bool enable = false;
    if (!lua_isnoneornil(L, 3)) {
        if (!lua_isboolean(L, 3)) gl_argerror(L, 3, FN, "true to enable peer access expected, got %s", gl_typename(L, 3));
        enable = lua_toboolean(L, 3);
    }
    bool both = read_both_option(L, 4);
    if (!enable && both) gl_fielderror(L, 4, FN, "both", "needs argument #3 = true");
    bool can = can_access(L, a, b);
    if (enable && a != b) { /* what the hardware refuses is the request: argument 3, or 'both' */
        if (!can)
            gl_argerror(L, 3, FN, "device %d cannot access device %d directly (cuDeviceCanAccessPeer "
                                  "says no); copies between them still work, staged by the driver", a, b);
        if (both && !can_access(L, b, a))
            gl_fielderror(L, 4, FN, "both", "device %d cannot access device %d directly "
                                            "(cuDeviceCanAccessPeer says no), so both directions cannot "
                                            "be enabled", b, a);
        enable_one(L, a, b);
        if (both) enable_one(L, b, a);
    }
    lua_createtable(L, 0, 3);
    gl_set_boolean_field(L, "can", can);
    gl_set_boolean_field(L, "enabled", gl_peer_enabled(a, b));
    gl_set_boolean_field(L, "same", a == b);
    return 1;
}

void gl_open_peer(lua_State *L) {
    lua_pushcfunction(L, l_peer);
    lua_setfield(L, -2, "peer");
}
