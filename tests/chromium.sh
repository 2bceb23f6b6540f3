# Sourced by the browser checks (svg_check.sh, html_check.sh) after they set $out: finds headless
# Chromium (exit 77, skipped, without one) and defines chrome ARGS... and fail MESSAGE.
browser=
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "skipped: chromium not found"
  exit 77
fi

fail() { echo "FAIL: $*"; exit 1; }

# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
chrome() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$out/profile" "$@" 2>>"$out/chromium.log"
}
