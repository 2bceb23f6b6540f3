#!/usr/bin/env bash
# Checks README.md's two commands and .ci/run on a freshly bootstrapped Debian 12 root, as a new
# user would meet them: debootstrap --variant=minbase bookworm, the CUDA toolkit bind-mounted at
# /usr/local/cuda-13.0 with a /usr/local/cuda symlink, NO loader-path entry for it, a clean clone
# of the current branch. See docs/FRESH_MACHINE.md.
#
# Usage (as root, on a Debian or Ubuntu host with debootstrap and network access to a Debian mirror):
#   tools/fresh_root_check.sh [--root DIR] [--cuda DIR] [--rebootstrap] [readme|ci ...]
#     readme  README command 1 (install, build, run the main lab), then command 2 (tools/test.sh)
#     ci      .ci/run, in a second fresh copy of the bootstrapped root
#   Default: readme ci. DIR defaults to /work/fresh-root (base/ is the bootstrapped root, kept for
#   later runs; each step runs in a fresh copy of it, run-<step>/; logs/ holds the logs and the
#   summary). --cuda defaults to /usr/local/cuda-13.0.
#
# Every mount is made in a private mount namespace (unshare -m) and unmounted before the script
# ends; none is visible outside it or survives it.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
root=/work/fresh-root cuda=/usr/local/cuda-13.0 rebootstrap=0 steps=()
while [ $# -gt 0 ]; do
  case $1 in
  --root) root=$2; shift 2 ;;
  --cuda) cuda=$2; shift 2 ;;
  --rebootstrap) rebootstrap=1; shift ;;
  readme | ci) steps+=("$1"); shift ;;
  -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fresh_root_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || steps=(readme ci)
[ "$(id -u)" = 0 ] || { echo "fresh_root_check.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
[ -d "$cuda/include" ] || { echo "fresh_root_check.sh: no CUDA toolkit at $cuda" >&2; exit 2; }

# Re-run inside a private mount namespace: mounts cannot leak out, even if this script is killed.
if [ "${GL_FRESH_NS:-}" != 1 ]; then
  GL_FRESH_NS=1 exec unshare -m --propagation private "$0" --root "$root" --cuda "$cuda" \
    $([ $rebootstrap = 1 ] && echo --rebootstrap) "${steps[@]}"
fi

base=$root/base logs=$root/logs
mkdir -p "$root" "$logs"
summary=$logs/summary.md
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$logs/check.log"; }

if [ $rebootstrap = 1 ] || [ ! -x "$base/bin/sh" ]; then
  rm -rf "$base"
  log "debootstrap --variant=minbase bookworm $base"
  debootstrap --variant=minbase bookworm "$base" >"$logs/debootstrap.log" 2>&1
fi

mounted=()
unmount_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true; done
  mounted=()
}
trap unmount_all EXIT

# A fresh copy of the bootstrapped root with /proc, /sys, /dev and the toolkit mounted, the
# network's resolver, no service starts, and a clean clone of this branch at /root/gpulab.
make_root() {
  local run=$1
  if grep -q " $run" /proc/mounts; then echo "fresh_root_check.sh: something is mounted under $run" >&2; exit 1; fi
  rm -rf "$run"
  cp -a "$base" "$run"
  mount -t proc proc "$run/proc"; mounted+=("$run/proc")
  mount --rbind /sys "$run/sys"; mount --make-rslave "$run/sys"; mounted+=("$run/sys")
  mount --rbind /dev "$run/dev"; mount --make-rslave "$run/dev"; mounted+=("$run/dev")
  mkdir -p "$run/usr/local/cuda-13.0"
  mount --bind "$cuda" "$run/usr/local/cuda-13.0"; mount -o remount,bind,ro "$run/usr/local/cuda-13.0"
  mounted+=("$run/usr/local/cuda-13.0")
  ln -sfn cuda-13.0 "$run/usr/local/cuda"
  cp /etc/resolv.conf "$run/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$run/usr/sbin/policy-rc.d"; chmod +x "$run/usr/sbin/policy-rc.d"
  if grep -rqs cuda "$run/etc/ld.so.conf" "$run/etc/ld.so.conf.d"; then
    echo "fresh_root_check.sh: the fresh root has a loader-path entry for CUDA" >&2; exit 1
  fi
  local branch
  branch=$(git -C "$src" rev-parse --abbrev-ref HEAD)
  git clone -q --no-hardlinks --branch "$branch" "$src" "$run/root/gpulab"
  log "fresh root $run: clone of $branch at $(git -C "$run/root/gpulab" rev-parse --short HEAD)"
}

# Runs a shell command in the root as root with a login-like, clean environment.
in_root() {
  local run=$1 cmd=$2
  chroot "$run" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=xterm LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/bash -c "cd /root/gpulab && $cmd"
}

# README's commands, exactly as written there.
readme_command() {
  sed -n "/^apt-get update && /p" "$src/README.md" | grep -F -- "$1"
}
cmd_lab=$(readme_command './build/gpulab labs/')
cmd_tests=$(readme_command 'tools/test.sh')
[ "$(wc -l <<<"$cmd_lab")" = 1 ] && [ "$(wc -l <<<"$cmd_tests")" = 1 ] ||
  { echo "fresh_root_check.sh: README.md does not have its two commands" >&2; exit 1; }

failures=0
suite_ran() {
  [ "$(grep -c '^100% tests passed, 0 tests failed' "$1")" = 2 ] &&
    [ "$(grep -c '^== fuzz_' "$1")" = "$(ls "$src"/tests/fuzz/fuzz_*.c | wc -l)" ]
}
# step NAME ROOT COMMAND CHECK: runs COMMAND in ROOT, logs it, times it, records the result.
step() {
  local name=$1 run=$2 cmd=$3 check=$4 start rc verdict
  log "== $name: $cmd"
  start=$(date +%s)
  set +e
  in_root "$run" "$cmd" >"$logs/$name.log" 2>&1
  rc=$?
  set -e
  local secs=$(($(date +%s) - start))
  if [ $rc = 0 ] && eval "$check"; then verdict=PASS; else verdict=FAIL; failures=$((failures + 1)); fi
  log "   $name: $verdict (exit $rc, $secs s); log $logs/$name.log"
  printf '| %s | %s | exit %s | %s s | %s |\n' "$name" "$verdict" "$rc" "$secs" \
    "$(grep -E 'tests passed|tests failed' "$logs/$name.log" | tr '\n' ' ' | sed 's/ *$//')" >>"$summary"
}

{
  echo "fresh Debian 12 root check of $(git -C "$src" rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '| step | result | exit | time | ctest |'
  echo '|---|---|---|---|---|'
} >"$summary"

for s in "${steps[@]}"; do
  run=$root/run-$s
  make_root "$run"
  case $s in
  readme)
    # Without a GPU the lab compiles its kernels, says there is no device and exits 0.
    step readme-lab "$run" "$cmd_lab" \
      "grep -q 'kernels/tma_double_buffer.cu compiled' \"\$logs/readme-lab.log\" && grep -q 'there is no device' \"\$logs/readme-lab.log\""
    # tools/test.sh: luacheck, ctest, ctest on the ASan build, the fuzz targets; set -e ends it at
    # the first failure, so exit 0 with both ctest summaries and every fuzz target is a pass.
    step readme-tests "$run" "$cmd_tests" "suite_ran \"\$logs/readme-tests.log\""
    ;;
  ci)
    step ci-run "$run" ".ci/run" "suite_ran \"\$logs/ci-run.log\""
    ;;
  esac
  unmount_all
done

cat "$summary" | tee -a "$logs/check.log"
[ $failures = 0 ]
