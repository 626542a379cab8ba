// Pool::prepare_compaction: what a pool's first full compaction would take on its way, taken
// ahead. A first compaction of layout (b)'s 100,000 blocks on the CUDA device ran at 17..28% of the
// copy ceiling against 70% for the next (docs/benchmarks.md): it took its pinned staging
// (cudaMallocHost), grew its device scratch part by part, loaded its kernels and faulted in the
// pages of its host buffers, each zeroed by the kernel on first touch while the team's threads
// wrote them at once.
#include "pool/compaction_scratch.hpp"
#include "pool/pool_segment.hpp"
#include "pool/worker_team.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace vramkit {
namespace {

// Room for `count` elements, each page of it written once, so that the compaction that fills them
// takes no page faults; leaves the vector empty, its room kept. For vectors of trivial types.
template <class Vector>
void fault_in(Vector& vector, std::size_t count) {
  using Value = typename Vector::value_type;
  static_assert(std::is_trivially_copyable_v<Value>);
  vector.clear();
  vector.reserve(count);
  vector.resize(count);
  std::memset(static_cast<void*>(vector.data()), 0, count * sizeof(Value));
  vector.clear();
}

}  // namespace

// The buffers of the way compact_full would take now: with nothing pinned, an arena's or aligned
// above the granularity, the slide's moves and, when the team writes it (write_slide), the pieces
// of the walk, the moves' staging and the heaps' nodes after it (else the nodes of a rebuild);
// else the plan in parts (the layout, the moves). All: the places after the moves, a rebuild's ids.
void Pool::prepare_compaction() {
  std::lock_guard lock(mutex_);
  if (!compaction_scratch_) compaction_scratch_ = std::make_unique<CompactionScratch>();
  CompactionScratch& scratch = *compaction_scratch_;
  std::size_t live = 0, largest = 0;
  for (const auto& segment : segments_) {
    live += segment->heap.allocated_blocks();
    largest = std::max(largest, segment->heap.allocated_blocks());
  }
  if (start_team(largest)) team_->run([](unsigned) noexcept {});  // each thread has run once
  const bool slides = pinned_ == 0 && over_aligned_ == 0;
  const bool written = slides && writes_slide(UINT64_MAX, largest);  // else the update rebuilds the heaps
  scratch.placements.resize(segments_.size());
  scratch.moved.reserve(segments_.size());
  scratch.touched.reserve(segments_.size());
  scratch.arrivals.reserve(segments_.size());
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    Heap& heap = segments_[index]->heap;
    fault_in(scratch.placements[index], heap.allocated_blocks());
    if (written) heap.reserve_packed(heap.allocated_blocks());
    else heap.reserve_rebuild(heap.allocated_blocks());
  }
  fault_in(scratch.ids, largest);
  // Their room, which every full compaction takes; a slide writes neither.
  clear_layout(scratch.layout);
  scratch.moves.reserve(live);
  if (slides) {
    fault_in(scratch.slide_moves, live);
  } else {
    for (std::size_t index = 0; index < segments_.size(); ++index)
      fault_in(scratch.layout[index], segments_[index]->heap.allocated_blocks());
    fault_in(scratch.moves, live);
  }
  bool caller_stages = false;
  if (written) {
    const std::size_t pieces = segments_.size() * team_->size() * CompactionScratch::pieces_per_thread;
    if (scratch.pieces.size() < pieces) scratch.pieces.resize(pieces);
    scratch.walk_starts.reserve(team_->size() * CompactionScratch::pieces_per_thread + 1);
    caller_stages = slide_staging_chunk_bytes(live) != 0 && take_slide_staging(live);
  }
  // The chunk plan, for a device that executes one made on the host (the host device; the CUDA
  // device for moves that are not a slide): a chunk a move, and one each 8 KiB (the smallest
  // chunk limit of the devices here); an overlapping plan may take more.
  if (!slides || device_->slide_chunk_bytes() == 0) fault_in(scratch.chunks.chunks, live + used_ / 8192);
  device_->reserve_moves(live, used_, caller_stages);
}

}  // namespace vramkit
