-- gpulab.html — a lab run as one self-contained HTML page (`lab.lua --html FILE`): its title,
-- every claim with its verdict and evidence (intervals, ratios and a picture of the ratio against
-- its threshold), the lab's tables, its pictures inline, notes, failures and the provenance.
--
-- Self-contained: the styles are inline, the pictures are the lab's SVG text placed in the page,
-- and there is no script, link, image source or font from anywhere else, so the page reads the
-- same offline, attached to a mail or kept in a repository.
local svg = require("gpulab.svg")
local output = require("gpulab.output")

local html = {}

-- Text for HTML content and attribute values.
function html.escape(s)
  s = output.valid_utf8(tostring(s)) -- the page is UTF-8: a byte that starts no character is U+FFFD
  s = s:gsub("[%z\1-\8\11\12\14-\31]", "")
  return (s:gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }))
end
local esc = html.escape

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

-- Numbers as the lab prints them: integers in full, others with 4 significant digits.
local function fmt(v)
  if type(v) ~= "number" then return v == nil and "" or tostring(v) end
  if v ~= v then return "nan" end
  if v == math.huge or v == -math.huge then return v > 0 and "inf" or "-inf" end
  if math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 1e15) then
    return string.format("%d", math.tointeger(v) or v)
  end
  local a = math.abs(v)
  if a >= 1e6 or a < 1e-3 then return string.format("%.3e", v) end
  return string.format("%.4g", v)
end

local STYLE = [[
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
.meta { color: #555; } .summary span { margin-right: 1.2em; font-weight: bold; }
.claim { border: 1px solid #ddd; border-left: 6px solid #999; padding: 0.6em 1em; margin: 0.8em 0; border-radius: 4px; }
.claim.holds { border-left-color: #2ca02c; } .claim.refuted { border-left-color: #d62728; }
.claim.unclear { border-left-color: #ff7f0e; }
.badge { display: inline-block; font-weight: bold; font-size: 0.85em; padding: 0.1em 0.5em; border-radius: 3px;
  color: white; background: #999; margin-right: 0.5em; }
.holds .badge { background: #2ca02c; } .refuted .badge { background: #d62728; } .unclear .badge { background: #ff7f0e; }
.id, .source { color: #555; font-size: 0.9em; } .measured { margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } th { background: #f4f4f4; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.9em; }
svg { max-width: 100%; height: auto; } .failure { color: #d62728; font-weight: bold; }
dl.prov { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; } dl.prov dt { font-weight: bold; }
dl.prov dd { margin: 0; } code { background: #f4f4f4; padding: 0 0.2em; }
]]

-- An SVG document as an element of the page: the XML declaration dropped.
local function inline_svg(text)
  return (tostring(text):gsub("^%s*<%?xml[^>]*%?>%s*", ""))
end

local function table_html(out, header, rows)
  out[#out + 1] = "<table><thead><tr>"
  for _, h in ipairs(header or {}) do out[#out + 1] = "<th>" .. esc(h) .. "</th>" end
  out[#out + 1] = "</tr></thead><tbody>"
  for _, row in ipairs(rows or {}) do
    out[#out + 1] = "<tr>"
    for c = 1, math.max(#(header or {}), #row) do
      local v = row[c]
      out[#out + 1] = string.format('<td%s>%s</td>', type(v) == "number" and ' class="num"' or "", esc(fmt(v)))
    end
    out[#out + 1] = "</tr>"
  end
  out[#out + 1] = "</tbody></table>"
end

-- The evidence of a verdict: the intervals as a table, the ratio with its interval and the band
-- it was decided against, in words and as a picture scaled around the threshold.
local function evidence_html(out, ev)
  if type(ev) ~= "table" then return end
  if ev.intervals and #ev.intervals > 0 then
    local rows = {}
    for _, r in ipairs(ev.intervals) do
      local ci = r.ci95 or {}
      rows[#rows + 1] = { r.label, r.mean, ci[1], ci[2], r.samples, r.noise and string.format("%.2f%%", r.noise * 100),
        r.regime }
    end
    table_html(out, { "measured", "mean (ms)", "95% low", "95% high", "samples", "noise", "regime" }, rows)
  end
  if ev.ratio_ci then
    local t, m = ev.against or 1, ev.margin or 0
    out[#out + 1] = string.format('<p class="ratio">time ratio a/b <b>%s</b> [%s, %s] against %s ± %s%% → <b>%s</b>' ..
      '%s</p>', esc(fmt(ev.ratio)), esc(fmt(ev.ratio_ci[1])), esc(fmt(ev.ratio_ci[2])), esc(fmt(t)),
      esc(fmt(m * 100)), esc(ev.decision or "?"), ev.rounds and ev.rounds > 0 and
      string.format(" (after %d re-measure round%s)", ev.rounds, ev.rounds == 1 and "" or "s") or "")
    if finite(ev.ratio) and finite(ev.ratio_ci[1]) and finite(ev.ratio_ci[2]) then
      local labels = {}
      for i, r in ipairs(ev.intervals or {}) do labels[i] = r.label end
      local ok, pic = pcall(svg.ratio, { threshold = t, margin = m, width = 640, x_label = "time ratio a/b",
        items = { { label = #labels >= 2 and (labels[1] .. " / " .. labels[2]) or "a / b", value = ev.ratio,
          lo = ev.ratio_ci[1], hi = ev.ratio_ci[2] } } })
      if ok then out[#out + 1] = '<figure class="ratio-plot">' .. inline_svg(pic) .. "</figure>" end
    end
  end
  if ev.reason then out[#out + 1] = '<p class="reason">unclear: ' .. esc(ev.reason) .. "</p>" end
end

local function claims_html(out, res)
  local count = { HOLDS = 0, REFUTED = 0, UNCLEAR = 0 }
  for _, v in ipairs(res.verdicts or {}) do count[v.verdict] = (count[v.verdict] or 0) + 1 end
  out[#out + 1] = '<h2 id="verdicts">Claims and verdicts</h2>'
  out[#out + 1] = string.format('<p class="summary"><span>%d holds</span><span>%d refuted</span>' ..
    '<span>%d unclear</span></p>', count.HOLDS, count.REFUTED, count.UNCLEAR)
  local ids = {}
  for i, v in ipairs(res.verdicts or {}) do
    local word = tostring(v.verdict or "UNCLEAR")
    -- a claim judged more than once (one verdict per size) gets claim-ID, claim-ID-2, ...: ids are unique
    local id = v.id and ("claim-" .. v.id) or ("verdict-" .. i)
    ids[id] = (ids[id] or 0) + 1
    if ids[id] > 1 then id = id .. "-" .. ids[id] end
    out[#out + 1] = string.format('<div class="claim %s" id="%s">', esc(word:lower()), esc(id))
    out[#out + 1] = string.format('<p><span class="badge">%s</span><b>%s</b>%s</p>', esc(word), esc(v.claim or ""),
      v.id and (' <span class="id">(' .. esc(v.id) .. ")</span>") or "")
    if v.source then out[#out + 1] = '<p class="source">source: ' .. esc(v.source) .. "</p>" end
    if v.measured and v.measured ~= "" then
      out[#out + 1] = '<p class="measured">' .. (v.judged == false and "" or "measured: ") .. esc(v.measured) .. "</p>"
    end
    if v.section then out[#out + 1] = '<p class="id">section: ' .. esc(v.section) .. "</p>" end
    evidence_html(out, v.evidence)
    out[#out + 1] = "</div>"
  end
end

local function pictures_html(out, res, texts)
  local any = false
  for i, p in ipairs(res.pictures or {}) do
    local text = texts and texts[i]
    if text then
      if not any then out[#out + 1] = '<h2 id="pictures">Pictures</h2>' end
      any = true
      out[#out + 1] = string.format('<figure class="picture" id="picture-%d">%s<figcaption>%s%s</figcaption></figure>',
        i, inline_svg(text), esc(p.title or p.file), p.section and (" — " .. esc(p.section)) or "")
    end
  end
end

local function provenance_html(out, res)
  local p = res.provenance
  if type(p) ~= "table" then return end
  out[#out + 1] = '<h2 id="provenance">Provenance</h2><dl class="prov">'
  local function item(k, v)
    if v ~= nil and v ~= "" then out[#out + 1] = "<dt>" .. esc(k) .. "</dt><dd>" .. v .. "</dd>" end
  end
  local g = p.gpulab or {}
  item("gpulab", esc(tostring(g.version)) .. " (commit <code>" .. esc(tostring(g.commit)) .. "</code>)")
  item("Lua, NVRTC, driver", esc(string.format("%s, NVRTC %s, driver %s", tostring(p.lua), tostring(p.nvrtc),
    p.driver and tostring(p.driver) or "none")))
  local d = p.device
  if type(d) == "table" and d.name then
    item("device", esc(string.format("%s (%s), %s SMs, %s MHz SM clock, %s MHz memory clock, %s GiB", d.name,
      tostring(d.arch), fmt(d.sm_count), fmt(d.sm_clock_mhz), fmt(d.mem_clock_mhz),
      d.mem_bytes and string.format("%.1f", d.mem_bytes / 2 ^ 30) or "?")))
    item("device UUID", d.uuid and ("<code>" .. esc(d.uuid) .. "</code>"))
  else
    local why = type(p.gpu) == "table" and p.gpu.reason
    item("device", esc("none reached" .. (why and (": " .. why) or "")))
  end
  item("date (UTC)", esc(p.date_utc))
  item("host", esc(p.host))
  item("command", p.command_line and ("<code>" .. esc(p.command_line) .. "</code>"))
  item("mode", esc(p.mode))
  local params = {}
  for k, v in pairs(p.params or {}) do params[#params + 1] = esc(k) .. "=" .. esc(fmt(v)) end
  table.sort(params)
  item("parameters", #params > 0 and table.concat(params, ", ") or "none")
  out[#out + 1] = "</dl>"
  local rows = {}
  for _, k in ipairs(p.kernels or {}) do
    local opts = {}
    for name, v in pairs(k.options or {}) do
      local text
      if type(v) == "table" then
        local parts = {}
        for kk, vv in pairs(v) do parts[#parts + 1] = math.type(kk) and tostring(vv) or (kk .. "=" .. tostring(vv)) end
        table.sort(parts)
        text = "{" .. table.concat(parts, ", ") .. "}"
      else
        text = tostring(v)
      end
      opts[#opts + 1] = name .. "=" .. text
    end
    table.sort(opts)
    for _, e in ipairs(k.kernels or {}) do
      rows[#rows + 1] = { k.file, e.name, e.regs, e.smem, e.local_bytes, e.spill_stores, table.concat(opts, " ") }
    end
    if not k.kernels or #k.kernels == 0 then
      rows[#rows + 1] = { k.file, "", nil, nil, nil, nil, table.concat(opts, " ") }
    end
  end
  if #rows > 0 then
    out[#out + 1] = "<h3>Kernels</h3>"
    table_html(out, { "file", "kernel", "registers", "shared (B)", "local (B)", "spill stores (B)", "compile options" },
      rows)
  end
end

-- html.report(results [, picture_texts]) --> the page. results: lab:results()'s table (or the
-- JSON read back); picture_texts[i]: the SVG text of results.pictures[i].
function html.report(res, texts)
  if type(res) ~= "table" then error("html.report: argument 1 must be a lab's results table", 2) end
  local out = {}
  local title = res.title and (res.name .. " — " .. res.title) or tostring(res.name)
  out[#out + 1] = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
  out[#out + 1] = '<meta name="viewport" content="width=device-width, initial-scale=1">'
  out[#out + 1] = "<title>" .. esc(title) .. "</title><style>" .. STYLE .. "</style></head><body>"
  out[#out + 1] = "<h1>" .. esc(res.title or res.name) .. "</h1>"
  local p = res.provenance or {}
  local dev = type(p.device) == "table" and p.device.name or "no GPU reached"
  out[#out + 1] = string.format('<p class="meta">lab <code>%s</code> · %s run · %s · %s</p>', esc(res.name),
    res.quick and "quick" or "full", esc(p.date_utc or ""), esc(dev))
  if res.claims then out[#out + 1] = '<p class="meta">claims: ' .. esc(res.claims) .. "</p>" end
  if res.failures and #res.failures > 0 then
    out[#out + 1] = '<h2 id="failures">Failures</h2><ul>'
    for _, f in ipairs(res.failures) do out[#out + 1] = '<li class="failure">' .. esc(f) .. "</li>" end
    out[#out + 1] = "</ul>"
  end
  claims_html(out, res)
  if res.tables and #res.tables > 0 then
    out[#out + 1] = '<h2 id="tables">Tables</h2>'
    for _, t in ipairs(res.tables) do
      if t.title then out[#out + 1] = "<h3>" .. esc(t.title) .. "</h3>" end
      table_html(out, t.header, t.rows)
    end
  end
  pictures_html(out, res, texts)
  if res.notes and #res.notes > 0 then
    out[#out + 1] = '<h2 id="notes">Notes</h2>'
    local section
    for _, n in ipairs(res.notes) do
      if n.section ~= section then
        if section ~= nil or n.section then
          out[#out + 1] = "<h3>" .. esc(n.section or "") .. "</h3>"
        end
        section = n.section
      end
      out[#out + 1] = '<p class="note">' .. esc(n.text):gsub("\n", "<br>") .. "</p>"
    end
  end
  provenance_html(out, res)
  out[#out + 1] = "</body></html>\n"
  return table.concat(out, "\n")
end

return html
