// Physical layouts in HBM: where each element of an array with a layout
// (minor_to_major, tiles) is stored, how many bytes the array takes with its
// tile padding, the byte conversions between a logical row-major array and
// its physical form (tpu-run's edges), and the HLO rewrite that makes a
// module's entry parameters and results physical for code generation
// (`physical-edges`: the relayout at the edge is ordinary transpose, pad,
// reshape and slice instructions, which every code generator already has).
//
// The physical form of an array is itself a row-major array: the logical
// dimensions in major-to-minor order, then each tile applied in turn to the
// minor dimensions of the previous form (XLA's tiling: T(8,128) turns
// [.., a, b] into [.., ceil(a/8), ceil(b/128), 8, 128] with padding; a
// second tile (2,1) turns that [.., 8, 128] into [.., 4, 128, 2, 1]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hlo/literal.h"
#include "hlo/module.h"
#include "hlo/shape.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

namespace tpu::passes::layout {

// The physical row-major dimensions of an array whose layout stores it
// differently from its logical row-major order (a non-default
// minor_to_major or tiles), or nullopt when the layout is the default one,
// when the shape has no layout, or when the layout is one this model does
// not store (dynamic shapes, sub-byte or resized elements E(n), `*` tiles).
std::optional<std::vector<int64_t>> physicalDims(const hlo::Shape& shape);

// Bytes the array takes in HBM in its physical form (logical bytes when it
// has none).
int64_t physicalByteSize(const hlo::Shape& shape);

// For each logical element (row-major order), the index of its element in
// the physical form. Empty when physicalDims(shape) is nullopt.
std::vector<int64_t> physicalIndexMap(const hlo::Shape& shape);

// The element stride of each logical dimension of `shape` in its physical
// form, when each dimension steps by one stride everywhere (every tile
// splitting it into digits whose strides nest, as T(8,128) does for the
// rows of a second-minor dimension whose 128-lane dimension fits one tile);
// nullopt otherwise (bf16's (2,1) pairs rows: row r + 1 is one element
// further, r + 2 a lane row) and when the shape has no physical form.
std::optional<std::vector<int64_t>> physicalStrides(const hlo::Shape& shape);

// A bitcast between an array with a tiled layout and the row-major array
// of its physical dimensions (either way round): the same bytes, tile
// padding included. Code generators read its array side through the layout.
bool isPhysicalBitcast(const hlo::Instruction& in);

// Rewrites every physical bitcast of `module` into the relayout it stands
// for (transpose, pad, reshape, slice: padding becomes zero), so consumers
// that keep arrays logical (the interpreter) can evaluate physical-edges'
// output. Returns whether anything changed.
bool expandPhysicalBitcasts(hlo::Module& module);

// Byte conversions between the logical row-major bytes of `shape` and its
// physical bytes (padding elements are zero). Identity copies when the
// shape has no physical form.
std::vector<uint8_t> logicalToPhysical(const hlo::Shape& shape, const uint8_t* logical, size_t size);
std::vector<uint8_t> physicalToLogical(const hlo::Shape& shape, const uint8_t* physical, size_t size);

// A literal (tuples leaf by leaf) converted between its logical form and
// the physical form `layoutShape` (same structure, with layouts) gives it:
// physical leaves are row-major arrays of physicalDims. Leaves without a
// physical form are returned as they are.
hlo::Literal convertEdgeLiteral(const hlo::Literal& literal, const hlo::Shape& layoutShape, bool toPhysical);

// Same physical arrangement: the same logical dimensions stored by the same
// minor_to_major, tiles and element size (the element type does not enter
// the index map, so an f32 array can sit in a bf16 array's arrangement).
bool sameArrangement(const hlo::Shape& a, const hlo::Shape& b);

// `key` (a layout shape) with element type `t`.
hlo::Shape withType(const hlo::Shape& key, hlo::ElementType t);

// The array leaves of `shape` in order (tuples flattened), as they are the
// entry arguments and results of a compiled module.
std::vector<hlo::Shape> arrayLeaves(const hlo::Shape& shape);

// What physical-edges did (or, with the same rules, would do) to a module.
struct PhysicalEdgeReport {
  int64_t arguments = 0, results = 0;  // array leaves stored physically
  int64_t paddingBytes = 0;            // physical minus logical bytes of those
  std::vector<std::string> names;      // the parameters and results relaid, in order
};

// Whether the entry parameter / result leaves of `module` are physical at
// the compiled edges: the entry layout (as configured, or as the entry's
// instructions give it) with a physical form, except leaves of a parameter
// or output that input_output_alias ties together. `pod`: a program for
// several chips keeps every edge logical (shards are cut logically).
std::vector<std::vector<bool>> physicalParameterLeaves(const hlo::Module& module, bool pod);
std::vector<bool> physicalResultLeaves(const hlo::Module& module, bool pod);

// Rewrites the entry computation so that each physical parameter leaf is
// taken in its physical form and converted to the logical array at once,
// and each physical result leaf is converted to its physical form last;
// everything in between keeps working on logical arrays.
class PhysicalEdgesPass : public Pass {
 public:
  explicit PhysicalEdgesPass(bool pod = false, PhysicalEdgeReport* report = nullptr)
      : pod_(pod), report_(report) {}
  std::string_view name() const override { return "physical-edges"; }
  bool run(hlo::Module& module, DiagnosticEngine& diags) override;

 private:
  bool pod_;
  PhysicalEdgeReport* report_;
};

}  // namespace tpu::passes::layout
