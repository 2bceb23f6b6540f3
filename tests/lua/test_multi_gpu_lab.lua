-- labs/multi_gpu.lua through the stand-ins (GPULAB_FAKE_DEVICES=3 with devices 0 and 1 peers,
-- the NCCL stand-in): the lab runs end to end at small sizes, writes its tables, JSON and
-- pictures, its busbw follows nccl-tests' definition, the all-reduce result is right, and with
-- one device or none it says what it cannot measure and exits 0. Times from the stand-in mean
-- nothing: no verdict of these runs is evidence.
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

local LAB = cuda.home .. "/labs/multi_gpu.lua"
local SMALL = { "--quick", "--copy_bytes=1048576", "--min_bytes=1024", "--max_bytes=16384", "--min_time=0.01",
  "--min_samples=3" }

local function run(devices, extra_env)
  local out, svgdir = os.tmpname(), os.tmpname()
  os.remove(svgdir)
  assert(os.execute("mkdir -p " .. svgdir))
  local args = { table.unpack(SMALL) }
  for _, a in ipairs { "--json", out, "--svg", svgdir .. "/" } do args[#args + 1] = a end
  local env = { GPULAB_FAKE_DEVICES = tostring(devices) }
  for k, v in pairs(extra_env or {}) do env[k] = v end
  local r = cuda.run_isolated(LAB, { args = args, env = env, timeout = 240 })
  local f = io.open(out)
  local res = f and json.decode(f:read("a"))
  if f then f:close() end
  os.remove(out)
  return r, res, svgdir
end

local function verdict(res, id)
  for _, v in ipairs(res.verdicts) do if v.id == id then return v end end
end

T.test("three devices: the matrix, the all-reduce sweep, the pictures", function()
  local r, res, svgdir = run(3)
  T.eq(r.status, "ok", r.stdout .. r.stderr)
  T.eq(#res.failures, 0, "no failures (the all-reduce result was checked)")
  T.eq(#res.records.copy_matrix, 9, "3 x 3 cells")
  local peer, dtod = 0, 0
  for _, c in ipairs(res.records.copy_matrix) do
    if c.kind == "dtod" then dtod = dtod + 1 end
    if c.kind == "peer" and c.peer_access then peer = peer + 1; T.ok(c.gbps > 0) end
    if c.kind == "peer" then T.ok(c.staged_gbps > 0, "every pair measured staged") end
  end
  T.eq(dtod, 3); T.eq(peer, 2, "only 0->1 and 1->0 have peer access")
  local pts = res.records.allreduce
  T.eq(#pts, 3, "1 KiB, 4 KiB, 16 KiB")
  for _, p in ipairs(pts) do T.near(p.busbw, p.algbw * 2 * 2 / 3, 1e-9 * p.busbw, "busbw = algbw x 2(n-1)/n") end
  T.ok(r.stdout:find("NCCL_NVLS_ENABLE=0", 1, true), "multicast off")
  for _, id in ipairs { "peer_helps", "peer_below_dtod", "symmetric", "busbw_levels_off" } do
    T.ok(verdict(res, id) ~= nil, "a verdict for " .. id)
  end
  for _, file in ipairs { "multi_gpu_allreduce.svg", "multi_gpu_copies.svg" } do
    local text = T.read(svgdir .. "/" .. file)
    T.ok(text and text:find("<svg", 1, true), file .. " written")
  end
  os.execute("rm -rf " .. svgdir)
end)

T.test("one device: DtoD only, the pair claims never judged, exit 0", function()
  local r, res = run(1)
  T.eq(r.status, "ok", r.stdout .. r.stderr)
  T.eq(#res.records.copy_matrix, 1)
  T.eq(res.records.allreduce, nil, "no collective")
  T.ok(r.stdout:find("one GPU: no pair to copy between", 1, true))
  T.ok(verdict(res, "peer_helps").measured:find("needs at least 2 GPUs", 1, true))
end)

T.test("no NCCL: the matrix is measured, the all-reduce claim says why not", function()
  local r, res = run(2, { GPULAB_LIBNCCL = "/nonexistent/libnccl.so.2" })
  T.eq(r.status, "ok", r.stdout .. r.stderr)
  T.eq(#res.records.copy_matrix, 4)
  T.ok(r.stdout:find("NCCL is not available: no NCCL: cannot open /nonexistent/libnccl.so.2", 1, true), r.stdout)
  T.ok(verdict(res, "busbw_levels_off").measured:find("NCCL not available", 1, true))
end)

T.test("no driver: exits 0 with every claim unclear", function()
  local r = cuda.run_isolated(LAB, { args = { "--quick" }, env = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" },
    timeout = 60 })
  T.eq(r.status, "ok", r.stderr)
  T.ok(r.stdout:find("0 holds, 0 refuted, 4 unclear", 1, true), r.stdout)
end)

T.done()
