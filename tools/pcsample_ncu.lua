-- pcsample_ncu.lua — cuda.pcsample against Nsight Compute's warp-state sampling on the same kernels.
--
--   gpulab tools/pcsample_ncu.lua run                 launches each kernel once (the process ncu profiles)
--   gpulab tools/pcsample_ncu.lua sample OUT.txt      cuda.pcsample on the same launches; per-PC rows to OUT
--   gpulab tools/pcsample_ncu.lua compare OUT.txt NCU.csv
--        NCU.csv: `ncu -i REP --page source --csv --print-source sass` of the `run` process; prints, per
--        kernel and source line, the share of samples each tool puts there and its top stall reason, and
--        the largest per-line difference
-- Three kernels whose stalls sit on known lines: a pointer chase (long scoreboard on the load), a
-- dependent FMA chain (a fixed-latency wait), and a block where one warp computes while the others
-- wait at a barrier. tools/device_run.sh's `pcsncu` part runs all three steps.
local mode = arg[1]
local SRC = [[
extern "C" __global__ void init_chain(unsigned *next, unsigned mask)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= mask) next[i] = (i * 1664525u + 1013904223u) & mask;
}
extern "C" __global__ void two_chains(const unsigned *next, float *out, int loads, int fmas, float a, float b)
{
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < loads; i++)
        p = __ldcg(&next[p]);
    float x = (float)(p & 1023u) * 1e-3f;
#pragma unroll 16
    for (int i = 0; i < fmas; i++)
        x = fmaf(x, a, b);
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
extern "C" __global__ void one_warp_works(float *out, int rounds, int work)
{
    __shared__ float s[256];
    float x = (float)threadIdx.x * 1e-3f;
    for (int r = 0; r < rounds; r++) {
        if (threadIdx.x < 32)
            for (int j = 0; j < work; j++) x = fmaf(x, 0.999f, 1e-3f);
        s[threadIdx.x] = x;
        __syncthreads();
        x += s[(threadIdx.x + 1) & 255];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
]]
-- the lines each kernel's stalls are expected on (1-based lines of SRC)
local EXPECT = {
  two_chains = { { line = 10, what = "pointer-chase load", reason = "long_scoreboard" },
                 { line = 14, what = "dependent FMA", reason = "wait" } },
  one_warp_works = { { line = 25, what = "first barrier", reason = "barrier" },
                     { line = 23, what = "the one warp's FMA", reason = "wait" } },
}

local function setup()
  local dev = cuda.device(0)
  local prog = cuda.compile(SRC, { name = "pcsample_ncu.cu", arch = dev.arch, lineinfo = true })
  local mod = cuda.load(prog)
  local N = 64 * 1024 * 1024 -- 256 MiB of u32: the chase misses L2
  local next_ = cuda.array("u32", N)
  mod:kernel("init_chain"):launch({ grid = N // 256, block = 256 }, next_, N - 1)
  local warps = dev.sm_count * 4 -- one warp per scheduler
  local out = cuda.array("f32", dev.sm_count * 256 * 2)
  local chains, bar = mod:kernel("two_chains"), mod:kernel("one_warp_works")
  local function run()
    chains:launch({ grid = warps, block = 32 }, next_, out, 4000, 2000000, 0.999, 1e-3)
    bar:launch({ grid = dev.sm_count * 2, block = 256 }, out, 2000, 400)
  end
  run()
  cuda.sync()
  return prog, run
end

local function csv_fields(line)
  local out, i, n = {}, 1, #line
  while i <= n + 1 do
    if line:sub(i, i) == '"' then
      local j, buf = i + 1, {}
      while j <= n do
        local c = line:sub(j, j)
        if c == '"' and line:sub(j + 1, j + 1) == '"' then buf[#buf + 1] = '"'; j = j + 2
        elseif c == '"' then break
        else buf[#buf + 1] = c; j = j + 1 end
      end
      out[#out + 1] = table.concat(buf)
      i = j + 2
    else
      local j = line:find(",", i, true) or n + 1
      out[#out + 1] = line:sub(i, j - 1)
      i = j + 1
    end
  end
  return out
end

-- `ncu --page source --csv --print-source sass` rows: per kernel, a header row then one row per
-- instruction. Returns kernel -> { pcs = { {offset=, samples=, stalls={reason=n}} }, header = {...} }.
local function read_ncu(path)
  local f = assert(io.open(path, "r"))
  local kernels, cur, header, kname = {}, nil, nil, nil
  for line in f:lines() do
    local k = line:match('^"?Kernel Name"?,%s*"?([^",]+)') or line:match("^Kernel Name:%s*(%S+)")
    if k then kname = k:match("^[%w_]+") end
    local fields = csv_fields(line)
    local has_addr = false
    for _, h in ipairs(fields) do if h:find("Address", 1, true) then has_addr = true end end
    if has_addr and line:find("Source", 1, true) then
      header = fields
      cur = { pcs = {}, header = header }
      kernels[kname or ("kernel" .. (#kernels + 1))] = cur
    elseif cur and #fields == #header then
      local pc = { stalls = {} }
      for i, h in ipairs(header) do
        local v = fields[i]
        if h:find("Address", 1, true) then pc.offset = tonumber(v) or tonumber(v:match("0x%x+") or "")
        elseif h:find("Source", 1, true) then pc.text = v
        elseif h == "Warp Stall Sampling (All Samples)" then pc.samples = tonumber((v:gsub(",", "")))
        elseif h:match("^stall_") or h:match("^smsp__pcsamp_warps_issue_stalled_") then
          local n = tonumber((v:gsub(",", "")))
          if n and n > 0 then pc.stalls[h:gsub("^smsp__pcsamp_warps_issue_stalled_", "")] = n end
        end
      end
      if pc.offset then cur.pcs[#cur.pcs + 1] = pc end
    end
  end
  f:close()
  return kernels
end

if mode == "run" then
  setup()
elseif mode == "sample" then
  local prog, run = setup()
  local r = cuda.pcsample(run, { programs = prog })
  local f = assert(io.open(assert(arg[2], "sample OUT.txt"), "w"))
  for _, row in ipairs(r) do
    print(r:annotate(row.kernel))
    for _, pc in ipairs(row.pcs) do
      local parts = {}
      for k, n in pairs(pc.stalls or {}) do parts[#parts + 1] = k .. "=" .. n end
      table.sort(parts)
      f:write(string.format("%s\t%d\t%d\t%d\t%s\n", row.kernel, pc.offset, pc.line or 0, pc.samples,
        table.concat(parts, " ")))
    end
  end
  f:close()
elseif mode == "compare" then
  -- offset -> line from gpulab's own SASS listing of the same compile
  local prog = cuda.compile(SRC, { name = "pcsample_ncu.cu", arch = cuda.device(0).arch, lineinfo = true })
  local line_of = {}
  for _, k in ipairs({ "two_chains", "one_warp_works" }) do
    line_of[k] = {}
    for _, ins in ipairs(prog:sass(k)) do line_of[k][ins.offset] = ins.line end
  end
  local ours = {}
  for l in io.lines(arg[2]) do
    local k, _, line, n, st = l:match("^(%S+)\t(%d+)\t(%d+)\t(%d+)\t(.*)$")
    if k then
      ours[k] = ours[k] or { total = 0, lines = {} }
      local o = ours[k]
      line = tonumber(line)
      o.total = o.total + tonumber(n)
      local e = o.lines[line] or { samples = 0, stalls = {} }
      o.lines[line] = e
      e.samples = e.samples + tonumber(n)
      for name, c in st:gmatch("(%S+)=(%d+)") do e.stalls[name] = (e.stalls[name] or 0) + tonumber(c) end
    end
  end
  local theirs = read_ncu(arg[3])
  local function top(stalls)
    local best, name = -1, "-"
    for k, n in pairs(stalls) do if n > best or (n == best and k < name) then best, name = n, k end end
    return name, best
  end
  local worst = 0
  for k, o in pairs(ours) do
    local t = theirs[k]
    if not t then print(k .. ": not in ncu's export (kernels there: " .. table.concat((function()
      local ks = {} for n in pairs(theirs) do ks[#ks + 1] = n end return ks end)(), ", ") .. ")")
    else
      local tl, ttotal = {}, 0
      for _, pc in ipairs(t.pcs) do
        local line = line_of[k][pc.offset] or 0
        local e = tl[line] or { samples = 0, stalls = {} }
        tl[line] = e
        e.samples = e.samples + (pc.samples or 0)
        ttotal = ttotal + (pc.samples or 0)
        for r, n in pairs(pc.stalls) do e.stalls[r] = (e.stalls[r] or 0) + n end
      end
      print(string.format("%s: %d samples (cuda.pcsample), %d (ncu)", k, o.total, ttotal))
      print(string.format("  %-5s %10s %10s %8s  %-28s %s", "line", "pcsample %", "ncu %", "diff", "pcsample top",
        "ncu top"))
      local lines = {}
      for l in pairs(o.lines) do lines[#lines + 1] = l end
      for l in pairs(tl) do if not o.lines[l] then lines[#lines + 1] = l end end
      table.sort(lines)
      for _, l in ipairs(lines) do
        local a = o.lines[l] and 100 * o.lines[l].samples / math.max(o.total, 1) or 0
        local b = tl[l] and 100 * tl[l].samples / math.max(ttotal, 1) or 0
        if a >= 1 or b >= 1 then
          worst = math.max(worst, math.abs(a - b))
          print(string.format("  %-5d %10.1f %10.1f %8.1f  %-28s %s", l, a, b, a - b,
            o.lines[l] and top(o.lines[l].stalls) or "-", tl[l] and top(tl[l].stalls) or "-"))
        end
      end
      for _, e in ipairs(EXPECT[k] or {}) do
        print(string.format("  expected on line %d (%s): %s", e.line, e.what, e.reason))
      end
    end
  end
  print(string.format("largest per-line share difference: %.1f percentage points", worst))
else
  io.stderr:write("usage: gpulab tools/pcsample_ncu.lua run | sample OUT.txt | compare OUT.txt NCU.csv\n")
  os.exit(2)
end
