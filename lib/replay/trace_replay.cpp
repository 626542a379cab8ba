// Replay engine: one Pool, one segment of a fixed capacity, every request of a validated trace in
// order. Failed allocations are counted and their frees skipped. With verification, every
// allocation holds a pattern derived from its id; a wrong byte raises corruption_error.
//
// The threshold policy runs DefragPolicy::maybe_compact after every free on a clock that the trace
// position drives (options.request_interval per request; 1 ms by default), so a replay of 40,000
// requests spans 40 s of policy time whatever the machine.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include <gsl/span>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/policy.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/trace_replay.hpp>

namespace vramkit {
namespace {

std::uint64_t splitmix64(std::uint64_t value) {
  value += 0x9E3779B97F4A7C15ull;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

/// Word i of an allocation's pattern: distinct per id and per position, so a block copied to the
/// wrong place, or another block's bytes, never pass.
std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t index) {
  return seed ^ (index * 0xD6E8FEB86659FD93ull);
}

/// Runs body(first_word, last_word) over [0, words), split across a few threads for large buffers
/// (verification is memory-bound; one core reaches about half the bandwidth of two).
template <class Body>
void for_words(std::uint64_t words, Body&& body) {
  constexpr std::uint64_t words_per_thread = (8ull << 20) / 8;
  const std::uint64_t threads = std::min<std::uint64_t>(
      {words / words_per_thread, std::max(1u, std::thread::hardware_concurrency()), 4});
  if (threads <= 1) {
    body(0, words);
    return;
  }
  std::vector<std::thread> workers;
  const std::uint64_t share = words / threads;
  for (std::uint64_t index = 1; index < threads; ++index) {
    workers.emplace_back(
        [&, index] { body(index * share, index + 1 == threads ? words : (index + 1) * share); });
  }
  body(0, share);
  for (std::thread& worker : workers) worker.join();
}

void generate(std::byte* destination, std::uint64_t seed, std::uint64_t bytes) {
  const std::uint64_t full_words = bytes / 8;
  for_words(full_words, [&](std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t index = first; index < last; ++index) {
      const std::uint64_t word = pattern_word(seed, index);
      std::memcpy(destination + index * 8, &word, 8);
    }
  });
  const std::uint64_t tail = pattern_word(seed, full_words);
  std::memcpy(destination + full_words * 8, &tail, bytes % 8);
}

/// The offset of the first byte that differs from the pattern, or `bytes`.
std::uint64_t mismatch(const std::byte* source, std::uint64_t seed, std::uint64_t bytes) {
  const std::uint64_t full_words = bytes / 8;
  std::atomic<std::uint64_t> first_bad{full_words};
  for_words(full_words, [&](std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t index = first; index < last; ++index) {
      std::uint64_t word;
      std::memcpy(&word, source + index * 8, 8);
      if (word != pattern_word(seed, index)) {
        std::uint64_t current = first_bad.load();
        while (index < current && !first_bad.compare_exchange_weak(current, index)) {
        }
        return;
      }
    }
  });
  if (first_bad.load() != full_words) return first_bad.load() * 8;
  const std::uint64_t tail = pattern_word(seed, full_words);
  if (std::memcmp(source + full_words * 8, &tail, bytes % 8) != 0) return full_words * 8;
  return bytes;
}

/// Writes and checks id patterns. On the host device, whose addresses are host pointers, it works
/// in place on the pinned buffer (one pass over the bytes); elsewhere it copies through one reused
/// host buffer with pool.write and pool.read.
class PatternChecker {
 public:
  explicit PatternChecker(bool in_place) : in_place_(in_place) {}

  void write(Pool& pool, Handle handle, std::uint64_t id, std::uint64_t bytes) {
    const std::uint64_t seed = splitmix64(id);
    if (in_place_) {
      const std::uint64_t address = pool.pin(handle);
      generate(reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(address)), seed, bytes);
      pool.unpin(handle);
      return;
    }
    buffer_.resize(bytes);
    generate(buffer_.data(), seed, bytes);
    pool.write(handle, gsl::span<const std::byte>(buffer_.data(), bytes));
  }

  void check(Pool& pool, Handle handle, std::uint64_t id, std::uint64_t bytes, const char* when) {
    const std::uint64_t seed = splitmix64(id);
    std::uint64_t offset = 0;
    if (in_place_) {
      const std::uint64_t address = pool.pin(handle);
      offset =
          mismatch(reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(address)), seed, bytes);
      pool.unpin(handle);
    } else {
      buffer_.resize(bytes);
      pool.read(handle, gsl::span<std::byte>(buffer_.data(), bytes));
      offset = mismatch(buffer_.data(), seed, bytes);
    }
    if (offset != bytes) {
      throw corruption_error(detail::message("replay verification: allocation id ", id, " differs at byte ",
                                             offset, " of ", bytes, " ", when));
    }
  }

 private:
  bool in_place_;
  std::vector<std::byte> buffer_;
};

std::shared_ptr<Device> make_replay_device(DeviceChoice choice, std::uint64_t capacity_bytes) {
  switch (choice) {
    case DeviceChoice::virtual_memory:
      return make_virtual_device();
    case DeviceChoice::host: {
      HostDeviceOptions host;
      host.capacity_bytes = std::max<std::uint64_t>(capacity_bytes, host.capacity_bytes);
      return make_host_device(host);
    }
    case DeviceChoice::cuda:
      return make_cuda_device();
    case DeviceChoice::automatic:
      break;
  }
  return make_device(choice);
}

}  // namespace

const char* to_string(ReplayPolicy policy) {
  switch (policy) {
    case ReplayPolicy::none:
      return "none";
    case ReplayPolicy::on_failure:
      return "on-failure";
    case ReplayPolicy::threshold:
      return "threshold";
  }
  return "?";
}

const char* to_string(FailureMode mode) {
  return mode == FailureMode::minimal ? "minimal" : "full";
}

double ReplayResult::success_rate() const {
  return allocation_requests == 0 ? 1.0
                                  : static_cast<double>(allocation_requests - failed_requests) /
                                        static_cast<double>(allocation_requests);
}

double ReplayResult::moved_ratio() const {
  return allocated_bytes == 0 ? 0.0 : static_cast<double>(bytes_moved) / static_cast<double>(allocated_bytes);
}

ReplayResult replay(const Trace& trace, const ReplayOptions& options, std::shared_ptr<Device> device) {
  const auto started = std::chrono::steady_clock::now();
  if (options.capacity_bytes == 0) throw invalid_argument("replay: a capacity of 0 bytes");
  if (!device) device = make_replay_device(options.device, options.capacity_bytes);
  if (options.verify && device->kind() == DeviceKind::virtual_memory) {
    throw invalid_argument(
        "replay: --verify needs memory behind the pool (host or cuda device), not virtual");
  }
  const bool compacting = options.policy != ReplayPolicy::none;
  Pool pool({.capacity_bytes = options.capacity_bytes,
             .max_capacity_bytes = 0,
             .granularity = options.granularity,
             .compact_on_failure = compacting && options.failure_mode == FailureMode::minimal,
             .free_cache_bytes = options.free_cache_bytes},
            std::move(device));

  std::size_t position = 0;
  std::optional<DefragPolicy> policy;
  if (options.policy == ReplayPolicy::threshold) {
    const auto epoch = std::chrono::steady_clock::time_point{};
    policy.emplace(DefragPolicyOptions{.fragmentation_threshold = options.fragmentation_threshold,
                                       .min_interval = options.min_interval,
                                       .clock = [&position, epoch, interval = options.request_interval] {
                                         return epoch + interval * static_cast<std::int64_t>(position);
                                       }});
  }

  ReplayResult result;
  result.requests = trace.requests.size();
  result.capacity_bytes = options.capacity_bytes;
  std::vector<Handle> handles(trace.allocations);
  std::vector<std::uint64_t> ids(options.verify ? trace.allocations : 0);
  PatternChecker checker(pool.device().kind() == DeviceKind::host && pool.device().host_addressable());
  std::uint64_t compactions_seen = 0;
  // After any compaction, every live allocation must still hold its pattern.
  auto check_after_compaction = [&] {
    if (!options.verify) return;
    const std::uint64_t compactions = pool.statistics().compactions;
    if (compactions == compactions_seen) return;
    compactions_seen = compactions;
    for (std::uint32_t allocation = 0; allocation < handles.size(); ++allocation) {
      if (handles[allocation]) {
        checker.check(pool, handles[allocation], ids[allocation], pool.size(handles[allocation]),
                      "after a compaction");
      }
    }
  };

  const std::size_t sample_stride =
      options.samples == 0 ? 0 : std::max<std::size_t>(1, trace.requests.size() / options.samples);
  auto sample = [&](std::size_t request) {
    const PoolStatistics statistics = pool.statistics();
    result.samples.push_back(
        {request, statistics.used_bytes, statistics.reserved_bytes, statistics.fragmentation()});
  };
  const std::size_t progress_stride = std::max<std::size_t>(1, trace.requests.size() / 100);

  for (; position < trace.requests.size(); ++position) {
    const TraceRequest& request = trace.requests[position];
    if (request.op == TraceOp::allocate) {
      ++result.allocation_requests;
      Handle handle;
      try {
        handle = pool.allocate(request.bytes, options.alignment);
      } catch (const out_of_memory&) {
        if (compacting && options.failure_mode == FailureMode::full) {
          const PoolStatistics statistics = pool.statistics();
          if (statistics.free_bytes >= request.bytes) {
            pool.compact();
            check_after_compaction();
            try {
              handle = pool.allocate(request.bytes, options.alignment);
            } catch (const out_of_memory&) {
            }
          }
        }
      }
      check_after_compaction();
      if (handle) {
        handles[request.allocation] = handle;
        result.allocated_bytes += request.bytes;
        if (options.verify) {
          ids[request.allocation] = request.id;
          checker.write(pool, handle, request.id, request.bytes);
        }
      } else {
        ++result.failed_requests;
        if (options.stop_on_failure) break;
      }
    } else {
      Handle& handle = handles[request.allocation];
      if (handle) {
        if (options.verify) checker.check(pool, handle, request.id, request.bytes, "before its free");
        pool.free(handle);
        handle = Handle{};
        if (policy) {
          policy->maybe_compact(pool);
          check_after_compaction();
        }
      }
    }
    if (sample_stride != 0 && position % sample_stride == 0) sample(position);
    if (options.progress && position % progress_stride == 0)
      options.progress(position, trace.requests.size());
  }
  if (sample_stride != 0) sample(position);
  if (options.progress) options.progress(position, trace.requests.size());

  const PoolStatistics statistics = pool.statistics();
  result.peak_used_bytes = statistics.peak_used_bytes;
  result.compactions = statistics.compactions;
  result.bytes_moved = statistics.bytes_moved;
  result.verified = options.verify;
  result.seconds = std::chrono::steady_clock::now() - started;
  return result;
}

FootprintResult find_footprint(const Trace& trace, ReplayOptions options, std::uint64_t resolution) {
  if (resolution == 0 || resolution % options.granularity != 0) {
    throw invalid_argument(detail::message("footprint resolution ", resolution,
                                           " is not a positive multiple of the granularity ",
                                           options.granularity));
  }
  FootprintResult found;
  const bool stop = options.stop_on_failure;
  auto succeeds = [&](std::uint64_t steps) {
    options.capacity_bytes = steps * resolution;
    options.stop_on_failure = true;
    ++found.replays;
    const ReplayResult attempt = replay(trace, options);
    return attempt.failed_requests == 0;
  };
  // Below the peak live bytes nothing can succeed: lower is a known failure (or 0).
  std::uint64_t lower = trace.peak_live_bytes / resolution;
  if (trace.peak_live_bytes % resolution == 0 && lower > 0) --lower;
  std::uint64_t upper = lower + 1;
  std::uint64_t step = 1;
  const std::uint64_t limit = max_trace_request_bytes / resolution * 64;
  while (!succeeds(upper)) {
    if (upper >= limit)
      throw invalid_argument("footprint search: no capacity up to 2^54 bytes serves the trace");
    lower = upper;
    step *= 2;
    upper = std::min(limit, lower + step);
  }
  while (upper - lower > 1) {
    const std::uint64_t middle = lower + (upper - lower) / 2;
    if (succeeds(middle)) {
      upper = middle;
    } else {
      lower = middle;
    }
  }
  found.footprint_bytes = upper * resolution;
  options.capacity_bytes = found.footprint_bytes;
  options.stop_on_failure = stop;
  found.replay = replay(trace, options);
  ++found.replays;
  return found;
}

}  // namespace vramkit
