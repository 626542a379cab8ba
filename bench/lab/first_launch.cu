// Lab (not built by CMake): is the first kernel launch after many copies slow, and does the stream
// kind or the copies' stream matter? Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/lab/first_launch.cu
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
using Clock = std::chrono::steady_clock;
__global__ void tiny(unsigned* p) { if (threadIdx.x == 0) atomicAdd(p, 1u); }
double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
int main() {
  void* device; unsigned* counter; void* pinned; std::vector<char> pageable(256 << 10, 1);
  CHECK(cudaMalloc(&device, 256 << 20)); CHECK(cudaMalloc(&counter, 64)); CHECK(cudaMallocHost(&pinned, 256 << 10));
  cudaStream_t blocking, nonblocking;
  CHECK(cudaStreamCreate(&blocking)); CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  tiny<<<1, 32, 0, blocking>>>(counter); tiny<<<1, 32, 0, nonblocking>>>(counter); CHECK(cudaDeviceSynchronize());
  const char* copy_names[] = {"no copies", "1000 pageable copies on stream 0", "1000 pageable copies on a blocking stream",
                              "1000 pinned copies on a non-blocking stream"};
  const char* launch_names[] = {"blocking", "non-blocking"};
  for (int copies = 0; copies < 4; ++copies)
    for (int target = 0; target < 2; ++target) {
      std::vector<double> first, second;
      for (int rep = 0; rep < 15; ++rep) {
        for (int i = 0; i < 1000 && copies; ++i) {
          cudaStream_t s = copies == 1 ? nullptr : copies == 2 ? blocking : nonblocking;
          CHECK(cudaMemcpyAsync(static_cast<char*>(device) + (i % 1000) * (128 << 10), copies == 3 ? pinned : pageable.data(),
                                64 << 10, cudaMemcpyHostToDevice, s));
          CHECK(cudaStreamSynchronize(s));
        }
        CHECK(cudaDeviceSynchronize());
        cudaStream_t s = target == 0 ? blocking : nonblocking;
        auto t0 = Clock::now(); tiny<<<1, 32, 0, s>>>(counter); auto t1 = Clock::now(); tiny<<<1, 32, 0, s>>>(counter);
        auto t2 = Clock::now();
        CHECK(cudaDeviceSynchronize());
        first.push_back(us(t0, t1)); second.push_back(us(t1, t2));
      }
      std::sort(first.begin(), first.end()); std::sort(second.begin(), second.end());
      std::printf("%-46s launch on %-12s first %6.1f us (max %6.1f), second %5.1f us\n", copy_names[copies],
                  launch_names[target], first[7], first.back(), second[7]);
    }
}
