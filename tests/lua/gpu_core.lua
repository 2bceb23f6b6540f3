-- GPU tests for devices, modules, kernels and launches (ctest label `gpu`; skipped without a device).
-- Every result is computed on the device and checked against host arithmetic on fresh random data,
-- with outputs poisoned (NaN or a marker) before the launch so that unwritten elements fail.
local T = dofile("tests/lua/t.lua")
T.require_gpu()

local GPULAB = arg[-1]
local SEED = os.time() % 100000
print("random seed " .. SEED)

local SRC = [[
extern "C" __global__ void vadd_f32(const float *a, const float *b, float *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// f16 and bf16 through PTX conversions, so no header is needed
__device__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ float b2f(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }
__device__ unsigned short f2b(float f) {
  unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b;
}

extern "C" __global__ void vadd_f16(const unsigned short *a, const unsigned short *b, unsigned short *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = f2h(h2f(a[i]) + h2f(b[i]));
}

extern "C" __global__ void vadd_bf16(const unsigned short *a, const unsigned short *b, unsigned short *c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = f2b(b2f(a[i]) + b2f(b[i]));
}

// every scalar kind, written back as doubles so the host can compare exactly
extern "C" __global__ void scalars(unsigned char u8, short s16, unsigned u32, long long s64,
                                   float f32, double f64, unsigned long long u64, double *out) {
  out[0] = u8; out[1] = s16; out[2] = u32; out[3] = (double)s64; out[4] = f32; out[5] = f64;
  out[6] = (double)u64;
}

struct Params { int a; float b; double c; char tag[8]; };
extern "C" __global__ void by_value(Params p, double *out) {
  out[0] = p.a; out[1] = p.b; out[2] = p.c; out[3] = p.tag[0]; out[4] = p.tag[7];
}

// fills `dyn` bytes of dynamic shared memory, then sums them back: proves the opt-in size works
extern "C" __global__ void smem_sum(unsigned words, unsigned *out) {
  extern __shared__ unsigned buf[];
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) buf[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long s = 0;
    for (unsigned i = 0; i < words; i++) s += buf[i];
    out[blockIdx.x] = (unsigned)(s & 0xffffffffu);
  }
}

// one increment per thread: counts how many launches ran
extern "C" __global__ void count_up(unsigned *counter) { atomicAdd(counter, 1u); }

// grid/block shape: each thread writes its linear id at its linear position
extern "C" __global__ void coords(unsigned *out) {
  unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned tpb = blockDim.x * blockDim.y * blockDim.z;
  unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned id = bx * tpb + tx;
  out[id] = id;
}
]]

local prog = cuda.compile(SRC, { name = "gpu_core.cu" })
local mod = cuda.load(prog)

local function blocks_for(n, b) return (n + b - 1) // b end

local function vadd_case(dtype, kname, n, tol)
  local a, b = cuda.host(dtype, n), cuda.host(dtype, n)
  a:random { seed = SEED, lo = -4, hi = 4 }
  b:random { seed = SEED + 1, lo = -4, hi = 4 }
  local da, db, dc = cuda.array(dtype, n), cuda.array(dtype, n), cuda.array(dtype, n)
  da:copy_from(a); db:copy_from(b)
  dc:fill(0 / 0) -- poisoned: an element the kernel skips stays NaN and fails the comparison
  local want = cuda.host(dtype, n)
  for i = 1, n do want[i] = a[i] + b[i] end -- rounded to dtype on store
  local k = mod:kernel(kname)
  k:launch({ grid = blocks_for(n, 256), block = 256 }, da, db, dc, n)
  cuda.sync()
  local got = cuda.host(dtype, n)
  got:copy_from(dc)
  local r = cuda.compare(got, want, tol)
  T.eq(r.mismatches, 0, string.format("%s: %d mismatches, first at %s, max_abs %g",
    kname, r.mismatches, tostring(r.first_bad), r.max_abs))
  for _, x in ipairs({ da, db, dc }) do x:free() end
end

T.test("device fields agree with attributes", function()
  local d = cuda.device(0)
  T.ok(cuda.count() >= 1)
  T.eq(d.arch, string.format("sm_%d%d", d.cc[1], d.cc[2]))
  T.eq(d.sm_count, d:attribute("MULTIPROCESSOR_COUNT"))
  T.eq(d.max_threads_per_block, d:attribute("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"))
  T.eq(d.warp_size, 32)
  T.eq(d.smem_per_block_optin, d:attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"))
  T.eq(d.l2_bytes, d:attribute("L2_CACHE_SIZE"))
  T.ok(d.mem_bytes > 1 << 30, "mem_bytes " .. d.mem_bytes)
  print(tostring(d) .. string.format(", %.1f GiB, L2 %d MiB, %d KB smem opt-in",
    d.mem_bytes / 2 ^ 30, d.l2_bytes >> 20, d.smem_per_block_optin >> 10))
end)

T.test("vector add f32 (odd length, tail block)", function()
  vadd_case("f32", "vadd_f32", 1000003, { atol = 0, rtol = 0 })
end)

T.test("vector add f16", function()
  -- f32 sum rounded once to f16 vs the double sum rounded once: equal except rare double rounding
  vadd_case("f16", "vadd_f16", 65537, { atol = 1e-7, rtol = 1e-3 })
end)

T.test("vector add bf16", function()
  vadd_case("bf16", "vadd_bf16", 65537, { atol = 1e-7, rtol = 8e-3 })
end)

T.test("every scalar kind arrives exactly", function()
  local k = mod:kernel("scalars")
  local out = cuda.array("f64", 7)
  out:fill(0 / 0)
  k:launch({ grid = 1, block = 1 }, 200, -12345, 4000000000, -(1 << 40) - 3, 1.5, math.pi,
    (1 << 52) + 1, out)
  cuda.sync()
  local h = cuda.host("f64", 7)
  h:copy_from(out)
  local want = { 200, -12345, 4000000000, -(1 << 40) - 3, 1.5, math.pi, (1 << 52) + 1 }
  for i = 1, 7 do T.eq(h[i], want[i], "param " .. i) end
  out:free()
end)

T.test("by-value struct argument", function()
  local k = mod:kernel("by_value")
  T.eq(k.params[1].size, 24)
  local out = cuda.array("f64", 5)
  out:fill(0 / 0)
  local blob = string.pack("<i4fdc8", -77, 0.75, -1e300, "ABCDEFGH")
  T.eq(#blob, 24)
  k:launch({ grid = 1, block = 1 }, blob, out)
  cuda.sync()
  local h = cuda.host("f64", 5)
  h:copy_from(out)
  T.eq(h[1], -77); T.eq(h[2], 0.75); T.eq(h[3], -1e300)
  T.eq(h[4], string.byte("A")); T.eq(h[5], string.byte("H"))
  out:free()
end)

T.test("grid and block in three dimensions", function()
  local k = mod:kernel("coords")
  local grid, block = { 5, 3, 2 }, { 8, 4, 2 }
  local n = 5 * 3 * 2 * 8 * 4 * 2
  local out = cuda.array("u32", n)
  out:fill(0xffffffff)
  k:launch({ grid = grid, block = block }, out)
  cuda.sync()
  local h = cuda.host("u32", n)
  h:copy_from(out)
  for i = 1, n do
    if h[i] ~= i - 1 then error(string.format("element %d is %d", i, h[i])) end
  end
  out:free()
end)

T.test("prepared launch and prepared:set give the same results", function()
  local n = 4099
  local a, b = cuda.host("f32", n), cuda.host("f32", n)
  a:random { seed = SEED + 7, lo = 0, hi = 1 }
  b:iota()
  local da, db, c1, c2 = cuda.array("f32", n), cuda.array("f32", n), cuda.array("f32", n), cuda.array("f32", n)
  da:copy_from(a); db:copy_from(b)
  c1:fill(0 / 0); c2:fill(0 / 0)
  local s = cuda.stream()
  local prepared = mod:kernel("vadd_f32"):prepare({ grid = blocks_for(n, 128), block = 128, stream = s }, da, db, c1, n)
  prepared()
  prepared:set(3, c2)
  prepared:set(4, n - 1) -- the last element of c2 stays poisoned
  prepared()
  s:sync { timeout = 10 }
  local h1, h2 = cuda.host("f32", n), cuda.host("f32", n)
  h1:copy_from(c1); h2:copy_from(c2)
  local want = cuda.host("f32", n)
  for i = 1, n do want[i] = a[i] + b[i] end
  T.eq(cuda.compare(h1, want, { atol = 0, rtol = 0 }).mismatches, 0)
  local r = cuda.compare(h2, want, { atol = 0, rtol = 0 })
  T.eq(r.mismatches, 1, "only the element past the new n differs")
  T.ok(h2[n] ~= h2[n], "element n is still the NaN poison: " .. tostring(h2[n]))
  T.eq(h2[n - 1], want[n - 1])
  prepared:free()
  for _, x in ipairs({ da, db, c1, c2 }) do x:free() end
  s:free()
end)

T.test("a captured graph of launches replays them", function()
  local k = mod:kernel("count_up")
  local counter = cuda.array("u32", 1)
  counter:fill(0)
  cuda.sync()
  local s = cuda.stream { nonblocking = true }
  local prepared = k:prepare({ grid = 4, block = 32, stream = s }, counter)
  local g = s:capture(function()
    for _ = 1, 10 do prepared() end
    k:launch({ grid = 1, block = 8, stream = s }, counter)
  end)
  s:sync { timeout = 10 }
  local h = cuda.host("u32", 1)
  h:copy_from(counter)
  T.eq(h[1], 0, "capturing records the launches without running them")
  for _ = 1, 5 do g:launch(s) end
  prepared() -- and the prepared launch still works on its own
  s:sync { timeout = 10 }
  h:copy_from(counter)
  T.eq(h[1], 5 * (10 * 4 * 32 + 8) + 4 * 32)
  prepared:free(); g:free(); s:free(); counter:free()
end)

T.test("dynamic shared memory beyond 48 KB needs the opt-in", function()
  local d = cuda.device(0)
  local k = mod:kernel("smem_sum")
  local bytes = d.smem_per_block_optin - k.smem
  local words = bytes // 4
  local out = cuda.array("u32", 4)
  out:fill(0)
  T.raises(function() k:launch({ grid = 4, block = 256, smem = bytes }, words, out) end,
    string.format("bad argument #1 to 'k:launch' (field 'smem': %d bytes exceed kernel 'smem_sum''s dynamic " ..
      "shared memory limit", bytes))
  k:set_max_dynamic_smem(bytes)
  k:launch({ grid = 4, block = 256, smem = bytes }, words, out)
  cuda.sync()
  local h = cuda.host("u32", 4)
  h:copy_from(out)
  local want = ((words - 1) * words // 2) & 0xffffffff
  for i = 1, 4 do T.eq(h[i], want, "block " .. i) end
  out:free()
end)

T.test("occupancy against the device's limits", function()
  local d = cuda.device(0)
  local per_sm = d:attribute("MAX_THREADS_PER_MULTIPROCESSOR")
  local k = mod:kernel("vadd_f32")
  T.ok(k.regs > 0 and k.regs <= 255, "regs " .. k.regs)
  local n, why, lim = k:occupancy(1024, 0)
  T.eq(n, per_sm // 1024); T.eq(why, "threads")
  T.eq(lim.threads, per_sm // 1024)
  n, why = k:occupancy(32, 0)
  T.eq(n, d:attribute("MAX_BLOCKS_PER_MULTIPROCESSOR")); T.eq(why, "blocks")
  local s = mod:kernel("smem_sum")
  s:set_max_dynamic_smem(d.smem_per_block_optin - s.smem)
  local per_block = 100 * 1024
  n, why, lim = s:occupancy(128, per_block)
  local smem_sm = d:attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR")
  local reserved = d:attribute("RESERVED_SHARED_MEMORY_PER_BLOCK")
  T.eq(n, smem_sm // (per_block + s.smem + reserved)); T.eq(why, "shared memory")
  T.eq(lim.shared_memory, n)
  for _, b in ipairs({ 64, 128, 256, 512, 1024 }) do
    local m, _, l = k:occupancy(b, 0)
    T.ok(m * b <= per_sm, "threads per SM at block " .. b)
    T.ok(m <= math.min(l.threads, l.registers, l.shared_memory, l.blocks), "model bound at block " .. b)
  end
end)

T.test("launch errors come before the driver", function()
  local k = mod:kernel("vadd_f32")
  local d = cuda.array("f32", 4)
  T.raises(function() k:launch({ grid = 1, block = 4 }, d, d, 1.5, 4) end,
    "bad argument #4 to 'k:launch' (vadd_f32 parameter 3 (float* c): u64 (8 bytes) expected, got 1.5")
  T.raises(function() k:launch({ grid = 1, block = 4 }, d, d, d, d) end,
    "bad argument #5 to 'k:launch' (vadd_f32 parameter 4 (unsigned n): u32 (4 bytes) expected, got cuda.array)")
  d:free()
end)

-- Faults are run in child processes: a sticky error cannot be recovered in-process.
local function run_child(mode)
  -- the child runs without a sanitizer's injection (when this file runs under one): its fault
  -- is intended, and memcheck would report it and change the error it ends with
  local cmd = string.format("env -u CUDA_INJECTION64_PATH timeout 60 %s tests/lua/gpu_fault_child.lua %s 2>&1",
    GPULAB, mode)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc
end

T.test("illegal address in a child: the error, then the poisoned state", function()
  local out, rc = run_child("illegal")
  print(out)
  T.eq(rc, 0, out)
  -- 700 normally; 719 (launch failed) where a tool intercepts the access
  T.ok(out:find("SYNC cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS (700)", 1, true) or
       out:find("SYNC cuda.sync: context sync: CUDA_ERROR_LAUNCH_FAILED (719)", 1, true), out)
  T.ok(out:find("write_bad<<<1, 32>>>", 1, true), out)
  T.ok(out:find("NEXT k:launch: context poisoned by", 1, true), out)
  T.ok(out:find("restart the process", 1, true), out)
end)

T.test("never-ending kernel in a child: s:sync{timeout=1} names it", function()
  local out, rc = run_child("hang")
  print(out)
  T.eq(rc, 0, out)
  T.ok(out:find("TIMEOUT", 1, true), out)
  T.ok(out:find("timed out after 1", 1, true), out)
  T.ok(out:find("spin_forever<<<1, 1>>>", 1, true), out)
  T.ok(out:find("RELEASED", 1, true), "the kernel ended once its flag was set: " .. out)
end)

T.test("stats return to zero", function()
  mod:free()
  collectgarbage(); collectgarbage()
  cuda.sync()
  local s = cuda.stats()
  T.eq(s.modules, 0); T.eq(s.prepared, 0); T.eq(s.arrays, 0)
end)

T.done()
