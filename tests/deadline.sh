#!/bin/sh
# deadline.sh SECONDS COMMAND [ARGS...] — runs a test with its own deadline, set below ctest's
# TIMEOUT (gl_deadline in CMakeLists.txt). ctest ends a test past its TIMEOUT with SIGKILL, which
# leaves no word of where it was; here, past SECONDS, the test and its children get SIGINT first
# (gpulab raises "interrupted!" with the Lua traceback, pty_expect prints the step it was at and
# the output so far), and SIGKILL only 10 s later.
secs=$1
shift
timeout --signal=INT --kill-after=10 "$secs" "$@"
rc=$?
if [ $rc = 124 ] || [ $rc = 137 ]; then
  echo "deadline.sh: '$*' ran past its deadline of $secs s and was interrupted$([ $rc = 137 ] && echo ', then killed'); what it was doing is printed above" >&2
fi
exit $rc
