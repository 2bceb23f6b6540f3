std = "lua54"
globals = { "cuda" }
max_line_length = 120
