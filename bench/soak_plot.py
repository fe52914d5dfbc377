#!/usr/bin/env python3
"""Draws the samples of `folio-bench soak --samples FILE` as one SVG of stacked panels over time.

    bench/soak_plot.py SAMPLES.tsv OUT.svg [--title TEXT]

No plotting library: the SVG is written by hand, every axis from zero so a flat line looks flat.
"""
import argparse
import math
import sys
from xml.sax.saxutils import escape

WIDTH = 860
PANEL_HEIGHT = 150
LEFT = 78
RIGHT = 150
TOP = 66
GAP = 46
COLORS = ["#1f5fa8", "#d9731a", "#2a9d4b", "#b23a48"]

# (title, unit, [(column, label, scale)])
PANELS = [
    ("foliod resident memory", "MiB", [("rss_kib", "VmRSS", 1 / 1024), ("anon_kib", "RssAnon", 1 / 1024)]),
    ("open descriptors and connections", "", [("descriptors", "/proc/PID/fd", 1), ("connections", "connections", 1)]),
    ("LMDB map", "MiB", [("used_size", "lmdb.usedSize", 1 / 1048576), ("file_size", "lmdb.fileSize", 1 / 1048576)]),
    ("LMDB reader slots", "", [("reader_slots", "readerSlotsUsed", 1)]),
    ("load, per 10 s window", "ops/s", [("ops_per_s", "ops/s", 1)]),
    ("latency, per window", "ms", [("p99_us", "p99", 1 / 1000), ("p50_us", "p50", 1 / 1000)]),
    ("stats answer time (sampler's request)", "ms", [("stats_ms", "stats", 1)]),
]


def read_samples(path):
    notes, header, rows = [], None, []
    with open(path, encoding="utf-8") as file:
        for line in file:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("#"):
                notes.append(line.lstrip("# "))
            elif header is None:
                header = line.split("\t")
            else:
                rows.append(dict(zip(header, (float(cell) for cell in line.split("\t")))))
    if header is None or not rows:
        sys.exit(f"soak_plot: no samples in {path}")
    return notes, rows


def nice_step(span, ticks=4):
    """A round step (1, 2 or 5 times a power of ten) giving about `ticks` intervals over span."""
    if span <= 0:
        return 1
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def label(value):
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.0f}"
    return f"{value:g}"


def panel(out, index, title, unit, series, rows, minutes):
    top = TOP + index * (PANEL_HEIGHT + GAP)
    plot_width = WIDTH - LEFT - RIGHT
    values = [row[column] * scale for column, _, scale in series for row in rows if column in row]
    high = max(values) if values else 1
    step = nice_step(high if high > 0 else 1)
    ceiling = step * max(1, math.ceil(high / step))
    if ceiling < high * 1.05:
        ceiling += step

    def x(minute):
        return LEFT + plot_width * minute / minutes

    def y(value):
        return top + PANEL_HEIGHT * (1 - value / ceiling)

    heading = title + (f" ({unit})" if unit else "")
    out.append(f'<text x="{LEFT}" y="{top - 8}" class="title">{escape(heading)}</text>')
    out.append(f'<rect x="{LEFT}" y="{top}" width="{plot_width}" height="{PANEL_HEIGHT}" class="frame"/>')
    tick = 0.0
    while tick <= ceiling + step / 2:
        out.append(f'<line x1="{LEFT}" y1="{y(tick):.1f}" x2="{LEFT + plot_width}" y2="{y(tick):.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{label(tick)}</text>')
        tick += step
    minute_step = nice_step(minutes, 6)
    minute = 0.0
    while minute <= minutes + 1e-9:
        out.append(f'<line x1="{x(minute):.1f}" y1="{top + PANEL_HEIGHT}" x2="{x(minute):.1f}" y2="{top + PANEL_HEIGHT + 4}" class="axis"/>')
        out.append(f'<text x="{x(minute):.1f}" y="{top + PANEL_HEIGHT + 16}" class="tick" text-anchor="middle">{label(minute)}</text>')
        minute += minute_step
    for number, (column, name, scale) in enumerate(series):
        points = " ".join(f"{x(row['seconds'] / 60):.1f},{y(row[column] * scale):.1f}" for row in rows if column in row)
        color = COLORS[number % len(COLORS)]
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        last = rows[-1][column] * scale
        legend_y = top + 14 + 30 * number
        out.append(f'<line x1="{WIDTH - RIGHT + 12}" y1="{legend_y - 4}" x2="{WIDTH - RIGHT + 30}" y2="{legend_y - 4}" stroke="{color}" stroke-width="2.5"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 36}" y="{legend_y}" class="legend">{escape(name)}</text>')
        out.append(f'<text x="{WIDTH - RIGHT + 36}" y="{legend_y + 13}" class="tick">end: {label(round(last, 1))}</text>')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples")
    parser.add_argument("svg")
    parser.add_argument("--title", default="foliod soak")
    arguments = parser.parse_args()
    notes, rows = read_samples(arguments.samples)
    minutes = max(row["seconds"] for row in rows) / 60 or 1
    height = TOP + len(PANELS) * (PANEL_HEIGHT + GAP) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
        "<style>.title{font-size:13px;font-weight:bold;fill:#222}.tick{font-size:10px;fill:#555}"
        ".legend{font-size:11px;fill:#222}.frame{fill:#fbfbfb;stroke:#999}.grid{stroke:#e2e2e2}"
        ".axis{stroke:#999}.note{font-size:11px;fill:#444}</style>",
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="18" class="title" font-size="15px">{escape(arguments.title)}</text>',
        f'<text x="{LEFT}" y="33" class="note">{escape("; ".join(notes))}</text>',
    ]
    for index, (title, unit, series) in enumerate(PANELS):
        panel(out, index, title, unit, series, rows, minutes)
    out.append(f'<text x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{height - 8}" class="tick" text-anchor="middle">minutes since the soak began (one sample per window)</text>')
    out.append("</svg>")
    with open(arguments.svg, "w", encoding="utf-8") as file:
        file.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
