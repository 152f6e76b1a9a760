#include "isa/encoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "isa/verify.h"
#include "support/bytes.h"
#include "support/elided_fill.h"

namespace tpu::isa {

namespace {

// Section tags, in the order they are written.
constexpr uint32_t tag(const char (&s)[5]) {
  return static_cast<uint32_t>(s[0]) | static_cast<uint32_t>(s[1]) << 8 | static_cast<uint32_t>(s[2]) << 16 |
         static_cast<uint32_t>(s[3]) << 24;
}
constexpr uint32_t kHead = tag("HEAD");
constexpr uint32_t kBufs = tag("BUFS");
constexpr uint32_t kData = tag("DATA");
constexpr uint32_t kDmad = tag("DMAD");
constexpr uint32_t kEntr = tag("ENTR");
constexpr uint32_t kCode = tag("CODE");
constexpr uint32_t kSyms = tag("SYMS");
constexpr uint32_t kKern = tag("KERN");  // optional (format 1.1)
constexpr uint32_t kFill = tag("FILL");  // optional (format 1.2): data blobs kept as their fill recipe

class BitPacker {
 public:
  void put(uint64_t value, int bits) {
    uint64_t v = bits == 64 ? value : value & ((uint64_t{1} << bits) - 1);
    for (int i = 0; i < bits; ++i, ++pos_)
      if (pos_ < 128 && ((v >> i) & 1)) words_[pos_ / 64] |= uint64_t{1} << (pos_ % 64);
  }
  int pos() const { return pos_; }
  const std::array<uint64_t, 2>& words() const { return words_; }

 private:
  std::array<uint64_t, 2> words_{};
  int pos_ = 0;
};

class BitUnpacker {
 public:
  explicit BitUnpacker(const std::array<uint64_t, 2>& words) : words_(words) {}
  uint64_t get(int bits) {
    uint64_t v = 0;
    for (int i = 0; i < bits; ++i, ++pos_)
      if (pos_ < 128 && ((words_[pos_ / 64] >> (pos_ % 64)) & 1)) v |= uint64_t{1} << i;
    return v;
  }
  int64_t getSigned(int bits) {
    uint64_t v = get(bits);
    if (bits < 64 && (v >> (bits - 1)) & 1) v |= ~uint64_t{0} << bits;
    return static_cast<int64_t>(v);
  }
  bool restIsZero() const {
    for (int p = pos_; p < 128; ++p)
      if ((words_[p / 64] >> (p % 64)) & 1) return false;
    return true;
  }

 private:
  const std::array<uint64_t, 2>& words_;
  int pos_ = 0;
};

uint64_t baseField(int32_t reg) { return reg < 0 ? 0 : static_cast<uint64_t>(reg) + 1; }

}  // namespace

bool isTpuBinary(std::string_view data) { return hasMagic(data, kTpuMagic); }

std::array<uint64_t, 2> encodeInstr(const Instr& instr) {
  BitPacker p;
  p.put(static_cast<uint64_t>(instr.opcode), kOpcodeBits);
  for (const Operand& o : instr.operands) {
    switch (o.kind) {
      case OperandKind::SReg:
      case OperandKind::VReg:
      case OperandKind::VMask:
      case OperandKind::Mxu:
      case OperandKind::Xlu: p.put(static_cast<uint64_t>(o.reg), operandEncodedBits(o.kind)); break;
      case OperandKind::Imm:
      case OperandKind::FImm:
      case OperandKind::Label:
      case OperandKind::SublaneMask:
      case OperandKind::DmaDesc: p.put(static_cast<uint64_t>(o.imm), operandEncodedBits(o.kind)); break;
      case OperandKind::SRegImm:
        p.put(o.form == SrcForm::SReg ? 1 : 0, 1);
        p.put(o.form == SrcForm::SReg ? static_cast<uint64_t>(o.reg) : static_cast<uint64_t>(o.imm), 32);
        break;
      case OperandKind::VSrc:
        p.put(static_cast<uint64_t>(o.form), 2);
        p.put(o.form == SrcForm::Imm ? static_cast<uint64_t>(o.imm) : static_cast<uint64_t>(o.reg), 32);
        break;
      case OperandKind::VmemAddr:
      case OperandKind::SmemAddr:
        p.put(baseField(o.reg), 7);
        p.put(static_cast<uint64_t>(o.imm), 32);
        break;
      case OperandKind::HbmAddr:
        p.put(o.buffer, 12);
        p.put(baseField(o.reg), 7);
        p.put(static_cast<uint64_t>(o.imm), 24);
        break;
      case OperandKind::Sem:
        p.put(o.form == SrcForm::SReg ? 1 : 0, 1);
        p.put(o.form == SrcForm::SReg ? static_cast<uint64_t>(o.reg) : static_cast<uint64_t>(o.imm), 6);
        break;
    }
  }
  return p.words();
}

std::optional<Instr> decodeInstr(const std::array<uint64_t, 2>& words, std::string& error) {
  BitUnpacker u(words);
  uint64_t op = u.get(kOpcodeBits);
  if (op == 0 || op > numOpcodes()) {
    error = fmt::format("unknown opcode {}", op);
    return std::nullopt;
  }
  Instr in;
  in.opcode = static_cast<Opcode>(op);
  const InstrDesc& d = in.desc();
  for (const OperandDesc& od : d.operands) {
    Operand o;
    o.kind = od.kind;
    switch (od.kind) {
      case OperandKind::SReg:
      case OperandKind::VReg:
      case OperandKind::VMask:
      case OperandKind::Mxu:
      case OperandKind::Xlu: o.reg = static_cast<int32_t>(u.get(operandEncodedBits(od.kind))); break;
      case OperandKind::Imm:
      case OperandKind::FImm: o.imm = u.getSigned(32); break;
      case OperandKind::Label:
      case OperandKind::SublaneMask:
      case OperandKind::DmaDesc: o.imm = static_cast<int64_t>(u.get(operandEncodedBits(od.kind))); break;
      case OperandKind::SRegImm:
        if (u.get(1)) {
          o.form = SrcForm::SReg;
          uint64_t r = u.get(32);
          if (r >= 64) {
            error = fmt::format("'{}': scalar register field {} out of range", d.mnemonic, r);
            return std::nullopt;
          }
          o.reg = static_cast<int32_t>(r);
        } else {
          o.form = SrcForm::Imm;
          o.imm = u.getSigned(32);
        }
        break;
      case OperandKind::VSrc: {
        uint64_t form = u.get(2);
        if (form > 2) {
          error = fmt::format("'{}': bad vector source form {}", d.mnemonic, form);
          return std::nullopt;
        }
        o.form = static_cast<SrcForm>(form);
        if (o.form == SrcForm::Imm) {
          o.imm = u.getSigned(32);
        } else {
          uint64_t r = u.get(32);
          if (r >= 64) {
            error = fmt::format("'{}': register field {} out of range", d.mnemonic, r);
            return std::nullopt;
          }
          o.reg = static_cast<int32_t>(r);
        }
        break;
      }
      case OperandKind::VmemAddr:
      case OperandKind::SmemAddr:
        o.reg = static_cast<int32_t>(u.get(7)) - 1;
        o.imm = u.getSigned(32);
        break;
      case OperandKind::HbmAddr:
        o.buffer = static_cast<uint32_t>(u.get(12));
        o.reg = static_cast<int32_t>(u.get(7)) - 1;
        o.imm = u.getSigned(24);
        break;
      case OperandKind::Sem:
        if (u.get(1)) {
          o.form = SrcForm::SReg;
          o.reg = static_cast<int32_t>(u.get(6));
        } else {
          o.form = SrcForm::Imm;
          o.imm = static_cast<int64_t>(u.get(6));
        }
        break;
    }
    if ((od.kind == OperandKind::SRegImm || od.kind == OperandKind::Sem) && o.form != SrcForm::SReg)
      o.reg = -1;
    in.operands.push_back(o);
  }
  if (!u.restIsZero()) {
    error = fmt::format("'{}': unused bits of the op are not zero", d.mnemonic);
    return std::nullopt;
  }
  return in;
}

namespace {

void writeSection(ByteWriter& out, uint32_t sectionTag, const ByteWriter& body) {
  out.u32(sectionTag);
  out.uvar(body.size());
  out.bytes(body.data());
}

}  // namespace

std::string encodeProgram(const Program& p) {
  ByteWriter out;
  {
    ByteWriter w;
    w.str(p.targetName);
    w.str(p.targetJson);
    writeSection(out, kHead, w);
  }
  {
    ByteWriter w;
    w.uvar(p.buffers.size());
    for (const Buffer& b : p.buffers) {
      w.str(b.name);
      w.u8(static_cast<uint8_t>(b.space));
      w.u8(static_cast<uint8_t>(b.dtype));
      w.uvar(b.shape.size());
      for (int64_t d : b.shape) w.svar(d);
      w.uvar(b.address);
      w.svar(b.init);
    }
    writeSection(out, kBufs, w);
  }
  {
    ByteWriter w;
    w.uvar(p.data.size());
    for (const DataBlob& d : p.data) w.str(d.fillType.empty() ? std::string_view(d.bytes) : std::string_view());
    writeSection(out, kData, w);
  }
  bool fills = false;
  for (const DataBlob& d : p.data) fills |= !d.fillType.empty();
  if (fills) {
    // Elided constants as (data index, element type, seed, element count):
    // graphsage's 23 MB of pseudo-random tables take a few bytes each.
    ByteWriter w;
    size_t n = 0;
    for (const DataBlob& d : p.data) n += !d.fillType.empty();
    w.uvar(n);
    for (size_t i = 0; i < p.data.size(); ++i) {
      const DataBlob& d = p.data[i];
      if (d.fillType.empty()) continue;
      w.uvar(i);
      w.str(d.fillType);
      w.u64(d.fillSeed);
      const int bytes = elidedFillElementBytes(d.fillType);
      w.uvar(bytes > 0 ? d.bytes.size() / static_cast<size_t>(bytes) : 0);
    }
    writeSection(out, kFill, w);
  }
  {
    ByteWriter w;
    w.uvar(p.dmaDescriptors.size());
    for (const DmaDescriptor& d : p.dmaDescriptors) {
      w.str(d.name);
      w.uvar(d.chunkBytes);
      w.uvar(d.dims.size());
      for (const DmaDim& dim : d.dims) {
        w.uvar(dim.count);
        w.svar(dim.srcStride);
        w.svar(dim.dstStride);
      }
    }
    writeSection(out, kDmad, w);
  }
  {
    ByteWriter w;
    w.uvar(p.entries.size());
    for (const Entry& e : p.entries) {
      w.str(e.name);
      w.uvar(e.args.size());
      for (uint32_t a : e.args) w.uvar(a);
      w.uvar(e.results.size());
      for (uint32_t r : e.results) w.uvar(r);
      w.uvar(e.start);
    }
    writeSection(out, kEntr, w);
  }
  {
    // Fixed-width bundles: a header word (op count) and `width` op slots of
    // two words each; width = the most ops any bundle of the program holds.
    ByteWriter w;
    size_t width = 1;
    for (const Bundle& b : p.bundles) width = std::max(width, b.instrs.size());
    w.u32(static_cast<uint32_t>(width));
    w.u32(static_cast<uint32_t>(p.bundles.size()));
    for (const Bundle& b : p.bundles) {
      w.u64(b.instrs.size());
      for (size_t i = 0; i < width; ++i) {
        std::array<uint64_t, 2> words{};
        if (i < b.instrs.size()) words = encodeInstr(b.instrs[i]);
        w.u64(words[0]);
        w.u64(words[1]);
      }
    }
    writeSection(out, kCode, w);
  }
  {
    ByteWriter w;
    w.uvar(p.labels.size());
    for (const Label& l : p.labels) {
      w.str(l.name);
      w.uvar(l.bundle);
    }
    writeSection(out, kSyms, w);
  }
  if (!p.kernels.empty()) {
    ByteWriter w;
    w.uvar(p.kernels.size());
    for (const KernelMeta& k : p.kernels) {
      w.str(k.label);
      w.str(k.kind);
      w.str(k.hlo);
      w.str(k.opName);
    }
    writeSection(out, kKern, w);
  }
  uint16_t minor = fills ? kTpuFormatMinor : p.kernels.empty() ? 0 : 1;
  return packContainer(kTpuMagic, ContainerVersion{kTpuFormatMajor, minor}, out.data());
}

namespace {

// The disassembly starts with `.target NAME`: the name must be one the
// assembler finds, and agree with the description embedded beside it.
std::string targetNameProblem(const Program& p) {
  if (p.targetJson.empty()) {
    std::vector<std::string> names = target::builtinTargetNames();
    if (std::find(names.begin(), names.end(), p.targetName) == names.end())
      return fmt::format("unknown target '{}' in the header and no target description", p.targetName);
    return {};
  }
  SourceFile json("embedded target", p.targetJson);
  DiagnosticEngine quiet;
  auto desc = target::parseTarget(json, quiet);
  if (!desc) return "the embedded target description is not valid: " + firstErrorMessage(quiet);
  if (desc->name != p.targetName)
    return fmt::format("the header names target '{}' but the embedded description is '{}'", p.targetName,
                       desc->name);
  return {};
}

}  // namespace

std::optional<Program> decodeProgram(const SourceFile& file, DiagnosticEngine& diags) {
  auto unpacked = unpackContainer(file, kTpuMagic, kTpuFormatMajor, "TPU program", diags);
  if (!unpacked) return std::nullopt;
  // Offsets in errors are positions in the decompressed payload when it was
  // compressed (the only positions that mean anything there).
  const std::string& payload = unpacked->payload;
  size_t base = unpacked->payloadOffset;
  auto fail = [&](size_t offset, std::string message) {
    diags.error(SourceLocation{&file, std::min(offset, file.size())}, std::move(message));
    return std::nullopt;
  };

  ByteReader top(payload, base);
  std::map<uint32_t, std::pair<std::string_view, size_t>> sections;
  while (top.ok() && !top.atEnd()) {
    size_t at = top.offset();
    uint32_t t = top.u32();
    uint64_t len = top.count(1);
    std::string_view body = top.bytes(len);
    if (!top.ok()) break;
    if (!sections.emplace(t, std::make_pair(body, at)).second)
      return fail(at, fmt::format("duplicate section {:#010x}", t));
  }
  if (!top.ok()) return fail(top.errorOffset(), "malformed section table: " + top.error());
  for (uint32_t need : {kHead, kBufs, kData, kDmad, kEntr, kCode, kSyms})
    if (!sections.count(need)) {
      char name[5] = {static_cast<char>(need), static_cast<char>(need >> 8), static_cast<char>(need >> 16),
                      static_cast<char>(need >> 24), 0};
      return fail(base, fmt::format("missing section '{}'", name));
    }
  auto reader = [&](uint32_t t) {
    auto& s = sections[t];
    return ByteReader(s.first, s.second + 8);
  };

  Program p;
  {
    ByteReader r = reader(kHead);
    p.targetName = r.str();
    p.targetJson = r.str();
    if (!r.ok()) return fail(r.errorOffset(), "header section: " + r.error());
    if (std::string problem = targetNameProblem(p); !problem.empty())
      return fail(sections[kHead].second, problem);
  }
  {
    ByteReader r = reader(kBufs);
    uint64_t n = r.count(6);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      Buffer b;
      size_t nameAt = r.offset();
      b.name = r.str();
      if (r.ok() && !isSymbolName(b.name)) return fail(nameAt, "buffer name the assembler cannot read back");
      size_t at = r.offset();
      uint8_t space = r.u8(), dtype = r.u8();
      if (r.ok() && (space > 2 || dtype > static_cast<uint8_t>(DType::Last)))
        return fail(at, fmt::format("buffer '{}': bad memory space or element type", b.name));
      b.space = static_cast<MemSpace>(space);
      b.dtype = static_cast<DType>(dtype);
      uint64_t rank = r.count(1);
      if (rank > 8) return fail(at, fmt::format("buffer '{}': rank {} is too large", b.name, rank));
      for (uint64_t k = 0; k < rank; ++k) b.shape.push_back(r.svar());
      b.address = r.uvar();
      b.init = static_cast<int32_t>(r.svar());
      p.buffers.push_back(std::move(b));
    }
    if (!r.ok()) return fail(r.errorOffset(), "buffer section: " + r.error());
    if (p.buffers.size() > 4096) return fail(base, "more than 4096 buffers");
  }
  {
    ByteReader r = reader(kData);
    uint64_t n = r.count(1);
    for (uint64_t i = 0; i < n && r.ok(); ++i) p.data.push_back(DataBlob{r.str(), {}, 0});
    if (!r.ok()) return fail(r.errorOffset(), "data section: " + r.error());
  }
  if (sections.count(kFill)) {
    // Expanded here, so everything downstream sees the values. Each blob is
    // sized by the buffer that takes it (no allocation a file can inflate).
    std::vector<uint64_t> blobBytes(p.data.size(), UINT64_MAX);
    for (const Buffer& b : p.buffers)
      if (b.init >= 0 && static_cast<size_t>(b.init) < p.data.size() && sizeFits(b) &&
          blobBytes[static_cast<size_t>(b.init)] == UINT64_MAX)
        blobBytes[static_cast<size_t>(b.init)] = b.sizeBytes();
    ByteReader r = reader(kFill);
    uint64_t n = r.count(4);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      size_t at = r.offset();
      uint64_t index = r.uvar();
      std::string type = r.str();
      uint64_t seed = r.u64();
      uint64_t count = r.uvar();
      if (!r.ok()) break;
      if (index >= p.data.size() || !p.data[index].bytes.empty() || !p.data[index].fillType.empty())
        return fail(at, fmt::format("fill entry {}: data #{} is not an empty blob of this program", i, index));
      const int bytes = elidedFillElementBytes(type);
      if (bytes == 0 || !isMetadataText(type))
        return fail(at, fmt::format("fill entry {}: unknown element type", i));
      if (blobBytes[index] == UINT64_MAX || count != blobBytes[index] / static_cast<uint64_t>(bytes) ||
          blobBytes[index] % static_cast<uint64_t>(bytes) != 0)
        return fail(at, fmt::format("fill entry {}: {} {} elements do not fill the buffer that takes data #{}", i,
                                    count, type, index));
      auto filled = elidedFillBytes(type, seed, count);
      if (!filled) return fail(at, fmt::format("fill entry {}: unknown element type", i));
      p.data[index] = DataBlob{std::move(*filled), std::move(type), seed};
    }
    if (!r.ok()) return fail(r.errorOffset(), "fill section: " + r.error());
    if (!r.atEnd()) return fail(r.offset(), "trailing bytes in the fill section");
  }
  {
    ByteReader r = reader(kDmad);
    uint64_t n = r.count(3);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      DmaDescriptor d;
      size_t nameAt = r.offset();
      d.name = r.str();
      if (r.ok() && !isSymbolName(d.name))
        return fail(nameAt, "DMA descriptor name the assembler cannot read back");
      d.chunkBytes = static_cast<uint32_t>(r.uvar());
      uint64_t dims = r.count(3);
      if (dims > 4) return fail(r.offset(), fmt::format("DMA descriptor '{}' has {} dimensions", d.name, dims));
      for (uint64_t k = 0; k < dims; ++k) {
        DmaDim dim;
        dim.count = static_cast<uint32_t>(r.uvar());
        dim.srcStride = r.svar();
        dim.dstStride = r.svar();
        d.dims.push_back(dim);
      }
      p.dmaDescriptors.push_back(std::move(d));
    }
    if (!r.ok()) return fail(r.errorOffset(), "DMA descriptor section: " + r.error());
    if (p.dmaDescriptors.size() > 1024) return fail(base, "more than 1024 DMA descriptors");
  }
  {
    ByteReader r = reader(kEntr);
    uint64_t n = r.count(4);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      Entry e;
      size_t nameAt = r.offset();
      e.name = r.str();
      if (r.ok() && !isSymbolName(e.name)) return fail(nameAt, "entry name the assembler cannot read back");
      uint64_t na = r.count(1);
      for (uint64_t k = 0; k < na; ++k) e.args.push_back(static_cast<uint32_t>(r.uvar()));
      uint64_t nr = r.count(1);
      for (uint64_t k = 0; k < nr; ++k) e.results.push_back(static_cast<uint32_t>(r.uvar()));
      e.start = static_cast<uint32_t>(r.uvar());
      p.entries.push_back(std::move(e));
    }
    if (!r.ok()) return fail(r.errorOffset(), "entry section: " + r.error());
  }
  {
    ByteReader r = reader(kCode);
    uint32_t width = r.u32();
    uint32_t count = r.u32();
    if (!r.ok()) return fail(r.errorOffset(), "code section: " + r.error());
    if (width == 0 || width > static_cast<uint32_t>(target::kMaxBundleSlots))
      return fail(r.offset() - 8, fmt::format("bundle width {} is outside 1..{}", width, target::kMaxBundleSlots));
    uint64_t bundleBytes = 8 + 16ull * width;
    if (count > r.remaining() / bundleBytes)
      return fail(r.offset() - 4, fmt::format("bundle count {} exceeds the code section", count));
    p.bundles.resize(count);
    for (uint32_t b = 0; b < count; ++b) {
      size_t at = r.offset();
      uint64_t header = r.u64();
      if (header > width) return fail(at, fmt::format("bundle {}: op count {} exceeds the width {}", b, header, width));
      for (uint32_t i = 0; i < width; ++i) {
        size_t opAt = r.offset();
        std::array<uint64_t, 2> words{r.u64(), r.u64()};
        if (i >= header) {
          if (words[0] || words[1]) return fail(opAt, fmt::format("bundle {}: unused slot {} is not zero", b, i));
          continue;
        }
        std::string error;
        auto in = decodeInstr(words, error);
        if (!in) return fail(opAt, fmt::format("bundle {}, op {}: {}", b, i, error));
        p.bundles[b].instrs.push_back(std::move(*in));
      }
    }
    if (!r.ok()) return fail(r.errorOffset(), "code section: " + r.error());
    if (!r.atEnd()) return fail(r.offset(), "trailing bytes in the code section");
  }
  {
    ByteReader r = reader(kSyms);
    uint64_t n = r.count(2);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      Label l;
      size_t nameAt = r.offset();
      l.name = r.str();
      if (r.ok() && !isSymbolName(l.name)) return fail(nameAt, "label name the assembler cannot read back");
      l.bundle = static_cast<uint32_t>(r.uvar());
      p.labels.push_back(std::move(l));
    }
    if (!r.ok()) return fail(r.errorOffset(), "symbol section: " + r.error());
  }
  if (sections.count(kKern)) {
    ByteReader r = reader(kKern);
    uint64_t n = r.count(4);
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      KernelMeta k;
      size_t at = r.offset();
      k.label = r.str();
      k.kind = r.str();
      k.hlo = r.str();
      k.opName = r.str();
      if (r.ok() && !(isMetadataText(k.kind) && isMetadataText(k.hlo) && isMetadataText(k.opName)))
        return fail(at, fmt::format("kernel '{}': metadata text the assembler cannot read back (a control "
                                    "character, '\"' or invalid UTF-8)",
                                    isSymbolName(k.label) ? k.label : std::string("?")));
      p.kernels.push_back(std::move(k));
    }
    if (!r.ok()) return fail(r.errorOffset(), "kernel metadata section: " + r.error());
    if (!r.atEnd()) return fail(r.offset(), "trailing bytes in the kernel metadata section");
  }
  if (!verifyProgram(p, nullptr, diags, SourceLocation{&file, sections[kCode].second})) return std::nullopt;
  return p;
}

}  // namespace tpu::isa
