#include "spmd/leaves.h"

#include <fmt/format.h>

namespace tpu::spmd {

namespace {
void collect(const hlo::Shape& s, std::vector<const hlo::Shape*>& out) {
  if (s.isTuple()) {
    for (const hlo::Shape& e : s.tupleElements()) collect(e, out);
  } else {
    out.push_back(&s);
  }
}
int64_t rankOf(const hlo::Shape& s) { return s.isArray() ? s.rank() : 0; }
}  // namespace

std::vector<const hlo::Shape*> leafShapes(const hlo::Shape& shape) {
  std::vector<const hlo::Shape*> out;
  collect(shape, out);
  return out;
}

int64_t countLeaves(const hlo::Shape& shape) { return static_cast<int64_t>(leafShapes(shape).size()); }

std::pair<size_t, size_t> leafRange(const hlo::Shape& tuple, int64_t index) {
  size_t off = 0;
  for (int64_t k = 0; k < index; ++k) off += static_cast<size_t>(countLeaves(tuple.tupleElement(k)));
  return {off, static_cast<size_t>(countLeaves(tuple.tupleElement(index)))};
}

Leaves replicatedLeaves(const hlo::Shape& shape, int64_t numDevices) {
  Leaves out;
  for (const hlo::Shape* s : leafShapes(shape)) out.push_back(Tiling::replicated(rankOf(*s), numDevices));
  return out;
}

std::optional<Leaves> readSharding(const hlo::Instruction& inst, int64_t numDevices, DiagnosticEngine& diags) {
  const hlo::Sharding& s = *inst.sharding();
  std::vector<const hlo::Shape*> shapes = leafShapes(inst.shape());
  Leaves out;
  auto one = [&](const hlo::Sharding& e, const hlo::Shape& shape) {
    std::string why;
    std::optional<Tiling> t = Tiling::fromHlo(e, rankOf(shape), numDevices, &why);
    if (!t) {
      diags.error(inst.location(), fmt::format("'{}' has the sharding {} that cannot apply to {}: {}", inst.name(),
                                               e.toString(), shape.toString(false), why));
      return false;
    }
    out.push_back(std::move(*t));
    return true;
  };
  if (s.kind == hlo::Sharding::Kind::Tuple) {
    if (s.tupleElements.size() != shapes.size()) {
      diags.error(inst.location(), fmt::format("'{}' has a tuple sharding of {} elements for {} leaves", inst.name(),
                                               s.tupleElements.size(), shapes.size()));
      return std::nullopt;
    }
    for (size_t k = 0; k < shapes.size(); ++k)
      if (!one(s.tupleElements[k], *shapes[k])) return std::nullopt;
    return out;
  }
  for (const hlo::Shape* shape : shapes)
    if (!one(s, *shape)) return std::nullopt;
  return out;
}

hlo::Sharding toHloSharding(const hlo::Shape& shape, const Leaves& leaves) {
  if (!shape.isTuple() && leaves.size() == 1) return leaves[0].toHlo();
  std::vector<hlo::Sharding> elems;
  for (const Tiling& t : leaves) elems.push_back(t.toHlo());
  return hlo::Sharding::tuple(std::move(elems));
}

}  // namespace tpu::spmd
