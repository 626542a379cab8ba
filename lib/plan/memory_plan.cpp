// Declaring a plan: stages by name, buffers with sizes and stage ranges.
//
// Every add validates the whole request first and changes the plan only when nothing can fail any
// more (capacity is reserved before the name is registered), so a rejected add leaves the plan as
// it was. The running total of reserved bytes is capped at max_total_bytes, which bounds every
// offset the solver can produce (a greedy peak is below twice the total) well inside 64 bits.
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/units.hpp>

#include <bit>

namespace vramkit {
namespace {

using detail::message;

// a * b, or nullopt when the product does not fit in 64 bits.
std::optional<std::uint64_t> multiply(std::uint64_t a, std::uint64_t b) {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// value rounded up to a power-of-two alignment, or nullopt on overflow.
std::optional<std::uint64_t> round_up(std::uint64_t value, std::uint64_t alignment) {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(value, alignment - 1, &sum)) return std::nullopt;
  return sum & ~(alignment - 1);
}

void check_alignment(std::string_view buffer_name, std::uint64_t alignment) {
  if (!std::has_single_bit(alignment)) {
    throw invalid_argument(
        message("buffer '", buffer_name, "': alignment ", alignment, " is not a power of two"));
  }
}

}  // namespace

MemoryPlan::MemoryPlan(std::vector<std::string> stage_names) {
  if (stage_names.empty()) throw invalid_argument("a memory plan needs at least one stage; got none");
  if (stage_names.size() > UINT32_MAX) {
    throw invalid_argument(
        message("a memory plan has at most ", UINT32_MAX, " stages; got ", stage_names.size()));
  }
  for (std::size_t index = 0; index < stage_names.size(); ++index) {
    const std::string& name = stage_names[index];
    if (name.empty()) throw invalid_argument(message("stage ", index, " has an empty name"));
    const auto [where, inserted] = stage_by_name_.emplace(name, static_cast<std::uint32_t>(index));
    if (!inserted) {
      throw invalid_argument(
          message("stage name '", name, "' is used twice: stages ", where->second, " and ", index));
    }
  }
  stage_names_ = std::move(stage_names);
}

std::size_t MemoryPlan::stage_index(std::string_view stage_name) const {
  const auto where = stage_by_name_.find(stage_name);
  if (where == stage_by_name_.end()) {
    throw invalid_argument(message("no stage is named '", stage_name, "'"));
  }
  return where->second;
}

std::size_t MemoryPlan::buffer_index(std::string_view buffer_name) const {
  const auto where = buffer_by_name_.find(buffer_name);
  if (where == buffer_by_name_.end()) {
    throw invalid_argument(message("no buffer is named '", buffer_name, "'"));
  }
  return where->second;
}

std::uint32_t MemoryPlan::stage_for(std::string_view buffer_name, std::string_view stage_name) const {
  const auto where = stage_by_name_.find(stage_name);
  if (where == stage_by_name_.end()) {
    throw invalid_argument(message("buffer '", buffer_name, "': no stage is named '", stage_name, "'"));
  }
  return where->second;
}

std::size_t MemoryPlan::add_buffer(const BufferSpec& spec) {
  check_alignment(spec.name, spec.alignment);
  if (spec.bytes == 0)
    throw invalid_argument(message("buffer '", spec.name, "' has 0 bytes; it needs at least 1"));
  PlannedBuffer buffer;
  buffer.name = spec.name;
  buffer.bytes = spec.bytes;
  buffer.alignment = spec.alignment;
  buffer.first_stage = stage_for(spec.name, spec.first_stage);
  buffer.last_stage = stage_for(spec.name, spec.last_stage);
  return add_checked(std::move(buffer));
}

std::uint64_t MemoryPlan::at_least(std::string_view buffer_name, std::uint64_t alignment, std::uint64_t minimum) {
  check_alignment(buffer_name, alignment);
  return std::max(alignment, minimum);
}

std::size_t MemoryPlan::add_elements(std::string name, std::uint64_t count, std::uint64_t element_bytes,
                                     std::string first_stage, std::string last_stage,
                                     std::uint64_t alignment) {
  if (count == 0) throw invalid_argument(message("buffer '", name, "' has 0 elements; it needs at least 1"));
  const std::optional<std::uint64_t> bytes = multiply(count, element_bytes);
  if (!bytes) {
    throw invalid_argument(
        message("buffer '", name, "': ", count, " elements of ", element_bytes, " bytes overflow 64 bits"));
  }
  return add_buffer({.name = std::move(name),
                     .bytes = *bytes,
                     .first_stage = std::move(first_stage),
                     .last_stage = std::move(last_stage),
                     .alignment = alignment});
}

std::size_t MemoryPlan::add_pixels(std::string name, std::uint64_t width, std::uint64_t height,
                                   std::uint64_t channels, std::uint64_t element_bytes,
                                   std::string first_stage, std::string last_stage, std::uint64_t alignment) {
  check_alignment(name, alignment);
  if (width == 0 || height == 0 || channels == 0) {
    throw invalid_argument(message("image '", name, "' is ", width, " x ", height, " x ", channels,
                                   " channels; every dimension must be at least 1"));
  }
  const std::optional<std::uint64_t> pixels_per_row = multiply(width, channels);
  const std::optional<std::uint64_t> row_bytes =
      pixels_per_row ? multiply(*pixels_per_row, element_bytes) : std::nullopt;
  const std::optional<std::uint64_t> pitch_bytes = row_bytes ? round_up(*row_bytes, alignment) : std::nullopt;
  const std::optional<std::uint64_t> bytes = pitch_bytes ? multiply(*pitch_bytes, height) : std::nullopt;
  if (!bytes) {
    throw invalid_argument(message("image '", name, "' of ", width, " x ", height, " x ", channels, " x ",
                                   element_bytes, " bytes (rows padded to ", alignment,
                                   ") overflows 64 bits"));
  }
  PlannedBuffer buffer;
  buffer.bytes = *bytes;
  buffer.alignment = alignment;
  buffer.first_stage = stage_for(name, first_stage);
  buffer.last_stage = stage_for(name, last_stage);
  buffer.image = ImageLayout{.width = width,
                             .height = height,
                             .channels = channels,
                             .element_bytes = element_bytes,
                             .pitch_bytes = *pitch_bytes};
  buffer.name = std::move(name);
  return add_checked(std::move(buffer));
}

// Checks what is common to every add, then commits. Only this function changes the plan.
std::size_t MemoryPlan::add_checked(PlannedBuffer buffer) {
  if (buffer.name.empty()) throw invalid_argument("a buffer needs a name; got an empty one");
  if (buffer_by_name_.find(buffer.name) != buffer_by_name_.end()) {
    throw invalid_argument(message("buffer name '", buffer.name, "' is already declared (buffer ",
                                   buffer_by_name_.find(buffer.name)->second, ")"));
  }
  if (buffer.last_stage < buffer.first_stage) {
    throw invalid_argument(message(
        "buffer '", buffer.name, "': last stage '", stage_names_[buffer.last_stage], "' (", buffer.last_stage,
        ") runs before first stage '", stage_names_[buffer.first_stage], "' (", buffer.first_stage, ")"));
  }
  const std::optional<std::uint64_t> reserved = round_up(buffer.bytes, buffer.alignment);
  const std::uint64_t room = max_total_bytes - total_reserved_bytes_;
  if (!reserved || *reserved > room) {
    throw invalid_argument(message("buffer '", buffer.name, "' of ", buffer.bytes, " bytes (aligned to ",
                                   buffer.alignment, ") would bring the plan past its limit of ",
                                   format_bytes(max_total_bytes), " in all; ", room, " bytes are left"));
  }
  buffer.reserved_bytes = *reserved;

  buffers_.reserve(buffers_.size() + 1);  // After this, push_back cannot throw.
  const std::size_t index = buffers_.size();
  buffer_by_name_.emplace(buffer.name, index);
  buffers_.push_back(std::move(buffer));
  total_reserved_bytes_ += *reserved;
  return index;
}

}  // namespace vramkit
