// The instruction reference generated from the table: the INSTRUCTIONS
// section of man/tpu-isa.7 is exactly this text (a lit test diffs them).
#pragma once

#include <string>

namespace tpu::isa {

// groff -man source, one .TP entry per instruction grouped by slot class.
std::string isaReferenceRoff();

}  // namespace tpu::isa
