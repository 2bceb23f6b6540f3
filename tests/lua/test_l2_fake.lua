-- L2 residency through the driver stand-in: cuda.l2_persisting (checked before the driver, the
-- grant read back), cuda.l2_reset, s:set_l2_window / s:l2_window (the rules and messages of the
-- l2_window launch key, the lifetime of a window's array), missing entry points, and
-- cuda.measure's cold regime resetting persisting lines before every sample. The stand-in logs
-- what the driver received (tests/fakecuda/fake_l2.c); no GPU result is claimed.
local T = dofile("tests/lua/t.lua")

local missing = os.getenv("GPULAB_FAKE_NO_ENTRY") or ""
local NO_RESET = missing:find("cuCtxResetPersistingL2Cache", 1, true) ~= nil
local NO_SET = missing:find("cuStreamSetAttribute", 1, true) ~= nil
local TWO_DEVICES = os.getenv("GPULAB_FAKE_DEVICES") == "2"

local clear_log, log_lines = T.clear_log, T.log_lines

local MAX_PERSISTING = 39321600
local MAX_WINDOW = 134213632

T.test("cuda.l2_persisting sets the set-aside and returns what the driver granted", function()
  T.eq(cuda.l2_persisting(), 0)
  clear_log()
  T.eq(cuda.l2_persisting(1000000), 983040, "the stand-in grants whole 64 KiB units")
  T.eq(log_lines("l2_limit")[1], "l2_limit 1000000 granted=983040")
  T.eq(cuda.l2_persisting(), 983040)
  T.eq(cuda.l2_persisting(MAX_PERSISTING), MAX_PERSISTING)
  T.eq(cuda.l2_persisting(0), 0)
  T.raises(function() cuda.l2_persisting(MAX_PERSISTING + 1) end,
    "bad argument #1 to 'cuda.l2_persisting' (bytes = 39321601 exceeds device 0's largest persisting L2 " ..
    "set-aside, 39321600 bytes (MAX_PERSISTING_L2_CACHE_SIZE))")
  T.raises(function() cuda.l2_persisting(-1) end, "bytes: non-negative integer expected, got -1")
  T.raises(function() cuda.l2_persisting(1.5) end, "bytes: non-negative integer expected, got 1.5")
  T.raises(function() cuda.l2_persisting("1") end, "bytes: non-negative integer expected, got string")
  T.eq(cuda.l2_persisting(), 0, "a refused request changes nothing")
end)

T.test("cuda.l2_reset resets persisting lines, or names the missing entry point", function()
  clear_log()
  if NO_RESET then
    T.raises(cuda.l2_reset, "cuda.l2_reset: needs the driver entry point cuCtxResetPersistingL2Cache")
    T.eq(#log_lines("l2_reset"), 0)
  else
    cuda.l2_reset()
    T.eq(#log_lines("l2_reset"), 1)
  end
end)

local s = cuda.stream()
local a = cuda.array("f32", 1024) -- 4096 bytes

if NO_SET then
  T.test("s:set_l2_window names the missing entry point; the stream keeps nothing", function()
    collectgarbage()
    local arrays0 = cuda.stats().arrays
    do
      local w = cuda.array("u8", 64)
      T.raises(function() s:set_l2_window { array = w } end,
        "s:set_l2_window: needs the driver entry point cuStreamSetAttribute")
      T.raises(function() s:set_l2_window(nil) end, "needs the driver entry point cuStreamSetAttribute")
    end
    collectgarbage()
    collectgarbage()
    T.eq(cuda.stats().arrays, arrays0)
    T.raises(function() s:set_l2_window { array = a, bytes = 5000 } end, "bytes = 5000 is outside",
      "the window is checked before the entry point")
  end)
else
  T.test("s:set_l2_window sets the stream's window; s:l2_window reads it back; nil removes it", function()
    T.eq(s:l2_window(), nil)
    clear_log()
    s:set_l2_window { array = a }
    local w = s:l2_window()
    T.eq(w.ptr, a.ptr)
    T.eq(w.bytes, 4096)
    T.eq(w.hit_ratio, 1)
    T.eq(w.hit, "persisting")
    T.eq(w.miss, "streaming")
    T.ok(rawequal(w.array, a), "the table names the array")
    T.eq(w.freed, false)
    local line = log_lines("stream_window")[1]
    T.ok(line:find(string.format("0x%x+4096@1/persisting/streaming", a.ptr), 1, true), line)
    s:set_l2_window { array = a, bytes = 1024, hit_ratio = 0.5, hit = "streaming", miss = "normal" }
    w = s:l2_window()
    T.eq(w.bytes, 1024)
    T.eq(w.hit_ratio, 0.5)
    T.eq(w.hit, "streaming")
    T.eq(w.miss, "normal")
    s:set_l2_window { ptr = a.ptr + 64, bytes = 128, hit = "normal" }
    w = s:l2_window()
    T.eq(w.ptr, a.ptr + 64)
    T.eq(w.bytes, 128)
    T.eq(w.array, nil, "a ptr= window names no array")
    s:set_l2_window(nil)
    T.eq(s:l2_window(), nil)
    local lines = log_lines("stream_window")
    T.ok(lines[#lines]:find(" 0+0@0/", 1, true), "removing sets a window of 0 bytes: " .. lines[#lines])
    s:set_l2_window() -- none is nil too
    T.eq(s:l2_window(), nil)
  end)
end

T.test("s:set_l2_window: the launch key's rules and messages, before the driver", function()
  local function refuses(w, msg)
    T.raises(function() s:set_l2_window(w) end, "bad argument #1 to 's:set_l2_window' (" .. msg)
  end
  refuses({ array = a, bytes = 4097 }, "bytes = 4097 is outside the array's 1..4096 bytes)")
  refuses({ array = a, bytes = 0 }, "bytes = 0 is outside the array's 1..4096 bytes")
  refuses({ ptr = a.ptr, bytes = 0 }, "bytes = 0: a window covers at least 1 byte")
  refuses({ array = a, hit_ratio = 1.5 }, "hit_ratio = 1.5 is outside 0..1")
  refuses({ array = a, hit_ratio = -0.25 }, "hit_ratio = -0.25 is outside 0..1")
  refuses({ array = a, hit_ratio = 0 / 0 }, "hit_ratio = ")
  refuses({ array = a, hit_ratio = "1" }, "hit_ratio: number expected, got string")
  refuses({ array = a, miss = "persisting" }, "miss: \"streaming\" or \"normal\" expected, got \"persisting\"")
  refuses({ array = a, hit = "sticky" }, "hit: \"persisting\", \"streaming\" or \"normal\" expected, got \"sticky\"")
  refuses({ array = a, hit = "persisting\0junk" }, "hit: \"persisting\", \"streaming\" or \"normal\" expected, " ..
    "got \"persisting\" (with a NUL byte)")
  refuses({ array = a, hit = 1 }, "hit: \"persisting\", \"streaming\" or \"normal\" expected, got number")
  refuses({ ptr = a.ptr }, "bytes: required with ptr=")
  refuses({ ptr = -1, bytes = 4 }, "ptr: non-negative integer expected, got -1")
  refuses({ ptr = 4096, bytes = 1.5 }, "bytes: non-negative integer expected, got 1.5")
  refuses({ array = a, ptr = a.ptr }, "give array= or ptr=, not both")
  refuses({}, "array= (a cuda.array) or ptr= (a device address) required")
  refuses({ array = cuda.host("u32", 4) }, "array: cuda.array expected, got cuda.host")
  refuses({ ptr = 4096, bytes = MAX_WINDOW + 1 },
    "bytes = 134213633 exceeds device 0's largest access-policy window, 134213632 bytes")
  T.raises(function() s:set_l2_window { array = a, hits = "streaming" } end, "unknown field 'hits'")
  T.raises(function() s:set_l2_window(5) end,
    "table {array= | ptr=, bytes=, hit_ratio=, hit=, miss=} or nil expected, got number")
  local v = a:view(1, 16) -- 64 bytes of a
  refuses({ array = v, bytes = 65 }, "bytes = 65 is outside the array's 1..64 bytes")
  local freed = cuda.array("u32", 4)
  freed:free()
  refuses({ array = freed }, "array: the cuda.array was freed")
  T.raises(function() s.set_l2_window(a, { array = a }) end, "cuda.stream expected, got cuda.array")
  local gone = cuda.stream()
  gone:free()
  T.raises(function() gone:set_l2_window { array = a } end, "s:set_l2_window: the cuda.stream was freed")
  T.raises(function() gone:l2_window() end, "s:l2_window: the cuda.stream was freed")
  T.raises(function() gone:set_l2_window(nil) end, "s:set_l2_window: the cuda.stream was freed")
  -- the launch key keeps its own messages (field 'l2_window'), read by the same code
  local k = cuda.load(cuda.compile([[extern "C" __global__ void touch(float *p) { p[0] = 1; }]])):kernel("touch")
  T.raises(function() k:launch({ grid = 1, block = 1, l2_window = { array = a, bytes = 4097 } }, a) end,
    "field 'l2_window': bytes = 4097 is outside the array's 1..4096 bytes")
end)

if not NO_SET then
  T.test("the stream keeps its window's array alive until the window is removed", function()
    collectgarbage()
    collectgarbage()
    local arrays0 = cuda.stats().arrays
    local ptr
    do
      local w = cuda.array("f32", 256)
      ptr = w.ptr
      s:set_l2_window { array = w }
    end
    collectgarbage()
    collectgarbage()
    T.eq(cuda.stats().arrays, arrays0 + 1, "the stream holds the only reference")
    T.eq(s:l2_window().ptr, ptr)
    T.eq(s:l2_window().array.ptr, ptr)
    s:set_l2_window(nil)
    collectgarbage()
    collectgarbage()
    T.eq(cuda.stats().arrays, arrays0, "removed: the array goes")
    -- replacing a window lets the old array go too
    do
      local w1 = cuda.array("f32", 256)
      s:set_l2_window { array = w1 }
    end
    s:set_l2_window { array = a }
    collectgarbage()
    collectgarbage()
    T.eq(cuda.stats().arrays, arrays0)
    -- a stream object that is collected lets its window's array go
    do
      local s2 = cuda.stream()
      s2:set_l2_window { array = cuda.array("f32", 256) }
    end
    collectgarbage()
    collectgarbage()
    T.eq(cuda.stats().arrays, arrays0)
    s:set_l2_window(nil)
  end)

  T.test("a:free() of a window's array frees it; the window says freed=true until removed", function()
    local w = cuda.array("f32", 256)
    local ptr = w.ptr
    s:set_l2_window { array = w }
    clear_log()
    w:free()
    T.ok(#log_lines("free 0x" .. string.format("%x", ptr)) == 1, "freed at once: no work was queued")
    local got = s:l2_window()
    T.eq(got.ptr, ptr)
    T.eq(got.freed, true)
    s:set_l2_window(nil)
    T.eq(s:l2_window(), nil)
  end)

  T.test("windows are not set while a capture is under way", function()
    local cs = cuda.stream { nonblocking = true }
    local k = cuda.load(cuda.compile([[extern "C" __global__ void t(float *p) { p[0] = 1; }]])):kernel("t")
    local ok, err
    cs:capture(function()
      ok, err = pcall(cs.set_l2_window, cs, { array = a })
      k:launch({ grid = 1, block = 1, stream = cs }, a)
    end)
    T.eq(ok, false)
    T.ok(tostring(err):find("s:set_l2_window: not available while a stream capture is under way", 1, true),
      tostring(err))
    cs:free()
  end)
end

if TWO_DEVICES then
  T.test("a window over another device's array, or on another device's stream, is refused", function()
    local other = cuda.array("f32", 16)
    local _, prev = cuda.device(1)
    local s1 = cuda.stream()
    T.raises(function() s1:set_l2_window { array = other } end,
      "array: the cuda.array belongs to device 0, but device 1 is current")
    cuda.device(prev)
    T.raises(function() s1:set_l2_window { array = other } end, "cuda.stream")
    T.raises(function() s1:l2_window() end, "cuda.stream")
  end)
end

T.test("cuda.measure's cold regime resets persisting lines before every sample's flush", function()
  local k = cuda.load(cuda.compile([[extern "C" __global__ void w(float *p) { p[0] = 1; }]])):kernel("w")
  local function run(opts)
    clear_log()
    local o = { min_samples = 3, max_samples = 3, min_time = 0, warmup = 2 }
    for key, v in pairs(opts) do o[key] = v end
    local r = cuda.measure(function(st) k:launch({ grid = 1, block = 1, stream = st }, a) end, o)
    -- the stand-in's log: l2_reset, then the flush (cuMemsetD32Async), then the sample's launch
    local order = {}
    for _, l in ipairs(log_lines()) do
      if l == "l2_reset" then order[#order + 1] = "R"
      elseif l:find("^cuMemsetD32Async") then order[#order + 1] = "F"
      elseif l:find("^launch w ") then order[#order + 1] = "L" end
    end
    return r, table.concat(order)
  end
  local r, order = run {}
  local passes = r.taken + r.warmup
  T.eq(passes, 5)
  T.eq(r.flush.count, passes)
  T.eq(r.flush.bytes, 2 * 60 * 1024 * 1024)
  T.eq(r.flush.l2_bytes, 60 * 1024 * 1024)
  T.eq(r.flush.l2_multiple, 2)
  T.eq(r.flush.access, "write")
  T.ok(r.flush.how:find("2x the L2 size", 1, true), r.flush.how)
  if NO_RESET then
    T.eq(r.l2_reset, false)
    T.eq(r.l2_reset_reason, "the driver lacks cuCtxResetPersistingL2Cache")
    T.eq(r.l2_resets, 0)
    T.eq(order, string.rep("FL", passes))
  else
    T.eq(r.l2_reset, true)
    T.eq(r.l2_reset_reason, nil)
    T.eq(r.l2_resets, passes)
    T.eq(order, string.rep("RFL", passes), "a reset before every flush")
  end
  r, order = run { l2_reset = false }
  T.eq(r.l2_reset, false)
  T.eq(r.l2_reset_reason, "l2_reset=false: persisting L2 lines survive the flush")
  T.eq(r.l2_resets, 0)
  T.eq(order, string.rep("FL", passes), "skipped: no reset at all")
  local hot = cuda.measure(function(st) k:launch({ grid = 1, block = 1, stream = st }, a) end,
    { regime = "hot", min_samples = 2, max_samples = 2, min_time = 0, warmup = 0, batch = 1 })
  T.eq(hot.l2_reset, nil, "hot samples neither reset nor flush")
  T.eq(hot.flush, nil)
  T.raises(function() cuda.measure(function() end, { regime = "hot", l2_reset = false }) end,
    "field 'l2_reset': applies to the cold regime")
  T.raises(function() cuda.measure(function() end, { l2_reset = "no" }) end, "l2_reset")
end)

s:free()
a:free()
T.done()
