#include "spmd/shardy.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <set>

#include "spmd/sharding.h"

namespace tpu::spmd {

namespace {

struct Mesh {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::vector<int64_t> deviceIds;  // empty = iota
};

// A small cursor over the attribute text (quotes may arrive escaped).
class Cursor {
 public:
  explicit Cursor(std::string text) : s_(std::move(text)) {}
  void skip() {
    while (p_ < s_.size() && (std::isspace(static_cast<unsigned char>(s_[p_])) || s_[p_] == '\\')) ++p_;
  }
  bool eat(std::string_view t) {
    skip();
    if (s_.compare(p_, t.size(), t) == 0) {
      p_ += t.size();
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skip();
    return p_ < s_.size() && s_[p_] == c;
  }
  std::optional<std::string> quoted() {
    skip();
    if (p_ >= s_.size() || s_[p_] != '"') return std::nullopt;
    size_t e = s_.find('"', p_ + 1);
    if (e == std::string::npos) return std::nullopt;
    std::string out = s_.substr(p_ + 1, e - p_ - 1);
    if (!out.empty() && out.back() == '\\') out.pop_back();
    p_ = e + 1;
    return out;
  }
  std::optional<std::string> ident() {
    skip();
    size_t b = p_;
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_' || s_[p_] == '.')) ++p_;
    if (b == p_) return std::nullopt;
    return s_.substr(b, p_ - b);
  }
  std::optional<int64_t> number() {
    skip();
    size_t b = p_;
    while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
    if (b == p_ || p_ - b > 12) return std::nullopt;
    return std::stoll(s_.substr(b, p_ - b));
  }
  bool done() {
    skip();
    return p_ >= s_.size();
  }

 private:
  std::string s_;
  size_t p_ = 0;
};

// `<["x"=2, "y"=4], device_ids=[...]>` after `#sdy.mesh` (or `mesh`).
std::optional<Mesh> parseMeshBody(Cursor& c) {
  Mesh m;
  if (!c.eat("<") || !c.eat("[")) return std::nullopt;
  while (!c.eat("]")) {
    auto name = c.quoted();
    if (!name || !c.eat("=")) return std::nullopt;
    auto size = c.number();
    if (!size || *size <= 0) return std::nullopt;
    m.axes.push_back({*name, *size});
    c.eat(",");
  }
  if (c.eat(",")) {
    if (!c.eat("device_ids") || !c.eat("=") || !c.eat("[")) return std::nullopt;
    while (!c.eat("]")) {
      auto id = c.number();
      if (!id) return std::nullopt;
      m.deviceIds.push_back(*id);
      c.eat(",");
    }
  }
  if (!c.eat(">")) return std::nullopt;
  return m;
}

std::optional<std::map<std::string, Mesh>> parseMeshes(std::string_view text) {
  std::map<std::string, Mesh> out;
  Cursor c{std::string(text)};
  if (!c.eat("{")) return std::nullopt;
  while (!c.eat("}")) {
    auto name = c.ident();
    if (!name || !c.eat("=") || !c.eat("#sdy.mesh")) return std::nullopt;
    auto m = parseMeshBody(c);
    if (!m) return std::nullopt;
    out[*name] = std::move(*m);
    c.eat(",");
  }
  return out;
}

struct AxisRef {
  std::string name;
  int64_t pre = 1, size = 0;  // sub-axis "x":(pre)size; size 0 = the whole axis
};

// `<@mesh, [{"x"}, {"y":(1)2, ?}], replicated={"z"}>` (the part after #sdy.sharding).
std::optional<hlo::Sharding> parseOne(Cursor& c, const std::map<std::string, Mesh>& meshes, std::string* why) {
  auto fail = [&](std::string m) -> std::optional<hlo::Sharding> {
    *why = std::move(m);
    return std::nullopt;
  };
  if (!c.eat("<")) return fail("expected '<'");
  Mesh mesh;
  if (c.eat("@")) {
    auto name = c.ident();
    if (!name || !meshes.count(*name)) return fail(fmt::format("unknown mesh '@{}'", name.value_or("")));
    mesh = meshes.at(*name);
  } else if (c.eat("mesh")) {
    auto m = parseMeshBody(c);
    if (!m) return fail("bad inline mesh");
    mesh = *m;
  } else {
    return fail("expected a mesh name");
  }
  if (!c.eat(",") || !c.eat("[")) return fail("expected the dimension shardings");
  std::vector<std::vector<AxisRef>> dims;
  while (!c.eat("]")) {
    if (!c.eat("{")) return fail("expected '{' opening a dimension sharding");
    dims.emplace_back();
    while (!c.eat("}")) {
      if (c.eat("?") || c.eat(",")) continue;
      auto name = c.quoted();
      if (!name) return fail("expected an axis name");
      AxisRef r{*name};
      if (c.eat(":")) {
        auto pre = (c.eat("(") ? c.number() : std::nullopt);
        if (!pre || !c.eat(")")) return fail("bad sub-axis");
        auto size = c.number();
        if (!size) return fail("bad sub-axis");
        r.pre = *pre;
        r.size = *size;
      }
      dims.back().push_back(r);
    }
    c.eat("p0");
    c.eat(",");
  }
  // replicated={...} / unreduced={...}: axes that shard nothing (the rest are implicit anyway).
  while (c.eat(",")) {
    auto key = c.ident();
    if (!key || !c.eat("=") || !c.eat("{")) return fail("bad sharding attribute");
    while (!c.eat("}"))
      if (!c.quoted() && !c.eat(",")) return fail("bad axis list");
  }
  if (!c.eat(">")) return fail("expected '>' closing the sharding");

  if (mesh.axes.empty()) {
    if (mesh.deviceIds.size() == 1) return hlo::Sharding::maximal(mesh.deviceIds[0]);
    return hlo::Sharding::replicated();
  }
  // Split each axis into the pieces its sub-axis references need.
  std::map<std::string, size_t> axisIndex;
  for (size_t i = 0; i < mesh.axes.size(); ++i) axisIndex[mesh.axes[i].first] = i;
  std::vector<std::set<int64_t>> bounds(mesh.axes.size());
  for (size_t i = 0; i < mesh.axes.size(); ++i) bounds[i] = {1, mesh.axes[i].second};
  for (const auto& d : dims)
    for (const AxisRef& r : d) {
      auto it = axisIndex.find(r.name);
      if (it == axisIndex.end()) return fail(fmt::format("unknown axis \"{}\"", r.name));
      int64_t n = mesh.axes[it->second].second;
      if (r.size) {
        if (n % (r.pre * r.size) != 0) return fail(fmt::format("sub-axis \"{}\":({}){} does not divide {}", r.name, r.pre, r.size, n));
        bounds[it->second].insert(r.pre);
        bounds[it->second].insert(r.pre * r.size);
      }
    }
  // pieces[i] = (pre, size) of axis i, major first; piece ids global in mesh order.
  std::vector<int64_t> pieceSize;
  std::vector<std::vector<std::pair<int64_t, size_t>>> pieces(mesh.axes.size());  // (pre, id)
  for (size_t i = 0; i < mesh.axes.size(); ++i) {
    std::vector<int64_t> b(bounds[i].begin(), bounds[i].end());
    for (size_t k = 0; k + 1 < b.size(); ++k) {
      if (b[k + 1] % b[k] != 0) return fail(fmt::format("sub-axes of \"{}\" overlap", mesh.axes[i].first));
      pieces[i].push_back({b[k], pieceSize.size()});
      pieceSize.push_back(b[k + 1] / b[k]);
    }
  }
  std::vector<bool> used(pieceSize.size(), false);
  std::vector<int64_t> perm;  // position -> piece id
  std::vector<int64_t> tiles;
  for (const auto& d : dims) {
    int64_t t = 1;
    for (const AxisRef& r : d) {
      size_t ai = axisIndex[r.name];
      int64_t lo = r.size ? r.pre : 1, hi = r.size ? r.pre * r.size : mesh.axes[ai].second;
      for (auto [pre, id] : pieces[ai])
        if (pre >= lo && pre < hi) {
          if (used[id]) return fail(fmt::format("axis \"{}\" is used twice", r.name));
          used[id] = true;
          perm.push_back(static_cast<int64_t>(id));
          t *= pieceSize[id];
        }
    }
    tiles.push_back(t);
  }
  int64_t repl = 1;
  for (size_t id = 0; id < pieceSize.size(); ++id)
    if (!used[id]) {
      perm.push_back(static_cast<int64_t>(id));
      repl *= pieceSize[id];
    }
  hlo::IotaList iota;
  iota.reshapeDims = pieceSize;
  iota.transposePerm = perm;
  std::vector<int64_t> devices = iota.expand();
  if (!mesh.deviceIds.empty()) {
    if (mesh.deviceIds.size() != devices.size()) return fail("device_ids do not match the mesh size");
    for (int64_t& d : devices) d = mesh.deviceIds[static_cast<size_t>(d)];
  }
  return Tiling::make(tiles, repl, devices).toHlo();
}

const hlo::FrontendAttribute* findAttr(const hlo::FrontendAttributes& attrs, std::string_view key) {
  for (const auto& a : attrs)
    if (a.key == key) return &a;
  return nullptr;
}

std::optional<hlo::Sharding> convert(std::string_view meshesText, std::string_view sharding, std::string* why) {
  std::optional<std::map<std::string, Mesh>> meshes = meshesText.empty() ? std::map<std::string, Mesh>{} : parseMeshes(meshesText);
  if (!meshes) {
    *why = "bad xla.sdy.meshes";
    return std::nullopt;
  }
  Cursor c{std::string(sharding)};
  if (c.eat("#sdy.sharding_per_value")) {
    std::vector<hlo::Sharding> elems;
    if (!c.eat("<") || !c.eat("[")) {
      *why = "expected '<[' after #sdy.sharding_per_value";
      return std::nullopt;
    }
    while (!c.eat("]")) {
      if (c.peek('#')) c.eat("#sdy.sharding");
      auto s = parseOne(c, *meshes, why);
      if (!s) return std::nullopt;
      elems.push_back(*s);
      c.eat(",");
    }
    if (!c.eat(">")) {
      *why = "expected '>'";
      return std::nullopt;
    }
    if (elems.size() == 1) return elems[0];
    return hlo::Sharding::tuple(std::move(elems));
  }
  if (!c.eat("#sdy.sharding")) {
    *why = "expected #sdy.sharding or #sdy.sharding_per_value";
    return std::nullopt;
  }
  return parseOne(c, *meshes, why);
}

}  // namespace

std::optional<hlo::Sharding> shardyToHlo(std::string_view meshes, std::string_view sharding, std::string* why) {
  return convert(meshes, sharding, why);
}

bool importShardy(hlo::Module& module, DiagnosticEngine& diags) {
  const hlo::FrontendAttribute* meshes = findAttr(module.config().frontendAttributes, "xla.sdy.meshes");
  std::string meshText = meshes ? meshes->value : std::string();
  bool ok = true;
  for (const auto& c : module.computations())
    for (const auto& inst : c->instructions()) {
      const hlo::FrontendAttribute* a = findAttr(inst->common().frontendAttributes, "xla.sdy.sharding");
      if (!a || inst->sharding()) continue;
      std::string why;
      std::optional<hlo::Sharding> s = convert(meshText, a->value, &why);
      if (!s) {
        diags.error(inst->location(), fmt::format("'{}' has an xla.sdy.sharding that cannot be read: {}", inst->name(), why));
        ok = false;
        continue;
      }
      inst->common().sharding = *s;
    }
  return ok;
}

}  // namespace tpu::spmd
