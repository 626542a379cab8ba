#pragma once
// A slide's chunks derived from its moves alone, one chunk at a time, with no plan in between:
// what the CUDA device computes on the GPU (one thread a chunk) so that the host hands over the
// moves instead of building and uploading a chunk plan. Chunk t is exactly chunk t of
// make_slide_chunk_plan (slide_chunks.cpp): the same source, destination, bytes, move and waits.
// tests/slide_math_test.cpp compares the two on random slides.
//
// Input: the moves of a slide that copy something (bytes > 0, source != destination), in order:
// ascending, disjoint sources and destinations, each destination at or below its source. Each
// carries first_chunk, the number of chunks of the moves before it. Cost: three binary searches
// over the moves a chunk.
#include <cstdint>

#include <vramkit/detail/host_device_macros.hpp>

namespace vramkit::compactor::detail {

struct SlideMove {
  std::uint64_t source = 0;
  std::uint64_t destination = 0;
  std::uint64_t bytes = 0;
  std::uint32_t first_chunk = 0;  ///< Ticket of this move's first chunk.
  std::uint32_t move = 0;         ///< Index of the move in the caller's list (Chunk::move).
};

/// The same layout as compactor::Chunk (static_asserts where both are visible check it).
struct SlideChunk {
  std::uint64_t source;
  std::uint64_t destination;
  std::uint32_t bytes;
  std::uint32_t move;
  std::uint32_t wait_first;
  std::uint32_t wait_last;
};

inline constexpr std::uint32_t slide_no_wait = 0xFFFFFFFFu;

/// The last move whose first chunk is at or before `ticket` (moves[0].first_chunk is 0).
VRAMKIT_HOST_DEVICE inline std::uint32_t slide_move_of(const SlideMove* moves, std::uint32_t count,
                                                       std::uint32_t ticket) {
  std::uint32_t low = 0, high = count;  // moves[low].first_chunk <= ticket < moves[high].first_chunk
  while (high - low > 1) {
    const std::uint32_t middle = low + (high - low) / 2;
    if (moves[middle].first_chunk <= ticket) low = middle;
    else high = middle;
  }
  return low;
}

/// The first move whose source ends after `address`, or count.
VRAMKIT_HOST_DEVICE inline std::uint32_t slide_first_ending_after(const SlideMove* moves, std::uint32_t count,
                                                                  std::uint64_t address) {
  std::uint32_t low = 0, high = count;
  while (low < high) {
    const std::uint32_t middle = low + (high - low) / 2;
    if (moves[middle].source + moves[middle].bytes > address) high = middle;
    else low = middle + 1;
  }
  return low;
}

/// The number of moves whose source starts before `address` (the last of them is the result - 1).
VRAMKIT_HOST_DEVICE inline std::uint32_t slide_starting_before(const SlideMove* moves, std::uint32_t count,
                                                               std::uint64_t address) {
  std::uint32_t low = 0, high = count;
  while (low < high) {
    const std::uint32_t middle = low + (high - low) / 2;
    if (moves[middle].source < address) low = middle + 1;
    else high = middle;
  }
  return low;
}

/// Chunk `ticket` of the slide (ticket < total_chunks). Its waits are the chunks before it whose
/// sources overlap its destination: from the first chunk whose source ends after the destination
/// starts to the last one before it whose source starts before the destination ends.
VRAMKIT_HOST_DEVICE inline SlideChunk slide_chunk(const SlideMove* moves, std::uint32_t count,
                                                  std::uint32_t total_chunks, std::uint32_t chunk_bytes,
                                                  std::uint32_t ticket) {
  const SlideMove& move = moves[slide_move_of(moves, count, ticket)];
  const std::uint64_t done = std::uint64_t{ticket - move.first_chunk} * chunk_bytes;
  const std::uint64_t left = move.bytes - done;
  SlideChunk chunk{move.source + done,
                   move.destination + done,
                   static_cast<std::uint32_t>(left < chunk_bytes ? left : chunk_bytes),
                   move.move,
                   slide_no_wait,
                   slide_no_wait};
  const std::uint64_t begin = chunk.destination;
  const std::uint64_t end = chunk.destination + chunk.bytes;
  // The first chunk whose source ends after `begin`: this move's own chunk does, so it exists.
  const SlideMove& low = moves[slide_first_ending_after(moves, count, begin)];
  const std::uint64_t into_low = begin > low.source ? begin - low.source : 0;
  const std::uint32_t first = low.first_chunk + static_cast<std::uint32_t>(into_low / chunk_bytes);
  // The last chunk whose source starts before `end`, if any; never this chunk or a later one.
  const std::uint32_t before = slide_starting_before(moves, count, end);
  if (before == 0 || first >= ticket) return chunk;
  const std::uint32_t high_index = before - 1;
  const SlideMove& high = moves[high_index];
  const std::uint32_t high_chunks =
      (high_index + 1 < count ? moves[high_index + 1].first_chunk : total_chunks) - high.first_chunk;
  const std::uint64_t into_high = (end - 1 - high.source) / chunk_bytes;
  std::uint32_t last = high.first_chunk + static_cast<std::uint32_t>(into_high < high_chunks ? into_high : high_chunks - 1);
  if (last >= ticket) last = ticket - 1;
  if (last < first) return chunk;
  chunk.wait_first = first;
  chunk.wait_last = last;
  return chunk;
}

}  // namespace vramkit::compactor::detail
