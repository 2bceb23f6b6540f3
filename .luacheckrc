std = "lua54"
read_globals = { "cuda" }
max_line_length = 120
-- tests replace cuda's functions to reach the harness's fallbacks
files["tests"] = { globals = { "cuda" } }
