-- cuda.pcsample through the CUPTI stand-in (GPULAB_CUPTI=libfakecupti.so) and the driver stand-in.
-- The stand-in samples nothing: each launch between Start and Stop adds the same records to its
-- kernel (tests/fakecupti/fake_cupti.c): offset 0x10 "selected" 5, 0x20 "long_scoreboard" 30 and
-- "short_scoreboard" 2, 0x30 "wait" 9, with CUPTI's reason indices 10..16; with
-- GPULAB_FAKE_PCS_EXTRA=lib_kernel one more record for a function no gpulab launch ran. The
-- stand-in disassembler prints tests/pcsample/fake_sass.txt, whose line info places those offsets
-- on lines 3, 5, 6 (chase) and 10, 12, 13 (fmachain) of SRC below. These tests check the plumbing:
-- parsing, mapping to lines, aggregation, annotate, every refusal and that no path leaves CUPTI's
-- PC sampling enabled or started.
local T = dofile("tests/lua/t.lua")
local EXPECT = os.getenv("GPULAB_PCS_EXPECT")

if EXPECT == "absent" then
  T.test("no CUPTI: one clear error naming the library and what to install", function()
    local ok, why = cuda.pcsample_available()
    T.eq(ok, false)
    T.ok(why:find("libcupti.so.13", 1, true) and why:find("GPULAB_CUPTI", 1, true), why)
    T.raises(function() cuda.pcsample(function() end) end, "cuda.pcsample: CUPTI not found")
  end)
  T.done()
end

local SRC = [[
extern "C" __global__ void chase(const unsigned *next, unsigned *out, int n)
{
    unsigned p = threadIdx.x;
    for (int i = 0; i < n; i++)
        p = next[p];
    out[threadIdx.x] = p;
}
extern "C" __global__ void fmachain(float *out, int n)
{
    float x = threadIdx.x;
    for (int i = 0; i < n; i++)
        x = x * 1.0001f + 0.5f;
    out[threadIdx.x] = x;
}
]]
local prog = cuda.compile(SRC, {name = "pcs.cu", lineinfo = true})
local mod = cuda.load(prog)
local chase, fma = mod:kernel("chase"), mod:kernel("fmachain")
local next_, out, outf = cuda.array("u32", 256), cuda.array("u32", 256), cuda.array("f32", 256)
local function run_chase() chase:launch({grid = 1, block = 32}, next_, out, 10) end
local function run_fma() fma:launch({grid = 1, block = 32}, outf, 10) end

local function log_count(what) return T.log_count("cupti pcs " .. what) end
local function balanced(what)
  T.eq(log_count("enable"), log_count("disable"), what .. ": PC sampling enable/disable")
  T.eq(log_count("start"), log_count("stop"), what .. ": start/stop")
end
T.clear_log()

local LS = "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
local WAIT = "smsp__pcsamp_warps_issue_stalled_wait"
local SEL = "smsp__pcsamp_warps_issue_stalled_selected"
local SS = "smsp__pcsamp_warps_issue_stalled_short_scoreboard"

if EXPECT == "fail" then
  -- run with GPULAB_FAKE_CUPTI_FAIL=cuptiPCSamplingGetData:7
  T.test("a CUPTI failure after fn names the call and CUPTI's status, and disables sampling", function()
    T.raises(function() cuda.pcsample(run_chase, {programs = prog}) end,
             "cuda.pcsample: cuptiPCSamplingGetData: CUPTI_ERROR_INVALID_OPERATION (7)")
    balanced("after a failed GetData")
    T.eq(log_count("enable"), 1)
    T.raises(function() cuda.pcsample(run_chase) end, "cuptiPCSamplingGetData",
             "no PC sampling was left enabled: the next call gets as far again")
    balanced("after the second call")
  end)
  T.done()
end

if EXPECT == "full" then
  -- run with GPULAB_FAKE_PCS_FULL=1
  T.test("a full hardware buffer keeps the records delivered and says so", function()
    local r = cuda.pcsample(run_chase, {programs = prog})
    T.eq(r.hardware_buffer_full, true)
    T.eq(r[1].kernel, "chase")
    T.eq(r[1].samples, 46)
    balanced("after a full buffer")
  end)
  T.done()
end

if EXPECT == "nodisasm" then
  T.test("without a disassembler PCs are reported by offset and the row says why lines are missing", function()
    local r = cuda.pcsample(run_chase, {programs = prog})
    T.eq(#r, 1)
    T.eq(r[1].kernel, "chase")
    T.eq(#r[1].lines, 0)
    T.ok(r[1].lines_missing:find("prog:sass", 1, true) and r[1].lines_missing:find("nvdisasm", 1, true),
         r[1].lines_missing)
    T.eq(#r[1].pcs, 3)
    T.eq(r[1].pcs[2].offset, 0x20)
    T.eq(r[1].pcs[2].samples, 32)
    T.eq(r[1].pcs[2].text, nil)
    local text = r:annotate("chase")
    T.ok(text:find("(no source lines: prog:sass", 1, true), text)
    T.ok(text:find("/*0020*/", 1, true) and text:find("long_scoreboard 94%", 1, true), text)
    balanced("after a sample without lines")
  end)
  T.done()
end

T.test("records are parsed per kernel, PC and reason, mapped to SASS and lines, and aggregated", function()
  local r = cuda.pcsample(function() run_chase(); run_fma(); run_chase() end, {programs = {prog}})
  T.eq(type(r.annotate), "function")
  T.eq(r.launches, 3)
  T.eq(#r, 3, "chase and fmachain, launched, and lib_kernel, sampled but never launched through gpulab")
  local c, f, lib = r[1], r[2], r[3]
  T.eq(c.kernel, "chase")
  T.eq(c.launches, 2)
  T.eq(f.kernel, "fmachain")
  T.eq(f.launches, 1)
  T.eq(lib.kernel, "lib_kernel")
  T.eq(lib.launches, 0)
  T.eq(lib.lines_missing:find("no cuda.program given holds kernel 'lib_kernel'", 1, true) ~= nil, true)
  -- per launch 46 samples: 5 selected, 30 long_scoreboard, 2 short_scoreboard, 9 wait
  T.eq(c.samples, 92)
  T.eq(c.stalls[LS], 60)
  T.eq(c.stalls[WAIT], 18)
  T.eq(c.stalls[SEL], 10)
  T.eq(c.stalls[SS], 4)
  T.eq(f.samples, 46)
  T.eq(lib.samples, 7)
  T.eq(r.records, 7, "3 PCs of chase, 3 of fmachain, 1 of lib_kernel")
  T.eq(r.total_samples, 92 + 46 + 7, "CUPTI's own total")
  T.eq(r.non_user_samples, 4)
  T.eq(r.dropped_samples, 0)
  T.eq(r.hardware_buffer_full, false)
  T.eq(r.truncated, nil)
  T.eq(r.other_samples, 0)
  T.ok(r.elapsed >= 0 and r.elapsed < 60, r.elapsed)
  T.eq(c.program, prog)
  T.eq(c.cubin_crc, 0x5eed0000 + #"chase")
  T.eq(c.function_index, 3)
  -- every reason the device reports, in CUPTI's order
  T.eq(#r.reasons, 7)
  T.eq(r.reasons[1], SEL)
  T.eq(r.reasons[2], LS)
  -- PCs, by offset, with their instruction and line
  T.eq(#c.pcs, 3)
  T.eq(c.pcs[1].offset, 0x10)
  T.eq(c.pcs[2].offset, 0x20)
  T.eq(c.pcs[2].text, "LDG.E R4, desc[UR4][R2.64]")
  T.eq(c.pcs[2].opcode, "LDG.E")
  T.eq(c.pcs[2].file, "pcs.cu")
  T.eq(c.pcs[2].line, 5)
  T.eq(c.pcs[2].samples, 64)
  T.eq(c.pcs[2].stalls[LS], 60)
  T.eq(c.pcs[2].stalls[SS], 4)
  T.eq(c.pcs[3].line, 6)
  T.eq(f.pcs[2].text, "FFMA R0, R0, 1.0001, 0.5")
  T.eq(f.pcs[2].line, 12)
  -- lines, most samples first
  T.eq(#c.lines, 3)
  T.eq(c.lines[1].line, 5)
  T.eq(c.lines[1].file, "pcs.cu")
  T.eq(c.lines[1].samples, 64)
  T.eq(c.lines[1].stalls[LS], 60)
  T.eq(c.lines[2].line, 6)
  T.eq(c.lines[2].stalls[WAIT], 18)
  T.eq(c.lines[3].line, 3)
  T.eq(f.lines[1].line, 12)
  T.eq(#lib.pcs, 1)
  T.eq(lib.pcs[1].offset, 0)
  T.eq(#lib.lines, 0)
  balanced("after a sample")
end)

T.test("the report runs none of a script's code: a replaced table.sort, a program's own sass key", function()
  local sort, own = table.sort, rawget(prog, "sass")
  local ran = {}
  table.sort = function() ran.sort = true; error("table.sort was replaced") end -- luacheck: ignore 122
  prog.sass = function() ran.sass = true; error("prog.sass is the script's") end
  local ok, r = pcall(cuda.pcsample, function() run_chase(); run_fma(); run_chase() end, {programs = {prog}})
  table.sort = sort -- luacheck: ignore 122
  prog.sass = own
  T.ok(ok, tostring(r))
  T.eq(ran.sort, nil)
  T.eq(ran.sass, nil)
  local c = r[1]
  T.eq(c.kernel, "chase")
  T.eq(c.pcs[1].offset, 0x10); T.eq(c.pcs[2].offset, 0x20) -- by offset
  T.eq(c.pcs[2].text, "LDG.E R4, desc[UR4][R2.64]") -- from prog:sass itself
  T.eq(c.lines[1].line, 5); T.eq(c.lines[2].line, 6); T.eq(c.lines[3].line, 3) -- most samples first
  T.eq(r[3].kernel, "lib_kernel") -- the unlaunched ones by name, after the launched
  balanced("after a sample with table.sort replaced")
end)

T.test("r:annotate shows the kernel's source with each line's share and top stalls", function()
  local r = cuda.pcsample(run_chase, {programs = prog})
  local text = r:annotate("chase")
  T.eq(r:annotate(chase), text, "by cuda.kernel")
  T.eq(r:annotate(1), text, "by row")
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.ok(lines[1]:find("chase: 46 samples, 1 launches", 1, true), lines[1])
  T.ok(lines[2]:find("share", 1, true) and lines[2]:find("source (pcs.cu)", 1, true), lines[2])
  -- line 5 of the source: 32 of 46 samples = 69.6%, long_scoreboard 30/32, short_scoreboard 2/32
  local l5 = lines[2 + 5]
  T.ok(l5:find("69.6%", 1, true) and l5:find("long_scoreboard 94%, short_scoreboard 6%", 1, true), l5)
  T.ok(l5:find("|    5          p = next[p];", 1, true), l5)
  T.ok(lines[2 + 6]:find("19.6%  wait 100%", 1, true), lines[2 + 6])
  T.ok(lines[2 + 1]:find('|    1  extern "C"', 1, true) and not lines[2 + 1]:find("%%"), lines[2 + 1])
  T.eq(#lines, 2 + 14, "every source line once")
  T.ok(tostring(r):find("chase: 46 samples, long_scoreboard 65%", 1, true), tostring(r))
  T.raises(function() r:annotate("nope") end, "r:annotate: no samples of kernel 'nope' (sampled: chase, lib_kernel)")
  T.raises(function() r:annotate(9) end, "no row 9 (the result has 2)")
  T.raises(function() r:annotate({}) end, "kernel name, cuda.kernel or row number expected")
  -- without the program: PCs by offset and the reason
  local r2 = cuda.pcsample(run_chase)
  local t2 = r2:annotate("chase")
  T.ok(t2:find("(no source lines: no cuda.program given holds kernel 'chase'", 1, true), t2)
  T.ok(t2:find("/*0020*/", 1, true), t2)
end)

T.test("kernels= keeps the named kernels and counts the rest; period and mode reach CUPTI", function()
  T.clear_log()
  local r = cuda.pcsample(function() run_chase(); run_fma() end,
                          {kernels = {fma}, programs = prog, period = 7, mode = "continuous"})
  T.eq(#r, 1)
  T.eq(r[1].kernel, "fmachain")
  T.eq(r.other_samples, 46 + 7, "chase and lib_kernel")
  r = cuda.pcsample(function() run_chase(); run_fma() end, {kernels = {"chase", "lib_kernel"}})
  T.eq(#r, 2)
  T.eq(r[1].kernel, "chase")
  T.eq(r[2].kernel, "lib_kernel")
  T.eq(r.other_samples, 46)
  local log = T.log_text()
  T.ok(log:find("cupti pcs period 7", 1, true) and log:find("cupti pcs mode continuous", 1, true), log)
  T.ok(log:find("cupti pcs mode serialized", 1, true), log)
end)

T.test("max_records caps the records kept and says so; several batches are drained", function()
  local r = cuda.pcsample(function() run_chase(); run_fma() end, {max_records = 2})
  T.eq(r.records, 2)
  T.eq(r.truncated, true)
  T.eq(r[1].samples, 5 + 32, "the first two records (batches of max_records PCs)")
  balanced("after a capped sample")
end)

T.test("an error inside fn is raised unchanged and sampling is stopped and disabled", function()
  T.clear_log()
  T.raises(function()
    cuda.pcsample(function() run_chase(); error("boom in fn") end)
  end, "boom in fn")
  balanced("after an error in fn")
  T.eq(log_count("start"), 1)
  T.raises(function()
    cuda.pcsample(function() chase:launch({grid = 1, block = 32}, next_) end)
  end, "takes 3 arguments")
  balanced("after a bad launch in fn")
  local r = cuda.pcsample(run_fma)
  T.eq(r[1].kernel, "fmachain")
  T.eq(r[1].samples, 46, "nothing left over from the failed calls")
end)

T.test("coroutines: a yield inside fn fails cleanly, and sampling inside a coroutine works", function()
  T.clear_log()
  local co = coroutine.wrap(function() return cuda.pcsample(function() coroutine.yield(1) end) end)
  T.raises(co, "yield across a C-call boundary")
  balanced("after a yield in fn")
  local r = coroutine.wrap(function() return cuda.pcsample(run_chase) end)()
  T.eq(r[1].samples, 46)
  local co2 = coroutine.create(function() cuda.pcsample(function() error("inside a coroutine") end) end)
  local ok, err = coroutine.resume(co2)
  T.eq(ok, false)
  T.ok(tostring(err):find("inside a coroutine", 1, true), err)
  balanced("after an error in a coroutine")
end)

T.test("nested calls, cuda.profile, and a capture in progress are refused", function()
  T.clear_log()
  T.raises(function()
    cuda.pcsample(function() cuda.pcsample(function() end) end)
  end, "cuda.pcsample: already sampling (cuda.pcsample cannot be nested)")
  balanced("after a nested call")
  T.raises(function()
    cuda.pcsample(function() cuda.profile(function() end, {metrics = {"dram__bytes.sum"}}) end)
  end, "cuda.profile: cuda.pcsample is running")
  T.raises(function()
    cuda.profile(function() cuda.pcsample(function() end) end, {metrics = {"dram__bytes.sum"}})
  end, "cuda.pcsample: cuda.profile is running")
  balanced("after mixing with cuda.profile")
  local st = cuda.stream()
  T.raises(function()
    st:capture(function() cuda.pcsample(function() end) end)
  end, "cuda.pcsample: cannot sample during a stream capture")
  balanced("after a capture")
end)

T.test("inside cuda.trace, and repeatedly in one process (as in the REPL)", function()
  local dir = os.getenv("GPULAB_FAKE_LOG") .. ".trace.json"
  cuda.trace(dir)
  local r = cuda.pcsample(run_chase)
  cuda.trace(false)
  T.eq(r[1].launches, 1)
  T.ok(T.read(dir):find('"chase"', 1, true), "the trace saw the launch too")
  T.clear_log()
  for i = 1, 20 do
    local n = i % 3 + 1
    r = cuda.pcsample(function() for _ = 1, n do run_chase() end end)
    T.eq(r[1].launches, n)
    T.eq(r[1].samples, 46 * n)
  end
  balanced("after 20 calls")
  T.eq(log_count("enable"), 20)
end)

T.test("baseline=true runs fn again unsampled and reports the overhead", function()
  local calls = 0
  local r = cuda.pcsample(function() calls = calls + 1; run_chase() end, {baseline = true})
  T.eq(calls, 2)
  T.ok(r.baseline > 0 and r.overhead > 0, tostring(r.baseline) .. " " .. tostring(r.overhead))
  T.near(r.overhead, r.elapsed / r.baseline, 1e-9)
  T.eq(r[1].launches, 1, "the baseline run is not sampled")
  r = cuda.pcsample(run_chase)
  T.eq(r.overhead, nil)
end)

T.test("bad arguments name the function, the argument and the rule", function()
  T.raises(function() cuda.pcsample(nil) end, "bad argument #1 to 'cuda.pcsample' (function expected, got nil)")
  T.raises(function() cuda.pcsample(run_chase, 5) end, "bad argument #2 to 'cuda.pcsample' (table or nil expected")
  T.raises(function() cuda.pcsample(run_chase, {period = 4}) end,
           "bad argument #2 to 'cuda.pcsample' (field 'period': must be 5..31 (a sample every 2^period cycles), got 4)")
  T.raises(function() cuda.pcsample(run_chase, {max_records = 0}) end,
           "field 'max_records': must be 1..10000000, got 0")
  T.raises(function() cuda.pcsample(run_chase, {mode = "sometimes"}) end,
           "field 'mode': must be \"serialized\" or \"continuous\", got \"sometimes\"")
  T.raises(function() cuda.pcsample(run_chase, {kernels = {}}) end, "field 'kernels': the list is empty")
  T.raises(function() cuda.pcsample(run_chase, {kernels = {42}}) end,
           "field 'kernels': item 1: kernel name or cuda.kernel expected, got number")
  T.raises(function() cuda.pcsample(run_chase, {kernels = "chase"}) end, "field 'kernels'")
  T.raises(function() cuda.pcsample(run_chase, {programs = {{}}}) end,
           "field 'programs': item 1: cuda.program expected, got table")
  T.raises(function() cuda.pcsample(run_chase, {programs = 3}) end, "field 'programs'")
  T.raises(function() cuda.pcsample(run_chase, {periods = 5}) end, "unknown field 'periods'")
  T.raises(function() cuda.pcsample(run_chase, {timeout = -1}) end, "field 'timeout'")
  -- a callable table is a function for cuda.pcsample
  T.eq(#cuda.pcsample(setmetatable({}, {__call = run_fma})), 2)
end)

T.test("a templated kernel's row is named as the script asked for it; kernels= and r:annotate find it", function()
  local tprog = cuda.compile([[
template <int N> __global__ void scale(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] *= N; }
]], {name = "tpl.cu", names = {"scale<2>"}, lineinfo = true})
  local k = cuda.load(tprog):kernel("scale<2>")
  local x = cuda.array("f32", 32)
  local function run() k:launch({grid = 1, block = 32}, x, 32) end
  local r = cuda.pcsample(run, {programs = tprog})
  T.eq(r[1].kernel, "scale<2>", "the launched kernel's row comes first")
  T.eq(r[1].entry, tprog.lowered["scale<2>"])
  T.eq(r[1].launches, 1)
  T.ok(r:annotate(k):find("scale<2>", 1, true), "annotate by the kernel object")
  T.ok(r:annotate("scale<2>"):find("scale<2>", 1, true), "annotate by the name as written")
  T.eq(#cuda.pcsample(run, {kernels = {k}}), 1, "kernels={k}")
  T.eq(#cuda.pcsample(run, {kernels = {"scale<2>"}}), 1, "kernels={'scale<2>'}")
  T.raises(function() r:annotate("nothing") end, "no samples of kernel 'nothing' (sampled: scale<2>, lib_kernel)")
end)

T.test("a result the script edited still prints and annotates; r:annotate(nil) means its only kernel", function()
  local r = cuda.pcsample(run_chase, {programs = prog, kernels = {chase}})
  local text = r:annotate()
  T.eq(r:annotate(nil), text, "nil is no argument")
  r[1].stalls = nil
  T.ok(tostring(r):find("chase: 46 samples, ", 1, true), tostring(r))
  r[1].stalls = {[1] = 5, [LS] = 9, other = "x"} -- only {reason = count} entries are read
  T.ok(tostring(r):find("long_scoreboard", 1, true) and not tostring(r):find("other", 1, true), tostring(r))
  local p = cuda.pcsample(run_chase) -- no programs: annotate lists the PCs
  p[1].pcs[1].stalls = false
  T.ok(p:annotate(1):find("/*0020*/", 1, true), "the other PCs still print")
  T.raises(function() r.annotate(5) end, "bad argument #1 to 'r:annotate' (cuda.pcsample result expected, got number)")
end)

T.test("a kernel name longer than any fixed buffer still counts its launches", function()
  local name = "k_" .. string.rep("x", 300)
  local lprog = cuda.compile('extern "C" __global__ void ' .. name .. '(int *o) { o[0] = 1; }', {name = "long.cu"})
  local k = cuda.load(lprog):kernel(name)
  local a = cuda.array("i32", 4)
  local r = cuda.pcsample(function() k:launch({grid = 1, block = 1}, a) k:launch({grid = 1, block = 1}, a) end)
  T.eq(r[1].kernel, name)
  T.eq(r[1].launches, 2, "the launched kernel's row is matched with its launches")
  T.eq(#cuda.pcsample(function() k:launch({grid = 1, block = 1}, a) end, {kernels = {k}}), 1, "kernels={k}")
end)

T.test("the session ended by hand from inside fn: a clear error, and tracing still works after", function()
  local found
  T.raises(function() cuda.pcsample(function() run_chase() found = T.close_running_session() end) end,
           "cuda.pcsample: the session was ended before fn returned (its __close or __gc was called by hand)")
  T.ok(found, "fn reached the session")
  balanced("after the session was ended by hand")
  local path = os.tmpname()
  cuda.trace(path)
  run_chase()
  T.eq(cuda.trace(false).spans, 1, "launches are still observed")
  os.remove(path)
  T.eq(cuda.pcsample(run_chase)[1].kernel, "chase", "the next session works")
end)

T.done()
