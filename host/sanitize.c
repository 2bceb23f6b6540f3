/*
 * sanitize.c — `gpulab --sanitize=TOOL script.lua ...`: runs the same command line again
 * under NVIDIA's compute-sanitizer, with kernels compiled with line info so its reports name
 * source lines, and exits non-zero when the tool reported anything.
 */
#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The exit status compute-sanitizer gives when its tool reported an error. */
#define SANITIZER_ERROR_EXIT "99"

static const char *const tools[] = {"memcheck", "racecheck", "synccheck", "initcheck", NULL};

static bool known_tool(const char *tool) {
    for (int i = 0; tools[i]; i++)
        if (strcmp(tool, tools[i]) == 0) return true;
    return false;
}

static bool is_executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Looks for compute-sanitizer in `dir`; fills out and returns true when it is there. */
static bool try_dir(const char *dir, size_t len, char *out, size_t outlen) {
    if (len == 0) return false; /* an empty PATH entry means ".", which we do not search */
    int n = snprintf(out, outlen, "%.*s/compute-sanitizer", (int)len, dir);
    return n > 0 && (size_t)n < outlen && is_executable_file(out);
}

/* PATH first, then the toolkit's usual place, then $CUDA_HOME/bin. */
static bool find_sanitizer(char *out, size_t outlen) {
    const char *path = getenv("PATH");
    for (const char *p = path; p && *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (try_dir(p, len, out, outlen)) return true;
        if (!end) break;
        p = end + 1;
    }
    const char *fixed = "/usr/local/cuda/bin";
    if (try_dir(fixed, strlen(fixed), out, outlen)) return true;
    const char *home = getenv("CUDA_HOME");
    if (home && *home) {
        char dir[PATH_MAX];
        int n = snprintf(dir, sizeof dir, "%s/bin", home);
        if (n > 0 && (size_t)n < sizeof dir && try_dir(dir, (size_t)n, out, outlen)) return true;
    }
    return false;
}

/* Index of the script in argv (0 if none), scanning options the way main.c does, so a
 * `--sanitize` given to the script itself is left alone. */
static int find_script(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return i + 1 < argc ? i + 1 : 0;
        if (a[0] != '-' || strcmp(a, "-") == 0) return i;
        if (strcmp(a, "-e") == 0 || strcmp(a, "-l") == 0 || strcmp(a, "--json") == 0 || strcmp(a, "--trace") == 0) i++;
    }
    return 0;
}

static bool is_sanitize_option(const char *a) {
    return strcmp(a, "--sanitize") == 0 || strncmp(a, "--sanitize=", 11) == 0;
}

/* Tool-specific options: full race reports (the hazards with their threads, not only a count). */
static int add_tool_options(const char **v, int n, const char *tool) {
    if (strcmp(tool, "racecheck") == 0) {
        v[n++] = "--racecheck-report";
        v[n++] = "all";
    }
    return n;
}

int gl_sanitize_run(int argc, char **argv, const char *tool) {
    if (!known_tool(tool)) {
        fprintf(stderr, "%s: --sanitize: unknown tool '%s' (known: memcheck, racecheck, synccheck, initcheck)\n",
                gl_progname, tool);
        return EXIT_FAILURE;
    }
    char sanitizer[PATH_MAX];
    if (!find_sanitizer(sanitizer, sizeof sanitizer)) {
        fprintf(stderr,
                "%s: compute-sanitizer not found: searched PATH, /usr/local/cuda/bin and $CUDA_HOME/bin "
                "(install the CUDA toolkit's compute-sanitizer or put it on PATH)\n",
                gl_progname);
        return EXIT_FAILURE;
    }
    /* compute-sanitizer starts the program itself: give it our real path, not /proc/self/exe
     * (which would name the sanitizer once it runs) */
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "%s: --sanitize: cannot find the gpulab binary: %s\n", gl_progname, strerror(errno));
        return EXIT_FAILURE;
    }
    self[len] = '\0';

    const char **v = calloc((size_t)argc + 16, sizeof *v);
    if (v == NULL) return EXIT_FAILURE;
    int n = 0;
    v[n++] = sanitizer;
    v[n++] = "--tool";
    v[n++] = tool;
    v[n++] = "--error-exitcode";
    v[n++] = SANITIZER_ERROR_EXIT;
    v[n++] = "--show-backtrace";     /* the host stack is the Lua interpreter's: noise */
    v[n++] = "device";
    v[n++] = "--target-processes";   /* children started by cuda.run_isolated are checked too */
    v[n++] = "all";
    n = add_tool_options(v, n, tool);
    v[n++] = self;                   /* an absolute path: never taken for a sanitizer option */
    int script = find_script(argc, argv);
    for (int i = 1; i < argc; i++)
        if ((script != 0 && i >= script) || !is_sanitize_option(argv[i])) v[n++] = argv[i];
    v[n] = NULL;

    /* kernels compiled under the tool carry line info; the compile cache keys on it */
    setenv("GPULAB_LINEINFO", "1", 1);
    setenv("GPULAB_SANITIZER", tool, 1); /* scripts can tell they run instrumented */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: --sanitize: fork: %s\n", gl_progname, strerror(errno));
        free(v);
        return EXIT_FAILURE;
    }
    if (pid == 0) {
        execv(sanitizer, (char *const *)v);
        fprintf(stderr, "%s: --sanitize: cannot run %s: %s\n", gl_progname, sanitizer, strerror(errno));
        _exit(127);
    }
    free(v);
    /* Ctrl-C reaches the tool and the program through the terminal; we only wait, as system() does */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    if (w < 0) {
        fprintf(stderr, "%s: --sanitize: waitpid: %s\n", gl_progname, strerror(errno));
        return EXIT_FAILURE;
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "%s: --sanitize=%s: compute-sanitizer was killed by signal %d\n", gl_progname, tool,
                WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    int code = WEXITSTATUS(status);
    if (code == atoi(SANITIZER_ERROR_EXIT))
        fprintf(stderr, "%s: --sanitize=%s: compute-sanitizer reported errors\n", gl_progname, tool);
    return code;
}
