// The seed's war story in a minute: an inference service ran for two months, showed 3 GB used of
// 8 GB, and could not allocate a 100 MB tensor, because its free memory was in pieces.
//
// This soak replays two simulated months of such a service on an 8 GiB pool of a virtual device
// (address ranges without memory: no GPU and no RAM needed), twice: as a classic allocator (no
// compaction), and with vramkit's DefragPolicy (compact when fragmentation > 0.30, at most every
// 5 minutes, on a simulated clock) plus compaction on allocation failure. Every simulated minute,
// requests arrive with activation buffers of random sizes (freed when the request ends), and some
// open a session cache that lives minutes to days. Per simulated week it prints the allocation
// success rate, fragmentation, the largest free block and whether a 100 MiB tensor can be had.
//
//   service_soak [--days N] [--seed N]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <vramkit/vramkit.hpp>

using namespace vramkit;

namespace {

/// splitmix64 with the few distributions the soak needs; identical on every platform.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  /// Log-uniform in [low, high]: as many small values per octave as large ones.
  double log_uniform(double low, double high) { return low * std::exp(uniform() * std::log(high / low)); }

 private:
  std::uint64_t state_;
};

struct Workload {
  std::uint64_t pool_bytes = 8_GiB;
  std::uint64_t model_bytes = 1_GiB;  ///< Weights, loaded at start, never freed.
  double requests_per_minute = 3;     ///< Mean arrivals per minute over a day...
  double daily_swing = 0.8;           ///< ...times 1 + swing x sin(time of day): a daily peak.
  double activation_min = 4_MiB, activation_max = 160_MiB;             ///< Per request...
  double request_minutes_min = 1, request_minutes_max = 60;            ///< ...held while it runs.
  double session_probability = 0.3;                                    ///< A request opens a session cache...
  double session_min = 64_KiB, session_max = 4_MiB;                    ///< ...of this size...
  double session_minutes_min = 10, session_minutes_max = 7 * 24 * 60;  ///< ...living this long.
  std::uint64_t probe_bytes = 100_MiB;                                 ///< The tensor of the war story.
};

struct WeekRow {
  std::uint64_t requests = 0, failed = 0;
  PoolStatistics end;
  bool probe_ok = false;
  std::uint64_t compactions = 0, bytes_moved = 0;
};

struct SoakResult {
  std::vector<WeekRow> weeks;
  std::uint64_t requests = 0, failed = 0;
};

SoakResult run(const Workload& workload, bool policy_on, int days, std::uint64_t seed) {
  Pool pool({.capacity_bytes = workload.pool_bytes, .compact_on_failure = policy_on},
            make_virtual_device(workload.pool_bytes));
  std::chrono::steady_clock::time_point now{};  // the simulated clock
  DefragPolicy policy({.fragmentation_threshold = 0.30,
                       .min_interval = std::chrono::minutes(5),
                       .clock = [&now] { return now; }});
  Random random(seed);
  const Handle model = pool.allocate(workload.model_bytes);
  std::multimap<long, Handle> live;  // end minute -> activation or session cache
  SoakResult result;
  WeekRow week;
  std::uint64_t compactions_before = 0, moved_before = 0;

  auto try_allocate = [&](std::uint64_t bytes) -> Handle {
    try {
      return pool.allocate(bytes);
    } catch (const out_of_memory&) {
      return Handle{};
    }
  };

  const long minutes = long(days) * 24 * 60;
  for (long minute = 0; minute < minutes; ++minute) {
    now = std::chrono::steady_clock::time_point{} + std::chrono::minutes(minute);
    // Requests and sessions that end now.
    while (!live.empty() && live.begin()->first <= minute) {
      pool.free(live.begin()->second);
      live.erase(live.begin());
    }
    // This minute's arrivals: each holds an activation buffer while it runs; some open a session.
    const double rate =
        workload.requests_per_minute *
        (1 + workload.daily_swing * std::sin(2 * 3.14159265358979 * double(minute % 1440) / 1440));
    const auto arrivals = int(random.uniform() * 2 * rate + 0.5);
    for (int r = 0; r < arrivals; ++r) {
      ++week.requests;
      const Handle activation =
          try_allocate(std::uint64_t(random.log_uniform(workload.activation_min, workload.activation_max)));
      if (activation.empty()) {
        ++week.failed;
        continue;
      }
      live.emplace(
          minute + long(random.log_uniform(workload.request_minutes_min, workload.request_minutes_max)),
          activation);
      if (random.uniform() < workload.session_probability) {
        ++week.requests;
        const Handle cache =
            try_allocate(std::uint64_t(random.log_uniform(workload.session_min, workload.session_max)));
        if (cache.empty()) {
          ++week.failed;
          continue;
        }
        live.emplace(
            minute + long(random.log_uniform(workload.session_minutes_min, workload.session_minutes_max)),
            cache);
      }
    }
    if (policy_on) policy.maybe_compact(pool);

    if ((minute + 1) % (7 * 24 * 60) == 0 || minute + 1 == minutes) {
      week.end = pool.statistics();
      week.compactions = week.end.compactions - compactions_before;
      week.bytes_moved = week.end.bytes_moved - moved_before;
      compactions_before = week.end.compactions, moved_before = week.end.bytes_moved;
      // The war story's question, asked without compacting: is there a 100 MiB block right now?
      week.probe_ok = week.end.largest_free_block >= workload.probe_bytes;
      result.requests += week.requests, result.failed += week.failed;
      result.weeks.push_back(week);
      week = {};
    }
  }
  for (const auto& [end, handle] : live) pool.free(handle);
  pool.free(model);
  pool.check_invariants();
  return result;
}

void print(const char* title, const SoakResult& result) {
  std::printf("\n%s\n", title);
  std::printf(
      "week  requests  success  used      free      largest free  fragmentation  100 MiB?  compactions  "
      "moved\n");
  for (std::size_t i = 0; i < result.weeks.size(); ++i) {
    const WeekRow& w = result.weeks[i];
    std::printf("%4zu  %8llu  %6.2f%%  %-8s  %-8s  %-12s  %13.2f  %-8s  %11llu  %s\n", i + 1,
                static_cast<unsigned long long>(w.requests),
                100.0 * double(w.requests - w.failed) / double(w.requests ? w.requests : 1),
                format_bytes(w.end.used_bytes).c_str(), format_bytes(w.end.free_bytes).c_str(),
                format_bytes(w.end.largest_free_block).c_str(), w.end.fragmentation(),
                w.probe_ok ? "yes" : "NO", static_cast<unsigned long long>(w.compactions),
                format_bytes(w.bytes_moved).c_str());
  }
  std::printf("overall allocation success rate %.4f (%llu of %llu requests failed)\n",
              double(result.requests - result.failed) / double(result.requests),
              static_cast<unsigned long long>(result.failed),
              static_cast<unsigned long long>(result.requests));
}

}  // namespace

int main(int argc, char** argv) try {
  int days = 60;
  std::uint64_t seed = 2026;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--days")
      days = std::atoi(argv[i + 1]);
    else if (option == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: service_soak [--days N] [--seed N]\n");
      return 2;
    }
  }
  const Workload workload;
  std::printf(
      "service soak: %d simulated days, %s pool on a virtual device (no memory behind it), %s model\n", days,
      format_bytes(workload.pool_bytes).c_str(), format_bytes(workload.model_bytes).c_str());
  const auto start = std::chrono::steady_clock::now();
  print("policy OFF (a classic allocator: no compaction)", run(workload, false, days, seed));
  print(
      "policy ON (DefragPolicy: > 0.30 fragmentation, at most every 5 simulated minutes; compaction on "
      "failure)",
      run(workload, true, days, seed));
  std::printf("\n(%.1f s of real time)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "service_soak: %s\n", error.what());
  return 1;
}
