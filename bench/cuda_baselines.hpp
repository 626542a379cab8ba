#pragma once
// Baselines measured in the same run as the pool: cudaMalloc/cudaFree and cudaMallocAsync/
// cudaFreeAsync. The benchmarks' only CUDA runtime calls outside the device layer.
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

struct CUstream_st;

namespace vramkit_bench {

bool cuda_present();
/// A non-blocking CUDA stream for pool calls that take one (unpin, release); destroy_stream ends it.
CUstream_st* create_stream();
void destroy_stream(CUstream_st* stream);
/// Mean nanoseconds per allocate+free pair of `bytes`, over `pairs` pairs.
double cuda_malloc_pair_ns(std::uint64_t bytes, int pairs);
double cuda_malloc_async_pair_ns(std::uint64_t bytes, int pairs);
/// The blocks a churn run frees, one per replacement, each below `live`: drawn from `seed` before
/// the clock starts, so that a run times the allocator and not the random number generator.
inline std::vector<std::uint32_t> churn_victims(std::size_t live, std::size_t replacements, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::uint32_t> victims(replacements);
  for (auto& victim : victims) victim = static_cast<std::uint32_t>(random() % live);
  return victims;
}
/// Mean nanoseconds per replacement: `live` blocks of the given sizes, `replacements` random frees
/// (churn_victims) each followed by an allocation of the next size.
double cuda_malloc_churn_ns(const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements,
                            unsigned seed);
double cuda_malloc_async_churn_ns(const std::vector<std::uint64_t>& sizes, std::size_t live,
                                  std::size_t replacements, unsigned seed);

/// The cudaMallocAsync churn on a stream of its own, in steps, so that threads can run it at once
/// with only the replacements timed: prepare() allocates the live blocks, run() replaces them,
/// finish() frees them and waits for the stream.
class AsyncChurn {
 public:
  AsyncChurn(const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements, unsigned seed);
  ~AsyncChurn();
  AsyncChurn(const AsyncChurn&) = delete;
  AsyncChurn& operator=(const AsyncChurn&) = delete;
  void prepare();
  void run();
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace vramkit_bench

namespace vramkit_bench {

/// Copy baselines between two separate device regions (no overlap), each a mean over `repeats`:
/// seconds for one large copy of `bytes`; a loop of cudaMemcpyAsync; one cudaMemcpyBatchAsync.
struct CopyRun {
  std::uint64_t offset;  ///< Source and destination offsets inside their regions.
  std::uint64_t destination;
  std::uint64_t bytes;
};
double large_copy_seconds(std::uint64_t bytes, int repeats);
double memcpy_loop_seconds(const std::vector<CopyRun>& copies, std::uint64_t region_bytes, int repeats);
double memcpy_batch_seconds(const std::vector<CopyRun>& copies, std::uint64_t region_bytes, int repeats);

}  // namespace vramkit_bench
