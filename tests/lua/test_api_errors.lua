-- tools/api_errors.lua: every error text of docs/api.lua is one gpulab raises. The real
-- description passes; a copy with one example changed is reported, naming the entry; on a small
-- made-up tree each way a text can be raised (a C format, a format behind a FN macro, a Lua
-- string, a CPU test's expectation, pieces) counts, and a GPU test's expectation, an unknown
-- function name and a changed word do not. No driver is needed.
local T = dofile("tests/lua/t.lua")
local E = dofile("tools/api_errors.lua")

local BIN = assert(os.getenv("GPULAB_BIN"), "run with GPULAB_BIN set")
local TMP = os.tmpname()
local good = T.read("docs/api.lua")
local WILD, NUMW = "\0", "\1"

-- Runs the check on `text` as the description; returns whether it passed and what it wrote.
local function check(text)
  T.write(TMP, text)
  local p = io.popen(string.format("%s tools/api_errors.lua %s 2>&1", BIN, TMP))
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

-- `text` with the one occurrence of `plain` replaced by `repl`.
local function replaced(text, plain, repl)
  local i, j = text:find(plain, 1, true)
  assert(i, "the description holds " .. plain)
  assert(not text:find(plain, j + 1, true), "only once: " .. plain)
  return text:sub(1, i - 1) .. repl .. text:sub(j + 1)
end

T.test("every error text of the description is raised by the code", function()
  local ok, out = check(good)
  T.ok(ok, "api_errors passes: " .. out)
  T.ok(out:find("each of the %d+ error texts in the description is one gpulab raises"), out)
end)

T.test("an errors-list example the code does not raise is reported with its entry", function()
  local real = "(the element count overflows 64 bits)"
  local wrong = real:gsub("overflows 64 bits", "is larger than the address space")
  local ok, out = check(replaced(good, real, wrong))
  T.ok(not ok, "api_errors fails")
  local line = "api_errors: cuda.array: no gpulab code raises \"bad argument #2 to 'cuda.array' " .. wrong .. "\""
  T.ok(out:find(line, 1, true), "names the entry and the text:\n" .. out)
  T.ok(out:find("(nearest format: bindings/", 1, true), "points at the nearest format:\n" .. out)
  T.ok(out:find("1 of %d+ error texts in the description are raised by no code"), out)
end)

T.test("a stale message in a section's text is reported with the section", function()
  local real = [[d:fill(1)   -- d freed        --> "d:fill: cuda.array was freed"]]
  local wrong = real:gsub("was freed", "was released")
  local ok, out = check(replaced(good, real, wrong))
  T.ok(not ok, "api_errors fails")
  -- the changed text is built, never written out: a test that expects it would make it count
  local line = "api_errors: section 'Errors': no gpulab code raises \"" .. wrong:match('"(.-)"') .. "\""
  T.ok(out:find(line, 1, true), line .. "\n" .. out)
end)

T.test("an argument error naming a function the code never names is reported", function()
  local real = "bad argument #3 to 'cuda.peer' (true to enable peer access expected, got number)"
  local wrong = real:gsub("'cuda.peer'", "'cuda.peers'")
  local ok, out = check(replaced(good, real, wrong))
  T.ok(not ok, "api_errors fails")
  T.ok(out:find(wrong, 1, true), out)
end)

T.test("format strings become token strings: conversions are wildcards, %% a percent sign", function()
  T.eq(E.format_tokens("%s: got %zu bytes (%.3f%%), %-8lld left, %I of %d, %s%d, %d%d"),
    WILD .. ": got " .. NUMW .. " bytes (" .. NUMW .. "%), " .. NUMW .. " left, " .. NUMW .. " of " .. NUMW .. ", " ..
    WILD .. ", " .. NUMW, "a number's conversions are numbers; a run is one wildcard")
  T.eq(E.format_tokens("line one\n   line two"), "line one line two", "white space runs are one space")
  T.eq(E.example_tokens("x.lua:3: bad argument #1 to 'f' (known: ..., <what>, …)"),
    "bad argument #1 to 'f' (known: " .. WILD .. ", " .. WILD .. ", " .. WILD .. ")")
end)

T.test("C literals are joined over white space and macros; comments are skipped", function()
  local runs, pieces = E.c_strings([[
#define FN "cuda.thing"
/* "not a message" */ // "nor this"
static void f(void) {
    luaL_error(L, FN ": %s is busy "
                  "(%" PRId64 " jobs)", what, n);
    char c = '"';
    gl_argerror(L, 1, fn, "tab\there \"quoted\"");
}]])
  local texts = {}
  for _, r in ipairs(runs) do texts[#texts + 1] = r.text end
  T.eq(table.concat(texts, "|"), 'cuda.thing|%s: %s is busy (%d jobs)|tab\there "quoted"')
  T.eq(runs[2].line, 4, "the line of the run's first literal")
  T.eq(#pieces, 5, "every literal alone")
end)

T.test("Lua strings are joined over `..`, an operand read as a wildcard, with the call they are in", function()
  local s = E.lua_strings([[
error("lab:claim: '" .. spec.id .. "' needs " .. tostring(n) .. " of " .. (a or "b"))
T.raises(function() f(1, 2) end, "want " .. "this")
local x = s:find("plain", 1, true)
]])
  T.eq(s[1].text, "lab:claim: '" .. WILD .. "' needs " .. WILD .. " of " .. WILD)
  T.eq(s[1].call, "error")
  T.eq(s[2].text, "want this")
  T.eq(s[2].call, "T.raises")
  T.eq(s[2].arg, 2, "the commas inside the function body do not count")
  T.ok(E.is_expectation(s[2]), "T.raises's text is an expectation")
  T.ok(E.is_expectation(s[3]), "find's pattern is an expectation")
  T.ok(not E.is_expectation(s[1]), "error's message is not")
end)

T.test("two wildcards do not make any text fit: the letters must be seen in both", function()
  local stale = E.example_tokens("option 'timeout' must be 0..1e9 seconds, got …")
  local other = E.format_tokens("this CUDA driver (%d.%d) lacks %s, which needs a CUDA 12.0 driver")
  T.ok(E.overlap(stale, WILD .. " " .. other) ~= nil, "a text fits both")
  T.ok(not E.gives(WILD .. " " .. other, stale), "but the format does not give the example")
  local code = { strings = { ["cuda.array or cuda.host"] = true }, phrases = {}, sharing = function() return {} end }
  T.ok(E.gives(E.format_tokens("%s expected, got %s"), "cuda.array or cuda.host expected, got number", code),
    "a wildcard takes a string of the code")
  T.ok(not E.gives(E.format_tokens("%s expected, got %s"), "cuda.array or cuda.host expected, got number"),
    "and not the same 3 words when the code has no such string")
  T.ok(E.gives(E.format_tokens("must be 0..1e9 seconds, got %.14g"), E.example_tokens("must be 0..1e9 seconds, got …")))
  T.ok(not E.gives(E.format_tokens("must be 0..1e9 seconds, got %.14g"), "must be 0..1e6 seconds, got 2"))
  T.ok(not E.gives(E.format_tokens("%s parameter %d (%s)"), "kernel parameter 3: f32 (4 bytes)"),
    "a number's conversion takes no words")
  T.ok(not E.gives(E.format_tokens("%s expected, got %s"), "kernel parameter 3: f32 (4 bytes) expected, got 1.5"),
    "nor does a string's take a phrase that the code does not write")
end)

T.test("a message built from several formats counts; one with a phrase the code lost does not", function()
  local real = "bad argument #2 to 'k:launch' (scale<2> parameter 1 (float* x): u64 (8 bytes) expected, got 1.5 " ..
    "(not an integer))"
  local ok, out = check(replaced(good, real, real))
  T.ok(ok, "the name of the parameter is given by a format of its own: " .. out)
  local stale = real:gsub("scale<2> parameter 1 %(float%* x%)", "kernel parameter 1")
  ok, out = check(replaced(good, real, stale))
  T.ok(not ok and out:find(stale, 1, true), "the old wording is reported: " .. out)
end)

T.test("the forms of an example: lauxlib's wrappers, a field, a function-name prefix", function()
  local forms = E.forms(E.example_tokens("bad argument #2 to 'd:copy_from' (field 'count': integer expected, got x)"))
  T.eq(#forms, 3)
  T.eq(forms[3].tokens, "integer expected, got x")
  T.eq(forms[3].names[1], "d:copy_from")
  forms = E.forms(E.example_tokens("calling 'h:fill' on bad self (h:fill: cuda.host was freed)"))
  T.eq(forms[#forms].tokens, "cuda.host was freed")
  T.eq(forms[#forms].fn, "h:fill")
end)

-- A made-up tree: one binding, one Lua module, a CPU and a GPU test, a description.
T.test("on a made-up tree each way of being raised counts, and only those", function()
  local root = os.tmpname()
  os.remove(root)
  assert(os.execute("mkdir -p " .. root .. "/bindings " .. root .. "/host " .. root .. "/lua/gpulab " ..
    root .. "/tests/lua " .. root .. "/docs"))
  T.write(root .. "/lua/gpulab/apidoc.lua", T.read("lua/gpulab/apidoc.lua"))
  T.write(root .. "/bindings/thing.c", [[
#define FN "cuda.thing"
static int l_thing(lua_State *L) {
    if (n <= 0) gl_argerror(L, 1, FN, "size must be positive, got %lld", n);
    if (busy) luaL_error(L, FN ": busy (%d jobs queued)", jobs);
    lua_pushfstring(L, "%s: waited %f s", FN, t);
    luaL_addstring(&b, " (the queue is still full)");
    return 0;
}
]])
  T.write(root .. "/lua/gpulab/thing.lua", 'local function f(x) error("thing.run: no " .. x .. " configured") end\n')
  T.write(root .. "/tests/thing.cmake", "gl_add_lua_test(thing_cpu tests/lua/test_thing.lua FAKE)\n" ..
    "# gl_add_lua_test(thing_old tests/lua/test_old.lua)\n" ..
    "gl_add_lua_test(thing_gpu tests/lua/gpu_thing.lua GPU)\n")
  T.write(root .. "/tests/lua/test_thing.lua", 'T.raises(function() end, "cuda.thing: closed by the driver")\n')
  T.write(root .. "/tests/lua/gpu_thing.lua", 'T.raises(function() end, "cuda.thing: only seen on a GPU")\n')
  local function entry(errors)
    local quoted = {}
    for i, e in ipairs(errors) do quoted[i] = string.format("%q", e) end
    return '{ "cuda.thing", sig = "cuda.thing(n)", summary = "a thing", errors = { ' ..
      table.concat(quoted, ", ") .. " } }"
  end
  T.write(root .. "/docs/api.lua", 'return { title = "t", intro = "Argument errors read ' ..
    "`bad argument #1 to 'cuda.other' (size must be positive, got 0)`" .. '.", sections = { ' ..
    '{ title = "Things", level = 2, entries = { ' .. entry({
      "bad argument #1 to 'cuda.thing' (size must be positive, got 0)",  -- a C format
      "cuda.thing: busy (… jobs queued)",                                 -- behind the FN macro
      "thing.run: no <what> configured",                                   -- a Lua string
      "cuda.thing: closed by the driver",                                  -- a CPU test expects it
      "cuda.thing: waited … s… (the queue is still full)",                 -- pieces
      "cuda.thing: only seen on a GPU",                                    -- a GPU test: not counted
      "bad argument #1 to 'cuda.thing' (size must be negative, got 0)",   -- a changed word
    }) .. " } } } }\n")
  local problems, n, report = E.check(root, root .. "/docs/api.lua")
  os.execute("rm -rf " .. root)
  T.eq(n, 8, "seven listed texts and one in the intro")
  local how = {}
  for _, r in ipairs(report) do how[r.text] = r.how or "-" end
  T.ok(how["bad argument #1 to 'cuda.thing' (size must be positive, got 0)"]:find("^format bindings/thing.c:3"),
    "a C format")
  T.ok(how["cuda.thing: busy (… jobs queued)"]:find("^format bindings/thing.c:4"), "a format behind FN")
  T.ok(how["thing.run: no <what> configured"]:find("^format lua/gpulab/thing.lua:1"), "a Lua string")
  T.ok(how["cuda.thing: closed by the driver"]:find("^test tests/lua/test_thing.lua:1"), "a CPU test's expectation")
  T.ok(how["cuda.thing: waited … s… (the queue is still full)"]:find("^pieces "), "pieces of a built message")
  T.eq(#problems, 3, table.concat(problems, "\n"))
  local all = table.concat(problems, "\n")
  T.ok(all:find("cuda.thing: no gpulab code raises \"cuda.thing: only seen on a GPU\"", 1, true), all)
  T.ok(all:find("cuda.thing: no gpulab code raises \"bad argument #1 to 'cuda.thing' (size must be negative",
    1, true), all)
  T.ok(all:find("intro: no gpulab code raises \"bad argument #1 to 'cuda.other'", 1, true), all)
end)

os.remove(TMP)
T.done()
