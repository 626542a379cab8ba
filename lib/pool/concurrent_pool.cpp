// ConcurrentPool: shards, a home shard per thread, routing by table id.
#include <vramkit/concurrent_pool.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/units.hpp>

#include "pool/pool_segment.hpp"

namespace vramkit {
namespace {

std::atomic<std::uint64_t> next_front_id{1};

// The calling thread's home shard of each front it used, most recent first. A front's id is never
// reused, so an entry of a destroyed front is never matched again; it is dropped when the thread
// next meets a new front (fronts are made far more rarely than they are used).
struct HomeEntry {
  std::uint64_t front;
  std::size_t shard;
};
thread_local std::vector<HomeEntry> homes;

// The ids of the fronts alive, sorted.
std::mutex live_fronts_mutex;
std::vector<std::uint64_t> live_fronts;

}  // namespace

ConcurrentPool::ConcurrentPool(ConcurrentPoolOptions options, std::shared_ptr<Device> device)
    : id_(next_front_id.fetch_add(1)) {
  unsigned count = options.shards != 0 ? options.shards : std::max(1u, std::thread::hardware_concurrency());
  count = std::min(count, 64u);
  PoolOptions shard_options = options.pool;
  const std::uint64_t granule = std::max<std::uint64_t>(shard_options.granularity, 16);
  if (!device) device = make_device();
  // A fraction of the free memory is taken once and split evenly: shard by shard, each would take
  // its share of what the shards before it left.
  const std::uint64_t capacity = shard_options.capacity_bytes != 0
                                     ? shard_options.capacity_bytes
                                     : capacity_of_fraction(shard_options.capacity_fraction, *device);
  shard_options.capacity_bytes = capacity / count / granule * granule;
  if (shard_options.capacity_bytes == 0) {
    throw invalid_argument(detail::message("capacity ", capacity, " split over ", count,
                                           " shards leaves less than one granule of ", granule, " bytes each"));
  }
  if (shard_options.max_capacity_bytes != 0) shard_options.max_capacity_bytes /= count;
  if (shard_options.segment_bytes != 0) shard_options.segment_bytes /= count;
  shards_.reserve(count);
  for (unsigned index = 0; index < count; ++index) shards_.push_back(std::make_unique<Pool>(shard_options, device));
  std::lock_guard lock(live_fronts_mutex);  // last: a constructor that throws leaves no entry
  live_fronts.insert(std::upper_bound(live_fronts.begin(), live_fronts.end(), id_), id_);
}

ConcurrentPool::~ConcurrentPool() {
  std::lock_guard lock(live_fronts_mutex);
  const auto found = std::lower_bound(live_fronts.begin(), live_fronts.end(), id_);
  if (found != live_fronts.end() && *found == id_) live_fronts.erase(found);
}

std::size_t ConcurrentPool::remembered_homes() { return homes.size(); }

std::size_t ConcurrentPool::home_index() {
  for (const HomeEntry& entry : homes) {
    if (entry.front == id_) return entry.shard;
  }
  static std::atomic<std::size_t> next_thread{0};
  const std::size_t shard = next_thread.fetch_add(1) % shards_.size();
  {
    std::lock_guard lock(live_fronts_mutex);
    std::erase_if(homes, [](const HomeEntry& entry) {
      return !std::binary_search(live_fronts.begin(), live_fronts.end(), entry.front);
    });
  }
  homes.insert(homes.begin(), {id_, shard});
  return shard;
}

Pool& ConcurrentPool::local() { return *shards_[home_index()]; }

Handle ConcurrentPool::allocate(std::uint64_t bytes, std::uint64_t alignment) {
  const std::size_t home = home_index();
  try {
    return shards_[home]->allocate(bytes, alignment);
  } catch (const out_of_memory&) {
  }
  for (std::size_t step = 1; step < shards_.size(); ++step) {
    retries_.fetch_add(1, std::memory_order_relaxed);  // the failed attempt before it is not a request
    try {
      return shards_[(home + step) % shards_.size()]->allocate(bytes, alignment);
    } catch (const out_of_memory&) {
    }
  }
  std::uint64_t largest = 0;
  for (const auto& shard : shards_) largest = std::max(largest, shard->statistics().largest_free_block);
  throw out_of_memory(detail::message("requested ", format_bytes(bytes), " (", bytes, " bytes); none of the ",
                                      shards_.size(), " shards can serve it (largest free block of any shard ",
                                      format_bytes(largest), ", largest possible block ",
                                      format_bytes(shards_.front()->largest_possible_block()), ")"));
}

Pool& ConcurrentPool::owner(Handle handle) {
  for (const auto& shard : shards_) {
    if (shard->owns(handle)) return *shard;
  }
  if (handle.empty()) throw invalid_handle("empty handle (a moved-from or default-constructed buffer)");
  throw invalid_handle(detail::message("handle {slot ", handle.slot, ", generation ", handle.generation,
                                       "} belongs to pool table ", handle.table, ", not to any of the ",
                                       shards_.size(), " shards of this concurrent pool"));
}

void ConcurrentPool::prepare_compaction() {
  for (const auto& shard : shards_) shard->prepare_compaction();
}

CompactionReport ConcurrentPool::compact(const CompactOptions& options) {
  CompactionReport total;
  const PoolStatistics before = statistics();
  total.fragmentation_before = before.fragmentation();
  total.largest_free_before = before.largest_free_block;
  total.goal_met = false;
  CompactOptions remaining = options;  // one byte budget for the whole call, not one per shard
  for (const auto& shard : shards_) {
    const CompactionReport report = shard->compact(remaining);
    remaining.max_bytes_moved -= std::min(remaining.max_bytes_moved, report.bytes_moved);
    total.blocks_moved += report.blocks_moved;
    total.bytes_moved += report.bytes_moved;
    total.segments_released += report.segments_released;
    total.bytes_released += report.bytes_released;
    total.goal_met = total.goal_met || report.goal_met;
    total.seconds += report.seconds;
    total.plan_seconds += report.plan_seconds;
    total.plan_given_seconds += report.plan_given_seconds;
    total.execute_seconds += report.execute_seconds;
    total.update_seconds += report.update_seconds;
  }
  const PoolStatistics after = statistics();
  total.fragmentation_after = after.fragmentation();
  total.largest_free_after = after.largest_free_block;
  return total;
}

PoolStatistics ConcurrentPool::statistics() const {
  PoolStatistics total;
  for (const auto& shard : shards_) {
    const PoolStatistics part = shard->statistics();
    total.reserved_bytes += part.reserved_bytes;
    total.used_bytes += part.used_bytes;
    total.requested_bytes += part.requested_bytes;
    total.free_bytes += part.free_bytes;
    total.largest_free_block = std::max(total.largest_free_block, part.largest_free_block);
    total.free_ranges += part.free_ranges;
    total.live_allocations += part.live_allocations;
    total.pinned_allocations += part.pinned_allocations;
    total.segments += part.segments;
    total.allocation_requests += part.allocation_requests;
    total.allocation_failures += part.allocation_failures;
    total.peak_used_bytes += part.peak_used_bytes;  // an upper bound: shards peak at different times
    total.peak_reserved_bytes += part.peak_reserved_bytes;
    total.compactions += part.compactions;
    total.blocks_moved += part.blocks_moved;
    total.bytes_moved += part.bytes_moved;
    total.compaction_time += part.compaction_time;
    total.sum_of_squared_free += part.sum_of_squared_free;
  }
  // Each retry followed a failed shard attempt of the same request: remove both from the sums.
  const std::uint64_t retries = retries_.load(std::memory_order_relaxed);
  total.allocation_requests -= std::min(retries, total.allocation_requests);
  total.allocation_failures -= std::min(retries, total.allocation_failures);
  return total;
}

}  // namespace vramkit
