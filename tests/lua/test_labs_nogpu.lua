-- test_labs_nogpu.lua — the seed labs of labs/ from the outside, each in its own gpulab process.
--
--   gpulab tests/lua/test_labs_nogpu.lua            without a driver: every lab compiles its
--                                                   kernels for sm_90a, says so and exits 0;
--                                                   --help, bad options, JSON output
--   gpulab tests/lua/test_labs_nogpu.lua --gpu LAB  on a device: LAB --quick exits 0, writes
--                                                   its verdicts, and its key claims hold
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

local LABS = { "launch_anatomy", "warp_states", "compile_pipeline", "illegal_access", "memory_system" }

-- Claims (declared ids, or substrings of the text) that must come out HOLDS on an H200; the
-- others are reported as measured.
local MUST_HOLD = {
  launch_anatomy = { "threads", "residency", "async", "block0_order" },
  warp_states = { "hide a dependent chain's latency" },
  compile_pipeline = { "same_sum", "spills" },
  illegal_access = { "async_report", "poisoned", "memcheck_names" },
  memory_system = { "latency_order" },
}

local function lab_path(name) return cuda.home .. "/labs/" .. name .. ".lua" end

local function run_lab(name, args, env, timeout)
  return cuda.run_isolated(lab_path(name), { args = args, env = env, timeout = timeout or 120 })
end

local function read_json(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  os.remove(path)
  return json.decode(text)
end

local function contains(hay, needle) return hay ~= nil and hay:find(needle, 1, true) ~= nil end

-- ---------------------------------------------------------------------------------------------
if arg[1] == "--gpu" then
  local name = arg[2]
  T.ok(MUST_HOLD[name] ~= nil, "--gpu needs one of: " .. table.concat(LABS, ", "))
  T.require_gpu()
  T.test(name .. " --quick on the device", function()
    local out = os.tmpname()
    local t0 = cuda.now()
    local r = run_lab(name, { "--quick", "--json", out }, nil, 300)
    local seconds = cuda.now() - t0
    io.stdout:write(r.stdout)
    io.stderr:write(r.stderr)
    T.eq(r.status, "ok", name .. " status")
    T.eq(r.code, 0, name .. " exit code")
    local res = read_json(out)
    T.ok(res ~= nil, "the JSON results were written")
    T.eq(#res.failures, 0, "failures recorded by the lab")
    T.ok(res.gpu and res.gpu.available == true, "the lab saw the GPU")
    T.ok(#res.verdicts >= 3, "at least three verdicts")
    for _, claim in ipairs(MUST_HOLD[name]) do
      local found
      for _, v in ipairs(res.verdicts) do
        if v.id == claim or contains(v.claim, claim) then found = v end
      end
      T.ok(found ~= nil, "a verdict about '" .. claim .. "'")
      -- a tool the machine cannot run (ncu, compute-sanitizer) leaves its claims unclear
      local tool_missing = found.verdict == "UNCLEAR" and contains(found.measured, "could not run")
      if tool_missing then print("note: " .. found.claim .. ": " .. found.measured) end
      T.ok(found.verdict == "HOLDS" or tool_missing,
        found.claim .. ": " .. found.verdict .. " (measured: " .. tostring(found.measured) .. ")")
    end
    print(string.format("%s --quick took %.1f s", name, seconds))
    T.ok(seconds <= 45, string.format("--quick within budget (30 s target, took %.1f s)", seconds))
  end)
  T.done()
end

-- ---------------------------------------------------------------------------------------------
-- Through the driver stand-in (GPULAB_LIBCUDA=libfakecuda.so, set by ctest): the stand-in runs no
-- kernel, so this checks only how illegal_access reads its children: a sticky error injected at
-- the second context sync must come out as "launch ok, error at a later call, context poisoned".
if arg[1] == "--fake" then
  T.test("illegal_access reads where a child's fault surfaced", function()
    local r = run_lab("illegal_access", { "--quick", "--no-sanitizers" },
      { GPULAB_FAKE_FAIL = "cuCtxSynchronize:700:2" })
    T.ok(contains(r.stdout, "launch ok ("), "the launch step succeeded: " .. r.stdout)
    T.ok(r.stdout:match("first error at 'sync': error cuda%.sync: [^\n]*CUDA_ERROR_ILLEGAL_ADDRESS %(700%)") ~= nil,
      "the sync reported the 700")
    T.ok(r.stdout:match("%[HOLDS%]%s+a faulting launch returns success") ~= nil, "async verdict")
    T.ok(r.stdout:match("%[HOLDS%]%s+after the fault the context is poisoned") ~= nil, "poisoned verdict")
    -- the stand-in knows nothing of CUDA_LAUNCH_BLOCKING: the error stays at the sync there
    T.ok(r.stdout:match("%[REFUTED%]%s+with CUDA_LAUNCH_BLOCKING=1") ~= nil, "blocking verdict follows the steps")
    -- nothing ran, so the consumer saw only stale data and the lab says so
    T.ok(r.code ~= 0, "the lab fails when its protocol check cannot pass")
  end)

  T.test("illegal_access under a sanitizer: the native children run without its injection", function()
    local log = os.tmpname()
    local r = run_lab("illegal_access", { "--quick", "--no-sanitizers" },
      { CUDA_INJECTION64_PATH = "/nonexistent/libsanitizer-injection.so", GPULAB_FAKE_LOG = log })
    local f = assert(io.open(log, "r"))
    local text = f:read("a")
    f:close()
    os.remove(log)
    T.ok(contains(r.stdout, "launch ok ("), "the children ran: " .. r.stdout .. r.stderr)
    local injected = 0
    for _ in text:gmatch("injection /nonexistent/libsanitizer%-injection%.so") do injected = injected + 1 end
    T.eq(injected, 1, "only the lab's own process is instrumented")
  end)

  -- A tool that prints the banner and finds nothing: every tool claim is then measured as
  -- "not reported", and a tool that cannot run leaves its claims unclear, never refuted.
  local function fake_sanitizer(body)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/compute-sanitizer", "w"))
    f:write("#!/bin/sh\n", body, "\n")
    f:close()
    assert(os.execute("chmod +x " .. dir .. "/compute-sanitizer"))
    return dir
  end
  local RUN_PROGRAM = 'while [ $# -gt 0 ]; do case "$1" in /*) break ;; esac; shift; done\n'

  T.test("illegal_access: a sanitizer that finds nothing refutes the tool claims", function()
    local dir = fake_sanitizer('echo "========= COMPUTE-SANITIZER"\n' .. RUN_PROGRAM ..
      '"$@"\necho "========= ERROR SUMMARY: 0 errors"\nexit 0')
    local r = run_lab("illegal_access", { "--quick" }, { PATH = dir .. ":" .. os.getenv("PATH") })
    os.execute("rm -rf " .. dir)
    T.ok(not contains(r.stderr, "attempt to"), "no Lua error: " .. r.stderr)
    for _, claim in ipairs { "memcheck names the kernel", "racecheck reports the shared%-memory race",
      "synccheck reports a barrier" } do
      T.ok(r.stdout:match("%[REFUTED%]%s+" .. claim) ~= nil, claim .. " refuted:\n" .. r.stdout)
    end
    T.ok(r.stdout:match("memcheck%s+oob_write%.lua edge%s+0") ~= nil, "the tool table lists the runs")
  end)

  T.test("illegal_access: reads kernel, line, thread and block from a memcheck report", function()
    local faults = cuda.home .. "/kernels/faults.cu"
    local dir = fake_sanitizer('echo "========= COMPUTE-SANITIZER"\n'
      .. 'case "$*" in *oob_write.lua*)\n'
      .. '  line=$(grep -n "the bug: index past the end" ' .. faults .. ' | cut -d: -f1)\n'
      .. '  echo "========= Invalid __global__ write of size 4 bytes"\n'
      .. '  echo "=========     at oob_write+0x1d0 in ' .. faults .. ':$line"\n'
      .. '  echo "=========     by thread (17,0,0) in block (3,0,0)"\n'
      .. '  echo "========= ERROR SUMMARY: 1 error"; exit 99;;\n'
      .. 'esac\n' .. RUN_PROGRAM .. '"$@"\nexit 0')
    local r = run_lab("illegal_access", { "--quick" }, { PATH = dir .. ":" .. os.getenv("PATH") })
    os.execute("rm -rf " .. dir)
    T.ok(r.stdout:match("%[HOLDS%]%s+memcheck names the kernel, the source line, the thread and the block") ~= nil,
      "memcheck verdict:\n" .. r.stdout)
    T.ok(r.stdout:match("kernel oob_write, faults%.cu:(%d+) %(bug at :%1%), thread %(17,0,0%), block %(3,0,0%)")
      ~= nil, "what was read")
  end)

  -- A stand-in ncu: runs the child (one configuration) and prints CSV rows in ncu's layout,
  -- with a thousands separator in one value.
  T.test("warp_states --ncu runs each configuration in a child and tabulates the counters", function()
    local dir = fake_sanitizer("") -- a folder to hold the stand-in
    local row = '"0","1","gpulab","host","fma_chain<1>(float *, int)","1","7","(128, 1, 1)","(132, 1, 1)","0",'
      .. '"9.0","Command line profiler metrics","%s","warp","%s"'
    local f = assert(io.open(dir .. "/ncu", "w"))
    f:write("#!/bin/sh\n",
      'while [ $# -gt 0 ]; do case "$1" in --metrics|--kernel-name|--clock-control) shift 2;; --*) shift;; ',
      '*) break;; esac; done\n',
      'echo "$@" >> ', dir, '/children\n',
      '"$@" >/dev/null 2>&1\n',
      "echo '", string.format(row, "smsp__warps_active.avg.per_cycle_active", "15.90"), "'\n",
      "echo '", string.format(row, "smsp__warps_eligible.avg.per_cycle_active", "1,234.5"), "'\n",
      "echo '", string.format(row, "smsp__issue_active.avg.per_cycle_active", "0.50"), "'\n")
    f:close()
    assert(os.execute("chmod +x " .. dir .. "/ncu"))
    local r = run_lab("warp_states", { "--quick", "--ncu" }, { PATH = dir .. ":" .. os.getenv("PATH") }, 200)
    local children = io.open(dir .. "/children"):read("a")
    os.execute("rm -rf " .. dir)
    T.ok(not contains(r.stderr, "attempt to"), "no Lua error: " .. r.stderr)
    T.ok(children:match("warp_states%.lua %-%-config=load:4:16 %-%-quick") ~= nil, "one child per configuration:\n"
      .. children)
    local n = 0
    for _ in children:gmatch("%-%-config=") do n = n + 1 end
    T.eq(n, 12, "children (2 chains x 2 ILP x 3 occupancies)")
    T.ok(r.stdout:match("load%s+4%s+16%s+64%s+0%s+[%d.]+%s+[%d.]+%s+%d+%%%s+15%.90%s+1234%.50%s+0%.50") ~= nil,
      "counters beside the timings:\n" .. r.stdout)
    -- eligible above active is impossible: the lab refuses such counters
    T.ok(contains(r.stderr, "issued 0.50 > eligible 1234.50 or eligible > active 15.90"), "sanity check")
  end)

  -- A tool that prints the hazard and then never finishes: the run is cut at the lab's deadline and
  -- reported as timed out with what it had printed, not as a tool that could not run.
  T.test("illegal_access: a tool run that hits its deadline is reported as timed out", function()
    local dir = fake_sanitizer('echo "========= COMPUTE-SANITIZER"\n'
      .. 'case "$*" in *racecheck*shared_race.lua*race*)\n'
      .. '  echo "========= Error: Race reported between Write access at neighbour_sum and Read access"\n'
      .. '  sleep 60; exit 0;;\n'
      .. 'esac\n' .. RUN_PROGRAM .. '"$@"\nexit 0')
    local r = run_lab("illegal_access", { "--quick", "--timeout=5" }, { PATH = dir .. ":" .. os.getenv("PATH") })
    os.execute("rm -rf " .. dir)
    T.ok(not contains(r.stderr, "attempt to"), "no Lua error: " .. r.stderr)
    T.ok(r.stdout:match("%[UNCLEAR%]%s+racecheck reports the shared%-memory race") ~= nil, "unclear:\n" .. r.stdout)
    T.ok(contains(r.stdout, "racecheck on shared_race.lua race 8 timed out at its 5 s deadline after printing " ..
      "1 report(s) (Error: Race reported between Write access"), "says it timed out after the report:\n" .. r.stdout)
    T.ok(r.stdout:match("racecheck%s+shared_race%.lua race 8%s+124%s+%S+%s+timed out") ~= nil, "table row")
    T.ok(not r.stdout:match("racecheck on shared_race[^\n]*could not run"), "not 'could not run'")
    -- the other tool runs finished: their claims are judged
    T.ok(r.stdout:match("%[REFUTED%]%s+memcheck names the kernel") ~= nil, "memcheck judged:\n" .. r.stdout)
  end)

  T.test("illegal_access: a sanitizer that cannot run leaves the tool claims unclear", function()
    -- it exits 99, as if it had found errors: the message, not the status, tells
    local dir = fake_sanitizer('echo "========= COMPUTE-SANITIZER"\n'
      .. 'echo "========= Error: Device not supported"\nexit 99')
    local r = run_lab("illegal_access", { "--quick" }, { PATH = dir .. ":" .. os.getenv("PATH") })
    os.execute("rm -rf " .. dir)
    T.ok(not contains(r.stderr, "attempt to"), "no Lua error: " .. r.stderr)
    for _, claim in ipairs { "memcheck names the kernel", "racecheck reports", "synccheck reports",
      "no tool proves a cross%-stream protocol" } do
      T.ok(r.stdout:match("%[UNCLEAR%]%s+" .. claim) ~= nil, claim .. " unclear:\n" .. r.stdout)
    end
    T.ok(contains(r.stdout, "could not run: Error: Device not supported"), "says why")
  end)
  T.done()
end

local NO_DRIVER = { GPULAB_LIBCUDA = "/nonexistent/libcuda.so" }

for _, name in ipairs(LABS) do
  T.test(name .. " --help lists its options and exits 0", function()
    local r = run_lab(name, { "--help" }, NO_DRIVER)
    T.eq(r.code, 0, "exit code")
    T.ok(contains(r.stdout, "--quick"), "--quick listed: " .. r.stdout)
    T.ok(contains(r.stdout, "seed §"), "the seed section is named")
    T.ok(not contains(r.stdout, "no GPU"), "--help stops before any GPU work")
  end)

  T.test(name .. " rejects an unknown option", function()
    local r = run_lab(name, { "--no-such-option=1" }, NO_DRIVER)
    T.ok(r.code ~= 0, "non-zero exit")
    T.ok(contains(r.stderr, "unknown option"), "names the problem: " .. r.stderr)
  end)
end

if cuda.compile == nil then
  print("skipped: cuda.compile is not in this build; the labs cannot compile their kernels yet")
else
  for _, name in ipairs(LABS) do
    T.test(name .. " without a driver compiles its kernels for sm_90a and exits 0", function()
      local out = os.tmpname()
      local r = run_lab(name, { "--quick", "--json", out }, NO_DRIVER)
      T.eq(r.status, "ok", name .. " status (stderr: " .. r.stderr .. ")")
      T.eq(r.code, 0, name .. " exit code (stderr: " .. r.stderr .. ")")
      T.ok(contains(r.stdout, "compiled"), "says what it compiled: " .. r.stdout)
      T.ok(contains(r.stdout, "sm_90a"), "for sm_90a")
      T.ok(contains(r.stdout, "no GPU"), "says there is no GPU")
      local res = read_json(out)
      T.ok(res ~= nil, "JSON results written")
      T.eq(res.name, name, "JSON name")
      T.eq(res.gpu.available, false, "JSON records the missing GPU")
      T.eq(#res.failures, 0, "no failures")
      -- only compile_pipeline measures something without a device (its SASS, when a
      -- disassembler is installed)
      -- the declared claims are listed as never judged
      if name ~= "compile_pipeline" then
        for _, v in ipairs(res.verdicts) do
          T.ok(v.never_judged == true or v.id == nil, "no verdict without measurements: " .. v.claim)
          if v.id then T.eq(v.verdict, "UNCLEAR", v.claim) end
        end
      end
    end)
  end

  -- what the compile-only path shows is real compiler output, not a fixed text
  T.test("compile_pipeline reports PTX and cubin sizes and lowered names", function()
    local r = run_lab("compile_pipeline", { "--quick" }, NO_DRIVER)
    T.eq(r.code, 0, "exit code")
    for _, w in ipairs { 1, 2, 4, 8 } do
      T.ok(contains(r.stdout, string.format("tile_reduce<%d> lowers to _Z11tile_reduceILi%dEEvPKfPf", w, w)),
        "lowered name of tile_reduce<" .. w .. ">")
    end
    T.ok(r.stdout:match("PTX %(compute_90a%)%s+%d+ B") ~= nil, "PTX size")
    T.ok(r.stdout:match("cubin %(sm_90a%)%s+%d+ B") ~= nil, "cubin size")
  end)

  -- A stand-in disassembler (GPULAB_NVDISASM, run by prog:sass) printing a listing in cuobjdump's
  -- layout: "Function : SYM" heads, one "/*offset*/ INSTRUCTION ;" line per instruction plus an
  -- encoding-only line.
  T.test("compile_pipeline reads per-kernel SASS from a cuobjdump listing", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local listing = { "", "\tcode for sm_90a" }
    for _, w in ipairs { 1, 2, 4, 8 } do
      listing[#listing + 1] = string.format("\t\tFunction : _Z11tile_reduceILi%dEEvPKfPf", w)
      listing[#listing + 1] = '\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"'
      local ins = { "LDC R1, c[0x0][0x28]", "S2R R0, SR_TID.X", "LDG.E R2, desc[UR4][R2.64]",
        "SHFL.BFLY PT, R5, R4, 0x10, 0x1f" }
      if w > 1 then
        for _, x in ipairs { "STS [R3], R5", "BAR.SYNC.DEFER_BLOCKING 0x0", "LDS R6, [UR4]" } do ins[#ins + 1] = x end
      end
      ins[#ins + 1] = "EXIT"
      for i, x in ipairs(ins) do
        listing[#listing + 1] = string.format("        /*%04x*/                   %s ;   /* 0x000fe40000000800 */",
          (i - 1) * 16, x)
        listing[#listing + 1] = "                                                      /* 0x000fe40000000800 */"
      end
      listing[#listing + 1] = "        .........."
    end
    local f = assert(io.open(dir .. "/nvdisasm", "w"))
    f:write("#!/bin/sh\ncat <<'EOF'\n", table.concat(listing, "\n"), "\nEOF\n")
    f:close()
    assert(os.execute("chmod +x " .. dir .. "/nvdisasm"))
    local r = run_lab("compile_pipeline", { "--quick" },
      { GPULAB_LIBCUDA = NO_DRIVER.GPULAB_LIBCUDA, GPULAB_NVDISASM = dir .. "/nvdisasm" })
    os.execute("rm -rf " .. dir)
    T.eq(r.code, 0, "exit code: " .. r.stderr)
    T.ok(r.stdout:match("tile_reduce<1>%s+5%s+1%s+1%s+0%s+0") ~= nil, "1-warp row:\n" .. r.stdout)
    T.ok(r.stdout:match("tile_reduce<8>%s+8%s+1%s+1%s+1%s+2") ~= nil, "8-warp row")
    T.ok(contains(r.stdout, "tile_reduce<4> begins: LDC R1, c[0x0][0x28] | S2R R0, SR_TID.X"), "first instructions")
    T.ok(r.stdout:match("%[HOLDS%]%s+reductions and data exchange change with the layout") ~= nil, "the SASS verdict")
  end)

  T.test("a kernel that does not compile fails the lab with the compiler's message", function()
    -- the labs compile by path: a child script points cuda.home at a copy with a broken kernel
    local dir = os.tmpname()
    os.remove(dir)
    T.ok(os.execute("mkdir -p " .. dir .. "/kernels " .. dir .. "/labs"), "temp tree")
    local f = assert(io.open(dir .. "/kernels/launch_anatomy.cu", "w"))
    f:write('extern "C" __global__ void record_blocks(int *p) { p[0] = undeclared_name; }\n')
    f:close()
    local script = dir .. "/run.lua"
    f = assert(io.open(script, "w"))
    f:write(string.format("cuda.home = %q\narg[0] = %q\ndofile(%q)\n", dir, lab_path("launch_anatomy"),
      lab_path("launch_anatomy")))
    f:close()
    local r = cuda.run_isolated(script, { env = NO_DRIVER, timeout = 60 })
    os.execute("rm -rf " .. dir)
    T.ok(r.code ~= 0, "non-zero exit")
    T.ok(contains(r.stderr, "undeclared_name"), "the NVRTC log names the error: " .. r.stderr)
  end)
end

T.done()
