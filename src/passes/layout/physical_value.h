// The relayout sinker's view of a value it holds physically, shared by its
// rules (physical_layout.cpp, physical_reduce.cpp, physical_conv.cpp).
#pragma once

#include "hlo/module.h"
#include "hlo/shape.h"

namespace tpu::passes::layout {

// A logical value's physical twin: the row-major physical array and the
// logical shape with the layout it is stored in.
struct PhysicalValue {
  hlo::Instruction* value = nullptr;
  hlo::Shape key;
};

}  // namespace tpu::passes::layout
