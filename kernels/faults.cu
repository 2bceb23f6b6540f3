// faults.cu — deliberately broken kernels for labs/illegal_access.lua (seed §5).
// Each bug is confined to one thread of one block, so a tool that names the thread and the
// block can be checked against what the source says.

// Every thread writes its own element; thread (bad_thread) of block (bad_block) also writes
// `offset` elements past the end. A small offset lands inside the allocation's padding
// (silent without a tool); a huge one lands in unmapped memory (a device fault).
extern "C" __global__ void oob_write(float *p, unsigned long long n, unsigned bad_block,
                                     unsigned bad_thread, unsigned long long offset) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) p[i] = (float)i;
    if (blockIdx.x == bad_block && threadIdx.x == bad_thread)
        p[n + offset] = -1.0f; // the bug: index past the end
}

// Each thread publishes a value in shared memory and reads a neighbour's from another warp.
// Without the barrier the read races with the neighbour's write (racecheck: a RAW hazard).
template <bool BARRIER>
__global__ void neighbour_sum(const float *in, float *out) {
    __shared__ float buf[256];
    unsigned t = threadIdx.x;
    buf[t] = in[blockIdx.x * blockDim.x + t];
    if (BARRIER) __syncthreads();
    out[blockIdx.x * blockDim.x + t] = buf[t] + buf[(t + 32) % blockDim.x];
}

// A barrier that the threads of one warp reach at two different places (synccheck: divergent
// threads in a warp). Threads 48..63 share warp 1 with threads 32..47 but take the other branch
// and wait at a second __syncthreads instead of leaving: threads that exit are simply dropped
// from the barrier on Volta and later, which is why a plain early return goes unreported.
extern "C" __global__ void divergent_barrier(float *out) {
    unsigned t = threadIdx.x;
    if (t < 48) {
        out[t] = (float)t;
        __syncthreads(); // the bug: threads 48..63 wait at the other barrier below
        out[t] += 1.0f;
    } else {
        __syncthreads();
        out[t] = -1.0f;
    }
}

// Two-stream protocol: the producer stalls, then fills `buf`; the consumer copies `buf`.
// The order between them exists only if the host makes the consumer's stream wait for the
// producer's event: no kernel-level tool sees a missing wait.
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Launched as one block (grid-stride loop): it occupies one SM, so the consumer's blocks find
// free SMs and run while the producer still stalls.
extern "C" __global__ void slow_producer(float *buf, unsigned n, unsigned long long stall_ns) {
    unsigned long long t0 = global_ns();
    while (global_ns() - t0 < stall_ns) {
    }
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = (float)i;
}

extern "C" __global__ void consumer(const float *buf, float *copy, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) copy[i] = buf[i];
}
