/*
 * watch.c — `gpulab --watch script.lua`: run the script in a fresh child process, collect the
 * files that run depended on, wait for one of them to change (inotify), run again.
 *
 * The child learns where to report its dependencies from GPULAB_DEPFILE and appends one
 * absolute path per line: the script (main.c), every module `require` found in a file and
 * every file loaded with loadfile/dofile (gl_watch_child_setup), and every kernel source or
 * header NVRTC read (reported by the compile binding to the observer gl_watch_child_setup sets).
 */
#define _GNU_SOURCE
#include "gpulab.h"
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- child side --------------------------------------------------------------------------- */

void gl_watch_record(const char *path) {
    const char *depfile = getenv("GPULAB_DEPFILE");
    if (depfile == NULL || *depfile == '\0' || path == NULL) return;
    char abs[PATH_MAX + 1];
    if (realpath(path, abs) == NULL) return; /* not a file (stdin, preload): nothing to watch */
    size_t n = strlen(abs);
    abs[n] = '\n';
    int fd = open(depfile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    /* one write per line: O_APPEND keeps lines whole even if several writers record */
    ssize_t w = write(fd, abs, n + 1);
    (void)w; /* a lost line only means one file fewer is watched */
    close(fd);
}

/* Wraps one package.searchers entry: calls it and records the file a loader came from
 * (searchers return the loader and, for files, the file name as the extra value). */
static int recording_searcher(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    if (lua_gettop(L) >= 2 && lua_isfunction(L, 1) && lua_type(L, 2) == LUA_TSTRING) {
        const char *extra = lua_tostring(L, 2);
        if (extra[0] != ':') gl_watch_record(extra); /* ":preload:" is not a file */
    }
    return lua_gettop(L);
}

static void record_compiled_file(const char *path, void *ctx) {
    (void)ctx;
    gl_watch_record(path);
}

void gl_watch_child_setup(lua_State *L) {
    gl_set_compile_observer(record_compiled_file, NULL); /* loadfile and dofile record their own */

    lua_getglobal(L, "package");
    if (lua_getfield(L, -1, "searchers") == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            lua_pushcclosure(L, recording_searcher, 1);
            lua_rawseti(L, -2, i);
        }
    }
    lua_pop(L, 2);
}

/* ---- parent side -------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* The script's index in argv, found the way main.c's option scan does; 0 if none. */
static int find_script(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return i + 1 < argc ? i + 1 : 0;
        if (a[0] != '-' || strcmp(a, "-") == 0) return i;
        bool takes_value = strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0 || strcmp(a, "--json") == 0 ||
                           strcmp(a, "--trace") == 0;
        if (takes_value) i++;
    }
    return 0;
}

typedef struct {
    char **paths; /* absolute paths of the files the last run depended on */
    int n, cap;
} dep_list;

static void deps_clear(dep_list *d) {
    for (int i = 0; i < d->n; i++) free(d->paths[i]);
    d->n = 0;
}

static void deps_add(dep_list *d, const char *path) {
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->paths[i], path) == 0) return;
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        char **p = realloc(d->paths, (size_t)cap * sizeof *p);
        if (p == NULL) return; /* out of memory: watch what we have */
        d->paths = p;
        d->cap = cap;
    }
    char *copy = strdup(path);
    if (copy) d->paths[d->n++] = copy;
}

static void deps_read(dep_list *d, const char *depfile) {
    FILE *f = fopen(depfile, "r");
    if (f == NULL) return;
    char line[PATH_MAX + 2];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '/') deps_add(d, line);
    }
    fclose(f);
}

/* Runs gpulab once in a child with GPULAB_DEPFILE set; returns its wait status. */
static int run_child(char **child_argv, const char *depfile) {
    int fd = open(depfile, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd >= 0) close(fd);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: --watch: fork: %s\n", gl_progname, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        setenv("GPULAB_DEPFILE", depfile, 1);
        execv("/proc/self/exe", child_argv);
        fprintf(stderr, "%s: --watch: cannot run /proc/self/exe: %s\n", gl_progname, strerror(errno));
        _exit(127);
    }
    int status = 0;
    bool forwarded = false;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
        /* Ctrl-C from a terminal reaches the child too; a lone SIGINT to us is passed on */
        if (stop_requested && !forwarded) kill(pid, SIGINT), forwarded = true;
    }
    return status;
}

static void report_status(int status) {
    if (status < 0) return;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        fprintf(stderr, "%s: --watch: the run failed (exit status %d); still watching\n", gl_progname,
                WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        fprintf(stderr, "%s: --watch: the run was killed by signal %d; still watching\n", gl_progname,
                WTERMSIG(status));
}

typedef struct {
    int fd;
    int *dir_wd; /* per dependency: the watch on its folder (editors replace files by rename) */
    int *file_wd;
} watcher;

static bool same_file_in_dir(const char *path, int dir_wd_of_path, int wd, const char *name) {
    if (dir_wd_of_path != wd || name == NULL) return false;
    const char *base = strrchr(path, '/');
    return base && strcmp(base + 1, name) == 0;
}

static bool watcher_open(watcher *w, const dep_list *d) {
    w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (w->fd < 0) return false;
    w->dir_wd = calloc((size_t)d->n + 1, sizeof(int));
    w->file_wd = calloc((size_t)d->n + 1, sizeof(int));
    if (!w->dir_wd || !w->file_wd) return false;
    for (int i = 0; i < d->n; i++) {
        w->file_wd[i] = inotify_add_watch(w->fd, d->paths[i],
                                          IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_MOVE_SELF |
                                              IN_DELETE_SELF);
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", d->paths[i]);
        char *slash = strrchr(dir, '/');
        if (slash == dir) slash[1] = '\0'; else if (slash) *slash = '\0';
        w->dir_wd[i] = inotify_add_watch(w->fd, dir, IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
    }
    return true;
}

static void watcher_close(watcher *w) {
    if (w->fd >= 0) close(w->fd);
    free(w->dir_wd);
    free(w->file_wd);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

/* Reads pending events; returns the first dependency that changed, or NULL. */
static const char *drain_events(watcher *w, const dep_list *d) {
    const char *changed = NULL;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t len;
    while ((len = read(w->fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            const char *name = ev->len ? ev->name : NULL;
            for (int i = 0; i < d->n && changed == NULL; i++)
                if (ev->wd == w->file_wd[i] || same_file_in_dir(d->paths[i], w->dir_wd[i], ev->wd, name))
                    changed = d->paths[i];
            p += sizeof *ev + ev->len;
        }
    }
    return changed;
}

/* Waits until a dependency changes and then stays quiet for 100 ms (editors write in several
 * steps). Returns the changed path, or NULL when the watch should end. */
static const char *wait_for_change(watcher *w, const dep_list *d) {
    const char *changed = NULL;
    while (!stop_requested) {
        struct pollfd p = {.fd = w->fd, .events = POLLIN};
        int r = poll(&p, 1, changed ? 100 : -1);
        if (r < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "%s: --watch: poll: %s\n", gl_progname, strerror(errno));
            return NULL;
        }
        if (r == 0) return changed; /* quiet for 100 ms after a change */
        const char *c = drain_events(w, d);
        if (changed == NULL) changed = c;
    }
    return NULL;
}

static void print_separator(const char *changed) {
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%H:%M:%S", localtime(&now));
    printf("\n======== %s  %s changed, running again ========\n", when, changed);
    fflush(stdout);
}

int gl_watch_run(int argc, char **argv) {
    int script = find_script(argc, argv);
    if (script == 0 || strcmp(argv[script], "-") == 0) {
        fprintf(stderr, "%s: --watch needs a script file to run\n", gl_progname);
        return EXIT_FAILURE;
    }
    char **child_argv = calloc((size_t)argc + 1, sizeof *child_argv);
    if (child_argv == NULL) return EXIT_FAILURE;
    int n = 0;
    for (int i = 0; i < argc; i++)
        if (i >= script || strcmp(argv[i], "--watch") != 0) child_argv[n++] = argv[i];

    const char *tmp = getenv("TMPDIR");
    char depfile[PATH_MAX];
    snprintf(depfile, sizeof depfile, "%s/gpulab-deps-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(depfile);
    if (fd < 0) {
        fprintf(stderr, "%s: --watch: cannot create %s: %s\n", gl_progname, depfile, strerror(errno));
        free(child_argv);
        return EXIT_FAILURE;
    }
    close(fd);

    struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: poll and waitpid wake up */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    dep_list deps = {0};
    int rc = EXIT_SUCCESS;
    while (!stop_requested) {
        report_status(run_child(child_argv, depfile));
        if (stop_requested) break;
        deps_clear(&deps);
        char abs[PATH_MAX];
        if (realpath(argv[script], abs)) deps_add(&deps, abs);
        deps_read(&deps, depfile);
        if (deps.n == 0) {
            fprintf(stderr, "%s: --watch: %s does not exist; nothing to watch\n", gl_progname, argv[script]);
            rc = EXIT_FAILURE;
            break;
        }
        watcher w = {.fd = -1};
        if (!watcher_open(&w, &deps)) {
            fprintf(stderr, "%s: --watch: inotify: %s\n", gl_progname, strerror(errno));
            watcher_close(&w);
            rc = EXIT_FAILURE;
            break;
        }
        fprintf(stderr, "%s: --watch: watching %d file%s; Ctrl-C to stop\n", gl_progname, deps.n,
                deps.n == 1 ? "" : "s");
        const char *changed = wait_for_change(&w, &deps);
        if (changed) print_separator(changed);
        watcher_close(&w);
        if (changed == NULL) break;
    }
    deps_clear(&deps);
    free(deps.paths);
    free(child_argv);
    unlink(depfile);
    return rc;
}
