# dualpipe._runtime, the executor on Python modules (dualpipe.DualPipe): pybind11's module over dualpipe_runtime
# (position-independent) and the PyTorch's libtorch_python. Included by the main build, which makes it once with
# everything else (scripts/build.sh installs it into the package: scripts/install_python_package.sh), and by the
# package's own build when `pip install .` is run without a main build.
find_library(DUALPIPE_TORCH_PYTHON torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH REQUIRED)
file(GLOB DUALPIPE_PYTHON_RUNTIME_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/python_runtime/*.cpp)
pybind11_add_module(_runtime MODULE NO_EXTRAS ${DUALPIPE_PYTHON_RUNTIME_SOURCES})
target_link_libraries(_runtime PRIVATE dualpipe_runtime ${DUALPIPE_TORCH_PYTHON})
target_include_directories(_runtime PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)  # python/python_errors.h, shared with _core
target_compile_options(_runtime PRIVATE -Wno-unused-parameter)
target_precompile_headers(_runtime REUSE_FROM dualpipe_runtime)
# torch is imported first (dualpipe/deepseek.py), which loads these libraries; the path is for a bare import. Built
# with it, so that the main build's module works where the package installs it.
set_target_properties(_runtime PROPERTIES INSTALL_RPATH "$ORIGIN/../torch/lib" BUILD_WITH_INSTALL_RPATH ON)
