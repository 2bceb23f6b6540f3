-- Driver loading and the no-GPU path: run with GPULAB_LIBCUDA pointing nowhere.
local T = dofile("tests/lua/t.lua")

T.test("available says why", function()
  local ok, why = cuda.available()
  T.eq(ok, false)
  T.ok(why:find("/nonexistent/libcuda.so", 1, true), why)
end)

T.test("version without a driver", function()
  local v = cuda.version()
  T.ok(v.gpulab:match("^%d+%.%d+%.%d+$"), v.gpulab)
  T.eq(v.lua, "Lua 5.4." .. v.lua:match("5%.4%.(%d+)"))
  T.eq(v.driver, nil)
end)

T.test("require returns the global", function()
  T.eq(require("cuda"), cuda)
end)

T.test("GPU calls raise one clear error naming the library", function()
  T.raises(function() cuda.sync() end, "cuda.sync: no CUDA driver: cannot open /nonexistent/libcuda.so")
  T.raises(function() cuda.mem_info() end, "no CUDA driver")
end)

T.test("no driver is a cuda.error like every other CUDA failure, with the same text", function()
  for _, call in ipairs({ { "cuda.sync", cuda.sync }, { "cuda.count", cuda.count }, { "cuda.device", cuda.device },
                          { "cuda.array", function() return cuda.array("f32", 4) end } }) do
    local ok, e = pcall(call[2])
    T.eq(ok, false, call[1])
    T.ok(cuda.is_error(e), call[1] .. ": " .. tostring(e))
    T.eq(e.code, 100, call[1])
    T.eq(e.name, "CUDA_ERROR_NO_DEVICE", call[1])
    T.eq(e.fn, call[1])
    T.eq(e.poisoned, false)
    local text = call[1] .. ": no CUDA driver: cannot open /nonexistent/libcuda.so " ..
      "(/nonexistent/libcuda.so: cannot open shared object file: No such file or directory)"
    T.ok(tostring(e) == text or tostring(e) == "tests/lua/test_core.lua:28: " .. text, tostring(e))
  end
end)

T.test("stats start at zero", function()
  local s = cuda.stats()
  for _, k in ipairs({ "arrays", "modules", "streams", "events", "graphs", "tensormaps", "device_bytes" }) do
    T.eq(s[k], 0, k)
  end
end)

T.test("binary chunks are refused", function()
  local bin = string.dump(function() return 1 end)
  local f, err = load(bin)
  T.eq(f, nil)
  T.ok(err:find("text", 1, true), err)
  local g, msg = load(bin, "x", "b") -- refused like any failed load: nil and a message
  T.ok(g == nil and msg:find("binary chunks are refused", 1, true), msg)
end)

T.done()
