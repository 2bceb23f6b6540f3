/*
 * register.h — how the `cuda` table is assembled (cuda.c): each binding adds its functions and
 * classes to the table at the top of the stack. A new binding adds one line here and one call
 * in luaopen_cuda.
 */
#ifndef GPULAB_REGISTER_H
#define GPULAB_REGISTER_H

#include <lua.h>

void gl_open_driver(lua_State *L);    /* available, version, sync, stats, ...  (driver.c)    */
void gl_open_device(lua_State *L);    /* count, device, device_attributes      (device.c)    */
void gl_open_nvrtc(lua_State *L);     /* compile, compile_file, cache_key      (nvrtc.c)     */
void gl_open_module(lua_State *L);    /* load; module and kernel classes       (module.c)    */
void gl_open_launch(lua_State *L);    /* launch/prepare methods on kernels     (launch.c)    */
void gl_open_memory(lua_State *L);    /* array, host, compare                  (memory.c)    */
void gl_open_stream(lua_State *L);    /* stream, event, graphs, bench          (stream.c)    */
/* measure, stats_of (measure.c); after gl_open_stream: it takes the stream and graph methods
 * it needs from their metatables then, before any script can run. */
void gl_open_measure(lua_State *L);
void gl_open_tensormap(lua_State *L); /* tensormap, tensormap_check            (tensormap.c) */
void gl_open_profile(lua_State *L);   /* profile, profile_available            (profile.c)   */
void gl_open_trace(lua_State *L);     /* trace                                 (trace.c)     */
void gl_open_pcsample(lua_State *L);  /* pcsample, pcsample_available          (pcsample.c)  */
void gl_open_sass(lua_State *L);      /* prog:resources, prog:sass, sass_parse (sass.c)   */
void gl_open_partition(lua_State *L); /* partition; SM partition class       (partition.c) */

#endif
