// The sharding model of the SPMD partitioner (shared/spec/SPMD.md §1).
//
// hlo::Sharding is the attribute as written (parsed, printed and encoded in
// .hlob by src/hlo). Tiling is its working form: one device array over the
// data dimensions plus trailing subgroup dimensions (replicated, manual),
// expanded from the explicit or iota list, with the queries a partitioner
// needs (which tile a device holds, its offsets and padded shape, groups of
// devices along tile dimensions) and the array operations propagation uses
// (transpose, merge into replication, ...). Replicated values are a Tiling
// whose data tiles are all 1, so every rule handles them without a case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hlo/attributes.h"
#include "hlo/shape.h"

namespace tpu::spmd {

class Tiling {
 public:
  enum class Subgroup : uint8_t { Replicated, Manual };

  Tiling() = default;
  // Every device holds everything.
  static Tiling replicated(int64_t rank, int64_t numDevices);
  // `tiles` per data dimension then one replication dimension, devices row-major.
  static Tiling make(std::vector<int64_t> tiles, int64_t replication, std::vector<int64_t> devices);

  // The working form of a non-tuple sharding of an array of rank `rank`
  // over `numDevices` devices. Maximal shardings read as replicated (every
  // device computes the value); manual as `isManual`. Returns nullopt with
  // `*why` set for a sharding that does not fit (rank, counts, ids).
  static std::optional<Tiling> fromHlo(const hlo::Sharding& s, int64_t rank, int64_t numDevices, std::string* why);
  // Back to the attribute: {replicated}, or devices=[..] in iota form when
  // the array is a transposed iota, else the explicit list.
  hlo::Sharding toHlo() const;
  std::string toString() const { return toHlo().toString(); }

  bool isManual() const { return manual_; }
  static Tiling manual(int64_t rank, int64_t numDevices);

  int64_t rank() const { return static_cast<int64_t>(tiles_.size()); }
  const std::vector<int64_t>& tiles() const { return tiles_; }
  int64_t tile(int64_t dim) const { return tiles_[static_cast<size_t>(dim)]; }
  int64_t replication() const { return replication_; }      // product of replicated subgroup dims
  int64_t manualGroups() const { return manualGroups_; }    // product of manual subgroup dims
  // Row-major over arrayDims(): the data tiles, replication, manual groups.
  const std::vector<int64_t>& devices() const { return devices_; }
  std::vector<int64_t> arrayDims() const;
  int64_t numDevices() const { return static_cast<int64_t>(devices_.size()); }
  int64_t numTiles() const;
  bool isReplicated() const { return numTiles() == 1 && manualGroups_ == 1 && !manual_; }
  bool isTiledOn(int64_t dim) const { return tile(dim) > 1; }

  // Position of `device` in the array: data tile index (rank entries), then
  // its replication index and manual-group index. -1 tile for an unknown device.
  std::vector<int64_t> tileIndex(int64_t device) const;
  int64_t replicaIndex(int64_t device) const;
  int64_t deviceAt(const std::vector<int64_t>& tileIdx, int64_t replicaIdx) const;

  // Padded (ceil-divided) per-device shape of a global array shape.
  std::vector<int64_t> shardDims(const std::vector<int64_t>& global) const;
  hlo::Shape shardShape(const hlo::Shape& global) const;
  // Offsets of `device`'s shard in the global array.
  std::vector<int64_t> shardOffsets(int64_t device, const std::vector<int64_t>& global) const;
  // Elements of `device`'s shard that hold data (the rest is padding).
  std::vector<int64_t> validShardDims(int64_t device, const std::vector<int64_t>& global) const;

  // Groups of devices whose tile indices agree everywhere except along the
  // data dimensions `dims` (and along replication when `alongReplication`):
  // the devices a collective over those dimensions combines. Each group is
  // ordered by its index along `dims` (row-major), groups by first device.
  std::vector<std::vector<int64_t>> groupsAlong(const std::vector<int64_t>& dims, bool alongReplication = false) const;

  // Same tiles on the same devices; the order of devices that replicate
  // one tile does not matter.
  bool sameAs(const Tiling& other) const;
  // Same tile counts on every dimension (device order may differ).
  bool sameTiles(const Tiling& other) const { return tiles_ == other.tiles_ && replication_ == other.replication_; }

  // ------------------------------------------------ array operations
  // The data dims permuted: result dim i is dim perm[i] of this.
  Tiling transposed(const std::vector<int64_t>& perm) const;
  // Data dims `dims` stop being tiled: their devices join the replication.
  Tiling replicatedOn(const std::vector<int64_t>& dims) const;
  // A new data dimension holds the tiles of one replication factor: data dim
  // `dim` (currently 1 tile) becomes `count` tiles taken from the
  // replication dimension (which must divide). nullopt when it does not.
  std::optional<Tiling> tiledFromReplication(int64_t dim, int64_t count) const;
  // Data dims inserted (1 tile) / removed (must be 1 tile) at positions.
  Tiling withInsertedDims(const std::vector<int64_t>& positionsInResult) const;
  Tiling withRemovedDims(const std::vector<int64_t>& dims) const;
  // The same device array read with other data tiles whose non-1 entries
  // are the same in the same order (reshapes, inserted or removed dims).
  Tiling withTiles(std::vector<int64_t> tiles) const {
    Tiling t = *this;
    t.tiles_ = std::move(tiles);
    return t;
  }
  // Devices renamed by group order: canonical replication order (sorted within each tile).
  Tiling canonical() const;

 private:
  std::vector<int64_t> tiles_;
  int64_t replication_ = 1;
  int64_t manualGroups_ = 1;
  bool manual_ = false;
  std::vector<int64_t> devices_;
};

// A sharding per array leaf of a shape (a tuple sharding, or one sharding
// applied to every leaf).
struct LeafShardings {
  std::vector<Tiling> leaves;
};

// Iota form of a device list over `dims`, if it is a transposed iota.
std::optional<hlo::IotaList> findIota(const std::vector<int64_t>& dims, const std::vector<int64_t>& devices);

// The number of devices a sharding names (0 for replicated / manual / unknown).
int64_t shardingDeviceCount(const hlo::Sharding& s);

}  // namespace tpu::spmd
