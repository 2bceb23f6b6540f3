/*
 * identity.c — what makes a gpulab userdata that type and no other.
 *
 * A metatable can be swapped from a script (debug.setmetatable), so "has the cuda.array
 * metatable" does not prove "is a gl_array": a stream given the array's metatable would have its
 * (smaller, different) block read as an array. Every userdata the bindings create therefore ends
 * with an 8-byte tag naming its type, written once when its class metatable is first set
 * (gl_setmetatable right after gl_newuserdatauv). The tag mixes the type name with a secret
 * drawn when the process starts, so no other userdata can carry it by chance or by design (a C
 * module's userdata with chosen bytes at its end). A check accepts a block when it is large
 * enough to hold a tag and the tag at its end is that type's: no metatable is read, which keeps
 * the check on every launch argument to two API calls. The bindings and the host call these
 * functions by their own names (identity.h); tools/include_check.lua refuses a file other than
 * this one that calls Lua's own userdata functions (lua_newuserdatauv, luaL_checkudata,
 * lua_setmetatable, ...), so no binding can bypass the tag.
 *
 * What a check still means "and has its own metatable": debug.setmetatable is replaced by a
 * version that, for a gpulab object, sets the tag's low bit while the object is under any other
 * metatable (remembering the original in a weak registry table) and clears it when the original
 * comes back, so a check refuses an object under a foreign metatable as it did when checks
 * compared metatables. Lua's setmetatable() cannot change a userdata's, and the bindings set
 * metatables only on the objects they have just created; a binding that called
 * gl_lua_setmetatable on an older gpulab object would go unnoticed (the object is still what its
 * tag says, so nothing is misread).
 *
 * The debug library can also replace a userdata's user values, which the bindings use to keep
 * the objects they point at alive (a kernel's module, a tensor map's array). debug.setuservalue
 * is replaced by a version that answers fail (as it does for a value the userdata does not have)
 * for gpulab objects and behaves as Lua's own otherwise; debug.getuservalue likewise answers fail
 * for them (their user values are what keeps other objects alive: emptying a graph's would free
 * arrays the graph still writes).
 *
 * What C code reads back must not be something a script can replace. The registry is a script's
 * (debug.getregistry()), so class metatables and bookkeeping tables live in a private store: a
 * gpulab object in the registry under a C address, whose user value (unreachable, see above) is
 * the table of values; each read also compares the value's address with the one stored, so a
 * replaced or removed store or value reads as absent and the caller raises a clear error.
 * registry[class name] still gets the metatable for help() and the API checks; no C code reads it.
 * A binding that calls back into Lua keeps what it uses alive in its stack slots, and
 * debug.setlocal can write a C function's slots: it answers fail for C frames. debug.setupvalue
 * answers fail for C functions, whose upvalues the bindings read as what they stored there.
 */
#include "identity.h"
#include "errors.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- Values C code keeps for itself (see identity.h) ------------------------------------- */

static const char private_key = 0; /* its address keys the private store in the registry */
static const void *private_box;    /* the store: a gpulab object (one Lua state a process) */
static const void *private_owner;  /* the registry table of the state the store belongs to */
#define PRIVATE_T "gpulab.private"
#define PRIVATE_SLOTS 48
static struct {
    const char *name;
    const void *value; /* lua_topointer of the value stored; NULL: none */
} private_slot[PRIVATE_SLOTS];
static int private_count;

static bool under_own_metatable(lua_State *L, int idx);

/* The slot for `name`: by the caller's literal first, then by its text; -1 when there is none
 * and `add` is false. */
static int private_slot_of(const char *name, bool add) {
    for (int i = 0; i < private_count; i++)
        if (private_slot[i].name == name) return i;
    for (int i = 0; i < private_count; i++)
        if (strcmp(private_slot[i].name, name) == 0) return i;
    if (!add || private_count == PRIVATE_SLOTS) return -1;
    private_slot[private_count].name = name;
    private_slot[private_count].value = NULL;
    return private_count++;
}

/* Pushes the private table when the registry still holds the store made here; else nothing.
 * The table is the store's user value: debug.getuservalue answers fail for gpulab objects, so
 * no script reaches the table, and the store itself cannot be forged (its tag). */
static bool push_private_table(lua_State *L) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &private_key) == LUA_TUSERDATA && private_box != NULL &&
        lua_topointer(L, -1) == private_box && under_own_metatable(L, -1)) {
        if (lua_getiuservalue(L, -1, 1) == LUA_TTABLE) {
            lua_remove(L, -2);
            return true;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return false;
}

/* The state L belongs to, by its registry table: every thread of a state shares it, and no script
 * can put another table in its place (debug.getregistry() only reaches its entries). */
static const void *state_id(lua_State *L) {
    lua_pushvalue(L, LUA_REGISTRYINDEX);
    const void *id = lua_topointer(L, -1);
    lua_pop(L, 1);
    return id;
}

/* Makes the store and pushes its table. */
static void new_private_table(lua_State *L) {
    gl_newuserdatauv(L, 0, 1);
    lua_createtable(L, 0, 2);
    lua_pushliteral(L, PRIVATE_T);
    lua_setfield(L, -2, "__name");
    lua_pushliteral(L, "gpulab object");
    lua_setfield(L, -2, "__metatable");
    gl_lua_setmetatable(L, -2); /* tags it from __name */
    lua_createtable(L, 0, PRIVATE_SLOTS);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, -3, 1);
    lua_insert(L, -2);
    private_box = lua_topointer(L, -1);
    private_owner = state_id(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &private_key);
}

void gl_private_reset(void) {
    private_box = NULL;
    private_owner = NULL;
    for (int i = 0; i < private_count; i++) private_slot[i].value = NULL;
}

bool gl_private_present(lua_State *L) {
    if (!push_private_table(L)) return false;
    lua_pop(L, 1);
    return true;
}

void gl_private_check_owner(lua_State *L, const char *fn) {
    if (private_box != NULL && private_owner != state_id(L))
        luaL_error(L, "%s: gpulab is already open in another Lua state of this process, which is still open "
                      "(the bindings serve one state at a time: close that one first)", fn);
}

void gl_private_set(lua_State *L, const char *name) {
    int slot = private_slot_of(name, true);
    if (slot < 0) luaL_error(L, "gpulab: more than %d private values (%s)", PRIVATE_SLOTS, name);
    if (!push_private_table(L)) {
        if (private_box == NULL) {
            new_private_table(L);
        } else { /* a script removed the store: what it held reads as absent from now on */
            private_slot[slot].value = NULL;
            bool removing = lua_isnil(L, -1);
            lua_pop(L, 1);
            if (removing) return;
            luaL_error(L, "gpulab: its private store was removed from the registry by a script");
        }
    }
    lua_pushstring(L, name);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    private_slot[slot].value = lua_isnil(L, -2) ? NULL : lua_topointer(L, -2);
    lua_pop(L, 2);
}

int gl_private_get(lua_State *L, const char *name) {
    int slot = private_slot_of(name, false);
    if (slot >= 0 && private_slot[slot].value != NULL && push_private_table(L)) {
        lua_pushstring(L, name);
        int t = lua_rawget(L, -2);
        lua_remove(L, -2);
        if (t != LUA_TNIL && lua_topointer(L, -1) == private_slot[slot].value) return t;
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    return LUA_TNIL;
}

void gl_register_class(lua_State *L, const char *tname) {
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, tname); /* read by help() and tools, never by C code */
    gl_private_set(L, tname);
}

int gl_getmetatable(lua_State *L, const char *tname) {
    if (gl_private_get(L, tname) != LUA_TTABLE)
        luaL_error(L, "gpulab: the metatable of class %s was replaced or removed by a script", tname);
    return LUA_TTABLE;
}

/* ---- Type tags ----------------------------------------------------------------------------- */

#define TAG_BYTES GL_TAG_BYTES /* identity.h's inline tag test reads it too */
#define TAG_FRESH UINT64_C(0)    /* allocated here, no class metatable set yet: no type's tag */
#define TAG_REPLACED UINT64_C(1) /* a script put another metatable on the object */
#define REPLACED_KEY "gpulab.replaced_metatables" /* private, weak keys: object -> its guardian */
#define GUARDIAN_KEY "gpulab.guardian_metatable"

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
 * hold one). */
static unsigned char *tag_slot(lua_State *L, int idx) {
    unsigned char *p = lua_touserdata(L, idx); /* NULL unless a full or light userdata */
    if (p == NULL) return NULL;
    size_t len = lua_rawlen(L, idx); /* 0 for a light userdata */
    if (len < TAG_BYTES) return NULL;
    return p + len - TAG_BYTES;
}

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
    gl_getmetatable(L, tname); /* the class's own, never registry[tname] (a script can set it) */
    lua_setmetatable(L, -2);
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

/* The tags of the types checked so far, by the caller's literal (compared by address): a check
 * computes no hash. An open-addressed table found from the literal's address, so a check costs one
 * probe however many types were checked before it (a list searched from the front cost k:launch
 * 30 to 40 instructions per object checked), and two literals never evict each other (a cache slot
 * chosen by address alone did that when two type names' literals landed in one slot: the hash then
 * ran on every argument check). Each binding file has its own copy of a literal, so there are a
 * few dozen at most; past three quarters of the table a check computes the hash. */
#define TAG_CACHE 256 /* a power of two */
static struct {
    const char *tname;
    uint64_t tag;
} tag_cache[TAG_CACHE];
static unsigned tag_cached;

static unsigned tag_home(const char *tname) {
    uint64_t a = (uint64_t)(uintptr_t)tname;
    return (unsigned)((a * UINT64_C(0x9e3779b97f4a7c15)) >> 56) & (TAG_CACHE - 1);
}

static uint64_t cached_tag(const char *tname) {
    unsigned i = tag_home(tname);
    while (tag_cache[i].tname != NULL) {
        if (tag_cache[i].tname == tname) return tag_cache[i].tag;
        i = (i + 1) & (TAG_CACHE - 1);
    }
    uint64_t tag = tag_of(tname);
    if (tag_cached < TAG_CACHE / 4 * 3) { /* slot i is free: keep the table's probes short */
        tag_cache[i].tname = tname;
        tag_cache[i].tag = tag;
        tag_cached++;
    }
    return tag;
}

uint64_t gl_type_tag(const char *tname) { return tag_of(tname); }

void *gl_testudata(lua_State *L, int idx, const char *tname) {
    return gl_testudata_tag(L, idx, cached_tag(tname));
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
    if (gl_private_get(L, REPLACED_KEY) == LUA_TTABLE) return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    gl_private_set(L, REPLACED_KEY);
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
    int t = LUA_TNIL;
    if (lua_rawget(L, -2) == LUA_TUSERDATA) { /* its guardian: the own metatable is its user value */
        t = lua_getiuservalue(L, -1, 2);
        lua_remove(L, -2);
    }
    lua_remove(L, -2); /* exactly one value pushed: a foreign userdata whose last bytes read as a
                          replaced tag has no guardian and gets nil */
    return t;
}

/* An object collected under a foreign metatable would never run its own __gc (Lua calls the
 * __gc of the metatable it has then, or none), so its memory, stream or module would never be
 * released. While its metatable is replaced, a guardian holds the object and its own metatable,
 * reachable only through the weak-keyed table: when the object becomes garbage so does the
 * guardian, whose finalizer gives the object its own metatable back and runs its own __gc (every
 * gpulab __gc is idempotent, so a later call by Lua does nothing). */
static int guardian_gc(lua_State *L) {
    if (lua_getiuservalue(L, 1, 1) != LUA_TUSERDATA || lua_getiuservalue(L, 1, 2) != LUA_TTABLE) return 0;
    unsigned char *slot = tag_slot(L, 2);
    if (slot == NULL || !(read_tag(slot) & TAG_REPLACED)) return 0; /* its own metatable is back */
    /* only the object's current guardian acts: one left from an earlier replacement (the
       metatable given back, then replaced again) would finalize an object still in use */
    push_replaced(L);
    lua_pushvalue(L, 2);
    bool current = lua_rawget(L, -2) == LUA_TUSERDATA && lua_touserdata(L, -1) == lua_touserdata(L, 1);
    lua_pop(L, 2);
    if (!current) return 0;
    write_tag(slot, read_tag(slot) & ~TAG_REPLACED);
    lua_pushvalue(L, 3);
    lua_setmetatable(L, 2);
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 3) == LUA_TFUNCTION) {
        lua_pushvalue(L, 2);
        lua_pcall(L, 1, 0, 0); /* a finalizer never raises; an error here is dropped as Lua would */
    }
    return 0;
}

/* Pushes a guardian for the object at obj with its own metatable at own. */
static void push_guardian(lua_State *L, int obj, int own) {
    lua_newuserdatauv(L, 0, 2);
    lua_pushvalue(L, obj);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, own);
    lua_setiuservalue(L, -2, 2);
    if (gl_private_get(L, GUARDIAN_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_createtable(L, 0, 2);
        lua_pushcfunction(L, guardian_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushliteral(L, "gpulab object");
        lua_setfield(L, -2, "__metatable");
        lua_pushvalue(L, -1);
        gl_private_set(L, GUARDIAN_KEY);
    }
    lua_setmetatable(L, -2);
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
            push_guardian(L, 1, 3);
            lua_rawset(L, -3);
            write_tag(slot, read_tag(slot) | TAG_REPLACED);
        }
    } else if (slot && push_own_metatable_if_replaced(L, 1) != LUA_TNIL) { /* 3: its own */
        if (lua_rawequal(L, 2, 3)) {
            push_replaced(L);
            lua_pushvalue(L, 1);
            if (lua_rawget(L, -2) == LUA_TUSERDATA) { /* the guardian lets the object go */
                lua_pushnil(L);
                lua_setiuservalue(L, -2, 1);
            }
            lua_pop(L, 1);
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

/* debug.getuservalue(udata [, n]) as Lua's own, but fail for gpulab objects: their user values
 * hold what keeps the objects they point at alive (a graph's arrays, a view's module), and the
 * private store's table. */
static int l_getuservalue(lua_State *L) {
    int n = (int)luaL_optinteger(L, 2, 1);
    if (lua_type(L, 1) != LUA_TUSERDATA || gl_is_gpulab_object(L, 1)) {
        lua_pushnil(L);
        return 1;
    }
    if (lua_getiuservalue(L, 1, n) == LUA_TNONE) return 1;
    lua_pushboolean(L, 1);
    return 2;
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

/* The thread argument of a debug function (first argument when a thread), as Lua's own do. */
static lua_State *thread_arg(lua_State *L, int *arg) {
    if (lua_type(L, 1) == LUA_TTHREAD) {
        *arg = 1;
        return lua_tothread(L, 1);
    }
    *arg = 0;
    return L;
}

/* debug.setlocal([thread,] level, n, value) as Lua's own, but fail for the slots of a C
 * function's frame (other than this function's own): the bindings keep what they point at alive
 * in their stack slots while they call back into Lua (cuda.measure's function and arrays,
 * cuda.profile's metric names, a capture's stream and graph), and a script clearing one of them
 * from inside the callback would have it freed under them. */
static int l_setlocal(lua_State *L) {
    int arg;
    lua_State *L1 = thread_arg(L, &arg);
    int level = (int)luaL_checkinteger(L, arg + 1);
    int n = (int)luaL_checkinteger(L, arg + 2);
    lua_Debug ar;
    if (!lua_getstack(L1, level, &ar)) return luaL_argerror(L, arg + 1, "level out of range");
    luaL_checkany(L, arg + 3);
    lua_settop(L, arg + 3);
    bool own_frame = L1 == L && level == 0;
    if (!own_frame && lua_getinfo(L1, "S", &ar) && strcmp(ar.what, "C") == 0) {
        lua_pushnil(L); /* fail, as for a local the frame does not have */
        return 1;
    }
    if (L1 != L && !lua_checkstack(L1, 1)) return luaL_error(L, "stack overflow");
    lua_xmove(L, L1, 1);
    const char *name = lua_setlocal(L1, &ar, n);
    if (name == NULL) lua_pop(L1, 1); /* not set: the value stays behind */
    lua_pushstring(L, name);
    return 1;
}

/* debug.setupvalue(f, n, value) as Lua's own for Lua functions; fail for C functions, whose
 * upvalues the bindings read as the tables, kernels and methods they stored there. */
static int l_setupvalue(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    int n = (int)luaL_checkinteger(L, 2);
    luaL_checkany(L, 3);
    lua_settop(L, 3);
    if (lua_iscfunction(L, 1)) {
        lua_pushnil(L);
        return 1;
    }
    const char *name = lua_setupvalue(L, 1, n);
    if (name == NULL) return 0;
    lua_pushstring(L, name);
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
        lua_pushcfunction(L, l_getuservalue);
        lua_setfield(L, -2, "getuservalue");
        lua_pushcfunction(L, l_setlocal);
        lua_setfield(L, -2, "setlocal");
        lua_pushcfunction(L, l_setupvalue);
        lua_setfield(L, -2, "setupvalue");
    }
    lua_pop(L, 2);
}
