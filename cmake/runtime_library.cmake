# dualpipe_runtime: LibTorch, CUDA/NCCL detection, and the executor and communicators library. Included by the main
# build and by the Python package's build (for dualpipe._runtime), so both define it the same way.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  # dualpipe compiles no CUDA kernels of its own; this only quiets LibTorch's probe for a GPU to target.
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/dualpipeTorchLibraries.cmake")
dualpipe_before_find_torch("")
find_package(Torch REQUIRED)
dualpipe_keep_one_torch()  # one LibTorch's libraries, even beside a second one on the machine
if(Torch_VERSION VERSION_LESS 2.11)
  message(FATAL_ERROR "dualpipe needs PyTorch >= 2.11, found ${Torch_VERSION} at ${Torch_DIR} (docs/install.md)")
endif()
# CUDA and NCCL come with a LibTorch built for CUDA (the PyPI wheels): torch_cuda carries USE_C10D_NCCL.
set(DUALPIPE_CUDA OFF)
set(DUALPIPE_NCCL OFF)
if(TARGET torch_cuda)
  set(DUALPIPE_CUDA ON)
  get_target_property(torch_cuda_definitions torch_cuda INTERFACE_COMPILE_DEFINITIONS)
  if("USE_C10D_NCCL" IN_LIST torch_cuda_definitions)
    set(DUALPIPE_NCCL ON)
  endif()
endif()
message(STATUS "dualpipe: LibTorch ${Torch_VERSION} (${Torch_DIR}); CUDA ${DUALPIPE_CUDA}; NCCL ${DUALPIPE_NCCL}")
file(GLOB DUALPIPE_RUNTIME_SOURCES CONFIGURE_DEPENDS src/runtime/*.cpp src/comm/*.cpp)
add_library(dualpipe_runtime STATIC ${DUALPIPE_RUNTIME_SOURCES})
target_include_directories(dualpipe_runtime PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                   $<INSTALL_INTERFACE:include>
                                            PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime
                                                    ${CMAKE_CURRENT_SOURCE_DIR}/src/comm)
target_link_libraries(dualpipe_runtime PUBLIC dualpipe_core ${TORCH_LIBRARIES})
# c10d's ProcessGroupGloo.hpp includes Gloo's headers, which PyTorch's wheels leave out; Gloo itself is inside
# libtorch_cpu. Debian's libgloo-dev has the headers (scripts/setup.sh), or name a folder: -DGLOO_INCLUDE_DIR=.
find_path(GLOO_INCLUDE_DIR gloo/rendezvous/store.h HINTS ${TORCH_INCLUDE_DIRS})
if(NOT GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "Gloo's headers (gloo/rendezvous/store.h) not found: apt-get install libgloo-dev, or "
                      "-DGLOO_INCLUDE_DIR=<folder holding gloo/>")
endif()
target_include_directories(dualpipe_runtime SYSTEM PRIVATE ${GLOO_INCLUDE_DIR})
target_compile_options(dualpipe_runtime PRIVATE -Wno-unused-parameter)
