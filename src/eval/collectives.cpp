// Collectives over simulated replicas x partitions (spec section 5.4).
#include "eval/collectives.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "eval/interp.h"
#include "eval/strided.h"

namespace tpu::eval {

using hlo::Instruction;
using hlo::Opcode;

CollectiveHub::CollectiveHub(int64_t devices)
    : devices_(devices),
      slots_(static_cast<size_t>(devices)),
      tags_(static_cast<size_t>(devices)),
      victim_(static_cast<size_t>(devices), false) {}

std::optional<std::vector<std::vector<Value>>> CollectiveHub::exchange(int device, const std::string& tag,
                                                                       std::vector<Value> mine,
                                                                       std::vector<std::string>& tags) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto abort = [&]() -> std::optional<std::vector<std::vector<Value>>> {
    aborted_ = true;
    victim_[static_cast<size_t>(device)] = true;
    cv_.notify_all();
    return std::nullopt;
  };
  if (aborted_ || finished_ > 0) return abort();
  slots_[static_cast<size_t>(device)] = std::move(mine);
  tags_[static_cast<size_t>(device)] = tag;
  if (++arrived_ == devices_) {
    snapshot_ = std::move(slots_);
    snapshotTags_ = tags_;
    slots_.assign(static_cast<size_t>(devices_), {});
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    tags = snapshotTags_;
    return snapshot_;
  }
  const uint64_t gen = generation_;
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) return abort();
  tags = snapshotTags_;
  return snapshot_;
}

void CollectiveHub::finish(int /*device*/, bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++finished_;
  // A failed device, or one done while others wait, means the waiting ones
  // can never complete their collective.
  if (!ok || arrived_ > 0) aborted_ = true;
  cv_.notify_all();
}

bool CollectiveHub::wasAborted(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return victim_[static_cast<size_t>(device)];
}

GroupMode groupMode(const Instruction& inst) {
  const Opcode op = inst.opcode();
  const auto& a = inst.attrs();
  const bool noGlobalField = op == Opcode::AllToAll || op == Opcode::CollectivePermute ||
                             op == Opcode::CollectivePermuteStart || op == Opcode::CollectiveBroadcast;
  if (!a.channelId) return GroupMode::CrossReplica;
  if (noGlobalField) return GroupMode::CrossPartition;
  return a.useGlobalDeviceIds ? GroupMode::Flattened : GroupMode::CrossReplicaAndPartition;
}

namespace {

Value concatAlong(const std::vector<Value>& parts, size_t d) {
  std::vector<int64_t> dims = parts[0].dims();
  dims[d] = 0;
  for (const Value& p : parts) dims[d] += p.dims()[d];
  Value out = Value::array(parts[0].type(), dims);
  std::vector<int64_t> os = rowMajorStrides(dims);
  int64_t pos = 0;
  for (const Value& p : parts) {
    if (p.count() > 0)
      stridedCopy(static_cast<size_t>(p.elementBytes()), p.dims(), p.raw(), 0, rowMajorStrides(p.dims()),
                  out.mutableRaw(), pos * os[d], os);
    pos += p.dims()[d];
  }
  return out;
}

Value sliceAlong(const Value& v, size_t d, int64_t start, int64_t size) {
  std::vector<int64_t> dims = v.dims();
  dims[d] = size;
  Value out = Value::array(v.type(), dims);
  std::vector<int64_t> vs = rowMajorStrides(v.dims());
  if (out.count() > 0)
    stridedCopy(static_cast<size_t>(v.elementBytes()), dims, v.raw(), start * vs[d], vs, out.mutableRaw(), 0,
                rowMajorStrides(dims));
  return out;
}

}  // namespace

std::optional<Value> Interp::evalCollective(const Instruction& inst, std::span<const Value* const> ops) {
  const Opcode op = inst.opcode();
  const auto& a = inst.attrs();
  const int64_t R = shared_.replicas, P = shared_.partitions;
  const int64_t me = replica_ * P + partition_;
  for (const Value* v : ops)
    if (!v->isArray()) {
      error(inst, "operands must be arrays");
      return std::nullopt;
    }
  if (!a.channelId && a.useGlobalDeviceIds) {
    error(inst, "use_global_device_ids=true needs a channel_id");
    return std::nullopt;
  }
  using Mode = GroupMode;
  const Mode mode = groupMode(inst);
  const int64_t domain = mode == Mode::CrossReplica ? R : mode == Mode::CrossPartition ? P
                                                                                       : mode == Mode::Flattened ? R * P : R;
  std::vector<std::vector<int64_t>> idGroups;
  if (a.replicaGroups && !a.replicaGroups->groups.empty()) idGroups = a.replicaGroups->groups;
  else {
    idGroups.emplace_back();
    for (int64_t i = 0; i < domain; ++i) idGroups.back().push_back(i);
  }
  for (const auto& g : idGroups)
    for (int64_t id : g)
      if (id < 0 || id >= domain) {
        error(inst, fmt::format("replica group id {} out of range: {} replica(s) x {} partition(s) simulated "
                                "(set them with --replicas/--partitions)",
                                id, R, P));
        return std::nullopt;
      }
  // My group as device indices, in group order.
  std::vector<int64_t> group;
  for (const auto& g : idGroups) {
    std::vector<int64_t> devs;
    switch (mode) {
      case Mode::CrossReplica:
        for (int64_t r : g) devs.push_back(r * P + partition_);
        break;
      case Mode::CrossPartition:
        for (int64_t q : g) devs.push_back(replica_ * P + q);
        break;
      case Mode::CrossReplicaAndPartition:
        for (int64_t r : g)
          for (int64_t q = 0; q < P; ++q) devs.push_back(r * P + q);
        break;
      case Mode::Flattened: devs = g; break;
    }
    if (std::find(devs.begin(), devs.end(), me) != devs.end()) {
      group = std::move(devs);
      break;
    }
  }
  const bool isPermute = op == Opcode::CollectivePermute || op == Opcode::CollectivePermuteStart;
  if (group.empty() && !isPermute) {
    error(inst, fmt::format("replica {}, partition {} is in no replica group", replica_, partition_));
    return std::nullopt;
  }
  const int64_t G = static_cast<int64_t>(group.size());
  const int64_t myPos = std::find(group.begin(), group.end(), me) - group.begin();

  std::vector<Value> mine;
  for (const Value* v : ops) mine.push_back(*v);
  std::vector<std::string> tags;
  const std::string tag = fmt::format("{} '{}'", hlo::opcodeName(op), inst.name());
  auto all = shared_.hub ? shared_.hub->exchange(static_cast<int>(me), tag, mine, tags)
                         : std::optional<std::vector<std::vector<Value>>>(std::vector<std::vector<Value>>{mine});
  if (!all) {
    error(inst, "stopped: another simulated device failed or finished without reaching this collective");
    return std::nullopt;
  }
  for (int64_t dev : group)
    if (!shared_.hub ? false : tags[static_cast<size_t>(dev)] != tag) {
      error(inst, fmt::format("device {} reached {} instead (devices diverged)", dev, tags[static_cast<size_t>(dev)]));
      return std::nullopt;
    }
  auto contrib = [&](int64_t dev, size_t k) -> const Value& { return (*all)[static_cast<size_t>(dev)][k]; };
  for (int64_t dev : group)
    if ((*all)[static_cast<size_t>(dev)].size() != ops.size()) {
      error(inst, "devices passed different operand counts");
      return std::nullopt;
    }
  auto pack = [&](std::vector<Value> results) -> Value {
    if (results.size() == 1 && !inst.shape().isTuple()) return results[0];
    return Value::tuple(std::move(results));
  };
  auto allReduce = [&](size_t k) -> std::optional<Value> {
    const hlo::Computation* comp = inst.toApply();
    if (!comp) {
      error(inst, "needs to_apply");
      return std::nullopt;
    }
    Value acc = contrib(group[0], k);
    for (int64_t j = 1; j < G; ++j) {
      const Value& next = contrib(group[static_cast<size_t>(j)], k);
      if (next.dims() != acc.dims()) {
        error(inst, "devices passed different shapes");
        return std::nullopt;
      }
      auto r = combine(inst, *comp, acc, next);
      if (!r) return std::nullopt;
      acc = std::move(*r);
    }
    return acc;
  };
  const size_t d = a.dimensions.empty() ? 0 : static_cast<size_t>(a.dimensions[0]);
  // Result shape of operand k (tuple element k for several operands).
  auto resultDims = [&](size_t k) -> const std::vector<int64_t>* {
    const hlo::Shape& s = inst.shape();
    const hlo::Shape* e = s.isTuple() ? (k < static_cast<size_t>(s.tupleSize()) ? &s.tupleElement(static_cast<int64_t>(k)) : nullptr) : &s;
    return e && e->isArray() ? &e->dimensions() : nullptr;
  };
  // Scalars riding along in torch-xla's tuple collectives (ordering tokens)
  // keep their shape: all-gather passes them through, reduce-scatter reduces.
  auto unchanged = [&](size_t k) {
    const auto* rd = resultDims(k);
    return ops[k]->rank() == 0 && rd && rd->empty();
  };
  auto checkDim = [&](const Value& v) {
    if (a.dimensions.empty() || d >= v.dims().size()) return error(inst, "dimension out of range");
    return true;
  };
  switch (op) {
    case Opcode::AllReduce:
    case Opcode::AllReduceStart: {
      std::vector<Value> res;
      for (size_t k = 0; k < ops.size(); ++k) {
        auto r = allReduce(k);
        if (!r) return std::nullopt;
        res.push_back(std::move(*r));
      }
      return pack(std::move(res));
    }
    case Opcode::AllGather:
    case Opcode::AllGatherStart: {
      std::vector<Value> res;
      for (size_t k = 0; k < ops.size(); ++k) {
        if (unchanged(k) && op == Opcode::AllGather) {
          res.push_back(*ops[k]);
          continue;
        }
        if (!checkDim(*ops[k])) return std::nullopt;
        std::vector<Value> parts;
        for (int64_t dev : group) parts.push_back(contrib(dev, k));
        for (const Value& p : parts)
          if (p.rank() != ops[k]->rank()) {
            error(inst, "devices passed different ranks");
            return std::nullopt;
          }
        res.push_back(concatAlong(parts, d));
      }
      if (op == Opcode::AllGather) return pack(std::move(res));
      if (ops.size() == 1) return Value::tuple({*ops[0], res[0]});
      return Value::tuple({Value::tuple(mine), Value::tuple(std::move(res))});
    }
    case Opcode::ReduceScatter: {
      std::vector<Value> res;
      for (size_t k = 0; k < ops.size(); ++k) {
        if (unchanged(k)) {
          auto r = allReduce(k);
          if (!r) return std::nullopt;
          res.push_back(std::move(*r));
          continue;
        }
        if (!checkDim(*ops[k])) return std::nullopt;
        if (ops[k]->dims()[d] % G != 0) {
          error(inst, fmt::format("dimension {} of size {} does not split into {} shards", d, ops[k]->dims()[d], G));
          return std::nullopt;
        }
        auto r = allReduce(k);
        if (!r) return std::nullopt;
        int64_t block = ops[k]->dims()[d] / G;
        res.push_back(sliceAlong(*r, d, myPos * block, block));
      }
      return pack(std::move(res));
    }
    case Opcode::AllToAll: {
      if (a.dimensions.empty()) {
        // Tuple form: operand i goes to member i.
        if (static_cast<int64_t>(ops.size()) != G) {
          error(inst, fmt::format("tuple form needs one operand per group member ({}), got {}", G, ops.size()));
          return std::nullopt;
        }
        std::vector<Value> res;
        for (int64_t j = 0; j < G; ++j) res.push_back(contrib(group[static_cast<size_t>(j)], static_cast<size_t>(myPos)));
        return pack(std::move(res));
      }
      std::vector<Value> res;
      for (size_t k = 0; k < ops.size(); ++k) {
        if (!checkDim(*ops[k])) return std::nullopt;
        if (ops[k]->dims()[d] % G != 0) {
          error(inst, fmt::format("dimension {} of size {} does not split into {} blocks", d, ops[k]->dims()[d], G));
          return std::nullopt;
        }
        int64_t block = ops[k]->dims()[d] / G;
        std::vector<Value> parts;
        for (int64_t j = 0; j < G; ++j)
          parts.push_back(sliceAlong(contrib(group[static_cast<size_t>(j)], k), d, myPos * block, block));
        res.push_back(concatAlong(parts, d));
      }
      return pack(std::move(res));
    }
    case Opcode::CollectivePermute:
    case Opcode::CollectivePermuteStart: {
      if (ops.size() != 1) {
        error(inst, "only the single-operand form is supported");
        return std::nullopt;
      }
      const int64_t myId = mode == Mode::CrossReplica ? replica_ : mode == Mode::CrossPartition ? partition_ : me;
      Value result = Value::zeros(ops[0]->type(), ops[0]->dims());
      for (const auto& [src, dst] : a.sourceTargetPairs) {
        if (src < 0 || src >= domain || dst < 0 || dst >= domain) {
          error(inst, fmt::format("source_target_pairs entry {{{},{}}} out of range", src, dst));
          return std::nullopt;
        }
        if (dst != myId) continue;
        int64_t dev = mode == Mode::CrossReplica ? src * P + partition_
                                                 : mode == Mode::CrossPartition ? replica_ * P + src : src;
        result = contrib(dev, 0);
      }
      if (op == Opcode::CollectivePermute) return result;
      std::vector<Value> e{*ops[0], result};
      const hlo::Shape& s = inst.shape();
      for (int64_t i = 2; s.isTuple() && i < s.tupleSize(); ++i) {
        const hlo::Shape& es = s.tupleElement(i);
        e.push_back(es.isArray() ? Value::zeros(es.elementType(), es.dimensions()) : Value::token());
      }
      return Value::tuple(std::move(e));
    }
    case Opcode::CollectiveBroadcast: {
      std::vector<Value> res;
      for (size_t k = 0; k < ops.size(); ++k) res.push_back(contrib(group[0], k));
      return pack(std::move(res));
    }
    default: break;
  }
  error(inst, "collective is not supported by the interpreter");
  return std::nullopt;
}

}  // namespace tpu::eval
