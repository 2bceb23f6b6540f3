# kernels/include/gpulab/cluster.cuh (clusters, distributed shared memory, TMA multicast, PDL) and
# the hopper_clusters lab without a device: every helper compiles with NVRTC to an sm_90a cubin and
# emits its instruction; the lab compiles its kernels, says there is no GPU, writes its JSON, exits 0.
gl_add_lua_test(hopper_cluster_header tests/lua/test_cluster_header.lua ENV GPULAB_LIBCUDA=/nonexistent/libcuda.so)
