/*
 * host.h — the program around the Lua state: state setup, running chunks with tracebacks,
 * the REPL, and the options that re-run gpulab (sanitizer, watch).
 */
#ifndef GPULAB_HOST_H
#define GPULAB_HOST_H

#include <lua.h>
#include <stdbool.h>

/* state.c ---------------------------------------------------------------------------------- */
/* Opens the standard libraries, preloads `cuda` (also as a global) and puts gpulab's lua/
 * folder on package.path. argv0 locates the installed or build-tree data folder. */
void gl_setup_state(lua_State *L, const char *argv0);
/* The folder holding gpulab's lua/, kernels/ and labs/ (source tree or installed share dir). */
const char *gl_data_dir(void);
/* Message handler that appends a traceback (lua.c's convention, in our words). */
int gl_msghandler(lua_State *L);
/* Calls the function below `narg` arguments with gl_msghandler and SIGINT handling.
 * Returns the lua_pcall status. */
int gl_docall(lua_State *L, int narg, int nres);
/* Prints the error message on top of the stack (if status != OK) to stderr, prefixed by the
 * program name; pops it. Returns status. */
int gl_report(lua_State *L, int status);
/* Loads a chunk as text only: binary chunks are refused with a clear message. */
int gl_loadfile_text(lua_State *L, const char *path);   /* NULL: stdin */
int gl_loadbuffer_text(lua_State *L, const char *s, size_t len, const char *chunkname);
extern const char *gl_progname;
/* The command line gpulab was started with (set by main); :restart re-executes it. */
extern int gl_argc;
extern char **gl_argv;

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
 * dofile load. */
void gl_watch_child_setup(lua_State *L);
/* Appends the absolute path of `path` to GPULAB_DEPFILE when set; does nothing otherwise. */
void gl_watch_record(const char *path);

#endif
