-- gpulab.json — a JSON writer for lab results, and a strict reader (tests and tools read the
-- results back with it).
--
-- Encoding rules: object keys are sorted, so two runs diff cleanly; NaN and ±inf become null
-- (JSON has no spelling for them); integers print as integers and floats with enough digits
-- to read back the same double. A table is an array when its keys are exactly 1..n (an empty
-- table is an object unless marked with json.array()); mixed or non-string keys are an error.
-- Strings are written as UTF-8: a byte that starts no valid UTF-8 sequence becomes U+FFFD.
local output = require("gpulab.output")

local json = {}

local array_mark = setmetatable({}, { __mode = "k" })

-- Marks `t` to encode as an array even when empty; returns t.
function json.array(t)
  t = t or {}
  array_mark[t] = true
  return t
end

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
}

local function encode_string(s)
  -- control characters (and DEL) are escaped; UTF-8 passes through, and a byte that starts no
  -- valid UTF-8 sequence (binary data, a label cut inside "µ") becomes U+FFFD: JSON is UTF-8
  return '"' .. output.valid_utf8(s):gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function encode_number(n)
  if n ~= n or n == math.huge or n == -math.huge then return "null" end
  if math.type(n) == "integer" then return string.format("%d", n) end
  if n == math.floor(n) and math.abs(n) < 2 ^ 53 then return string.format("%.1f", n) end
  -- shortest of the round-tripping forms
  local s = string.format("%.15g", n)
  if tonumber(s) ~= n then s = string.format("%.17g", n) end
  return s
end

-- Returns "array", n or "object" for a table; raises on keys JSON cannot represent.
local function classify(t, path)
  local n, count = 0, 0
  for k in pairs(t) do
    count = count + 1
    if math.type(k) == "integer" and k >= 1 then
      if k > n then n = k end
    elseif type(k) ~= "string" then
      error(string.format("json.encode: %s: key of type %s cannot be encoded", path, type(k)), 0)
    end
  end
  if count == 0 then return array_mark[t] and "array" or "object", 0 end
  if n == count then return "array", n end
  if n == 0 then return "object", 0 end
  error(string.format("json.encode: %s: table mixes list and name keys (or has holes)", path), 0)
end

local function encode_value(v, out, indent, depth, path, seen)
  local ty = type(v)
  if ty == "nil" then
    out[#out + 1] = "null"
  elseif ty == "boolean" then
    out[#out + 1] = tostring(v)
  elseif ty == "number" then
    out[#out + 1] = encode_number(v)
  elseif ty == "string" then
    out[#out + 1] = encode_string(v)
  elseif ty == "table" then
    if seen[v] then error("json.encode: " .. path .. ": the table contains itself", 0) end
    seen[v] = true
    local kind, n = classify(v, path)
    local nl = indent and ("\n" .. string.rep(indent, depth + 1)) or ""
    local close_nl = indent and ("\n" .. string.rep(indent, depth)) or ""
    local colon = indent and ": " or ":"
    if kind == "array" then
      if n == 0 then
        out[#out + 1] = "[]"
      else
        out[#out + 1] = "["
        for i = 1, n do
          if i > 1 then out[#out + 1] = "," end
          out[#out + 1] = nl
          encode_value(v[i], out, indent, depth + 1, path .. "[" .. i .. "]", seen)
        end
        out[#out + 1] = close_nl .. "]"
      end
    else
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = k end
      table.sort(keys)
      if #keys == 0 then
        out[#out + 1] = "{}"
      else
        out[#out + 1] = "{"
        for i, k in ipairs(keys) do
          if i > 1 then out[#out + 1] = "," end
          out[#out + 1] = nl .. encode_string(k) .. colon
          encode_value(v[k], out, indent, depth + 1, path .. "." .. k, seen)
        end
        out[#out + 1] = close_nl .. "}"
      end
    end
    seen[v] = nil
  else
    error(string.format("json.encode: %s: a %s cannot be encoded", path, ty), 0)
  end
end

-- json.encode(value [, {indent="  "}]) --> string
function json.encode(v, opts)
  local indent = opts and opts.indent
  if indent ~= nil and type(indent) ~= "string" then
    error("json.encode: option 'indent' must be a string", 2)
  end
  local out = {}
  encode_value(v, out, indent, 0, "value", {})
  return table.concat(out)
end

-- ---- reader -------------------------------------------------------------------------------

local function decode_error(s, pos, what)
  local line = select(2, s:sub(1, pos):gsub("\n", "")) + 1
  error(string.format("json.decode: %s at byte %d (line %d)", what, pos, line), 0)
end

local function skip_ws(s, pos)
  return s:find("[^ \t\r\n]", pos) or #s + 1
end

local decode_value

local function decode_string(s, pos)
  -- pos is at the opening quote
  local parts, i = {}, pos + 1
  while true do
    local j = s:find('["\\%c]', i)
    if not j then decode_error(s, pos, "unterminated string") end
    parts[#parts + 1] = s:sub(i, j - 1)
    local c = s:sub(j, j)
    if c == '"' then return table.concat(parts), j + 1 end
    if c ~= "\\" then decode_error(s, j, "control character in string") end
    local e = s:sub(j + 1, j + 1)
    local simple = ({ ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" })[e]
    if simple then
      parts[#parts + 1] = simple
      i = j + 2
    elseif e == "u" then
      local hex = s:match("^%x%x%x%x", j + 2)
      if not hex then decode_error(s, j, "bad \\u escape") end
      local cp = tonumber(hex, 16)
      i = j + 6
      if cp >= 0xD800 and cp <= 0xDBFF then
        local lo = s:match("^\\u(%x%x%x%x)", i)
        lo = lo and tonumber(lo, 16)
        if not lo or lo < 0xDC00 or lo > 0xDFFF then decode_error(s, j, "lone surrogate") end
        cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
        i = i + 6
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        decode_error(s, j, "lone surrogate")
      end
      parts[#parts + 1] = utf8.char(cp)
    else
      decode_error(s, j, "bad escape")
    end
  end
end

local function decode_number(s, pos)
  -- the JSON grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [-+]? [0-9]+)?
  local p = pos
  if s:sub(p, p) == "-" then p = p + 1 end
  local int = s:match("^0", p) or s:match("^[1-9]%d*", p)
  if not int then decode_error(s, pos, "bad number") end
  p = p + #int
  local is_float = false
  if s:sub(p, p) == "." then
    local frac = s:match("^%d+", p + 1)
    if not frac then decode_error(s, pos, "bad number") end
    p, is_float = p + 1 + #frac, true
  end
  if s:match("^[eE]", p) then
    local e = s:match("^[eE][-+]?%d+", p)
    if not e then decode_error(s, pos, "bad number") end
    p, is_float = p + #e, true
  end
  local text = s:sub(pos, p - 1)
  local v = tonumber(text)
  if is_float then v = v + 0.0 end
  return v, p
end

local literals = { ["true"] = true, ["false"] = false }

decode_value = function(s, pos, null)
  pos = skip_ws(s, pos)
  local c = s:sub(pos, pos)
  if c == "{" then
    local obj = {}
    pos = skip_ws(s, pos + 1)
    if s:sub(pos, pos) == "}" then return obj, pos + 1 end
    while true do
      if s:sub(pos, pos) ~= '"' then decode_error(s, pos, "expected a string key") end
      local k
      k, pos = decode_string(s, pos)
      pos = skip_ws(s, pos)
      if s:sub(pos, pos) ~= ":" then decode_error(s, pos, "expected ':'") end
      local v
      v, pos = decode_value(s, pos + 1, null)
      obj[k] = v
      pos = skip_ws(s, pos)
      local d = s:sub(pos, pos)
      if d == "}" then return obj, pos + 1 end
      if d ~= "," then decode_error(s, pos, "expected ',' or '}'") end
      pos = skip_ws(s, pos + 1)
    end
  elseif c == "[" then
    local arr, n = json.array({}), 0
    pos = skip_ws(s, pos + 1)
    if s:sub(pos, pos) == "]" then return arr, pos + 1 end
    while true do
      local v
      v, pos = decode_value(s, pos, null)
      n = n + 1
      arr[n] = v -- by position: a null leaves a hole, later items keep their index
      pos = skip_ws(s, pos)
      local d = s:sub(pos, pos)
      if d == "]" then return arr, pos + 1 end
      if d ~= "," then decode_error(s, pos, "expected ',' or ']'") end
      pos = pos + 1
    end
  elseif c == '"' then
    return decode_string(s, pos)
  elseif c == "-" or c:match("%d") then
    return decode_number(s, pos)
  else
    for word, v in pairs(literals) do
      if s:sub(pos, pos + #word - 1) == word then return v, pos + #word end
    end
    if s:sub(pos, pos + 3) == "null" then return null, pos + 4 end
    decode_error(s, pos, pos > #s and "unexpected end of input" or "unexpected character")
  end
end

-- json.decode(text [, null_value]) --> value. Strict: one value, nothing after it.
-- null decodes to null_value (default nil; pass json.null to keep array positions).
json.null = setmetatable({}, { __tostring = function() return "null" end })

function json.decode(s, null)
  if type(s) ~= "string" then error("json.decode: text must be a string", 2) end
  local v, pos = decode_value(s, 1, null)
  pos = skip_ws(s, pos)
  if pos <= #s then decode_error(s, pos, "text after the value") end
  return v
end

return json
