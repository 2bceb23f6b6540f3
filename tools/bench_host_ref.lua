-- bench_host_ref.lua — a host reference for an N x N f32 transpose (default 8192), built two
-- ways: element by element in Lua (h[i] reads and writes), and with the bulk host operations
-- (h:transpose), checked against each other with cuda.compare. Host code only: no GPU needed.
--   gpulab tools/bench_host_ref.lua [N]          (N=8192 takes ~20 s for the Lua loop)
local N = tonumber(arg and arg[1]) or 8192
local clock = os.clock

local src = cuda.host("f32", { N, N }):random { seed = 1, lo = -1, hi = 1 }

local t0 = clock()
local by_element = cuda.host("f32", { N, N })
for r = 0, N - 1 do
  local row = r * N
  for c = 1, N do by_element[(c - 1) * N + r + 1] = src[row + c] end
end
local t_lua = clock() - t0

t0 = clock()
local bulk = src:transpose()
local t_bulk = clock() - t0

t0 = clock()
local cmp = cuda.compare(bulk, by_element)
local t_cmp = clock() - t0

-- a reduction reference on the same data, to show the other ops at this size
t0 = clock()
local sum = bulk:sum()
local t_sum = clock() - t0

print(string.format("host reference, %dx%d f32 transpose (CPU time, os.clock)", N, N))
print(string.format("  element by element in Lua : %8.3f s", t_lua))
print(string.format("  h:transpose()             : %8.3f s", t_bulk))
print(string.format("  cuda.compare of the two   : %8.3f s  (mismatches %d)", t_cmp, cmp.mismatches))
print(string.format("  bulk:sum()                : %8.3f s  (%.6g)", t_sum, sum))
print(string.format("  speed-up                  : %8.1fx", t_lua / t_bulk))
if cmp.mismatches ~= 0 then
  io.stderr:write("the two references disagree at element ", tostring(cmp.first_bad), "\n")
  os.exit(1)
end
