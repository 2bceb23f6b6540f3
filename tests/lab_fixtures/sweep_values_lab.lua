-- A lab whose sweep results hold what JSON cannot carry (NaN, ±inf, an integer beside a float of
-- the same value, sizes as keys), drawn into a picture before the sweep with data that differs in
-- every process. --shuffle draws its configurations in a random order, as a lab shuffling against
-- drift would. Run by tests/lua/test_sweep_gpus.lua with and without --gpus.
local lab = require("gpulab.lab")
local L = lab.new { name = "sweep_values", params = { { name = "shuffle", default = false, help = "random order" } } }
-- a picture whose data differs in every process: only the parent's may reach the file
math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16))
local bars = {}
for i = 1, math.random(20, 200) do bars[i] = { label = "k" .. i, value = math.random() } end
local _, text = L:svg_bars { file = "before.svg", bars = bars }
if not os.getenv("GPULAB_SWEEP_CHILD") and os.getenv("SWEEP_VALUES_COPY") then
  local f = assert(io.open(os.getenv("SWEEP_VALUES_COPY"), "w"))
  f:write(text)
  f:close()
end
local configs = { 1, 2, 3, 4, 5, 6 }
if L.params.shuffle then
  for i = #configs, 2, -1 do
    local j = math.random(i)
    configs[i], configs[j] = configs[j], configs[i]
  end
end
local results = L:sweep(configs, function(c)
  return { c = c, nan = 0 / 0, inf = math.huge, ninf = -math.huge, int = 3, float = 3.0,
    sizes = { [1024 * c] = c }, sparse = { [1] = "a", [3] = "c" }, tiny = 5e-324 }
end, { name = "values" })
for i, r in ipairs(results) do
  local ok = r.c == configs[i] and r.nan ~= r.nan and r.inf == math.huge and r.ninf == -math.huge
    and math.type(r.int) == "integer" and math.type(r.float) == "float" and r.sizes[1024 * r.c] == r.c
    and r.sparse[1] == "a" and r.sparse[2] == nil and r.sparse[3] == "c" and r.tiny == 5e-324
  print(string.format("result %d: %s", i, ok and "as returned" or "CHANGED"))
end
os.exit(L:finish())
