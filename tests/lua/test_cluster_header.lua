-- kernels/include/gpulab/cluster.cuh without a GPU: every helper compiles with NVRTC for sm_90a
-- down to a cubin (ptxas runs inside NVRTC), and the PTX holds the instruction each one stands for.
-- The header also compiles beside tma.cuh in either order, and the lab's kernels compile.
local T = dofile("tests/lua/t.lua")

-- One kernel that calls every helper, so none is left uninstantiated (ptxas checks only what is used).
local EVERY_HELPER = [[
#include <gpulab/cluster.cuh>
extern "C" __global__ void every_helper(unsigned *out, const __grid_constant__ gl_tensormap_t map,
                                        unsigned long long deadline, int *status) {
    __shared__ __align__(128) unsigned char tile[8192];
    __shared__ __align__(8) gl_u64 bar;
    __shared__ unsigned word;
    gl_pdl_wait();
    gl_pdl_launch_dependents();
    const unsigned r = gl_cluster_ctarank(), n = gl_cluster_nctarank();
    const uint3 id = gl_cluster_id(), count = gl_cluster_count(), pos = gl_cluster_ctaid();
    if (threadIdx.x == 0) {
        word = r;
        gl_mbar_init(&bar, 1);
        gl_fence_mbar_init();
    }
    gl_cluster_sync();
    gl_cluster_arrive_relaxed();
    gl_cluster_wait();
    const unsigned peer = gl_dsmem_map(&word, (r + 1) % n);
    const unsigned v = gl_dsmem_ld_u32(peer);
    gl_dsmem_st_u32(peer, v + 1);
    const uint4 q = gl_dsmem_ld_v4(gl_dsmem_map_addr(gl_smem_addr(tile), 0));
    const uint4 l = gl_smem_ld_v4(gl_smem_addr(tile));
    gl_dsmem_st_release_u32(peer, 5);
    const unsigned w = gl_dsmem_ld_acquire_u32(peer) + gl_dsmem_atomic_add_u32(peer, 1) +
                       gl_smem_ld_u32(gl_smem_addr(&word));
    const bool ok = gl_dsmem_wait_u32(peer, 6, deadline, status, 1);
    if (threadIdx.x == 0) {
        gl_mbar_arrive_expect_tx(&bar, 8192);
        if (r == 0) gl_tma_load_2d_multicast(tile, &map, 0, 0, &bar, gl_cluster_mask_first(n));
        gl_mbar_arrive_remote(gl_dsmem_map(&bar, 0));
    }
    gl_mbar_wait(&bar, 0, deadline, status, 2);
    const bool seen = gl_mbar_wait_cluster(&bar, 1, deadline, status, 3) && gl_mbar_try_wait_cluster(&bar, 1);
    gl_cluster_sync();
    out[threadIdx.x] = v + w + ok + q.x + l.y + id.x + count.y + pos.z + gl_cluster_linear_id() + gl_smid() +
                       gl_cluster_is_explicit() + seen;
}
]]

-- helper -> the PTX it must produce
local EXPECT = {
  gl_pdl_wait = "griddepcontrol.wait;",
  gl_pdl_launch_dependents = "griddepcontrol.launch_dependents;",
  gl_cluster_ctarank = "%cluster_ctarank",
  gl_cluster_nctarank = "%cluster_nctarank",
  gl_cluster_id = "%clusterid.x",
  gl_cluster_count = "%nclusterid.x",
  gl_cluster_ctaid = "%cluster_ctaid.z",
  gl_cluster_is_explicit = "%is_explicit_cluster",
  gl_smid = "%smid",
  gl_cluster_arrive = "barrier.cluster.arrive.release;",
  gl_cluster_arrive_relaxed = "barrier.cluster.arrive.relaxed;",
  gl_cluster_wait = "barrier.cluster.wait.acquire;",
  gl_dsmem_map = "mapa.shared::cluster.u32",
  gl_dsmem_ld_u32 = "ld.shared::cluster.u32",
  gl_dsmem_st_u32 = "st.shared::cluster.u32",
  gl_dsmem_ld_v4 = "ld.shared::cluster.v4.u32",
  gl_smem_ld_v4 = "ld.shared.v4.u32",
  gl_dsmem_st_release_u32 = "st.release.cluster.shared::cluster.u32",
  gl_dsmem_ld_acquire_u32 = "ld.acquire.cluster.shared::cluster.u32",
  gl_dsmem_atomic_add_u32 = "atom.relaxed.cluster.shared::cluster.add.u32",
  gl_mbar_arrive_remote = "mbarrier.arrive.release.cluster.shared::cluster.b64",
  gl_mbar_wait_cluster = "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
  gl_tma_load_2d_multicast =
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster",
}

T.test("every cluster.cuh helper compiles to a cubin for sm_90a", function()
  local prog = cuda.compile(EVERY_HELPER, { name = "every_helper.cu", arch = "sm_90a" })
  T.ok(prog.cubin ~= nil and #prog.cubin > 0, "a cubin (ptxas accepted every instruction)")
  for helper, ptx in pairs(EXPECT) do
    T.ok(prog.ptx:find(ptx, 1, true) ~= nil, helper .. " emits " .. ptx)
  end
  -- the wait loops poll the timer: a deadline, never a trap
  T.ok(prog.ptx:find("%globaltimer", 1, true) ~= nil, "deadline-bounded waits read %globaltimer")
  T.ok(prog.ptx:find("trap;", 1, true) == nil, "no trap")
end)

T.test("cluster.cuh and tma.cuh include each other in either order", function()
  for _, order in ipairs { { "cluster", "tma" }, { "tma", "cluster" } } do
    local src = string.format("#include <gpulab/%s.cuh>\n#include <gpulab/%s.cuh>\n", order[1], order[2]) ..
      'extern "C" __global__ void k(unsigned *o) { gl_pdl_wait(); o[0] = gl_cluster_ctarank(); }\n'
    local prog = cuda.compile(src, { name = "order.cu", arch = "sm_90a" })
    T.ok(prog.cubin ~= nil, table.concat(order, " then "))
  end
end)

T.test("the cluster instructions are refused below sm_90", function()
  local src = '#include <gpulab/cluster.cuh>\n' ..
    'extern "C" __global__ void k(unsigned *o) { o[0] = gl_cluster_ctarank(); }\n'
  T.raises(function() cuda.compile(src, { name = "old.cu", arch = "sm_80" }) end, nil, "sm_80")
end)

T.test("the hopper_clusters lab's kernels compile for sm_90a", function()
  local prog = cuda.compile_file(cuda.home .. "/kernels/hopper_clusters.cu", { arch = "sm_90a" })
  T.ok(prog.cubin ~= nil, "cubin")
  for _, name in ipairs { "cluster_residency", "dsmem_chase", "dsmem_stream", "tma_multicast_tiles", "pdl_step",
    "globaltimer_tick", "coop_steps", "coop_one_step" } do
    T.ok(prog.ptx:find(".entry " .. name, 1, true) ~= nil, name .. " is in the PTX")
  end
end)

-- The lab as test_labs_nogpu.lua runs the others: no driver, --quick, JSON; every claim declared and
-- reported unclear (never judged), nothing failed, exit 0.
T.test("hopper_clusters without a driver compiles its kernels, says so and exits 0", function()
  local json = require("gpulab.json")
  local out = os.tmpname()
  local r = cuda.run_isolated(cuda.home .. "/labs/hopper_clusters.lua", { args = { "--quick", "--json", out },
    env = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" }, timeout = 120 })
  T.eq(r.status, "ok", "status (stderr: " .. r.stderr .. ")")
  T.eq(r.code, 0, "exit code (stderr: " .. r.stderr .. ")")
  T.ok(r.stdout:find("compiled for sm_90a", 1, true) ~= nil, "says what it compiled: " .. r.stdout)
  T.ok(r.stdout:find("no GPU", 1, true) ~= nil, "says there is no GPU")
  local res = json.decode(T.read(out))
  os.remove(out)
  T.eq(res.name, "hopper_clusters", "JSON name")
  T.eq(res.gpu.available, false, "JSON records the missing GPU")
  T.eq(#res.failures, 0, "no failures")
  T.eq(#res.declared_claims, 11, "declared claims")
  for _, v in ipairs(res.verdicts) do
    T.ok(v.never_judged == true and v.verdict == "UNCLEAR", "no verdict without measurements: " .. v.claim)
  end
  local help = cuda.run_isolated(cuda.home .. "/labs/hopper_clusters.lua", { args = { "--help" },
    env = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" }, timeout = 60 })
  T.eq(help.code, 0, "--help exit code")
  T.ok(help.stdout:find("seed §", 1, true) ~= nil and help.stdout:find("--chain=", 1, true) ~= nil, help.stdout)
end)

T.done()
