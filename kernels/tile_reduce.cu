// tile_reduce.cu — kernels for labs/compile_pipeline.lua (seed §4: one logical tile,
// several execution layouts).
// One block sums one 1024-element tile. WARPS picks the layout: 32*WARPS threads, each
// summing 1024/(32*WARPS) elements (strided, so each load instruction of a warp is one
// coalesced 128-byte line), then a shuffle reduction per warp and one shared-memory step
// across warps. The arithmetic is the same sum; the layout decides registers, the number of
// loads in flight per thread and the amount of data exchanged.

constexpr int TILE = 1024;

// Values are multiples of 1/8 in [-8, 8]: every partial sum of a tile is exact in float,
// so all layouts must agree bit for bit whatever order they add in.
extern "C" __global__ void fill_tiles(float *x, unsigned long long n, unsigned seed) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = (unsigned)i * 2654435761u + seed;
    x[i] = (float)((int)((h >> 16) % 129u) - 64) * 0.125f;
}

template <int WARPS>
__global__ void __launch_bounds__(32 * WARPS) tile_reduce(const float *x, float *sums) {
    constexpr int THREADS = 32 * WARPS;
    constexpr int PER_THREAD = TILE / THREADS;
    const float *tile = x + (unsigned long long)blockIdx.x * TILE;
    float v[PER_THREAD];
#pragma unroll
    for (int j = 0; j < PER_THREAD; j++) v[j] = tile[j * THREADS + threadIdx.x];
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < PER_THREAD; j++) s += v[j];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (WARPS == 1) {
        if (threadIdx.x == 0) sums[blockIdx.x] = s;
        return;
    }
    __shared__ float per_warp[WARPS];
    if ((threadIdx.x & 31) == 0) per_warp[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) t += per_warp[w];
        sums[blockIdx.x] = t;
    }
}

// Many values live at once: 64 accumulators updated in a ring. Compiled normally it fits in
// registers; under a register cap (-maxrregcount) the compiler must spill to local memory.
extern "C" __global__ void many_live_values(const float *x, float *y, int rounds) {
    float acc[64];
    const unsigned base = blockIdx.x * blockDim.x * 64u;
#pragma unroll
    for (int j = 0; j < 64; j++) acc[j] = x[base + j * blockDim.x + threadIdx.x];
    for (int r = 0; r < rounds; r++) {
#pragma unroll
        for (int j = 0; j < 64; j++) acc[j] = fmaf(acc[j], 0.5f, acc[(j + 1) & 63] * 0.25f);
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 64; j++) s += acc[j];
    y[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
