-- luacheck: globals from_script
from_script = "loaded"
