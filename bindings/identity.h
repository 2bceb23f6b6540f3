/*
 * identity.h — userdata classes whose identity cannot be forged (identity.c, gl_new_class in
 * cuda.c). Every userdata made by gpulab ends with a tag naming its type, and every type check
 * compares it besides the metatable, so a forged metatable (debug.setmetatable) never makes one
 * type's block read as another's.
 *
 * Bindings call these gl_ functions by their own names, never lauxlib's userdata calls
 * (lua_newuserdatauv, luaL_checkudata, ...), which know nothing of the tag:
 * tools/include_check.lua refuses a file outside identity.c that calls one of those.
 */
#ifndef GPULAB_IDENTITY_H
#define GPULAB_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

/* lua_newuserdatauv with room for the tag after `size` bytes; the block carries no type's tag
 * until its class metatable is set. */
void *gl_newuserdatauv(lua_State *L, size_t size, int nuv);
/* luaL_setmetatable for the block on top of the stack: tags a block made by gl_newuserdatauv
 * (once) and sets class `tname`'s metatable from the private store, never registry[tname]. */
void gl_setmetatable(lua_State *L, const char *tname);
/* lua_setmetatable with the metatable on top of the stack: a fresh block gets the tag of the
 * metatable's __name. */
int gl_lua_setmetatable(lua_State *L, int idx);
/* luaL_testudata by tag: the block at idx when its tag is `tname`'s and it is under its own
 * metatable, else NULL. Reads no metatable and runs no Lua code (finalizers use it). */
void *gl_testudata(lua_State *L, int idx, const char *tname);
/* gl_testudata with the type's tag known: the checks made on every launch (the kernel, each
 * array argument) keep the tag in a static through gl_testudata_fast and skip the tag cache's
 * probe (about 25 instructions each). */
uint64_t gl_type_tag(const char *tname);
/* The tag is the block's last GL_TAG_BYTES bytes (identity.c). */
#define GL_TAG_BYTES 8
/* gl_testudata_tag for a value the caller has already read with lua_touserdata: p, not NULL (so
 * a full or a light userdata). The block's length, which only a full userdata has (a light one's
 * is 0), proves the tag lies inside it. Inline, as the tag test is, because k:launch makes it for
 * its kernel and every array argument: a call to identity.c cost each about 20 instructions. */
static inline void *gl_testudata_block(lua_State *L, int idx, void *p, uint64_t tag) {
    size_t len = lua_rawlen(L, idx);
    if (len < GL_TAG_BYTES) return NULL;
    uint64_t t;
    memcpy(&t, (const unsigned char *)p + len - GL_TAG_BYTES, sizeof t);
    return t == tag ? p : NULL;
}
static inline void *gl_testudata_tag(lua_State *L, int idx, uint64_t tag) {
    void *p = lua_touserdata(L, idx); /* NULL unless a full or light userdata */
    return p ? gl_testudata_block(L, idx, p, tag) : NULL;
}
static inline void *gl_testudata_fast(lua_State *L, int idx, const char *tname, uint64_t *tag) {
    if (*tag == 0) *tag = gl_type_tag(tname);
    return gl_testudata_tag(L, idx, *tag);
}
/* gl_testudata or raise "bad argument #idx to ... (tname expected, got TYPE)" as lauxlib does. */
void *gl_checkudata(lua_State *L, int idx, const char *tname);
/* Replaces debug.setmetatable, getuservalue, setuservalue, setlocal and setupvalue (when the
 * debug library is loaded) by versions that keep scripts from re-typing or emptying gpulab
 * objects and from writing the bindings' stack slots and upvalues (identity.c says how). */
void gl_guard_debug_library(lua_State *L);
/* ---- Classes (cuda.c). One convention for every class: its metatable (registry[tname], as
 * gl_register_class stores it) has
 *   __name     tname
 *   __methods  name -> C function: what obj:name(...) calls
 *   __fields   name -> getter, only for a class with computed read-only fields: obj.name calls
 *              the getter with the object (index 1), which returns one value
 *   __index    __methods itself when the class has no fields; else gl_class_index
 * and whatever metamethods `meta` names. A class whose meta has its own __index (one that answers
 * integer keys, h[i]) keeps it and answers string keys through gl_class_lookup. A table object
 * (cuda.device, cuda.program, cuda.error) holds its plain fields as its own keys. A kernel has a
 * metatable of its own for launch speed (module.c), whose __name leads to the class's. Methods
 * another file adds go in through gl_class_add_methods. REPL completion, help() and
 * tools/api_check.lua read only __methods and __fields (and a table object's own keys): a method
 * or field named anywhere else is invisible to them. `tname` must be a string literal (its
 * address is kept). */
void gl_new_class(lua_State *L, const char *tname, const luaL_Reg *meta, const luaL_Reg *methods,
                  const luaL_Reg *fields);
/* The __index gl_new_class installs for a class with fields: answers the method of that name
 * (methods check their own self, so a freed object still has its free), else, once the object's
 * tag proves its class, the field getter's value, else nil. As installed it reads the tables from
 * its upvalues; as a plain C function (a meta may name it, C code may call it for the object at
 * 1 and the key at 2) it finds the class by the object's tag and raises for any other value. */
int gl_class_index(lua_State *L);
/* For a class's own __index: pushes what the object at obj answers for the key at key by its
 * class's __methods and __fields (the class named by the object's metatable and proven by its
 * tag, the tables read from the private store); nil for a key that is no string, for an unknown
 * name, and for a value that is no gpulab class's object. Returns the pushed value's type. */
int gl_class_lookup(lua_State *L, int obj, int key);
/* Adds methods to class tname's __methods (a file that extends another's class: sass.c's
 * prog:sass, l2.c's s:set_l2_window). Every reader and every object of the class sees them. */
void gl_class_add_methods(lua_State *L, const char *tname, const luaL_Reg *reg);
/* The same for methods that share nup upvalues, popped from the stack. */
void gl_class_add_closures(lua_State *L, const char *tname, const luaL_Reg *reg, int nup);

/* Values C code keeps for itself (class metatables, bookkeeping tables, finalizer sentinels).
 * A script can replace any registry entry (debug.getregistry()), so these live in a table of
 * their own, in the registry under a C address, and every read checks that the table and the
 * value are the very ones stored here (one pointer compare each): a replaced or removed value
 * reads as absent, never as something else. gl_private_set pops the value (nil removes it);
 * gl_private_get pushes it (nil when absent or replaced) and returns its type. */
void gl_private_set(lua_State *L, const char *name);
/* Forgets the store of a Lua state that was closed: the next gl_private_set makes a new one. The
 * module's own finalizer calls it when its state closes; a host that runs several states one after
 * the other (the fuzzers, gpulab's own setup) may call it before it opens the next. */
void gl_private_reset(void);
/* Whether L's registry still holds the store made here (a script can remove it). */
bool gl_private_present(lua_State *L);
/* Raises "fn: gpulab is already open in another Lua state ..." when the store belongs to a state
 * other than L's that has not closed: the driver context, the launch log and the store are the
 * process's, so one state at a time uses the bindings. */
void gl_private_check_owner(lua_State *L, const char *fn);
int gl_private_get(lua_State *L, const char *name);
/* Stores the table on top of the stack (popped) as class `tname`'s metatable; registry[tname]
 * gets it too, for help() and the API checks to read (C code never reads that entry). */
void gl_register_class(lua_State *L, const char *tname);
/* luaL_getmetatable for gpulab's classes: pushes class `tname`'s metatable from the private
 * store; raises a Lua error when it is absent or was replaced. Returns LUA_TTABLE. */
int gl_getmetatable(lua_State *L, const char *tname);

#endif
