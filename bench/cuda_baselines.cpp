#include "cuda_baselines.hpp"

#include <chrono>
#include <random>
#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

namespace vramkit_bench {
namespace {

using clock_type = std::chrono::steady_clock;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

struct AsyncPool {
  cudaStream_t stream = nullptr;
  AsyncPool() {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    std::uint64_t threshold = UINT64_MAX;  // keep freed memory in the pool: the warm-pool case
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "cudaMemPoolSetAttribute");
  }
  ~AsyncPool() { cudaStreamDestroy(stream); }
};

double elapsed_ns(clock_type::time_point start, std::size_t count) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count() / static_cast<double>(count);
}

}  // namespace

bool cuda_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

CUstream_st* create_stream() {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return stream;
}

void destroy_stream(CUstream_st* stream) {
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

double cuda_malloc_pair_ns(std::uint64_t bytes, int pairs) {
  void* warm = nullptr;
  check(cudaMalloc(&warm, bytes), "cudaMalloc");
  check(cudaFree(warm), "cudaFree");
  const auto start = clock_type::now();
  for (int i = 0; i < pairs; ++i) {
    void* memory = nullptr;
    check(cudaMalloc(&memory, bytes), "cudaMalloc");
    check(cudaFree(memory), "cudaFree");
  }
  return elapsed_ns(start, pairs);
}

double cuda_malloc_async_pair_ns(std::uint64_t bytes, int pairs) {
  AsyncPool async;
  for (int i = 0; i < 16; ++i) {  // warm the pool
    void* memory = nullptr;
    check(cudaMallocAsync(&memory, bytes, async.stream), "cudaMallocAsync");
    check(cudaFreeAsync(memory, async.stream), "cudaFreeAsync");
  }
  check(cudaStreamSynchronize(async.stream), "cudaStreamSynchronize");
  const auto start = clock_type::now();
  for (int i = 0; i < pairs; ++i) {
    void* memory = nullptr;
    check(cudaMallocAsync(&memory, bytes, async.stream), "cudaMallocAsync");
    check(cudaFreeAsync(memory, async.stream), "cudaFreeAsync");
  }
  const double result = elapsed_ns(start, pairs);
  check(cudaStreamSynchronize(async.stream), "cudaStreamSynchronize");
  return result;
}

namespace {
template <class Allocate, class Free>
double churn(const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements, unsigned seed,
             Allocate allocate, Free free) {
  const std::vector<std::uint32_t> victims = churn_victims(live, replacements, seed);
  std::vector<void*> blocks(live);
  std::size_t next = 0;
  for (auto& block : blocks) block = allocate(sizes[next++ % sizes.size()]);
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < replacements; ++i) {
    const std::uint32_t victim = victims[i];
    free(blocks[victim]);
    blocks[victim] = allocate(sizes[next++ % sizes.size()]);
  }
  const double result = elapsed_ns(start, replacements);
  for (void* block : blocks) free(block);
  return result;
}
}  // namespace

double cuda_malloc_churn_ns(const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements,
                            unsigned seed) {
  return churn(
      sizes, live, replacements, seed,
      [](std::uint64_t bytes) {
        void* memory = nullptr;
        check(cudaMalloc(&memory, bytes), "cudaMalloc");
        return memory;
      },
      [](void* memory) { check(cudaFree(memory), "cudaFree"); });
}

double cuda_malloc_async_churn_ns(const std::vector<std::uint64_t>& sizes, std::size_t live,
                                  std::size_t replacements, unsigned seed) {
  AsyncPool async;
  const double result = churn(
      sizes, live, replacements, seed,
      [&](std::uint64_t bytes) {
        void* memory = nullptr;
        check(cudaMallocAsync(&memory, bytes, async.stream), "cudaMallocAsync");
        return memory;
      },
      [&](void* memory) { check(cudaFreeAsync(memory, async.stream), "cudaFreeAsync"); });
  check(cudaStreamSynchronize(async.stream), "cudaStreamSynchronize");
  return result;
}

struct AsyncChurn::State {
  const std::vector<std::uint64_t>& sizes;
  std::vector<std::uint32_t> victims;
  std::vector<void*> blocks;
  std::size_t next = 0;
  AsyncPool async;

  void* allocate() {
    void* memory = nullptr;
    check(cudaMallocAsync(&memory, sizes[next++ % sizes.size()], async.stream), "cudaMallocAsync");
    return memory;
  }
};

AsyncChurn::AsyncChurn(const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements,
                       unsigned seed)
    : state_(new State{sizes, churn_victims(live, replacements, seed), std::vector<void*>(live)}) {}

AsyncChurn::~AsyncChurn() = default;

void AsyncChurn::prepare() {
  for (auto& block : state_->blocks) block = state_->allocate();
  check(cudaStreamSynchronize(state_->async.stream), "cudaStreamSynchronize");
}

void AsyncChurn::run() {
  for (const std::uint32_t victim : state_->victims) {
    check(cudaFreeAsync(state_->blocks[victim], state_->async.stream), "cudaFreeAsync");
    state_->blocks[victim] = state_->allocate();
  }
}

void AsyncChurn::finish() {
  for (void* block : state_->blocks) check(cudaFreeAsync(block, state_->async.stream), "cudaFreeAsync");
  check(cudaStreamSynchronize(state_->async.stream), "cudaStreamSynchronize");
}

}  // namespace vramkit_bench

namespace vramkit_bench {
namespace {
struct Regions {
  char* source = nullptr;
  char* destination = nullptr;
  cudaStream_t stream = nullptr;
  explicit Regions(std::uint64_t bytes) {
    check(cudaMalloc(reinterpret_cast<void**>(&source), bytes), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&destination), bytes), "cudaMalloc");
    check(cudaMemset(source, 1, bytes), "cudaMemset");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Regions() {
    cudaFree(source);
    cudaFree(destination);
    cudaStreamDestroy(stream);
  }
};

template <class Body>
double time_repeats(cudaStream_t stream, int repeats, Body body) {
  body();  // warm-up
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < repeats; ++i) body();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float milliseconds = 0;
  check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return milliseconds / 1000.0 / repeats;
}
}  // namespace

double large_copy_seconds(std::uint64_t bytes, int repeats) {
  Regions regions(bytes);
  return time_repeats(regions.stream, repeats, [&] {
    check(cudaMemcpyAsync(regions.destination, regions.source, bytes, cudaMemcpyDeviceToDevice, regions.stream),
          "cudaMemcpyAsync");
  });
}

double memcpy_loop_seconds(const std::vector<CopyRun>& copies, std::uint64_t region_bytes, int repeats) {
  Regions regions(region_bytes);
  return time_repeats(regions.stream, repeats, [&] {
    for (const CopyRun& copy : copies) {
      check(cudaMemcpyAsync(regions.destination + copy.destination, regions.source + copy.offset, copy.bytes,
                            cudaMemcpyDeviceToDevice, regions.stream),
            "cudaMemcpyAsync");
    }
  });
}

double memcpy_batch_seconds(const std::vector<CopyRun>& copies, std::uint64_t region_bytes, int repeats) {
  Regions regions(region_bytes);
  std::vector<void*> destinations;
  std::vector<const void*> sources;
  std::vector<size_t> sizes;
  for (const CopyRun& copy : copies) {
    destinations.push_back(regions.destination + copy.destination);
    sources.push_back(regions.source + copy.offset);
    sizes.push_back(copy.bytes);
  }
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attributes.srcLocHint.type = cudaMemLocationTypeDevice;
  attributes.dstLocHint.type = cudaMemLocationTypeDevice;
  size_t attribute_index = 0;
  return time_repeats(regions.stream, repeats, [&] {
    check(cudaMemcpyBatchAsync(destinations.data(), sources.data(), sizes.data(), sizes.size(), &attributes,
                               &attribute_index, 1, regions.stream),
          "cudaMemcpyBatchAsync");
  });
}

}  // namespace vramkit_bench
