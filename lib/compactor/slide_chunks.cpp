// The chunk plan of a slide in one pass (see chunk_plan_paths.hpp), the form plan_full produces.
//
// Why one pass suffices: chunks come out in ascending source order (the tickets) and ascending
// destination order at once. A chunk's destination lies at or below its source, and every later
// chunk's source lies at or above the end of this chunk's source, hence past the end of its
// destination: a chunk only ever waits on itself (skipped) or on chunks already emitted. The
// chunks whose sources overlap a destination are one contiguous run [run_begin, run_end) whose
// ends only move forward as destinations ascend: two pointers, O(1) amortised per chunk.
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "compactor/chunk_plan_paths.hpp"

namespace vramkit::compactor::detail {
namespace {

/// range_at(i) gives move i as a CopyRange; the two entry points differ only in that.
template <class RangeAt>
bool slide_chunks(std::size_t move_count, RangeAt range_at, std::uint32_t chunk_bytes, ChunkPlan& plan) {
  // Pass 1: is it a slide, and how many chunks does it make (to reserve exactly)?
  std::uint64_t count = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t source_end = 0;
  std::uint64_t destination_end = 0;
  for (std::size_t index = 0; index < move_count; ++index) {
    const CopyRange move = range_at(index);
    if (move.bytes == 0 || move.source == move.destination) continue;
    if (move.destination > move.source || move.source < source_end || move.destination < destination_end)
      return false;
    source_end = move.source + move.bytes;
    destination_end = move.destination + move.bytes;
    count += chunk_count(move.bytes, chunk_bytes);
    total_bytes += move.bytes;
  }
  if (count >= no_wait)
    throw std::length_error("make_chunk_plan: " + std::to_string(count) + " chunks; at most " +
                            std::to_string(no_wait - 1) + " fit a plan");

  // Pass 2: each chunk with its wait run, written once.
  plan.chunk_bytes = chunk_bytes;
  plan.total_bytes = total_bytes;
  std::vector<Chunk>& chunks = plan.chunks;
  chunks.clear();
  chunks.reserve(count);
  const Chunk* emitted = chunks.data();  // stable: the storage is reserved
  std::uint32_t run_begin = 0;           // first chunk whose source ends after the current destination
  std::uint32_t run_end = 0;             // first chunk whose source starts at or after the destination's end
  for (std::size_t index = 0; index < move_count; ++index) {
    const CopyRange move = range_at(index);
    if (move.bytes == 0 || move.source == move.destination) continue;
    for (std::uint64_t done = 0; done < move.bytes; done += chunk_bytes) {
      const auto x = static_cast<std::uint32_t>(chunks.size());
      const std::uint64_t source = move.source + done;
      const std::uint64_t destination = move.destination + done;
      const auto bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_bytes, move.bytes - done));
      // Neither run end passes chunk x: its own source ends after its destination starts, and no
      // later chunk's source starts before its destination ends.
      while (run_begin < x && emitted[run_begin].source + emitted[run_begin].bytes <= destination)
        ++run_begin;
      const std::uint64_t end = destination + bytes;
      while (run_end < x && emitted[run_end].source < end) ++run_end;
      const std::uint32_t run_last = run_end == x && source < end ? x : run_end - 1;  // x's own source counts
      Chunk chunk{.source = source,
                  .destination = destination,
                  .bytes = bytes,
                  .move = static_cast<std::uint32_t>(index)};
      if (run_begin < x && run_end > run_begin) {  // something besides x itself
        chunk.wait_first = run_begin;
        chunk.wait_last = run_last == x ? x - 1 : run_last;
      }
      chunks.push_back(chunk);
    }
  }
  plan.phase_begin.assign({0u, static_cast<std::uint32_t>(chunks.size())});
  if (chunks.empty()) plan.phase_begin.pop_back();
  return true;
}

}  // namespace

bool make_slide_moves(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                      std::uint32_t chunk_bytes, SlideMove* out, std::size_t& count, std::uint64_t& total_chunks,
                      std::uint64_t& bytes) {
  count = 0;
  total_chunks = 0;
  bytes = 0;
  std::uint64_t source_end = 0;
  std::uint64_t destination_end = 0;
  for (std::size_t index = 0; index < moves.size(); ++index) {
    const Move& move = moves.data()[index];
    bytes += move.bytes;
    const std::uint64_t source = segment_bases[move.from_segment] + move.from_offset;
    const std::uint64_t destination = segment_bases[move.to_segment] + move.to_offset;
    if (move.bytes == 0 || source == destination) continue;
    if (destination > source || source < source_end || destination < destination_end) return false;
    source_end = source + move.bytes;
    destination_end = destination + move.bytes;
    out[count++] = {source, destination, move.bytes, static_cast<std::uint32_t>(total_chunks),
                    static_cast<std::uint32_t>(index)};
    total_chunks += chunk_count(move.bytes, chunk_bytes);
    if (total_chunks >= no_wait)
      throw std::length_error("make_slide_moves: " + std::to_string(total_chunks) + " chunks; at most " +
                              std::to_string(no_wait - 1) + " fit a plan");
  }
  return true;
}

bool make_slide_moves_in_parts(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                               std::uint32_t chunk_bytes, SlideMove* out, std::size_t& count,
                               std::uint64_t& total_chunks, std::uint64_t& bytes, unsigned parts,
                               const RunParts& run_parts) {
  if (parts == 0 || parts > max_slide_parts)
    throw std::invalid_argument("make_slide_moves_in_parts: " + std::to_string(parts) + " parts; 1 to " +
                                std::to_string(max_slide_parts));
  // Each part on cache lines of its own, its running state in locals: parts next to each other,
  // written at every move by threads on different cores, cost the staging of layout (b)'s 100,000
  // moves 0.38 ms on 8 threads, where one thread staged 67,000 in 0.04 ms (docs/benchmarks.md,
  // run 56).
  struct alignas(64) Part {
    std::size_t begin = 0, end = 0;
    std::size_t copying = 0;  // moves that copy something: then their first and last ends
    std::uint64_t chunks = 0, bytes = 0;
    std::uint64_t first_source = 0, first_destination = 0, source_end = 0, destination_end = 0;
    bool slide = true;
  };
  std::array<Part, max_slide_parts> part{};
  const auto address = [&](std::uint32_t segment, std::uint64_t offset) { return segment_bases[segment] + offset; };
  run_parts(parts, [&](unsigned k) {
    Part mine;
    mine.begin = moves.size() * k / parts;
    mine.end = moves.size() * (k + 1) / parts;
    for (std::size_t index = mine.begin; index < mine.end; ++index) {
      const Move& move = moves.data()[index];
      mine.bytes += move.bytes;
      const std::uint64_t source = address(move.from_segment, move.from_offset);
      const std::uint64_t destination = address(move.to_segment, move.to_offset);
      if (move.bytes == 0 || source == destination) continue;
      if (mine.copying == 0) {
        mine.first_source = source;
        mine.first_destination = destination;
      } else if (source < mine.source_end || destination < mine.destination_end) {
        mine.slide = false;
      }
      if (destination > source) mine.slide = false;
      if (!mine.slide) break;
      mine.source_end = source + move.bytes;
      mine.destination_end = destination + move.bytes;
      ++mine.copying;
      mine.chunks += chunk_count(move.bytes, chunk_bytes);
    }
    part[k] = mine;
  });
  count = 0;
  total_chunks = 0;
  bytes = 0;
  std::uint64_t source_end = 0, destination_end = 0;
  std::array<std::size_t, max_slide_parts> first_out{};
  std::array<std::uint64_t, max_slide_parts> first_chunk{};
  for (unsigned k = 0; k < parts; ++k) {
    const Part& mine = part[k];
    if (!mine.slide) return false;
    if (mine.copying != 0) {
      if (mine.first_source < source_end || mine.first_destination < destination_end) return false;
      source_end = mine.source_end;
      destination_end = mine.destination_end;
    }
    first_out[k] = count;
    first_chunk[k] = total_chunks;
    count += mine.copying;
    total_chunks += mine.chunks;
    bytes += mine.bytes;
  }
  if (total_chunks >= no_wait)
    throw std::length_error("make_slide_moves: " + std::to_string(total_chunks) + " chunks; at most " +
                            std::to_string(no_wait - 1) + " fit a plan");
  run_parts(parts, [&](unsigned k) {
    std::size_t at = first_out[k];
    std::uint64_t chunk = first_chunk[k];
    for (std::size_t index = part[k].begin; index < part[k].end; ++index) {
      const Move& move = moves.data()[index];
      const std::uint64_t source = address(move.from_segment, move.from_offset);
      const std::uint64_t destination = address(move.to_segment, move.to_offset);
      if (move.bytes == 0 || source == destination) continue;
      out[at++] = {source, destination, move.bytes, static_cast<std::uint32_t>(chunk), static_cast<std::uint32_t>(index)};
      chunk += chunk_count(move.bytes, chunk_bytes);
    }
  });
  return true;
}

std::uint64_t rechunk_slide_moves(SlideMove* moves, std::size_t count, std::uint32_t chunk_bytes) {
  std::uint64_t total_chunks = 0;
  for (std::size_t index = 0; index < count; ++index) {
    moves[index].first_chunk = static_cast<std::uint32_t>(total_chunks);
    total_chunks += chunk_count(moves[index].bytes, chunk_bytes);
    if (total_chunks >= no_wait)
      throw std::length_error("rechunk_slide_moves: " + std::to_string(total_chunks) + " chunks; at most " +
                              std::to_string(no_wait - 1) + " fit a plan");
  }
  return total_chunks;
}

bool make_slide_chunk_plan(gsl::span<const CopyRange> moves, std::uint32_t chunk_bytes, ChunkPlan& plan) {
  return slide_chunks(
      moves.size(), [&](std::size_t index) { return moves.data()[index]; }, chunk_bytes, plan);
}

bool make_slide_chunk_plan(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                           std::uint32_t chunk_bytes, ChunkPlan& plan) {
  return slide_chunks(
      moves.size(),
      [&](std::size_t index) {
        const Move& move = moves.data()[index];
        return CopyRange{segment_bases[move.from_segment] + move.from_offset,
                         segment_bases[move.to_segment] + move.to_offset, move.bytes};
      },
      chunk_bytes, plan);
}

}  // namespace vramkit::compactor::detail
