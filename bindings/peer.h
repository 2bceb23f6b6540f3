/*
 * peer.h — devices sharing memory (peer.c): the peer-access table, the device rule of arrays
 * used by work on the current device, and the rules of copies between devices.
 */
#ifndef GPULAB_PEER_H
#define GPULAB_PEER_H

#include "objects.h"

/* The device rule of a copy (dst/src: the device arrays, NULL for host ones). Returns 1 for a
 * copy between two devices (a peer copy: one of them must be current), 0 otherwise (every
 * device array on the current device or reachable from it). Raises otherwise. */
int gl_copy_devices(lua_State *L, const gl_array *dst, const gl_array *src, const char *fn);

void gl_open_peer(lua_State *L);  /* cuda.peer */
void gl_open_nccl(lua_State *L);  /* cuda.nccl (nccl.c) */

#endif
