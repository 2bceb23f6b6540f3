-- gpulab.svg: every chart kind is well-formed XML (checked by a small XML 1.0 well-formedness
-- reader below: no xmllint needed), escapes its labels, skips values it cannot draw, and puts
-- the data where the axes say.
local T = dofile("tests/lua/t.lua")
local svg = require("gpulab.svg")

-- ---- a minimal XML well-formedness check ---------------------------------------------------
-- Returns the root element {name=, attrs=, children=} or raises "xml: <what> at byte N".
local NAME = "[%a_:][%w_:%.%-]*"

local function xml_fail(pos, what) error(string.format("xml: %s at byte %d", what, pos), 0) end

local function check_text(pos, text)
  -- '&' only as a reference, never a raw '<'
  local i = 1
  while true do
    local a = text:find("&", i, true)
    if not a then break end
    local ref = text:match("^&(#?[%w]+);", a)
    if not ref then xml_fail(pos + a - 1, "bare '&'") end
    if not (ref == "amp" or ref == "lt" or ref == "gt" or ref == "quot" or ref == "apos" or
        ref:match("^#%d+$") or ref:match("^#x%x+$")) then
      xml_fail(pos + a - 1, "unknown entity &" .. ref .. ";")
    end
    i = a + 1
  end
  if text:find("<", 1, true) then xml_fail(pos, "'<' in text or attribute") end
  if text:find("[%z\1-\8\11\12\14-\31]") then xml_fail(pos, "control character") end
end

local function parse_xml(s)
  local pos = 1
  if s:sub(1, 5) == "<?xml" then
    local e = s:find("?>", 1, true)
    if not e then xml_fail(1, "unterminated XML declaration") end
    pos = e + 2
  end
  local root, stack = nil, {}
  while pos <= #s do
    local lt = s:find("<", pos, true)
    local text = s:sub(pos, (lt or #s + 1) - 1)
    check_text(pos, text)
    if #stack == 0 and text:find("%S") then xml_fail(pos, "text outside the root element") end
    if #stack > 0 then table.insert(stack[#stack].children, text) end
    if not lt then break end
    pos = lt
    if s:sub(pos, pos + 3) == "<!--" then
      local e = s:find("-->", pos + 4, true)
      if not e then xml_fail(pos, "unterminated comment") end
      pos = e + 3
    elseif s:sub(pos, pos + 1) == "</" then
      local name, e = s:match("^</(" .. NAME .. ")%s*>()", pos)
      if not name then xml_fail(pos, "bad end tag") end
      local open = table.remove(stack)
      if not open or open.name ~= name then xml_fail(pos, "end tag </" .. name .. "> does not match") end
      pos = e
    else
      local name, p = s:match("^<(" .. NAME .. ")()", pos)
      if not name then xml_fail(pos, "bad start tag") end
      local el = { name = name, attrs = {}, children = {} }
      while true do
        local ws, p2 = s:match("^(%s*)()", p)
        p = p2
        if s:sub(p, p + 1) == "/>" then p = p + 2 el.empty = true break end
        if s:sub(p, p) == ">" then p = p + 1 break end
        if #ws == 0 then xml_fail(p, "attributes must be separated by space") end
        local an, q, p3 = s:match("^(" .. NAME .. ")%s*=%s*([\"'])()", p)
        if not an then xml_fail(p, "bad attribute in <" .. name .. ">") end
        local close = s:find(q, p3, true)
        if not close then xml_fail(p, "unterminated attribute value") end
        local value = s:sub(p3, close - 1)
        check_text(p3, value)
        if el.attrs[an] then xml_fail(p, "duplicate attribute " .. an) end
        el.attrs[an] = value
        p = close + 1
      end
      pos = p
      if #stack == 0 then
        if root then xml_fail(pos, "a second root element") end
        root = el
      else
        table.insert(stack[#stack].children, el)
      end
      if not el.empty then stack[#stack + 1] = el end
    end
  end
  if #stack > 0 then xml_fail(#s, "unclosed <" .. stack[#stack].name .. ">") end
  if not root then xml_fail(1, "no root element") end
  return root
end

-- Every element named `name` under el, depth first.
local function find_all(el, name, out)
  out = out or {}
  if el.name == name then out[#out + 1] = el end
  for _, c in ipairs(el.children) do
    if type(c) == "table" then find_all(c, name, out) end
  end
  return out
end

local function text_of(el)
  local parts = {}
  for _, c in ipairs(el.children) do parts[#parts + 1] = type(c) == "string" and c or text_of(c) end
  return table.concat(parts)
end

local function unescape(s)
  return (s:gsub("&(#?%w+);", { lt = "<", gt = ">", amp = "&", quot = '"', apos = "'" }))
end

-- Checks what every chart must satisfy and returns the root.
local function check_svg(text, what)
  local ok, root = pcall(parse_xml, text)
  if not ok then error(what .. ": not well-formed: " .. root, 2) end
  T.eq(root.name, "svg", what)
  T.eq(root.attrs.xmlns, "http://www.w3.org/2000/svg", what)
  T.ok(tonumber(root.attrs.width) > 0 and tonumber(root.attrs.height) > 0, what .. ": size")
  -- every number in a geometric attribute is finite
  for _, tag in ipairs({ "rect", "line", "circle", "text", "polyline", "polygon" }) do
    for _, el in ipairs(find_all(root, tag)) do
      for k, v in pairs(el.attrs) do
        if k:match("^[xy]%d?$") or k:match("^c[xy]$") or k == "width" or k == "height" or k == "points" then
          T.ok(not v:lower():find("nan") and not v:lower():find("inf"), what .. ": " .. tag .. " " .. k .. "=" .. v)
          for n in v:gmatch("[^%s,]+") do T.ok(tonumber(n), what .. ": " .. tag .. " " .. k .. "=" .. v) end
        end
      end
    end
  end
  return root
end

-- ---- the checker itself must catch broken XML -----------------------------------------------
T.test("the well-formedness check refuses broken documents", function()
  local bad = {
    "<svg><g></svg>", "<svg>a & b</svg>", "<svg x=1/>", "<svg x='1' x='2'/>", "<svg/><svg/>",
    "text<svg/>", "<svg><text>a < b</text></svg>", "<svg a=\"<\"/>", "<svg>&nbsp;</svg>", "<svg>\1</svg>",
    "<svg", "<svg><!-- open </svg>", "", "<svg x=\"1\"y=\"2\"/>",
  }
  for _, doc in ipairs(bad) do
    T.ok(not pcall(parse_xml, doc), "accepted: " .. doc)
  end
  local root = parse_xml('<?xml version="1.0"?>\n<svg a="x &amp; &#60;"><!-- c --><g><t>x&lt;y</t></g></svg>\n')
  T.eq(root.attrs.a, "x &amp; &#60;")
  T.eq(unescape(text_of(root)), "x<y")
end)

local nasty = [[<script>&"quoted"' & µs ]] .. "\1\27"

T.test("line chart: well-formed, escaped, a polyline per series, legend", function()
  local text = svg.lines{ title = nasty, x_label = "size <bytes>", y_label = "GB/s & more",
    series = { { name = "a&b", points = { { 1, 2 }, { 2, 4 }, { 3, 3 } } },
               { name = "<gaps>", points = { { 1, 1 }, { 2, 0 / 0 }, { 3, math.huge }, { 4, 2 } } } } }
  local root = check_svg(text, "lines")
  local texts = {}
  for _, t in ipairs(find_all(root, "text")) do texts[#texts + 1] = unescape(text_of(t)) end
  local all = table.concat(texts, "\n")
  T.ok(all:find('<script>&"quoted"\' & µs', 1, true), all)
  T.ok(all:find("size <bytes>", 1, true) and all:find("GB/s & more", 1, true), all)
  T.ok(all:find("a&b", 1, true) and all:find("<gaps>", 1, true), "legend: " .. all)
  T.ok(not text:find("\27", 1, true), "control character kept")
  local lines = find_all(root, "polyline")
  T.eq(#lines, 2)
  local n2 = select(2, lines[2].attrs.points:gsub(",", ""))
  T.eq(n2, 2) -- NaN and inf points are skipped
  T.eq(#find_all(root, "circle"), 5)
end)

T.test("labels that are not valid UTF-8 (a string cut inside a character) still give valid UTF-8", function()
  local cut = ("GB µs"):sub(1, 4) -- ends inside the two bytes of µ
  local text = svg.lines{ title = cut, x_label = "\xFF\xFE", y_label = "ok",
    series = { { name = "\xC3(", points = { { 1, 1 }, { 2, 2 } } } } }
  T.ok(utf8.len(text) ~= nil, "the file is valid UTF-8")
  check_svg(text, "invalid UTF-8 labels")
  T.ok(text:find("GB \u{FFFD}", 1, true), "the cut character became U+FFFD")
end)

T.test("line chart: points land where the ticks say (linear and log x)", function()
  for _, log in ipairs({ false, true }) do
    local spec = { log_x = log, series = { { name = "s", points = { { 10, 50 }, { 1000, 100 } } } } }
    local root = check_svg(svg.lines(spec), "axes")
    -- map a value to pixels through the tick labels, then compare with the drawn circles
    local xt, yt = {}, {}
    for _, t in ipairs(find_all(root, "text")) do
      local v = tonumber(text_of(t))
      if v and t.attrs["text-anchor"] == "middle" then xt[#xt + 1] = { v, tonumber(t.attrs.x) } end
      if v and t.attrs["text-anchor"] == "end" then yt[#yt + 1] = { v, tonumber(t.attrs.y) - 4 } end
    end
    T.ok(#xt >= 2 and #yt >= 2, "ticks")
    local function px(ticks, v, logscale)
      local a, b = ticks[1], ticks[#ticks]
      local f = logscale and function(u) return math.log(u, 10) end or function(u) return u end
      return a[2] + (f(v) - f(a[1])) / (f(b[1]) - f(a[1])) * (b[2] - a[2])
    end
    local c = find_all(root, "circle")
    T.near(tonumber(c[1].attrs.cx), px(xt, 10, log), 0.6, "x of the first point")
    T.near(tonumber(c[2].attrs.cx), px(xt, 1000, log), 0.6, "x of the second point")
    T.near(tonumber(c[2].attrs.cy), px(yt, 100, false), 0.6, "y of the second point")
    -- the linear y axis starts at 0 for positive data
    T.eq(yt[1][1], 0)
  end
end)

T.test("line chart: empty, single point, constant and negative data stay drawable", function()
  check_svg(svg.lines{ series = {} }, "no series")
  check_svg(svg.lines{ series = { { name = "e", points = {} } } }, "empty series")
  check_svg(svg.lines{ series = { { points = { { 5, 5 } } } } }, "one point")
  check_svg(svg.lines{ series = { { points = { { 1, 3 }, { 2, 3 } } } } }, "constant")
  check_svg(svg.lines{ series = { { points = { { -5, -1e9 }, { 5, 1e-9 } } } } }, "negative")
  check_svg(svg.lines{ log_x = true, series = { { points = { { 0, 1 }, { -1, 2 }, { 1e-3, 3 }, { 1e6, 4 } } } } },
    "log with zero")
  check_svg(svg.lines{ log_x = true, log_y = true, series = { { points = { { 0 / 0, 0 / 0 } } } } }, "only NaN")
  T.raises(function() svg.lines{} end, "svg.lines: field 'series' must be a table")
  T.raises(function() svg.lines{ series = { 5 } } end, "series[1] must be a table with 'points'")
  T.raises(function() svg.lines{ series = { { points = { 5 } } } } end, "series[1].points[1] must be {x, y}")
end)

T.test("bar chart: one bar per value, labels escaped, negatives below zero", function()
  local root = check_svg(svg.bars{ title = "bars", y_label = "ms",
    bars = { { label = "copy", value = 10 }, { label = "<tma>", value = 5 }, { label = "neg", value = -2.5 },
             { label = "nan", value = 0 / 0 } } }, "bars")
  local rects = find_all(root, "rect")
  -- background + frame + 3 drawable bars
  T.eq(#rects, 5)
  local bars = { rects[3], rects[4], rects[5] }
  T.near(tonumber(bars[2].attrs.height) * 2, tonumber(bars[1].attrs.height), 0.6, "5 is half of 10")
  local zero_y = tonumber(bars[1].attrs.y) + tonumber(bars[1].attrs.height)
  T.near(tonumber(bars[3].attrs.y), zero_y, 0.6, "a negative bar hangs from zero")
  local labels = {}
  for _, t in ipairs(find_all(root, "text")) do labels[text_of(t)] = tonumber(t.attrs.y) end
  T.ok(labels["10"] < tonumber(bars[1].attrs.y), "the value of a positive bar is above it")
  T.ok(labels["-2.5"] > zero_y + tonumber(bars[3].attrs.height), "the value of a negative bar is below it")
  local all = {}
  for _, t in ipairs(find_all(root, "text")) do all[#all + 1] = unescape(text_of(t)) end
  T.ok(table.concat(all, "|"):find("<tma>", 1, true))
  check_svg(svg.bars{ bars = {} }, "no bars")
  T.raises(function() svg.bars{ bars = { 1 } } end, "bars[1] must be {label=, value=}")
end)

-- The error-bar group of a chart: each bar is three lines (the whisker and its two caps).
local function error_bars(root)
  local out = {}
  for _, g in ipairs(find_all(root, "g")) do
    if g.attrs.class == "errorbars" then
      local lines = find_all(g, "line")
      for i = 1, #lines, 3 do out[#out + 1] = { lines[i], lines[i + 1], lines[i + 2] } end
    end
  end
  return out
end

T.test("intervals: error bars on points, a band on lines, error bars on bars", function()
  local root = check_svg(svg.lines{ title = "errors", series = {
    { name = "a", points = { { 1, 10, lo = 8, hi = 12 }, { 2, 20, lo = 19, hi = 21 }, { 3, 30 },
      { 4, 40, lo = 41, hi = 45 }, { 5, 50, lo = 0 / 0, hi = 51 } } },
    { name = "b", band = true, points = { { 1, 5, lo = 4, hi = 6 }, { 5, 5, lo = 4, hi = 6 } } } } }, "intervals")
  local bars = error_bars(root)
  -- two drawable intervals: a point without one, one not holding its point and a NaN bound are skipped
  T.eq(#bars, 2)
  local whisker = bars[1][1]
  T.eq(whisker.attrs.x1, whisker.attrs.x2, "vertical")
  -- the y axis maps 8..12 to a span twice as tall as 19..21's
  local h1 = math.abs(tonumber(whisker.attrs.y1) - tonumber(whisker.attrs.y2))
  local h2 = math.abs(tonumber(bars[2][1].attrs.y1) - tonumber(bars[2][1].attrs.y2))
  T.near(h1, 2 * h2, 0.05, "whisker lengths follow the data")
  -- the whisker ends on the caps, which are centred on it
  T.eq(bars[1][2].attrs.y1, whisker.attrs.y1)
  T.near((tonumber(bars[1][2].attrs.x1) + tonumber(bars[1][2].attrs.x2)) / 2, tonumber(whisker.attrs.x1), 0.01)
  local polygons = find_all(root, "polygon")
  T.eq(#polygons, 1)
  T.eq(polygons[1].attrs.class, "band")
  local n = 0
  for _ in polygons[1].attrs.points:gmatch("[^%s]+") do n = n + 1 end
  T.eq(n, 4, "the band goes out along the upper ends and back along the lower ones")
  -- the axis covers the intervals too: nothing lies outside the frame
  local frame
  for _, r in ipairs(find_all(root, "rect")) do if r.attrs.fill == "none" then frame = r end end
  local top = tonumber(frame.attrs.y)
  for _, b in ipairs(bars) do
    T.ok(math.min(tonumber(b[1].attrs.y1), tonumber(b[1].attrs.y2)) >= top - 0.01, "inside the frame")
  end
  -- bars
  root = check_svg(svg.bars{ bars = { { label = "x", value = 10, lo = 9, hi = 11 }, { label = "y", value = 5 },
    { label = "z", value = 4, lo = 5, hi = 6 } } }, "bar errors")
  bars = error_bars(root)
  T.eq(#bars, 1)
  local rects = find_all(root, "rect")
  local bar = rects[3]
  local cx = tonumber(bar.attrs.x) + tonumber(bar.attrs.width) / 2
  T.near(tonumber(bars[1][1].attrs.x1), cx, 0.01, "centred on its bar")
  T.ok(tonumber(bars[1][1].attrs.y1) > tonumber(bar.attrs.y) and tonumber(bars[1][1].attrs.y2) < tonumber(bar.attrs.y),
    "the whisker crosses the bar's top (its value)")
end)

T.test("timeline: one lane per row, spans sized by time, equal labels share a color", function()
  local rows = {}
  for sm = 1, 3 do
    rows[sm] = { label = "SM " .. (sm - 1), spans = { { 0, 10, label = "wave 1" }, { 10, 30, label = "wave 2" } } }
  end
  rows[4] = { label = "empty", spans = {} }
  rows[5] = { label = "bad", spans = { { 0 / 0, 1 }, { 5, 5 } } }
  local root = check_svg(svg.timeline{ title = "t", x_label = "µs", rows = rows }, "timeline")
  local spans = {}
  for _, r in ipairs(find_all(root, "rect")) do
    if r.attrs["fill-opacity"] then spans[#spans + 1] = r end
  end
  T.eq(#spans, 7) -- 3 rows × 2 spans + the zero-length one (drawn as a sliver); NaN skipped
  T.near(tonumber(spans[2].attrs.width), 2 * tonumber(spans[1].attrs.width), 0.6, "20 µs is twice 10 µs")
  T.eq(spans[1].attrs.fill, spans[3].attrs.fill)
  T.ok(spans[1].attrs.fill ~= spans[2].attrs.fill, "different labels, different colors")
  T.ok(tonumber(spans[3].attrs.y) > tonumber(spans[1].attrs.y), "second row below the first")
  T.eq(#find_all(root, "title"), 6)
  -- 132 rows (one per SM on an H200) stay compact and well-formed
  local many = {}
  for i = 1, 132 do many[i] = { label = "SM " .. i, spans = { { i, i + 5 } } } end
  local big = check_svg(svg.timeline{ rows = many }, "132 rows")
  T.ok(tonumber(big.attrs.height) < 1200, "height " .. big.attrs.height)
  T.raises(function() svg.timeline{ rows = { { label = "x" } } } end, "rows[1] must be a table with 'spans'")
end)

T.test("svg.write writes the text and names the path on failure", function()
  local path = os.tmpname()
  svg.write(path, "<svg/>")
  local f = assert(io.open(path))
  T.eq(f:read("a"), "<svg/>")
  f:close()
  os.remove(path)
  T.raises(function() svg.write("/nonexistent-dir/x.svg", "") end, "svg.write: /nonexistent-dir/x.svg")
end)

T.test("the demo lab's pictures are well-formed", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  local r = cuda.run_isolated("tests/lab_fixtures/demo_lab.lua", { args = { "--svg", dir .. "/" }, timeout = 60 })
  T.eq(r.status, "ok", r.stderr)
  for _, name in ipairs({ "sweep.svg", "bars.svg", "timeline.svg" }) do
    local f = assert(io.open(dir .. "/" .. name))
    local root = check_svg(f:read("a"), name)
    f:close()
    -- the demo's line and bar charts carry intervals
    if name ~= "timeline.svg" then T.ok(#error_bars(root) > 0, name .. " has error bars") end
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.done()
