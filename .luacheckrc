std = "lua54"
read_globals = { "cuda" }
max_line_length = 120
-- tests replace cuda's functions to reach the harness's fallbacks
files["tests"] = { globals = { "cuda" } }
-- the generated LuaLS stub (tools/gen_api.lua): declares the global, empty bodies, long doc lines
files["lua/gpulab/meta"] = { globals = { "cuda" }, unused_args = false, max_line_length = false, ignore = { "241" } }
