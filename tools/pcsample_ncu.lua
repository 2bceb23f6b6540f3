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
  -- a warp waiting at a barrier is sampled at the instruction after BAR.SYNC, the next it will issue
  one_warp_works = { { line = 26, what = "the load after the first barrier", reason = "barrier" },
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

local csv_fields = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/csv.lua").fields

-- ncu's stall column names (stall_long_sb, ...) as CUPTI names them (long_scoreboard, ...)
local NCU_REASON = { long_sb = "long_scoreboard", short_sb = "short_scoreboard", sleep = "sleeping",
  dispatch = "dispatch_stall", imc = "imc_miss", lg = "lg_throttle", math = "math_pipe_throttle",
  mio = "mio_throttle", no_inst = "no_instructions", tex = "tex_throttle" }
local function reason_name(s)
  s = s:gsub("^smsp__pcsamp_warps_issue_stalled_", ""):gsub("^stall_", "")
  return NCU_REASON[s] or s
end

-- `ncu --page source --csv --print-source sass`: per kernel a "Kernel Name" line, a header row,
-- then one row per instruction with its absolute address. Returns kernel -> { pcs = { {offset=
-- (from the kernel's first instruction), samples=, stalls={reason=n}} } }.
local function read_ncu(path)
  local f = assert(io.open(path, "r"))
  local kernels, cur, header, kname, base = {}, nil, nil, nil, nil
  for line in f:lines() do
    local fields = csv_fields(line)
    if fields[1] == "Kernel Name" then
      kname, cur, header = fields[2]:match("^[%w_]+"), nil, nil
    elseif fields[1] == "Address" then
      header, base = fields, nil
      cur = { pcs = {} }
      kernels[kname or ("kernel" .. (#kernels + 1))] = cur
    elseif cur and #fields >= #header then
      local pc = { stalls = {}, samples = 0 }
      local addr = tonumber(fields[1])
      if addr then
        base = base or addr
        pc.offset = addr - base
        for i, h in ipairs(header) do
          local n = tonumber((fields[i]:gsub(",", "")))
          if h == "Source" then pc.text = fields[i]
          elseif h == "Warp Stall Sampling (All Samples)" then pc.samples = n or 0
          elseif h:match("^stall_[%w_]+$") and n and n > 0 then pc.stalls[reason_name(h)] = n end
        end
        cur.pcs[#cur.pcs + 1] = pc
      end
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
  local line_of = { two_chains = {}, one_warp_works = {} }
  local ok, prog = pcall(cuda.compile, SRC, { name = "pcsample_ncu.cu", arch = "sm_90a", lineinfo = true })
  for k, map in pairs(line_of) do
    local sok, sass = pcall(function() return prog:sass(k) end)
    if ok and sok then
      for _, ins in ipairs(sass) do map[ins.offset] = ins.line end
    end
  end
  for l in io.lines(arg[2]) do -- the sampled PCs carry their lines too (enough without nvdisasm)
    local k, off, line = l:match("^(%S+)\t(%d+)\t(%d+)\t")
    if k and line_of[k] and not line_of[k][tonumber(off)] then line_of[k][tonumber(off)] = tonumber(line) end
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
      for name, c in st:gmatch("(%S+)=(%d+)") do
        local r = reason_name(name)
        e.stalls[r] = (e.stalls[r] or 0) + tonumber(c)
      end
    end
  end
  local theirs = read_ncu(arg[3])
  local function top(stalls)
    local best, name = -1, "-"
    for k, n in pairs(stalls) do if n > best or (n == best and k < name) then best, name = n, k end end
    return name, best
  end
  local worst, agree, compared = 0, 0, 0
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
          if o.lines[l] and tl[l] then
            compared = compared + 1
            if top(o.lines[l].stalls) == top(tl[l].stalls) then agree = agree + 1 end
          end
          print(string.format("  %-5d %10.1f %10.1f %8.1f  %-28s %s", l, a, b, a - b,
            o.lines[l] and top(o.lines[l].stalls) or "-", tl[l] and top(tl[l].stalls) or "-"))
        end
      end
      for _, e in ipairs(EXPECT[k] or {}) do
        print(string.format("  expected on line %d (%s): %s", e.line, e.what, e.reason))
      end
    end
  end
  print(string.format("top stall reason the same on %d of %d lines; largest per-line share difference: %.1f " ..
    "percentage points", agree, compared, worst))
else
  io.stderr:write("usage: gpulab tools/pcsample_ncu.lua run | sample OUT.txt | compare OUT.txt NCU.csv\n")
  os.exit(2)
end
