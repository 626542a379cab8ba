// The move kernel: every chunk of one phase in one launch, no staging copy.
//
// Persistent blocks take chunks in ticket order (ascending source address, an atomic counter).
// A block reads its whole chunk into registers, publishes "read" for it (and takes its next
// ticket), waits until every chunk whose source overlaps its destination has published "read",
// then writes. Those chunks hold earlier tickets: the smallest ticket not yet read belongs to a
// block whose current chunk waits only on smaller tickets, all read, so that block goes on to
// read it. No block waits forever, and one launch cannot deadlock.
// Cost: each byte is read once and written once; per chunk one atomic and one flag.
#include "device/cuda/move_kernel.hpp"

namespace vramkit::cuda_detail {
namespace {

constexpr unsigned vectors_per_thread = max_chunk_bytes / (move_threads * 16);
constexpr std::uint32_t no_wait = 0xFFFFFFFFu;

__global__ void __launch_bounds__(move_threads) move_chunks(const DeviceChunk* __restrict__ chunks,
                                                            std::uint32_t begin, std::uint32_t end,
                                                            unsigned* ticket, unsigned* read_flags) {
  // The next ticket is taken while the current chunk waits and writes, off the critical path. A
  // block then holds one ticket it has not read; the launch still cannot deadlock: the smallest
  // unread ticket belongs to a block whose current chunk waits only on smaller, read tickets.
  __shared__ std::uint32_t taken[2];
  if (threadIdx.x == 0) taken[0] = begin + atomicAdd(ticket, 1u);
  __syncthreads();
  std::uint32_t index = taken[0];
  unsigned slot = 0;
  while (index < end) {
    const DeviceChunk chunk = chunks[index];

    // Chunks are multiples of 16 bytes at 16-byte-aligned addresses (pool granularity >= 16).
    // Read: 16-byte vectors through L2 (sources are never written before they are read, but the
    // destination writes of other blocks must not be served stale from L1 later).
    const unsigned vectors = chunk.bytes / 16;
    const auto* source = reinterpret_cast<const uint4*>(chunk.source);
    uint4 held[vectors_per_thread];
#pragma unroll
    for (unsigned k = 0; k < vectors_per_thread; ++k) {
      const unsigned v = k * move_threads + threadIdx.x;
      if (v < vectors) held[k] = __ldcg(source + v);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicExch(read_flags + index, 1u);
      taken[slot ^ 1u] = begin + atomicAdd(ticket, 1u);
    }

    // Wait for every chunk whose source this chunk's destination overlaps.
    if (chunk.wait_first != no_wait) {
      for (std::uint32_t other = chunk.wait_first + threadIdx.x; other <= chunk.wait_last; other += move_threads) {
        while (atomicAdd(read_flags + other, 0u) == 0u) {
        }
      }
      __threadfence();
    }
    __syncthreads();  // also publishes taken[slot ^ 1]; thread 0 next writes taken[slot], read by now

    auto* destination = reinterpret_cast<uint4*>(chunk.destination);
#pragma unroll
    for (unsigned k = 0; k < vectors_per_thread; ++k) {
      const unsigned v = k * move_threads + threadIdx.x;
      if (v < vectors) __stcg(destination + v, held[k]);
    }
    slot ^= 1u;
    index = taken[slot];
  }
}

}  // namespace

cudaError_t launch_move_chunks(const DeviceChunk* chunks, std::uint32_t begin, std::uint32_t end,
                               unsigned* ticket, unsigned* read_flags, unsigned blocks, cudaStream_t stream) {
  if (begin >= end) return cudaSuccess;
  if (blocks > end - begin) blocks = end - begin;
  move_chunks<<<blocks, move_threads, 0, stream>>>(chunks, begin, end, ticket, read_flags);
  return cudaGetLastError();
}

cudaError_t move_blocks_per_multiprocessor(int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, move_chunks, move_threads, 0);
}

}  // namespace vramkit::cuda_detail
