// The registry of kernel kinds (kernel_emitter.h): every kind the lowering
// has, in the order the planner tries them, each as its three functions --
// matches, plan, emit -- over the Lowerer's methods in its kernels/ file.
// The planner (decideKernel) consults it once per instruction and records
// the kind and its plan; emission (emitKernel) runs the recorded kind.
#include <fmt/format.h>

#include "codegen/kernel_emitter.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

template <Opcode op>
bool opcodeIs(const Lowerer&, const Instruction& in) {
  return in.opcode() == op;
}

// The opcodes planMisc and emitMisc take (kernels/misc.cpp).
bool isMiscOpcode(Opcode op) {
  switch (op) {
    case Opcode::PartitionId:
    case Opcode::ReplicaId:
    case Opcode::GetDimensionSize:
    case Opcode::CopyStart:
    case Opcode::CopyDone:
    case Opcode::AsyncStart:
    case Opcode::AsyncUpdate:
    case Opcode::AsyncDone:
    case Opcode::RngBitGenerator:
    case Opcode::Rng:
    case Opcode::RngGetAndUpdateState:
    case Opcode::CustomCall: return true;
    default: return false;
  }
}

}  // namespace

const std::vector<KernelEmitter>& Lowerer::kernelEmitters() {
  using L = Lowerer;
  using I = Instruction;
  using P = std::any;
  static const std::vector<KernelEmitter> emitters = {
      // Fusion kinds: the streaming kernels in the order they are tried
      // (the first that matches wins), then the resident kernel, which
      // takes every other fusion.
      {"loop", FusionLowering::Loop, [](const L& l, const I& f) { return l.loopFusion(f, nullptr); },
       [](const L& l, const I& f, P& p) { return l.loopFusion(f, &p.emplace<LoopFusion>()); },
       [](L& l, const I& f, const P& p) { return l.lowerLoopFusion(f, std::any_cast<const LoopFusion&>(p)); }},
      {"output", FusionLowering::Output, [](const L& l, const I& f) { return l.matmulEpilogueFusion(f, nullptr); },
       [](const L& l, const I& f, P& p) { return l.matmulEpilogueFusion(f, &p.emplace<MatmulEpilogue>()); },
       [](L& l, const I& f, const P& p) { return l.lowerMatmulEpilogueFusion(f, std::any_cast<const MatmulEpilogue&>(p)); }},
      {"input", FusionLowering::Input, [](const L& l, const I& f) { return l.inputFusion(f, nullptr); },
       [](const L& l, const I& f, P& p) { return l.inputFusion(f, &p.emplace<ReducePrologue>()); },
       [](L& l, const I& f, const P& p) { return l.lowerInputFusion(f, std::any_cast<const ReducePrologue&>(p)); }},
      {"column-reduction", FusionLowering::ColumnReduction,
       [](const L& l, const I& f) { return l.columnReduceFusion(f, nullptr); },
       [](const L& l, const I& f, P& p) { return l.columnReduceFusion(f, &p.emplace<ColumnReduceFusion>()); },
       [](L& l, const I& f, const P& p) {
         return l.lowerColumnReduceFusion(f, std::any_cast<const ColumnReduceFusion&>(p));
       }},
      {"rows", FusionLowering::Rows, [](const L& l, const I& f) { return l.rowFusion(f, nullptr); },
       [](const L& l, const I& f, P& p) { return l.rowFusion(f, &p.emplace<RowFusion>()); },
       [](L& l, const I& f, const P& p) { return l.lowerRowFusion(f, std::any_cast<const RowFusion&>(p)); }},
      {"attention", FusionLowering::Attention, [](const L& l, const I& f) { return l.attentionFusion(f, nullptr); },
       [](const L& l, const I& f, P& p) { return l.attentionFusion(f, &p.emplace<AttentionFusion>()); },
       [](L& l, const I& f, const P& p) {
         return l.lowerAttentionFusion(f, std::any_cast<const AttentionFusion&>(p));
       }},
      {"resident", FusionLowering::Resident, opcodeIs<Opcode::Fusion>, nullptr,
       [](L& l, const I& f, const P&) {
         // One kernel when planning placed its intermediates (nested
         // fusions are part of the outer one), else instruction by
         // instruction.
         if (l.resident_.count(&f)) return l.lowerResidentFusion(f);
         return l.emitComputation(*f.fusedComputation());
       }},
      // Instruction kinds, one per opcode (elementwise: every elementwise
      // opcode and map).
      {"broadcast", std::nullopt, opcodeIs<Opcode::Broadcast>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerBroadcast(in); }},
      {"transpose", std::nullopt, opcodeIs<Opcode::Transpose>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerTranspose(in); }},
      {"slice", std::nullopt, opcodeIs<Opcode::Slice>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerSlice(in); }},
      {"concatenate", std::nullopt, opcodeIs<Opcode::Concatenate>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerConcatenate(in); }},
      {"pad", std::nullopt, opcodeIs<Opcode::Pad>, nullptr, [](L& l, const I& in, const P&) { return l.lowerPad(in); }},
      {"reverse", std::nullopt, opcodeIs<Opcode::Reverse>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerReverse(in); }},
      {"iota", std::nullopt, opcodeIs<Opcode::Iota>, nullptr, [](L& l, const I& in, const P&) { return l.lowerIota(in); }},
      {"reduce", std::nullopt, opcodeIs<Opcode::Reduce>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerReduce(in); }},
      {"dot", std::nullopt, opcodeIs<Opcode::Dot>, nullptr, [](L& l, const I& in, const P&) { return l.lowerDot(in); }},
      {"convolution", std::nullopt, opcodeIs<Opcode::Convolution>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerConvolution(in); }},
      {"dynamic-slice", std::nullopt, opcodeIs<Opcode::DynamicSlice>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerDynamicSlice(in, false); }},
      {"dynamic-update-slice", std::nullopt, opcodeIs<Opcode::DynamicUpdateSlice>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerDynamicSlice(in, true); }},
      {"reduce-window", std::nullopt, opcodeIs<Opcode::ReduceWindow>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerReduceWindow(in); }},
      {"select-and-scatter", std::nullopt, opcodeIs<Opcode::SelectAndScatter>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerSelectAndScatter(in); }},
      {"sort", std::nullopt, opcodeIs<Opcode::Sort>, nullptr, [](L& l, const I& in, const P&) { return l.lowerSort(in); }},
      {"gather", std::nullopt, opcodeIs<Opcode::Gather>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerGather(in); }},
      {"scatter", std::nullopt, opcodeIs<Opcode::Scatter>, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerScatter(in); }},
      {"fft", std::nullopt, opcodeIs<Opcode::Fft>, nullptr, [](L& l, const I& in, const P&) { return l.lowerFft(in); }},
      // Not arrays in and out of one kernel: collectives (kernels/collectives.cpp,
      // planned by planCollective) and ids, async wrappers, copy-start/done,
      // rng and custom calls (kernels/misc.cpp, planned by planMisc).
      {"collective", std::nullopt, [](const L&, const I& in) { return hlo::isCollective(in.opcode()); }, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerCollective(in); }},
      {"misc", std::nullopt, [](const L&, const I& in) { return isMiscOpcode(in.opcode()); }, nullptr,
       [](L& l, const I& in, const P&) {
         bool handled = false;
         bool ok = l.emitMisc(in, handled);
         return handled ? ok : l.fail(in, "llo-gen: internal error: a misc kernel emitted nothing");
       }},
      // A bitcast-convert that repacks 4-bit (or narrower) elements; the
      // others are renames of their operand.
      {"nibble-bitcast", std::nullopt,
       [](const L& l, const I& in) { return in.opcode() == Opcode::BitcastConvert && l.bitcastRepacksNibbles(in); },
       nullptr, [](L& l, const I& in, const P&) { return l.lowerNibbleBitcast(in); }},
      {"elementwise", std::nullopt,
       [](const L&, const I& in) { return hlo::isElementwise(in.opcode()) || in.opcode() == Opcode::Map; }, nullptr,
       [](L& l, const I& in, const P&) { return l.lowerElementwiseInstr(in); }},
  };
  return emitters;
}

KernelDecision Lowerer::decideKernel(const Instruction& in) const {
  const bool fusion = in.opcode() == Opcode::Fusion;
  for (const KernelEmitter& k : kernelEmitters()) {
    if (k.fusionKind.has_value() != fusion) continue;
    KernelDecision d;
    if (k.plan ? !k.plan(*this, in, d.plan) : !k.matches(*this, in)) continue;
    d.emitter = &k;
    return d;
  }
  return {};
}

FusionLowering Lowerer::classifyFusion(const Instruction& in) const {
  for (const KernelEmitter& k : kernelEmitters())
    if (k.fusionKind && k.matches(*this, in)) return *k.fusionKind;
  return FusionLowering::Resident;
}

bool Lowerer::emitKernel(const Instruction& in) {
  auto it = decisions_.find(&in);
  if (it == decisions_.end())
    return fail(in, fmt::format("llo-gen: internal error: '{}' reached emission unplanned", in.name()));
  if (!it->second.emitter)
    return fail(in, fmt::format("llo-gen: opcode '{}' is not supported yet (instruction '{}')",
                                hlo::opcodeName(in.opcode()), in.name()));
  return it->second.emitter->emit(*this, in, it->second.plan);
}

}  // namespace tpu::codegen
