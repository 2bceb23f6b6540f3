// Kernels for tools/bench_launch: launch overhead only, so they do (almost) nothing.
// args4 reads its four arguments so none can be optimised away, but never writes in practice.
extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void args4(float *out, const float *in, unsigned n, float scale) {
  if (n == 0xffffffffu && threadIdx.x == 0) out[0] = in[0] * scale;
}
