#pragma once
// ConcurrentPool: several independent Pools (shards) behind one front, so that threads allocating
// at once do not queue on one mutex (the arena-per-thread design of RMM's arena resource and of
// jemalloc). Each thread is given a home shard on its first call (round robin); it allocates there
// and falls back to the other shards, in order, when its home shard cannot serve a request.
// Handles carry their shard's table id, so free, pin and copies go to the owning shard from any
// thread. Every shard compacts its own blocks, so compaction sees every block.
//
// What it costs: memory is split. Each shard holds capacity / shards bytes (and grows up to
// max_capacity / shards), and a block never spans shards: a request larger than one shard's
// largest possible block fails even when the shards together have the room. Use one Pool when
// requests are large or threads few; a ConcurrentPool when many threads churn small and medium
// buffers.
//
// Invariant: shards_ never changes after construction, so routing needs no lock.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <vramkit/pool.hpp>

namespace vramkit {

struct ConcurrentPoolOptions {
  PoolOptions pool;     ///< For the whole front: capacity and growth limit are split over the shards.
  unsigned shards = 0;  ///< 0: one per hardware thread, at most 64.
};

class ConcurrentPool {
 public:
  /// Throws what Pool's constructor throws, or invalid_argument when the capacity split over the
  /// shards leaves a shard less than one granule.
  explicit ConcurrentPool(ConcurrentPoolOptions options, std::shared_ptr<Device> device = make_device());
  ~ConcurrentPool();
  ConcurrentPool(const ConcurrentPool&) = delete;
  ConcurrentPool& operator=(const ConcurrentPool&) = delete;

  /// The calling thread's home shard: build DeviceBuffers on it to allocate without contention.
  Pool& local();
  /// Allocates on the home shard, then on the others; out_of_memory names the request and the
  /// shards' largest free blocks when none can serve it.
  Handle allocate(std::uint64_t bytes, std::uint64_t alignment = 256);
  /// The shard that issued `handle`; throws invalid_handle for a handle of no shard.
  Pool& owner(Handle handle);
  void free(Handle handle) { owner(handle).free(handle); }

  /// Compacts every shard; the report sums moves and takes the largest free block over shards.
  CompactionReport compact(const CompactOptions& options = {});
  /// Pool::prepare_compaction on every shard.
  void prepare_compaction();
  /// Sums over shards (largest free block: the largest of any shard; fragmentation then follows;
  /// peak used and peak reserved: sums of each shard's peak, an upper bound). A request that falls
  /// back to other shards counts once: a success if any shard served it.
  PoolStatistics statistics() const;

  std::size_t shard_count() const { return shards_.size(); }
  /// How many fronts' home shards the calling thread remembers: the fronts alive when it last met
  /// a new one, that one included (entries of destroyed fronts are dropped then). A diagnostic.
  static std::size_t remembered_homes();
  Pool& shard(std::size_t index) { return *shards_.at(index); }

 private:
  std::size_t home_index();
  std::vector<std::unique_ptr<Pool>> shards_;
  std::uint64_t id_;
  std::atomic<std::uint64_t> retries_{0};  ///< Shard attempts after a failed one, within one request.
};

}  // namespace vramkit
