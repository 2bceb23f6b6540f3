-- gpulab.json: escaping, numbers (integers, floats that read back exactly, NaN/inf as null),
-- sorted keys, arrays versus objects, errors for what JSON cannot hold, and the strict reader.
-- Python's json module, where present, reads the writer's output as a second opinion.
local T = dofile("tests/lua/t.lua")
local json = require("gpulab.json")

T.test("scalars", function()
  T.eq(json.encode(nil), "null")
  T.eq(json.encode(true), "true")
  T.eq(json.encode(false), "false")
  T.eq(json.encode(0), "0")
  T.eq(json.encode(-42), "-42")
  T.eq(json.encode(math.maxinteger), "9223372036854775807")
  T.eq(json.encode(3.0), "3.0")
  T.eq(json.encode(0.1), "0.1")
  T.eq(json.encode(-2.5e-300), "-2.5e-300")
  T.eq(json.encode(0 / 0), "null")
  T.eq(json.encode(math.huge), "null")
  T.eq(json.encode(-math.huge), "null")
end)

T.test("floats read back to the same double", function()
  for _, v in ipairs({ 0.1, 1 / 3, 2 / 3, math.pi, 1e300, 5e-324, 123456789.123456789, -0.3, 2 ^ 60 + 0.0 }) do
    T.eq(json.decode(json.encode(v)), v, string.format("%.17g", v))
  end
end)

T.test("strings: quotes, backslashes, control characters; UTF-8 untouched, other bytes U+FFFD", function()
  T.eq(json.encode('a"b\\c/d'), '"a\\"b\\\\c/d"')
  T.eq(json.encode("\n\r\t\b\f"), '"\\n\\r\\t\\b\\f"')
  T.eq(json.encode("\0\1\31\127"), '"\\u0000\\u0001\\u001f\\u007f"')
  T.eq(json.encode("µs → §1"), '"µs → §1"')
  local all = {}
  for i = 0, 127 do all[#all + 1] = string.char(i) end
  local s = table.concat(all)
  T.eq(json.decode(json.encode(s)), s)
  -- JSON is UTF-8: a byte that starts no character (binary data, a label cut inside "µ") is U+FFFD
  for i = 128, 255 do T.eq(json.decode(json.encode(string.char(i))), "\u{FFFD}", "byte " .. i) end
  T.eq(json.decode(json.encode(("µs"):sub(1, 1) .. "s")), "\u{FFFD}s")
end)

T.test("arrays and objects; keys sorted; empty tables", function()
  T.eq(json.encode({ 1, 2, 3 }), "[1,2,3]")
  T.eq(json.encode({ b = 1, a = 2, c = { z = true, y = false } }), '{"a":2,"b":1,"c":{"y":false,"z":true}}')
  T.eq(json.encode({}), "{}")
  T.eq(json.encode(json.array()), "[]")
  T.eq(json.encode({ json.array(), {} }), "[[],{}]")
  T.eq(json.encode({ 1, 0 / 0, 3 }), "[1,null,3]")
  T.eq(json.encode({ x = { 1, { y = "z" } } }, { indent = "  " }),
    '{\n  "x": [\n    1,\n    {\n      "y": "z"\n    }\n  ]\n}')
end)

T.test("what JSON cannot hold is an error naming where", function()
  T.raises(function() json.encode({ 1, 2, x = 3 }) end, "json.encode: value: table mixes list and name keys")
  T.raises(function() json.encode({ [1] = 1, [3] = 3 }) end, "or has holes")
  T.raises(function() json.encode({ a = { [1.5] = 1 } }) end, "json.encode: value.a: key of type number")
  T.raises(function() json.encode({ [true] = 1 }) end, "key of type boolean")
  T.raises(function() json.encode({ f = print }) end, "json.encode: value.f: a function cannot be encoded")
  T.raises(function() json.encode({ { co = coroutine.create(print) } }) end, "value[1].co: a thread")
  local t = {}
  t.self = { t }
  T.raises(function() json.encode(t) end, "json.encode: value.self[1]: the table contains itself")
  local shared = { 1 }
  T.eq(json.encode({ a = shared, b = shared }), '{"a":[1],"b":[1]}') -- shared, not cyclic
  T.raises(function() json.encode(1, { indent = 2 }) end, "option 'indent' must be a string")
end)

T.test("reader: the grammar, strictly", function()
  local v = json.decode(' { "a" : [ 1 , -2.5e3 , true , false , null , "x\\u00e9\\ud83d\\ude00\\n" ] , "b" : {} } ')
  T.eq(v.a[1], 1)
  T.eq(math.type(v.a[1]), "integer")
  T.eq(v.a[2], -2500.0)
  T.eq(math.type(v.a[2]), "float")
  T.eq(v.a[3], true)
  T.eq(v.a[4], false)
  T.eq(v.a[5], nil)
  T.eq(v.a[6], "xé😀\n") -- positions kept after a null
  T.eq(next(v.b), nil)
  T.eq(json.decode("[null]", json.null)[1], json.null)
  for _, bad in ipairs({ "", " ", "01", "1.", ".5", "1e", "+1", "-", "[1,]", "[1 2]", '{"a":1,}', '{"a" 1}', "{a:1}",
    '"\\x"', '"a', "[1] x", "nul", "tru", '"\\ud800"', '"\\udc00x"', '"tab\there"', "[", "{", "NaN", "Infinity" }) do
    T.ok(not pcall(json.decode, bad), "accepted: " .. bad)
  end
  local err = T.raises(function() json.decode('{\n"a": [1,\n 2,,]}') end, "json.decode: unexpected character")
  T.ok(err:find("line 3", 1, true), err)
  T.raises(function() json.decode(5) end, "json.decode: text must be a string")
end)

T.test("round trip of a lab-shaped result", function()
  local r = { name = "x", params = { rows = 8192, quick = true }, verdicts = { { claim = "c", verdict = "HOLDS" } },
    records = { series = { 1.5, 2.5 }, text = "a\"b" }, tables = json.array() }
  local again = json.decode(json.encode(r, { indent = "  " }))
  T.eq(json.encode(again), json.encode(r))
end)

T.test("python3's json module reads the output (when python3 exists)", function()
  if not os.execute("command -v python3 >/dev/null 2>&1") then
    print("python3 not found: second reader skipped")
    return
  end
  local doc = { s = "q\"\\\n\1µ", n = { 1, 2.5, 0 / 0, 1e300, -0.0 }, e = {}, a = json.array(), b = { t = true } }
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(json.encode(doc, { indent = "\t" }))
  f:close()
  local p = assert(io.popen("python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding=\"utf-8\")); " ..
    "print(json.dumps(d, sort_keys=True, separators=(\",\",\":\"), ensure_ascii=False))' " .. path))
  local out = p:read("a")
  local ok = p:close()
  os.remove(path)
  T.ok(ok, "python3 could not parse the output")
  T.eq(out, '{"a":[],"b":{"t":true},"e":{},"n":[1,2.5,null,1e+300,-0.0],"s":"q\\"\\\\\\n\\u0001µ"}\n')
end)

T.done()
