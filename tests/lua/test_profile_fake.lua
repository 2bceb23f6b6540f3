-- cuda.profile through the CUPTI stand-in (GPULAB_CUPTI=libfakecupti.so) and the driver stand-in.
-- The stand-in measures nothing: each metric of a launch evaluates to
-- 1000 * (its index in the stand-in's list + 1) + the launch's thread count, and n metrics need
-- ceil(n / 4) passes (tests/fakecupti/fake_cupti.c). These tests check the plumbing: one row per
-- launch, values passed through by name, near matches, passes, bad input and that every path
-- (errors inside fn included) ends the CUPTI session.
local T = dofile("tests/lua/t.lua")

if os.getenv("GPULAB_PROFILE_EXPECT") == "absent" then
  T.test("no CUPTI: one clear error naming the library and what to install", function()
    local ok, why = cuda.profile_available()
    T.eq(ok, false)
    T.ok(why:find("libcupti.so.13", 1, true) and why:find("GPULAB_CUPTI", 1, true), why)
    local err = T.raises(function()
      cuda.profile(function() end, {metrics = {"dram__bytes.sum"}})
    end, "cuda.profile: CUPTI not found")
    T.ok(err:find("install", 1, true), err)
  end)
  T.done()
end

if os.getenv("GPULAB_PROFILE_EXPECT") == "fail" then
  -- run with GPULAB_FAKE_CUPTI_FAIL=cuptiRangeProfilerSetConfig:35
  T.test("a CUPTI failure names the call, the status and CUPTI's message, and cleans up", function()
    T.clear_log()
    local err = T.raises(function()
      cuda.profile(function() end, {metrics = {"dram__bytes.sum"}})
    end, "cuda.profile: cuptiRangeProfilerSetConfig: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35): " ..
         "the stand-in was told to refuse access to the counters")
    T.ok(err)
    local text = T.log_text()
    T.ok(text:find("cupti disable", 1, true) and text:find("cupti host deinitialize", 1, true) and
         text:find("cupti deinitialize", 1, true), text)
    local again = T.raises(function()
      cuda.profile(function() end, {metrics = {"dram__bytes.sum"}})
    end, "cuptiRangeProfilerSetConfig")
    T.ok(not again:find("cuptiRangeProfilerEnable", 1, true), "no range profiler was left enabled: " .. again)
  end)
  T.done()
end

local function log_count(what) return T.log_count("cupti " .. what) end
local log_lines = T.log_lines
local function balanced(what)
  T.eq(log_count("initialize"), log_count("deinitialize"), what .. ": profiler initialize/deinitialize")
  T.eq(log_count("host initialize"), log_count("host deinitialize"), what .. ": host objects")
  T.eq(log_count("enable"), log_count("disable"), what .. ": range profiler enable/disable")
  T.eq(log_count("start"), log_count("stop"), what .. ": start/stop")
  T.eq(log_count("push gpulab.profile"), log_count("pop"), what .. ": push/pop")
end
T.clear_log()

local PTX = [[
.version 8.0
.target sm_90
.address_size 64
.visible .entry copy_kernel(.param .u64 dst, .param .u64 src, .param .u32 n)
{
	ret;
}
.visible .entry other_kernel()
{
	ret;
}
]]
local mod = cuda.load(PTX)
local copy, other = mod:kernel("copy_kernel"), mod:kernel("other_kernel")
local d, s = cuda.array("f32", 1024), cuda.array("f32", 1024)

-- index in the stand-in's metric list (fake_cupti.c), for the expected values
local INDEX = {
  ["smsp__warps_active.avg.per_cycle_active"] = 0,
  ["smsp__warps_eligible.avg.per_cycle_active"] = 2,
  ["smsp__issue_active.avg.per_cycle_active"] = 4,
  ["dram__bytes.sum"] = 10,
  ["gpu__time_duration.sum"] = 14,
}
local function expect(metric, threads) return 1000 * (INDEX[metric] + 1) + threads end

T.test("one row per launch with kernel, grid, block and each metric's value", function()
  local names = {"smsp__warps_active.avg.per_cycle_active", "dram__bytes.sum"}
  local rows = cuda.profile(function()
    copy:launch({grid = 4, block = 256}, d, s, 1024)
    other:launch({grid = {2, 3}, block = {32, 2}})
    copy:launch({grid = 1, block = 32}, d, s, 32)
  end, {metrics = names})
  T.eq(#rows, 3)
  T.eq(rows.launches, 3)
  T.eq(rows.dropped, 0)
  T.eq(rows.chip, "FAKE100")
  T.eq(rows.outer_range, os.getenv("GPULAB_CUPTI_PUSH_RANGE") ~= "0")
  T.eq(rows[1].kernel, "copy_kernel")
  T.eq(rows[1].range, "copy_kernel")
  T.eq(table.concat(rows[1].grid, ","), "4,1,1")
  T.eq(table.concat(rows[1].block, ","), "256,1,1")
  T.eq(rows[2].kernel, "other_kernel")
  T.eq(table.concat(rows[2].grid, ","), "2,3,1")
  T.eq(table.concat(rows[2].block, ","), "32,2,1")
  T.eq(rows[1].metrics["smsp__warps_active.avg.per_cycle_active"], expect(names[1], 1024))
  T.eq(rows[1].metrics["dram__bytes.sum"], expect(names[2], 1024))
  T.eq(rows[2].metrics["dram__bytes.sum"], expect(names[2], 6 * 64))
  T.eq(rows[3].metrics["dram__bytes.sum"], expect(names[2], 32))
  T.eq(rows[1].passes, 1)
  T.eq(rows.passes, 1)
  balanced("after a profile")
end)

T.test("a metric set needing several passes is replayed per launch and says so", function()
  T.clear_log()
  local names = {}
  for m in pairs(INDEX) do names[#names + 1] = m end
  table.sort(names)
  local rows = cuda.profile(function() copy:launch({grid = 2, block = 64}, d, s, 128) end,
                           {metrics = names})
  T.eq(#rows, 1)
  T.eq(rows[1].passes, 2, "5 metrics at 4 per pass")
  T.eq(#log_lines("cupti replay copy_kernel pass"), 2)
  for _, m in ipairs(names) do T.eq(rows[1].metrics[m], expect(m, 128), m) end
  balanced("after a multi-pass profile")
end)

T.test("unknown metric names raise with near matches from the chip's list", function()
  T.clear_log()
  local err = T.raises(function()
    cuda.profile(function() end, {metrics = {"dram__bytes.sum", "smsp__warps_eligble.avg.per_cycle_active"}})
  end, "cuda.profile: unknown metric 'smsp__warps_eligble.avg.per_cycle_active'")
  T.ok(err:find("did you mean: smsp__warps_eligible.avg.per_cycle_active", 1, true), err)
  T.raises(function() cuda.profile(function() end, {metrics = {"dram__byte.sum"}}) end,
           "did you mean: dram__bytes.sum")
  balanced("after an unknown metric")
end)

T.test("an error inside fn ends the session and is raised unchanged", function()
  T.clear_log()
  T.raises(function()
    cuda.profile(function()
      copy:launch({grid = 1, block = 32}, d, s, 32)
      error("boom in fn")
    end, {metrics = {"dram__bytes.sum"}})
  end, "boom in fn")
  balanced("after an error in fn")
  T.eq(log_count("start"), 1)
  -- and the next profile works: nothing was left enabled
  local rows = cuda.profile(function() other:launch({grid = 1, block = 1}) end, {metrics = {"dram__bytes.sum"}})
  T.eq(#rows, 1)
  T.eq(rows[1].metrics["dram__bytes.sum"], expect("dram__bytes.sum", 1))
  balanced("after the next profile")
end)

T.test("a CUDA error inside fn ends the session too", function()
  T.clear_log()
  T.raises(function()
    cuda.profile(function() copy:launch({grid = 1, block = 32}, d, s) end, {metrics = {"dram__bytes.sum"}})
  end, "takes 3 arguments")
  balanced("after a bad launch in fn")
end)

T.test("repeated profiles in one process (as in the REPL)", function()
  T.clear_log()
  for i = 1, 20 do
    local rows = cuda.profile(function()
      for _ = 1, i % 3 + 1 do other:launch({grid = i, block = 1}) end
    end, {metrics = {"gpu__time_duration.sum"}})
    T.eq(#rows, i % 3 + 1)
    T.eq(rows[1].metrics["gpu__time_duration.sum"], expect("gpu__time_duration.sum", i))
  end
  balanced("after 20 profiles")
  T.eq(log_count("enable"), 20)
end)

T.test("no launches: no rows; launches past max_launches are dropped and counted", function()
  local rows = cuda.profile(function() end, {metrics = {"dram__bytes.sum"}})
  T.eq(#rows, 0)
  rows = cuda.profile(function()
    for _ = 1, 5 do other:launch({grid = 1, block = 1}) end
  end, {metrics = {"dram__bytes.sum"}, max_launches = 3})
  -- room is kept for max_launches launches and the outer range; never more than max_launches rows
  T.eq(#rows, 3)
  T.ok(rows.dropped >= 2, "dropped " .. rows.dropped) -- CUPTI's count may include the outer range
  T.eq(rows.truncated, true)
  T.eq(rows[1].grid, nil, "rows cannot be matched to launches once some were dropped")
  T.eq(rows[1].kernel, "other_kernel", "the range's own name")
end)

T.test("an error inside fn in a coroutine ends the session too", function()
  T.clear_log()
  local co = coroutine.create(function()
    cuda.profile(function()
      other:launch({grid = 1, block = 1})
      error("boom in a coroutine")
    end, {metrics = {"dram__bytes.sum"}})
  end)
  local ok, err = coroutine.resume(co)
  T.eq(ok, false)
  T.ok(tostring(err):find("boom in a coroutine", 1, true), tostring(err))
  balanced("after an error in a coroutine") -- the dead coroutine never closes its slots
  local rows = cuda.profile(function() other:launch({grid = 1, block = 1}) end, {metrics = {"dram__bytes.sum"}})
  T.eq(#rows, 1, "the next profile works")
end)

T.test("launch counts past max_launches, whole kernel names, metric names with NUL bytes", function()
  local rows = cuda.profile(function()
    for _ = 1, 50 do other:launch({grid = 1, block = 1}) end
  end, {metrics = {"dram__bytes.sum"}, max_launches = 3})
  T.eq(rows.launches, 50, "every launch is counted, though only max_launches are kept")
  T.eq(#rows, 3)
  T.eq(rows.truncated, true)
  local long = string.rep("k", 200)
  local ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry %s()\n{\n\tret;\n}\n"
  local m = cuda.load(ptx:format(long))
  rows = cuda.profile(function() m:kernel(long):launch({grid = 1, block = 1}) end, {metrics = {"dram__bytes.sum"}})
  T.eq(rows[1].kernel, long, "a 200-byte name is not cut")
  T.raises(function() cuda.profile(function() end, {metrics = {"dram__bytes.sum\0junk"}}) end,
    "bad argument #2 to 'cuda.profile' (field 'metrics': item 1 contains a NUL byte)")
end)

T.test("nested profile and profile inside a capture are refused", function()
  T.clear_log()
  T.raises(function()
    cuda.profile(function()
      cuda.profile(function() end, {metrics = {"dram__bytes.sum"}})
    end, {metrics = {"dram__bytes.sum"}})
  end, "cuda.profile: already profiling (cuda.profile cannot be nested)")
  balanced("after a nested profile")
  local st = cuda.stream()
  T.raises(function()
    st:capture(function() cuda.profile(function() end, {metrics = {"dram__bytes.sum"}}) end)
  end, "cannot profile during a stream capture")
  balanced("after a profile in a capture")
end)

T.test("bad arguments name the function and the argument", function()
  T.raises(function() cuda.profile(nil, {metrics = {"dram__bytes.sum"}}) end,
           "bad argument #1 to 'cuda.profile' (function expected, got nil)")
  T.raises(function() cuda.profile(function() end) end, "bad argument #2")
  T.raises(function() cuda.profile(function() end, {}) end,
    "bad argument #2 to 'cuda.profile' (field 'metrics': list of metric names expected, got nil)")
  T.raises(function() cuda.profile(function() end, {metrics = {}}) end,
    "bad argument #2 to 'cuda.profile' (field 'metrics': the list is empty)")
  T.raises(function() cuda.profile(function() end, {metrics = {42}}) end,
    "bad argument #2 to 'cuda.profile' (field 'metrics': item 1: string expected, got number)")
  T.raises(function() cuda.profile(function() end, {metrics = {""}}) end,
    "bad argument #2 to 'cuda.profile' (field 'metrics': item 1 must be a metric name of 1..200 characters)")
  T.raises(function() cuda.profile(function() end, {metrics = {"dram__bytes.sum"}, max_launches = 0}) end,
           "bad argument #2 to 'cuda.profile' (field 'max_launches': must be 1..100000, got 0)")
  T.raises(function() cuda.profile(function() end, {metrics = {"dram__bytes.sum"}, metric = 1}) end,
           "bad argument #2 to 'cuda.profile' (unknown field 'metric'")
  T.raises(function() cuda.profile(function() end, {metrics = {"dram__bytes.sum"}, outer_range = 1}) end,
           "bad argument #2 to 'cuda.profile' (field 'outer_range': boolean expected, got number)")
  local rows = cuda.profile(function() other:launch({grid = 1, block = 1}) end,
                            {metrics = {"dram__bytes.sum"}, outer_range = false})
  T.eq(rows.outer_range, false)
  T.eq(#rows, 1)
  -- a callable table is a function for cuda.profile
  local callable = setmetatable({}, {__call = function() other:launch({grid = 1, block = 1}) end})
  T.eq(#cuda.profile(callable, {metrics = {"dram__bytes.sum"}}), 1)
  T.raises(function() cuda.profile(callable) end, "bad argument #2 to 'cuda.profile' (table expected, got nil)")
  for _, outer in ipairs({true, false}) do
    rows = cuda.profile(function() for _ = 1, 5 do other:launch({grid = 1, block = 1}) end end,
                        {metrics = {"dram__bytes.sum"}, max_launches = 2, outer_range = outer})
    T.eq(#rows, 2, "max_launches rows at most, outer_range=" .. tostring(outer))
    T.ok(rows.dropped >= 3, "dropped " .. rows.dropped)
    T.eq(rows.launches, 5)
  end
end)

T.test("the session ended by hand from inside fn: a clear error, and nothing is left behind", function()
  local found
  T.raises(function()
    cuda.profile(function() other:launch({grid = 1, block = 1}) found = T.close_running_session() end,
                 {metrics = {"dram__bytes.sum"}})
  end, "cuda.profile: the session was ended before fn returned (its __close or __gc was called by hand)")
  T.ok(found, "fn reached the session")
  balanced("after the session was ended by hand")
  local rows = cuda.profile(function() other:launch({grid = 1, block = 1}) end, {metrics = {"dram__bytes.sum"}})
  T.eq(#rows, 1, "the next profile works")
end)

T.test("fn changing the metric list while it runs changes nothing", function()
  local names = {"dram__bytes.sum"}
  local rows = cuda.profile(function()
    names[1] = "something else"
    collectgarbage()
    other:launch({grid = 1, block = 1})
  end, {metrics = names})
  T.eq(rows[1].metrics["dram__bytes.sum"], expect("dram__bytes.sum", 1))
end)

T.done()
