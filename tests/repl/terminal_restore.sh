#!/bin/sh
# A REPL ended by SIGTERM or SIGHUP while it waits at the prompt (the terminal in raw mode) gives
# the terminal its settings back and has saved the history of what was typed before.
# Usage: terminal_restore.sh GPULAB_BINARY WORKDIR
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
sock=none
trap 'tmux -L "$sock" kill-server 2>/dev/null || true' EXIT
wait_for() { # file, text: up to 20 s
  i=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 200 ]; then echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2 2>/dev/null; exit 1; fi
    sleep 0.1
  done
}
for sig in TERM HUP; do
  sock="gl-restore-$$-$sig" # one server each: a new session right after kill-server can race it
  rm -f "$work/stty.txt" "$work/pid"
  # the pane runs gpulab, then records the terminal settings gpulab left behind
  tmux -L "$sock" new-session -d -x 100 -y 30 \
    "env XDG_STATE_HOME='$work/state' GPULAB_LIBCUDA=/nonexistent/libcuda.so sh -c 'echo \$\$ > \"$work/pid\"; exec \"$bin\"'; stty -a > '$work/stty.txt'; sleep 30"
  wait_for "$work/pid" .
  tmux -L "$sock" send-keys "marker_$sig = 1" Enter
  wait_for "$work/state/gpulab/history" "marker_$sig"
  sleep 0.3 # back at the prompt, in raw mode
  kill -$sig "$(cat "$work/pid")"
  wait_for "$work/stty.txt" "icanon"
  if grep -q -- "-icanon" "$work/stty.txt" || grep -q -- " -echo " "$work/stty.txt"; then
    echo "SIG$sig at the prompt left the terminal raw:" >&2
    cat "$work/stty.txt" >&2
    exit 1
  fi
  tmux -L "$sock" kill-server 2>/dev/null || true
done
echo "terminal restored after SIGTERM and SIGHUP"
