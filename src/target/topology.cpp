#include "target/topology.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace tpu::target {

namespace {

constexpr char kAxisNames[] = {'x', 'y', 'z'};

// A shape the target offers: each axis within max_shape, and an axis longer
// than the wraparound unit made of whole units (v4's cubes). Returns the
// reason it is not, or "".
std::string shapeProblem(const std::vector<int>& dims, const TargetDesc& t) {
  const IciDesc& ici = t.ici;
  if (ici.maxShape.empty()) {
    return fmt::format("target '{}' describes no ICI (ici.max_shape), so it runs one chip", t.name);
  }
  if (static_cast<int>(dims.size()) != ici.axes())
    return fmt::format("target '{}' has a {} ({} axes, like {}), not {} axes", t.name, ici.topology, ici.axes(),
                       ici.axes() == 3 ? "2x2x2" : ici.axes() == 2 ? "2x4" : "8", dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] < 1 || dims[a] > ici.maxShape[a])
      return fmt::format("axis {} has {} chips; target '{}' allows 1 to {}", a, dims[a], t.name, ici.maxShape[a]);
    if (ici.wrapMultiple > 0 && dims[a] > ici.wrapMultiple && dims[a] % ici.wrapMultiple != 0)
      return fmt::format("axis {} has {} chips; target '{}' builds axes longer than {} from whole units of {}", a,
                         dims[a], t.name, ici.wrapMultiple, ici.wrapMultiple);
  }
  return "";
}

Topology makeTopology(const std::vector<int>& dims, const TargetDesc& t) {
  std::vector<bool> wrap;
  for (int d : dims) wrap.push_back(t.ici.wrapMultiple > 0 && d > 2 && d % t.ici.wrapMultiple == 0);
  return Topology(dims, std::move(wrap));
}

void enumerate(int chips, size_t axis, std::vector<int>& dims, const TargetDesc& t,
               std::vector<std::vector<int>>& out) {
  if (axis + 1 == dims.size()) {
    dims[axis] = chips;
    if (shapeProblem(dims, t).empty()) out.push_back(dims);
    return;
  }
  for (int d = 1; d <= chips; ++d) {
    if (chips % d) continue;
    dims[axis] = d;
    enumerate(chips / d, axis + 1, dims, t, out);
  }
}

}  // namespace

Topology::Topology(std::vector<int> dims, std::vector<bool> wrap) : dims_(std::move(dims)), wrap_(std::move(wrap)) {
  chips_ = 1;
  for (int d : dims_) chips_ *= d;
}

std::vector<int> Topology::coords(int chip) const {
  std::vector<int> c(dims_.size());
  for (size_t a = dims_.size(); a-- > 0;) {
    c[a] = chip % dims_[a];
    chip /= dims_[a];
  }
  return c;
}

int Topology::chipAt(const std::vector<int>& c) const {
  int chip = 0;
  for (size_t a = 0; a < dims_.size(); ++a) chip = chip * dims_[a] + c[a];
  return chip;
}

int Topology::neighbor(int chip, int axis, int dir) const {
  std::vector<int> c = coords(chip);
  int n = dims_[axis];
  int v = c[axis] + dir;
  if (v < 0 || v >= n) {
    if (!wrap_[axis] || n == 1) return -1;
    v = (v + n) % n;
  }
  c[axis] = v;
  return chipAt(c);
}

int Topology::linkTarget(int link) const {
  int per = 2 * axes();
  int axis = (link % per) / 2;
  return neighbor(link / per, axis, link % 2 ? -1 : 1);
}

std::string Topology::linkName(int link) const {
  auto coordText = [&](int chip) {
    std::string s;
    for (int v : coords(chip)) s += fmt::format("{}{}", s.empty() ? "" : ",", v);
    return fmt::format("chip {} ({})", chip, s);
  };
  int per = 2 * axes();
  int axis = (link % per) / 2;
  return fmt::format("{} {}{} -> {}", coordText(linkSource(link)), link % 2 ? '-' : '+', kAxisNames[axis % 3],
                     coordText(linkTarget(link)));
}

std::vector<int> Topology::route(int from, int to) const {
  std::vector<int> links;
  std::vector<int> at = coords(from), want = coords(to);
  for (int a = 0; a < axes(); ++a) {
    int n = dims_[a];
    int forward = ((want[a] - at[a]) % n + n) % n;  // steps going +
    int dir = 1, steps = forward;
    if (wrap_[a]) {
      if (n - forward < forward) dir = -1, steps = n - forward;
    } else if (want[a] < at[a]) {
      dir = -1, steps = at[a] - want[a];
    }
    for (int s = 0; s < steps; ++s) {
      int chip = chipAt(at);
      links.push_back(linkId(chip, a, dir, axes()));
      at[a] = ((at[a] + dir) % n + n) % n;
    }
  }
  return links;
}

std::string Topology::toString() const {
  std::string s;
  for (int d : dims_) s += fmt::format("{}{}", s.empty() ? "" : "x", d);
  return s.empty() ? "1" : s;
}

std::string Topology::describe() const {
  std::string w;
  for (int a = 0; a < axes(); ++a)
    if (wrap_[a]) w += fmt::format("{}{}", w.empty() ? "" : ",", kAxisNames[a % 3]);
  return fmt::format("{} torus (wraparound: {})", toString(), w.empty() ? "none" : w);
}

std::optional<Topology> parseTopology(std::string_view text, const TargetDesc& target, int chips,
                                      DiagnosticEngine& diags) {
  std::vector<int> dims;
  std::string_view rest = text;
  while (true) {
    int v = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec != std::errc() || v < 1 || v > 4096) {
      diags.error(fmt::format("--topology={}: expected axis lengths joined by 'x', like 2x4 or 2x2x2", text));
      return std::nullopt;
    }
    dims.push_back(v);
    rest.remove_prefix(static_cast<size_t>(ptr - rest.data()));
    if (rest.empty()) break;
    if (rest.front() != 'x' || dims.size() == 3) {
      diags.error(fmt::format("--topology={}: expected axis lengths joined by 'x', like 2x4 or 2x2x2", text));
      return std::nullopt;
    }
    rest.remove_prefix(1);
  }
  if (std::string problem = shapeProblem(dims, target); !problem.empty()) {
    diags.error(fmt::format("--topology={}: {}", text, problem));
    return std::nullopt;
  }
  Topology topo = makeTopology(dims, target);
  if (chips > 0 && topo.chips() != chips) {
    diags.error(fmt::format("--topology={} has {} chips, but the program runs on {} (replica_count x num_partitions)",
                            text, topo.chips(), chips));
    return std::nullopt;
  }
  return topo;
}

std::optional<Topology> defaultTopology(const TargetDesc& target, int chips, DiagnosticEngine& diags) {
  if (chips == 1 && target.ici.maxShape.empty()) return Topology({1}, {false});
  if (target.ici.maxShape.empty()) {
    diags.error(fmt::format("{} chips: {}", chips, shapeProblem({chips}, target)));
    return std::nullopt;
  }
  std::vector<std::vector<int>> shapes;
  std::vector<int> dims(target.ici.axes());
  if (chips >= 1) enumerate(chips, 0, dims, target, shapes);
  if (shapes.empty()) {
    int most = 1;
    for (int d : target.ici.maxShape) most *= d;
    diags.error(fmt::format("no slice of target '{}' has {} chips (at most {}, shaped within {})", target.name, chips,
                            most, Topology(target.ici.maxShape, {}).toString()));
    return std::nullopt;
  }
  // Most square: the smallest longest axis, then the smallest axes first (2x4 before 4x2).
  auto longest = [](const std::vector<int>& s) { return *std::max_element(s.begin(), s.end()); };
  std::stable_sort(shapes.begin(), shapes.end(), [&](const auto& a, const auto& b) {
    if (longest(a) != longest(b)) return longest(a) < longest(b);
    return a < b;
  });
  return makeTopology(shapes.front(), target);
}

}  // namespace tpu::target
