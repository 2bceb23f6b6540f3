/*
 * state.c — setting up the Lua state gpulab runs scripts in, and running chunks in it:
 * text-only loading, a traceback on error, and Ctrl-C turned into a Lua error.
 */
#define _GNU_SOURCE
#include "host.h"
#include "errors.h" /* cuda.error objects are reported as the strings they replace */

#include <lauxlib.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpulab.h"
#include "identity.h"

const char *gl_progname = "gpulab";
int gl_argc;
char **gl_argv;
static void install_coroutine_tracking(lua_State *L);

/* ---- loading chunks: Lua's functions, text only -------------------------------------------
 * A precompiled chunk bypasses the parser's checks, so gpulab never loads one. Everything else
 * behaves as in Lua: the loaders below run Lua's own lua_load with the 'b' taken out of the
 * mode, then give the two mode messages the mode the caller asked for. */

#define REFUSED_BINARY "precompiled binary chunks are refused; gpulab loads source text only"

/* The mode handed to lua_load: text allowed or not, never binary. */
static const char *text_only_mode(const char *mode) {
    return mode == NULL || strchr(mode, 't') ? "t" : "";
}

/* After a failed load with text_only_mode(mode): a binary chunk the caller's mode allowed is
 * refused in gpulab's words (prefixed by `where` when given); Lua's mode messages name the
 * caller's mode. Other messages stay as they are. */
static void fix_mode_message(lua_State *L, const char *mode, const char *where) {
    const char *asked = mode ? mode : "bt", *used = text_only_mode(mode);
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) return;
    const char *kinds[] = {"binary", "text"};
    for (int i = 0; i < 2; i++) {
        lua_pushfstring(L, "attempt to load a %s chunk (mode is '%s')", kinds[i], used);
        bool same = strcmp(lua_tostring(L, -1), msg) == 0;
        lua_pop(L, 1);
        if (!same) continue;
        if (i == 0 && strchr(asked, 'b')) {
            if (where) lua_pushfstring(L, "%s: " REFUSED_BINARY, where);
            else lua_pushliteral(L, REFUSED_BINARY);
        } else {
            lua_pushfstring(L, "attempt to load a %s chunk (mode is '%s')", kinds[i], asked);
        }
        lua_replace(L, -2);
        return;
    }
}

static const char *chunk_label(const char *chunkname) {
    return chunkname[0] == '=' || chunkname[0] == '@' ? chunkname + 1 : chunkname;
}

int gl_loadbuffer_text(lua_State *L, const char *s, size_t len, const char *chunkname) {
    int status = luaL_loadbufferx(L, s, len, chunkname, "t");
    if (status == LUA_ERRSYNTAX) fix_mode_message(L, "bt", chunk_label(chunkname));
    return status;
}

/* luaL_loadfilex (BOM and #! line skipped, stdin for NULL, Lua's "cannot open/read" texts). */
/* Loads a chunk as luaL_loadfilex does, text only (NULL path: stdin). */
static int gl_loadfilex(lua_State *L, const char *path, const char *mode) {
    int status = luaL_loadfilex(L, path, text_only_mode(mode));
    if (status == LUA_ERRSYNTAX) fix_mode_message(L, mode, path ? path : "stdin");
    return status;
}

int gl_loadfile_text(lua_State *L, const char *path) { return gl_loadfilex(L, path, NULL); }

/* What load/loadfile return: the function (with `env` as its first upvalue when given, even
 * nil), or fail and the message. */
static int load_result(lua_State *L, int status, int env) {
    if (status != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (env != 0) {
        lua_pushvalue(L, env);
        if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
    }
    return 1;
}

#define READER_SLOT 5 /* load's arguments are 1..4; the reader keeps the last piece here */

static const char *reader_piece(lua_State *L, void *ud, size_t *size) {
    (void)ud;
    luaL_checkstack(L, 2, "too many nested functions");
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        *size = 0;
        return NULL;
    }
    if (!lua_isstring(L, -1)) luaL_error(L, "reader function must return a string");
    lua_replace(L, READER_SLOT);
    return lua_tolstring(L, READER_SLOT, size);
}

/* load(chunk [, chunkname [, mode [, env]]]) */
static int l_load(lua_State *L) {
    size_t len;
    const char *s = lua_tolstring(L, 1, &len);
    const char *mode = luaL_optstring(L, 3, "bt");
    int env = lua_isnone(L, 4) ? 0 : 4;
    int status;
    if (s != NULL) {
        const char *chunkname = luaL_optstring(L, 2, s);
        status = luaL_loadbufferx(L, s, len, chunkname, text_only_mode(mode));
    } else {
        const char *chunkname = luaL_optstring(L, 2, "=(load)");
        luaL_checktype(L, 1, LUA_TFUNCTION);
        lua_settop(L, READER_SLOT);
        status = lua_load(L, reader_piece, NULL, chunkname, text_only_mode(mode));
    }
    if (status == LUA_ERRSYNTAX) fix_mode_message(L, mode, NULL);
    return load_result(L, status, env);
}

/* loadfile([filename [, mode [, env]]]) */
static int l_loadfile(lua_State *L) {
    const char *path = luaL_optstring(L, 1, NULL);
    const char *mode = luaL_optstring(L, 2, NULL);
    int env = lua_isnone(L, 3) ? 0 : 3;
    int status = gl_loadfilex(L, path, mode);
    if (status == LUA_OK) gl_watch_record(path); /* under --watch, a helper file is a dependency */
    return load_result(L, status, env);
}

static int dofile_done(lua_State *L, int status, lua_KContext ctx) {
    (void)status;
    (void)ctx;
    return lua_gettop(L) - 1;
}

/* dofile([filename]): stdin is read where it stands, as Lua does (no reopening). */
static int l_dofile(lua_State *L) {
    const char *path = luaL_optstring(L, 1, NULL);
    lua_settop(L, 1);
    if (gl_loadfilex(L, path, NULL) != LUA_OK) return lua_error(L);
    gl_watch_record(path);
    lua_callk(L, 0, LUA_MULTRET, 0, dofile_done);
    return dofile_done(L, LUA_OK, 0);
}

/* package.searchers[2] replacement: finds `name` on package.path like Lua's searcher but loads
 * the file as text, so `require` cannot run a precompiled chunk either. Upvalues: the package
 * table, the original package.searchpath (a replaced one is not used). */
static int searcher_text(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_pushvalue(L, 1);
    lua_getfield(L, lua_upvalueindex(1), "path");
    if (!lua_isstring(L, -1)) return luaL_error(L, "'package.path' must be a string");
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2)) return 1; /* searchpath's "no file ..." list explains the miss */
    lua_pop(L, 1);
    const char *filename = lua_tostring(L, -1);
    if (gl_loadfile_text(L, filename) != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, filename,
                          lua_tostring(L, -1));
    lua_insert(L, -2); /* loader, then the file name as the loader's second argument */
    return 2;
}

/* The last searcher: gpulab's own modules (gpulab.lab, ...) in <cuda.home>/lua. It comes after
 * Lua's searchers, so package.path, LUA_PATH and ';;' stay exactly the user's, and a module of
 * the user's with the same name wins. A miss adds to require's "not found" message only for a
 * name under gpulab.: any other reads as in lua(1), which knows no such folder. Upvalues: the
 * original package.searchpath, the path. */
static int searcher_gpulab(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, 1);
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2)) {
        if (strncmp(name, "gpulab.", 7) == 0) return 1; /* searchpath's "no file ..." list */
        lua_pushnil(L); /* no message: require lists only the user's own places */
        return 1;
    }
    lua_pop(L, 1);
    const char *filename = lua_tostring(L, -1);
    if (gl_loadfile_text(L, filename) != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, filename,
                          lua_tostring(L, -1));
    lua_insert(L, -2);
    return 2;
}

static void install_searchers(lua_State *L, const char *home) {
    lua_getglobal(L, "package");
    int package = lua_gettop(L);
    lua_getfield(L, package, "searchers");
    lua_getfield(L, package, "searchpath");
    int searchpath = lua_gettop(L);
    lua_pushvalue(L, package);
    lua_pushvalue(L, searchpath);
    lua_pushcclosure(L, searcher_text, 2);
    lua_rawseti(L, package + 1, 2);
    lua_pushvalue(L, searchpath);
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua", home, home);
    lua_pushcclosure(L, searcher_gpulab, 2);
    lua_rawseti(L, package + 1, (lua_Integer)lua_rawlen(L, package + 1) + 1);
    lua_settop(L, package - 1);
}

static void install_loaders(lua_State *L) {
    static const luaL_Reg loaders[] = {{"load", l_load}, {"loadfile", l_loadfile}, {"dofile", l_dofile}, {NULL, NULL}};
    lua_pushglobaltable(L);
    luaL_setfuncs(L, loaders, 0);
    lua_pop(L, 1);
}

/* The functions the REPL's printer uses, as they were before any user code ran. */
static void save_pristine_library(lua_State *L) {
    static const char *const base[] = {"print", "tostring", "type", "next", "rawget", "rawlen", "select",
                                       "ipairs", NULL};
    static const char *const from_libs[][3] = {{"string", "format", "format"}, {"string", "match", "match"},
                                              {"string", "find", "find"},     {"string", "gsub", "gsub"},
                                              {"table", "sort", "sort"},      {"table", "concat", "concat"},
                                              {"math", "type", "mathtype"}};
    lua_newtable(L);
    for (int i = 0; base[i]; i++) {
        lua_getglobal(L, base[i]);
        lua_setfield(L, -2, base[i]);
    }
    for (size_t i = 0; i < sizeof from_libs / sizeof *from_libs; i++) {
        lua_getglobal(L, from_libs[i][0]);
        lua_getfield(L, -1, from_libs[i][1]);
        lua_setfield(L, -3, from_libs[i][2]);
        lua_pop(L, 1);
    }
    gl_private_set(L, GL_PRISTINE_KEY); /* out of scripts' reach: the REPL's printer trusts it */
}

void gl_setup_state(lua_State *L, const char *argv0) {
    (void)argv0;
    gl_private_reset(); /* a new state: the previous one's private store went with it */
    luaL_openlibs(L);
    save_pristine_library(L);
    install_loaders(L);
    install_coroutine_tracking(L);
    luaL_requiref(L, "cuda", luaopen_cuda, 1); /* also the global `cuda`; it sets cuda.home */
    gl_open_isolate(L);
    lua_getfield(L, -1, "home");
    install_searchers(L, lua_tostring(L, -1)); /* gpulab's own modules: <cuda.home>/lua */
    lua_pop(L, 2);
    if (getenv("GPULAB_DEPFILE")) gl_watch_child_setup(L);
}

/* ---------------------------------------------------------------------------------------- */

/* ---- Ctrl-C ---------------------------------------------------------------------------------
 * SIGINT arms a hook that raises "interrupted!". A hook belongs to one thread, so it is armed in
 * the thread gl_docall runs and in every coroutine being resumed below it: coroutine.resume and
 * the functions of coroutine.wrap record the threads they run (gl_install_coroutine_tracking).
 * A second Ctrl-C re-arms the hooks; only when an interrupt has waited for several seconds
 * (the program is inside C code that does not return) does gpulab let a further Ctrl-C end it. */
#define MAX_TRACKED 256
#define STUCK_SECONDS 3
static lua_State *volatile interrupted_state;
static lua_State *volatile resumed[MAX_TRACKED];
static volatile sig_atomic_t n_resumed; /* may exceed MAX_TRACKED: only the outer ones are kept */
static volatile sig_atomic_t interrupt_pending, interrupt_served;
static volatile time_t pending_since;

static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    if (!interrupt_pending) return;
    interrupt_served = 1;
    luaL_error(L, "interrupted!");
    /* else: left over from an interrupt that was already served */
}

static void arm_stop_hook(lua_State *L) {
    /* lua_sethook is the one Lua call meant for a signal handler (lua.c's laction does this) */
    // NOLINTNEXTLINE(bugprone-signal-handler)
    if (L) lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

static time_t monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void on_sigint(int sig) {
    time_t now = monotonic_seconds();
    if (interrupt_pending && !interrupt_served && now - pending_since >= STUCK_SECONDS) {
        static const char msg[] = "\ngpulab: the running code is inside a C function that does not return; "
                                  "press Ctrl-C again to end gpulab\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        signal(sig, SIG_DFL);
        return;
    }
    if (!interrupt_pending || interrupt_served) pending_since = now;
    interrupt_served = 0;
    interrupt_pending = 1;
    arm_stop_hook(interrupted_state);
    int n = n_resumed < MAX_TRACKED ? n_resumed : MAX_TRACKED;
    for (int i = 0; i < n; i++) arm_stop_hook(resumed[i]);
}

static void tracked_push(lua_State *co) {
    int n = n_resumed;
    if (n < MAX_TRACKED) resumed[n] = co;
    n_resumed = n + 1;
    if (interrupt_pending) arm_stop_hook(co);
}

static void tracked_pop(void) { n_resumed = n_resumed - 1; }

/* Calls the function in upvalue 1 with this call's arguments while `co` is tracked, and passes
 * its errors on. Lua's wrap function puts the position of its caller in front of a string error;
 * called from here its caller is this C function (no position), so `add_where` adds ours. */
static int call_tracked(lua_State *L, lua_State *co, bool add_where) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    tracked_push(co);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    tracked_pop();
    if (status == LUA_OK) return lua_gettop(L);
    if (add_where && status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

static int l_resume_tracked(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTHREAD); /* Lua's own message for a bad argument */
    lua_State *co = lua_tothread(L, 1);
    return call_tracked(L, co, false);
}

static int l_wrapped_call(lua_State *L) { return call_tracked(L, lua_tothread(L, lua_upvalueindex(2)), true); }

/* coroutine.wrap(f): Lua's wrapper function around a tracked call. */
static int l_wrap_tracked(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    if (lua_getupvalue(L, -1, 1) == NULL || !lua_isthread(L, -1)) {
        lua_settop(L, 2); /* not the wrapper this Lua makes: hand it back untracked */
        return 1;
    }
    lua_pushcclosure(L, l_wrapped_call, 2);
    return 1;
}

static void install_coroutine_tracking(lua_State *L) {
    lua_getglobal(L, "coroutine");
    lua_getfield(L, -1, "resume");
    lua_pushcclosure(L, l_resume_tracked, 1);
    lua_setfield(L, -2, "resume");
    lua_getfield(L, -1, "wrap");
    lua_pushcclosure(L, l_wrap_tracked, 1);
    lua_setfield(L, -2, "wrap");
    lua_pop(L, 1);
}

/* Message handler that appends a traceback (lua.c's convention, in our words). */
static int gl_msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    /* a cuda.error stands for the string message it replaced: reported as that string was,
     * traceback included (other objects with __tostring are reported as lua.c does) */
    if (msg == NULL && gl_is_error(L, 1)) msg = gl_error_message(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static int call_interruptible(lua_State *L, int narg, int nres, bool traceback) {
    int base = lua_gettop(L) - narg;
    if (traceback) {
        lua_pushcfunction(L, gl_msghandler);
        lua_insert(L, base);
    }
    lua_State *outer = interrupted_state;
    interrupted_state = L;
    interrupt_pending = interrupt_served = 0;
    void (*old)(int) = signal(SIGINT, on_sigint);
    int status = lua_pcall(L, narg, nres, traceback ? base : 0);
    signal(SIGINT, old);
    interrupt_pending = 0; /* a hook still armed somewhere removes itself */
    interrupted_state = outer;
    if (traceback) lua_remove(L, base);
    return status;
}

int gl_docall(lua_State *L, int narg, int nres) { return call_interruptible(L, narg, nres, true); }

int gl_pcall_interruptible(lua_State *L, int narg, int nres) { return call_interruptible(L, narg, nres, false); }

bool gl_report_progname = true;

int gl_report(lua_State *L, int status) {
    if (status != LUA_OK) {
        int top = lua_gettop(L);
        const char *msg = lua_tostring(L, -1);
        if (msg == NULL && gl_is_error(L, -1)) msg = gl_error_message(L, -1);
        if (msg == NULL) msg = "(error object is not a string)";
        if (gl_report_progname) fprintf(stderr, "%s: ", gl_progname);
        fprintf(stderr, "%s\n", msg);
        fflush(stderr);
        lua_settop(L, top - 1);
    }
    return status;
}

/* lua(1)'s start-up code: LUA_INIT_5_4, else LUA_INIT; "@file" runs the file. */
int gl_run_lua_init(lua_State *L) {
    const char *name = "=LUA_INIT_5_4";
    const char *init = getenv(name + 1);
    if (init == NULL) {
        name = "=LUA_INIT";
        init = getenv(name + 1);
    }
    if (init == NULL) return LUA_OK;
    int status = init[0] == '@' ? gl_loadfilex(L, init + 1, NULL)
                                : gl_loadbuffer_text(L, init, strlen(init), name);
    if (status == LUA_OK) status = gl_docall(L, 0, 0);
    return gl_report(L, status);
}
