"""Checks a Chrome trace-event JSON file (what Perfetto loads) and the tracks
tpu-run --trace promises: kernel slices named by HLO instruction with op_name,
MXU and DMA tracks, HBM bandwidth / VMEM / HBM live counters."""
import json
import sys

d = json.load(open(sys.argv[1]))
assert isinstance(d, dict) and isinstance(d.get("traceEvents"), list), "not a trace-event object"
names = {}
kinds = set()
for e in d["traceEvents"]:
    assert isinstance(e, dict) and isinstance(e.get("name"), str), e
    ph = e.get("ph")
    assert ph in ("X", "M", "C", "B", "E", "i"), e
    assert isinstance(e.get("pid"), int), e
    if ph == "M":
        assert isinstance(e.get("args", {}).get("name", e["args"].get("sort_index")), (str, int)), e
        if e["name"] == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        continue
    assert isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, e
    if ph == "X":
        assert isinstance(e.get("tid"), int) and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
        kinds.add(names.get(e["tid"], "?").split(" ")[0].rstrip("0123456789"))
        if e.get("cat") == "kernel":
            assert e["name"].startswith("%") or e["name"].startswith("("), e
            assert "op_name" in e["args"], e
            kinds.add("kernel-slice")
    if ph == "C":
        assert isinstance(e.get("args"), dict) and all(isinstance(v, (int, float)) for v in e["args"].values()), e
        kinds.add("counter:" + e["name"])
for want in sys.argv[2:]:
    assert want in kinds, f"no {want} in {sorted(kinds)}"
print("trace ok:", " ".join(sorted(k for k in kinds if k in sys.argv[2:])))
