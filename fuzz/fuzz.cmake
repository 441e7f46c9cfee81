# libFuzzer targets (docs/fuzzing.md, scripts/fuzz.sh). Included by the top-level CMakeLists.txt only when
# DUALPIPE_FUZZ is ON and the compiler is Clang, so the normal g++ build never sees it. dualpipe_core is built
# with coverage instrumentation for the fuzzer; pair it with -DDUALPIPE_SANITIZE=address,undefined.
target_compile_options(dualpipe_core PRIVATE -fsanitize=fuzzer-no-link)
foreach(target fuzz_text fuzz_csv fuzz_trace fuzz_cost fuzz_metrics fuzz_manifest fuzz_kineto fuzz_layout fuzz_planner
       fuzz_replan fuzz_stall)
  add_executable(${target} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/${target}.cpp)
  target_compile_options(${target} PRIVATE -fsanitize=fuzzer)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${target} PRIVATE dualpipe_core)
endforeach()
# The manifest reader is LibTorch-free, but lives in the trainer's library: its source files are built here.
target_sources(fuzz_manifest PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/train/checkpoint.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/src/train/checkpoint_manifest.cpp)
target_compile_options(fuzz_manifest PRIVATE -fsanitize=fuzzer-no-link)
target_link_libraries(fuzz_manifest PRIVATE nlohmann_json::nlohmann_json)
# The same for the stall report (the runtime's library is LibTorch's; this file is not).
target_sources(fuzz_stall PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime/stall_report.cpp)
target_compile_options(fuzz_stall PRIVATE -fsanitize=fuzzer-no-link)
target_link_libraries(fuzz_stall PRIVATE nlohmann_json::nlohmann_json)
