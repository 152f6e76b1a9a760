#include "spmd/sharding.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

namespace tpu::spmd {

namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Row-major strides of `dims`.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// The row-major array `devices` over `dims` transposed by `perm`.
std::vector<int64_t> transposeArray(const std::vector<int64_t>& dims, const std::vector<int64_t>& devices,
                                    const std::vector<int64_t>& perm) {
  std::vector<int64_t> stride = stridesOf(dims);
  size_t rank = dims.size();
  std::vector<int64_t> tdims(rank), tstride(rank);
  for (size_t i = 0; i < rank; ++i) {
    tdims[i] = dims[static_cast<size_t>(perm[i])];
    tstride[i] = stride[static_cast<size_t>(perm[i])];
  }
  std::vector<int64_t> out;
  out.reserve(devices.size());
  std::vector<int64_t> idx(rank, 0);
  for (size_t k = 0; k < devices.size(); ++k) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += idx[i] * tstride[i];
    out.push_back(devices[static_cast<size_t>(src)]);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < tdims[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

std::vector<int64_t> primeFactors(int64_t n) {
  std::vector<int64_t> f;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      f.push_back(p);
      n /= p;
    }
  if (n > 1) f.push_back(n);
  return f;
}

}  // namespace

int64_t shardingDeviceCount(const hlo::Sharding& s) {
  if (s.kind == hlo::Sharding::Kind::Maximal) return s.maximalDevice + 1;
  if (s.kind == hlo::Sharding::Kind::Tuple) {
    int64_t n = 0;
    for (const hlo::Sharding& e : s.tupleElements) n = std::max(n, shardingDeviceCount(e));
    return n;
  }
  if (s.kind != hlo::Sharding::Kind::Tiled) return 0;
  if (s.iotaDevices) return s.iotaDevices->count();
  return static_cast<int64_t>(s.tileAssignmentDevices.size());
}

Tiling Tiling::replicated(int64_t rank, int64_t numDevices) {
  Tiling t;
  t.tiles_.assign(static_cast<size_t>(rank), 1);
  t.replication_ = numDevices;
  t.devices_.resize(static_cast<size_t>(numDevices));
  std::iota(t.devices_.begin(), t.devices_.end(), 0);
  return t;
}

Tiling Tiling::manual(int64_t rank, int64_t numDevices) {
  Tiling t = replicated(rank, numDevices);
  t.manual_ = true;
  return t;
}

Tiling Tiling::make(std::vector<int64_t> tiles, int64_t replication, std::vector<int64_t> devices) {
  Tiling t;
  t.tiles_ = std::move(tiles);
  t.replication_ = replication;
  t.devices_ = std::move(devices);
  return t;
}

std::optional<Tiling> Tiling::fromHlo(const hlo::Sharding& s, int64_t rank, int64_t numDevices, std::string* why) {
  using K = hlo::Sharding::Kind;
  auto fail = [&](std::string msg) -> std::optional<Tiling> {
    if (why) *why = std::move(msg);
    return std::nullopt;
  };
  switch (s.kind) {
    case K::Replicated:
    case K::Unknown: return replicated(rank, numDevices);
    case K::Maximal:
      if (s.maximalDevice < 0 || s.maximalDevice >= numDevices)
        return fail(fmt::format("device {} is out of range (the module has {} partitions)", s.maximalDevice,
                                numDevices));
      return replicated(rank, numDevices);
    case K::Manual: return manual(rank, numDevices);
    case K::Tuple: return fail("a tuple sharding where one array sharding is expected");
    case K::Unreduced:
    case K::Named: return fail("this kind of sharding is not supported by the partitioner");
    case K::Tiled: break;
  }
  const std::vector<int64_t>& dims = s.tileAssignmentDims;
  int64_t subgroups = (s.replicateOnLastTileDim ? 1 : 0) + static_cast<int64_t>(s.lastTileDims.size());
  if (static_cast<int64_t>(dims.size()) != rank + subgroups)
    return fail(fmt::format("its tile assignment has rank {} but the shape has rank {}{}", dims.size(), rank,
                            subgroups ? fmt::format(" plus {} subgroup dimension{}", subgroups, subgroups > 1 ? "s" : "")
                                      : std::string()));
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) return fail(fmt::format("tile assignment dimension {} is not positive", d));
    n = n > (int64_t{1} << 40) / d ? (int64_t{1} << 40) : n * d;
  }
  if (n != numDevices)
    return fail(fmt::format("it uses {} devices but the module has {} partitions", n, numDevices));
  std::vector<int64_t> devices = s.iotaDevices ? s.iotaDevices->expand(numDevices) : s.tileAssignmentDevices;
  if (n != static_cast<int64_t>(devices.size()))
    return fail(fmt::format("its {} tiles do not match the {} devices it lists", n, devices.size()));
  std::vector<bool> seen(static_cast<size_t>(numDevices), false);
  for (int64_t d : devices) {
    if (d < 0 || d >= numDevices)
      return fail(fmt::format("device {} is out of range (the module has {} partitions)", d, numDevices));
    if (seen[static_cast<size_t>(d)]) return fail(fmt::format("device {} is listed twice", d));
    seen[static_cast<size_t>(d)] = true;
  }
  Tiling t;
  t.tiles_.assign(dims.begin(), dims.begin() + rank);
  // Trailing subgroup dims: bring them into the order replication, manual
  // (several of one kind merge into one).
  std::vector<int64_t> sgDims(dims.begin() + rank, dims.end());
  std::vector<K> sgKinds = s.lastTileDims;
  if (s.replicateOnLastTileDim) sgKinds.push_back(K::Replicated);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  for (K want : {K::Replicated, K::Manual}) {
    int64_t size = 1;
    for (size_t i = 0; i < sgKinds.size(); ++i) {
      if (sgKinds[i] == want || (want == K::Replicated && sgKinds[i] != K::Manual)) {
        perm.push_back(rank + static_cast<int64_t>(i));
        size *= sgDims[i];
      }
    }
    (want == K::Replicated ? t.replication_ : t.manualGroups_) = size;
  }
  t.devices_ = transposeArray(dims, devices, perm);
  return t;
}

std::vector<int64_t> Tiling::arrayDims() const {
  std::vector<int64_t> d = tiles_;
  d.push_back(replication_);
  d.push_back(manualGroups_);
  return d;
}

int64_t Tiling::numTiles() const { return product(tiles_); }

std::optional<hlo::IotaList> findIota(const std::vector<int64_t>& dims, const std::vector<int64_t>& devices) {
  if (devices.empty()) return std::nullopt;
  // Refine every dim into its prime factors; a transposed iota gives each
  // factor a stride, and the strides sorted are the mixed-radix strides of
  // the factors in that order.
  std::vector<int64_t> fdims;
  for (int64_t d : dims)
    for (int64_t f : primeFactors(d)) fdims.push_back(f);
  std::vector<int64_t> fstride = stridesOf(fdims);
  size_t k = fdims.size();
  if (devices[0] != 0) return std::nullopt;
  std::vector<int64_t> step(k);
  for (size_t i = 0; i < k; ++i) step[i] = devices[static_cast<size_t>(fstride[i])];
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return step[a] > step[b]; });
  int64_t expect = 1;
  for (size_t j = k; j-- > 0;) {
    if (step[order[j]] != expect) return std::nullopt;
    expect *= fdims[order[j]];
  }
  std::vector<int64_t> idx(k, 0);
  for (size_t n = 0; n < devices.size(); ++n) {
    int64_t v = 0;
    for (size_t i = 0; i < k; ++i) v += idx[i] * step[i];
    if (v != devices[n]) return std::nullopt;
    for (size_t i = k; i-- > 0;) {
      if (++idx[i] < fdims[i]) break;
      idx[i] = 0;
    }
  }
  // reshape dims: factors major to minor by stride; perm[i] = position of
  // factor i among them. Then merge runs that stay adjacent.
  std::vector<int64_t> rdims, pos(k);
  for (size_t j = 0; j < k; ++j) {
    rdims.push_back(fdims[order[j]]);
    pos[order[j]] = static_cast<int64_t>(j);
  }
  std::vector<int64_t> perm(pos.begin(), pos.end());
  // Merge: factor i and i+1 of the (transposed) order with perm[i+1] == perm[i]+1.
  std::vector<std::vector<int64_t>> runs;  // runs of reshape positions
  for (size_t i = 0; i < k; ++i) {
    if (!runs.empty() && runs.back().back() + 1 == perm[i]) runs.back().push_back(perm[i]);
    else runs.push_back({perm[i]});
  }
  // Reshape dims of the merged runs in reshape order.
  std::vector<size_t> runOrder(runs.size());
  std::iota(runOrder.begin(), runOrder.end(), 0);
  std::sort(runOrder.begin(), runOrder.end(), [&](size_t a, size_t b) { return runs[a][0] < runs[b][0]; });
  hlo::IotaList iota;
  std::vector<int64_t> runPos(runs.size());
  for (size_t j = 0; j < runOrder.size(); ++j) {
    int64_t size = 1;
    for (int64_t p : runs[runOrder[j]]) size *= rdims[static_cast<size_t>(p)];
    iota.reshapeDims.push_back(size);
    runPos[runOrder[j]] = static_cast<int64_t>(j);
  }
  bool identity = true;
  for (size_t i = 0; i < runs.size(); ++i) {
    iota.transposePerm.push_back(runPos[i]);
    identity &= runPos[i] == static_cast<int64_t>(i);
  }
  if (identity) {
    iota.reshapeDims = {static_cast<int64_t>(devices.size())};
    iota.transposePerm.clear();
  }
  return iota;
}

hlo::Sharding Tiling::toHlo() const {
  hlo::Sharding s;
  if (manual_) {
    s.kind = hlo::Sharding::Kind::Manual;
    return s;
  }
  if (isReplicated()) return hlo::Sharding::replicated();
  s.kind = hlo::Sharding::Kind::Tiled;
  s.tileAssignmentDims = tiles_;
  if (replication_ > 1) s.tileAssignmentDims.push_back(replication_);
  if (manualGroups_ > 1) s.tileAssignmentDims.push_back(manualGroups_);
  if (manualGroups_ > 1) {
    if (replication_ > 1) s.lastTileDims.push_back(hlo::Sharding::Kind::Replicated);
    s.lastTileDims.push_back(hlo::Sharding::Kind::Manual);
  } else {
    s.replicateOnLastTileDim = replication_ > 1;
  }
  if (auto iota = findIota(s.tileAssignmentDims, devices_)) s.iotaDevices = std::move(*iota);
  else s.tileAssignmentDevices = devices_;
  return s;
}

std::vector<int64_t> Tiling::tileIndex(int64_t device) const {
  std::vector<int64_t> dims = arrayDims();
  std::vector<int64_t> idx(dims.size(), -1);
  auto it = std::find(devices_.begin(), devices_.end(), device);
  if (it == devices_.end()) return idx;
  int64_t linear = it - devices_.begin();
  for (size_t i = dims.size(); i-- > 0;) {
    idx[i] = linear % dims[i];
    linear /= dims[i];
  }
  return idx;
}

int64_t Tiling::replicaIndex(int64_t device) const { return tileIndex(device)[static_cast<size_t>(rank())]; }

int64_t Tiling::deviceAt(const std::vector<int64_t>& tileIdx, int64_t replicaIdx) const {
  int64_t linear = 0;
  for (size_t i = 0; i < tiles_.size(); ++i) linear = linear * tiles_[i] + tileIdx[i];
  linear = (linear * replication_ + replicaIdx) * manualGroups_;
  return devices_[static_cast<size_t>(linear)];
}

std::vector<int64_t> Tiling::shardDims(const std::vector<int64_t>& global) const {
  std::vector<int64_t> out(global.size());
  for (size_t i = 0; i < global.size(); ++i) out[i] = (global[i] + tiles_[i] - 1) / tiles_[i];
  return out;
}

hlo::Shape Tiling::shardShape(const hlo::Shape& global) const {
  hlo::Shape s = global;
  s.setDimensions(shardDims(global.dimensions()));
  return s;
}

std::vector<int64_t> Tiling::shardOffsets(int64_t device, const std::vector<int64_t>& global) const {
  std::vector<int64_t> idx = tileIndex(device);
  std::vector<int64_t> size = shardDims(global);
  std::vector<int64_t> out(global.size());
  for (size_t i = 0; i < global.size(); ++i) out[i] = idx[i] * size[i];
  return out;
}

std::vector<int64_t> Tiling::validShardDims(int64_t device, const std::vector<int64_t>& global) const {
  std::vector<int64_t> off = shardOffsets(device, global);
  std::vector<int64_t> size = shardDims(global);
  std::vector<int64_t> out(global.size());
  for (size_t i = 0; i < global.size(); ++i) out[i] = std::clamp<int64_t>(global[i] - off[i], 0, size[i]);
  return out;
}

std::vector<std::vector<int64_t>> Tiling::groupsAlong(const std::vector<int64_t>& dims, bool alongReplication) const {
  std::vector<int64_t> adims = arrayDims();
  std::vector<bool> inGroup(adims.size(), false);
  for (int64_t d : dims) inGroup[static_cast<size_t>(d)] = true;
  if (alongReplication) inGroup[static_cast<size_t>(rank())] = true;
  // Transpose so the grouped dims are last (in order), then cut rows.
  std::vector<int64_t> perm;
  int64_t groupSize = 1;
  for (size_t i = 0; i < adims.size(); ++i)
    if (!inGroup[i]) perm.push_back(static_cast<int64_t>(i));
  for (size_t i = 0; i < adims.size(); ++i)
    if (inGroup[i]) {
      perm.push_back(static_cast<int64_t>(i));
      groupSize *= adims[i];
    }
  std::vector<int64_t> t = transposeArray(adims, devices_, perm);
  std::vector<std::vector<int64_t>> groups;
  for (size_t i = 0; i < t.size(); i += static_cast<size_t>(groupSize))
    groups.emplace_back(t.begin() + static_cast<int64_t>(i), t.begin() + static_cast<int64_t>(i) + groupSize);
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  return groups;
}

Tiling Tiling::canonical() const {
  Tiling c = *this;
  size_t group = static_cast<size_t>(replication_);
  for (size_t i = 0; i < c.devices_.size(); i += group * static_cast<size_t>(manualGroups_)) {
    // Sort the replication devices of one tile (per manual group stride).
    for (size_t m = 0; m < static_cast<size_t>(manualGroups_); ++m) {
      std::vector<int64_t> g;
      for (size_t r = 0; r < group; ++r) g.push_back(c.devices_[i + r * static_cast<size_t>(manualGroups_) + m]);
      std::sort(g.begin(), g.end());
      for (size_t r = 0; r < group; ++r) c.devices_[i + r * static_cast<size_t>(manualGroups_) + m] = g[r];
    }
  }
  return c;
}

bool Tiling::sameAs(const Tiling& other) const {
  if (manual_ != other.manual_) return false;
  if (manual_) return true;
  if (tiles_ != other.tiles_ || replication_ != other.replication_ || manualGroups_ != other.manualGroups_)
    return false;
  return canonical().devices_ == other.canonical().devices_;
}

Tiling Tiling::transposed(const std::vector<int64_t>& perm) const {
  std::vector<int64_t> full = perm;
  full.push_back(rank());
  full.push_back(rank() + 1);
  Tiling t = *this;
  t.devices_ = transposeArray(arrayDims(), devices_, full);
  for (size_t i = 0; i < perm.size(); ++i) t.tiles_[i] = tiles_[static_cast<size_t>(perm[i])];
  return t;
}

Tiling Tiling::replicatedOn(const std::vector<int64_t>& dims) const {
  std::vector<bool> drop(tiles_.size(), false);
  for (int64_t d : dims) drop[static_cast<size_t>(d)] = true;
  std::vector<int64_t> perm;
  for (size_t i = 0; i < tiles_.size(); ++i)
    if (!drop[i]) perm.push_back(static_cast<int64_t>(i));
  int64_t extra = 1;
  for (size_t i = 0; i < tiles_.size(); ++i)
    if (drop[i]) {
      perm.push_back(static_cast<int64_t>(i));
      extra *= tiles_[i];
    }
  perm.push_back(rank());
  perm.push_back(rank() + 1);
  Tiling t = *this;
  t.devices_ = transposeArray(arrayDims(), devices_, perm);
  for (size_t i = 0; i < tiles_.size(); ++i)
    if (drop[i]) t.tiles_[i] = 1;
  t.replication_ = replication_ * extra;
  return t;
}

std::optional<Tiling> Tiling::tiledFromReplication(int64_t dim, int64_t count) const {
  if (count == 1) return *this;
  if (tile(dim) != 1 || replication_ % count != 0) return std::nullopt;
  // Split replication into [count, rest], move `count` to position `dim`.
  std::vector<int64_t> dims = tiles_;
  dims.push_back(count);
  dims.push_back(replication_ / count);
  dims.push_back(manualGroups_);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank(); ++i) perm.push_back(i == dim ? rank() : i);
  perm.push_back(dim);  // the old size-1 dim goes to the front of the replication (size 1: no effect)
  perm.push_back(rank() + 1);
  perm.push_back(rank() + 2);
  Tiling t = *this;
  t.devices_ = transposeArray(dims, devices_, perm);
  t.tiles_[static_cast<size_t>(dim)] = count;
  t.replication_ = replication_ / count;
  return t;
}

Tiling Tiling::withInsertedDims(const std::vector<int64_t>& positionsInResult) const {
  Tiling t = *this;
  std::vector<int64_t> sorted = positionsInResult;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t p : sorted) t.tiles_.insert(t.tiles_.begin() + p, 1);
  return t;
}

Tiling Tiling::withRemovedDims(const std::vector<int64_t>& dims) const {
  Tiling t = *this;
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int64_t d : sorted) t.tiles_.erase(t.tiles_.begin() + d);
  return t;
}

}  // namespace tpu::spmd
