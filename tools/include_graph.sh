#!/bin/sh
# include_graph.sh [ROOT] — the include graph of bindings/ and host/ as text, one line per file:
#     layer/file -> its "quoted" includes   [reaches: lua cuda]
# "reaches" follows quoted includes transitively and names the outside APIs the file sees
# (<lua.h>/<lauxlib.h>/<lualib.h> = lua, <cuda.h>/<nvrtc.h> = cuda). The last lines list every
# include that crosses a layer: "uses" for host/ -> bindings/ (the host embeds the bindings),
# "FORBIDDEN" for bindings/ -> host/.
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
awk '
function base(p) { sub(/.*\//, "", p); return p }
FNR == 1 { f = FILENAME; files[++n] = f; dir[base(f)] = f; sub(/\/[^\/]*$/, "", dir[base(f)]) }
/^[ \t]*#[ \t]*include[ \t]*"/ {
    h = $0; sub(/^[^"]*"/, "", h); sub(/".*/, "", h)
    inc[f] = inc[f] " " h
}
/^[ \t]*#[ \t]*include[ \t]*<(lua|lauxlib|lualib)\.h>/ { api[f] = api[f] " lua" }
/^[ \t]*#[ \t]*include[ \t]*<(cuda|nvrtc)\.h>/ { api[f] = api[f] " cuda" }
function owner(h,   i) { for (i = 1; i <= n; i++) if (base(files[i]) == h) return files[i]; return "" }
function reach(f, depth,   k, parts, m, o) {
    if (depth > 20 || (f in visiting)) return
    visiting[f] = 1
    if (api[f] ~ /lua/) seen["lua"] = 1
    if (api[f] ~ /cuda/) seen["cuda"] = 1
    m = split(inc[f], parts, " ")
    for (k = 1; k <= m; k++) { o = owner(parts[k]); if (o != "") reach(o, depth + 1) }
}
END {
    for (i = 1; i <= n; i++) {
        f = files[i]; delete seen; delete visiting; reach(f, 0)
        r = ""; if ("lua" in seen) r = r " lua"; if ("cuda" in seen) r = r " cuda"
        line = f " ->" (inc[f] == "" ? " (none)" : inc[f])
        printf "%-22s%s\n", f, substr(line, length(f) + 1) (r == "" ? "" : "   [reaches:" r "]")
    }
    crossings = 0
    for (i = 1; i <= n; i++) {
        f = files[i]; split(f, fp, "/"); m = split(inc[f], parts, " ")
        for (k = 1; k <= m; k++) {
            o = owner(parts[k]); if (o == "") continue
            split(o, op, "/")
            if (op[1] == fp[1]) continue
            if (fp[1] == "bindings") { printf "FORBIDDEN: %s -> %s (bindings/ must not know the host)\n", f, o; forbidden++ }
            else printf "uses: %s -> %s\n", f, o
            crossings++
        }
    }
    printf "layer crossings: %d, of them bindings -> host: %d\n", crossings, forbidden + 0
}' $(ls bindings/*.h bindings/*.c host/*.h host/*.c)
