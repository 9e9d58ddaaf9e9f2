#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Draws a kinet trace timeline (the JSON of `kinet-trace --json`) as a PNG:
one row per QP, a bar per WQE from the moment the NIC took it to its CQE,
instants (unsignaled WQEs, receive CQEs) as ticks, errors in red. Needs
matplotlib (Debian: python3-matplotlib).

usage: scripts/trace_png.py TRACE.json OUT.png [--from US] [--to US]
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"write": "#4878d0", "write_imm": "#6acc64", "read": "#ee854a", "send": "#956cb4",
           "send_imm": "#8c613c", "cas": "#dc7ec0", "fadd": "#797979", "nop": "#d5bb67"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from", dest="t0", type=float, default=None, help="start, us")
    ap.add_argument("--to", dest="t1", type=float, default=None, help="end, us")
    a = ap.parse_args()
    with open(a.trace) as f:
        ev = json.load(f)["traceEvents"]
    names = {}
    for e in ev:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = "ctx %d %s" % (e["pid"], e["args"]["name"])
    rows = sorted(names)
    row = {k: i for i, k in enumerate(rows)}
    t0 = a.t0 if a.t0 is not None else min(e["ts"] for e in ev if "ts" in e)
    t1 = a.t1 if a.t1 is not None else max(e["ts"] + e.get("dur", 0) for e in ev if "ts" in e)
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 1.6))
    seen = set()
    for e in ev:
        if "ts" not in e or e["ts"] > t1 or e["ts"] + e.get("dur", 0) < t0:
            continue
        y = row[(e["pid"], e["tid"])]
        err = e.get("cat") == "error"
        col = "#d62728" if err else COLOURS.get(e["name"], "#999999")
        if e["ph"] == "X":
            lab = None if e["name"] in seen else e["name"]
            seen.add(e["name"])
            ax.broken_barh([(e["ts"], max(e["dur"], 0.05))], (y - 0.35, 0.7), facecolors=col,
                           edgecolors="none", alpha=0.8, label=lab)
        else:
            ax.plot([e["ts"], e["ts"]], [y - 0.4, y + 0.4], color=col, linewidth=0.6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([names[k] for k in rows])
    ax.set_xlim(t0, t1)
    ax.set_xlabel("time since the trace started [us]")
    ax.set_title("kinet WQE trace: each bar from the NIC taking a WQE to its CQE")
    if seen:
        ax.legend(loc="upper right", fontsize="small")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
