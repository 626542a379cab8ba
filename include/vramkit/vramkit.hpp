#pragma once
// The umbrella header: includes every public header and nothing else.
#include <vramkit/errors.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/units.hpp>
