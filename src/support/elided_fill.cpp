#include "support/elided_fill.h"

#include <cstring>

#include "support/float_format.h"

namespace tpu {

namespace {

enum class FillClass { None, F32, Bf16, F16, F64, NarrowFloat, C64, C128, Pred, Signed, Unsigned };

struct FillType {
  FillClass cls = FillClass::None;
  int bytes = 0;  // storage per element
  int bits = 0;   // integers: value width
  FloatFormat format = FloatFormat::BF16;
};

FillType fillType(std::string_view t) {
  struct Int {
    std::string_view name;
    bool isSigned;
    int bits, bytes;
  };
  static constexpr Int ints[] = {{"s64", true, 64, 8}, {"s32", true, 32, 4}, {"s16", true, 16, 2}, {"s8", true, 8, 1},
                                 {"s4", true, 4, 1},   {"s2", true, 2, 1},   {"s1", true, 1, 1},   {"u64", false, 64, 8},
                                 {"u32", false, 32, 4}, {"u16", false, 16, 2}, {"u8", false, 8, 1}, {"u4", false, 4, 1},
                                 {"u2", false, 2, 1},  {"u1", false, 1, 1}};
  if (t == "f32") return {FillClass::F32, 4};
  if (t == "bf16") return {FillClass::Bf16, 2};
  if (t == "f16") return {FillClass::F16, 2};
  if (t == "f64") return {FillClass::F64, 8};
  if (t == "c64") return {FillClass::C64, 8};
  if (t == "c128") return {FillClass::C128, 16};
  if (t == "pred") return {FillClass::Pred, 1};
  for (const Int& i : ints)
    if (t == i.name) return {i.isSigned ? FillClass::Signed : FillClass::Unsigned, i.bytes, i.bits};
  if (auto f = floatFormatFromName(t)) {
    // One byte per element (f8, f6 and f4 codes in the low bits), as literals keep them.
    if (floatFormatInfo(*f).totalBits <= 8) return {FillClass::NarrowFloat, 1, 0, *f};
  }
  return {};
}

void putLE(char* p, int bytes, uint64_t v) {
  for (int k = 0; k < bytes; ++k) p[k] = static_cast<char>((v >> (8 * k)) & 0xff);
}

}  // namespace

int elidedFillElementBytes(std::string_view type) { return fillType(type).bytes; }

std::optional<std::string> elidedFillBytes(std::string_view type, uint64_t seed, uint64_t count) {
  const FillType ft = fillType(type);
  if (ft.cls == FillClass::None) return std::nullopt;
  std::string out(count * static_cast<uint64_t>(ft.bytes), '\0');
  ElidedFillStream rng{seed};
  char* p = out.data();
  for (uint64_t i = 0; i < count; ++i, p += ft.bytes) {
    switch (ft.cls) {
      case FillClass::F32: {
        float f = static_cast<float>(rng.uniform());
        std::memcpy(p, &f, 4);
        break;
      }
      case FillClass::Bf16:
      case FillClass::F16: {
        float f = static_cast<float>(rng.uniform());
        uint16_t h = ft.cls == FillClass::Bf16 ? floatToBf16(f) : floatToHalf(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case FillClass::F64: {
        double d = rng.uniform();
        std::memcpy(p, &d, 8);
        break;
      }
      case FillClass::NarrowFloat:
        putLE(p, 1, encodeFloat(ft.format, static_cast<double>(static_cast<float>(rng.uniform()))));
        break;
      case FillClass::C64: {
        double re = rng.uniform();
        double im = rng.uniform();
        float parts[2] = {static_cast<float>(re), static_cast<float>(im)};
        std::memcpy(p, parts, 8);
        break;
      }
      case FillClass::C128: {
        double parts[2];
        parts[0] = rng.uniform();
        parts[1] = rng.uniform();
        std::memcpy(p, parts, 16);
        break;
      }
      case FillClass::Pred:
        p[0] = static_cast<char>(rng.next() & 1);
        break;
      case FillClass::Signed: {
        uint64_t d = rng.next();
        int64_t v = ft.bits >= 4 ? static_cast<int64_t>(d % 9) - 4
                                 : static_cast<int64_t>(d % (uint64_t{1} << ft.bits)) - (int64_t{1} << (ft.bits - 1));
        putLE(p, ft.bytes, static_cast<uint64_t>(v));  // sub-byte types sign-extended into their byte
        break;
      }
      case FillClass::Unsigned: {
        uint64_t d = rng.next();
        putLE(p, ft.bytes, ft.bits >= 4 ? d % 9 : d % (uint64_t{1} << ft.bits));
        break;
      }
      case FillClass::None:
        break;
    }
  }
  return out;
}

}  // namespace tpu
