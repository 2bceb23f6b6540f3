/*
 * test_states.c — the bindings in a host that opens several Lua states: one after the other, each
 * requires the module and works (the module's finalizer forgets the closed state's private
 * store), and a second state that requires it while the first is open is refused with a message,
 * the first going on unharmed. Against the driver stand-in (GPULAB_LIBCUDA).
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int luaopen_cuda(lua_State *L);

static int failures;

static void expect(int ok, const char *what, const char *detail) {
    if (ok) return;
    fprintf(stderr, "FAIL %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    failures++;
}

/* A state with the standard libraries and the module preloaded (require runs luaopen_cuda). */
static lua_State *new_state(void) {
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        fprintf(stderr, "test_states: out of memory\n");
        exit(1);
    }
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_cuda);
    lua_setfield(L, -2, "cuda");
    lua_pop(L, 1);
    return L;
}

/* Runs `code`; returns NULL when it succeeded, else its error message (valid until the next run). */
static const char *run(lua_State *L, const char *code) {
    static char message[1024];
    if (luaL_dostring(L, code) == LUA_OK) return NULL;
    snprintf(message, sizeof message, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "(no message)");
    lua_pop(L, 1);
    return message;
}

/* What each state does: memory, a module, a checked launch, a sync, the counts. */
static const char *const WORK =
    "local cuda = require 'cuda'\n"
    "local ptx = [[\n"
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry touch(.param .u64 p, .param .u32 n)\n{\n\tret;\n}\n]]\n"
    "local a = cuda.array('f32', 64)\n"
    "local k = cuda.load(ptx):kernel('touch')\n"
    "k:launch({grid = 1, block = 32}, a, 64)\n"
    "cuda.sync()\n"
    "assert(cuda.stats().arrays == 1, 'one array')\n"
    "a:free()\n";

int main(void) {
    for (int i = 0; i < 3; i++) { /* one state after the other */
        lua_State *L = new_state();
        const char *err = run(L, WORK);
        expect(err == NULL, "a state opened after another one closed works", err);
        lua_close(L);
    }

    lua_State *first = new_state(), *second = new_state();
    expect(run(first, WORK) == NULL, "the first of two open states works", NULL);
    const char *err = run(second, "require 'cuda'");
    expect(err != NULL && strstr(err, "require \"cuda\": gpulab is already open in another Lua state") != NULL,
           "a second open state is refused, naming the rule", err ? err : "it was not refused");
    err = run(second, "assert(package.loaded.cuda == nil and cuda == nil)");
    expect(err == NULL, "the refused state has no module", err);
    lua_close(second);
    err = run(first, WORK);
    expect(err == NULL, "the first state works after the second was refused and closed", err);
    lua_close(first);

    lua_State *last = new_state();
    err = run(last, WORK);
    expect(err == NULL, "a state opened after both closed works", err);
    lua_close(last);

    if (failures) return 1;
    printf("test_states: every check passed\n");
    return 0;
}
