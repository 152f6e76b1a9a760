// layout-assignment: gives every array of the module a TPU layout
// (minor_to_major, tiles, element size), XLA's LayoutAssignment redone for
// one target in our own terms (../shared/spec/LAYOUT.md section 2):
//
//  * Buffers that alias (tuple/get-tuple-element forwarding, while
//    init/body/condition/result, call and conditional parameters and
//    results) form one class with one layout.
//  * Constraints seed the classes by priority: entry parameters and result
//    (unless the entry layouts are chosen: EntryLayouts::Auto) and ops whose
//    layouts are fixed (bitcast, fusion, custom-call, infeed, recv) first;
//    then the target's wishes: dot operands with the contracting dimensions
//    minor (the MXU streams rows of K), the right-hand side either K x N or
//    N x K; convolution activations features-minor with batch second-minor
//    (spatial major), kernels output-features minor; collectives that
//    gather or scatter along a dimension with it most major; custom-call
//    operands in the default layout.
//  * A class's layout propagates to its neighbours (through ops that cannot
//    change layout unchanged, through transposes and reshapes as the layout
//    that makes them bitcasts, to a reduce's result without the reduced
//    dimensions, from a broadcast to its operand), highest priority first;
//    each class is set once, so the pass is linear in the module.
//    Unconstrained classes get the default layout.
//  * A `copy` is inserted only where an operand's layout is not what its
//    user needs (two constraints conflict); copies then move across unary
//    elementwise neighbours while that moves fewer bytes.
//  * Transposes and reshapes whose layouts make them reinterpretations
//    become `bitcast`s.
//  * Tiles follow minor_to_major (layout_rules.h: tpuLayout).
#pragma once

#include <string>
#include <vector>

#include "passes/layout/layout_rules.h"
#include "passes/pass.h"

namespace tpu::passes::layout {

enum class EntryLayouts { Keep, Auto };

// One remark: an inserted copy or an op made free.
struct LayoutRemark {
  enum class Kind { Copy, FreeTranspose, FreeReshape } kind = Kind::Copy;
  std::string computation;
  std::string instruction;  // the copy, or the op now a bitcast
  std::string shape;        // of the result
  std::string fromLayout, toLayout;
  // Copies: the layout the value had and who set it, and who needed the other.
  std::string producedBy, requiredBy;
  int64_t bytes = 0;  // copies: bytes read + bytes written (tile padding included)
};

struct LayoutReport {
  std::vector<LayoutRemark> remarks;
  int64_t copies = 0;
  int64_t copyBytes = 0;
  int64_t freeTransposes = 0;
  int64_t freeReshapes = 0;
  int64_t arrays = 0;  // array values laid out
};

struct LayoutOptions {
  EntryLayouts entryLayouts = EntryLayouts::Keep;
  TileGeometry geometry;
  // For the cost figures of remarks (seconds = bytes / bandwidth).
  double hbmBytesPerSecond = 819e9;
  // Filled by the pass when set (the tool prints it).
  LayoutReport* report = nullptr;
  // Whether the report lists each copy and free op (LayoutReport::remarks);
  // false: the counts only, no string built per op.
  bool remarks = true;
};

class LayoutAssignmentPass : public Pass {
 public:
  explicit LayoutAssignmentPass(LayoutOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "layout-assignment"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  LayoutOptions options_;
};

// expand-layout-bitcasts: for consumers that store every array in the
// row-major order of its logical shape (the interpreter's values, llo-gen's
// HBM buffers), rewrites each bitcast that is not a row-major reshape into
// the logical ops it stands for: transpose into the operand's physical
// order, reshape, transpose out of the result's physical order.
class ExpandLayoutBitcastsPass : public Pass {
 public:
  std::string_view name() const override { return "expand-layout-bitcasts"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;
};

// Renders a report as remark lines (`remark: ...`) or JSON.
std::string renderReportText(const LayoutReport& report, double hbmBytesPerSecond);
std::string renderReportJson(const LayoutReport& report, double hbmBytesPerSecond);

void registerLayoutPasses(PassRegistry& registry);

}  // namespace tpu::passes::layout
