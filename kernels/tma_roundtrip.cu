// tma_roundtrip.cu — one box per CTA: TMA load into shared memory, TMA store back out through a
// second map of the same layout. Any dtype and swizzle: the store undoes the load's swizzle,
// so out must equal in bit for bit. Used by the tensor-map GPU tests.
#include <gpulab/tma.cuh>

extern "C" __global__ void __launch_bounds__(32)
tma_roundtrip(const __grid_constant__ gl_tensormap_t in_map, const __grid_constant__ gl_tensormap_t out_map,
              int tiles_x, int box_w, int box_h, unsigned box_bytes, unsigned long long timeout_ns, int *status) {
    __shared__ gl_u64 full;
    extern __shared__ unsigned char dyn_smem[];
    // 1024-byte alignment, which the 128B swizzle pattern needs; the launch adds 1024 bytes
    unsigned char *buf = dyn_smem + ((1024u - (gl_smem_addr(dyn_smem) & 1023u)) & 1023u);
    const int x = (int)(blockIdx.x % tiles_x) * box_w, y = (int)(blockIdx.x / tiles_x) * box_h;
    if (threadIdx.x != 0) return;
    gl_mbar_init(&full, 1);
    gl_fence_mbar_init();
    gl_mbar_arrive_expect_tx(&full, box_bytes);
    gl_tma_load_2d(buf, &in_map, x, y, &full);
    if (!gl_mbar_wait(&full, 0, gl_globaltimer_ns() + timeout_ns, status, GL_WAIT_CODE(GL_WAIT_FULL, 0, 0)))
        return;
    gl_tma_store_2d(&out_map, x, y, buf);
    gl_tma_store_commit();
    gl_tma_store_wait_read<0>();
}
