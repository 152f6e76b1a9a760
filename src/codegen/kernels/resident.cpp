// VMEM-resident fusions. A fusion that none of the streaming kernels covers
// (flat loop, output, input and column-reduction fusions) is lowered
// instruction by instruction, each with its usual kernel. Its intermediates, though, do not
// go to HBM: when they fit, they live in the half of VMEM above the
// per-kernel budget, where no kernel's own tiles reach, and the instructions'
// DMAs move them VMEM to VMEM (dma.v2v, and v2s/s2v for scalar code). The
// fusion is then one kernel that reads its parameters from HBM and writes
// only its results there, whatever its instructions are: reductions feeding
// broadcasts (softmax, layer norm), concatenations, pads, gathers, dots with
// computed operands, multi-output roots.
#include <numeric>

#include "codegen/buffer_assignment.h"
#include "codegen/lowerer.h"

namespace tpu::codegen {

namespace {

// Control flow inside a fusion keeps its buffers in HBM: its regions
// stretch lifetimes in ways the fusion's own liveness does not see.
bool hasControlFlow(const Computation& c) {
  for (const auto& i : c.instructions()) {
    Opcode op = i->opcode();
    if (hlo::isControlFlow(op)) return true;
    if (op == Opcode::Fusion && i->fusedComputation() && hasControlFlow(*i->fusedComputation())) return true;
  }
  return false;
}

}  // namespace

void Lowerer::planResidentFusion(const Instruction& in, size_t firstBuf) {
  if (!in.fusedComputation() || hasControlFlow(*in.fusedComputation())) return;
  // One instruction is one kernel already.
  if (residentSections(*in.fusedComputation()) < 2) return;
  // The fusion's results stay in HBM; so does anything a result aliases.
  std::set<int> escaping(leaves_[&in].begin(), leaves_[&in].end());
  std::vector<int> ids;
  std::vector<LiveRange> ranges;
  for (size_t b = firstBuf; b < bufs_.size(); ++b) {
    const Buf& buf = bufs_[b];
    if (buf.kind != BufKind::Heap || escaping.count(static_cast<int>(b))) continue;
    ids.push_back(static_cast<int>(b));
    ranges.push_back({buf.def, buf.end, buf.bytes});
  }
  // The largest intermediates spill to HBM until the rest fit VMEM above
  // the kernels' budget (ties in program order, so the choice is stable).
  const uint64_t top = target_.memory.vmemBytes;
  const uint64_t capacity = top > residentBase() ? top - residentBase() : 0;
  std::vector<size_t> bySize(ids.size());
  std::iota(bySize.begin(), bySize.end(), 0);
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) { return ranges[a].bytes > ranges[b].bytes; });
  std::vector<bool> spilled(ids.size(), false);
  HeapAssignment ha;
  std::vector<size_t> kept;
  for (size_t next = 0;; ++next) {
    kept.clear();
    std::vector<LiveRange> keptRanges;
    for (size_t i = 0; i < ids.size(); ++i)
      if (!spilled[i]) {
        kept.push_back(i);
        keptRanges.push_back(ranges[i]);
      }
    ha = assignHeap(keptRanges);
    if (ha.heapBytes <= capacity || next == bySize.size()) break;
    spilled[bySize[next]] = true;
  }
  ResidentFusion r;
  for (size_t j = 0; j < kept.size(); ++j) {
    Buf& b = bufs_[static_cast<size_t>(ids[kept[j]])];
    b.kind = BufKind::Vmem;
    b.offset = residentBase() + ha.offsets[j];
  }
  r.vmemBytes = kept.empty() ? 0 : ha.heapBytes;
  for (size_t i = 0; i < ids.size(); ++i)
    if (spilled[i]) r.spilledBytes += ranges[i].bytes;
  resident_[&in] = r;
}

bool Lowerer::lowerResidentFusion(const Instruction& in) {
  beginKernel(in, "fusion");
  const std::string label = kernelLabel_;
  const ResidentFusion& r = resident_.at(&in);
  e_.comment(fmt::format("intermediates in VMEM [{}, {}){}: each instruction below is a section of this kernel",
                         residentBase(), residentBase() + r.vmemBytes,
                         r.spilledBytes ? fmt::format(", {} B of them spilled to HBM", r.spilledBytes) : ""));
  residentFlops_ = 0;
  residentVmem_ = 0;
  ++residentDepth_;
  bool ok = emitComputation(*in.fusedComputation());
  --residentDepth_;
  if (!ok) return false;
  // HBM traffic: the parameters read, the results written, and the spilled
  // intermediates written and read back.
  uint64_t hbmBytes = 2 * r.spilledBytes;
  for (const Instruction* o : in.operands())
    for (int b : leaves_[o]) hbmBytes += bufs_[static_cast<size_t>(b)].bytes;
  for (int b : leaves_[&in]) hbmBytes += bufs_[static_cast<size_t>(b)].bytes;
  kernelLabel_ = label;
  endKernel(residentFlops_, hbmBytes, residentVmem_ + r.vmemBytes);
  return !failed_;
}

}  // namespace tpu::codegen
