/*
 * kattr.h — a kernel's function attributes by name and its cluster occupancy (kattr.c), for
 * module.c, which creates kernels and registers their methods.
 */
#ifndef GPULAB_KATTR_H
#define GPULAB_KATTR_H

#include <stdbool.h>

#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>

/* What the driver says about f's clusters: the REQUIRED_CLUSTER_* shape (all 0 when none),
 * CLUSTER_SIZE_MUST_BE_SET and NON_PORTABLE_CLUSTER_SIZE_ALLOWED. A driver or device without
 * clusters (CUDA_ERROR_INVALID_VALUE: before compute capability 9.0) means 0. Raises "fn: ..."
 * on any other driver error. Runs no Lua code. */
void gl_read_cluster_attributes(lua_State *L, CUfunction f, const char *fn, int dims[3],
                                bool *must_be_set, int *nonportable);

/* k:attribute, k:set_attribute, k:attributes, k:max_active_clusters, k:max_cluster_size */
extern const luaL_Reg gl_kernel_attr_methods[];

#endif
