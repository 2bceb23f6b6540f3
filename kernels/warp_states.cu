// warp_states.cu — kernels for labs/warp_states.lua (seed §2: active is not issuing).
// Each thread runs ILP independent dependency chains of `steps` links. With ILP = 1 a warp
// can issue one instruction per chain latency at most; more chains per warp give the
// scheduler independent work, the other way of keeping it busy besides more warps.
// Dynamic shared memory is requested only to limit how many blocks fit on an SM.

// Arithmetic chain: each FMA needs the result of the previous one (latency ~4 cycles).
template <int ILP>
__global__ void fma_chain(float *out, int steps) {
    extern __shared__ float occupancy_limiter[];
    float acc[ILP];
#pragma unroll
    for (int c = 0; c < ILP; c++) acc[c] = (float)(threadIdx.x + c);
    const float a = 0.999999f, b = 1e-6f;
    for (int s = 0; s < steps; s++) {
#pragma unroll
        for (int c = 0; c < ILP; c++) acc[c] = fmaf(acc[c], a, b);
    }
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < ILP; c++) sum += acc[c];
    // never true for real data; keeps the limiter array referenced without costing a store
    if (sum == -1.f) occupancy_limiter[threadIdx.x] = sum;
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Memory chain: pointer chasing through a permutation (latency of an L2/HBM load, hundreds
// of cycles); each load's address is the previous load's value.
template <int ILP>
__global__ void load_chain(const unsigned *next, unsigned n, unsigned *out, int steps) {
    extern __shared__ float occupancy_limiter[];
    unsigned idx[ILP];
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int c = 0; c < ILP; c++) idx[c] = (tid * 7919u + (unsigned)c * 104729u) % n;
    for (int s = 0; s < steps; s++) {
#pragma unroll
        for (int c = 0; c < ILP; c++) idx[c] = __ldcg(next + idx[c]);
    }
    unsigned x = 0;
#pragma unroll
    for (int c = 0; c < ILP; c++) x ^= idx[c];
    if (x == 0xffffffffu) occupancy_limiter[threadIdx.x] = 0.f;
    out[tid] = x;
}
