// The SVG diagram of a solved plan: stages across, offsets up, one rectangle per buffer.
//
// Every name goes through xml_escape(), so any name yields well-formed XML. Buffers too thin to
// label carry their name and size in a <title> (shown on hover) all the same.
#include <vramkit/detail/xml_escape.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/units.hpp>

#include <algorithm>
#include <cstdio>

namespace vramkit {
namespace {

constexpr double left_margin = 96;
constexpr double top_margin = 56;
constexpr double bottom_margin = 40;
constexpr double right_margin = 24;
constexpr double stage_width = 128;
constexpr double plot_height = 480;
constexpr double label_height = 13;  // a rectangle at least this tall gets a text label

using detail::xml_escape;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

// Distinct, stable colours: the golden-angle walk around the hue circle.
std::string colour(std::size_t index) {
  return detail::message("hsl(", (index * 137) % 360, ",55%,72%)");
}

}  // namespace

std::string to_svg(const MemoryPlan& plan, const PlanSolution& solution) {
  if (solution.buffers.size() != plan.buffers().size() || solution.stages.size() != plan.stages().size()) {
    throw invalid_argument(detail::message("to_svg: the solution has ", solution.buffers.size(),
                                           " buffers and ", solution.stages.size(), " stages; the plan has ",
                                           plan.buffers().size(), " and ", plan.stages().size()));
  }
  const double width = left_margin + stage_width * static_cast<double>(solution.stages.size()) + right_margin;
  const double height = top_margin + plot_height + bottom_margin;
  const double scale = solution.peak_bytes == 0 ? 0 : plot_height / static_cast<double>(solution.peak_bytes);
  const auto y_of = [&](std::uint64_t offset) {
    return top_margin + plot_height - static_cast<double>(offset) * scale;
  };
  const std::string title = detail::message("peak ", format_bytes(solution.peak_bytes), " vs lower bound ",
                                            format_bytes(solution.lower_bound_bytes));

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += detail::message("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", number(width), "\" height=\"",
                         number(height), "\" viewBox=\"0 0 ", number(width), ' ', number(height),
                         "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  svg += detail::message("<title>", xml_escape(title), "</title>\n");
  svg += detail::message("<text class=\"title\" x=\"", number(left_margin), "\" y=\"24\" font-size=\"15\">",
                         xml_escape(title), " (", solution.buffers.size(), " buffers; ",
                         xml_escape(solution.strategy), ")</text>\n");

  // Stage columns and their names.
  for (std::size_t stage = 0; stage < solution.stages.size(); ++stage) {
    const double x = left_margin + stage_width * static_cast<double>(stage);
    svg += detail::message("<rect class=\"stage\" x=\"", number(x), "\" y=\"", number(top_margin),
                           "\" width=\"", number(stage_width), "\" height=\"", number(plot_height),
                           "\" fill=\"", stage % 2 == 0 ? "#f4f4f4" : "#ffffff", "\"/>\n");
    svg += detail::message("<text class=\"stage-name\" x=\"", number(x + stage_width / 2), "\" y=\"",
                           number(top_margin + plot_height + 18), "\" text-anchor=\"middle\">",
                           xml_escape(solution.stages[stage].name), "</text>\n");
  }
  // Offset axis: 0 and the peak.
  for (const std::uint64_t offset : {std::uint64_t{0}, solution.peak_bytes}) {
    svg += detail::message("<text class=\"axis\" x=\"", number(left_margin - 6), "\" y=\"",
                           number(y_of(offset) + 4), "\" text-anchor=\"end\">", format_bytes(offset),
                           "</text>\n");
  }

  for (std::size_t index = 0; index < solution.buffers.size(); ++index) {
    const PlacedBuffer& buffer = solution.buffers[index];
    const double x = left_margin + stage_width * buffer.first_stage + 2;
    const double rect_width = stage_width * (buffer.last_stage - buffer.first_stage + 1) - 4;
    const double top = y_of(buffer.offset + buffer.reserved_bytes);
    const double rect_height = std::max(y_of(buffer.offset) - top, 0.5);
    const std::string label = detail::message(xml_escape(buffer.name), " (", format_bytes(buffer.bytes), ")");
    svg += detail::message("<rect class=\"buffer\" x=\"", number(x), "\" y=\"", number(top), "\" width=\"",
                           number(rect_width), "\" height=\"", number(rect_height), "\" fill=\"",
                           colour(index), "\" stroke=\"#333\" stroke-width=\"0.5\"><title>", label,
                           " at offset ", buffer.offset, "</title></rect>\n");
    if (rect_height >= label_height) {
      svg += detail::message("<text class=\"buffer-name\" x=\"", number(x + 4), "\" y=\"",
                             number(top + rect_height / 2 + 4), "\">", label, "</text>\n");
    }
  }

  const double bound_y = y_of(solution.lower_bound_bytes);
  svg +=
      detail::message("<line class=\"lower-bound\" x1=\"", number(left_margin), "\" y1=\"", number(bound_y),
                      "\" x2=\"", number(width - right_margin), "\" y2=\"", number(bound_y),
                      "\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n");
  svg += detail::message("<text class=\"lower-bound\" x=\"", number(width - right_margin - 4), "\" y=\"",
                         number(bound_y - 4), "\" text-anchor=\"end\" fill=\"#c00\">lower bound ",
                         format_bytes(solution.lower_bound_bytes), "</text>\n");
  svg += "</svg>\n";
  return svg;
}

}  // namespace vramkit
