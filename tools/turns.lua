-- Launch paths timed in interleaved turns against a base path of the same process, so that
-- drift over milliseconds moves them all (tools/bench_launch.lua, tools/launch_host_costs.lua).
-- Loaded with dofile; needs the cuda module.
local turns = {}

-- microseconds per launch of fn(n): n launches back to back, the queue drained around them
function turns.sustained(fn, n)
  cuda.sync()
  local t0 = cuda.now()
  fn(n)
  cuda.sync()
  return (cuda.now() - t0) / n * 1e6
end

-- the median of a list (sorted in place); nil for an empty one
function turns.median(list)
  table.sort(list)
  local n = #list
  if n == 0 then return nil end
  return n % 2 == 1 and list[(n + 1) // 2] or (list[n // 2] + list[n // 2 + 1]) / 2
end

-- Runs paths ({ {name=, fn=fn(n)}, ... }) in turns of `chunk` launches, time(fn, chunk) each
-- (a path with a `time` of its own is timed by that: one in another process reports its own):
-- a warm-up turn, then `reps` turns, the order rotating by one every turn. Returns
-- ratios[name] = { each kept turn's time over the `base` path's time in that turn },
-- us[name] = { each kept turn's microseconds per launch } and each kept turn's { [name] = us }.
-- A path's own `time` may answer nil (its process could not time that turn): the turn then
-- has no value for it.
function turns.run(paths, base, chunk, reps, time)
  time = time or turns.sustained
  local ratios, us, each = {}, {}, {}
  for r = 0, reps do
    local got = {}
    for i = 0, #paths - 1 do
      local p = paths[(i + r) % #paths + 1]
      got[p.name] = (p.time or time)(p.fn, chunk)
    end
    if r > 0 then
      each[#each + 1] = got
      for name, v in pairs(got) do
        ratios[name] = ratios[name] or {}
        us[name] = us[name] or {}
        table.insert(ratios[name], v / got[base])
        table.insert(us[name], v)
      end
    end
  end
  return ratios, us, each
end

-- The host CPU's own speed at this moment, with no GPU and no driver in it: ns per step of a
-- dependent integer loop in Lua (2 million steps, about 20 ms). On the lent H200 hosts it has
-- moved by 2x within seconds, and gpulab's share of a launch moves with it more than the
-- driver's does (docs/RESULTS.md §37): the tools print it beside their ratios.
function turns.host_reference()
  local steps, x, t0 = 2000000, 1, cuda.now()
  for i = 1, steps do x = (x * 31 + i) & 0xffff end
  return (cuda.now() - t0) / steps * 1e9, x
end

return turns
