/*
 * fuzz_lifetimes.c — interleavings of API calls, metamethods run inside them, finalizers that
 * free, use or resurrect objects, captures, replays and timed-out syncs, against the driver
 * stand-in. The bytes go to tests/fuzz/lifetimes_driver.lua, which makes the calls and, at the
 * end, raises if cuda.stats() is not back at zero; an escaping error, a crash or a sanitizer
 * report is a finding.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "host.h"

static char *driver_src;
static size_t driver_len;

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
                buf[n] = '\0';
                *len = (size_t)n;
            } else {
                free(buf);
                buf = NULL;
            }
        }
    }
    fclose(f);
    return buf;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char busy[64];
    snprintf(busy, sizeof busy, "/tmp/gpulab-fuzz-busy-%ld", (long)getpid());
    setenv("GPULAB_LIBCUDA", GPULAB_FAKECUDA_PATH, 0);
    setenv("GPULAB_CACHE", "0", 0);
    setenv("GPULAB_FAKE_BUSY_FILE", busy, 0);
    driver_src = read_all(GPULAB_SOURCE_DIR "/tests/fuzz/lifetimes_driver.lua", &driver_len);
    if (!driver_src) {
        fprintf(stderr, "fuzz_lifetimes: cannot read lifetimes_driver.lua\n");
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lua_State *L = luaL_newstate();
    gl_setup_state(L, "fuzz_lifetimes");
    if (luaL_loadbufferx(L, driver_src, driver_len, "@lifetimes_driver.lua", "t") != LUA_OK) abort();
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "lifetimes_driver failed: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_close(L);
    return 0;
}
