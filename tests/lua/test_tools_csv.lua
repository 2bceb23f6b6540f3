-- tools/csv.lua: the CSV lines ncu writes, split as the comparison tools read them.
local T = dofile("tests/lua/t.lua")
local csv = dofile("tools/csv.lua")

-- "N:f1|f2|...": the field count and the fields, for one comparison per line
local function split(line)
  local f = csv.fields(line)
  return #f .. ":" .. table.concat(f, "|")
end

T.test("plain, quoted and empty fields", function()
  T.eq(split('a,b,c'), "3:a|b|c")
  T.eq(split('"ID","Metric Name","Metric Value"'), "3:ID|Metric Name|Metric Value")
  T.eq(split('"0","dram__bytes_read.sum","1,048,576"'), "3:0|dram__bytes_read.sum|1,048,576")
  T.eq(split('a,,b,'), "4:a||b|")
  T.eq(split(''), "1:")
  T.eq(split(','), "2:|")
  T.eq(split('""'), "1:")
end)

T.test("a doubled quote inside a quoted field is one quote", function()
  T.eq(split('"say ""hi""",x'), '2:say "hi"|x')
  T.eq(split('"""",y'), '2:"|y')
  T.eq(split('"a,""b"",c"'), '1:a,"b",c')
end)

T.test("a quote left open takes the rest of the line", function()
  T.eq(split('x,"open, to the end'), "2:x|open, to the end")
end)

T.test("text after a closing quote up to the comma is dropped", function()
  T.eq(split('"a"b,c'), "2:a|c")
end)

T.done()
