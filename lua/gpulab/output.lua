-- gpulab.output — what the harness writes: text that is valid UTF-8, and files that are tried
-- before a lab measures anything and never left half-written after it.
--
--   output.valid_utf8(s)        --> s, every byte that starts no valid UTF-8 sequence as U+FFFD
--   output.is_dir(path)         --> whether path is a folder
--   output.probe(path)          --> true | false, why   (can path take an output? content kept)
--   output.write(path, text)    --> true | false, why   (on failure the earlier file is put back)
local output = {}

local ENOENT = 2 -- io.open's third result when the path does not exist (Linux)

-- s with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD: JSON, XML and
-- HTML files must be UTF-8, and a label cut with string.sub can end inside a character ("µs").
function output.valid_utf8(s)
  local out, from = {}, 1
  while true do
    local _, bad = utf8.len(s, from)
    if not bad then break end
    out[#out + 1] = s:sub(from, bad - 1)
    out[#out + 1] = "\u{FFFD}"
    from = bad + 1
  end
  if from == 1 then return s end
  out[#out + 1] = s:sub(from)
  return table.concat(out)
end

function output.is_dir(path)
  local f = io.open(path .. "/.", "r") -- "path/." opens only when path is a folder
  if f then f:close() end
  return f ~= nil
end

-- The names of the process's own standard output and error: the lab's report is printed there,
-- so a file written over it would be interleaved with it (or truncate it under a redirection).
local OWN_STREAMS = { ["-"] = true, ["/dev/stdout"] = true, ["/dev/stderr"] = true, ["/dev/fd/1"] = true,
  ["/dev/fd/2"] = true, ["/proc/self/fd/1"] = true, ["/proc/self/fd/2"] = true }

-- Whether `path` can take an output, tried by writing without changing what is there:
-- - a path that does not exist is created with one byte and removed again;
-- - an existing file gets its first byte written back in place (an empty one, or a device such as
--   /dev/null or /dev/full, gets a byte that is cut off again; /dev/full fails at the flush);
-- - a pipe or a terminal (no seek) only has to open: a byte written there would be output.
-- An existing path is opened "r+", which neither truncates a file nor blocks on a FIFO without
-- a reader, and is never read past its size (/dev/zero has none). --> true | false, why
function output.probe(path)
  if OWN_STREAMS[path] then
    return false, path .. ": is the lab's own standard output or error, where its report goes; give a file name"
  end
  if output.is_dir(path) then return false, path .. ": is a folder" end
  local f, err, code = io.open(path, "r+")
  local existed = f ~= nil
  if not f then
    if code ~= ENOENT then return false, tostring(err) end
    f, err = io.open(path, "w")
    if not f then return false, tostring(err) end
  end
  local size = 0
  if existed then size = f:seek("end") end
  if size == nil then -- a pipe or a terminal
    f:close()
    return true
  end
  local ok, werr = true, nil
  if size > 0 then
    f:seek("set", 0)
    local first = f:read(1)
    if first then
      f:seek("set", 0)
      ok, werr = f:write(first)
    end
  else
    ok, werr = f:write("\n")
  end
  if ok then ok, werr = f:flush() end
  local closed, cerr = f:close()
  if not existed then
    os.remove(path)
  elseif size == 0 then
    local t = io.open(path, "w") -- the probe byte cut off again: the file is empty as it was
    if t then t:close() end
  end
  if not (ok and closed) then return false, path .. ": " .. tostring(werr or cerr) end
  return true
end

-- What path holds now, when it is a file that can be read back (its size is known): nil for a
-- path that does not exist, a pipe or a device; "" for an empty file. The second result says
-- whether the path existed.
local function current_text(path)
  local f, _, code = io.open(path, "r+")
  if not f then return nil, code ~= ENOENT end
  local size = f:seek("end")
  local text = nil
  if size and size > 0 then
    f:seek("set", 0)
    text = f:read(size)
  elseif size == 0 then
    text = ""
  end
  f:close()
  return text, true
end

local function write_all(path, text)
  local f, err = io.open(path, "w")
  if not f then return false, err end
  local wrote, werr = f:write(text)
  local closed, cerr = f:close() -- a full disk can show only at the flush of the close
  if not (wrote and closed) then return false, werr or cerr end
  return true
end

-- Writes the whole text to path. When that fails (a full disk, a file size limit), what the path
-- held before is written back, and a file that did not exist is removed: a failed run never
-- leaves the results of an earlier one half-overwritten. --> true | false, why
function output.write(path, text)
  local before, existed = current_text(path)
  local ok, why = write_all(path, text)
  if ok then return true end
  why = tostring(why)
  if not existed then
    os.remove(path)
  elseif before then
    local back, berr = write_all(path, before)
    why = why .. (back and "; the earlier file was put back" or ("; the earlier file could not be put back: " ..
      tostring(berr)))
  end
  return false, why
end

return output
