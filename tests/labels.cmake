# The labels of the tests that gtest_discover_tests finds, applied when ctest loads them (cmake/test_labels.cmake
# adds this file after each program's discovered tests). docs/CONTRIBUTING.md, "Test labels", says which label a
# new test gets. Every test carries its layer (schedule, sim, layout, viz, data, parallel, runtime, train, cli) and
# any of:
#   quick      in scripts/test.sh --quick: every layer's core behaviour in about a minute after a build
#   sanitize   run again under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/test_sanitized.sh): our
#              code that runs threads or parses input, without LibTorch's training library or processes
#   processes  starts processes: `dualpipe` commands, ranks as processes, launchers
#   testbed    needs the network namespaces of scripts/testbed.sh
#   slow       15 s or more on the 2-core machine
# Patterns are CMake regular expressions matched against the whole test name (Suite.Name/param).

# Programs whose every test is quick and sanitized: the core (no LibTorch) and the mesh's layout.
set(dualpipe_quick_layers util schedule trace sim run layout viz data launch parallel)
# test_runtime: ranks as threads, except these, which start processes (workers, the example program, `dualpipe`).
set(dualpipe_runtime_processes "^(GlooProcesses|Failures|MinimalExample|Stall)\\.")
# ... and of those, the quick suite keeps the Gloo processes (the communicator over real sockets).
set(dualpipe_runtime_quick_processes "^GlooProcesses\\.")
# test_cli: everything runs `dualpipe`. Quick: the commands that plan, draw and check input, the parsers' hostile
# cases, and one training run per schedule family against the single-process reference.
set(dualpipe_cli_quick "^(Cli|PlanCli|SimulateCli|DrawCommand|PlotCommand|Compare|ProfileCommand|LayoutCommand|\
HostileInput|HostileRoundThree|Launch|LaunchNodes|Vocabulary)\\.|^Train\\.EveryScheduleTrainsOneStepMatchingTheReference$")
set(dualpipe_cli_testbed "^TwoNodes\\.")
set(dualpipe_cli_slow "^Train\\.(ContextParallel|DataParallel|ExpertParallel|ForwardBackwardOverlapOfMoe|\
GradientReduction|EveryReduceGradAction|PipelineDataAndExpert|TensorParallel|Zero(One|Two|Three)Shards|EverySchedule|AReplan)|\
^Schedules/(Stragglers|NoStraggler)\\.")

function(dualpipe_apply_labels layer)
  foreach(test IN LISTS ARGN)
    set(labels ${layer})
    list(FIND dualpipe_quick_layers "${layer}" core)  # (no IN_LIST: ctest reads this file without policies)
    if(core GREATER -1)
      list(APPEND labels quick sanitize)
    elseif(layer STREQUAL "runtime")
      if(test MATCHES "${dualpipe_runtime_processes}")
        list(APPEND labels processes)
        if(test MATCHES "${dualpipe_runtime_quick_processes}")
          list(APPEND labels quick)
        endif()
      else()
        list(APPEND labels quick sanitize)
      endif()
    elseif(layer STREQUAL "train")
      list(APPEND labels quick)
    elseif(layer STREQUAL "cli")
      list(APPEND labels processes)
      if(test MATCHES "${dualpipe_cli_quick}")
        list(APPEND labels quick)
      endif()
      if(test MATCHES "${dualpipe_cli_testbed}")
        list(APPEND labels testbed)
      endif()
      if(test MATCHES "${dualpipe_cli_slow}")
        list(APPEND labels slow)
      endif()
    endif()
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
    # A fresh clone's ctest has no timings and would start tests in their order, so that a slow one might come
    # last, beside an idle core: the slow start first, after the Python runs (COST 1000, CMakeLists.txt).
    list(FIND labels slow slow_index)
    if(slow_index GREATER -1)
      set_tests_properties("${test}" PROPERTIES COST 100)
    endif()
  endforeach()
endfunction()
