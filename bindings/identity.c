/*
 * identity.c — what makes a gpulab userdata that type and no other, beyond its metatable.
 *
 * A metatable can be swapped from a script (debug.setmetatable), so "has the cuda.array
 * metatable" does not prove "is a gl_array": a stream given the array's metatable would have its
 * (smaller, different) block read as an array. Every userdata the bindings create therefore ends
 * with an 8-byte tag naming its type, written once when its class metatable is first set
 * (luaL_setmetatable right after lua_newuserdatauv). A check accepts a block only when the
 * metatable matches AND the block is large enough to hold a tag AND the tag at its end names the
 * same type. gpulab.h maps the four Lua API names onto these functions for every file that
 * includes it, so no binding can bypass the check by calling the raw API.
 *
 * The debug library can also replace a userdata's user values, which the bindings use to keep
 * the objects they point at alive (a kernel's module, a tensor map's array). debug.setuservalue
 * is replaced by a version that answers fail (as it does for a value the userdata does not have)
 * for gpulab objects and behaves as Lua's own otherwise.
 */
#define GL_IDENTITY_IMPL
#include "identity.h"
#include "errors.h"

#include <string.h>

#define TAG_BYTES 8
#define TAG_FRESH UINT64_C(0x6770756c61622e30) /* allocated here, no class metatable set yet */

/* FNV-1a of the type name; never equal to TAG_FRESH or 0. */
static uint64_t tag_of(const char *tname) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *p = (const unsigned char *)tname; *p; p++)
        h = (h ^ *p) * UINT64_C(0x100000001b3);
    return h == TAG_FRESH || h == 0 ? h ^ 1 : h;
}

/* The tag at the end of the userdata at idx (NULL when it is no userdata or too small to hold
 * one); *block, when given, gets the userdata's memory. */
static unsigned char *tag_slot_of(lua_State *L, int idx, unsigned char **block) {
    unsigned char *p = lua_touserdata(L, idx); /* NULL unless a full or light userdata */
    if (p == NULL) return NULL;
    size_t len = lua_rawlen(L, idx); /* 0 for a light userdata */
    if (len < TAG_BYTES) return NULL;
    if (block) *block = p;
    return p + len - TAG_BYTES;
}

static unsigned char *tag_slot(lua_State *L, int idx) { return tag_slot_of(L, idx, NULL); }

static uint64_t read_tag(const unsigned char *slot) {
    uint64_t t;
    memcpy(&t, slot, sizeof t);
    return t;
}

void *gl_newuserdatauv(lua_State *L, size_t size, int nuv) {
    size_t body = (size + TAG_BYTES - 1) & ~(size_t)(TAG_BYTES - 1);
    if (body < size || body > (size_t)-1 - TAG_BYTES) luaL_error(L, "userdata of %zu bytes is too large", size);
    unsigned char *p = lua_newuserdatauv(L, body + TAG_BYTES, nuv);
    uint64_t fresh = TAG_FRESH;
    memcpy(p + body, &fresh, sizeof fresh);
    return p;
}

void gl_setmetatable(lua_State *L, const char *tname) {
    unsigned char *slot = tag_slot(L, -1);
    if (slot && read_tag(slot) == TAG_FRESH) {
        uint64_t tag = tag_of(tname);
        memcpy(slot, &tag, sizeof tag);
    }
    luaL_setmetatable(L, tname);
}

/* lua_setmetatable(L, idx) for code that sets a class metatable by hand: the tag comes from the
 * metatable's __name (luaL_newmetatable sets it), written once, on a block made here. */
int gl_lua_setmetatable(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    unsigned char *slot = tag_slot(L, idx);
    if (slot && read_tag(slot) == TAG_FRESH && lua_istable(L, -1)) {
        lua_getfield(L, -1, "__name");
        if (lua_type(L, -1) == LUA_TSTRING) {
            uint64_t tag = tag_of(lua_tostring(L, -1));
            memcpy(slot, &tag, sizeof tag);
        }
        lua_pop(L, 1);
    }
    return lua_setmetatable(L, idx);
}

/* The last class metatables seen, so that the check on every launch argument costs two pointer
 * compares instead of a registry lookup by name and a hash. An entry only short-cuts a match
 * that the tag confirms (the tag alone already proves the block's layout); a metatable that is
 * not the cached one takes the full path, which refreshes the entry, so an object whose
 * metatable a script replaced is judged by the registry as before. */
#define CLASS_CACHE 8
static struct {
    const char *tname;        /* the caller's literal: compared by address, then by content */
    uint64_t tag;
    const void *mt;
} class_cache[CLASS_CACHE];

static int class_slot(const char *tname) {
    unsigned h = (unsigned)((uintptr_t)tname >> 3) % CLASS_CACHE;
    return (int)h;
}

void *gl_testudata(lua_State *L, int idx, const char *tname) {
    unsigned char *block = NULL;
    const unsigned char *slot = tag_slot_of(L, idx, &block);
    if (slot == NULL) return NULL;
    int c = class_slot(tname);
    if (class_cache[c].tname == tname && read_tag(slot) == class_cache[c].tag && lua_getmetatable(L, idx)) {
        bool same = lua_topointer(L, -1) == class_cache[c].mt;
        lua_pop(L, 1);
        if (same) return block;
    }
    void *p = luaL_testudata(L, idx, tname);
    if (p == NULL) return NULL;
    uint64_t tag = tag_of(tname);
    if (read_tag(slot) != tag) return NULL;
    lua_getmetatable(L, idx);
    class_cache[c].tname = tname;
    class_cache[c].tag = tag;
    class_cache[c].mt = lua_topointer(L, -1);
    lua_pop(L, 1);
    return p;
}

/* The tags gl_test_tagged compares, by the caller's literal; apart from class_cache, so that a
 * tag-only check never evicts a class's metatable there. */
static struct {
    const char *tname;
    uint64_t tag;
} tag_cache[CLASS_CACHE];

void *gl_test_tagged(lua_State *L, int idx, const char *tname) {
    unsigned char *block = NULL;
    const unsigned char *slot = tag_slot_of(L, idx, &block);
    if (slot == NULL) return NULL;
    int c = class_slot(tname);
    if (tag_cache[c].tname != tname) {
        tag_cache[c].tname = tname;
        tag_cache[c].tag = tag_of(tname);
    }
    return read_tag(slot) == tag_cache[c].tag ? block : NULL;
}

void *gl_checkudata(lua_State *L, int idx, const char *tname) {
    void *p = gl_testudata(L, idx, tname);
    if (p == NULL) {
        const char *msg = lua_pushfstring(L, "%s expected, got %s", tname, gl_typename(L, idx));
        luaL_argerror(L, idx, msg);
    }
    return p;
}

/* True for a userdata created by gpulab with its class metatable still in place. */
static bool gl_is_gpulab_object(lua_State *L, int idx) {
    const unsigned char *slot = tag_slot(L, idx);
    if (slot == NULL || !lua_getmetatable(L, idx)) return false;
    lua_getfield(L, -1, "__name");
    bool ours = lua_type(L, -1) == LUA_TSTRING && read_tag(slot) == tag_of(lua_tostring(L, -1));
    lua_pop(L, 2);
    return ours;
}

/* debug.setuservalue(udata, value [, n]) as Lua's own, but fail for gpulab objects. */
static int l_setuservalue(lua_State *L) {
    int n = (int)luaL_optinteger(L, 3, 1);
    luaL_checktype(L, 1, LUA_TUSERDATA);
    luaL_checkany(L, 2);
    lua_settop(L, 2);
    if (gl_is_gpulab_object(L, 1) || !lua_setiuservalue(L, 1, n)) {
        lua_pushnil(L); /* fail, as for a user value the userdata does not have */
        return 1;
    }
    lua_settop(L, 1);
    return 1;
}

void gl_guard_debug_library(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "debug");
    if (lua_istable(L, -1)) {
        lua_pushcfunction(L, l_setuservalue);
        lua_setfield(L, -2, "setuservalue");
    }
    lua_pop(L, 2);
}
