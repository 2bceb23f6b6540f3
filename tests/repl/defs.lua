from_script = "loaded"
