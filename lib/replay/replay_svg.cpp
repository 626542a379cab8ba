// A replay's SVG chart: used and reserved bytes (left axis) and fragmentation (right axis, 0..1)
// as polylines over the trace position. Cost: O(samples).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <vramkit/trace_replay.hpp>
#include <vramkit/units.hpp>

namespace vramkit {
namespace {

constexpr double width = 960, height = 420, left = 80, right = 60, top = 40, bottom = 50;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string replay_svg(const Trace& trace, const ReplayResult& result) {
  const double plot_width = width - left - right, plot_height = height - top - bottom;
  std::uint64_t max_bytes = std::max<std::uint64_t>(result.capacity_bytes, 1);
  for (const ReplaySample& s : result.samples)
    max_bytes = std::max({max_bytes, s.used_bytes, s.reserved_bytes});
  const double requests = static_cast<double>(std::max<std::size_t>(result.requests, 1));
  auto x = [&](std::size_t request) { return left + plot_width * static_cast<double>(request) / requests; };
  auto y_bytes = [&](std::uint64_t bytes) {
    return top + plot_height * (1.0 - static_cast<double>(bytes) / static_cast<double>(max_bytes));
  };
  auto y_fraction = [&](double fraction) { return top + plot_height * (1.0 - fraction); };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << escape(trace.name) << ": used, reserved ("
      << format_bytes(max_bytes) << " full scale) and fragmentation</text>\n";
  out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_width << "\" height=\""
      << plot_height << "\" fill=\"none\" stroke=\"#888\"/>\n";
  auto polyline = [&](const char* colour, auto&& y_of) {
    out << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.2\" points=\"";
    for (const ReplaySample& s : result.samples) out << number(x(s.request)) << ',' << number(y_of(s)) << ' ';
    out << "\"/>\n";
  };
  polyline("#d62728", [&](const ReplaySample& s) { return y_bytes(s.reserved_bytes); });
  polyline("#1f77b4", [&](const ReplaySample& s) { return y_bytes(s.used_bytes); });
  polyline("#2ca02c", [&](const ReplaySample& s) { return y_fraction(s.fragmentation); });
  out << "<text x=\"" << left - 5 << "\" y=\"" << top + 4 << "\" text-anchor=\"end\">"
      << format_bytes(max_bytes) << "</text>\n";
  out << "<text x=\"" << left - 5 << "\" y=\"" << top + plot_height << "\" text-anchor=\"end\">0</text>\n";
  out << "<text x=\"" << width - right + 5 << "\" y=\"" << top + 4 << "\">1.0</text>\n";
  out << "<text x=\"" << width - right + 5 << "\" y=\"" << top + plot_height << "\">0.0</text>\n";
  out << "<text x=\"" << left << "\" y=\"" << height - 25 << "\">request 0</text>\n";
  out << "<text x=\"" << width - right << "\" y=\"" << height - 25 << "\" text-anchor=\"end\">request "
      << result.requests << "</text>\n";
  const double legend_y = height - 8;
  out << "<text x=\"" << left << "\" y=\"" << legend_y << "\" fill=\"#1f77b4\">used bytes</text>\n";
  out << "<text x=\"" << left + 110 << "\" y=\"" << legend_y << "\" fill=\"#d62728\">reserved bytes</text>\n";
  out << "<text x=\"" << left + 240 << "\" y=\"" << legend_y
      << "\" fill=\"#2ca02c\">fragmentation (1 - largest free / free; right axis)</text>\n";
  out << "</svg>\n";
  return out.str();
}

}  // namespace vramkit
