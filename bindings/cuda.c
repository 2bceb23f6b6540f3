/*
 * cuda.c — the `cuda` module: gathers every binding into one table, plus the small argument
 * helpers they share.
 */
#include "context.h"
#include "errors.h"
#include "peer.h"
#include "gpulab.h"
#include "identity.h"
#include "lifetime.h"
#include "options.h"
#include "register.h"
#include "wait.h"

#include <math.h>
#include <string.h>

/* The option readers take `t`, the options table's argument index, so that a bad field is
 * reported against that argument (errors.h). */
lua_Integer gl_opt_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *fn) {
    lua_getfield(L, t, name);
    lua_Integer v = def;
    if (!lua_isnil(L, -1)) {
        int isint = 0;
        v = lua_tointegerx(L, -1, &isint);
        if (!isint) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                gl_fielderror(L, t, fn, name, "integer expected, got %s", lua_tostring(L, -1));
            gl_fieldtypeerror(L, t, fn, name, -1, "integer");
        }
    }
    lua_pop(L, 1);
    return v;
}

double gl_opt_num_field(lua_State *L, int t, const char *name, double def, const char *fn) {
    lua_getfield(L, t, name);
    double v = def;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER) gl_fieldtypeerror(L, t, fn, name, -1, "number");
        v = lua_tonumber(L, -1);
        if (isnan(v)) gl_fielderror(L, t, fn, name, "number expected, got NaN");
    }
    lua_pop(L, 1);
    return v;
}

bool gl_opt_bool_field(lua_State *L, int t, const char *name, bool def, const char *fn) {
    lua_getfield(L, t, name);
    bool v = def;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TBOOLEAN) gl_fieldtypeerror(L, t, fn, name, -1, "boolean");
        v = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/* The returned string stays valid while table t holds it. */
const char *gl_opt_str_field(lua_State *L, int t, const char *name, const char *def, const char *fn) {
    lua_getfield(L, t, name);
    const char *v = def;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING) gl_fieldtypeerror(L, t, fn, name, -1, "string");
        v = lua_tostring(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

static int is_known(const char *const known[], const char *k, size_t len) {
    for (int i = 0; known[i]; i++) /* the length too: "arch\0x" is not "arch" */
        if (strlen(known[i]) == len && memcmp(k, known[i], len) == 0) return 1;
    return 0;
}

static const char *push_known_list(lua_State *L, const char *const known[]) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; known[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, known[i]);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

void gl_check_known_fields(lua_State *L, int t, const char *const known[], const char *fn) {
    t = lua_absindex(L, t);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        size_t len = 0;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (k && is_known(known, k, len)) continue;
        int key = lua_gettop(L);
        const char *list = push_known_list(L, known);
        if (k) gl_argerror(L, t, fn, "unknown field '%s' (known: %s)", k, list);
        gl_argerror(L, t, fn, "unexpected %s key in the options table (known: %s)",
                    gl_typename(L, key), list);
    }
}

void gl_new_class(lua_State *L, const char *tname, const luaL_Reg *meta, const luaL_Reg *methods) {
    lua_createtable(L, 0, 8);
    lua_pushstring(L, tname);
    lua_setfield(L, -2, "__name");
    if (meta) luaL_setfuncs(L, meta, 0);
    if (methods) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
    }
    lua_pushliteral(L, "gpulab object"); /* getmetatable() from scripts sees this, not internals */
    lua_setfield(L, -2, "__metatable");
    gl_register_class(L, tname);
}

/* Runs when the Lua state closes, after the objects (it is created first, finalized last):
 * wait (with a deadline: a kernel that never ends must not hang the exit) for outstanding work
 * so parked releases can run, then free them; what is still running is left to the driver. */
#define SHUTDOWN_WAIT_S 10.0
static int l_shutdown(lua_State *L) {
    (void)L;
    if (gl_context_usable() && gl_release_pending() > 0) {
        CUresult r = CUDA_ERROR_NOT_READY;
        if (gl_ctx_sync_deadline(SHUTDOWN_WAIT_S, &r) && r == CUDA_SUCCESS) gl_mark_device_synced(gl_current_device());
        gl_release_drain();
    }
    gl_watchdog_stop();
    return 0;
}

int luaopen_cuda(lua_State *L) {
    gl_newuserdatauv(L, 0, 0);
    lua_newtable(L);
    lua_pushcfunction(L, l_shutdown);
    lua_setfield(L, -2, "__gc");
    gl_lua_setmetatable(L, -2);
    gl_private_set(L, "gpulab.shutdown"); /* a script removing it must not finalize it early */

    lua_newtable(L);
    gl_open_driver(L);
    gl_open_device(L);
    gl_open_nvrtc(L);
    gl_open_memory(L);
    gl_open_module(L);
    gl_open_launch(L);
    gl_open_stream(L);
    gl_open_measure(L);
    gl_open_tensormap(L);
    gl_open_errors(L);
    gl_open_profile(L); gl_open_trace(L); gl_open_sass(L); gl_open_pcsample(L);
    gl_open_peer(L); gl_open_nccl(L);
    gl_open_partition(L);
    gl_guard_debug_library(L);
    return 1;
}
