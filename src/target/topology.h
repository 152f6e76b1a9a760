// A slice of a pod: chips on a 2D or 3D torus joined by ICI links. The
// target says which shapes exist (ici.max_shape, ici.wraparound_multiple);
// tpu-run --topology=2x4 picks one, or defaultTopology() picks the most
// square shape for a chip count.
//
// Chip ids are row-major over the axes (the last axis varies fastest), so
// chip id = replica * num_partitions + partition is also a position. Every
// chip has two directed links per axis of length > 1 (plus and minus);
// routes are dimension-ordered (axis 0 first), each axis the short way
// round (ties go the plus way).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/diagnostics.h"
#include "target/target.h"

namespace tpu::target {

class Topology {
 public:
  Topology() = default;
  Topology(std::vector<int> dims, std::vector<bool> wrap);

  int axes() const { return static_cast<int>(dims_.size()); }
  int dim(int axis) const { return dims_[axis]; }
  bool wraps(int axis) const { return wrap_[axis]; }
  int chips() const { return chips_; }
  std::vector<int> coords(int chip) const;
  int chipAt(const std::vector<int>& coords) const;
  // Neighbour one step along `axis` (dir +1 or -1), or -1 at an open edge.
  int neighbor(int chip, int axis, int dir) const;

  // Directed links, numbered chip * 2 * axes + axis * 2 + (dir < 0).
  int linkCount() const { return chips_ * 2 * axes(); }
  static int linkId(int chip, int axis, int dir, int axes) { return chip * 2 * axes + axis * 2 + (dir < 0 ? 1 : 0); }
  int linkSource(int link) const { return link / (2 * axes()); }
  int linkTarget(int link) const;
  std::string linkName(int link) const;  // "chip 1 (0,1) +y -> chip 2 (0,2)"

  // Links a message from `from` to `to` crosses, in order (empty if equal).
  std::vector<int> route(int from, int to) const;
  int hops(int from, int to) const { return static_cast<int>(route(from, to).size()); }

  std::string toString() const;  // "2x4"
  std::string describe() const;  // "2x4 torus (wraps: none)"

 private:
  std::vector<int> dims_;
  std::vector<bool> wrap_;
  int chips_ = 1;
};

// Parses "2x4" / "2x2x2" for `target` and checks it against the target's
// slices (axis count, max_shape, whole cubes) and, if `chips` > 0, the chip
// count the program needs.
std::optional<Topology> parseTopology(std::string_view text, const TargetDesc& target, int chips,
                                      DiagnosticEngine& diags);
// The most square slice of `chips` chips the target offers; an error if
// there is none (too many chips, or a count no slice shape has).
std::optional<Topology> defaultTopology(const TargetDesc& target, int chips, DiagnosticEngine& diags);

}  // namespace tpu::target
