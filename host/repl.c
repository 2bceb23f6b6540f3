/*
 * repl.c — the interactive loop: libedit line editing with persistent history and completion
 * of globals, table fields and methods; multi-line chunks; values printed (tables pretty);
 * Ctrl-C to interrupt; REPL commands (:help, :history, :save, :restart with replay).
 */
#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <lauxlib.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "gpulab.h"
#include "identity.h"

#define PROMPT "gpulab> "
#define PROMPT_MORE ">> "

/* ---- the session's successful inputs -------------------------------------------------------
 * `typed` is what the user entered (for :history); `code` is the statement that redoes it in a
 * script (save_code says how), written by :save and run again by the :restart replay. */
typedef struct {
    char *typed, *code;
} input;

static struct {
    input *items;
    int n, cap;
} session;

static void session_add(const char *typed, const char *code) {
    if (session.n == session.cap) {
        int cap = session.cap ? session.cap * 2 : 32;
        input *p = realloc(session.items, (size_t)cap * sizeof *p);
        if (p == NULL) return;
        session.items = p;
        session.cap = cap;
    }
    char *t = strdup(typed), *c = strdup(code);
    if (t == NULL || c == NULL) {
        free(t);
        free(c);
        return;
    }
    session.items[session.n++] = (input){t, c};
}

/* Set when the REPL's own help() runs: an input that called it is saved as a comment, since
 * help() exists only at the prompt. */
static bool help_called;

static void session_free(void) {
    for (int i = 0; i < session.n; i++) {
        free(session.items[i].typed);
        free(session.items[i].code);
    }
    free(session.items);
    memset(&session, 0, sizeof session);
}

/* ---- Ctrl-C ----------------------------------------------------------------------------------
 * While Lua runs, gl_docall turns SIGINT into a Lua error. At the prompt SIGINT is blocked
 * except inside ppoll, so it can only arrive while we wait for a key: the line is dropped. */
static volatile sig_atomic_t sigint_seen;
static bool line_interrupted;
static pid_t prompt_thread; /* the thread that reads lines: gl_repl's */

/* A Ctrl-C is sent to the process. While this thread blocks it (everywhere but in ppoll) the kernel
 * hands it to any other thread that does not: one the driver started, say. Noted there, it would
 * not wake our ppoll, and the line would wait for the next key. So it is passed to this thread,
 * where it stays pending until ppoll lets it in; only this thread sets the flag. */
static void on_prompt_sigint(int sig) {
    pid_t self = (pid_t)syscall(SYS_gettid);
    if (prompt_thread != 0 && self != prompt_thread) {
        int saved = errno;
        syscall(SYS_tgkill, getpid(), prompt_thread, sig);
        errno = saved;
        return;
    }
    sigint_seen = 1;
}

static void install_prompt_handler(void) {
    prompt_thread = (pid_t)syscall(SYS_gettid);
    struct sigaction sa = {.sa_handler = on_prompt_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

static sigset_t unblocked_mask;

/* libedit's character reader: a key, or a newline that ends an interrupted line. */
static int read_key(EditLine *el, wchar_t *wc) {
    (void)el;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (;;) {
        if (sigint_seen) {
            sigint_seen = 0;
            line_interrupted = true;
            *wc = L'\n';
            return 1;
        }
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int r = ppoll(&p, 1, NULL, &unblocked_mask);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        char c;
        ssize_t got = read(STDIN_FILENO, &c, 1);
        if (got == 0) return 0;
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        if (c == '\003') { /* ^C as a character: the terminal does not send signals */
            sigint_seen = 1;
            continue;
        }
        size_t k = mbrtowc(wc, &c, 1, &st);
        if (k == (size_t)-2) continue;                  /* middle of a UTF-8 sequence */
        if (k == (size_t)-1) *wc = (unsigned char)c;    /* not valid here: pass the byte */
        return 1;
    }
}

/* ---- history file ----------------------------------------------------------------------------- */

static char history_path[PATH_MAX];
static bool history_warned;

static bool make_dirs(char *path) { /* mkdir -p of the folders above path's last slash */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        bool ok = mkdir(path, 0700) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return true;
}

static void find_history_path(void) {
    const char *state = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    if (state && state[0] == '/')
        snprintf(history_path, sizeof history_path, "%s/gpulab/history", state);
    else if (home && *home)
        snprintf(history_path, sizeof history_path, "%s/.local/state/gpulab/history", home);
    else
        history_path[0] = '\0';
}

static void history_warn(const char *what) {
    if (history_warned) return;
    history_warned = true;
    fprintf(stderr, "%s: warning: cannot %s history file %s: %s (history is kept for this session only)\n",
            gl_progname, what, history_path[0] ? history_path : "(no $HOME)", strerror(errno));
}

static void history_save(History *h) {
    if (history_path[0] == '\0' || history_warned) return;
    HistEvent ev;
    errno = 0;
    if (!make_dirs(history_path) || history(h, &ev, H_SAVE, history_path) < 0) {
        if (errno == 0) errno = EIO;
        history_warn("write");
    }
}

/* ---- completion ---------------------------------------------------------------------------------
 * Completion never runs user code: every read is raw (no __index, no __pairs), the collector is
 * held so no finalizer runs, and the lookup is protected, so even a memory error only beeps.
 * "a.b:c<Tab>" looks up a, then b in a (raw, then through __index tables of metatables).
 * A gpulab object names what it answers in its class metatable, which its metatable's __name
 * finds in the registry (as the bindings register every class): `obj:` completes the names in
 * that table's __methods, `obj.` those in its __fields (and a table object's own keys). Any
 * other value completes its own keys and those of its __index tables. */
static lua_State *completion_state;

static bool is_ident_char(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int raw_field(lua_State *L, int idx, const char *key) {
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* Pushes the class metatable of the value at idx: registry[name], name being the __name of the
 * value's metatable, when that entry is a table whose own __name is the same and which has a
 * __methods table (every gpulab class does; a C library's metatable, FILE*'s, does not); else
 * the value's own metatable when it has a __methods table (a script's class written the same
 * way); else returns false, pushing nothing. A metatable can name any class: that only changes
 * what is offered. */
static bool push_class_metatable(lua_State *L, int idx) {
    if (!lua_getmetatable(L, idx)) return false;
    if (raw_field(L, -1, "__name") == LUA_TSTRING) {
        lua_pushvalue(L, -1);
        if (lua_rawget(L, LUA_REGISTRYINDEX) == LUA_TTABLE) {
            raw_field(L, -1, "__name");
            bool same = lua_rawequal(L, -1, -3);
            lua_pop(L, 1);
            same = same && raw_field(L, -1, "__methods") == LUA_TTABLE;
            lua_pop(L, 1);
            if (same) {
                lua_replace(L, -3);
                lua_pop(L, 1);
                return true;
            }
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (raw_field(L, -1, "__methods") == LUA_TTABLE) {
        lua_pop(L, 1);
        return true;
    }
    lua_pop(L, 2);
    return false;
}

/* Pushes the table where the value at idx finds what plain tables do not hold, or returns
 * false: the __index of its metatable when that is a table, else its class's __methods. */
static bool push_index_table(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (!lua_getmetatable(L, idx)) return false;
    if (raw_field(L, -1, "__index") == LUA_TTABLE) {
        lua_remove(L, -2);
        return true;
    }
    lua_pop(L, 2);
    if (!push_class_metatable(L, idx)) return false;
    if (raw_field(L, -1, "__methods") == LUA_TTABLE) {
        lua_remove(L, -2);
        return true;
    }
    lua_pop(L, 2);
    return false;
}

/* Replaces the value on top with its field `key`: raw lookup, then the __index chain. */
static void step_into(lua_State *L, const char *key, size_t len) {
    for (int hops = 0; hops < 8; hops++) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            lua_pushlstring(L, key, len);
            if (lua_rawget(L, -2) != LUA_TNIL) {
                lua_remove(L, -2);
                return;
            }
            lua_pop(L, 1);
        }
        if (!push_index_table(L, -1)) break;
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    lua_pushnil(L);
}

typedef struct {
    char **names;
    int n, cap;
} name_list;

static void names_add(name_list *nl, const char *s) {
    if (nl->n == nl->cap) {
        int cap = nl->cap ? nl->cap * 2 : 64;
        char **p = realloc(nl->names, (size_t)cap * sizeof *p);
        if (p == NULL) return;
        nl->names = p;
        nl->cap = cap;
    }
    char *copy = strdup(s);
    if (copy) nl->names[nl->n++] = copy;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the identifier keys of the table at idx that start with `prefix`. */
static void add_keys(lua_State *L, int idx, const char *prefix, name_list *out) {
    idx = lua_absindex(L, idx);
    size_t plen = strlen(prefix);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) continue;
        const char *k = lua_tostring(L, -1);
        if (strncmp(k, prefix, plen) != 0 || !is_ident_char(k[0]) || (k[0] >= '0' && k[0] <= '9')) continue;
        bool ident = true;
        for (const char *c = k; *c; c++) ident = ident && is_ident_char(*c);
        if (ident) names_add(out, k);
    }
}

/* Adds the names of the class table `which` (__methods or __fields) of the class metatable on
 * top, when it is a table. */
static void add_class_names(lua_State *L, const char *which, const char *prefix, name_list *out) {
    if (raw_field(L, -1, which) == LUA_TTABLE) add_keys(L, -1, prefix, out);
    lua_pop(L, 1);
}

/* Adds the candidates for the value on top after `sep` ('.' or ':'; 0 for a bare word) that
 * start with `prefix`: for an object of a class, its methods after ':', and after '.' its
 * fields, its methods and a table object's own keys. Leaves the stack as it found it. */
static void collect_fields(lua_State *L, char sep, const char *prefix, name_list *out) {
    if (push_class_metatable(L, -1)) { /* its class names what it answers */
        add_class_names(L, "__methods", prefix, out);
        if (sep != ':') {
            add_class_names(L, "__fields", prefix, out);
            if (lua_type(L, -2) == LUA_TTABLE) add_keys(L, -2, prefix, out);
        }
        lua_pop(L, 1);
        return;
    }
    int pushed = 0;
    for (int hops = 0; hops < 8; hops++) {
        if (lua_type(L, -1) == LUA_TTABLE) add_keys(L, -1, prefix, out);
        if (!push_index_table(L, -1)) break;
        pushed++;
    }
    lua_pop(L, pushed);
}

static void print_candidates(const name_list *nl) {
    putchar('\n');
    int col = 0;
    for (int i = 0; i < nl->n; i++) {
        int w = (int)strlen(nl->names[i]) + 2;
        if (col > 0 && col + w > 80) {
            putchar('\n');
            col = 0;
        }
        printf("%s  ", nl->names[i]);
        col += w;
    }
    putchar('\n');
    fflush(stdout);
}

typedef struct {
    const char *start, *last, *partial;
    name_list *out;
} completion_request;

/* Runs protected: walks "a.b:" from the globals and collects the candidates for the partial. */
static int collect_candidates(lua_State *L) {
    const completion_request *rq = lua_touserdata(L, 1);
    lua_pushglobaltable(L);
    for (const char *p = rq->start; p < rq->last;) { /* walk "a.b:" */
        const char *q = p;
        while (q < rq->last && *q != '.' && *q != ':') q++;
        step_into(L, p, (size_t)(q - p));
        p = q + 1;
    }
    char sep = '\0'; /* a bare word has none */
    if (rq->last > rq->start) sep = rq->last[-1];
    collect_fields(L, sep, rq->partial, rq->out);
    return 0;
}

static unsigned char complete(EditLine *el, int ch) {
    (void)ch;
    lua_State *L = completion_state;
    const LineInfo *li = el_line(el);
    const char *end = li->cursor, *start = end;
    while (start > li->buffer && (is_ident_char(start[-1]) || start[-1] == '.' || start[-1] == ':')) start--;
    const char *last = end;
    while (last > start && last[-1] != '.' && last[-1] != ':') last--;
    char partial[256];
    size_t plen = (size_t)(end - last);
    if (plen >= sizeof partial || !lua_checkstack(L, 32)) return CC_REFRESH_BEEP;
    memcpy(partial, last, plen);
    partial[plen] = '\0';

    int top = lua_gettop(L);
    name_list nl = {0};
    completion_request rq = {start, last, partial, &nl};
    bool collector_was_running = lua_gc(L, LUA_GCISRUNNING);
    if (collector_was_running) lua_gc(L, LUA_GCSTOP); /* no finalizer runs while we look */
    lua_pushcfunction(L, collect_candidates);
    lua_pushlightuserdata(L, &rq);
    bool ok = lua_pcall(L, 1, 0, 0) == LUA_OK;
    if (collector_was_running) lua_gc(L, LUA_GCRESTART);
    lua_settop(L, top);
    if (ok && last == start) { /* a bare word: keywords complete too */
        static const char *const keywords[] = {"and", "break", "do", "else", "elseif", "end", "false",
                                               "for", "function", "goto", "if", "in", "local", "nil",
                                               "not", "or", "repeat", "return", "then", "true", "until",
                                               "while"};
        for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
            if (strncmp(keywords[i], partial, plen) == 0) names_add(&nl, keywords[i]);
    }

    if (nl.n > 1) qsort(nl.names, (size_t)nl.n, sizeof *nl.names, cmp_names); /* names: NULL when none */
    int uniq = 0;
    for (int i = 0; i < nl.n; i++) {
        if (uniq > 0 && strcmp(nl.names[uniq - 1], nl.names[i]) == 0) {
            free(nl.names[i]);
            continue;
        }
        nl.names[uniq++] = nl.names[i];
    }
    nl.n = uniq;

    unsigned char result = CC_REFRESH;
    if (nl.n == 0) {
        result = CC_REFRESH_BEEP;
    } else {
        size_t common = strlen(nl.names[0]);
        for (int i = 1; i < nl.n; i++) {
            size_t j = 0;
            while (j < common && nl.names[i][j] == nl.names[0][j]) j++;
            common = j;
        }
        if (common > plen) {
            char ins[256];
            snprintf(ins, sizeof ins, "%.*s", (int)(common - plen), nl.names[0] + plen);
            el_insertstr(el, ins);
        } else if (nl.n > 1) {
            print_candidates(&nl);
            result = CC_REDISPLAY;
        }
    }
    for (int i = 0; i < nl.n; i++) free(nl.names[i]);
    free(nl.names);
    return result;
}

/* ---- printing values ----------------------------------------------------------------------------
 * Tables are printed with sorted keys, nested up to a depth, cycles marked; everything else
 * (userdata included) through tostring, so __tostring decides. */
static const char pretty_source[] =
    "local max_depth, width, lib = ...\n"
    /* the library as it was at start-up: a script replacing a global does not change printing */
    "local print, tostring, type, next, rawget, rawlen, select, ipairs = lib.print, lib.tostring, lib.type,\n"
    "  lib.next, lib.rawget, lib.rawlen, lib.select, lib.ipairs\n"
    "local format, match, find, gsub = lib.format, lib.match, lib.find, lib.gsub\n"
    "local sort, concat, mathtype = lib.sort, lib.concat, lib.mathtype\n"
    "local function key_less(a, b)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  if ta ~= tb then\n"
    "    local rank = {number = 1, string = 2}\n"
    "    return (rank[ta] or 3) < (rank[tb] or 3) or ((rank[ta] or 3) == (rank[tb] or 3) and ta < tb)\n"
    "  end\n"
    "  if ta == 'number' or ta == 'string' then return a < b end\n"
    "  return tostring(a) < tostring(b)\n"
    "end\n"
    "local function quote(s) return (gsub(format('%q', s), '\\\\\\n', '\\\\n')) end\n"
    "local function show_key(k)\n"
    "  if type(k) == 'string' and match(k, '^[%a_][%w_]*$') then return k end\n"
    "  return '[' .. (type(k) == 'string' and quote(k) or tostring(k)) .. ']'\n"
    "end\n"
    "local function show(v, indent, depth, open)\n"
    "  if type(v) == 'string' then return quote(v) end\n"
    "  if type(v) ~= 'table' then return tostring(v) end\n"
    "  local own = tostring(v)\n" /* __tostring or __name (also behind __metatable) decide */
    "  if own ~= 'table: ' .. format('%p', v) then return own end\n"
    "  if open[v] then return '<cycle: ' .. tostring(v) .. '>' end\n"
    "  if next(v) == nil then return '{}' end\n"
    "  if depth >= max_depth then return '{...}' end\n"
    "  open[v] = true\n"
    "  local n, keys = rawlen(v), {}\n" /* a __len the table's own entries do not back is not shown */
    "  for k in next, v do\n"
    "    if not (mathtype(k) == 'integer' and k >= 1 and k <= n) then keys[#keys + 1] = k end\n"
    "  end\n"
    "  sort(keys, key_less)\n"
    "  local parts, inner = {}, indent .. '  '\n"
    "  for i = 1, n do parts[#parts + 1] = show(rawget(v, i), inner, depth + 1, open) end\n"
    "  for _, k in ipairs(keys) do\n"
    "    parts[#parts + 1] = show_key(k) .. ' = ' .. show(rawget(v, k), inner, depth + 1, open)\n"
    "  end\n"
    "  open[v] = nil\n"
    "  local flat = '{' .. concat(parts, ', ') .. '}'\n"
    "  if #flat + #indent <= width and not find(flat, '\\n') then return flat end\n"
    "  return '{\\n' .. inner .. concat(parts, ',\\n' .. inner) .. '\\n' .. indent .. '}'\n"
    "end\n"
    "return function(...)\n"
    "  local out = {}\n"
    "  for i = 1, select('#', ...) do\n"
    "    local v = select(i, ...)\n"
    "    out[i] = type(v) == 'string' and v or show(v, '', 0, {})\n"
    "  end\n"
    "  print(concat(out, '\\t'))\n"
    "end\n";

#define PRETTY_KEY "gpulab.repl.pretty"

static void load_pretty_printer(lua_State *L) {
    if (luaL_loadbufferx(L, pretty_source, sizeof pretty_source - 1, "=repl printer", "t") != LUA_OK) {
        lua_pop(L, 1);
        lua_getglobal(L, "print"); /* cannot happen with the text above; print plainly then */
    } else {
        lua_pushinteger(L, 4);
        lua_pushinteger(L, 78);
        gl_private_get(L, GL_PRISTINE_KEY);
        lua_call(L, 3, 1);
    }
    gl_private_set(L, PRETTY_KEY);
}

/* Prints the n values on top of the stack (and pops them) as lua(1) does, through the global
 * `print`; while that is still Lua's own print, through the pretty printer. Runs protected
 * (print_step): reading the global may run a metamethod. */
static bool print_failed; /* the last print_values printed nothing: :save does not print them */

static void print_values(lua_State *L, int n) {
    print_failed = false;
    if (n <= 0) return;
    if (!lua_checkstack(L, LUA_MINSTACK)) { /* thousands of results filled the stack */
        print_failed = true;
        lua_pop(L, n);
        fprintf(stderr, "too many results to print\n");
        return;
    }
    lua_getglobal(L, "print");
    bool stock = false;
    if (gl_private_get(L, GL_PRISTINE_KEY) == LUA_TTABLE) {
        lua_pushliteral(L, "print");
        lua_rawget(L, -2);
        stock = lua_rawequal(L, -1, -3);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (stock) {
        lua_pop(L, 1);
        gl_private_get(L, PRETTY_KEY);
    }
    lua_insert(L, -n - 1);
    int st = gl_pcall_interruptible(L, n, 0);
    if (st != LUA_OK) {
        print_failed = true;
        const char *msg = lua_tostring(L, -1);
        lua_pushfstring(L, "error calling 'print' (%s)", msg ? msg : "error object is not a string");
        lua_remove(L, -2);
        gl_report(L, st);
    }
}

/* ---- compiling input ------------------------------------------------------------------------------ */

typedef enum { CHUNK_READY, CHUNK_INCOMPLETE, CHUNK_ERROR } chunk_state;

/* A syntax error at <eof> means the chunk may still be completed by more lines. */
static bool is_incomplete(lua_State *L, int status) {
    if (status != LUA_ERRSYNTAX) return false;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    static const char eof_mark[] = "<eof>";
    size_t m = sizeof eof_mark - 1;
    return msg && len >= m && strcmp(msg + len - m, eof_mark) == 0;
}

/* Compiles `src`, pushing the function (READY) or the error message (ERROR); pushes nothing when
 * INCOMPLETE. *is_expr says whether it compiled as an expression (its values are printed). */
static chunk_state compile_input(lua_State *L, const char *src, bool first_line, bool *is_expr) {
    const char *body = src[0] == '=' ? src + 1 : src; /* "=expr": lua 5.1's spelling */
    *is_expr = false;
    if (first_line || src[0] == '=') {
        lua_pushfstring(L, "return %s;", body);
        size_t len;
        const char *ret = lua_tolstring(L, -1, &len);
        int st = gl_loadbuffer_text(L, ret, len, "=stdin");
        lua_remove(L, -2);
        if (st == LUA_OK) {
            *is_expr = true;
            return CHUNK_READY;
        }
        lua_pop(L, 1);
    }
    int st = gl_loadbuffer_text(L, body, strlen(body), "=stdin");
    if (st == LUA_OK) return CHUNK_READY;
    if (is_incomplete(L, st)) {
        lua_pop(L, 1);
        return CHUNK_INCOMPLETE;
    }
    return CHUNK_ERROR;
}

/* ---- what :save writes for an input ---------------------------------------------------------
 * The rule (also in :help and the README): every input that ran without error, in order, as typed,
 * except that
 *   - an input whose values the REPL printed is saved as print(...) of them: `x + 1` and `f()`
 *     become `print(x + 1)` and `print(f())`, `return a, b` a call of the chunk that prints;
 *     an input that printed nothing stays as typed (`f()` that returned nothing, `x = 1`);
 *   - an input that declares locals, labels or returns runs inside `do ... end`, so its locals
 *     end with it as they did at the prompt and the file still compiles;
 *   - an input that called help() is kept as a comment (help() exists only in the REPL).
 * REPL commands (:help, :save, ...) and inputs that failed are never saved. */

/* Skips a long bracket "[==[ ... ]==]" starting at p (p[0] == '['); returns NULL if p does not
 * open one. */
static const char *skip_long_bracket(const char *p) {
    const char *q = p + 1;
    while (*q == '=') q++;
    if (*q != '[') return NULL;
    size_t level = (size_t)(q - p - 1);
    for (q++; *q; q++) {
        if (*q != ']') continue;
        const char *r = q + 1;
        while (*r == '=') r++;
        if (*r == ']' && (size_t)(r - q - 1) == level) return r + 1;
    }
    return q;
}

/* How a chunk (one that compiled) must be saved to run as it ran at the prompt, where each input
 * is a chunk of its own. OWN_BLOCK: it declares a local or a label outside every block and
 * function of its own (saved inside do ... end, which scopes them). OWN_FUNCTION: it returns
 * outside every function of its own, even inside a block (saved as a function called in place: a
 * `return` in do ... end would end the whole saved script). A small scan of Lua's tokens: strings
 * and comments are skipped, blocks counted by their keywords. */
typedef enum { SAVE_AS_IS, OWN_BLOCK, OWN_FUNCTION } save_shape;

static save_shape needs_own_scope(const char *p) {
    int depth = 0, fn_depth = 0;
    unsigned char opened_fn[256] = {0}; /* per open block (up to 256 deep): a function? */
    save_shape shape = SAVE_AS_IS;
    while (*p) {
        if (p[0] == '-' && p[1] == '-') { /* comment */
            const char *end = p[2] == '[' ? skip_long_bracket(p + 2) : NULL;
            if (end) p = end;
            else while (*p && *p != '\n') p++;
        } else if (*p == '[' && skip_long_bracket(p)) {
            p = skip_long_bracket(p);
        } else if (*p == '"' || *p == '\'') {
            char quote = *p++;
            while (*p && *p != quote) p += p[0] == '\\' && p[1] ? 2 : 1;
            if (*p) p++;
        } else if (p[0] == ':' && p[1] == ':') {
            if (depth == 0) shape = OWN_BLOCK;
            p += 2;
        } else if (is_ident_char(*p)) {
            const char *w = p;
            while (is_ident_char(*p) || (*p == '.' && w[0] >= '0' && w[0] <= '9')) p++;
            size_t n = (size_t)(p - w);
#define IS(kw) (n == sizeof kw - 1 && memcmp(w, kw, n) == 0)
            if (IS("function") || IS("do") || IS("if") || IS("repeat")) {
                bool fn = IS("function");
                if (depth >= 0 && depth < 256) opened_fn[depth] = fn;
                fn_depth += fn;
                depth++;
            } else if (IS("end") || IS("until")) {
                depth--;
                if (depth >= 0 && depth < 256 && opened_fn[depth]) fn_depth--;
            } else if (IS("return") && fn_depth == 0) {
                return OWN_FUNCTION;
            } else if (IS("local") && depth == 0) {
                shape = OWN_BLOCK;
            }
#undef IS
        } else {
            p++;
        }
    }
    return shape;
}

static char *joined(const char *fmt, const char *body) {
    size_t n = strlen(fmt) + strlen(body) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, fmt, body);
    return s;
}

static char *commented_out(const char *body) {
    size_t lines = 1;
    for (const char *c = body; *c; c++) lines += *c == '\n';
    size_t n = strlen(body) + 3 * lines + 1;
    char *s = malloc(n), *o = s;
    if (s == NULL) return NULL;
    o += sprintf(o, "-- ");
    for (const char *c = body; *c; c++) {
        *o++ = *c;
        if (*c == '\n') o += sprintf(o, "-- ");
    }
    *o = '\0';
    return s;
}

/* printed: the REPL printed the values the input gave. */
static char *save_code(lua_State *L, const char *typed, bool is_expr, bool printed) {
    const char *body = typed[0] == '=' ? typed + 1 : typed;
    if (help_called) return commented_out(typed);
    if (printed && is_expr) /* a newline before ')' ends a trailing comment */
        return joined(strstr(body, "--") ? "print(%s\n)" : "print(%s)", body);
    if (printed) return joined("print((function(...)\n%s\nend)())", body);
    if (is_expr) { /* values the REPL did not print: a call that returned none, or print failed */
        int st = luaL_loadbufferx(L, body, strlen(body), "=stdin", "t");
        lua_pop(L, 1);
        if (st != LUA_OK) return joined("do local _ = %s\nend", body);
    }
    switch (needs_own_scope(body)) {
    case OWN_FUNCTION: /* the ";" keeps the line before from being read as a call of this one */
        return joined(";(function(...)\n%s\nend)(...)", body);
    case OWN_BLOCK: return joined("do\n%s\nend", body);
    default: return strdup(body);
    }
}

static void print_poison_hint(lua_State *L, const char *msg) {
    (void)L;
    if ((msg && strstr(msg, "context poisoned")) || gl_poisoned_reason()) {
        printf("hint: the CUDA context is poisoned; every later GPU call fails. Type :restart to start a\n"
               "      fresh gpulab that replays the %d input%s that succeeded.\n",
               session.n, session.n == 1 ? "" : "s");
        fflush(stdout);
    }
}

/* Runs the compiled chunk on top, leaving what it returns (lua(1) prints the results of any
 * chunk, `return 42` too). Returns the status (an error has been reported and nothing is left);
 * *nresults: how many values it returned. */
static int run_chunk(lua_State *L, int *nresults) {
    int base = lua_gettop(L) - 1;
    *nresults = 0;
    int st = gl_docall(L, 0, LUA_MULTRET);
    if (st != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        char *copy = msg ? strdup(msg) : NULL;
        gl_report(L, st);
        print_poison_hint(L, copy);
        free(copy);
        return st;
    }
    *nresults = lua_gettop(L) - base;
    return LUA_OK;
}

/* ---- one input ---------------------------------------------------------------------------------
 * Compiling and printing run inside lua_pcall, so no error (not even a memory error) can leave the
 * loop with the terminal or the history in a bad state. The chunk itself runs from the loop's own
 * level (gl_docall protects it), so its traceback ends as lua(1)'s does. */
typedef struct {
    const char *chunk, *code; /* code: for a replayed input, the statement to run */
    bool first, is_expr;
    chunk_state state;        /* out */
} step_request;

/* Protected: leaves the compiled function as its result, or reports the syntax error. */
static int compile_step(lua_State *L) {
    step_request *rq = lua_touserdata(L, 1);
    lua_settop(L, 0);
    if (rq->code) { /* replaying: the statement saved for the input */
        int st = gl_loadbuffer_text(L, rq->code, strlen(rq->code), "=replay");
        rq->state = st == LUA_OK ? CHUNK_READY : CHUNK_ERROR;
    } else {
        rq->state = compile_input(L, rq->chunk, rq->first, &rq->is_expr);
    }
    if (rq->state == CHUNK_READY) return 1;
    if (rq->state == CHUNK_ERROR) gl_report(L, LUA_ERRSYNTAX);
    return 0;
}

/* Protected: prints its arguments as the REPL does. */
static int print_step(lua_State *L) {
    print_values(L, lua_gettop(L));
    return 0;
}

static chunk_state run_step(lua_State *L, step_request *rq) {
    int top = lua_gettop(L);
    rq->state = CHUNK_ERROR;
    rq->is_expr = false;
    if (!lua_checkstack(L, 4)) return CHUNK_ERROR;
    lua_pushcfunction(L, compile_step);
    lua_pushlightuserdata(L, rq);
    int st = lua_pcall(L, 1, 1, 0);
    if (st != LUA_OK || rq->state != CHUNK_READY) {
        if (st != LUA_OK) gl_report(L, st), rq->state = CHUNK_ERROR;
        lua_settop(L, top);
        return rq->state;
    }
    int n;
    help_called = false;
    if (run_chunk(L, &n) != LUA_OK) {
        lua_settop(L, top);
        return rq->state = CHUNK_ERROR;
    }
    if (rq->code) { /* replayed: its output was shown the first time */
        session_add(rq->chunk, rq->code);
    } else {
        bool printed = false;
        if (n > 0) {
            lua_pushcfunction(L, print_step);
            lua_insert(L, -n - 1);
            int st = lua_pcall(L, n, 0, 0);
            if (st != LUA_OK) gl_report(L, LUA_ERRRUN);
            printed = st == LUA_OK && !print_failed;
        }
        char *code = save_code(L, rq->chunk, rq->is_expr, printed);
        if (code) session_add(rq->chunk, code);
        free(code);
    }
    lua_settop(L, top);
    return CHUNK_READY;
}

/* ---- replay (after :restart) ------------------------------------------------------------------
 * The file starts with REPLAY_MAGIC, then holds per input: "<typed length> <code length>\n<typed>
 * <code>\n". GPULAB_REPLAY is only an environment variable: a file that does not look like one
 * :restart wrote (name, owner, single link, first line) is neither replayed nor deleted. */
#define REPLAY_MAGIC "gpulab replay file 1\n"
#define REPLAY_PREFIX "gpulab-replay-"

static bool write_replay(FILE *f) {
    fputs(REPLAY_MAGIC, f);
    for (int i = 0; i < session.n; i++) {
        const input *in = &session.items[i];
        fprintf(f, "%zu %zu\n%s%s\n", strlen(in->typed), strlen(in->code), in->typed, in->code);
    }
    return !ferror(f);
}

static char *read_exact(FILE *f, size_t n) {
    if (n > (size_t)64 << 20) return NULL;
    char *s = malloc(n + 1);
    if (s == NULL) return NULL;
    if (fread(s, 1, n, f) != n) {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    return s;
}

/* Opens the replay file if it is one :restart wrote; *st gets its identity. */
static FILE *open_replay_file(const char *path, struct stat *st) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, REPLAY_PREFIX, strlen(REPLAY_PREFIX)) != 0) return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_uid != getuid() || st->st_nlink != 1) {
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        close(fd);
        return NULL;
    }
    char magic[sizeof REPLAY_MAGIC];
    if (fread(magic, 1, sizeof magic - 1, f) != sizeof magic - 1 || memcmp(magic, REPLAY_MAGIC, sizeof magic - 1) != 0) {
        fclose(f);
        return NULL;
    }
    return f;
}

/* Deletes the replay file, only if the name still refers to the file we read. */
static void remove_replay_file(const char *path, const struct stat *read) {
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_dev == read->st_dev && now.st_ino == read->st_ino) unlink(path);
}

static void replay_inputs(lua_State *L, const char *path) {
    struct stat id;
    FILE *f = open_replay_file(path, &id);
    if (f == NULL) {
        fprintf(stderr, "%s: GPULAB_REPLAY=%s is not a replay file written by :restart; nothing replayed, "
                        "the file is left as it is\n", gl_progname, path);
        return;
    }
    /* the replayed inputs ran before: their output is not shown again */
    fflush(stdout);
    int saved_stdout = dup(STDOUT_FILENO);
    FILE *null = fopen("/dev/null", "w");
    if (null && saved_stdout >= 0) dup2(fileno(null), STDOUT_FILENO);
    int done = 0, failed = 0;
    size_t tlen, clen;
    while (fscanf(f, "%zu %zu", &tlen, &clen) == 2 && fgetc(f) == '\n') {
        char *typed = read_exact(f, tlen), *code = read_exact(f, clen);
        fgetc(f);
        if (typed && code) {
            step_request rq = {typed, code, false, false, CHUNK_ERROR};
            if (run_step(L, &rq) == CHUNK_READY) done++; else failed++;
        }
        free(typed);
        free(code);
    }
    fclose(f);
    fflush(stdout);
    if (saved_stdout >= 0) {
        dup2(saved_stdout, STDOUT_FILENO);
        close(saved_stdout);
    }
    if (null) fclose(null);
    remove_replay_file(path, &id);
    printf("replayed %d input%s", done, done == 1 ? "" : "s");
    if (failed) printf(" (%d failed again)", failed);
    printf("\n");
    fflush(stdout);
}

/* ---- help(x) ------------------------------------------------------------------------------------
 * The API reference entry of a function, object or name, from docs/api.lua (lua/gpulab/help.lua).
 * The module is required on the first call, so a session that never asks reads nothing. A global
 * `help` the user (or LUA_INIT) defined first is left alone. */
static const char help_source[] =
    "local require, mark = ...\n"
    "return function(...) mark() return require('gpulab.help').help(...) end\n";

static int mark_help_called(lua_State *L) {
    (void)L;
    help_called = true;
    return 0;
}

static void install_help(lua_State *L) {
    int t = lua_getglobal(L, "help");
    lua_pop(L, 1);
    if (t != LUA_TNIL) return;
    if (luaL_loadbufferx(L, help_source, sizeof help_source - 1, "=repl help", "t") != LUA_OK) {
        lua_pop(L, 1);
        return;
    }
    lua_getglobal(L, "require");
    lua_pushcfunction(L, mark_help_called);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        lua_pop(L, 1);
        return;
    }
    lua_setglobal(L, "help");
}

/* ---- REPL commands ------------------------------------------------------------------------------ */

static void cmd_help(void) {
    printf("Type Lua statements or expressions; expressions (also \"=expr\") print their values.\n"
           "An unfinished chunk continues on the next line (prompt \"" PROMPT_MORE "\"; _PROMPT and _PROMPT2 set\n"
           "the prompts as in lua(1)).\n"
           "Tab completes globals, fields and methods; Ctrl-C interrupts running code or clears the line;\n"
           "Ctrl-D exits. The `cuda` module is loaded as a global; help(x) prints the reference entry of\n"
           "a function, an object or a name (help(cuda.compile), help(arr), help(\"view\"), help()).\n"
           "Commands:\n"
           "  :help          this text\n"
           "  :history       the inputs of this session that ran without error\n"
           "  :save FILE     write those inputs to FILE as a script gpulab can run: as typed, except\n"
           "                 that inputs whose values were printed become print(...), inputs with\n"
           "                 locals run in do ... end, and help() calls are kept as comments\n"
           "  :restart       start a fresh gpulab process and replay those inputs (use it after a\n"
           "                 sticky CUDA error poisoned the context)\n");
}

static void cmd_history(void) {
    for (int i = 0; i < session.n; i++) {
        const char *t = session.items[i].typed;
        printf("%4d  ", i + 1);
        for (const char *c = t; *c; c++) { /* continuation lines line up under the first */
            putchar(*c);
            if (*c == '\n') fputs("      ", stdout);
        }
        putchar('\n');
    }
    if (session.n == 0) printf("(no successful inputs yet)\n");
}

static void cmd_save(lua_State *L, const char *arg) {
    while (*arg == ' ' || *arg == '\t') arg++;
    size_t len = strlen(arg);
    while (len > 0 && (arg[len - 1] == ' ' || arg[len - 1] == '\t')) len--;
    if (len == 0) {
        printf(":save needs a file name\n");
        return;
    }
    char file[PATH_MAX];
    if (len >= sizeof file) {
        printf(":save: the file name is longer than %d bytes\n", PATH_MAX - 1);
        return;
    }
    memcpy(file, arg, len);
    file[len] = '\0';
    FILE *f = fopen(file, "w");
    if (f == NULL) {
        printf(":save: cannot write %s: %s\n", file, strerror(errno));
        return;
    }
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
    fprintf(f, "-- gpulab session saved %s; run it with: gpulab %s\n"
               "-- The inputs that ran without error, in order. Values the REPL printed are printed\n"
               "-- with print(); inputs with locals run in do ... end, inputs that return as a function\n"
               "-- called in place; help() calls are comments.\n",
            when, file);
    for (int i = 0; i < session.n; i++) fprintf(f, "%s\n", session.items[i].code);
    bool ok = !ferror(f);
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        printf(":save: writing %s failed: %s\n", file, strerror(errno));
        return;
    }
    printf("saved %d input%s to %s\n", session.n, session.n == 1 ? "" : "s", file);
    if (!lua_checkstack(L, 1)) return;
    if (luaL_loadfilex(L, file, "t") != LUA_OK) /* the rules above make this a bug in gpulab */
        printf(":save: warning: %s does not compile: %s\n", file, lua_tostring(L, -1));
    lua_pop(L, 1);
}

static void cmd_restart(EditLine *el, History *h) {
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" REPLAY_PREFIX "XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL || !write_replay(f) || fclose(f) != 0) {
        printf(":restart: cannot write the inputs to replay (%s): %s\n", path, strerror(errno));
        if (fd >= 0) unlink(path);
        return;
    }
    if (h) history_save(h);
    printf("restarting gpulab (%d input%s to replay)\n", session.n, session.n == 1 ? "" : "s");
    fflush(stdout);
    if (el) el_end(el); /* gives the terminal its settings back */
    setenv("GPULAB_REPLAY", path, 1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGINT, SIG_DFL);
    if (gl_argv) execv("/proc/self/exe", gl_argv);
    fprintf(stderr, "%s: :restart: cannot execute /proc/self/exe: %s\n", gl_progname, strerror(errno));
    unlink(path);
    exit(EXIT_FAILURE); /* the editor is gone; the session cannot continue */
}

/* Handles a ":command" line; returns false for a line that is not one. */
static bool run_command(lua_State *L, const char *line, EditLine *el, History *h) {
    if (line[0] != ':' || line[1] == ':') return false; /* "::label::" is Lua */
    if (strcmp(line, ":help") == 0) cmd_help();
    else if (strcmp(line, ":history") == 0) cmd_history();
    else if (strncmp(line, ":save", 5) == 0 && (line[5] == ' ' || line[5] == '\0')) cmd_save(L, line + 5);
    else if (strcmp(line, ":restart") == 0) cmd_restart(el, h);
    else printf("unknown command %s (:help lists the commands)\n", line);
    fflush(stdout);
    return true;
}

/* ---- the terminal on every way out ------------------------------------------------------------
 * libedit puts the terminal in raw mode only inside el_gets. A signal that ends gpulab there
 * (SIGTERM, SIGHUP, SIGQUIT) and exit() get the settings from before the REPL back. */
static struct termios saved_termios;
static bool termios_saved;
static const int fatal_signals[] = {SIGTERM, SIGHUP, SIGQUIT};
static struct sigaction old_fatal[3];

static void restore_terminal(void) {
    if (termios_saved) tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
}

static void on_fatal_signal(int sig) {
    restore_terminal();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void guard_terminal(void) {
    static bool registered;
    if (tcgetattr(STDIN_FILENO, &saved_termios) != 0) return;
    termios_saved = true;
    if (!registered) registered = atexit(restore_terminal) == 0;
    struct sigaction sa = {.sa_handler = on_fatal_signal};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) sigaction(fatal_signals[i], &sa, &old_fatal[i]);
}

static void unguard_terminal(void) {
    if (!termios_saved) return;
    for (int i = 0; i < 3; i++) sigaction(fatal_signals[i], &old_fatal[i], NULL);
    termios_saved = false;
}

/* ---- the loop ------------------------------------------------------------------------------------ */

static char *prompt_text; /* _PROMPT / _PROMPT2 as a string, or NULL for the default */
static bool prompt_first = true;

static char *prompt_fn(EditLine *el) {
    (void)el;
    if (prompt_text) return prompt_text;
    return (char *)(prompt_first ? PROMPT : PROMPT_MORE);
}

/* As lua(1): nil is the default prompt; any other value is shown through tostring (its
 * __tostring included). */
static int fetch_prompt(lua_State *L) {
    if (lua_getglobal(L, lua_toboolean(L, 1) ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) return 0;
    luaL_tolstring(L, -1, NULL);
    return 1;
}

/* With several devices, the default prompt names the current one ("gpulab[1]> "), once a GPU
 * call has opened the driver (the bindings' registry hook answers nothing before). */
static void device_prompt(lua_State *L) {
    int top = lua_gettop(L);
    if (lua_getfield(L, LUA_REGISTRYINDEX, "gpulab.prompt_device") == LUA_TFUNCTION &&
        lua_pcall(L, 0, 1, 0) == LUA_OK && lua_isinteger(L, -1)) {
        char buf[48];
        snprintf(buf, sizeof buf, "gpulab[%d]> ", (int)lua_tointeger(L, -1));
        prompt_text = strdup(buf);
    }
    lua_settop(L, top);
}

/* lua(1)'s prompts: the global _PROMPT (first line) or _PROMPT2 (more lines) when not nil, through
 * tostring. Read protected: an __index on _G or a __tostring that fails gives the default. */
static void update_prompt(lua_State *L, bool first) {
    free(prompt_text);
    prompt_text = NULL;
    prompt_first = first;
    int top = lua_gettop(L);
    if (!lua_checkstack(L, 3)) return;
    lua_pushcfunction(L, fetch_prompt);
    lua_pushboolean(L, first);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
        const char *p = lua_tostring(L, -1);
        if (p) prompt_text = strdup(p);
    }
    lua_settop(L, top);
    if (prompt_text == NULL && first) device_prompt(L);
}

static unsigned char interrupt_key(EditLine *el, int ch) {
    (void)el;
    (void)ch;
    line_interrupted = true;
    return CC_NEWLINE;
}

static EditLine *open_editor(History **hp) {
    EditLine *el = el_init(gl_progname, stdin, stdout, stderr);
    History *h = history_init();
    if (el == NULL || h == NULL) return NULL;
    HistEvent ev;
    history(h, &ev, H_SETSIZE, 1000);
    history(h, &ev, H_SETUNIQUE, 1);
    find_history_path();
    if (history_path[0]) history(h, &ev, H_LOAD, history_path); /* a missing file is fine */
    el_set(el, EL_EDITOR, "emacs");
    el_set(el, EL_PROMPT, prompt_fn);
    el_set(el, EL_HIST, history, h);
    el_set(el, EL_GETCFN, read_key);
    /* the wide-string form: the narrow EL_ADDFN copies its strings and never frees them */
    el_wset(el, EL_ADDFN, L"gpulab-complete", L"complete a global, field or method", complete);
    el_set(el, EL_BIND, "^I", "gpulab-complete", NULL);
    el_wset(el, EL_ADDFN, L"gpulab-interrupt", L"drop the line being typed", interrupt_key);
    el_set(el, EL_BIND, "^C", "gpulab-interrupt", NULL);
    el_source(el, NULL); /* the user's ~/.editrc */
    *hp = h;
    return el;
}

/* Reads one line (without its newline) into a malloc'd string; NULL at end of input. */
static char *read_tty_line(EditLine *el) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    install_prompt_handler();
    sigprocmask(SIG_BLOCK, &block, &old);
    unblocked_mask = old;
    sigdelset(&unblocked_mask, SIGINT);
    sigint_seen = 0;
    line_interrupted = false;
    fflush(stdout);
    int count = 0;
    const char *line = el_gets(el, &count);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (line == NULL || count <= 0) return NULL;
    char *copy = strdup(line);
    if (copy) copy[strcspn(copy, "\n")] = '\0';
    return copy;
}

/* Input that is not a terminal (-i with a pipe): lua(1)'s plain reader, the prompt on stdout and
 * no history. Ctrl-C (from the terminal gpulab runs in) drops the line. */
static char *read_plain_line(void) {
    install_prompt_handler(); /* no SA_RESTART: the read returns at Ctrl-C */
    sigint_seen = 0;
    line_interrupted = false;
    fputs(prompt_fn(NULL), stdout);
    fflush(stdout);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getline(&buf, &cap, stdin);
    if (n < 0) {
        free(buf);
        if (!sigint_seen) return NULL;
        clearerr(stdin);
        line_interrupted = true;
        return strdup("");
    }
    if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = '\0';
    return buf;
}

static char *append_line(char *chunk, const char *line) {
    size_t a = chunk ? strlen(chunk) : 0, b = strlen(line);
    char *s = realloc(chunk, a + b + 2);
    if (s == NULL) return chunk;
    if (a) s[a++] = '\n';
    memcpy(s + a, line, b + 1);
    return s;
}

int gl_repl(lua_State *L, const char *replay) {
    bool tty = isatty(STDIN_FILENO);
    /* Piped input is read a byte at a time: :restart execs a new gpulab on the same stdin, and
       lines stdio had read ahead into its buffer would be lost with this process. */
    if (!tty) setvbuf(stdin, NULL, _IONBF, 0);
    char *replay_path = replay && *replay ? strdup(replay) : NULL;
    unsetenv("GPULAB_REPLAY"); /* for this process only, never for its children */
    setlocale(LC_CTYPE, ""); /* libedit edits in the terminal's character set */
    completion_state = L;
    load_pretty_printer(L);
    install_help(L);
    History *h = NULL;
    EditLine *el = NULL;
    if (tty) {
        guard_terminal();
        el = open_editor(&h);
        if (el == NULL) {
            unguard_terminal();
            free(replay_path);
            fprintf(stderr, "%s: cannot start the line editor\n", gl_progname);
            return EXIT_FAILURE;
        }
    }
    bool outer_prefix = gl_report_progname;
    gl_report_progname = false; /* lua(1)'s REPL reports errors without the program name */
    if (replay_path) replay_inputs(L, replay_path);
    free(replay_path);

    char *chunk = NULL;
    for (;;) {
        update_prompt(L, chunk == NULL);
        char *line = tty ? read_tty_line(el) : read_plain_line();
        if (line == NULL) {
            putchar('\n');
            break; /* Ctrl-D */
        }
        if (line_interrupted) { /* Ctrl-C: forget the line and any unfinished chunk */
            if (!tty) putchar('\n');
            free(line);
            free(chunk);
            chunk = NULL;
            continue;
        }
        if (h && line[strspn(line, " \t")] != '\0') {
            HistEvent ev;
            history(h, &ev, H_ENTER, line);
            history_save(h);
        }
        if (chunk == NULL && run_command(L, line, el, h)) {
            free(line);
            continue;
        }
        bool first = chunk == NULL;
        chunk = append_line(chunk, line);
        free(line);
        if (chunk[strspn(chunk, " \t\n")] == '\0') { /* nothing typed */
            free(chunk);
            chunk = NULL;
            continue;
        }
        step_request rq = {chunk, NULL, first, false, CHUNK_ERROR};
        if (run_step(L, &rq) == CHUNK_INCOMPLETE) continue;
        free(chunk);
        chunk = NULL;
    }
    free(chunk);
    free(prompt_text);
    prompt_text = NULL;
    gl_report_progname = outer_prefix;
    if (el) {
        history_save(h);
        el_end(el);
        history_end(h);
    }
    unguard_terminal();
    session_free();
    return EXIT_SUCCESS;
}
