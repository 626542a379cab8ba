#pragma once
// The two ways make_chunk_plan builds a plan, exposed for tests that compare them. Both give the
// plan that include/vramkit/compactor/chunk_plan.hpp describes; for a slide they give the same one.
#include <bit>
#include <cstdint>
#include <functional>

#include <gsl/span>

#include "compactor/slide_math.hpp"
#include "vramkit/compactor/chunk_plan.hpp"

namespace vramkit::compactor::detail {

/// The one-pass plan for a slide: the moves that copy something, in the order given, have
/// ascending, disjoint sources and ascending, disjoint destinations, and each destination lies
/// below its source (what plan_full emits for a segment without fixed blocks). Such a plan has
/// one phase. Returns false, leaving `plan` unspecified, when the moves are not a slide.
/// Cost: O(m + c) for m moves and c chunks: no sort, no index arrays, chunks reserved exactly.
bool make_slide_chunk_plan(gsl::span<const CopyRange> moves, std::uint32_t chunk_bytes, ChunkPlan& plan);
/// The same for moves between segments based at segment_bases[segment].
bool make_slide_chunk_plan(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                           std::uint32_t chunk_bytes, ChunkPlan& plan);

/// The moves of a slide that copy something, as slide_chunk() reads them, written to `out` (room
/// for moves.size()): device addresses, first chunks and indices into `moves`. Returns false when
/// the moves are not a slide (out then holds garbage). count: moves written; total_chunks: their
/// chunks; bytes: the bytes of all `moves` (those that copy nothing too), for a caller that
/// chooses the chunk size by their mean without a pass of its own (rechunk_slide_moves then).
/// Cost: O(m), one pass.
bool make_slide_moves(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                      std::uint32_t chunk_bytes, SlideMove* out, std::size_t& count, std::uint64_t& total_chunks,
                      std::uint64_t& bytes);
/// Runs task(k) once for every k < parts (at most max_slide_parts), on any threads, and returns once
/// every call has returned (a pool's compaction team, lent through Device::HostThreads).
using RunParts = std::function<void(unsigned parts, const std::function<void(unsigned)>& task)>;
inline constexpr unsigned max_slide_parts = 64;
/// make_slide_moves with its work split into `parts` ranges of moves, each pass run by run_parts:
/// the same result and the same `out` for a slide (a first pass finds each range's moves that
/// copy, chunks and bytes and checks it is a slide, a second writes them at their places), and
/// false for moves that are not one. Throws what make_slide_moves throws (2^32 - 1 chunks or
/// more), with the total chunks in the message, but only for a slide: make_slide_moves may throw
/// before it sees that moves are not a slide. Cost: O(m / parts) a thread.
bool make_slide_moves_in_parts(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                               std::uint32_t chunk_bytes, SlideMove* out, std::size_t& count,
                               std::uint64_t& total_chunks, std::uint64_t& bytes, unsigned parts,
                               const RunParts& run_parts);
/// The first chunks of slide moves (make_slide_moves) again, for chunks of chunk_bytes; returns
/// the total. Exactly what make_slide_moves with that size writes. Cost: O(count) over moves just
/// written (in the cache).
std::uint64_t rechunk_slide_moves(SlideMove* moves, std::size_t count, std::uint32_t chunk_bytes);

/// The plan for any moves without a cycle. Cost: O(c log c).
void make_general_chunk_plan(gsl::span<const CopyRange> moves, std::uint32_t chunk_bytes, ChunkPlan& plan);

/// Chunks of chunk_bytes (the last one shorter) that a move of `bytes` > 0 is split into.
inline std::uint64_t chunk_count(std::uint64_t bytes, std::uint32_t chunk_bytes) {
  if (bytes <= chunk_bytes) return 1;  // skips a 64-bit division, tens of cycles, for most moves
  return (chunk_bytes & (chunk_bytes - 1)) == 0 ? ((bytes - 1) >> std::countr_zero(chunk_bytes)) + 1
                                                : (bytes - 1) / chunk_bytes + 1;
}

}  // namespace vramkit::compactor::detail
