/*
 * copy.c — x:copy_from for every pair of device and host arrays (d:copy_from, h:copy_from):
 * offsets, counts, 2-D rows with pitches, reinterpreting or converting dtypes, peer copies
 * between devices, and the stream a copy is ordered on.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "context.h"
#include "driver.h"
#include "dtype.h"
#include "errors.h"
#include "identity.h"
#include "lifetime.h"
#include "memory.h"
#include "objects.h"
#include "observe.h"
#include "options.h"
#include "peer.h"
#include "stream.h"

/* ------------------------------------------------------------------------------------------
 * Copies. Without a stream a copy runs on the legacy default stream with the synchronous
 * driver calls. With a stream it uses the Async calls on that stream, so it is ordered after
 * the stream's earlier work; it overlaps with the host only when the host side is pinned (for
 * pageable memory the driver copies through a staging buffer and returns when the host
 * buffer may be reused: host-synchronous, still in stream order). Device arrays, and pinned
 * buffers of async copies, are marked in use so a free waits for the copy.
 * ------------------------------------------------------------------------------------------ */
gl_mem_ref gl_check_mem(lua_State *L, int idx, const char *fn) {
    gl_mem_ref m = {gl_testudata(L, idx, GL_ARRAY_T), gl_testudata(L, idx, GL_HOST_T)};
    if (m.dev == NULL && m.host == NULL)
        gl_typeerror(L, idx, fn, "cuda.array or cuda.host");
    if (m.dev) gl_check_array(L, idx, fn);
    if (m.host) gl_check_host(L, idx, fn);
    return m;
}

static size_t mem_numel(gl_mem_ref m) { return m.dev ? m.dev->numel : m.host->numel; }
static gl_dtype mem_dtype(gl_mem_ref m) { return m.dev ? m.dev->dtype : m.host->dtype; }

static void mark_copy_uses(gl_mem_ref dst, gl_mem_ref src, gl_stream_track *track, bool on_stream) {
    uint64_t seq = gl_next_seq();
    gl_mem_ref both[2] = {dst, src};
    for (int i = 0; i < 2; i++) {
        if (both[i].dev) gl_use_mark(&both[i].dev->use, track, seq);
        else if (on_stream && both[i].host->pinned) gl_use_mark(&both[i].host->use, track, seq);
    }
}

/* x:copy_from(src[, stream | {stream=, count=, dst_offset=, src_offset=, reinterpret=, convert=}]) */
typedef struct copy_opts {
    int stream_idx;          /* stack index of the stream, 0 for none */
    lua_Integer count;       /* -1: everything from the offsets on (both sides must agree) */
    lua_Integer dst_offset, src_offset; /* elements skipped, each in its own array's dtype */
    bool reinterpret, convert;
    lua_Integer rows;        /* > 0: a 2-D copy of `rows` rows of `count` elements ... */
    lua_Integer dst_pitch, src_pitch; /* ... starting this many elements apart (0: default) */
} copy_opts;

static void read_copy_opts(lua_State *L, int idx, copy_opts *o, const char *fn) {
    *o = (copy_opts){0, -1, 0, 0, false, false, 0, 0, 0};
    if (lua_isnoneornil(L, idx)) return;
    if (lua_type(L, idx) != LUA_TTABLE) { /* the stream itself, checked by the copy */
        o->stream_idx = idx;
        return;
    }
    static const char *const known[] = {"stream", "count", "dst_offset", "src_offset", "reinterpret",
                                        "convert", "rows", "dst_pitch", "src_pitch", NULL};
    gl_check_known_fields(L, idx, known, fn);
    bool has_count = gl_raw_field(L, idx, "count") != LUA_TNIL;
    lua_pop(L, 1);
    o->count = has_count ? gl_raw_opt_int(L, idx, "count", 0, fn) : -1;
    if (has_count && o->count < 0)
        gl_fielderror(L, idx, fn, "count", "must not be negative, got %lld", (long long)o->count);
    o->dst_offset = gl_raw_opt_int(L, idx, "dst_offset", 0, fn);
    o->src_offset = gl_raw_opt_int(L, idx, "src_offset", 0, fn);
    o->reinterpret = gl_raw_opt_bool(L, idx, "reinterpret", false, fn);
    o->convert = gl_raw_opt_bool(L, idx, "convert", false, fn);
    if (o->dst_offset < 0 || o->src_offset < 0)
        gl_fielderror(L, idx, fn, o->dst_offset < 0 ? "dst_offset" : "src_offset",
                      "must not be negative, got %lld",
                      (long long)(o->dst_offset < 0 ? o->dst_offset : o->src_offset));
    if (o->reinterpret && o->convert)
        gl_fielderror(L, idx, fn, "convert", "excludes 'reinterpret'");
    o->rows = gl_raw_opt_int(L, idx, "rows", 0, fn);
    o->dst_pitch = gl_raw_opt_int(L, idx, "dst_pitch", 0, fn);
    o->src_pitch = gl_raw_opt_int(L, idx, "src_pitch", 0, fn);
    if (o->rows < 0 || o->dst_pitch < 0 || o->src_pitch < 0)
        gl_fielderror(L, idx, fn, o->rows < 0 ? "rows" : o->dst_pitch < 0 ? "dst_pitch" : "src_pitch",
                      "must not be negative");
    if (o->rows > 0 && !has_count)
        gl_fielderror(L, idx, fn, "rows", "a 2-D copy needs 'count', the elements of each row");
    if (o->rows == 0 && (o->dst_pitch || o->src_pitch))
        gl_fielderror(L, idx, fn, o->dst_pitch ? "dst_pitch" : "src_pitch",
                      "belongs to a 2-D copy: give 'rows' too");
    if (gl_raw_field(L, idx, "stream") != LUA_TNIL) { /* stays on the stack for the copy */
        o->stream_idx = lua_gettop(L);
        gl_opt_stream_field(L, idx, o->stream_idx, "stream", fn);
    } else {
        lua_pop(L, 1);
    }
}

/* Whether the double x is an integer that fits integer dtype t. */
static bool double_fits_int(gl_dtype t, double x) {
    int64_t min;
    uint64_t umax;
    gl_dtype_int_range(t, &min, &umax);
    double top = ldexp(1.0, (int)gl_dtype_size(t) * 8 - (gl_dtype_is_signed(t) ? 1 : 0));
    return isfinite(x) && floor(x) == x && x >= (double)min && x < top;
}

/* One element of dtype st at sp converted to dtype dt at dp; false (nothing written) when the
 * destination cannot hold the value (integers: a fraction, NaN or out of range). */
static bool convert_one(gl_dtype dt, void *dp, gl_dtype st, const void *sp, bool write) {
    if (gl_dtype_is_float(dt) || gl_dtype_is_bool(dt)) {
        if (write) gl_dtype_store_double(dt, dp, gl_dtype_load_double(st, sp));
        return true;
    }
    if (gl_dtype_is_float(st)) {
        double x = gl_dtype_load_double(st, sp);
        if (!double_fits_int(dt, x)) return false;
        if (write) gl_dtype_store_bits(dt, dp, x >= 0x1p63 ? (int64_t)(uint64_t)x : (int64_t)x);
        return true;
    }
    int64_t v = gl_dtype_load_bits(st, sp);
    if (!gl_int_fits(dt, v, st == GL_U64)) return false;
    if (write) gl_dtype_store_bits(dt, dp, v);
    return true;
}

/* Raises for the source (argument 2) when one of its n elements at sp (the first being element
 * first + 1) does not convert to dtype dt exactly; writes nothing. */
static void check_convertible(lua_State *L, gl_dtype dt, const unsigned char *sp, gl_dtype st, size_t n,
                              size_t first, const char *fn) {
    if (!gl_dtype_is_integer(dt) || gl_dtype_is_bool(st)) return; /* floats and bools take anything */
    size_t se = gl_dtype_size(st);
    for (size_t i = 0; i < n; i++)
        if (!convert_one(dt, NULL, st, sp + i * se, false))
            gl_argerror(L, 2, fn, "source element %zu (%.17g) does not convert to %s exactly", first + i + 1,
                        gl_dtype_load_double(st, sp + i * se), gl_dtype_name(dt));
}

/* Converting host copy of n elements: every value is checked before anything is written, so
 * a refused conversion leaves the destination as it was. */
static void convert_elements(lua_State *L, void *dp, gl_dtype dt, const void *sp, gl_dtype st,
                             size_t n, size_t first, const char *fn) {
    size_t de = gl_dtype_size(dt), se = gl_dtype_size(st);
    const unsigned char *s = sp;
    unsigned char *d = dp;
    check_convertible(L, dt, s, st, n, first, fn);
    for (size_t i = 0; i < n; i++) convert_one(dt, d + i * de, st, s + i * se, true);
}

/* Element ranges of a copy, from the options: checks dtypes, offsets and counts. */
typedef struct copy_plan {
    size_t dst_byte, src_byte, nbytes, count;
    bool convert; /* element-wise conversion (host to host only) */
} copy_plan;

static copy_plan plan_copy(lua_State *L, gl_mem_ref dst, gl_mem_ref src, const copy_opts *o, const char *fn) {
    gl_dtype dt = mem_dtype(dst), st = mem_dtype(src);
    size_t de = gl_dtype_size(dt), se = gl_dtype_size(st);
    size_t dn = mem_numel(dst), sn = mem_numel(src);
    copy_plan p = {0, 0, 0, 0, false};
    if (dt != st && !o->reinterpret && !o->convert)
        gl_argerror(L, 2, fn, "dtype mismatch (destination %s, source %s); pass {reinterpret=true} to copy "
                              "the bytes as they are, or {convert=true} to convert the values (host arrays)",
                    gl_dtype_name(dt), gl_dtype_name(st));
    p.convert = o->convert && dt != st;
    if (p.convert && (dst.dev || src.dev))
        gl_fielderror(L, 3, fn, "convert", "converts between host arrays only (destination %s %s, "
                      "source %s %s): convert into a host array, then copy that",
                      dst.dev ? "cuda.array" : "cuda.host", gl_dtype_name(dt),
                      src.dev ? "cuda.array" : "cuda.host", gl_dtype_name(st));
    if ((size_t)o->dst_offset > dn)
        gl_fielderror(L, 3, fn, "dst_offset", "%lld is past the end of the destination (%zu elements)",
                      (long long)o->dst_offset, dn);
    if ((size_t)o->src_offset > sn)
        gl_fielderror(L, 3, fn, "src_offset", "%lld is past the end of the source (%zu elements)",
                      (long long)o->src_offset, sn);
    size_t davail = dn - (size_t)o->dst_offset, savail = sn - (size_t)o->src_offset;
    p.dst_byte = (size_t)o->dst_offset * de;
    p.src_byte = (size_t)o->src_offset * se;
    bool by_bytes = o->reinterpret && dt != st;
    if (o->count < 0) {
        size_t dsize = by_bytes ? davail * de : davail, ssize = by_bytes ? savail * se : savail;
        if (dsize != ssize) {
            if (o->dst_offset == 0 && o->src_offset == 0)
                gl_argerror(L, 2, fn, "size mismatch (destination %zu bytes, source %zu bytes)",
                            davail * de, savail * se);
            gl_argerror(L, 2, fn, "size mismatch after the offsets (destination %zu elements of %s left, "
                                  "source %zu elements of %s)",
                        davail, gl_dtype_name(dt), savail, gl_dtype_name(st));
        }
        p.count = davail;
    } else {
        p.count = (size_t)o->count;
        if (p.count > davail || (!by_bytes && p.count > savail) ||
            (by_bytes && (p.count > SIZE_MAX / de || p.count * de > savail * se)))
            gl_fielderror(L, 3, fn, "count", "%lld does not fit (destination has %zu elements of %s after "
                          "dst_offset, source %zu elements of %s after src_offset)", (long long)o->count,
                          davail, gl_dtype_name(dt), savail, gl_dtype_name(st));
    }
    p.nbytes = p.count * de;
    return p;
}

/* A 2-D copy's rows: pitches (default: the innermost dimension of a 2-D or higher array, else
 * the row length), and the last row must fit each array. */
typedef struct row_plan {
    size_t rows, dst_step, src_step; /* bytes between the starts of consecutive rows */
} row_plan;

static size_t default_pitch(gl_mem_ref m, size_t count) {
    int ndim = m.dev ? m.dev->ndim : m.host->ndim;
    const int64_t *shape = m.dev ? m.dev->shape : m.host->shape;
    return ndim >= 2 ? (size_t)shape[ndim - 1] : count;
}

static row_plan plan_rows(lua_State *L, gl_mem_ref dst, gl_mem_ref src, const copy_opts *o,
                          const copy_plan *p, const char *fn) {
    row_plan r = {1, 0, 0};
    if (o->rows <= 0) return r;
    if (o->reinterpret && mem_dtype(dst) != mem_dtype(src))
        gl_fielderror(L, 3, fn, "reinterpret", "a 2-D copy ({rows=}) between different dtypes converts only "
                      "({convert=true})");
    size_t dp = o->dst_pitch ? (size_t)o->dst_pitch : default_pitch(dst, p->count);
    size_t sp = o->src_pitch ? (size_t)o->src_pitch : default_pitch(src, p->count);
    if (dp < p->count)
        gl_fielderror(L, 3, fn, "dst_pitch", "%zu is shorter than a row (count %zu): rows would overlap",
                      dp, p->count);
    r.rows = (size_t)o->rows;
    const struct { size_t pitch, offset, numel; const char *name; } side[2] = {
        {dp, (size_t)o->dst_offset, mem_numel(dst), "destination"},
        {sp, (size_t)o->src_offset, mem_numel(src), "source"},
    };
    for (int i = 0; i < 2; i++) {
        size_t last;
        if (__builtin_mul_overflow(r.rows - 1, side[i].pitch, &last) ||
            __builtin_add_overflow(last, side[i].offset, &last) ||
            __builtin_add_overflow(last, p->count, &last) || last > side[i].numel)
            gl_fielderror(L, 3, fn, "rows", "%zu rows of %zu elements, %zu apart from offset %zu, do not fit "
                          "the %s (%zu elements)", r.rows, p->count, side[i].pitch, side[i].offset,
                          side[i].name, side[i].numel);
    }
    r.dst_step = dp * gl_dtype_size(mem_dtype(dst));
    r.src_step = sp * gl_dtype_size(mem_dtype(src));
    return r;
}

/* One contiguous span of a copy: the driver call for it, or memmove / conversion on the host. */
static void copy_span(lua_State *L, gl_mem_ref dst, gl_mem_ref src, size_t dbyte, size_t sbyte,
                      const copy_plan *p, CUstream s, bool on_stream, const CUcontext *peer,
                      const char *fn) {
    size_t n = p->nbytes;
    if (peer) { /* arrays of two devices: peer[0] the destination's context, peer[1] the source's */
        CUdeviceptr d = dst.dev->ptr + dbyte, sp = src.dev->ptr + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyPeerAsync(d, peer[0], sp, peer[1], n, s), fn, "cuMemcpyPeerAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyPeer(d, peer[0], sp, peer[1], n), fn, "cuMemcpyPeer");
    } else if (dst.host && src.host) {
        unsigned char *d = (unsigned char *)dst.host->data + dbyte;
        const unsigned char *sp = (const unsigned char *)src.host->data + sbyte;
        if (p->convert)
            convert_elements(L, d, dst.host->dtype, sp, src.host->dtype, p->count,
                             sbyte / gl_dtype_size(src.host->dtype), fn);
        else if (n) memmove(d, sp, n);
    } else if (dst.dev && src.dev) {
        CUdeviceptr d = dst.dev->ptr + dbyte, sp = src.dev->ptr + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyDtoDAsync(d, sp, n, s), fn, "cuMemcpyDtoDAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyDtoD(d, sp, n), fn, "cuMemcpyDtoD");
    } else if (dst.dev) {
        CUdeviceptr d = dst.dev->ptr + dbyte;
        const void *sp = (const unsigned char *)src.host->data + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyHtoDAsync(d, sp, n, s), fn, "cuMemcpyHtoDAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyHtoD(d, sp, n), fn, "cuMemcpyHtoD");
    } else {
        void *d = (unsigned char *)dst.host->data + dbyte;
        CUdeviceptr sp = src.dev->ptr + sbyte;
        if (on_stream) GL_CHECK(L, gl_cu.cuMemcpyDtoHAsync(d, sp, n, s), fn, "cuMemcpyDtoHAsync");
        else GL_CHECK(L, gl_cu.cuMemcpyDtoH(d, sp, n), fn, "cuMemcpyDtoH");
    }
}

/* The rows of a host-to-host copy. When the rows read overlap the rows written (views of one
 * array), the source is staged first, so every row reads it as it was before the copy: memmove's
 * rule, for the whole 2-D copy (row by row, a later row would read what an earlier one wrote). */
static void copy_host_rows(lua_State *L, gl_mem_ref dst, gl_mem_ref src, const copy_plan *p, const row_plan *rp,
                           const char *fn) {
    size_t row_bytes = p->convert ? p->count * gl_dtype_size(src.host->dtype) : p->nbytes;
    size_t src_span = (rp->rows - 1) * rp->src_step + row_bytes, dst_span = (rp->rows - 1) * rp->dst_step + p->nbytes;
    const unsigned char *s0 = (const unsigned char *)src.host->data + p->src_byte;
    const unsigned char *d0 = (const unsigned char *)dst.host->data + p->dst_byte;
    bool overlap = rp->rows > 1 && (uintptr_t)d0 < (uintptr_t)s0 + src_span && (uintptr_t)s0 < (uintptr_t)d0 + dst_span;
    if (!overlap) {
        for (size_t r = 0; r < rp->rows; r++)
            copy_span(L, dst, src, p->dst_byte + r * rp->dst_step, p->src_byte + r * rp->src_step, p, NULL, false,
                      NULL, fn);
        return;
    }
    unsigned char *stage = malloc(src_span);
    if (stage == NULL) luaL_error(L, "%s: cannot allocate %zu bytes to stage an overlapping copy", fn, src_span);
    memcpy(stage, s0, src_span);
    gl_host staged = *src.host; /* the source as it was, at offset 0 of the stage */
    staged.data = stage;
    gl_mem_ref from = {.dev = NULL, .host = &staged};
    /* no row raises: conversions of every row were checked before (copy_mem) */
    for (size_t r = 0; r < rp->rows; r++)
        copy_span(L, dst, from, p->dst_byte + r * rp->dst_step, r * rp->src_step, p, NULL, false, NULL, fn);
    free(stage);
}

/* The copy itself: src (stack index 2) into dst (index 1). */
static void copy_mem(lua_State *L, const copy_opts *o, const char *fn) {
    bool on_stream = o->stream_idx != 0;
    bool any_dev = gl_testudata(L, 1, GL_ARRAY_T) || gl_testudata(L, 2, GL_ARRAY_T);
    if (any_dev) gl_require_gpu(L, fn);
    /* no Lua runs from here to the driver calls: the pointers stay valid */
    gl_mem_ref dst = gl_check_mem(L, 1, fn), src = gl_check_mem(L, 2, fn);
    copy_plan p = plan_copy(L, dst, src, o, fn);
    row_plan rp = plan_rows(L, dst, src, o, &p, fn);
    bool host_only = dst.host && src.host;
    if (host_only && on_stream && o->stream_idx == 3)
        gl_argerror(L, 3, fn, "a host-to-host copy takes no stream");
    if (host_only && on_stream)
        gl_fielderror(L, 3, fn, "stream", "a host-to-host copy takes no stream");
    if (p.convert && rp.rows > 1) { /* check every row before writing any */
        size_t se = gl_dtype_size(src.host->dtype);
        for (size_t r = 0; r < rp.rows; r++) {
            size_t byte = p.src_byte + r * rp.src_step;
            check_convertible(L, dst.host->dtype, (const unsigned char *)src.host->data + byte, src.host->dtype,
                              p.count, byte / se, fn);
        }
    }
    CUcontext peer_ctx[2];
    bool peer = !host_only && gl_copy_devices(L, dst.dev, src.dev, fn);
    if (peer) {
        peer_ctx[0] = gl_device_context(L, dst.dev->device, fn);
        peer_ctx[1] = gl_device_context(L, src.dev->device, fn);
    }
    gl_stream_track *track = on_stream ? gl_opt_stream_track(L, o->stream_idx, fn) : gl_default_track();
    CUstream s = host_only ? NULL : gl_track_handle(track);
    if (p.nbytes == 0) return;
    if (host_only) {
        copy_host_rows(L, dst, src, &p, &rp, fn);
        return;
    }
    long obs = !host_only && gl_observers ? gl_observe_begin(s, true) : -1; /* cuda.trace */
    for (size_t r = 0; r < rp.rows; r++)
        copy_span(L, dst, src, p.dst_byte + r * rp.dst_step, p.src_byte + r * rp.src_step, &p, s,
                  on_stream, peer ? peer_ctx : NULL, fn);
    if (obs >= 0)
        gl_observe_copy(obs, peer ? "copy peer" : dst.dev && src.dev ? "copy DtoD" : dst.dev ? "copy HtoD" : "copy DtoH",
                        p.nbytes * rp.rows, s);
    if (host_only) return;
    mark_copy_uses(dst, src, track, on_stream);
    gl_capture_note(L, 1);
    gl_capture_note(L, 2);
}

/* x:copy_from(src[, stream | options]) once the method has checked x (argument 1): returns x. */
int gl_copy_from(lua_State *L, const char *fn) {
    copy_opts o;
    read_copy_opts(L, 3, &o, fn);
    copy_mem(L, &o, fn);
    lua_settop(L, 1);
    return 1;
}
