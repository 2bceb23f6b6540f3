-- Random API call sequences against the driver stand-in (the same driver the fuzzer uses):
-- wrong types, use after free, finalizers called by hand, frees in the middle of work, kernels
-- launched and prepared with the launch attributes (clusters, pdl, cooperative, priority, L2
-- windows), right and wrong, also inside stream captures. Each
-- sequence must end with Lua still running (no crash, no sanitizer report in the ASan build),
-- and with every gpulab object gone after a full collection.
-- Run in three collector modes: incremental, generational, and a full collection before every call.
local T = dofile("tests/lua/t.lua")
local mode = arg[1] or "incremental"
local sequences = tonumber(arg[2]) or 300

local driver = assert(loadfile("tests/fuzz/api_driver.lua"))

local function random_bytes(seed, n)
  local x = seed * 2654435761 % 4294967296
  local out = {}
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    out[i] = string.char((x >> 16) & 255)
  end
  return table.concat(out)
end

if mode == "generational" then
  collectgarbage("generational")
elseif mode == "gc-every-call" then
  debug.sethook(function() collectgarbage() end, "c")
end

T.test("random sequences in " .. mode .. " mode", function()
  for seed = 1, sequences do
    local ok, err = pcall(driver, random_bytes(seed, 64 + seed % 200))
    if not ok then error("sequence " .. seed .. ": " .. tostring(err)) end
  end
end)

debug.sethook()

T.test("nothing leaks once collected", function()
  collectgarbage()
  collectgarbage()
  local s = cuda.stats()
  for _, k in ipairs({ "arrays", "hosts", "modules", "streams", "events", "graphs", "tensormaps" }) do
    T.eq(s[k] or 0, 0, k)
  end
  T.eq(s.device_bytes, 0, "device_bytes")
end)

T.done()
