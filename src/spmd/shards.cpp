#include "spmd/shards.h"

#include <cstring>
#include <fmt/format.h>

#include "hlo/text/parser.h"
#include "spmd/partitioner.h"

namespace tpu::spmd {

namespace {

// Copies the box `size` at `srcOff` of `src` to `dstOff` of `dst` (row-major).
void copyBox(const hlo::Literal& src, const std::vector<int64_t>& srcOff, hlo::Literal& dst,
             const std::vector<int64_t>& dstOff, const std::vector<int64_t>& size) {
  int64_t count = 1;
  for (int64_t s : size) count *= s;
  if (count == 0) return;
  size_t rank = size.size();
  size_t bytes = src.elementCount() ? src.data().size() / static_cast<size_t>(src.elementCount()) : 0;
  std::vector<int64_t> idx(rank, 0), a(rank), b(rank);
  for (int64_t k = 0; k < count; ++k) {
    for (size_t j = 0; j < rank; ++j) {
      a[j] = srcOff[j] + idx[j];
      b[j] = dstOff[j] + idx[j];
    }
    std::memcpy(dst.rawElement(dst.linearIndex(b)), src.rawElement(src.linearIndex(a)), bytes);
    for (size_t j = rank; j-- > 0;) {
      if (++idx[j] < size[j]) break;
      idx[j] = 0;
    }
  }
}

hlo::Literal shardLeaf(const hlo::Literal& global, const Tiling& t, int64_t device) {
  const std::vector<int64_t>& g = global.shape().dimensions();
  hlo::Literal out(t.shardShape(global.shape()));
  copyBox(global, t.shardOffsets(device, g), out, std::vector<int64_t>(g.size(), 0), t.validShardDims(device, g));
  return out;
}

}  // namespace

hlo::Literal shardOf(const hlo::Literal& global, const Leaves& leaves, int64_t device) {
  if (!global.isTuple()) return global.shape().isArray() ? shardLeaf(global, leaves[0], device) : global;
  std::vector<hlo::Literal> elems;
  size_t off = 0;
  for (const hlo::Literal& e : global.tupleElements()) {
    size_t cnt = static_cast<size_t>(countLeaves(e.shape()));
    elems.push_back(shardOf(e, Leaves(leaves.begin() + static_cast<int64_t>(off), leaves.begin() + static_cast<int64_t>(off + cnt)), device));
    off += cnt;
  }
  return hlo::Literal::tuple(std::move(elems));
}

hlo::Literal joinShards(const std::vector<hlo::Literal>& perDevice, const hlo::Shape& global, const Leaves& leaves) {
  if (global.isTuple()) {
    std::vector<hlo::Literal> elems;
    size_t off = 0;
    for (int64_t e = 0; e < global.tupleSize(); ++e) {
      size_t cnt = static_cast<size_t>(countLeaves(global.tupleElement(e)));
      std::vector<hlo::Literal> parts;
      for (const hlo::Literal& l : perDevice) parts.push_back(l.tupleElements()[static_cast<size_t>(e)]);
      elems.push_back(joinShards(parts, global.tupleElement(e),
                                 Leaves(leaves.begin() + static_cast<int64_t>(off), leaves.begin() + static_cast<int64_t>(off + cnt))));
      off += cnt;
    }
    return hlo::Literal::tuple(std::move(elems));
  }
  if (!global.isArray()) return perDevice[0];
  const Tiling& t = leaves[0];
  hlo::Literal out(global);
  const std::vector<int64_t>& g = global.dimensions();
  std::vector<bool> done(static_cast<size_t>(t.numTiles()), false);
  for (int64_t d = 0; d < static_cast<int64_t>(perDevice.size()) && d < t.numDevices(); ++d) {
    std::vector<int64_t> idx = t.tileIndex(d);
    int64_t linear = 0;
    for (int64_t j = 0; j < t.rank(); ++j) linear = linear * t.tile(j) + idx[static_cast<size_t>(j)];
    if (done[static_cast<size_t>(linear)]) continue;
    done[static_cast<size_t>(linear)] = true;
    copyBox(perDevice[static_cast<size_t>(d)], std::vector<int64_t>(g.size(), 0), out, t.shardOffsets(d, g),
            t.validShardDims(d, g));
  }
  return out;
}

}  // namespace tpu::spmd

namespace tpu::spmd {

namespace {
std::optional<hlo::Shape> globalShapeOf(const hlo::Instruction& inst, DiagnosticEngine& diags, bool* failed) {
  for (const hlo::FrontendAttribute& a : inst.common().frontendAttributes) {
    if (a.key != kGlobalShapeAttribute) continue;
    DiagnosticEngine local;
    std::optional<hlo::Shape> s = hlo::parseShapeText(SourceFile("global shape", a.value), local);
    if (!s || !inst.sharding()) {
      diags.error(inst.location(), fmt::format("'{}' has a bad {} \"{}\"", inst.name(), kGlobalShapeAttribute, a.value));
      *failed = true;
      return std::nullopt;
    }
    return s;
  }
  return std::nullopt;
}
}  // namespace

std::optional<GlobalEdges> globalEdges(const hlo::Module& module, int64_t numPartitions, DiagnosticEngine& diags,
                                       bool* failed) {
  *failed = false;
  const hlo::Computation* entry = module.entry();
  if (!entry || !entry->root()) return std::nullopt;
  GlobalEdges edges;
  auto edge = [&](const hlo::Instruction& inst, hlo::Shape* shape, Leaves* leaves) {
    std::optional<hlo::Shape> g = globalShapeOf(inst, diags, failed);
    if (!g) return false;
    std::optional<Leaves> l = readSharding(inst, numPartitions, diags);
    if (!l || countLeaves(*g) != static_cast<int64_t>(l->size())) {
      if (l) diags.error(inst.location(), fmt::format("'{}' has a sharding that does not fit its global shape", inst.name()));
      *failed = true;
      return false;
    }
    *shape = *g;
    *leaves = std::move(*l);
    return true;
  };
  if (!edge(*entry->root(), &edges.result, &edges.resultSharding)) return std::nullopt;
  for (int64_t k = 0; k < entry->parameterCount(); ++k) {
    edges.parameters.emplace_back();
    edges.parameterShardings.emplace_back();
    if (!entry->parameter(k) || !edge(*entry->parameter(k), &edges.parameters.back(), &edges.parameterShardings.back()))
      return std::nullopt;
  }
  return edges;
}

std::vector<std::vector<hlo::Literal>> argumentShards(const GlobalEdges& edges,
                                                      const std::vector<hlo::Literal>& arguments, int64_t replicas,
                                                      int64_t partitions) {
  std::vector<std::vector<hlo::Literal>> perDevice(static_cast<size_t>(replicas * partitions));
  for (int64_t d = 0; d < replicas * partitions; ++d)
    for (size_t k = 0; k < arguments.size(); ++k)
      perDevice[static_cast<size_t>(d)].push_back(shardOf(arguments[k], edges.parameterShardings[k], d % partitions));
  return perDevice;
}

}  // namespace tpu::spmd
