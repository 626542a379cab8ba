// TLSF heap over one offset range. Sizes are handled in units of the granularity: size class
// (first, second) for u units is first = 0, second = u below 32 units, else first = floor(log2 u) - 4
// and second = the next five bits of u. Each class covers sizes within 1/32 of each other.
// Placement: the request's own class first (a bounded look at its list for an exact or the
// tightest fit), then TLSF good fit. Good fit alone never uses the own class of a request of 32
// units or more that does not start its class, and carves such a request out of a larger block
// even when a free block of exactly its size exists. Replayed with on-failure compaction over 41
// capacities, the own class first moved 4..13 % fewer bytes on average on image_pipeline and on
// synthetic churn traces (resnet_train moves almost nothing either way; docs/replay.md).
#include <vramkit/heap.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <gsl/assert>

#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {
namespace {

/// Blocks of the request's own size class that allocate looks at before good fit (see allocate).
constexpr unsigned own_class_probe = 2;

using detail::align_up;
using detail::is_power_of_two;

}  // namespace

Heap::Heap(std::uint64_t capacity, std::uint64_t granularity)
    : capacity_(capacity), granularity_(granularity), granularity_log2_(0) {
  if (!is_power_of_two(granularity)) {
    throw invalid_argument(detail::message("heap granularity ", granularity, " is not a power of two"));
  }
  if (capacity == 0 || capacity % granularity != 0) {
    throw invalid_argument(detail::message("heap capacity ", capacity,
                                           " must be a positive multiple of the granularity ", granularity));
  }
  granularity_log2_ = static_cast<unsigned>(std::countr_zero(granularity));
  for (auto& head : free_heads_) head = no_block;
  const BlockId whole = new_node();
  nodes_[whole].offset = 0;
  nodes_[whole].bytes = capacity;
  first_ = whole;
  insert_free(whole);
  count_free(capacity);
}

// The class as one number, first * 32 + second. Below 64 units that is `units` itself (first 0 or
// 1); above, shift = floor(log2 units) - 5 keeps the top six bits, whose leading one stands for the
// 32 of first = shift + 1. One bit scan, no branch.
inline unsigned Heap::class_of(std::uint64_t units) {
  const unsigned shift = 58u - static_cast<unsigned>(std::countl_zero(units | second_level_count));
  return (shift << second_level_log2) + static_cast<unsigned>(units >> shift);
}

// Whether `units` is the smallest size of its class: no bits set below the top six.
inline bool Heap::starts_class(std::uint64_t units) {
  const unsigned shift = 58u - static_cast<unsigned>(std::countl_zero(units | second_level_count));
  return (units & ((std::uint64_t{1} << shift) - 1)) == 0;
}

// The first class whose every block holds `units`: its own class, or the next one when `units` is
// above its class's smallest size (rounding it up to the next class boundary, carried into the
// next first-level class where it overflows).
inline unsigned Heap::class_holding(std::uint64_t units) {
  return class_of(units) + !starts_class(units);
}

// The first non-empty class at or above `size_class`, or no_class. Two bit scans.
inline unsigned Heap::find_class_at_least(unsigned size_class) const {
  const unsigned first = size_class >> second_level_log2;
  if (first >= first_level_count) return no_class;
  const std::uint32_t second_bits =
      second_level_bitmap_[first] & (~0u << (size_class & (second_level_count - 1)));
  if (second_bits != 0) {
    return (first << second_level_log2) + static_cast<unsigned>(std::countr_zero(second_bits));
  }
  if (first + 1 >= first_level_count) return no_class;
  const std::uint64_t first_bits = first_level_bitmap_ & (~std::uint64_t{0} << (first + 1));
  if (first_bits == 0) return no_class;
  const unsigned next = static_cast<unsigned>(std::countr_zero(first_bits));
  return (next << second_level_log2) + static_cast<unsigned>(std::countr_zero(second_level_bitmap_[next]));
}

inline BlockId Heap::new_node() {
  if (spare_head_ != no_block) {
    const BlockId id = spare_head_;
    Node& node = nodes_[id];  // every caller sets the offset, size and physical links
    spare_head_ = node.next_physical;
    --spare_count_;
    node.tag = 0;
    node.in_use = true;
    return id;
  }
  if (nodes_.size() >= no_block) throw out_of_memory("heap has 2^32 - 1 blocks; no more block ids");
  nodes_.push_back(blank_node());
  nodes_.back().in_use = true;
  return static_cast<BlockId>(nodes_.size() - 1);
}

// The spare list runs through next_physical, which a spare node has no use for: putting a node
// there needs no memory, so free() cannot fail half way through a merge.
inline void Heap::release_node(BlockId id) {
  Node& node = nodes_[id];
  node.in_use = false;
  node.next_physical = spare_head_;
  spare_head_ = id;
  ++spare_count_;
}

// A new free range in the statistics, for the constructor and rebuild. allocate and free instead
// apply the net change of all the ranges they take, split and merge, once.
inline void Heap::count_free(std::uint64_t bytes) {
  free_bytes_ += bytes;
  ++free_ranges_;
  sum_of_squared_free_ += static_cast<uint128>(bytes) * bytes;
  if (largest_free_valid_ && bytes > largest_free_cache_) largest_free_cache_ = bytes;
}

// The lists and bitmaps only: the caller updates the statistics.
inline void Heap::insert_free(BlockId id) {
  Node& node = nodes_[id];
  const unsigned size_class = class_of(node.bytes >> granularity_log2_);
  const unsigned first = size_class >> second_level_log2;
  node.free = true;
  node.free_class = static_cast<std::uint16_t>(size_class);
  BlockId& head = free_heads_[size_class];
  node.previous_free = no_block;
  node.next_free = head;
  if (head != no_block) nodes_[head].previous_free = id;
  head = id;
  first_level_bitmap_ |= std::uint64_t{1} << first;
  second_level_bitmap_[first] |= 1u << (size_class & (second_level_count - 1));
}

// The lists and bitmaps only: the caller updates the statistics. A block with no previous one is
// its list's head (insert_free keeps it so), so the head need not be read. The removed block's list
// links are left as they are: only free blocks' links are ever read.
inline void Heap::remove_free(BlockId id) {
  Node& node = nodes_[id];
  const BlockId previous = node.previous_free;
  const BlockId next = node.next_free;
  node.free = false;
  if (next != no_block) nodes_[next].previous_free = previous;
  if (previous != no_block) {
    nodes_[previous].next_free = next;
    return;
  }
  const unsigned size_class = node.free_class;
  free_heads_[size_class] = next;
  if (next == no_block) {
    const unsigned first = size_class >> second_level_log2;
    second_level_bitmap_[first] &= ~(1u << (size_class & (second_level_count - 1)));
    if (second_level_bitmap_[first] == 0) first_level_bitmap_ &= ~(std::uint64_t{1} << first);
  }
}

inline std::optional<std::uint64_t> Heap::fit_offset(const Node& node, std::uint64_t bytes,
                                              std::uint64_t alignment) const {
  const std::uint64_t offset = align_up(node.offset, alignment);
  if (offset - node.offset + bytes > node.bytes) return std::nullopt;
  return offset;
}

// Cuts [offset, offset + bytes) out of free block `id`: the parts before and after stay free.
// Inlined into allocate: returned through memory, its result was read back as one 16-byte load of
// two 8-byte stores, which the CPU cannot forward (a stall on every allocation).
[[gnu::always_inline]] inline HeapAllocation Heap::take(BlockId id, std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag) {
  // Room for the (up to) two nodes a split creates, before anything changes: new_node() then
  // cannot throw half way through the split.
  if (spare_count_ < 2) {
    if (nodes_.size() + 2 > no_block) throw out_of_memory("heap has 2^32 - 1 blocks; no more block ids");
    if (nodes_.capacity() < nodes_.size() + 2) nodes_.reserve(std::max(nodes_.size() + 2, 2 * nodes_.capacity()));
  }
  remove_free(id);
  Node* node = &nodes_[id];
  const std::uint64_t whole = node->bytes;
  std::uint64_t parts = 0;  // left free
  uint128 part_squares = 0;
  if (offset > node->offset) {  // free head part
    const BlockId head = new_node();
    node = &nodes_[id];
    Node& head_node = nodes_[head];
    head_node.offset = node->offset;
    head_node.bytes = offset - node->offset;
    head_node.previous_physical = node->previous_physical;
    head_node.next_physical = id;
    if (node->previous_physical != no_block) nodes_[node->previous_physical].next_physical = head;
    else first_ = head;
    node->previous_physical = head;
    node->offset = offset;
    node->bytes -= head_node.bytes;
    insert_free(head);
    ++parts;
    part_squares += static_cast<uint128>(head_node.bytes) * head_node.bytes;
  }
  if (node->bytes > bytes) {  // free tail part
    const BlockId tail = new_node();
    node = &nodes_[id];
    Node& tail_node = nodes_[tail];
    const std::uint64_t tail_bytes = node->bytes - bytes;
    tail_node.offset = offset + bytes;
    tail_node.bytes = tail_bytes;
    tail_node.previous_physical = id;
    tail_node.next_physical = node->next_physical;
    if (node->next_physical != no_block) nodes_[node->next_physical].previous_physical = tail;
    node->next_physical = tail;
    node->bytes = bytes;
    insert_free(tail);
    ++parts;
    part_squares += static_cast<uint128>(tail_bytes) * tail_bytes;
  }
  // The statistics change once: `bytes` leave the free bytes, the whole block leaves the ranges and
  // the parts left free join them.
  free_bytes_ -= bytes;
  free_ranges_ = free_ranges_ + parts - 1;
  sum_of_squared_free_ += part_squares - static_cast<uint128>(whole) * whole;
  if (whole >= largest_free_cache_) largest_free_valid_ = false;  // the parts are smaller
  node->tag = tag;
  ++allocated_blocks_;
  return {id, offset, bytes};
}

std::optional<HeapAllocation> Heap::allocate(std::uint64_t bytes, std::uint64_t alignment, std::uint32_t tag) {
  if (bytes == 0 || bytes > capacity_ || !is_power_of_two(alignment)) return std::nullopt;
  if (alignment < granularity_) alignment = granularity_;
  const std::uint64_t rounded = align_up(bytes, granularity_);
  const std::uint64_t search = rounded + (alignment - granularity_);
  if (search < rounded) return std::nullopt;
  // The request's own class first, when good fit skips it (sizes of 32 units and more): a block of
  // exactly the rounded size there, or the smallest fitting one among the first own_class_probe of
  // its list, leaves no remainder or a smaller one than a block of the next class up would.
  // Constant work: at most own_class_probe blocks.
  const std::uint64_t units = rounded >> granularity_log2_;
  const unsigned own = class_of(units);
  // Any block of the class found by rounding the request up to the next class boundary fits.
  const unsigned guaranteed =
      search == rounded ? own + !starts_class(units) : class_holding(search >> granularity_log2_);
  if (own != guaranteed &&
      (second_level_bitmap_[own >> second_level_log2] >> (own & (second_level_count - 1)) & 1u) != 0) {
    BlockId best = no_block;
    std::uint64_t best_offset = 0;
    unsigned probed = 0;
    for (BlockId id = free_heads_[own]; id != no_block && probed < own_class_probe;
         id = nodes_[id].next_free, ++probed) {
      const auto offset = fit_offset(nodes_[id], rounded, alignment);
      if (!offset || (best != no_block && nodes_[id].bytes >= nodes_[best].bytes)) continue;
      best = id;
      best_offset = *offset;
      if (nodes_[id].bytes == rounded) break;
    }
    if (best != no_block) return take(best, best_offset, rounded, tag);
  }
  const unsigned found = find_class_at_least(guaranteed);
  if (found != no_class) {
    const BlockId id = free_heads_[found];
    if (const auto offset = fit_offset(nodes_[id], rounded, alignment)) return take(id, *offset, rounded, tag);
  }
  // Below the class that guarantees a fit, a block may still fit (the request's own class, or with
  // alignment padding smaller than the worst case): scan those classes so that allocate fails only
  // when nothing fits. Only reached when the O(1) search finds nothing.
  for (unsigned size_class = find_class_at_least(own); size_class != no_class && size_class != found;
       size_class = find_class_at_least(size_class + 1)) {
    for (BlockId id = free_heads_[size_class]; id != no_block; id = nodes_[id].next_free) {
      if (const auto offset = fit_offset(nodes_[id], rounded, alignment)) return take(id, *offset, rounded, tag);
    }
  }
  return std::nullopt;
}

std::optional<HeapAllocation> Heap::allocate_at(std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag) {
  if (bytes == 0 || offset % granularity_ != 0 || offset > capacity_ || bytes > capacity_ - offset) {
    return std::nullopt;
  }
  const std::uint64_t rounded = align_up(bytes, granularity_);
  for (BlockId id = first_; id != no_block; id = nodes_[id].next_physical) {
    const Node& node = nodes_[id];
    if (node.offset + node.bytes <= offset) continue;
    if (!node.free || offset + rounded > node.offset + node.bytes) return std::nullopt;
    return take(id, offset, rounded, tag);
  }
  return std::nullopt;
}

void Heap::free(BlockId id) {
  Expects(id < nodes_.size() && nodes_[id].in_use && !nodes_[id].free);
  --allocated_blocks_;
  Node& node = nodes_[id];
  const std::uint64_t bytes = node.bytes;
  std::uint64_t absorbed = 0;  // free neighbours
  uint128 absorbed_squares = 0;
  const BlockId previous = node.previous_physical;
  if (previous != no_block && nodes_[previous].free) {  // absorb the free block before
    remove_free(previous);
    const Node& before = nodes_[previous];
    ++absorbed;
    absorbed_squares += static_cast<uint128>(before.bytes) * before.bytes;
    node.offset = before.offset;
    node.bytes += before.bytes;
    node.previous_physical = before.previous_physical;
    if (node.previous_physical != no_block) nodes_[node.previous_physical].next_physical = id;
    else first_ = id;
    release_node(previous);
  }
  const BlockId next = node.next_physical;
  if (next != no_block && nodes_[next].free) {  // absorb the free block after
    remove_free(next);
    const Node& after = nodes_[next];
    ++absorbed;
    absorbed_squares += static_cast<uint128>(after.bytes) * after.bytes;
    node.bytes += after.bytes;
    node.next_physical = after.next_physical;
    if (node.next_physical != no_block) nodes_[node.next_physical].previous_physical = id;
    release_node(next);
  }
  node.tag = 0;
  insert_free(id);
  // The statistics change once, as in take: the block's bytes join the free bytes, the merged block
  // replaces the neighbours it absorbed.
  free_bytes_ += bytes;
  free_ranges_ = free_ranges_ + 1 - absorbed;
  sum_of_squared_free_ += static_cast<uint128>(node.bytes) * node.bytes - absorbed_squares;
  // The merged block is at least as large as any block it absorbed: the cache stays exact.
  if (largest_free_valid_ && node.bytes > largest_free_cache_) largest_free_cache_ = node.bytes;
}

void Heap::walk_starts(std::size_t count, std::vector<BlockId>& starts) const {
  if (count == 0) throw invalid_argument("heap walk starts: a count of 0; at least 1 (the first block)");
  starts.clear();
  starts.reserve(std::min(count, nodes_.size()) + 1);
  starts.push_back(first_);
  const std::size_t nodes = nodes_.size();
  const std::size_t wanted = std::min(count, nodes);
  for (std::size_t index = 1; index < wanted; ++index) {
    const auto id = static_cast<BlockId>(nodes * index / wanted);
    if (nodes_[id].in_use && id != first_) starts.push_back(id);
  }
  std::sort(starts.begin(), starts.end(), [this](BlockId a, BlockId b) { return nodes_[a].offset < nodes_[b].offset; });
}

std::vector<BlockId> Heap::rebuild(gsl::span<const HeapPlacement> placements) {
  std::vector<BlockId> ids;
  ids.reserve(placements.size());
  rebuild(placements, ids);
  return ids;
}

void Heap::reserve_rebuild(std::size_t placements) {
  // Each block, a free block before it, and one after the last.
  if (placements < no_block / 2) nodes_.reserve(2 * placements + 1);
}

void Heap::rebuild(gsl::span<const HeapPlacement> placements, std::vector<BlockId>& ids) {
  std::uint64_t cursor = 0;
  std::size_t nodes_needed = placements.size();
  for (const HeapPlacement& placement : placements) {
    if (!valid_placement(placement, cursor)) throw_invalid_placement(placement);
    if (placement.offset > cursor) ++nodes_needed;  // a free block before it
    cursor = placement.offset + placement.bytes;
  }
  if (cursor < capacity_) ++nodes_needed;
  if (placements.size() >= no_block / 2) throw out_of_memory("heap rebuild: more blocks than block ids");
  // Every allocation first, so that a failure leaves the heap as it was. The nodes are rebuilt in
  // the storage they have when it is large enough, as after a compaction (fewer free blocks than
  // before): fresh storage would be zeroed by the kernel page by page, which for 100,000 blocks
  // costs more than the rebuild itself.
  decltype(nodes_) storage;
  if (nodes_.capacity() < nodes_needed) storage.reserve(nodes_needed);
  ids.clear();
  ids.reserve(placements.size());
  if (storage.capacity() != 0)
    nodes_.swap(storage);
  else
    nodes_.clear();
  clear_for_rebuild();

  BlockId last = no_block;
  // Nodes are appended in address order (the spare list is empty after the clear), linked as they go.
  auto append = [&](std::uint64_t offset, std::uint64_t bytes, bool is_free, std::uint32_t tag) {
    const auto id = static_cast<BlockId>(nodes_.size());
    Node& node = nodes_.emplace_back(blank_node());
    node.offset = offset;
    node.bytes = bytes;
    node.tag = tag;
    node.in_use = true;
    node.previous_physical = last;
    if (last != no_block) nodes_[last].next_physical = id;
    else first_ = id;
    last = id;
    if (is_free) {
      insert_free(id);
      count_free(bytes);
    } else {
      ++allocated_blocks_;
    }
    return id;
  };
  cursor = 0;
  for (const HeapPlacement& placement : placements) {
    if (placement.offset > cursor) append(cursor, placement.offset - cursor, true, 0);
    ids.push_back(append(placement.offset, placement.bytes, false, placement.tag));
    cursor = placement.offset + placement.bytes;
  }
  if (cursor < capacity_) append(cursor, capacity_ - cursor, true, 0);
}

bool Heap::valid_placement(const HeapPlacement& placement, std::uint64_t cursor) const noexcept {
  const std::uint64_t off_granularity = granularity_ - 1;  // a mask: a 64-bit division costs tens of cycles
  return placement.offset >= cursor && (placement.offset & off_granularity) == 0 && placement.bytes != 0 &&
         (placement.bytes & off_granularity) == 0 && placement.bytes <= capacity_ - placement.offset;
}

void Heap::throw_invalid_placement(const HeapPlacement& placement) {
  throw std::logic_error(detail::message("heap rebuild: placement at ", placement.offset, " of ", placement.bytes,
                                         " bytes is unsorted, overlapping or outside"));
}

// Every list, bitmap and statistic empty, for a rebuild to fill (the nodes are the caller's).
void Heap::clear_for_rebuild() noexcept {
  spare_head_ = no_block;
  spare_count_ = 0;
  for (auto& head : free_heads_) head = no_block;
  first_level_bitmap_ = 0;
  for (auto& bits : second_level_bitmap_) bits = 0;
  free_bytes_ = free_ranges_ = allocated_blocks_ = 0;
  sum_of_squared_free_ = 0;
  largest_free_valid_ = false;
}

// rebuild_in_parts, step by step: split (here), check each part and count its free blocks (in
// parallel), prepare (storage, or the error: nothing has changed yet), fill each part's nodes (in
// parallel: a node's id and links follow from its part's first node), finish (free lists and the
// last free block, on the calling thread).
Heap::RebuildParts Heap::split_rebuild(gsl::span<const HeapPlacement> placements, unsigned parts) const {
  if (parts == 0 || parts > max_rebuild_parts) {
    throw invalid_argument(detail::message("heap rebuild in ", parts, " parts; 1 to ", max_rebuild_parts, " are possible"));
  }
  RebuildParts job;
  job.placements = placements;
  job.parts = parts;
  for (unsigned part = 0; part <= parts; ++part) job.begin[part] = placements.size() * part / parts;
  return job;
}

void Heap::check_rebuild_part(RebuildParts& job, unsigned part) const noexcept {
  const std::size_t begin = job.begin[part];
  const std::size_t end = job.begin[part + 1];
  const HeapPlacement* placements = job.placements.data();
  // An invalid placement before this part is the first error whatever this part holds.
  std::uint64_t cursor = begin == 0 ? 0 : placements[begin - 1].offset + placements[begin - 1].bytes;
  std::size_t gaps = 0;
  job.first_bad[part] = SIZE_MAX;
  for (std::size_t index = begin; index < end; ++index) {
    const HeapPlacement& placement = placements[index];
    if (!valid_placement(placement, cursor)) {
      job.first_bad[part] = index;
      break;
    }
    if (placement.offset > cursor) ++gaps;
    cursor = placement.offset + placement.bytes;
  }
  job.gaps[part] = gaps;
}

void Heap::prepare_rebuild_parts(RebuildParts& job, std::vector<BlockId>& ids) {
  for (unsigned part = 0; part < job.parts; ++part) {
    if (job.first_bad[part] != SIZE_MAX) throw_invalid_placement(job.placements[job.first_bad[part]]);
  }
  const std::size_t count = job.placements.size();
  if (count >= no_block / 2) throw out_of_memory("heap rebuild: more blocks than block ids");
  job.first_node[0] = 0;
  for (unsigned part = 0; part < job.parts; ++part)
    job.first_node[part + 1] = job.first_node[part] + (job.begin[part + 1] - job.begin[part]) + job.gaps[part];
  const std::size_t inner = job.first_node[job.parts];
  const std::uint64_t end = count == 0 ? 0 : job.placements[count - 1].offset + job.placements[count - 1].bytes;
  const std::size_t nodes_needed = inner + (end < capacity_ ? 1 : 0);
  // Every allocation first, as in rebuild.
  decltype(nodes_) storage;
  if (nodes_.capacity() < nodes_needed) storage.reserve(nodes_needed);
  ids.clear();
  ids.resize(count);
  if (storage.capacity() != 0)
    nodes_.swap(storage);
  else
    nodes_.clear();
  clear_for_rebuild();
  nodes_.resize(inner);  // within capacity, and writes nothing (DefaultInitAllocator): the parts fill them
}

void Heap::fill_rebuild_part(RebuildParts& job, unsigned part, BlockId* ids) noexcept {
  const std::size_t begin = job.begin[part];
  const HeapPlacement* placements = job.placements.data();
  std::uint64_t cursor = begin == 0 ? 0 : placements[begin - 1].offset + placements[begin - 1].bytes;
  auto id = static_cast<BlockId>(job.first_node[part]);
  Node* nodes = nodes_.data();
  // Linked to both neighbours by id; finish_rebuild_parts ends the list. A free block is marked
  // free and chained to the part's previous one through next_free here, and put in its size
  // class's list there.
  BlockId last_gap = no_block;
  job.first_gap[part] = no_block;
  auto write = [&](std::uint64_t offset, std::uint64_t bytes, bool is_free, std::uint32_t tag) {
    nodes[id] = {offset, bytes, id == 0 ? no_block : id - 1, id + 1, no_block, no_block, tag, 0, is_free, true};
    return id++;
  };
  for (std::size_t index = begin; index < job.begin[part + 1]; ++index) {
    const HeapPlacement& placement = placements[index];
    if (placement.offset > cursor) {
      const BlockId gap = write(cursor, placement.offset - cursor, true, 0);
      (last_gap == no_block ? job.first_gap[part] : nodes[last_gap].next_free) = gap;
      last_gap = gap;
    }
    ids[index] = write(placement.offset, placement.bytes, false, placement.tag);
    cursor = placement.offset + placement.bytes;
  }
}

void Heap::finish_rebuild_parts(const RebuildParts& job) noexcept {
  const std::size_t inner = job.first_node[job.parts];
  // The free blocks between placements, in address order as rebuild links them, each part's by
  // its chain (insert_free overwrites next_free: read it first).
  for (unsigned part = 0; part < job.parts; ++part) {
    for (BlockId id = job.first_gap[part]; id != no_block;) {
      const BlockId next = nodes_[id].next_free;
      insert_free(id);
      count_free(nodes_[id].bytes);
      id = next;
    }
  }
  allocated_blocks_ = job.placements.size();
  const std::size_t count = job.placements.size();
  const std::uint64_t end = count == 0 ? 0 : job.placements[count - 1].offset + job.placements[count - 1].bytes;
  if (end < capacity_) {
    const auto id = static_cast<BlockId>(inner);
    Node& node = nodes_.emplace_back(blank_node());  // within capacity (prepare_rebuild_parts)
    node.offset = end;
    node.bytes = capacity_ - end;
    node.in_use = true;
    node.previous_physical = id == 0 ? no_block : id - 1;
    insert_free(id);
    count_free(node.bytes);
  } else {
    nodes_[inner - 1].next_physical = no_block;  // end == capacity: at least one placement
  }
  first_ = 0;  // the capacity is positive: some block starts at 0
}

// Room for count blocks and the free block after them, and for a rebuild into the nodes that
// adopt_packed then replaces (reserve_rebuild's): adopted, they become nodes_ and keep it.
void Heap::prepare_packed(std::size_t count) {
  if (count >= no_block / 2) throw out_of_memory("heap rebuild: more blocks than block ids");
  packed_.reserve(2 * count + 1);
  packed_.resize(count + 1);  // writes nothing (DefaultInitAllocator): write_packed fills them
}

void Heap::reserve_packed(std::size_t count) {
  // The nodes held before were written (a compaction's, or copied into a larger buffer): their pages
  // are in. Every node after them, those that prepare_packed sized included, is written once here.
  const std::size_t written = packed_.size();
  prepare_packed(count);
  const std::size_t size = packed_.size(), room = packed_.capacity();
  packed_.resize(room);  // writes nothing (DefaultInitAllocator); write_packed fills the nodes later
  std::memset(static_cast<void*>(packed_.data() + written), 0, (room - written) * sizeof(Node));
  packed_.resize(size);
}

void Heap::adopt_packed(std::size_t count, std::uint64_t end) {
  if (count == 0 || count + 1 > packed_.size() || packed_[0].offset != 0 ||
      packed_[count - 1].offset + packed_[count - 1].bytes != end || end > capacity_) {
    throw std::logic_error(detail::message("heap rebuild: ", count, " packed blocks do not start at 0 and end at ",
                                           end, " within the capacity ", capacity_));
  }
  nodes_.swap(packed_);
  nodes_.resize(count);  // within the size prepare_packed gave
  clear_for_rebuild();
  allocated_blocks_ = count;
  if (end < capacity_) {
    const auto id = static_cast<BlockId>(count);
    Node& node = nodes_.emplace_back(blank_node());  // within capacity (prepare_packed)
    node.offset = end;
    node.bytes = capacity_ - end;
    node.in_use = true;
    node.previous_physical = id - 1;
    insert_free(id);
    count_free(node.bytes);
  } else {
    nodes_[count - 1].next_physical = no_block;
  }
  first_ = 0;
}

void Heap::set_tag(BlockId id, std::uint32_t tag) {
  Expects(id < nodes_.size() && nodes_[id].in_use && !nodes_[id].free);
  nodes_[id].tag = tag;
}

std::uint64_t Heap::largest_free_block() const {
  if (largest_free_valid_) return largest_free_cache_;
  std::uint64_t largest = 0;
  if (first_level_bitmap_ != 0) {
    const unsigned first = 63u - static_cast<unsigned>(std::countl_zero(first_level_bitmap_));
    const unsigned second = 31u - static_cast<unsigned>(std::countl_zero(second_level_bitmap_[first]));
    for (BlockId id = free_heads_[first * second_level_count + second]; id != no_block;
         id = nodes_[id].next_free) {
      largest = std::max(largest, nodes_[id].bytes);
    }
  }
  largest_free_cache_ = largest;
  largest_free_valid_ = true;
  return largest;
}

std::uint64_t Heap::largest_allocatable(std::uint64_t alignment) const {
  if (alignment <= granularity_) return largest_free_block();
  std::uint64_t best = 0;  // alignment padding depends on each block's offset: walk the free lists
  for (BlockId head : free_heads_) {
    for (BlockId id = head; id != no_block; id = nodes_[id].next_free) {
      const Node& node = nodes_[id];
      const std::uint64_t padding = align_up(node.offset, alignment) - node.offset;
      if (padding < node.bytes) best = std::max(best, node.bytes - padding);
    }
  }
  return best;
}

HeapStatistics Heap::statistics() const {
  HeapStatistics statistics;
  statistics.capacity = capacity_;
  statistics.free_bytes = free_bytes_;
  statistics.used_bytes = capacity_ - free_bytes_;
  statistics.largest_free_block = largest_free_block();
  statistics.free_ranges = free_ranges_;
  statistics.allocated_blocks = allocated_blocks_;
  statistics.sum_of_squared_free = static_cast<double>(sum_of_squared_free_);
  return statistics;
}

void Heap::check_invariants() const {
  auto fail = [](const std::string& what) { throw std::logic_error("heap invariant broken: " + what); };
  std::uint64_t cursor = 0, free_bytes = 0, free_ranges = 0, allocated = 0, largest = 0;
  uint128 squares = 0;
  bool previous_free = false;
  BlockId previous = no_block;
  for (BlockId id = first_; id != no_block; id = nodes_[id].next_physical) {
    const Node& node = nodes_[id];
    if (!node.in_use) fail(detail::message("block ", id, " is on the spare list"));
    if (node.previous_physical != previous) fail(detail::message("block ", id, " has a wrong back link"));
    if (node.offset != cursor) fail(detail::message("gap or overlap at offset ", cursor));
    if (node.bytes == 0 || node.bytes % granularity_ != 0) fail(detail::message("block ", id, " size"));
    if (node.free) {
      if (previous_free) fail(detail::message("free neighbours at offset ", node.offset));
      const unsigned size_class = class_of(node.bytes >> granularity_log2_);
      if (node.free_class != size_class) {
        fail(detail::message("free block at ", node.offset, " records a wrong size class"));
      }
      bool listed = false;
      for (BlockId other = free_heads_[size_class]; other != no_block; other = nodes_[other].next_free) {
        listed |= other == id;
      }
      if (!listed) fail(detail::message("free block at ", node.offset, " is not in its size class list"));
      free_bytes += node.bytes;
      ++free_ranges;
      squares += static_cast<uint128>(node.bytes) * node.bytes;
      largest = std::max(largest, node.bytes);
    } else {
      ++allocated;
    }
    previous_free = node.free;
    previous = id;
    cursor += node.bytes;
  }
  if (cursor != capacity_) fail(detail::message("blocks end at ", cursor, ", capacity is ", capacity_));
  std::size_t spare = 0;
  for (BlockId id = spare_head_; id != no_block && spare <= nodes_.size();
       id = nodes_[id].next_physical, ++spare) {
    if (nodes_[id].in_use) fail(detail::message("block ", id, " is on the spare list"));
  }
  if (spare != spare_count_ || spare + free_ranges + allocated != nodes_.size()) {
    fail(detail::message(spare, " spare nodes (counted ", spare_count_, ") and ", free_ranges + allocated,
                         " blocks, but ", nodes_.size(), " nodes"));
  }
  if (free_bytes != free_bytes_) fail("free_bytes");
  if (free_ranges != free_ranges_) fail("free_ranges");
  if (allocated != allocated_blocks_) fail("allocated_blocks");
  if (squares != sum_of_squared_free_) fail("sum of squared free sizes");
  if (largest != largest_free_block()) fail("largest_free_block");
  std::uint64_t listed = 0;
  for (unsigned first = 0; first < first_level_count; ++first) {
    const bool row_bit = (first_level_bitmap_ >> first) & 1;
    if (row_bit != (second_level_bitmap_[first] != 0)) fail(detail::message("first-level bit ", first));
    for (unsigned second = 0; second < second_level_count; ++second) {
      const unsigned size_class = first * second_level_count + second;
      const bool bit = (second_level_bitmap_[first] >> second) & 1;
      if (bit != (free_heads_[size_class] != no_block)) {
        fail(detail::message("second-level bit ", first, "/", second));
      }
      // remove_free finds a list's head by its missing back link, and trusts the recorded class.
      BlockId before = no_block;
      for (BlockId id = free_heads_[size_class]; id != no_block && listed <= free_ranges;
           id = nodes_[id].next_free) {
        const Node& node = nodes_[id];
        if (!node.free || node.free_class != size_class || node.previous_free != before) {
          fail(detail::message("free list ", first, "/", second,
                               " holds a block that is not free, not of its class "
                               "or with a wrong back link (block ",
                               id, ")"));
        }
        before = id;
        ++listed;
      }
    }
  }
  if (listed != free_ranges) {
    fail(detail::message(listed, " blocks on the free lists, ", free_ranges, " free ranges"));
  }
}

}  // namespace vramkit
