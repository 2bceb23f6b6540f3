/*
 * state.c — setting up the Lua state gpulab runs scripts in, and running chunks in it:
 * text-only loading, a traceback on error, and Ctrl-C turned into a Lua error.
 */
#define _GNU_SOURCE
#include "host.h"

#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpulab.h"

const char *gl_progname = "gpulab";
int gl_argc;
char **gl_argv;
static char data_dir[PATH_MAX];

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Installed: <prefix>/bin/gpulab next to <prefix>/share/gpulab. In the build tree the source
 * folder named at configure time is used. GPULAB_HOME overrides both. */
static void find_data_dir(const char *argv0) {
    (void)argv0;
    const char *env = getenv("GPULAB_HOME");
    if (env && *env && is_dir(env)) {
        snprintf(data_dir, sizeof data_dir, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX + 32];
            snprintf(cand, sizeof cand, "%s/../share/gpulab", exe);
            char real[PATH_MAX];
            if (realpath(cand, real) && is_dir(real)) {
                snprintf(data_dir, sizeof data_dir, "%s", real);
                return;
            }
        }
    }
    if (is_dir(GPULAB_SOURCE_DIR "/lua")) {
        snprintf(data_dir, sizeof data_dir, "%s", GPULAB_SOURCE_DIR);
        return;
    }
    snprintf(data_dir, sizeof data_dir, "%s", GPULAB_INSTALL_DATA_DIR);
}

const char *gl_data_dir(void) { return data_dir; }

static void add_package_path(lua_State *L) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s", data_dir, data_dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* Scripts and REPL input are text only: a binary chunk bypasses the parser's checks. */
int gl_loadbuffer_text(lua_State *L, const char *s, size_t len, const char *chunkname) {
    if (len > 0 && s[0] == LUA_SIGNATURE[0]) {
        lua_pushfstring(L, "%s: precompiled binary chunks are refused; gpulab loads source text only",
                        chunkname[0] == '=' || chunkname[0] == '@' ? chunkname + 1 : chunkname);
        return LUA_ERRSYNTAX;
    }
    return luaL_loadbufferx(L, s, len, chunkname, "t");
}

int gl_loadfile_text(lua_State *L, const char *path) {
    int status = luaL_loadfilex(L, path, "t");
    if (status == LUA_ERRSYNTAX) {
        const char *msg = lua_tostring(L, -1);
        if (msg && strstr(msg, "attempt to load a binary chunk")) {
            lua_pop(L, 1);
            lua_pushfstring(L, "%s: precompiled binary chunks are refused; gpulab loads source text only",
                            path ? path : "stdin");
        }
    }
    return status;
}

/* The global load() is restricted to text too, so a script cannot smuggle a binary chunk. It is
 * implemented here in full rather than by calling the base library's load: a wrapper would
 * keep the raw load reachable (debug.getupvalue, or a call hook's debug.getinfo(2, "f")), and
 * the raw load runs binary chunks, which Lua does not verify (a crafted one crashes). */
#define LOAD_READER_SLOT 5 /* where the reader's latest piece is kept alive */

static const char *read_piece(lua_State *L, void *ud, size_t *size) {
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
    lua_replace(L, LOAD_READER_SLOT);
    return lua_tolstring(L, LOAD_READER_SLOT, size);
}

static int l_load_text(lua_State *L) {
    bool have_env = !lua_isnone(L, 4);
    if (!lua_isnoneornil(L, 3)) {
        const char *mode = luaL_checkstring(L, 3);
        if (strchr(mode, 'b')) return luaL_error(L, "bad argument #3 to 'load' (gpulab loads text chunks only)");
    }
    size_t len;
    const char *chunk = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
    int status;
    if (chunk) {
        if (len > 0 && chunk[0] == LUA_SIGNATURE[0]) {
            luaL_pushfail(L);
            lua_pushliteral(L, "precompiled binary chunks are refused; gpulab loads source text only");
            return 2;
        }
        const char *name = luaL_optstring(L, 2, chunk);
        status = luaL_loadbufferx(L, chunk, len, name, "t");
    } else {
        const char *name = luaL_optstring(L, 2, "=(load)");
        luaL_checktype(L, 1, LUA_TFUNCTION);
        lua_settop(L, LOAD_READER_SLOT);
        status = lua_load(L, read_piece, NULL, name, "t");
    }
    if (status != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (have_env) {
        lua_pushvalue(L, 4);
        if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1); /* the chunk's first upvalue is _ENV */
    }
    return 1;
}

/* package.searchers[2] replacement: finds `name` on package.path like the stock searcher but
 * loads the file as text, so `require` cannot be used to run a precompiled chunk either. */
static int searcher_text(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_getfield(L, lua_upvalueindex(1), "searchpath");
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

static void install_text_searcher(lua_State *L) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, searcher_text, 1);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}

static void restrict_loaders(lua_State *L) {
    static const char *const names[] = {"load", "loadfile", "dofile"};
    /* load: force mode "t"; loadfile/dofile: wrap likewise through load's mode argument. */
    lua_pushcfunction(L, l_load_text);
    lua_setglobal(L, names[0]);
    if (luaL_dostring(L,
                  "local load, open = load, io.open\n"
                  "local function read(path)\n"
                  "  local f, err = open(path or '/dev/stdin', 'rb'); if not f then return nil, err end\n"
                  "  local s = f:read('a'); f:close(); return s end\n"
                  "function loadfile(path, mode, env)\n"
                  "  local s, err = read(path); if not s then return nil, err end\n"
                  "  s = s:gsub('^#[^\\n]*', '')\n"
                  "  if env ~= nil then return load(s, '@' .. (path or 'stdin'), 't', env) end\n"
                  "  return load(s, '@' .. (path or 'stdin'), 't') end\n"
                  "function dofile(path)\n"
                  "  local f = assert(loadfile(path)); return f() end\n") != LUA_OK)
        lua_pop(L, 1);
}

void gl_setup_state(lua_State *L, const char *argv0) {
    find_data_dir(argv0);
    luaL_openlibs(L);
    restrict_loaders(L);
    install_text_searcher(L);
    add_package_path(L);
    luaL_requiref(L, "cuda", luaopen_cuda, 1); /* also the global `cuda` */
    lua_pop(L, 1);
    lua_getglobal(L, "cuda");
    lua_pushstring(L, data_dir);
    lua_setfield(L, -2, "home");
    lua_pop(L, 1);
    if (getenv("GPULAB_DEPFILE")) gl_watch_child_setup(L);
}

/* ---------------------------------------------------------------------------------------- */

static lua_State *interrupted_state;

static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
    signal(sig, SIG_DFL); /* a second Ctrl-C kills the process if Lua is stuck in C */
    int mask = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    lua_sethook(interrupted_state, stop_hook, mask, 1);
}

int gl_msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int gl_docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, gl_msghandler);
    lua_insert(L, base);
    interrupted_state = L;
    void (*old)(int) = signal(SIGINT, on_sigint);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, old);
    lua_remove(L, base);
    return status;
}

int gl_report(lua_State *L, int status) {
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (msg == NULL) msg = "(error object is not a string)";
        fprintf(stderr, "%s: %s\n", gl_progname, msg);
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}
