/*
 * peer.h — devices sharing memory (peer.c): the peer-access table, the device rule of arrays
 * used by work on the current device, and the rules of copies between devices.
 */
#ifndef GPULAB_PEER_H
#define GPULAB_PEER_H

#include "objects.h"

/* True when work in device `from`'s context may touch memory of device `to` (the same device,
 * or peer access enabled through cuda.peer). */
bool gl_peer_enabled(int from, int to);
/* Raises "fn: argument #n: the cuda.array belongs to device X, but device Y is current ..."
 * unless the array is on the current device or the current device has peer access to it. */
void gl_check_array_on_device(lua_State *L, const gl_array *a, const char *fn, int argno);
/* The device rule of a copy (dst/src: the device arrays, NULL for host ones). Returns 1 for a
 * copy between two devices (a peer copy: one of them must be current), 0 otherwise (every
 * device array on the current device or reachable from it). Raises otherwise. */
int gl_copy_devices(lua_State *L, const gl_array *dst, const gl_array *src, const char *fn);

void gl_open_peer(lua_State *L);  /* cuda.peer */
void gl_open_nccl(lua_State *L);  /* cuda.nccl (nccl.c) */

#endif
