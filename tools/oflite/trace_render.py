#!/usr/bin/env python3
"""Draws a trace of `oflite run --trace` / `oflite launch -- --trace` as a
PNG: one row per track (rank / thread), slices as boxes coloured by
category, nested slices (act inside handling, kernel inside act) drawn
thinner on top, cross-rank flows as arrows. A picture for docs, not a
viewer: open the JSON in Perfetto (ui.perfetto.dev) or chrome://tracing.

Usage: trace_render.py TRACE.json OUT.png [--iterations A:B] [--width 14]
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import collections
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"handle": "#c9d6e8", "act": "#4e79a7", "kernel": "#f28e2b",
          "collective": "#59a14f", "transfer": "#e15759"}
# Height of a slice by its nesting depth on the track.
HEIGHTS = [0.8, 0.6, 0.4, 0.3, 0.2]


def time_window(slices, iterations):
    if not iterations:
        return min(e["ts"] for e in slices), max(e["ts"] + e["dur"] for e in slices)
    first, end = iterations
    inside = [e for e in slices if first <= e.get("args", {}).get("iteration", -1) < end]
    if not inside:
        sys.exit(f"no slice of iterations {first}:{end} in the trace")
    return min(e["ts"] for e in inside), max(e["ts"] + e["dur"] for e in inside)


def depths(track):
    """Nesting depth of each slice of one track (slices nest properly)."""
    out, stack = {}, []
    for e in sorted(track, key=lambda e: (e["ts"], -e["dur"])):
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        out[id(e)] = len(stack)
        stack.append(e)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--iterations", help="A:B, only these iterations' time span")
    parser.add_argument("--width", type=float, default=14)
    args = parser.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    slices = [e for e in events if e.get("ph") == "X"]
    iterations = tuple(int(x) for x in args.iterations.split(":")) if args.iterations else None
    lo, hi = time_window(slices, iterations)
    tracks = collections.defaultdict(list)
    for e in slices:
        if e["ts"] + e["dur"] >= lo and e["ts"] <= hi:
            tracks[(e["pid"], e["tid"])].append(e)
    order = sorted(tracks)
    row = {key: i for i, key in enumerate(order)}
    fig, ax = plt.subplots(figsize=(args.width, 0.55 * len(order) + 1.5))
    for key in order:
        depth = depths(tracks[key])
        for e in sorted(tracks[key], key=lambda e: depth[id(e)]):  # outer first
            d = min(depth[id(e)], len(HEIGHTS) - 1)
            h = HEIGHTS[d]
            ax.broken_barh([((e["ts"] - lo) / 1000, e["dur"] / 1000)], (row[key] - h / 2, h),
                           facecolors=COLORS.get(e.get("cat"), "#bab0ac"), linewidth=0)
    flow_ends = collections.defaultdict(dict)
    for e in events:
        if e.get("ph") in ("s", "f") and lo <= e["ts"] <= hi:
            flow_ends[e["id"]][e["ph"]] = e
    for ends in flow_ends.values():
        if "s" in ends and "f" in ends and ends["s"]["pid"] != ends["f"]["pid"]:
            s, f = ends["s"], ends["f"]
            ax.annotate("", xy=((f["ts"] - lo) / 1000, row[(f["pid"], f["tid"])]),
                        xytext=((s["ts"] - lo) / 1000, row[(s["pid"], s["tid"])]),
                        arrowprops=dict(arrowstyle="->", color="#555555", lw=0.5, alpha=0.6))
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"rank {p}: {names.get((p, t), t)}"[:60] for p, t in order], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_xlim(0, (hi - lo) / 1000)
    handles = [matplotlib.patches.Patch(color=c, label=k) for k, c in COLORS.items()]
    ax.legend(handles=handles, loc="upper right", fontsize=7, ncol=len(COLORS))
    title = "oflite trace" + (f", iterations {args.iterations}" if iterations else "")
    ax.set_title(title + " (arrows: messages and ring steps between ranks)", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}: {len(order)} tracks, {sum(len(t) for t in tracks.values())} slices")


if __name__ == "__main__":
    main()
