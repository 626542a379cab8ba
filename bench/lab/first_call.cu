// Lab (not built by CMake): what the first CUDA calls cost after the GPU sat idle, as the first
// part of a compaction meets them. Each case: synchronize, keep the host busy (or asleep) for a
// while, then time the calls one by one on the host clock. Prints median and max over the repeats.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/lab/first_call.cu -o first_call
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
using Clock = std::chrono::steady_clock;

__global__ void tiny(unsigned* p) { if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(p, 1u); }
__global__ void read_moves(const unsigned long long* moves, unsigned count, unsigned long long* sink) {
  unsigned long long sum = 0;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) sum += moves[i];
  if (sum == 42) *sink = sum;
}

double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
void busy(double micros) { const auto end = Clock::now() + std::chrono::duration<double, std::micro>(micros); while (Clock::now() < end) {} }

struct Buffers { void* pinned; void* pageable; void* device; unsigned* counter; cudaEvent_t event; };

// One case: `steps` are timed one after the other; prints each step's median and max.
template <class... Steps> void run_case(const char* name, int idle_mode, double idle_us, Steps... steps) {
  constexpr int n = sizeof...(Steps);
  std::vector<std::vector<double>> times(n);
  for (int rep = 0; rep < 25; ++rep) {
    CHECK(cudaDeviceSynchronize());
    if (idle_mode == 0) busy(idle_us); else std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(idle_us));
    auto t = Clock::now();
    int i = 0;
    ((steps(), times[i++].push_back(us(t, Clock::now())), t = Clock::now()), ...);
    CHECK(cudaDeviceSynchronize());
  }
  std::printf("%-58s", name);
  for (auto& v : times) { std::sort(v.begin(), v.end()); std::printf(" %7.1f/%7.1f", v[v.size() / 2], v.back()); }
  std::printf("\n");
}

int main() {
  Buffers b{};
  const size_t bytes = 12 << 10;
  CHECK(cudaMallocHost(&b.pinned, 1 << 20)); std::memset(b.pinned, 1, 1 << 20);
  b.pageable = std::malloc(1 << 20); std::memset(b.pageable, 1, 1 << 20);
  CHECK(cudaMalloc(&b.device, 1 << 20)); CHECK(cudaMalloc(&b.counter, 64));
  CHECK(cudaEventCreateWithFlags(&b.event, cudaEventDisableTiming));
  cudaStream_t blocking, nonblocking;
  CHECK(cudaStreamCreate(&blocking)); CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  cudaPointerAttributes attributes{};
  CHECK(cudaPointerGetAttributes(&attributes, b.pinned));
  std::printf("pinned staging: memory type %d (2 = host), device pointer %p, host %p\n", int(attributes.type),
              attributes.devicePointer, attributes.hostPointer);
  tiny<<<1, 32, 0, blocking>>>(b.counter); read_moves<<<1, 256, 0, blocking>>>((const unsigned long long*)b.pinned, 16, (unsigned long long*)b.device);
  CHECK(cudaDeviceSynchronize());

  auto copy = [&](cudaStream_t s, void* from) { return [=] { CHECK(cudaMemcpyAsync(b.device, from, bytes, cudaMemcpyHostToDevice, s)); }; };
  auto launch = [&](cudaStream_t s) { return [=] { tiny<<<1, 32, 0, s>>>(b.counter); CHECK(cudaGetLastError()); }; };
  auto zero_copy = [&](cudaStream_t s) { return [=] { read_moves<<<4, 256, 0, s>>>((const unsigned long long*)b.pinned, bytes / 8, (unsigned long long*)b.device); CHECK(cudaGetLastError()); }; };
  auto record = [&](cudaStream_t s) { return [=] { CHECK(cudaEventRecord(b.event, s)); }; };
  auto query = [&](cudaStream_t s) { return [=] { cudaStreamQuery(s); }; };
  auto host_work = [] { busy(40); };
  auto sync = [&](cudaStream_t s) { return [=] { CHECK(cudaStreamSynchronize(s)); }; };

  std::printf("columns: each step's median/max in us over 25 repeats\n");
  for (double idle : {0.0, 200.0, 2000.0, 10000.0}) {
    std::printf("-- host busy %.0f us after a synchronize\n", idle);
    run_case("copy(blocking) launch launch sync", 0, idle, copy(blocking, b.pinned), launch(blocking), launch(blocking), sync(blocking));
    run_case("copy(nonblocking) launch launch sync", 0, idle, copy(nonblocking, b.pinned), launch(nonblocking), launch(nonblocking), sync(nonblocking));
    run_case("launch launch copy sync (blocking)", 0, idle, launch(blocking), launch(blocking), copy(blocking, b.pinned), sync(blocking));
    run_case("zero-copy launch, launch, sync (blocking)", 0, idle, zero_copy(blocking), launch(blocking), sync(blocking));
    run_case("record, 40us host, copy, launch (blocking)", 0, idle, record(blocking), host_work, copy(blocking, b.pinned), launch(blocking));
    run_case("query, 40us host, copy, launch (blocking)", 0, idle, query(blocking), host_work, copy(blocking, b.pinned), launch(blocking));
    run_case("launch, 40us host, copy, launch (blocking)", 0, idle, launch(blocking), host_work, copy(blocking, b.pinned), launch(blocking));
    run_case("pageable copy, launch (blocking)", 0, idle, copy(blocking, b.pageable), launch(blocking));
  }
  std::printf("-- host asleep 2000 us after a synchronize\n");
  run_case("copy(blocking) launch launch sync", 1, 2000, copy(blocking, b.pinned), launch(blocking), launch(blocking), sync(blocking));
  run_case("launch, 40us host, copy, launch (blocking)", 1, 2000, launch(blocking), host_work, copy(blocking, b.pinned), launch(blocking));
  return 0;
}
