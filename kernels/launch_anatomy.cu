// launch_anatomy.cu — kernels for labs/launch_anatomy.lua (seed §1).
// Each block records where it ran (%smid) and when (%globaltimer, ns), so the host can
// reconstruct placement, residency and completion order of a launch.

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned sm_id() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

// One record per block: start/end time, SM, warps seen. `threads_seen` counts every thread
// (per warp, from the active mask) so the host can check grid*block against what ran.
// Thread 0 holds the block for `busy_ns` so that blocks overlap long enough to be seen
// resident together; block `slow_block` holds it for `slow_ns` instead (unequal work: a block
// that starts first but has more to do finishes after blocks that started with it).
extern "C" __global__ void record_blocks(unsigned long long *start_ns, unsigned long long *end_ns,
                                         unsigned *sm, unsigned *warps, unsigned long long *threads_seen,
                                         unsigned long long busy_ns, unsigned slow_block,
                                         unsigned long long slow_ns) {
    __shared__ unsigned long long t0;
    __shared__ unsigned warp_count;
    if (threadIdx.x == 0) {
        t0 = global_ns();
        warp_count = 0;
    }
    __syncthreads();
    // lane 0 of each warp counts the warp and its live threads (one global atomic per warp)
    unsigned live = __popc(__activemask());
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&warp_count, 1u);
        atomicAdd(threads_seen, (unsigned long long)live);
    }
    const unsigned long long hold = blockIdx.x == slow_block ? slow_ns : busy_ns;
    if (threadIdx.x == 0)
        while (global_ns() - t0 < hold) {
        }
    __syncthreads();
    if (threadIdx.x == 0) {
        start_ns[blockIdx.x] = t0;
        end_ns[blockIdx.x] = global_ns();
        sm[blockIdx.x] = sm_id();
        warps[blockIdx.x] = warp_count;
    }
}

// A single thread that keeps the GPU busy for `busy_ns`, then writes how long it really ran:
// the host compares this with how long the launch call took to return.
extern "C" __global__ void busy_wait(unsigned long long busy_ns, unsigned long long *ran_ns) {
    unsigned long long t0 = global_ns(), t = t0;
    while (t - t0 < busy_ns) t = global_ns();
    *ran_ns = t - t0;
}
