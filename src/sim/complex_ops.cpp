// Complex rows (vmul.c64, vexp.c128, ...): the results are std::complex
// library math on the host (Annex G multiply and divide, libm-based
// transcendentals), so the simulator calls the interpreter's complex kernels
// and simulated results equal interpreted ones bit for bit.
#include <fmt/format.h>

#include <array>
#include <complex>
#include <cstring>
#include <memory>

#include "eval/elementwise.h"
#include "sim/machine.h"

namespace tpu::sim {

using eval::BinaryOp;
using eval::KType;
using eval::UnaryOp;
using isa::Opcode;

namespace {

enum class ComplexShape : uint8_t { None, Binary, Unary, Abs };

struct ComplexOp {
  ComplexShape shape = ComplexShape::None;
  KType type = KType::C64;
  BinaryOp binary = BinaryOp::Mul;
  UnaryOp unary = UnaryOp::Exp;
};

ComplexOp complexOp(Opcode op) {
  auto bin = [](BinaryOp b, KType t) { return ComplexOp{ComplexShape::Binary, t, b, UnaryOp::Exp}; };
  auto un = [](UnaryOp u, KType t) { return ComplexOp{ComplexShape::Unary, t, BinaryOp::Mul, u}; };
  auto abs = [](KType t) { return ComplexOp{ComplexShape::Abs, t, BinaryOp::Mul, UnaryOp::Abs}; };
  switch (op) {
    case Opcode::VMulC64:
      return bin(BinaryOp::Mul, KType::C64);
    case Opcode::VDivC64:
      return bin(BinaryOp::Div, KType::C64);
    case Opcode::VPowC64:
      return bin(BinaryOp::Pow, KType::C64);
    case Opcode::VMulC128:
      return bin(BinaryOp::Mul, KType::C128);
    case Opcode::VDivC128:
      return bin(BinaryOp::Div, KType::C128);
    case Opcode::VPowC128:
      return bin(BinaryOp::Pow, KType::C128);
#define TPU_COMPLEX_UNARY(Name)           \
  case Opcode::V##Name##C64:              \
    return un(UnaryOp::Name, KType::C64); \
  case Opcode::V##Name##C128:             \
    return un(UnaryOp::Name, KType::C128);
      TPU_COMPLEX_UNARY(Exp)
      TPU_COMPLEX_UNARY(Expm1)
      TPU_COMPLEX_UNARY(Log)
      TPU_COMPLEX_UNARY(Log1p)
      TPU_COMPLEX_UNARY(Sqrt)
      TPU_COMPLEX_UNARY(Rsqrt)
      TPU_COMPLEX_UNARY(Tanh)
      TPU_COMPLEX_UNARY(Sin)
      TPU_COMPLEX_UNARY(Cos)
      TPU_COMPLEX_UNARY(Tan)
      TPU_COMPLEX_UNARY(Logistic)
      TPU_COMPLEX_UNARY(Sign)
#undef TPU_COMPLEX_UNARY
    case Opcode::VAbsC64:
      return abs(KType::C64);
    case Opcode::VAbsC128:
      return abs(KType::C128);
    default:
      return {};
  }
}

// Element i of a complex operand as the interpreter stores it: c64 is the
// words (re, im) of registers a and ai; c128 the words (re lo, re hi, im lo,
// im hi) of a, ah, ai, aih (b likewise).
using Words = std::array<uint32_t, kVregWords * 4>;

void gather(const std::array<const uint32_t*, 4>& regs, int words, Words& out) {
  for (int i = 0; i < kVregWords; ++i)
    for (int w = 0; w < words; ++w) out[static_cast<size_t>(i * words + w)] = regs[static_cast<size_t>(w)][i];
}

void scatterWord(const Words& in, int words, int word, uint32_t* d) {
  for (int i = 0; i < kVregWords; ++i) d[i] = in[static_cast<size_t>(i * words + word)];
}

}  // namespace

bool Machine::isComplexOp(Opcode opcode) const { return complexOp(opcode).shape != ComplexShape::None; }

bool Machine::execComplex(const DecodedOp& op) {
  ComplexOp c = complexOp(op.opcode);
  const int words = c.type == KType::C64 ? 2 : 4;
  auto reg = [&](const Src& s) { return static_cast<const uint32_t*>(vregs_[s.reg].w); };
  auto parts = [&](const Src& re, const Src& reh, const Src& im, const Src& imh) {
    if (c.type == KType::C64) return std::array<const uint32_t*, 4>{reg(re), reg(im), nullptr, nullptr};
    return std::array<const uint32_t*, 4>{reg(re), reg(reh), reg(im), reg(imh)};
  };
  auto a = std::make_unique<Words>(), r = std::make_unique<Words>();
  gather(parts(op.a, op.ah, op.ai, op.aih), words, *a);
  bool ok = true;
  switch (c.shape) {
    case ComplexShape::Binary: {
      auto b = std::make_unique<Words>();
      gather(parts(op.b, op.bh, op.bi, op.bih), words, *b);
      ok = eval::binaryKernel(c.binary, c.type, a->data(), b->data(), r->data(), kVregWords, 64);
      break;
    }
    case ComplexShape::Unary:
      ok = eval::unaryKernel(c.unary, c.type, a->data(), r->data(), kVregWords, words * 32);
      break;
    case ComplexShape::Abs:
      // |z| is a real of half the width: f32 (one word) or f64 (two).
      ok = eval::complexPartKernel(2, c.type, a->data(), r->data(), kVregWords);
      scatterWord(*r, words / 2, c.type == KType::C64 ? 0 : op.word, vregs_[op.d].w);
      return ok || failf(fmt::format("internal: {} has no host kernel", op.desc->mnemonic));
    case ComplexShape::None:
      return failf(fmt::format("internal: {} is not a complex op", op.desc->mnemonic));
  }
  if (!ok) return failf(fmt::format("internal: {} has no host kernel", op.desc->mnemonic));
  scatterWord(*r, words, op.word, vregs_[op.d].w);
  return true;
}

}  // namespace tpu::sim
