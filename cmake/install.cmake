# Installation and the CMake package (issue 9): `cmake --install build --prefix P` puts the headers in P/include,
# the libraries in P/<libdir>, the `dualpipe` tools in P/bin and a package in P/<libdir>/cmake/dualpipe, so that an
# outside project writes `find_package(dualpipe)` and `target_link_libraries(app dualpipe::runtime)`
# (docs/install.md). Included at the end of the top-level CMakeLists.txt, once every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DUALPIPE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/dualpipe"
    CACHE STRING "Where the dualpipe CMake package goes, relative to the install prefix")

# Every library of the layers (dualpipe_<layer>) is installed as dualpipe::<layer>. Found by name rather than
# listed, so that a new layer's library is exported with the ones it links to (an exported target whose link
# interface names a library that is not exported stops the generation).
get_property(dualpipe_directory_targets DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" PROPERTY BUILDSYSTEM_TARGETS)
set(dualpipe_installed_libraries "")
foreach(target IN LISTS dualpipe_directory_targets)
  if(NOT target MATCHES "^dualpipe_(.+)$")
    continue()
  endif()
  set(layer "${CMAKE_MATCH_1}")
  get_target_property(type ${target} TYPE)
  if(type MATCHES "^(STATIC|SHARED|INTERFACE)_LIBRARY$")
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
    # The public headers use C++17 (std::optional, std::string_view): say so to the libraries' users.
    target_compile_features(${target} INTERFACE cxx_std_17)
    list(APPEND dualpipe_installed_libraries ${target})
  endif()
endforeach()

# LibTorch enters the runtime's link interface as this machine's files (TORCH_LIBRARIES holds absolute paths such as
# .../libc10.so). The installed package must not pin them: it finds Torch again on the user's machine (their own
# LibTorch through -DTorch_DIR=...) and links what that Torch names. So, in the installed targets, those items are
# build-tree only, and dualpipeConfig.cmake puts the user's ${TORCH_LIBRARIES} back on the targets recorded here.
set(dualpipe_torch_items ${TORCH_LIBRARIES})
set(DUALPIPE_TORCH_EXPORT_NAMES "")
foreach(target IN LISTS dualpipe_installed_libraries)
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT interface)
    continue()
  endif()
  set(rewritten "")
  set(uses_torch FALSE)
  foreach(item IN LISTS interface)
    set(library "${item}")
    set(link_only FALSE)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")  # a static library's private dependency
      set(library "${CMAKE_MATCH_1}")
      set(link_only TRUE)
    endif()
    if(dualpipe_torch_items AND library IN_LIST dualpipe_torch_items)
      set(uses_torch TRUE)
      if(link_only)
        set(item "$<BUILD_INTERFACE:$<LINK_ONLY:${library}>>")
      else()
        set(item "$<BUILD_INTERFACE:${library}>")
      endif()
    endif()
    list(APPEND rewritten "${item}")
  endforeach()
  if(uses_torch)
    set_property(TARGET ${target} PROPERTY INTERFACE_LINK_LIBRARIES "${rewritten}")
    get_target_property(export_name ${target} EXPORT_NAME)
    list(APPEND DUALPIPE_TORCH_EXPORT_NAMES ${export_name})
  endif()
endforeach()

install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/include/dualpipe" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(TARGETS ${dualpipe_installed_libraries} EXPORT dualpipeTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
        )

# `dualpipe train` starts dualpipe-train-worker from the directory `dualpipe` is in: both go to bin/. The installed
# programs keep the path of a LibTorch outside the system directories (a user's own build), which installing would
# otherwise strip.
foreach(program dualpipe dualpipe-train-worker)
  if(TARGET ${program})
    set_target_properties(${program} PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
    install(TARGETS ${program} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
  endif()
endforeach()

install(EXPORT dualpipeTargets NAMESPACE dualpipe:: DESTINATION "${DUALPIPE_INSTALL_CMAKEDIR}")
set(DUALPIPE_CONFIG_WITH_TORCH OFF)
if(DUALPIPE_TORCH_EXPORT_NAMES)
  set(DUALPIPE_CONFIG_WITH_TORCH ON)
endif()
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/dualpipeConfig.cmake.in"
                              "${CMAKE_CURRENT_BINARY_DIR}/dualpipeConfig.cmake"
                              INSTALL_DESTINATION "${DUALPIPE_INSTALL_CMAKEDIR}")
# 0.x: a minor version may change the API, so only the same major.minor satisfies a request.
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/dualpipeConfigVersion.cmake"
                                 VERSION "${dualpipe_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dualpipeConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/dualpipeConfigVersion.cmake"
              "${CMAKE_CURRENT_LIST_DIR}/dualpipeTorchLibraries.cmake"
        DESTINATION "${DUALPIPE_INSTALL_CMAKEDIR}")

# The test: install this build into a temporary prefix and build examples/ against it as an outside project. Not in
# sanitized builds (scripts/test_sanitized.sh): they build only the test programs, and instrumented libraries would
# need the sanitizer runtime on the outside project's link line.
if(DUALPIPE_BUILD_TESTS AND DUALPIPE_WITH_TORCH AND NOT DUALPIPE_SANITIZE)
  add_test(NAME install_and_build_example
           COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_install.sh" "${CMAKE_CURRENT_BINARY_DIR}")
  # COST starts it among the first: with nothing in ccache it compiles a LibTorch program, 100 s on one core, and
  # in a fresh clone's suite it came last, beside an idle core (ctest has no timings there).
  set_tests_properties(install_and_build_example PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 COST 1000
                       LABELS "docs;processes;slow")
endif()
