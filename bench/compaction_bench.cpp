// Compaction benchmark: pool.compact() end to end (planning, chunking, the move kernel, heap
// rebuild) on three layouts, beside copy baselines measured in the same run: one large copy (the
// bandwidth ceiling), a loop of cudaMemcpyAsync, one cudaMemcpyBatchAsync (both into a separate
// region, since in place they would overlap). Bandwidth counts bytes read + written. Each run
// compacts one pool twice (run_pool): its first compaction, and the next, in the same pool.
// The virtual device has no bytes: it times the host side alone (planning, chunking, updating),
// without the host device's copies evicting the bookkeeping from the caches; nothing is verified.
// --cold writes 256 MiB of host memory before each compaction, evicting the bookkeeping from the
// host's caches as the benchmark's own copies do on the CUDA and host devices (and as a pipeline's
// work between batches does): with the virtual device, it times the host side as it runs there.
// Usage: vramkit_compaction_bench [--device host|cuda|virtual|auto] [--scale F] [--repeats N] [--cold] [--json FILE]
//        [--layout a|b|c]   (one layout only; all three by default)
//        [--ways LIST]      (some of the ways of compacting, by name, comma-separated: default, parts,
//                            planned, one-thread, prepared; all five by default)
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <vramkit/vramkit.hpp>

#include "compaction_layouts.hpp"
#include "cuda_baselines.hpp"

using namespace vramkit;
using vramkit_bench::fill_words;
using vramkit_bench::Layout;

namespace {

bool evict_before_compaction = false;

// Writes more host memory than any cache holds.
void evict_host_caches() {
  static std::vector<std::uint64_t> sweep(256 << 17);  // 256 MiB
  static std::uint64_t round = 0;
  ++round;
  for (std::uint64_t& word : sweep) word = round;
}

struct Result {
  double seconds = 0;
  double plan_seconds = 0, plan_given_seconds = 0, execute_seconds = 0, update_seconds = 0;
  std::uint64_t bytes_moved = 0;
  std::uint64_t blocks_moved = 0;
  bool verified = true;
  unsigned update_threads = 1;
  unsigned plan_threads = 1;
};

// Fills a pool with the layout, writes every kept buffer, frees the gaps, compacts and checks every
// kept buffer; then frees everything and does it all again in the same pool. The first compaction
// of a pool finds its bookkeeping's scratch storage unallocated (each page the kernel zeroes on
// first touch); the second finds it ready, as a pool that compacts between batches does. With
// `prepare`, the pool takes that storage before its first compaction (Pool::prepare_compaction,
// untimed), as a pipeline would once its first batch is allocated.
std::array<Result, 2> run_pool(const std::shared_ptr<Device>& device, const Layout& layout, CompactionParts parts,
                               unsigned threads, bool prepare) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layout.keep.size(); ++i) total += layout.keep[i] + layout.gap[i];
  Pool pool({.capacity_bytes = total + 4_MiB, .compaction_parts = parts, .compaction_threads = threads}, device);
  const bool has_memory = device->kind() != DeviceKind::virtual_memory;
  std::vector<std::uint64_t> words, read;
  std::array<Result, 2> results;
  for (Result& result : results) {
    auto [kept, gaps] = vramkit_bench::allocate_layout(pool, layout);
    for (std::size_t i = 0; i < kept.size() && has_memory; ++i) {
      words.resize(layout.keep[i] / 8);
      fill_words(words, i);
      pool.write(kept[i], gsl::as_bytes(gsl::span<const std::uint64_t>(words)));
    }
    for (Handle gap : gaps) pool.free(gap);
    device->synchronize();
    if (prepare && &result == &results[0]) pool.prepare_compaction();
    if (evict_before_compaction) evict_host_caches();
    const CompactionReport report = pool.compact({.release_empty_segments = false});
    result = {report.seconds.count(), report.plan_seconds.count(), report.plan_given_seconds.count(),
              report.execute_seconds.count(),
              report.update_seconds.count(), report.bytes_moved, report.blocks_moved, true, report.update_threads,
              report.plan_threads};
    for (std::size_t i = 0; i < kept.size() && result.verified && has_memory; ++i) {
      words.resize(layout.keep[i] / 8);
      read.resize(words.size());
      fill_words(words, i);
      pool.read(kept[i], gsl::as_writable_bytes(gsl::span<std::uint64_t>(read)));
      result.verified = read == words;
    }
    for (Handle handle : kept) pool.free(handle);
  }
  return results;
}

// The ways of compacting that main runs, as --ways names them, in its order.
constexpr const char* way_names[] = {"default", "parts", "planned", "one-thread", "prepared"};

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "auto", json_path;
  double scale = 1.0;
  int repeats = 3;
  char only = 0;  // --layout: 'a', 'b' or 'c'
  const char* ways_wanted = nullptr;  // --ways; all of them when not given
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device_name = argv[++i];
    else if (!std::strcmp(argv[i], "--scale") && i + 1 < argc) scale = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--cold")) evict_before_compaction = true;
    else if (!std::strcmp(argv[i], "--layout") && i + 1 < argc && std::strchr("abc", argv[i + 1][0]) &&
             argv[i + 1][0] != 0 && argv[i + 1][1] == 0)
      only = argv[++i][0];
    else if (!std::strcmp(argv[i], "--ways") && i + 1 < argc) ways_wanted = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--device host|cuda|virtual|auto] [--scale F] [--repeats N] [--cold] [--json FILE] "
                   "[--layout a|b|c] [--ways default,parts,planned,one-thread,prepared]\n",
                   argv[0]);
      return 2;
    }
  }
  bool wanted[std::size(way_names)];  // --ways: the ways to run (a GPU machine's minutes are few)
  std::fill(std::begin(wanted), std::end(wanted), ways_wanted == nullptr);
  if (ways_wanted != nullptr) {
    std::istringstream list(ways_wanted);
    for (std::string way; std::getline(list, way, ',');) {
      const auto found = std::find(std::begin(way_names), std::end(way_names), way);
      if (found == std::end(way_names)) {
        std::string known;
        for (const char* name : way_names) known += std::string(known.empty() ? "" : ", ") + name;
        std::fprintf(stderr, "--ways: '%s' is not one of %s\n", way.c_str(), known.c_str());
        return 2;
      }
      wanted[found - std::begin(way_names)] = true;
    }
    if (std::find(std::begin(wanted), std::end(wanted), true) == std::end(wanted)) {
      std::fprintf(stderr, "--ways: '%s' names no way\n", ways_wanted);
      return 2;
    }
  }
  auto device = device_name == "virtual" ? make_virtual_device()
                                         : make_device(device_name == "host"   ? DeviceChoice::host
                                                       : device_name == "cuda" ? DeviceChoice::cuda
                                                                               : DeviceChoice::automatic);
  const bool cuda = device->kind() == DeviceKind::cuda;
  std::printf("compaction benchmark on %s (scale %.3g, median of %d)\n", device->name().c_str(), scale, repeats);
  const std::vector<Layout> layouts = {
      vramkit_bench::random_layout("10,000 buffers 4 KiB..1 MiB, 50% free", 10000, 4096, 1 << 20, scale, 1),
      vramkit_bench::random_layout("100,000 buffers 256 B..64 KiB, 50% free", 100000, 256, 64 << 10, scale, 2),
      vramkit_bench::sliding_layout(scale)};
  nlohmann::json report;
  report["device"] = device->name();
  std::printf("\n%-42s %9s %9s %10s %9s %9s %9s %8s\n", "layout", "moved", "ms", "GB/s", "ceiling", "loop",
              "batch", "verified");
  for (const Layout& layout : layouts) {
    if (only != 0 && &layout - layouts.data() != only - 'a') continue;
    // The pool's default (automatic), then in parts and planned first whatever the block sizes,
    // then the default with the update on the calling thread alone (compaction_threads 1: the
    // baseline of the threads' share), then the default in a pool prepared before its first
    // compaction, interleaved run by run, each repeat starting with the next one, so that no way
    // always runs first (docs/benchmarks.md: two ways that plan alike differed by 20% on layout (b)).
    constexpr int ways = std::size(way_names);
    constexpr CompactionParts modes[ways] = {CompactionParts::automatic, CompactionParts::always,
                                             CompactionParts::never, CompactionParts::automatic,
                                             CompactionParts::automatic};
    constexpr unsigned mode_threads[ways] = {0, 0, 0, 1, 0};
    constexpr bool mode_prepared[ways] = {false, false, false, false, true};
    constexpr const char* mode_names[ways] = {"", "  the same, always in parts", "  the same, always planned first",
                                              "  the same, update on one thread",
                                              "  the same, prepared (prepare_compaction)"};
    constexpr const char* mode_keys[ways] = {"automatic", "always", "never", "automatic, compaction_threads 1",
                                             "automatic, prepare_compaction first"};
    std::vector<Result> runs[ways][2];  // by way, then the first compaction of a pool and the next
    // The ceiling is timed before the pool's runs and again after them; the faster is used. One
    // process had it 7% below what the same copy gave elsewhere on the same GPU (docs/benchmarks.md),
    // and a low ceiling flatters every ratio against it.
    std::uint64_t kept_bytes = 0;
    for (std::uint64_t bytes : layout.keep) kept_bytes += bytes;
    const double ceiling_before = cuda ? vramkit_bench::large_copy_seconds(kept_bytes, 10) : NAN;
    for (int r = 0; r < repeats; ++r)
      for (int step = 0; step < ways; ++step) {
        const int mode = (r + step) % ways;
        if (!wanted[mode]) continue;
        const std::array<Result, 2> pair = run_pool(device, layout, modes[mode], mode_threads[mode], mode_prepared[mode]);
        for (int again = 0; again < 2; ++again) runs[mode][again].push_back(pair[again]);
      }
    double ceiling_gbs = NAN, loop_gbs = NAN, batch_gbs = NAN;
    bool named = false;  // a row has named the layout
    for (int row = 0; row < 2 * ways; ++row) {
      const int mode = row / 2, again = row % 2;
      if (!wanted[mode]) continue;
      std::vector<Result>& results = runs[mode][again];
      std::sort(results.begin(), results.end(), [](const Result& a, const Result& b) { return a.seconds < b.seconds; });
      const Result& median = results[results.size() / 2];
      bool verified = true;
      for (const Result& run : results) verified &= run.verified;
      const double pool_gbs = 2.0 * median.bytes_moved / median.seconds / 1e9;
      if (cuda && std::isnan(ceiling_gbs)) {  // at the first way run
        std::vector<vramkit_bench::CopyRun> copies;
        std::uint64_t source = 0, destination = 0;
        for (std::size_t i = 0; i < layout.keep.size(); ++i) {
          source += layout.gap[i];
          copies.push_back({source, destination, layout.keep[i]});
          source += layout.keep[i];
          destination += layout.keep[i];
        }
        const double ceiling_after = vramkit_bench::large_copy_seconds(kept_bytes, 10);
        ceiling_gbs = 2.0 * kept_bytes / std::min(ceiling_before, ceiling_after) / 1e9;
        std::printf("%-42s ceiling: %.1f GB/s timed before the pool's runs, %.1f after; the faster is used\n", "",
                    2.0 * kept_bytes / ceiling_before / 1e9, 2.0 * kept_bytes / ceiling_after / 1e9);
        loop_gbs = 2.0 * destination / vramkit_bench::memcpy_loop_seconds(copies, source, 3) / 1e9;
        batch_gbs = 2.0 * destination / vramkit_bench::memcpy_batch_seconds(copies, source, 3) / 1e9;
      }
      const char* verdict = device->kind() == DeviceKind::virtual_memory ? "n/a" : verified ? "yes" : "NO";
      if (!named && mode != 0) std::printf("%s\n", layout.name.c_str());  // the first row names the layout
      named = true;
      const std::string name = again ? "    again, in the same pool" : mode == 0 ? layout.name : mode_names[mode];
      std::printf("%-42s %9s %9.3f %10.1f %9.1f %9.1f %9.1f %8s\n", name.c_str(),
                  format_bytes(median.bytes_moved).c_str(), median.seconds * 1e3, pool_gbs, ceiling_gbs, loop_gbs,
                  batch_gbs, verdict);
      std::printf("%-42s phases: device call %.3f ms, the host's walk+plan %.3f ms (%u thread%s) and update %.3f ms "
                  "(%u thread%s) inside it\n",
                  "", median.execute_seconds * 1e3, median.plan_seconds * 1e3, median.plan_threads,
                  median.plan_threads == 1 ? "" : "s", median.update_seconds * 1e3, median.update_threads,
                  median.update_threads == 1 ? "" : "s");
      if (median.plan_given_seconds > 0)
        std::printf("%-42s the device had the whole plan %.3f ms into the walk\n", "", median.plan_given_seconds * 1e3);
      if (cuda) {
        std::printf("%-42s pool / ceiling %.0f%%, pool / loop %.1fx, pool / batch %.1fx\n", "",
                    100 * pool_gbs / ceiling_gbs, pool_gbs / loop_gbs, pool_gbs / batch_gbs);
      }
      report["layouts"].push_back({{"layout", layout.name},
                                   {"compaction_parts", mode_keys[mode]},
                                   {"compaction", again ? "again, in the same pool" : "the pool's first"},
                                   {"bytes_moved", median.bytes_moved},
                                   {"blocks_moved", median.blocks_moved},
                                   {"seconds", median.seconds},
                                   {"plan_seconds", median.plan_seconds},
                                   {"plan_given_seconds", median.plan_given_seconds},
                                   {"execute_seconds", median.execute_seconds},
                                   {"update_seconds", median.update_seconds},
                                   {"update_threads", median.update_threads},
                                   {"plan_threads", median.plan_threads},
                                   {"pool_gbs", pool_gbs},
                                   {"ceiling_gbs", ceiling_gbs},
                                   {"loop_gbs", loop_gbs},
                                   {"batch_gbs", batch_gbs},
                                   {"verified", verified}});
      if (!verified) {
        std::fprintf(stderr, "DATA MISMATCH after compaction on layout '%s'\n", layout.name.c_str());
        return 1;
      }
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << '\n';
  return 0;
}
