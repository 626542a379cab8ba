// A full compaction's slide written by the compaction team while the device moves what is written
// (Pool::write_slide): the GPU starts on the first blocks while the host walks the rest.
//
// For the case plan_slide serves (every live block may move at the granularity) with no byte
// budget. The walk makes two passes over the pieces of every segment's list (Heap::walk_starts),
// in address order, each piece taken by one of the team's threads at a time:
//  - The pass the device waits on ("ready"). A thread counts its piece (live blocks, bytes,
//    chunks: reads only), then waits for the piece before it to publish where it ends (a chain
//    of look-backs, each a few loads, as the pieces before were taken first) and publishes its
//    own; then it walks the piece again, from its core's cache, writing the moves and, when the
//    device takes a slide staged by its caller (Device::slide_chunk_bytes: the CUDA device), the
//    moves as it uploads them, into the pool's own pinned staging memory.
//  - The other pass ("placed"), once every piece is taken for the first: each piece's moves read
//    in order (its list walked again only where blocks stay), writing what the update needs: the
//    heap's nodes after the slide (Heap::write_packed: the update then adopts them instead of
//    rebuilding the heap), the slots of the blocks that move (their places and block ids: the
//    update then writes only the slots of the blocks that stay) and the places that the update
//    reads. Pieces are independent here: no chain.
// Nothing else: no list of a piece's blocks, no layout (an update that falls back to the merge,
// after a device fault, makes it from the moves: Pool::layout_from_slide). The calling thread
// gives the device each prefix of pieces ready in full (Device::execute_moves_as_written). It
// readies the first piece itself, while the team's threads wake, and others while the device has
// a part queued behind the one it runs; else it watches for the next part to give, as the device
// could run dry while it readied a piece. Once every piece is ready it gives the rest and places
// pieces with the team: the device moves the whole slide while the host writes about half its
// work. The moves are exactly compactor::plan_full's, segment after segment (tests/parallel_plan_test.cpp).
//
// Why two passes: on the H100 the one pass of runs 66 to 69 (both passes' writes in one walk)
// took 0.47..1.22 ms on 8 threads for layout (b)'s 100,000 blocks, about as long as the GPU's
// moves (0.85 ms), so the GPU waited on it; the host's floor (bench/lab/host_floor.cpp, run 47)
// put the staging at about half the host's work.
#include "compactor/chunk_plan_paths.hpp"
#include "pool/pool_segment.hpp"
#include "pool/slide_place.hpp"
#include "pool/worker_team.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <thread>

#include <gsl/assert>

namespace vramkit {
namespace {

/// The moves the device is given first: half a piece's blocks (CompactionScratch::blocks_per_piece),
/// so that the piece the calling thread walks first usually holds them and the GPU starts early.
/// Each later part holds what has been written since, once that is at least as many moves and at
/// least a later_part_share-th of those given before. What the GPU moves after the walk ends is
/// about the last part: when each part was as large as all before it, that was up to half the
/// moves (a third on layout (b), about 0.3 ms on the H100, where the walk kept about the GPU's
/// pace; run 64). An eighth bounds it to a ninth, for about 20 parts on 100,000 moves. A part is
/// held back while the device has one queued behind the part it runs (Device::QueuedAhead): given
/// then, it would only wait, and one larger part later costs one launch and one tail instead of several.
constexpr std::size_t first_part_moves = 512;
constexpr std::size_t later_part_share = 8;

using pool_detail::WalkState;

unsigned load_state(unsigned& state) { return std::atomic_ref<unsigned>(state).load(std::memory_order_acquire); }
void store_state(unsigned& state, unsigned value) {
  std::atomic_ref<unsigned>(state).store(value, std::memory_order_release);
}

// A wait's round: yields now and then, or every round in a team with more members than the
// hardware has threads (the member waited on may need this one's core).
void pause(unsigned round, bool spins) {
  if (!spins || round % 64 == 0) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// Whether write_slide serves this full compaction: compact_full has checked that every block may
// move at the granularity; a budget or a pool that plans first keeps plan_slide.
bool Pool::writes_slide(std::uint64_t budget, std::size_t largest_segment_blocks) const {
  return budget == UINT64_MAX && options_.compaction_parts != CompactionParts::never && team_ &&
         team_->size() >= 2 && largest_segment_blocks >= PoolOptions::parallel_update_min_blocks;
}

// The chunk size of the moves that write_slide stages for the device as it writes them
// (Device::slide_chunk_bytes), or 0: a device that stages them its own way, moves that would not
// form one slide (the device's searches need the segments to ascend), or chunks that could pass
// what a plan can number.
std::uint32_t Pool::slide_staging_chunk_bytes(std::size_t live_blocks) const {
  const std::uint32_t chunk_bytes = device_->slide_chunk_bytes();
  bool ascending = true;
  for (std::size_t segment = 1; segment < segments_.size(); ++segment)
    ascending = ascending && segments_[segment - 1]->base < segments_[segment]->base;
  if (chunk_bytes == 0 || !ascending || live_blocks + used_ / chunk_bytes >= compactor::no_wait) return 0;
  return chunk_bytes;
}

// Staging memory (Device::obtain_staging) for a written slide of `moves` moves, with a quarter more
// room, unless the pool holds enough; false when none is to be had (the device then stages the
// moves itself).
bool Pool::take_slide_staging(std::size_t moves) {
  CompactionScratch& scratch = *compaction_scratch_;
  if (scratch.staging_moves >= moves) return true;
  const std::size_t room = moves + moves / 4;
  try {
    void* memory = device_->obtain_staging(room * sizeof(compactor::detail::SlideMove));
    device_->release_staging(scratch.staging);
    scratch.staging = static_cast<compactor::detail::SlideMove*>(memory);
    scratch.staging_moves = room;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Plans, runs and applies the slide of every segment (compact_full has taken the room: the
// layout's and the places' for each segment's live blocks, and the moves' for all of them). Once
// the pieces are set out, the walk takes no host memory: it cannot fail. Host memory for the
// heaps' nodes ahead or for the staging may be missing: the update then rebuilds the heaps, or
// the device stages the moves itself.
void Pool::write_slide(CompactionReport& report) {
  CompactionScratch& scratch = *compaction_scratch_;
  const auto started = std::chrono::steady_clock::now();
  const unsigned walkers = team_->size();  // the calling thread too, between parts
  auto& pieces = scratch.pieces;
  std::size_t count = 0;
  std::size_t live_blocks = 0;
  for (std::size_t segment = 0; segment < segments_.size(); ++segment) {
    const Heap& heap = segments_[segment]->heap;
    const std::size_t live = heap.allocated_blocks();
    if (live == 0) continue;
    live_blocks += live;
    const std::size_t wanted = std::clamp<std::size_t>(live / CompactionScratch::blocks_per_piece, 1,
                                                       walkers * CompactionScratch::pieces_per_thread);
    heap.walk_starts(wanted, scratch.walk_starts);
    const std::size_t starts = scratch.walk_starts.size();
    if (pieces.size() < count + starts) pieces.resize(count + starts);  // may throw: nothing has moved
    for (std::size_t index = 0; index < starts; ++index) {
      CompactionScratch::WalkPiece& piece = pieces[count + index];
      piece.segment = static_cast<std::uint32_t>(segment);
      piece.start = scratch.walk_starts[index];
      piece.end = index + 1 < starts ? scratch.walk_starts[index + 1] : no_block;
      piece.state = WalkState::walking;
    }
    count += starts;
    scratch.placements[segment].resize(live);  // within the room taken, and writes nothing
  }
  // The heaps' nodes after the slide, written by the walk too (the update then adopts them),
  // unless host memory for them is not to be had: the update then rebuilds the heaps.
  bool nodes_ahead = true;
  try {
    for (const auto& segment : segments_)
      if (segment->heap.allocated_blocks() != 0) segment->heap.prepare_packed(segment->heap.allocated_blocks());
  } catch (const std::bad_alloc&) {
    nodes_ahead = false;
  }
  auto& moves = scratch.slide_moves;
  Expects(moves.empty() && moves.capacity() >= live_blocks);
  moves.resize(live_blocks);  // the room for every move; writes nothing

  std::uint32_t chunk_bytes = slide_staging_chunk_bytes(live_blocks);
  if (chunk_bytes != 0 && !take_slide_staging(live_blocks)) chunk_bytes = 0;  // the device stages the moves
  compactor::detail::SlideMove* const staging = chunk_bytes != 0 ? scratch.staging : nullptr;
  scratch.slide_staged = staging != nullptr;
  scratch.slots_ahead = true;  // the walk writes the slots of the blocks that move
  scratch.nodes_ahead = nodes_ahead;
  const bool spins = team_->spins();
  std::atomic<std::size_t> next_piece{0};
  // Publishes where piece `index` ends, once the piece before it (taken first) has published
  // where it ends.
  const auto publish = [&](std::size_t index, const pool_detail::PieceCount& counted) noexcept {
    CompactionScratch::WalkPiece& piece = pieces[index];
    std::size_t first_index = 0, stay = SIZE_MAX, moves_base = 0;
    std::uint64_t cursor = 0, first_chunk = 0;
    if (index != 0) {
      CompactionScratch::WalkPiece& previous = pieces[index - 1];
      for (unsigned round = 1; load_state(previous.state) == WalkState::walking; ++round) pause(round, spins);
      first_chunk = previous.chunks_end;
      if (previous.segment == piece.segment) {
        first_index = previous.first_index + previous.live;
        cursor = previous.cursor + previous.bytes;
        stay = previous.stay;
        moves_base = previous.moves_base;
      } else {
        moves_base = previous.moves_end;
      }
    }
    // The segment's first free block ends the blocks that stay (packed from its start).
    const std::uint64_t moving_chunks = stay != SIZE_MAX                         ? counted.chunks
                                        : counted.live_before_free != SIZE_MAX ? counted.chunks_after_free
                                                                               : 0;
    if (stay == SIZE_MAX && counted.live_before_free != SIZE_MAX) stay = first_index + counted.live_before_free;
    piece.first_chunk = first_chunk;
    piece.chunks_end = first_chunk + moving_chunks;
    piece.live = counted.live;
    piece.bytes = counted.bytes;
    piece.first_index = first_index;
    piece.cursor = cursor;
    piece.stay = stay;
    piece.moves_base = moves_base;
    piece.moves_end = moves_base + (stay == SIZE_MAX ? 0 : first_index + counted.live - stay);
    store_state(piece.state, WalkState::published);
  };
  // The pass the device waits on, for piece `index` (taken in order: the pieces before it are
  // being walked, or were): counts it (reads only), publishes where it ends, then walks it again,
  // from its core's cache, writing the move of each block that moves and, when the device takes
  // the slide staged (Device::slide_chunk_bytes), the move as the device uploads it.
  const auto ready_one = [&](std::size_t index) noexcept {
    CompactionScratch::WalkPiece& piece = pieces[index];
    const auto segment = piece.segment;
    const Heap& heap = segments_[segment]->heap;
    publish(index, pool_detail::count_piece(heap, piece.start, piece.end, staging != nullptr ? chunk_bytes : 0,
                                            [](std::uint32_t) {}));
    const std::uint64_t base = segments_[segment]->base;
    const std::size_t stay = piece.stay, moves_base = piece.moves_base;
    std::uint64_t first_chunk = piece.first_chunk;
    std::size_t at = piece.first_index;
    std::uint64_t to = piece.cursor;
    for (BlockId id = piece.start; id != piece.end; id = heap.next(id)) {
      const HeapBlock block = heap.block(id);
      if (block.free) continue;
      if (at >= stay) {
        const std::size_t move = moves_base + at - stay;
        moves[move] = {.tag = block.tag,
                       .from_segment = segment,
                       .from_offset = block.offset,
                       .to_segment = segment,
                       .to_offset = to,
                       .bytes = block.bytes};
        if (staging != nullptr) {
          staging[move] = {base + block.offset, base + to, block.bytes, static_cast<std::uint32_t>(first_chunk),
                           static_cast<std::uint32_t>(move)};
          first_chunk += compactor::detail::chunk_count(block.bytes, chunk_bytes);
        }
      }
      to += block.bytes;
      ++at;
    }
    store_state(piece.state, WalkState::ready);
  };
  // The other pass, for piece `index` once it is ready (the pass the device waits on is taken for
  // every piece before this one is): writes each block's place once every move completes: the
  // heap's node after the slide (its blocks packed, each id its index); for a block that moves its
  // slot (as the update would write it: the block ids are the indices that the rebuild gives,
  // slots_ahead); its place in `placements` only where the update reads it: the blocks that stay
  // (their slots), the segment's last block (the heap's end), or every block when the update
  // rebuilds the heap. No layout: an update that falls back to the merge makes it from these
  // (layout_unwritten). A piece whose blocks all move is read from its moves, in order (no walk
  // of the list); the slot `ahead` moves on is asked for early, each a cache line of its own that
  // other cores last wrote, so that their loads overlap where the stores would wait on each.
  const auto place_one = [&](std::size_t index) noexcept {
    CompactionScratch::WalkPiece& piece = pieces[index];
    for (unsigned round = 1; load_state(piece.state) != WalkState::ready; ++round) pause(round, spins);
    Heap& heap = segments_[piece.segment]->heap;
    HeapPlacement* const placed = scratch.placements[piece.segment].data();
    const std::size_t last = scratch.placements[piece.segment].size() - 1;
    const std::size_t stay = piece.stay;
    const auto place = [&](std::size_t at, std::uint64_t to, std::uint64_t bytes, std::uint32_t tag) {
      if (at < stay || !nodes_ahead || at == last) placed[at] = {to, bytes, tag};
      if (nodes_ahead) heap.write_packed(at, to, bytes, tag);
      if (at >= stay) {
        Slot& entry = (*table_)[tag];
        entry.offset = to;
        entry.block = static_cast<BlockId>(at);
      }
    };
    if (piece.first_index >= stay) {
      constexpr std::size_t ahead = 16;
      const compactor::Move* const first = moves.data() + piece.moves_base + (piece.first_index - stay);
      for (std::size_t k = 0; k < std::min(ahead, piece.live); ++k) __builtin_prefetch(&(*table_)[first[k].tag], 1);
      for (std::size_t k = 0; k < piece.live; ++k) {
        if (k + ahead < piece.live) __builtin_prefetch(&(*table_)[first[k + ahead].tag], 1);
        place(piece.first_index + k, first[k].to_offset, first[k].bytes, first[k].tag);
      }
      return;
    }
    std::size_t at = piece.first_index;
    std::uint64_t to = piece.cursor;
    for (BlockId id = piece.start; id != piece.end; id = heap.next(id)) {
      const HeapBlock block = heap.block(id);
      if (block.free) continue;
      place(at++, to, block.bytes, block.tag);
      to += block.bytes;
    }
  };
  std::atomic<std::size_t> next_place{0};
  const auto place_all = [&]() noexcept {
    for (std::size_t index; (index = next_place.fetch_add(1, std::memory_order_relaxed)) < count;) place_one(index);
  };
  // Each member readies pieces while any is left, then places them: the device is given the whole
  // slide about when half the work is done, and moves it while the team places it.
  const auto walk = [&](unsigned) noexcept {
    for (std::size_t index; (index = next_piece.fetch_add(1, std::memory_order_relaxed)) < count;) ready_one(index);
    place_all();
  };

  // The calling thread's share: gives each prefix of pieces ready in full, then places pieces
  // with the team, then reports the end.
  std::size_t scanned = 0, written = 0, given = 0;
  bool whole_given = false;
  const auto finish = [&]() noexcept {
    team_->join();
    report.plan_seconds += std::chrono::steady_clock::now() - started;
    report.plan_threads = std::max(report.plan_threads, walkers);
    report.written_while_moving = true;
    // What each segment's moves move: the live bytes after the blocks that stay.
    for (std::size_t index = 0; index < count; ++index) {
      const CompactionScratch::WalkPiece& piece = pieces[index];
      if (index + 1 < count && pieces[index + 1].segment == piece.segment) continue;  // not the segment's last
      const auto& placed = scratch.placements[piece.segment];
      const std::size_t stay = std::min(piece.stay, placed.size());
      note_slide_moved(piece.segment, stay, stay == 0 ? 0 : placed[stay - 1].offset + placed[stay - 1].bytes);
    }
  };
  const Device::MovesWritten written_so_far = [&](bool& final, const Device::QueuedAhead& ahead) noexcept {
    const std::size_t wanted = given + std::max(first_part_moves, given / later_part_share);
    // Asked until the device says it has no part queued ahead: then it has none until the next
    // part is given (Device::QueuedAhead), and each ask is a driver call on the CUDA device.
    bool queued = true;
    for (unsigned round = 1;; ++round) {
      while (scanned < count && load_state(pieces[scanned].state) == WalkState::ready)
        written = pieces[scanned++].moves_end;
      if (scanned == count) break;
      if (queued) queued = ahead();
      if (written >= wanted && !queued) return given = written;  // else hold it back: a larger part later
      // Nothing to give yet. Before the first part (the team's threads may take tens of
      // microseconds to wake), and while the device has a part queued behind the one it runs,
      // this thread readies a piece meanwhile, while any is left. Otherwise the device may run
      // dry in less time than a piece takes (tens of microseconds): it watches for the next part.
      if (given == 0 || queued) {
        if (const std::size_t index = next_piece.fetch_add(1, std::memory_order_relaxed); index < count) {
          ready_one(index);
          continue;
        }
      }
      pause(round, spins);
    }
    if (!whole_given) {  // the rest, given while the pieces are placed
      whole_given = true;
      report.plan_given_seconds += std::chrono::steady_clock::now() - started;
      if (written != given) return given = written;
    }
    place_all();
    finish();
    final = true;
    return given;
  };

  team_->start(walk);
  struct Join {  // the team is done with the scratch before anything else looks at it
    WorkerTeam& team;
    ~Join() { team.join(); }
  } join{*team_};
  // The layout is this run's to make, if its update falls back to the merge.
  struct Unwritten {
    bool& flag;
    explicit Unwritten(bool& unwritten) : flag(unwritten) { flag = true; }
    ~Unwritten() { flag = false; }
  } unwritten{scratch.layout_unwritten};
  run_moves(moves, nullptr, nullptr, &written_so_far, true, scratch.layout, report);
}

}  // namespace vramkit
