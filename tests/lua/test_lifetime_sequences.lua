-- The lifetime fuzz driver (tests/fuzz/lifetimes_driver.lua) over its seed corpus and over
-- pseudo-random sequences, in CI: interleaved API calls, metamethods inside calls, finalizers
-- that free or resurrect objects, captures, replays, timed-out syncs. Each sequence ends with
-- cuda.stats() at zero (the driver raises otherwise); a crash fails the test.
-- arg[1]: collector mode (incremental | generational), arg[2]: number of random sequences.
local T = dofile("tests/lua/t.lua")
local mode = arg[1] or "incremental"
local count = tonumber(arg[2]) or 300
if mode == "generational" then collectgarbage("generational") end

local driver = assert(loadfile("tests/fuzz/lifetimes_driver.lua"))

local function random_bytes(seed, n)
  local x = seed * 2654435761 % 4294967296
  local out = {}
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    out[i] = string.char((x >> 16) & 255)
  end
  return table.concat(out)
end

T.test("the seed corpus", function()
  local p = io.popen("ls tests/fuzz/corpus/lifetimes")
  local n = 0
  for name in p:lines() do
    local ok, err = pcall(driver, T.read("tests/fuzz/corpus/lifetimes/" .. name))
    T.ok(ok, name .. ": " .. tostring(err))
    n = n + 1
  end
  p:close()
  T.ok(n >= 5, "the corpus has its seeds")
end)

T.test(count .. " random sequences in " .. mode .. " mode", function()
  for seed = 1, count do
    local ok, err = pcall(driver, random_bytes(seed, 64 + seed % 400))
    if not ok then error("sequence " .. seed .. ": " .. tostring(err)) end
  end
end)
T.done()
