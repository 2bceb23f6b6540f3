/*
 * sighold.h — running a foreign library's call with Ctrl-C and SIGTERM held for gpulab.
 * NVRTC's front end installs SIGINT and SIGTERM handlers of its own while it compiles, and they
 * call exit(4) from inside the signal handler; a signal that arrives during such a call must
 * reach gpulab's own handlers instead, once the call has returned.
 */
#ifndef GPULAB_SIGHOLD_H
#define GPULAB_SIGHOLD_H

/* The foreign call, with its argument. */
typedef void gl_held_call(void *arg);
/* Calls call(arg) with SIGINT and SIGTERM blocked in this thread and SIGINT ignored (NVRTC then
 * leaves SIGINT alone); a helper thread takes those that arrive meanwhile, and each is raised
 * again once the previous handlers and mask are back (Ctrl-C then raises "interrupted!"). */
void gl_call_holding_signals(gl_held_call *call, void *arg);

#endif
