#!/usr/bin/python3
"""Quality-per-bit frontier: whole-file size vs perplexity increase, from docs/BENCHMARKS.md.

Reads the weight-quantization tables of docs/BENCHMARKS.md (rows "| name | bits | file MB |
brown (+x%) | other (+y%) |" under the "**tq-llama-21m**" / "**tq-qwen3moe-17m**" headings and
the "Whole-file budgets" table) and llama.cpp's points from ../shared/docs/ANCHORS.md (tq-llama-21m
only), and writes one SVG with a panel per model and eval file (log-scale y). Standard library
only (no PyPI).

  scripts/frontier_plot.py [--benchmarks docs/BENCHMARKS.md] [--anchors ../shared/docs/ANCHORS.md]
                           [--out docs/frontier.svg]
"""
import argparse
import math
import os
import re
import sys

PCT = re.compile(r"\(?([+-]?\d+(?:\.\d+)?)\s*%\)?")


def pct(cell):
    m = PCT.search(cell)
    return float(m.group(1)) if m else None


def parse_benchmarks(path):
    """{model: [(label, mb, brown, other, kind)]}; kind: 'plain', 'budget', 'measured'."""
    rows = {"tq-llama-21m": [], "tq-qwen3moe-17m": []}
    model = None
    in_section = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("## "):
            in_section = line.startswith("## Weight quantization")
            model = None
        elif line.startswith("### "):
            model = None  # each subsection names its model again
        if not in_section:
            continue
        m = re.match(r"\*\*(tq-llama-21m|tq-qwen3moe-17m)\*\*", line.strip())
        if m:
            model = m.group(1)
            continue
        m = re.match(r"\*\*Whole-file budgets \((tq-llama-21m|tq-qwen3moe-17m)", line.strip())
        if m:
            model = m.group(1)
            continue
        if model is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("row", "") or set(cells[0]) <= set("-: "):
            continue
        try:
            mb = float(cells[2])
        except ValueError:
            continue
        brown, other = pct(cells[3]), pct(cells[4])
        if brown is None or other is None or cells[0].startswith("bf16"):
            continue
        label = cells[0]
        row_model = model
        for name in rows:  # a row that names its model belongs to it
            if label.startswith(name):
                row_model = name
        kind = "plain"
        if "self-calibrate" in label:
            kind = "calibrated"
        elif "measured" in label:
            kind = "measured"
        elif "budget" in label or "target-size" in label:
            kind = "budget"
        rows[row_model].append((label, mb, brown, other, kind))
    return rows


def parse_anchors(path):
    """llama.cpp's tq-llama-21m points: [(name, mb, brown, other)]."""
    pts = []
    if not os.path.exists(path):
        return pts
    for line in open(path, encoding="utf-8"):
        m = re.match(r"\|\s*((?:Q|IQ)\w+)\s*\|\s*([\d.]+) MB\s*\|\s*([^|]+)\|\s*([^|]+)\|", line)
        if m and pct(m.group(3)) is not None:
            pts.append((m.group(1), float(m.group(2)), pct(m.group(3)), pct(m.group(4))))
    return pts


COLORS = {"plain": "#888888", "budget": "#1f77b4", "measured": "#d62728", "calibrated": "#9467bd",
          "llama.cpp": "#2ca02c"}


def panel(x0, y0, w, h, title, series):
    """series: [(kind, label, mb, value)] -> SVG elements of one panel."""
    out = []
    vals = [v for _, _, _, v in series if v and v > 0]
    mbs = [mb for _, _, mb, v in series if v and v > 0]
    if not vals:
        return out
    xlo, xhi = math.floor(min(mbs)) - 0.5, math.ceil(max(mbs)) + 0.5
    ylo, yhi = math.log10(min(vals) * 0.8), math.log10(max(vals) * 1.25)

    def px(mb):
        return x0 + 50 + (mb - xlo) / (xhi - xlo) * (w - 70)

    def py(v):
        return y0 + h - 40 - (math.log10(v) - ylo) / (yhi - ylo) * (h - 70)

    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="white" stroke="#ccc"/>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + 18}" text-anchor="middle" font-size="13">'
               f"{title}</text>")
    for mb in range(int(math.ceil(xlo)), int(xhi) + 1):
        out.append(f'<line x1="{px(mb)}" y1="{y0 + 30}" x2="{px(mb)}" y2="{y0 + h - 40}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{px(mb)}" y="{y0 + h - 25}" text-anchor="middle" '
                   f'font-size="10">{mb}</text>')
    for v in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200):
        if ylo <= math.log10(v) <= yhi:
            out.append(f'<line x1="{x0 + 50}" y1="{py(v)}" x2="{x0 + w - 20}" y2="{py(v)}" '
                       'stroke="#eee"/>')
            out.append(f'<text x="{x0 + 45}" y="{py(v) + 3}" text-anchor="end" '
                       f'font-size="10">+{v}%</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h - 8}" text-anchor="middle" font-size="11">'
               "whole file, MB</text>")
    for kind, label, mb, v in series:
        if not v or v <= 0:
            continue
        c = COLORS[kind]
        shape = (f'<rect x="{px(mb) - 4}" y="{py(v) - 4}" width="8" height="8" fill="{c}">'
                 if kind == "llama.cpp" else
                 f'<circle cx="{px(mb)}" cy="{py(v)}" r="{4 if kind == "plain" else 5}" '
                 f'fill="{c}" fill-opacity="0.8">')
        out.append(f"{shape}<title>{label}: {mb} MB, +{v}%</title>"
                   f"{'</rect>' if kind == 'llama.cpp' else '</circle>'}")
        if kind == "llama.cpp":
            out.append(f'<text x="{px(mb) + 6}" y="{py(v) - 5}" font-size="9" fill="{c}">'
                       f"{label}</text>")
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", default=os.path.join(repo, "docs", "BENCHMARKS.md"))
    ap.add_argument("--anchors",
                    default=os.path.join(repo, "..", "shared", "docs", "ANCHORS.md"))
    ap.add_argument("--out", default=os.path.join(repo, "docs", "frontier.svg"))
    args = ap.parse_args()
    if not os.path.exists(args.benchmarks):
        sys.exit(f"frontier_plot: {args.benchmarks}: no such file")
    rows = parse_benchmarks(args.benchmarks)
    anchors = parse_anchors(args.anchors)
    w, h = 520, 360
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w + 30}" height="{2 * h + 70}" '
           'font-family="sans-serif">']
    for r, model in enumerate(("tq-llama-21m", "tq-qwen3moe-17m")):
        for c, (col, name) in enumerate(((2, "eval_brown"), (3, "eval_other"))):
            series = [(k, lab, mb, (b, o)[col - 2]) for lab, mb, b, o, k in rows[model]]
            if model == "tq-llama-21m":
                series += [("llama.cpp", n, mb, (b, o)[col - 2]) for n, mb, b, o in anchors]
            svg += panel(10 + c * (w + 10), 10 + r * (h + 10), w, h,
                         f"{model}, {name}: perplexity increase vs bf16", series)
    y = 2 * h + 45
    for i, (kind, text) in enumerate((("plain", "TurboQuant, one width"),
                                      ("budget", "budget, role/depth priors"),
                                      ("measured", "budget, measured sensitivities"),
                                      ("calibrated", "+ --self-calibrate"),
                                      ("llama.cpp", "llama.cpp (ANCHORS.md)"))):
        svg.append(f'<circle cx="{30 + i * 210}" cy="{y}" r="5" fill="{COLORS[kind]}"/>'
                   f'<text x="{40 + i * 210}" y="{y + 4}" font-size="12">{text}</text>')
    svg.append("</svg>")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")
    n = sum(len(v) for v in rows.values())
    print(f"wrote {args.out}: {n} rows, {len(anchors)} llama.cpp points")


if __name__ == "__main__":
    main()
