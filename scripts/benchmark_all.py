#!/usr/bin/env python
"""Every family of this package against fairseq's transformer, in one table.

Runs ``scripts/benchmark_speed.py`` once per family and run (a fresh process each, so that no
run's memory or allocator state leaks into the next), each writing its figures as JSON to
``OUT/ARCH.runR.json`` and its full report to ``OUT/ARCH.runR.txt``; then writes ``OUT/table.md``:
per family the median over its runs (and the range when there are several) of

- training speed, tree / transformer, the FLOP ideal of that ratio and measured / ideal;
- generation speed (beam 5, forced length), its FLOP ideal and measured / ideal;
- peak training memory, tree / transformer;
- inference (no autograd) memory growth of one encoder forward from the first length to each
  other, the tree's growth over the transformer's.

Runs are ordered run 1 of every family, then run 2 of every family, ...; a run whose JSON exists is
not run again, so an interrupted invocation picks up where it stopped and a later one with more
``--runs`` adds runs. ``--table-only`` rewrites the table from the JSON files there.

Options this script does not know go to benchmark_speed.py (e.g. ``--embed-dim 256``); its
defaults here are those of the published table: one thread, 10 timed updates after 2, 64
generation sentences, encoder lengths 16, 256 and 512.

Example::

    python scripts/benchmark_all.py DATA-BIN --out bench --runs 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAMILIES = {
    "tree_transformer_iwslt_de_en": "Tree Transformer (hierarchical accumulation)",
    "constituent_transformer_iwslt_de_en": "constituent attention",
    "tree_pe_transformer_iwslt_de_en": "tree positional encodings",
    "treeformer_iwslt_de_en": "Treeformer (chart)",
    "tree_composition_transformer_iwslt_de_en": "attention as tree composition",
}
DEFAULTS = ["--threads", "1", "--updates", "10", "--warmup", "2", "--gen-sentences", "64", "--lengths", "16,256,512"]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="tree data-bin, as for benchmark_speed.py")
    parser.add_argument("--out", required=True, help="folder of the runs' JSON and reports and of table.md")
    parser.add_argument("--runs", type=int, default=3, help="runs per family (default: 3)")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES), metavar="ARCH",
                        help=f"architectures to run (default: all five: {', '.join(FAMILIES)})")
    parser.add_argument("--table-only", action="store_true", help="only rewrite OUT/table.md from the runs there")
    return parser.parse_known_args()


def run_one(a, passed, arch, run, out):
    """One benchmark_speed.py run; its JSON appears only when the run finished."""
    final, report = out / f"{arch}.run{run}.json", out / f"{arch}.run{run}.txt"
    partial = out / f"{arch}.run{run}.json.partial"
    command = [sys.executable, str(HERE / "benchmark_speed.py"), a.data, "--tree-arch", arch, *DEFAULTS, *passed,
               "--json", str(partial)]
    print(f"[{time.strftime('%H:%M:%S')}] {arch}, run {run}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with open(report, "w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if result.returncode or not partial.exists():
        print(f"  {arch}, run {run} failed (exit status {result.returncode}); see {report}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return False
    partial.rename(final)
    return True


def load_runs(out):
    """{arch: [summary, ...]} of the finished runs in ``out``, in run order."""
    runs = {}
    for path in sorted(out.glob("*.run*.json"), key=lambda p: (p.name.split(".run")[0], int(p.stem.split(".run")[1]))):
        runs.setdefault(path.name.split(".run")[0], []).append(json.loads(path.read_text()))
    return runs


def figure(values, digits=2):
    """Median of the runs' values, with their range when there are several; n/a if none was measured."""
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    median = f"{statistics.median(values):.{digits}f}"
    if len(values) == 1:
        return median
    return f"{median} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def growth(summary, mode, length):
    ratios = summary.get("memory_growth_ratio") or {}
    return ratios.get(mode, {}).get(str(length))


def ratio_to_ideal(summary, what):
    measured, ideal = summary.get(f"{what}_ratio"), summary.get(f"{what}_ideal")
    return None if measured is None or ideal is None else measured / ideal


def table(runs) -> str:
    lengths = sorted({n for summaries in runs.values() for s in summaries for n in s["lengths"][1:]})
    first = min((s["lengths"][0] for summaries in runs.values() for s in summaries), default=16)
    header = ["family (arch)", "runs", "train speed", "ideal", "measured / ideal", "generation speed", "ideal",
              "measured / ideal", "train memory"] + [f"infer. memory growth {first}->{n}" for n in lengths]
    rows = []
    for arch in [a for a in FAMILIES if a in runs] + sorted(set(runs) - set(FAMILIES)):
        summaries = runs[arch]
        rows.append([
            f"{FAMILIES.get(arch, arch)} (`{arch}`)", str(len(summaries)),
            figure([s["train_ratio"] for s in summaries]), figure([s["train_ideal"] for s in summaries]),
            figure([ratio_to_ideal(s, "train") for s in summaries]),
            figure([s["gen_ratio"] for s in summaries]), figure([s["gen_ideal"] for s in summaries]),
            figure([ratio_to_ideal(s, "gen") for s in summaries]),
            figure([s["train_memory_ratio"] for s in summaries]),
            *(figure([growth(s, "inference", n) for s in summaries]) for n in lengths),
        ])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    devices = sorted({s["device"] for summaries in runs.values() for s in summaries})
    dates = sorted(s["date"] for summaries in runs.values() for s in summaries)
    loads = [float(x) for summaries in runs.values() for s in summaries for x in s["load_average"] if x != "n/a"]
    notes = [
        "",
        "Every figure is tree / transformer, measured in the same run on the same batches: speeds as the tree "
        "model's speed over the transformer's (higher is faster), memory as the tree model's over the "
        "transformer's (lower is leaner), growth as the tree model's peak at the longer length over its peak at "
        f"{first} tokens, divided by the same for the transformer. Median over the runs, range in brackets.",
        "Targets: training measured / ideal >= 0.9 (every family); generation >= 0.8 of the transformer's speed "
        "for the Tree Transformer and >= 0.9 of the FLOP ideal for the others; training memory <= 1.5; "
        "inference memory growth <= 2 (<= 1.5 for constituent attention).",
        f"Device: {'; '.join(devices)}. Runs {dates[0]} to {dates[-1]}"
        + (f"; 1-minute load average {min(loads):.1f} to {max(loads):.1f}." if loads else "."),
    ]
    return "\n".join(lines + notes) + "\n"


def main():
    a, passed = parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    if not a.table_only:
        for run in range(1, a.runs + 1):
            for arch in a.families:
                if not (out / f"{arch}.run{run}.json").exists() and not run_one(a, passed, arch, run, out):
                    failed.append(f"{arch} run {run}")
    runs = load_runs(out)
    if not runs:
        sys.exit(f"benchmark_all.py: error: no finished run in {out}")
    text = table(runs)
    (out / "table.md").write_text(text)
    sys.stdout.write(text)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
