/*
 * cuda.c — the `cuda` module: gathers every binding into one table, plus what the bindings
 * share: the small argument helpers and the class convention (gl_new_class: every class keeps
 * its methods in __methods and its computed fields in __fields; identity.h).
 */
#include "context.h"
#include "errors.h"
#include "peer.h"
#include "gpulab.h"
#include "home.h"
#include "identity.h"
#include "lifetime.h"
#include "options.h"
#include "register.h"
#include "wait.h"

#include <math.h>
#include <string.h>

int gl_rawgetfield(lua_State *L, int t, const char *name) {
    t = lua_absindex(L, t);
    if (lua_type(L, t) != LUA_TTABLE) { /* a raw read of anything else is nil */
        lua_pushnil(L);
        return LUA_TNIL;
    }
    lua_pushstring(L, name);
    return lua_rawget(L, t);
}

int gl_rawfieldtype(lua_State *L, int t, const char *name) {
    int type = gl_rawgetfield(L, t, name);
    lua_pop(L, 1);
    return type;
}

/* The option readers take `t`, the options table's argument index, so that a bad field is
 * reported against that argument (errors.h). */
lua_Integer gl_opt_int_field(lua_State *L, int t, const char *name, lua_Integer def, const char *fn) {
    gl_rawgetfield(L, t, name);
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
    gl_rawgetfield(L, t, name);
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
    gl_rawgetfield(L, t, name);
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
    gl_rawgetfield(L, t, name);
    const char *v = def;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING) gl_fieldtypeerror(L, t, fn, name, -1, "string");
        size_t len;
        v = lua_tolstring(L, -1, &len);
        if (strlen(v) != len) /* C compares up to the NUL: "min\0sum" would read as "min" */
            gl_fielderror(L, t, fn, name, "contains a NUL byte");
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

/* ---- Classes: every class keeps its methods and computed fields in two tables ------------------
 * A class metatable carries __methods (name -> C function) and, when the class has computed
 * read-only fields, __fields (name -> getter taking the object, returning one value). Those two
 * tables are what REPL completion, help() and the API checks read (registry[tname]); nothing
 * else names a class's methods. Lookups read the tables gl_new_class made, from upvalues and
 * the private store, never through the metatable's fields (a script can reach the metatable by
 * debug.getregistry() and replace them): a replaced __methods changes what readers list, never
 * what an object answers. */

#define CLASSES_KEY "gpulab.classes" /* private: tname -> {methods, fields or false} */
#define MAX_CLASSES 48
static const char *class_names[MAX_CLASSES]; /* the literals classes were made with */
static int class_count;

static void remember_class_name(lua_State *L, const char *tname) {
    for (int i = 0; i < class_count; i++)
        if (strcmp(class_names[i], tname) == 0) return;
    if (class_count == MAX_CLASSES) luaL_error(L, "gpulab: more than %d classes (%s)", MAX_CLASSES, tname);
    class_names[class_count++] = tname;
}

/* Pushes the private table of class records, made on first use. */
static void push_class_records(lua_State *L) {
    if (gl_private_get(L, CLASSES_KEY) == LUA_TTABLE) return;
    lua_pop(L, 1);
    lua_createtable(L, 0, MAX_CLASSES);
    lua_pushvalue(L, -1);
    gl_private_set(L, CLASSES_KEY);
}

/* Pushes class tname's methods and fields tables (fields: nil when it has none); raises when
 * the class was never made. */
static void push_class_tables(lua_State *L, const char *tname) {
    push_class_records(L);
    if (gl_rawgetfield(L, -1, tname) != LUA_TTABLE)
        luaL_error(L, "gpulab: no class %s (gl_new_class makes it first)", tname);
    lua_rawgeti(L, -1, 1);
    if (lua_rawgeti(L, -2, 2) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_pushnil(L);
    }
    lua_rotate(L, -4, 2);
    lua_pop(L, 2);
}

/* Pushes the method of the key at key (a string) from the methods table at methods; returns
 * false, pushing nothing, when there is none. Methods check their own self, so they are
 * answered before the object's type is (a freed or foreign object gets its methods' errors). */
static bool push_method(lua_State *L, int key, int methods) {
    lua_pushvalue(L, key);
    if (lua_rawget(L, methods) != LUA_TNIL) return true;
    lua_pop(L, 1);
    return false;
}

/* Pushes the value of field `key` of the object at obj by its getter in the fields table at
 * fields (which may be nil), else nil. The caller has proven the object's class. */
static int push_field(lua_State *L, int obj, int key, int fields) {
    if (!lua_istable(L, fields)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    lua_pushvalue(L, key);
    if (lua_rawget(L, fields) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        lua_pushnil(L);
        return LUA_TNIL;
    }
    lua_pushvalue(L, obj);
    lua_call(L, 1, 1);
    return lua_type(L, -1);
}

/* The class of the gpulab object at obj: the literal its class was made with, found by the name
 * its metatable gives and proven by the object's tag (a metatable a script replaced or edited
 * names nothing the tag agrees with); NULL when it is no gpulab class's object. */
static const char *class_of(lua_State *L, int obj) {
    if (lua_type(L, obj) != LUA_TUSERDATA || !lua_getmetatable(L, obj)) return NULL;
    lua_pushliteral(L, "__name");
    const char *name = lua_rawget(L, -2) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const char *tname = NULL;
    for (int i = 0; name && i < class_count && tname == NULL; i++)
        if (strcmp(class_names[i], name) == 0) tname = class_names[i];
    lua_pop(L, 2);
    return tname && gl_testudata(L, obj, tname) ? tname : NULL;
}

int gl_class_lookup(lua_State *L, int obj, int key) {
    obj = lua_absindex(L, obj);
    key = lua_absindex(L, key);
    const char *tname = lua_type(L, key) == LUA_TSTRING ? class_of(L, obj) : NULL;
    if (tname == NULL) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    push_class_tables(L, tname);
    int methods = lua_gettop(L) - 1;
    int t = push_method(L, key, methods) ? lua_type(L, -1) : push_field(L, obj, key, methods + 1);
    lua_replace(L, methods);
    lua_settop(L, methods);
    return t;
}

/* The __index of a class with fields. As gl_new_class installs it, its upvalues (which
 * debug.setupvalue cannot replace in a C function) are 1 the methods, 2 the fields, 3 the class
 * name's literal, so it answers by two table reads; called without them (named in a `meta`, or
 * by another C function for the object at 1) it finds the class by the object's tag. Either way
 * the tag proves the object's class before any getter reads its block. */
int gl_class_index(lua_State *L) {
    lua_settop(L, 2);
    const char *tname = lua_touserdata(L, lua_upvalueindex(3));
    if (tname == NULL || !lua_istable(L, lua_upvalueindex(1))) { /* the plain function */
        if (class_of(L, 1) == NULL) gl_typeerror(L, 1, "__index", "gpulab object");
        gl_class_lookup(L, 1, 2);
        return 1;
    }
    if (lua_type(L, 2) != LUA_TSTRING) return 0;
    if (push_method(L, 2, lua_upvalueindex(1))) return 1;
    gl_checkudata(L, 1, tname);
    push_field(L, 1, 2, lua_upvalueindex(2));
    return 1;
}

void gl_class_add_methods(lua_State *L, const char *tname, const luaL_Reg *reg) {
    gl_class_add_closures(L, tname, reg, 0);
}

void gl_class_add_closures(lua_State *L, const char *tname, const luaL_Reg *reg, int nup) {
    push_class_tables(L, tname);
    lua_pop(L, 1);
    lua_insert(L, -(nup + 1)); /* the methods table below the upvalues, as luaL_setfuncs wants */
    luaL_setfuncs(L, reg, nup);
    lua_pop(L, 1);
}

void gl_new_class(lua_State *L, const char *tname, const luaL_Reg *meta, const luaL_Reg *methods,
                  const luaL_Reg *fields) {
    remember_class_name(L, tname);
    lua_createtable(L, 0, 10);
    int mt = lua_gettop(L);
    lua_pushstring(L, tname);
    lua_setfield(L, mt, "__name");
    if (meta) luaL_setfuncs(L, meta, 0);
    lua_newtable(L); /* mt + 1: the methods */
    if (methods) luaL_setfuncs(L, methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, mt, "__methods");
    if (fields) {
        lua_newtable(L); /* mt + 2 */
        luaL_setfuncs(L, fields, 0);
        lua_pushvalue(L, -1);
        lua_setfield(L, mt, "__fields");
    } else {
        lua_pushnil(L);
    }
    lua_createtable(L, 2, 0); /* the private record: {methods, fields or false} */
    lua_pushvalue(L, mt + 1);
    lua_rawseti(L, -2, 1);
    if (fields) lua_pushvalue(L, mt + 2);
    else lua_pushboolean(L, 0);
    lua_rawseti(L, -2, 2);
    push_class_records(L);
    lua_insert(L, -2);
    lua_setfield(L, -2, tname);
    lua_pop(L, 1);
    if (gl_rawgetfield(L, mt, "__index") == LUA_TNIL) { /* a class with its own __index keeps it */
        lua_pop(L, 1);
        if (fields) {
            lua_pushvalue(L, mt + 1);
            lua_pushvalue(L, mt + 2);
            lua_pushlightuserdata(L, (void *)tname);
            lua_pushcclosure(L, gl_class_index, 3);
        } else {
            lua_pushvalue(L, mt + 1);
        }
        lua_setfield(L, mt, "__index");
    } else {
        lua_pop(L, 1);
    }
    lua_settop(L, mt);
    lua_pushliteral(L, "gpulab object"); /* getmetatable() from scripts sees this, not internals */
    lua_setfield(L, -2, "__metatable");
    gl_register_class(L, tname);
}

/* Runs when the Lua state closes, after the objects (it is created first, finalized last):
 * wait (with a deadline: a kernel that never ends must not hang the exit) for outstanding work
 * so parked releases can run, then free them; what is still running is left to the driver. Then
 * the private store is forgotten, so a Lua state opened after this one can require the module.
 * The store holds this object, so while the registry holds the store, only the state's closing
 * runs this. A script that removes the store from the registry lets this run at a collection:
 * the store is then kept as removed (later reads in that state say so), not forgotten. */
#define SHUTDOWN_WAIT_S 10.0
static int l_shutdown(lua_State *L) {
    (void)L;
    if (gl_context_usable() && gl_release_pending() > 0) {
        CUresult r = CUDA_ERROR_NOT_READY;
        if (gl_ctx_sync_deadline(SHUTDOWN_WAIT_S, &r) && r == CUDA_SUCCESS) gl_mark_device_synced(gl_current_device());
        gl_release_drain();
    }
    gl_watchdog_stop();
    if (gl_private_present(L)) gl_private_reset();
    return 0;
}

/* luaopen_cuda runs once per Lua state: a second require (package.loaded.cuda cleared) gets the
 * same table, so objects made before keep passing their class checks. */
#define MODULE_KEY "gpulab.module"

/* Called by a host (gpulab, the fuzzers) with no argument, or by require "cuda" in Lua 5.4's own
 * interpreter with the module name and the path of cuda.so, where cuda.home is found from. */
int luaopen_cuda(lua_State *L) {
    const char *module_file = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    if (gl_private_get(L, MODULE_KEY) == LUA_TTABLE) return 1;
    lua_pop(L, 1);
    gl_private_check_owner(L, "require \"cuda\"");
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
    gl_open_home(L, module_file);
    gl_open_hostless(L); /* gpulab's host then adds its own run_isolated */
    lua_pushvalue(L, -1);
    gl_private_set(L, MODULE_KEY);
    return 1;
}
