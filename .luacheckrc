std = "lua54"
read_globals = { "cuda" }
max_line_length = 120
