/*
 * sass.c — what the compiler made of a kernel, without a GPU:
 *   prog:resources(name) reads registers, stack, shared and constant memory from the cubin's ELF
 *   (cubin.c) and spills from ptxas's report, which every compile asks for (nvrtc.c);
 *   prog:sass(name) runs the toolkit's disassembler (nvdisasm) on the cubin as a child process
 *   with a deadline and parses its text into {offset=, text=, opcode=, file=, line=} entries.
 */
#define _GNU_SOURCE /* pipe2 */
#include "cubin.h"
#include "errors.h"
#include "identity.h"
#include "module.h"
#include "options.h"
#include "program.h"
#include "register.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SASS_T "cuda.sass"
#ifndef GPULAB_NVRTC_DIR
#define GPULAB_NVRTC_DIR ""
#endif
#define DISASM_TIMEOUT_S 60.0
#define DISASM_MAX_OUTPUT ((size_t)256 << 20)

/* ---- the kernel and its cubin -------------------------------------------------------------- */
/* The mangled name for `asked` (a name expression registered with names={...}, or already an
 * entry name); pushes nothing it leaves behind except the lowered table at the returned index. */
static const char *kernel_entry(lua_State *L, int prog, int arg, const char *fn) {
    if (lua_type(L, arg) != LUA_TSTRING) gl_typeerror(L, arg, fn, "kernel name");
    const char *asked = lua_tostring(L, arg);
    if (memchr(asked, '\0', lua_rawlen(L, arg))) gl_argerror(L, arg, fn, "kernel name contains a NUL byte");
    lua_pushliteral(L, "lowered");
    lua_rawget(L, prog);
    const char *entry = gl_lookup_lowered(L, lua_gettop(L), asked);
    if (entry == NULL && gl_is_name_expression(asked)) {
        gl_push_registered_names(L, lua_gettop(L));
        luaL_error(L, "%s: '%s' is not a registered name expression (registered: %s); add it to "
                      "cuda.compile{names=...}", fn, asked, lua_tostring(L, -1));
    }
    return entry ? entry : asked;
}

/* Pushes the program's cubin (the one compiled, from the private record; else prog.cubin). */
static const char *program_cubin(lua_State *L, int prog, size_t *len, const char *fn) {
    *len = 0;
    int top = lua_gettop(L);
    if (gl_program_private(L, prog) == LUA_TTABLE && gl_rawgetfield(L, -1, "cubin") == LUA_TSTRING) {
        lua_remove(L, -2);
        return lua_tolstring(L, -1, len);
    }
    lua_settop(L, top); /* what the lookup pushed (a nil when there is no private record), no more */
    lua_pushliteral(L, "cubin");
    if (lua_rawget(L, prog) == LUA_TSTRING) return lua_tolstring(L, -1, len);
    lua_pushliteral(L, "arch");
    lua_rawget(L, prog);
    luaL_error(L, "%s: the program has no cubin (arch '%s' is virtual); compile for a real architecture "
                  "such as arch=\"sm_90a\"", fn, luaL_optstring(L, -1, "?"));
    return NULL;
}

/* ---- prog:resources ------------------------------------------------------------------------- */
static void set_num(lua_State *L, const char *field, long v) {
    if (v < 0) return;
    lua_pushinteger(L, v);
    lua_setfield(L, -2, field);
}

static void push_banks(lua_State *L, const long *cubin, const long *report) {
    long total = 0;
    lua_newtable(L);
    for (int b = 0; b < GL_CUBIN_BANKS; b++) {
        long v = cubin[b] >= 0 ? cubin[b] : report[b];
        if (v < 0) continue;
        total += v;
        lua_pushinteger(L, v);
        lua_rawseti(L, -2, b);
    }
    lua_setfield(L, -2, "cmem_banks");
    lua_pushinteger(L, total);
    lua_setfield(L, -2, "cmem");
}

/* The static shared memory the kernel declares: ptxas's number; else the section's size less
 * the 1 KiB the system reserves per block where the image has a reserved section. */
static long declared_smem(const gl_cubin_kernel *k, const gl_ptxas_info *r, bool have_report) {
    if (have_report) return r->smem > 0 ? r->smem : 0;
    long s = k->smem_section - (k->reserved_smem ? 1024 : 0);
    return s > 0 ? s : 0;
}

/* prog:resources(name) --> {regs=, spill_stores=, spill_loads=, local_bytes=, smem=, cmem=, ...} */
static int l_resources(lua_State *L) {
    const char *fn = "prog:resources";
    gl_check_program(L, 1, fn);
    lua_settop(L, 2);
    const char *entry = kernel_entry(L, 1, 2, fn);
    size_t len;
    const char *cubin = program_cubin(L, 1, &len, fn);
    gl_cubin_kernel k;
    char err[256];
    if (!gl_cubin_kernel_info(cubin, len, entry, &k, err, sizeof err))
        luaL_error(L, "%s: kernel '%s': %s", fn, lua_tostring(L, 2), err);
    gl_ptxas_info r;
    const char *report = gl_program_private(L, 1) == LUA_TTABLE && gl_rawgetfield(L, -1, "report") == LUA_TSTRING
                             ? lua_tostring(L, -1) : "";
    bool have_report = gl_ptxas_info_parse(report, entry, &r);
    lua_createtable(L, 0, 20);
    set_num(L, "regs", k.regs >= 0 ? k.regs : (have_report ? r.regs : -1));
    set_num(L, "local_bytes", k.frame >= 0 ? k.frame : (have_report ? r.stack_frame : -1));
    set_num(L, "stack_bytes", k.max_stack > k.min_stack ? k.max_stack : k.min_stack);
    if (have_report) {
        set_num(L, "spill_stores", r.spill_stores);
        set_num(L, "spill_loads", r.spill_loads);
    }
    set_num(L, "smem", declared_smem(&k, &r, have_report));
    set_num(L, "smem_reserved", k.reserved_smem && k.smem_section > 0 ? k.smem_section - declared_smem(&k, &r, have_report)
                                                                      : 0);
    push_banks(L, k.cmem, have_report ? r.cmem : k.cmem);
    set_num(L, "barriers", have_report && r.barriers >= 0 ? r.barriers : k.barriers);
    set_num(L, "max_regs", k.max_regs);
    set_num(L, "max_threads", k.max_threads);
    set_num(L, "param_bytes", k.param_bytes);
    set_num(L, "code_bytes", k.code_bytes);
    set_num(L, "instructions", k.code_bytes / 16); /* fixed 128-bit encoding since sm_70 */
    lua_pushstring(L, entry);
    lua_setfield(L, -2, "entry");
    lua_pushstring(L, have_report ? "cubin+ptxas" : "cubin");
    lua_setfield(L, -2, "from");
    return 1;
}

/* ---- finding and running the disassembler -------------------------------------------------- */
static bool is_executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Appends "place; " to tried and returns true when dir/nvdisasm is executable (path filled). */
static bool try_dir(const char *dir, const char *what, char *path, size_t cap, luaL_Buffer *tried) {
    if (!dir || !*dir) return false;
    int n = snprintf(path, cap, "%s/nvdisasm", dir);
    if (n < 0 || (size_t)n >= cap) return false;
    if (is_executable(path)) return true;
    luaL_addstring(tried, path);
    if (what) {
        luaL_addstring(tried, " (");
        luaL_addstring(tried, what);
        luaL_addchar(tried, ')');
    }
    luaL_addstring(tried, "; ");
    return false;
}

static bool search_path(char *path, size_t cap, luaL_Buffer *tried) {
    const char *env = getenv("PATH");
    if (!env || !*env) return false;
    for (const char *p = env; *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        char dir[PATH_MAX];
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            int w = snprintf(path, cap, "%s/nvdisasm", dir);
            if (w > 0 && (size_t)w < cap && is_executable(path)) return true;
        }
        p += colon ? n + 1 : n;
    }
    luaL_addstring(tried, "each folder of PATH; ");
    return false;
}

/* The toolkit's bin folder beside a lib folder (".../lib64" -> ".../bin"). */
static bool bin_beside(const char *libdir, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/../bin", libdir);
    return n > 0 && (size_t)n < cap;
}

/* Finds nvdisasm the way NVRTC is found: GPULAB_NVDISASM, the toolkit the build's NVRTC came
 * from, GPULAB_LIBNVRTC's toolkit, $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda/bin. Raises
 * naming every place looked at and what to install. */
static void find_disassembler(lua_State *L, char *path, size_t cap, const char *fn) {
    const char *env = getenv("GPULAB_NVDISASM");
    if (env && *env) {
        if (is_executable(env) && snprintf(path, cap, "%s", env) < (int)cap) return;
        luaL_error(L, "%s: GPULAB_NVDISASM=%s is not an executable file", fn, env);
    }
    luaL_Buffer tried;
    luaL_buffinit(L, &tried);
    char dir[PATH_MAX + 16];
    if (GPULAB_NVRTC_DIR[0] && bin_beside(GPULAB_NVRTC_DIR, dir, sizeof dir) &&
        try_dir(dir, "the toolkit gpulab was built with", path, cap, &tried))
        return;
    const char *lib = getenv("GPULAB_LIBNVRTC");
    char real[PATH_MAX];
    if (lib && *lib && realpath(lib, real)) {
        char *slash = strrchr(real, '/');
        if (slash) *slash = '\0';
        if (slash && bin_beside(real, dir, sizeof dir) && try_dir(dir, "GPULAB_LIBNVRTC's toolkit", path, cap, &tried))
            return;
    }
    const char *homes[2][2] = {{"CUDA_HOME", getenv("CUDA_HOME")}, {"CUDA_PATH", getenv("CUDA_PATH")}};
    for (int i = 0; i < 2; i++) {
        if (!homes[i][1] || !*homes[i][1]) continue;
        snprintf(dir, sizeof dir, "%s/bin", homes[i][1]);
        if (try_dir(dir, homes[i][0], path, cap, &tried)) return;
    }
    if (search_path(path, cap, &tried)) return;
    if (try_dir("/usr/local/cuda/bin", NULL, path, cap, &tried)) return;
    luaL_pushresult(&tried);
    luaL_error(L, "%s: the CUDA disassembler nvdisasm was not found; looked at: %sinstall the CUDA toolkit's "
                  "nvdisasm (NVIDIA's cuda-nvdisasm package, part of the full toolkit) or set "
                  "GPULAB_NVDISASM=/path/to/nvdisasm", fn, lua_tostring(L, -1));
}

typedef struct child_output {
    char *text;
    size_t len, cap;
    int status;       /* waitpid status */
    bool timed_out, truncated;
    char why[256];    /* set when the child could not be run */
} child_output;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool append(child_output *o, const char *buf, size_t n) {
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 65536;
        while (cap < o->len + n + 1) cap *= 2;
        char *t = realloc(o->text, cap);
        if (!t) return false;
        o->text = t;
        o->cap = cap;
    }
    memcpy(o->text + o->len, buf, n);
    o->len += n;
    o->text[o->len] = '\0';
    return true;
}

/* Reads the child's stdout+stderr until it closes them or the deadline passes. */
static void drain(int fd, pid_t pid, double timeout, child_output *o) {
    double deadline = now_s() + timeout;
    char buf[65536];
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) {
            o->timed_out = true;
            kill(pid, SIGKILL);
            return;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        if (o->len + (size_t)n > DISASM_MAX_OUTPUT || !append(o, buf, (size_t)n)) {
            o->truncated = true;
            kill(pid, SIGKILL);
            return;
        }
    }
}

/* Waits for the child until the deadline (a child that closed its output need not have ended),
 * then kills it; it is always reaped. */
static void reap_by(pid_t pid, double deadline, child_output *o) {
    long sleep_ns = 1000000;
    for (;;) {
        pid_t w = waitpid(pid, &o->status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) return;
        if (w == 0 && now_s() >= deadline) {
            o->timed_out = true;
            kill(pid, SIGKILL);
            while (waitpid(pid, &o->status, 0) < 0 && errno == EINTR) {}
            return;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 50000000) sleep_ns *= 2;
    }
}

/* Runs argv with stdout and stderr into one pipe; no Lua call happens in here. */
static void run_child(char *const argv[], double timeout, child_output *o) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(o->why, sizeof o->why, "pipe: %s", strerror(errno));
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        snprintf(o->why, sizeof o->why, "cannot run %s: %s", argv[0], strerror(rc));
        return;
    }
    double deadline = now_s() + timeout;
    drain(fds[0], pid, timeout, o);
    close(fds[0]);
    reap_by(pid, deadline, o);
}

/* Writes the cubin to a private temporary file; returns false with errno set. */
static bool write_temp(const char *data, size_t len, char *path, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(path, cap, "%s/gpulab-sass-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= cap) return errno = ENAMETOOLONG, false;
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) return false;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int saved = errno;
    close(fd);
    if (done == len) return true;
    unlink(path);
    errno = saved;
    return false;
}

/* ---- parsing the disassembly --------------------------------------------------------------- */
typedef struct location {
    const char *file;
    size_t file_len;
    long line;
    const char *at_file; /* "inlined at" call site, or NULL */
    size_t at_len;
    long at_line;
} location;

/* Reads `"FILE", line N` at p; returns the position after it or NULL. */
static const char *read_file_line(const char *p, const char *end, const char **file, size_t *flen, long *line) {
    if (p >= end || *p != '"') return NULL;
    const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
    if (!q) return NULL;
    *file = p + 1;
    *flen = (size_t)(q - p - 1);
    p = q + 1;
    static const char tag[] = ", line ";
    if ((size_t)(end - p) < sizeof tag || memcmp(p, tag, sizeof tag - 1) != 0) return NULL;
    p += sizeof tag - 1;
    char *stop;
    *line = strtol(p, &stop, 10);
    return stop > p ? stop : NULL;
}

/* `//## File "k.cu", line 12 [inlined at "k.cu", line 30]` */
static bool read_location(const char *s, const char *end, location *loc) {
    static const char tag[] = "//## File ";
    const char *p = s;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if ((size_t)(end - p) < sizeof tag || memcmp(p, tag, sizeof tag - 1) != 0) return false;
    location l = {0};
    p = read_file_line(p + sizeof tag - 1, end, &l.file, &l.file_len, &l.line);
    if (!p) return false;
    static const char at[] = " inlined at ";
    if ((size_t)(end - p) > sizeof at && memcmp(p, at, sizeof at - 1) == 0 &&
        !read_file_line(p + sizeof at - 1, end, &l.at_file, &l.at_len, &l.at_line))
        l.at_file = NULL;
    *loc = l;
    return true;
}

/* A function's heading: ".text.NAME:", "//---- .text.NAME ----" or cuobjdump's "Function : NAME".
 * Sets name/len; returns false for other lines. */
static bool read_heading(const char *s, const char *end, const char **name, size_t *len) {
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    const char *p = NULL;
    if ((size_t)(end - s) > 6 && memcmp(s, ".text.", 6) == 0) {
        p = s + 6;
        const char *q = p;
        while (q < end && *q != ':' && *q != ' ') q++;
        if (q >= end || *q != ':') return false;
        *name = p, *len = (size_t)(q - p);
        return *len > 0;
    }
    if ((size_t)(end - s) > 4 && memcmp(s, "//--", 4) == 0) {
        const char *t = NULL;
        for (const char *q = s; q + 6 < end && !t; q++)
            if (memcmp(q, " .text.", 7) == 0) t = q + 7;
        if (!t) return false;
        const char *q = t;
        while (q < end && *q != ' ') q++;
        *name = t, *len = (size_t)(q - t);
        return *len > 0;
    }
    static const char fn[] = "Function : ";
    if ((size_t)(end - s) > sizeof fn - 1 && memcmp(s, fn, sizeof fn - 1) == 0) {
        p = s + sizeof fn - 1;
        const char *q = end;
        while (q > p && (q[-1] == ' ' || q[-1] == '\r')) q--;
        *name = p, *len = (size_t)(q - p);
        return *len > 0;
    }
    return false;
}

/* An instruction line: the offset in a comment (slash, star, hex digits, star, slash), an optional
 * predicate, the text up to ";", and in cuobjdump's output the encoding as a trailing comment. */
static bool read_instruction(const char *s, const char *end, long *offset, const char **text, size_t *tlen) {
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    if ((size_t)(end - s) < 5 || s[0] != '/' || s[1] != '*') return false;
    char *stop;
    const char *h = s + 2;
    if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f') || (*h >= 'A' && *h <= 'F'))) return false;
    *offset = strtol(h, &stop, 16);
    if (stop + 1 >= end || stop[0] != '*' || stop[1] != '/') return false;
    const char *p = stop + 2;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '{')) p++;
    if (p >= end) return false;
    const char *semi = memchr(p, ';', (size_t)(end - p));
    const char *q = semi ? semi : end;
    while (q > p && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '}')) q--;
    if (q == p) return false;
    *text = p;
    *tlen = (size_t)(q - p);
    return true;
}

/* The opcode of an instruction text: the first word after an optional @P predicate. */
static void push_opcode(lua_State *L, const char *t, size_t n) {
    const char *end = t + n;
    if (t < end && *t == '@') {
        while (t < end && *t != ' ') t++;
        while (t < end && *t == ' ') t++;
    }
    const char *q = t;
    while (q < end && *q != ' ') q++;
    lua_pushlstring(L, t, (size_t)(q - t));
}

static void push_entry(lua_State *L, long offset, const char *text, size_t tlen, const location *loc) {
    lua_createtable(L, 0, 7);
    lua_pushinteger(L, offset);
    lua_setfield(L, -2, "offset");
    lua_pushlstring(L, text, tlen);
    lua_setfield(L, -2, "text");
    push_opcode(L, text, tlen);
    lua_setfield(L, -2, "opcode");
    if (loc && loc->file) {
        lua_pushlstring(L, loc->file, loc->file_len);
        lua_setfield(L, -2, "file");
        lua_pushinteger(L, loc->line);
        lua_setfield(L, -2, "line");
        if (loc->at_file) {
            lua_pushfstring(L, "%s:%d", lua_pushlstring(L, loc->at_file, loc->at_len), (int)loc->at_line);
            lua_remove(L, -2);
            lua_setfield(L, -2, "inlined_at");
        }
    }
}

/* Parses the disassembly of function `want` into the list on top of the stack; returns the
 * number of instructions, or -1 when the text never heads that function. */
static int parse_disassembly(lua_State *L, const char *text, size_t len, const char *want) {
    int list = lua_gettop(L), n = 0;
    bool inside = false, seen = false, fresh = true;
    location loc = {0};
    size_t wlen = strlen(want);
    for (const char *s = text, *end = text + len; s < end;) {
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        const char *le = eol ? eol : end;
        const char *name, *itext;
        size_t nlen, tlen;
        long offset;
        location l;
        if (read_heading(s, le, &name, &nlen)) {
            bool match = nlen == wlen && memcmp(name, want, wlen) == 0;
            if (match && !inside) memset(&loc, 0, sizeof loc), fresh = true;
            inside = match;
            seen = seen || match;
        } else if (inside && read_location(s, le, &l)) {
            /* the first location of a group is the innermost frame; the PTX-line one is skipped */
            bool ptx_line = l.file_len == 17 && memcmp(l.file, ".nv_debug_ptx_txt", 17) == 0;
            if (!ptx_line && fresh) loc = l, fresh = false;
        } else if (inside && read_instruction(s, le, &offset, &itext, &tlen)) {
            push_entry(L, offset, itext, tlen, &loc);
            lua_rawseti(L, list, ++n);
            fresh = true;
        }
        s = eol ? eol + 1 : end;
    }
    return seen ? n : -1;
}

/* ---- prog:sass ----------------------------------------------------------------------------- */
typedef struct sass_opts {
    bool lineinfo;
    double timeout;
} sass_opts;

static sass_opts read_sass_opts(lua_State *L, int idx, const char *fn) {
    sass_opts o = {true, DISASM_TIMEOUT_S};
    if (lua_isnoneornil(L, idx)) return o;
    if (!lua_istable(L, idx)) gl_typeerror(L, idx, fn, "table");
    static const char *const known[] = {"lineinfo", "timeout", NULL};
    gl_check_known_fields(L, idx, known, fn);
    int t = gl_rawgetfield(L, idx, "lineinfo");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) gl_fielderror(L, idx, fn, "lineinfo", "must be a boolean");
    if (t == LUA_TBOOLEAN) o.lineinfo = lua_toboolean(L, -1);
    t = gl_rawgetfield(L, idx, "timeout");
    if (t != LUA_TNIL) {
        int isnum = 0;
        o.timeout = lua_tonumberx(L, -1, &isnum);
        if (!isnum || !(o.timeout > 0 && o.timeout <= 3600))
            gl_fielderror(L, idx, fn, "timeout", "must be a number of seconds in (0, 3600]");
    }
    lua_pop(L, 2);
    return o;
}

/* The cubin to disassemble: the program's own when it has line info (or none is wanted), else
 * one compiled again with -lineinfo, kept in the private record for the next call. */
static const char *cubin_with_lines(lua_State *L, int prog, bool lineinfo, size_t *len, const char *fn) {
    const char *cubin = program_cubin(L, prog, len, fn);
    if (!lineinfo || gl_cubin_has_section(cubin, *len, ".nv_debug_line_sass")) return cubin;
    if (gl_program_private(L, prog) != LUA_TTABLE) {
        lua_pop(L, 1);
        return cubin; /* the inputs are gone: the SASS without lines */
    }
    int priv = lua_gettop(L);
    if (gl_rawgetfield(L, priv, "lineinfo_cubin") == LUA_TSTRING) return lua_tolstring(L, -1, len);
    lua_pop(L, 1);
    gl_program_recompile(L, prog, "-lineinfo", fn);
    gl_rawgetfield(L, -1, "cubin");
    if (!lua_isstring(L, -1)) return cubin;
    lua_pushvalue(L, -1);
    lua_setfield(L, priv, "lineinfo_cubin");
    return lua_tolstring(L, -1, len);
}

static void raise_child_failure(lua_State *L, const char *fn, const char *tool, const child_output *o,
                                double timeout) {
    if (o->why[0]) luaL_error(L, "%s: %s", fn, o->why);
    if (o->timed_out) luaL_error(L, "%s: %s did not finish within %f s (killed)", fn, tool, timeout);
    if (o->truncated) luaL_error(L, "%s: %s wrote more than %d MiB (killed)", fn, tool, (int)(DISASM_MAX_OUTPUT >> 20));
    const char *out = o->text ? o->text : "";
    size_t n = strlen(out);
    const char *tail = n > 2000 ? out + n - 2000 : out;
    if (WIFSIGNALED(o->status))
        luaL_error(L, "%s: %s died of signal %d: %s", fn, tool, WTERMSIG(o->status), tail);
    luaL_error(L, "%s: %s failed (exit status %d): %s", fn, tool, WEXITSTATUS(o->status), tail);
}

/* Pushes nvdisasm's text for the cubin. */
static void disassemble(lua_State *L, const char *cubin, size_t len, double timeout, const char *fn) {
    char tool[PATH_MAX], file[PATH_MAX];
    find_disassembler(L, tool, sizeof tool, fn);
    if (!write_temp(cubin, len, file, sizeof file))
        luaL_error(L, "%s: cannot write the cubin to a temporary file: %s", fn, strerror(errno));
    char c[] = "-c", g[] = "-g";
    char *argv[] = {tool, c, g, file, NULL};
    child_output o = {0};
    run_child(argv, timeout, &o);
    unlink(file);
    bool ok = !o.why[0] && !o.timed_out && !o.truncated && WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0;
    if (!ok) {
        lua_pushstring(L, o.text ? o.text : ""); /* the message is built from Lua's copy */
        free(o.text);
        o.text = (char *)lua_tostring(L, -1);
        raise_child_failure(L, fn, tool, &o, timeout);
    }
    lua_pushlstring(L, o.text ? o.text : "", o.len);
    free(o.text);
}

/* prog:sass(name [, {lineinfo=true, timeout=60}]) --> list of {offset=, text=, opcode=, file=, line=} */
int gl_program_sass(lua_State *L) {
    const char *fn = "prog:sass";
    gl_check_program(L, 1, fn);
    sass_opts opts = read_sass_opts(L, 3, fn);
    lua_settop(L, 3);
    const char *entry = kernel_entry(L, 1, 2, fn);
    size_t len;
    const char *cubin = cubin_with_lines(L, 1, opts.lineinfo, &len, fn);
    disassemble(L, cubin, len, opts.timeout, fn);
    size_t tlen;
    const char *text = lua_tolstring(L, -1, &tlen);
    lua_newtable(L);
    if (parse_disassembly(L, text, tlen, entry) < 0)
        luaL_error(L, "%s: the disassembly has no function '%s' (kernel '%s')", fn, entry, lua_tostring(L, 2));
    lua_pushstring(L, entry);
    lua_setfield(L, -2, "kernel");
    gl_setmetatable(L, SASS_T);
    return 1;
}

/* cuda.sass_parse(text, entry) --> the list prog:sass makes from a disassembly's text. */
static int l_sass_parse(lua_State *L) {
    const char *fn = "cuda.sass_parse";
    size_t tlen;
    if (lua_type(L, 1) != LUA_TSTRING) gl_typeerror(L, 1, fn, "string");
    if (lua_type(L, 2) != LUA_TSTRING) gl_typeerror(L, 2, fn, "kernel name");
    const char *text = lua_tolstring(L, 1, &tlen);
    lua_settop(L, 2);
    lua_newtable(L);
    if (parse_disassembly(L, text, tlen, lua_tostring(L, 2)) < 0)
        luaL_error(L, "%s: the text has no function '%s'", fn, lua_tostring(L, 2));
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "kernel");
    gl_setmetatable(L, SASS_T);
    return 1;
}

/* ---- the cuda.sass list -------------------------------------------------------------------- */
/* True when opcode belongs to class: "LDG" takes LDG and LDG.E.128, not LDGSTS. */
static bool in_class(const char *op, size_t oplen, const char *cls, size_t clen) {
    return oplen >= clen && memcmp(op, cls, clen) == 0 && (oplen == clen || op[clen] == '.');
}

/* list:count{"LDG", "SHFL", ...} --> {LDG=n, SHFL=n, ...} */
static int l_sass_count(lua_State *L) {
    const char *fn = "sass:count";
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_istable(L, 2)) gl_typeerror(L, 2, fn, "list of opcode classes");
    lua_Integer nclasses = (lua_Integer)lua_rawlen(L, 2);
    lua_createtable(L, 0, (int)nclasses);
    int out = lua_gettop(L);
    for (lua_Integer c = 1; c <= nclasses; c++) {
        if (lua_rawgeti(L, 2, c) != LUA_TSTRING) gl_argerror(L, 2, fn, "item %d is not a string", (int)c);
        size_t clen;
        const char *cls = lua_tolstring(L, -1, &clen);
        lua_Integer n = 0;
        for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, 1); i++) {
            if (lua_rawgeti(L, 1, i) == LUA_TTABLE && gl_rawgetfield(L, -1, "opcode") == LUA_TSTRING) {
                size_t oplen;
                const char *op = lua_tolstring(L, -1, &oplen);
                n += in_class(op, oplen, cls, clen);
            }
            lua_settop(L, out + 1);
        }
        lua_pushinteger(L, n);
        lua_rawset(L, out);
    }
    return 1;
}

/* A field of row t as text, or "?" (the listing is the script's table: any field may be edited). */
static const char *text_field(lua_State *L, int idx) { return lua_isstring(L, idx) ? lua_tostring(L, idx) : "?"; }

static int l_sass_tostring(lua_State *L) {
    if (!lua_istable(L, 1)) gl_typeerror(L, 1, "cuda.sass __tostring", "cuda.sass listing");
    lua_settop(L, 1);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    gl_rawgetfield(L, 1, "kernel");
    /* the header is made before the buffer: luaL_addvalue needs the value right above the buffer */
    lua_pushfstring(L, "SASS of %s (%I instructions)\n", text_field(L, 2), n);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushvalue(L, 3);
    luaL_addvalue(&b);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 1, i) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        gl_rawgetfield(L, -1, "offset");
        gl_rawgetfield(L, -2, "text");
        gl_rawgetfield(L, -3, "file");
        gl_rawgetfield(L, -4, "line");
        char head[512]; /* instruction texts are far shorter; a longer one is cut */
        snprintf(head, sizeof head, "  /*%04llx*/  %-56.400s", (unsigned long long)lua_tointeger(L, -4),
                 text_field(L, -3));
        lua_pushstring(L, head);
        if (lua_type(L, -3) == LUA_TSTRING) {
            const char *file = lua_tostring(L, -3), *slash = strrchr(file, '/');
            lua_pushfstring(L, " %s:%I", slash ? slash + 1 : file, lua_tointeger(L, -2));
            lua_concat(L, 2);
        }
        lua_pushliteral(L, "\n");
        lua_concat(L, 2);
        lua_replace(L, -6);
        lua_pop(L, 4);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return 1;
}

void gl_open_sass(lua_State *L) {
    static const luaL_Reg meta[] = {{"__tostring", l_sass_tostring}, {NULL, NULL}};
    static const luaL_Reg methods[] = {{"count", l_sass_count}, {NULL, NULL}};
    gl_new_class(L, SASS_T, meta, methods, NULL);
    static const luaL_Reg program_methods[] = {{"resources", l_resources}, {"sass", gl_program_sass}, {NULL, NULL}};
    gl_class_add_methods(L, "cuda.program", program_methods);
    lua_pushcfunction(L, l_sass_parse);
    lua_setfield(L, -2, "sass_parse");
}
