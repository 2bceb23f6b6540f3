/*
 * nvrtc.c — cuda.compile, cuda.compile_file and cuda.cache_key: CUDA C++ to PTX/cubin with
 * NVRTC (no GPU needed), through the compile cache (cache.c). A program is a plain Lua table
 * with the "cuda.program" metatable, so scripts read its fields directly; prog:params(kernel)
 * reads a kernel's signature from its PTX (ptx.c).
 */
#define _GNU_SOURCE /* memmem */
#include "cache.h"
#include "cubin.h"
#include "errors.h"
#include "gpulab.h"
#include "identity.h"
#include "module.h"
#include "options.h"
#include "program.h"
#include "ptx.h"
#include "register.h"
#include "sighold.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


#define PROGRAM_T "cuda.program"
#define DEFAULT_ARCH "sm_90a"

/* ------------------------------------------------------------------------------------------
 * NVRTC is opened on first use, like libcuda: loading its 100 MB library at start-up would cost
 * every `gpulab -e ...` tens of milliseconds. GPULAB_LIBNVRTC overrides the library path.
 * ------------------------------------------------------------------------------------------ */
#define NVRTC_FUNCS(X)                                                                          \
    X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)         \
    X(nvrtcCompileProgram) X(nvrtcAddNameExpression) X(nvrtcGetLoweredName) X(nvrtcGetPTX)      \
    X(nvrtcGetPTXSize) X(nvrtcGetCUBIN) X(nvrtcGetCUBINSize) X(nvrtcGetProgramLog)              \
    X(nvrtcGetProgramLogSize)
#define NVRTC_FIELD(name) __typeof__(&name) name;
static struct { NVRTC_FUNCS(NVRTC_FIELD) } nv;
#undef NVRTC_FIELD
static bool nv_tried, nv_ok;
static char nv_why[16384];

/* Directory of the libnvrtc this build was linked against, tried before the loader's search. */
#define GL_NVRTC_MAJOR (CUDA_VERSION / 1000)
#ifndef GPULAB_NVRTC_DIR
#define GPULAB_NVRTC_DIR ""
#endif
#define NVRTC_HINT "set GPULAB_LIBNVRTC=/path/to/libnvrtc.so.%d (a folder that holds its builtins library too)"

/* Opens libnvrtc: GPULAB_LIBNVRTC, else the build's folder, the loader's search, the default
 * toolkit folder. On failure `tried` lists every place looked at, for the error message. */
static void *open_nvrtc_library(char *tried, size_t len) {
    const char *env = getenv("GPULAB_LIBNVRTC");
    if (env && *env) {
        void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) snprintf(tried, len, "GPULAB_LIBNVRTC=%s: %s", env, dlerror());
        return lib;
    }
    char paths[3][4096];
    int n = 0;
    if (GPULAB_NVRTC_DIR[0]) snprintf(paths[n++], sizeof paths[0], "%s/libnvrtc.so.%d", GPULAB_NVRTC_DIR, GL_NVRTC_MAJOR);
    snprintf(paths[n++], sizeof paths[0], "libnvrtc.so.%d", GL_NVRTC_MAJOR);
    snprintf(paths[n++], sizeof paths[0], "/usr/local/cuda/lib64/libnvrtc.so.%d", GL_NVRTC_MAJOR);
    size_t used = 0;
    tried[0] = '\0';
    for (int i = 0; i < n; i++) {
        void *lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) return lib;
        const char *e = dlerror();
        int w = snprintf(tried + used, len - used, "%s%s (%s)", i ? "; " : "",
                         strchr(paths[i], '/') ? paths[i] : "the loader's search path", e ? e : "not found");
        if (w > 0) used = (size_t)w < len - used ? used + (size_t)w : len - 1;
    }
    return NULL;
}

/* The folder a loaded library came from (its path as the loader recorded it). */
static void library_folder(void *lib, char *dir, size_t len, char *file, size_t file_len) {
    struct link_map *map = NULL;
    const char *path = dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : "";
    const char *slash = strrchr(path, '/');
    snprintf(file, file_len, "%s", slash ? slash + 1 : path);
    if (slash == NULL) snprintf(dir, len, ".");
    else if (slash == path) snprintf(dir, len, "/");
    else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* libnvrtc dlopens its builtins library (libnvrtc-builtins.so.13.0) by soname at the first
 * compile and carries no RUNPATH, so where the CUDA folder is not on the loader path (runfile,
 * tarball and pip installs add none) that lookup fails although the file sits beside libnvrtc.
 * Loading it first by full path from libnvrtc's own folder makes the soname lookup find the
 * already loaded copy. The loader's search is the fallback. */
static bool load_nvrtc_builtins(void *lib) {
    int major = 0, minor = 0;
    if (nv.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
        snprintf(nv_why, sizeof nv_why, "NVRTC: nvrtcVersion failed");
        return false;
    }
    char dir[4096], file[1024], name[128], path[8192], first_error[1024];
    library_folder(lib, dir, sizeof dir, file, sizeof file);
    snprintf(name, sizeof name, "libnvrtc-builtins%s.so.%d.%d", strstr(file, ".alt.") ? ".alt" : "", major, minor);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (dlopen(path, RTLD_NOW | RTLD_LOCAL)) return true;
    const char *e = dlerror();
    snprintf(first_error, sizeof first_error, "%s", e ? e : "cannot open it");
    if (dlopen(name, RTLD_NOW | RTLD_LOCAL)) return true;
    snprintf(nv_why, sizeof nv_why,
             "NVRTC %d.%d needs %s, found neither in %s (the folder of %s) nor on the loader's search path "
             "(%s); " NVRTC_HINT, major, minor, name, dir, file, first_error, GL_NVRTC_MAJOR);
    return false;
}

static bool nvrtc_open(void) {
    if (nv_tried) return nv_ok;
    nv_tried = true;
    char tried[3 * 4096 + 512];
    void *lib = open_nvrtc_library(tried, sizeof tried);
    if (lib == NULL) {
        snprintf(nv_why, sizeof nv_why, "cannot open NVRTC (libnvrtc.so.%d); looked at: %s; " NVRTC_HINT,
                 GL_NVRTC_MAJOR, tried, GL_NVRTC_MAJOR);
        return false;
    }
#define NVRTC_FETCH(name)                                                                       \
    {                                                                                           \
        void *p = dlsym(lib, #name);                                                            \
        if (p == NULL) {                                                                        \
            snprintf(nv_why, sizeof nv_why, "NVRTC library has no %s", #name);                  \
            return false;                                                                       \
        }                                                                                       \
        memcpy(&nv.name, &p, sizeof p);                                                         \
    }
    NVRTC_FUNCS(NVRTC_FETCH)
#undef NVRTC_FETCH
    if (!load_nvrtc_builtins(lib)) return false;
    nv_ok = true;
    return true;
}

static void require_nvrtc(lua_State *L, const char *fn) {
    if (!nvrtc_open()) luaL_error(L, "%s: %s", fn, nv_why);
}

/* From here on every nvrtc call goes through the table. */
#define nvrtcVersion (*nv.nvrtcVersion)
#define nvrtcGetErrorString (*nv.nvrtcGetErrorString)
#define nvrtcCreateProgram (*nv.nvrtcCreateProgram)
#define nvrtcDestroyProgram (*nv.nvrtcDestroyProgram)
#define nvrtcCompileProgram (*nv.nvrtcCompileProgram)
#define nvrtcAddNameExpression (*nv.nvrtcAddNameExpression)
#define nvrtcGetLoweredName (*nv.nvrtcGetLoweredName)
#define nvrtcGetPTX (*nv.nvrtcGetPTX)
#define nvrtcGetPTXSize (*nv.nvrtcGetPTXSize)
#define nvrtcGetCUBIN (*nv.nvrtcGetCUBIN)
#define nvrtcGetCUBINSize (*nv.nvrtcGetCUBINSize)
#define nvrtcGetProgramLog (*nv.nvrtcGetProgramLog)
#define nvrtcGetProgramLogSize (*nv.nvrtcGetProgramLogSize)

void gl_push_nvrtc_version(lua_State *L) {
    int major = 0, minor = 0;
    if (!nvrtc_open() || nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
        lua_pushliteral(L, "unavailable");
        return;
    }
    lua_pushfstring(L, "%d.%d", major, minor);
}

/* What the cache key calls NVRTC's version. It must not load NVRTC (a cache hit would then
 * cost the library's load time), so it names the library file that would be loaded: its real
 * path (libnvrtc.so.13.0.88 carries the full version), size and modification time. Only when
 * no such file can be found is the library loaded and asked. */
static void push_nvrtc_identity(lua_State *L) {
    char path[4096], real[4096];
    const char *env = getenv("GPULAB_LIBNVRTC");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s/libnvrtc.so.%d", GPULAB_NVRTC_DIR, GL_NVRTC_MAJOR);
    struct stat st;
    if (!realpath(path, real))
        snprintf(path, sizeof path, "/usr/local/cuda/lib64/libnvrtc.so.%d", GL_NVRTC_MAJOR);
    if (realpath(path, real) && stat(real, &st) == 0) {
        lua_pushfstring(L, "%s %I %I", real, (lua_Integer)st.st_size, (lua_Integer)st.st_mtime);
        return;
    }
    gl_push_nvrtc_version(L);
}

/* ------------------------------------------------------------------------------------------
 * Reading the options. Everything a compilation needs ends up on the Lua stack (strings are
 * anchored there), so an error anywhere leaks nothing.
 * ------------------------------------------------------------------------------------------ */
typedef struct request {
    const char *fn;          /* "cuda.compile" ... */
    const char *src;
    size_t src_len;
    const char *name;        /* NVRTC's file name for the source */
    const char *arch;
    const char *source_dir;  /* compile_file: the file's folder (searched with -I); compile: "." */
    const char *name_dir;    /* the folder of `name`: NVRTC looks up the source's "x.h" there */
    int options;             /* stack index: array of option strings passed to NVRTC */
    int include_dirs;        /* stack index: array of directories searched, in order */
    int system_dirs;         /* stack index: the toolkit's folders among them */
    int names;               /* stack index: array of name expressions */
    int pre_includes;        /* stack index: array of headers the options pre-include */
    int headers;             /* stack index: array of {name, text}, sorted by name */
    bool use_cache;
} request;

static void refuse_nul(lua_State *L, int argn, const char *fn, const char *what, const char *s, size_t len) {
    const char *nul = memchr(s, '\0', len);
    if (nul) gl_argerror(L, argn, fn, "%s contains a NUL byte at offset %d", what, (int)(nul - s));
}

static void push_option(lua_State *L, int list, const char *text) {
    lua_pushstring(L, text);
    lua_rawseti(L, list, (lua_Integer)lua_rawlen(L, list) + 1);
}

/* Field `field` of the options table at `t` must be nil or of type `type`; pushes it. */
static int get_field(lua_State *L, int t, const char *field, int type, int argn, const char *fn) {
    /* raw: a metamethod on the options table must not run while the request is half read */
    int got = LUA_TNIL;
    if (t) {
        lua_pushstring(L, field);
        got = lua_rawget(L, t);
    } else {
        lua_pushnil(L);
    }
    if (got != LUA_TNIL && got != type)
        gl_fielderror(L, argn, fn, field, "%s expected, got %s", lua_typename(L, type),
                luaL_typename(L, -1));
    return got;
}

/* A list option: a sequence of strings without NUL bytes. Appends each to array `dst`. */
static void append_string_list(lua_State *L, int t, const char *field, int dst, const char *prefix,
                               int argn, const char *fn) {
    if (get_field(L, t, field, LUA_TTABLE, argn, fn) == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    int list = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, list);
    lua_pushnil(L);
    while (lua_next(L, list)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n)
            gl_fielderror(L, argn, fn, field, "must be a list of strings (found key %s)",
                    lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
    }
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, list, i) != LUA_TSTRING)
            gl_fielderror(L, argn, fn, field, "item %d: string expected, got %s", (int)i,
                    luaL_typename(L, -1));
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        const char *nul = memchr(s, '\0', len);
        if (nul) gl_fielderror(L, argn, fn, field, "item %d contains a NUL byte", (int)i);
        if (len == 0) gl_fielderror(L, argn, fn, field, "item %d is empty", (int)i);
        lua_pushfstring(L, "%s%s", prefix, s);
        lua_rawseti(L, dst, (lua_Integer)lua_rawlen(L, dst) + 1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

static bool is_identifier(const char *s) {
    if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return false;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

static int compare_cstrings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Pushes the keys of table t (which must all be strings without NUL bytes) as a sorted array.
 * Sorted in C: the global table.sort is the script's to replace. */
static void push_sorted_keys(lua_State *L, int t, const char *field, int argn, const char *fn) {
    lua_newtable(L);
    int keys = lua_gettop(L);
    lua_Integer n = 0;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            gl_fielderror(L, argn, fn, field, "keys must be strings, got %s", luaL_typename(L, -1));
        size_t len;
        const char *k = lua_tolstring(L, -1, &len);
        if (memchr(k, '\0', len))
            gl_fielderror(L, argn, fn, field, "key '%s' contains a NUL byte", k);
        lua_pushvalue(L, -1);
        lua_rawseti(L, keys, ++n);
    }
    /* the pointers stay valid: the strings are anchored in `keys` */
    const char **sorted = gl_newuserdatauv(L, sizeof(char *) * (size_t)(n ? n : 1), 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, keys, i + 1);
        sorted[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    qsort(sorted, (size_t)n, sizeof sorted[0], compare_cstrings);
    lua_newtable(L);
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushstring(L, sorted[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_replace(L, keys);
    lua_pop(L, 1);
}

/* defines={K=4, FLAG=true, OFF=false, S="x"} -> -DFLAG -DK=4 -DS=x (sorted, so the option list
 * and the cache key do not depend on table order; false leaves a macro undefined). */
static void append_defines(lua_State *L, int t, int dst, int argn, const char *fn) {
    if (get_field(L, t, "defines", LUA_TTABLE, argn, fn) == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    int defs = lua_gettop(L);
    push_sorted_keys(L, defs, "defines", argn, fn);
    int keys = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, keys);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, keys, i);
        const char *k = lua_tostring(L, -1);
        if (!is_identifier(k)) gl_fielderror(L, argn, fn, "defines", "'%s' is not a macro name", k);
        lua_pushvalue(L, -1);
        int vt = lua_rawget(L, defs);
        if (vt == LUA_TBOOLEAN) {
            if (lua_toboolean(L, -1)) lua_pushfstring(L, "-D%s", k);
            else lua_pushnil(L);
        } else if (vt == LUA_TNUMBER && lua_isinteger(L, -1)) {
            lua_pushfstring(L, "-D%s=%I", k, lua_tointeger(L, -1));
        } else if (vt == LUA_TNUMBER) {
            double v = lua_tonumber(L, -1);
            if (!isfinite(v)) gl_fielderror(L, argn, fn, "defines", "'%s' must be finite, got %f", k, v);
            char num[40];
            snprintf(num, sizeof num, "%.17g", v);
            lua_pushfstring(L, "-D%s=%s", k, num);
        } else if (vt == LUA_TSTRING) {
            size_t len;
            const char *v = lua_tolstring(L, -1, &len);
            if (memchr(v, '\0', len) || memchr(v, '\n', len))
                gl_fielderror(L, argn, fn, "defines", "'%s' contains a NUL byte or a newline", k);
            lua_pushfstring(L, "-D%s=%s", k, v);
        } else {
            gl_fielderror(L, argn, fn, "defines", "'%s' must be a boolean, number or string, got %s", k,
                    luaL_typename(L, -1));
        }
        if (!lua_isnil(L, -1)) lua_rawseti(L, dst, (lua_Integer)lua_rawlen(L, dst) + 1);
        else lua_pop(L, 1);
        lua_pop(L, 2);
    }
    lua_pop(L, 2);
}

/* headers={["a.h"]=text} -> array of {name, text} sorted by name, at the top of the stack. */
static void push_headers(lua_State *L, int t, int argn, const char *fn) {
    lua_newtable(L);
    int out = lua_gettop(L);
    if (get_field(L, t, "headers", LUA_TTABLE, argn, fn) == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    int hdrs = lua_gettop(L);
    push_sorted_keys(L, hdrs, "headers", argn, fn);
    int keys = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, keys);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, keys, i);
        size_t klen;
        const char *k = lua_tolstring(L, -1, &klen);
        if (klen == 0 || memchr(k, '\0', klen)) gl_fielderror(L, argn, fn, "headers",
                                                              "names must be non-empty text");
        lua_pushvalue(L, -1);
        if (lua_rawget(L, hdrs) != LUA_TSTRING)
            gl_fielderror(L, argn, fn, "headers", "'%s': string expected, got %s", k, gl_typename(L, -1));
        size_t len;
        const char *text = lua_tolstring(L, -1, &len);
        const char *nul = memchr(text, '\0', len);
        if (nul) gl_fielderror(L, argn, fn, "headers",
                               "'%s' contains a NUL byte at offset %d", k, (int)(nul - text));
        lua_createtable(L, 2, 0);
        lua_insert(L, -3);
        lua_rawseti(L, -3, 2);
        lua_rawseti(L, -2, 1);
        lua_rawseti(L, out, i);
    }
    lua_pop(L, 2);
}

static bool is_directory(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The arch of the current device (sm_90a on Hopper, where the TMA instructions need the
 * arch-specific target), or sm_90a when there is no usable device. Creates no context. */
static const char *default_arch(lua_State *L) {
    int major = 0, minor = 0;
    if (!gl_device_cc(&major, &minor) || major <= 0 || minor < 0) return DEFAULT_ARCH;
    if (major == 9 && minor == 0) return "sm_90a";
    return lua_pushfstring(L, "sm_%d%d", major, minor); /* anchored: the stack keeps it */
}

/* Pushes and returns the folder part of `path` ("." when it has none). */
static const char *push_dirname(lua_State *L, const char *path) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) return lua_pushliteral(L, ".");
    if (slash == path) return lua_pushliteral(L, "/");
    return lua_pushlstring(L, path, (size_t)(slash - path));
}

static const char *const known_options[] = {"name", "arch", "std", "defines", "include_dirs", "headers",
                                            "options", "lineinfo", "names", "cache",
                                            "toolkit_headers", NULL};

/* The CUDA toolkit's headers (cuda_fp16.h, cooperative_groups.h, and with CUDA 13 CCCL's
 * cuda/std/... under include/cccl), searched after the user's folders. The toolkit is the one
 * NVRTC comes from: the folder beside the library that would be loaded (GPULAB_LIBNVRTC, else
 * the build's NVRTC), then $CUDA_HOME, $CUDA_PATH and /usr/local/cuda. Found without loading
 * NVRTC, so a cache hit stays cheap; the folders become -I options and so enter the key, and
 * the key's header scan reads every header they supply. */
/* True when base+suffix is a folder holding cuda_fp16.h; its real path goes to out. */
static bool try_toolkit_dir(const char *base, const char *suffix, char *out, size_t cap) {
    char dir[4096], probe[4096], real[PATH_MAX];
    int n = snprintf(dir, sizeof dir, "%s%s", base, suffix);
    if (n < 0 || (size_t)n >= sizeof dir) return false;
    n = snprintf(probe, sizeof probe, "%s/cuda_fp16.h", dir);
    if (n < 0 || (size_t)n >= sizeof probe) return false;
    struct stat st;
    if (stat(probe, &st) != 0 || !S_ISREG(st.st_mode) || !realpath(dir, real)) return false;
    n = snprintf(out, cap, "%s", real);
    return n >= 0 && (size_t)n < cap;
}

static bool toolkit_include_dir(char *out, size_t cap) {
    const char *lib = getenv("GPULAB_LIBNVRTC");
    char real[PATH_MAX];
    if (lib && *lib && realpath(lib, real)) {
        char *slash = strrchr(real, '/');
        if (slash) *slash = '\0';
        if (slash && try_toolkit_dir(real, "/../include", out, cap)) return true;
    }
    if (GPULAB_NVRTC_DIR[0] && try_toolkit_dir(GPULAB_NVRTC_DIR, "/../include", out, cap)) return true;
    const char *homes[3] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (int i = 0; i < 3; i++)
        if (homes[i] && *homes[i] && try_toolkit_dir(homes[i], "/include", out, cap)) return true;
    return false;
}

/* Appends the toolkit's folders to both arrays: searched includes and installed headers. */
static void push_toolkit_include_dirs(lua_State *L, int list, int system) {
    char dir[4096];
    if (!toolkit_include_dir(dir, sizeof dir)) return;
    push_option(L, list, dir);
    push_option(L, system, dir);
    const char *cccl = lua_pushfstring(L, "%s/cccl", dir);
    if (is_directory(cccl)) {
        push_option(L, list, cccl);
        push_option(L, system, cccl);
    }
    lua_pop(L, 1);
}

/* The value of option `o` when it is one of the spellings of `short_name` / `long_name` that
 * NVRTC accepts: "-Ix", "-I=x", "--include-path=x" (the value in the same item), or "-I",
 * "--include-path" alone (the value is the next item: *takes_next). NULL otherwise. */
static const char *option_value(const char *o, const char *short_name, bool short_joined, const char *long_name,
                                bool *takes_next) {
    *takes_next = false;
    size_t ns = strlen(short_name), nl = strlen(long_name);
    if (strcmp(o, short_name) == 0 || strcmp(o, long_name) == 0) {
        *takes_next = true;
        return NULL;
    }
    if (strncmp(o, long_name, nl) == 0 && o[nl] == '=') return o + nl + 1;
    if (strncmp(o, short_name, ns) == 0 && o[ns] == '=') return o + ns + 1;
    if (short_joined && strncmp(o, short_name, ns) == 0 && o[ns]) return o + ns;
    return NULL;
}

/* Include folders and pre-included headers given as plain options: NVRTC searches and reads them
 * too (the folders after gpulab's own), so the cache key must see them in every spelling. */
static void note_user_include_options(lua_State *L, const request *rq, int first) {
    int n = (int)lua_rawlen(L, rq->options);
    for (int i = first; i <= n; i++) {
        lua_rawgeti(L, rq->options, i);
        const char *o = lua_tostring(L, -1);
        bool next_dir = false, next_pre = false;
        const char *dir = option_value(o, "-I", true, "--include-path", &next_dir);
        const char *pre = option_value(o, "-include", false, "--pre-include", &next_pre);
        if ((next_dir || next_pre) && i < n) {
            lua_rawgeti(L, rq->options, ++i); /* the value is the next item */
            push_option(L, next_dir ? rq->include_dirs : rq->pre_includes, lua_tostring(L, -1));
            lua_pop(L, 1);
        } else if (dir && *dir) {
            push_option(L, rq->include_dirs, dir);
        } else if (pre && *pre) {
            push_option(L, rq->pre_includes, pre);
        }
        lua_pop(L, 1);
    }
}

/* Reads the options table at `t` (0: none) into `rq`, pushing its arrays. */
/* Slots a compile keeps on the stack, from its request to the program it pushes (about 40): more
 * than the LUA_MINSTACK a C function is promised, so asked for. Pushing past the stack writes past
 * it (no check in a release Lua): a compile that pushed one list more lost its headers table. */
#define COMPILE_STACK 64

static void read_request(lua_State *L, int t, int argn, request *rq, const char *default_name) {
    const char *fn = rq->fn;
    luaL_checkstack(L, COMPILE_STACK, fn);
    if (t) gl_check_known_fields(L, t, known_options, fn);

    get_field(L, t, "name", LUA_TSTRING, argn, fn);
    rq->name = lua_isnil(L, -1) ? default_name : lua_tostring(L, -1);
    if (!lua_isnil(L, -1) && strlen(rq->name) != lua_rawlen(L, -1))
        gl_fielderror(L, argn, fn, "name", "contains a NUL byte");
    if (strlen(rq->name) == 0) gl_fielderror(L, argn, fn, "name", "must not be empty");
    rq->name_dir = push_dirname(L, rq->name);
    get_field(L, t, "arch", LUA_TSTRING, argn, fn);
    if (!lua_isnil(L, -1) && strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
        gl_fielderror(L, argn, fn, "arch", "contains a NUL byte");
    rq->arch = lua_isnil(L, -1) ? default_arch(L) : lua_tostring(L, -1);
    if (strlen(rq->arch) == 0 || strlen(rq->arch) > 32 || strchr(rq->arch, ' '))
        gl_fielderror(L, argn, fn, "arch", "'%s' is not an architecture such as sm_90a", rq->arch);
    get_field(L, t, "std", LUA_TSTRING, argn, fn);
    const char *std = lua_tostring(L, -1);
    if (std && strlen(std) != lua_rawlen(L, -1)) gl_fielderror(L, argn, fn, "std", "contains a NUL byte");
    get_field(L, t, "toolkit_headers", LUA_TBOOLEAN, argn, fn);
    bool toolkit = lua_isnil(L, -1) || lua_toboolean(L, -1);
    get_field(L, t, "lineinfo", LUA_TBOOLEAN, argn, fn);
    bool lineinfo = lua_toboolean(L, -1);
    const char *env = getenv("GPULAB_LINEINFO");
    if (env && strcmp(env, "1") == 0) lineinfo = true;
    get_field(L, t, "cache", LUA_TBOOLEAN, argn, fn);
    rq->use_cache = lua_isnil(L, -1) || lua_toboolean(L, -1);

    /* the directories searched for includes, in NVRTC's order */
    lua_newtable(L);
    rq->include_dirs = lua_gettop(L);
    if (strcmp(rq->source_dir, ".") != 0) push_option(L, rq->include_dirs, rq->source_dir);
    append_string_list(L, t, "include_dirs", rq->include_dirs, "", argn, fn);
    lua_pushliteral(L, "home");
    if (lua_rawget(L, lua_upvalueindex(1)) == LUA_TSTRING) {
        const char *dir = lua_pushfstring(L, "%s/kernels/include", lua_tostring(L, -1));
        if (is_directory(dir)) push_option(L, rq->include_dirs, dir);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_newtable(L);
    rq->system_dirs = lua_gettop(L);
    if (toolkit) push_toolkit_include_dirs(L, rq->include_dirs, rq->system_dirs);

    lua_newtable(L);
    rq->options = lua_gettop(L);
    lua_pushfstring(L, "--gpu-architecture=%s", rq->arch);
    lua_rawseti(L, rq->options, 1);
    if (std) push_option(L, rq->options, lua_pushfstring(L, "-std=%s", std)), lua_pop(L, 1);
    append_defines(L, t, rq->options, argn, fn);
    lua_Integer ndirs = (lua_Integer)lua_rawlen(L, rq->include_dirs);
    for (lua_Integer i = 1; i <= ndirs; i++) {
        lua_rawgeti(L, rq->include_dirs, i);
        push_option(L, rq->options, lua_pushfstring(L, "-I%s", lua_tostring(L, -1)));
        lua_pop(L, 2);
    }
    if (lineinfo) push_option(L, rq->options, "-lineinfo");
    int user_first = (int)lua_rawlen(L, rq->options) + 1;
    append_string_list(L, t, "options", rq->options, "", argn, fn);
    lua_newtable(L);
    rq->pre_includes = lua_gettop(L);
    note_user_include_options(L, rq, user_first);

    lua_newtable(L);
    rq->names = lua_gettop(L);
    append_string_list(L, t, "names", rq->names, "", argn, fn);
    push_headers(L, t, argn, fn);
    rq->headers = lua_gettop(L);
}

/* A Lua array of strings as a C array (in a userdata on the stack, so it is collected). */
static const char **string_array(lua_State *L, int list, int *n) {
    *n = (int)lua_rawlen(L, list);
    const char **out = gl_newuserdatauv(L, sizeof(char *) * (size_t)(*n ? *n : 1), 0);
    for (int i = 0; i < *n; i++) {
        lua_rawgeti(L, list, i + 1);
        out[i] = lua_tostring(L, -1); /* anchored by `list` */
        lua_pop(L, 1);
    }
    return out;
}

typedef struct inputs {
    const char **options, **names, **include_dirs, **system_dirs, **pre_includes;
    int noptions, nnames, ninclude_dirs, nsystem_dirs, npre_includes, nheaders;
    gl_cache_header *headers;
} inputs;

/* Every compile asks ptxas for its per-kernel report (registers, spills, stack frame): it costs
 * nothing measurable, lands in the compile log and so in the cache entry, and prog:resources
 * reads spills from it on a cache hit too. It is passed to NVRTC and hashed into the key, but
 * not listed in prog.options, which shows what the script asked for. */
static const char ptxas_report_option[] = "--ptxas-options=-v";

/* The options array plus the report option (a userdata on the stack, so it is collected). */
static const char **with_report_option(lua_State *L, const char **options, int *n) {
    const char **out = gl_newuserdatauv(L, sizeof(char *) * (size_t)(*n + 1), 0);
    if (*n) memcpy(out, options, sizeof(char *) * (size_t)*n);
    out[(*n)++] = ptxas_report_option;
    return out;
}

/* The {name, text} pairs of the array at `list` (anchored there) as gl_cache_header structs. */
static void collect_headers(lua_State *L, int list, inputs *in) {
    in->nheaders = (int)lua_rawlen(L, list);
    in->headers = gl_newuserdatauv(L, sizeof(gl_cache_header) * (size_t)(in->nheaders ? in->nheaders : 1), 0);
    for (int i = 0; i < in->nheaders; i++) {
        lua_rawgeti(L, list, i + 1);
        lua_rawgeti(L, -1, 1);
        in->headers[i].name = lua_tostring(L, -1);
        lua_rawgeti(L, -2, 2);
        in->headers[i].text = lua_tolstring(L, -1, &in->headers[i].len);
        lua_pop(L, 3);
    }
}

static void collect_inputs(lua_State *L, const request *rq, inputs *in) {
    in->options = string_array(L, rq->options, &in->noptions);
    in->options = with_report_option(L, in->options, &in->noptions);
    in->names = string_array(L, rq->names, &in->nnames);
    in->include_dirs = string_array(L, rq->include_dirs, &in->ninclude_dirs);
    in->system_dirs = string_array(L, rq->system_dirs, &in->nsystem_dirs);
    in->pre_includes = string_array(L, rq->pre_includes, &in->npre_includes);
    collect_headers(L, rq->headers, in);
}

/* The host's observer of the files compiles read (gpulab.h); NULL: nobody asked. */
static gl_compile_observer compile_observer;
static void *compile_observer_ctx;

void gl_set_compile_observer(gl_compile_observer fn, void *ctx) {
    compile_observer = fn;
    compile_observer_ctx = ctx;
}

static void observe_compiled_file(const char *path) {
    if (compile_observer) compile_observer(path, compile_observer_ctx);
}

static void record_dependency(const char *path, void *ctx) {
    (void)ctx;
    observe_compiled_file(path);
}

/* The compile's cache key; false when no key can cover it (see gl_cache_key). */
static bool compute_key(const request *rq, const inputs *in, const char *nvrtc_version,
                        unsigned char key[32]) {
    gl_cache_key_input k = {
        .gpulab_version = GPULAB_VERSION,
        .nvrtc_version = nvrtc_version,
        .arch = rq->arch,
        .options = in->options,
        .noptions = in->noptions,
        .source_name = rq->name,
        .source = rq->src,
        .source_len = rq->src_len,
        .source_dir = rq->name_dir,
        .names = in->names,
        .nnames = in->nnames,
        .headers = in->headers,
        .nheaders = in->nheaders,
        .include_dirs = in->include_dirs,
        .ninclude_dirs = in->ninclude_dirs,
        .system_dirs = in->system_dirs,
        .nsystem_dirs = in->nsystem_dirs,
        .pre_includes = in->pre_includes,
        .npre_includes = in->npre_includes,
    };
    return gl_cache_key(&k, key, compile_observer ? record_dependency : NULL, NULL);
}

/* ------------------------------------------------------------------------------------------
 * Running NVRTC. Never raises while a program exists: results are copied into a
 * gl_cache_entry (malloc) and the failure text into a Lua-independent buffer.
 * ------------------------------------------------------------------------------------------ */
typedef struct outcome {
    nvrtcResult result;
    const char *step;  /* the NVRTC call that failed */
    char *log;         /* compilation log on failure (malloc) */
} outcome;

static char *copy_log(nvrtcProgram p) {
    size_t size = 0;
    if (nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size == 0) return NULL;
    char *log = malloc(size + 1);
    if (log && nvrtcGetProgramLog(p, log) != NVRTC_SUCCESS) log[0] = '\0';
    if (log) log[size] = '\0';
    return log;
}

/* Removes ptxas's "Compile time = 12.3 ms" report lines in place: they differ on every compile,
 * and a log that changes would make every rewrite of a cache entry a different file. */
static void drop_compile_times(char *log) {
    if (!log) return;
    char *out = log;
    for (const char *line = log; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line + 1) : strlen(line);
        bool timing = gl_ptxas_is_report_line(line, len) && memmem(line, len, "Compile time", 12);
        if (!timing) memmove(out, line, len), out += len;
        line += len;
    }
    *out = '\0';
}

/* Fills e from a compiled program; returns the failing step or NULL. */
static const char *collect_outputs(nvrtcProgram p, const inputs *in, gl_cache_entry *e, nvrtcResult *r) {
    size_t size = 0;
    if ((*r = nvrtcGetPTXSize(p, &size)) != NVRTC_SUCCESS) return "nvrtcGetPTXSize";
    if (!(e->ptx = malloc(size + 1))) return *r = NVRTC_ERROR_OUT_OF_MEMORY, "malloc";
    if ((*r = nvrtcGetPTX(p, e->ptx)) != NVRTC_SUCCESS) return "nvrtcGetPTX";
    e->ptx[size] = '\0';
    e->ptx_len = strnlen(e->ptx, size); /* the size counts the terminating NUL */
    size = 0;
    /* a virtual arch (compute_XX) has no cubin: the call fails or reports 0 bytes */
    if (nvrtcGetCUBINSize(p, &size) == NVRTC_SUCCESS && size > 0) {
        if (!(e->cubin = malloc(size))) return *r = NVRTC_ERROR_OUT_OF_MEMORY, "malloc";
        if ((*r = nvrtcGetCUBIN(p, e->cubin)) != NVRTC_SUCCESS) return "nvrtcGetCUBIN";
        e->cubin_len = size;
    }
    e->log = copy_log(p);
    drop_compile_times(e->log);
    e->log_len = e->log ? strlen(e->log) : 0;
    if (in->nnames) {
        e->names = calloc((size_t)in->nnames, sizeof(char *));
        e->lowered = calloc((size_t)in->nnames, sizeof(char *));
        if (!e->names || !e->lowered) return *r = NVRTC_ERROR_OUT_OF_MEMORY, "malloc";
    }
    for (int i = 0; i < in->nnames; i++) {
        const char *low = NULL;
        e->nlowered = i + 1;
        if ((*r = nvrtcGetLoweredName(p, in->names[i], &low)) != NVRTC_SUCCESS) return "nvrtcGetLoweredName";
        e->names[i] = strdup(in->names[i]);
        e->lowered[i] = strdup(low);
        if (!e->names[i] || !e->lowered[i]) return *r = NVRTC_ERROR_OUT_OF_MEMORY, "malloc";
    }
    return NULL;
}

/* nvrtcCompileProgram with Ctrl-C held for gpulab: NVRTC's own SIGINT/SIGTERM handlers call
 * exit(4) from signal context (sighold.h). */
typedef struct compile_call {
    nvrtcProgram prog;
    int noptions;
    const char *const *options;
    nvrtcResult result;
} compile_call;

static void compile_program(void *arg) {
    compile_call *c = arg;
    c->result = nvrtcCompileProgram(c->prog, c->noptions, c->options);
}

static outcome run_nvrtc(const request *rq, const inputs *in, gl_cache_entry *e) {
    outcome o = {NVRTC_SUCCESS, NULL, NULL};
    memset(e, 0, sizeof *e);
    /* on the heap: the number of in-memory headers is the script's to choose */
    size_t nh = in->nheaders ? (size_t)in->nheaders : 1;
    const char **hnames = malloc(nh * sizeof *hnames), **htexts = malloc(nh * sizeof *htexts);
    if (hnames == NULL || htexts == NULL) {
        free(hnames);
        free(htexts);
        o.result = NVRTC_ERROR_OUT_OF_MEMORY;
        o.step = "malloc";
        return o;
    }
    for (int i = 0; i < in->nheaders; i++) {
        hnames[i] = in->headers[i].name;
        htexts[i] = in->headers[i].text;
    }
    nvrtcProgram p;
    o.result = nvrtcCreateProgram(&p, rq->src, rq->name, in->nheaders, htexts, hnames);
    free(hnames);
    free(htexts);
    if (o.result != NVRTC_SUCCESS) {
        o.step = "nvrtcCreateProgram";
        return o;
    }
    for (int i = 0; i < in->nnames && o.result == NVRTC_SUCCESS; i++) {
        o.result = nvrtcAddNameExpression(p, in->names[i]);
        if (o.result != NVRTC_SUCCESS) o.step = "nvrtcAddNameExpression";
    }
    if (o.result == NVRTC_SUCCESS) {
        compile_call call = {p, in->noptions, in->options, NVRTC_SUCCESS};
        gl_call_holding_signals(compile_program, &call);
        o.result = call.result;
        if (o.result != NVRTC_SUCCESS) {
            o.step = "nvrtcCompileProgram";
            o.log = copy_log(p);
        } else {
            o.step = collect_outputs(p, in, e, &o.result);
        }
    }
    nvrtcDestroyProgram(&p);
    if (o.step) gl_cache_entry_free(e);
    return o;
}

/* True when the script asked ptxas for its verbose report itself (-Xptxas -v and spellings):
 * the report then stays in prog.log, where it asked for it. */
static bool asked_for_report(lua_State *L, int options) {
    bool after_x = false;
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, options); i++) {
        lua_rawgeti(L, options, i);
        const char *o = lua_tostring(L, -1);
        lua_pop(L, 1);
        if (!o) continue;
        bool verbose = !strcmp(o, "-v") || !strcmp(o, "--verbose");
        if (after_x && verbose) return true;
        after_x = !strcmp(o, "-Xptxas") || !strcmp(o, "--ptxas-options");
        const char *eq = strchr(o, '=');
        bool x = !strncmp(o, "-Xptxas=", 8) || !strncmp(o, "--ptxas-options=", 16);
        if (x && eq && (strstr(eq, "-v") || strstr(eq, "--verbose"))) return true;
    }
    return false;
}

/* Pushes NVRTC's log with `x.cu(12): error` rewritten to `x.cu:12: error` (file:line), without
 * ptxas's report lines unless `report` (those gpulab asked for go to prog:resources). */
static void push_log(lua_State *L, const char *log, bool report) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *line = log;
    while (line && *line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line + 1) : strlen(line);
        if (!report && gl_ptxas_is_report_line(line, len)) {
            line += len;
            continue;
        }
        const char *open = memchr(line, '(', len);
        const char *p = open ? open + 1 : NULL;
        while (p && p < line + len && *p >= '0' && *p <= '9') p++;
        bool located = open && open > line && p > open + 1 && p + 1 < line + len && p[0] == ')' && p[1] == ':' &&
                       memchr(line, ' ', (size_t)(open - line)) == NULL;
        if (located) {
            luaL_addlstring(&b, line, (size_t)(open - line));
            luaL_addchar(&b, ':');
            luaL_addlstring(&b, open + 1, (size_t)(p - open - 1));
            luaL_addlstring(&b, p + 1, len - (size_t)(p + 1 - line));
        } else {
            luaL_addlstring(&b, line, len);
        }
        line += len;
    }
    luaL_pushresult(&b);
}

/* Raises a cuda.error (errors.h): code and name are NVRTC's, `log` the compiler's log, and the
 * message (with the caller's "file:line:") the text a string error had before. */
__attribute__((noreturn)) static void raise_failure(lua_State *L, const request *rq, outcome *o) {
    push_log(L, o->log ? o->log : "", asked_for_report(L, rq->options));
    free(o->log);
    int logi = lua_gettop(L);
    const char *log = lua_tostring(L, logi);
    luaL_where(L, 1);
    if (o->result == NVRTC_ERROR_COMPILATION) {
        lua_pushfstring(L, "%s: %s: compilation failed:\n%s", rq->fn, rq->name, log);
    } else {
        const char *hint = "";
        if (o->result == NVRTC_ERROR_INVALID_OPTION && strstr(log, "gpu-architecture"))
            hint = lua_pushfstring(L, " (arch '%s')", rq->arch);
        lua_pushfstring(L, "%s: %s: %s failed: %s (%d)%s%s%s", rq->fn, rq->name, o->step,
                        nvrtcGetErrorString(o->result), (int)o->result, hint, *log ? ": " : "", log);
        if (*hint) lua_remove(L, -2);
    }
    lua_concat(L, 2);
    gl_push_error(L, -1, (int)o->result, nvrtcGetErrorString(o->result), rq->fn, false);
    lua_pushstring(L, o->step);
    lua_setfield(L, -2, "call");
    lua_pushvalue(L, logi);
    lua_setfield(L, -2, "log");
    lua_createtable(L, 0, 1); /* no launch is involved */
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "n");
    lua_setfield(L, -2, "launches");
    lua_error(L);
    abort(); /* not reached */
}

/* ------------------------------------------------------------------------------------------
 * Building the program table
 * ------------------------------------------------------------------------------------------ */
/* What a program keeps out of the script's reach (gl_program_private): ptxas's report for
 * prog:resources, and the inputs a recompile with line info for prog:sass needs. Keyed weakly by
 * the program table, so it goes with it. */
#define PROGRAM_PRIVATE "cuda.program.private"

static void push_report(lua_State *L, const char *log) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *line = log; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line + 1) : strlen(line);
        if (gl_ptxas_is_report_line(line, len)) luaL_addlstring(&b, line, len);
        line += len;
    }
    luaL_pushresult(&b);
}

static void copy_array(lua_State *L, int from) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, from);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, from, i);
        lua_rawseti(L, -2, i);
    }
}

/* Stores the private record of the program on top of the stack. */
static void remember_inputs(lua_State *L, const request *rq, const gl_cache_entry *e, int options, int names,
                            int headers) {
    int prog = lua_gettop(L);
    if (gl_private_get(L, PROGRAM_PRIVATE) != LUA_TTABLE) {
        lua_pop(L, 1);
        return; /* a script removed the store: resources still work from the cubin */
    }
    lua_pushvalue(L, prog);
    lua_createtable(L, 0, 8);
    push_report(L, e->log ? e->log : "");
    lua_setfield(L, -2, "report");
    lua_pushlstring(L, rq->src, rq->src_len);
    lua_setfield(L, -2, "source");
    lua_pushstring(L, rq->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, rq->arch);
    lua_setfield(L, -2, "arch");
    copy_array(L, options);
    lua_setfield(L, -2, "options");
    lua_pushvalue(L, names);
    lua_setfield(L, -2, "names");
    lua_pushvalue(L, headers);
    lua_setfield(L, -2, "headers");
    lua_pushliteral(L, "cubin"); /* the program's own string, just set: one copy of the image */
    lua_rawget(L, prog);
    lua_setfield(L, -2, "cubin");
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

int gl_program_private(lua_State *L, int prog) {
    prog = lua_absindex(L, prog);
    if (gl_private_get(L, PROGRAM_PRIVATE) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_pushnil(L);
        return LUA_TNIL;
    }
    lua_pushvalue(L, prog);
    int t = lua_rawget(L, -2);
    lua_remove(L, -2);
    return t;
}

static void push_program(lua_State *L, const request *rq, const gl_cache_entry *e, bool hit, int options,
                         int names, int headers) {
    lua_createtable(L, 0, 9);
    lua_pushlstring(L, e->ptx ? e->ptx : "", e->ptx_len);
    lua_setfield(L, -2, "ptx");
    if (e->cubin) {
        lua_pushlstring(L, e->cubin, e->cubin_len);
        lua_setfield(L, -2, "cubin");
    }
    push_log(L, e->log ? e->log : "", asked_for_report(L, options));
    lua_setfield(L, -2, "log");
    lua_createtable(L, 0, e->nlowered);
    for (int i = 0; i < e->nlowered; i++) {
        lua_pushstring(L, e->lowered[i]);
        lua_setfield(L, -2, e->names[i]);
    }
    lua_setfield(L, -2, "lowered");
    lua_pushboolean(L, hit);
    lua_setfield(L, -2, "cache_hit");
    lua_pushstring(L, rq->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, rq->arch);
    lua_setfield(L, -2, "arch");
    lua_pushvalue(L, options);
    lua_setfield(L, -2, "options");
    gl_setmetatable(L, PROGRAM_T);
    remember_inputs(L, rq, e, options, names, headers);
}

/* The entry is freed on every path, including a Lua error while building the table. */
static int push_program_protected(lua_State *L) {
    const request *rq = lua_touserdata(L, 1);
    const gl_cache_entry *e = lua_touserdata(L, 2);
    push_program(L, rq, e, lua_toboolean(L, 3), 4, 5, 6);
    return 1;
}

static void push_and_free(lua_State *L, const request *rq, gl_cache_entry *e, bool hit) {
    lua_pushcfunction(L, push_program_protected);
    lua_pushlightuserdata(L, (void *)rq);
    lua_pushlightuserdata(L, e);
    lua_pushboolean(L, hit);
    lua_pushvalue(L, rq->options); /* stack indices of this frame mean nothing inside the call */
    lua_pushvalue(L, rq->names);
    lua_pushvalue(L, rq->headers);
    int status = lua_pcall(L, 6, 1, 0);
    gl_cache_entry_free(e);
    if (status != LUA_OK) lua_error(L);
}

static int compile_request(lua_State *L, request *rq, int opts, const char *default_name) {
    read_request(L, opts, 2, rq, default_name);
    inputs in;
    collect_inputs(L, rq, &in);

    char dir[4096];
    bool cached = rq->use_cache && gl_cache_dir(dir, sizeof dir);
    unsigned char key[32];
    if (cached || compile_observer) {
        push_nvrtc_identity(L);
        if (!compute_key(rq, &in, lua_tostring(L, -1), key)) cached = false; /* #include MACRO */
        lua_pop(L, 1);
    }
    gl_cache_entry e;
    gl_cache_status st = cached ? gl_cache_load(dir, key, &e) : GL_CACHE_UNUSABLE;
    if (st == GL_CACHE_HIT) {
        push_and_free(L, rq, &e, true);
        return 1;
    }
    require_nvrtc(L, rq->fn);
    outcome o = run_nvrtc(rq, &in, &e);
    if (o.step) raise_failure(L, rq, &o);
    if (st == GL_CACHE_MISS) gl_cache_store(dir, key, &e); /* a failed write costs a recompile */
    push_and_free(L, rq, &e, false);
    return 1;
}

static int opts_arg(lua_State *L, int idx, const char *fn) {
    int t = lua_type(L, idx);
    if (t == LUA_TNONE || t == LUA_TNIL) return 0;
    if (t != LUA_TTABLE) gl_typeerror(L, idx, fn, "table");
    return idx;
}

static const char *source_arg(lua_State *L, int idx, const char *fn, const char *what, size_t *len) {
    if (lua_type(L, idx) != LUA_TSTRING)
        gl_typeerror(L, idx, fn, "string");
    const char *s = lua_tolstring(L, idx, len);
    refuse_nul(L, idx, fn, what, s, *len);
    return s;
}

/* cuda.compile(src [, opts]) */
static int l_compile(lua_State *L) {
    request rq = {.fn = "cuda.compile", .source_dir = "."};
    rq.src = source_arg(L, 1, rq.fn, "source", &rq.src_len);
    int opts = opts_arg(L, 2, rq.fn);
    lua_settop(L, 2);
    return compile_request(L, &rq, opts, "kernel.cu");
}

/* Reads a whole file onto the stack; raises naming the path. */
static void push_file(lua_State *L, const char *path, const char *fn) {
    FILE *f = fopen(path, "rb");
    if (!f) luaL_error(L, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) luaL_addlstring(&b, chunk, n);
    bool failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed) luaL_error(L, "%s: cannot read '%s': %s", fn, path, strerror(err));
    luaL_pushresult(&b);
}

/* cuda.compile_file(path [, opts]) */
static int l_compile_file(lua_State *L) {
    request rq = {.fn = "cuda.compile_file"};
    size_t plen;
    const char *path = source_arg(L, 1, rq.fn, "path", &plen);
    if (plen == 0) gl_argerror(L, 1, rq.fn, "path must not be empty");
    int opts = opts_arg(L, 2, rq.fn);
    lua_settop(L, 2);
    observe_compiled_file(path); /* even when it fails to compile: --watch re-runs on a fix */
    push_file(L, path, rq.fn); /* 3 */
    rq.src = lua_tolstring(L, 3, &rq.src_len);
    const char *nul = memchr(rq.src, '\0', rq.src_len);
    if (nul) luaL_error(L, "%s: '%s': source contains a NUL byte at offset %d", rq.fn, path, (int)(nul - rq.src));
    rq.source_dir = push_dirname(L, path);
    return compile_request(L, &rq, opts, path);
}

/* cuda.cache_key(src [, opts [, nvrtc_version]]) --> hex string: the key a compile of src with
 * opts would be cached under (the NVRTC version can be given to see how the key moves). */
static int l_cache_key(lua_State *L) {
    request rq = {.fn = "cuda.cache_key", .source_dir = "."};
    rq.src = source_arg(L, 1, rq.fn, "source", &rq.src_len);
    int opts = opts_arg(L, 2, rq.fn);
    if (!lua_isnoneornil(L, 3) && lua_type(L, 3) != LUA_TSTRING)
        gl_typeerror(L, 3, rq.fn, "string");
    lua_settop(L, 3);
    read_request(L, opts, 2, &rq, "kernel.cu");
    inputs in;
    collect_inputs(L, &rq, &in);
    const char *version = lua_tostring(L, 3);
    if (!version) {
        push_nvrtc_identity(L);
        version = lua_tostring(L, -1);
    }
    unsigned char key[32];
    char hex[65];
    bool cacheable = compute_key(&rq, &in, version, key);
    gl_hex(key, 32, hex);
    lua_pushstring(L, hex);
    lua_pushboolean(L, cacheable);
    return 2;
}

/* ------------------------------------------------------------------------------------------
 * cuda.program methods
 * ------------------------------------------------------------------------------------------ */
void gl_check_program(lua_State *L, int idx, const char *fn) {
    if (lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx)) {
        gl_getmetatable(L, PROGRAM_T);
        bool same = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
        if (same) return;
    }
    gl_typeerror(L, idx, fn, "cuda.program");
}

void gl_program_recompile(lua_State *L, int prog, const char *option, const char *fn) {
    luaL_checkstack(L, COMPILE_STACK, fn);
    if (gl_program_private(L, prog) != LUA_TTABLE)
        luaL_error(L, "%s: this program's inputs are gone (a script removed gpulab's private store)", fn);
    int priv = lua_gettop(L);
    request rq = {.fn = fn};
    gl_rawgetfield(L, priv, "source");
    rq.src = lua_tolstring(L, -1, &rq.src_len);
    gl_rawgetfield(L, priv, "name");
    rq.name = lua_tostring(L, -1);
    gl_rawgetfield(L, priv, "arch");
    rq.arch = lua_tostring(L, -1);
    copy_array(L, (gl_rawgetfield(L, priv, "options"), lua_gettop(L)));
    rq.options = lua_gettop(L);
    push_option(L, rq.options, option);
    gl_rawgetfield(L, priv, "names");
    rq.names = lua_gettop(L);
    gl_rawgetfield(L, priv, "headers");
    rq.headers = lua_gettop(L);
    if (!rq.src || !rq.name || !rq.arch || !lua_istable(L, rq.names) || !lua_istable(L, rq.headers))
        luaL_error(L, "%s: this program's inputs are incomplete", fn);
    inputs in = {0};
    in.options = string_array(L, rq.options, &in.noptions);
    in.options = with_report_option(L, in.options, &in.noptions);
    in.names = string_array(L, rq.names, &in.nnames);
    collect_headers(L, rq.headers, &in);
    require_nvrtc(L, fn);
    gl_cache_entry e;
    outcome o = run_nvrtc(&rq, &in, &e);
    if (o.step) raise_failure(L, &rq, &o);
    push_and_free(L, &rq, &e, false);
}

/* The number of .entry directives in the PTX. */
static int count_entries(const char *ptx, size_t len) {
    int n = 0;
    for (const char *p = ptx; (p = memmem(p, len - (size_t)(p - ptx), ".entry", 6)) != NULL; p += 6) {
        bool word_start = p == ptx || p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n';
        bool word_end = (size_t)(p + 6 - ptx) < len && (p[6] == ' ' || p[6] == '\t');
        if (word_start && word_end) n++;
    }
    return n;
}

static int l_program_tostring(lua_State *L) {
    gl_rawgetfield(L, 1, "name");
    gl_rawgetfield(L, 1, "arch");
    gl_rawgetfield(L, 1, "ptx");
    size_t len = 0;
    const char *ptx = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : "";
    int n = count_entries(ptx, len);
    lua_pushfstring(L, "cuda.program %s (%s, %d kernel%s)", luaL_optstring(L, -3, "?"), luaL_optstring(L, -2, "?"),
                    n, n == 1 ? "" : "s");
    return 1;
}

/* prog:params(kernel) --> { {kind=, size=, align=, offset=}, ... } */
static int l_program_params(lua_State *L) {
    const char *fn = "prog:params";
    gl_check_program(L, 1, fn);
    if (lua_type(L, 2) != LUA_TSTRING)
        gl_typeerror(L, 2, fn, "kernel name");
    const char *asked = lua_tostring(L, 2);
    lua_settop(L, 2);
    if (memchr(asked, '\0', lua_rawlen(L, 2)))
        gl_argerror(L, 2, fn, "kernel name contains a NUL byte");
    lua_pushliteral(L, "lowered");
    lua_rawget(L, 1); /* 3 */
    const char *entry = gl_lookup_lowered(L, 3, asked); /* a name expression such as "f<2>" */
    if (entry == NULL) entry = asked;
    lua_pushliteral(L, "ptx");
    if (lua_rawget(L, 1) != LUA_TSTRING) luaL_error(L, "%s: the program has no PTX", fn);
    size_t len;
    const char *ptx = lua_tolstring(L, -1, &len);
    char err[256];
    int n = gl_ptx_params(ptx, len, entry, NULL, 0, err, sizeof err);
    if (n < 0) {
        lua_pushliteral(L, "name");
        lua_rawget(L, 1);
        const char *where = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
        if (entry == asked && gl_is_name_expression(asked)) {
            gl_push_registered_names(L, 3);
            luaL_error(L, "%s: kernel '%s' not found in %s: '%s' is not a registered name "
                          "expression (registered: %s); add it to cuda.compile{names=...}",
                       fn, asked, where, asked, lua_tostring(L, -1));
        }
        luaL_error(L, "%s: kernel '%s' not found in %s: %s", fn, asked, where, err);
    }
    gl_param *params = gl_newuserdatauv(L, sizeof(gl_param) * (size_t)(n ? n : 1), 0);
    if (gl_ptx_params(ptx, len, entry, params, n, err, sizeof err) != n)
        luaL_error(L, "%s: kernel '%s': %s", fn, asked, err);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 4);
        lua_pushstring(L, params[i].kind);
        lua_setfield(L, -2, "kind");
        lua_pushinteger(L, params[i].size);
        lua_setfield(L, -2, "size");
        lua_pushinteger(L, params[i].align);
        lua_setfield(L, -2, "align");
        lua_pushinteger(L, params[i].offset);
        lua_setfield(L, -2, "offset");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

void gl_open_nvrtc(lua_State *L) {
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    gl_lua_setmetatable(L, -2);
    gl_private_set(L, PROGRAM_PRIVATE);
    static const luaL_Reg meta[] = {{"__tostring", l_program_tostring}, {NULL, NULL}};
    static const luaL_Reg methods[] = {{"params", l_program_params}, {NULL, NULL}};
    gl_new_class(L, PROGRAM_T, meta, methods, NULL);
    static const luaL_Reg funcs[] = {
        {"compile", l_compile}, {"compile_file", l_compile_file}, {"cache_key", l_cache_key}, {NULL, NULL}};
    lua_pushvalue(L, -1); /* the cuda table, as upvalue: cuda.home is read at call time */
    luaL_setfuncs(L, funcs, 1);
}
