#pragma once
// The compactor's move kernel, as the CUDA device launches it. Internal to the CUDA device layer.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "compactor/slide_math.hpp"

namespace vramkit::cuda_detail {

/// A chunk as the kernel reads it: the device-side twin of compactor::Chunk, field for field, so
/// that a plan's chunks reach the staging buffer in one memcpy (cuda_device.cpp checks the layout).
/// 32 bytes.
struct DeviceChunk {
  std::uint64_t source;
  std::uint64_t destination;
  std::uint32_t bytes;
  std::uint32_t move;        ///< Not read by the kernel.
  std::uint32_t wait_first;  ///< Plan-wide chunk index, or 0xFFFFFFFF for none.
  std::uint32_t wait_last;
};

/// Two forms of the move kernel: a thread block moves one chunk of up to 64 KiB at a time, or a
/// warp moves one chunk of up to 8 KiB (more chunks in flight; suits many small moves).
enum class MoveKernel { block, warp };

inline constexpr unsigned move_threads = 512;                  ///< block kernel
inline constexpr unsigned max_chunk_bytes = 64 * 1024;         ///< block kernel
inline constexpr unsigned warp_kernel_threads = 256;           ///< warp kernel: 8 warps a block
inline constexpr unsigned warp_chunk_bytes = 32 * 16 * 16;     ///< warp kernel: 16 vectors a lane

inline constexpr unsigned chunk_limit(MoveKernel kernel) {
  return kernel == MoveKernel::block ? max_chunk_bytes : warp_chunk_bytes;
}

/// Below this mean size a move, the automatic choice is the warp form. On the H200 (docs/benchmarks.md,
/// run 46) it moved 100,000 moves of 256 B..64 KiB (a mean of 12 KiB) in 0.67 ms against the block
/// form's 1.12: a block holds one small chunk in flight where its warps hold eight. Moves of a mean
/// of 180 KiB or more run faster by block (fewer chunks, one ticket each 64 KiB).
inline constexpr std::uint64_t warp_mean_bytes = 32 * 1024;

/// The kernel for `moves` moves of `bytes` in all, unless the environment forced one.
inline constexpr MoveKernel automatic_move_kernel(std::uint64_t bytes, std::uint64_t moves) {
  return bytes < warp_mean_bytes * moves ? MoveKernel::warp : MoveKernel::block;
}
static_assert(automatic_move_kernel(100000 * 12288ull, 100000) == MoveKernel::warp);   // (b)'s mean
static_assert(automatic_move_kernel(10000 * 184320ull, 10000) == MoveKernel::block);   // (a)'s mean
static_assert(automatic_move_kernel(4 * warp_mean_bytes, 4) == MoveKernel::block);     // the limit itself
static_assert(automatic_move_kernel(4 * warp_mean_bytes - 1, 4) == MoveKernel::warp);

/// The kernel for a chunk plan whose longest chunk is `largest` bytes: a forced kernel, else the
/// warp form, when the warp form can move every chunk whole; else the block form (which moves
/// chunks of up to max_chunk_bytes). Decided from the chunks themselves, never from a plan's
/// stated limit, which a caller's own plan need not set.
inline constexpr MoveKernel kernel_for_chunks(std::uint32_t largest, MoveKernel preferred) {
  return largest <= warp_chunk_bytes ? preferred : MoveKernel::block;
}
static_assert(kernel_for_chunks(warp_chunk_bytes, MoveKernel::warp) == MoveKernel::warp);
static_assert(kernel_for_chunks(warp_chunk_bytes + 16, MoveKernel::warp) == MoveKernel::block);
static_assert(kernel_for_chunks(16, MoveKernel::block) == MoveKernel::block);

/// Runs chunks [begin, end) in one launch (each at most chunk_limit(kernel) bytes). read_flags has
/// one zeroed word per chunk of the plan; ticket is a zeroed counter for this launch. blocks: a
/// grid that fits on the device at once (move_blocks_per_multiprocessor x multiprocessors).
cudaError_t launch_move_chunks(MoveKernel kernel, const DeviceChunk* chunks, std::uint32_t begin, std::uint32_t end,
                               unsigned* ticket, unsigned* read_flags, unsigned blocks, cudaStream_t stream);

/// Writes the `total` chunks of a slide given as its moves (compactor/slide_math.hpp), one thread a
/// chunk: the chunk plan made on the device. The moves' first_chunk count from first_ticket (a part
/// of a slide staged whole: its first move's); the chunks are written from 0, their waits within
/// the part. Zeroes flags[0..total] (the read flags and the ticket of launch_move_chunks), so that
/// the move needs nothing else queued before it.
cudaError_t launch_derive_slide_chunks(const compactor::detail::SlideMove* moves, std::uint32_t count,
                                       std::uint32_t first_ticket, std::uint32_t total, std::uint32_t chunk_bytes,
                                       DeviceChunk* chunks, unsigned* flags, cudaStream_t stream);

/// Loads the move and chunk kernels now (a kernel loads on its first use: CUDA's lazy loading).
cudaError_t load_move_kernels();

/// Blocks of launch_move_chunks that fit on one multiprocessor at once.
cudaError_t move_blocks_per_multiprocessor(MoveKernel kernel, int* blocks);

}  // namespace vramkit::cuda_detail
