// HLO modules: computations (owned, in definition order), the entry, and the
// module-level configuration of the `HloModule` header.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hlo/computation.h"

namespace tpu::hlo {

// The entry's parameter and result shapes with layouts
// (`entry_computation_layout={(f32[2]{0})->f32[2]{0}}`).
struct ComputationLayout {
  std::vector<Shape> parameters;
  Shape result;
  bool operator==(const ComputationLayout&) const = default;
};

struct ModuleConfig {
  bool isScheduled = false;
  std::vector<InputOutputAlias> inputOutputAlias;
  std::vector<BufferDonor> bufferDonors;
  bool aliasPassthroughParams = false;
  std::optional<ComputationLayout> entryComputationLayout;  // absent: derived from the entry
  std::vector<bool> allowSpmdShardingPropagationToParameters = {false};
  std::vector<bool> allowSpmdShardingPropagationToOutput = {false};
  int64_t replicaCount = 1;
  int64_t numPartitions = 1;
  FrontendAttributes frontendAttributes;
  std::vector<RawAttribute> unknown;  // header attributes the parser did not know (origin_recovery_table, ...)
  bool operator==(const ModuleConfig&) const = default;
};

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  const std::vector<std::unique_ptr<Computation>>& computations() const { return computations_; }
  Computation* addComputation(std::unique_ptr<Computation> computation);
  Computation* addComputation(std::string name);
  // Removes a computation nothing calls any more (the caller checks).
  void removeComputation(Computation* computation);
  // Removes every computation `remove` selects in one pass over the list
  // (the caller checks that nothing calls them); returns how many.
  int64_t removeComputationsIf(const std::function<bool(const Computation&)>& remove);
  Computation* findComputation(std::string_view name) const;

  Computation* entry() const { return entry_; }
  void setEntry(Computation* entry) { entry_ = entry; }

  ModuleConfig& config() { return config_; }
  const ModuleConfig& config() const { return config_; }
  StackFrameIndex& stackFrames() { return stackFrames_; }
  const StackFrameIndex& stackFrames() const { return stackFrames_; }

  // The configured entry layout, or one derived from the entry's parameter
  // and root shapes (default layouts where a shape has none).
  ComputationLayout entryComputationLayout() const;

  // Callees before callers, entry last; unreachable computations first, in
  // module order (the printer's order).
  std::vector<Computation*> postOrder() const;

  // A module-wide unique name built from `base` (`base`, `base.1`, ...).
  std::string uniqueComputationName(std::string_view base) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Computation>> computations_;
  Computation* entry_ = nullptr;
  ModuleConfig config_;
  StackFrameIndex stackFrames_;
};

// Compares everything except source locations: names, shapes, operands (by
// position), called computations (by name), attributes, literals, module
// config and the entry. On a difference, describes the first one found.
bool structurallyEqual(const Module& a, const Module& b, std::string* firstDifference = nullptr);

// True for names the text format can write and read back (module,
// computation and instruction names): [A-Za-z_][A-Za-z0-9_.-]*, the
// identifiers of the text lexer. The .hlob reader rejects any other name.
bool isValidName(std::string_view name);

}  // namespace tpu::hlo
