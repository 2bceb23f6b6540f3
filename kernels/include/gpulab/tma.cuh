// gpulab/tma.cuh — Hopper TMA and mbarrier helpers for kernels compiled by NVRTC (sm_90+).
//
// Needs no CUDA header: NVRTC has no default include path, so the descriptor type and every
// helper are written here with inline PTX. Include as <gpulab/tma.cuh> (gpulab passes
// -I<home>/kernels/include to cuda.compile).
//
// Protocol of a TMA load (seed §3):
//   1. one thread: gl_mbar_init(bar, arrivals); gl_fence_mbar_init()  -> published to the async proxy
//   2. __syncthreads() so every thread sees the initialised barrier
//   3. producer: gl_mbar_arrive_expect_tx(bar, bytes); gl_tma_load_2d(dst, &map, x, y, bar)
//   4. consumers: gl_mbar_wait(bar, phase_parity, deadline, status, code) then read shared memory
// The transaction count must equal the bytes the copies deliver: too many and the phase never
// completes (gl_mbar_wait then reports it and returns false), too few and it completes early.
#ifndef GPULAB_TMA_CUH
#define GPULAB_TMA_CUH

typedef unsigned long long gl_u64;
typedef unsigned int gl_u32;

// The 128-byte tensor map, passed by value: `const __grid_constant__ gl_tensormap_t map`.
// __grid_constant__ keeps it in parameter space, where the TMA unit may read it by address.
struct __align__(64) gl_tensormap_t {
    gl_u64 opaque[16];
};

// Shared-memory address of a generic pointer, as the PTX shared::cta operands want it.
__device__ __forceinline__ gl_u32 gl_smem_addr(const void *p) {
    return (gl_u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ gl_u64 gl_globaltimer_ns() {
    gl_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---- mbarrier --------------------------------------------------------------------------------

// One thread initialises; `arrivals` is the number of arrive calls that complete a phase.
__device__ __forceinline__ void gl_mbar_init(gl_u64 *bar, gl_u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(gl_smem_addr(bar)), "r"(arrivals)
                 : "memory");
}

// After initialising barriers: makes the initialisation visible to the async proxy (the TMA
// unit completes transactions on the barrier), which a plain __syncthreads() does not.
__device__ __forceinline__ void gl_fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Orders this thread's ordinary shared-memory writes before later async-proxy accesses
// (a TMA store reading what threads wrote, or a TMA load overwriting what they wrote).
__device__ __forceinline__ void gl_fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrives once and adds `bytes` to the transactions this phase waits for.
__device__ __forceinline__ void gl_mbar_arrive_expect_tx(gl_u64 *bar, gl_u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(gl_smem_addr(bar)), "r"(bytes)
                 : "memory");
}

// Adds `bytes` to the expected transactions without arriving.
__device__ __forceinline__ void gl_mbar_expect_tx(gl_u64 *bar, gl_u32 bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(gl_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

// A plain arrival (release semantics: this thread's earlier shared-memory accesses are ordered
// before whoever waits on the phase).
__device__ __forceinline__ void gl_mbar_arrive(gl_u64 *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(gl_smem_addr(bar)) : "memory");
}

// True once the phase with parity `parity` completed (acquire semantics at CTA scope, the default
// of mbarrier.try_wait: arrivals of this CTA's threads and TMA completions; for data that other
// CTAs publish by arriving on this barrier, wait with cluster.cuh's gl_mbar_wait_cluster).
__device__ __forceinline__ bool gl_mbar_try_wait(gl_u64 *bar, gl_u32 parity) {
    gl_u32 done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(gl_smem_addr(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

// What a timed-out wait records: status[0] = code (first one wins), status[1] = block,
// status[2] = thread, status[3] = waited nanoseconds. Codes say which barrier, stage and phase.
#define GL_WAIT_FULL 1  // "tile is filled"
#define GL_WAIT_EMPTY 2 // "buffer may be overwritten"
#define GL_WAIT_OTHER 3
#define GL_WAIT_ALIGN 4 // a copy's shared destination was not aligned (gl_tma_dst_aligned)
#define GL_WAIT_SLOT 5  // "index slot read" (a slot of data the consumers read, not a buffer)
#define GL_WAIT_CODE(kind, stage, phase) \
    (0x40000000 | ((kind) << 24) | (((stage) & 0xff) << 16) | ((phase) & 0xffff))

// Records a timed-out wait in status (if non-null; the first code wins): the code, this block and
// thread, and the nanoseconds waited (capped at INT_MAX).
__device__ __forceinline__ void gl_record_timeout(int *status, int code, gl_u64 waited_ns) {
    if (status != nullptr && atomicCAS(status, 0, code) == 0) {
        status[1] = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
        status[2] = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
        status[3] = (int)(waited_ns > 0x7fffffffull ? 0x7fffffff : waited_ns);
        __threadfence();
    }
}

// The deadline loop of every timed mbarrier wait: TryWait (gl_mbar_try_wait here, cluster.cuh's
// gl_mbar_try_wait_cluster there) until the phase of `parity` completed or the %globaltimer passes
// `deadline_ns`. On time-out it records `code` in status (if non-null) and returns false: the
// caller returns instead of trapping, because a trap poisons the whole context. deadline_ns == 0
// waits for ever.
template <bool (*TryWait)(gl_u64 *, gl_u32)>
__device__ __forceinline__ bool gl_mbar_wait_until(gl_u64 *bar, gl_u32 parity, gl_u64 deadline_ns, int *status,
                                                   int code) {
    if (TryWait(bar, parity)) return true;
    gl_u64 start = gl_globaltimer_ns();
    for (;;) {
        // try_wait itself suspends for a hardware-chosen time, so polling the timer per round is cheap
        if (TryWait(bar, parity)) return true;
        gl_u64 now = gl_globaltimer_ns();
        if (deadline_ns != 0 && now > deadline_ns) {
            gl_record_timeout(status, code, now - start);
            return false;
        }
    }
}

// Waits for the phase of `parity` of this CTA's barrier (CTA-scope acquire), as gl_mbar_wait_until.
__device__ __forceinline__ bool gl_mbar_wait(gl_u64 *bar, gl_u32 parity, gl_u64 deadline_ns,
                                             int *status, int code) {
    return gl_mbar_wait_until<gl_mbar_try_wait>(bar, parity, deadline_ns, status, code);
}

// Another thread timed out: lets the rest of a kernel stop early without waiting again.
__device__ __forceinline__ bool gl_status_failed(const int *status) {
    return status != nullptr && *(volatile const int *)status != 0;
}

// ---- TMA --------------------------------------------------------------------------------------

// Pulls the descriptor into the TMA unit's cache ahead of the first copy (optional).
__device__ __forceinline__ void gl_tma_prefetch_desc(const gl_tensormap_t *map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// Copies the box at element coordinates (x innermost, y) into shared memory at dst
// (128-byte aligned; 1024 for the 128B swizzle pattern to line up) and completes its bytes
// as transactions on `bar`.
__device__ __forceinline__ void gl_tma_load_2d(void *dst, const gl_tensormap_t *map, int x, int y,
                                               gl_u64 *bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(gl_smem_addr(dst)),
        "l"(map), "r"(x), "r"(y), "r"(gl_smem_addr(bar))
        : "memory");
}

// An L2 policy that marks lines as first to go (data read or written once); pass it to the
// *_hint forms. createpolicy runs per thread and costs a few cycles: make it once per kernel.
__device__ __forceinline__ gl_u64 gl_l2_evict_first_policy() {
    gl_u64 policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

__device__ __forceinline__ void gl_tma_load_2d_hint(void *dst, const gl_tensormap_t *map, int x, int y,
                                                    gl_u64 *bar, gl_u64 policy) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(gl_smem_addr(dst)),
        "l"(map), "r"(x), "r"(y), "r"(gl_smem_addr(bar)), "l"(policy)
        : "memory");
}

// The shared-memory alignment a box load needs: 128 bytes, or the swizzle pattern's repeat
// (8 rows of its span: 256, 512 or 1024 bytes), which a tensor map reports as map.smem_align.
// Returns false, and records `code` in status, instead of issuing a copy to a destination that
// is not aligned: what the hardware does with one is not an error the caller can see.
__device__ __forceinline__ bool gl_tma_dst_aligned(const void *dst, gl_u32 align, int *status, int code) {
    if ((gl_smem_addr(dst) & (align - 1)) == 0) return true;
    if (status != nullptr && atomicCAS(status, 0, code) == 0) {
        status[1] = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
        status[2] = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
        status[3] = (int)(gl_smem_addr(dst) & 0xffff);
        __threadfence();
    }
    return false;
}

// Stores the box at (x, y) from shared memory at src. Completion is by bulk groups, not
// mbarriers: gl_tma_store_commit() closes a group, gl_tma_store_wait_read<N>() waits until at
// most N groups may still read their shared memory, gl_tma_store_wait<N>() until at most N are
// still writing global memory.
__device__ __forceinline__ void gl_tma_store_2d(const gl_tensormap_t *map, int x, int y, const void *src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map),
                 "r"(x), "r"(y), "r"(gl_smem_addr(src))
                 : "memory");
}

__device__ __forceinline__ void gl_tma_store_2d_hint(const gl_tensormap_t *map, int x, int y, const void *src,
                                                     gl_u64 policy) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.L2::cache_hint"
                 " [%0, {%1, %2}], [%3], %4;" ::"l"(map), "r"(x), "r"(y), "r"(gl_smem_addr(src)), "l"(policy)
                 : "memory");
}

__device__ __forceinline__ void gl_tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void gl_tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

template <int N> __device__ __forceinline__ void gl_tma_store_wait() {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// ---- small helpers the labs share ---------------------------------------------------------

// Named barrier among `threads` threads (a multiple of 32) of this block, id 1..15.
__device__ __forceinline__ void gl_named_barrier(gl_u32 id, gl_u32 threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Two packed f16 values times two packed f16 values, round to nearest even.
__device__ __forceinline__ gl_u32 gl_hmul2(gl_u32 a, gl_u32 b) {
    gl_u32 r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// float -> f16 (round to nearest even), duplicated in both halves.
__device__ __forceinline__ gl_u32 gl_f16x2_splat(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return (gl_u32)h | ((gl_u32)h << 16);
}

#endif
