# Sanitizer and fuzzing builds. Flags go to C++ compiles and C++ links only: CUDA sources (nvcc) are
# left as they are.
#   VRAMKIT_SANITIZE=address  -fsanitize=address,undefined for the library and the host tests
#   VRAMKIT_SANITIZE=thread   -fsanitize=thread
#   VRAMKIT_FUZZ=ON           the library with -fsanitize=fuzzer-no-link,address,undefined (coverage for
#                             libFuzzer); tests/fuzz links its target with -fsanitize=fuzzer,address,undefined
set(_vramkit_sanitize_flags "")
if(VRAMKIT_SANITIZE STREQUAL "address")
  set(_vramkit_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(VRAMKIT_SANITIZE STREQUAL "thread")
  set(_vramkit_sanitize_flags -fsanitize=thread)
elseif(NOT VRAMKIT_SANITIZE STREQUAL "")
  message(FATAL_ERROR "VRAMKIT_SANITIZE is '${VRAMKIT_SANITIZE}'; use address, thread or leave it empty")
endif()
if(VRAMKIT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "VRAMKIT_FUZZ needs clang (libFuzzer); configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT VRAMKIT_SANITIZE STREQUAL "")
    message(FATAL_ERROR "VRAMKIT_FUZZ brings its own sanitizers; leave VRAMKIT_SANITIZE empty")
  endif()
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-sanitize-recover=undefined>")
  add_link_options($<$<LINK_LANGUAGE:CXX>:-fsanitize=address,undefined>)
endif()
if(_vramkit_sanitize_flags)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_vramkit_sanitize_flags};-fno-omit-frame-pointer>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:${_vramkit_sanitize_flags}>")
endif()
