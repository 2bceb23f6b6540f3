-- gpulab --gpus=all: a lab's sweep (L:sweep) spread over the driver stand-in's devices
-- (GPULAB_FAKE_DEVICES=3), one child per GPU, merged in order; the same lab in one process gives
-- the same table and verdicts. Also the option's errors and a failing configuration.
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")
local lab = require("gpulab.lab")

local BIN = lab.gpulab_exe()
local FIX = "tests/lab_fixtures/sweep_lab.lua"

local function run(opts, args)
  local out = os.tmpname()
  local cmd = string.format("%s %s %s --json %s %s 2>&1", BIN, opts, FIX, out, args or "")
  local p = assert(io.popen(cmd))
  local text = p:read("a")
  local ok = p:close()
  local f = io.open(out)
  local results = f and f:read("a")
  if f then f:close() end
  os.remove(out)
  return ok, text, results and results ~= "" and json.decode(results) or nil
end

local function column(res, col)
  local t = {}
  for i, row in ipairs(res.tables[1].rows) do t[i] = row[col] end
  return t
end

T.test("--gpus=all spreads the configurations and merges them in order", function()
  local ok, text, par = run("--gpus=all")
  T.ok(ok, text)
  T.ok(text:find("fill: 7 configurations over 3 GPUs", 1, true), text)
  local ok1, text1, seq = run("")
  T.ok(ok1, text1)
  T.ok(not text1:find("over 3 GPUs", 1, true), "one process without --gpus")
  for col = 1, 3 do
    local a, b = column(par, col), column(seq, col)
    T.eq(#a, 7)
    for i = 1, 7 do T.eq(a[i], b[i], "column " .. col .. " row " .. i) end
  end
  local devices = column(par, 4)
  for i = 1, 7 do T.eq(devices[i], (i - 1) % 3, "configuration " .. i .. " ran on GPU " .. (i - 1) % 3) end
  for i, d in ipairs(column(seq, 4)) do T.eq(d, 0, "sequential row " .. i) end
  T.eq(par.verdicts[1].verdict, "HOLDS"); T.eq(seq.verdicts[1].verdict, "HOLDS")
  T.eq(#par.records.devices_used, 3)
  T.eq(par.records["sweep:fill"].configurations, 7)
  T.eq(#par.records.warm_up, 2, "an earlier sweep is handed to the children, merged")
  T.eq(par.records.warm_up[2].size, 2)
end)

T.test("--gpus=0,2 uses those two", function()
  local ok, text, par = run("--gpus=0,2")
  T.ok(ok, text)
  local devices = column(par, 4)
  for i = 1, 7 do T.eq(devices[i], i % 2 == 1 and 0 or 2, "row " .. i) end
end)

T.test("bad --gpus values are refused", function()
  local ok, text = run("--gpus=one")
  T.ok(not ok and text:find("'--gpus' takes 'all' or a list of device ordinals like 0,2", 1, true), text)
  ok, text = run("--gpus=0,7")
  T.ok(not ok and text:find("L:sweep: --gpus=0,7 names GPU '7', but 3 device(s) are present", 1, true), text)
end)

T.test("a GPU named twice is refused, also in a list of 256 entries", function()
  local ok, text = run("--gpus=0,1,0")
  T.ok(not ok and text:find("L:sweep: --gpus names GPU 0 twice; each GPU runs one child", 1, true), text)
  local many = {}
  for i = 1, 256 do many[i] = tostring((i - 1) % 3) end
  ok, text = run("--gpus=" .. table.concat(many, ","))
  T.ok(not ok and text:find("names GPU 0 twice", 1, true), text)
end)

T.test("a configuration that fails in a child names itself and its GPU", function()
  local ok, text = run("--gpus=all", "--fail_at=5")
  T.ok(not ok, text)
  T.ok(text:find("L:sweep: configuration 5 on GPU 1 failed:", 1, true) and text:find("was told to fail", 1, true), text)
end)

T.test("a child that ends without its results is named with its exit, not a decoding error", function()
  local ok, text = run("--gpus=all", "--exit_at=5")
  T.ok(not ok, text)
  T.ok(text:find("L:sweep: the child on GPU 1 ended with error 7", 1, true), text)
  T.ok(not text:find("json.decode", 1, true), text)
end)

T.done()

local VALUES = "tests/lab_fixtures/sweep_values_lab.lua"

T.test("results cross from the children as fn returned them: NaN, inf, integer subtypes, any keys", function()
  for _, opts in ipairs({ "", "--gpus=all" }) do
    local ok, text = T.shell(string.format("%s %s %s", BIN, opts, VALUES))
    T.ok(ok, text)
    local n = 0
    for verdict in text:gmatch("result %d: ([%a ]+)") do
      T.eq(verdict, "as returned", opts .. ": " .. text)
      n = n + 1
    end
    T.eq(n, 6, text)
  end
end)

T.test("a configuration list that differs in a child is refused, naming the configuration", function()
  -- six configurations in a random order in each of 3 processes: the chance that every child
  -- draws the parent's order is 3 * (1/720)^2 per run
  local ok, text = T.shell(string.format("%s --gpus=all %s --shuffle", BIN, VALUES))
  T.ok(not ok, text)
  T.ok(text:find("L:sweep: configuration %d on GPU %d failed: the child's configuration differs"), text)
end)

T.test("children write no pictures: the parent's own reach the file, whole", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  for round = 1, 3 do
    local ok, text = T.shell(string.format("SWEEP_VALUES_COPY=%s/parent.svg %s --gpus=all %s --svg %s/",
      dir, BIN, VALUES, dir))
    T.ok(ok, text)
    T.eq(T.read(dir .. "/before.svg"), T.read(dir .. "/parent.svg"), "round " .. round)
  end
  os.execute("rm -rf '" .. dir .. "'")
end)
