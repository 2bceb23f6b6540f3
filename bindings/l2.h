/*
 * l2.h — L2 residency (l2.c): the access-policy window table shared by the l2_window launch key
 * (launch.c) and s:set_l2_window, and cuda.l2_persisting / cuda.l2_reset.
 */
#ifndef GPULAB_L2_H
#define GPULAB_L2_H

#include <cuda.h>
#include <lua.h>

#include "module.h"
#include "objects.h"

/* A window read from {array=d | ptr=, bytes=, hit_ratio=1, hit="persisting", miss="streaming"}. */
typedef struct gl_l2_window {
    CUaccessPolicyWindow w;
    gl_array *array; /* array=: the array checked; NULL for ptr= */
    int array_at;    /* the stack slot holding that array (0 for ptr=), left there by the reader: the
                        caller's stack keeps it alive until the caller cuts its stack below it (the
                        table is the script's, and a finalizer may take the array out of it) */
} gl_l2_window;

/* Reads and checks the window table at stack index `value` for the device `d`: the keys, array=
 * (alive, on the current device) or ptr= with bytes=, bytes against the array (a view's bounds)
 * and the device's largest window, hit_ratio in [0, 1], hit and miss names (a miss cannot
 * persist). Errors name argument `arg` of `fn`, and field `field` when it is not NULL (the launch
 * key "l2_window"); with NULL the table is the argument itself. The table is walked raw: nothing
 * here runs Lua code, so the array found stays what was checked. The values read stay on the
 * stack (out->array_at names the array's slot). */
void gl_read_l2_window(lua_State *L, int arg, int value, const gl_device_limits *d, const char *field,
                       const char *fn, gl_l2_window *out);

/* cuda.l2_persisting, cuda.l2_reset and the stream methods set_l2_window / l2_window: called by
 * gl_open_measure (after the streams are open) with the cuda table on top. */
void gl_open_l2(lua_State *L);

#endif
