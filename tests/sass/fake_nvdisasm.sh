#!/bin/sh
# A stand-in for the CUDA disassembler, for tests: records its arguments and whether the cubin it
# was given carries line info, then acts as FAKE_NVDISASM_MODE says (print, fail, hang, or close:
# closes its output and then never ends).
last=""
for a in "$@"; do last=$a; done
if [ -n "${FAKE_NVDISASM_LOG:-}" ]; then
  if grep -aq nv_debug_line_sass "$last"; then li=yes; else li=no; fi
  echo "args=$* lineinfo=$li" >> "$FAKE_NVDISASM_LOG"
fi
case "${FAKE_NVDISASM_MODE:-print}" in
  print) cat "$FAKE_NVDISASM_TEXT" ;;
  fail) echo "nvdisasm fatal : Could not open input file" >&2; exit 2 ;;
  hang) sleep 30 ;;
  close) exec >/dev/null 2>&1; exec sleep 30 ;;
esac
