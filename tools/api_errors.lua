-- api_errors.lua [DESCRIPTION] — every error text that the API description (docs/api.lua) shows
-- is one that gpulab's code can raise. Run by ctest (test `api_errors`; no driver needed):
--     build/gpulab tools/api_errors.lua [docs/api.lua]
-- Exit 0 when every text is accounted for; else one line per text on stderr and exit 1.
--
-- The error texts of the description:
--   - every string of an entry's `errors` list;
--   - in its markdown (the intro, a section's text and after, an entry's summary and text): every
--     "quoted" or `quoted` span that reads as one of lauxlib's argument errors ("bad argument #2
--     to 'f' (...)", "calling 'f' on bad self (...)"), every `quoted` span and every
--     `--> "f: ..."` result of a code block that starts with a function name and a colon
--     (`cuda.sync: timed out ...`, "d:fill: cuda.array was freed").
--   A leading "x.lua:3: " (the caller's position) is no part of the text. Inside a text, `…`,
--   `...` and `<words>` stand for any text (a number, a path, a list): write examples that way.
-- A text counts as raised when it, or what it wraps —
--   "bad argument #N to 'F' (X)" and "calling 'F' on bad self (X)" wrap X, F being a name that a
--   string of the code holds; "field 'f': X" and a tensor map's "box[2] = 257: X" wrap X; "F: X"
--   wraps X, F a function name that a string of the code holds —
-- either
--   - matches a format string of the code in full: a C string literal of bindings/*.c or host/*.c
--     (adjacent literals joined, a PRId64-style macro read as %d) or a Lua string of lua/**/*.lua
--     (joined over `..`, where an operand that is no literal reads as %s; lua/gpulab/meta/ is the
--     stub generated from the description, not code). %d %zu %g %.3f %x %I ... match a number,
--     %s %c %p any text, but what %s stands for must be short (2 words), a string of the code,
--     text another format gives, or strings of the code with 2 more words at most. A format with
--     fewer than 6 letters of its own ("%s (%s)") or of a wrapper's shape ("field '%s': %s",
--     "bad argument #%d to '%s' (%s)") is not counted: it fits any text;
--   - or occurs whole in an expectation of a Lua test that ctest runs without a GPU
--     (gl_add_lua_test in tests/*.cmake without GPU; CI runs them, so what they expect is what
--     gpulab raises): the text T.raises looks for, T.eq's expected value, a string given to find
--     or match;
--   - or, for a message built piece by piece, each piece between its `…` (of 4 or more letters,
--     punctuation at its ends aside) is inside one format or expectation.
--   A format or test must show most of the text itself: at least 16 of its letters, or 8 and half
--   of the text's or of the format's own (so "%s: this CUDA driver lacks %s" does not give
--   "cuda.sync: option 'timeout' must be …": everything would fall under the two wildcards).
--   White space runs count as one space.
-- `-v` first lists every text with what accounts for it. Loaded with dofile or require it returns
-- its functions, for tests.
local M = {}

local WILD = "\0" -- "any text" in a token string (no message holds a NUL byte)
local NUMW = "\1" -- "a number" (a format's %d, %zu, %g, %x, ...)

-- ---- text helpers ---------------------------------------------------------------------------

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function lines_of(cmd)
  local out = {}
  local p = assert(io.popen(cmd))
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  table.sort(out)
  return out
end

local function squeeze(s) return (s:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) end

-- A function pos -> line number for positions given in increasing order.
local function line_counter(text)
  local at, line = 1, 1
  return function(pos)
    if pos > at then
      line = line + select(2, text:sub(at, pos - 1):gsub("\n", ""))
      at = pos
    end
    return line
  end
end

-- ---- examples: the description's text -> token string ------------------------------------

-- The example's text with its placeholders (…, ..., <words>) as WILD, without the position.
function M.example_tokens(text)
  local s = squeeze(text)
  s = s:gsub("^[%w_%./%-]+%.lua:%d+: ", "")
  s = s:gsub("…", WILD):gsub("%.%.%.", WILD):gsub("<[%w_' %-]+>", WILD)
  return (s:gsub(WILD .. "+", WILD))
end

local ARG_ERROR_START = { "^bad argument #", "^calling '" }
local function reads_as_arg_error(s)
  s = s:gsub("^[%w_%./%-]+%.lua:%d+: ", "")
  for _, p in ipairs(ARG_ERROR_START) do if s:find(p) then return true end end
  return false
end

-- A gpulab function as messages name it: cuda.sync, d:fill, lab:verdict, cuda.nccl.init.
local FN_PREFIX = "^([%a_][%w_]*[%.:][%a_][%w_%.:]*): "

-- The error texts of markdown: quoted argument errors, and `--> "f: ..."` results.
local function markdown_examples(md, where, out)
  local seen = {}
  local function add(span)
    local s = squeeze(span)
    if not seen[s] and #s < 400 then
      seen[s] = true
      out[#out + 1] = { text = s, where = where }
    end
  end
  local function message_like(span)
    span = squeeze(span)
    return reads_as_arg_error(span) or (span:find(FN_PREFIX) and span:find("%a+ %a+") ~= nil)
  end
  for span in md:gmatch('"([^"]*)"') do
    if reads_as_arg_error(squeeze(span)) then add(span) end
  end
  for span in md:gmatch("`([^`]*)`") do
    if not span:find('"', 1, true) and message_like(span) then add(span) end
  end
  for span in md:gmatch('%-%->%s*"([^"\n]*)"') do
    if span:find(FN_PREFIX) then add(span) end
  end
end

-- Every error text of a description loaded by gpulab.apidoc: {text=, where=}, in order.
function M.examples(desc)
  local out = {}
  if type(desc.intro) == "string" then markdown_examples(desc.intro, "intro", out) end
  for _, s in ipairs(desc.sections) do
    local where = "section '" .. s.title .. "'"
    for _, field in ipairs({ "text", "after" }) do
      if s[field] then markdown_examples(s[field], where, out) end
    end
    for _, e in ipairs(s.entries or {}) do
      for _, m in ipairs(e.errors) do out[#out + 1] = { text = m, where = e.name, listed = true } end
      for _, field in ipairs({ "summary", "text" }) do
        if e[field] then markdown_examples(e[field], e.name, out) end
      end
    end
  end
  return out
end

-- ---- format strings: code -> token strings --------------------------------------------------

-- A printf or string.format conversion: flags, width, precision, length, conversion (lauxlib's
-- lua_pushfstring adds %I and %U).
local function conversion_at(s, i)
  local j = s:match("^%%[-+ #0]*[%d%*]*%.?[%d%*]*[hljztLq]*[diouxXeEfFgGaAcspnIUq]()", i)
  return j
end

-- A format string's token string: conversions as wildcards (NUMW for a number's, WILD for
-- %s %c %p %q %U), %% as %; runs of wildcards are one (a number only when all are numbers).
function M.format_tokens(s)
  local out, i = {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    if c == "%" and s:sub(i + 1, i + 1) == "%" then
      out[#out + 1] = "%"
      i = i + 2
    elseif c == "%" and conversion_at(s, i) then
      local j = conversion_at(s, i)
      out[#out + 1] = s:sub(j - 1, j - 1):find("[scpqU]") and WILD or NUMW
      i = j
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return (squeeze(table.concat(out)):gsub("[" .. WILD .. NUMW .. "][" .. WILD .. NUMW .. "]+",
    function(run) return run:find(WILD, 1, true) and WILD or NUMW end))
end

-- A character a number's conversion prints: digits, hex digits, sign, point, exponent, inf, nan.
local NUMBER_CHAR = {}
for c in ("0123456789abcdefABCDEFxX+-.iInN"):gmatch(".") do NUMBER_CHAR[c:byte()] = true end

local C_ESCAPES = { n = "\n", t = "\t", r = "\r", ["\\"] = "\\", ['"'] = '"', ["'"] = "'", a = "\a",
                    b = "\b", f = "\f", v = "\v", ["?"] = "?" }

-- A NUL or \1 byte a string spells is kept as two characters: those bytes are the wildcards here.
local function visible(ch) return (ch == "\0" or ch == "\1") and ("\\" .. ch:byte()) or ch end

local function c_unescape(body)
  return (body:gsub("\\(x%x%x?)", function(h) return visible(string.char(tonumber(h:sub(2), 16))) end)
              :gsub("\\([0-7][0-7]?[0-7]?)", function(o) return visible(string.char(tonumber(o, 8) % 256)) end)
              :gsub("\\([^x0-7])", function(e) return C_ESCAPES[e] or e end))
end

-- C: comments and character literals skipped, each run of string literals joined (over white
-- space, and over a macro before or between them: PRId64 and its kind as %d, any other, such
-- as a file's FN, as %s). Returns {text=, line=} per run, and every literal alone in `pieces`.
function M.c_strings(text)
  local out, line_of, pieces = {}, line_counter(text), {}
  local i, n = 1, #text
  local run, run_line, last_end
  local function flush()
    if run then out[#out + 1] = { text = table.concat(run), line = run_line } end
    run = nil
  end
  while true do
    i = text:find("[/\"']", i)
    if not i then break end
    local c = text:sub(i, i)
    if text:sub(i, i + 1) == "/*" then
      i = (select(2, text:find("*/", i + 2, true)) or n) + 1
    elseif text:sub(i, i + 1) == "//" then
      i = (text:find("\n", i, true) or n) + 1
    elseif c == "/" then
      i = i + 1
    else
      local j = i + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == c or d == "\n" then break end
        j = j + (d == "\\" and 2 or 1)
      end
      if c == '"' then
        local body = c_unescape(text:sub(i + 1, j - 1))
        pieces[#pieces + 1] = body
        local between = last_end and text:sub(last_end, i - 1)
        local macro = between and (between:match("^%s*(PRI%w+)%s*$") or between:match("^%s*([%u_][%u%d_]+)%s*$"))
        if run and between:match("^%s*$") then
          run[#run + 1] = body
        elseif run and macro then
          run[#run + 1] = macro:match("^PRI") and "d" or "%s"
          run[#run + 1] = body
        else
          flush()
          local ls = i
          while ls > 1 and i - ls < 200 and text:byte(ls - 1) ~= 10 do ls = ls - 1 end
          local before = text:sub(ls, i - 1)
          local lead = before:match("[^%w_]([%u_][%u%d_]+)%s*$") or before:match("^([%u_][%u%d_]+)%s*$")
          if lead and before:find("#%s*define%s+" .. lead .. "%s*$") then lead = nil end
          run, run_line = { lead and "%s" or "", body }, line_of(i)
        end
        last_end = j + 1
      end
      i = j + 1
    end
  end
  flush()
  return out, pieces
end

-- Lua: a small tokenizer (names, numbers, strings with their escapes, operators; comments
-- skipped). Returns {kind=, value=, pos=} per token.
local LUA_ESCAPES = { n = "\n", t = "\t", r = "\r", a = "\a", b = "\b", f = "\f", v = "\v", ["\\"] = "\\",
                      ['"'] = '"', ["'"] = "'", ["\n"] = "\n" }

-- A Lua string's escapes, read left to right as Lua reads them.
local function lua_unescape(body)
  local out, i = {}, 1
  while true do
    local j = body:find("\\", i, true)
    if not j then out[#out + 1] = body:sub(i) break end
    out[#out + 1] = body:sub(i, j - 1)
    local c = body:sub(j + 1, j + 1)
    if c == "x" then
      out[#out + 1] = visible(string.char(tonumber(body:sub(j + 2, j + 3), 16) or 0))
      i = j + 4
    elseif c == "z" then
      i = body:find("%S", j + 2) or #body + 1
    elseif c == "u" then
      local hex, after = body:match("^{(%x+)}()", j + 2)
      out[#out + 1] = hex and utf8.char(tonumber(hex, 16)) or ""
      i = after or j + 2
    elseif c:match("%d") then
      local d = body:match("^%d%d?%d?", j + 1)
      out[#out + 1] = visible(string.char(tonumber(d) % 256))
      i = j + 1 + #d
    else
      out[#out + 1] = LUA_ESCAPES[c] or c
      i = j + 2
    end
  end
  return table.concat(out)
end

local LONG_OPS = { "...", "..", "==", "~=", "<=", ">=", "//", "::", "<<", ">>" }

function M.lua_tokens(text)
  local toks, i, n = {}, 1, #text
  local function push(kind, value, pos) toks[#toks + 1] = { kind = kind, value = value, pos = pos } end
  while true do
    i = text:find("%S", i)
    if not i then break end
    local c = text:sub(i, i)
    local long = text:match("^%[(=*)%[", i)
    if text:sub(i, i + 1) == "--" then
      local eq = text:match("^%-%-%[(=*)%[", i)
      if eq then
        i = (select(2, text:find("]" .. eq .. "]", i, true)) or n) + 1
      else
        i = (text:find("\n", i, true) or n) + 1
      end
    elseif long then
      local open = i + 2 + #long
      local s, e = text:find("]" .. long .. "]", open, true)
      push("string", (text:sub(open, (s or n + 1) - 1):gsub("^\n", "")), i)
      i = (e or n) + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == c or d == "\n" then break end
        j = j + (d == "\\" and 2 or 1)
      end
      push("string", lua_unescape(text:sub(i + 1, j - 1)), i)
      i = j + 1
    elseif c:match("[%a_]") then
      local name = text:match("^[%a_][%w_]*", i)
      push("name", name, i)
      i = i + #name
    elseif c:match("%d") then
      local num = text:match("^%d[%w%.]*", i)
      push("number", num, i)
      i = i + #num
    else
      local op = c
      for _, o in ipairs(LONG_OPS) do
        if text:sub(i, i + #o - 1) == o then op = o break end
      end
      push("op", op, i)
      i = i + #op
    end
  end
  return toks
end

local OPEN = { ["("] = ")", ["{"] = "}", ["["] = "]" }
local CLOSING = { [")"] = true, ["}"] = true, ["]"] = true }
local BLOCK_OPEN = { ["function"] = true, ["if"] = true, ["do"] = true, ["repeat"] = true }
local BLOCK_CLOSE = { ["end"] = true, ["until"] = true }

-- The token after the operand that starts at token j (no literal): unary operators, a name
-- chain with fields, method calls, calls and indexing, or a bracketed expression.
local function skip_operand(toks, j)
  local t = toks[j]
  while t and ((t.kind == "op" and (t.value == "#" or t.value == "-")) or (t.kind == "name" and t.value == "not")) do
    j = j + 1
    t = toks[j]
  end
  if not t then return j end
  if t.kind == "op" and OPEN[t.value] then
    local depth = 0
    repeat
      local v = toks[j]
      if v.kind == "op" and OPEN[v.value] then depth = depth + 1 end
      if v.kind == "op" and CLOSING[v.value] then depth = depth - 1 end
      j = j + 1
    until depth == 0 or j > #toks
  else
    j = j + 1
  end
  while toks[j] do
    local v = toks[j]
    if v.kind == "op" and (v.value == "." or v.value == ":") and toks[j + 1] and toks[j + 1].kind == "name" then
      j = j + 2
    elseif v.kind == "op" and (v.value == "(" or v.value == "[") then
      j = skip_operand(toks, j)
    else
      break
    end
  end
  return j
end

-- The string chains of a Lua chunk: literals joined over `..`, an operand that is no literal as
-- WILD. {text=, line=, call=, arg=}: `call` names the call the chain is an argument of
-- ("T.raises", "find": the name before its parenthesis, with a module's prefix) and `arg` its
-- position there.
function M.lua_strings(text)
  local toks = M.lua_tokens(text)
  local out, stack, line_of = {}, {}, line_counter(text)
  local k = 1
  while k <= #toks do
    local t = toks[k]
    if t.kind == "string" then
      local parts, j = { t.value }, k + 1
      while toks[j] and toks[j].kind == "op" and toks[j].value == ".." do
        local nx = toks[j + 1]
        if nx and nx.kind == "string" then
          parts[#parts + 1] = nx.value
          j = j + 2
        else
          parts[#parts + 1] = WILD
          j = skip_operand(toks, j + 1)
        end
      end
      local top = stack[#stack]
      out[#out + 1] = { text = table.concat(parts), line = line_of(t.pos), call = top and top.call,
                        arg = top and top.arg }
      k = j
    else
      if t.kind == "op" and OPEN[t.value] then
        local call
        local a, b, c = toks[k - 1], toks[k - 2], toks[k - 3]
        if t.value == "(" and a and a.kind == "name" then
          call = a.value
          if b and b.value == "." and c and c.kind == "name" then call = c.value .. "." .. a.value end
        end
        stack[#stack + 1] = { call = call, arg = 1 }
      elseif t.kind == "name" and BLOCK_OPEN[t.value] then
        stack[#stack + 1] = { arg = 1 }
      elseif (t.kind == "op" and CLOSING[t.value]) or (t.kind == "name" and BLOCK_CLOSE[t.value]) then
        stack[#stack] = nil
      elseif t.kind == "op" and t.value == "," and stack[#stack] then
        stack[#stack].arg = stack[#stack].arg + 1
      end
      k = k + 1
    end
  end
  return out
end

-- ---- matching -------------------------------------------------------------------------------

-- Whether some text matches both token strings (WILD matches any text, none included; NUMW, in
-- b only, what a number's conversion prints; a WILD of a takes it too), and
-- then the most letters such a text can have where both strings hold the letter itself rather
-- than a wildcard: how much of each is really seen in the other. Returns nil when no text fits.
local W, N, NONE = WILD:byte(), NUMW:byte(), -1

-- One cell of the overlap table: the best for the suffixes a[i..] and b[j..], from row (the same
-- row, a[i..]) and later (a[i+1..]); ca, cb the characters at i and j (nil past the end).
local function overlap_cell(ca, cb, row, later, j)
  if ca == nil and cb == nil then return 0 end
  if ca == W then -- a's wildcard ends here, or takes b's next character
    local v = later[j]
    if cb ~= nil and row[j + 1] > v then v = row[j + 1] end
    return v
  end
  if cb == W or cb == N then -- b's wildcard ends here, or takes a's next character
    local v = row[j + 1]
    if ca ~= nil and (cb == W or NUMBER_CHAR[ca]) and later[j] > v then v = later[j] end
    return v
  end
  if ca ~= nil and ca == cb and later[j + 1] ~= NONE then
    return later[j + 1] + (((ca >= 65 and ca <= 90) or (ca >= 97 and ca <= 122)) and 1 or 0)
  end
  return NONE
end

function M.overlap(a, b)
  local na, nb = #a, #b
  -- later[j]: the best for the suffixes a[i+1..] and b[j..]; row[j] the same for a[i..]
  local later, row = {}, {}
  for i = na + 1, 1, -1 do
    local ca = i <= na and a:byte(i) or nil
    for j = nb + 1, 1, -1 do row[j] = overlap_cell(ca, j <= nb and b:byte(j) or nil, row, later, j) end
    later, row = row, later
  end
  local best = later[1]
  if best == NONE then return nil end
  return best
end

-- Letters of a token string outside its wildcards.
local function letters(tokens) return select(2, tokens:gsub("%a", "")) end

-- Along the best text for M.overlap(a, b): what each of b's wildcards stands for in a, in order
-- (WILD where it meets a wildcard of a). nil when no text fits both.
function M.absorbed(a, b)
  local na, nb = #a, #b
  local T = { [na + 2] = {} } -- the whole table, to walk it back; row na + 2 is never read
  for i = na + 1, 1, -1 do
    local row, later = {}, T[i + 1]
    T[i] = row
    local ca = i <= na and a:byte(i) or nil
    for j = nb + 1, 1, -1 do row[j] = overlap_cell(ca, j <= nb and b:byte(j) or nil, row, later, j) end
  end
  if T[1][1] == NONE then return nil end
  local out, taken = {}, {}
  local i, j = 1, 1
  while i <= na or j <= nb do
    local ca, cb, v = a:byte(i), b:byte(j), T[i][j]
    if ca == W and (cb == nil or T[i + 1][j] == v) then -- a's wildcard ends
      if cb == W or cb == N then taken[#taken + 1] = WILD end -- inside one of b's
      i = i + 1
    elseif ca == W then -- a's wildcard takes b's next character
      if cb == W or cb == N then
        taken[#taken + 1] = WILD
        out[#out + 1] = table.concat(taken)
        taken = {}
      end
      j = j + 1
    elseif (cb == W or cb == N) and (ca == nil or T[i][j + 1] == v) then -- b's wildcard ends
      out[#out + 1] = table.concat(taken)
      taken = {}
      j = j + 1
    elseif cb == W or cb == N then -- b's wildcard takes a's next character
      taken[#taken + 1] = string.char(ca)
      i = i + 1
    else
      i, j = i + 1, j + 1
    end
  end
  return out
end

-- What a format's wildcard may stand for in an example: nothing, the example's own "…", a short
-- value or name (2 words at most: "1.5", "f32 (4 bytes)"), a string of the code ("cuda.array or
-- cuda.host") or a text another format gives ("scale<2> parameter 1 (float* x)"), or strings of
-- the code of 2 words or more with 2 more words at most ("1.5 (not an integer)"). Other text is
-- not the code's: "%s: %s expected, got %s" does not give "kernel parameter 1: u64 (8 bytes)
-- expected, got 1.5" once no code writes "kernel parameter".
local function words_in(text) return select(2, text:gsub("%S+", "")) end
local may_stand_for
-- A format gives a form when a text fits both and the letters seen in both are at least 8 and
-- half of the form's own letters or half of the format's (so "%s expected, got %s" gives
-- "cuda.array or cuda.host expected, got number", while a format whose text would all fall
-- under the example's "…" gives nothing), and every wildcard stands for what it may.
function M.gives(format, form, code, depth)
  local seen = M.overlap(form, format)
  if not seen then return false end
  if not (seen >= 16 or (seen >= 8 and (2 * seen >= letters(form) or 2 * seen >= letters(format)))) then
    return false
  end
  for _, text in ipairs(M.absorbed(form, format)) do
    if not may_stand_for(text, code, depth or 1) then return false end
  end
  return true
end

function may_stand_for(text, code, depth)
  text = squeeze(text)
  if text == "" or text:find(WILD, 1, true) or words_in(text) <= 2 then return true end
  if not code then return false end
  if code.strings[text] then return true end
  local rest = text
  for _, phrase in ipairs(code.phrases) do
    if #phrase <= #rest then
      local i, j = rest:find(phrase, 1, true)
      if i then rest = rest:sub(1, i - 1) .. " " .. rest:sub(j + 1) end
    end
  end
  if words_in(rest) <= 2 then return true end
  if depth >= 2 then return false end
  for _, f in ipairs(code.sharing(text)) do
    if M.gives(f.tokens, text, code, depth + 1) then return true end
  end
  return false
end

-- A test expects a form when the form, letters and all, is inside what the test looks for.
function M.expects(expectation, form, min_letters)
  local seen = M.overlap(WILD .. form .. WILD, expectation)
  return seen ~= nil and seen >= (min_letters or 8) and 5 * seen >= 4 * letters(form)
end

-- Lower-case words of 4 or more letters outside the wildcards.
local function words_of(tokens)
  local set = {}
  for w in tokens:gmatch("%a%a%a%a+") do set[w:lower()] = true end
  return set
end

-- A wrapper's shape, or too few letters of its own: such a format fits any text.
local WRAPPER_SHAPES = {}
for _, f in ipairs({ "bad argument #%d to '%s' (%s)", "calling '%s' on bad self (%s)", "field '%s': %s" }) do
  WRAPPER_SHAPES[M.format_tokens(f)] = true
end
local function producer(tokens)
  return select(2, tokens:gsub("%a", "")) >= 6 and not WRAPPER_SHAPES[tokens]
end

-- The forms of an example to look for: the text itself, then what each wrapper around it holds.
-- Each form is {tokens=, names={...}, fn=}: names are the function names its wrappers gave, fn
-- the name of the "F: " prefix it was taken out of (a format with another name's prefix is not
-- compared with it).
function M.forms(tokens)
  local out, names = {}, {}
  local s, fn, took_fn = tokens, nil, false
  while true do
    local form = { tokens = s, names = { table.unpack(names) }, fn = fn }
    out[#out + 1] = form
    local f, inner = s:match("^bad argument #[%d" .. WILD .. "]+ to '([^']*)' %((.*)%)$")
    if not f then f, inner = s:match("^calling '([^']*)' on bad self %((.*)%)$") end
    if not f then inner = s:match("^field '[%w_]+': (.*)$") end
    if not f and not inner then inner = s:match("^[%w_]+%[?%d*%]? = [^:]+: (.*)$") end
    fn = nil
    if not f and not inner and not took_fn then -- one function name a message: "bad.cu: ..." is text
      f, inner = s:match(FN_PREFIX .. "(.*)$")
      fn, took_fn = f, f ~= nil
    end
    if not inner then return out end
    if f and f ~= WILD then names[#names + 1] = f end
    s = inner
  end
end

-- A format's function-name prefix ("cuda.trace: " or "%s: ") and the rest: fn (nil for %s) and
-- body. Formats are compared by their bodies, with the prefix taken off the example too.
local function split_prefix(tokens)
  local fn, body = tokens:match(FN_PREFIX .. "(.*)$")
  if fn then return fn, body end
  body = tokens:match("^" .. WILD .. ": (.*)$")
  return nil, body or tokens
end

-- ---- the code ---------------------------------------------------------------------------------

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Lua test files that ctest runs without a GPU (gl_add_lua_test without GPU in tests/*.cmake).
function M.cpu_test_files(root)
  local files, seen = {}, {}
  for _, cm in ipairs(lines_of("cd " .. shell_quote(root) .. " && ls tests/*.cmake 2>/dev/null")) do
    local text = (read(root .. "/" .. cm) or ""):gsub("#[^\n]*", "")
    for args in text:gmatch("gl_add_lua_test%s*(%b())") do
      local file = args:match("^%(%s*[^%s]+%s+(tests/lua/[%w_%-]+%.lua)")
      if file and not args:find("%f[%w]GPU%f[%W]") and not seen[file] then
        seen[file] = true
        files[#files + 1] = file
      end
    end
  end
  table.sort(files)
  return files
end

-- What a test expects: T.raises's text, T.eq's expected value, a string given to find or match.
function M.is_expectation(s)
  return ((s.call == "T.raises" or s.call == "T.eq") and s.arg == 2)
    or ((s.call == "find" or s.call == "match") and s.arg == 1)
end

-- Indexes a list of {tokens=} by the words of each (and counts them in item.words).
local function by_word(list)
  local index = {}
  for i, item in ipairs(list) do
    item.words = 0
    for w in pairs(words_of(item.tokens)) do
      index[w] = index[w] or {}
      table.insert(index[w], i)
      item.words = item.words + 1
    end
  end
  return index
end

-- The code of the tree at root: formats ({tokens=, file=, line=}, from bindings/*.c, host/*.c,
-- lua/**/*.lua), the set of its strings, and the expectations of its CPU tests.
function M.scan(root)
  local code = { formats = {}, strings = {}, expectations = {} }
  local function add(list, tokens, file, line) list[#list + 1] = { tokens = tokens, file = file, line = line } end
  local q = shell_quote(root)
  local function add_format(text, file, line)
    code.strings[text] = true
    local tokens = M.format_tokens(text)
    local fn, body = split_prefix(tokens)
    if fn then code.strings[fn] = true end
    if producer(body) then code.formats[#code.formats + 1] = { tokens = body, fn = fn, file = file, line = line } end
    -- "%s: " may also be a name that is part of the message ("%s: %s expected, got %s")
    if body ~= tokens and not fn and producer(tokens) then
      code.formats[#code.formats + 1] = { tokens = tokens, file = file, line = line }
    end
  end
  for _, file in ipairs(lines_of("cd " .. q .. " && ls bindings/*.c host/*.c 2>/dev/null")) do
    local runs, pieces = M.c_strings(assert(read(root .. "/" .. file)))
    for _, piece in ipairs(pieces) do code.strings[piece] = true end
    for _, s in ipairs(runs) do add_format(s.text, file, s.line) end
  end
  for _, file in ipairs(lines_of("cd " .. q .. " && find lua -name '*.lua' -not -path 'lua/gpulab/meta/*'")) do
    for _, s in ipairs(M.lua_strings(assert(read(root .. "/" .. file)))) do add_format(s.text, file, s.line) end
  end
  for _, file in ipairs(M.cpu_test_files(root)) do
    for _, s in ipairs(M.lua_strings(read(root .. "/" .. file) or "")) do
      if M.is_expectation(s) then add(code.expectations, squeeze(s.text), file, s.line) end
    end
  end
  code.format_words, code.expectation_words = by_word(code.formats), by_word(code.expectations)
  -- the code's strings of 2 words or more, longest first (what a wildcard's text may hold)
  code.phrases = {}
  for text in pairs(code.strings) do
    local t = squeeze(text)
    if words_in(t) >= 2 and not t:find("[" .. WILD .. NUMW .. "%%]") then code.phrases[#code.phrases + 1] = t end
  end
  table.sort(code.phrases, function(x, y) return #x > #y or (#x == #y and x < y) end)
  function code.sharing(text) return M.sharing_a_word(code.formats, code.format_words, text) end
  return code
end

-- The entries of list (indexed by index) worth comparing with tokens, in list order: those that
-- share at least half of the words of one of the two (a format or expectation that gives the
-- text shares its words, but for those under the other's wildcards).
function M.sharing_a_word(list, index, tokens)
  local count, own = {}, 0
  for w in pairs(words_of(tokens)) do
    own = own + 1
    for _, i in ipairs(index[w] or {}) do count[i] = (count[i] or 0) + 1 end
  end
  local out = {}
  for i, n in pairs(count) do
    if 2 * n >= own or 2 * n >= list[i].words then out[#out + 1] = i end
  end
  table.sort(out)
  for k, i in ipairs(out) do out[k] = list[i] end
  return out
end

-- The literal pieces of a form (between its wildcards), without the punctuation and spaces at
-- their ends (where a message built piece by piece joins its parts); pieces of fewer than 4
-- letters are left out.
local function pieces_of(tokens)
  local out = {}
  for piece in (tokens .. WILD):gmatch("([^" .. WILD .. "]*)" .. WILD) do
    piece = piece:gsub("^[^%w]+", ""):gsub("[^%w]+$", "")
    if letters(piece) >= 4 then out[#out + 1] = piece end
  end
  return out
end

-- Whether some format gives the piece or some test expects it, inside a longer text.
local function piece_found(code, piece)
  for _, list in ipairs({ { code.formats, code.format_words }, { code.expectations, code.expectation_words } }) do
    for _, f in ipairs(M.sharing_a_word(list[1], list[2], piece)) do
      if M.expects(f.tokens, piece, 4) then return f end
    end
  end
end

-- How the example with these tokens is raised: "format FILE:LINE", "test FILE:LINE", "pieces
-- FILE:LINE, ..." or "wrapper of NAME"; or nil and the nearest format. A format or expectation
-- must share a word (4+ letters) with the form: one whose every word falls under the example's
-- wildcards is not what the example shows.
function M.account(code, tokens)
  local forms = M.forms(tokens)
  for _, form in ipairs(forms) do
    form.known = true
    for _, name in ipairs(form.names) do form.known = form.known and code.strings[name] ~= nil end
  end
  for i, form in ipairs(forms) do
    local t = form.tokens
    if form.known and (t == WILD or t == "") and #form.names > 0 then
      return "wrapper of " .. table.concat(form.names, ", ")
    end
    if form.known then
      local best, best_seen
      for _, f in ipairs(M.sharing_a_word(code.formats, code.format_words, t)) do
        -- a format that starts with a wildcard would take a wrapper in: it meets the innermost form
        local fits = i == #forms or f.tokens:byte(1) ~= WILD:byte()
        if fits and (f.fn == nil or form.fn == nil or f.fn == form.fn) and M.gives(f.tokens, t, code) then
          local seen = M.overlap(t, f.tokens)
          if not best or seen > best_seen then best, best_seen = f, seen end
        end
      end
      if best then return string.format("format %s:%d", best.file, best.line) end
    end
    if form.known then
      for _, e in ipairs(M.sharing_a_word(code.expectations, code.expectation_words, t)) do
        if M.expects(e.tokens, t) then return string.format("test %s:%d", e.file, e.line) end
      end
    end
  end
  -- a message built piece by piece: each piece between the wildcards is in the code
  for _, form in ipairs(forms) do
    local t = form.tokens
    local pieces = pieces_of(t)
    if form.known and t:find(WILD, 1, true) and #pieces > 0 and letters(table.concat(pieces)) >= 8 then
      local where = {}
      for _, piece in ipairs(pieces) do
        local f = piece_found(code, piece)
        if not f then where = nil break end
        where[#where + 1] = string.format("%s:%d", f.file, f.line)
      end
      if where then return "pieces " .. table.concat(where, ", ") end
    end
  end
  return nil, M.nearest(code, tokens)
end

-- The format sharing the most words with the example's innermost form (then the one with the
-- fewest words of its own), for the report.
function M.nearest(code, tokens)
  local forms = M.forms(tokens)
  local inner = forms[#forms].tokens
  local words = words_of(inner)
  local best, best_n, best_all = nil, 0, 0
  for _, f in ipairs(M.sharing_a_word(code.formats, code.format_words, inner)) do
    if #f.tokens > 200 then goto next end -- a help text, not a message
    local n, all = 0, 0
    for w in pairs(words_of(f.tokens)) do
      all = all + 1
      if words[w] then n = n + 1 end
    end
    if n > best_n or (n == best_n and best and all < best_all) then best, best_n, best_all = f, n, all end
    ::next::
  end
  return best
end

local function shown(tokens)
  local s = squeeze(tokens:gsub("[" .. WILD .. NUMW .. "]", "…"))
  return #s > 120 and s:sub(1, 117) .. "..." or s
end

-- Checks the description at desc_path against the tree at root. Returns the problems (one line
-- each), the number of error texts and how each was accounted for ({text=, where=, how=}).
function M.check(root, desc_path)
  package.path = root .. "/lua/?.lua;" .. package.path
  local apidoc = require("gpulab.apidoc")
  local desc = apidoc.load(desc_path)
  local code = M.scan(root)
  local problems, report = {}, {}
  local examples = M.examples(desc)
  for _, ex in ipairs(examples) do
    local how, near = M.account(code, M.example_tokens(ex.text))
    report[#report + 1] = { text = ex.text, where = ex.where, how = how }
    if not how then
      local hint = near and string.format(" (nearest format: %s:%d \"%s\")", near.file, near.line, shown(near.tokens))
        or ""
      problems[#problems + 1] = string.format("%s: no gpulab code raises \"%s\"%s", ex.where, ex.text, hint)
    end
  end
  return problems, #examples, report
end

local function main()
  local root = arg[0]:match("^(.*)/tools/[^/]*$") or "."
  local verbose = arg[1] == "-v"
  local problems, n, report = M.check(root, arg[verbose and 2 or 1] or (root .. "/docs/api.lua"))
  if verbose then
    for _, r in ipairs(report) do print(string.format("%-28s %-40s %s", r.where, r.how or "-", r.text)) end
  end
  for _, p in ipairs(problems) do io.stderr:write("api_errors: ", p, "\n") end
  if #problems > 0 then
    io.stderr:write(string.format("api_errors: %d of %d error texts in the description are raised by no " ..
      "code; write what gpulab raises (… for the parts that vary)\n", #problems, n))
    os.exit(1)
  end
  print(string.format("api_errors: each of the %d error texts in the description is one gpulab raises", n))
end

if arg and type(arg[0]) == "string" and arg[0]:match("[^/]*$") == "api_errors.lua" then main() end
return M
