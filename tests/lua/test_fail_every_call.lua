-- Every driver entry point gpulab uses can fail, and no failure leaves bookkeeping behind: for
-- each entry point of GL_DRIVER_FUNCS (bindings/driver.h) the stand-in fails its 1st and 2nd
-- call with CUDA_ERROR_OUT_OF_MEMORY, and its 1st with the sticky CUDA_ERROR_ILLEGAL_ADDRESS,
-- while tests/lua/fail_workload.lua runs; the workload must end with cuda.stats() at zero,
-- and the stand-in's log must show that the failure was injected (the workload reaches it).
local T = dofile("tests/lua/t.lua")

local BIN = assert(os.getenv("GPULAB_BIN"), "run with GPULAB_BIN set")
local LOG = assert(os.getenv("GPULAB_FAKE_LOG_DIR"), "run with GPULAB_FAKE_LOG_DIR set") .. "/fail_every_call.log"
local ERR = LOG .. ".stderr"

-- Entry points that only an error path reaches, or that gpulab fetches but never calls.
local not_reached = {
  cuDevicePrimaryCtxRelease = "fetched, not called: primary contexts stay retained for the process",
}

local function entry_points()
  local text = T.read("bindings/driver.h")
  local block = text:match("#define GL_DRIVER_FUNCS%(X%)(.-)\n\n")
  local names = {}
  for name in block:gmatch("X%((cu[%w_]+)%)") do names[#names + 1] = name end
  return names
end

local function run(spec)
  os.remove(LOG)
  local cmd = string.format("GPULAB_FAKE_FAIL=%s GPULAB_FAKE_LOG=%s %s tests/lua/fail_workload.lua >/dev/null 2>%s",
    spec, LOG, BIN, ERR)
  local ok = os.execute(cmd)
  local log = io.open(LOG) and T.read(LOG) or ""
  return ok, log, io.open(ERR) and T.read(ERR) or ""
end

local names = entry_points()
T.ok(#names > 50, "the entry point list was read (" .. #names .. ")")
local reached = 0
for _, name in ipairs(names) do
  T.test("failures of " .. name .. " leave cuda.stats() at zero", function()
    for _, case in ipairs({ { 2, 1 }, { 2, 2 }, { 700, 1 } }) do
      local spec = string.format("%s:%d:%d", name, case[1], case[2])
      local ok, log, err = run(spec)
      T.ok(ok, spec .. ": the workload ends with zero counts and no crash\n" .. err)
      local hit = log:find("fail " .. name .. " ", 1, true) ~= nil
      if case[2] == 1 and not not_reached[name] then
        T.ok(hit, spec .. ": the workload reaches " .. name)
      end
      if hit and case[2] == 1 then reached = reached + 1 end
    end
  end)
end
T.test("the workload reached every entry point but the listed ones", function()
  local want = 0
  for _, name in ipairs(names) do if not not_reached[name] then want = want + 1 end end
  T.ok(reached >= want, string.format("%d of %d reached", reached, want))
end)
os.remove(LOG); os.remove(ERR)
T.done()
