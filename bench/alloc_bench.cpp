// Allocation benchmark: pool allocate+free pair latency, churn, threads, pin/unpin and handle
// resolution, beside cudaMalloc and cudaMallocAsync measured in the same run (when a GPU is present).
// Usage: vramkit_alloc_bench [--device host|cuda|auto] [--json FILE] [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <thrust/mr/disjoint_pool.h>
#include <thrust/mr/new.h>

#include <vramkit/vramkit.hpp>

#include "cuda_baselines.hpp"

using namespace vramkit;
using clock_type = std::chrono::steady_clock;

namespace {

double ns_since(clock_type::time_point start, std::size_t count) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count() / static_cast<double>(count);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Host-side bookkeeping alone, the CCCL way: Thrust's disjoint pool (blocks from new/delete, its
// bookkeeping in host memory), unsynchronized, exact-size free lists, no coalescing, no handles.
double thrust_disjoint_pair_ns(std::uint64_t bytes, int pairs) {
  thrust::mr::new_delete_resource upstream, bookkeeper;
  thrust::mr::disjoint_unsynchronized_pool_resource<thrust::mr::new_delete_resource, thrust::mr::new_delete_resource>
      resource(&upstream, &bookkeeper);
  resource.deallocate(resource.allocate(bytes, 256), bytes, 256);  // warm: one block cached
  std::vector<double> runs;
  for (int run = 0; run < 5; ++run) {
    const auto start = clock_type::now();
    for (int i = 0; i < pairs; ++i) resource.deallocate(resource.allocate(bytes, 256), bytes, 256);
    runs.push_back(ns_since(start, pairs));
  }
  return median(runs);
}

double pool_pair_ns(Pool& pool, std::uint64_t bytes, int pairs) {
  std::vector<double> runs;
  for (int run = 0; run < 5; ++run) {
    const auto start = clock_type::now();
    for (int i = 0; i < pairs; ++i) pool.free(pool.allocate(bytes));
    runs.push_back(ns_since(start, pairs));
  }
  return median(runs);
}

std::vector<std::uint64_t> log_uniform_sizes(std::size_t count, std::uint64_t low, std::uint64_t high, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> exponent(std::log(double(low)), std::log(double(high)));
  std::vector<std::uint64_t> sizes(count);
  for (auto& size : sizes) size = static_cast<std::uint64_t>(std::exp(exponent(random)));
  return sizes;
}

// One churn in a pool: `live` blocks allocated first, then `replacements` random frees
// (churn_victims) each followed by an allocation of the next size. Only run() is timed.
class Churn {
 public:
  Churn(Pool& pool, const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements,
        unsigned seed)
      : pool_(pool), sizes_(sizes), victims_(vramkit_bench::churn_victims(live, replacements, seed)), blocks_(live) {}

  void prepare() {
    for (auto& block : blocks_) block = pool_.allocate(next_size());
  }
  void run() {
    for (const std::uint32_t victim : victims_) {
      pool_.free(blocks_[victim]);
      blocks_[victim] = pool_.allocate(next_size());
    }
  }
  void finish() {
    for (Handle block : blocks_) pool_.free(block);
  }

 private:
  std::uint64_t next_size() { return sizes_[next_++ % sizes_.size()]; }

  Pool& pool_;
  const std::vector<std::uint64_t>& sizes_;
  std::vector<std::uint32_t> victims_;
  std::vector<Handle> blocks_;
  std::size_t next_ = 0;
};

double pool_churn_ns(Pool& pool, const std::vector<std::uint64_t>& sizes, std::size_t live, std::size_t replacements,
                     unsigned seed) {
  Churn churn(pool, sizes, live, replacements, seed);
  churn.prepare();
  const auto start = clock_type::now();
  churn.run();
  const double result = ns_since(start, replacements);
  churn.finish();
  return result;
}

// Replacements per second of `threads` threads, each running make_churn(t) (an object with
// prepare, run and finish) with `replacements` replacements. Only the replacements are timed:
// every thread starts and prepares, then waits; the clock runs from their release to the last
// one's end (thread start-up, which grows with the count, would otherwise be charged to the
// allocator).
template <class MakeChurn>
double threaded_churn_ops(unsigned threads, std::size_t replacements, MakeChurn&& make_churn) {
  std::latch prepared(threads), go(1);
  std::vector<clock_type::time_point> ends(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto churn = make_churn(t);
      churn->prepare();
      prepared.count_down();
      go.wait();
      churn->run();
      ends[t] = clock_type::now();
      churn->finish();
    });
  }
  prepared.wait();
  const auto start = clock_type::now();
  go.count_down();
  for (auto& worker : workers) worker.join();
  const double seconds = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) - start).count();
  return static_cast<double>(threads * replacements) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "auto", json_path;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device_name = argv[++i];
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "usage: %s [--device host|cuda|auto] [--json FILE] [--quick]\n", argv[0]);
      return 2;
    }
  }
  const DeviceChoice choice = device_name == "host" ? DeviceChoice::host
                              : device_name == "cuda" ? DeviceChoice::cuda
                                                      : DeviceChoice::automatic;
  // glibc's locks skip their atomic instructions in a process that has never started a thread. A
  // process with a CUDA context has (the driver's threads); start one here too, so that every
  // device is measured as a real multithreaded program runs.
  std::thread([] {}).join();
  auto device = make_device(choice);
  const bool cuda = device->kind() == DeviceKind::cuda && vramkit_bench::cuda_present();
  std::printf("allocation benchmark on %s\n", device->name().c_str());
  nlohmann::json report;
  report["device"] = device->name();

  Pool pool({.capacity_bytes = 1_GiB}, device);
  // The same without the cache of freed blocks: every pair splits and merges in the heap.
  Pool heap_pool({.capacity_bytes = 1_GiB, .free_cache_bytes = 0}, device);
  const int pairs = quick ? 20000 : 200000;
  std::printf("\n%-10s %14s %14s %16s %18s %10s %16s\n", "size", "pool ns/pair", "no cache ns", "cudaMalloc ns",
              "cudaMallocAsync ns", "async/pool", "thrust disjoint ns");
  for (std::uint64_t bytes = 256; bytes <= 256_MiB; bytes *= 16) {
    const double pool_ns = pool_pair_ns(pool, bytes, pairs);
    const double heap_ns = pool_pair_ns(heap_pool, bytes, pairs);
    double malloc_ns = NAN, async_ns = NAN;
    if (cuda) {
      malloc_ns = vramkit_bench::cuda_malloc_pair_ns(bytes, quick ? 20 : 200);
      async_ns = vramkit_bench::cuda_malloc_async_pair_ns(bytes, quick ? 2000 : 20000);
    }
    const double thrust_ns = thrust_disjoint_pair_ns(bytes, pairs);
    std::printf("%-10s %14.1f %14.1f %16.1f %18.1f %10.1f %16.1f\n", format_bytes(bytes).c_str(), pool_ns, heap_ns,
                malloc_ns, async_ns, async_ns / pool_ns, thrust_ns);
    report["pair"].push_back({{"bytes", bytes}, {"pool_ns", pool_ns}, {"pool_no_cache_ns", heap_ns}, {"cuda_malloc_ns", malloc_ns},
                              {"cuda_malloc_async_ns", async_ns}, {"thrust_disjoint_pool_ns", thrust_ns}});
  }

  const std::size_t live = 2000, replacements = quick ? 5000 : 20000;
  const auto sizes = log_uniform_sizes(live + replacements, 256, 4_MiB, 1);
  // A pool large enough that churn measures allocation, not compaction on failure.
  Pool churn_pool({.capacity_bytes = 8_GiB}, device);
  // Median of 5 runs (seeds 2..6), each from a fresh set of live blocks, for each allocator.
  auto median_of_runs = [](auto&& run_with_seed) {
    std::vector<double> runs;
    for (unsigned seed = 2; seed < 7; ++seed) runs.push_back(run_with_seed(seed));
    return median(runs);
  };
  const double pool_churn =
      median_of_runs([&](unsigned seed) { return pool_churn_ns(churn_pool, sizes, live, replacements, seed); });
  double malloc_churn = NAN, async_churn = NAN;
  if (cuda) {
    malloc_churn = median_of_runs(
        [&](unsigned seed) { return vramkit_bench::cuda_malloc_churn_ns(sizes, live, replacements, seed); });
    async_churn = median_of_runs(
        [&](unsigned seed) { return vramkit_bench::cuda_malloc_async_churn_ns(sizes, live, replacements, seed); });
  }
  std::printf("\nchurn (2,000 live, 256 B..4 MiB, %zu replacements, median of 5 runs), ns per replacement (%llu compactions):\n",
              replacements, static_cast<unsigned long long>(churn_pool.statistics().compactions));
  std::printf("  pool %.1f   cudaMalloc %.1f   cudaMallocAsync %.1f   async/pool %.1fx\n", pool_churn, malloc_churn,
              async_churn, async_churn / pool_churn);
  report["churn"] = {{"pool_ns", pool_churn}, {"cuda_malloc_ns", malloc_churn}, {"cuda_malloc_async_ns", async_churn}};

  // Pin + unpin, and resolving a handle to its address, on a buffer that does not move.
  {
    const Handle handle = pool.allocate(4096);
    const int count = quick ? 200000 : 2000000;
    std::vector<double> pin_runs;  // median of 5
    for (int run = 0; run < 5; ++run) {
      const auto pin_start = clock_type::now();
      for (int i = 0; i < count / 5; ++i) {
        pool.pin(handle);
        pool.unpin(handle);
      }
      pin_runs.push_back(ns_since(pin_start, count / 5));
    }
    const double pin_ns = median(pin_runs);
    // The same with the unpin on a stream: the pool records where the stream's work ends (a CUDA
    // event) and keeps it until that work is known to be over.
    double stream_pin_ns = NAN;
    if (cuda) {
      CUstream_st* stream = vramkit_bench::create_stream();
      std::vector<double> stream_runs;
      for (int run = 0; run < 5; ++run) {
        const auto stream_start = clock_type::now();
        for (int i = 0; i < count / 50; ++i) {
          pool.pin(handle);
          pool.unpin(handle, stream);
        }
        stream_runs.push_back(ns_since(stream_start, count / 50));
      }
      stream_pin_ns = median(stream_runs);
      vramkit_bench::destroy_stream(stream);
    }
    std::uint64_t sink = 0;
    const auto start = clock_type::now();
    for (int i = 0; i < count; ++i) sink += pool.address(handle);
    const double resolve_ns = ns_since(start, count);
    std::printf("\npin+unpin %.1f ns, with the unpin on a stream %.1f ns, resolve %.1f ns (checksum %llu)\n", pin_ns,
                stream_pin_ns, resolve_ns, static_cast<unsigned long long>(sink & 1));
    report["pin_unpin_ns"] = pin_ns;
    report["pin_unpin_stream_ns"] = stream_pin_ns;
    report["resolve_ns"] = resolve_ns;
    pool.free(handle);
  }

  // Threads, each churning its own blocks: in one Pool (one mutex), in a ConcurrentPool with a
  // shard per thread (each thread allocates in its home shard), and with cudaMallocAsync, each
  // thread on a stream of its own. Median of 3 runs of each.
  std::printf("\nthreads (median of 3)  one Pool ops/s  speed-up  ConcurrentPool ops/s  speed-up  "
              "cudaMallocAsync ops/s  speed-up  ConcurrentPool/async\n");
  double one_thread = 0, one_thread_sharded = 0, one_thread_async = 0;
  const std::size_t per_thread = quick ? 5000 : 50000;
  const std::size_t async_per_thread = per_thread / 10;  // about 20x slower a replacement
  for (unsigned threads : {1u, 2u, 4u, 8u, 16u}) {
    std::vector<double> shared_runs, sharded_runs, async_runs;
    for (int run = 0; run < 3; ++run) {
      Pool shared({.capacity_bytes = 4_GiB}, device);
      shared_runs.push_back(threaded_churn_ops(threads, per_thread, [&](unsigned t) {
        return std::make_unique<Churn>(shared, sizes, 100, per_thread, 10 + t);
      }));
      ConcurrentPool sharded({.pool = {.capacity_bytes = std::uint64_t{threads} * 1_GiB}, .shards = threads}, device);
      sharded_runs.push_back(threaded_churn_ops(threads, per_thread, [&](unsigned t) {
        return std::make_unique<Churn>(sharded.local(), sizes, 100, per_thread, 10 + t);  // the thread's home shard
      }));
      if (cuda) {
        async_runs.push_back(threaded_churn_ops(threads, async_per_thread, [&](unsigned t) {
          return std::make_unique<vramkit_bench::AsyncChurn>(sizes, 100, async_per_thread, 10 + t);
        }));
      }
    }
    const double ops = median(shared_runs);
    const double sharded_ops = median(sharded_runs);
    const double async_ops = cuda ? median(async_runs) : NAN;
    if (threads == 1) {
      one_thread = ops;
      one_thread_sharded = sharded_ops;
      one_thread_async = async_ops;
    }
    std::printf("%21u  %14.0f  %7.2fx  %20.0f  %7.2fx  %21.0f  %7.2fx  %19.1fx\n", threads, ops, ops / one_thread,
                sharded_ops, sharded_ops / one_thread_sharded, async_ops, async_ops / one_thread_async,
                sharded_ops / async_ops);
    report["threads"].push_back({{"threads", threads},
                                 {"ops_per_second", ops},
                                 {"speedup", ops / one_thread},
                                 {"concurrent_pool_ops_per_second", sharded_ops},
                                 {"concurrent_pool_speedup", sharded_ops / one_thread_sharded},
                                 {"cuda_malloc_async_ops_per_second", async_ops},
                                 {"cuda_malloc_async_speedup", async_ops / one_thread_async}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << '\n';
  return 0;
}
