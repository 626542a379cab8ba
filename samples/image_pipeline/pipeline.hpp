#pragma once
// One image through the stages decode -> gray -> blur -> edges -> equalize -> resize, on pool buffers.
// The stage plan (make_batch_plan) declares the same buffers with the same lifetimes, so the plan's
// peak is what one image of that size needs at most from the pool.
#include <cstdint>
#include <string>
#include <vector>

#include <vramkit/vramkit.hpp>

#include "image_ops.hpp"
#include "synthetic.hpp"

namespace pipeline {

inline constexpr std::uint32_t output_width = 512;
inline constexpr std::uint32_t output_height = 512;

/// Buffers that live as long as the pipeline: filter weights and the equalization tables. They are
/// handles like any other buffer, so compaction may move them between batches.
struct LongLivedBuffers {
  vramkit::DeviceBuffer<std::int32_t> blur_weights;
  vramkit::DeviceBuffer<std::uint32_t> cdf;  ///< 256 entries.
  vramkit::DeviceBuffer<std::uint8_t> lut;   ///< 256 entries.
  explicit LongLivedBuffers(vramkit::Pool& pool);
};

/// The stage plan for one image of width x height (the batch uses its largest image).
vramkit::MemoryPlan make_image_plan(std::uint32_t width, std::uint32_t height);

/// Runs every stage on `photo`; returns the 512x512 result image, still in the pool. Intermediate
/// images are freed stage by stage, as the plan declares.
vramkit::Image<std::uint8_t> process(vramkit::Pool& pool, image_ops::Executor executor,
                                     LongLivedBuffers& buffers, const synthetic::NamedPhoto& photo);

}  // namespace pipeline
