// The editing context the simplification passes share: the users of every
// instruction of one computation kept up to date while a pass rewrites it,
// fresh names, and the clean-up (dead instructions removed, operand-before-
// user order restored) once the pass is done with the computation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/computation.h"
#include "hlo/inline_vector.h"
#include "hlo/module.h"
#include "hlo/pointer_index.h"

namespace tpu::passes::simplify {

// Side effects of instructions including those of the computations they
// call (a while loop whose body writes an outfeed has one), memoised per
// computation.
class SideEffects {
 public:
  bool has(const hlo::Instruction& instruction);

 private:
  bool computationHas(const hlo::Computation& computation);
  std::unordered_map<const hlo::Computation*, bool> computations_;
};

// Whether removing `instruction` when nothing uses it is allowed: not a
// parameter, no side effect (its callees' included).
bool isRemovableWhenUnused(const hlo::Instruction& instruction, SideEffects& effects);

// Whether some instruction of `computation` satisfies `predicate`: passes
// look before they build a Rewriter, which most computations never need.
bool anyInstruction(const hlo::Computation& computation,
                    const std::function<bool(const hlo::Instruction&)>& predicate);

// Removes the instructions of `computation` that neither reach its root nor
// are kept by isRemovableWhenUnused (control predecessors of kept ones are
// kept). Returns how many were removed. Linear in the computation's size.
// `erased` are removed even when they have side effects (their uses must be
// gone: a call whose body was inlined).
int64_t removeDeadInstructions(hlo::Computation& computation,
                               const std::unordered_set<const hlo::Instruction*>& erased = {});

// Removes the parameters of fused computations that nothing in them reads
// any more (a rewrite inside a fusion can leave one: xor(p, p) -> 0), with
// the matching operands of every fusion calling them, and renumbers the
// rest: the verifier rejects unused parameters in fused computations.
// Computations also called by something other than a fusion are left alone.
// Returns whether anything changed.
bool removeUnusedFusionParameters(hlo::Module& module);

class Rewriter {
 public:
  explicit Rewriter(hlo::Computation& computation);
  Rewriter(const Rewriter&) = delete;
  Rewriter& operator=(const Rewriter&) = delete;

  hlo::Computation& computation() { return computation_; }
  // Distinct users, in no particular order; the root has no user entry for
  // being the root (see isRoot).
  std::span<hlo::Instruction* const> users(const hlo::Instruction* instruction) const;
  int64_t userCount(const hlo::Instruction* instruction) const {
    return static_cast<int64_t>(users(instruction).size());
  }
  // Used exactly once, by one operand slot of one user, and not the root.
  bool hasSingleUse(const hlo::Instruction* instruction) const;
  bool isRoot(const hlo::Instruction* instruction) const { return computation_.root() == instruction; }
  // Takes part in a control edge (either end): such instructions are left
  // alone by rewrites, as XLA's simplifier does.
  bool hasControlEdges(const hlo::Instruction* instruction) const { return controlled_.count(instruction) != 0; }
  bool hasSideEffect(const hlo::Instruction* instruction) { return effects_.has(*instruction); }

  // A new instruction appended to the computation, named `<base>.N`.
  hlo::Instruction* add(hlo::Opcode opcode, hlo::Shape shape, std::vector<hlo::Instruction*> operands,
                        std::string_view base, SourceLocation location = {});
  // A new instruction with `model`'s opcode, attributes (common ones too)
  // and called computations, and the given shape and operands.
  hlo::Instruction* addLike(const hlo::Instruction& model, hlo::Shape shape, std::vector<hlo::Instruction*> operands);
  hlo::Instruction* addConstant(hlo::Literal literal, std::string_view base, SourceLocation location = {});

  // Redirects every use of `old` (operands of its users, the root) to
  // `replacement`; `old` stays in the computation until finish().
  void replaceAllUses(hlo::Instruction* old, hlo::Instruction* replacement);
  // Sets one operand slot, keeping users right.
  void setOperand(hlo::Instruction* user, int64_t index, hlo::Instruction* operand);
  void setRoot(hlo::Instruction* root);
  // Removes `instruction`, which nothing may use any more, at finish()
  // even if it has side effects (they moved elsewhere).
  void erase(hlo::Instruction* instruction) {
    erased_.insert(instruction);
    changed_ = true;
  }
  // Records that the pass changed the computation in a way the calls above
  // do not see (an attribute edited in place).
  void markChanged() { changed_ = true; }
  bool changed() const { return changed_; }

  std::string freshName(std::string_view base);
  // `name` itself when no instruction of the computation has it, else a
  // fresh one (inlined instructions keep their names where they can:
  // elided constants are filled by name).
  std::string nameLike(const std::string& name);

  // Copies every instruction of `callee` except its parameters into this
  // computation, parameter i standing for args[i]; returns the copy of
  // the callee's root.
  hlo::Instruction* inlineBody(const hlo::Computation& callee, std::span<hlo::Instruction* const> args);

  // Removes the instructions this rewrite left dead (what was dead before
  // stays for dce) and restores operand-before-user order when anything
  // changed. Returns whether anything changed.
  bool finish();

 private:
  void ensureNames();
  std::string keepName(std::string name);
  bool removeNewlyDead();
  // Users are built from the IR on first need: a pass that finds nothing
  // to do in a computation never pays for them.
  using UserList = hlo::InlineVector<hlo::Instruction*, 2>;
  void ensureUsers() const;
  UserList& slotOf(const hlo::Instruction* instruction) const;
  static bool removeUser(UserList& list, const hlo::Instruction* user);
  void addUse(hlo::Instruction* operand, hlo::Instruction* user) const;
  void dropUse(hlo::Instruction* operand, hlo::Instruction* user);

  hlo::Computation& computation_;
  // Users of each instruction: slots_ maps an instruction to its list.
  mutable hlo::PointerIndex slots_;
  mutable std::vector<UserList> users_;
  mutable bool usersBuilt_ = false;
  std::unordered_set<const hlo::Instruction*> controlled_;
  SideEffects effects_;
  std::unordered_set<const hlo::Instruction*> erased_;
  std::vector<hlo::Instruction*> unused_;  // lost their last user here
  // Names in use, built on the first freshName(): views of the
  // instructions' names (which live as long as this Rewriter) and of the
  // new names kept in ownNames_.
  std::unordered_set<std::string_view> names_;
  std::vector<std::unique_ptr<std::string>> ownNames_;  // stable addresses; no allocation until used
  std::unordered_map<std::string, int64_t> nextSuffix_;
  bool namesBuilt_ = false;
  bool changed_ = false;
  bool appended_ = false;
};

}  // namespace tpu::passes::simplify
