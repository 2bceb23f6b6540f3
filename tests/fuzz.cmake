# libFuzzer targets (clang only): configure a separate build with
#   CC=clang cmake -S . -B build-fuzz -DGPULAB_FUZZ=ON
# tools/fuzz.sh builds them and runs each for a bounded time over the checked-in corpus.
if(GPULAB_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GPULAB_FUZZ needs clang (CC=clang)")
  endif()
  foreach(target api ptx tensormap cache lifetimes demangle)
    if(EXISTS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${target}.c)
      add_executable(fuzz_${target} tests/fuzz/fuzz_${target}.c)
      target_link_libraries(fuzz_${target} PRIVATE gpulab_core)
      target_include_directories(fuzz_${target} PRIVATE ${CMAKE_SOURCE_DIR}/host)
      target_compile_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
      target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
      target_compile_definitions(fuzz_${target} PRIVATE
        GPULAB_FAKECUDA_PATH="$<TARGET_FILE:fakecuda>" GPULAB_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
    endif()
  endforeach()
endif()
