# valgrind memcheck over the CLI, a compile session and two REPL sessions: any error or
# definite leak fails the test (exit 9). Not in the sanitizer build (the tools do not mix).
find_program(VALGRIND valgrind)
if(VALGRIND AND NOT GPULAB_SANITIZE AND NOT GPULAB_FUZZ)
  set(vg ${VALGRIND} -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite
         --show-leak-kinds=definite)
  gl_deadline(deadline 600)
  add_test(NAME valgrind_cli COMMAND ${deadline} ${vg} $<TARGET_FILE:gpulab> tests/lua/test_core.lua
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME valgrind_compile COMMAND ${deadline} ${vg} $<TARGET_FILE:gpulab> tests/lua/valgrind_compile.lua
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(valgrind_cli valgrind_compile PROPERTIES LABELS "cpu;valgrind" TIMEOUT 600
    ENVIRONMENT "GPULAB_LIBCUDA=/nonexistent/libcuda.so;GPULAB_CACHE=0")
  foreach(session values completion)
    add_test(NAME valgrind_repl_${session}
             COMMAND ${deadline} $<TARGET_FILE:pty_expect> ${CMAKE_SOURCE_DIR}/tests/repl/${session}.pty
                     ${vg} --log-file=${CMAKE_BINARY_DIR}/valgrind-repl-${session}.log $<TARGET_FILE:gpulab>
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(valgrind_repl_${session} PROPERTIES LABELS "cpu;valgrind" TIMEOUT 600
      ENVIRONMENT "TERM=xterm;XDG_STATE_HOME=${CMAKE_BINARY_DIR}/repl-state/vg-${session};GPULAB_LIBCUDA=/nonexistent/libcuda.so;GPULAB_CACHE=0")
  endforeach()
endif()
