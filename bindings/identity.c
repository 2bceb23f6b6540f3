/*
 * identity.c — what makes a gpulab userdata that type and no other.
 *
 * A metatable can be swapped from a script (debug.setmetatable), so "has the cuda.array
 * metatable" does not prove "is a gl_array": a stream given the array's metatable would have its
 * (smaller, different) block read as an array. Every userdata the bindings create therefore ends
 * with an 8-byte tag naming its type, written once when its class metatable is first set
 * (luaL_setmetatable right after lua_newuserdatauv). The tag mixes the type name with a secret
 * drawn when the process starts, so no other userdata can carry it by chance or by design (a C
 * module's userdata with chosen bytes at its end). A check accepts a block when it is large
 * enough to hold a tag and the tag at its end is that type's: no metatable is read, which keeps
 * the check on every launch argument to two API calls. gpulab.h maps the four Lua API names onto
 * these functions for every file that includes it, so no binding can bypass the check by calling
 * the raw API.
 *
 * What a check still means "and has its own metatable": debug.setmetatable is replaced by a
 * version that, for a gpulab object, sets the tag's low bit while the object is under any other
 * metatable (remembering the original in a weak registry table) and clears it when the original
 * comes back, so a check refuses an object under a foreign metatable as it did when checks
 * compared metatables. Lua's setmetatable() cannot change a userdata's, and the bindings set
 * metatables only on the objects they have just created; C code that calls lua_setmetatable on
 * a gpulab object goes unnoticed (the object is still what its tag says, so nothing is misread).
 *
 * The debug library can also replace a userdata's user values, which the bindings use to keep
 * the objects they point at alive (a kernel's module, a tensor map's array). debug.setuservalue
 * is replaced by a version that answers fail (as it does for a value the userdata does not have)
 * for gpulab objects and behaves as Lua's own otherwise.
 */
#define GL_IDENTITY_IMPL
#include "identity.h"
#include "errors.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define TAG_BYTES 8
#define TAG_FRESH UINT64_C(0)    /* allocated here, no class metatable set yet: no type's tag */
#define TAG_REPLACED UINT64_C(1) /* a script put another metatable on the object */
#define REPLACED_REG "gpulab.replaced_metatables" /* weak keys: object -> its own metatable */

static uint64_t tag_secret;

/* The secret, drawn once per process (types' tags must not change while objects exist). */
static uint64_t secret(void) {
    if (tag_secret == 0) {
        uint64_t s = 0;
        if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            s = ((uint64_t)t.tv_nsec << 32) ^ (uint64_t)t.tv_sec ^ ((uint64_t)getpid() << 17) ^
                (uint64_t)(uintptr_t)&tag_secret;
        }
        tag_secret = s ? s : UINT64_C(0x9e3779b97f4a7c15);
    }
    return tag_secret;
}

/* The type's tag: FNV-1a of its name mixed with the secret; low bit clear, never TAG_FRESH. */
static uint64_t tag_of(const char *tname) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *p = (const unsigned char *)tname; *p; p++)
        h = (h ^ *p) * UINT64_C(0x100000001b3);
    h = (h ^ secret()) & ~TAG_REPLACED;
    return h == TAG_FRESH ? UINT64_C(2) : h;
}

/* The tag at the end of the userdata at idx (NULL when it is no full userdata or too small to
 * hold one); *block, when given, gets the userdata's memory. */
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

static void write_tag(unsigned char *slot, uint64_t tag) { memcpy(slot, &tag, sizeof tag); }

void *gl_newuserdatauv(lua_State *L, size_t size, int nuv) {
    size_t body = (size + TAG_BYTES - 1) & ~(size_t)(TAG_BYTES - 1);
    if (body < size || body > (size_t)-1 - TAG_BYTES) luaL_error(L, "userdata of %zu bytes is too large", size);
    unsigned char *p = lua_newuserdatauv(L, body + TAG_BYTES, nuv);
    write_tag(p + body, TAG_FRESH);
    return p;
}

void gl_setmetatable(lua_State *L, const char *tname) {
    unsigned char *slot = tag_slot(L, -1);
    if (slot && read_tag(slot) == TAG_FRESH) write_tag(slot, tag_of(tname));
    luaL_setmetatable(L, tname);
}

/* lua_setmetatable(L, idx) for code that sets a class metatable by hand: the tag comes from the
 * metatable's __name (luaL_newmetatable sets it), written once, on a block made here. */
int gl_lua_setmetatable(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    unsigned char *slot = tag_slot(L, idx);
    if (slot && read_tag(slot) == TAG_FRESH && lua_istable(L, -1)) {
        lua_getfield(L, -1, "__name");
        if (lua_type(L, -1) == LUA_TSTRING) write_tag(slot, tag_of(lua_tostring(L, -1)));
        lua_pop(L, 1);
    }
    return lua_setmetatable(L, idx);
}

/* The tags of the types checked so far, by the caller's literal (compared by address, then
 * refreshed): a check computes no hash. */
#define TAG_CACHE 8
static struct {
    const char *tname;
    uint64_t tag;
} tag_cache[TAG_CACHE];

static uint64_t cached_tag(const char *tname) {
    unsigned c = (unsigned)((uintptr_t)tname >> 3) % TAG_CACHE;
    if (tag_cache[c].tname != tname) {
        tag_cache[c].tname = tname;
        tag_cache[c].tag = tag_of(tname);
    }
    return tag_cache[c].tag;
}

void *gl_testudata(lua_State *L, int idx, const char *tname) {
    unsigned char *block = NULL;
    const unsigned char *slot = tag_slot_of(L, idx, &block);
    return slot && read_tag(slot) == cached_tag(tname) ? block : NULL;
}

void *gl_checkudata(lua_State *L, int idx, const char *tname) {
    void *p = gl_testudata(L, idx, tname);
    if (p == NULL) {
        const char *msg = lua_pushfstring(L, "%s expected, got %s", tname, gl_typename(L, idx));
        luaL_argerror(L, idx, msg);
    }
    return p;
}

/* True for a userdata created by gpulab under its own metatable: its tag is that of its
 * metatable's __name. */
static bool under_own_metatable(lua_State *L, int idx) {
    const unsigned char *slot = tag_slot(L, idx);
    if (slot == NULL || !lua_getmetatable(L, idx)) return false;
    lua_pushliteral(L, "__name");
    lua_rawget(L, -2); /* raw: a foreign metatable's own __index runs no code here */
    bool ours = lua_type(L, -1) == LUA_TSTRING && read_tag(slot) == tag_of(lua_tostring(L, -1));
    lua_pop(L, 2);
    return ours;
}

/* Pushes the weak table of objects under a foreign metatable (created on first use). */
static void push_replaced(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, REPLACED_REG) == LUA_TTABLE) return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, REPLACED_REG);
}

/* Pushes the metatable the gpulab object at idx was made with, when a script replaced it;
 * else pushes nil. */
static int push_own_metatable_if_replaced(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    const unsigned char *slot = tag_slot(L, idx);
    if (slot == NULL || !(read_tag(slot) & TAG_REPLACED)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    push_replaced(L);
    lua_pushvalue(L, idx);
    int t = lua_rawget(L, -2);
    lua_remove(L, -2);
    return t;
}

/* True for a userdata created by gpulab, whatever metatable it is under now. */
static bool gl_is_gpulab_object(lua_State *L, int idx) {
    if (under_own_metatable(L, idx)) return true;
    bool replaced = push_own_metatable_if_replaced(L, idx) != LUA_TNIL;
    lua_pop(L, 1);
    return replaced;
}

/* debug.setmetatable(value, table|nil) as Lua's own; for a gpulab object, the tag's low bit
 * then says whether the object is under the metatable it was made with (see the top). */
static int l_setmetatable(lua_State *L) {
    int t = lua_type(L, 2);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    lua_settop(L, 2);
    unsigned char *slot = lua_type(L, 1) == LUA_TUSERDATA ? tag_slot(L, 1) : NULL;
    if (slot && under_own_metatable(L, 1)) {
        lua_getmetatable(L, 1); /* 3: its own */
        if (!lua_rawequal(L, 2, 3)) {
            push_replaced(L);
            lua_pushvalue(L, 1);
            lua_pushvalue(L, 3);
            lua_rawset(L, -3);
            write_tag(slot, read_tag(slot) | TAG_REPLACED);
        }
    } else if (slot && push_own_metatable_if_replaced(L, 1) != LUA_TNIL) { /* 3: its own */
        if (lua_rawequal(L, 2, 3)) {
            push_replaced(L);
            lua_pushvalue(L, 1);
            lua_pushnil(L);
            lua_rawset(L, -3);
            write_tag(slot, read_tag(slot) & ~TAG_REPLACED);
        }
    }
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
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
        lua_pushcfunction(L, l_setmetatable);
        lua_setfield(L, -2, "setmetatable");
    }
    lua_pop(L, 2);
}
