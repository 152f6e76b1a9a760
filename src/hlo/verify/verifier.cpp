// The module verifier. Pass 1 indexes every instruction and computation of
// the module (so no pointer is dereferenced before it is known to belong to
// the module) and records who calls whom; pass 2 checks each computation and
// instruction in text order; then the call graph and the entry are checked.
#include "hlo/verify/verifier.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "hlo/verify/signature_cache.h"

namespace tpu::hlo {

namespace {

std::string str(const Shape& s) { return s.toString(false); }

std::string ints(const std::vector<int64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "}";
}

struct InstInfo {
  const Computation* computation = nullptr;
  uint32_t index = 0;    // position in its computation
  bool shapeOk = false;  // structurally valid shape (safe to run inference on)
  uint32_t users = 0;    // distinct users (tracked for async/fusion checks only)
  const Instruction* lastUser = nullptr;
  const Instruction* firstUser = nullptr;
};

size_t mixPointer(const void* p) {
  uint64_t x = reinterpret_cast<uintptr_t>(p);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<size_t>(x);
}

// Open-addressing tables sized once per module: no allocation per entry.
class InstTable {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap * 3 < 4 * n + 4) cap <<= 1;  // load <= 3/4: half the memory of <= 1/2
    keys_.assign(cap, nullptr);
    vals_.assign(cap, InstInfo{});
    mask_ = cap - 1;
  }
  InstInfo* find(const Instruction* k) {
    if (!k || keys_.empty()) return nullptr;
    for (size_t h = mixPointer(k) & mask_;; h = (h + 1) & mask_) {
      if (keys_[h] == k) return &vals_[h];
      if (!keys_[h]) return nullptr;
    }
  }
  const InstInfo* find(const Instruction* k) const { return const_cast<InstTable*>(this)->find(k); }
  InstInfo& insert(const Instruction* k) {
    for (size_t h = mixPointer(k) & mask_;; h = (h + 1) & mask_) {
      if (keys_[h] == k) return vals_[h];
      if (!keys_[h]) {
        keys_[h] = k;
        return vals_[h];
      }
    }
  }

 private:
  std::vector<const Instruction*> keys_;
  std::vector<InstInfo> vals_;
  size_t mask_ = 0;
};

// Instructions by name; insert() returns the slot holding the instruction
// that first used the name (the new one if the name is new).
class NameTable {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap * 3 < 4 * n + 4) cap <<= 1;  // load <= 3/4: half the memory of <= 1/2
    slots_.assign(cap, nullptr);
    mask_ = cap - 1;
  }
  const Instruction*& insert(const Instruction* inst, bool& inserted) {
    const std::string& name = inst->name();
    for (size_t h = std::hash<std::string_view>()(name) & mask_;; h = (h + 1) & mask_) {
      const Instruction*& slot = slots_[h];
      if (!slot) {
        slot = inst;
        inserted = true;
        return slot;
      }
      if (slot->name() == name) {
        inserted = false;
        return slot;
      }
    }
  }

 private:
  std::vector<const Instruction*> slots_;
  size_t mask_ = 0;
};

struct CallerInfo {
  int fusion = 0, asyncStart = 0, asyncOther = 0, other = 0;
  const Instruction* firstFusion = nullptr;
  const Instruction* secondFusion = nullptr;
  const Instruction* firstAsyncStart = nullptr;
  const Instruction* firstOther = nullptr;
};

// How many computations an opcode calls: [min, max] (max < 0: any).
std::pair<int, int> calledRange(Opcode o) {
  switch (o) {
    case Opcode::Fusion:
    case Opcode::Call:
    case Opcode::Map:
    case Opcode::Reduce:
    case Opcode::ReduceWindow:
    case Opcode::Sort:
    case Opcode::Scatter:
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::ReduceScatter:
    case Opcode::AsyncStart: return {1, 1};
    case Opcode::While:
    case Opcode::SelectAndScatter: return {2, 2};
    case Opcode::Conditional: return {1, -1};
    case Opcode::AsyncUpdate:
    case Opcode::AsyncDone: return {0, 1};
    case Opcode::CustomCall:
    case Opcode::Scan:
    case Opcode::TopK:
    case Opcode::CollectiveReduce:
    case Opcode::Shuffle: return {0, -1};
    default: return {0, 0};
  }
}

// XLA's CheckMixedPrecisionOperands allow-list: ops that may see floating
// point operands of different precisions.
bool mayMixPrecision(Opcode o) {
  switch (o) {
    case Opcode::Call:
    case Opcode::Conditional:
    case Opcode::Constant:
    case Opcode::Convolution:
    case Opcode::Dot:
    case Opcode::RaggedDot:
    case Opcode::ScaledDot:
    case Opcode::AllReduce:
    case Opcode::AllReduceStart:
    case Opcode::AllReduceDone:
    case Opcode::AllGather:
    case Opcode::AllGatherStart:
    case Opcode::AllGatherDone:
    case Opcode::AsyncDone:
    case Opcode::AsyncUpdate:
    case Opcode::AsyncStart:
    case Opcode::CopyDone:
    case Opcode::CopyStart:
    case Opcode::CustomCall:
    case Opcode::Domain:
    case Opcode::Fusion:
    case Opcode::GetTupleElement:
    case Opcode::OptimizationBarrier:
    case Opcode::Infeed:
    case Opcode::Outfeed:
    case Opcode::Parameter:
    case Opcode::Recv:
    case Opcode::RecvDone:
    case Opcode::ReducePrecision:
    case Opcode::ReduceWindow:
    case Opcode::Send:
    case Opcode::SendDone:
    case Opcode::Sort:
    case Opcode::Tuple:
    case Opcode::While:
    case Opcode::Scan:
    case Opcode::Shuffle:
    case Opcode::CollectiveReduce:
    case Opcode::StochasticConvert: return true;
    default: return false;
  }
}

// Opcodes whose users are checked (single user of the matching kind).
bool tracksUsers(Opcode o) {
  switch (o) {
    case Opcode::AsyncStart:
    case Opcode::AsyncUpdate:
    case Opcode::AllReduceStart:
    case Opcode::AllGatherStart:
    case Opcode::CopyStart:
    case Opcode::CollectivePermuteStart:
    case Opcode::Send:
    case Opcode::Recv: return true;
    default: return false;
  }
}

bool structurallyValid(const Shape& s, bool allowUnbounded, int depth = 0) {
  if (depth > 1000) return false;
  switch (s.kind()) {
    case Shape::Kind::Invalid: return false;
    case Shape::Kind::Token:
    case Shape::Kind::Opaque: return true;
    case Shape::Kind::Tuple:
      for (const Shape& e : s.tupleElements())
        if (!structurallyValid(e, allowUnbounded, depth + 1)) return false;
      return true;
    case Shape::Kind::Array:
      if (!isArrayElementType(s.elementType())) return false;
      if (!s.dynamicDimensions().empty() && static_cast<int64_t>(s.dynamicDimensions().size()) != s.rank())
        return false;
      for (int64_t i = 0; i < s.rank(); ++i) {
        int64_t d = s.dimension(i);
        if (d == kUnboundedSize) {
          if (!allowUnbounded) return false;
        } else if (d < 0) {
          return false;
        }
      }
      return true;
  }
  return false;
}

class ModuleVerifier {
 public:
  ModuleVerifier(const Module& m, DiagnosticEngine& d, const VerifyOptions& o)
      : module_(m), diags_(d), opts_(o), start_(d.errorCount()) {}

  bool run();

 private:
  bool full() const {
    return diags_.errorLimitReached() || (opts_.maxErrors && diags_.errorCount() - start_ >= opts_.maxErrors);
  }
  template <typename... Args>
  void error(SourceLocation loc, fmt::format_string<Args...> f, Args&&... args) {
    if (full()) return;
    diags_.error(loc, fmt::format(f, std::forward<Args>(args)...));
  }
  // Where module-level (header) problems are reported: the attribute's text
  // when found, else the `HloModule` line, else the entry.
  SourceLocation headerLocation(std::string_view attribute) const;

  void indexModule();
  void checkComputation(const Computation& c);
  void checkParameters(const Computation& c);
  void checkInstruction(const Computation& c, const Instruction& inst, uint32_t index);
  void checkShape(const Instruction& inst, const Shape& s, const char* what);
  void checkLayouts(const Instruction& inst, const Shape& s, const char* what, int depth = 0);
  void checkSharding(const Instruction& inst);
  void checkOneSharding(const Instruction& inst, const Sharding& s, const Shape& shape);
  void checkMixedPrecision(const Instruction& inst);
  void checkUsers(const Computation& c);
  void checkFusionComputation(const Computation& c, const Instruction& fusion);
  void checkCallGraph();
  void checkEntry();
  void checkAliasing(const verify_detail::Signature& sig);
  bool known(const Instruction* i) const { return info_.find(i) != nullptr; }
  bool known(const Computation* c) const { return c && computations_.count(c); }
  std::string_view threadOf(const Computation* c) const { return c->executionThread(); }

  const Module& module_;
  DiagnosticEngine& diags_;
  const VerifyOptions& opts_;
  size_t start_;
  const SourceFile* file_ = nullptr;
  std::unordered_set<const Computation*> computations_;
  InstTable info_;
  NameTable names_;
  std::unordered_map<const Computation*, CallerInfo> callers_;
  verify_detail::SignatureCache sigs_;
  int64_t deviceLimit_ = 0;  // sharding device ids must be below this (0: unchecked)
};

SourceLocation ModuleVerifier::headerLocation(std::string_view attribute) const {
  if (file_) {
    // The header line starts with `HloModule` (comments may mention the
    // attribute too, so only the header line is searched).
    std::string_view text = file_->contents();
    size_t header = text.substr(0, 9) == "HloModule" ? 0 : text.find("\nHloModule");
    if (header != std::string_view::npos) {
      if (text[header] == '\n') ++header;
      std::string_view line = text.substr(header, text.find('\n', header) - header);
      size_t at = attribute.empty() ? std::string_view::npos : line.find(attribute);
      return {file_, header + (at == std::string_view::npos ? 0 : at)};
    }
  }
  if (module_.entry() && known(module_.entry())) return module_.entry()->location();
  return {file_, 0};
}

// ---------------------------------------------------------------- pass 1

void ModuleVerifier::indexModule() {
  size_t total = 0;
  for (const auto& c : module_.computations()) {
    if (!c) continue;
    computations_.insert(c.get());
    total += c->instructions().size();
    if (!file_ && c->location().valid()) file_ = c->location().file;
  }
  info_.reserve(total);
  names_.reserve(total);
  for (const auto& c : module_.computations()) {
    if (!c) continue;
    uint32_t index = 0;
    for (const auto& inst : c->instructions()) {
      if (!inst) {
        ++index;
        continue;
      }
      InstInfo& ii = info_.insert(inst.get());
      ii.computation = c.get();
      ii.index = index++;
      ii.shapeOk = structurallyValid(inst->shape(), opts_.allowUnboundedDynamism);
      if (!file_ && inst->location().valid()) file_ = inst->location().file;
    }
  }
  for (const auto& c : module_.computations()) {
    if (!c) continue;
    for (const auto& inst : c->instructions()) {
      if (!inst) continue;
      Opcode o = inst->opcode();
      for (const Computation* callee : inst->calledComputations()) {
        if (!known(callee)) continue;
        CallerInfo& ci = callers_[callee];
        if (o == Opcode::Fusion) {
          if (!ci.firstFusion)
            ci.firstFusion = inst.get();
          else if (!ci.secondFusion)
            ci.secondFusion = inst.get();
          ++ci.fusion;
        } else if (o == Opcode::AsyncStart) {
          if (!ci.firstAsyncStart) ci.firstAsyncStart = inst.get();
          ++ci.asyncStart;
        } else if (o == Opcode::AsyncUpdate || o == Opcode::AsyncDone) {
          ++ci.asyncOther;
        } else {
          if (!ci.firstOther) ci.firstOther = inst.get();
          ++ci.other;
        }
      }
    }
  }
  const ModuleConfig& cfg = module_.config();
  __int128 devices = static_cast<__int128>(cfg.numPartitions) * cfg.replicaCount;
  if (opts_.verifyShardingDeviceNumbers && devices > 1 && devices < (static_cast<__int128>(1) << 62))
    deviceLimit_ = static_cast<int64_t>(devices);
}

// ---------------------------------------------------------------- pass 2

void ModuleVerifier::checkParameters(const Computation& c) {
  const verify_detail::Signature& sig = sigs_.get(&c);
  if (sig.dense) return;
  size_t count = sig.params.size();
  std::vector<const Instruction*> slots(count, nullptr);
  bool reported = false;
  for (const auto& inst : c.instructions()) {
    if (!inst || inst->opcode() != Opcode::Parameter) continue;
    int64_t n = inst->attrs().parameterNumber;
    if (n < 0 || static_cast<size_t>(n) >= count) {
      error(inst->location(), "parameter number {} of '{}' is out of range: computation '{}' has {} parameter{}", n,
            inst->name(), c.name(), count, count == 1 ? "" : "s");
      reported = true;
    } else if (const Instruction* prev = slots[static_cast<size_t>(n)]) {
      error(inst->location(), "parameter number {} is used by both '{}' and '{}' in computation '{}'", n,
            prev->name(), inst->name(), c.name());
      reported = true;
    } else {
      slots[static_cast<size_t>(n)] = inst.get();
    }
  }
  if (!reported)
    for (size_t i = 0; i < count; ++i)
      if (!slots[i]) {
        error(c.location(), "computation '{}' has no parameter number {}", c.name(), i);
        break;
      }
}

void ModuleVerifier::checkComputation(const Computation& c) {
  if (c.parent() != &module_) error(c.location(), "computation '{}' does not belong to this module", c.name());
  if (c.instructions().empty()) {
    error(c.location(), "computation '{}' has no instructions", c.name());
    return;
  }
  const Instruction* root = c.root();
  if (!root) {
    error(c.location(), "computation '{}' has no root instruction", c.name());
  } else if (!known(root) || info_.find(root)->computation != &c) {
    error(c.location(), "the root of computation '{}' is not one of its instructions", c.name());
  }
  checkParameters(c);
  uint32_t index = 0;
  for (const auto& inst : c.instructions()) {
    if (full()) return;
    if (!inst) {
      error(c.location(), "computation '{}' contains a null instruction", c.name());
      ++index;
      continue;
    }
    checkInstruction(c, *inst, index++);
  }
  checkUsers(c);
  auto it = callers_.find(&c);
  if (it != callers_.end() && it->second.fusion > 0 && it->second.firstFusion)
    checkFusionComputation(c, *it->second.firstFusion);
}

void ModuleVerifier::checkShape(const Instruction& inst, const Shape& s, const char* what) {
  if (&s == &inst.shape() && info_.find(&inst)->shapeOk) return;
  if (structurallyValid(s, opts_.allowUnboundedDynamism)) return;
  if (!structurallyValid(s, true))
    error(inst.location(), "'{}' has an invalid {}shape {}", inst.name(), what, str(s));
  else
    error(inst.location(), "'{}' has unbounded dynamic dimensions in {}shape {}, which are not allowed",
          inst.name(), what, str(s));
}

void ModuleVerifier::checkLayouts(const Instruction& inst, const Shape& s, const char* what, int depth) {
  if (depth > 1000) return;
  if (s.isTuple()) {
    for (const Shape& e : s.tupleElements()) checkLayouts(inst, e, what, depth + 1);
    return;
  }
  if (!s.hasLayout()) return;
  const Layout& l = s.layout();
  if (!s.isArray()) {
    error(inst.location(), "'{}' has a layout on the non-array {}shape {}", inst.name(), what, str(s));
    return;
  }
  int64_t rank = s.rank();
  const auto& m2m = l.minorToMajor;
  bool perm = static_cast<int64_t>(m2m.size()) == rank;
  if (perm && rank <= 64) {
    uint64_t seen = 0;
    for (int64_t d : m2m) {
      uint64_t bit = uint64_t{1} << (d & 63);
      if (d < 0 || d >= rank || (seen & bit)) {
        perm = false;
        break;
      }
      seen |= bit;
    }
  } else if (perm) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t d : m2m) {
      if (d < 0 || d >= rank || seen[static_cast<size_t>(d)]) {
        perm = false;
        break;
      }
      seen[static_cast<size_t>(d)] = true;
    }
  }
  if (!perm) {
    error(inst.location(), "'{}' has layout {} in {}shape {}, but minor_to_major must be a permutation of 0..{}",
          inst.name(), l.toString(), what, str(s), rank - 1);
    return;
  }
  for (const Tile& t : l.tiles) {
    bool ok = !t.dimensions.empty();
    for (int64_t d : t.dimensions) ok &= d > 0 || d == Tile::kCombineDimension;
    if (!ok) {
      error(inst.location(), "'{}' has layout {} with an invalid tile in {}shape {}", inst.name(), l.toString(), what,
            str(s));
      return;
    }
  }
  int storageBits = elementTypeInfo(s.elementType()).byteSize * 8;
  if (l.elementSizeInBits < 0 || l.elementSizeInBits > storageBits)
    error(inst.location(), "'{}' has element size E({}) in layout {} of {}shape {}; {} elements take at most {} bits",
          inst.name(), l.elementSizeInBits, l.toString(), what, str(s), elementTypeName(s.elementType()),
          storageBits);
  if (l.tailPaddingAlignment < 1)
    error(inst.location(), "'{}' has tail padding alignment L({}) in {}shape {}; it must be at least 1", inst.name(),
          l.tailPaddingAlignment, what, str(s));
  if (l.memorySpace < 0)
    error(inst.location(), "'{}' has negative memory space S({}) in {}shape {}", inst.name(), l.memorySpace, what,
          str(s));
  if (!l.dimLevelTypes.empty() && static_cast<int64_t>(l.dimLevelTypes.size()) != rank)
    error(inst.location(), "'{}' has {} dimension level types in the layout of rank-{} {}shape {}", inst.name(),
          l.dimLevelTypes.size(), rank, what, str(s));
  for (const SplitConfig& sc : l.splitConfigs)
    if (sc.dimension < 0 || sc.dimension >= rank)
      error(inst.location(), "'{}' splits dimension {} in the layout of rank-{} {}shape {}", inst.name(), sc.dimension,
            rank, what, str(s));
}

void ModuleVerifier::checkOneSharding(const Instruction& inst, const Sharding& s, const Shape& shape) {
  using K = Sharding::Kind;
  switch (s.kind) {
    case K::Replicated:
    case K::Manual:
    case K::Unknown:
    case K::Unreduced:
    case K::Named: return;
    case K::Tuple:
      error(inst.location(), "'{}' has a nested tuple sharding", inst.name());
      return;
    case K::Maximal:
      if (s.maximalDevice < 0 || (deviceLimit_ && s.maximalDevice >= deviceLimit_))
        error(inst.location(), "'{}' has sharding device {} out of range{}", inst.name(), s.maximalDevice,
              deviceLimit_ ? fmt::format(" (the module has {} devices)", deviceLimit_) : std::string());
      return;
    case K::Tiled: break;
  }
  const auto& dims = s.tileAssignmentDims;
  __int128 product = 1;
  for (int64_t d : dims) {
    if (d <= 0) {
      error(inst.location(), "'{}' has a sharding tile assignment {} with a non-positive dimension", inst.name(),
            ints(dims));
      return;
    }
    product *= d;
    if (product > (static_cast<__int128>(1) << 40)) {
      error(inst.location(), "'{}' has a sharding tile assignment {} that is too large", inst.name(), ints(dims));
      return;
    }
  }
  int64_t devices = 0;
  if (s.iotaDevices) {
    const IotaList& iota = *s.iotaDevices;
    devices = iota.count();
    const auto& p = iota.transposePerm;
    bool ok = p.empty() || p.size() == iota.reshapeDims.size();
    if (ok && !p.empty()) {
      std::vector<int64_t> q = p;
      std::sort(q.begin(), q.end());
      for (size_t i = 0; i < q.size(); ++i) ok &= q[i] == static_cast<int64_t>(i);
    }
    if (!ok) {
      error(inst.location(), "'{}' has a sharding iota transpose {} that is not a permutation of its {} dimensions",
            inst.name(), ints(p), iota.reshapeDims.size());
      return;
    }
  } else {
    devices = static_cast<int64_t>(s.tileAssignmentDevices.size());
  }
  if (devices != static_cast<int64_t>(product)) {
    error(inst.location(), "'{}' has a sharding tile assignment {} of {} tiles but lists {} devices", inst.name(),
          ints(dims), static_cast<int64_t>(product), devices);
    return;
  }
  if (!s.iotaDevices) {
    std::vector<int64_t> ids = s.tileAssignmentDevices;
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || (deviceLimit_ && ids[i] >= deviceLimit_)) {
        error(inst.location(), "'{}' has sharding device {} out of range{}", inst.name(), ids[i],
              deviceLimit_ ? fmt::format(" (the module has {} devices)", deviceLimit_) : std::string());
        return;
      }
      if (i && ids[i] == ids[i - 1]) {
        error(inst.location(), "'{}' has sharding device {} more than once", inst.name(), ids[i]);
        return;
      }
    }
  } else if (deviceLimit_ && devices > deviceLimit_) {
    error(inst.location(), "'{}' has a sharding over {} devices but the module has {}", inst.name(), devices,
          deviceLimit_);
    return;
  }
  if (!shape.isArray()) {
    error(inst.location(), "'{}' has a tiled sharding on the non-array shape {}", inst.name(), str(shape));
    return;
  }
  int64_t expected = shape.rank() + (s.replicateOnLastTileDim ? 1 : 0) + static_cast<int64_t>(s.lastTileDims.size());
  if (static_cast<int64_t>(dims.size()) != expected)
    error(inst.location(), "'{}' has a sharding tile assignment of rank {} for shape {} (expected rank {})",
          inst.name(), dims.size(), str(shape), expected);
}

void collectLeaves(const Shape& s, std::vector<const Shape*>& out, int depth = 0) {
  if (s.isTuple() && depth < 1000) {
    for (const Shape& e : s.tupleElements()) collectLeaves(e, out, depth + 1);
  } else {
    out.push_back(&s);
  }
}

void ModuleVerifier::checkSharding(const Instruction& inst) {
  const Sharding& s = *inst.sharding();
  const Shape& shape = inst.shape();
  if (s.kind == Sharding::Kind::Tuple) {
    if (!shape.isTuple()) {
      error(inst.location(), "'{}' has a tuple sharding but its shape {} is not a tuple", inst.name(), str(shape));
      return;
    }
    std::vector<const Shape*> leaves;
    collectLeaves(shape, leaves);
    if (leaves.size() != s.tupleElements.size()) {
      error(inst.location(), "'{}' has a tuple sharding with {} elements but its shape {} has {} leaves",
            inst.name(), s.tupleElements.size(), str(shape), leaves.size());
      return;
    }
    for (size_t i = 0; i < leaves.size(); ++i) checkOneSharding(inst, s.tupleElements[i], *leaves[i]);
    return;
  }
  if (shape.isTuple()) {
    if (s.kind == Sharding::Kind::Tiled) {
      error(inst.location(), "'{}' has a tiled sharding but its shape {} is a tuple", inst.name(), str(shape));
      return;
    }
    std::vector<const Shape*> leaves;
    collectLeaves(shape, leaves);
    for (const Shape* leaf : leaves) checkOneSharding(inst, s, *leaf);
    return;
  }
  checkOneSharding(inst, s, shape);
}

void ModuleVerifier::checkMixedPrecision(const Instruction& inst) {
  ElementType fp = ElementType::Invalid;
  for (const Instruction* o : inst.operands()) {
    const Shape& s = o->shape();
    if (!s.isArray() || !isFloatType(s.elementType())) continue;
    if (fp == ElementType::Invalid) {
      fp = s.elementType();
    } else if (fp != s.elementType()) {
      error(inst.location(), "'{}' mixes floating-point operand types {} and {}", inst.name(), elementTypeName(fp),
            elementTypeName(s.elementType()));
      return;
    }
  }
}

void ModuleVerifier::checkInstruction(const Computation& c, const Instruction& inst, uint32_t index) {
  SourceLocation loc = inst.location();
  if (inst.parent() != &c)
    error(loc, "instruction '{}' is listed in computation '{}' but does not record it as its parent", inst.name(),
          c.name());
  bool inserted = false;
  const Instruction*& slot = names_.insert(&inst, inserted);
  if (!inserted && !opts_.moduleUniqueNames && info_.find(slot)->computation != &c) {
    slot = &inst;  // names only need to be unique per computation
  } else if (!inserted && !full()) {
    const Instruction* prev = slot;
    const Computation* pc = info_.find(prev)->computation;
    std::string message =
        pc == &c ? fmt::format("instruction name '{}' is used twice in computation '{}'", inst.name(), c.name())
                 : fmt::format("instruction name '{}' is not unique in the module: it is used in computation '{}' "
                               "and in computation '{}'",
                               inst.name(), pc ? pc->name() : std::string(), c.name());
    Diagnostic d{Severity::Error, loc, {}, std::move(message), {}};
    d.notes.push_back({Severity::Note, prev->location(), {}, fmt::format("'{}' first defined here", prev->name()), {}});
    diags_.report(std::move(d));
  }

  // Operands: known, same computation, defined earlier.
  bool operandsOk = true;
  for (int64_t k = 0; k < inst.operandCount(); ++k) {
    const Instruction* o = inst.operand(k);
    if (!o) {
      error(loc, "operand {} of '{}' is missing", k, inst.name());
      operandsOk = false;
      continue;
    }
    InstInfo* oi = info_.find(o);
    if (!oi) {
      error(loc, "operand {} of '{}' is not an instruction of this module", k, inst.name());
      operandsOk = false;
      continue;
    }
    InstInfo& info = *oi;
    if (!info.shapeOk) operandsOk = false;
    if (info.computation != &c) {
      error(loc, "operand {} of '{}' is '{}' from computation '{}', not from '{}'", k, inst.name(), o->name(),
            info.computation ? info.computation->name() : std::string(), c.name());
    } else if (info.index >= index) {
      error(loc, "'{}' uses '{}' before it is defined", inst.name(), o->name());
    }
    if (tracksUsers(o->opcode()) && info.lastUser != &inst) {
      if (!info.firstUser) info.firstUser = &inst;
      info.lastUser = &inst;
      ++info.users;
    }
  }
  for (const Instruction* p : inst.controlPredecessors()) {
    const InstInfo* pi = info_.find(p);
    if (!pi) {
      error(loc, "a control predecessor of '{}' is not an instruction of this module", inst.name());
    } else if (pi->computation != &c) {
      error(loc, "control predecessor '{}' of '{}' is in computation '{}', not '{}'", p->name(), inst.name(),
            pi->computation ? pi->computation->name() : std::string(), c.name());
    } else if (pi->index >= index) {
      error(loc, "control predecessor '{}' of '{}' must be defined before it", p->name(), inst.name());
    }
  }

  // Called computations.
  bool calledOk = true;
  const auto& called = inst.calledComputations();
  auto [minCalled, maxCalled] = calledRange(inst.opcode());
  int n = static_cast<int>(called.size());
  if (n < minCalled || (maxCalled >= 0 && n > maxCalled)) {
    if (maxCalled == 0)
      error(loc, "'{}' ({}) cannot call computations, but calls {}", inst.name(), opcodeName(inst.opcode()), n);
    else if (minCalled == maxCalled)
      error(loc, "'{}' ({}) must call {} computation{}, but calls {}", inst.name(), opcodeName(inst.opcode()),
            minCalled, minCalled == 1 ? "" : "s", n);
    else
      error(loc, "'{}' ({}) must call at least {} computation{}, but calls {}", inst.name(),
            opcodeName(inst.opcode()), minCalled, minCalled == 1 ? "" : "s", n);
    calledOk = false;
  }
  for (const Computation* callee : called) {
    if (!known(callee)) {
      error(loc, "'{}' calls a computation that is not in this module", inst.name());
      calledOk = false;
      continue;
    }
    Opcode o = inst.opcode();
    if (o != Opcode::AsyncStart && o != Opcode::AsyncUpdate && o != Opcode::AsyncDone &&
        threadOf(callee) != threadOf(&c))
      error(loc, "'{}' runs on execution thread \"{}\" but calls '{}', which runs on \"{}\"", inst.name(),
            threadOf(&c), callee->name(), threadOf(callee));
  }

  // Shapes.
  checkShape(inst, inst.shape(), "");
  checkLayouts(inst, inst.shape(), "");
  if (inst.opcode() == Opcode::Outfeed && inst.attrs().outfeedShape) {
    checkShape(inst, *inst.attrs().outfeedShape, "outfeed ");
    checkLayouts(inst, *inst.attrs().outfeedShape, "outfeed ");
  }
  if (inst.attrs().operandLayoutConstraints)
    for (const Shape& s : *inst.attrs().operandLayoutConstraints) checkLayouts(inst, s, "operand constraint ");
  if (inst.opcode() == Opcode::Parameter && inst.attrs().parameterReplication) {
    size_t leaves = static_cast<size_t>(inst.shape().leafCount());
    if (inst.attrs().parameterReplication->size() != leaves)
      error(loc, "parameter_replication of '{}' has {} entries but its shape {} has {} leaves", inst.name(),
            inst.attrs().parameterReplication->size(), str(inst.shape()), leaves);
  }
  if (!info_.find(&inst)->shapeOk) operandsOk = false;

  if (operandsOk && calledOk && !full()) {
    size_t before = diags_.errorCount();
    verify_detail::Inferred inferred = verify_detail::inferShapeCached(inst, diags_, opts_, sigs_);
    std::optional<bool> quick = inferred ? inferred.quickArrayMatch(inst.shape()) : std::nullopt;
    bool matches = !inferred || (quick && *quick && !opts_.layoutSensitive && !opts_.allowMixedPrecision) ||
                   shapeMatchesInferred(inst.opcode(), inst.shape(), *inferred, opts_);
    if (!matches) {
      bool layouts = opts_.layoutSensitive && inst.shape().compatible(*inferred);
      error(loc, "'{}' has shape {} but its operands imply {}", inst.name(), inst.shape().toString(layouts),
            inferred->toString(layouts));
    }
    if (diags_.errorCount() == before && !opts_.allowMixedPrecision && !mayMixPrecision(inst.opcode()))
      checkMixedPrecision(inst);
  }
  if (inst.sharding()) checkSharding(inst);
}

void ModuleVerifier::checkUsers(const Computation& c) {
  for (const auto& p : c.instructions()) {
    if (!p || !tracksUsers(p->opcode()) || full()) continue;
    const Instruction& inst = *p;
    const InstInfo& info = *info_.find(&inst);
    Opcode o = inst.opcode();
    std::vector<Opcode> allowed;
    switch (o) {
      case Opcode::AsyncStart:
      case Opcode::AsyncUpdate: allowed = {Opcode::AsyncUpdate, Opcode::AsyncDone}; break;
      case Opcode::AllReduceStart: allowed = {Opcode::AllReduceDone}; break;
      case Opcode::AllGatherStart: allowed = {Opcode::AllGatherDone}; break;
      case Opcode::CopyStart: allowed = {Opcode::CopyDone}; break;
      case Opcode::CollectivePermuteStart: allowed = {Opcode::CollectivePermuteDone}; break;
      case Opcode::Send: allowed = {Opcode::SendDone, Opcode::Tuple}; break;
      case Opcode::Recv: allowed = {Opcode::RecvDone, Opcode::Tuple}; break;
      default: break;
    }
    if ((o == Opcode::Send || o == Opcode::Recv) && c.root() == &inst) {
      auto it = callers_.find(&c);
      if (it != callers_.end() && it->second.asyncStart > 0) continue;
    }
    std::string names;
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (i) names += i + 1 == allowed.size() ? " or " : ", ";
      names += opcodeName(allowed[i]);
    }
    if (info.users != 1) {
      error(inst.location(), "'{}' ({}) must have exactly one user ({}), but has {}", inst.name(), opcodeName(o),
            names, info.users);
      continue;
    }
    const Instruction* user = info.firstUser;
    if (std::find(allowed.begin(), allowed.end(), user->opcode()) == allowed.end()) {
      error(inst.location(), "the user of '{}' ({}) must be {}, not '{}' ({})", inst.name(), opcodeName(o), names,
            user->name(), opcodeName(user->opcode()));
      continue;
    }
    if ((o == Opcode::Send && user->opcode() == Opcode::SendDone) ||
        (o == Opcode::Recv && user->opcode() == Opcode::RecvDone)) {
      if (inst.attrs().channelId != user->attrs().channelId)
        error(user->location(), "'{}' and '{}' must have the same channel_id", inst.name(), user->name());
      else if (inst.attrs().isHostTransfer != user->attrs().isHostTransfer)
        error(user->location(), "'{}' and '{}' must agree on is_host_transfer", inst.name(), user->name());
    }
  }
  // Done ops must consume the matching start.
  for (const auto& p : c.instructions()) {
    if (!p || p->operandCount() != 1 || !p->operand(0) || !known(p->operand(0)) || full()) continue;
    Opcode want;
    switch (p->opcode()) {
      case Opcode::AllReduceDone: want = Opcode::AllReduceStart; break;
      case Opcode::AllGatherDone: want = Opcode::AllGatherStart; break;
      case Opcode::CopyDone: want = Opcode::CopyStart; break;
      case Opcode::CollectivePermuteDone: want = Opcode::CollectivePermuteStart; break;
      case Opcode::SendDone: want = Opcode::Send; break;
      case Opcode::RecvDone: want = Opcode::Recv; break;
      default: continue;
    }
    Opcode got = p->operand(0)->opcode();
    if (got != want && !((want == Opcode::Send || want == Opcode::Recv) && got == Opcode::GetTupleElement))
      error(p->location(), "the operand of '{}' ({}) must be a {}, not '{}' ({})", p->name(),
            opcodeName(p->opcode()), opcodeName(want), p->operand(0)->name(), opcodeName(got));
  }
}

void ModuleVerifier::checkFusionComputation(const Computation& c, const Instruction& fusion) {
  // Fused computations: the root has no users, every other instruction has
  // one (unless it has side effects), users stay inside.
  std::vector<uint32_t> users(c.instructions().size(), 0);
  for (const auto& p : c.instructions()) {
    if (!p) continue;
    const Instruction* last = nullptr;
    for (const Instruction* o : p->operands()) {
      if (o == last || !known(o)) continue;
      const InstInfo& oi = *info_.find(o);
      if (oi.computation == &c) ++users[oi.index];
      last = o;
    }
  }
  for (const auto& p : c.instructions()) {
    if (!p || full()) continue;
    uint32_t u = users[info_.find(p.get())->index];
    if (p.get() == c.root()) {
      if (u)
        error(p->location(), "the root '{}' of fused computation '{}' must not have users", p->name(), c.name());
    } else if (!u && !p->hasSideEffect()) {
      error(p->location(), "'{}' in fused computation '{}' (called by '{}') is not used", p->name(), c.name(),
            fusion.name());
    }
  }
}

// ---------------------------------------------------------------- call graph and entry

void ModuleVerifier::checkCallGraph() {
  for (const auto& cp : module_.computations()) {
    if (!cp || full()) continue;
    const Computation& c = *cp;
    auto it = callers_.find(&c);
    if (it == callers_.end()) continue;
    const CallerInfo& ci = it->second;
    if (ci.fusion > 0) {
      if (ci.fusion > 1 && ci.secondFusion)
        error(ci.secondFusion->location(), "fused computation '{}' is called by more than one fusion ('{}' and '{}')",
              c.name(), ci.firstFusion->name(), ci.secondFusion->name());
      if (ci.other + ci.asyncStart + ci.asyncOther > 0) {
        const Instruction* other = ci.firstOther ? ci.firstOther : ci.firstAsyncStart;
        if (other)
          error(other->location(), "'{}' calls fused computation '{}', which only fusion '{}' may call", other->name(),
                c.name(), ci.firstFusion->name());
      }
    }
    if (ci.asyncStart > 0) {
      if (ci.asyncStart > 1)
        error(c.location(), "async computation '{}' is called by {} async-start instructions; it must have exactly one",
              c.name(), ci.asyncStart);
      if (ci.other > 0 && ci.firstOther)
        error(ci.firstOther->location(), "'{}' calls async computation '{}', which only '{}' may call",
              ci.firstOther->name(), c.name(), ci.firstAsyncStart->name());
      const Instruction* root = c.root();
      for (const auto& p : c.instructions())
        if (p && p.get() != root && p->opcode() != Opcode::Parameter) {
          error(p->location(), "async computation '{}' may contain only parameters and its root, not '{}'", c.name(),
                p->name());
          break;
        }
    }
  }
  // Recursion: iterative DFS over the call graph.
  std::unordered_map<const Computation*, uint8_t> state;  // 1 = on stack, 2 = done
  for (const auto& cp : module_.computations()) {
    if (!cp || state[cp.get()] || full()) continue;
    struct Frame {
      const Computation* c;
      size_t inst = 0, callee = 0;
    };
    std::vector<Frame> stack{{cp.get()}};
    state[cp.get()] = 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const auto& insts = f.c->instructions();
      if (f.inst >= insts.size()) {
        state[f.c] = 2;
        stack.pop_back();
        continue;
      }
      const Instruction* inst = insts[f.inst].get();
      const auto* called = inst ? &inst->calledComputations() : nullptr;
      if (!called || f.callee >= called->size()) {
        ++f.inst;
        f.callee = 0;
        continue;
      }
      const Computation* next = (*called)[f.callee++];
      if (!known(next)) continue;
      uint8_t& s = state[next];
      if (s == 1) {
        error(inst->location(), "'{}' calls computation '{}' recursively (computations may not call themselves)",
              inst->name(), next->name());
      } else if (s == 0) {
        s = 1;
        stack.push_back({next});
      }
    }
  }
}

void ModuleVerifier::checkAliasing(const verify_detail::Signature& sig) {
  const ModuleConfig& cfg = module_.config();
  if (cfg.inputOutputAlias.empty() && cfg.bufferDonors.empty()) return;
  const Shape& result = sig.root->shape();
  std::set<ShapeIndex> outputs;
  std::set<std::pair<int64_t, ShapeIndex>> aliasedParams;
  std::optional<ComputationLayout> layout;  // only built for must-alias pairs
  auto paramShape = [&](int64_t n) -> const Shape* {
    if (n < 0 || static_cast<size_t>(n) >= sig.params.size()) return nullptr;
    return &sig.params[static_cast<size_t>(n)]->shape();
  };
  for (const InputOutputAlias& a : cfg.inputOutputAlias) {
    if (full()) return;
    auto loc = [&] { return headerLocation("input_output_alias"); };
    const Shape* out = result.subshape(a.outputIndex);
    if (!out) {
      error(loc(), "input_output_alias output index {} does not exist in the entry result shape {}",
            ints(a.outputIndex), str(result));
      continue;
    }
    const Shape* param = paramShape(a.parameterNumber);
    if (!param) {
      error(loc(), "input_output_alias refers to parameter {}, but the entry has {} parameter{}", a.parameterNumber,
            sig.params.size(), sig.params.size() == 1 ? "" : "s");
      continue;
    }
    const Shape* p = param->subshape(a.parameterIndex);
    if (!p) {
      error(loc(), "input_output_alias parameter index {} does not exist in parameter {} of shape {}",
            ints(a.parameterIndex), a.parameterNumber, str(*param));
      continue;
    }
    if (!outputs.insert(a.outputIndex).second) {
      error(loc(), "input_output_alias aliases output {} more than once", ints(a.outputIndex));
      continue;
    }
    if (!aliasedParams.insert({a.parameterNumber, a.parameterIndex}).second) {
      error(loc(), "input_output_alias aliases parameter {} at index {} more than once", a.parameterNumber,
            ints(a.parameterIndex));
      continue;
    }
    auto outSize = out->byteSize(), inSize = p->byteSize();
    if (!out->isArray() || !p->isArray() || !outSize || !inSize || *outSize != *inSize) {
      error(loc(), "input_output_alias pairs output {} ({}) with parameter {} at {} ({}) of a different size",
            ints(a.outputIndex), str(*out), a.parameterNumber, ints(a.parameterIndex), str(*p));
      continue;
    }
    if (a.mustAlias) {
      if (!layout) layout = module_.entryComputationLayout();
      const Shape* lo = layout->result.subshape(a.outputIndex);
      const Shape* lp = static_cast<size_t>(a.parameterNumber) < layout->parameters.size()
                            ? layout->parameters[static_cast<size_t>(a.parameterNumber)].subshape(a.parameterIndex)
                            : nullptr;
      if (lo && lp && !(*lo == *lp))
        error(loc(), "must-alias output {} ({}) and parameter {} at {} ({}) must have identical shapes and layouts",
              ints(a.outputIndex), lo->toString(), a.parameterNumber, ints(a.parameterIndex), lp->toString());
    }
  }
  std::set<std::pair<int64_t, ShapeIndex>> donors;
  for (const BufferDonor& b : cfg.bufferDonors) {
    if (full()) return;
    auto loc = [&] { return headerLocation("buffer_donor"); };
    const Shape* param = paramShape(b.parameterNumber);
    if (!param) {
      error(loc(), "buffer_donor refers to parameter {}, but the entry has {} parameter{}", b.parameterNumber,
            sig.params.size(), sig.params.size() == 1 ? "" : "s");
      continue;
    }
    if (!param->subshape(b.parameterIndex)) {
      error(loc(), "buffer_donor parameter index {} does not exist in parameter {} of shape {}", ints(b.parameterIndex),
            b.parameterNumber, str(*param));
      continue;
    }
    if (!donors.insert({b.parameterNumber, b.parameterIndex}).second) {
      error(loc(), "buffer_donor lists parameter {} at {} more than once", b.parameterNumber, ints(b.parameterIndex));
      continue;
    }
    if (aliasedParams.count({b.parameterNumber, b.parameterIndex}))
      error(loc(), "parameter {} at {} is both a buffer donor and in input_output_alias", b.parameterNumber,
            ints(b.parameterIndex));
  }
}

void ModuleVerifier::checkEntry() {
  const Computation* entry = module_.entry();
  if (!entry) {
    error(headerLocation(""), "module '{}' has no entry computation", module_.name());
    return;
  }
  if (!known(entry)) {
    error(headerLocation(""), "the entry computation of module '{}' is not one of its computations", module_.name());
    return;
  }
  auto it = callers_.find(entry);
  if (it != callers_.end() && it->second.fusion > 0)
    error(entry->location(), "entry computation '{}' must not be a fused computation (it is called by '{}')",
          entry->name(), it->second.firstFusion->name());
  const verify_detail::Signature& sig = sigs_.get(entry);
  if (!sig.dense || !sig.root) return;
  const ModuleConfig& cfg = module_.config();
  if (cfg.entryComputationLayout) {
    const ComputationLayout& layout = *cfg.entryComputationLayout;
    auto loc = [&] { return headerLocation("entry_computation_layout"); };
    auto same = [&](const Shape& a, const Shape& b) {
      if (!a.compatible(b)) return false;
      if (!opts_.layoutSensitive) return true;
      return shapeMatchesInferred(Opcode::Parameter, a, b, opts_);
    };
    if (layout.parameters.size() != sig.params.size()) {
      error(loc(), "entry_computation_layout has {} parameters but entry computation '{}' has {}",
            layout.parameters.size(), entry->name(), sig.params.size());
    } else {
      for (size_t i = 0; i < sig.params.size() && !full(); ++i)
        if (!same(sig.params[i]->shape(), layout.parameters[i]))
          error(loc(), "entry_computation_layout gives parameter {} shape {}, but '{}' has shape {}", i,
                str(layout.parameters[i]), sig.params[i]->name(), str(sig.params[i]->shape()));
    }
    if (!same(sig.root->shape(), layout.result))
      error(loc(), "entry_computation_layout gives result shape {}, but the root '{}' has shape {}", str(layout.result),
            sig.root->name(), str(sig.root->shape()));
  }
  checkAliasing(sig);
}

bool ModuleVerifier::run() {
  indexModule();
  if (module_.name().empty()) error(headerLocation(""), "module name must not be empty");
  std::unordered_map<std::string_view, const Computation*> compNames;
  compNames.reserve(module_.computations().size());
  for (const auto& c : module_.computations()) {
    if (full()) break;
    if (!c) {
      error(headerLocation(""), "module '{}' contains a null computation", module_.name());
      continue;
    }
    auto [it, inserted] = compNames.try_emplace(std::string_view(c->name()), c.get());
    if (!inserted) {
      Diagnostic d{Severity::Error, c->location(), {},
                   fmt::format("computation name '{}' is not unique in the module", c->name()), {}};
      d.notes.push_back({Severity::Note, it->second->location(), {}, "first defined here", {}});
      if (!full()) diags_.report(std::move(d));
    }
    checkComputation(*c);
  }
  if (!full()) checkCallGraph();
  if (!full()) checkEntry();
  return diags_.errorCount() == start_;
}

}  // namespace

bool verifyModule(const Module& module, DiagnosticEngine& diags, const VerifyOptions& options) {
  return ModuleVerifier(module, diags, options).run();
}

}  // namespace tpu::hlo
