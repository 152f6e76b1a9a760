"""Renders tpu-run's HTML report in headless Chromium and checks what a
person sees: the op table (sorted by the page's script), the roofline chart's
kernel points and roofs, the HBM timeline with the peak's buffers, the chips
section (for pods: a row per chip with its collective and waiting time, and
the ICI links); no script errors; nothing fetched from the network.

usage: check_report.py REPORT.html MIN_POINTS [CHIPS]"""
import os
import re
import subprocess
import sys
import tempfile

path, min_points = os.path.abspath(sys.argv[1]), int(sys.argv[2])
html = open(path, encoding="utf-8").read()
# Self-contained: no external scripts, styles, fonts or images.
assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html), "external resource"
assert "@import" not in html and "url(" not in html, "external stylesheet resource"
with tempfile.TemporaryDirectory() as home:
    env = dict(os.environ, HOME=home)
    r = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--enable-logging=stderr", "--v=0", f"--user-data-dir={home}/profile",
                        "--dump-dom", "file://" + path],
                       capture_output=True, text=True, timeout=120, env=env)
dom, log = r.stdout, r.stderr
assert r.returncode == 0, log[-2000:]
errors = [l for l in log.splitlines() if "Uncaught" in l or ("CONSOLE" in l and "ERROR" in l)]
assert not errors, errors
assert 'data-script="ran"' in dom, "the page's script did not run to the end"
m = re.search(r'<table class="sortable" id="ops" data-sorted="([^"]*)"', dom)
assert m and m.group(1) == "time desc", "op table not sorted by its script"
rows = re.findall(r'<tr class="op">(.*?)</tr>', dom, re.S)
assert rows, "no op rows"
times = [float(re.findall(r'data-v="([^"]+)"', r)[1]) for r in rows]
assert times == sorted(times, reverse=True), "op rows not in time order"
points = len(re.findall(r'<circle class="kernel-point', dom))
assert points >= min_points, f"{points} kernel points"
assert 'id="roofs"' in dom, "no roofs"
assert re.search(r'<polygon class="mem-line" points="[^"]{20,}"', dom), "no memory timeline"
peak = re.findall(r'<ol id="peak-buffers">(.*?)</ol>', dom, re.S)
assert peak and "<li>" in peak[0], "no buffers at the peak"
assert '<table class="sortable" id="chips"' in dom, "no chips section"
pod = ""
if len(sys.argv) > 3:
    chips = re.findall(r'<tr class="chip">(.*?)</tr>', dom, re.S)
    assert len(chips) == int(sys.argv[3]), f"{len(chips)} chip rows"
    collective = [float(re.findall(r'data-v="([^"]+)"', c)[2]) for c in chips]
    waiting = [float(re.findall(r'data-v="([^"]+)"', c)[4]) for c in chips]
    assert all(v > 0 for v in collective) and all(v > 0 for v in waiting), "no collective or waiting time"
    links = re.findall(r'<tr class="link">', dom)
    assert links, "no ICI links"
    pod = f", {len(chips)} chips with collective time, {len(links)} links"
print(f"report ok: {len(rows)} ops, {points} kernel points, timeline, {peak[0].count('<li>')} peak buffers{pod}, no script errors")
