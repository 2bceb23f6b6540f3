/*
 * home.c — cuda.home, the folder gpulab's own files come from (lua/, kernels/include/, labs/,
 * docs/api.lua), for whichever program runs the bindings: the gpulab executable, or Lua 5.4's own
 * interpreter, whose require "cuda" loads them as cuda.so. Also what the cuda table holds there in
 * place of the functions only gpulab's host provides.
 */
#define _GNU_SOURCE
#include "home.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Set by the build (CMakeLists.txt); the defaults let the file compile on its own. */
#ifndef GPULAB_SOURCE_DIR
#define GPULAB_SOURCE_DIR ""
#endif
#ifndef GPULAB_INSTALL_DATA_DIR
#define GPULAB_INSTALL_DATA_DIR "/usr/local/share/gpulab"
#endif
/* From the folder cuda.so is installed in to the data folder: lib/lua/5.4 -> share/gpulab. */
#ifndef GPULAB_MODULE_TO_HOME
#define GPULAB_MODULE_TO_HOME "../../../share/gpulab"
#endif

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* <the folder of file>/<rel>, resolved, when it is a folder. */
static bool beside(const char *file, const char *rel, char *out, size_t cap) {
    char path[PATH_MAX];
    if (realpath(file, path) == NULL) return false;
    char *slash = strrchr(path, '/');
    if (slash == NULL) return false;
    *slash = '\0';
    char cand[PATH_MAX + 64];
    if (snprintf(cand, sizeof cand, "%s/%s", path, rel) >= (int)sizeof cand) return false;
    char real[PATH_MAX];
    if (realpath(cand, real) == NULL || !is_dir(real)) return false;
    snprintf(out, cap, "%s", real);
    return true;
}

/* An installed program finds the files its install put beside it, wherever the install was
 * moved; a program run from its build folder finds the source folder it was configured from. */
static void find_home(const char *code_file, const char *rel, char *out, size_t cap) {
    const char *env = getenv("GPULAB_HOME");
    if (env && *env && is_dir(env)) {
        snprintf(out, cap, "%s", env);
        return;
    }
    if (beside(code_file, rel, out, cap)) return;
    if (GPULAB_SOURCE_DIR[0] && is_dir(GPULAB_SOURCE_DIR "/lua")) {
        snprintf(out, cap, "%s", GPULAB_SOURCE_DIR);
        return;
    }
    snprintf(out, cap, "%s", GPULAB_INSTALL_DATA_DIR);
}

void gl_open_home(lua_State *L, const char *module_file) {
    char home[PATH_MAX];
    if (module_file) find_home(module_file, GPULAB_MODULE_TO_HOME, home, sizeof home);
    else find_home("/proc/self/exe", "../share/gpulab", home, sizeof home);
    lua_pushstring(L, home);
    lua_setfield(L, -2, "home");
}

/* cuda.run_isolated runs a script in a child gpulab process: only gpulab's host can start one. */
static int l_run_isolated_hostless(lua_State *L) {
    return luaL_error(L, "cuda.run_isolated: runs the script in a child gpulab process, which only the gpulab "
                         "executable starts; this `cuda` was loaded by a Lua interpreter's require "
                         "(run the script with gpulab, or start the child yourself with os.execute)");
}

void gl_open_hostless(lua_State *L) {
    lua_pushcfunction(L, l_run_isolated_hostless);
    lua_setfield(L, -2, "run_isolated");
    /* gpulab's scripts, labs and its lab harness use the global `cuda`, as gpulab sets it; a
     * global of that name the program already has is left alone (raw: a strict-globals guard
     * is not tripped) */
    lua_pushglobaltable(L);
    lua_pushliteral(L, "cuda");
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pushliteral(L, "cuda");
        lua_pushvalue(L, -4);
        lua_rawset(L, -4);
    }
    lua_pop(L, 2);
}
