-- gpulab.lab for a lab written outside the tree: kernels found beside the lab file (lab.dir),
-- absolute kernel paths, claims that cite any source, verdicts for undeclared ids, measure
-- options handed on, records of measure results. Labs run as children without a driver.
local T = dofile("tests/lua/t.lua")
local harness = require("gpulab.lab")
local json = require("gpulab.json")

local function run(script, args)
  return cuda.run_isolated(script, { args = args, env = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" },
    timeout = 120 })
end

local KERNEL = [[extern "C" __global__ void twice(float *x, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
]]

-- A lab file in its own folder (outside the repository) with its kernel beside it.
local function outside_lab(body)
  local d = T.tmpdir()
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
  local other = T.tmpdir()
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

-- A lab made in this process (its header goes to stdout; harmless here).
local function new(args)
  return harness.new{ name = "t", args = args or {} }
end

T.test("lab:claim cites any source; seed= and own= stay; exactly one of the three", function()
  local lab = new()
  local c = lab:claim { id = "bw", source = "Luo et al. 2024, Table 3", text = "H800 copies reach 90% of peak" }
  T.eq(c.source, "Luo et al. 2024, Table 3")
  T.eq(lab:claim { id = "url", source = "https://docs.nvidia.com/cuda/ §4.2", text = "x" }.source,
    "https://docs.nvidia.com/cuda/ §4.2")
  T.eq(lab:claim { id = "s", seed = "§3", text = "y" }.source, "seed §3")
  T.eq(lab:claim { id = "o", own = true, text = "z" }.own, true)
  local both = "needs exactly one of source="
  T.raises(function() lab:claim { id = "e", text = "x" } end, both)
  T.raises(function() lab:claim { id = "e", source = "paper", seed = "§1", text = "x" } end, both)
  T.raises(function() lab:claim { id = "e", source = "paper", own = true, text = "x" } end, both)
  T.raises(function() lab:claim { id = "e", source = "  ", text = "x" } end, "field 'source' must be a non-empty")
  T.raises(function() lab:claim { id = "e", source = 3, text = "x" } end, "field 'source' must be a non-empty")
  T.raises(function() lab:claim { id = "e", own = false, text = "x" } end, "field 'own' must be true")
end)

T.test("the printed verdict and the JSON carry the source; a never-judged claim says judged=false", function()
  local d = T.tmpdir()
  T.write(d .. "/lab.lua", [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "cited", title = "claims with sources" }
lab:claim { id = "bw", source = "Luo et al. 2024, Table 3", text = "copies reach 90% of peak" }
lab:claim { id = "later", own = true, text = "a claim never judged" }
lab:verdict("bw", "93% of peak", true)
os.exit(lab:finish())
]])
  local r = run(d .. "/lab.lua", { "--json", d .. "/r.json" })
  T.eq(r.code, 0, r.stderr)
  T.ok(r.stdout:find("source: Luo et al. 2024, Table 3", 1, true), r.stdout)
  local res = json.decode(T.read(d .. "/r.json"))
  T.eq(res.verdicts[1].source, "Luo et al. 2024, Table 3")
  T.eq(res.verdicts[1].judged, true)
  T.eq(res.verdicts[2].id, "later")
  T.eq(res.verdicts[2].judged, false)
  T.eq(res.verdicts[2].source, "the lab's own question")
  T.eq(res.declared_claims[1].source, "Luo et al. 2024, Table 3")
  T.eq(res.declared_claims[1].judged, true)
  T.eq(res.declared_claims[2].judged, false)
end)

T.test("a verdict for an undeclared id raises, naming the declared ids and the nearest", function()
  local lab = new()
  lab:claim { id = "overlap", own = true, text = "the copies overlap" }
  lab:claim { id = "residency", seed = "§1", text = "blocks stay resident" }
  local err = T.raises(function() lab:verdict("overlpa", "1.9x", true) end,
    "lab:verdict: 'overlpa' is not a declared claim (declared: overlap, residency; nearest: 'overlap')")
  T.ok(err:find("test_lab_authoring.lua", 1, true), "the error points at the caller: " .. err)
  T.eq(#lab.verdicts, 0)
  T.raises(function() lab:verdict("Residency", "x", false) end, "nearest: 'residency'")
  -- a sentence is still an undeclared claim of its own
  lab:verdict("an undeclared sentence holds", "m", true)
  T.eq(lab.verdicts[1].claim, "an undeclared sentence holds")
  lab:verdict("overlap", "m", true)
  T.eq(lab.verdicts[2].id, "overlap")
  local bare = new()
  T.raises(function() bare:verdict("overlap", "m", true) end, "this lab declares none")
end)

T.test("a lab with a typo in a verdict id exits non-zero instead of printing [HOLDS]", function()
  local d = T.tmpdir()
  T.write(d .. "/lab.lua", [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "typo" }
lab:claim { id = "overlap", own = true, text = "the copies overlap" }
lab:verdict("overlpa", "1.9x", true)
os.exit(lab:finish())
]])
  local r = run(d .. "/lab.lua")
  T.ok(r.code ~= 0, "exit " .. tostring(r.code))
  T.ok(not r.stdout:find("[HOLDS]", 1, true), r.stdout)
  T.ok(r.stderr:find("'overlpa' is not a declared claim", 1, true), r.stderr)
end)

T.test("lab:require_gpu ends a lab without a GPU: claims never judged, outputs written, exit 0", function()
  local d = T.tmpdir()
  T.write(d .. "/lab.lua", [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "needs_gpu" }
lab:claim { id = "fast", own = true, text = "the kernel is fast" }
lab:require_gpu("compiled only: there is no device")
print("AFTER REQUIRE_GPU")
lab:verdict("fast", "1 ms", true)
os.exit(lab:finish())
]])
  local r = run(d .. "/lab.lua", { "--json", d .. "/r.json" })
  T.eq(r.code, 0, r.stderr)
  T.ok(not r.stdout:find("AFTER REQUIRE_GPU", 1, true), r.stdout)
  T.ok(r.stdout:find("compiled only: there is no device", 1, true), r.stdout)
  T.ok(r.stdout:find("[UNCLEAR] the kernel is fast (fast) — never judged: no GPU", 1, true), r.stdout)
  local res = json.decode(T.read(d .. "/r.json"))
  T.eq(res.verdicts[1].judged, false)
  T.eq(res.gpu.available, false)
  T.raises(function() new():require_gpu(5) end, "bad argument #1 to 'lab:require_gpu' (string or nil expected)")
end)

T.test("the labs end without a GPU through lab:require_gpu", function()
  for _, name in ipairs { "compile_pipeline", "hopper_clusters", "illegal_access", "launch_anatomy", "memory_system",
      "multi_gpu", "tma_double_buffer", "warp_states" } do
    local f = "labs/" .. name .. ".lua"
    local text = T.read(f)
    T.ok(text:find(":require_gpu(", 1, true), f .. " ends through require_gpu")
    T.ok(not text:find("if not lab:gpu() then", 1, true) and not text:find("if not L:gpu() then", 1, true),
      f .. " still repeats the no-GPU ending")
  end
end)

T.test("lab timings come from a fine monotonic clock", function()
  local before = cuda.now()
  local lab = new()
  local t0 = cuda.now()
  while cuda.now() - t0 < 0.002 do end
  local total = lab:results().timings.total_s
  local outer = cuda.now() - before
  -- a 10 ms clock says 0 or 0.01 for this run; a fine one lies between the busy wait and the whole
  T.ok(total >= 0.002 and total <= outer, string.format("a %.4f s run timed as %s s", outer, total))
  -- the summary line gives a short run in milliseconds, never "0.00 s"
  local d = outside_lab("os.exit(lab:finish())\n")
  local r = run(d .. "/lab.lua")
  T.ok(r.stdout:match("\noutside: %d+%.%d ms\n"), r.stdout)
end)

T.test("a picture that cannot be written fails the run but never loses the JSON", function()
  local d = T.tmpdir()
  assert(os.execute("mkdir -p '" .. d .. "/pics'"))
  T.write(d .. "/lab.lua", string.format([[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "lossy" }
lab:svg_bars{ file = "first.svg", bars = { { label = "a", value = 1 } } }
os.execute("rm -rf %s/pics")  -- the folder disappears during the run
lab:svg_bars{ file = "second.svg", bars = { { label = "b", value = 2 } } }
lab:record("after", 42)
os.exit(lab:finish())
]], d))
  local r = run(d .. "/lab.lua", { "--json", d .. "/r.json", "--svg", d .. "/pics/" })
  T.eq(r.code, 1, r.stderr)
  T.ok(r.stderr:find("lossy: FAIL: cannot write the picture " .. d .. "/pics/second.svg", 1, true), r.stderr)
  local res = json.decode(T.read(d .. "/r.json"))
  T.eq(res.records.after, 42)
  T.eq(#res.failures, 1)
  T.eq(res.pictures[2].file, "second.svg")
end)

T.test("--json /dev/full and a JSON path in a missing folder stop the lab before it starts, exit 1", function()
  local d = outside_lab('print("WORK STARTED")\nos.exit(lab:finish())\n')
  for _, path in ipairs { "/dev/full", d .. "/no/such/r.json", d } do
    local r = run(d .. "/lab.lua", { "--json", path })
    T.eq(r.code, 1, path .. ": " .. r.stderr)
    T.ok(not r.stdout:find("WORK STARTED", 1, true), r.stdout)
    T.ok(r.stderr:find("cannot write the JSON results to " .. path .. " (--json)", 1, true), r.stderr)
  end
end)

local PROVENANCE_LAB = [[
local harness = require("gpulab.lab")
local lab = harness.new{ name = "prov", params = { { name = "n", default = 4, quick = 2, help = "a size" } } }
lab:claim { id = "c", source = "a test", text = "never judged here" }
lab:compile("k.cu", { arch = "sm_90a", defines = { K = 4 }, headers = { ["a.h"] = "int x;" } })
lab:gpu()
os.exit(lab:finish())
]]

T.test("the JSON carries its provenance: schema, build, versions, date, host, command, params, kernels", function()
  local d = outside_lab("")
  T.write(d .. "/lab.lua", PROVENANCE_LAB)
  local r = run(d .. "/lab.lua", { "--quick", "--n=3", "--json", d .. "/r.json" })
  T.eq(r.code, 0, r.stderr)
  local res = json.decode(T.read(d .. "/r.json"))
  T.eq(res.schema, harness.RESULTS_SCHEMA)
  local p = res.provenance
  local v = cuda.version()
  T.eq(p.gpulab.version, v.gpulab)
  T.eq(p.gpulab.commit, v.commit)
  T.ok(type(v.commit) == "string" and (v.commit == "unknown" or v.commit:match("^%x+$")), tostring(v.commit))
  T.eq(p.lua, v.lua)
  T.eq(p.nvrtc, v.nvrtc)
  T.eq(p.driver, nil)
  T.eq(p.device, nil)
  T.eq(p.gpu.available, false)
  T.ok(p.date_utc:match("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$"), p.date_utc)
  T.ok(type(p.host) == "string" and p.host ~= "", tostring(p.host))
  T.eq(p.command[#p.command], d .. "/r.json")
  T.ok(p.command_line:find(d .. "/lab.lua --quick --n=3 --json " .. d .. "/r.json", 1, true), p.command_line)
  T.eq(p.mode, "quick")
  T.eq(p.quick, true)
  T.eq(p.params.n, 3)
  T.eq(p.lab_dir, d)
  local k = p.kernels[1]
  T.eq(k.file, "k.cu")
  T.eq(k.path, d .. "/k.cu")
  T.eq(k.options.arch, "sm_90a")
  T.eq(k.options.defines.K, 4)
  T.eq(k.options.headers[1], "a.h")
  T.eq(k.kernels[1].name, "twice")
  T.ok(math.type(k.kernels[1].regs) == "integer" and k.kernels[1].regs > 0, "registers from the cubin")
  T.ok(k.kernels[1].local_bytes ~= nil or k.kernels[1].smem ~= nil, "shared/local bytes from the cubin")
  T.eq(res.verdicts[1].judged, false)
end)

T.test("gpulab --version prints the version and the commit cuda.version() knows", function()
  local bin = os.getenv("GPULAB_BIN")
  if not bin then return end
  local p = io.popen("'" .. bin .. "' --version")
  local out = p:read("a")
  local ok, _, code = p:close()
  T.ok(ok and code == 0, "exit " .. tostring(code))
  local v = cuda.version()
  T.eq(out, string.format("gpulab %s (commit %s, %s)\n", v.gpulab, v.commit, v.lua))
end)

T.done()
