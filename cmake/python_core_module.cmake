# dualpipe._core, the planner from Python (docs/python.md): pybind11's module over dualpipe_core (position-independent).
# Included by the main build, which makes it once with everything else (scripts/build.sh installs it into the
# package: scripts/install_python_package.sh), and by the package's own build when `pip install .` is run without a
# main build.
file(GLOB DUALPIPE_PYTHON_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/python/*.cpp)
# NO_EXTRAS: no link-time optimisation or stripping, which cost minutes on two cores and buy nothing here.
pybind11_add_module(_core MODULE NO_EXTRAS ${DUALPIPE_PYTHON_SOURCES})
target_link_libraries(_core PRIVATE dualpipe_core)
target_compile_definitions(_core PRIVATE DUALPIPE_VERSION="${PROJECT_VERSION}")  # dualpipe.__version__
