// The lowering context: the state one lowering of a module carries from
// planning to emission -- buffers and the regions that bound their
// lifetimes, register pools, the planner's decisions (each instruction's
// kernel kind and plan, resident fusions, gemm custom calls, rng state) and
// statistics.
// The Lowerer (lowerer.h) holds the planner and the kernel emitters; they
// read and write this state, and nothing else lives across kernels.
// Internal to the codegen library.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/emitter.h"
#include "codegen/fusion_lowering.h"
#include "codegen/kernel_emitter.h"
#include "hlo/computation.h"
#include "hlo/instruction.h"
#include "hlo/module.h"
#include "support/diagnostics.h"
#include "target/target.h"

namespace tpu::codegen {

// Vmem: an intermediate of a VMEM-resident fusion (see lowerResidentFusion),
// at `offset` in VMEM. Scratch: a kernel's HBM buffer of its own (no initial
// data), for scratch past the heap's reach. The others live in HBM too.
enum class BufKind { Heap, Arg, Result, Const, Vmem, Scratch };
struct Buf {
  BufKind kind = BufKind::Heap;
  uint64_t bytes = 0;
  std::string name;  // Arg/Result/Const: the HBM buffer's name
  uint64_t offset = 0;  // Heap: offset in `heap`
  int64_t def = 0, end = 0;
  hlo::ElementType type = hlo::ElementType::F32;
  std::vector<int64_t> dims;
  const hlo::Instruction* constant = nullptr;
  std::vector<uint32_t> tableWords;  // Const without an instruction: a table llo-gen made (fft twiddles)
  bool aliasOfArg = false;  // storage of the argument of the same name (a donated one)
};

struct Region {
  int64_t start = 0, end = 0;
  int parent = -1;
};

class LoweringContext {
 protected:
  using Instruction = hlo::Instruction;
  using Computation = hlo::Computation;

  LoweringContext(const hlo::Module& m, const target::TargetDesc& t, const CodegenOptions& o, DiagnosticEngine& d)
      : module_(m),
        target_(t),
        options_(o),
        diags_(d),
        sregs_('s', 1, std::max(1, t.registers.sregs - 1)),
        vregs_('v', 0, t.registers.vregs),
        masks_('m', 0, t.registers.vmasks) {}

  const hlo::Module& module_;
  const target::TargetDesc& target_;
  const CodegenOptions& options_;
  DiagnosticEngine& diags_;
  bool failed_ = false;

  // Register pools: scalar, vector and mask registers of the kernel being
  // emitted.
  RegPool sregs_, vregs_, masks_;

  // Buffers: every HBM, VMEM and constant buffer, the leaves (buffers) of
  // each instruction's value, and the regions (control-flow bodies) that
  // bound their lifetimes.
  std::vector<Buf> bufs_;
  std::map<const Instruction*, std::vector<int>> leaves_;
  std::vector<Region> regions_;
  int64_t pos_ = 0;
  std::set<const Computation*> inlined_;
  std::vector<std::pair<int, int>> resultCopies_;  // (result buf, source buf)
  std::vector<int> results_;
  std::vector<int> args_;
  // Temporaries created during emission (padded operands): placed after
  // planning, each live only within its kernel (position-free slots).
  std::vector<int> scratch_;
  uint64_t scratchBytes_ = 0;
  uint64_t scratchTop_ = 0;
  uint64_t heapBytes_ = 0;

  // cuBLAS gemm custom calls as the dot instructions they stand for.
  std::map<const Instruction*, std::unique_ptr<Instruction>> gemmDots_;
  std::map<const Instruction*, std::pair<double, double>> gemmScales_;  // alpha, beta

  int rngState_ = -1;  // the rng_state argument buffer, once an rng is planned
  // Per computation: the order its instructions are planned and emitted in
  // (see loweringOrder), and which computations draw from the rng stream.
  std::map<const Computation*, std::vector<const Instruction*>> loweringOrders_;
  std::map<const Computation*, bool> drawsRngMemo_;

  // Resident fusions and where their intermediates live. While one is
  // emitted, its instructions' kernels are sections of its kernel and add
  // their figures to residentFlops_/residentVmem_.
  struct ResidentFusion {
    uint64_t vmemBytes = 0;     // its intermediates' share of VMEM
    uint64_t spilledBytes = 0;  // intermediates that did not fit, in HBM
  };
  std::map<const Instruction*, ResidentFusion> resident_;
  int fusionPlanDepth_ = 0;  // fusions being planned instruction by instruction
  // The kernel kind of every instruction that emits a kernel, and its plan,
  // decided once in planning (Lowerer::decideKernel); emission reads it.
  std::map<const Instruction*, KernelDecision> decisions_;
  int residentDepth_ = 0;
  double residentFlops_ = 0;
  uint64_t residentVmem_ = 0;


  // Statistics: per kernel, filled by beginKernel/endKernel.
  CodegenStats stats_;
  std::string kernelLabel_;
  std::string kernelHlo_;
  std::string kernelOpName_;
  std::string kernelKind_;
  int kernelCount_ = 0;
};

}  // namespace tpu::codegen
