// hopper_clusters.cu — the kernels of labs/hopper_clusters.lua: what thread-block clusters,
// distributed shared memory (DSM), TMA multicast, programmatic dependent launch (PDL) and
// cooperative launches do on a Hopper GPU. Helpers: gpulab/cluster.cuh (and tma.cuh).
//
//   cluster_residency    every cluster holds its SMs for hold_ns after a cluster barrier; rank 0
//                        records when, so the host can count clusters resident at once
//   dsmem_chase          one thread follows a chain of dependent shared-memory loads: local
//                        ld.shared, ld.shared::cluster into its own CTA, or into the next CTA
//   dsmem_stream         every CTA reads a shared buffer over and over: its own (ld.shared) or
//                        its neighbour's in the cluster (ld.shared::cluster)
//   tma_multicast_tiles  every CTA of a cluster needs the same tiles: rank 0 loads each once with
//                        .multicast::cluster, or every CTA loads it itself
//   pdl_step             one link of a chain of dependent kernels (reads the previous link's
//                        output after gl_pdl_wait), stamping when each block started, passed
//                        gl_pdl_wait and ended
//   globaltimer_tick     the %globaltimer's smallest step
//   hold_stream          one thread spins for ns: the launches queued behind it on its stream
//                        then run back to back, whatever the host's pace of enqueueing them
//   coop_steps           `steps` neighbour-shift steps in one cooperative kernel, grid.sync()
//                        between them; coop_one_step is the same step as a kernel of its own
//
// Waits that can hang have %globaltimer deadlines and report into status[] (tma.cuh layout).
#include <gpulab/cluster.cuh>
#include <cooperative_groups.h>

typedef unsigned int u32;
typedef unsigned long long u64;

// ---- co-residency --------------------------------------------------------------------------------

// ranks_seen[c] counts the CTAs of cluster c that ran (the host checks it equals the cluster size);
// start_ns/end_ns[c] bound the time rank 0 held the cluster after every CTA of it had arrived.
extern "C" __global__ void cluster_residency(u64 *start_ns, u64 *end_ns, u32 *sm_of_rank0, u32 *ranks_seen,
                                             u64 hold_ns) {
    // the launch's dynamic shared memory (never touched) sets how many CTAs an SM holds
    const u32 c = gl_cluster_linear_id();
    gl_cluster_sync(); // the cluster is resident: all its CTAs arrived
    if (threadIdx.x == 0) {
        atomicAdd(&ranks_seen[c], 1u);
        if (gl_cluster_ctarank() == 0) {
            const u64 t0 = gl_globaltimer_ns();
            u64 t = t0;
            while (t - t0 < hold_ns) t = gl_globaltimer_ns();
            start_ns[c] = t0;
            end_ns[c] = t;
            sm_of_rank0[c] = gl_smid();
        }
    }
    gl_cluster_sync(); // the other CTAs stay until rank 0 is done
}

// ---- DSM latency ---------------------------------------------------------------------------------

#define CHASE_WORDS 4096
#define CHASE_STEP 97 // next = (i + 97) % words: every load depends on the one before

#define CHASE_LOCAL 0  // ld.shared on this CTA's ring
#define CHASE_SELF 1   // ld.shared::cluster on this CTA's own ring (mapa to its own rank)
#define CHASE_REMOTE 2 // ld.shared::cluster on the next CTA's ring

// Rank 0's thread 0 makes `steps` dependent loads; cycles[0] = clock64 cycles they took,
// out[0] = the index the chain ended on ((steps * 97) % words: the host checks it).
extern "C" __global__ void dsmem_chase(u32 *out, u64 *cycles, int words, int steps, int mode) {
    __shared__ u32 ring[CHASE_WORDS];
    const u32 rank = gl_cluster_ctarank(), n = gl_cluster_nctarank();
    for (int i = threadIdx.x; i < words; i += blockDim.x) ring[i] = (u32)((i + CHASE_STEP) % words);
    gl_cluster_sync();
    if (rank == 0 && threadIdx.x == 0) {
        u32 base = gl_smem_addr(ring);
        if (mode == CHASE_SELF) base = gl_dsmem_map(ring, rank);
        if (mode == CHASE_REMOTE) base = gl_dsmem_map(ring, (rank + 1) % n);
        u32 idx = 0;
        u64 t0, t1;
        if (mode == CHASE_LOCAL) {
            t0 = clock64();
#pragma unroll 8
            for (int s = 0; s < steps; s++) idx = gl_smem_ld_u32(base + idx * 4);
            t1 = clock64();
        } else {
            t0 = clock64();
#pragma unroll 8
            for (int s = 0; s < steps; s++) idx = gl_dsmem_ld_u32(base + idx * 4);
            t1 = clock64();
        }
        out[0] = idx;
        cycles[0] = t1 - t0;
    }
    gl_cluster_sync(); // the ring read remotely stays alive until the chain is done
}

// ---- DSM bandwidth -------------------------------------------------------------------------------

// Word i of CTA r's buffer is (r << 16) + i. Every thread sums the words of 16-byte vectors
// t, t + blockDim, ... of the source buffer, `reps` times; sums[blockIdx.x] is the block's total
// (mod 2^32), which the host knows: reps * sum_i ((src << 16) + i). remote = 0: the CTA's own
// buffer through ld.shared; 1: the next rank's through ld.shared::cluster.
extern "C" __global__ void dsmem_stream(u32 *sums, int words, int reps, int remote) {
    extern __shared__ __align__(16) u32 buf[];
    const u32 rank = gl_cluster_ctarank(), n = gl_cluster_nctarank();
    for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = (rank << 16) + (u32)i;
    gl_cluster_sync();
    const u32 local = gl_smem_addr(buf);
    const u32 src = remote ? gl_dsmem_map(buf, (rank + 1) % n) : local;
    const int vecs = words / 4;
    u32 acc = 0;
    for (int r = 0; r < reps; r++) {
        if (remote) {
#pragma unroll 4
            for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
                const uint4 q = gl_dsmem_ld_v4(src + v * 16);
                acc += q.x + q.y + q.z + q.w;
            }
        } else {
#pragma unroll 4
            for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
                const uint4 q = gl_smem_ld_v4(src + v * 16);
                acc += q.x + q.y + q.z + q.w;
            }
        }
    }
    atomicAdd(&sums[blockIdx.x], acc);
    gl_cluster_sync(); // the neighbour may still be reading this CTA's buffer
}

// ---- TMA multicast -------------------------------------------------------------------------------

#define WAIT_TILE GL_WAIT_CODE(GL_WAIT_FULL, 0, 0)

// Cluster c reads tiles c * per_cluster + t (mod ntiles) of a u32 matrix with tiles_x boxes per
// row; every CTA of the cluster sums every word of each tile into sums[blockIdx.x] (mod 2^32).
// multicast = 1: rank 0 loads each tile once into all CTAs (gl_tma_load_2d_multicast, mask of
// every rank); 0: each CTA loads it itself (gl_tma_load_2d). Each CTA arms its own barrier for the
// full box either way. A cluster barrier per tile: nobody reloads the buffer while a CTA reads it.
extern "C" __global__ void tma_multicast_tiles(const __grid_constant__ gl_tensormap_t map, u32 *sums, int ntiles,
                                               int per_cluster, int tiles_x, int box_w, int box_h, int multicast,
                                               u64 timeout_ns, int *status) {
    extern __shared__ unsigned char raw[];
    __shared__ __align__(8) gl_u64 full;
    // TMA destinations are 128-byte aligned; the launch asks for 128 bytes more than a box
    u32 *tile = (u32 *)(raw + ((128u - (gl_smem_addr(raw) & 127u)) & 127u));
    const u32 rank = gl_cluster_ctarank(), n = gl_cluster_nctarank();
    const u32 box_bytes = (u32)(box_w * box_h * 4);
    const u64 deadline = gl_globaltimer_ns() + timeout_ns;
    if (threadIdx.x == 0) {
        gl_mbar_init(&full, 1);
        gl_fence_mbar_init();
        gl_tma_prefetch_desc(&map);
    }
    gl_cluster_sync(); // every barrier of the cluster exists before rank 0 multicasts into it
    const int first = (int)gl_cluster_linear_id() * per_cluster;
    u32 acc = 0;
    for (int t = 0; t < per_cluster; t++) {
        const int tile_index = (first + t) % ntiles;
        const int x = (tile_index % tiles_x) * box_w, y = (tile_index / tiles_x) * box_h;
        if (threadIdx.x == 0 && !gl_status_failed(status)) {
            gl_mbar_arrive_expect_tx(&full, box_bytes);
            if (!multicast) gl_tma_load_2d(tile, &map, x, y, &full);
            else if (rank == 0) gl_tma_load_2d_multicast(tile, &map, x, y, &full, gl_cluster_mask_first(n));
        }
        if (gl_mbar_wait(&full, (u32)(t & 1), deadline, status, WAIT_TILE)) {
            for (int i = threadIdx.x; i < box_w * box_h; i += blockDim.x) acc += tile[i];
        }
        gl_cluster_sync(); // every CTA is done with the tile before the next copy overwrites it
    }
    atomicAdd(&sums[blockIdx.x], acc);
}

// ---- PDL chain -----------------------------------------------------------------------------------

// Link j of the chain: buf[(j + 1) * n + i] = buf[j * n + i] + 1. Thread 0 of each block stamps
// when the block started (before gl_pdl_wait: with pdl=true that may be before link j - 1 ended),
// when its gl_pdl_wait returned (from then on it may read link j - 1's output; without pdl=true
// the wait returns at once) and when it ended, at starts/waited/ends[j * gridDim.x + blockIdx.x].
extern "C" __global__ void pdl_step(u32 *buf, int n, int j, u64 *starts, u64 *ends, u64 *waited) {
    if (threadIdx.x == 0) starts[j * gridDim.x + blockIdx.x] = gl_globaltimer_ns();
    gl_pdl_wait(); // link j - 1's output is complete and visible from here on
    if (threadIdx.x == 0) waited[j * gridDim.x + blockIdx.x] = gl_globaltimer_ns();
    gl_pdl_launch_dependents();
    const u32 *in = buf + (size_t)j * n;
    u32 *out = buf + (size_t)(j + 1) * n;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i] + 1;
    __syncthreads();
    if (threadIdx.x == 0) ends[j * gridDim.x + blockIdx.x] = gl_globaltimer_ns();
}

// The %globaltimer's resolution: one thread reads the timer up to `max_reads` times and records
// out[0] = the smallest non-zero step between two consecutive reads (0: it never moved),
// out[1] = how many times it moved, out[2] = the nanoseconds from the first read to the last.
extern "C" __global__ void globaltimer_tick(u64 *out, int max_reads) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const u64 first = gl_globaltimer_ns();
    u64 prev = first, smallest = 0, moves = 0;
    for (int i = 0; i < max_reads; i++) {
        const u64 now = gl_globaltimer_ns();
        if (now != prev) {
            const u64 step = now - prev;
            if (smallest == 0 || step < smallest) smallest = step;
            moves++;
            prev = now;
        }
    }
    out[0] = smallest;
    out[1] = moves;
    out[2] = prev - first;
}

// Holds its stream for `ns` nanoseconds of %globaltimer: the host enqueues a chain behind it, and
// the chain's gaps are then the GPU's own, not the time the host took between two launches.
extern "C" __global__ void hold_stream(u64 ns) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const u64 t0 = gl_globaltimer_ns();
    while (gl_globaltimer_ns() - t0 < ns) {
    }
}

// ---- cooperative grid ----------------------------------------------------------------------------

// One step: dst[i] = src[(i + 1) % n] + 1 (a block reads what another block wrote the step
// before, so steps need a grid-wide barrier between them).
__device__ __forceinline__ void shift_step(const u32 *src, u32 *dst, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = src[(i + 1) % n] + 1;
}

// `steps` steps ping-ponging between a and b with grid.sync() between them (steps - 1 syncs):
// afterwards the last written buffer (b for odd steps) holds a0[(i + steps) % n] + steps.
extern "C" __global__ void coop_steps(u32 *a, u32 *b, int n, int steps) {
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    for (int s = 0; s < steps; s++) {
        if (s > 0) grid.sync();
        if (s % 2 == 0) shift_step(a, b, n);
        else shift_step(b, a, n);
    }
}

extern "C" __global__ void coop_one_step(const u32 *src, u32 *dst, int n) { shift_step(src, dst, n); }
