# Stops the configure step when the CUDA toolkit found differs, in major.minor,
# from the CUDA LibTorch was built with: CUDA's structs change between
# releases (cudaDeviceProp did in 13.0), so our reading of LibTorch's answers
# would be wrong. LibTorch names its CUDA in the wheel's version.py
# (cuda = '13.0') or the official zip's build-version (2.11.0+cu130).
if(NOT TARGET torch_cuda)
  return()
endif()
set(_gputrain_torch_cuda "")
if(EXISTS "${TORCH_INSTALL_PREFIX}/version.py")
  file(STRINGS "${TORCH_INSTALL_PREFIX}/version.py" _line REGEX "^cuda[^=]*= *'[0-9]+\\.[0-9]+'")
  if(_line MATCHES "'([0-9]+\\.[0-9]+)'")
    set(_gputrain_torch_cuda "${CMAKE_MATCH_1}")
  endif()
elseif(EXISTS "${TORCH_INSTALL_PREFIX}/build-version")
  file(READ "${TORCH_INSTALL_PREFIX}/build-version" _line)
  if(_line MATCHES "\\+cu([0-9]+)([0-9])")
    set(_gputrain_torch_cuda "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  endif()
endif()
if(NOT CUDAToolkit_VERSION_MAJOR)
  find_package(CUDAToolkit QUIET)
endif()
set(_gputrain_toolkit_cuda "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
if(_gputrain_torch_cuda STREQUAL "")
  message(WARNING "gputrain: cannot tell which CUDA LibTorch at ${TORCH_INSTALL_PREFIX} was built with; the CUDA "
                  "toolkit found is ${_gputrain_toolkit_cuda}. It must be the same major.minor.")
elseif(NOT _gputrain_torch_cuda STREQUAL _gputrain_toolkit_cuda)
  message(FATAL_ERROR "gputrain: LibTorch was built with CUDA ${_gputrain_torch_cuda} but the CUDA toolkit found is "
                      "${_gputrain_toolkit_cuda} (${CUDAToolkit_BIN_DIR}). Install CUDA ${_gputrain_torch_cuda}'s "
                      "toolkit and point CUDAToolkit_ROOT at it, or use a LibTorch built for CUDA "
                      "${_gputrain_toolkit_cuda}.")
else()
  message(STATUS "gputrain: CUDA toolkit ${_gputrain_toolkit_cuda} matches LibTorch's CUDA")
endif()
