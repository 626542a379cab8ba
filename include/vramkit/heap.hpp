#pragma once
// Heap: host-side bookkeeping of one contiguous offset range [0, capacity).
//
// TLSF (two-level segregated fit): free blocks sit in size classes indexed by two bitmaps, so
// allocate and free are O(1); a freed block merges with free neighbours at once; blocks also form
// one address-ordered list, so the compactor can walk them. No memory is touched: the heap serves a
// real pool, a simulated one and trace replay alike.
//
// Invariants (check_invariants() verifies every one; tests call it):
//  - the blocks tile [0, capacity) in address order, with no gap and no overlap;
//  - every offset and size is a multiple of the granularity;
//  - no two free blocks are neighbours (immediate coalescing);
//  - a free block is in exactly the free list of its size class, records that class, and that class's
//    bits are set; the first block of a list, and only it, has no previous block in the list;
//  - free_bytes, free_ranges and the sum of squared free sizes equal what the block list gives;
//  - every node describes a block or is on the spare list, never both.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <gsl/span>

#include <vramkit/detail/default_init_allocator.hpp>

namespace vramkit {

/// Identifies one block of one heap. Stable while the block exists; reused after it is freed.
using BlockId = std::uint32_t;
inline constexpr BlockId no_block = 0xFFFFFFFFu;

/// One block as the address-ordered walk shows it.
struct HeapBlock {
  BlockId id;
  std::uint64_t offset;
  std::uint64_t bytes;
  bool free;
  std::uint32_t tag;  ///< The owner's tag of an allocated block (the pool stores a slot index).
};

/// A block placed by allocate() or allocate_at().
struct HeapAllocation {
  BlockId block;
  std::uint64_t offset;
  std::uint64_t bytes;  ///< The size rounded up to the granularity.
};

/// Where an allocated block should be when a heap is rebuilt after compaction.
struct HeapPlacement {
  std::uint64_t offset;
  std::uint64_t bytes;
  std::uint32_t tag;
};

/// Exact statistics, each kept up to date in O(1) per operation.
struct HeapStatistics {
  std::uint64_t capacity = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t largest_free_block = 0;
  std::uint64_t free_ranges = 0;
  std::uint64_t allocated_blocks = 0;
  double sum_of_squared_free = 0;  ///< Sum over free ranges of bytes^2 (for the sqrt metric).
};

class Heap {
 public:
  /// capacity and granularity in bytes; granularity is a power of two and divides capacity.
  /// Throws invalid_argument otherwise, or for a capacity of 0.
  explicit Heap(std::uint64_t capacity, std::uint64_t granularity = 256);

  /// Places a block of at least `bytes` (rounded up to the granularity) at an offset that is a
  /// multiple of `alignment` (a power of two; at least the granularity is used). Returns nullopt
  /// when no free block can hold it. O(1): first the request's own size class (up to 2 of its
  /// blocks: one of exactly the rounded size, else the smallest that fits), then good fit (the
  /// first non-empty class whose every block fits); when both find nothing it scans the classes
  /// that may still hold a fitting block, so it fails only when nothing fits.
  std::optional<HeapAllocation> allocate(std::uint64_t bytes, std::uint64_t alignment, std::uint32_t tag);

  /// Claims exactly [offset, offset + bytes) if it lies inside one free block, else nullopt.
  /// O(n): it walks to the containing block. For tools and tests, not the allocation path.
  std::optional<HeapAllocation> allocate_at(std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag);

  /// Frees an allocated block and merges it with free neighbours. O(1).
  void free(BlockId block);

  /// Replaces every block: the given allocations (sorted by offset, disjoint, granular) and free
  /// space between them. Returns their new ids in the same order: ids are renumbered in address
  /// order, so walks over the blocks read memory in order afterwards. O(n).
  std::vector<BlockId> rebuild(gsl::span<const HeapPlacement> placements);
  /// The same, the new ids written into `ids` (cleared first). Allocates nothing when reserve_rebuild
  /// was called for at least as many placements and `ids` has room for them: a compaction reserves
  /// before it moves anything, so that applying the moves cannot run out of host memory.
  void rebuild(gsl::span<const HeapPlacement> placements, std::vector<BlockId>& ids);
  /// Room for a rebuild of up to `placements` blocks (and the free blocks between them). Throws
  /// std::bad_alloc, changing nothing, when host memory runs out.
  void reserve_rebuild(std::size_t placements);
  /// The most parts rebuild_in_parts splits its work into.
  static constexpr unsigned max_rebuild_parts = 64;
  /// rebuild(placements, ids), its O(n) passes split into `parts` (1 to max_rebuild_parts) ranges
  /// of placements: run_parts(task) must call task(k) once for every k < parts, on any threads, and
  /// return once every call has returned (the pool's WorkerTeam::run). The result is exactly
  /// rebuild's, nodes and free lists alike; the calling thread links the free blocks (O(free
  /// blocks): each part chains its own). Throws what rebuild throws, changing nothing; allocates
  /// only as it does. run_parts is called twice: a throw from the first changes nothing, a throw
  /// from the second (the old nodes are gone, the new ones half written) ends the program.
  template <class RunParts>
  void rebuild_in_parts(gsl::span<const HeapPlacement> placements, std::vector<BlockId>& ids, unsigned parts,
                        RunParts&& run_parts) {
    RebuildParts job = split_rebuild(placements, parts);
    run_parts([this, &job](unsigned part) noexcept { check_rebuild_part(job, part); });
    prepare_rebuild_parts(job, ids);
    BlockId* const id_of = ids.data();
    [&]() noexcept {
      run_parts([this, &job, id_of](unsigned part) noexcept { fill_rebuild_part(job, part, id_of); });
    }();
    finish_rebuild_parts(job);
  }

  /// A rebuild written ahead by other threads, for blocks that end packed from offset 0 in
  /// address order (a full compaction's slide), while the heap is still read. prepare_packed(count)
  /// takes the room for count blocks (kept for the next time; throws std::bad_alloc, changing
  /// nothing). Then write_packed(k, ...) writes block k's node (k < count, each once, from any
  /// thread): that changes nothing the heap shows, and reading it meanwhile is safe. Then
  /// adopt_packed(count, end) replaces every block with those count blocks, block k getting id k,
  /// and one free block from `end` on; allocates nothing. It checks that the first block starts at
  /// 0 and the last ends at `end` within the capacity, else throws std::logic_error changing
  /// nothing: the writer makes each block start where the one before it ends (check_invariants
  /// verifies that too). Unless adopted, what was written is left unused.
  void prepare_packed(std::size_t count);
  /// prepare_packed's room, taken and written once now (Pool::prepare_compaction): the threads
  /// that write the nodes later take no page faults. Throws as prepare_packed does.
  void reserve_packed(std::size_t count);
  void write_packed(std::size_t index, std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag) noexcept {
    const auto id = static_cast<BlockId>(index);
    packed_[index] = {offset, bytes, id == 0 ? no_block : id - 1, id + 1, no_block, no_block, tag, 0, false, true};
  }
  void adopt_packed(std::size_t count, std::uint64_t end);

  HeapBlock block(BlockId id) const {
    const Node& node = nodes_[id];  // inline: the compactor's walk calls it once per block
    return {id, node.offset, node.bytes, node.free, node.tag};
  }
  void set_tag(BlockId id, std::uint32_t tag);

  /// Visits every block in address order. O(n).
  template <class Visitor>
  void for_each_block(Visitor&& visit) const {
    for (BlockId id = first_; id != no_block; id = nodes_[id].next_physical) visit(block(id));
  }

  /// Up to `count` blocks (count >= 1), the first block among them, in address order and each
  /// once: where threads can start walking the address-ordered list in pieces, each up to the next
  /// start. Taken at evenly spaced node ids, so as evenly spaced over the blocks as ids are (a
  /// rebuilt heap numbers its blocks in address order). Written into `starts` (cleared first).
  /// O(count log count).
  void walk_starts(std::size_t count, std::vector<BlockId>& starts) const;

  /// The block that follows / precedes `id` in address order, or no_block.
  BlockId next(BlockId id) const { return nodes_[id].next_physical; }
  BlockId previous(BlockId id) const { return nodes_[id].previous_physical; }
  BlockId first() const { return first_; }

  HeapStatistics statistics() const;
  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t granularity() const { return granularity_; }
  std::uint64_t free_bytes() const { return free_bytes_; }
  std::uint64_t free_ranges() const { return free_ranges_; }
  std::uint64_t allocated_blocks() const { return allocated_blocks_; }
  /// The largest free block. O(1) when cached; after a change to the top size class it rescans
  /// that one class (its blocks differ in size by at most 1/32).
  std::uint64_t largest_free_block() const;
  /// The largest request (bytes) that allocate() could serve with the given alignment now.
  std::uint64_t largest_allocatable(std::uint64_t alignment) const;

  /// Verifies every invariant listed above; throws std::logic_error naming the first broken one.
  void check_invariants() const;

 private:
  static constexpr unsigned second_level_log2 = 5;
  static constexpr unsigned second_level_count = 1u << second_level_log2;
  static constexpr unsigned first_level_count = 64;
  /// Size classes are numbered first * 32 + second: one index addresses a list and both bitmaps.
  static constexpr unsigned class_count = first_level_count * second_level_count;
  static constexpr unsigned no_class = ~0u;

  /// Trivial, so that a parallel rebuild sizes nodes_ without a serial pass of writes (nodes_'s
  /// DefaultInitAllocator); every node is made from blank_node() or written whole.
  struct Node {
    std::uint64_t offset;
    std::uint64_t bytes;
    BlockId previous_physical;
    BlockId next_physical;
    BlockId previous_free;  ///< Free blocks only: no_block at the head of the list.
    BlockId next_free;      ///< Free blocks only.
    std::uint32_t tag;
    std::uint16_t free_class;  ///< A free block's size class (set by insert_free).
    bool free;
    bool in_use;  ///< The node describes a block (not on the spare list).
  };
  static constexpr Node blank_node() {
    return {0, 0, no_block, no_block, no_block, no_block, 0, 0, false, false};
  }

  /// A parallel rebuild's split (rebuild_in_parts): part k has placements [begin[k], begin[k+1]),
  /// which with the free blocks before them (gaps[k]) become nodes [first_node[k], first_node[k+1]).
  struct RebuildParts {
    gsl::span<const HeapPlacement> placements;
    unsigned parts = 1;
    std::array<std::size_t, max_rebuild_parts + 1> begin{};
    std::array<std::size_t, max_rebuild_parts + 1> first_node{};
    std::array<std::size_t, max_rebuild_parts> gaps{};
    std::array<std::size_t, max_rebuild_parts> first_bad{};  ///< The part's first invalid placement, or SIZE_MAX.
    /// The part's first free block, chained to its others through next_free, or no_block.
    std::array<BlockId, max_rebuild_parts> first_gap{};
  };
  RebuildParts split_rebuild(gsl::span<const HeapPlacement> placements, unsigned parts) const;
  void check_rebuild_part(RebuildParts& job, unsigned part) const noexcept;
  void prepare_rebuild_parts(RebuildParts& job, std::vector<BlockId>& ids);
  void fill_rebuild_part(RebuildParts& job, unsigned part, BlockId* ids) noexcept;
  void finish_rebuild_parts(const RebuildParts& job) noexcept;
  bool valid_placement(const HeapPlacement& placement, std::uint64_t cursor) const noexcept;
  [[noreturn]] static void throw_invalid_placement(const HeapPlacement& placement);
  void clear_for_rebuild() noexcept;

  static unsigned class_of(std::uint64_t units);
  static bool starts_class(std::uint64_t units);
  static unsigned class_holding(std::uint64_t units);
  unsigned find_class_at_least(unsigned size_class) const;
  BlockId new_node();
  void release_node(BlockId id);
  void insert_free(BlockId id);
  void remove_free(BlockId id);
  void count_free(std::uint64_t bytes);
  HeapAllocation take(BlockId id, std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag);
  std::optional<std::uint64_t> fit_offset(const Node& node, std::uint64_t bytes, std::uint64_t alignment) const;

  std::uint64_t capacity_;
  std::uint64_t granularity_;
  unsigned granularity_log2_;
  std::vector<Node, detail::DefaultInitAllocator<Node>> nodes_;
  /// Nodes that prepare_packed sized and write_packed fills; the nodes that adopt_packed replaced
  /// are kept here for the next time.
  std::vector<Node, detail::DefaultInitAllocator<Node>> packed_;
  BlockId spare_head_ = no_block;  ///< Nodes describing no block, linked by next_physical.
  std::size_t spare_count_ = 0;
  BlockId first_ = no_block;
  std::uint64_t first_level_bitmap_ = 0;
  std::uint32_t second_level_bitmap_[first_level_count] = {};
  BlockId free_heads_[class_count];
  std::uint64_t free_bytes_ = 0;
  std::uint64_t free_ranges_ = 0;
  std::uint64_t allocated_blocks_ = 0;
  __extension__ typedef unsigned __int128 uint128;  // exact sum of squares (sizes reach 2^40+)
  uint128 sum_of_squared_free_ = 0;
  mutable std::uint64_t largest_free_cache_ = 0;
  mutable bool largest_free_valid_ = false;
};

}  // namespace vramkit
