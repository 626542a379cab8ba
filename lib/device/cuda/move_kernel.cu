// The move kernel: every chunk of one phase in one launch, no staging copy.
//
// Persistent blocks take chunks in ticket order (ascending source address, an atomic counter).
// A block reads its whole chunk into registers, publishes "read" for it, waits until every chunk
// whose source overlaps its destination has published "read", then writes. Those chunks hold
// earlier tickets, so they were taken by blocks that are already running and that read before they
// wait on anything: no block ever waits on a block that cannot run, so the launch cannot deadlock.
// Cost: each byte is read once and written once; per chunk one atomic and one flag.
#include "device/cuda/move_kernel.hpp"

namespace vramkit::cuda_detail {
namespace {

constexpr unsigned vectors_per_thread = max_chunk_bytes / (move_threads * 16);
constexpr std::uint32_t no_wait = 0xFFFFFFFFu;

__global__ void __launch_bounds__(move_threads) move_chunks(const DeviceChunk* __restrict__ chunks,
                                                            std::uint32_t begin, std::uint32_t end,
                                                            unsigned* ticket, unsigned* read_flags) {
  __shared__ std::uint32_t taken;
  for (;;) {
    if (threadIdx.x == 0) taken = begin + atomicAdd(ticket, 1u);
    __syncthreads();
    const std::uint32_t index = taken;
    __syncthreads();  // everyone has read `taken` before thread 0 may overwrite it
    if (index >= end) return;
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
    }

    // Wait for every chunk whose source this chunk's destination overlaps.
    if (chunk.wait_first != no_wait) {
      for (std::uint32_t other = chunk.wait_first + threadIdx.x; other <= chunk.wait_last; other += move_threads) {
        while (atomicAdd(read_flags + other, 0u) == 0u) {
        }
      }
      __threadfence();
    }
    __syncthreads();

    auto* destination = reinterpret_cast<uint4*>(chunk.destination);
#pragma unroll
    for (unsigned k = 0; k < vectors_per_thread; ++k) {
      const unsigned v = k * move_threads + threadIdx.x;
      if (v < vectors) __stcg(destination + v, held[k]);
    }
  }
}

// The warp form: the same protocol with a warp in place of the block. Every lane fences after its
// loads (one warp instruction: it waits for the warp's outstanding loads) before lane 0 publishes.
__global__ void __launch_bounds__(warp_kernel_threads) move_chunks_by_warp(const DeviceChunk* __restrict__ chunks,
                                                                           std::uint32_t begin, std::uint32_t end,
                                                                           unsigned* ticket, unsigned* read_flags) {
  constexpr unsigned lane_vectors = warp_chunk_bytes / (32 * 16);
  const unsigned lane = threadIdx.x & 31u;
  for (;;) {
    std::uint32_t index = 0;
    if (lane == 0) index = begin + atomicAdd(ticket, 1u);
    index = __shfl_sync(0xFFFFFFFFu, index, 0);
    if (index >= end) return;
    const DeviceChunk chunk = chunks[index];
    const unsigned vectors = chunk.bytes / 16;
    const auto* source = reinterpret_cast<const uint4*>(chunk.source);
    uint4 held[lane_vectors];
#pragma unroll
    for (unsigned k = 0; k < lane_vectors; ++k) {
      const unsigned v = k * 32 + lane;
      if (v < vectors) held[k] = __ldcg(source + v);
    }
    __threadfence();
    __syncwarp();
    if (lane == 0) atomicExch(read_flags + index, 1u);
    if (chunk.wait_first != no_wait) {
      for (std::uint32_t other = chunk.wait_first + lane; other <= chunk.wait_last; other += 32) {
        while (atomicAdd(read_flags + other, 0u) == 0u) {
        }
      }
      __threadfence();
    }
    __syncwarp();
    auto* destination = reinterpret_cast<uint4*>(chunk.destination);
#pragma unroll
    for (unsigned k = 0; k < lane_vectors; ++k) {
      const unsigned v = k * 32 + lane;
      if (v < vectors) __stcg(destination + v, held[k]);
    }
  }
}

// Also zeroes what the move kernel counts with: a read flag a chunk and, after them, the ticket.
// The moves' first chunks count from first_ticket (a part of a larger slide); the chunks and their
// waits are written from 0.
__global__ void derive_slide_chunks(const compactor::detail::SlideMove* __restrict__ moves, std::uint32_t count,
                                    std::uint32_t first_ticket, std::uint32_t total, std::uint32_t chunk_bytes,
                                    DeviceChunk* __restrict__ chunks, unsigned* __restrict__ flags) {
  const std::uint32_t ticket = blockIdx.x * blockDim.x + threadIdx.x;
  if (ticket > total) return;
  flags[ticket] = 0;
  if (ticket == total) return;
  auto chunk = compactor::detail::slide_chunk(moves, count, first_ticket + total, chunk_bytes, first_ticket + ticket);
  if (chunk.wait_first != compactor::detail::slide_no_wait) {
    chunk.wait_first -= first_ticket;  // the waits lie in the part: its moves are all the searches see
    chunk.wait_last -= first_ticket;
  }
  chunks[ticket] = {chunk.source, chunk.destination, chunk.bytes, chunk.move, chunk.wait_first, chunk.wait_last};
}

}  // namespace

cudaError_t launch_derive_slide_chunks(const compactor::detail::SlideMove* moves, std::uint32_t count,
                                       std::uint32_t first_ticket, std::uint32_t total, std::uint32_t chunk_bytes,
                                       DeviceChunk* chunks, unsigned* flags, cudaStream_t stream) {
  if (total == 0) return cudaSuccess;
  constexpr unsigned threads = 256;
  derive_slide_chunks<<<total / threads + 1, threads, 0, stream>>>(moves, count, first_ticket, total, chunk_bytes,
                                                                   chunks, flags);
  return cudaGetLastError();
}

cudaError_t launch_move_chunks(MoveKernel kernel, const DeviceChunk* chunks, std::uint32_t begin, std::uint32_t end,
                               unsigned* ticket, unsigned* read_flags, unsigned blocks, cudaStream_t stream) {
  if (begin >= end) return cudaSuccess;
  if (kernel == MoveKernel::block) {
    if (blocks > end - begin) blocks = end - begin;
    move_chunks<<<blocks, move_threads, 0, stream>>>(chunks, begin, end, ticket, read_flags);
  } else {
    const std::uint32_t warps_needed = end - begin;
    const unsigned per_block = warp_kernel_threads / 32;
    if (blocks > (warps_needed + per_block - 1) / per_block) blocks = (warps_needed + per_block - 1) / per_block;
    move_chunks_by_warp<<<blocks, warp_kernel_threads, 0, stream>>>(chunks, begin, end, ticket, read_flags);
  }
  return cudaGetLastError();
}

cudaError_t load_move_kernels() {
  cudaFuncAttributes attributes{};
  cudaError_t error = cudaFuncGetAttributes(&attributes, move_chunks);
  if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, move_chunks_by_warp);
  if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, derive_slide_chunks);
  return error;
}

cudaError_t move_blocks_per_multiprocessor(MoveKernel kernel, int* blocks) {
  return kernel == MoveKernel::block
             ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, move_chunks, move_threads, 0)
             : cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, move_chunks_by_warp, warp_kernel_threads, 0);
}

}  // namespace vramkit::cuda_detail
