// The chip descriptions shipped with the tools: the JSON text of each file
// in src/target/data/, embedded at build time (see CMakeLists.txt).
#pragma once

#include <string_view>
#include <vector>

namespace tpu::target {

struct BuiltinTarget {
  std::string_view name;  // file stem, e.g. "v5e"
  std::string_view json;
};

const std::vector<BuiltinTarget>& builtinTargets();

}  // namespace tpu::target
