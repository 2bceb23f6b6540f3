/*
 * module.c — cuda.load(prog | image | path), modules ("cuda.module") and their kernels
 * ("cuda.kernel"): attributes, parameter lists, occupancy and the dynamic shared memory opt-in;
 * attributes by name and cluster occupancy are kattr.c's.
 *
 * A kernel holds its module (uservalue), so dropping the module variable never unloads code a
 * kernel may still launch; unloading goes through gl_release, so queued launches finish first.
 */
#define _GNU_SOURCE
#include "errors.h"
#include "module.h"
#include "check.h"
#include "context.h"
#include "declared.h"
#include "driver.h"
#include "identity.h"
#include "kattr.h"
#include "launchlog.h"
#include "lifetime.h"
#include "objects.h"
#include "options.h"
#include "program.h"
#include "ptx.h"
#include "register.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UV_PTX 1
#define UV_LOWERED 2
#define UV_ORIGIN 3
#define UV_SOURCE 4
#define MODULE_UVS 4
/* a kernel's user values */
#define KUV_MODULE 1
#define KUV_COUNT 1

/* ------------------------------------------------------------------------------------------
 * Modules
 * ------------------------------------------------------------------------------------------ */
static gl_module *check_module(lua_State *L, int idx, const char *fn) {
    gl_module *m = gl_testudata(L, idx, GL_MODULE_T);
    if (m == NULL)
        gl_typeerror(L, idx, fn, "cuda.module");
    if (m->handle == NULL) gl_freederror(L, idx, fn, "the cuda.module was freed");
    return m;
}

static void unload_module(void *handle, uintptr_t extra) {
    (void)extra;
    gl_cu.cuModuleUnload((CUmodule)handle);
}

/* __gc, __close and :free(): idempotent, never raises. */
static int module_free(lua_State *L) {
    gl_module *m = gl_testudata(L, 1, GL_MODULE_T);
    if (m == NULL || m->handle == NULL) return 0;
    CUmodule h = m->handle;
    m->handle = NULL;
    gl_live.modules--;
    if (m->views > 0) { /* mod:global views still point into it: the last one unloads it */
        m->unload_pending = h;
        return 0;
    }
    gl_release(&m->use, unload_module, h, 0);
    return 0;
}

/* Moves the uses recorded in `from` (a view's) into `into` (its module's), so the module's
 * unload waits for the work that used the view. */
static void absorb_use(gl_use *into, gl_use *from) {
    if (from->last_seq > gl_done_seq) {
        uint64_t seq = from->last_seq > into->last_seq ? from->last_seq : into->last_seq;
        if (from->nstreams < 0) {
            for (int i = 0; i < into->nstreams; i++) gl_track_unref(into->streams[i]);
            into->nstreams = -1;
            into->last_seq = seq;
        }
        for (int i = 0; i < from->nstreams; i++) gl_use_mark(into, from->streams[i], seq);
    }
    for (int i = 0; i < from->nstreams; i++) gl_track_unref(from->streams[i]);
    from->nstreams = 0;
    from->last_seq = 0;
}

/* A view of a mod:global view: one more view keeps the module's code loaded. */
static void view_retained(void *owner) { ((gl_module *)owner)->views++; }

/* A mod:global view was freed or collected (its module is still allocated: the view's
 * uservalue references it). */
static void view_released(gl_array *a, void *owner) {
    gl_module *m = owner;
    absorb_use(&m->use, &a->use);
    if (--m->views == 0 && m->unload_pending) {
        CUmodule h = m->unload_pending;
        m->unload_pending = NULL;
        gl_release(&m->use, unload_module, h, 0);
    }
}

static bool has_prefix(const char *s, size_t len, const char *p, size_t plen) {
    return len >= plen && memcmp(s, p, plen) == 0;
}

static bool is_binary_image(const char *s, size_t len) {
    static const unsigned char fatbin_magic[4] = {0x50, 0xed, 0x55, 0xba};
    return has_prefix(s, len, "\x7f" "ELF", 4) || has_prefix(s, len, (const char *)fatbin_magic, 4);
}

/* The driver trusts the sizes in an image's header; a truncated cubin or fatbin would make it
 * read past the string. Returns NULL when the header's extent fits in len, else the reason. */
static const char *truncated_image(lua_State *L, const char *s, size_t len) {
    uint64_t need = 0;
    if (has_prefix(s, len, "\x7f" "ELF", 4)) {
        if (len < 64 || s[4] != 2) return "not a 64-bit ELF cubin";
        uint64_t phoff, shoff;
        uint16_t phentsize, phnum, shentsize, shnum;
        memcpy(&phoff, s + 0x20, 8);
        memcpy(&shoff, s + 0x28, 8);
        memcpy(&phentsize, s + 0x36, 2);
        memcpy(&phnum, s + 0x38, 2);
        memcpy(&shentsize, s + 0x3a, 2);
        memcpy(&shnum, s + 0x3c, 2);
        if (phoff > len || shoff > len) need = phoff > shoff ? phoff : shoff;
        else {
            uint64_t ph = phoff + (uint64_t)phentsize * phnum, sh = shoff + (uint64_t)shentsize * shnum;
            need = ph > sh ? ph : sh;
        }
    } else {
        if (len < 16) return "fatbin header incomplete";
        uint16_t hsize;
        uint64_t fsize;
        memcpy(&hsize, s + 6, 2);
        memcpy(&fsize, s + 8, 8);
        need = fsize > UINT64_MAX - hsize ? UINT64_MAX : hsize + fsize;
    }
    if (need <= len) return NULL;
    return lua_pushfstring(L, "truncated image: its header describes %I bytes, the string has %I",
                           (lua_Integer)(need > (uint64_t)LUA_MAXINTEGER ? LUA_MAXINTEGER : need),
                           (lua_Integer)len);
}

static bool looks_like_ptx(const char *s, size_t len) {
    /* PTX always declares its version and target before any entry */
    const char *v = memmem(s, len < 65536 ? len : 65536, ".version", 8);
    return v != NULL && memmem(s, len, ".target", 7) != NULL;
}

/* The driver reads PTX up to its first NUL byte: text after an embedded NUL would be
 * dropped without a word, so only trailing NUL bytes are accepted. */
static void check_ptx_text(lua_State *L, int idx, const char *fn, const char *what) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    const char *nul = memchr(s, '\0', len);
    if (nul == NULL) return;
    for (const char *p = nul; p < s + len; p++)
        if (*p != '\0')
            gl_argerror(L, 1, fn, "%s contains a NUL byte at offset %d, before the end of the text",
                        what, (int)(nul - s));
}

/* Loads `image` (PTX text NUL-terminated, or cubin/fatbin) and pushes the module userdata. */
static gl_module *load_image(lua_State *L, const char *image, const char *fn) {
    char log[4096] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    gl_module *m = gl_newuserdatauv(L, sizeof *m, MODULE_UVS);
    memset(m, 0, sizeof *m);
    CUmodule h = NULL;
    CUresult r = gl_cu.cuModuleLoadDataEx(&h, image, 2, opts, vals);
    if (r != CUDA_SUCCESS) {
        log[sizeof log - 1] = '\0';
        if (log[0]) {
            char what[4200];
            snprintf(what, sizeof what, "cuModuleLoadDataEx (JIT log: %s)", log);
            gl_raise_cuda(L, r, fn, what);
        }
        gl_raise_cuda(L, r, fn, "cuModuleLoadDataEx");
    }
    m->handle = h;
    m->ordinal = gl_current_device();
    gl_live.modules++;
    gl_setmetatable(L, GL_MODULE_T);
    return m;
}

/* Keeps the source text a program was compiled from with the module at `mod`, for naming its
 * kernels' parameters: only when the module holds the program's own compiled cubin (`cubin`, a
 * stack index, 0 for a PTX load), since a table can pair any image with a program's fields. */
static void keep_program_source(lua_State *L, int prog, int mod, int cubin) {
    int top = lua_gettop(L);
    if (gl_program_private(L, prog) == LUA_TTABLE) {
        gl_rawgetfield(L, top + 1, "cubin");
        bool own_image = cubin == 0 || lua_rawequal(L, -1, cubin);
        if (own_image && gl_rawgetfield(L, top + 1, "source") == LUA_TSTRING) lua_setiuservalue(L, mod, UV_SOURCE);
    }
    lua_settop(L, top);
}

static bool read_file(lua_State *L, const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return false;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    char chunk[16384];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) luaL_addlstring(&b, chunk, n);
    bool bad = ferror(f) != 0;
    fclose(f);
    luaL_pushresult(&b);
    if (bad) {
        lua_pop(L, 1);
        return false;
    }
    return true;
}

static int l_load(lua_State *L) {
    const char *fn = "cuda.load";
    int t = lua_type(L, 1);
    if (t != LUA_TTABLE && t != LUA_TSTRING)
        gl_typeerror(L, 1, fn, "program, image string or path");
    gl_require_gpu(L, fn);
    lua_settop(L, 1);
    if (t == LUA_TTABLE) { /* fields read raw: a metamethod could free what is being loaded */
        lua_pushliteral(L, "cubin");
        lua_rawget(L, 1);
        lua_pushliteral(L, "ptx");
        lua_rawget(L, 1);
        bool has_cubin = lua_type(L, 2) == LUA_TSTRING, has_ptx = lua_type(L, 3) == LUA_TSTRING;
        if (!has_cubin && !has_ptx)
            gl_argerror(L, 1, fn, "program has neither a cubin nor a ptx string");
        if (!has_cubin && !lua_isnil(L, 2))
            gl_fieldtypeerror(L, 1, fn, "cubin", 2, "string");
        if (has_cubin) {
            size_t clen;
            const char *c = lua_tolstring(L, 2, &clen);
            const char *bad = is_binary_image(c, clen) ? truncated_image(L, c, clen)
                                                       : "program's cubin is not a cubin or fatbin";
            if (bad) gl_argerror(L, 1, fn, "%s", bad);
            lua_settop(L, 3);
        }
        if (has_ptx) check_ptx_text(L, 3, fn, "program's ptx");
        load_image(L, lua_tostring(L, has_cubin ? 2 : 3), fn); /* 4 */
        if (has_ptx) {
            lua_pushvalue(L, 3);
            lua_setiuservalue(L, 4, UV_PTX);
        }
        lua_pushliteral(L, "lowered");
        if (lua_rawget(L, 1) == LUA_TTABLE) lua_setiuservalue(L, 4, UV_LOWERED); else lua_pop(L, 1);
        lua_pushliteral(L, "name");
        lua_rawget(L, 1);
        lua_pushfstring(L, "program %s (%s)", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?",
                        has_cubin ? "cubin" : "ptx");
        lua_setiuservalue(L, 4, UV_ORIGIN);
        lua_pop(L, 1);
        keep_program_source(L, 1, 4, has_cubin ? 2 : 0);
        return 1;
    }
    size_t len;
    const char *s = lua_tolstring(L, 1, &len);
    int img = 1;
    const char *origin = NULL;
    if (!is_binary_image(s, len) && !looks_like_ptx(s, len)) {
        if (memchr(s, '\0', len) != NULL || len == 0 || len > 4096)
            gl_argerror(L, 1, fn, "not a PTX, cubin or fatbin image");
        if (!read_file(L, s))
            gl_argerror(L, 1, fn, "not a PTX, cubin or fatbin image, and no readable file '%s': %s", s,
                        strerror(errno));
        img = 2;
        origin = s;
        s = lua_tolstring(L, 2, &len);
        if (!is_binary_image(s, len) && !looks_like_ptx(s, len))
            gl_argerror(L, 1, fn, "file '%s' is not a PTX, cubin or fatbin image", origin);
    }
    bool ptx = !is_binary_image(s, len);
    if (ptx) check_ptx_text(L, img, fn, "PTX image");
    const char *bad = ptx ? NULL : truncated_image(L, s, len);
    if (bad) gl_argerror(L, 1, fn, "%s", bad);
    load_image(L, s, fn);
    int mod = lua_gettop(L);
    if (ptx) {
        lua_pushvalue(L, img);
        lua_setiuservalue(L, mod, UV_PTX);
    }
    if (origin)
        lua_pushfstring(L, "%s (%s)", origin, ptx ? "ptx" : "binary");
    else
        lua_pushfstring(L, "%s image of %d bytes", ptx ? "ptx" : "binary", (int)len);
    lua_setiuservalue(L, mod, UV_ORIGIN);
    return 1;
}

static int module_tostring(lua_State *L) {
    gl_module *m = gl_checkudata(L, 1, GL_MODULE_T);
    if (m->handle == NULL) {
        lua_pushstring(L, "cuda.module (freed)");
        return 1;
    }
    lua_getiuservalue(L, 1, UV_ORIGIN);
    lua_pushfstring(L, "cuda.module: %s on device %d", lua_tostring(L, -1), m->ordinal);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Names: symbol arguments and name expressions
 * ------------------------------------------------------------------------------------------ */
bool gl_is_name_expression(const char *name) { return strpbrk(name, "<(: \t") != NULL; }

const char *gl_lookup_lowered(lua_State *L, int lowered, const char *asked) {
    if (!lua_istable(L, lowered)) return NULL;
    lowered = lua_absindex(L, lowered);
    lua_pushstring(L, asked);
    if (lua_rawget(L, lowered) == LUA_TSTRING) {
        const char *s = lua_tostring(L, -1);
        lua_pop(L, 1); /* the table anchors it */
        return s;
    }
    lua_pop(L, 1);
    char want[512], have[512];
    if (!gl_name_normalize(asked, want, sizeof want)) return NULL;
    const char *found = NULL;
    lua_pushnil(L);
    while (lua_next(L, lowered)) {
        if (found == NULL && lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING &&
            gl_name_normalize(lua_tostring(L, -2), have, sizeof have) && strcmp(want, have) == 0)
            found = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    return found;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void gl_push_registered_names(lua_State *L, int lowered) {
    enum { MAX_LISTED = 32 };
    const char *names[MAX_LISTED];
    int n = 0, total = 0;
    if (lua_istable(L, lowered)) {
        lowered = lua_absindex(L, lowered);
        lua_pushnil(L);
        while (lua_next(L, lowered)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING) continue;
            total++;
            if (n < MAX_LISTED) names[n++] = lua_tostring(L, -1); /* anchored by the table */
        }
    }
    if (n == 0) {
        lua_pushliteral(L, "none");
        return;
    }
    qsort(names, (size_t)n, sizeof names[0], compare_strings);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < n; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
    }
    if (total > n) luaL_addstring(&b, ", ...");
    luaL_pushresult(&b);
}

/* A symbol or name-expression argument: a string (no number coercion: converting would
 * allocate and could run a finalizer), non-empty, without NUL bytes. */
static const char *check_symbol_arg(lua_State *L, int idx, const char *fn, const char *what) {
    if (lua_type(L, idx) != LUA_TSTRING)
        gl_typeerror(L, idx, fn, what);
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    if (len == 0) gl_argerror(L, idx, fn, "%s must not be empty", what);
    if (memchr(s, '\0', len))
        gl_argerror(L, idx, fn, "%s contains a NUL byte at offset %d", what,
                    (int)((const char *)memchr(s, '\0', len) - s));
    return s;
}

/* A module's code runs in the context of the device it was loaded on. */
static void require_module_device(lua_State *L, const gl_module *m, const char *fn) {
    if (m->ordinal != gl_current_device())
        luaL_error(L, "%s: the module was loaded on device %d, but device %d is current", fn, m->ordinal,
                   gl_current_device());
}

/* Re-validates the module at index 1 after code that may have run Lua (a finalizer or a
 * metamethod may have freed it). */
static void recheck_module(lua_State *L, const gl_module *m, const char *fn) {
    if (m->handle == NULL) luaL_error(L, "%s: the cuda.module was freed during the call", fn);
}

/* ------------------------------------------------------------------------------------------
 * Module variables: mod:global(name, dtype, n | {dims}) -> a cuda.array view
 * ------------------------------------------------------------------------------------------ */
/* Writes the names of the .global/.const variables declared in PTX text into b. */
static void add_variable_names(luaL_Buffer *b, const char *ptx, size_t len) {
    const char *p = ptx, *end = ptx + len;
    int n = 0;
    while (p < end && n < 20) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) eol = end;
        const char *q = p;
        while (q < eol && (*q == ' ' || *q == '\t')) q++;
        if (has_prefix(q, (size_t)(eol - q), ".visible ", 9)) q += 9;
        if (has_prefix(q, (size_t)(eol - q), ".global ", 8) || has_prefix(q, (size_t)(eol - q), ".const ", 7)) {
            /* the name is the last word before '[', ';' or '=' */
            const char *stop = q;
            while (stop < eol && *stop != '[' && *stop != ';' && *stop != '=') stop++;
            while (stop > q && (stop[-1] == ' ' || stop[-1] == '\t')) stop--;
            const char *start = stop;
            while (start > q && start[-1] != ' ' && start[-1] != '\t') start--;
            /* the toolkit headers' own constants (cuda::std, cooperative_groups) are noise */
            size_t wlen = (size_t)(stop - start);
            bool toolkit = has_prefix(start, wlen, "_ZN4cuda", 8) || memmem(start, wlen, "_INTERNAL_", 10) ||
                           memmem(start, wlen, "cooperative_groups", 18);
            if (stop > start && *start != '.' && !toolkit) {
                luaL_addstring(b, n++ ? ", " : "");
                luaL_addlstring(b, start, (size_t)(stop - start));
            }
        }
        p = eol + 1;
    }
    if (n == 0) luaL_addstring(b, "none found");
}

__attribute__((noreturn)) static void global_not_found(lua_State *L, const char *asked,
                                                       const char *fn) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "%s: no __device__ or __constant__ variable named '%s' in this module", fn, asked);
    luaL_addvalue(&b);
    size_t len = 0;
    lua_getiuservalue(L, 1, UV_PTX);
    const char *ptx = lua_tolstring(L, -1, &len);
    if (ptx) {
        lua_pop(L, 1); /* the module's uservalue anchors it */
        luaL_addstring(&b, " (variables: ");
        add_variable_names(&b, ptx, len);
        luaL_addstring(&b, ")");
    } else {
        lua_pop(L, 1);
    }
    lua_getiuservalue(L, 1, UV_LOWERED);
    gl_push_registered_names(L, -1);
    lua_pushfstring(L, "; registered name expressions: %s (templates and C++ names need one in "
                       "cuda.compile{names=...})", lua_tostring(L, -1));
    lua_remove(L, -2);
    lua_remove(L, -2);
    luaL_addvalue(&b);
    luaL_pushresult(&b);
    gl_raise_cuda_message(L, CUDA_ERROR_NOT_FOUND, fn, "cuModuleGetGlobal");
}

static int l_module_global(lua_State *L) {
    const char *fn = "mod:global";
    gl_module *m = check_module(L, 1, fn);
    const char *asked = check_symbol_arg(L, 2, fn, "variable name or name expression");
    gl_require_gpu(L, fn);
    require_module_device(L, m, fn);
    lua_settop(L, 4);
    lua_getiuservalue(L, 1, UV_LOWERED); /* 5 */
    const char *symbol = gl_lookup_lowered(L, 5, asked);
    if (symbol == NULL) symbol = asked;
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
    recheck_module(L, m, fn);
    CUresult r = gl_cu.cuModuleGetGlobal(&ptr, &bytes, m->handle, symbol);
    if (r == CUDA_ERROR_NOT_FOUND) global_not_found(L, asked, fn);
    if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, "cuModuleGetGlobal");
    gl_array *v = gl_push_array_view(L, 3, 4, fn, ptr, bytes, asked, view_released, m); /* 6 */
    if (m->handle == NULL) { /* the shape's metamethods or a finalizer freed the module */
        v->ptr = 0;
        recheck_module(L, m, fn);
    }
    v->device = m->ordinal; /* launches elsewhere are refused like any array's */
    v->retain_view = view_retained;
    m->views++;
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, 6, 1);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Kernels
 * ------------------------------------------------------------------------------------------ */
gl_kernel *gl_test_kernel(lua_State *L, int idx) {
    static uint64_t tag; /* every launch checks its kernel */
    return gl_testudata_fast(L, idx, GL_KERNEL_T, &tag);
}

void gl_kernel_check_failed(lua_State *L, int idx, const char *fn, const gl_kernel *k) {
    if (k == NULL)
        gl_typeerror(L, idx, fn, "cuda.kernel");
    gl_freederror(L, idx, fn, "the module of kernel '%s' was freed", k->name);
}

gl_kernel *gl_check_kernel(lua_State *L, int idx, const char *fn) {
    return gl_check_kernel_inline(L, idx, fn);
}

/* Writes the entry names found in PTX text as ", "-separated list into b (for "not found"). */
static void add_entry_names(luaL_Buffer *b, const char *ptx, size_t len) {
    const char *p = ptx, *end = ptx + len;
    int n = 0;
    while ((p = memmem(p, (size_t)(end - p), ".entry", 6)) != NULL && n < 20) {
        p += 6;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        const char *q = p;
        while (q < end && *q != '(' && *q != ' ' && *q != '\n' && *q != '\r' && *q != '\t') q++;
        if (q > p) {
            luaL_addstring(b, n++ ? ", " : "");
            luaL_addlstring(b, p, (size_t)(q - p));
        }
    }
    if (n == 0) luaL_addstring(b, "none found");
}

static int func_attr(lua_State *L, CUfunction f, CUfunction_attribute a, const char *fn) {
    int v = 0;
    GL_CHECK(L, gl_cu.cuFuncGetAttribute(&v, a, f), fn, "cuFuncGetAttribute");
    return v;
}

static void kind_for_size(gl_param *p, size_t size) {
    switch (size) {
    case 1: case 2: case 4: case 8:
        snprintf(p->kind, sizeof p->kind, "b%u", (unsigned)size * 8);
        p->align = (unsigned)size;
        break;
    default:
        snprintf(p->kind, sizeof p->kind, "b8");
        p->align = 1;
    }
}

/* Parameter list from the driver: offsets and sizes, kinds only as b8..b64. */
static int params_from_driver(lua_State *L, CUfunction f, gl_param *out, const char *fn) {
    if (gl_cu.cuFuncGetParamInfo == NULL)
        luaL_error(L, "%s: this CUDA driver cannot report a kernel's parameters "
                      "(cuFuncGetParamInfo, CUDA 12.4+): load the module with its PTX", fn);
    int n = 0;
    for (; n < GL_MAX_PARAMS; n++) {
        size_t off = 0, size = 0;
        CUresult r = gl_cu.cuFuncGetParamInfo(f, (size_t)n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;
        if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, "cuFuncGetParamInfo");
        kind_for_size(&out[n], size);
        out[n].size = (unsigned)size;
        out[n].offset = (unsigned)off;
    }
    size_t off, size;
    if (n == GL_MAX_PARAMS && gl_cu.cuFuncGetParamInfo(f, (size_t)n, &off, &size) == CUDA_SUCCESS)
        luaL_error(L, "%s: kernel has more than %d parameters; gpulab supports %d", fn,
                   GL_MAX_PARAMS, GL_MAX_PARAMS);
    return n;
}

/* The parameter list read from a PTX text is only a claim about the loaded binary (a program
 * table can pair any cubin with any PTX): where the driver reports the binary's parameters,
 * their count and sizes must agree, or a launch would let the driver read past the packed
 * arguments. A driver that cannot report them (CUDA_ERROR_NOT_SUPPORTED) leaves the PTX's word. */
static void check_params_with_driver(lua_State *L, CUfunction f, const gl_param *params, int n,
                                     const char *asked, const char *fn) {
    if (gl_cu.cuFuncGetParamInfo == NULL) return; /* a driver older than CUDA 12.4 */
    /* The count is found by asking for one parameter past the end, which fails. compute-sanitizer
     * reports every failed API call as an error, so under `--sanitize` (GPULAB_SANITIZER set) only
     * the declared parameters are compared; the native run checks the count. */
    const char *sanitizer = getenv("GPULAB_SANITIZER");
    int last = sanitizer && *sanitizer ? n - 1 : n;
    for (int i = 0; i <= last; i++) {
        size_t off = 0, size = 0;
        CUresult r = gl_cu.cuFuncGetParamInfo(f, (size_t)i, &off, &size);
        if (r == CUDA_ERROR_NOT_SUPPORTED && i == 0) return;
        if (r == CUDA_ERROR_INVALID_VALUE) {
            if (i == n) return;
            luaL_error(L, "%s: kernel '%s': its PTX declares %d parameter%s but the loaded binary "
                          "has %d (cuFuncGetParamInfo): the PTX does not belong to this binary",
                       fn, asked, n, n == 1 ? "" : "s", i);
        }
        if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, "cuFuncGetParamInfo");
        if (i == n)
            luaL_error(L, "%s: kernel '%s': its PTX declares %d parameter%s but the loaded binary "
                          "has more (cuFuncGetParamInfo): the PTX does not belong to this binary",
                       fn, asked, n, n == 1 ? "" : "s");
        if (size != params[i].size)
            luaL_error(L, "%s: kernel '%s': parameter %d is %d bytes in its PTX but %d bytes in the "
                          "loaded binary (cuFuncGetParamInfo): the PTX does not belong to this binary",
                       fn, asked, i + 1, (int)params[i].size, (int)size);
    }
}

/* k.params: { {kind=, size=, align=, offset=}, ... } (a fresh table each time) */
static void push_params(lua_State *L, const gl_kernel *k) {
    lua_createtable(L, k->nparams, 0);
    for (int i = 0; i < k->nparams; i++) {
        const gl_param *p = &k->params[i];
        lua_createtable(L, 0, 4);
        lua_pushstring(L, p->kind);
        lua_setfield(L, -2, "kind");
        lua_pushinteger(L, p->size);
        lua_setfield(L, -2, "size");
        lua_pushinteger(L, p->align);
        lua_setfield(L, -2, "align");
        lua_pushinteger(L, p->offset);
        lua_setfield(L, -2, "offset");
        lua_rawseti(L, -2, i + 1);
    }
}

/* k.cluster_dims: {x, y, z} every launch uses (compiled in by __cluster_dims__, axes it leaves out
 * as 1; or as set with k:set_attribute), or nil */
static void push_cluster_dims(lua_State *L, const gl_kernel *k) {
    const int *d = k->cluster_dims;
    if (d[0] <= 0 && d[1] <= 0 && d[2] <= 0) {
        lua_pushnil(L);
        return;
    }
    lua_createtable(L, 3, 0);
    for (int i = 0; i < 3; i++) {
        lua_pushinteger(L, k->cluster_compiled && d[i] <= 0 ? 1 : d[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* The kernel class's fields (its __fields): every field a kernel answers. A kernel's own
 * metatable holds the fixed ones ready (push_kernel_metatable); these getters answer the class's
 * __index and what that table does not hold. */
static const gl_kernel *field_kernel(lua_State *L) {
    const gl_kernel *k = gl_test_kernel(L, 1);
    if (k == NULL) gl_typeerror(L, 1, "k.field", GL_KERNEL_T);
    return k;
}
static int f_name(lua_State *L) {
    lua_pushstring(L, field_kernel(L)->name);
    return 1;
}
static int f_regs(lua_State *L) {
    lua_pushinteger(L, field_kernel(L)->regs);
    return 1;
}
static int f_smem(lua_State *L) {
    lua_pushinteger(L, field_kernel(L)->static_smem);
    return 1;
}
static int f_local_bytes(lua_State *L) {
    lua_pushinteger(L, field_kernel(L)->local_bytes);
    return 1;
}
static int f_const_bytes(lua_State *L) {
    lua_pushinteger(L, field_kernel(L)->const_bytes);
    return 1;
}
static int f_max_threads(lua_State *L) {
    lua_pushinteger(L, field_kernel(L)->max_threads);
    return 1;
}
/* k for a field that an attribute set through any kernel object for the function may change */
static gl_kernel *synced_field_kernel(lua_State *L) {
    gl_kernel *k = gl_test_kernel(L, 1);
    if (k == NULL) gl_typeerror(L, 1, "k.field", GL_KERNEL_T);
    gl_kernel_sync_attributes(k);
    return k;
}
static int f_cluster_dims(lua_State *L) {
    push_cluster_dims(L, synced_field_kernel(L));
    return 1;
}
static int f_module(lua_State *L) {
    field_kernel(L);
    lua_getiuservalue(L, 1, KUV_MODULE);
    return 1;
}
/* changes with k:set_max_dynamic_smem, and k:set_attribute through any object for the function */
static int f_max_dynamic_smem(lua_State *L) {
    lua_pushinteger(L, synced_field_kernel(L)->max_dynamic_smem);
    return 1;
}
/* a fresh table each read, so that changing one changes no later read */
static int f_params(lua_State *L) {
    push_params(L, field_kernel(L));
    return 1;
}

/* The __index of a kernel's index table: what that table does not hold (k.max_dynamic_smem,
 * k.params, a method added after the kernel was made) is answered as the class answers it, for
 * the kernel (upvalue 1) in place of the index table. */
static int kernel_live_field(lua_State *L) {
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_replace(L, 1);
    return gl_class_index(L);
}

/* Copies the fields of the table at `from` into the table at `to`, raw; with `skip_index`, not
 * __index, __methods and __fields (the class's own lookup, which readers find by __name). */
static void copy_fields(lua_State *L, int from, int to, bool skip_index) {
    lua_pushnil(L);
    while (lua_next(L, from)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (skip_index && (strcmp(key, "__index") == 0 || strcmp(key, "__methods") == 0 ||
                           strcmp(key, "__fields") == 0)) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, to);
    }
}

static void set_int(lua_State *L, const char *name, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, name);
}

/* The kernel class's methods table (gl_new_class's, which every later gl_class_add_methods
 * fills: kattr.c's, launch.c's) in the private store: a kernel's own metatable copies it, and
 * the class metatable's __methods, which a script can replace, is only for readers. */
#define KERNEL_METHODS "cuda.kernel.methods"

/* Right after gl_new_class, before any script can reach the new class metatable. */
static void keep_kernel_methods(lua_State *L) {
    gl_getmetatable(L, GL_KERNEL_T);
    lua_pushliteral(L, "__methods");
    if (lua_rawget(L, -2) != LUA_TTABLE) luaL_error(L, "gpulab: the kernel class has no __methods");
    gl_private_set(L, KERNEL_METHODS);
    lua_pop(L, 1);
}

static void push_kernel_methods(lua_State *L) {
    if (gl_private_get(L, KERNEL_METHODS) != LUA_TTABLE) luaL_error(L, "gpulab's kernel methods are gone");
}

/* Pushes the kernel's own metatable: the class metatable's fields, with __index a table of this
 * kernel's methods and fixed fields. `k:launch` then finds its method by one table lookup: with
 * the class's function __index, that call into C cost a tenth to a fifth of k:launch's own time
 * over the driver's (H200 host, driver 580.159). What is left (live fields) goes through the
 * index table's own __index. Its tag proves a kernel; under any other metatable (another
 * kernel's, the class's) it is none (identity.c). */
static void push_kernel_metatable(lua_State *L, int self) {
    const gl_kernel *k = lua_touserdata(L, self);
    gl_getmetatable(L, GL_KERNEL_T);
    int class = lua_gettop(L);
    lua_createtable(L, 0, 4); /* the metatable */
    copy_fields(L, class, class + 1, true);
    lua_createtable(L, 0, 16); /* its __index: the methods, then the fixed fields */
    int index = lua_gettop(L);
    push_kernel_methods(L);
    copy_fields(L, index + 1, index, false);
    lua_pop(L, 1);
    set_int(L, "regs", k->regs);
    set_int(L, "smem", k->static_smem);
    set_int(L, "local_bytes", k->local_bytes);
    set_int(L, "const_bytes", k->const_bytes);
    set_int(L, "max_threads", k->max_threads); /* (cluster_dims is live: k:set_attribute sets it) */
    lua_pushstring(L, k->name);
    lua_setfield(L, -2, "name");
    lua_getiuservalue(L, self, KUV_MODULE);
    lua_setfield(L, -2, "module");
    lua_createtable(L, 0, 1); /* the index table's metatable: the rest, as the class answers */
    lua_pushvalue(L, self);
    lua_pushcclosure(L, kernel_live_field, 1);
    lua_setfield(L, -2, "__index");
    gl_lua_setmetatable(L, index);
    lua_setfield(L, class + 1, "__index");
    lua_remove(L, class);
}

/* ------------------------------------------------------------------------------------------
 * mod:kernel(name): resolve the name, find the function, read its parameters and what the
 * driver says about it, name its parameters as declared, then make the object.
 * ------------------------------------------------------------------------------------------ */
/* What mod:kernel learns before it makes the kernel object. Strings are anchored on the stack. */
typedef struct kernel_facts {
    const char *asked;   /* the name as the script wrote it */
    const char *entry;   /* the symbol it resolves to */
    const char *ptx;     /* the module's PTX text, or NULL */
    size_t ptx_len;
    CUfunction f;
    int nparams;
    bool typed;          /* kinds from the PTX, not only sizes from the driver */
    const gl_device_limits *limits;
    int attrs[6];        /* in the order of function_attributes below */
    int cluster_dims[3], nonportable_cluster;
    bool cluster_must_be_set, cluster_compiled;
    gl_param params[GL_MAX_PARAMS];
} kernel_facts;

static const CUfunction_attribute function_attributes[6] = {
    CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES};

/* The symbol `asked` names, pushed (a finalizer may change the script's lowered table): its
 * lowered name when it is a registered name expression, else itself. Then the module's PTX. */
static void resolve_entry(lua_State *L, kernel_facts *kf) {
    lua_getiuservalue(L, 1, UV_LOWERED); /* 3 */
    const char *lowered = gl_lookup_lowered(L, 3, kf->asked);
    kf->entry = lua_pushstring(L, lowered ? lowered : kf->asked); /* 4 */
    lua_getiuservalue(L, 1, UV_PTX); /* 5 */
    kf->ptx = lua_tolstring(L, 5, &kf->ptx_len);
}

/* Raises "no kernel named ..." with the module's entries and, for a name expression, the
 * registered ones (the lowered-name table is at index 3). */
__attribute__((noreturn)) static void kernel_not_found(lua_State *L, const kernel_facts *kf, CUresult r,
                                                       const char *fn) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "%s: no kernel named '%s' in this module", fn, kf->asked);
    luaL_addvalue(&b);
    if (kf->ptx) {
        luaL_addstring(&b, " (entries: ");
        add_entry_names(&b, kf->ptx, kf->ptx_len);
        luaL_addstring(&b, ")");
    }
    luaL_addstring(&b, "; C++ kernels need extern \"C\" or a name expression in "
                       "cuda.compile{names=...}");
    if (gl_is_name_expression(kf->asked)) {
        gl_push_registered_names(L, 3);
        lua_pushfstring(L, " (registered: %s)", lua_tostring(L, -1));
        lua_remove(L, -2);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    gl_raise_cuda_message(L, r, fn, "cuModuleGetFunction");
}

static void find_function(lua_State *L, gl_module *m, kernel_facts *kf, const char *fn) {
    recheck_module(L, m, fn);
    CUresult r = gl_cu.cuModuleGetFunction(&kf->f, m->handle, kf->entry);
    if (r == CUDA_ERROR_NOT_FOUND) kernel_not_found(L, kf, r, fn);
    if (r != CUDA_SUCCESS) gl_raise_cuda(L, r, fn, "cuModuleGetFunction");
}

/* From the PTX when the module has it (kinds, sizes, offsets), checked against the loaded
 * binary; else from the driver (sizes and offsets only). */
static void read_param_list(lua_State *L, kernel_facts *kf, const char *fn) {
    int n = -1;
    if (kf->ptx) {
        char err[256] = "";
        n = gl_ptx_params(kf->ptx, kf->ptx_len, kf->entry, kf->params, GL_MAX_PARAMS, err, sizeof err);
        if (n > GL_MAX_PARAMS)
            luaL_error(L, "%s: kernel '%s' has %d parameters; gpulab supports %d", fn, kf->asked, n,
                       GL_MAX_PARAMS);
    }
    kf->typed = n >= 0;
    if (kf->typed) check_params_with_driver(L, kf->f, kf->params, n, kf->asked, fn);
    else n = params_from_driver(L, kf->f, kf->params, fn);
    kf->nparams = n;
}

/* Everything the driver says about the function, read before any allocation can run a
 * finalizer that frees the module. */
static void read_function_facts(lua_State *L, gl_module *m, kernel_facts *kf, const char *fn) {
    kf->limits = gl_device_limits_current(L, fn);
    recheck_module(L, m, fn);
    for (int i = 0; i < 6; i++) kf->attrs[i] = func_attr(L, kf->f, function_attributes[i], fn);
    gl_read_cluster_attributes(L, kf->f, fn, kf->cluster_dims, &kf->cluster_must_be_set,
                               &kf->nonportable_cluster);
    /* __cluster_dims__ compiles to .reqnctapercluster, which also makes CLUSTER_SIZE_MUST_BE_SET 1; a
       shape set at run time leaves that 0, unless the kernel is .explicitcluster as well, which
       the PTX tells apart (a module loaded without PTX is taken as compiled in then) */
    kf->cluster_compiled = kf->cluster_dims[0] > 0 && kf->cluster_must_be_set &&
                           (kf->ptx == NULL ||
                            gl_ptx_entry_has_directive(kf->ptx, kf->ptx_len, kf->entry, ".reqnctapercluster"));
}

/* Pushes the parameters' declarations as one string of nparams NUL-terminated parts ("float* x",
 * "" where unknown): from the entry's mangled name and the module's source (declared.h). */
static void push_declarations(lua_State *L, const kernel_facts *kf) {
    size_t src_len = 0;
    lua_getiuservalue(L, 1, UV_SOURCE);
    const char *src = lua_tolstring(L, -1, &src_len);
    size_t cap = gl_declarations_cap(kf->nparams), len = 0;
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, cap);
    if (gl_param_declarations(kf->entry, src, src_len, kf->params, kf->nparams, out, cap) < 0)
        memset(out, 0, (size_t)kf->nparams); /* out of memory: every one unknown */
    for (int i = 0; i < kf->nparams; i++) len += strlen(out + len) + 1;
    luaL_pushresultsize(&b, len);
    lua_remove(L, -2); /* the source */
}

/* Copies len bytes to *at and moves *at past them. */
static const char *store_bytes(char **at, const char *s, size_t len) {
    char *dst = *at;
    memcpy(dst, s, len);
    *at += len;
    return dst;
}


/* Attribute sets through any kernel object so far (gl_kernel_attribute_set). */
static uint64_t attribute_sets;

static void forget_occupancy(gl_kernel *k) {
    k->checked_cluster.limit = 0;
    k->checked_coop.limit = 0;
}

void gl_kernel_attribute_set(gl_kernel *k) {
    gl_kernel_sync_attributes(k); /* sets before this one, through other objects */
    attribute_sets++;
    k->attributes_seen = attribute_sets;
    forget_occupancy(k); /* occupancy follows the carveout, the cluster policy, the smem limit */
    gl_forget_launch_checks();
}

void gl_kernel_sync_attributes(gl_kernel *k) {
    if (k->attributes_seen == attribute_sets || k->module->handle == NULL) return;
    k->attributes_seen = attribute_sets;
    int v = 0;
    if (gl_cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->fn) == CUDA_SUCCESS)
        k->max_dynamic_smem = v;
    /* before 9.0 the cluster attributes are refused: they stay 0 */
    if (gl_cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, k->fn) == CUDA_SUCCESS)
        k->nonportable_cluster = v;
    for (int i = 0; i < 3; i++) {
        CUfunction_attribute a = (CUfunction_attribute)(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH + i);
        if (!k->cluster_compiled && gl_cu.cuFuncGetAttribute(&v, a, k->fn) == CUDA_SUCCESS) k->cluster_dims[i] = v;
    }
    forget_occupancy(k);
}

/* k's shape as the driver holds it: a compiled-in shape's unset axes are 1, a run-time one's 0 */
static int cluster_shape(const gl_kernel *k, unsigned out[3]) {
    int positive = 0;
    for (int i = 0; i < 3; i++) {
        int v = k->cluster_dims[i];
        positive += v > 0;
        out[i] = v > 0 ? (unsigned)v : k->cluster_compiled ? 1u : 0u;
    }
    return positive;
}

bool gl_kernel_required_cluster(lua_State *L, const gl_kernel *k, unsigned out[3], const char *fn) {
    int positive = cluster_shape(k, out);
    if (positive == 0) return false;
    if (positive < 3 && !k->cluster_compiled)
        luaL_error(L, "%s: kernel '%s''s required cluster shape is %dx%dx%d (set with k:set_attribute): without "
                      "cluster= the driver refuses it (CUDA_ERROR_INVALID_CLUSTER_SIZE) unless "
                      "required_cluster_width, _height and _depth are all positive, or all 0",
                   fn, k->name, (int)out[0], (int)out[1], (int)out[2]);
    return true;
}

bool gl_kernel_cluster_contradicts(const gl_kernel *k, const unsigned c[3], unsigned shape[3]) {
    if (cluster_shape(k, shape) == 0) return false;
    for (int i = 0; i < 3; i++)
        if (shape[i] > 0 && c[i] != shape[i]) return true;
    return false;
}

const char *gl_kernel_cluster_origin(const gl_kernel *k) {
    return k->cluster_compiled ? "compiled-in __cluster_dims__" : "run-time required_cluster_*";
}

static unsigned packed_bytes(const gl_param *params, int n) {
    unsigned end = 0;
    for (int i = 0; i < n; i++)
        if (params[i].offset + params[i].size > end) end = params[i].offset + params[i].size;
    return end;
}

/* The bytes k:launch packs into, at the end of the kernel object: the pointers, then the
 * parameters at the next 64-byte boundary. Zero when the kernel cannot be launched. */
static size_t launch_area_bytes(unsigned argbytes, int n) {
    return argbytes > GL_MAX_ARG_BYTES ? 0 : (size_t)n * sizeof(void *) + 63 + argbytes;
}

/* Points the kernel's launch area (at `area`, zeroed, launch_area_bytes long) at its parameters'
 * offsets. */
static void place_launch_area(gl_kernel *k, unsigned char *area) {
    k->launch_ptrs = (void **)(void *)area;
    uintptr_t args = ((uintptr_t)(area + (size_t)k->nparams * sizeof(void *)) + 63) & ~(uintptr_t)63;
    k->launch_args = (unsigned char *)args;
    for (int i = 0; i < k->nparams; i++) k->launch_ptrs[i] = k->launch_args + k->params[i].offset;
}

/* Pushes the kernel object: the facts, then after its parameters their packing classes (zero:
 * launch.c fills them on first use), its name, its entry, the declarations (at decls_idx) and,
 * 8-byte aligned, the launch area. */
static gl_kernel *new_kernel(lua_State *L, gl_module *m, const kernel_facts *kf, int decls_idx) {
    int n = kf->nparams;
    size_t asked_len = strlen(kf->asked) + 1, entry_len = strlen(kf->entry) + 1, decls_len;
    const char *decls = lua_tolstring(L, decls_idx, &decls_len);
    unsigned argbytes = packed_bytes(kf->params, n);
    size_t head = sizeof(gl_kernel) + (size_t)n * sizeof(gl_param) + (size_t)n + asked_len + entry_len + decls_len;
    head = (head + 7) & ~(size_t)7;
    size_t area = launch_area_bytes(argbytes, n);
    gl_kernel *k = gl_newuserdatauv(L, head + area, KUV_COUNT);
    memset(k, 0, sizeof *k);
    k->fn = kf->f;
    k->module = m;
    k->nparams = n;
    k->typed = kf->typed;
    memcpy(k->params, kf->params, (size_t)n * sizeof(gl_param));
    k->arg_class = (unsigned char *)(k->params + n);
    memset(k->arg_class, 0, (size_t)n);
    char *strings = (char *)(k->arg_class + n);
    k->name = store_bytes(&strings, kf->asked, asked_len);
    gl_log_name(k->log_name, k->name);
    k->entry = store_bytes(&strings, kf->entry, entry_len);
    k->decls = store_bytes(&strings, decls, decls_len);
    k->argbytes = argbytes;
    if (area) { /* none: launches are refused (launch_args stays NULL) */
        memset((unsigned char *)k + head, 0, area);
        place_launch_area(k, (unsigned char *)k + head);
    }
    k->limits = kf->limits;
    k->regs = kf->attrs[0];
    k->static_smem = kf->attrs[1];
    k->local_bytes = kf->attrs[2];
    k->const_bytes = kf->attrs[3];
    k->max_threads = kf->attrs[4];
    k->max_dynamic_smem = kf->attrs[5];
    memcpy(k->cluster_dims, kf->cluster_dims, sizeof k->cluster_dims);
    k->cluster_must_be_set = kf->cluster_must_be_set;
    k->cluster_compiled = kf->cluster_compiled;
    k->nonportable_cluster = kf->nonportable_cluster;
    k->attributes_seen = attribute_sets;
    return k;
}

/* The kernel at `self` holds its module (so the code stays loaded) and gets its metatable. The
 * kernel is valid either way; a module freed meanwhile (by a finalizer) is refused by every use,
 * and this call reports it now rather than later. */
static void attach_to_module(lua_State *L, gl_module *m, int self, const char *fn) {
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, self, KUV_MODULE);
    push_kernel_metatable(L, self);
    gl_lua_setmetatable(L, self); /* writes the tag, from __name */
    recheck_module(L, m, fn);
    m->nkernels++;
}

static int l_module_kernel(lua_State *L) {
    const char *fn = "mod:kernel";
    gl_module *m = check_module(L, 1, fn);
    kernel_facts kf;
    kf.asked = check_symbol_arg(L, 2, fn, "kernel name or name expression");
    gl_require_gpu(L, fn);
    require_module_device(L, m, fn);
    lua_settop(L, 2);
    resolve_entry(L, &kf);       /* 3: lowered names, 4: entry, 5: PTX */
    find_function(L, m, &kf, fn);
    read_param_list(L, &kf, fn);
    read_function_facts(L, m, &kf, fn);
    push_declarations(L, &kf);   /* 6 */
    new_kernel(L, m, &kf, 6);    /* 7 */
    attach_to_module(L, m, 7, fn);
    return 1;
}

/* "f32", "b8[24]": a parameter by its PTX type */
static const char *push_ptx_type(lua_State *L, const gl_param *p) {
    unsigned elem = (unsigned)atoi(p->kind + 1) / 8;
    if (elem && p->size != elem) return lua_pushfstring(L, "%s[%d]", p->kind, (int)(p->size / elem));
    return lua_pushstring(L, p->kind);
}

const char *gl_push_param_name(lua_State *L, const gl_kernel *k, int i) {
    const char *decl = k->decls;
    for (int j = 0; j < i; j++) decl += strlen(decl) + 1;
    if (*decl) return lua_pushfstring(L, "%s parameter %d (%s)", k->name, i + 1, decl);
    const char *type = push_ptx_type(L, &k->params[i]);
    const char *name = lua_pushfstring(L, "%s parameter %d (%s)", k->name, i + 1, type);
    lua_remove(L, -2);
    return name;
}

static int kernel_tostring(lua_State *L) {
    gl_kernel *k = gl_test_kernel(L, 1);
    if (k == NULL) gl_typeerror(L, 1, "cuda.kernel.__tostring", "cuda.kernel");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "cuda.kernel ");
    luaL_addstring(&b, k->name);
    luaL_addchar(&b, '(');
    const char *decl = k->decls;
    for (int i = 0; i < k->nparams; i++, decl += strlen(decl) + 1) {
        if (i) luaL_addstring(&b, ", ");
        if (*decl) {
            luaL_addstring(&b, decl);
        } else {
            push_ptx_type(L, &k->params[i]);
            luaL_addvalue(&b);
        }
    }
    lua_pushfstring(L, "): %d regs, %d B static smem%s", k->regs, k->static_smem,
                    k->module->handle ? "" : " (module freed)");
    luaL_addvalue(&b);
    luaL_pushresult(&b);
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Occupancy: the driver's count, and which resource limits it, from the device's limits.
 * ------------------------------------------------------------------------------------------ */
typedef struct occupancy_limits {
    long threads, registers, smem, blocks;
} occupancy_limits;

static occupancy_limits occupancy_model(const gl_kernel *k, int block, long dyn_smem) {
    const gl_device_limits *d = k->limits;
    occupancy_limits o;
    int warps = (block + d->warp_size - 1) / d->warp_size;
    o.threads = d->threads_per_sm / ((long)warps * d->warp_size);
    /* registers are allocated per warp, in units of 256 */
    long regs_per_warp = ((long)k->regs * d->warp_size + 255) / 256 * 256;
    o.registers = regs_per_warp > 0 ? (d->regs_per_sm / regs_per_warp) / warps : d->blocks_per_sm;
    /* shared memory is allocated in 128-byte units, with the driver's per-block reservation */
    long smem = (k->static_smem + dyn_smem + d->smem_reserved + 127) / 128 * 128;
    o.smem = smem > 0 ? d->smem_per_sm / smem : d->blocks_per_sm;
    o.blocks = d->blocks_per_sm;
    return o;
}

static lua_Integer check_int_arg(lua_State *L, int idx, const char *fn, const char *what,
                                 lua_Integer lo, lua_Integer hi) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            gl_argerror(L, idx, fn, "%s must be an integer, got %s", what, lua_tostring(L, idx));
        gl_typeerror(L, idx, fn, what);
    }
    if (v < lo || v > hi)
        gl_argerror(L, idx, fn, "%s %lld out of range %lld..%lld", what, (long long)v, (long long)lo,
                    (long long)hi);
    return v;
}

static int l_occupancy(lua_State *L) {
    const char *fn = "k:occupancy";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    gl_require_gpu(L, fn);
    int block = (int)check_int_arg(L, 2, fn, "block threads", 1, k->max_threads);
    long dyn = 0;
    if (!lua_isnoneornil(L, 3))
        dyn = (long)check_int_arg(L, 3, fn, "dynamic shared memory bytes", 0,
                                  k->limits->smem_optin - k->static_smem);
    int n = 0;
    GL_CHECK(L, gl_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, block, (size_t)dyn),
             fn, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    occupancy_limits o = occupancy_model(k, block, dyn);
    /* the first resource whose limit is the smallest; ties name the earlier one */
    const char *names[4] = {"threads", "registers", "shared memory", "blocks"};
    long vals[4] = {o.threads, o.registers, o.smem, o.blocks};
    int best = 0;
    for (int i = 1; i < 4; i++)
        if (vals[i] < vals[best]) best = i;
    /* none fit: with the block size already checked, only shared memory can cause that (e.g.
     * more dynamic shared memory than the kernel's limit before k:set_max_dynamic_smem) */
    if (n == 0) best = 2;
    lua_pushinteger(L, n);
    lua_pushstring(L, names[best]);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, o.threads);
    lua_setfield(L, -2, "threads");
    lua_pushinteger(L, o.registers);
    lua_setfield(L, -2, "registers");
    lua_pushinteger(L, o.smem);
    lua_setfield(L, -2, "shared_memory");
    lua_pushinteger(L, o.blocks);
    lua_setfield(L, -2, "blocks");
    return 3;
}

static int l_set_max_dynamic_smem(lua_State *L) {
    const char *fn = "k:set_max_dynamic_smem";
    gl_kernel *k = gl_check_kernel(L, 1, fn);
    gl_require_gpu(L, fn);
    lua_Integer limit = k->limits->smem_optin - k->static_smem;
    int isint = 0;
    lua_Integer bytes = lua_tointegerx(L, 2, &isint);
    if (!isint)
        gl_argerror(L, 2, fn, "integer number of bytes expected, got %s",
                    lua_type(L, 2) == LUA_TNUMBER ? lua_tostring(L, 2) : gl_typename(L, 2));
    if (bytes < 0 || bytes > limit)
        gl_argerror(L, 2, fn, "%lld bytes of dynamic shared memory: the device allows %d bytes per "
                              "block with opt-in, and kernel '%s' uses %d statically, so at most %lld",
                    (long long)bytes, k->limits->smem_optin, k->name, k->static_smem, (long long)limit);
    GL_CHECK(L, gl_cu.cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         (int)bytes), fn, "cuFuncSetAttribute");
    k->max_dynamic_smem = (int)bytes;
    gl_kernel_attribute_set(k);
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
void gl_open_module(lua_State *L) {
    static const luaL_Reg module_meta[] = {{"__gc", module_free}, {"__close", module_free},
                                           {"__tostring", module_tostring}, {NULL, NULL}};
    static const luaL_Reg module_methods[] = {{"kernel", l_module_kernel},
                                              {"global", l_module_global},
                                              {"free", module_free}, {NULL, NULL}};
    gl_new_class(L, GL_MODULE_T, module_meta, module_methods, NULL);

    static const luaL_Reg kernel_meta[] = {{"__tostring", kernel_tostring}, {NULL, NULL}};
    static const luaL_Reg kernel_methods[] = {{"occupancy", l_occupancy},
                                              {"set_max_dynamic_smem", l_set_max_dynamic_smem},
                                              {NULL, NULL}};
    static const luaL_Reg kernel_fields[] = {
        {"name", f_name},           {"regs", f_regs},           {"smem", f_smem},
        {"local_bytes", f_local_bytes}, {"const_bytes", f_const_bytes}, {"max_threads", f_max_threads},
        {"cluster_dims", f_cluster_dims}, {"module", f_module}, {"max_dynamic_smem", f_max_dynamic_smem},
        {"params", f_params},       {NULL, NULL}};
    gl_new_class(L, GL_KERNEL_T, kernel_meta, kernel_methods, kernel_fields);
    keep_kernel_methods(L);
    gl_class_add_methods(L, GL_KERNEL_T, gl_kernel_attr_methods);

    static const luaL_Reg fns[] = {{"load", l_load}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
