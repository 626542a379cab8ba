#pragma once
// VRAMKIT_HOST_DEVICE marks functions usable in kernels when nvcc compiles them, plain otherwise.
#if defined(__CUDACC__)
#define VRAMKIT_HOST_DEVICE __host__ __device__
#else
#define VRAMKIT_HOST_DEVICE
#endif
