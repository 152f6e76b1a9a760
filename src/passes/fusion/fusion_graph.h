// The instructions of one computation as a graph of nodes for the fusion
// passes. A node is the set of instructions one kernel computes: at first
// every instruction is a node of its own; fusing a producer into a consumer
// makes one node of their union, and a producer fused into several
// consumers is a member of each (it is recomputed in every kernel). The
// instructions themselves stay untouched until the passes are done;
// `buildFusedComputation` then writes each node of several members as an
// HLO fusion (and the cost model builds candidates the same way aside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/inline_vector.h"
#include "hlo/module.h"
#include "hlo/pointer_index.h"

namespace tpu::fusion {

class FusionGraph {
 public:
  struct Node {
    std::vector<int32_t> members;  // instruction indices, ascending: operands come first
    std::vector<int32_t> outputs;  // members whose values other nodes read, ascending
    bool alive = true;
  };

  explicit FusionGraph(hlo::Computation& computation);

  hlo::Computation& computation() const { return *computation_; }
  int32_t instructionCount() const { return static_cast<int32_t>(instructions_.size()); }
  hlo::Instruction* instruction(int32_t i) const { return instructions_[static_cast<size_t>(i)]; }
  // -1 when `in` is not an instruction of this computation.
  int32_t indexOf(const hlo::Instruction* in) const;
  // Operand indices of instruction i, in operand order; an operand that is
  // get-tuple-element of a tuple of this computation is that element.
  std::span<const int32_t> operandsOf(int32_t i) const { return slice(operandStart_, operandList_, i); }
  // Live instructions reading instruction i, ascending, each once.
  std::span<const int32_t> usersOf(int32_t i) const { return slice(userStart_, userList_, i); }
  int32_t rootIndex() const { return root_; }

  int32_t nodeCount() const { return static_cast<int32_t>(nodes_.size()); }
  const Node& node(int32_t n) const { return nodes_[static_cast<size_t>(n)]; }
  // The node exporting instruction i's value (-1: no node exports it).
  int32_t nodeOf(int32_t i) const { return exporter_[static_cast<size_t>(i)]; }
  bool contains(int32_t n, int32_t i) const;
  // Values node n reads from outside (instruction indices), in first-use order.
  std::vector<int32_t> inputs(int32_t n) const;
  // Live nodes reading an output of n, ascending. `result` is set when an
  // output of n is the computation's root. With a `limit`, the list may stop
  // early once it holds more than `limit` nodes (then only its size says
  // something: more than the limit).
  std::vector<int32_t> users(int32_t n, bool* result = nullptr, size_t limit = SIZE_MAX) const;
  // The same list when it holds at most `limit` nodes; else some `limit`+1
  // of them (for callers that only need to know that there are more):
  // read once, without sorting, so a value read all over the module costs
  // the limit, not its readers.
  std::vector<int32_t> usersWithin(int32_t n, bool* result, size_t limit) const;

  // How many live nodes read value i from outside (what readers(i).size()
  // would say), kept as nodes come and go: a value read all over the module
  // is found to have too many users without reading them each time one of
  // its readers is fused.
  int32_t readerCount(int32_t i) const { return readerCount_[static_cast<size_t>(i)]; }

  // Live nodes holding instruction i, ascending.
  std::vector<int32_t> holders(int32_t i) const;
  // Live nodes reading value i from outside, ascending.
  std::vector<int32_t> readers(int32_t i) const;
  // Whether instruction i takes part in control dependencies (then it
  // stays where it is).
  bool ordered(int32_t i) const { return ordered_[static_cast<size_t>(i)] != 0; }
  // Whether instruction i reaches the root or has side effects. Dead code
  // takes no part in fusion (its node is dead from the start).
  bool live(int32_t i) const { return live_[static_cast<size_t>(i)] != 0; }
  // Whether every operand's index is below its user's (program order is
  // an operand-before-user order).
  bool topological() const { return topological_; }

  // A new live node; it exports `outputs` (members). Kill the nodes it
  // replaces first, so their exports are released.
  int32_t addNode(std::vector<int32_t> members, std::vector<int32_t> outputs);
  void kill(int32_t n);
  // Sorted union of the members of a and b.
  std::vector<int32_t> unionMembers(int32_t a, int32_t b) const;

  // Whether some live node other than a and b reads value i from outside.
  bool readByOtherThan(int32_t i, int32_t a, int32_t b) const;

  // Whether node `to` depends on node `from` through a path of at least two
  // edges (through another node). Looks at no more than `budget` nodes and
  // answers true when it runs out, so callers stay safe and linear.
  bool reachesIndirectly(int32_t from, int32_t to, int budget = 64) const;

 private:
  hlo::Computation* computation_;
  std::vector<hlo::Instruction*> instructions_;
  hlo::PointerIndex index_;  // open addressing: no heap node per instruction
  // Operand and user lists, fixed once built, as one flat array each
  // (list i is list_[start_[i]] .. list_[start_[i + 1]]): no heap block
  // per instruction to allocate, chase and free.
  std::vector<uint32_t> operandStart_, userStart_;
  std::vector<int32_t> operandList_, userList_;
  static std::span<const int32_t> slice(const std::vector<uint32_t>& start, const std::vector<int32_t>& list,
                                        int32_t i) {
    const size_t at = static_cast<size_t>(i);
    return {list.data() + start[at], list.data() + start[at + 1]};
  }
  int32_t root_ = -1;
  std::vector<Node> nodes_;
  std::vector<int32_t> exporter_;
  // Per instruction, the nodes holding it (dead ones too): a few each.
  std::vector<hlo::InlineVector<int32_t, 4>> containing_;
  std::vector<char> ordered_;
  std::vector<char> live_;  // per instruction: nodes that hold it (dead ones too)
  bool topological_ = true;  // every operand index below its user's
  // Scratch of reachesIndirectly and usersWithin (reused: they run for most
  // candidate edges).
  uint32_t nextEpoch() const;  // a fresh stamp_ value (stamp_ sized to the nodes)
  mutable std::vector<uint32_t> stamp_;
  // Per instruction: readerCount(), and the stamps countReads() dedupes with.
  std::vector<int32_t> readerCount_;
  std::vector<uint32_t> valueStamp_;
  uint32_t valueEpoch_ = 0;
  // Adds `delta` to the reader count of every value node n reads from outside.
  void countReads(int32_t n, int32_t delta);
  mutable uint32_t epoch_ = 0;
  mutable std::vector<int32_t> walk_;
};

// Module-unique names: `fresh("fusion")` gives fusion, fusion.1, ...
// The names of the module's instructions and computations are held as views
// (no copy of every name of a large module): release() the name of an
// instruction before it goes, and use the table no more once computations
// were removed.
class NameTable {
 public:
  explicit NameTable(const hlo::Module& module);
  std::string fresh(const std::string& base);
  void release(const std::string& name) { used_.erase(name); }

 private:
  std::string_view keep(std::string name);
  // Only looked up, never iterated: hashed sets keep the output deterministic.
  std::unordered_set<std::string_view> used_;
  std::deque<std::string> own_;  // names made here (stable addresses)
  std::unordered_map<std::string, int64_t> next_;
};

// The attributes an instruction the fusion passes create needs: the
// defaults but for one small field (a parameter's number, an element's
// index, a fusion's kind).
enum class SmallAttribute : uint8_t { ParameterNumber, TupleIndex, FusionKind };

// Sets `field` of `in`, an instruction without attributes yet, to `value`
// by sharing a block made once per (field, value) for small values: a
// reference count instead of a 760-byte block of its own per parameter of
// every candidate and fusion (and fewer lines for the verifier and the
// printer to read). Other values, or an instruction with attributes, get
// the field set in their own block.
void setSmallAttribute(hlo::Instruction& in, SmallAttribute field, int64_t value);

struct BuiltFusion {
  hlo::Computation* computation = nullptr;
  std::vector<int32_t> parameters;  // the value (instruction index) each parameter stands for
};

// Appends to `module` a computation named `name` that computes `members` of
// `graph` (ascending indices); values read from outside become parameters
// in first-use order, except scalar constants, which are copied in. Members
// that are fusions are inlined. The root is the one output, or a tuple of
// them. With `names`, copies get module-unique names (the original name
// when free); without, they keep the originals (for candidates built aside).
BuiltFusion buildFusedComputation(hlo::Module& module, const FusionGraph& graph, const std::vector<int32_t>& members,
                                  const std::vector<int32_t>& outputs, const std::string& name, NameTable* names);

}  // namespace tpu::fusion
