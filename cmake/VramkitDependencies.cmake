# Every dependency comes from find_package; a missing one names the Debian package that brings it.
macro(vramkit_require package debian)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "vramkit needs ${package}: install the Debian package '${debian}' "
                        "(apt-get install ${debian}) or run scripts/gather-deps.sh and configure with "
                        "-DCMAKE_PREFIX_PATH=$PWD/.deps/usr")
  endif()
endmacro()

find_package(CUDAToolkit REQUIRED)
# CUDA 13 keeps Thrust/CUB/libcu++ under include/cccl; g++ finds them through CCCL::CCCL.
get_filename_component(_vramkit_cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
find_package(CCCL CONFIG REQUIRED HINTS "${_vramkit_cuda_root}/lib64/cmake/cccl" "${CUDAToolkit_LIBRARY_DIR}/cmake/cccl")
vramkit_require(Microsoft.GSL libmsgsl-dev CONFIG)
vramkit_require(nlohmann_json nlohmann-json3-dev CONFIG)
if(VRAMKIT_BUILD_TESTS)
  vramkit_require(Catch2 catch2 2 CONFIG)
endif()
