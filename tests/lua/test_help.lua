-- help(x) as the REPL shows it: lines wrapped at spaces (never inside a name), every entry a
-- short name stands for, and the test stand-ins' sections left out (docs/API.md keeps them).
-- Runs under the driver stand-in.
local T = dofile("tests/lua/t.lua")
local apidoc = dofile("lua/gpulab/apidoc.lua")
local help = require("gpulab.help")

local desc = apidoc.load("docs/api.lua")

local function words(s)
  local list = {}
  for w in s:gmatch("%S+") do list[#list + 1] = w end
  return list
end

local function plain(s) return (s:gsub("%*%*", ""):gsub("`", "")) end

-- The lines of the examples, which are shown as written (code is never re-wrapped).
local example_line = {}
for _, e in ipairs(desc.entries) do
  for line in (e.example or ""):gmatch("[^\n]+") do example_line["    " .. line] = true end
end

-- Every line fits help.width unless it is one word (or a line of an example).
local function check_width(text, what)
  for line in text:gmatch("[^\n]+") do
    if #line > help.width and not example_line[line] then
      T.ok(not line:match("^%s*%S+%s+%S"), string.format("%s: a line of %d columns (width %d) holds a space: %q",
                                                         what, #line, help.width, line))
    end
  end
end

T.test("no line is wider than the width unless it is a single word", function()
  check_width(help.text(), "the overview")
  for _, e in ipairs(desc.entries) do check_width(help.text(e.name), e.name) end
end)

T.test("wrapping keeps every word whole and in order", function()
  local e = desc.index["cuda.l2_persisting"]
  T.ok(#plain(e.summary) > help.width, "the summary is longer than a line")
  local text = help.text("cuda.l2_persisting")
  local got = words(text)
  local want = words(plain(e.summary))
  -- the summary's words follow the signature line, in order and whole
  local first = select(2, text:find("\n", 1, true))
  local from = #words(text:sub(1, first))
  for i, w in ipairs(want) do T.eq(got[from + i], w, "word " .. i .. " of the summary") end
end)

T.test("a narrow width breaks between names, never inside one", function()
  local saved = help.width
  help.width = 24
  local ok, err = pcall(function()
    local overview = help.text()
    local seen = {}
    for _, w in ipairs(words(overview)) do seen[w] = true end
    for _, e in ipairs(desc.entries) do
      if e.kind ~= "class" and e.section.help ~= false then
        T.ok(seen[e.name], e.name .. " appears whole in the overview")
      end
    end
    for line in overview:gmatch("[^\n]+") do
      T.ok(#line <= 24 or not line:match("^%s*%S+%s+%S"), "narrow line: " .. line)
    end
    local rows = help.text("cuda.measure")
    T.ok(rows:find("\n%s+max_noise%s"), "an option row keeps its name: " .. rows)
  end)
  help.width = saved
  assert(ok, err)
end)

T.test("a short name shared by several entries shows all of them", function()
  local text = help.text("view")
  T.ok(text:find("'view' names 2 entries: cuda.array:view, cuda.host:view", 1, true), text)
  T.ok(text:find("x:view(first[, n | {dims}]) -> cuda.array\n", 1, true), "the array's entry: " .. text)
  T.ok(text:find("x:view(first[, n | {dims}]) -> cuda.host\n", 1, true), "the host array's entry: " .. text)
  T.ok(not text:find("ask for one", 1, true), "no request to choose")
  local frees = 0
  for _, e in ipairs(desc.entries) do
    if e.short == "free" and e.section.help ~= false then frees = frees + 1 end
  end
  T.ok(frees > 2, "several entries are called free")
  local free = help.text("free")
  T.ok(free:find(string.format("'free' names %d entries", frees), 1, true), free)
  local _, sigs = free:gsub("\nx?[%w_.]*:?free%(", "")
  T.ok(sigs >= 1, "entries follow the list")
  -- a name that is a function and a class shows both, one name alone shows one entry
  T.ok(help.text("cuda.array"):find("class cuda.array", 1, true), "the class too")
  T.ok(not help.text("compile_file"):find("names", 1, true), "one entry: no list line")
end)

T.test("the test stand-ins' sections are left out of help but kept in API.md", function()
  local hidden = {}
  for _, s in ipairs(desc.sections) do
    if s.help == false then hidden[#hidden + 1] = plain(s.title) end
  end
  T.ok(#hidden >= 2, "docs/api.lua marks the stand-in sections")
  local overview = help.text()
  local api_md = T.read("docs/API.md")
  for _, title in ipairs(hidden) do
    T.ok(title:find("stand-in", 1, true), "only stand-in sections are hidden: " .. title)
    T.ok(not overview:find(title, 1, true), "help() leaves out " .. title)
    T.ok(api_md:find(title, 1, true), "API.md keeps " .. title)
  end
  T.ok(not overview:lower():find("stand-in", 1, true), "no stand-in in the overview: " .. overview)
  T.ok(overview:find("Memory: cuda.array", 1, true), "the other sections stay")
end)

T.done()
