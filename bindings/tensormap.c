/*
 * tensormap.c — "cuda.tensormap": Hopper TMA descriptors (cuTensorMapEncodeTiled).
 *
 *   cuda.tensormap{array=d | address=int, dtype=, dims=, strides=, box=, element_strides=,
 *                  interleave=, swizzle=, l2_promotion=, oob_fill=}
 *   cuda.tensormap_check(spec) --> true | false, message      (no driver needed)
 *
 * Every rule that cuda.h documents for cuTensorMapEncodeTiled is checked here, before the
 * driver sees the spec, so a bad spec gets a message that names the rule and the value instead
 * of a bare CUDA_ERROR_INVALID_VALUE. Lists are innermost dimension first and 1-based, as the
 * Lua tables the user wrote: "box[1]" is the innermost box extent.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "context.h"
#include "driver.h"
#include "errors.h"
#include "identity.h"
#include "lifetime.h"
#include "objects.h"
#include "register.h"

#define TM_MAX_RANK 5
#define TM_ERR_LEN 256

/* ------------------------------------------------------------------------------------------
 * Names <-> driver enums
 * ------------------------------------------------------------------------------------------ */
typedef struct tm_dtype {
    const char *name;
    CUtensorMapDataType type;
    unsigned size;
    bool is_float; /* NaN out-of-bounds fill is only defined for floating-point types */
} tm_dtype;

static const tm_dtype tm_dtypes[] = {
    {"f16", CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, true},
    {"bf16", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, true},
    {"f32", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, true},
    {"f64", CU_TENSOR_MAP_DATA_TYPE_FLOAT64, 8, true},
    {"u8", CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, false},
    {"u16", CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, false},
    {"u32", CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, false},
    {"i32", CU_TENSOR_MAP_DATA_TYPE_INT32, 4, false},
    {"u64", CU_TENSOR_MAP_DATA_TYPE_UINT64, 8, false},
    {"i64", CU_TENSOR_MAP_DATA_TYPE_INT64, 8, false},
    {"f32_ftz", CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ, 4, true},
    {"tf32", CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, 4, true},
    {"tf32_ftz", CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ, 4, true},
};
#define TM_NDTYPES (int)(sizeof tm_dtypes / sizeof tm_dtypes[0])

typedef struct tm_name {
    const char *name;
    int value;
    unsigned span; /* swizzle: bytes one row may span; interleave: bytes per interleaved chunk */
    const char *meaning;
} tm_name;

static const tm_name tm_interleaves[] = {
    {"none", CU_TENSOR_MAP_INTERLEAVE_NONE, 0, "plain layout"},
    {"16B", CU_TENSOR_MAP_INTERLEAVE_16B, 16, "16-byte interleaved channels (NC/8HWC8 for 2-byte types)"},
    {"32B", CU_TENSOR_MAP_INTERLEAVE_32B, 32, "32-byte interleaved channels (NC/16HWC16 for 2-byte types)"},
    {NULL, 0, 0, NULL}};
static const tm_name tm_swizzles[] = {
    {"none", CU_TENSOR_MAP_SWIZZLE_NONE, 0, "shared memory gets the rows as they are"},
    {"32B", CU_TENSOR_MAP_SWIZZLE_32B, 32, "16-byte chunks permuted within 32-byte spans"},
    {"64B", CU_TENSOR_MAP_SWIZZLE_64B, 64, "16-byte chunks permuted within 64-byte spans"},
    {"128B", CU_TENSOR_MAP_SWIZZLE_128B, 128, "16-byte chunks permuted within 128-byte spans"},
    {"128B_atom_32B", CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B, 128,
     "32-byte chunks permuted within 128-byte spans"},
    {"128B_atom_32B_flip_8B", CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B, 128,
     "32-byte chunks permuted within 128-byte spans, 8-byte halves swapped on alternate rows"},
    {"128B_atom_64B", CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B, 128,
     "64-byte chunks permuted within 128-byte spans"},
    {NULL, 0, 0, NULL}};
static const tm_name tm_l2s[] = {
    {"none", CU_TENSOR_MAP_L2_PROMOTION_NONE, 0, "no L2 promotion"},
    {"64B", CU_TENSOR_MAP_L2_PROMOTION_L2_64B, 64, "L2 filled from DRAM in 64-byte requests"},
    {"128B", CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 128, "L2 filled from DRAM in 128-byte requests"},
    {"256B", CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 256, "L2 filled from DRAM in 256-byte requests"},
    {NULL, 0, 0, NULL}};
static const tm_name tm_oobs[] = {
    {"none", CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, 0, "zeros"},
    {"nan", CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA, 0, "NaN (FMA reads them as zero)"},
    {NULL, 0, 0, NULL}};

/* ------------------------------------------------------------------------------------------
 * The spec, as parsed and validated
 * ------------------------------------------------------------------------------------------ */
typedef struct tm_spec {
    const tm_dtype *dtype;
    int rank;
    uint64_t address;
    bool from_array;
    size_t array_bytes;
    cuuint64_t dims[TM_MAX_RANK];
    cuuint64_t strides[TM_MAX_RANK - 1]; /* bytes, dims 2..rank */
    cuuint32_t box[TM_MAX_RANK];
    cuuint32_t estrides[TM_MAX_RANK];
    const tm_name *interleave, *swizzle, *l2, *oob;
} tm_spec;

typedef struct tm_err {
    char msg[TM_ERR_LEN];
} tm_err;

__attribute__((format(printf, 2, 3))) static bool fail(tm_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}

/* Renders the value at idx for a message: numbers as written, other types by name. */
static const char *value_text(lua_State *L, int idx, char *buf, size_t len) {
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER) {
        if (lua_isinteger(L, idx)) snprintf(buf, len, "%" PRId64, (int64_t)lua_tointeger(L, idx));
        else snprintf(buf, len, "%.17g", lua_tonumber(L, idx));
    } else if (t == LUA_TSTRING) {
        snprintf(buf, len, "'%.40s' (a string)", lua_tostring(L, idx));
    } else {
        snprintf(buf, len, "%s", lua_typename(L, t));
    }
    return buf;
}

/* Reads the number at idx as a non-negative integer no larger than `max`.
 * `what` names it ("dims[2]") and `rule` is the text of the range rule for messages. */
static bool read_uint(lua_State *L, int idx, uint64_t max, const char *what, const char *rule,
                      uint64_t *out, tm_err *e) {
    char vb[64];
    if (lua_type(L, idx) != LUA_TNUMBER)
        return fail(e, "%s = %s: must be an integer (%s)", what, value_text(L, idx, vb, sizeof vb), rule);
    if (lua_isinteger(L, idx)) {
        lua_Integer v = lua_tointeger(L, idx);
        if (v < 0 || (uint64_t)v > max)
            return fail(e, "%s = %" PRId64 ": %s", what, (int64_t)v, rule);
        *out = (uint64_t)v;
        return true;
    }
    double d = lua_tonumber(L, idx);
    if (isnan(d)) return fail(e, "%s = NaN: must be an integer (%s)", what, rule);
    if (d != floor(d)) return fail(e, "%s = %.17g: must be an integer (%s)", what, d, rule);
    /* compared as an integer: (double)max rounds up (2^63 - 1 reads as 2^63) */
    if (d < 0 || d >= 0x1p64 || (uint64_t)d > max) return fail(e, "%s = %.17g: %s", what, d, rule);
    *out = (uint64_t)d;
    return true;
}

/* Pushes t[key] without metamethods (a spec is plain data). */
static int raw_field(lua_State *L, int t, const char *key) {
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

static const char *const tm_fields[] = {"array", "address", "dtype", "dims", "strides", "box",
                                        "element_strides", "interleave", "swizzle",
                                        "l2_promotion", "oob_fill", NULL};

static bool check_known_fields(lua_State *L, int t, tm_err *e) {
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        bool known = false;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (int i = 0; tm_fields[i]; i++)
                if (strcmp(lua_tostring(L, -1), tm_fields[i]) == 0) known = true;
        if (!known) {
            char kb[64];
            if (lua_type(L, -1) == LUA_TSTRING) snprintf(kb, sizeof kb, "'%.40s'", lua_tostring(L, -1));
            else snprintf(kb, sizeof kb, "of type %s", luaL_typename(L, -1));
            lua_pop(L, 1);
            return fail(e, "unknown field %s (known: array, address, dtype, dims, strides, box, "
                           "element_strides, interleave, swizzle, l2_promotion, oob_fill)", kb);
        }
    }
    return true;
}

/* True when the string at idx is exactly `name` (a NUL byte inside it is not the end). */
static bool string_is(lua_State *L, int idx, const char *name) {
    size_t len = 0;
    const char *s = lua_tolstring(L, idx, &len);
    return s && len == strlen(name) && memcmp(s, name, len) == 0;
}

static bool read_name(lua_State *L, int t, const char *field, const tm_name *names,
                      const tm_name **out, tm_err *e) {
    int ty = raw_field(L, t, field);
    *out = &names[0]; /* every table starts with its default ("none") */
    if (ty == LUA_TNIL) { lua_pop(L, 1); return true; }
    char known[160] = "", vb[64];
    for (int i = 0; names[i].name; i++) {
        if (ty == LUA_TSTRING && string_is(L, -1, names[i].name)) {
            *out = &names[i];
            lua_pop(L, 1);
            return true;
        }
        size_t n = strlen(known);
        snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", names[i].name);
    }
    value_text(L, -1, vb, sizeof vb);
    lua_pop(L, 1);
    return fail(e, "%s = %s: unknown %s (known: %s)", field, vb, field, known);
}

static bool read_dtype(lua_State *L, int t, tm_spec *s, tm_err *e) {
    int ty = raw_field(L, t, "dtype");
    char vb[64];
    if (ty == LUA_TSTRING)
        for (int i = 0; i < TM_NDTYPES; i++)
            if (string_is(L, -1, tm_dtypes[i].name)) {
                s->dtype = &tm_dtypes[i];
                lua_pop(L, 1);
                return true;
            }
    value_text(L, -1, vb, sizeof vb);
    lua_pop(L, 1);
    return fail(e, "dtype = %s: %s (known: f16, bf16, f32, f64, u8, u16, u32, i32, u64, i64, "
                   "f32_ftz, tf32, tf32_ftz)", vb, ty == LUA_TNIL ? "a dtype is required" : "unknown dtype");
}

/* Reads list `field` of exactly `want` entries (want < 0: 1..TM_MAX_RANK, stored in *count). */
static bool read_list(lua_State *L, int t, const char *field, int want, int *count, uint64_t min,
                      uint64_t max, const char *rule, uint64_t *out, tm_err *e) {
    int ty = raw_field(L, t, field);
    if (ty != LUA_TTABLE) {
        char vb[64];
        value_text(L, -1, vb, sizeof vb);
        lua_pop(L, 1);
        return fail(e, "%s = %s: must be a list of integers, innermost dimension first", field, vb);
    }
    int n = (int)(lua_rawlen(L, -1) > 64 ? 64 : lua_rawlen(L, -1));
    if (want < 0 && (n < 1 || n > TM_MAX_RANK)) {
        lua_pop(L, 1);
        return fail(e, "rank = %d (#%s): the rank must be 1..%d", n, field, TM_MAX_RANK);
    }
    if (want >= 0 && n != want) {
        lua_pop(L, 1);
        return fail(e, "%s has %d entries: it must have %d (one per dimension%s)", field, n, want,
                    strcmp(field, "strides") == 0 ? " after the innermost, in bytes" : "");
    }
    for (int i = 0; i < n; i++) {
        char what[40];
        snprintf(what, sizeof what, "%s[%d]", field, i + 1);
        lua_rawgeti(L, -1, i + 1);
        uint64_t v = 0;
        bool ok = read_uint(L, -1, max, what, rule, &v, e);
        lua_pop(L, 1);
        if (ok && v < min) ok = fail(e, "%s = %" PRIu64 ": %s", what, v, rule);
        if (!ok) { lua_pop(L, 1); return false; }
        out[i] = v;
    }
    lua_pop(L, 1);
    if (count) *count = n;
    return true;
}

/* array= or address=: exactly one. */
static bool read_target(lua_State *L, int t, tm_spec *s, tm_err *e) {
    int ta = raw_field(L, t, "array");
    int tp = raw_field(L, t, "address");
    bool ok = true;
    if (ta != LUA_TNIL && tp != LUA_TNIL) {
        ok = fail(e, "give either array= or address=, not both");
    } else if (ta != LUA_TNIL) {
        gl_array *a = gl_test_array(L, -2);
        if (a == NULL) {
            bool freed = gl_testudata(L, -2, GL_ARRAY_T) != NULL;
            ok = fail(e, "array = %s: expected a cuda.array%s", freed ? "cuda.array" : luaL_typename(L, -2),
                      freed ? " (this one was freed)" : "");
        } else {
            s->from_array = true;
            s->address = (uint64_t)a->ptr;
            s->array_bytes = a->nbytes;
        }
    } else if (tp != LUA_TNIL) {
        ok = read_uint(L, -1, UINT64_MAX >> 1, "address", "a device address is a non-negative integer",
                       &s->address, e);
        if (ok && s->address == 0) ok = fail(e, "address = 0: a device address must not be null");
    } else {
        ok = fail(e, "array= (a cuda.array) or address= (an integer device address) is required");
    }
    lua_pop(L, 2);
    return ok;
}

/* The rules between fields (cuda.h, cuTensorMapEncodeTiled). */
static bool check_rules(tm_spec *s, tm_err *e) {
    unsigned esize = s->dtype->size;
    bool il32 = s->interleave->value == CU_TENSOR_MAP_INTERLEAVE_32B;
    bool il_none = s->interleave->value == CU_TENSOR_MAP_INTERLEAVE_NONE;
    unsigned align = il32 ? 32 : 16;
    if (!il_none && s->rank < 3)
        return fail(e, "rank = %d: interleave %s needs rank 3..5", s->rank, s->interleave->name);
    if (s->address % align)
        return fail(e, "address = 0x%" PRIx64 ": the global address must be %u-byte aligned%s", s->address,
                    align, il32 ? " with interleave 32B" : "");
    uint64_t row_bytes = (uint64_t)s->box[0] * esize;
    if (il_none && row_bytes % 16)
        return fail(e, "box[1] = %u: box[1] x element size (%s, %u bytes) = %" PRIu64
                       " bytes must be a multiple of 16", (unsigned)s->box[0], s->dtype->name, esize, row_bytes);
    if (il32 && s->swizzle->value != CU_TENSOR_MAP_SWIZZLE_32B)
        return fail(e, "swizzle = %s: interleave 32B requires swizzle 32B", s->swizzle->name);
    if (il_none && s->swizzle->span && row_bytes > s->swizzle->span)
        return fail(e, "box[1] = %u: box[1] x element size = %" PRIu64 " bytes exceeds the %u-byte span "
                       "of swizzle %s", (unsigned)s->box[0], row_bytes, s->swizzle->span, s->swizzle->name);
    if (s->oob->value != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE && !s->dtype->is_float)
        return fail(e, "oob_fill = nan: NaN fill needs a floating-point dtype, not %s", s->dtype->name);
    /* Each stride must step over the whole previous dimension: rows may be padded, never overlap. */
    unsigned __int128 prev = (unsigned __int128)s->dims[0] * esize;
    for (int i = 0; i < s->rank - 1; i++) {
        if (s->strides[i] % align)
            return fail(e, "strides[%d] = %" PRIu64 ": each stride must be a multiple of %u bytes%s", i + 1,
                        (uint64_t)s->strides[i], align, il32 ? " with interleave 32B" : "");
        if (s->strides[i] < prev)
            return fail(e, "strides[%d] = %" PRIu64 ": smaller than the dimension it steps over (%" PRIu64
                           " bytes): a stride covers the previous dimension (padding allowed)",
                        i + 1, (uint64_t)s->strides[i], (uint64_t)prev);
        prev = (unsigned __int128)s->strides[i] * s->dims[i + 1];
    }
    if (s->from_array) {
        unsigned __int128 span = (unsigned __int128)s->dims[0] * esize;
        for (int i = 0; i < s->rank - 1; i++) span += (unsigned __int128)s->strides[i] * (s->dims[i + 1] - 1);
        if (span > s->array_bytes)
            return fail(e, "dims and strides reach %.0f bytes but the array holds %zu bytes", (double)span,
                        s->array_bytes);
    }
    return true;
}

/* Parses and validates the spec table at `t`. Never raises for plain tables. */
static bool parse_spec(lua_State *L, int t, tm_spec *s, tm_err *e) {
    memset(s, 0, sizeof *s);
    t = lua_absindex(L, t);
    if (lua_type(L, t) != LUA_TTABLE) return fail(e, "the spec must be a table, got %s", luaL_typename(L, t));
    luaL_checkstack(L, 8, "tensormap spec");
    uint64_t v[TM_MAX_RANK] = {0};
    if (!check_known_fields(L, t, e) || !read_dtype(L, t, s, e) || !read_target(L, t, s, e)) return false;
    if (!read_name(L, t, "interleave", tm_interleaves, &s->interleave, e) ||
        !read_name(L, t, "swizzle", tm_swizzles, &s->swizzle, e) ||
        !read_name(L, t, "l2_promotion", tm_l2s, &s->l2, e) ||
        !read_name(L, t, "oob_fill", tm_oobs, &s->oob, e))
        return false;
    if (!read_list(L, t, "dims", -1, &s->rank, 1, (uint64_t)1 << 32, "each dimension must be 1..2^32", v, e))
        return false;
    for (int i = 0; i < s->rank; i++) s->dims[i] = v[i];
    if (!read_list(L, t, "box", s->rank, NULL, 1, 256, "each box dimension must be 1..256", v, e)) return false;
    for (int i = 0; i < s->rank; i++) s->box[i] = (cuuint32_t)v[i];
    if (raw_field(L, t, "element_strides") == LUA_TNIL) {
        for (int i = 0; i < s->rank; i++) s->estrides[i] = 1;
    } else if (!read_list(L, t, "element_strides", s->rank, NULL, 1, 8, "each element stride must be 1..8",
                          v, e)) {
        lua_pop(L, 1);
        return false;
    } else {
        for (int i = 0; i < s->rank; i++) s->estrides[i] = (cuuint32_t)v[i];
    }
    lua_pop(L, 1);
    if (raw_field(L, t, "strides") == LUA_TNIL) { /* packed: each dimension right after the last */
        /* read_dtype returned true, so s->dtype is set */
        // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
        unsigned __int128 step = (unsigned __int128)s->dims[0] * s->dtype->size;
        for (int i = 0; i < s->rank - 1; i++) {
            if (step >> 40)
                return lua_pop(L, 1), fail(e, "dims: the packed stride of dimension %d (%.0f bytes) must be "
                                              "below 2^40; give strides=", i + 2, (double)step);
            s->strides[i] = (cuuint64_t)step;
            step *= s->dims[i + 1]; /* < 2^40 * 2^32: no overflow in 128 bits */
        }
    } else if (!read_list(L, t, "strides", s->rank - 1, NULL, 0, ((uint64_t)1 << 40) - 1,
                          "each stride must be below 2^40 bytes", v, e)) {
        lua_pop(L, 1);
        return false;
    } else {
        for (int i = 0; i < s->rank - 1; i++) s->strides[i] = v[i];
    }
    lua_pop(L, 1);
    return check_rules(s, e);
}

/* The bytes one box load writes into shared memory: the complete_tx count for expect_tx. */
static uint64_t box_bytes(const tm_spec *s) {
    uint64_t n = s->dtype->size;
    for (int i = 0; i < s->rank; i++) {
        /* with interleave none, the innermost element stride is ignored by the hardware */
        unsigned es = (i == 0 && s->interleave->value == CU_TENSOR_MAP_INTERLEAVE_NONE) ? 1 : s->estrides[i];
        n *= (s->box[i] + es - 1) / es;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------
 * The object. Lua aligns userdata to 16 bytes; cuda.h declares CUtensorMap 128-byte aligned
 * (the driver needs 64), so the block is over-allocated and the object lives at the first
 * suitably aligned address inside it.
 * ------------------------------------------------------------------------------------------ */
typedef struct tm_obj {
    gl_tensormap pub; /* first: gl_test_tensormap hands out &pub */
    tm_spec spec;
} tm_obj;

enum { UV_ARRAY = 1 };

#define TM_ALIGN _Alignof(tm_obj)

static tm_obj *obj_at(void *block) {
    return (tm_obj *)(((uintptr_t)block + TM_ALIGN - 1) & ~(uintptr_t)(TM_ALIGN - 1));
}

static tm_obj *test_obj(lua_State *L, int idx) {
    void *block = gl_testudata(L, idx, GL_TENSORMAP_T);
    return block ? obj_at(block) : NULL;
}

gl_tensormap *gl_test_tensormap(lua_State *L, int idx) {
    tm_obj *o = test_obj(L, idx);
    return o ? &o->pub : NULL;
}

static tm_obj *check_tm(lua_State *L, int idx, const char *fn) {
    tm_obj *o = test_obj(L, idx);
    if (o == NULL) gl_typeerror(L, idx, fn, "cuda.tensormap");
    if (!o->pub.valid) gl_freederror(L, idx, fn, "the cuda.tensormap was freed");
    return o;
}

/* The map remembers the array it points into and that array's address, so work submitted with
 * the map is refused once the array was freed (the uservalue keeps the object, not the memory). */
static void pin_array(tm_obj *o, const gl_array *a) {
    o->pub.array = a;
    o->pub.array_ptr = a ? a->ptr : 0;
}

/* Work queued with the map (launches marked its use) still reads the array it points at:
 * hand that pending use over to the array, so freeing the array waits for it. */
static void hand_use_to_array(lua_State *L, int idx, gl_use *u) {
    if (u->last_seq <= gl_done_seq) return;
    lua_getiuservalue(L, idx, UV_ARRAY);
    gl_array *a = gl_test_array(L, -1);
    lua_pop(L, 1);
    if (a == NULL) return;
    /* keep the later of the two: only "is it complete yet" reads the number, and the events a
     * release records on each stream cover everything submitted before */
    uint64_t seq = u->last_seq > a->use.last_seq ? u->last_seq : a->use.last_seq;
    if (u->nstreams < 0) { /* untracked streams: the array waits for a full sync too */
        gl_use_mark(&a->use, gl_default_track(), seq);
        if (a->use.nstreams > 0)
            for (int i = 0; i < a->use.nstreams; i++) gl_track_unref(a->use.streams[i]);
        a->use.nstreams = -1;
        return;
    }
    for (int i = 0; i < u->nstreams; i++) gl_use_mark(&a->use, u->streams[i], seq);
}

/* __gc, __close and :free(): idempotent, never raises. */
static int tm_free(lua_State *L) {
    tm_obj *o = test_obj(L, 1);
    if (o == NULL || !o->pub.valid) return 0;
    o->pub.valid = false;
    hand_use_to_array(L, 1, &o->pub.use);
    if (o->pub.use.nstreams > 0)
        for (int i = 0; i < o->pub.use.nstreams; i++) gl_track_unref(o->pub.use.streams[i]);
    o->pub.use.nstreams = 0;
    lua_pushnil(L);
    lua_setiuservalue(L, 1, UV_ARRAY);
    pin_array(o, NULL);
    gl_live.tensormaps--;
    return 0;
}

static void encode(lua_State *L, const tm_spec *s, CUtensorMap *dst, const char *fn) {
    CUtensorMap aligned; /* the driver wants a 64-byte aligned destination; the type is 128 */
    GL_CHECK(L, gl_cu.cuTensorMapEncodeTiled(&aligned, s->dtype->type, (cuuint32_t)s->rank,
                                             (void *)(uintptr_t)s->address, s->dims, s->strides, s->box,
                                             s->estrides, (CUtensorMapInterleave)s->interleave->value,
                                             (CUtensorMapSwizzle)s->swizzle->value,
                                             (CUtensorMapL2promotion)s->l2->value,
                                             (CUtensorMapFloatOOBfill)s->oob->value),
             fn, "cuTensorMapEncodeTiled");
    memcpy(dst, &aligned, sizeof aligned);
}

static int l_tensormap(lua_State *L) {
    const char *fn = "cuda.tensormap";
    if (!lua_istable(L, 1)) gl_typeerror(L, 1, fn, "table");
    lua_settop(L, 1);
    tm_spec s;
    tm_err e;
    if (!parse_spec(L, 1, &s, &e)) gl_argerror(L, 1, fn, "%s", e.msg);
    gl_require_gpu(L, fn);
    /* The array stays in this call's slot 2 from here on: the table is the script's, and a
     * finalizer run by an allocation below may take the array out of it or put another there. */
    raw_field(L, 1, "array");
    const gl_array *arr = gl_test_array(L, 2);
    if (arr) gl_check_array_device(L, arr, fn, 1);
    void *block = gl_newuserdatauv(L, sizeof(tm_obj) + TM_ALIGN - 1, 1);
    /* what was parsed must still be this array, alive: parse_spec's reads and the allocation
       may have run finalizers */
    if (s.from_array && (arr == NULL || arr->ptr == 0 || (uint64_t)arr->ptr != s.address ||
                         arr->nbytes != s.array_bytes))
        gl_argerror(L, 1, fn, "array: the cuda.array was freed or replaced during the call");
    tm_obj *o = obj_at(block);
    memset(o, 0, sizeof *o);
    o->spec = s;
    gl_setmetatable(L, GL_TENSORMAP_T);
    encode(L, &s, &o->pub.map, fn);
    o->pub.valid = true;
    o->pub.device = gl_current_device();
    pin_array(o, s.from_array ? arr : NULL);
    if (s.from_array) {
        lua_pushvalue(L, 2);
        lua_setiuservalue(L, -2, UV_ARRAY);
    }
    gl_live.tensormaps++;
    return 1;
}

static int l_tensormap_check(lua_State *L) {
    tm_spec s;
    tm_err e;
    lua_settop(L, 1);
    if (parse_spec(L, 1, &s, &e)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, e.msg);
    return 2;
}

/* tm:replace_address(array): same layout, new base (cuTensorMapReplaceAddress). */
static int tm_replace_address(lua_State *L) {
    const char *fn = "tm:replace_address";
    tm_obj *o = check_tm(L, 1, fn);
    gl_array *a = gl_check_array(L, 2, fn);
    tm_spec s = o->spec;
    s.from_array = true;
    s.address = (uint64_t)a->ptr;
    s.array_bytes = a->nbytes;
    tm_err e;
    if (!check_rules(&s, &e)) gl_argerror(L, 2, fn, "%s", e.msg);
    gl_require_gpu(L, fn);
    if (a->device != o->pub.device)
        gl_argerror(L, 2, fn, "the cuda.array belongs to device %d, the tensor map to device %d",
                    a->device, o->pub.device);
    CUtensorMap aligned;
    memcpy(&aligned, &o->pub.map, sizeof aligned);
    GL_CHECK(L, gl_cu.cuTensorMapReplaceAddress(&aligned, (void *)(uintptr_t)s.address), fn,
             "cuTensorMapReplaceAddress");
    hand_use_to_array(L, 1, &o->pub.use); /* queued work still reads the old array */
    memcpy(&o->pub.map, &aligned, sizeof aligned);
    o->spec = s;
    pin_array(o, a);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, 1, UV_ARRAY);
    lua_settop(L, 1);
    return 1;
}

/* "8192x8192" */
static void add_extents_u64(luaL_Buffer *b, const cuuint64_t *v, int n, const char *sep) {
    for (int i = 0; i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%s%" PRIu64, i ? sep : "", (uint64_t)v[i]);
        luaL_addstring(b, buf);
    }
}

static void add_extents_u32(luaL_Buffer *b, const cuuint32_t *v, int n, const char *sep) {
    cuuint64_t w[TM_MAX_RANK];
    for (int i = 0; i < n; i++) w[i] = v[i];
    add_extents_u64(b, w, n, sep);
}

static int tm_tostring(lua_State *L) {
    tm_obj *o = test_obj(L, 1);
    /* Not luaL_tolstring for another object: it would call this __tostring again, down to a C
     * stack overflow, and the finalizers the collector runs that deep would fail and be lost. */
    if (o == NULL)
        gl_argerror(L, 1, "cuda.tensormap.__tostring",
                    "cuda.tensormap expected, got another %s with the cuda.tensormap metatable", luaL_typename(L, 1));
    if (!o->pub.valid) {
        lua_pushstring(L, "cuda.tensormap (freed)");
        return 1;
    }
    const tm_spec *s = &o->spec;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "cuda.tensormap(%s ", s->dtype->name);
    luaL_addvalue(&b);
    add_extents_u64(&b, s->dims, s->rank, "x");
    luaL_addstring(&b, ", box ");
    add_extents_u32(&b, s->box, s->rank, "x");
    char tail[96];
    snprintf(tail, sizeof tail, " = %" PRIu64 " B, swizzle %s)", box_bytes(s), s->swizzle->name);
    luaL_addstring(&b, tail);
    luaL_pushresult(&b);
    return 1;
}

static int tm_describe(lua_State *L) {
    tm_obj *o = check_tm(L, 1, "tm:describe");
    const tm_spec *s = &o->spec;
    luaL_Buffer b;
    char line[256];
    luaL_buffinit(L, &b);
    snprintf(line, sizeof line, "tensor map: %s (%u-byte elements), rank %d, innermost dimension first\n",
             s->dtype->name, s->dtype->size, s->rank);
    luaL_addstring(&b, line);
    snprintf(line, sizeof line, "  global address: 0x%" PRIx64 " (%s)\n", s->address,
             s->from_array ? "a cuda.array" : "given as an integer");
    luaL_addstring(&b, line);
    luaL_addstring(&b, "  dims: ");
    add_extents_u64(&b, s->dims, s->rank, " x ");
    luaL_addstring(&b, " elements\n  strides: ");
    if (s->rank == 1) luaL_addstring(&b, "none (rank 1)");
    for (int i = 0; i < s->rank - 1; i++) {
        snprintf(line, sizeof line, "%sdim %d: %" PRIu64 " bytes", i ? ", " : "", i + 2, (uint64_t)s->strides[i]);
        luaL_addstring(&b, line);
    }
    luaL_addstring(&b, "\n  box: ");
    add_extents_u32(&b, s->box, s->rank, " x ");
    snprintf(line, sizeof line, " elements = %" PRIu64 " bytes per load (the expect_tx count), "
                                "innermost row %" PRIu64 " bytes\n", box_bytes(s),
             (uint64_t)s->box[0] * s->dtype->size);
    luaL_addstring(&b, line);
    luaL_addstring(&b, "  element strides: ");
    add_extents_u32(&b, s->estrides, s->rank, " x ");
    snprintf(line, sizeof line, "\n  interleave: %s (%s)\n  swizzle: %s (%s)\n", s->interleave->name,
             s->interleave->meaning, s->swizzle->name, s->swizzle->meaning);
    luaL_addstring(&b, line);
    snprintf(line, sizeof line, "  L2 promotion: %s (%s)\n  out-of-bounds fill: %s (%s)", s->l2->name,
             s->l2->meaning, s->oob->name, s->oob->meaning);
    luaL_addstring(&b, line);
    luaL_pushresult(&b);
    return 1;
}

static void push_list_u64(lua_State *L, const cuuint64_t *v, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static void push_list_u32(lua_State *L, const cuuint32_t *v, int n) {
    cuuint64_t w[TM_MAX_RANK];
    for (int i = 0; i < n; i++) w[i] = v[i];
    push_list_u64(L, w, n);
}

/* The alignment a box's shared-memory destination needs: 128 bytes for a plain box (the
 * tensor copy's own rule), and a swizzled box's pattern repeats every 8 rows of its span, so
 * the buffer must start on that repeat for the layout a consumer computes to be the one the
 * copy writes (1024 bytes for the 128B swizzle). */
static unsigned smem_align(const tm_spec *s) {
    unsigned repeat = s->swizzle->span * 8;
    return repeat > 128 ? repeat : 128;
}

/* The fields (the class's __fields, read through gl_class_index): each getter reads the map at
 * 1; a freed map's fields raise naming the field, while its methods (free) still answer. */
static const tm_spec *field_spec(lua_State *L, const char *field) {
    tm_obj *o = test_obj(L, 1);
    if (o == NULL) gl_typeerror(L, 1, "tm.field", GL_TENSORMAP_T);
    if (!o->pub.valid) luaL_error(L, "cuda.tensormap: field '%s' of a freed tensor map", field);
    return &o->spec;
}

static int f_box_bytes(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)box_bytes(field_spec(L, "box_bytes")));
    return 1;
}
static int f_dtype(lua_State *L) {
    lua_pushstring(L, field_spec(L, "dtype")->dtype->name);
    return 1;
}
static int f_rank(lua_State *L) {
    lua_pushinteger(L, field_spec(L, "rank")->rank);
    return 1;
}
static int f_dims(lua_State *L) {
    const tm_spec *s = field_spec(L, "dims");
    push_list_u64(L, s->dims, s->rank);
    return 1;
}
static int f_strides(lua_State *L) {
    const tm_spec *s = field_spec(L, "strides");
    push_list_u64(L, s->strides, s->rank - 1);
    return 1;
}
static int f_box(lua_State *L) {
    const tm_spec *s = field_spec(L, "box");
    push_list_u32(L, s->box, s->rank);
    return 1;
}
static int f_element_strides(lua_State *L) {
    const tm_spec *s = field_spec(L, "element_strides");
    push_list_u32(L, s->estrides, s->rank);
    return 1;
}
static int f_interleave(lua_State *L) {
    lua_pushstring(L, field_spec(L, "interleave")->interleave->name);
    return 1;
}
static int f_swizzle(lua_State *L) {
    lua_pushstring(L, field_spec(L, "swizzle")->swizzle->name);
    return 1;
}
static int f_smem_align(lua_State *L) {
    lua_pushinteger(L, smem_align(field_spec(L, "smem_align")));
    return 1;
}
static int f_l2_promotion(lua_State *L) {
    lua_pushstring(L, field_spec(L, "l2_promotion")->l2->name);
    return 1;
}
static int f_oob_fill(lua_State *L) {
    lua_pushstring(L, field_spec(L, "oob_fill")->oob->name);
    return 1;
}
static int f_address(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)field_spec(L, "address")->address);
    return 1;
}
static int f_array(lua_State *L) {
    field_spec(L, "array");
    lua_getiuservalue(L, 1, UV_ARRAY);
    return 1;
}

static int tm_free_method(lua_State *L) {
    if (test_obj(L, 1) == NULL) gl_typeerror(L, 1, "tm:free", "cuda.tensormap");
    return tm_free(L);
}

void gl_open_tensormap(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", tm_free}, {"__close", tm_free}, {"__tostring", tm_tostring},
                                    {NULL, NULL}};
    static const luaL_Reg methods[] = {{"free", tm_free_method}, {"describe", tm_describe},
                                       {"replace_address", tm_replace_address}, {NULL, NULL}};
    static const luaL_Reg fields[] = {
        {"box_bytes", f_box_bytes},       {"dtype", f_dtype},     {"rank", f_rank},
        {"dims", f_dims},                 {"strides", f_strides}, {"box", f_box},
        {"element_strides", f_element_strides}, {"interleave", f_interleave},
        {"swizzle", f_swizzle},           {"smem_align", f_smem_align},
        {"l2_promotion", f_l2_promotion}, {"oob_fill", f_oob_fill},
        {"address", f_address},           {"array", f_array},     {NULL, NULL}};
    gl_new_class(L, GL_TENSORMAP_T, meta, methods, fields);
    static const luaL_Reg funcs[] = {{"tensormap", l_tensormap}, {"tensormap_check", l_tensormap_check},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}
