"""Checks a Chrome trace-event JSON file (what Perfetto loads) and the tracks
tpu-run --trace promises: kernel slices named by HLO instruction with op_name,
MXU and DMA tracks, HBM bandwidth / VMEM / HBM live counters; for pods one
process per chip ("processes:N" counts the named processes) and ICI link
tracks ("ici-link")."""
import json
import sys

d = json.load(open(sys.argv[1]))
assert isinstance(d, dict) and isinstance(d.get("traceEvents"), list), "not a trace-event object"
names = {}
processes = set()
kinds = set()
for e in d["traceEvents"]:
    assert isinstance(e, dict) and isinstance(e.get("name"), str), e
    ph = e.get("ph")
    assert ph in ("X", "M", "C", "B", "E", "i"), e
    assert isinstance(e.get("pid"), int), e
    if ph == "M":
        assert isinstance(e.get("args", {}).get("name", e["args"].get("sort_index")), (str, int)), e
        if e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e["name"] == "process_name":
            processes.add(e["pid"])
        continue
    assert isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, e
    if ph == "X":
        assert isinstance(e.get("tid"), int) and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
        kinds.add(names.get((e["pid"], e["tid"]), "?").split(" ")[0].rstrip("0123456789"))
        if e.get("cat") == "ici":
            assert names.get((e["pid"], e["tid"]), "").startswith("link "), e
            assert isinstance(e["args"].get("bytes"), int), e
            kinds.add("ici-link")
        if e.get("cat") == "kernel":
            # Named by HLO instruction; a hand-written program's kernels by their label.
            assert e["name"].startswith(("%", "(")) or e["name"] == e["args"].get("label"), e
            assert "op_name" in e["args"], e
            kinds.add("kernel-slice")
    if ph == "C":
        assert isinstance(e.get("args"), dict) and all(isinstance(v, (int, float)) for v in e["args"].values()), e
        kinds.add("counter:" + e["name"])
kinds.add(f"processes:{len(processes)}")
for want in sys.argv[2:]:
    assert want in kinds, f"no {want} in {sorted(kinds)}"
print("trace ok:", " ".join(sorted(k for k in kinds if k in sys.argv[2:])))
