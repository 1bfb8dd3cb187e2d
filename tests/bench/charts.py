#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draw the charts of docs/BENCHMARKS.md from the benchmarks' JSON output.

    tests/bench/charts.py OUTDIR [--fs FS.json] [--engine ENGINE.json] [--fsck FSCK.json]

  --fs      the JSON that tests/bench/fs-figures.sh --json prints (the last
            line of its output starting with '{' is taken)  -> fs-peers.svg
  --engine  the JSON file of tests/bench/engine-figures.sh SECS ROUNDS FILE
            -> engine-iops.svg, poison-cost.svg
  --fsck    the JSON file of tests/fsck/bench-fsck.sh BUILD COUNTS DIR FILE
            -> fsck-time.svg

Plain SVG written by hand (no plotting library), the same bytes for the same
input, so the charts in docs/charts/ can be checked against their data
(tests/docs/charts-check.sh).  Every bar and point carries its value in a
data-value attribute.
"""
import json
import math
import statistics
import sys
from xml.sax.saxutils import escape

FS_ORDER = ["mendfs", "passthrough_ll", "fuse2fs", "ext4"]
COLOURS = {"mendfs": "#1f6fb4", "passthrough_ll": "#8c8c8c", "fuse2fs": "#e08a1e",
           "ext4": "#4aa564", "on": "#1f6fb4", "off": "#8c8c8c", "-n": "#1f6fb4",
           "-y": "#e08a1e"}
FONT = 'font-family="sans-serif"'


class Svg:
    def __init__(self, width, height):
        self.w, self.h, self.parts = width, height, []

    def text(self, x, y, s, size=12, anchor="start", weight="normal"):
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" {FONT} '
                          f'text-anchor="{anchor}" font-weight="{weight}">{escape(s)}</text>')

    def rect(self, x, y, w, h, colour, cls=None, value=None):
        extra = f' class="{cls}"' if cls else ""
        if value is not None:
            extra += f' data-value="{value}"'
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
                          f'height="{h:.1f}" fill="{colour}"{extra}/>')

    def line(self, x1, y1, x2, y2, colour="#444", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                          f'stroke="{colour}" stroke-width="{width}"{d}/>')

    def circle(self, x, y, r, colour, cls=None, value=None):
        extra = f' class="{cls}"' if cls else ""
        if value is not None:
            extra += f' data-value="{value}"'
        self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{colour}"{extra}/>')

    def render(self):
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}">\n'
                f'<rect width="{self.w}" height="{self.h}" fill="white"/>\n'
                + "\n".join(self.parts) + "\n</svg>\n")


def fmt(v):
    """A figure as the tables print it: 1234567 -> 1.23 M, 12345 -> 12.3 k."""
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e4:
        return f"{v / 1e3:.1f} k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def nice_max(v):
    """The smallest of 1, 2, 2.5, 5, 10 times a power of ten that is >= v (v > 0)."""
    p = 10.0 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * p >= v * (1 - 1e-12):
            return m * p
    return 10 * p


def tick(v):
    """An axis label: 0, 0.2, 250, 1.5 k, 2 M."""
    if v >= 1e6:
        return f"{round(v / 1e6, 6):g} M"
    if v >= 1e4:
        return f"{round(v / 1e3, 6):g} k"
    return f"{round(v, 6):g}"


def axis_ticks(svg, x0, width, top, bottom, vmax, label):
    for i in range(6):
        v = vmax * i / 5
        x = x0 + width * i / 5
        svg.line(x, top, x, bottom, "#ddd")
        svg.text(x, bottom + 14, tick(v), 10, "middle")
    svg.text(x0 + width / 2, bottom + 30, label, 11, "middle")


def hbars(svg, top, title, rows, unit_label, vmax=None, label_width=210):
    """Horizontal bars; rows: [(label, value, colour, text, [dots])]; returns the bottom."""
    x0, width, bar = label_width, svg.w - label_width - 120, 18
    vmax = vmax or nice_max(max(max([r[1]] + list(r[4])) for r in rows))
    svg.text(10, top + 16, title, 14, weight="bold")
    y = top + 30
    bottom = y + len(rows) * (bar + 8)
    axis_ticks(svg, x0, width, y - 4, bottom, vmax, unit_label)
    for label, value, colour, text, dots in rows:
        svg.text(x0 - 8, y + 13, label, 12, "end")
        svg.rect(x0, y, width * value / vmax, bar, colour, "bar", f"{value:g}")
        for d in dots:
            svg.circle(x0 + width * d / vmax, y + bar / 2, 3, "#222", "run", f"{d:g}")
        svg.text(x0 + width * value / vmax + 6, y + 13, text, 11)
        y += bar + 8
    return bottom + 40


def number(v):
    """A cell of fs-figures' JSON: a number, or a string such as '812*' (limit hit)."""
    if isinstance(v, (int, float)):
        return float(v), ""
    if isinstance(v, str) and v.rstrip("*").replace(".", "", 1).isdigit():
        return float(v.rstrip("*")), "*" if v.endswith("*") else ""
    return None, ""


def chart_fs(data):
    res = data["results"]
    fss = [f for f in FS_ORDER if any(number(r.get(f))[0] is not None for r in res.values())]
    groups = []
    for w, r in res.items():
        base, _ = number(r.get("passthrough_ll"))
        if not base:
            continue
        rows = []
        for f in fss:
            v, mark = number(r.get(f))
            if v is not None:
                rows.append((f, v / base, COLOURS[f], f"{v / base:.2f}x  ({fmt(v)}{mark} {r['unit']})", []))
        groups.append((w, rows))
    rowh = 26
    height = 90 + sum(30 + len(g[1]) * rowh for g in groups) + 40
    svg = Svg(760, height)
    svg.text(10, 22, "mendfs and its peers, relative to passthrough_ll (FUSE doing nothing)", 15,
             weight="bold")
    svg.text(10, 40, f"fs-figures.sh at {data['commit']}, {data['nproc']} CPUs ({data['cpu']}), "
             f"load {data['load_before']} -> {data['load_after']}; longer is better", 11)
    vmax = nice_max(max(r[1] for g in groups for r in g[1]))
    x0, width = 210, svg.w - 210 - 170
    y = 64
    for w, rows in groups:
        svg.text(10, y + 14, w, 13, weight="bold")
        y += 22
        for f, ratio, colour, text, _ in rows:
            svg.text(x0 - 8, y + 13, f, 12, "end")
            svg.rect(x0, y, width * ratio / vmax, 18, colour, "bar", f"{ratio:.4f}")
            svg.text(x0 + width * ratio / vmax + 6, y + 13, text, 11)
            y += rowh
        y += 8
    svg.line(x0 + width / vmax, 56, x0 + width / vmax, y, "#444", 1, "4,3")
    svg.text(x0 + width / vmax, y + 14, "1.0 = passthrough_ll", 10, "middle")
    return {"fs-peers.svg": svg.render()}


def median(xs):
    return statistics.median(xs)


def chart_engine(data):
    out = {}
    null = data["null"]
    on, off = null["checks_on_iops_per_core"], null["checks_off_iops_per_core"]
    head = (f"engine-figures.sh at {data['commit']}, {data['nproc']} CPUs ({data['cpu']}), "
            f"load {data['load_after']}")
    rows = [("poison checks off", median(off), COLOURS["off"], fmt(median(off)), off),
            ("poison checks on", median(on), COLOURS["on"],
             f"{fmt(median(on))}  ({median(on) / median(off):.3f}x)", on)]
    ins = null.get("insns_per_io")
    svg = Svg(760, 200 + (150 if ins else 0))
    svg.text(10, 40, head + "; dots: single runs", 11)
    y = hbars(svg, 46, "What recovery costs the engine: null backend, 4 KiB randread, 1 thread",
              rows, "I/Os per second per core")
    if ins:
        rows = [("checks off", ins["checks_off"], COLOURS["off"], f"{ins['checks_off']:.1f}", []),
                ("checks on", ins["checks_on"], COLOURS["on"],
                 f"{ins['checks_on']:.1f}  (+{ins['checks_on'] - ins['checks_off']:.1f})", [])]
        hbars(svg, y - 10, "Instructions per I/O (callgrind, whole program)", rows,
              "instructions per I/O")
    svg.text(10, 22, "The cost of poison checks on the I/O fast path", 15, weight="bold")
    out["poison-cost.svg"] = svg.render()

    knobs = data["knobs_iops_per_core"]
    rows = [(k.replace("_", " "), v, COLOURS["on"], fmt(v), []) for k, v in knobs.items()]
    sc = data["scaling_iops"]
    svg = Svg(760, 110 + 26 * len(rows) + 60 + 26 * 2 + 60)
    svg.text(10, 22, "The block engine alone: null backend, 4 KiB randread, depth 128", 15,
             weight="bold")
    svg.text(10, 40, head, 11)
    y = hbars(svg, 46, "Knobs, 1 thread", rows, "I/Os per second per core")
    rows = [(f"{k} thread{'s' if k != '1' else ''}", v, COLOURS["on"], fmt(v), [])
            for k, v in sorted(sc.items())]
    hbars(svg, y - 10, "Threads (all cores)", rows, "I/Os per second")
    out["engine-iops.svg"] = svg.render()
    return out


def chart_fsck(data):
    pts = sorted(data["points"], key=lambda p: p["meta_gib"])
    svg = Svg(760, 420)
    svg.text(10, 22, "fsck.mendfs time against metadata size (clean images)", 15, weight="bold")
    svg.text(10, 40, f"bench-fsck.sh at {data['commit']}, {data['nproc']} CPUs ({data['cpu']}), "
             f"load {data['load_after']}; median of 3 runs each", 11)
    x0, y0, width, height = 80, 360, 560, 290
    xmax = nice_max(max(p["meta_gib"] for p in pts))
    ymax = nice_max(max(max(p["seconds_n"] + p["seconds_y"]) for p in pts))
    for i in range(6):
        x = x0 + width * i / 5
        y = y0 - height * i / 5
        svg.line(x, y0, x, y0 - height, "#ddd")
        svg.line(x0, y, x0 + width, y, "#ddd")
        svg.text(x, y0 + 14, tick(xmax * i / 5), 10, "middle")
        svg.text(x0 - 6, y + 4, tick(ymax * i / 5), 10, "end")
    svg.text(x0 + width / 2, y0 + 32, "GiB of metadata (one copy; fsck reads both)", 11,
             "middle")
    svg.text(20, y0 - height / 2, "seconds", 11, "middle")
    for mode, key, dy in (("-n", "seconds_n", -8), ("-y", "seconds_y", 16)):
        prev = None
        for p in pts:
            x = x0 + width * p["meta_gib"] / xmax
            m = median(p[key])
            y = y0 - height * m / ymax
            if prev:
                svg.line(prev[0], prev[1], x, y, COLOURS[mode], 2)
            svg.circle(x, y, 4, COLOURS[mode], "point", f"{m:g}")
            if mode == "-n":
                svg.text(x, y + dy, f"{p['files']:,} files".replace(",", " "), 10, "middle")
            prev = (x, y)
    for i, mode in enumerate(("-n", "-y")):
        svg.rect(x0 + 10, 70 + 18 * i, 12, 12, COLOURS[mode])
        svg.text(x0 + 28, 80 + 18 * i, f"fsck.mendfs {mode}", 11)
    return {"fsck-time.svg": svg.render()}


def load_json(path):
    """A JSON file, or the last line starting with '{' of a benchmark's output."""
    text = open(path).read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        lines = [line for line in text.splitlines() if line.startswith("{")]
        if not lines:
            sys.exit(f"charts.py: {path}: no JSON in it")
        return json.loads(lines[-1])


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    outdir, args, charts = argv[1], argv[2:], {}
    if len(args) % 2:
        sys.exit("charts.py: every option takes a file")
    drawers = {"--fs": chart_fs, "--engine": chart_engine, "--fsck": chart_fsck}
    for opt, path in zip(args[::2], args[1::2]):
        if opt not in drawers:
            sys.exit(f"charts.py: unknown option {opt}")
        charts.update(drawers[opt](load_json(path)))
    for name, svg in sorted(charts.items()):
        with open(f"{outdir}/{name}", "w") as fp:
            fp.write(svg)
        print(f"{outdir}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
