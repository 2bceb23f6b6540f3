/*
 * fuzz_tensormap.c — tensor-map validation on random specs. The bytes choose each field's shape
 * (missing, wrong type, NaN, fraction, negative, huge, in range) and value; cuda.tensormap_check
 * must answer true or false+message and never raise for a table, never crash.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "host.h"

typedef struct { const uint8_t *p; size_t n; } cursor;

static unsigned take(cursor *c) {
    if (c->n == 0) return 0;
    c->n--;
    return *c->p++;
}

static void push_number(lua_State *L, cursor *c) {
    switch (take(c) % 10) {
    case 0: lua_pushnil(L); break;
    case 1: lua_pushnumber(L, NAN); break;
    case 2: lua_pushnumber(L, 0.5 + take(c)); break;
    case 3: lua_pushinteger(L, -(lua_Integer)take(c)); break;
    case 4: lua_pushinteger(L, (lua_Integer)1 << (take(c) % 63)); break;
    case 5: lua_pushstring(L, "16"); break;
    case 6: lua_pushnumber(L, HUGE_VAL); break;
    default: lua_pushinteger(L, (lua_Integer)take(c) * (1 + take(c) % 64)); break;
    }
}

static void push_list(lua_State *L, cursor *c) {
    unsigned n = take(c) % 8;
    if (n == 7) { push_number(L, c); return; }
    lua_createtable(L, (int)n, 0);
    for (unsigned i = 1; i <= n; i++) {
        push_number(L, c);
        lua_rawseti(L, -2, i);
    }
}

static void push_name(lua_State *L, cursor *c, const char *const *names, unsigned count) {
    unsigned v = take(c);
    if (v % 11 == 10) lua_pushinteger(L, v); else lua_pushstring(L, names[v % count]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const dtypes[] = {"f16", "bf16", "f32", "f64", "u8", "u16", "u32", "i32",
                                         "u64", "i64", "nope"};
    static const char *const swz[] = {"none", "32B", "64B", "128B", "256B"};
    static const char *const il[] = {"none", "16B", "32B", "x"};
    static const char *const l2[] = {"none", "64B", "128B", "256B", "512B"};
    static const char *const oob[] = {"none", "nan", "zero"};
    cursor c = {data, size};
    lua_State *L = luaL_newstate();
    gl_setup_state(L, "fuzz_tensormap");
    lua_getglobal(L, "cuda");
    lua_getfield(L, -1, "tensormap_check");
    lua_createtable(L, 0, 10);
    if (take(&c) & 1) { push_name(L, &c, dtypes, 11); lua_setfield(L, -2, "dtype"); }
    if (take(&c) & 1) { push_number(L, &c); lua_setfield(L, -2, "address"); }
    push_list(L, &c); lua_setfield(L, -2, "dims");
    if (take(&c) & 1) { push_list(L, &c); lua_setfield(L, -2, "strides"); }
    push_list(L, &c); lua_setfield(L, -2, "box");
    if (take(&c) & 1) { push_list(L, &c); lua_setfield(L, -2, "element_strides"); }
    if (take(&c) & 1) { push_name(L, &c, swz, 5); lua_setfield(L, -2, "swizzle"); }
    if (take(&c) & 1) { push_name(L, &c, il, 4); lua_setfield(L, -2, "interleave"); }
    if (take(&c) & 1) { push_name(L, &c, l2, 5); lua_setfield(L, -2, "l2_promotion"); }
    if (take(&c) & 1) { push_name(L, &c, oob, 3); lua_setfield(L, -2, "oob_fill"); }
    if (lua_pcall(L, 1, 2, 0) == LUA_OK) {
        /* false must come with a message naming the rule */
        if (!lua_toboolean(L, -2) && lua_type(L, -1) != LUA_TSTRING) __builtin_trap();
    }
    lua_close(L);
    return 0;
}
