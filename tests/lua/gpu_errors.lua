-- GPU test (label gpu): a real kernel fault raises a cuda.error with the fields the stand-in
-- tests pin (code 700, CUDA_ERROR_ILLEGAL_ADDRESS, the faulting launch, poisoned), and gpulab
-- prints the uncaught poisoned-context error with its position and a traceback. The fault runs
-- in a child (tests/lua/gpu_errors_child.lua): a sticky error cannot be recovered in-process.
local T = dofile("tests/lua/t.lua")
T.require_gpu()
local GPULAB = arg[-1]

local function run_child()
  -- without a sanitizer's injection: the fault is intended, and a tool would change its error
  local err = os.tmpname()
  local cmd = string.format("env -u CUDA_INJECTION64_PATH timeout 60 %s tests/lua/gpu_errors_child.lua 2>%s",
    GPULAB, err)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local _, _, rc = p:close()
  local stderr = T.read(err) or ""
  os.remove(err)
  return out, stderr, rc
end

local out, stderr, rc = run_child()
print(out)
print(stderr)

T.test("the fault: code, name, fn, call, poisoned and the faulting launch", function()
  T.ok(out:find("SYNC is_error=true code=700 name=CUDA_ERROR_ILLEGAL_ADDRESS fn=cuda.sync call=context sync " ..
    "poisoned=true n=1 kernel=write_bad grid=2,1,1 block=32,1,1", 1, true), out)
  T.ok(out:find("SYNC TEXT cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS (700): ", 1, true), out)
  T.ok(out:find("1 launch since the last good sync: write_bad<<<2, 32>>> on the default stream", 1, true), out)
end)

T.test("the next call: the poisoned-context error with the same code and launches", function()
  T.ok(out:find("NEXT is_error=true code=700 name=CUDA_ERROR_ILLEGAL_ADDRESS fn=cuda.array call=nil " ..
    "poisoned=true n=1 kernel=write_bad", 1, true), out)
  T.ok(out:find("NEXT TEXT cuda.array: context poisoned by cuda.sync: context sync: CUDA_ERROR_ILLEGAL_ADDRESS",
    1, true), out)
end)

T.test("uncaught: printed as the string it replaces, with position and traceback", function()
  T.eq(rc, 1, "gpulab exits 1 on an uncaught error")
  T.ok(stderr:find("gpulab: tests/lua/gpu_errors_child.lua:32: cuda.array: context poisoned by cuda.sync", 1, true),
    stderr)
  T.ok(stderr:find("\nstack traceback:\n\t[C]: in function 'cuda.array'\n", 1, true), stderr)
end)

T.done()
