// Trace reader: CSV `op,id,size,stream`, validated line by line. Every error names the trace, the
// line (1-based, the header is line 1) and the offending value. Cost: O(requests), one hash lookup
// per request.
#include <charconv>
#include <fstream>
#include <string_view>
#include <unordered_map>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/trace_replay.hpp>

namespace vramkit {
namespace {

constexpr std::string_view expected_header = "op,id,size,stream";

struct LineContext {
  const std::string& name;
  std::uint64_t line;
};

template <class... Parts>
[[noreturn]] void fail(const LineContext& at, const Parts&... parts) {
  throw invalid_argument(detail::message(at.name, ":", at.line, ": ", parts...));
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  return text;
}

std::uint64_t parse_number(const LineContext& at, std::string_view field, const char* what) {
  field = trim(field);
  if (!field.empty() && field.front() == '-') fail(at, what, " is negative: '", field, "'");
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error == std::errc::result_out_of_range) fail(at, what, " '", field, "' is out of range");
  if (field.empty() || error != std::errc{} || end != field.data() + field.size()) {
    fail(at, what, " is not a non-negative integer: '", field, "'");
  }
  return value;
}

enum class IdState : std::uint8_t { live, freed };
struct IdEntry {
  std::uint32_t allocation;
  std::uint64_t bytes;
  IdState state;
};

}  // namespace

Trace read_trace(std::istream& input, std::string name) {
  Trace trace;
  trace.name = std::move(name);
  std::unordered_map<std::uint64_t, IdEntry> ids;
  std::string text;
  std::uint64_t line = 0;
  std::uint64_t live_bytes = 0;
  bool header_seen = false;
  while (std::getline(input, text)) {
    ++line;
    const LineContext at{trace.name, line};
    const std::string_view row = trim(text);
    if (!header_seen) {
      if (row != expected_header) fail(at, "expected the header '", expected_header, "', found '", row, "'");
      header_seen = true;
      continue;
    }
    if (row.empty()) continue;
    std::string_view fields[4];
    std::size_t count = 0;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = row.find(',', start);
      if (count == 4) fail(at, "expected 4 fields (op,id,size,stream), found more: '", row, "'");
      fields[count++] =
          row.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (count != 4) fail(at, "expected 4 fields (op,id,size,stream), found ", count, ": '", row, "'");
    const std::string_view op = trim(fields[0]);
    if (op != "a" && op != "f") fail(at, "op must be 'a' or 'f', found '", op, "'");
    TraceRequest request;
    request.id = parse_number(at, fields[1], "id");
    request.stream = parse_number(at, fields[3], "stream");
    if (op == "a") {
      request.op = TraceOp::allocate;
      request.bytes = parse_number(at, fields[2], "size");
      if (request.bytes == 0) fail(at, "size 0 for id ", request.id, "; sizes must be positive");
      if (request.bytes > max_trace_request_bytes) {
        fail(at, "size ", request.bytes, " of id ", request.id, " exceeds the limit of 2^48 bytes");
      }
      if (trace.allocations == UINT32_MAX) fail(at, "more than 2^32 - 1 allocations");
      request.allocation = trace.allocations;
      const auto [entry, inserted] =
          ids.try_emplace(request.id, IdEntry{request.allocation, request.bytes, IdState::live});
      if (!inserted) fail(at, "duplicate allocation of id ", request.id);
      ++trace.allocations;
      trace.allocated_bytes += request.bytes;
      live_bytes += request.bytes;
      trace.peak_live_bytes = std::max(trace.peak_live_bytes, live_bytes);
    } else {
      request.op = TraceOp::free;
      // A free's size field is not used; it may be empty, but if present it must be a number.
      if (!trim(fields[2]).empty()) parse_number(at, fields[2], "size");
      const auto found = ids.find(request.id);
      if (found == ids.end()) fail(at, "free of unknown id ", request.id);
      if (found->second.state == IdState::freed) fail(at, "double free of id ", request.id);
      found->second.state = IdState::freed;
      request.allocation = found->second.allocation;
      request.bytes = found->second.bytes;
      live_bytes -= request.bytes;
    }
    trace.requests.push_back(request);
  }
  if (input.bad()) throw invalid_argument(detail::message(trace.name, ": read error after line ", line));
  if (!header_seen) throw invalid_argument(detail::message(trace.name, ": empty trace (no header line)"));
  return trace;
}

Trace read_trace_file(const std::filesystem::path& path) {
  std::ifstream input(path, std::ios::binary);
  if (!input) throw invalid_argument(detail::message("cannot open trace '", path.string(), "'"));
  return read_trace(input, path.string());
}

}  // namespace vramkit
