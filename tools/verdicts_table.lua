-- tools/verdicts_table.lua OUTDIR RUN... — the table of tools/verdicts.sh: reads OUTDIR/runs.tsv
-- (lab, run, exit, ms, limit) and OUTDIR/<lab>-<run>.json, prints one row per claim (its id, or
-- its text for a lab that declares none) with the verdict of each run and whether they agree.
-- Exit 0 when every claim is stable and every run exited 0, else 1.
local json = require("gpulab.json")

local out = arg[1]
local runs = {}
for i = 2, #arg do runs[#runs + 1] = arg[i] end
if not out or #runs == 0 then
  io.stderr:write("usage: gpulab tools/verdicts_table.lua OUTDIR RUN...\n")
  os.exit(2)
end

local function read(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- runs.tsv, in the order the labs ran
local labs, status = {}, {}
for line in (read(out .. "/runs.tsv") or ""):gmatch("[^\n]+") do
  local lab, run, rc, ms, limit = line:match("^([^\t]+)\t([^\t]+)\t(%d+)\t(%d+)\t(%d+)$")
  if lab then
    if not status[lab] then
      labs[#labs + 1] = lab
      status[lab] = {}
    end
    status[lab][run] = { rc = tonumber(rc), seconds = tonumber(ms) / 1000, limit = tonumber(limit) }
  end
end
if #labs == 0 then
  io.stderr:write("verdicts_table: no runs in " .. out .. "/runs.tsv\n")
  os.exit(2)
end

-- A cell: the verdict word, with the interval of a comparison when there was one.
local function cell(v)
  local w = v.verdict
  if v.evidence and v.evidence.ratio_ci then
    local ci = v.evidence.ratio_ci
    w = string.format("%s %.3f[%s,%s]", w, v.evidence.ratio or 0, ci[1] and string.format("%.3f", ci[1]) or "?",
      ci[2] and string.format("%.3f", ci[2]) or "inf")
  end
  return w
end

local rows, all_ok, claims, stable_n = {}, true, 0, 0
for _, lab in ipairs(labs) do
  local order, by_key = {}, {}
  for _, run in ipairs(runs) do
    local text = read(out .. "/" .. lab .. "-" .. run .. ".json")
    local ok, res = pcall(function() return text and json.decode(text) end)
    for _, v in ipairs(ok and res and res.verdicts or {}) do
      local key = v.id or v.claim
      if not by_key[key] then
        by_key[key] = { cells = {}, words = {} }
        order[#order + 1] = key
      end
      -- a claim judged twice in one run keeps the last verdict
      by_key[key].cells[run], by_key[key].words[run] = cell(v), v.verdict
    end
  end
  for _, key in ipairs(order) do
    local e = by_key[key]
    local row = { lab, #key > 48 and key:sub(1, 45) .. "..." or key }
    local first, stable = e.words[runs[1]], true
    for _, run in ipairs(runs) do
      row[#row + 1] = e.cells[run] or "(missing)"
      if e.words[run] ~= first or e.words[run] == nil then stable = false end
    end
    row[#row + 1] = stable and "yes" or "NO"
    rows[#rows + 1] = row
    claims = claims + 1
    if stable then stable_n = stable_n + 1 else all_ok = false end
  end
  local parts = {}
  for _, run in ipairs(runs) do
    local s = status[lab][run]
    if s then
      parts[#parts + 1] = string.format("%s exit %d %.1f s", run, s.rc, s.seconds)
      if s.rc ~= 0 then all_ok = false end
      if s.rc == 124 or s.rc == 137 then
        parts[#parts] = parts[#parts] .. string.format(" (hit the %d s limit)", s.limit)
      end
    else
      parts[#parts + 1] = run .. " not run"
      all_ok = false
    end
  end
  rows[#rows + 1] = { lab, "(runs: " .. table.concat(parts, ", ") .. ")" }
end

local header = { "lab", "claim" }
for _, run in ipairs(runs) do header[#header + 1] = run end
header[#header + 1] = "stable"
local width = {}
for c, h in ipairs(header) do width[c] = #h end
for _, r in ipairs(rows) do
  if #r > 2 then for c, v in ipairs(r) do width[c] = math.max(width[c] or 0, utf8.len(v) or #v) end end
end
local function line(r)
  local parts = {}
  for c, v in ipairs(r) do
    parts[c] = c == #r and v or v .. string.rep(" ", (width[c] or 0) - (utf8.len(v) or #v))
  end
  return table.concat(parts, "  ")
end
print(line(header))
local total_s = 0
for _, lab in ipairs(labs) do for _, s in pairs(status[lab]) do total_s = total_s + s.seconds end end
for _, r in ipairs(rows) do print(line(r)) end
print(string.format("\n%d of %d claims stable over %s; %d labs, %.0f s of runs in all", stable_n, claims,
  table.concat(runs, ", "), #labs, total_s))
os.exit(all_ok and 0 or 1)
