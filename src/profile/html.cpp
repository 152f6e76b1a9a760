// `tpu-run --report=FILE.html`: one self-contained page (no network, no
// external scripts, fonts or images): summary, the op profile as a sortable
// table, an SVG roofline chart, the HBM memory timeline, per-chip figures and
// the groups by kind and op_name. The only script sorts tables.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "profile/profile.h"

namespace tpu::profile {

namespace {

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string sec(double s) {
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.2f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}
std::string rate(double v, const char* unit) {
  if (v >= 1e12) return fmt::format("{:.2f} T{}", v / 1e12, unit);
  if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, unit);
  return fmt::format("{:.0f} {}", v, unit);
}
std::string bytes(double b) {
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{:.0f} B", b);
}

// A numeric cell: sorted by data-v, shown as text.
std::string num(double v, const std::string& shown) {
  return fmt::format("<td data-v=\"{:.9g}\">{}</td>", v, esc(shown));
}

std::string stallsOf(const OpFigures& f) {
  std::vector<std::pair<uint64_t, size_t>> v;
  for (size_t i = 0; i < sim::kNumStallReasons; ++i)
    if (f.stalls.cycles[i]) v.emplace_back(f.stalls.cycles[i], i);
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string out;
  for (size_t k = 0; k < v.size() && k < 2; ++k)
    out +=
        fmt::format("{}{} {:.0f}%", k ? ", " : "", stallName(v[k].second),
                    f.cycles ? 100.0 * static_cast<double>(v[k].first) / static_cast<double>(f.cycles) : 0);
  return out.empty() ? "-" : out;
}

const char* kStyle = R"(body{font-family:sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#eee;cursor:pointer;position:sticky;top:0}td.t{text-align:left}td{white-space:nowrap}
.scroll{max-height:32em;overflow:auto;display:inline-block;max-width:100%}
.note{color:#555;font-size:12px}.kv td{text-align:left}
svg text{font-size:11px;font-family:sans-serif}
.roof{stroke:#c33;stroke-width:2;fill:none}.grid{stroke:#ddd}.axis{stroke:#333}
.kernel-point{fill:#1f77b4;fill-opacity:.7;stroke:#124}.kernel-point.model{fill:#ff7f0e;stroke:#842}
.mem-line{stroke:#2a7;fill:#2a73;stroke-width:1.5}.peak{stroke:#c33;stroke-dasharray:4 3}
)";

// Sorts a table by a clicked column (numbers by data-v); sorts the op table
// by time once on load so the page shows the script ran.
const char* kScript = R"(
function sortTable(table, col, desc) {
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = a.cells[col], y = b.cells[col];
    var vx = x.getAttribute('data-v'), vy = y.getAttribute('data-v');
    var r = (vx !== null && vy !== null) ? parseFloat(vx) - parseFloat(vy)
                                         : x.textContent.localeCompare(y.textContent);
    return desc ? -r : r;
  });
  rows.forEach(function (r) { body.appendChild(r); });
  table.setAttribute('data-sorted', table.tHead.rows[0].cells[col].textContent + (desc ? ' desc' : ' asc'));
}
document.querySelectorAll('table.sortable').forEach(function (table) {
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener('click', function () {
      var desc = th.getAttribute('data-desc') !== '1';
      th.setAttribute('data-desc', desc ? '1' : '0');
      sortTable(table, col, desc);
    });
  });
});
var ops = document.getElementById('ops');
if (ops) sortTable(ops, 1, true);
document.body.setAttribute('data-script', 'ran');
)";

void opTable(std::string& out, const std::string& id, const std::vector<OpFigures>& rows, bool ops) {
  out += fmt::format("<div class=\"scroll\"><table class=\"sortable\" id=\"{}\"><thead><tr>", id);
  if (ops)
    out +=
        "<th>#</th><th>time</th><th>share</th><th>kind</th><th>HLO op</th><th>op_name</th><th>MXU FLOP/s "
        "(padded)</th>"
        "<th>model FLOP/s</th><th>HBM B/s</th><th>FLOP/B</th><th>bound</th><th>roofline</th><th>stalls</th>"
        "<th>members</th>";
  else
    out +=
        "<th>group</th><th>time</th><th>share</th><th>kernels</th><th>MXU FLOP/s (padded)</th><th>model "
        "FLOP/s</th>"
        "<th>HBM B/s</th><th>roofline</th><th>stalls</th>";
  out += "</tr></thead><tbody>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpFigures& f = rows[i];
    out += ops ? "<tr class=\"op\">" : "<tr>";
    if (ops) {
      out += num(static_cast<double>(i + 1), std::to_string(i + 1));
      out += num(f.seconds, sec(f.seconds));
      out += num(f.share, fmt::format("{:.1f}%", 100 * f.share));
      out += "<td class=\"t\">" + esc(f.kind.empty() ? "-" : f.kind) + "</td>";
      out += "<td class=\"t\">" + esc(f.hlo) + "</td>";
      out += "<td class=\"t\">" + esc(f.opName) + "</td>";
    } else {
      out += "<td class=\"t\">" + esc(f.key) + "</td>";
      out += num(f.seconds, sec(f.seconds));
      out += num(f.share, fmt::format("{:.1f}%", 100 * f.share));
      out += num(static_cast<double>(f.kernels), std::to_string(f.kernels));
    }
    out += num(f.flopsPerSecond, rate(f.flopsPerSecond, "FLOP/s"));
    out += f.modelKnown ? num(f.modelFlopsPerSecond, rate(f.modelFlopsPerSecond, "FLOP/s")) : num(-1, "-");
    out += num(f.bytesPerSecond, rate(f.bytesPerSecond, "B/s"));
    if (ops) {
      out += num(f.intensity, fmt::format("{:.1f}", f.intensity));
      out += "<td class=\"t\">" + std::string(f.computeBound ? "compute" : "memory") + "</td>";
    }
    out += num(f.rooflineFraction, fmt::format("{:.1f}%", 100 * f.rooflineFraction));
    out += "<td class=\"t\">" + esc(stallsOf(f)) + "</td>";
    if (ops) {
      std::string all, shown;
      for (size_t k = 0; k < f.members.size(); ++k) {
        all += (k ? ", " : "") + f.members[k];
        if (k < 3) shown += (k ? ", " : "") + f.members[k];
      }
      if (f.members.size() > 3) shown += fmt::format(" +{}", f.members.size() - 3);
      out += "<td class=\"t\" title=\"" + esc(all) + "\">" + esc(shown) + "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n";
}

// Log-log roofline: x = FLOP per HBM byte, y = FLOP/s.
void rooflineChart(std::string& out, const Profile& p) {
  const double W = 740, H = 420, L = 90, R = 20, T = 20, B = 50;
  double peak = std::max(p.peakFlops, 1.0), bw = std::max(p.peakBytesPerSecond, 1.0);
  double xmin = 1e-2, xmax = 1e4, ymax = std::pow(10, std::ceil(std::log10(peak * 1.5)));
  double ymin = ymax / 1e7;
  for (const OpFigures& f : p.ops) {
    double x = f.hwFlops > 0 ? f.intensity : f.modelIntensity;
    double y = f.hwFlops > 0 ? f.flopsPerSecond : f.modelFlopsPerSecond;
    if (x > 0) xmin = std::min(xmin, std::pow(10, std::floor(std::log10(x))));
    if (x > 0) xmax = std::max(xmax, std::pow(10, std::ceil(std::log10(x))));
    if (y > 0) ymin = std::min(ymin, std::pow(10, std::floor(std::log10(y))));
  }
  auto X = [&](double x) {
    return L + (std::log10(x) - std::log10(xmin)) / (std::log10(xmax) - std::log10(xmin)) * (W - L - R);
  };
  auto Y = [&](double y) {
    return H - B - (std::log10(y) - std::log10(ymin)) / (std::log10(ymax) - std::log10(ymin)) * (H - T - B);
  };
  out += fmt::format(
      "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\">\n",
      W, H, W, H);
  for (double x = xmin; x <= xmax * 1.001; x *= 10)
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text x=\"{0:.1f}\" "
        "y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        X(x), T, H - B, H - B + 15, x);
  for (double y = ymin; y <= ymax * 1.001; y *= 10)
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text x=\"{3}\" "
        "y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        L, Y(y), W - R, L - 4, Y(y) + 4, rate(y, "F/s"));
  out += fmt::format(
      "<line class=\"axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/><line class=\"axis\" "
      "x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\"/>\n",
      L, H - B, W - R, T);
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (FLOP per HBM byte)</text>\n",
      (L + W - R) / 2, H - 12);
  // Roofs: bandwidth up to the ridge point, then the compute peak.
  double ridge = peak / bw;
  double x0 = std::max(xmin, ymin / bw);
  out += fmt::format(
      "<polyline class=\"roof\" id=\"roofs\" points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"><title>HBM "
      "{} and compute {} roofs (ridge at {:.1f} FLOP/B)</title></polyline>\n",
      X(x0), Y(x0 * bw), X(ridge), Y(peak), X(xmax), Y(peak), rate(bw, "B/s"), rate(peak, "FLOP/s"), ridge);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">peak {}</text>\n", X(ridge) + 6, Y(peak) - 6,
                     rate(peak, "FLOP/s"));
  int plotted = 0;
  for (const OpFigures& f : p.ops) {
    bool padded = f.hwFlops > 0 && f.intensity > 0;
    double x = padded ? f.intensity : f.modelIntensity;
    double y = padded ? f.flopsPerSecond : f.modelFlopsPerSecond;
    if (!(x > 0) || !(y > 0)) continue;
    ++plotted;
    out += fmt::format(
        "<circle class=\"kernel-point{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\" data-hlo=\"{}\">"
        "<title>{} ({}): {}, {:.1f} FLOP/B, {}, {:.1f}% of roofline{}</title></circle>\n",
        padded ? "" : " model", X(x), Y(y), 3 + 6 * std::sqrt(f.share), esc(f.hlo), esc(f.hlo), esc(f.kind),
        sec(f.seconds), x, rate(y, "FLOP/s"), 100 * f.rooflineFraction,
        padded ? "" : " (model FLOPs: no MXU work)");
  }
  out += "</svg>\n";
  out += fmt::format(
      "<p class=\"note\">{} of {} kernels plotted: blue from the padded MXU work the chip did, orange "
      "from model FLOPs for kernels without MXU work (vector unit); kernels with neither are not "
      "plotted. Area grows with the share of time.</p>\n",
      plotted, p.ops.size());
}

void memoryChart(std::string& out, const Profile& p) {
  const MemoryTimeline& m = p.memory;
  const double W = 720, H = 260, L = 70, R = 20, T = 20, B = 40;
  double tmax = std::max(p.seconds, 1e-12);
  double ymax = std::max<double>(1, static_cast<double>(m.peakBytes)) * 1.1;
  auto X = [&](double t) { return L + t / tmax * (W - L - R); };
  auto Y = [&](double b) { return H - B - b / ymax * (H - T - B); };
  out += fmt::format(
      "<svg id=\"memory-timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\">\n",
      W, H, W, H);
  for (int i = 0; i <= 4; ++i) {
    double b = ymax * i / 4;
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text x=\"{3}\" "
        "y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        L, Y(b), W - R, L - 4, Y(b) + 4, bytes(b));
    double t = tmax * i / 4;
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", X(t), H - B + 15,
                       sec(t));
  }
  std::string pts = fmt::format("{:.1f},{:.1f}", X(0), Y(0));
  uint64_t last = 0;
  for (const MemoryPoint& pt : m.points) {
    pts += fmt::format(" {:.1f},{:.1f} {:.1f},{:.1f}", X(pt.seconds), Y(static_cast<double>(last)),
                       X(pt.seconds), Y(static_cast<double>(pt.liveBytes)));
    last = pt.liveBytes;
  }
  pts += fmt::format(" {:.1f},{:.1f} {:.1f},{:.1f}", X(tmax), Y(static_cast<double>(last)), X(tmax), Y(0));
  out +=
      fmt::format("<polygon class=\"mem-line\" points=\"{}\"><title>HBM live bytes</title></polygon>\n", pts);
  out += fmt::format(
      "<line class=\"peak\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text id=\"peak-label\" "
      "x=\"{3:.1f}\" y=\"{4}\">peak {5} at {6}</text>\n",
      X(m.peakSeconds), T, H - B, X(m.peakSeconds) + 4, T + 10, bytes(static_cast<double>(m.peakBytes)),
      sec(m.peakSeconds));
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">simulated time</text>\n",
                     (L + W - R) / 2, H - 8);
  out += "</svg>\n<p>Buffers live at the peak, largest first:</p>\n<ol id=\"peak-buffers\">\n";
  for (const NamedBytes& b : m.peakBuffers)
    out += fmt::format("<li>{} <b>{}</b></li>\n", bytes(static_cast<double>(b.bytes)), esc(b.name));
  out += "</ol>\n";
  out += fmt::format("<p class=\"note\">Arguments, results and constants ({}) are live throughout; {}</p>\n",
                     bytes(static_cast<double>(m.staticBytes)),
                     m.temporariesFromHlo
                         ? "each temporary HLO value lives from the start of the kernel defining it "
                           "to the end of the last kernel reading it."
                         : "without the HLO (a machine program) temporaries are one heap block.");
}

}  // namespace

std::string renderHtml(const Profile& p) {
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<title>tpu-run profile: " + esc(p.program) + "</title>\n<style>" + kStyle +
         "</style></head>\n<body>\n";
  out += "<h1>Profile of " + esc(p.program) + " on " +
         (p.podChips > 0 ? fmt::format("a pod of {} {} chips", p.podChips, esc(p.target)) : esc(p.target)) +
         "</h1>\n";
  out += "<table class=\"kv\" id=\"summary\"><tbody>\n";
  auto kv = [&](const std::string& k, const std::string& v) {
    out += "<tr><td><b>" + esc(k) + "</b></td><td>" + esc(v) + "</td></tr>\n";
  };
  kv("simulated time",
     fmt::format("{} ({} cycles at {:.3f} GHz)", sec(p.seconds), p.cycles, p.clockHz / 1e9));
  kv("MXU work (padded)", fmt::format("{:.4g} FLOPs, {}, {:.1f}% of peak {}", p.hwFlops,
                                      rate(p.seconds > 0 ? p.hwFlops / p.seconds : 0, "FLOP/s"),
                                      100 * p.hwUtilization, rate(p.peakFlops, "FLOP/s")));
  kv("model FLOPs (HLO)",
     p.modelKnown
         ? fmt::format("{:.4g} FLOPs, {}, {:.1f}% of peak", p.modelFlops,
                       rate(p.seconds > 0 ? p.modelFlops / p.seconds : 0, "FLOP/s"), 100 * p.modelUtilization)
         : std::string("unknown (a machine program without its HLO)"));
  kv("HBM traffic", fmt::format("{}, {} of peak {}", bytes(static_cast<double>(p.hbmBytes)),
                                rate(p.seconds > 0 ? static_cast<double>(p.hbmBytes) / p.seconds : 0, "B/s"),
                                rate(p.peakBytesPerSecond, "B/s")));
  kv("roofline bound", fmt::format("{} from the padded work, {} from model FLOPs", sec(p.hwRooflineSeconds),
                                   p.modelKnown ? sec(p.modelRooflineSeconds) : std::string("unknown")));
  if (p.idealKnown)
    kv("ideal bound",
       fmt::format("{} ({}-bound); the simulated time is {:.1f}% of ideal", sec(p.idealSeconds),
                   p.idealComputeSeconds > p.idealMemorySeconds ? "compute" : "memory",
                   p.seconds > 0 ? 100 * p.idealSeconds / p.seconds : 0));
  std::string stalls;
  for (size_t i = 0; i < sim::kNumStallReasons; ++i)
    if (p.stalls.cycles[i])
      stalls += fmt::format(
          "{}{} {:.1f}%", stalls.empty() ? "" : ", ", stallName(i),
          p.chipCycles ? 100.0 * static_cast<double>(p.stalls.cycles[i]) / static_cast<double>(p.chipCycles)
                       : 0);
  kv("issue stalls", stalls.empty() ? "none" : stalls);
  out += "</tbody></table>\n";

  out +=
      "<h2>Op profile</h2>\n<p class=\"note\">One row per kernel, named by the HLO instruction it lowers; "
      "click a "
      "column to sort. Intensity, bound and roofline use the padded MXU work the chip did.</p>\n";
  opTable(out, "ops", p.ops, true);
  out += "<h2>Roofline</h2>\n";
  rooflineChart(out, p);
  out += "<h2>HBM memory timeline</h2>\n";
  memoryChart(out, p);
  if (p.podChips > 0)
    out += fmt::format(
        "<h2>Chips</h2>\n<p class=\"note\">A pod of {} chips, {}; ICI traffic {} (bytes x hops). "
        "Collective time: kernels of collective ops; waiting: cycles stalled on semaphores (remote and "
        "local DMAs) and barrier.pod, the communication the chip did not hide.</p>\n",
        p.podChips, esc(p.topology), bytes(static_cast<double>(p.iciBytes)));
  else
    out += "<h2>Chips</h2>\n";
  out +=
      "<table class=\"sortable\" "
      "id=\"chips\"><thead><tr><th>chip</th><th>time</th><th>collective "
      "time</th><th>share in collectives</th><th>waiting (semaphores, barriers)</th><th>share waiting</th>"
      "<th>remote DMAs</th><th>ICI bytes sent</th><th>top op</th></tr></thead><tbody>\n";
  for (const ChipFigures& c : p.chips) {
    double waitShare = c.cycles ? static_cast<double>(c.waitCycles) / static_cast<double>(c.cycles) : 0;
    out += "<tr class=\"chip\">" + num(c.chip, std::to_string(c.chip)) + num(c.seconds, sec(c.seconds)) +
           num(c.collectiveSeconds, sec(c.collectiveSeconds)) +
           num(c.seconds > 0 ? c.collectiveSeconds / c.seconds : 0,
               fmt::format("{:.1f}%", c.seconds > 0 ? 100 * c.collectiveSeconds / c.seconds : 0)) +
           num(c.waitSeconds, sec(c.waitSeconds)) + num(waitShare, fmt::format("{:.1f}%", 100 * waitShare)) +
           num(static_cast<double>(c.remoteDmas), std::to_string(c.remoteDmas)) +
           num(static_cast<double>(c.iciBytesSent), bytes(static_cast<double>(c.iciBytesSent))) + "<td>" +
           (c.ops.empty() ? std::string("-") : esc(c.ops.front().key)) + "</td></tr>\n";
  }
  out += "</tbody></table>\n";
  if (!p.links.empty()) {
    out +=
        "<h2>ICI links</h2>\n<table class=\"sortable\" id=\"links\"><thead><tr><th>link</th><th>bytes</th>"
        "<th>transfers</th><th>busy</th></tr></thead><tbody>\n";
    for (const LinkFigures& l : p.links)
      out += "<tr class=\"link\"><td>" + esc(l.name) + "</td>" +
             num(static_cast<double>(l.bytes), bytes(static_cast<double>(l.bytes))) +
             num(static_cast<double>(l.transfers), std::to_string(l.transfers)) +
             num(l.utilization, fmt::format("{:.1f}%", 100 * l.utilization)) + "</tr>\n";
    out += "</tbody></table>\n";
  }
  out += "<h2>By kind</h2>\n";
  opTable(out, "by-kind", p.byKind, false);
  out += "<h2>By op_name</h2>\n";
  opTable(out, "by-op-name", p.byOpName, false);
  out += "<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return out;
}

}  // namespace tpu::profile
