-- A stream freed while its work runs, when the driver cannot create the stream's final event
-- (run with GPULAB_FAKE_FAIL=cuEventCreate:2:1, the first event of the process): the arrays
-- its launches use must not be freed before the work is known complete, which without the
-- event only a full context sync can prove.
local T = dofile("tests/lua/t.lua")

local BUSY = assert(os.getenv("GPULAB_FAKE_BUSY_FILE"), "run with GPULAB_FAKE_BUSY_FILE set")
os.remove(BUSY)
T.clear_log()
local logged = T.logged

local PTX = ".version 8.0\n.target sm_90\n.address_size 64\n" ..
  ".visible .entry use_array(\n\t.param .u64 p\n)\n{\n\tret;\n}\n"

T.test("an array used on a stream retired without a final event waits for a full sync", function()
  local k = cuda.load(PTX):kernel("use_array")
  local s = cuda.stream()
  local a = cuda.array("f32", 64)
  local freed = string.format("free 0x%x", a.ptr)
  assert(io.open(BUSY, "w")):close()
  k:launch({ grid = 1, block = 1, stream = s }, a)
  s:free() -- its final event cannot be created (injected)
  T.ok(logged("fail cuEventCreate"), "the failure was injected at the final event")
  a = nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  T.ok(not logged(freed), "not freed while the launch may still run")
  T.eq(cuda.stats().deferred, 1)
  os.remove(BUSY)
  collectgarbage()
  T.ok(not logged(freed), "the work is done, but nothing has proved it yet")
  cuda.sync()
  T.ok(logged(freed), "freed after the full sync")
  T.eq(cuda.stats().deferred, 0)
end)
os.remove(BUSY)
T.done()
