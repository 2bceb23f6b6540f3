/*
 * isolate.c — cuda.run_isolated(script, {args=, timeout=, env=}): runs a script in a fresh
 * gpulab process and reports how it ended.
 *
 * Risky GPU work (a fault poisons the context for good, a hang never returns) belongs in a
 * child: the parent stays healthy, captures what the child printed and kills it at the deadline.
 * The child leads its own process group, so anything it started dies with it.
 */
#define _GNU_SOURCE
#include "gpulab.h"
#include "host.h"

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
    req->argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 4), 0);
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
    req->envp = lua_newuserdatauv(L, sizeof(char *) * (ours + extra + 1), 0);
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
    capture *io = luaL_testudata(L, 1, CAPTURE_CLASS);
    if (io == NULL) return 0;
    for (int i = 0; i < 2; i++) {
        free(io[i].data);
        io[i].data = NULL;
        io[i].len = io[i].cap = 0;
    }
    return 0;
}

static capture *new_capture_pair(lua_State *L) {
    capture *io = lua_newuserdatauv(L, 2 * sizeof(capture), 0);
    memset(io, 0, 2 * sizeof(capture));
    io[0].fd = io[1].fd = -1;
    if (luaL_newmetatable(L, CAPTURE_CLASS)) {
        lua_pushcfunction(L, capture_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
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

/* Waits for the child, reading both pipes, enforcing the deadline. Never raises. */
static void supervise(pid_t pid, const request *req, capture io[2], outcome *o) {
    double start = now_s();
    double deadline = req->timeout > 0 ? start + req->timeout : INFINITY;
    double kill_at = INFINITY, drain_until = INFINITY;
    bool killed = false;
    for (;;) {
        double t = now_s();
        pid_t w = o->reaped ? 0 : waitpid(pid, &o->wait_status, WNOHANG);
        if (w < 0 && errno != EINTR) o->wait_status = 255 << 8; /* not ours to wait for: report exit 255 */
        if (w == pid || (w < 0 && errno != EINTR)) {
            o->reaped = true;
            o->seconds = t - start;
            drain_until = t + DRAIN_AFTER_EXIT_S;
        }
        if (o->reaped && ((io[0].fd < 0 && io[1].fd < 0) || t >= drain_until)) break;
        if (!o->signalled_by_us && (t >= deadline || interrupted)) {
            kill(-pid, SIGTERM);
            o->signalled_by_us = true;
            o->interrupted = interrupted;
            kill_at = t + TERM_GRACE_S;
        }
        if (!killed && t >= kill_at) {
            kill(-pid, SIGKILL);
            killed = true;
        }
        struct pollfd p[2];
        int np = 0;
        for (int i = 0; i < 2; i++)
            if (io[i].fd >= 0) p[np++] = (struct pollfd){.fd = io[i].fd, .events = POLLIN};
        /* wake at least every 20 ms to notice the exit of a child whose pipes are held elsewhere */
        int r = poll(p, (nfds_t)np, 20);
        if (r <= 0) continue;
        for (int i = 0, j = 0; i < 2; i++) {
            if (io[i].fd < 0) continue;
            if (p[j++].revents) capture_read(&io[i]);
        }
    }
    /* whatever the child left running (it led its own group) goes too */
    kill(-pid, SIGKILL);
    for (int i = 0; i < 2; i++)
        if (io[i].fd >= 0) close(io[i].fd), io[i].fd = -1;
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

static int l_run_isolated(lua_State *L) {
    request req;
    memset(&req, 0, sizeof req);
    read_request(L, &req);

    capture *io = new_capture_pair(L); /* before any descriptor exists: it may raise */
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return luaL_error(L, FN ": pipe: %s", strerror(errno));
    if (pipe2(err, O_CLOEXEC) != 0) {
        int e = errno;
        close(out[0]), close(out[1]);
        return luaL_error(L, FN ": pipe: %s", strerror(e));
    }
    fflush(stdout);
    fflush(stderr);
    /* our SIGINT handler for the wait; the host's one is put back before returning */
    struct sigaction sa = {.sa_handler = on_interrupt}, old_int;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);

    pid_t pid = fork();
    if (pid == 0) exec_child(&req, out[1], err[1]);
    int fork_errno = errno;
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]), close(err[0]);
        sigaction(SIGINT, &old_int, NULL);
        return luaL_error(L, FN ": fork: %s", strerror(fork_errno));
    }
    setpgid(pid, pid); /* also here: the deadline may come before the child ran setpgid */
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);

    io[0].fd = out[0];
    io[1].fd = err[0];
    outcome o = {0};
    supervise(pid, &req, io, &o);
    sigaction(SIGINT, &old_int, NULL);

    if (o.interrupted) {
        return luaL_error(L, FN ": interrupted; the child process was stopped");
    }
    lua_createtable(L, 0, 6);
    int ws = o.wait_status;
    const char *status;
    if (o.signalled_by_us) status = "timeout";
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
    lua_pushnumber(L, o.seconds);
    lua_setfield(L, -2, "seconds");
    /* pushing can raise on memory: the buffers are freed by the userdata's __gc then */
    push_capture(L, &io[0], "stdout");
    push_capture(L, &io[1], "stderr");
    lua_pushcfunction(L, capture_gc); /* free the buffers now rather than at the next cycle */
    lua_pushvalue(L, -3);
    lua_call(L, 1, 0);
    return 1;
}

void gl_open_isolate(lua_State *L) {
    lua_pushcfunction(L, l_run_isolated);
    lua_setfield(L, -2, "run_isolated");
}
