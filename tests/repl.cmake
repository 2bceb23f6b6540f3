# REPL tests: each tests/repl/NAME.pty drives gpulab through a real pseudo-terminal with
# pty_expect (tests/pty/pty_expect.c). History goes to a fresh per-test XDG_STATE_HOME.
add_executable(pty_expect ${CMAKE_SOURCE_DIR}/tests/pty/pty_expect.c)
target_link_libraries(pty_expect PRIVATE util)

# gl_add_repl_test(NAME [GPU|FAKE] [ARGS command...] [ENV k=v...]): ARGS defaults to the gpulab
#   binary. By default the driver is hidden (GPULAB_LIBCUDA=/nonexistent); FAKE uses the driver
#   stand-in. With GPU the test has label `gpu` and is reported skipped (77) when gpulab sees no
#   usable device.
function(gl_add_repl_test name)
  cmake_parse_arguments(R "GPU;FAKE" "" "ARGS;ENV" ${ARGN})
  if(NOT R_ARGS)
    set(R_ARGS $<TARGET_FILE:gpulab>)
  endif()
  set(state ${CMAKE_BINARY_DIR}/repl-state/${name})
  gl_deadline(deadline 120)
  set(run ${deadline} $<TARGET_FILE:pty_expect> ${CMAKE_SOURCE_DIR}/tests/repl/${name}.pty ${R_ARGS})
  set(env "TERM=xterm;XDG_STATE_HOME=${state};TESTTMP=${state};GPULAB=$<TARGET_FILE:gpulab>;GPULAB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;${R_ENV}")
  if(R_GPU)
    set(check "\"$GPULAB\" -e 'os.exit(cuda.available() and 0 or 77)' || exit 77; exec \"$@\"")
    add_test(NAME repl_${name} COMMAND ${deadline} sh -c "${check}" sh $<TARGET_FILE:pty_expect>
             ${CMAKE_SOURCE_DIR}/tests/repl/${name}.pty ${R_ARGS}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(repl_${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  else()
    add_test(NAME repl_${name} COMMAND ${run} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(repl_${name} PROPERTIES LABELS cpu)
    if(R_FAKE)
      list(APPEND env "GPULAB_LIBCUDA=$<TARGET_FILE:fakecuda>")
    else()
      list(APPEND env "GPULAB_LIBCUDA=/nonexistent/libcuda.so")
    endif()
  endif()
  set_tests_properties(repl_${name} PROPERTIES TIMEOUT 120 ENVIRONMENT "${env}")
endfunction()

gl_add_repl_test(values)
gl_add_repl_test(multiline)
gl_add_repl_test(pretty)
gl_add_repl_test(errors)
gl_add_repl_test(interrupt)
gl_add_repl_test(completion)
gl_add_repl_test(commands)
gl_add_repl_test(help FAKE)
gl_add_repl_test(lua_compat)
gl_add_repl_test(hostile_completion)
gl_add_repl_test(interrupt_coroutine)
gl_add_repl_test(restart)
gl_add_repl_test(poisoned)
gl_add_repl_test(interactive_script ARGS $<TARGET_FILE:gpulab> -i tests/repl/defs.lua one two)
# Two sessions in one terminal: the second recalls the first one's input (Ctrl-P).
gl_add_repl_test(history ARGS sh -c "rm -rf \"$XDG_STATE_HOME\" && \"$0\" && \"$0\"" $<TARGET_FILE:gpulab>)
gl_add_repl_test(history_unwritable ENV XDG_STATE_HOME=/proc/self/no-such-dir)
# The driver stand-in makes the first context sync fail with a sticky error: the REPL shows
# the hint, and :restart brings back the variables and device arrays made before the fault.
if(TARGET fakecuda)
  gl_add_repl_test(fake_restart FAKE ENV GPULAB_FAKE_FAIL=cuCtxSynchronize:700)
  gl_add_repl_test(device_prompt FAKE ENV GPULAB_FAKE_DEVICES=2) # the prompt names the current device
  gl_add_repl_test(cuda_error FAKE ENV GPULAB_FAKE_FAIL=cuCtxSynchronize:700)
endif()
# On a GPU: a kernel faults, the REPL offers :restart, and the replayed session has its
# variables and device data back.
gl_add_repl_test(gpu_restart GPU)
# Without XDG_STATE_HOME the history goes to ~/.local/state/gpulab/history (folders created).
gl_add_repl_test(history_home ARGS env -u XDG_STATE_HOME HOME=${CMAKE_BINARY_DIR}/repl-state/history_home/home
  sh -c "rm -rf \"$HOME\" && exec \"$0\"" $<TARGET_FILE:gpulab>)
# SIGTERM / SIGHUP at the prompt (terminal in raw mode): settings restored, history kept (tmux).
find_program(GPULAB_TMUX tmux)
if(GPULAB_TMUX)
  gl_deadline(deadline 120)
  add_test(NAME repl_terminal_restore
    COMMAND ${deadline} sh ${CMAKE_SOURCE_DIR}/tests/repl/terminal_restore.sh $<TARGET_FILE:gpulab>
            ${CMAKE_BINARY_DIR}/repl-state/terminal_restore)
  set_tests_properties(repl_terminal_restore PROPERTIES LABELS cpu TIMEOUT 120)
endif()
# :save writes a script that runs: the saved session is run by gpulab against the driver stand-in.
if(TARGET fakecuda)
  gl_add_repl_test(save FAKE)
endif()
# Completion on an object of every class (GL_CLASSES_ENV: tests/classes.cmake)
if(TARGET fakecuda)
  gl_add_repl_test(class_completion FAKE ENV ${GL_CLASSES_ENV})
endif()
