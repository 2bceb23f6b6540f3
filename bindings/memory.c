/*
 * memory.c — what every memory function stands on: the allocation behind an array and all its
 * views (gl_mem_block), freed once the last of them is released and the work queued on each has
 * completed; option tables read raw, so that no script code runs while an array is being worked
 * on; and the registration of cuda.array, cuda.host and cuda.compare (memory.h lists the files).
 */
#include <math.h>
#include <stdlib.h>

#include "context.h"
#include "driver.h"
#include "errors.h"
#include "lifetime.h"
#include "memory.h"
#include "objects.h"
#include "register.h"

/* ------------------------------------------------------------------------------------------
 * Options, read raw: an __index (or __pairs) on an options table never runs, so nothing a
 * script defines can free an array half-way through a call. The value goes on the stack top.
 * ------------------------------------------------------------------------------------------ */
int gl_raw_field(lua_State *L, int t, const char *name) {
    lua_pushstring(L, name);
    return lua_rawget(L, t);
}

lua_Integer gl_raw_opt_int(lua_State *L, int t, const char *name, lua_Integer def, const char *fn) {
    int ty = gl_raw_field(L, t, name);
    lua_Integer v = def;
    if (ty != LUA_TNIL) {
        int isint = 0;
        v = lua_tointegerx(L, -1, &isint);
        if (!isint || ty != LUA_TNUMBER)
            gl_fielderror(L, t, fn, name, "integer expected, got %s",
                          ty == LUA_TNUMBER ? lua_tostring(L, -1) : gl_typename(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

double gl_raw_opt_num(lua_State *L, int t, const char *name, double def, const char *fn) {
    int ty = gl_raw_field(L, t, name);
    double v = def;
    if (ty != LUA_TNIL) {
        if (ty != LUA_TNUMBER)
            gl_fieldtypeerror(L, t, fn, name, -1, "number");
        v = lua_tonumber(L, -1);
        if (isnan(v)) gl_fielderror(L, t, fn, name, "number expected, got NaN");
    }
    lua_pop(L, 1);
    return v;
}

bool gl_raw_opt_bool(lua_State *L, int t, const char *name, bool def, const char *fn) {
    int ty = gl_raw_field(L, t, name);
    bool v = def;
    if (ty != LUA_TNIL) {
        if (ty != LUA_TBOOLEAN)
            gl_fieldtypeerror(L, t, fn, name, -1, "boolean");
        v = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

/* ------------------------------------------------------------------------------------------
 * Releasing
 * ------------------------------------------------------------------------------------------ */
gl_mem_block *gl_block_new(gl_block_kind kind, size_t nbytes) {
    gl_mem_block *b = calloc(1, sizeof *b);
    if (b) {
        b->kind = kind;
        b->nbytes = nbytes;
        b->holders = b->refs = 1;
    }
    return b;
}

void gl_block_hold(gl_mem_block *b) {
    b->holders++;
    b->refs++;
}

/* Device memory is freed with its own device's context current (another device may be current
 * by then); the current context is put back. */
static void free_in_own_context(gl_mem_block *b) {
    CUcontext own = gl_device_context_retained(b->device), cur = NULL;
    bool swap = own && gl_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != own &&
                gl_cu.cuCtxSetCurrent(own) == CUDA_SUCCESS;
    gl_cu.cuMemFree(b->dev);
    if (swap) gl_cu.cuCtxSetCurrent(cur);
}

/* A gl_release_fn: drops one reference once the releasing object's work is done. */
static void block_unref(void *handle, uintptr_t extra) {
    (void)extra;
    gl_mem_block *b = handle;
    if (--b->refs > 0) return;
    if (b->kind == GL_BLOCK_PAGEABLE) free(b->host);
    else if (gl_context_usable() && b->kind == GL_BLOCK_DEVICE) free_in_own_context(b);
    else if (gl_context_usable()) gl_cu.cuMemFreeHost(b->host);
    free(b);
}

static void release_nothing(void *handle, uintptr_t extra) { (void)handle; (void)extra; }

/* One holder of b lets go; its reference is dropped once the work in u is complete (without a
 * usable context at once: block_unref runs without one). */
void gl_block_release(gl_mem_block *b, gl_use *u) {
    if (b == NULL) { /* memory gpulab did not allocate: only the recorded uses go */
        gl_release(u, release_nothing, NULL, 0);
        return;
    }
    if (--b->holders == 0) {
        if (b->kind == GL_BLOCK_DEVICE) gl_live.device_bytes -= (long long)b->nbytes;
        else if (b->kind == GL_BLOCK_PINNED) gl_live.pinned_bytes -= (long long)b->nbytes;
    }
    if (b->kind == GL_BLOCK_PAGEABLE) { /* pageable memory is only ever used synchronously */
        gl_use_forget(u); /* a graph that holds the array still marks it when launched */
        block_unref(b, 0);
        return;
    }
    gl_release(u, block_unref, b, 0);
}

void gl_open_memory(lua_State *L) {
    gl_release_runs_without_context(block_unref);
    gl_open_arrays(L);
    gl_open_hosts(L);
    gl_open_hostops(L); /* adds to cuda.host: after gl_open_hosts */
    gl_open_compare(L);
}
