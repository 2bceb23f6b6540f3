/*
 * sighold.c — a foreign library's call with SIGINT and SIGTERM held for gpulab (sighold.h).
 *
 * Measured with NVRTC 13.0: nvrtcCompileProgram calls signal(SIGINT, SIG_IGN) and, unless the
 * previous action was SIG_IGN, installs a handler of its own; it installs one for SIGTERM
 * unconditionally, and puts the previous actions back when the compile ends. Those handlers call
 * exit(4) from signal context: a Ctrl-C mid-compile ended gpulab (a REPL session too) with the
 * exit handlers run inside a signal handler, in the middle of the compile; the sanitizer build,
 * whose exit handlers include LeakSanitizer's whole-heap check, was seen to hang there.
 *
 * So the call runs with both signals blocked in the calling thread (threads it starts inherit
 * that) and SIGINT ignored. Blocked is not enough on its own, because a signal pending when
 * anyone sets SIG_IGN is discarded, and NVRTC does exactly that when it restores the action:
 * a helper thread waits for them with sigtimedwait, which takes a pending one at once, and the
 * call's caller raises each again once the old actions and mask are back. A thread of another
 * library that does not block them may still be picked by the kernel during the call: SIGINT is
 * then dropped (press Ctrl-C again), SIGTERM meets NVRTC's handler. So is a SIGINT that arrives in
 * the instant NVRTC sets SIG_IGN, before the woken catcher has taken it (more likely on a loaded
 * machine, where the catcher waits for a CPU).
 */
#define _GNU_SOURCE /* pthread_sigqueue */
#include "sighold.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct catcher {
    pthread_t thread;
    sigset_t set;
    volatile int done; /* set (atomically) once the call has returned */
    int caught_int, caught_term;
} catcher;

/* The caller wakes the catcher with pthread_sigqueue(SIGINT) carrying the catcher's address: a
 * queued signal from this process (SI_QUEUE), which no Ctrl-C (SI_KERNEL) or kill(1) (SI_USER)
 * is. Should the wake-up be lost, the catcher still sees `done` within a second. */
static bool is_wake_up(const catcher *c, const siginfo_t *si) {
    return si->si_code == SI_QUEUE && si->si_pid == getpid() && si->si_value.sival_ptr == (void *)c;
}

static void *catcher_main(void *arg) {
    catcher *c = arg;
    while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
        siginfo_t si;
        struct timespec second = {1, 0};
        int sig = sigtimedwait(&c->set, &si, &second);
        if (sig == SIGINT && is_wake_up(c, &si)) break;
        if (sig == SIGINT) c->caught_int++;
        if (sig == SIGTERM) c->caught_term++;
    }
    return NULL;
}

void gl_call_holding_signals(gl_held_call *call, void *arg) {
    catcher c;
    memset(&c, 0, sizeof c);
    sigemptyset(&c.set);
    sigaddset(&c.set, SIGINT);
    sigaddset(&c.set, SIGTERM);
    sigset_t old_mask;
    pthread_sigmask(SIG_BLOCK, &c.set, &old_mask);
    struct sigaction ignore, old_int;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ignore, &old_int);
    /* the catcher takes no other signal: it starts with every one blocked. Without it the two
     * stay blocked here, and one is still delivered after the call unless the library's own
     * SIG_IGN discarded it. */
    sigset_t all, held_mask;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &held_mask);
    bool catching = pthread_create(&c.thread, NULL, catcher_main, &c) == 0;
    pthread_sigmask(SIG_SETMASK, &held_mask, NULL);
    call(arg);
    if (catching) {
        __atomic_store_n(&c.done, 1, __ATOMIC_RELEASE);
        pthread_sigqueue(c.thread, SIGINT, (union sigval){.sival_ptr = &c});
        pthread_join(c.thread, NULL);
    }
    sigaction(SIGINT, &old_int, NULL);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL); /* one still pending is delivered here */
    /* the ones the catcher took go to this thread's handlers now, as if they arrived just now */
    if (c.caught_int) raise(SIGINT);
    if (c.caught_term) raise(SIGTERM);
}
