# Unity builds: each compiler run takes a batch of a target's sources.
# Why: a file's own code is often the smaller part of its compile time. With LibTorch's precompiled header, GCC
# still instantiates the header's pending templates at the end of every file, about 11 s of CPU for a file that is
# otherwise empty (-ftime-report: "phase lang. deferred"): compiled alone, executor_actions.cpp, executor_checks.cpp,
# backward_split.cpp and clock_sync.cpp took 63.6 s of CPU; as one batch, 23.0 s. The command's files spend 9 to 20
# s each (-O3) on CLI11's and nlohmann::json's headers.
# So file-local names must differ between the files of a target: a batch is one translation unit, and its files'
# anonymous namespaces are one.
# CMake's batch files include the sources by absolute path: ccache finds a batch again only in the same folder.
# -DDUALPIPE_UNITY_BUILD=OFF compiles file by file: an edit then recompiles one file instead of its batch.
option(DUALPIPE_UNITY_BUILD "Compile each target's sources in batches (a cold build's time)" ON)
# Eight files a batch: a batch of our files spends most of its time on their own code again, and the runtime's 24
# files still make three jobs for two cores.
set(DUALPIPE_UNITY_BATCH_SIZE 8 CACHE STRING "Sources per batch of a unity build (DUALPIPE_UNITY_BUILD)")
if(DUALPIPE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE ${DUALPIPE_UNITY_BATCH_SIZE})
  # GCC warns when a class of a header holds a type of a file's anonymous namespace, unless that file is the one
  # compiled; in a batch it never is (memory_meter.cpp's MemoryMeter::Impl holds its Counter).
  add_compile_options(-Wno-subobject-linkage)
endif()
