#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads fastmlip-pack --json lines (with an added "config" key) from stdin and prints one
Markdown table per configuration: the median of every figure over the repeated runs."""
import json
import statistics
import sys
from collections import OrderedDict

runs = OrderedDict()
for line in sys.stdin:
    line = line.strip()
    if line:
        row = json.loads(line)
        runs.setdefault(row["config"], OrderedDict()).setdefault(row["algorithm"], []).append(row)


def median(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else float("nan")


for config, algorithms in runs.items():
    print(f"\n{config} ({len(next(iter(algorithms.values())))} runs, medians)\n")
    print("| algorithm | bins | steps | padding | load max/mean | load CV | pack s (wall) | pack s (CPU) "
          "| epoch overlap | random batches |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rows in algorithms.items():
        print(f"| {name} | {int(median(rows, 'bins'))} | {int(median(rows, 'steps'))} "
              f"| {100 * median(rows, 'padding_fraction'):.3f}% | {median(rows, 'load_max_over_mean'):.4f} "
              f"| {median(rows, 'load_cv'):.4f} | {median(rows, 'pack_seconds'):.3f} "
              f"| {median(rows, 'pack_cpu_seconds'):.3f} | {median(rows, 'epoch_overlap'):.2e} "
              f"| {median(rows, 'epoch_overlap_random'):.2e} |")
