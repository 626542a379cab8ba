#pragma once
// The umbrella header: includes every public header and nothing else.
#include <vramkit/arena_buffer.hpp>
#include <vramkit/compaction.hpp>
#include <vramkit/device.hpp>
#include <vramkit/device_buffer.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/handle.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/image.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/pinned.hpp>
#include <vramkit/planned_batch.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/scoped_arena.hpp>
#include <vramkit/statistics.hpp>
#include <vramkit/units.hpp>
