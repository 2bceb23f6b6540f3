/*
 * main.c — the gpulab command line. It follows lua(1): options run in order, then the script
 * with its `arg` table, then the REPL when asked for (or when there is nothing else to do).
 */
#include <lauxlib.h>
#include <lua.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"

/* The options; after a bad option this is all that is printed (to stderr), as lua(1) does. */
static void usage(FILE *out) {
    fprintf(out,
            "usage: %s [options] [script [args...]]\n"
            "Available options are:\n"
            "  -e stat          execute string 'stat'\n"
            "  -i               enter interactive mode after running the script\n"
            "  -l mod           require library 'mod' into global 'mod'\n"
            "  -l g=mod         require library 'mod' into global 'g'\n"
            "  -v               show version information: gpulab and its commit, Lua, NVRTC and the\n"
            "                   CUDA driver (or why there is none)\n"
            "  --version        print gpulab's version and commit, then exit\n"
            "  -E               ignore environment variables (LUA_INIT, LUA_PATH, LUA_CPATH)\n"
            "  -W               turn warnings on\n"
            "  --sanitize=TOOL  re-run under compute-sanitizer (memcheck, racecheck, synccheck,\n"
            "                   initcheck); kernels are compiled with line info\n"
            "  --watch          re-run the script whenever it, a module it required or a kernel\n"
            "                   it compiled changes\n"
            "  --json FILE      write lab results to FILE (read by gpulab.lab)\n"
            "  --trace FILE     write a Chrome-trace/Perfetto timeline of launches, copies and\n"
            "                   syncs to FILE (as cuda.trace(FILE) does)\n"
            "  --gpus=all|0,2   spread a lab's sweeps (L:sweep) over these GPUs, one child each\n"
            "  --help, -h       show this help\n"
            "  --               stop handling options\n"
            "  -                stop handling options and execute stdin\n"
            "With no script, gpulab starts the REPL when stdin is a terminal and runs stdin "
            "otherwise.\n",
            gl_progname);
}

/* --help: the options, then what a lab script takes, the environment and where the API is. */
static void full_help(void) {
    usage(stdout);
    printf("\n"
           "Lab options, after a lab script (gpulab.lab reads them; a lab's --help also lists\n"
           "its own parameters):\n"
           "  --quick          a short run (a few seconds) with smaller sweeps\n"
           "  --json FILE      the results (tables, verdicts, records) as JSON\n"
           "  --svg PREFIX     pictures as PREFIX-<name>.svg (or into the folder PREFIX/)\n"
           "  --html FILE      one self-contained HTML report: claims, verdicts, evidence, pictures\n"
           "  --NAME=V         one of the lab's parameters (--NAME / --no-NAME for true/false)\n"
           "  --help, -h       the lab's title, claims and options\n"
           "\n"
           "Environment:\n"
           "  GPULAB_LIBCUDA        the CUDA driver library to open (default libcuda.so.1)\n"
           "  GPULAB_LIBNVRTC       the NVRTC library (default: the toolkit gpulab was built with)\n"
           "  GPULAB_HOME           folder of gpulab's own files (lua/, kernels/include/, docs/)\n"
           "  GPULAB_CACHE_DIR      compile cache folder (default $XDG_CACHE_HOME/gpulab, else\n"
           "                        ~/.cache/gpulab); GPULAB_CACHE=0 turns the cache off\n"
           "  GPULAB_LINEINFO=1     compile every kernel with line info\n"
           "  GPULAB_NO_WATCHDOG=1  no watchdog thread: cuda.sync{timeout=} cannot time out\n"
           "  GPULAB_NVDISASM       nvdisasm, for prog:sass() and cuda.pcsample's SASS\n"
           "  GPULAB_CUPTI          libcupti for cuda.profile and cuda.pcsample;\n"
           "                        GPULAB_CUPTI_PUSH_RANGE=0: profile without an outer range\n"
           "  GPULAB_LIBNVML        libnvidia-ml for cuda.measure's clock checks; GPULAB_NVML=0: none\n"
           "  GPULAB_LIBNCCL        libnccl for cuda.nccl\n"
           "  GPULAB_JSON           as --json;  GPULAB_GPUS: as --gpus\n"
           "  GPULAB_PROGRESS=0|1   a lab's progress lines on stderr (default: when it is a terminal)\n"
           "  GPULAB_RANK, GPULAB_NRANKS, GPULAB_LOCAL_RANK\n"
           "                        this process's rank for gpulab.ranks (Open MPI, Slurm and PMI\n"
           "                        variables are read too)\n"
           "  CUDA_HOME, CUDA_PATH  where the CUDA toolkit is (nvdisasm, CUPTI, compute-sanitizer)\n"
           "  XDG_STATE_HOME        the REPL's history: $XDG_STATE_HOME/gpulab/history, else\n"
           "                        ~/.local/state/gpulab/history\n"
           "  LUA_INIT, LUA_PATH, LUA_CPATH (and their _5_4 forms)  as in lua(1); -E ignores them\n"
           "\n"
           "The Lua API: in the REPL (no script, or -i) help() lists it and help(x) describes a\n"
           "function, an object or a name, e.g. help(cuda.compile), help(\"view\"); in a script,\n"
           "require(\"gpulab.help\").help(x). The whole reference is docs/API.md.\n");
    fflush(stdout);
}

#ifndef GPULAB_COMMIT
#define GPULAB_COMMIT "unknown" /* set by CMake from git at configure time */
#endif

/* gpulab --version: what was built, from which commit, on which Lua. */
static void print_release(void) {
    printf("gpulab %s (commit %s, %s)\n", GPULAB_VERSION, GPULAB_COMMIT, LUA_RELEASE);
    fflush(stdout);
}

typedef struct {
    bool interactive, version, components, has_e, watch, no_env;
    const char *sanitize, *json, *trace, *gpus;
    int script;       /* index of the script in argv, 0 if none */
    int first_action; /* index where -e/-l start being processed */
} cli;

/* --gpus=all | --gpus=0,2: read by gpulab.lab's L:sweep (registry "gpulab.gpus"). */
static bool gpus_spec_ok(const char *v) {
    if (strcmp(v, "all") == 0) return true;
    bool digit = false;
    for (const char *p = v; *p; p++) {
        if (*p >= '0' && *p <= '9') digit = true;
        else if (*p == ',' && digit) digit = false;
        else return false;
    }
    return digit;
}

/* Scans argv the way lua(1) does; returns false (after printing why) on a bad option. */
static bool parse_args(int argc, char **argv, cli *o) {
    memset(o, 0, sizeof *o);
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') break;
        if (strcmp(a, "--") == 0) { i++; break; }
        if (strcmp(a, "-") == 0) break;
        if (strcmp(a, "-i") == 0) { o->interactive = o->version = true; continue; }
        if (strcmp(a, "-v") == 0) { o->version = o->components = true; continue; }
        if (strcmp(a, "-E") == 0) { o->no_env = true; continue; }
        if (strcmp(a, "-W") == 0) continue; /* run in order with -e and -l */
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { full_help(); exit(EXIT_SUCCESS); }
        if (strcmp(a, "--version") == 0) { print_release(); exit(EXIT_SUCCESS); }
        if (strcmp(a, "--watch") == 0) { o->watch = true; continue; }
        if (strncmp(a, "--gpus=", 7) == 0) {
            if (!gpus_spec_ok(a + 7)) {
                fprintf(stderr, "%s: '--gpus' takes 'all' or a list of device ordinals like 0,2\n", gl_progname);
                return false;
            }
            o->gpus = a + 7;
            continue;
        }
        if (strncmp(a, "--sanitize=", 11) == 0) { o->sanitize = a + 11; continue; }
        if (strcmp(a, "--sanitize") == 0) { o->sanitize = "memcheck"; continue; }
        if (strcmp(a, "--trace") == 0 || strncmp(a, "--trace=", 8) == 0) {
            o->trace = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
            if (o->trace == NULL || *o->trace == '\0') {
                fprintf(stderr, "%s: '--trace' needs a file name\n", gl_progname);
                return false;
            }
            continue;
        }
        if (strcmp(a, "--json") == 0 || strncmp(a, "--json=", 7) == 0) {
            if (a[6] == '=') o->json = a + 7;
            else if (i + 1 < argc) o->json = argv[++i];
            if (o->json == NULL || *o->json == '\0') {
                fprintf(stderr, "%s: '--json' needs a file name\n", gl_progname);
                return false;
            }
            continue;
        }
        if (strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0 || strncmp(a, "-e", 2) == 0 ||
            strncmp(a, "-l", 2) == 0) {
            if (a[1] == 'e') o->has_e = true;
            if (a[2] == '\0') {
                if (i + 1 >= argc || argv[i + 1][0] == '-') {
                    fprintf(stderr, "%s: '%s' needs argument\n", gl_progname, a);
                    usage(stderr);
                    return false;
                }
                i++;
            }
            continue;
        }
        fprintf(stderr, "%s: unrecognized option '%s'\n", gl_progname, a);
        usage(stderr);
        return false;
    }
    o->script = i < argc ? i : 0;
    return true;
}

/* The `arg` table: script at 0, its arguments at 1.., interpreter and options at negatives. */
static void create_arg_table(lua_State *L, int argc, char **argv, int script) {
    /* no script: the interpreter's name is arg[0], as lua(1) does */
    lua_createtable(L, argc - script, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int run_chunk_status(lua_State *L, int status) {
    if (status == LUA_OK) status = gl_docall(L, 0, 0);
    return gl_report(L, status);
}

static int run_string(lua_State *L, const char *s) {
    return run_chunk_status(L, gl_loadbuffer_text(L, s, strlen(s), "=(command line)"));
}

static int run_require(lua_State *L, const char *spec) {
    const char *eq = strchr(spec, '=');
    const char *mod = eq ? eq + 1 : spec;
    lua_getglobal(L, "require");
    lua_pushstring(L, mod);
    int status = gl_docall(L, 1, 1);
    if (status == LUA_OK) {
        if (eq) lua_pushlstring(L, spec, (size_t)(eq - spec)); else lua_pushstring(L, mod);
        lua_insert(L, -2);
        lua_setglobal(L, lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    return gl_report(L, status);
}

static int run_actions(lua_State *L, char **argv, int until) {
    for (int i = 1; i < until; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-W") == 0) {
            lua_warning(L, "@on", 0);
            continue;
        }
        if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l')) {
            if (strcmp(a, "--json") == 0 || strcmp(a, "--trace") == 0) i++;
            continue;
        }
        if (strncmp(a, "--", 2) == 0) continue;
        const char *val = a[2] ? a + 2 : argv[++i];
        int st = a[1] == 'e' ? run_string(L, val) : run_require(L, val);
        if (st != LUA_OK) return st;
    }
    return LUA_OK;
}

/* The script's `...`: arg[1..#arg] as the `arg` table stands when the script starts (-e may
 * have changed it), as lua(1) does. */
static int push_script_args(lua_State *L) {
    if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
    lua_Integer n = luaL_len(L, -1);
    if (n < 0 || n > INT_MAX - 8) luaL_error(L, "too many arguments to script");
    luaL_checkstack(L, (int)n + 3, "too many arguments to script");
    for (lua_Integer i = 1; i <= n; i++) lua_rawgeti(L, -(int)i, i);
    lua_remove(L, -(int)n - 1);
    return (int)n;
}

static int run_script(lua_State *L, char **argv, int script) {
    const char *path = argv[script];
    if (strcmp(path, "-") == 0 && (script == 0 || strcmp(argv[script - 1], "--") != 0)) path = NULL;
    if (path) gl_watch_record(path);
    int status = gl_loadfile_text(L, path);
    if (status == LUA_OK) {
        int n = push_script_args(L);
        status = gl_docall(L, n, LUA_MULTRET);
    }
    return gl_report(L, status);
}

/* --trace FILE: the script's timeline, started before it runs (cuda.trace in bindings/trace.c). */
static int run_trace(lua_State *L, const char *path) {
    lua_getglobal(L, "cuda");
    lua_getfield(L, -1, "trace");
    lua_remove(L, -2);
    lua_pushstring(L, path);
    return gl_report(L, gl_docall(L, 1, 0));
}

static void print_version(void) {
    printf("%s\n", LUA_COPYRIGHT);
    printf("gpulab %s  (%s, NVRTC and the CUDA driver API)\n", GPULAB_VERSION, LUA_RELEASE);
    fflush(stdout);
}

/* -v's last line: the commit, NVRTC's version and the driver's (cuDriverGetVersion), or why there
 * is no driver. Asked of cuda.version() and cuda.available() before any user code runs; a failure
 * is printed in the line, never raised. */
static const char components_source[] =
    "local cuda = ...\n"
    "local v = cuda.version()\n"
    "local ok, why = cuda.available()\n"
    "local driver = v.driver and ('CUDA driver ' .. v.driver) or (why or 'no CUDA driver')\n"
    "if v.driver and not ok and why then driver = driver .. ' (' .. why .. ')' end\n"
    "return string.format('commit %s, NVRTC %s, %s', v.commit, v.nvrtc, driver)\n";

static void print_components(lua_State *L) {
    int top = lua_gettop(L);
    int st = luaL_loadbufferx(L, components_source, sizeof components_source - 1, "=-v", "t");
    if (st == LUA_OK) {
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_getfield(L, -1, "cuda");
        lua_remove(L, -2);
        st = lua_pcall(L, 1, 1, 0);
    }
    const char *line = lua_tostring(L, -1);
    if (st == LUA_OK) printf("%s\n", line ? line : "");
    else printf("NVRTC and driver versions unknown: %s\n", line ? line : "(error object is not a string)");
    fflush(stdout);
    lua_settop(L, top);
}

typedef struct {
    int argc;
    char **argv;
    cli *o;
    int exit_status;
} main_args;

static int pmain(lua_State *L) {
    main_args *m = lua_touserdata(L, 1);
    cli *o = m->o;
    luaL_checkversion(L);
    if (o->version) print_version();
    if (o->no_env) { /* read by the package library when it opens, as in lua(1) */
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    lua_gc(L, LUA_GCSTOP); /* no collections while the libraries open, as lua(1) */
    gl_setup_state(L, m->argv[0]);
    if (o->components) print_components(L);
    if (o->json) {
        lua_pushstring(L, o->json);
        lua_setfield(L, LUA_REGISTRYINDEX, "gpulab.json");
    }
    if (o->gpus) {
        lua_pushstring(L, o->gpus);
        lua_setfield(L, LUA_REGISTRYINDEX, "gpulab.gpus");
    }
    if (o->trace && run_trace(L, o->trace) != LUA_OK) return 0;
    create_arg_table(L, m->argc, m->argv, o->script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0); /* lua(1)'s default collector */
    if (!o->no_env && gl_run_lua_init(L) != LUA_OK) return 0;
    int until = o->script ? o->script : m->argc;
    if (run_actions(L, m->argv, until) != LUA_OK) return 0;
    if (o->script) {
        if (run_script(L, m->argv, o->script) != LUA_OK) return 0;
    }
    if (o->interactive) {
        m->exit_status = gl_repl(L, getenv("GPULAB_REPLAY"));
        lua_pushboolean(L, 1);
        return 1;
    }
    if (o->script == 0 && !o->has_e && !o->version) {
        if (isatty(STDIN_FILENO)) {
            print_version();
            m->exit_status = gl_repl(L, getenv("GPULAB_REPLAY"));
        } else if (run_script(L, (char *[]){"-", NULL}, 0) != LUA_OK) {
            return 0;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv) {
    if (argv[0] && argv[0][0]) gl_progname = argv[0];
    gl_argc = argc;
    gl_argv = argv;
    cli o;
    if (!parse_args(argc, argv, &o)) return EXIT_FAILURE;
    if (o.sanitize) return gl_sanitize_run(argc, argv, o.sanitize);
    if (o.watch) return gl_watch_run(argc, argv);

    lua_State *L = luaL_newstate();
    if (L == NULL) {
        fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", gl_progname);
        return EXIT_FAILURE;
    }
    main_args m = {argc, argv, &o, EXIT_SUCCESS};
    lua_pushcfunction(L, pmain);
    lua_pushlightuserdata(L, &m);
    int status = lua_pcall(L, 1, 1, 0);
    int ok = lua_toboolean(L, -1);
    gl_report(L, status);
    lua_close(L);
    if (status != LUA_OK || !ok) return EXIT_FAILURE;
    return m.exit_status;
}
