#!/usr/bin/env python3
"""Draws the panels of a Grafana dashboard JSON from a Prometheus server, as a PNG.

Grafana cannot be installed on the machine the docs' picture was made on, so this draws
what each panel would show: every target's PromQL query is evaluated by Prometheus itself
(`/api/v1/query_range`, `$__rate_interval` as 30s, every template variable as `.*`), and
the series are plotted at the panel's place in the dashboard grid. Time series are drawn
as lines, stat panels as their last value. It is a faithful plot of the dashboard's
queries, not Grafana's rendering of them.

    python3 deploy/grafana/render.py deploy/grafana/weft-dashboard.json \
        --prometheus http://127.0.0.1:9090 --minutes 5 --out docs/images/weft-dashboard.png
"""

import argparse
import json
import re
import time
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW_HEIGHT_PX = 30
COLUMN_WIDTH_PX = 60
UNITS = {
    "bytes": (1024.0, ["B", "KiB", "MiB", "GiB", "TiB"]),
    "Bps": (1024.0, ["B/s", "KiB/s", "MiB/s", "GiB/s"]),
}


def query_range(prometheus, expr, start, end, step):
    url = f"{prometheus}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": start, "end": end, "step": step})
    answer = json.load(urllib.request.urlopen(url, timeout=30))
    if answer.get("status") != "success":
        raise SystemExit(f"query failed: {expr}: {answer}")
    return answer["data"]["result"]


def prepare(expr):
    expr = expr.replace("$__rate_interval", "30s")
    return re.sub(r"\$\{?[a-z_]+\}?", ".*", expr)


def legend(template, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def human(value, unit):
    if unit == "percentunit":
        return f"{value * 100:.0f} %"
    if unit in UNITS:
        base, names = UNITS[unit]
        for name in names:
            if abs(value) < base:
                return f"{value:.1f} {name}"
            value /= base
        return f"{value:.1f} {names[-1]}"
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.0f} µs"
        if value < 1:
            return f"{value * 1e3:.1f} ms"
    if unit in ("reqps", "ops"):
        return f"{value:.0f}/s"
    return f"{value:g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dashboard")
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090")
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--end", type=float, help="Unix time of the right edge (default: now)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dashboard = json.load(open(args.dashboard))
    end = args.end or time.time()
    start = end - args.minutes * 60
    step = max(2, int(args.minutes * 60 / 150))
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    width_px, height_px = 24 * COLUMN_WIDTH_PX, bottom * ROW_HEIGHT_PX + 40
    plt.style.use("dark_background")
    figure = plt.figure(figsize=(width_px / 100, height_px / 100), dpi=100)
    figure.patch.set_facecolor("#111217")
    figure.text(0.005, 1 - 16 / height_px,
                f"{dashboard['title']} — deploy/grafana/weft-dashboard.json, each panel's queries "
                f"evaluated by Prometheus over {args.minutes:g} minutes and drawn by "
                "deploy/grafana/render.py (not Grafana's own rendering)",
                fontsize=9, color="#ccccdc", va="center")
    top_px = 32

    def box(grid, pad=6, labels_px=58):
        # Room on the left for the y axis' labels, inside the panel's cell.
        left = (grid["x"] * COLUMN_WIDTH_PX + pad + labels_px) / width_px
        width = (grid["w"] * COLUMN_WIDTH_PX - 2 * pad - labels_px) / width_px
        top = top_px + grid["y"] * ROW_HEIGHT_PX
        height = grid["h"] * ROW_HEIGHT_PX - 2 * pad - 18
        return [left, 1 - (top + pad + 18 + height) / height_px, width, height / height_px]

    for row in rows:
        y = 1 - (top_px + row["gridPos"]["y"] * ROW_HEIGHT_PX + 15) / height_px
        figure.text(0.005, y, row["title"], fontsize=11, fontweight="bold", color="#ccccdc")
    for panel in panels:
        grid = panel["gridPos"]
        axes = figure.add_axes(box(grid))
        axes.set_facecolor("#181b1f")
        axes.set_title(panel["title"], fontsize=9, loc="left", color="#ccccdc")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        series = []
        for target in panel["targets"]:
            for result in query_range(args.prometheus, prepare(target["expr"]), start, end, step):
                points = [(float(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf", "-Inf")]
                if points:
                    series.append((legend(target.get("legendFormat", ""), result["metric"]), points))
        if panel["type"] == "stat":
            axes.set_xticks([])
            axes.set_yticks([])
            # A stat whose legend names something (the coordinator) shows the name.
            named = "{{" in "".join(t.get("legendFormat", "") for t in panel["targets"])
            text = "  ".join(
                name if named else human(points[-1][1], unit) for name, points in series
            ) or "no data"
            axes.text(0.5, 0.5, text, ha="center", va="center", fontsize=20, color="#73bf69",
                      transform=axes.transAxes)
            continue
        for name, points in series:
            axes.plot([t - end for t, _ in points], [v for _, v in points], linewidth=1, label=name)
        if not series:
            axes.text(0.5, 0.5, "no data", ha="center", va="center", color="#888",
                      transform=axes.transAxes)
        axes.tick_params(labelsize=7)
        axes.set_xlim(start - end, 0)
        axes.xaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda x, _: f"-{abs(int(x)) // 60}:{abs(int(x)) % 60:02d}" if x < 0 else "now"))
        axes.yaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda v, _, unit=unit: human(v, unit)))
        axes.grid(color="#2c3235", linewidth=0.5)
        if series:
            axes.legend(fontsize=6, loc="upper left", ncol=2, framealpha=0.3)
    figure.savefig(args.out, facecolor=figure.get_facecolor())
    print(f"wrote {args.out}: {len(panels)} panels")


if __name__ == "__main__":
    main()
