-- class_objects.lua — one object of every gpulab class, made through the stand-ins (driver,
-- NCCL, CUPTI, disassembler: see tests/classes.cmake for the environment), for the tests of the
-- class convention (tests/lua/test_classes_fake.lua, tests/repl/class_completion.pty) and for
-- tests/lua/test_reentrant_fake.lua.
-- Returns a function that makes them: class name -> object. A class that has nothing to
-- answer (no methods, no fields: the CUPTI sessions, which stay inside gpulab) has none.
-- make(reuse): the objects no script can free (device, program, sass listing, PC sampling result,
-- error) are taken from `reuse`, a table an earlier make() returned, and only the others are made
-- anew (the disassembly and the sampling run are what cost).
local SRC = [[
extern "C" __global__ void fmachain(float *x, int n) { if (n) x[threadIdx.x] = n; }
extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(float *x) { x[threadIdx.x] = 1; }
]]
local LASTING = { "cuda.device", "cuda.program", "cuda.sass", "cuda.pcsample_result", "cuda.error" }

return function(reuse)
  local o = {}
  local prog
  if reuse then
    for _, name in ipairs(LASTING) do o[name] = reuse[name] end
    prog = reuse["cuda.program"]
  else
    o["cuda.device"] = cuda.device(0)
    prog = cuda.compile(SRC, { name = "classes.cu", arch = "sm_90" })
    o["cuda.program"] = prog
    o["cuda.sass"] = prog:sass("fmachain") -- a name the stand-in disassembler prints
  end
  local mod = cuda.load(prog.ptx) -- PTX: the stand-in reads __cluster_dims__ from it
  o["cuda.module"] = mod
  local k = mod:kernel("fmachain")
  o["cuda.kernel"] = k
  o.clustered = mod:kernel("clustered") -- a kernel whose cluster_dims is set
  local d = cuda.array("f32", 64)
  o["cuda.array"] = d
  o["cuda.host"] = cuda.host("f32", 16)
  local s = cuda.stream()
  o["cuda.stream"] = s
  o["cuda.event"] = cuda.event()
  o["cuda.graph"] = s:capture(function(st) k:launch({ grid = 1, block = 32, stream = st }, d, 1) end)
  o["cuda.prepared"] = k:prepare({ grid = 1, block = 32 }, d, 1)
  o["cuda.tensormap"] = cuda.tensormap { array = d, dtype = "f32", dims = { 64 }, box = { 16 } }
  o["cuda.partition"] = cuda.partition { sms = 16 }
  o["cuda.nccl.comm"] = cuda.nccl.init { rank = 0, nranks = 1, device = 0, id = cuda.nccl.unique_id() }
  if not reuse then
    o["cuda.pcsample_result"] = cuda.pcsample(function() k:launch({ grid = 1, block = 32 }, d, 1) end,
      { programs = prog })
    local ok, e = pcall(function() return mod:kernel("no_such_kernel") end)
    assert(not ok and cuda.is_error(e), "mod:kernel of a missing name raises a cuda.error")
    o["cuda.error"] = e
  end
  return o
end
