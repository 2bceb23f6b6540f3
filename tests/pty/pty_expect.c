/*
 * pty_expect — drives a program through a real pseudo-terminal from a small script, for the
 * REPL tests:  pty_expect SCRIPT COMMAND [ARGS...]
 *
 * Script lines (text after the keyword; C escapes \n \r \t \\ \xHH and ${ENV} are expanded):
 *   send TEXT        write TEXT to the terminal (what the user types; \r is Enter, \x03 Ctrl-C)
 *   input TEXT       wait until the output ends in a prompt ("> ") again and the editor reads
 *                    keys, then send TEXT and Enter
 *   key TEXT         the same without Enter (Tab completion, Ctrl-D at the prompt)
 *   expect TEXT      wait until TEXT appears in the output after the previous match
 *   reject TEXT      fail if TEXT appeared after the previous match (checked when reached)
 *   sleep MS         let the program run for MS milliseconds (output is still collected)
 *   exit CODE        wait for the program to end and compare its exit status
 *   timeout SECONDS  time limit for each later expect/exit (default 10)
 *   # ...            comment
 * SIGINT or SIGTERM (tests/deadline.sh at the test's own deadline) ends the run like a failed
 * step: the step it was at and the output so far are printed.
 * The output is compared with terminal controls removed: carriage returns, bells, backspaces and
 * escape sequences, so "\n3\n" matches the line printed after an input.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static int master_fd = -1;
static pid_t child = -1;
static bool child_done;
static int child_status;

static char *out;        /* normalized output so far */
static size_t out_len, out_cap, matched_to;
static size_t sent_at; /* output length when the last text was sent */
static int esc_state;    /* 0 text, 1 after ESC, 2 inside CSI */
static volatile sig_atomic_t stop_signal; /* SIGINT/SIGTERM received */
static const char *cur_step = "start", *cur_arg = ""; /* the script step being run */

static void out_add(char c) {
    if (out_len + 2 > out_cap) {
        out_cap = out_cap ? out_cap * 2 : 4096;
        out = realloc(out, out_cap);
        if (out == NULL) {
            perror("pty_expect");
            exit(2);
        }
    }
    out[out_len++] = c;
    out[out_len] = '\0';
}

static void normalize(const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (esc_state == 1) { /* ESC [ starts a CSI sequence; other escapes are two bytes */
            esc_state = c == '[' ? 2 : 0;
            continue;
        }
        if (esc_state == 2) {
            if (c >= 0x40 && c <= 0x7e) esc_state = 0;
            continue;
        }
        if (c == 0x1b) esc_state = 1;
        else if (c != '\r' && c != '\a' && c != '\b') out_add((char)c);
    }
}

static void fail(const char *step, const char *arg) {
    fprintf(stderr, "pty_expect: FAILED at `%s %s`\n--- output (controls removed), match point marked <|> ---\n",
            step, arg);
    for (size_t i = 0; i < out_len; i++) {
        if (i == matched_to) fputs("<|>", stderr);
        unsigned char c = (unsigned char)out[i];
        if (c == '\n' || isprint(c)) fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fputs("\n--- end ---\n", stderr);
    if (child > 0 && !child_done) kill(child, SIGKILL);
    exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reap(void) {
    if (!child_done && waitpid(child, &child_status, WNOHANG) == child) child_done = true;
}

static void on_stop_signal(int sig) { stop_signal = sig; }

/* Collects output for up to `ms` milliseconds; returns false once the terminal closed. */
static bool pump(int ms) {
    struct pollfd p = {.fd = master_fd, .events = POLLIN};
    int r = poll(&p, 1, ms);
    if (stop_signal) {
        char why[8400];
        snprintf(why, sizeof why, "%s (interrupted by %s: the test ran past its deadline here)", cur_arg,
                 stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
        fail(cur_step, why);
    }
    if (r <= 0) {
        reap();
        return true;
    }
    char buf[4096];
    ssize_t n = read(master_fd, buf, sizeof buf);
    if (n <= 0) { /* EIO: every slave side closed, the program ended */
        reap();
        return false;
    }
    normalize(buf, (size_t)n);
    return true;
}

/* Expands C escapes and ${NAME} in place; returns the length. */
static size_t expand(const char *in, char *dst, size_t cap) {
    size_t n = 0;
    for (const char *p = in; *p && n + 1 < cap; p++) {
        if (p[0] == '$' && p[1] == '{') {
            const char *end = strchr(p, '}');
            if (end) {
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)(end - p - 2), p + 2);
                const char *v = getenv(name);
                for (; v && *v && n + 1 < cap; v++) dst[n++] = *v;
                p = end;
                continue;
            }
        }
        if (*p != '\\' || p[1] == '\0') {
            dst[n++] = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'n': dst[n++] = '\n'; break;
        case 'r': dst[n++] = '\r'; break;
        case 't': dst[n++] = '\t'; break;
        case 'x': {
            char hex[3] = {p[1], p[1] ? p[2] : 0, 0};
            dst[n++] = (char)strtol(hex, NULL, 16);
            p += 2;
            break;
        }
        default: dst[n++] = *p;
        }
    }
    dst[n] = '\0';
    return n;
}

static bool find_after_match(const char *text, size_t len, size_t *at) {
    if (out_len < matched_to + len) return false;
    const char *hit = memmem(out + matched_to, out_len - matched_to, text, len);
    if (hit == NULL) return false;
    *at = (size_t)(hit - out);
    return true;
}

static void expect_text(const char *text, size_t len, double timeout, const char *step, const char *raw) {
    double deadline = now_s() + timeout;
    size_t at;
    bool open = true;
    while (!find_after_match(text, len, &at)) {
        if (now_s() > deadline || !open) fail(step, raw);
        open = pump(50);
    }
    matched_to = at + len;
}

/* The line editor has taken the terminal out of canonical mode (it reads key by key). */
static bool editor_active(void) {
    struct termios t;
    return tcgetattr(master_fd, &t) == 0 && (t.c_lflag & ICANON) == 0;
}

/* A prompt is output that ends in "> ", came after the last thing sent, and the editor is
 * reading keys (text typed earlier would be echoed twice by the terminal). */
static void wait_for_prompt(double timeout, const char *step, const char *raw) {
    double deadline = now_s() + timeout;
    bool open = true;
    while (!(out_len > sent_at && out_len >= 2 && memcmp(out + out_len - 2, "> ", 2) == 0 &&
             editor_active())) {
        if (now_s() > deadline || !open) fail(step, raw);
        open = pump(50);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pty_expect SCRIPT COMMAND [ARGS...]\n");
        return 2;
    }
    FILE *script = fopen(argv[1], "r");
    if (script == NULL) {
        perror(argv[1]);
        return 2;
    }
    struct winsize ws = {.ws_row = 24, .ws_col = 100};
    child = forkpty(&master_fd, NULL, NULL, &ws);
    if (child < 0) {
        /* some sandboxes have /dev/ptmx but no devpts: nothing to test there, report a skip */
        perror("pty_expect: no pseudo-terminal available (forkpty)");
        return 77;
    }
    if (child == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    struct sigaction stop = {.sa_handler = on_stop_signal}; /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    double timeout = 10;
    char line[8192], arg[8200];
    while (fgets(line, sizeof line, script)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *sp = strchr(line, ' ');
        const char *raw = sp ? sp + 1 : "";
        if (sp) *sp = '\0';
        size_t len = expand(raw, arg, sizeof arg - 1);
        cur_step = line;
        cur_arg = raw;
        bool is_input = strcmp(line, "input") == 0, is_key = strcmp(line, "key") == 0;
        if (is_input || is_key) /* typing before the editor is ready races with its terminal setup */
            wait_for_prompt(timeout, line, raw);
        if (is_input) {
            arg[len++] = '\r';
            arg[len] = '\0';
        }
        if (strcmp(line, "send") == 0 || is_input || is_key) {
            pump(0);
            if (write(master_fd, arg, len) != (ssize_t)len) fail(line, raw);
            sent_at = out_len;
        } else if (strcmp(line, "expect") == 0) {
            expect_text(arg, len, timeout, line, raw);
        } else if (strcmp(line, "reject") == 0) {
            size_t at;
            pump(0);
            if (find_after_match(arg, len, &at)) fail(line, raw);
        } else if (strcmp(line, "sleep") == 0) {
            double until = now_s() + atof(arg) / 1000.0;
            while (now_s() < until) pump(20);
        } else if (strcmp(line, "timeout") == 0) {
            timeout = atof(arg);
        } else if (strcmp(line, "exit") == 0) {
            double deadline = now_s() + timeout;
            while (!child_done) {
                if (now_s() > deadline) fail(line, raw);
                if (!pump(50)) {
                    if (!child_done && waitpid(child, &child_status, 0) == child) child_done = true;
                }
            }
            int want = atoi(arg);
            if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != want) {
                char got[64];
                snprintf(got, sizeof got, "%s (got %s %d)", raw, WIFEXITED(child_status) ? "status" : "signal",
                         WIFEXITED(child_status) ? WEXITSTATUS(child_status) : WTERMSIG(child_status));
                fail(line, got);
            }
        } else {
            fprintf(stderr, "pty_expect: unknown step `%s`\n", line);
            return 2;
        }
    }
    fclose(script);
    if (!child_done) { /* the script did not wait for the end: do not leave the program behind */
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    return 0;
}
