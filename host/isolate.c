/*
 * isolate.c — cuda.run_isolated(script, {args=, timeout=, env=}): runs a script in a fresh
 * gpulab process and reports how it ended.
 *
 * Risky GPU work (a fault poisons the context for good, a hang never returns) belongs in a
 * child: the parent stays healthy, captures what the child printed and kills it at the deadline.
 * The child leads its own process group, so anything it started dies with it.
 */
#define _GNU_SOURCE
#include "errors.h"
#include "host.h"
#include "identity.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define FN "cuda.run_isolated"
/* After SIGTERM at the deadline the child gets this long to exit before SIGKILL. */
#define TERM_GRACE_S 1.0
/* After the child exited, output still held open by something it left behind is read this long. */
#define DRAIN_AFTER_EXIT_S 2.0
/* Captured output beyond this many bytes per stream is dropped (and said so). */
#define CAPTURE_LIMIT ((size_t)256 << 20)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the request: validated completely before anything is forked --------------------------- */

typedef struct {
    const char **argv;   /* exe, "--", script, args..., NULL */
    const char **envp;   /* the environment the child gets */
    double timeout;      /* seconds; <= 0: none */
    int argc, envc;
} request;

/* Pushes a string value from `t[key]`-like positions; only strings and numbers pass. */
static const char *plain_string(lua_State *L, int idx, size_t *len) {
    int t = lua_type(L, idx);
    if (t != LUA_TSTRING && t != LUA_TNUMBER) return NULL;
    return lua_tolstring(L, idx, len);
}

/* More arguments than a child is given: refused before anything runs (never a child run with
 * fewer arguments than asked for). */
#define MAX_CHILD_ARGS 100000

static void too_many_args(lua_State *L, lua_Integer n) {
    gl_fielderror(L, 2, FN, "args", "%lld entries; the limit is %d", (long long)n, MAX_CHILD_ARGS);
}

/* Reads opts.args into req->argv (strings kept alive by the opts table / the stack). */
static void read_args(lua_State *L, int opts, request *req, const char *script) {
    lua_getfield(L, opts, "args");
    int t = lua_gettop(L);
    lua_Integer n = 0;
    if (!lua_isnil(L, t)) {
        if (!lua_istable(L, t)) gl_fieldtypeerror(L, 2, FN, "args", t, "table of strings");
        n = (lua_Integer)lua_rawlen(L, t);
        if (n > MAX_CHILD_ARGS) too_many_args(L, n);
        /* a table with holes or extra keys is a mistake the child would hide */
        lua_pushnil(L);
        while (lua_next(L, t)) {
            lua_pop(L, 1);
            if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n)
                gl_fielderror(L, 2, FN, "args", "must be a list (1..n) of strings");
        }
    }
    req->argv = gl_newuserdatauv(L, sizeof(char *) * (size_t)(n + 4), 0);
    lua_setfield(L, opts, "anchor_argv"); /* anchored in the options copy for the call's duration */
    static char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) luaL_error(L, FN ": cannot find the gpulab binary (/proc/self/exe): %s", strerror(errno));
    exe[len] = '\0';
    req->argv[0] = exe;
    req->argv[1] = "--"; /* a script name starting with '-' is still a script */
    req->argv[2] = script;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        size_t l;
        const char *s = plain_string(L, -1, &l);
        if (s == NULL)
            gl_fielderror(L, 2, FN, "args",
                          "item %lld: string expected, got %s", (long long)i, gl_typename(L, -1));
        if (strlen(s) != l) gl_fielderror(L, 2, FN, "args", "entries cannot contain a zero byte");
        lua_rawseti(L, t, i); /* a number converted in place stays referenced by the table */
        lua_rawgeti(L, t, i);
        req->argv[3 + i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    req->argv[3 + n] = NULL;
    req->argc = (int)(3 + n);
    lua_pop(L, 1);
}

/* Builds the child's environment: ours, with opts.env's entries set (string/number) or removed
 * (false). The strings live in a Lua table anchored in the options copy. */
static void read_env(lua_State *L, int opts, request *req) {
    lua_getfield(L, opts, "env");
    int t = lua_gettop(L);
    size_t ours = 0;
    while (environ[ours]) ours++;
    size_t extra = 0;
    if (!lua_isnil(L, t)) {
        if (!lua_istable(L, t)) gl_fieldtypeerror(L, 2, FN, "env", t, "table {NAME=value}");
        lua_pushnil(L);
        while (lua_next(L, t)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                gl_fielderror(L, 2, FN, "env", "keys must be variable names, got a %s", gl_typename(L, -2));
            size_t kl;
            const char *k = lua_tolstring(L, -2, &kl);
            if (kl == 0 || strlen(k) != kl || strchr(k, '=')) gl_fielderror(L, 2, FN, "env",
                                                                            "bad variable name '%s'", k);
            int vt = lua_type(L, -1);
            if (!(vt == LUA_TSTRING || vt == LUA_TNUMBER || (vt == LUA_TBOOLEAN && !lua_toboolean(L, -1))))
                gl_fielderror(L, 2, FN, "env",
                              "%s: string, number or false expected, got %s", k, gl_typename(L, -1));
            if (vt == LUA_TSTRING) {
                size_t vl;
                const char *v = lua_tolstring(L, -1, &vl);
                if (strlen(v) != vl) gl_fielderror(L, 2, FN, "env", "%s cannot contain a zero byte", k);
            }
            extra++;
            lua_pop(L, 1);
        }
    }
    req->envp = gl_newuserdatauv(L, sizeof(char *) * (ours + extra + 1), 0);
    lua_setfield(L, opts, "anchor_envp");
    lua_newtable(L); /* the "K=V" strings */
    int keep = lua_gettop(L);
    lua_pushvalue(L, keep);
    lua_setfield(L, opts, "anchor_envs");
    int n = 0;
    for (size_t i = 0; i < ours; i++) {
        const char *eq = strchr(environ[i], '=');
        bool overridden = false;
        if (eq && !lua_isnil(L, t)) {
            lua_pushlstring(L, environ[i], (size_t)(eq - environ[i]));
            overridden = lua_rawget(L, t) != LUA_TNIL;
            lua_pop(L, 1);
        }
        if (!overridden) req->envp[n++] = environ[i];
    }
    if (!lua_isnil(L, t)) {
        lua_pushnil(L);
        while (lua_next(L, t)) {
            if (lua_type(L, -1) != LUA_TBOOLEAN) {
                lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
                req->envp[n++] = lua_tostring(L, -1);
                lua_rawseti(L, keep, n);
            }
            lua_pop(L, 1);
        }
    }
    req->envp[n] = NULL;
    req->envc = n;
    lua_pop(L, 2);
}

/* What execve would refuse with E2BIG is refused here, with the reason, so the caller never gets
 * a child that did not run. Linux limits one string to 32 pages and the whole to ARG_MAX. */
#define MAX_ONE_ARG (32 * 4096)

static void check_exec_size(lua_State *L, const request *req) {
    size_t total = 0;
    for (const char **v = req->argv; *v; v++) {
        size_t n = strlen(*v) + 1;
        if (n > (size_t)MAX_ONE_ARG)
            gl_fielderror(L, 2, FN, "args", "an argument of %d bytes is longer than the system allows, %d",
                          (int)n - 1, MAX_ONE_ARG - 1);
        total += n + sizeof(char *);
    }
    for (const char **v = req->envp; *v; v++) total += strlen(*v) + 1 + sizeof(char *);
    long limit = sysconf(_SC_ARG_MAX);
    if (limit > 0 && total > (size_t)limit)
        gl_argerror(L, 2, FN, "the arguments and the environment take %d bytes; the system allows %d",
                    (int)(total > INT_MAX ? INT_MAX : total), (int)(limit > INT_MAX ? INT_MAX : limit));
}

static const char *const known_opts[] = {"args", "timeout", "env", NULL};

/* Copies the options into a private table (index returned) so anchors never touch the caller's. */
static int read_request(lua_State *L, request *req) {
    size_t slen;
    if (lua_type(L, 1) != LUA_TSTRING) gl_typeerror(L, 1, FN, "script path");
    const char *script = lua_tolstring(L, 1, &slen);
    if (slen == 0) gl_argerror(L, 1, FN, "script path is empty");
    if (strlen(script) != slen) gl_argerror(L, 1, FN, "script path contains a zero byte");
    int top = lua_gettop(L);
    if (top >= 2 && !lua_isnil(L, 2) && !lua_istable(L, 2))
        gl_typeerror(L, 2, FN, "table");
    lua_newtable(L);
    int opts = lua_gettop(L);
    if (top >= 2 && lua_istable(L, 2)) {
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            bool known = false;
            if (lua_type(L, -2) == LUA_TSTRING)
                for (int i = 0; known_opts[i]; i++) known |= strcmp(lua_tostring(L, -2), known_opts[i]) == 0;
            if (!known) {
                if (lua_type(L, -2) == LUA_TSTRING)
                    gl_argerror(L, 2, FN, "unknown field '%s' (known: args, timeout, env)",
                                lua_tostring(L, -2));
                gl_argerror(L, 2, FN, "unexpected %s key in the options table (known: args, timeout, env)",
                            gl_typename(L, -2));
            }
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, opts);
        }
        /* args are converted in place: work on a copy of the caller's list */
        if (lua_getfield(L, opts, "args") == LUA_TTABLE) {
            lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
            if (n > MAX_CHILD_ARGS) too_many_args(L, n);
            lua_newtable(L);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_rawgeti(L, -2, i);
                lua_rawseti(L, -2, i);
            }
            lua_pushnil(L);
            while (lua_next(L, -3)) { /* keys outside 1..n, so read_args can refuse them */
                if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 || lua_tointeger(L, -2) > n) {
                    lua_pushvalue(L, -2);
                    lua_insert(L, -2);
                    lua_rawset(L, -4);
                } else {
                    lua_pop(L, 1);
                }
            }
            lua_setfield(L, opts, "args");
        }
        lua_pop(L, 1);
    }
    req->timeout = 0;
    lua_getfield(L, opts, "timeout");
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER) gl_fieldtypeerror(L, 2, FN, "timeout", -1, "number of seconds");
        double t = lua_tonumber(L, -1);
        if (!(t > 0) || isnan(t)) gl_fielderror(L, 2, FN, "timeout", "must be a positive number of seconds");
        req->timeout = isinf(t) ? 0 : t;
    }
    lua_pop(L, 1);
    read_args(L, opts, req, script);
    read_env(L, opts, req);
    check_exec_size(L, req);
    return opts;
}

/* ---- running ------------------------------------------------------------------------------ */

typedef struct {
    int fd;          /* -1 once at end of file */
    char *data;
    size_t len, cap;
    bool truncated;
} capture;

static void capture_read(capture *c) {
    char buf[65536];
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        close(c->fd);
        c->fd = -1;
        return;
    }
    if (c->len + (size_t)n > CAPTURE_LIMIT) {
        c->truncated = true;
        return;
    }
    if (c->len + (size_t)n > c->cap) {
        size_t cap = c->cap ? c->cap : 65536;
        while (cap < c->len + (size_t)n) cap *= 2;
        char *p = realloc(c->data, cap);
        if (p == NULL) { /* keep reading so the child never blocks; what did not fit is dropped */
            c->truncated = true;
            return;
        }
        c->data = p;
        c->cap = cap;
    }
    memcpy(c->data + c->len, buf, (size_t)n);
    c->len += (size_t)n;
}

/* The captured output belongs to a userdata while it is turned into Lua strings, so a memory
 * error raised on the way still frees it (through __gc). */
#define CAPTURE_CLASS "gpulab.isolate.capture"

static int capture_gc(lua_State *L) {
    capture *io = gl_testudata(L, 1, CAPTURE_CLASS);
    if (io == NULL) return 0;
    for (int i = 0; i < 2; i++) {
        free(io[i].data);
        io[i].data = NULL;
        io[i].len = io[i].cap = 0;
    }
    return 0;
}

static capture *new_capture_pair(lua_State *L) {
    capture *io = gl_newuserdatauv(L, 2 * sizeof(capture), 0);
    memset(io, 0, 2 * sizeof(capture));
    io[0].fd = io[1].fd = -1;
    if (gl_private_get(L, CAPTURE_CLASS) != LUA_TTABLE) { /* never registry[name]: scripts set it */
        lua_pop(L, 1);
        lua_createtable(L, 0, 2);
        lua_pushliteral(L, CAPTURE_CLASS);
        lua_setfield(L, -2, "__name");
        lua_pushcfunction(L, capture_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushvalue(L, -1);
        gl_private_set(L, CAPTURE_CLASS);
    }
    gl_lua_setmetatable(L, -2);
    return io;
}

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) { (void)sig; interrupted = 1; }

/* Child side of the fork: only async-signal-safe calls until exec. */
static void exec_child(const request *req, int out_w, int err_w) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out_w, STDOUT_FILENO);
    dup2(err_w, STDERR_FILENO);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL); /* fails harmlessly for KILL/STOP */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(req->argv[0], (char *const *)req->argv, (char *const *)req->envp);
    static const char msg[] = "cuda.run_isolated: cannot execute the gpulab binary\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
}

typedef struct {
    int wait_status;
    bool reaped, signalled_by_us, interrupted;
    double seconds;
} outcome;

/* One running child: its request, the two captured pipes and how it ended. */
typedef struct {
    pid_t pid;
    const request *req;
    capture *io;
    outcome o;
    double start, deadline, kill_at, drain_until;
    bool killed;
} child;

/* One step of a child's state machine: reap, signal at the deadline, kill after the grace.
 * True once it is reaped and its pipes are drained (or the drain time passed). */
static bool child_step(child *c, double t) {
    outcome *o = &c->o;
    pid_t w = o->reaped ? 0 : waitpid(c->pid, &o->wait_status, WNOHANG);
    if (w < 0 && errno != EINTR) o->wait_status = 255 << 8; /* not ours to wait for: report exit 255 */
    if (w == c->pid || (w < 0 && errno != EINTR)) {
        o->reaped = true;
        o->seconds = t - c->start;
        c->drain_until = t + DRAIN_AFTER_EXIT_S;
    }
    if (o->reaped && ((c->io[0].fd < 0 && c->io[1].fd < 0) || t >= c->drain_until)) return true;
    /* reaped: it ended on its own, and a process it left behind holding the pipes is no timeout */
    if (!o->reaped && !o->signalled_by_us && (t >= c->deadline || interrupted)) {
        kill(-c->pid, SIGTERM);
        o->signalled_by_us = true;
        o->interrupted = interrupted;
        c->kill_at = t + TERM_GRACE_S;
    }
    if (!c->killed && t >= c->kill_at) {
        kill(-c->pid, SIGKILL);
        c->killed = true;
    }
    return false;
}

/* Waits for every child, reading all pipes, enforcing each deadline. Never raises. */
static void supervise_all(child *cs, int n) {
    double start = now_s();
    for (int i = 0; i < n; i++) {
        cs[i].start = start;
        cs[i].deadline = cs[i].req->timeout > 0 ? start + cs[i].req->timeout : INFINITY;
        cs[i].kill_at = cs[i].drain_until = INFINITY;
    }
    struct pollfd *p = calloc((size_t)n * 2, sizeof *p);
    int *owner = calloc((size_t)n * 2, sizeof *owner); /* pollfd j reads pipe owner[j] % 2 of child owner[j] / 2 */
    for (;;) {
        double t = now_s();
        bool all = true;
        for (int i = 0; i < n; i++) {
            if (cs[i].o.reaped && ((cs[i].io[0].fd < 0 && cs[i].io[1].fd < 0) || t >= cs[i].drain_until)) continue;
            if (!child_step(&cs[i], t)) all = false;
        }
        if (all) break;
        int np = 0;
        for (int i = 0; p && owner && i < n; i++)
            for (int k = 0; k < 2; k++)
                if (cs[i].io[k].fd >= 0) {
                    owner[np] = 2 * i + k;
                    p[np++] = (struct pollfd){.fd = cs[i].io[k].fd, .events = POLLIN};
                }
        /* wake at least every 20 ms to notice the exit of a child whose pipes are held elsewhere */
        int r = p && owner ? poll(p, (nfds_t)np, 20) : (usleep(20000), 0);
        if (r <= 0) continue;
        for (int j = 0; j < np; j++)
            if (p[j].revents) capture_read(&cs[owner[j] / 2].io[owner[j] % 2]);
    }
    free(p);
    free(owner);
    for (int i = 0; i < n; i++) { /* whatever a child left running (it led its own group) goes too */
        kill(-cs[i].pid, SIGKILL);
        for (int k = 0; k < 2; k++)
            if (cs[i].io[k].fd >= 0) close(cs[i].io[k].fd), cs[i].io[k].fd = -1;
    }
}

static void push_capture(lua_State *L, capture *c, const char *field) {
    if (c->truncated) {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        luaL_addlstring(&b, c->data ? c->data : "", c->len);
        luaL_addstring(&b, "\n[cuda.run_isolated: output beyond this point was dropped]\n");
        luaL_pushresult(&b);
    } else {
        lua_pushlstring(L, c->data ? c->data : "", c->len);
    }
    lua_setfield(L, -2, field);
}

/* Runs n prepared requests at once (cs[i].req, set by the caller; the capture pairs are at stack
 * indices io[0..n-1]); a failing pipe or fork kills and reaps the children already started, then
 * raises. */
static void run_children(lua_State *L, int n, const int *io_idx, child *cs) {
    struct sigaction sa = {.sa_handler = on_interrupt}, old_int;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    for (int i = 0; i < n; i++) {
        const request *req = cs[i].req;
        memset(&cs[i], 0, sizeof cs[i]);
        cs[i].req = req;
        cs[i].io = lua_touserdata(L, io_idx[i]);
        int out[2] = {-1, -1}, err[2] = {-1, -1};
        const char *step = "pipe";
        pid_t pid = -1;
        if (pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0) {
            fflush(stdout);
            fflush(stderr);
            step = "fork";
            pid = fork();
            if (pid == 0) exec_child(req, out[1], err[1]);
        }
        int e = errno;
        for (int k = 0; k < 2; k++) { /* the write ends are the child's; all four go on failure */
            if (out[k] >= 0 && (k == 1 || pid < 0)) close(out[k]);
            if (err[k] >= 0 && (k == 1 || pid < 0)) close(err[k]);
        }
        if (pid < 0) {
            for (int j = 0; j < i; j++) {
                kill(-cs[j].pid, SIGKILL);
                waitpid(cs[j].pid, NULL, 0);
                for (int k = 0; k < 2; k++) close(cs[j].io[k].fd), cs[j].io[k].fd = -1;
            }
            sigaction(SIGINT, &old_int, NULL);
            luaL_error(L, FN ": %s: %s", step, strerror(e));
        }
        setpgid(pid, pid); /* also here: the deadline may come before the child ran setpgid */
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(err[0], F_SETFL, O_NONBLOCK);
        cs[i].io[0].fd = out[0];
        cs[i].io[1].fd = err[0];
        cs[i].pid = pid;
    }
    supervise_all(cs, n);
    sigaction(SIGINT, &old_int, NULL);
}

/* Pushes {status=, code= | signal=, seconds=, stdout=, stderr=} and frees the captured text. */
static void push_result(lua_State *L, const outcome *o, capture *io, int io_idx) {
    lua_createtable(L, 0, 6);
    int ws = o->wait_status;
    const char *status;
    if (o->signalled_by_us) status = "timeout";
    else if (WIFSIGNALED(ws)) status = "crashed";
    else status = WEXITSTATUS(ws) == 0 ? "ok" : "error";
    lua_pushstring(L, status);
    lua_setfield(L, -2, "status");
    if (WIFEXITED(ws)) {
        lua_pushinteger(L, WEXITSTATUS(ws));
        lua_setfield(L, -2, "code");
    } else if (WIFSIGNALED(ws)) {
        lua_pushinteger(L, WTERMSIG(ws));
        lua_setfield(L, -2, "signal");
    }
    lua_pushnumber(L, o->seconds);
    lua_setfield(L, -2, "seconds");
    /* pushing can raise on memory: the buffers are freed by the userdata's __gc then */
    push_capture(L, &io[0], "stdout");
    push_capture(L, &io[1], "stderr");
    lua_pushcfunction(L, capture_gc); /* free the buffers now rather than at the next cycle */
    lua_pushvalue(L, io_idx);
    lua_call(L, 1, 0);
}

/* cuda.run_isolated(script, opts): one child. */
static int run_one(lua_State *L) {
    request req;
    memset(&req, 0, sizeof req);
    read_request(L, &req);
    new_capture_pair(L); /* before any descriptor exists: it may raise */
    int io_idx = lua_gettop(L);
    child c = {.req = &req};
    run_children(L, 1, &io_idx, &c);
    if (c.o.interrupted) return luaL_error(L, FN ": interrupted; the child process was stopped");
    push_result(L, &c.o, c.io, io_idx);
    return 1;
}

/* Reads one entry {script, opts} of the list form in a frame of its own (read_request works on
 * stack slots 1 and 2): returns the options copy, which anchors everything the request points
 * at, with the request itself stored in it. */
#define MAX_PARALLEL 256
static int prepare_entry(lua_State *L) {
    lua_settop(L, 2);
    request r;
    memset(&r, 0, sizeof r);
    int opts = read_request(L, &r);
    request *keep = gl_newuserdatauv(L, sizeof *keep, 0);
    *keep = r;
    lua_setfield(L, opts, "anchor_request");
    lua_pushvalue(L, opts);
    return 1;
}

/* cuda.run_isolated({ {script, opts}, ... }): every child at once, each with its own deadline;
 * returns the list of results in the same order. */
static int run_many(lua_State *L) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    if (n < 1 || n > MAX_PARALLEL)
        return luaL_error(L, "bad argument #1 to '" FN "' (a list of 1..%d {script, opts} entries expected, got %I)",
                          MAX_PARALLEL, (LUAI_UACINT)n);
    if (!lua_isnoneornil(L, 2)) return luaL_error(L, "bad argument #2 to '" FN "' (the list form takes the options in each entry)");
    /* each entry keeps two slots (its options copy, its capture pair), besides a few for the
     * results: 256 entries are far beyond the 20 slots Lua guarantees a C function */
    luaL_checkstack(L, 2 * (int)n + 8, FN ": too many entries for the Lua stack");
    int *io_idx = gl_newuserdatauv(L, sizeof *io_idx * (size_t)n, 0);
    child *cs = gl_newuserdatauv(L, sizeof *cs * (size_t)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        if (!lua_istable(L, -1))
            return luaL_error(L, "bad argument #1 to '" FN "' (entry %I must be {script, opts}, got %s)", (LUAI_UACINT)i,
                              luaL_typename(L, -1));
        int entry = lua_gettop(L);
        lua_pushcfunction(L, prepare_entry);
        lua_rawgeti(L, entry, 1);
        lua_rawgeti(L, entry, 2);
        if (lua_pcall(L, 2, 1, 0) != LUA_OK) /* say which entry the message is about */
            return luaL_error(L, FN ": entry %I: %s", (LUAI_UACINT)i, luaL_tolstring(L, -1, NULL));
        lua_getfield(L, -1, "anchor_request");
        cs[i - 1].req = lua_touserdata(L, -1);
        lua_pop(L, 1);
        lua_replace(L, entry); /* the options copy stays on the stack as the anchor */
    }
    for (lua_Integer i = 0; i < n; i++) {
        new_capture_pair(L);
        io_idx[i] = lua_gettop(L);
    }
    run_children(L, (int)n, io_idx, cs);
    for (lua_Integer i = 0; i < n; i++)
        if (cs[i].o.interrupted) return luaL_error(L, FN ": interrupted; the child processes were stopped");
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        push_result(L, &cs[i].o, cs[i].io, io_idx[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_run_isolated(lua_State *L) {
    if (lua_istable(L, 1)) return run_many(L);
    return run_one(L);
}

void gl_open_isolate(lua_State *L) {
    lua_pushcfunction(L, l_run_isolated);
    lua_setfield(L, -2, "run_isolated");
}
