// memory_map_svg: the block map as a picture. Each segment is one horizontal bar whose length is
// proportional to its bytes (the largest segment spans the full width); each block is one
// <rect class="block STATE"> inside it, at least 1 px wide so that no block vanishes (a tiny block
// may then overlap its neighbour by under a pixel, but is still one rect: tests count them).
// Headline metrics above, a legend below. Every piece of text goes through xml_escape(), so any
// title yields well-formed XML. Cost: O(blocks).
#include <vramkit/detail/xml_escape.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/memory_map.hpp>
#include <vramkit/units.hpp>

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace vramkit {
namespace {

constexpr double left_margin = 112;  // room for the "segment 0" labels
constexpr double right_margin = 24;
constexpr double bar_width = 800;  // the largest segment's length
constexpr double bar_height = 28;
constexpr double bar_gap = 14;
constexpr double header_height = 84;  // title and two lines of metrics
constexpr double legend_height = 40;

using detail::xml_escape;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100.0);
  return text;
}

const char* colour(BlockState state) {
  switch (state) {
    case BlockState::free:
      return "#e6e6e6";
    case BlockState::live:
      return "#4e79a7";
    case BlockState::pinned:
      return "#e15759";
    case BlockState::arena:
      return "#f28e2b";
  }
  return "#000000";
}

}  // namespace

std::string memory_map_svg(const Pool& pool, const std::string& title) {
  const std::vector<SegmentInfo> segments = pool.segments();
  const std::vector<BlockInfo> blocks = pool.block_map();
  const PoolStatistics statistics = pool.statistics();

  std::uint64_t largest_segment = 1;
  for (const SegmentInfo& segment : segments) largest_segment = std::max(largest_segment, segment.bytes);
  const double pixels_per_byte = bar_width / static_cast<double>(largest_segment);
  const double width = left_margin + bar_width + right_margin;
  const double bars_height = static_cast<double>(segments.size()) * (bar_height + bar_gap);
  const double height = header_height + bars_height + legend_height;
  auto bar_top = [](std::uint32_t segment) { return header_height + segment * (bar_height + bar_gap); };

  std::string svg = detail::message(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
      number(width), "\" height=\"", number(height), "\" viewBox=\"0 0 ", number(width), " ", number(height),
      "\" font-family=\"sans-serif\" font-size=\"12\">\n",
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"", number(width), "\" height=\"", number(height),
      "\" fill=\"#ffffff\"/>\n");
  svg += detail::message("<text class=\"title\" x=\"", number(left_margin), "\" y=\"22\" font-size=\"16\">",
                         xml_escape(title), "</text>\n");
  svg += detail::message("<text class=\"metrics\" x=\"", number(left_margin), "\" y=\"44\">reserved ",
                         xml_escape(format_bytes(statistics.reserved_bytes)), ", used ",
                         xml_escape(format_bytes(statistics.used_bytes)), " (utilization ",
                         xml_escape(percent(statistics.utilization())), "), ", statistics.live_allocations,
                         " live blocks in ", statistics.segments, " segments</text>\n");
  svg += detail::message("<text class=\"metrics\" x=\"", number(left_margin), "\" y=\"62\">fragmentation ",
                         xml_escape(percent(statistics.fragmentation())), ", largest free block ",
                         xml_escape(format_bytes(statistics.largest_free_block)), " of ",
                         xml_escape(format_bytes(statistics.free_bytes)), " free in ", statistics.free_ranges,
                         " ranges</text>\n");

  for (const SegmentInfo& segment : segments) {
    const double top = bar_top(segment.segment);
    svg += detail::message("<text class=\"segment-label\" x=\"8\" y=\"", number(top + bar_height / 2 + 4),
                           "\">segment ", segment.segment, "</text>\n");
    svg += detail::message("<rect class=\"segment\" x=\"", number(left_margin), "\" y=\"", number(top),
                           "\" width=\"", number(static_cast<double>(segment.bytes) * pixels_per_byte),
                           "\" height=\"", number(bar_height), "\" fill=\"none\" stroke=\"#333333\"/>\n");
  }
  for (const BlockInfo& block : blocks) {
    if (block.segment >= segments.size()) continue;  // a segment added between the reads
    const double x = left_margin + static_cast<double>(block.offset) * pixels_per_byte;
    const double w = std::max(1.0, static_cast<double>(block.bytes) * pixels_per_byte);
    std::string tooltip = detail::message(to_string(block.state), " block: ", format_bytes(block.bytes),
                                          " at segment ", block.segment, " offset ", block.offset);
    if (block.state != BlockState::free) tooltip += detail::message(", slot ", block.slot);
    svg += detail::message("<rect class=\"block ", to_string(block.state), "\" x=\"", number(x), "\" y=\"",
                           number(bar_top(block.segment)), "\" width=\"", number(w), "\" height=\"",
                           number(bar_height), "\" fill=\"", colour(block.state),
                           "\" stroke=\"#ffffff\" stroke-width=\"0.5\"><title>", xml_escape(tooltip),
                           "</title></rect>\n");
  }

  const double legend_top = header_height + bars_height + 8;
  double x = left_margin;
  for (const BlockState state : {BlockState::free, BlockState::live, BlockState::pinned, BlockState::arena}) {
    svg +=
        detail::message("<rect class=\"legend\" x=\"", number(x), "\" y=\"", number(legend_top),
                        "\" width=\"14\" height=\"14\" fill=\"", colour(state), "\" stroke=\"#333333\"/>\n");
    svg += detail::message("<text class=\"legend\" x=\"", number(x + 20), "\" y=\"", number(legend_top + 12),
                           "\">", to_string(state), "</text>\n");
    x += 96;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace vramkit
