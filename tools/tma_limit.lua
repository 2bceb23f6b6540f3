-- tma_limit.lua — the persistent TMA pipeline of labs/tma_double_buffer.lua against
-- cuMemcpyDtoD at the size the limit is judged at (default 32768 x 65536 f16 = 4 GiB), over every
-- knob the kernel has: box shape (8-32 KB), stages, CTAs per SM, store buffers or in place, L2
-- evict_first hints, descriptor prefetch. Every run's output is compared bit for bit with the
-- plain copy's on the device. Then the store-only kernel under its three waits, the
-- store-buffer reuse without wait_group.read, and a box-size sweep (16 B .. 32 KB) against the
-- plain copy, cold and hot. One table per part; device only.
--   gpulab tools/tma_limit.lua [--rows=N --cols=N] [--parts=pipe,store,torn,boxes,index,near,index_once]
--                              [--forms=shared,global]
local opts = { rows = 32768, cols = 65536, parts = "pipe,store,torn,boxes" }
for _, a in ipairs(arg) do
  local k, v = a:match("^%-%-(%w+)=(.*)$")
  if k then opts[k] = tonumber(v) or v end
end
local want = {}
for p in tostring(opts.parts):gmatch("[^,]+") do want[p] = true end
local ok, why = cuda.available()
if not ok then print("tma_limit: no GPU: " .. tostring(why)); os.exit(77) end

local dev = cuda.device(0)
local prog = cuda.compile_file(cuda.home .. "/kernels/tma_double_buffer.cu",
  { arch = "sm_90a", defines = { CONSUMER_WARPS = 4 } })
local mod = cuda.load(prog)
local k_pipe, k_copy = mod:kernel("tma_pipeline"), mod:kernel("copy_int4_scale")
local k_diff, k_store = mod:kernel("count_diff_vec16"), mod:kernel("tma_store_only")
local THREADS = 160
local NO_PREFETCH, DYNAMIC = 1, 8 -- tma_pipeline flags (EVICT_FIRST = 2: no measurable gain)
-- tile counter, then 8 index slots per CTA (the STAGE_INDEX_GLOBAL=1 build uses them)
local d_sched = cuda.array("i32", 2 + 8 * 8 * dev.sm_count)
d_sched:fill(0)
k_pipe:set_max_dynamic_smem(dev.smem_per_block_optin - 1024) -- less the static barriers
-- another build of tma_pipeline, as {kernel, threads} for pipe_fn
local function pipeline_build(defines)
  local p = cuda.compile_file(cuda.home .. "/kernels/tma_double_buffer.cu", { arch = "sm_90a", defines = defines })
  local k = cuda.load(p):kernel("tma_pipeline")
  k:set_max_dynamic_smem(dev.smem_per_block_optin - 1024)
  return { k, 32 * (1 + defines.CONSUMER_WARPS) }
end
k_store:set_max_dynamic_smem(32768 + 1024)
local d_status = cuda.array("i32", 4)
local h_status = cuda.host("i32", 4)
local d_cnt, h_cnt = cuda.array("u64", 1), cuda.host("u64", 1)

local function matrix(rows, cols)
  local n = rows * cols
  local m = { rows = rows, cols = cols, n = n, bytes = 4 * n }
  m.din, m.dout, m.dref = cuda.array("f16", n), cuda.array("f16", n), cuda.array("f16", n)
  local chunk = math.min(n, 1 << 24)
  local h = cuda.host("f16", chunk)
  h:random { seed = os.time(), lo = -1, hi = 1 }
  for off = 0, n - 1, chunk do
    m.din:copy_from(h, { dst_offset = off, count = math.min(chunk, n - off) })
  end
  k_copy:launch({ grid = dev.sm_count * 8, block = 256 }, m.din, m.dref, n * 2 // 16, 2.0)
  cuda.sync { timeout = 30 }
  m.maps = {}
  return m
end
-- linear: the same bytes seen as rows of 256 elements, so that a 256 x h box is h x 512
-- contiguous bytes (the operation is elementwise, any view of the matrix computes it)
-- wide (0, 1, 2): the elements are f16, or 4 or 8 bytes of f16s (the kernel's PIPE_WIDE_SHIFT)
local WIDE_DTYPE = { [0] = "f16", "u32", "u64" }
local function maps_of(m, w, h, linear, l2, wide)
  wide = wide or 0
  local key = w .. "x" .. h .. (linear and "L" or "") .. (l2 or "") .. "w" .. wide
  local cols, rows = m.cols >> wide, m.rows
  if linear then cols, rows = 256, (m.n >> wide) // 256 end
  if not m.maps[key] then
    local spec = function(a) return { array = a, dtype = WIDE_DTYPE[wide], dims = { cols, rows },
                                      strides = { cols * (2 << wide) }, box = { w, h },
                                      l2_promotion = l2 or "256B" } end
    m.maps[key] = { cuda.tensormap(spec(m.din)), cuda.tensormap(spec(m.dout)) }
  end
  return m.maps[key]
end
local function mismatches(m)
  d_cnt:fill(0)
  k_diff:launch({ grid = dev.sm_count * 4, block = 256 }, m.dout, m.dref, m.n * 2 // 16, d_cnt)
  cuda.sync { timeout = 30 }
  h_cnt:copy_from(d_cnt)
  h_status:copy_from(d_status)
  return h_cnt[1], h_status[1]
end
local function measure(fn, regime, t)
  return cuda.measure(fn, { regime = regime or "hot", min_samples = 5, min_time = 0.02, max_noise = 0.01,
                            timeout = t or 0.25 })
end
local function gbps(m, r, bytes) return (bytes or m.bytes) / (r.mean * 1e-3) / 1e9 end
local function stage_bytes(w, h, flags)
  local boxes = math.max(1, flags >> 8)
  return (boxes * w * h * (2 << ((flags >> 5) & 3)) + 127) // 128 * 128
end
-- kernel: another build of tma_pipeline (another CONSUMER_WARPS) as {k, threads}
local function pipe_fn(m, w, h, stages, ctas, out_bufs, flags, linear, l2, kernel)
  local k, threads = k_pipe, THREADS
  if kernel then k, threads = kernel[1], kernel[2] end
  local wide = (flags >> 5) & 3
  local mp = maps_of(m, w, h, linear, l2, wide)
  local cols, rows = m.cols >> wide, m.rows
  if linear then cols, rows = 256, (m.n >> wide) // 256 end
  local tiles_x, ntiles = cols // w, (cols // w) * (rows // h)
  local smem = (stages + out_bufs) * stage_bytes(w, h, flags) + 1024
  if smem > dev.smem_per_block_optin - 1024 or ctas > k:occupancy(threads, smem) then return nil end
  local prep = k:prepare({ grid = math.min(ntiles, dev.sm_count * ctas), block = threads, smem = smem },
    mp[1], mp[2], tiles_x, ntiles, w, h, stages, out_bufs, flags, 2.0, 4000000000, d_status, d_sched)
  return function() prep() end
end
local function run_checked(m, fn, regime, t)
  m.dout:fill(0)
  d_status:fill(0)
  local measured, r = pcall(measure, fn, regime, t)
  if not measured then
    print("  measure: " .. tostring(r))
    return { mean = math.huge, ci95 = { math.huge, math.huge } }, -1, -1
  end
  local bad, st = mismatches(m)
  return r, bad, st
end

print(string.format("tma_limit on %s (%d SMs, L2 %d MB)", dev.name, dev.sm_count, dev.l2_bytes >> 20))

if want.pipe then
  local m = matrix(opts.rows, opts.cols)
  local dtod_fn = function() m.dout:copy_from(m.din) end
  local copy_fn = function()
    k_copy:launch({ grid = dev.sm_count * 8, block = 256 }, m.din, m.dout, m.n * 2 // 16, 2.0)
  end
  local dtod = measure(dtod_fn, "hot", 1)
  local copy = measure(copy_fn, "hot", 1)
  print(string.format("matrix %d x %d f16, %.2f GiB moved per run; cuMemcpyDtoD %.0f GB/s, " ..
    "int4 copy %.0f GB/s (%.1f%%)",
    m.rows, m.cols, m.bytes / 2 ^ 30, gbps(m, dtod), gbps(m, copy), 100 * dtod.mean / copy.mean))
  print("pipe box stages ctas out_bufs flags GB/s pct_dtod mismatches status")
  local best = {}
  local SHAPES = { { 256, 32 }, { 256, 64 }, { 128, 64 } }
  local function sweep_one(shape, out_bufs, flags, stages, ctas, l2)
    local fn = pipe_fn(m, shape[1], shape[2], stages, ctas, out_bufs, flags, false, l2)
    if not fn then return end
    local r, bad, st = run_checked(m, fn)
    if st ~= 0 then d_sched:fill(0) end
    local g = gbps(m, r)
    print(string.format("pipe %dx%d %s %d %d %d %d %.0f %.1f %d 0x%x", shape[1], shape[2], l2, stages, ctas, out_bufs,
      flags, g, 100 * dtod.mean / r.mean, bad, st))
    local key = out_bufs .. ":" .. flags .. ":" .. l2
    if bad == 0 and st == 0 and (not best[key] or g > best[key].g) then
      best[key] = { g = g, w = shape[1], h = shape[2], stages = stages, ctas = ctas, out_bufs = out_bufs,
                    flags = flags, l2 = l2 }
    end
  end
  local YMAJOR = 16
  for _, l2 in ipairs({ "none", "128B" }) do
    for _, shape in ipairs(SHAPES) do
      for _, out_bufs in ipairs({ 2, 0 }) do
        for _, flags in ipairs({ DYNAMIC, DYNAMIC | YMAJOR, DYNAMIC | (2 << 8) }) do
          for _, stages in ipairs({ 2, 3, 4 }) do
            for _, ctas in ipairs({ 1, 2, 3 }) do sweep_one(shape, out_bufs, flags, stages, ctas, l2) end
          end
        end
      end
    end
  end
  -- the same 8 KB box as the lab's 256x16, every promotion: does the box size or the promotion decide?
  for _, l2 in ipairs({ "none", "128B", "256B" }) do
    for _, c in ipairs({ { 3, 3 }, { 4, 2 }, { 4, 3 } }) do sweep_one({ 256, 16 }, 0, DYNAMIC, c[1], c[2], l2) end
  end
  local wbest = {}
  for _, cw in ipairs({ 4, 8, 12, 16 }) do -- consumer warps
    local kk = pipeline_build({ CONSUMER_WARPS = cw })
    for _, l2 in ipairs({ "128B", "none" }) do
      for _, c in ipairs({ { 2, 1, 2 }, { 3, 1, 0 }, { 2, 2, 2 }, { 3, 2, 0 }, { 4, 2, 0 }, { 3, 2, 2 } }) do
        local fn = pipe_fn(m, 256, 32, c[1], c[2], c[3], DYNAMIC, false, l2, kk)
        if fn then
          local r, bad = run_checked(m, fn, "hot", 1)
          local d = measure(dtod_fn, "hot", 1)
          print(string.format("warps %d %s 256x32 s=%d c=%d out_bufs=%d: %.0f GB/s = %.1f%% of DtoD %.0f " ..
            "next to it, %d mismatches",
            cw, l2, c[1], c[2], c[3], gbps(m, r), 100 * d.mean / r.mean, gbps(m, d), bad))
          if bad == 0 and (not wbest.r or r.mean < wbest.r.mean) then
            wbest = { r = r, fn = fn,
                      label = string.format("%d warps %s s=%d c=%d out_bufs=%d", cw, l2, c[1], c[2], c[3]) }
          end
        end
      end
    end
  end
  local ratios = {}
  for rep = 1, 7 do
    local d = measure(dtod_fn, "hot", 1)
    local r = measure(wbest.fn, "hot", 1)
    ratios[rep] = d.mean / r.mean
  end
  table.sort(ratios)
  print(string.format("warps best %s: pipeline/DtoD over 7 alternations min %.4f median %.4f max %.4f", wbest.label,
    ratios[1], ratios[4], ratios[7]))
  -- 1 CTA/SM: 1 stage against 2 (true double buffering), 128x32 and the best linear box
  for _, shape in ipairs({ { 128, 32 }, { 256, 16, true }, { 256, 32, true } }) do
    for _, out_bufs in ipairs({ 0, 2 }) do
      local r1 = measure(pipe_fn(m, shape[1], shape[2], 1, 1, out_bufs, DYNAMIC, shape[3]), "hot", 1)
      local r2 = measure(pipe_fn(m, shape[1], shape[2], 2, 1, out_bufs, DYNAMIC, shape[3]), "hot", 1)
      local r4 = measure(pipe_fn(m, shape[1], shape[2], 4, 1, out_bufs, DYNAMIC, shape[3]), "hot", 1)
      print(string.format("db %dx%d%s out_bufs=%d 1 CTA/SM: 1 stage %.0f, 2 stages %.0f (%.2fx), 4 stages %.0f GB/s",
        shape[1], shape[2], shape[3] and "L" or "", out_bufs, gbps(m, r1), gbps(m, r2), r1.mean / r2.mean, gbps(m, r4)))
    end
  end
  local dtod2 = measure(dtod_fn, "hot", 1)
  print(string.format("cuMemcpyDtoD again: %.0f GB/s", gbps(m, dtod2)))
  local keys = {}
  for key in pairs(best) do keys[#keys + 1] = key end
  table.sort(keys, function(a, b) return best[a].g > best[b].g end)
  for i = 1, math.min(4, #keys) do
    local b = best[keys[i]]
    local fn = pipe_fn(m, b.w, b.h, b.stages, b.ctas, b.out_bufs, b.flags, false, b.l2)
    local fnp = pipe_fn(m, b.w, b.h, b.stages, b.ctas, b.out_bufs, b.flags | NO_PREFETCH, false, b.l2)
    local alternated = {}
    for rep = 1, 5 do -- alternated, so that drift hits both sides
      local d = measure(dtod_fn, "hot", 1)
      local r = measure(fn, "hot", 1)
      alternated[rep] = d.mean / r.mean
    end
    table.sort(alternated)
    local rp, badp = run_checked(m, fnp, "hot", 1)
    local r, bad = run_checked(m, fn, "hot", 1)
    print(string.format("best[%s] %dx%d s=%d c=%d out_bufs=%d: %.0f GB/s, %d mismatches; pipeline/DtoD over 5 " ..
      "alternations: min %.4f median %.4f max %.4f; without prefetch %.0f GB/s (%d mismatches)", keys[i], b.w, b.h,
      b.stages, b.ctas, b.out_bufs, gbps(m, r), bad, alternated[1], alternated[3], alternated[5], gbps(m, rp), badp))
  end
  for _, mp in pairs(m.maps) do mp[1]:free(); mp[2]:free() end
  m.din:free(); m.dout:free(); m.dref:free()
end

-- Where the stage index lives (the kernel's STAGE_INDEX_GLOBAL): "shared" (the default, a shared
-- slot released by every consumer thread) or "global" (a slot in sched). --parts=index runs
-- each at the configurations that led before, then the best of each alternated with
-- cuMemcpyDtoD; --parts=near runs the shared form over more configurations (box, stages, CTAs,
-- store buffers, L2 promotion and hints); --parts=index_once launches each form once on the
-- matrix and checks it (for compute-sanitizer runs).
local function index_forms()
  local forms = {}
  for name in tostring(opts.forms or "shared,global"):gmatch("%a+") do
    assert(name == "shared" or name == "global", "--forms: shared or global")
    forms[#forms + 1] = { form = name,
      kernel = pipeline_build({ CONSUMER_WARPS = 4, STAGE_INDEX_GLOBAL = name == "global" and 1 or 0 }) }
  end
  return forms
end
if want.index_once then
  local m = matrix(opts.rows, opts.cols)
  for _, f in ipairs(index_forms()) do
    for _, c in ipairs({ { 2, 2, 2 }, { 3, 1, 0 }, { 1, 1, 2 }, { 1, 1, 0 } }) do
      local fn = pipe_fn(m, 256, 32, c[1], c[2], c[3], DYNAMIC, false, "128B", f.kernel)
      m.dout:fill(0)
      d_status:fill(0)
      fn()
      cuda.sync { timeout = 60 }
      local bad, st = mismatches(m)
      print(string.format("index_once form %s s=%d c=%d out_bufs=%d: %d mismatches, status 0x%x", f.form, c[1], c[2],
        c[3], bad, st))
    end
  end
  m.din:free(); m.dout:free(); m.dref:free()
end
-- candidates: {form, kernel (nil: the default build), w, h, stages, ctas, out_bufs, flags, l2};
-- each measured beside a DtoD, the best `top` then alternated with DtoD 7 times
local function against_dtod(m, candidates, top, tag)
  local dtod_fn = function() m.dout:copy_from(m.din) end
  print(tag .. " form box s c out_bufs flags l2 GB/s pct_dtod_next_to_it mismatches status")
  local done = {}
  for _, c in ipairs(candidates) do
    local fn = pipe_fn(m, c.w, c.h, c.stages, c.ctas, c.out_bufs, c.flags, false, c.l2, c.kernel)
    if fn then
      local r, bad, st = run_checked(m, fn, "hot", 1)
      if st ~= 0 then d_sched:fill(0) end
      local d = measure(dtod_fn, "hot", 1)
      print(string.format("%s %s %dx%d %d %d %d %d %s %.0f %.1f %d 0x%x", tag, c.form, c.w, c.h, c.stages, c.ctas,
        c.out_bufs, c.flags, c.l2, gbps(m, r), 100 * d.mean / r.mean, bad, st))
      if bad == 0 and st == 0 then
        done[#done + 1] = { c = c, fn = fn, ratio = d.mean / r.mean,
          label = string.format("%s %dx%d s=%d c=%d out_bufs=%d flags=%d %s", c.form, c.w, c.h, c.stages, c.ctas,
            c.out_bufs, c.flags, c.l2) }
      end
    end
  end
  table.sort(done, function(a, b) return a.ratio > b.ratio end)
  local chosen = {}
  for i = 1, math.min(top, #done) do chosen[i] = done[i] end
  for _, x in ipairs(chosen) do x.alt = {} end
  for rep = 1, 7 do -- alternated, so that drift hits every candidate and DtoD alike
    for _, x in ipairs(chosen) do
      local d = measure(dtod_fn, "hot", 1)
      local r = measure(x.fn, "hot", 1)
      x.alt[rep] = d.mean / r.mean
    end
  end
  for _, x in ipairs(chosen) do
    table.sort(x.alt)
    print(string.format("%s best %s: pipeline/DtoD over 7 alternations min %.4f median %.4f max %.4f", tag, x.label,
      x.alt[1], x.alt[4], x.alt[7]))
  end
end
if want.index then
  local m = matrix(opts.rows, opts.cols)
  for _, f in ipairs(index_forms()) do -- the best of each form, alternated
    local candidates = {}
    for _, c in ipairs({ { 2, 2, 2 }, { 3, 2, 2 }, { 2, 3, 2 }, { 3, 2, 0 }, { 4, 2, 0 }, { 3, 3, 0 } }) do
      candidates[#candidates + 1] = { form = f.form, kernel = f.kernel, w = 256, h = 32, stages = c[1], ctas = c[2],
        out_bufs = c[3], flags = DYNAMIC, l2 = "128B" }
    end
    against_dtod(m, candidates, 1, "index")
  end
  m.din:free(); m.dout:free(); m.dref:free()
end
if want.near then
  local m = matrix(opts.rows, opts.cols)
  local EVICT_FIRST = 2
  local candidates = {}
  for _, shape in ipairs({ { 256, 32 }, { 256, 64 }, { 128, 64 } }) do
    for _, out_bufs in ipairs({ 2, 0 }) do
      for _, stages in ipairs({ 2, 3, 4 }) do
        for _, ctas in ipairs({ 2, 3 }) do
          candidates[#candidates + 1] = { form = "shared", w = shape[1], h = shape[2], stages = stages, ctas = ctas,
            out_bufs = out_bufs, flags = DYNAMIC, l2 = "128B" }
        end
      end
    end
  end
  for _, l2 in ipairs({ "256B", "none" }) do
    for _, c in ipairs({ { 2, 2, 2 }, { 3, 2, 0 } }) do
      candidates[#candidates + 1] = { form = "shared", w = 256, h = 32, stages = c[1], ctas = c[2], out_bufs = c[3],
        flags = DYNAMIC, l2 = l2 }
    end
  end
  for _, c in ipairs({ { 2, 2, 2 }, { 3, 2, 0 } }) do
    candidates[#candidates + 1] = { form = "shared", w = 256, h = 32, stages = c[1], ctas = c[2], out_bufs = c[3],
      flags = DYNAMIC | EVICT_FIRST, l2 = "128B" }
    candidates[#candidates + 1] = { form = "shared", w = 256, h = 32, stages = c[1], ctas = c[2], out_bufs = c[3],
      flags = DYNAMIC | (2 << 8), l2 = "128B" }
  end
  -- wider elements: box rows of 1 KB (u32, f16 pairs) and 2 KB (u64)
  for wide, shapes in pairs({ { { 256, 16 }, { 256, 32 }, { 128, 32 } }, { { 256, 8 }, { 256, 16 }, { 128, 16 } } }) do
    for _, shape in ipairs(shapes) do
      for _, c in ipairs({ { 2, 2, 2 }, { 3, 2, 0 }, { 2, 3, 2 }, { 4, 2, 0 } }) do
        candidates[#candidates + 1] = { form = "shared", w = shape[1], h = shape[2], stages = c[1], ctas = c[2],
          out_bufs = c[3], flags = DYNAMIC | (wide << 5), l2 = "128B" }
      end
    end
  end
  against_dtod(m, candidates, 4, "near")
  m.din:free(); m.dout:free(); m.dref:free()
end

if want.store or want.torn then
  local m = matrix(8192, 32768) -- 512 MB
  if want.store then
    local w, h = 256, 32
    local mp = maps_of(m, w, h)
    local tiles_x, ntiles = m.cols // w, (m.cols // w) * (m.rows // h)
    m.dval = cuda.array("f16", m.n)
    m.dval:fill(2.0)
    local memset = measure(function() m.dout:fill(0) end, "hot", 1)
    print(string.format("store-only, %d MB written: memset (fill) %.0f GB/s", m.n * 2 >> 20, gbps(m, memset, m.n * 2)))
    for _, wait in ipairs({ 0, 1, 2 }) do
      for _, ctas in ipairs({ 1, 2, 4, 8 }) do
        local fn = function()
          k_store:launch({ grid = dev.sm_count * ctas, block = 128, smem = w * h * 2 + 1024 }, mp[2], tiles_x,
            ntiles, w,
            h, wait, 0x40004000)
        end
        m.dout:fill(0)
        local r = measure(fn, "hot", 0.5)
        d_cnt:fill(0)
        k_diff:launch({ grid = dev.sm_count * 4, block = 256 }, m.dout, m.dval, m.n * 2 // 16, d_cnt)
        cuda.sync { timeout = 30 }
        h_cnt:copy_from(d_cnt)
        print(string.format("store wait=%d ctas=%d %.0f GB/s, %d vectors not 2.0", wait, ctas, gbps(m, r, m.n * 2),
          h_cnt[1]))
      end
    end
  end
  if want.torn then
    local k_reuse = mod:kernel("tma_store_reuse_demo")
    k_reuse:set_max_dynamic_smem(32768 + 1024)
    m.dval = m.dval or cuda.array("f16", m.n)
    m.dval:fill(2.0)
    print("torn box wait_read run vectors_not_value_of")
    for _, shape in ipairs({ { 256, 16 }, { 256, 64 } }) do
      local mp = maps_of(m, shape[1], shape[2])
      local tiles_x, ntiles = m.cols // shape[1], (m.cols // shape[1]) * (m.rows // shape[2])
      for _, wait_read in ipairs({ 1, 0 }) do
        for run = 1, 3 do
          m.dout:fill(0)
          k_reuse:launch({ grid = dev.sm_count * 2, block = 256, smem = shape[1] * shape[2] * 2 + 1024 }, mp[2],
            tiles_x,
            ntiles, shape[1], shape[2], wait_read, 0x40004000, 0x3c003c00)
          d_cnt:fill(0)
          k_diff:launch({ grid = dev.sm_count * 4, block = 256 }, m.dout, m.dval, m.n * 2 // 16, d_cnt)
          cuda.sync { timeout = 30 }
          h_cnt:copy_from(d_cnt)
          print(string.format("torn %dx%d %d %d %d of %d", shape[1], shape[2], wait_read, run, h_cnt[1], m.n * 2 // 16))
        end
      end
    end
  end
  for _, mp in pairs(m.maps) do mp[1]:free(); mp[2]:free() end
  m.din:free(); m.dout:free(); m.dref:free()
end

if want.boxes then
  print("boxes regime box bytes best_stages best_ctas tma_GB/s copy_GB/s ratio")
  for _, reg in ipairs({ { "cold", 4096, 16384 }, { "hot", 2048, 2048 } }) do
    local m = matrix(reg[2], reg[3])
    local copy_fn = function()
    k_copy:launch({ grid = dev.sm_count * 8, block = 256 }, m.din, m.dout, m.n * 2 // 16, 2.0)
  end
    local copy = measure(copy_fn, reg[1], 0.5)
    for _, shape in ipairs({ { 8, 1 }, { 32, 1 }, { 128, 1 }, { 256, 1 }, { 256, 2 }, { 256, 4 }, { 256, 8 },
      { 256, 16 },
      { 256, 32 }, { 256, 64 } }) do
      local best
      for _, stages in ipairs({ 2, 4, 8 }) do
        for _, ctas in ipairs({ 4, 2 }) do
          local fn = pipe_fn(m, shape[1], shape[2], stages, ctas, 2, DYNAMIC, false, "none")
          if fn then
            local r, bad, st = run_checked(m, fn, reg[1], 3)
            if bad == 0 and st == 0 and (not best or r.mean < best.r.mean) then
              best = { r = r, stages = stages, ctas = ctas }
            end
            if bad ~= 0 or st ~= 0 then
              print(string.format("  box %dx%d s=%d c=%d: %d mismatches, status 0x%x", shape[1], shape[2], stages,
                ctas, bad, st))
            end
          end
        end
      end
      if best then
        print(string.format("boxes %s %dx%d %d %d %d %.0f %.0f %.3f", reg[1], shape[1], shape[2],
          shape[1] * shape[2] * 2,
          best.stages, best.ctas, gbps(m, best.r), gbps(m, copy), copy.mean / best.r.mean))
      end
    end
    for _, mp in pairs(m.maps) do mp[1]:free(); mp[2]:free() end
    m.din:free(); m.dout:free(); m.dref:free()
  end
end
