/*
 * fuzz_api.c — random sequences of gpulab API calls with random arguments, against the driver
 * stand-in. The bytes are handed to tests/fuzz/api_driver.lua, which turns them into calls
 * (including use after free, finalizers called by hand and forced collections); errors are
 * expected, crashes and sanitizer reports are findings.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "host.h"

static char *driver_src;
static size_t driver_len;

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = '\0'; *len = (size_t)n; }
    return buf;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    setenv("GPULAB_LIBCUDA", GPULAB_FAKECUDA_PATH, 0);
    setenv("GPULAB_CACHE", "0", 0);
    driver_src = read_all(GPULAB_SOURCE_DIR "/tests/fuzz/api_driver.lua", &driver_len);
    if (!driver_src) { fprintf(stderr, "fuzz_api: cannot read api_driver.lua\n"); abort(); }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lua_State *L = luaL_newstate();
    gl_setup_state(L, "fuzz_api");
    if (luaL_loadbufferx(L, driver_src, driver_len, "@api_driver.lua", "t") != LUA_OK) abort();
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        /* The driver catches every API error itself; an escaping error is a driver bug. */
        fprintf(stderr, "api_driver failed: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_close(L);
    return 0;
}
