// Splitting moves into ticket-ordered chunks (DESIGN.md, "Relocation rules").
//
// Dependencies: chunk x must not write before every chunk whose source overlaps x's destination
// has read. Sources are pairwise disjoint and so are destinations, so those chunks form one
// contiguous run in source order, and the runs of all chunks hold at most (sources + destinations)
// pairs in total: the dependency graph has O(c) edges. A dependency on a chunk with a higher
// source (a later ticket) would deadlock one launch, so it forces a strictly later phase.
// make_chunk_plan takes the one-pass path of slide_chunks.cpp when the moves are a slide, and the
// general path here otherwise.
#include "vramkit/compactor/chunk_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>

#include <gsl/assert>
#include <gsl/narrow>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

#include "compactor/chunk_plan_paths.hpp"

namespace vramkit::compactor {
namespace {

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string range_text(std::uint64_t begin, std::uint64_t bytes) {
  return "[" + hex(begin) + ", " + hex(begin + bytes) + ")";
}

/// Puts `order` (indices into moves) in ascending `key` order, then throws if two neighbouring
/// ranges overlap. The sort is skipped when the order is already right, which is the common case
/// (plan_full emits moves in ascending source and destination order); checking costs one pass.
template <class Key>
void sort_and_check_disjoint(std::vector<std::uint32_t>& order, gsl::span<const CopyRange> moves, Key key,
                             const char* what) {
  auto check = [&](bool sort_if_needed) {
    for (std::size_t i = 1; i < order.size(); ++i) {
      const CopyRange& lower = moves[order[i - 1]];
      const CopyRange& upper = moves[order[i]];
      if (key(lower) + lower.bytes <= key(upper)) continue;
      if (sort_if_needed && key(lower) > key(upper)) return false;
      throw std::logic_error("make_chunk_plan: moves " + std::to_string(order[i - 1]) + " and " +
                             std::to_string(order[i]) + " have overlapping " + what + "s " +
                             range_text(key(lower), lower.bytes) + " and " +
                             range_text(key(upper), upper.bytes));
    }
    return true;
  };
  if (check(true)) return;
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return key(moves[a]) < key(moves[b]); });
  check(false);
}

/// Phases over the dependency graph: the least that keep every dependency (a chunk waiting for a
/// later ticket runs a phase later) and hold all chunks of a move in one phase. Move-whole phases
/// make a failure at a move boundary clean: a move either ran whole or was not touched, and no
/// move that ran overwrote the source of one that did not, because its readers held earlier tickets
/// of its phase or ran in an earlier one (HostDevice::execute's faults). The longest path is taken
/// in topological order (Kahn's algorithm), then each move is lifted to its latest chunk's phase
/// and the longest path taken again with those as floors, until nothing changes. Moves that cannot
/// be whole (a block moving up into its own place needs a phase per chunk) keep the plain longest
/// path: the memmove semantics hold, failure atomicity not. chunks[x]'s [wait_first, wait_last]
/// holds its run in source order (possibly including x itself, which is skipped).
/// Cost: O(c + edges) = O(c) a round; one round unless a move spans phases.
std::vector<std::uint32_t> assign_phases(const std::vector<Chunk>& chunks, std::size_t move_count) {
  const std::size_t count = chunks.size();
  std::vector<std::uint32_t> out_begin(count + 1, 0);
  std::vector<std::uint32_t> in_degree(count, 0);
  for (std::uint32_t x = 0; x < count; ++x) {
    if (chunks[x].wait_first == no_wait) continue;
    for (std::uint32_t y = chunks[x].wait_first; y <= chunks[x].wait_last; ++y) {
      if (y == x) continue;
      ++out_begin[y + 1];
      ++in_degree[x];
    }
  }
  std::partial_sum(out_begin.begin(), out_begin.end(), out_begin.begin());
  std::vector<std::uint32_t> out_edges(out_begin.back());
  std::vector<std::uint32_t> fill(out_begin.begin(), out_begin.end() - 1);
  for (std::uint32_t x = 0; x < count; ++x) {
    if (chunks[x].wait_first == no_wait) continue;
    for (std::uint32_t y = chunks[x].wait_first; y <= chunks[x].wait_last; ++y)
      if (y != x) out_edges[fill[y]++] = x;
  }
  std::vector<std::uint32_t> order;  // topological
  order.reserve(count);
  std::vector<std::uint32_t> ready;
  for (std::uint32_t x = 0; x < count; ++x)
    if (in_degree[x] == 0) ready.push_back(x);
  while (!ready.empty()) {
    const std::uint32_t y = ready.back();
    ready.pop_back();
    order.push_back(y);
    for (std::uint32_t edge = out_begin[y]; edge < out_begin[y + 1]; ++edge)
      if (--in_degree[out_edges[edge]] == 0) ready.push_back(out_edges[edge]);
  }
  if (order.size() != count) {
    const auto stuck =
        std::find_if(in_degree.begin(), in_degree.end(), [](std::uint32_t d) { return d != 0; });
    const Chunk& chunk = chunks[static_cast<std::size_t>(stuck - in_degree.begin())];
    throw std::logic_error("make_chunk_plan: the moves form a cycle (a swap) through move " +
                           std::to_string(chunk.move) + " writing " +
                           range_text(chunk.destination, chunk.bytes) + "; it needs a staging copy");
  }
  // The least phases at or above `phase` that keep every dependency.
  const auto longest_path = [&](std::vector<std::uint32_t>& phase) {
    for (const std::uint32_t y : order)
      for (std::uint32_t edge = out_begin[y]; edge < out_begin[y + 1]; ++edge) {
        const std::uint32_t x = out_edges[edge];
        phase[x] = std::max(phase[x], phase[y] + (y > x ? 1u : 0u));  // a later ticket: a later phase
      }
  };
  std::vector<std::uint32_t> phase(count, 0);
  longest_path(phase);
  // A move that waits on a later ticket of its own cannot be whole; nor, after enough rounds to
  // settle every chain of moves (each round lifts a move a phase at least), can the others. Planner
  // moves settle in a round or two.
  for (std::uint32_t x = 0; x < count; ++x) {
    if (chunks[x].wait_first == no_wait) continue;
    for (std::uint32_t y = chunks[x].wait_first; y <= chunks[x].wait_last; ++y)
      if (y > x && chunks[y].move == chunks[x].move) return phase;
  }
  std::vector<std::uint32_t> move_phase(move_count, 0);
  std::vector<std::uint32_t> lifted = phase;
  const std::size_t rounds = std::min<std::size_t>(move_count, 64) + 1;
  for (std::size_t round = 0; round < rounds; ++round) {
    std::fill(move_phase.begin(), move_phase.end(), 0u);
    for (std::uint32_t x = 0; x < count; ++x)
      move_phase[chunks[x].move] = std::max(move_phase[chunks[x].move], lifted[x]);
    bool changed = false;
    for (std::uint32_t x = 0; x < count; ++x) {
      changed = changed || lifted[x] != move_phase[chunks[x].move];
      lifted[x] = move_phase[chunks[x].move];
    }
    if (!changed) return lifted;
    longest_path(lifted);
  }
  return phase;  // no move-whole phases exist: the plain longest path
}

}  // namespace

ChunkPlan make_chunk_plan(gsl::span<const CopyRange> moves, std::uint32_t chunk_bytes) {
  ChunkPlan plan;
  make_chunk_plan(moves, plan, chunk_bytes);
  return plan;
}

void make_chunk_plan(gsl::span<const CopyRange> moves, ChunkPlan& plan, std::uint32_t chunk_bytes) {
  Expects(chunk_bytes != 0);
  if (!detail::make_slide_chunk_plan(moves, chunk_bytes, plan))
    detail::make_general_chunk_plan(moves, chunk_bytes, plan);
}

void make_chunk_plan(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                     ChunkPlan& plan, std::uint32_t chunk_bytes) {
  Expects(chunk_bytes != 0);
  if (detail::make_slide_chunk_plan(moves, segment_bases, chunk_bytes, plan)) return;
  std::vector<CopyRange> ranges;  // the general path (hole and evacuation plans, few moves) takes ranges
  ranges.reserve(moves.size());
  for (const Move& move : moves)
    ranges.push_back({segment_bases[move.from_segment] + move.from_offset,
                      segment_bases[move.to_segment] + move.to_offset, move.bytes});
  detail::make_general_chunk_plan(ranges, chunk_bytes, plan);
}

void detail::make_general_chunk_plan(gsl::span<const CopyRange> moves, std::uint32_t chunk_bytes,
                                     ChunkPlan& plan) {
  Expects(chunk_bytes != 0);
  plan.chunks.clear();
  plan.phase_begin.clear();
  plan.total_bytes = 0;
  plan.chunk_bytes = chunk_bytes;

  // Moves that copy something, in source order (tickets) and in destination order.
  std::vector<std::uint32_t> by_source;
  by_source.reserve(moves.size());
  for (std::size_t i = 0; i < moves.size(); ++i)
    if (moves[i].bytes != 0 && moves[i].source != moves[i].destination)
      by_source.push_back(gsl::narrow<std::uint32_t>(i));
  sort_and_check_disjoint(
      by_source, moves, [](const CopyRange& m) { return m.source; }, "source");
  // When destinations come in the same order (a slide), one vector serves both orders.
  const bool same_order = std::is_sorted(
      by_source.begin(), by_source.end(),
      [&](std::uint32_t a, std::uint32_t b) { return moves[a].destination < moves[b].destination; });
  std::vector<std::uint32_t> destination_order;
  if (!same_order) destination_order = by_source;
  std::vector<std::uint32_t>& by_destination = same_order ? by_source : destination_order;
  sort_and_check_disjoint(
      by_destination, moves, [](const CopyRange& m) { return m.destination; }, "destination");

  // Chunks in source order; moves[i]'s chunks are [first_chunk[i], first_chunk[i] + chunks_of[i]).
  std::vector<std::uint32_t> first_chunk(moves.size(), 0);
  std::vector<std::uint32_t> chunks_of(moves.size(), 0);
  std::uint64_t chunk_count = 0;
  for (std::uint32_t index : by_source) {
    first_chunk[index] = gsl::narrow<std::uint32_t>(chunk_count);
    const std::uint64_t count = detail::chunk_count(moves[index].bytes, chunk_bytes);
    chunks_of[index] = gsl::narrow<std::uint32_t>(count);
    chunk_count += count;
  }
  if (chunk_count >= no_wait)
    throw std::length_error("make_chunk_plan: " + std::to_string(chunk_count) + " chunks; at most " +
                            std::to_string(no_wait - 1) + " fit a plan");
  std::vector<Chunk>& chunks = plan.chunks;
  chunks.reserve(chunk_count);
  for (std::uint32_t index : by_source) {
    const CopyRange& move = moves[index];
    for (std::uint64_t done = 0; done < move.bytes; done += chunk_bytes)
      chunks.push_back(
          Chunk{.source = move.source + done,
                .destination = move.destination + done,
                .bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_bytes, move.bytes - done)),
                .move = index});
    plan.total_bytes += move.bytes;
  }

  // Runs of overlapping sources, visiting destinations in ascending order so that the run's start
  // only moves forward: a merge of two sorted lists instead of c binary searches. Runs are stored
  // in wait_first/wait_last as source-order indices until phases are set.
  // A run that ends at the chunk itself is cut short right away (the one-phase form); a run that
  // goes past it means a later ticket, and assign_phases skips the chunk in its own run anyway.
  bool later_ticket = false;
  std::uint32_t run_begin = 0;
  const auto chunk_total = static_cast<std::uint32_t>(chunks.size());
  auto find_run = [&](std::uint32_t x) {
    Chunk& chunk = chunks[x];
    while (run_begin < chunk_total && chunks[run_begin].source + chunks[run_begin].bytes <= chunk.destination)
      ++run_begin;
    std::uint32_t run_end = run_begin;
    const std::uint64_t destination_end = chunk.destination + chunk.bytes;
    while (run_end < chunk_total && chunks[run_end].source < destination_end) ++run_end;
    if (run_end == run_begin || (run_begin == x && run_end == x + 1)) return;  // none but itself
    chunk.wait_first = run_begin;
    chunk.wait_last = run_end - 1 == x ? x - 1 : run_end - 1;
    later_ticket = later_ticket || run_end - 1 > x;
  };
  if (same_order) {
    for (std::uint32_t x = 0; x < chunk_total; ++x) find_run(x);
  } else {
    for (std::uint32_t index : by_destination)
      for (std::uint32_t x = first_chunk[index]; x < first_chunk[index] + chunks_of[index]; ++x) find_run(x);
  }

  if (!later_ticket) {
    plan.phase_begin.assign({0u, static_cast<std::uint32_t>(chunks.size())});
    if (chunks.empty()) plan.phase_begin.pop_back();
    return;
  }

  // Several phases: order by (phase, source) with a stable counting sort, then keep from each run
  // only the dependencies of the chunk's own phase; they are contiguous and below the chunk.
  const std::vector<std::uint32_t> phase = assign_phases(chunks, moves.size());
  const std::uint32_t phases = *std::max_element(phase.begin(), phase.end()) + 1;
  plan.phase_begin.assign(phases + 1, 0);
  for (std::uint32_t p : phase) ++plan.phase_begin[p + 1];
  std::partial_sum(plan.phase_begin.begin(), plan.phase_begin.end(), plan.phase_begin.begin());
  std::vector<std::uint32_t> new_index(chunks.size());
  {
    std::vector<std::uint32_t> next(plan.phase_begin.begin(), plan.phase_begin.end() - 1);
    for (std::uint32_t x = 0; x < chunks.size(); ++x) new_index[x] = next[phase[x]]++;
  }
  std::vector<Chunk> ordered(chunks.size());
  for (std::uint32_t x = 0; x < chunks.size(); ++x) {
    Chunk chunk = chunks[x];
    if (chunk.wait_first != no_wait) {
      std::uint32_t first = no_wait;
      std::uint32_t last = no_wait;
      for (std::uint32_t y = chunk.wait_first; y <= chunk.wait_last; ++y) {
        if (y == x || phase[y] != phase[x]) continue;
        Expects(y < x);
        if (first == no_wait) first = new_index[y];
        last = new_index[y];
      }
      chunk.wait_first = first;
      chunk.wait_last = last;
    }
    ordered[new_index[x]] = chunk;
  }
  plan.chunks = std::move(ordered);
}

}  // namespace vramkit::compactor

namespace vramkit::compactor {

void check_move_indices(const ChunkPlan& plan, std::size_t move_count) {
  for (std::size_t index = 0; index < plan.chunks.size(); ++index) {
    if (plan.chunks[index].move >= move_count) {
      throw invalid_argument(vramkit::detail::message("chunk ", index, " belongs to move ", plan.chunks[index].move,
                                                      "; the plan was given as one of ", move_count, " moves"));
    }
  }
}

std::vector<std::uint8_t> moves_completed_by_phases(const ChunkPlan& plan, std::size_t phases_run,
                                                    std::size_t move_count) {
  std::vector<std::uint8_t> completed(move_count);
  moves_completed_by_phases(plan, phases_run, completed);
  return completed;
}

void moves_completed_by_phases(const ChunkPlan& plan, std::size_t phases_run, gsl::span<std::uint8_t> completed) {
  Expects(phases_run <= plan.phases());
  const std::size_t run_end = phases_run == 0 ? 0 : plan.phase_begin[phases_run];
  std::fill(completed.begin(), completed.end(), std::uint8_t{0});
  for (std::size_t index = 0; index < plan.chunks.size(); ++index) {
    Expects(plan.chunks[index].move < completed.size());
    if (index < run_end) completed[plan.chunks[index].move] = 1;
  }
  for (std::size_t index = run_end; index < plan.chunks.size(); ++index) completed[plan.chunks[index].move] = 0;
}

// Re-derives every dependency from the addresses, independently of how make_chunk_plan found them.
// Cost: O(c log c).
void ChunkPlan::validate() const {
  auto fail = [](const std::string& what) { throw std::logic_error("ChunkPlan: " + what); };
  auto chunk_text = [&](std::size_t i) {
    return "chunk " + std::to_string(i) + " (move " + std::to_string(chunks[i].move) + ", source " +
           range_text(chunks[i].source, chunks[i].bytes) + ", destination " +
           range_text(chunks[i].destination, chunks[i].bytes) + ")";
  };
  const std::size_t count = chunks.size();
  if (phase_begin.empty() ? count != 0 : phase_begin.front() != 0 || phase_begin.back() != count)
    fail("phase_begin must start at 0 and end at the chunk count " + std::to_string(count));
  for (std::size_t p = 1; p < phase_begin.size(); ++p)
    if (phase_begin[p - 1] >= phase_begin[p])
      fail("phase " + std::to_string(p - 1) + " is empty or reversed");

  std::vector<std::uint32_t> phase_of(count, 0);
  std::uint64_t bytes = 0;
  for (std::size_t p = 0; p + 1 < phase_begin.size(); ++p) {
    for (std::size_t i = phase_begin[p]; i < phase_begin[p + 1]; ++i) {
      phase_of[i] = static_cast<std::uint32_t>(p);
      if (chunks[i].bytes == 0 || chunks[i].bytes > chunk_bytes)
        fail(chunk_text(i) + " is empty or longer than chunk_bytes " + std::to_string(chunk_bytes));
      if (i > phase_begin[p] && chunks[i - 1].source >= chunks[i].source)
        fail(chunk_text(i) + " is not in ascending source order within phase " + std::to_string(p));
      bytes += chunks[i].bytes;
    }
  }
  if (bytes != total_bytes)
    fail("total_bytes is " + std::to_string(total_bytes) + " but the chunks copy " + std::to_string(bytes));

  // Global orders for disjointness and for finding every source that overlaps a destination.
  std::vector<std::uint32_t> by_source(count);
  std::iota(by_source.begin(), by_source.end(), 0u);
  std::vector<std::uint32_t> by_destination = by_source;
  std::sort(by_source.begin(), by_source.end(),
            [&](std::uint32_t a, std::uint32_t b) { return chunks[a].source < chunks[b].source; });
  std::sort(by_destination.begin(), by_destination.end(),
            [&](std::uint32_t a, std::uint32_t b) { return chunks[a].destination < chunks[b].destination; });
  for (std::size_t k = 1; k < count; ++k) {
    const Chunk& low_source = chunks[by_source[k - 1]];
    if (low_source.source + low_source.bytes > chunks[by_source[k]].source)
      fail(chunk_text(by_source[k - 1]) + " and " + chunk_text(by_source[k]) + " read overlapping sources");
    const Chunk& low_destination = chunks[by_destination[k - 1]];
    if (low_destination.destination + low_destination.bytes > chunks[by_destination[k]].destination)
      fail(chunk_text(by_destination[k - 1]) + " and " + chunk_text(by_destination[k]) +
           " write overlapping destinations");
  }

  for (std::uint32_t i = 0; i < count; ++i) {
    const Chunk& chunk = chunks[i];
    const std::uint64_t end = chunk.destination + chunk.bytes;
    auto k = std::partition_point(by_source.begin(), by_source.end(), [&](std::uint32_t y) {
      return chunks[y].source + chunks[y].bytes <= chunk.destination;
    });
    std::uint32_t first = no_wait;
    std::uint32_t last = no_wait;
    std::size_t same_phase = 0;
    for (; k != by_source.end() && chunks[*k].source < end; ++k) {
      const std::uint32_t y = *k;
      if (y == i) continue;
      if (phase_of[y] > phase_of[i])
        fail(chunk_text(y) + " of phase " + std::to_string(phase_of[y]) + " reads what " + chunk_text(i) +
             " of phase " + std::to_string(phase_of[i]) + " writes");
      if (phase_of[y] < phase_of[i]) continue;
      if (y > i) fail(chunk_text(i) + " overwrites the source of " + chunk_text(y) + ", a later ticket");
      first = std::min(first, y);
      last = last == no_wait ? y : std::max(last, y);
      ++same_phase;
    }
    if (chunk.wait_first != first || chunk.wait_last != last)
      fail(chunk_text(i) + " waits for [" + std::to_string(chunk.wait_first) + ", " +
           std::to_string(chunk.wait_last) + "] but depends on [" + std::to_string(first) + ", " +
           std::to_string(last) + "]");
    if (same_phase != 0 && last - first + 1 != same_phase)
      fail(chunk_text(i) + " depends on chunks that are not contiguous");
  }
}

}  // namespace vramkit::compactor
