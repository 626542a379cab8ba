// Lab (not built by CMake): the first kernel launch after a run of copies is slow (first_launch.cu,
// run 30). Does it depend on how many copies ran, on their being synchronized one by one, or on how
// the kernel is launched (triple chevrons, a CUDA graph, a high-priority stream, the driver API)?
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/lab/launch_kinds.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
using Clock = std::chrono::steady_clock;
__global__ void tiny(unsigned* p) { if (threadIdx.x == 0) atomicAdd(p, 1u); }
double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

int main() {
  void* device; unsigned* counter; void* pinned;
  CHECK(cudaMalloc(&device, 256 << 20)); CHECK(cudaMalloc(&counter, 64)); CHECK(cudaMallocHost(&pinned, 256 << 10));
  cudaStream_t stream, copy_stream, urgent;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking));
  int least, greatest; CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(cudaStreamCreateWithPriority(&urgent, cudaStreamNonBlocking, greatest));
  // A graph of one kernel node, instantiated once.
  cudaGraph_t graph; cudaGraphExec_t graph_exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  tiny<<<1, 32, 0, stream>>>(counter);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));
  CUfunction function; CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&function), reinterpret_cast<const void*>(tiny)));
  tiny<<<1, 32, 0, stream>>>(counter); tiny<<<1, 32, 0, urgent>>>(counter);
  CHECK(cudaGraphLaunch(graph_exec, stream)); CHECK(cudaDeviceSynchronize());

  struct Copies { const char* name; int count; bool sync_each; bool device_to_device; };
  const Copies copy_kinds[] = {{"none", 0, true, false},           {"1 H2D", 1, true, false},
                               {"10 H2D, sync each", 10, true, false}, {"100 H2D, sync each", 100, true, false},
                               {"1000 H2D, sync each", 1000, true, false}, {"1000 H2D, one sync", 1000, false, false},
                               {"1000 D2D, sync each", 1000, true, true}};
  void* args[] = {&counter};
  struct Launch { const char* name; std::function<void()> launch; };
  const Launch launch_kinds[] = {
      {"chevrons", [&] { tiny<<<1, 32, 0, stream>>>(counter); }},
      {"graph", [&] { CHECK(cudaGraphLaunch(graph_exec, stream)); }},
      {"urgent stream", [&] { tiny<<<1, 32, 0, urgent>>>(counter); }},
      {"cuLaunchKernel", [&] { if (cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr) != CUDA_SUCCESS) std::exit(1); }},
      {"copy stream", [&] { tiny<<<1, 32, 0, copy_stream>>>(counter); }},
  };
  std::printf("%-22s %-16s %10s %10s %10s\n", "copies before", "launch", "first us", "max us", "second us");
  for (const Copies& copies : copy_kinds)
    for (const Launch& launch : launch_kinds) {
      std::vector<double> first, second;
      for (int rep = 0; rep < 15; ++rep) {
        for (int i = 0; i < copies.count; ++i) {
          char* target = static_cast<char*>(device) + (i % 1000) * (128 << 10);
          if (copies.device_to_device)
            CHECK(cudaMemcpyAsync(target, static_cast<char*>(device) + (128 << 20), 64 << 10, cudaMemcpyDeviceToDevice, copy_stream));
          else
            CHECK(cudaMemcpyAsync(target, pinned, 64 << 10, cudaMemcpyHostToDevice, copy_stream));
          if (copies.sync_each) CHECK(cudaStreamSynchronize(copy_stream));
        }
        CHECK(cudaDeviceSynchronize());
        const auto t0 = Clock::now(); launch.launch(); const auto t1 = Clock::now(); launch.launch();
        const auto t2 = Clock::now();
        CHECK(cudaDeviceSynchronize());
        first.push_back(us(t0, t1)); second.push_back(us(t1, t2));
      }
      std::sort(first.begin(), first.end()); std::sort(second.begin(), second.end());
      std::printf("%-22s %-16s %10.1f %10.1f %10.1f\n", copies.name, launch.name, first[7], first.back(), second[7]);
    }
}
