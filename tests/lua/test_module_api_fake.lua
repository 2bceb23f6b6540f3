-- mod:global views, bool and tensor-map parameters, the PTX/driver parameter cross-check and
-- the hostile-input classes of cuda.load / mod:kernel, through the driver stand-in
-- (GPULAB_LIBCUDA=libfakecuda.so). The stand-in runs no kernel: it keeps module variables as
-- host memory (copies move real bytes) and logs launches with their packed argument bytes.
local T = dofile("tests/lua/t.lua")

local LOG = assert(os.getenv("GPULAB_FAKE_LOG"), "run with GPULAB_FAKE_LOG set")

local function log_lines(text) -- the lines that hold text
  local out = {}
  for _, l in ipairs(T.log_lines()) do if l:find(text, 1, true) then out[#out + 1] = l end end
  return out
end
local clear_log = T.clear_log
local function last_args()
  local l = log_lines("launch ")
  local groups = {}
  for g in l[#l]:match("args=(.*)$"):gmatch("%x+") do groups[#groups + 1] = g end
  return groups
end
local function le_hex(v, bytes) -- little-endian hex of an integer
  local s = {}
  for i = 0, bytes - 1 do s[#s + 1] = string.format("%02x", (v >> (8 * i)) & 0xff) end
  return table.concat(s)
end

-- compute_90: PTX only, so the stand-in reads the variables and signatures from the image.
local SRC = [[
__constant__ float table[16];
__device__ unsigned counter;
template <int N> __device__ int tab[N];
template __device__ int tab<4>[4];
extern "C" __global__ void use(const float *p, unsigned *c, bool flag) { if (flag) c[0] = (unsigned)p[0]; }
struct alignas(64) Map { unsigned long long w[16]; };
extern "C" __global__ void by_copy(const Map m) { asm volatile("prefetch.tensormap [%0];" :: "l"(&m) : "memory"); }
extern "C" __global__ void in_place(const __grid_constant__ Map m) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(&m) : "memory"); }
]]
local prog = cuda.compile(SRC, { name = "vars.cu", arch = "compute_90", names = { "tab<4>" } })

T.test("mod:global gives a device view of __constant__ and __device__ variables", function()
  local before = cuda.stats()
  local m = cuda.load(prog)
  local t = m:global("table", "f32", 16)
  T.eq(t.nbytes, 64); T.eq(t.numel, 16); T.eq(t.dtype, "f32"); T.eq(t.shape[1], 16)
  T.ok(math.type(t.ptr) == "integer" and t.ptr ~= 0, "ptr")
  local c = m:global("counter", "u32", { 1 })
  T.eq(c.nbytes, 4)
  local h = cuda.host("f32", 16):iota(1)
  t:copy_from(h)
  local back = cuda.host("f32", 16)
  back:copy_from(t)
  T.eq(back[16], 16.0)
  local part = m:global("table", "f32", { 2, 4 }) -- fewer bytes than the symbol is fine
  T.eq(part.nbytes, 32)
  T.eq(cuda.stats().arrays, before.arrays, "views are not counted as allocations")
  T.eq(cuda.stats().device_bytes, before.device_bytes)
  -- a view is a pointer argument; true/false go to the bool parameter
  local k = m:kernel("use")
  clear_log()
  k:launch({ grid = 1, block = 1 }, t, c, true)
  local g = last_args()
  T.eq(g[1], le_hex(t.ptr, 8)); T.eq(g[2], le_hex(c.ptr, 8)); T.eq(g[3], "01")
  k:launch({ grid = 1, block = 1 }, t, c, false)
  T.eq(last_args()[3], "00")
  k:launch({ grid = 1, block = 1 }, t, c, 1)
  T.raises(function() k:launch({ grid = 1, block = 1 }, t, c, "yes") end,
    "bad argument #4 to 'k:launch' (use parameter 3 (bool flag): u8 (1 byte) expected, got a string of 3 bytes)")
  T.raises(function() k:launch({ grid = 1, block = 1 }, t, c, {}) end, "a bool parameter takes true or false")
  -- PTX declares a C++ bool as .u8, so 0..255 stay valid for it, as for any 8-bit parameter
  T.raises(function() k:launch({ grid = 1, block = 1 }, t, c, 256) end, "out of range")
  local prepared = k:prepare({ grid = 1, block = 1 }, t, c, true)
  prepared()
  T.eq(last_args()[3], "01")
  prepared:free(); m:free()
end)

T.test("mod:global checks sizes, names and arguments", function()
  local m = cuda.load(prog)
  T.raises(function() m:global("table", "f32", 17) end,
    "bad argument #3 to 'mod:global' (f32[17] needs 68 bytes, but 'table' holds 64 bytes)")
  T.raises(function() m:global("counter", "u64", 1) end, "u64[1] needs 8 bytes, but 'counter' holds 4 bytes")
  local err = T.raises(function() m:global("nope", "f32", 1) end, "no __device__ or __constant__ variable named 'nope'")
  T.ok(err:find("variables: table, counter, _Z3tabILi4EE", 1, true), err)
  T.ok(err:find("registered name expressions: tab<4>", 1, true), err)
  T.raises(function() m:global("table\0x", "f32", 1) end,
    "variable name or name expression contains a NUL byte at offset 5")
  T.raises(function() m:global(7, "f32", 1) end, "variable name or name expression expected, got number")
  T.raises(function() m:global("table", "f99", 1) end, "unknown dtype 'f99'")
  T.raises(function() m:global("table", "f32", 0) end, "size must be positive")
  -- name expressions, spacing variants included
  local v = m:global("tab< 4 >", "i32", 4)
  T.eq(v.nbytes, 16)
  T.eq(m:global("tab<4>", "i32", 4).ptr, v.ptr)
  m:free()
  T.raises(function() m:global("table", "f32", 1) end, "the cuda.module was freed")
end)

T.test("mod:global finds variables in a cubin's symbol table", function()
  local bin = cuda.compile(SRC, { name = "vars.cu", arch = "sm_90a", names = { "tab<4>" } })
  T.ok(bin.cubin ~= nil, "a cubin")
  local m = cuda.load(bin)
  T.eq(m:global("table", "f32", 16).nbytes, 64)
  T.eq(m:global("tab<4>", "i32", { 2, 2 }).nbytes, 16)
  T.raises(function() m:global("counter", "u32", 2) end, "u32[2] needs 8 bytes, but 'counter' holds 4 bytes")
  m:free()
end)

T.test("a view keeps its module loaded; the last view unloads it", function()
  collectgarbage(); collectgarbage()
  cuda.sync() -- earlier tests' deferred unloads happen here, before the log is cleared
  clear_log()
  local m = cuda.load(prog)
  local v = m:global("table", "f32", 16)
  m:free()
  T.eq(#log_lines("module_unload"), 0, "unloaded under a live view")
  T.raises(function() m:kernel("use") end, "the cuda.module was freed")
  local h = cuda.host("f32", 16):fill(3)
  v:copy_from(h) -- the memory is still the module's
  v:free()
  cuda.sync() -- the copy marked the view; the unload waits for that work
  T.eq(#log_lines("module_unload"), 1, "the last view unloads it")
  -- dropped without free: collection does the same, in either order
  m = cuda.load(prog)
  v = m:global("counter", "u32", 1) -- luacheck: ignore 311
  m, v = nil, nil -- luacheck: ignore 311
  collectgarbage(); collectgarbage()
  cuda.sync()
  T.eq(#log_lines("module_unload"), 2)
end)

T.test("a view of a view keeps the module loaded after the parent view is freed", function()
  collectgarbage(); collectgarbage()
  cuda.sync()
  clear_log()
  local arrays0 = cuda.stats().arrays
  local m = cuda.load(prog)
  local v = m:global("table", "f32", 16)
  local w = v:view(5, 8)
  T.eq(cuda.stats().arrays, arrays0, "views of module memory are no allocations")
  m:free()
  v:free()
  cuda.sync()
  T.eq(#log_lines("module_unload"), 0, "unloaded while a view of the view lives")
  w:copy_from(cuda.host("f32", 8):fill(2)) -- still the module's memory
  w:free()
  cuda.sync()
  T.eq(#log_lines("module_unload"), 1, "the last view of any depth unloads it")
  T.eq(cuda.stats().arrays, arrays0)
end)

T.test("queued work on a view delays the module's unload", function()
  local busy = os.tmpname()
  local script = os.tmpname()
  T.write(script, string.format([[
    local prog = cuda.compile(%q, { name = "vars.cu", arch = "compute_90" })
    local m = cuda.load(prog)
    local v = m:global("table", "f32", 16)
    local other = cuda.load(prog):kernel("use")
    local s = cuda.stream()
    other:launch({ grid = 1, block = 1, stream = s }, v, 0, true) -- uses v, not m's kernels
    m:free(); v:free(); collectgarbage(); collectgarbage()
    print("unloads while busy", cuda.stats().deferred)
    os.remove(%q)
    cuda.sync()
    print("synced", cuda.stats().deferred)
  ]], SRC, busy))
  local gl = arg[-1]
  local p = assert(io.popen("GPULAB_FAKE_BUSY_FILE=" .. busy .. " GPULAB_FAKE_LOG=" .. LOG .. ".child " ..
    gl .. " " .. script .. " 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(script)
  T.ok(out:find("unloads while busy\t1", 1, true), out)
  T.ok(out:find("synced\t0", 1, true), out)
  local f = assert(io.open(LOG .. ".child"))
  local text = f:read("a")
  f:close()
  os.remove(LOG .. ".child")
  local launch_at = text:find("launch use", 1, true)
  local unload_at = text:find("module_unload", 1, true)
  T.ok(launch_at and unload_at and unload_at > launch_at, text)
end)

T.test("a tensor map for a parameter the kernel copies is refused", function()
  local m = cuda.load(prog)
  local tm = cuda.tensormap { address = 0x10000, dtype = "f16", dims = { 64, 64 }, strides = { 128 }, box = { 64, 64 } }
  T.raises(function() m:kernel("by_copy"):launch({ grid = 1, block = 1 }, tm) end,
      "bad argument #2 to 'k:launch' (by_copy parameter 1 (const Map m): b8[128] (128 bytes, align 64) expected, " ..
      "got cuda.tensormap (the kernel copies this parameter instead of reading it in place, so the TMA unit would " ..
      "get the copy's address: declare it const __grid_constant__))")
  T.raises(function() m:kernel("by_copy"):prepare({ grid = 1, block = 1 }, tm) end,
    "declare it const __grid_constant__")
  m:kernel("in_place"):launch({ grid = 1, block = 1 }, tm)
  tm:free(); m:free()
end)

-- A stand-in "cubin": an ELF64 header whose section table starts after some text. The stand-in
-- reads kernel signatures from any text in the image, so this binary's kernel has 3 parameters.
local function fake_cubin(text)
  local shoff = 64 + #text
  local head = "\127ELF\2\1\1" .. string.rep("\0", 9) .. string.rep("\0", 16) ..
    string.pack("<I8I8", 0, shoff) .. string.rep("\0", 4) .. string.pack("<I2I2I2I2I2I2", 64, 0, 0, 64, 0, 0)
  assert(#head == 64)
  return head .. text
end
local THREE = ".version 8.0\n.target sm_90\n.address_size 64\n" ..
  ".visible .entry k(.param .u64 a, .param .u64 b, .param .u32 n)\n{\n ret;\n}\n"
local ONE = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\n ret;\n}\n"

T.test("a PTX text that does not match the binary's parameters is refused", function()
  local m = cuda.load { cubin = fake_cubin(THREE), ptx = ONE }
  T.raises(function() m:kernel("k") end,
    "mod:kernel: kernel 'k': its PTX declares 1 parameter but the loaded binary has more (cuFuncGetParamInfo)")
  m:free()
  local wide = ONE:gsub("%.u64 a", ".u32 a")
  m = cuda.load { cubin = fake_cubin(ONE), ptx = wide }
  T.raises(function() m:kernel("k") end, "parameter 1 is 4 bytes in its PTX but 8 bytes in the loaded binary")
  m:free()
  m = cuda.load { cubin = fake_cubin(ONE), ptx = THREE }
  T.raises(function() m:kernel("k") end, "its PTX declares 3 parameters but the loaded binary has 1")
  m:free()
  m = cuda.load { cubin = fake_cubin(THREE), ptx = THREE }
  T.eq(#m:kernel("k").params, 3)
  m:free()
end)

T.test("a driver without cuFuncGetParamInfo: PTX signatures still work, binaries say why not", function()
  local script = os.tmpname()
  T.write(script, string.format([[
    local prog = cuda.compile(%q, { name = "vars.cu", arch = "sm_90a" })
    print("ptx", #cuda.load(prog.ptx):kernel("use").params)
    print("both", #cuda.load(prog):kernel("use").params)
    print(pcall(function() return cuda.load(prog.cubin):kernel("use") end))
  ]], SRC))
  local p = assert(io.popen("GPULAB_FAKE_NO_ENTRY=cuFuncGetParamInfo GPULAB_FAKE_LOG=/dev/null " ..
    arg[-1] .. " " .. script .. " 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(script)
  T.ok(out:find("ptx\t3", 1, true) and out:find("both\t3", 1, true), out)
  T.ok(out:find("mod:kernel: this CUDA driver cannot report a kernel's parameters", 1, true), out)
end)

T.test("embedded NUL bytes in kernel names and PTX text are refused", function()
  local m = cuda.load(prog)
  T.raises(function() m:kernel("use\0junk") end, "kernel name or name expression contains a NUL byte at offset 3")
  T.raises(function() m:kernel("") end, "must not be empty")
  m:free()
  T.raises(function() cuda.load(ONE .. "\0.visible .entry hidden() { ret; }") end, "PTX image contains a NUL byte")
  T.raises(function() cuda.load { ptx = ONE .. "\0x" } end, "program's ptx contains a NUL byte")
  cuda.load(ONE .. "\0\0"):free() -- trailing NULs end the text as the driver expects
end)

T.test("metamethods and finalizers during cuda.load and mod:kernel cannot free what they read", function()
  local calls = 0
  local m0 = cuda.load(prog)
  local lowered = setmetatable({}, { __index = function() calls = calls + 1; m0:free() end })
  local m = cuda.load(setmetatable({ ptx = prog.ptx, lowered = lowered },
    { __index = function() calls = calls + 1; m0:free() end }))
  T.eq(#m:kernel("use").params, 3)
  T.eq(calls, 0, "options and lowered names are read raw")
  m:free(); m0:free()
  -- finalizers that free the module run inside the allocations of mod:kernel / mod:global
  collectgarbage("generational")
  local outcomes = { ok = 0, freed = 0 }
  for round = 1, 200 do
    local mod = cuda.load(prog)
    for _ = 1, 3 + round % 5 do setmetatable({}, { __gc = function() mod:free() end }) end
    for _ = 1, 20 do
      local ok, err = pcall(function()
        local k = mod:kernel("use")
        local v = mod:global("table", "f32", { 4 })
        return k, v
      end)
      if ok then outcomes.ok = outcomes.ok + 1
      else
        T.ok(tostring(err):find("freed", 1, true), tostring(err))
        outcomes.freed = outcomes.freed + 1
      end
    end
  end
  collectgarbage("incremental")
  collectgarbage(); collectgarbage()
  print(string.format("finalizer rounds: ok %d, freed %d", outcomes.ok, outcomes.freed))
  T.ok(outcomes.ok > 0 and outcomes.freed > 0, string.format("ok %d, freed %d", outcomes.ok, outcomes.freed))
  T.eq(cuda.stats().modules, 0)
end)

T.done()
