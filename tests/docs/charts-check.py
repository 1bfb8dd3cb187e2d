#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""charts-check SRCROOT: the charts in docs/charts/ are what tests/bench/charts.py
draws from the JSON beside them, and show that JSON's figures.

1. charts.py run on docs/charts/{fs,engine,fsck}.json writes, byte for byte,
   the SVG files committed in docs/charts/ (a chart edited by hand, or data
   changed without redrawing, fails);
2. every SVG parses as XML, and its bars and points carry exactly the values
   of the JSON (data-value attributes): fs-peers.svg one bar per filesystem and
   workload, each the ratio to passthrough_ll; poison-cost.svg the medians of
   the runs; fsck-time.svg the median seconds per image;
3. docs/BENCHMARKS.md shows every chart.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    sys.exit(f"FAIL (charts-check): {msg}")


def values(svg, cls, tag="rect"):
    return [float(e.get("data-value")) for e in ET.parse(svg).getroot().iter(NS + tag)
            if e.get("class") == cls]


def near(a, b):
    return abs(a - b) <= 1e-3 * max(abs(a), abs(b), 1e-9)


def main():
    root = sys.argv[1]
    charts = os.path.join(root, "docs", "charts")
    data = {k: os.path.join(charts, k + ".json") for k in ("fs", "engine", "fsck")}
    for k, p in data.items():
        if not os.path.exists(p):
            fail(f"{p} is missing")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(root, "tests", "bench", "charts.py"), tmp,
                        "--fs", data["fs"], "--engine", data["engine"], "--fsck", data["fsck"]],
                       check=True, stdout=subprocess.DEVNULL)
        drawn = sorted(os.listdir(tmp))
        committed = sorted(f for f in os.listdir(charts) if f.endswith(".svg"))
        if drawn != committed:
            fail(f"charts.py draws {drawn}, docs/charts holds {committed}")
        for f in drawn:
            if open(os.path.join(tmp, f), "rb").read() != open(os.path.join(charts, f), "rb").read():
                fail(f"docs/charts/{f} is not what charts.py draws from its JSON (redraw it)")

    fs = json.load(open(data["fs"]))
    want = []
    for w, r in fs["results"].items():
        base = r.get("passthrough_ll")
        if not isinstance(base, (int, float)) or not base:
            continue
        for f in ("mendfs", "passthrough_ll", "fuse2fs", "ext4"):
            v = r.get(f)
            if isinstance(v, str):
                v = float(v.rstrip("*")) if v.rstrip("*").replace(".", "", 1).isdigit() else None
            if v is not None:
                want.append(v / base)
    got = values(os.path.join(charts, "fs-peers.svg"), "bar")
    if len(got) != len(want) or not all(near(a, b) for a, b in zip(got, want)):
        fail(f"fs-peers.svg bars {got} differ from the JSON's ratios {want}")
    if not want or sum(1 for w in want if near(w, 1.0)) < len(fs["results"]) // 2:
        fail("fs-peers.svg: passthrough_ll is not the 1.0 of most workloads")

    eng = json.load(open(data["engine"]))["null"]
    got = values(os.path.join(charts, "poison-cost.svg"), "bar")
    want = [statistics.median(eng["checks_off_iops_per_core"]),
            statistics.median(eng["checks_on_iops_per_core"])]
    if "insns_per_io" in eng:
        want += [eng["insns_per_io"]["checks_off"], eng["insns_per_io"]["checks_on"]]
    if len(got) != len(want) or not all(near(a, b) for a, b in zip(got, want)):
        fail(f"poison-cost.svg bars {got} differ from the JSON {want}")
    runs = values(os.path.join(charts, "poison-cost.svg"), "run", "circle")
    if len(runs) != len(eng["checks_off_iops_per_core"]) + len(eng["checks_on_iops_per_core"]):
        fail("poison-cost.svg does not show every run")

    pts = sorted(json.load(open(data["fsck"]))["points"], key=lambda p: p["meta_gib"])
    want = [statistics.median(p["seconds_n"]) for p in pts] + \
        [statistics.median(p["seconds_y"]) for p in pts]
    got = values(os.path.join(charts, "fsck-time.svg"), "point", "circle")
    if len(got) != len(want) or not all(near(a, b) for a, b in zip(got, want)):
        fail(f"fsck-time.svg points {got} differ from the JSON {want}")

    md = open(os.path.join(root, "docs", "BENCHMARKS.md")).read()
    for f in committed:
        if f"(charts/{f})" not in md:
            fail(f"docs/BENCHMARKS.md does not show charts/{f}")
    print(f"charts-check: {len(committed)} charts match their data")


if __name__ == "__main__":
    main()
