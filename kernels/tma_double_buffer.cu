// tma_double_buffer.cu — the kernels of labs/tma_double_buffer.lua: an fp16 matrix is read in
// 8,192-byte tiles, scaled, and written back.
//
//   tma_pipeline        persistent: one producer warp issues TMA loads into a ring of `stages`
//                       shared buffers; consumer warps scale each tile into one of two store
//                       buffers (or in place, out_bufs=0) and one of them stores it with a TMA
//                       store. Per stage, two mbarriers carry the two dependency directions:
//                       full[s] "tile is filled" (producer -> consumers, completed by the copy's
//                       transaction bytes) and empty[s] "buffer may be overwritten" (consumers ->
//                       producer: once they read it, or in place once the store finished reading).
//                       A third, slot_free[s], releases the shared slot that says which tile
//                       the stage holds (every consumer thread arrives once it has read it).
//   tma_one_tile        one tile per CTA, same load/scale/store path, no reuse of buffers.
//   copy_int4_scale     plain 16-byte loads and stores, no TMA: the non-TMA reference.
//   tma_expect_tx_demo  one CTA loading `nboxes` boxes against a chosen transaction count, to
//                       show what a wrong count does (stuck phase, or early completion).
//
// Every wait has a %globaltimer deadline; a time-out is recorded in status[] and the kernel
// returns (gpulab/tma.cuh), so a protocol mistake never traps and poisons the context.
#include <gpulab/tma.cuh>

#define TILE_BYTES 8192       // the one-tile kernel's tile, and the lab's default box
#define MAX_TILE_BYTES 32768  // the largest box (256 x 64 f16)
#define MAX_STAGE_BYTES 65536 // the pipeline's largest stage (boxes per stage x box)
#define MAX_STAGES 8
#ifndef CONSUMER_WARPS
#define CONSUMER_WARPS 4
#endif
// Where the producer leaves the index of the group a stage holds, for the consumers. By default
// a shared slot per stage with its own barrier, slot_free[s], on which every consumer thread
// arrives once it has read the slot; the producer waits for it before writing the slot again.
// compute-sanitizer's racecheck follows each thread's mbarrier arrival to the producer's wait,
// so it sees that order: with one arrival per warp after __syncwarp it reported 6080 WAR
// hazards, and with the stage's empty barrier (one arrival, consumer 0) as the only release
// 28199 (H200, docs/RESULTS.md §18, §20, §21). STAGE_INDEX_GLOBAL=1 keeps the index in a
// global slot instead (sched), the form that costs 7% at 4 GiB (§20, §21): kept so that
// tools/tma_limit.lua can measure the difference.
#ifndef STAGE_INDEX_GLOBAL
#define STAGE_INDEX_GLOBAL 0
#endif

// tma_pipeline's flags
#define PIPE_NO_PREFETCH 1  // skip prefetch.tensormap (seed §3: an optimisation, not a requirement)
#define PIPE_EVICT_FIRST 2  // loads and stores carry an L2 evict_first policy (data used once)
#define PIPE_UNSAFE_REUSE 4 // rewrite a store buffer without cp.async.bulk.wait_group.read: WRONG
                            // on purpose, to show what the store's completion protocol protects
#define PIPE_DYNAMIC 8      // tiles handed out by a global counter (sched[0]) instead of a fixed
                            // stride: CTAs that run ahead take more, and the tiles in flight stay
                            // close together in memory
#define PIPE_YMAJOR 16      // tile t is (t / tiles_y, t % tiles_y): consecutive tiles go down a
                            // column of boxes instead of along a row of them
#define PIPE_WIDE_SHIFT 5   // (flags >> 5) & 3: the tensor maps' element is 2 << that many bytes
                            // (0: f16; 1: 4 bytes, f16 pairs; 2: 8 bytes): a box row of 256
                            // elements then spans 512 B, 1 KB or 2 KB. Elementwise, so any
                            // view of the matrix computes the same output
#define PIPE_BOXES_SHIFT 8  // flags >> 8: boxes per stage (0 means 1): a stage holds that many
                            // consecutive tiles, loaded against one barrier and stored together

// A stage's bytes rounded up to 128: every TMA destination must be 128-byte aligned (a box of
// 16 bytes at a 16-byte offset faults with CUDA_ERROR_MISALIGNED_ADDRESS on the H200).
__device__ __forceinline__ int stage_stride(int stage_bytes) { return (stage_bytes + 127) & ~127; }

// Dynamic shared memory is only 16-byte aligned; TMA boxes with the 128B swizzle want 1024.
// The launch asks for 1,024 bytes more than the buffers need.
__device__ __forceinline__ unsigned char *align_1024(unsigned char *p) {
    gl_u32 pad = (1024u - (gl_smem_addr(p) & 1023u)) & 1023u;
    return p + pad;
}

__device__ __forceinline__ uint4 scale_vec(uint4 v, gl_u32 s2) {
    v.x = gl_hmul2(v.x, s2);
    v.y = gl_hmul2(v.y, s2);
    v.z = gl_hmul2(v.z, s2);
    v.w = gl_hmul2(v.w, s2);
    return v;
}

// Thread t of n scales the 16-byte vectors t, t+n, ... of one tile in place. Elementwise, so
// the shared-memory layout (swizzled or not) does not matter; consecutive threads touch
// consecutive 16 bytes, which is free of bank conflicts.
__device__ __forceinline__ void scale_tile(unsigned char *tile, int bytes, gl_u32 s2, int t, int n) {
    uint4 *v = (uint4 *)tile;
#pragma unroll 4
    for (int i = t; i < bytes / 16; i += n) v[i] = scale_vec(v[i], s2);
}

// All `threads` consumer threads agree: true only if every one passes true (bar.red.and).
__device__ __forceinline__ bool consumers_all(bool ok, gl_u32 threads) {
    gl_u32 r;
    asm volatile(
        "{\n\t.reg .pred p, q;\n\t"
        "setp.ne.u32 p, %1, 0;\n\t"
        "bar.red.and.pred q, 1, %2, p;\n\t"
        "selp.u32 %0, 1, 0, q;\n\t}"
        : "=r"(r)
        : "r"((gl_u32)ok), "r"(threads)
        : "memory");
    return r != 0;
}

// Element coordinates of tile t's box: along rows of boxes, or (PIPE_YMAJOR) down columns.
__device__ __forceinline__ void tile_xy(int t, int tiles_x, int ntiles, int box_w, int box_h, int flags, int *x,
                                        int *y) {
    if (flags & PIPE_YMAJOR) {
        const int tiles_y = ntiles / tiles_x;
        *x = (t / tiles_y) * box_w;
        *y = (t % tiles_y) * box_h;
    } else {
        *x = (t % tiles_x) * box_w;
        *y = (t / tiles_x) * box_h;
    }
}

// The next group of tiles of this CTA (a group is `boxes` consecutive tiles; ngroups of them):
// a fixed stride over the grid, or (PIPE_DYNAMIC) the next one not yet taken by any CTA. The
// counter resets itself: every producer that draws past the end counts itself in sched[1], and
// the last of them zeroes both, so the next launch starts at group 0.
__device__ __forceinline__ int next_group(int prev, int ngroups, int flags, int *sched) {
    if (!(flags & PIPE_DYNAMIC)) return prev < 0 ? (int)blockIdx.x : prev + (int)gridDim.x;
    const int g = atomicAdd(&sched[0], 1);
    if (g >= ngroups && atomicAdd(&sched[1], 1) == (int)gridDim.x - 1) {
        sched[0] = 0;
        sched[1] = 0;
        __threadfence();
    }
    return g;
}

// The producer thread: every load of this CTA, each group into the next stage once it is
// released. group_of[s] tells the consumers which group stage s holds (-1: no more); the full
// barrier's arrival (release) publishes it to their wait (acquire). Where it lives:
// STAGE_INDEX_GLOBAL (above). Measured and rejected: st.async (faults with
// CUDA_ERROR_ILLEGAL_INSTRUCTION outside a cluster launch) and a 16-byte cp.async.bulk copy of
// the index into shared memory (racecheck tracks those writes and, with the stage's own empty
// barrier as the only release, reports a WAR hazard), docs/RESULTS.md §18 and §20.
__device__ __forceinline__ void pipeline_produce(const gl_tensormap_t *in_map, const gl_tensormap_t *out_map,
                                                 unsigned char *buf, gl_u64 *full, gl_u64 *empty,
                                                 gl_u64 *slot_free, int *group_of,
                                                 int tiles_x, int ntiles, int box_w, int box_h, int tile_bytes,
                                                 int boxes, int stages, int flags, int *sched, gl_u64 deadline,
                                                 int *status) {
    if (!(flags & PIPE_NO_PREFETCH)) {
        gl_tma_prefetch_desc(in_map);
        gl_tma_prefetch_desc(out_map);
    }
    const gl_u64 policy = gl_l2_evict_first_policy();
    const int stride = stage_stride(boxes * tile_bytes);
    const int ngroups = (ntiles + boxes - 1) / boxes;
    int group = next_group(-1, ngroups, flags, sched);
    for (int i = 0;; i++) {
        const int s = i % stages, round = i / stages;
        // The buffer's previous group (round-1) must be released before it is overwritten. In
        // round 0 the parity-1 wait on a fresh barrier returns at once.
        if (!gl_mbar_wait(&empty[s], (round & 1) ^ 1, deadline, status, GL_WAIT_CODE(GL_WAIT_EMPTY, s, round)))
            return;
        // The shared index slot has its own release: every consumer thread has read it.
        if (!STAGE_INDEX_GLOBAL &&
            !gl_mbar_wait(&slot_free[s], (round & 1) ^ 1, deadline, status, GL_WAIT_CODE(GL_WAIT_SLOT, s, round)))
            return;
        if (group >= ngroups) { // the end: wake the consumers with no bytes to wait for
            *(volatile int *)&group_of[s] = -1;
            gl_mbar_arrive(&full[s]);
            return;
        }
        *(volatile int *)&group_of[s] = group;
        const int first = group * boxes, count = min(boxes, ntiles - first);
        gl_mbar_arrive_expect_tx(&full[s], (gl_u32)(count * tile_bytes));
        for (int b = 0; b < count; b++) {
            int x, y;
            tile_xy(first + b, tiles_x, ntiles, box_w, box_h, flags, &x, &y);
            unsigned char *dst = buf + s * stride + b * tile_bytes;
            if (flags & PIPE_EVICT_FIRST) gl_tma_load_2d_hint(dst, in_map, x, y, &full[s], policy);
            else gl_tma_load_2d(dst, in_map, x, y, &full[s]);
        }
        group = next_group(group, ngroups, flags, sched);
    }
}

extern "C" __global__ void __launch_bounds__(32 * (1 + CONSUMER_WARPS))
tma_pipeline(const __grid_constant__ gl_tensormap_t in_map, const __grid_constant__ gl_tensormap_t out_map,
             int tiles_x, int ntiles, int box_w, int box_h, int stages, int out_bufs, int flags, float scale,
             unsigned long long timeout_ns, int *status, int *sched) { // sched: 2 ints (STAGE_INDEX_GLOBAL=1:
                                                                       // + MAX_STAGES x gridDim.x)
    __shared__ gl_u64 full[MAX_STAGES];  // "tile is filled": 1 arrival (producer) + the tile's bytes
    __shared__ gl_u64 empty[MAX_STAGES]; // "buffer may be overwritten": 1 arrival (consumer 0)
    __shared__ gl_u64 slot_free[MAX_STAGES]; // "index slot read": every consumer thread arrives
    __shared__ int slot[MAX_STAGES];         // the group each stage holds (STAGE_INDEX_GLOBAL=0)
    extern __shared__ unsigned char dyn_smem[];
    unsigned char *buf = align_1024(dyn_smem);
    const int warp = threadIdx.x / 32;
    const int wide = (flags >> PIPE_WIDE_SHIFT) & 3;
    const int tile_bytes = box_w * box_h * (2 << wide);
    const int boxes = (flags >> PIPE_BOXES_SHIFT) > 0 ? (flags >> PIPE_BOXES_SHIFT) : 1;
    if (boxes > 16 || wide > 2 || stages < 1 || stages > MAX_STAGES || out_bufs < 0 || out_bufs > 2 ||
        tile_bytes > MAX_TILE_BYTES || boxes * tile_bytes > MAX_STAGE_BYTES || tile_bytes % 16 != 0 ||
        blockDim.x != 32 * (1 + CONSUMER_WARPS) || sched == nullptr) {
        if (threadIdx.x == 0 && status != nullptr) atomicCAS(status, 0, 0x7fff0000 | (stages & 0xffff));
        return; // a bad configuration is reported, never run
    }

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            gl_mbar_init(&full[s], 1);
            gl_mbar_init(&empty[s], 1);
            gl_mbar_init(&slot_free[s], 32 * CONSUMER_WARPS);
        }
        gl_fence_mbar_init();
    }
    __syncthreads(); // from here on producer and consumers synchronise only through mbarriers
    const gl_u64 deadline = timeout_ns ? gl_globaltimer_ns() + timeout_ns : 0;
    // sched: [0] the tile counter, [1] producers past the end, then MAX_STAGES slots per CTA
    int *group_of = STAGE_INDEX_GLOBAL ? sched + 2 + blockIdx.x * MAX_STAGES : slot;

    if (warp == 0) { // ---- producer: one thread issues every load of this CTA
        if (threadIdx.x == 0)
            pipeline_produce(&in_map, &out_map, buf, full, empty, slot_free, group_of, tiles_x, ntiles, box_w, box_h,
                             tile_bytes, boxes, stages, flags, sched, deadline, status);
        return;
    }

    // ---- consumers. out_bufs 1 or 2: read the stage buffer, write the scaled tile to a store
    // buffer and release the stage at once, so the next load into it overlaps this tile's
    // store. out_bufs == 0: scale in place and store from the stage buffer, which then stays
    // held until the bulk store has read it (cp.async.bulk.wait_group.read).
    const int ct = threadIdx.x - 32;
    const gl_u32 nct = blockDim.x - 32;
    const gl_u32 s2 = gl_f16x2_splat(scale);
    const gl_u64 policy = gl_l2_evict_first_policy();
    const bool safe = !(flags & PIPE_UNSAFE_REUSE);
    const int stride = stage_stride(boxes * tile_bytes);
    unsigned char *outbuf = buf + stages * stride;
    for (int i = 0;; i++) {
        const int s = i % stages, round = i / stages;
        unsigned char *tbuf = buf + s * stride;
        bool ok = gl_mbar_wait(&full[s], round & 1, deadline, status, GL_WAIT_CODE(GL_WAIT_FULL, s, round));
        // The store issued out_bufs groups ago read the store buffer this group goes to: consumer
        // 0, which issued it, waits until it has; the barrier below holds the others until then.
        if (out_bufs > 0 && ct == 0 && safe) {
            if (out_bufs == 2) gl_tma_store_wait_read<1>();
            else gl_tma_store_wait_read<0>();
        }
        const int group = ok ? *(volatile const int *)&group_of[s] : 0;
        if (!STAGE_INDEX_GLOBAL) gl_mbar_arrive(&slot_free[s]); // this thread is done with the slot
        if (!consumers_all(ok, nct)) { // every consumer leaves together on a time-out
            if (ct == 0) gl_tma_store_wait_read<0>(); // after the stores already issued read their buffers
            return;
        }
        if (group < 0) break; // the producer has no more tiles
        const int first = group * boxes, count = min(boxes, ntiles - first);
        unsigned char *obuf = tbuf;
        if (out_bufs > 0) {
            obuf = outbuf + (out_bufs == 2 ? (i & 1) : 0) * stride;
            const uint4 *src = (const uint4 *)tbuf;
            uint4 *dst = (uint4 *)obuf;
#pragma unroll 4
            for (int v = ct; v < count * tile_bytes / 16; v += (int)nct) dst[v] = scale_vec(src[v], s2);
        } else {
            scale_tile(tbuf, count * tile_bytes, s2, ct, (int)nct);
        }
        gl_fence_proxy_async_smem(); // the TMA store (async proxy) reads what these threads wrote
        gl_named_barrier(3, nct);    // every consumer's part of the group is written
        if (ct == 0) {
            if (out_bufs > 0) gl_mbar_arrive(&empty[s]); // every consumer has read the stage buffer
            for (int b = 0; b < count; b++) {
                int x, y;
                tile_xy(first + b, tiles_x, ntiles, box_w, box_h, flags, &x, &y);
                if (flags & PIPE_EVICT_FIRST) gl_tma_store_2d_hint(&out_map, x, y, obuf + b * tile_bytes, policy);
                else gl_tma_store_2d(&out_map, x, y, obuf + b * tile_bytes);
            }
            gl_tma_store_commit(); // one bulk group per stage
            if (out_bufs == 0) {
                // Release a buffer once its store no longer reads it. With 2+ stages the release
                // trails by one group, so this thread does not stall on the store it just issued.
                if (stages == 1) {
                    gl_tma_store_wait_read<0>();
                    gl_mbar_arrive(&empty[s]);
                } else {
                    gl_tma_store_wait_read<1>();
                    if (i > 0) gl_mbar_arrive(&empty[(i - 1) % stages]);
                }
            }
        }
    }
    if (ct == 0) gl_tma_store_wait_read<0>(); // shared memory must outlive the stores reading it
}

extern "C" __global__ void __launch_bounds__(128)
tma_one_tile(const __grid_constant__ gl_tensormap_t in_map, const __grid_constant__ gl_tensormap_t out_map,
             int tiles_x, int box_w, int box_h, float scale, unsigned long long timeout_ns, int *status) {
    __shared__ gl_u64 full;
    extern __shared__ unsigned char dyn_smem[];
    unsigned char *buf = align_1024(dyn_smem);
    const int tile = blockIdx.x;
    const int x = (tile % tiles_x) * box_w, y = (tile / tiles_x) * box_h;
    if (threadIdx.x == 0) {
        gl_mbar_init(&full, 1);
        gl_fence_mbar_init();
    }
    __syncthreads();
    const gl_u64 deadline = timeout_ns ? gl_globaltimer_ns() + timeout_ns : 0;
    if (threadIdx.x == 0) {
        gl_mbar_arrive_expect_tx(&full, TILE_BYTES);
        gl_tma_load_2d(buf, &in_map, x, y, &full);
    }
    bool ok = gl_mbar_wait(&full, 0, deadline, status, GL_WAIT_CODE(GL_WAIT_FULL, 0, 0));
    if (ok) scale_tile(buf, TILE_BYTES, gl_f16x2_splat(scale), threadIdx.x, blockDim.x);
    gl_fence_proxy_async_smem();
    if (!__syncthreads_and(ok)) return;
    if (threadIdx.x == 0) {
        gl_tma_store_2d(&out_map, x, y, buf);
        gl_tma_store_commit();
        gl_tma_store_wait_read<0>();
    }
}

// Plain path: each thread moves 16 bytes per access, four independent loads in flight.
extern "C" __global__ void __launch_bounds__(256)
copy_int4_scale(const uint4 *__restrict__ in, uint4 *__restrict__ out, unsigned long long n16, float scale) {
    const gl_u32 s2 = gl_f16x2_splat(scale);
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = in[i], b = in[i + stride], c = in[i + 2 * stride], d = in[i + 3 * stride];
        out[i] = scale_vec(a, s2);
        out[i + stride] = scale_vec(b, s2);
        out[i + 2 * stride] = scale_vec(c, s2);
        out[i + 3 * stride] = scale_vec(d, s2);
    }
    for (; i < n16; i += stride) out[i] = scale_vec(in[i], s2);
}

// The transaction-count protocol. Shared memory is poisoned (0xFFFF), `nboxes` boxes along x are
// loaded against one arrive.expect_tx(expect_bytes), and the moment the wait returns the
// shared buffer is copied out, as a consumer would read it:
//   expect == nboxes * box bytes   the phase completes when all bytes landed: out is the input;
//   expect larger                  the phase never completes: the wait times out, status names
//                                  the barrier, stage and phase, the kernel returns;
//   expect smaller                 the phase completes early: out holds poison (torn data)
//                                  (the uncovered boxes are issued 20 µs after the covered ones).
// Bytes beyond the count land on the next phase; they are accounted for before the CTA exits,
// because a copy must not write into the shared memory of a finished CTA.
extern "C" __global__ void __launch_bounds__(256)
tma_expect_tx_demo(const __grid_constant__ gl_tensormap_t in_map, unsigned short *out, int nboxes, int box_w,
                   gl_u32 box_bytes, gl_u32 expect_bytes, unsigned long long timeout_ns, int *status) {
    __shared__ gl_u64 bar;
    extern __shared__ unsigned char dyn_smem[];
    unsigned char *buf = align_1024(dyn_smem);
    const gl_u32 total = (gl_u32)nboxes * box_bytes;
    for (gl_u32 i = threadIdx.x; i < total / 4; i += blockDim.x) ((gl_u32 *)buf)[i] = 0xFFFFFFFFu;
    gl_fence_proxy_async_smem(); // the poison is written before the copies overwrite it
    if (threadIdx.x == 0) {
        gl_mbar_init(&bar, 1);
        gl_fence_mbar_init();
    }
    __syncthreads();
    const gl_u64 deadline = gl_globaltimer_ns() + timeout_ns;
    if (threadIdx.x == 0) {
        gl_mbar_arrive_expect_tx(&bar, expect_bytes);
        // With a short count, the boxes the count covers go first and the rest 20 µs later. Issued
        // together, the copies' byte completions can be merged so that the barrier's count jumps
        // past zero and the phase never completes at all (measured on the H200); staggered, the
        // count reaches exactly zero when the covered boxes land, as a consumer's wrong count would.
        const int covered = expect_bytes < total ? (int)(expect_bytes / box_bytes) : nboxes;
        for (int b = 0; b < covered; b++) gl_tma_load_2d(buf + b * box_bytes, &in_map, b * box_w, 0, &bar);
        if (covered < nboxes) {
            const gl_u64 later = gl_globaltimer_ns() + 20000;
            while (gl_globaltimer_ns() < later) {
            }
            for (int b = covered; b < nboxes; b++)
                gl_tma_load_2d(buf + b * box_bytes, &in_map, b * box_w, 0, &bar);
        }
    }
    const bool ok = gl_mbar_wait(&bar, 0, deadline, status, GL_WAIT_CODE(GL_WAIT_FULL, 0, 0));
    if (ok) {
        const unsigned short *h = (const unsigned short *)buf;
        // last box first: the copies land roughly in issue order, so an early completion shows
        for (gl_u32 j = threadIdx.x; j < total / 2; j += blockDim.x) out[total / 2 - 1 - j] = h[total / 2 - 1 - j];
    }
    __syncthreads();
    if (threadIdx.x == 0 && ok && expect_bytes < total) {
        gl_mbar_arrive_expect_tx(&bar, total - expect_bytes); // the late bytes complete phase 1
        gl_mbar_wait(&bar, 1, deadline + timeout_ns, status, GL_WAIT_CODE(GL_WAIT_OTHER, 0, 1));
    }
    __syncthreads();
}

// Counts 16-byte vectors of a and b that differ in any bit: checks every timed run's output
// against the reference output on the device, so a sweep of many configurations stays quick.
extern "C" __global__ void __launch_bounds__(256)
count_diff_vec16(const uint4 *__restrict__ a, const uint4 *__restrict__ b, unsigned long long n16,
                 unsigned long long *count) {
    unsigned long long local = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
        const uint4 x = a[i], y = b[i];
        local += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    if (local) atomicAdd(count, local);
}

// Stores only: every CTA fills one tile of shared memory with `value` (two f16 per word) and
// writes it with TMA stores to its tiles. `wait` picks what the issuing thread waits for
// after each store: 0 nothing (the groups overlap; one wait at the end), 1 until the store has
// READ shared memory (cp.async.bulk.wait_group.read 0: the buffer may be reused), 2 until its
// writes are complete (cp.async.bulk.wait_group 0). The shared buffer never changes, so all
// three are correct; they differ in what the thread waits for, which is the store's
// completion protocol (seed §3).
extern "C" __global__ void __launch_bounds__(128)
tma_store_only(const __grid_constant__ gl_tensormap_t out_map, int tiles_x, int ntiles, int box_w, int box_h,
               int wait, gl_u32 value) {
    extern __shared__ unsigned char dyn_smem[];
    unsigned char *buf = align_1024(dyn_smem);
    const int tile_bytes = box_w * box_h * 2;
    if (tile_bytes > MAX_TILE_BYTES || tile_bytes % 16 != 0) return;
    for (int i = threadIdx.x; i < tile_bytes / 4; i += blockDim.x) ((gl_u32 *)buf)[i] = value;
    gl_fence_proxy_async_smem();
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        gl_tma_store_2d(&out_map, (tile % tiles_x) * box_w, (tile / tiles_x) * box_h, buf);
        gl_tma_store_commit();
        if (wait == 1) gl_tma_store_wait_read<0>();
        else if (wait == 2) gl_tma_store_wait<0>();
    }
    gl_tma_store_wait_read<0>(); // shared memory must outlive the stores reading it
}

// One CTA loads one box at element (0, 0) into shared memory at a 1024-aligned buffer plus
// `offset` bytes, then copies the bytes it finds there to `out`, as the consumer of a swizzled
// tile would see them. check != 0: gl_tma_dst_aligned refuses a destination that is not
// `align`-byte aligned (status records GL_WAIT_ALIGN) and nothing is copied.
extern "C" __global__ void __launch_bounds__(128)
tma_swizzle_probe(const __grid_constant__ gl_tensormap_t map, unsigned char *out, int box_bytes, int offset,
                  int check, int align, unsigned long long timeout_ns, int *status) {
    __shared__ gl_u64 bar;
    extern __shared__ unsigned char dyn_smem[];
    unsigned char *dst = align_1024(dyn_smem) + offset;
    for (int i = threadIdx.x; i < box_bytes; i += blockDim.x) dst[i] = 0xEE; // poison: never an input byte here
    gl_fence_proxy_async_smem();
    if (threadIdx.x == 0) {
        gl_mbar_init(&bar, 1);
        gl_fence_mbar_init();
    }
    __syncthreads();
    __shared__ int issued;
    if (threadIdx.x == 0) {
        issued = !check || gl_tma_dst_aligned(dst, (gl_u32)align, status, GL_WAIT_CODE(GL_WAIT_ALIGN, 0, 0));
        if (issued) {
            gl_mbar_arrive_expect_tx(&bar, (gl_u32)box_bytes);
            gl_tma_load_2d(dst, &map, 0, 0, &bar);
        }
    }
    __syncthreads();
    if (!issued) return;
    const gl_u64 deadline = gl_globaltimer_ns() + timeout_ns;
    if (!gl_mbar_wait(&bar, 0, deadline, status, GL_WAIT_CODE(GL_WAIT_FULL, 0, 0))) return;
    for (int i = threadIdx.x; i < box_bytes; i += blockDim.x) out[i] = dst[i];
}

// The store's completion protocol, broken on purpose (seed §3). Per tile: every thread writes
// `value` into the shared buffer, thread 0 issues the TMA store of it, and then every thread
// reuses the buffer at once, overwriting it with `next` as the following tile's data would.
// wait_read != 0: thread 0 first waits with cp.async.bulk.wait_group.read 0 until the store has
// read the buffer, and the output is `value` everywhere. Without the wait the store may read
// the buffer after the overwrite began: the host finds `next` in the output (torn tiles).
extern "C" __global__ void __launch_bounds__(256)
tma_store_reuse_demo(const __grid_constant__ gl_tensormap_t out_map, int tiles_x, int ntiles, int box_w, int box_h,
                     int wait_read, gl_u32 value, gl_u32 next) {
    extern __shared__ unsigned char dyn_smem[];
    gl_u32 *buf = (gl_u32 *)align_1024(dyn_smem);
    const int words = box_w * box_h * 2 / 4;
    if (box_w * box_h * 2 > MAX_TILE_BYTES) return;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = value;
        gl_fence_proxy_async_smem(); // the store (async proxy) reads what the threads wrote
        __syncthreads();
        if (threadIdx.x == 0) {
            gl_tma_store_2d(&out_map, (tile % tiles_x) * box_w, (tile / tiles_x) * box_h, buf);
            gl_tma_store_commit();
            if (wait_read) gl_tma_store_wait_read<0>();
        }
        __syncthreads();
        for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = next;
        __syncthreads();
    }
    if (threadIdx.x == 0) gl_tma_store_wait_read<0>(); // shared memory must outlive the stores reading it
}
