-- gpulab.lab for a lab written outside the tree: kernels found beside the lab file (lab.dir),
-- absolute kernel paths, claims that cite any source, verdicts for undeclared ids, measure
-- options handed on, records of measure results. Labs run as children without a driver.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")
local json = require("gpulab.json")

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end

local function run(script, args)
  return cuda.run_isolated(script, { args = args, env = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" },
    timeout = 120 })
end

local KERNEL = [[extern "C" __global__ void twice(float *x, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
]]

-- A lab file in its own folder (outside the repository) with its kernel beside it.
local function outside_lab(body)
  local d = tmpdir()
  assert(os.execute("mkdir -p '" .. d .. "/sub'"))
  T.write(d .. "/k.cu", KERNEL)
  T.write(d .. "/sub/inner.cu", KERNEL:gsub("twice", "inner"))
  T.write(d .. "/lab.lua", 'local harness = require("gpulab.lab")\n' ..
    'local lab = harness.new{ name = "outside", title = "a lab outside the tree" }\n' .. body)
  return d
end

T.test("lab:compile finds a kernel beside a lab outside the tree; lab.dir is its folder", function()
  local d = outside_lab([[
print("dir=" .. lab.dir)
local p = lab:compile("k.cu", { arch = "compute_90" })
print("twice=" .. tostring(p.ptx:find(".entry twice", 1, true) ~= nil))
local q = lab:compile("sub/inner.cu", { arch = "compute_90" })
print("inner=" .. tostring(q.ptx:find(".entry inner", 1, true) ~= nil))
os.exit(lab:finish())
]])
  local r = run(d .. "/lab.lua")
  T.eq(r.status, "ok", r.stderr)
  T.eq(r.code, 0, r.stderr)
  T.ok(r.stdout:find("dir=" .. d .. "\n", 1, true), r.stdout)
  T.ok(r.stdout:find("twice=true", 1, true), r.stdout)
  T.ok(r.stdout:find("inner=true", 1, true), r.stdout)
  T.ok(r.stdout:find("k.cu compiled for compute_90", 1, true), r.stdout)
end)

T.test("lab:compile takes an absolute path as is, and still finds kernels under the gpulab home", function()
  local other = tmpdir()
  T.write(other .. "/abs.cu", (KERNEL:gsub("twice", "absolute")))
  local d = outside_lab(string.format([[
local p = lab:compile(%q, { arch = "compute_90" })
print("absolute=" .. tostring(p.ptx:find(".entry absolute", 1, true) ~= nil))
local h = lab:compile("kernels/launch_anatomy.cu", { arch = "compute_90" })
print("home=" .. tostring(#h.ptx > 0))
os.exit(lab:finish())
]], other .. "/abs.cu"))
  local r = run(d .. "/lab.lua")
  T.eq(r.code, 0, r.stderr)
  T.ok(r.stdout:find("absolute=true", 1, true), r.stdout)
  T.ok(r.stdout:find("home=true", 1, true), r.stdout)
end)

T.test("lab:compile of a missing kernel names the places it looked", function()
  local d = outside_lab([[
local ok, err = pcall(lab.compile, lab, "nowhere.cu", { arch = "compute_90" })
print("ok=" .. tostring(ok))
print("err=" .. tostring(err))
os.exit(lab:finish())
]])
  local r = run(d .. "/lab.lua")
  T.eq(r.code, 0, r.stderr)
  T.ok(r.stdout:find("ok=false", 1, true), r.stdout)
  T.ok(r.stdout:find("no file 'nowhere.cu'", 1, true), r.stdout)
  T.ok(r.stdout:find(d .. "/nowhere.cu", 1, true), r.stdout)
  T.ok(r.stdout:find("bad argument #1 to 'lab:compile'", 1, true), r.stdout)
end)

T.test("lab.dir of a lab made from this file is this file's folder", function()
  local lab = harness.new{ name = "here", args = {} }
  T.eq(lab.dir, "tests/lua")
end)

T.done()
