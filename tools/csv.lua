-- One line of CSV as ncu writes it (--csv): fields separated by commas; a field in double quotes may
-- hold commas, and a doubled quote inside it stands for one quote. Every field is kept, empty ones
-- too ("a,,b," is four fields); a quote left open takes the rest of the line. Loaded with dofile by
-- tools/pcsample_ncu.lua and tools/profile_check.lua (and tested by tests/lua/test_tools_csv.lua).
local csv = {}

-- the quoted field whose opening quote is at `open`: its text and the position after its closing quote
local function quoted(line, open)
  local parts, pos = {}, open + 1
  while true do
    local close = line:find('"', pos, true)
    if not close then
      parts[#parts + 1] = line:sub(pos)
      return table.concat(parts), #line + 1
    end
    parts[#parts + 1] = line:sub(pos, close - 1)
    if line:sub(close + 1, close + 1) ~= '"' then return table.concat(parts), close + 1 end
    parts[#parts + 1] = '"'
    pos = close + 2
  end
end

function csv.fields(line)
  local out, pos = {}, 1
  while true do
    local field, after
    if line:sub(pos, pos) == '"' then
      field, after = quoted(line, pos)
      after = line:find(",", after, true) or #line + 1 -- anything between the quote and the comma is dropped
    else
      after = line:find(",", pos, true) or #line + 1
      field = line:sub(pos, after - 1)
    end
    out[#out + 1] = field
    if after > #line then return out end
    pos = after + 1
  end
end

return csv
