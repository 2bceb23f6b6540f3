-- gpulab.svg — small, dependency-free SVG charts for lab results: line charts (optionally
-- logarithmic x), bar charts and timelines (rows of time spans, e.g. one row per SM).
--
-- Each function takes a spec table and returns the SVG text; svg.write(path, text) saves it.
-- Values that cannot be drawn (NaN, ±inf, non-positive on a log axis) are skipped, and every
-- label is escaped, so any measured data gives a well-formed file.
local output = require("gpulab.output")

local svg = {}

local palette = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf" }

local FONT = 'font-family="sans-serif"'

local valid_utf8 = output.valid_utf8

function svg.escape(s)
  s = valid_utf8(tostring(s))
  -- characters XML 1.0 forbids outright are dropped; the five specials become entities
  s = s:gsub("[%z\1-\8\11\12\14-\31]", "")
  return (s:gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;" }))
end

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

local function num(v)
  -- coordinates with two decimals: small files, enough precision for the screen
  local s = string.format("%.2f", v)
  s = s:gsub("%.?0+$", "")
  if s == "-0" then s = "0" end
  return s
end

-- Formats a tick value compactly (1, 2.5, 1e+06 style avoided for mid-size numbers).
local function tick_label(v)
  if v == 0 then return "0" end
  local a = math.abs(v)
  if a >= 1e6 or a < 1e-3 then
    local s = string.format("%.3g", v)
    return (s:gsub("e%+?(-?)0*(%d)", "e%1%2"))
  end
  local s = string.format("%.6f", v):gsub("0+$", ""):gsub("%.$", "")
  return s
end

-- Whether every value is a whole number (then the axis is an integer axis).
local function all_integers(values)
  if #values == 0 then return false end
  for _, v in ipairs(values) do
    if v ~= math.floor(v) then return false end
  end
  return true
end

-- Text width in pixels at a font size, for placing labels apart (sans-serif averages ~0.6 em).
local function text_width(text, size)
  return (utf8.len(tostring(text)) or #tostring(text)) * size * 0.6
end

-- `text` cut to fit `px` pixels at `size`, with an ellipsis.
local function fit_text(text, px, size)
  text = tostring(text)
  if text_width(text, size) <= px then return text end
  local keep = math.max(1, math.floor(px / (size * 0.6)) - 1)
  local cut = utf8.offset(text, keep + 1)
  return (cut and text:sub(1, cut - 1) or text) .. "…"
end

-- A dashed horizontal line at value v of the y axis, labelled, for a threshold.
local function threshold_line(out, box, yaxis, v, label)
  local y = yaxis.map(v)
  out[#out + 1] = string.format('<line class="threshold" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444444" ' ..
    'stroke-width="1.5" stroke-dasharray="6 4"/>', num(box.x0), num(y), num(box.x1), num(y))
  if label then
    out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="end" font-size="11" fill="#444444" %s>%s</text>',
      num(box.x1 - 4), num(y - 4), FONT, svg.escape(label))
  end
end

-- "Nice" linear ticks covering [lo, hi]: steps of 1, 2 or 5 × 10^k, about `want` of them. An
-- integer axis (counts, sizes, blocks) never gets a step below 1: no tick between two integers.
local function linear_ticks(lo, hi, want, integer)
  if hi <= lo then hi = lo + ((lo == 0 or integer) and 1 or math.abs(lo) * 0.1) end
  local raw = (hi - lo) / (want or 5)
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if raw <= m * mag * 1.0000001 then step = m * mag break end
  end
  if integer and step < 1 then step = 1 end
  local first = math.floor(lo / step + 1e-9) * step
  local last = math.ceil(hi / step - 1e-9) * step
  local ticks = {}
  for i = 0, math.floor((last - first) / step + 0.5) do
    local v = first + i * step
    if math.abs(v) < step * 1e-9 then v = 0 end
    ticks[#ticks + 1] = v
  end
  return ticks, first, last
end

-- Powers of ten covering [lo, hi] (lo > 0), with 2 and 5 in between when the span is short.
local function log_ticks(lo, hi)
  local e0, e1 = math.floor(math.log(lo, 10) + 1e-9), math.ceil(math.log(hi, 10) - 1e-9)
  if e1 <= e0 then e1 = e0 + 1 end
  local ticks = {}
  for e = e0, e1 do
    ticks[#ticks + 1] = 10 ^ e
    if e1 - e0 <= 2 and e < e1 then
      ticks[#ticks + 1] = 2 * 10 ^ e
      ticks[#ticks + 1] = 5 * 10 ^ e
    end
  end
  return ticks, 10 ^ e0, 10 ^ e1
end

-- An axis maps data values to pixels; log axes map log10(v).
local function make_axis(lo, hi, log, p0, p1, want, integer)
  local ticks, a, b
  if log then ticks, a, b = log_ticks(lo, hi) else ticks, a, b = linear_ticks(lo, hi, want, integer) end
  local f = log and function(v) return math.log(v, 10) end or function(v) return v end
  local fa, fb = f(a), f(b)
  return {
    ticks = ticks,
    map = function(v) return p0 + (f(v) - fa) / (fb - fa) * (p1 - p0) end,
  }
end

local function check_spec(spec, fn, list_field)
  if type(spec) ~= "table" then error(string.format("svg.%s: expected a table, got %s", fn, type(spec)), 3) end
  if list_field and type(spec[list_field]) ~= "table" then
    error(string.format("svg.%s: field '%s' must be a table", fn, list_field), 3)
  end
end

-- spec.width or spec.height in whole pixels (the header writes them with %d), or the default.
local function size(spec, fn, field, default)
  local v = spec[field]
  if v == nil then return default end
  if not finite(v) or v < 100 or v > 100000 then
    error(string.format("svg.%s: field '%s' must be a number of pixels from 100 to 100000, got %s", fn, field,
      tostring(v)), 3)
  end
  return math.floor(v + 0.5)
end

local function header(out, w, h, title)
  out[#out + 1] = string.format('<?xml version="1.0" encoding="UTF-8"?>\n' ..
    '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">', w, h, w, h)
  out[#out + 1] = string.format('<rect x="0" y="0" width="%d" height="%d" fill="white"/>', w, h)
  if title then
    out[#out + 1] = string.format('<text x="%d" y="22" text-anchor="middle" font-size="16" %s>%s</text>',
      w // 2, FONT, svg.escape(title))
  end
end

local function axis_labels(out, box, x_label, y_label)
  if x_label then
    out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="middle" font-size="13" %s>%s</text>',
      num((box.x0 + box.x1) / 2), num(box.y0 + 40), FONT, svg.escape(x_label))
  end
  if y_label then
    local x, y = 16, (box.y0 + box.y1) / 2
    out[#out + 1] = string.format(
      '<text x="%s" y="%s" text-anchor="middle" font-size="13" transform="rotate(-90 %s %s)" %s>%s</text>',
      num(x), num(y), num(x), num(y), FONT, svg.escape(y_label))
  end
end

-- Draws the frame, grid and tick labels of a plot box (y0 is the bottom edge in pixels).
local function frame(out, box, xaxis, yaxis)
  out[#out + 1] = '<g stroke="#dddddd" stroke-width="1">'
  for _, t in ipairs(yaxis.ticks) do
    local y = yaxis.map(t)
    out[#out + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', num(box.x0), num(y), num(box.x1), num(y))
  end
  if xaxis then
    for _, t in ipairs(xaxis.ticks) do
      local x = xaxis.map(t)
      out[#out + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', num(x), num(box.y0), num(x), num(box.y1))
    end
  end
  out[#out + 1] = "</g>"
  out[#out + 1] = string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="black"/>',
    num(box.x0), num(box.y1), num(box.x1 - box.x0), num(box.y0 - box.y1))
  out[#out + 1] = string.format('<g font-size="11" %s>', FONT)
  for _, t in ipairs(yaxis.ticks) do
    out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="end">%s</text>',
      num(box.x0 - 5), num(yaxis.map(t) + 4), svg.escape(tick_label(t)))
  end
  if xaxis then
    for _, t in ipairs(xaxis.ticks) do
      out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="middle">%s</text>',
        num(xaxis.map(t)), num(box.y0 + 16), svg.escape(tick_label(t)))
    end
  end
  out[#out + 1] = "</g>"
end

-- The series legend right of the plot: each name cut to the space there (the full name in a
-- tooltip), one row per series, 18 px apart so no two overlap.
local function legend(out, box, names, width)
  if #names == 0 then return end
  local y = box.y1 + 8
  local room = (width or (box.x1 + 170)) - (box.x1 + 30) - 4
  out[#out + 1] = string.format('<g class="legend" font-size="12" %s>', FONT)
  for i, name in ipairs(names) do
    local ly = y + (i - 1) * 18
    local color = palette[(i - 1) % #palette + 1]
    out[#out + 1] = string.format('<rect x="%s" y="%s" width="12" height="12" fill="%s"/>',
      num(box.x1 + 12), num(ly), color)
    out[#out + 1] = string.format('<text x="%s" y="%s"><title>%s</title>%s</text>', num(box.x1 + 30), num(ly + 10),
      svg.escape(name), svg.escape(fit_text(name, room, 12)))
  end
  out[#out + 1] = "</g>"
end

-- Data range of the drawable values; nil when there are none.
local function range(values)
  local lo, hi
  for _, v in ipairs(values) do
    if not lo or v < lo then lo = v end
    if not hi or v > hi then hi = v end
  end
  return lo, hi
end

-- Error bars (a vertical line with caps) or a band (a polygon through the upper ends and back
-- along the lower ends) for the points of a series that carry an interval.
local function interval_marks(out, s, xaxis, yaxis, color)
  local with = {}
  for _, p in ipairs(s.points) do if p.lo then with[#with + 1] = p end end
  if #with == 0 then return end
  if s.band and #with > 1 then
    local c = {}
    for _, p in ipairs(with) do c[#c + 1] = num(xaxis.map(p[1])) .. "," .. num(yaxis.map(p.hi)) end
    for i = #with, 1, -1 do c[#c + 1] = num(xaxis.map(with[i][1])) .. "," .. num(yaxis.map(with[i].lo)) end
    out[#out + 1] = string.format('<polygon class="band" fill="%s" fill-opacity="0.2" stroke="none" points="%s"/>',
      color, table.concat(c, " "))
    return
  end
  out[#out + 1] = string.format('<g class="errorbars" stroke="%s" stroke-width="1.5">', color)
  for _, p in ipairs(with) do
    local x, y0, y1 = xaxis.map(p[1]), yaxis.map(p.lo), yaxis.map(p.hi)
    out[#out + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', num(x), num(y0), num(x), num(y1))
    out[#out + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', num(x - 4), num(y0), num(x + 4), num(y0))
    out[#out + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', num(x - 4), num(y1), num(x + 4), num(y1))
  end
  out[#out + 1] = "</g>"
end

-- svg.lines{title=, x_label=, y_label=, log_x=, log_y=, width=, height=,
--           series={ {name=, band=, points={{x,y, lo=, hi=},...}}, ... }}
-- A point's lo/hi (its interval, e.g. a 95% interval) draws an error bar; with band=true the
-- series' intervals draw a shaded band along the line instead.
function svg.lines(spec)
  check_spec(spec, "lines", "series")
  local w = size(spec, "lines", "width", 760)
  local h = size(spec, "lines", "height", math.max(440, 40 + 18 * #spec.series + 70))
  local box = { x0 = 70, x1 = w - 170, y1 = 40, y0 = h - 55 }
  local xs, ys, series = {}, {}, {}
  for si, s in ipairs(spec.series) do
    if type(s) ~= "table" or type(s.points) ~= "table" then
      error(string.format("svg.lines: series[%d] must be a table with 'points'", si), 2)
    end
    local pts = {}
    for pi, p in ipairs(s.points) do
      if type(p) ~= "table" then error(string.format("svg.lines: series[%d].points[%d] must be {x, y}", si, pi), 2) end
      local x, y = p[1] or p.x, p[2] or p.y
      local ok = finite(x) and finite(y) and (not spec.log_x or x > 0) and (not spec.log_y or y > 0)
      if ok then
        local lo, hi = p.lo, p.hi
        -- an interval is drawn only when both ends are drawable and hold the point
        local drawable = finite(lo) and finite(hi) and lo <= y and y <= hi and (not spec.log_y or lo > 0)
        if not drawable then lo, hi = nil, nil end
        pts[#pts + 1] = { x, y, lo = lo, hi = hi }
        xs[#xs + 1], ys[#ys + 1] = x, y
        if lo then ys[#ys + 1], ys[#ys + 2] = lo, hi end
      end
    end
    series[#series + 1] = { name = s.name or ("series " .. si), points = pts, band = s.band }
  end
  local xlo, xhi = range(xs)
  local ylo, yhi = range(ys)
  if not xlo then -- nothing drawable: an empty frame over a unit range
    xlo, xhi = (spec.log_x and 1 or 0), (spec.log_x and 10 or 1)
    ylo, yhi = (spec.log_y and 1 or 0), (spec.log_y and 10 or 1)
  end
  local threshold = finite(spec.threshold) and (not spec.log_y or spec.threshold > 0) and spec.threshold or nil
  if threshold then
    ylo, yhi = math.min(ylo, threshold), math.max(yhi, threshold)
    local pad = (yhi - ylo) * 0.15
    if pad == 0 then pad = math.abs(threshold) * 0.02 + 1e-9 end
    if not spec.log_y then ylo, yhi = ylo - pad, yhi + pad end
  elseif not spec.log_y and ylo > 0 and spec.y_from_zero ~= false then
    -- a linear y axis starts at zero for non-negative data, unless a threshold or y_from_zero=false
    -- asks for the axis around the data (where 1-2% differences show)
    ylo = 0
  end
  local xaxis = make_axis(xlo, xhi, spec.log_x, box.x0, box.x1, 6, not spec.log_x and all_integers(xs))
  local yaxis = make_axis(ylo, yhi, spec.log_y, box.y0, box.y1, 5, not spec.log_y and all_integers(ys))
  local out = {}
  header(out, w, h, spec.title)
  frame(out, box, xaxis, yaxis)
  axis_labels(out, box, spec.x_label, spec.y_label)
  if threshold then threshold_line(out, box, yaxis, threshold, spec.threshold_label) end
  local names = {}
  for i, s in ipairs(series) do
    local color = palette[(i - 1) % #palette + 1]
    local coords = {}
    for _, p in ipairs(s.points) do coords[#coords + 1] = num(xaxis.map(p[1])) .. "," .. num(yaxis.map(p[2])) end
    interval_marks(out, s, xaxis, yaxis, color)
    if #coords > 1 then
      out[#out + 1] = string.format('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>',
        color, table.concat(coords, " "))
    end
    for _, c in ipairs(coords) do
      local x, y = c:match("([^,]+),(.+)")
      out[#out + 1] = string.format('<circle cx="%s" cy="%s" r="3" fill="%s"/>', x, y, color)
    end
    names[#names + 1] = s.name
  end
  legend(out, box, names, w)
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- svg.bars{title=, y_label=, width=, height=, bars={ {label=, value=, lo=, hi=}, ... }}
-- lo/hi (the value's interval) draw an error bar on the bar.
function svg.bars(spec)
  check_spec(spec, "bars", "bars")
  local n = #spec.bars
  local w = size(spec, "bars", "width", math.max(420, 110 + 70 * n))
  local slot_guess = (w - 90) / math.max(n, 1)
  -- category labels wider than their slot are turned 40 degrees; the picture grows to hold them
  local widest = 0
  for i, b in ipairs(spec.bars) do
    if type(b) == "table" then widest = math.max(widest, text_width(b.label or ("#" .. i), 11)) end
  end
  local turn = widest > slot_guess * 0.9
  local below = turn and math.floor(math.min(200, widest * 0.65 + 30)) or 0
  local h = size(spec, "bars", "height", 420 + below)
  local box = { x0 = 70, x1 = w - 20, y1 = 40, y0 = h - 70 - below }
  local values = {}
  for i, b in ipairs(spec.bars) do
    if type(b) ~= "table" then error(string.format("svg.bars: bars[%d] must be {label=, value=}", i), 2) end
    if finite(b.value) then
      values[#values + 1] = b.value
      if finite(b.lo) and finite(b.hi) and b.lo <= b.value and b.value <= b.hi then
        values[#values + 1], values[#values + 2] = b.lo, b.hi
      end
    end
  end
  local lo, hi = range(values)
  local threshold = finite(spec.threshold) and spec.threshold or nil
  local around = threshold or spec.y_from_zero == false
  if around and lo then
    -- scaled around the data and the threshold: the bars start at the axis' bottom edge
    if threshold then lo, hi = math.min(lo, threshold), math.max(hi, threshold) end
    local pad = (hi - lo) * 0.15
    if pad == 0 then pad = math.abs(hi) * 0.02 + 1e-9 end
    lo, hi = lo - pad, hi + pad
  else
    lo, hi = math.min(lo or 0, 0), math.max(hi or 1, 0)
  end
  local yaxis = make_axis(lo, hi, false, box.y0, box.y1, 5, all_integers(values) and not around)
  local out = {}
  header(out, w, h, spec.title)
  frame(out, box, nil, yaxis)
  axis_labels(out, box, nil, spec.y_label)
  if threshold then threshold_line(out, box, yaxis, threshold, spec.threshold_label) end
  local slot = (box.x1 - box.x0) / math.max(n, 1)
  local zero = around and box.y0 or yaxis.map(0)
  out[#out + 1] = string.format('<g font-size="11" %s>', FONT)
  for i, b in ipairs(spec.bars) do
    local cx = box.x0 + (i - 0.5) * slot
    local color = palette[(i - 1) % #palette + 1]
    if finite(b.value) then
      local y = yaxis.map(b.value)
      out[#out + 1] = string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>',
        num(cx - slot * 0.35), num(math.min(y, zero)), num(slot * 0.7), num(math.abs(zero - y)), color)
      -- the value sits at the bar's far end: above a positive bar, below a negative one
      local ty = b.value >= 0 and math.min(y, zero) - 4 or math.max(y, zero) + 12
      if finite(b.lo) and finite(b.hi) and b.lo <= b.value and b.value <= b.hi then
        local y0, y1 = yaxis.map(b.lo), yaxis.map(b.hi)
        out[#out + 1] = string.format('<g class="errorbars" stroke="black" stroke-width="1.5"><line x1="%s" y1="%s" ' ..
          'x2="%s" y2="%s"/><line x1="%s" y1="%s" x2="%s" y2="%s"/><line x1="%s" y1="%s" x2="%s" y2="%s"/></g>',
          num(cx), num(y0), num(cx), num(y1), num(cx - 6), num(y0), num(cx + 6), num(y0), num(cx - 6), num(y1),
          num(cx + 6), num(y1))
        ty = b.value >= 0 and math.min(y1, zero) - 4 or math.max(y0, zero) + 12
      end
      out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="middle">%s</text>',
        num(cx), num(ty), svg.escape(fit_text(tick_label(b.value), slot, 11)))
    end
    local label = b.label or ("#" .. i)
    if turn then
      out[#out + 1] = string.format(
        '<text x="%s" y="%s" text-anchor="end" transform="rotate(-40 %s %s)">%s</text>', num(cx), num(box.y0 + 14),
        num(cx), num(box.y0 + 14), svg.escape(fit_text(label, 300, 11)))
    else
      out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="middle">%s</text>',
        num(cx), num(box.y0 + 16), svg.escape(label))
    end
  end
  out[#out + 1] = "</g>"
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- svg.timeline{title=, x_label=, width=, rows={ {label=, spans={ {t0, t1, label=?, kind=?}, ... }}, ... }}
-- One horizontal lane per row; each span a bar from t0 to t1. A colour means one kind of span:
-- its `kind` (else its label), named in a legend under the axis. When there would be more kinds
-- than colours, every span gets one colour and no legend (repeated colours would mean nothing);
-- a span's label is its tooltip either way.
function svg.timeline(spec)
  check_spec(spec, "timeline", "rows")
  local nrows = #spec.rows
  local lane = nrows > 60 and 6 or (nrows > 24 and 10 or 18)
  local w = size(spec, "timeline", "width", 900)
  local box = { x0 = 90, x1 = w - 20, y1 = 40 }
  box.y0 = box.y1 + math.max(nrows, 1) * lane
  local h = box.y0 + 55
  local ts = {}
  for ri, r in ipairs(spec.rows) do
    if type(r) ~= "table" or type(r.spans) ~= "table" then
      error(string.format("svg.timeline: rows[%d] must be a table with 'spans'", ri), 2)
    end
    for si, s in ipairs(r.spans) do
      if type(s) ~= "table" then
        error(string.format("svg.timeline: rows[%d].spans[%d] must be {t0, t1}", ri, si), 2)
      end
      if finite(s[1]) and finite(s[2]) then ts[#ts + 1], ts[#ts + 2] = s[1], s[2] end
    end
  end
  local lo, hi = range(ts)
  if not lo then lo, hi = 0, 1 end
  local keys, order = {}, {}
  for _, r in ipairs(spec.rows) do
    for _, sp in ipairs(r.spans) do
      local key = sp.kind or sp.label
      if key ~= nil and not keys[tostring(key)] then
        keys[tostring(key)] = true
        order[#order + 1] = tostring(key)
      end
    end
  end
  local coloured = #order > 0 and #order <= #palette
  local colors = {}
  for i, key in ipairs(order) do colors[key] = coloured and palette[i] or palette[1] end
  local legend_rows = coloured and math.ceil(#order / 4) or 0
  h = h + legend_rows * 18 + (coloured and 12 or 0)
  local xaxis = make_axis(lo, hi, false, box.x0, box.x1, 8, all_integers(ts))
  local out = {}
  header(out, w, h, spec.title)
  -- the frame without y ticks: lanes carry their own labels
  frame(out, box, xaxis, { ticks = {}, map = function() return 0 end })
  axis_labels(out, box, spec.x_label, nil)
  local label_every = math.max(1, math.ceil(12 / lane))
  out[#out + 1] = string.format('<g font-size="%d" %s>', math.min(11, lane), FONT)
  for ri, r in ipairs(spec.rows) do
    local y = box.y1 + (ri - 1) * lane
    if (ri - 1) % label_every == 0 then
      out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="end">%s</text>',
        num(box.x0 - 5), num(y + lane * 0.5 + 4), svg.escape(r.label or ("row " .. ri)))
    end
    for _, s in ipairs(r.spans) do
      if finite(s[1]) and finite(s[2]) then
        local key = s.kind or s.label
        local color = key ~= nil and colors[tostring(key)] or palette[1]
        local x0, x1 = xaxis.map(math.min(s[1], s[2])), xaxis.map(math.max(s[1], s[2]))
        local title = s.label and ("<title>" .. svg.escape(s.label) .. "</title>") or ""
        out[#out + 1] = string.format(
          '<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.75">%s</rect>',
          num(x0), num(y + 1), num(math.max(x1 - x0, 0.5)), num(lane - 2), color, title)
      end
    end
  end
  out[#out + 1] = "</g>"
  if coloured then
    -- four kinds per row under the x axis label, each in its own quarter of the width
    local cell = (box.x1 - box.x0) / 4
    out[#out + 1] = string.format('<g class="legend" font-size="12" %s>', FONT)
    for i, key in ipairs(order) do
      local lx = box.x0 + ((i - 1) % 4) * cell
      local ly = box.y0 + 50 + ((i - 1) // 4) * 18
      out[#out + 1] = string.format('<rect x="%s" y="%s" width="12" height="12" fill="%s"/>', num(lx), num(ly),
        colors[key])
      local shown = fit_text(key, cell - 22, 12)
      out[#out + 1] = string.format('<text x="%s" y="%s">%s%s</text>', num(lx + 16), num(ly + 10),
        shown ~= key and ("<title>" .. svg.escape(key) .. "</title>") or "", svg.escape(shown))
    end
    out[#out + 1] = "</g>"
  end
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- svg.ratio{title=, x_label=, threshold=1, margin=0.01, width=, items={ {label=, value=, lo=, hi=}, ... }}
-- Ratios with their intervals on an axis scaled around the threshold: the band threshold ×
-- (1 ± margin) shaded, the threshold dashed, one row per item. An interval wholly below the band
-- is drawn green, wholly above red, touching it grey (as lab:compare decides: faster, slower,
-- same or unclear), so a 1-2% difference fills the picture instead of a sliver of a 0-based axis.
function svg.ratio(spec)
  check_spec(spec, "ratio", "items")
  local t = finite(spec.threshold) and spec.threshold or 1
  local m = finite(spec.margin) and spec.margin >= 0 and spec.margin or 0.01
  local n = #spec.items
  local w = size(spec, "ratio", "width", 640)
  local lane = 26
  local widest = 0
  for i, it in ipairs(spec.items) do
    if type(it) ~= "table" then
      error(string.format("svg.ratio: items[%d] must be {label=, value=, lo=, hi=}", i), 2)
    end
    widest = math.max(widest, text_width(it.label or ("#" .. i), 11))
  end
  local box = { x0 = math.min(220, math.max(70, widest + 16)), x1 = w - 20, y1 = 40 }
  box.y0 = box.y1 + math.max(n, 1) * lane + 10
  local h = box.y0 + 80
  local vals = { t * (1 - m), t * (1 + m) }
  for _, it in ipairs(spec.items) do
    for _, v in ipairs { it.value, it.lo, it.hi } do if finite(v) then vals[#vals + 1] = v end end
  end
  local lo, hi = range(vals)
  local pad = (hi - lo) * 0.15
  if pad == 0 then pad = math.abs(t) * 0.01 + 1e-9 end
  local xaxis = make_axis(lo - pad, hi + pad, false, box.x0, box.x1, 6)
  local out = {}
  header(out, w, h, spec.title)
  frame(out, box, xaxis, { ticks = {}, map = function() return 0 end })
  axis_labels(out, box, spec.x_label or "ratio", nil)
  local b0, b1 = xaxis.map(t * (1 - m)), xaxis.map(t * (1 + m))
  out[#out + 1] = string.format('<rect class="band" x="%s" y="%s" width="%s" height="%s" fill="#999999" ' ..
    'fill-opacity="0.2"/>', num(b0), num(box.y1), num(math.max(b1 - b0, 0.5)), num(box.y0 - box.y1))
  local tx = xaxis.map(t)
  out[#out + 1] = string.format('<line class="threshold" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444444" ' ..
    'stroke-dasharray="6 4" stroke-width="1.5"/>', num(tx), num(box.y1), num(tx), num(box.y0))
  out[#out + 1] = string.format('<g font-size="11" %s>', FONT)
  for i, it in ipairs(spec.items) do
    local y = box.y1 + (i - 0.5) * lane + 5
    out[#out + 1] = string.format('<text x="%s" y="%s" text-anchor="end"><title>%s</title>%s</text>',
      num(box.x0 - 6), num(y + 4), svg.escape(it.label or ("#" .. i)),
      svg.escape(fit_text(it.label or ("#" .. i), box.x0 - 12, 11)))
    if finite(it.value) then
      local ilo = finite(it.lo) and it.lo or it.value
      local ihi = finite(it.hi) and it.hi or it.value
      local color = ihi < t * (1 - m) and "#2ca02c" or (ilo > t * (1 + m) and "#d62728" or "#7f7f7f")
      local x0, x1 = xaxis.map(ilo), xaxis.map(ihi)
      out[#out + 1] = string.format('<g stroke="%s" stroke-width="2"><line x1="%s" y1="%s" x2="%s" y2="%s"/>' ..
        '<line x1="%s" y1="%s" x2="%s" y2="%s"/><line x1="%s" y1="%s" x2="%s" y2="%s"/></g>', color,
        num(x0), num(y), num(x1), num(y), num(x0), num(y - 5), num(x0), num(y + 5), num(x1), num(y - 5), num(x1),
        num(y + 5))
      out[#out + 1] = string.format('<circle cx="%s" cy="%s" r="4" fill="%s"/>', num(xaxis.map(it.value)), num(y),
        color)
    end
  end
  out[#out + 1] = "</g>"
  out[#out + 1] = string.format('<g class="legend" font-size="12" %s>', FONT)
  local ly = box.y0 + 52
  out[#out + 1] = string.format('<rect x="%s" y="%s" width="12" height="12" fill="#999999" fill-opacity="0.4"/>' ..
    '<text x="%s" y="%s">%s</text>', num(box.x0), num(ly), num(box.x0 + 16), num(ly + 10),
    svg.escape(string.format("%s ± %s%%", tick_label(t), tick_label(m * 100))))
  local keys = { { "#2ca02c", "below" }, { "#d62728", "above" }, { "#7f7f7f", "touching the band" } }
  for k, c in ipairs(keys) do
    local lx = box.x0 + 130 + (k - 1) * 110
    out[#out + 1] = string.format('<rect x="%s" y="%s" width="12" height="12" fill="%s"/><text x="%s" y="%s">%s</text>',
      num(lx), num(ly), c[1], num(lx + 16), num(ly + 10), c[2])
  end
  out[#out + 1] = "</g>"
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- Writes text to path; raises "svg.write: <path>: <reason>" on failure.
function svg.write(path, text)
  local ok, why = output.write(path, text) -- a failure puts the earlier picture back
  if not ok then error("svg.write: " .. path .. ": " .. tostring(why), 2) end
  return path
end

return svg
