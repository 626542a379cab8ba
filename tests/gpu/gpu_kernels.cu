#include "gpu/gpu_kernels.hpp"

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace vramkit_gpu_test {
namespace {

__global__ void fill_index(std::uint32_t* values, std::uint64_t count, std::uint32_t key, long long spin_cycles) {
  if (spin_cycles > 0) {
    const long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
  }
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    values[i] = key * 2654435761u + static_cast<std::uint32_t>(i);
  }
}

void check(cudaError_t status) {
  if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + cudaGetErrorString(status));
}

}  // namespace

void launch_fill_index(std::uint32_t* values, std::uint64_t count, std::uint32_t key, vramkit::Stream stream) {
  fill_index<<<256, 256, 0, stream>>>(values, count, key, 0);
  check(cudaGetLastError());
}

void launch_slow_fill_index(std::uint32_t* values, std::uint64_t count, std::uint32_t key, double milliseconds,
                            vramkit::Stream stream) {
  int clock_khz = 0;
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  fill_index<<<256, 256, 0, stream>>>(values, count, key, static_cast<long long>(milliseconds * clock_khz));
  check(cudaGetLastError());
}

vramkit::Stream create_stream() {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void destroy_stream(vramkit::Stream stream) { check(cudaStreamDestroy(stream)); }
void synchronize_device() { check(cudaDeviceSynchronize()); }
void check_last_error() { check(cudaGetLastError()); }

}  // namespace vramkit_gpu_test
