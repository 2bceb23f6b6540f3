# REPL tests: each tests/repl/NAME.pty drives gpulab through a real pseudo-terminal with
# pty_expect (tests/pty/pty_expect.c). History goes to a fresh per-test XDG_STATE_HOME.
add_executable(pty_expect ${CMAKE_SOURCE_DIR}/tests/pty/pty_expect.c)
target_link_libraries(pty_expect PRIVATE util)

# gl_add_repl_test(NAME [ARGS command...] [ENV k=v...]): ARGS defaults to the gpulab binary.
function(gl_add_repl_test name)
  cmake_parse_arguments(R "" "" "ARGS;ENV" ${ARGN})
  if(NOT R_ARGS)
    set(R_ARGS $<TARGET_FILE:gpulab>)
  endif()
  set(state ${CMAKE_BINARY_DIR}/repl-state/${name})
  add_test(NAME repl_${name}
           COMMAND pty_expect ${CMAKE_SOURCE_DIR}/tests/repl/${name}.pty ${R_ARGS}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(repl_${name} PROPERTIES LABELS cpu TIMEOUT 60 ENVIRONMENT
    "TERM=xterm;XDG_STATE_HOME=${state};TESTTMP=${state};GPULAB=$<TARGET_FILE:gpulab>;GPULAB_LIBCUDA=/nonexistent/libcuda.so;GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;${R_ENV}")
endfunction()

gl_add_repl_test(values)
gl_add_repl_test(multiline)
gl_add_repl_test(pretty)
gl_add_repl_test(errors)
gl_add_repl_test(interrupt)
gl_add_repl_test(completion)
gl_add_repl_test(commands)
gl_add_repl_test(restart)
gl_add_repl_test(poisoned)
gl_add_repl_test(interactive_script ARGS $<TARGET_FILE:gpulab> -i tests/repl/defs.lua one two)
# Two sessions in one terminal: the second recalls the first one's input (Ctrl-P).
gl_add_repl_test(history ARGS sh -c "rm -rf \"$XDG_STATE_HOME\" && \"$0\" && \"$0\"" $<TARGET_FILE:gpulab>)
gl_add_repl_test(history_unwritable ENV XDG_STATE_HOME=/proc/self/no-such-dir)
