-- A lab that declares claims, judges some from synthetic measure results through lab:compare and
-- leaves one unjudged: the harness tests read its printed verdicts and its JSON.
local harness = require("gpulab.lab")
local lab = harness.new {
  name = "claims_lab", title = "Claims and comparisons", claims = "a test fixture",
  params = {
    { name = "cols", default = 1024, quick = 256, multiple_of = 256, help = "a size with a rule" },
  },
}
lab:claim { id = "faster", seed = "§3", text = "the new kernel is faster" }
lab:claim { id = "same", own = true, text = "two equal kernels time the same" }
lab:claim { id = "forgotten", seed = "§1", text = "a claim the lab never judges" }

local function result(mean, half, n)
  -- n samples spread evenly around mean: their 95% interval is known in closed form
  local times = {}
  for i = 1, n do times[i] = mean + half * ((i - 1) / (n - 1) * 2 - 1) end
  return harness.summarize(times, { regime = "cold" })
end

lab:section("Synthetic results")
lab:note("cols used: " .. lab.params.cols)
local d, ratio, ci, ev = lab:compare(result(1.0, 0.01, 20), result(2.0, 0.02, 20), { margin = 0.01 })
lab:verdict("faster", string.format("%s, ratio %.3f [%.3f, %.3f]", d, ratio, ci[1], ci[2]), d == "faster", ev)
local d2, _, _, ev2 = lab:compare(result(1.0, 0.001, 20), result(1.0, 0.001, 20), { margin = 0.01 })
lab:verdict("same", d2, d2 == "same", ev2)
os.exit(lab:finish())
