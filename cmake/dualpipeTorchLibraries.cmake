# Keeps a link to one LibTorch where a machine has two (Debian's libtorch-dev beside the pinned PyPI PyTorch).
# LibTorch's TorchConfig.cmake finds its imported targets (find_package(Caffe2 PATHS <its own folder>)) and some of
# its libraries (c10, and c10_cuda with CUDA: find_library) by searches that look in the system's folders before
# its own: a project then linked the other LibTorch's libtorch.so and libc10.so and failed with undefined
# references. Used around find_package(Torch) by the main build (runtime_library.cmake) and by the installed
# package (dualpipeConfig.cmake), so both link one LibTorch:
#
#   dualpipe_before_find_torch(HINT)   # HINT: the Torch_DIR find_package is hinted at, or ""
#   find_package(Torch ...)
#   dualpipe_keep_one_torch()          # TORCH_LIBRARIES holds the found LibTorch's files only
#
# Before: Caffe2_DIR (unless set) is aimed at the Caffe2 beside the TorchConfig.cmake that find_package will load
# (Torch_DIR's, else the first in CMAKE_PREFIX_PATH, else HINT's), and the library variables the user set are
# noted. After: a library of LibTorch that find_library took from elsewhere is replaced by the found LibTorch's
# file of the same name (its cache variable set to it); one the user named from elsewhere, one the found LibTorch
# lacks, or targets from another LibTorch's Caffe2 stop the configure, naming both.

set(DUALPIPE_TORCH_LIBRARY_VARIABLES c10_LIBRARY C10_CUDA_LIBRARY TORCH_LIBRARY)

macro(dualpipe_before_find_torch hint)
  set(_dualpipe_user_set)
  foreach(_dualpipe_variable IN LISTS DUALPIPE_TORCH_LIBRARY_VARIABLES)
    if(NOT "${${_dualpipe_variable}}" STREQUAL "" AND NOT "${${_dualpipe_variable}}" MATCHES "NOTFOUND$")
      list(APPEND _dualpipe_user_set ${_dualpipe_variable})
    endif()
  endforeach()
  if(NOT Caffe2_DIR)
    set(_dualpipe_torch_dir "${Torch_DIR}")
    if(NOT _dualpipe_torch_dir)
      string(REPLACE ":" ";" _dualpipe_prefixes "$ENV{CMAKE_PREFIX_PATH}")
      set(_dualpipe_prefixes ${CMAKE_PREFIX_PATH} ${_dualpipe_prefixes})
      foreach(_dualpipe_prefix IN LISTS _dualpipe_prefixes)
        foreach(_dualpipe_suffix share/cmake/Torch lib/cmake/Torch Torch)
          if(NOT _dualpipe_torch_dir AND EXISTS "${_dualpipe_prefix}/${_dualpipe_suffix}/TorchConfig.cmake")
            set(_dualpipe_torch_dir "${_dualpipe_prefix}/${_dualpipe_suffix}")
          endif()
        endforeach()
      endforeach()
    endif()
    if(NOT _dualpipe_torch_dir)
      set(_dualpipe_torch_dir "${hint}")
    endif()
    if(_dualpipe_torch_dir AND EXISTS "${_dualpipe_torch_dir}/../Caffe2/Caffe2Config.cmake")
      get_filename_component(_dualpipe_caffe2 "${_dualpipe_torch_dir}/../Caffe2" ABSOLUTE)
      set(Caffe2_DIR "${_dualpipe_caffe2}" CACHE PATH "The Caffe2 of the LibTorch found")
    endif()
  endif()
endmacro()

macro(dualpipe_keep_one_torch)
  get_filename_component(_dualpipe_prefix "${TORCH_INSTALL_PREFIX}" REALPATH)
  if(TARGET torch)
    get_target_property(_dualpipe_configs torch IMPORTED_CONFIGURATIONS)
    list(GET _dualpipe_configs 0 _dualpipe_config)
    get_target_property(_dualpipe_library torch IMPORTED_LOCATION_${_dualpipe_config})
    get_filename_component(_dualpipe_real "${_dualpipe_library}" REALPATH)
    string(FIND "${_dualpipe_real}" "${_dualpipe_prefix}/" _dualpipe_at)
    if(_dualpipe_library AND NOT _dualpipe_at EQUAL 0)
      message(FATAL_ERROR "the LibTorch found (${TORCH_INSTALL_PREFIX}) took its targets from another LibTorch's "
              "Caffe2 (Caffe2_DIR ${Caffe2_DIR}, libtorch ${_dualpipe_library}): the link would mix the two builds. "
              "Give its own (-DCaffe2_DIR=${TORCH_INSTALL_PREFIX}/share/cmake/Caffe2) (docs/install.md).")
    endif()
  endif()
  set(_dualpipe_kept)
  foreach(_dualpipe_library IN LISTS TORCH_LIBRARIES)
    get_filename_component(_dualpipe_name "${_dualpipe_library}" NAME)
    get_filename_component(_dualpipe_real "${_dualpipe_library}" REALPATH)
    string(FIND "${_dualpipe_real}" "${_dualpipe_prefix}/" _dualpipe_at)
    if(IS_ABSOLUTE "${_dualpipe_library}" AND _dualpipe_name MATCHES "^lib(c10|torch|caffe2)" AND
       NOT _dualpipe_at EQUAL 0)
      set(_dualpipe_variable "<the variable that holds it>")
      foreach(_dualpipe_candidate IN LISTS DUALPIPE_TORCH_LIBRARY_VARIABLES)
        if("${${_dualpipe_candidate}}" STREQUAL "${_dualpipe_library}")
          set(_dualpipe_variable ${_dualpipe_candidate})
        endif()
      endforeach()
      set(_dualpipe_own "${_dualpipe_prefix}/lib/${_dualpipe_name}")
      if(_dualpipe_variable IN_LIST _dualpipe_user_set OR NOT _dualpipe_variable IN_LIST
         DUALPIPE_TORCH_LIBRARY_VARIABLES OR NOT EXISTS "${_dualpipe_own}")
        message(FATAL_ERROR "the LibTorch found (${TORCH_INSTALL_PREFIX}) links ${_dualpipe_library}, a library "
                "of another LibTorch: the link would mix the two builds. Give its own "
                "(-D${_dualpipe_variable}=${_dualpipe_own}) or remove the other (docs/install.md).")
      endif()
      message(STATUS "dualpipe: ${_dualpipe_library} belongs to another LibTorch; linking ${_dualpipe_own}")
      set(${_dualpipe_variable} "${_dualpipe_own}" CACHE FILEPATH "${_dualpipe_name} of the LibTorch found" FORCE)
      set(_dualpipe_library "${_dualpipe_own}")
    endif()
    list(APPEND _dualpipe_kept "${_dualpipe_library}")
  endforeach()
  set(TORCH_LIBRARIES ${_dualpipe_kept})
  foreach(_dualpipe_variable IN ITEMS _dualpipe_user_set _dualpipe_prefix _dualpipe_kept _dualpipe_library
                                      _dualpipe_name _dualpipe_real _dualpipe_at _dualpipe_candidate _dualpipe_own
                                      _dualpipe_configs _dualpipe_config _dualpipe_torch_dir _dualpipe_prefixes
                                      _dualpipe_suffix _dualpipe_caffe2 _dualpipe_variable)
    unset(${_dualpipe_variable})
  endforeach()
endmacro()
