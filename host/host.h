/*
 * host.h — the program around the Lua state: state setup, running chunks with tracebacks,
 * the REPL, and the options that re-run gpulab (sanitizer, watch).
 */
#ifndef GPULAB_HOST_H
#define GPULAB_HOST_H

#include <lua.h>
#include <stdbool.h>

/* state.c ---------------------------------------------------------------------------------- */
/* Opens the standard libraries, preloads `cuda` (also as a global) and adds a last searcher
 * for gpulab's own lua/ modules, leaving package.path as lua(1) sets it. argv0 locates the
 * installed or build-tree data folder. */
void gl_setup_state(lua_State *L, const char *argv0);
/* Calls the function below `narg` arguments with a message handler that appends a traceback
 * (lua.c's convention, in our words) and SIGINT handling.
 * Returns the lua_pcall status. */
int gl_docall(lua_State *L, int narg, int nres);
/* The same without the traceback (the error value as raised). */
int gl_pcall_interruptible(lua_State *L, int narg, int nres);
/* Registry field: a table of the library functions (print, tostring, string.format as format,
 * ...) saved before any user code ran. */
#define GL_PRISTINE_KEY "gpulab.pristine"
/* Prints the error message on top of the stack (if status != OK) to stderr, prefixed by the
 * program name unless gl_report_progname is false (lua(1)'s REPL has no prefix); pops it.
 * Returns status. */
int gl_report(lua_State *L, int status);
extern bool gl_report_progname;
/* Load chunks as Lua's luaL_loadfile/luaL_loadbufferx do, but text only: a precompiled chunk is
 * refused with a clear message. */
int gl_loadfile_text(lua_State *L, const char *path);
/* lua(1)'s LUA_INIT_5_4 / LUA_INIT: code, or @file; runs it and reports an error. */
int gl_run_lua_init(lua_State *L);
int gl_loadbuffer_text(lua_State *L, const char *s, size_t len, const char *chunkname);
extern const char *gl_progname;
/* The command line gpulab was started with (set by main); :restart re-executes it. */
extern int gl_argc;
extern char **gl_argv;

/* isolate.c -------------------------------------------------------------------------------- */
/* Adds run_isolated to the `cuda` table on top of the stack (gl_setup_state does, right after
 * luaopen_cuda: running a child gpulab is the host's business, not the bindings'). */
void gl_open_isolate(lua_State *L);

/* repl.c ----------------------------------------------------------------------------------- */
/* Runs the interactive loop until end of input. Returns the process exit status.
 * replay: a file of inputs to run silently first (set by :restart), or NULL. */
int gl_repl(lua_State *L, const char *replay);

/* sanitize.c ------------------------------------------------------------------------------- */
/* Re-runs this gpulab under `compute-sanitizer --tool TOOL`; returns the exit status. */
int gl_sanitize_run(int argc, char **argv, const char *tool);

/* watch.c ---------------------------------------------------------------------------------- */
/* Runs the script in a child process, then again whenever a watched file changes. */
int gl_watch_run(int argc, char **argv);
/* In a child run by --watch (GPULAB_DEPFILE set): records every file `require`, loadfile and
 * dofile load, and every file a compile reads (through gl_set_compile_observer). */
void gl_watch_child_setup(lua_State *L);
/* Appends the absolute path of `path` to GPULAB_DEPFILE when set; does nothing otherwise. */
void gl_watch_record(const char *path);

#endif
