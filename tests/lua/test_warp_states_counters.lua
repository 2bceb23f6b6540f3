-- warp_states reads its scheduler counters in-process by default: through the CUPTI stand-in the
-- values reach the table (source "CUPTI") and the lab's checks, and the eligible-warps verdict is
-- decided from them; with CUPTI absent and no ncu the lab says that neither gave counters.
-- (The stand-ins measure nothing: the values are the stand-in's formula, so the lab's sanity check
-- rejects them, which shows that they were read.)
local T = dofile("tests/lua/t.lua")

local FAKECUPTI = assert(os.getenv("GPULAB_FAKECUPTI"), "run with GPULAB_FAKECUPTI set")
local LAB = cuda.home .. "/labs/warp_states.lua"

local function run(env)
  return cuda.run_isolated(LAB, { args = { "--quick" }, env = env, timeout = 200 })
end

T.test("counters come from cuda.profile and decide the verdict", function()
  local r = run { GPULAB_CUPTI = FAKECUPTI }
  T.ok(not r.stderr:find("attempt to", 1, true), "no Lua error: " .. r.stderr)
  T.ok(r.stdout:find("scheduler counters in-process", 1, true), r.stdout)
  T.ok(r.stdout:match("load%s+1%s+16%s+64%s+%d+%s+[%d.]+%s+[%d.]+%s+%d+%%%s+271336%.00%s+273336%.00%s+275336%.00%s+"
    .. "27533600%%%s+CUPTI") ~= nil, "the stand-in's values in the row of load ILP 1 at 64 warps/SM:\n" .. r.stdout)
  T.ok(r.stdout:match("%[REFUTED%]%s+high occupancy does not guarantee enough eligible warps") ~= nil
    or r.stdout:match("%[HOLDS%]%s+high occupancy does not guarantee enough eligible warps") ~= nil,
    "decided, not unclear:\n" .. r.stdout)
  T.ok(r.stdout:find("CUPTI: 271336.00 active, 273336.00 eligible", 1, true), "the counters are quoted")
  T.ok(r.stderr:find("load:1:16: issued 275336.00 > eligible 273336.00", 1, true), "the sanity check saw them")
end)

-- Without counters only the throughput evidence is left: the claim holds when ILP 4 beats ILP 1 by
-- more than 1.5x at full occupancy, and stays unclear otherwise. The stand-in's times are whatever
-- its empty launches took, so the ratio is read from the verdict and the decision checked against it.
T.test("neither CUPTI nor ncu: the lab says so and decides the claim from throughput alone", function()
  local r = run { GPULAB_CUPTI = "/nonexistent/libcupti.so.13" }
  T.ok(not r.stderr:find("attempt to", 1, true), "no Lua error: " .. r.stderr)
  T.ok(r.stdout:find("in-process counters unavailable: CUPTI not found", 1, true), r.stdout)
  T.ok(r.stdout:find("neither CUPTI", 1, true), r.stdout)
  local verdict, ilp1, ilp4 = r.stdout:match("%[(%u+)%]%s+high occupancy does not guarantee enough eligible warps"
    .. "[^\n]*\n%s+measured: load chain at %d+ warps/SM %(full%): ILP 1 ([%d.]+) G links/s, ILP 4 ([%d.]+) G links/s")
  T.ok(verdict, "the eligible verdict and its throughputs:\n" .. r.stdout)
  T.ok(r.stdout:find("no counters: CUPTI: CUPTI not found", 1, true), "the verdict says why there are no counters")
  local ratio = tonumber(ilp4) / tonumber(ilp1)
  if math.abs(ratio - 1.5) > 0.01 then -- the printed figures are rounded to 0.1
    T.eq(verdict, ratio > 1.5 and "HOLDS" or "UNCLEAR", string.format("ILP 4 / ILP 1 = %.3f", ratio))
  end
end)

T.done()
