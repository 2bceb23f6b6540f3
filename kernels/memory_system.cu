// memory_system.cu — kernels for labs/memory_system.lua: bandwidth against SMs, an L2-resident
// hot set under streaming traffic, and latency per level of the memory hierarchy.
//
// Data is a pattern of 32-bit words computed from the index (pattern_word), so every result can
// be checked on the device against the formula itself, not against a second copy of the data.

__device__ __forceinline__ unsigned pattern_word(unsigned long long i, unsigned seed) {
    unsigned x = (unsigned)i * 2654435761u ^ (unsigned)(i >> 32) ^ seed;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    return x;
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// words[i] = pattern_word(i, seed) for n 16-byte elements (4n words).
extern "C" __global__ void fill_pattern(uint4 *__restrict__ a, unsigned long long n, unsigned seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long w = 4 * i;
        a[i] = make_uint4(pattern_word(w, seed), pattern_word(w + 1, seed), pattern_word(w + 2, seed),
                          pattern_word(w + 3, seed));
    }
}

// Counts the 16-byte elements of a that differ from the pattern into *bad.
extern "C" __global__ void check_pattern(const uint4 *__restrict__ a, unsigned long long n, unsigned seed,
                                         unsigned long long *bad) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x, mine = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint4 v = a[i];
        unsigned long long w = 4 * i;
        if (v.x != pattern_word(w, seed) || v.y != pattern_word(w + 1, seed) || v.z != pattern_word(w + 2, seed) ||
            v.w != pattern_word(w + 3, seed))
            mine++;
    }
    if (mine) atomicAdd(bad, mine);
}

// The sum of the pattern's 4n words, from the formula alone (no memory read): what read16 must find.
extern "C" __global__ void pattern_sum(unsigned long long n, unsigned seed, unsigned long long *sum) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x, mine = 0;
    for (unsigned long long w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; w < 4 * n; w += stride)
        mine += pattern_word(w, seed);
    atomicAdd(sum, mine);
}

// Grid-stride copy of n 16-byte elements with four independent loads in flight per thread
// before the first store: enough memory-level parallelism per SM for Little's law to bind on
// bandwidth, not on the issue of loads.
extern "C" __global__ void copy16(const uint4 *__restrict__ src, uint4 *__restrict__ dst, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2 * stride] = c;
        dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}

// The sum of v over the block, in thread 0: warp shuffles, then one warp over the warps' sums.
// One atomic per block instead of one per thread: with an atomic per thread (about 200,000 on one
// address) the hot read of a 16 MiB set took 0.155 ms on an H200 (RESULTS §24), where gpu_l2's
// read of the same set takes 0.008-0.013 ms: the atomics, not the reads, were being timed.
__device__ unsigned long long block_sum(unsigned long long v) {
    __shared__ unsigned long long warp_sums[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = 0;
    if (warp == 0) {
        if (lane < (blockDim.x + 31) / 32) v = warp_sums[lane];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

// Reads n 16-byte elements `reps` times (four loads in flight per thread) and adds every word
// into *sum, so the reads cannot be dropped and the host can check what was read:
// *sum = reps x pattern_sum.
extern "C" __global__ void read16(const uint4 *__restrict__ a, unsigned long long n, unsigned reps,
                                  unsigned long long *sum) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x, mine = 0;
    unsigned long long start = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned r = 0; r < reps; r++) {
        unsigned long long i = start;
        for (; i + 3 * stride < n; i += 4 * stride) {
            uint4 p = a[i], q = a[i + stride], u = a[i + 2 * stride], v = a[i + 3 * stride];
            mine += (unsigned long long)p.x + p.y + p.z + p.w + q.x + q.y + q.z + q.w;
            mine += (unsigned long long)u.x + u.y + u.z + u.w + v.x + v.y + v.z + v.w;
        }
        for (; i < n; i += stride) {
            uint4 p = a[i];
            mine += (unsigned long long)p.x + p.y + p.z + p.w;
        }
    }
    unsigned long long total = block_sum(mine);
    if (threadIdx.x == 0) atomicAdd(sum, total);
}

// A pointer chase over `nodes` nodes `stride_words` 8-byte words apart: node j holds the address of
// node (j + step) mod nodes, one cycle through all of them when gcd(step, nodes) = 1. Addresses,
// not indices: a hop is the load and nothing else (an index would add its address arithmetic to
// every hop), as in the chases the published Hopper latencies come from.
extern "C" __global__ void make_chain(unsigned long long *next, unsigned nodes, unsigned stride_words,
                                      unsigned step) {
    unsigned stride = gridDim.x * blockDim.x;
    for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < nodes; j += stride) {
        unsigned long long to = ((unsigned long long)j + step) % nodes;
        next[(unsigned long long)j * stride_words] = (unsigned long long)(next + to * stride_words);
    }
}

// One thread, from word index `start`: `warm` hops to bring the chain into the caches it fits
// in, then `hops` timed dependent loads. out[0] = SM cycles (clock64), out[1] = ns
// (%globaltimer), out[2] = the word index reached (the host checks it against the chain's
// arithmetic). cg=1 loads with ld.global.cg (cached in L2 only), cg=0 with ld.global.ca (L1 and L2).
extern "C" __global__ void chase(const unsigned long long *next, unsigned start, unsigned warm, unsigned hops,
                                 int cg, unsigned long long *out) {
    const unsigned long long *p = next + start;
    if (cg) {
        for (unsigned h = 0; h < warm; h++) p = (const unsigned long long *)__ldcg(p);
    } else {
        for (unsigned h = 0; h < warm; h++) p = (const unsigned long long *)__ldca(p);
    }
    unsigned long long n0 = global_ns();
    long long c0 = clock64();
    if (cg) {
        for (unsigned h = 0; h < hops; h++) p = (const unsigned long long *)__ldcg(p);
    } else {
        for (unsigned h = 0; h < hops; h++) p = (const unsigned long long *)__ldca(p);
    }
    long long c1 = clock64();
    unsigned long long n1 = global_ns();
    out[0] = (unsigned long long)(c1 - c0);
    out[1] = n1 - n0;
    out[2] = (unsigned long long)(p - next);
}
