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
``--runs`` adds runs; ``OUT/settings.json`` records what they are made with, and a command that
differs is refused while OUT holds a finished run (without one the record is replaced).
``--table-only`` rewrites the table from the JSON files there (the table is made by
:mod:`tree_fairseq.analysis.benchmark_table`).

Options this script does not know go to benchmark_speed.py (e.g. ``--embed-dim 256``); its
defaults here are those of the published table: one thread, 10 timed updates after 2, 64
generation sentences, encoder lengths 16, 256 and 512. An option passed replaces its default
(``--updates 2``), and settings.json records the flags benchmark_speed.py was given.

PASCAL (``pascal_transformer_iwslt_de_en``) reads each source token's dependency parent, so it
runs on a data-bin with parents (tree-fairseq-parse --heads, then tree-fairseq-preprocess):
``--parents-data``, or DATA when that has them; a family that needs parents and has none is
refused before anything runs.

Example::

    python scripts/benchmark_all.py DATA-BIN --out bench --runs 3 --parents-data PARENTS-DATA-BIN
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tree_fairseq.analysis.benchmark_table import FAMILIES, load_runs, table
from tree_fairseq.cli import ArgumentParser, overriding
from tree_fairseq.cli.argtypes import positive_int
from tree_fairseq.cli.files import write_json

HERE = Path(__file__).resolve().parent
DEFAULTS = ["--threads", "1", "--updates", "10", "--warmup", "2", "--gen-sentences", "64", "--lengths", "16,256,512"]


def parse_args():
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="tree data-bin, as for benchmark_speed.py")
    parser.add_argument("--parents-data", metavar="DATA-BIN",
                        help="data-bin with the sources' dependency parents, for the families that read them "
                             "(PASCAL; default: DATA)")
    parser.add_argument("--out", required=True, help="folder of the runs' JSON and reports and of table.md")
    parser.add_argument("--runs", type=positive_int, default=3, help="runs per family (default: 3)")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES), metavar="ARCH",
                        help=f"architectures to run (default: all {len(FAMILIES)}: {', '.join(FAMILIES)})")
    parser.add_argument("--table-only", action="store_true", help="only rewrite OUT/table.md from the runs there")
    return parser.parse_known_args()


def data_bins(a) -> dict[str, str]:
    """{arch: its data-bin} for ``--families``; exits naming the families that read dependency
    parents when their data-bin has none."""
    from tree_fairseq.analysis.benchmark_models import has_parents, reads_parents  # imports fairseq

    chosen = {arch: a.parents_data if a.parents_data and reads_parents(arch) else a.data for arch in a.families}
    missing = [arch for arch in a.families if reads_parents(arch) and not has_parents(chosen[arch])]
    if missing:
        sys.exit(f"benchmark_all.py: error: {', '.join(missing)} read the sources' dependency parents, which "
                 f"{chosen[missing[0]]} does not hold: give a data-bin with parents (tree-fairseq-parse --heads, "
                 "then tree-fairseq-preprocess) with --parents-data, or leave these out of --families")
    return chosen


# What makes a measurement, as each run's JSON records it: a family's runs are pooled into one median,
# and the families are set against one another.
FAMILY_SETTINGS = ("dims", "data", "task", "lengths", "device", "baseline_arch")
SHARED_SETTINGS = ("lengths", "device", "baseline_arch")


def mixed_settings(runs: dict[str, list[dict]]) -> list[str]:
    """What the runs of ``load_runs`` disagree on, one line each: a family's runs on another data-bin or
    with other dimensions, or families with other lengths, devices or baselines."""
    problems = []
    for arch, summaries in runs.items():
        for key in FAMILY_SETTINGS:
            values = sorted({json.dumps(s.get(key), sort_keys=True) for s in summaries})
            if len(values) > 1:
                problems.append(f"{arch}'s runs have {key} {' and '.join(values)}")
    for key in SHARED_SETTINGS:
        values = sorted({json.dumps(s.get(key), sort_keys=True) for summaries in runs.values() for s in summaries})
        if len(values) > 1:
            problems.append(f"the families' runs have {key} {' and '.join(values)}")
    return problems


def check_settings(out: Path, flags: list, data: dict[str, str]) -> dict:
    """OUT/settings.json, what its runs were made with (benchmark_speed.py's flags, each family's
    data-bin), with this command's families added; exits when this command's differ and OUT holds a
    finished run (without one, as after a command whose every run failed, the record is replaced)."""
    path = out / "settings.json"
    settings = {"flags": flags, "data": {arch: os.path.realpath(bin) for arch, bin in data.items()}}
    if not path.exists():
        return settings
    finished = any(out.glob("*.run*.json"))
    try:
        before = json.loads(path.read_text())
        if not (isinstance(before, dict) and isinstance(before.get("flags"), list)
                and isinstance(before.get("data"), dict)):
            raise ValueError("not the record of benchmark_all.py")
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        if finished:
            sys.exit(f"benchmark_all.py: error: {path} cannot be read ({error}), and {out} holds finished runs: "
                     "give another --out")
        print(f"benchmark_all.py: {path} cannot be read and {out} holds no finished run: replacing it",
              file=sys.stderr)
        return settings
    problems = [f"benchmark_speed.py's flags were {' '.join(before['flags'])!r}, now {' '.join(flags)!r}"
                ] if before["flags"] != flags else []
    problems += [f"{arch} ran on {before['data'][arch]}, now {bin}" for arch, bin in settings["data"].items()
                 if arch in before["data"] and before["data"][arch] != bin]
    if problems and not finished:
        print(f"benchmark_all.py: {path} records other settings ({'; '.join(problems)}) and {out} holds no finished "
              "run: replacing it", file=sys.stderr)
        return settings
    if problems:
        sys.exit(f"benchmark_all.py: error: {out} holds runs made otherwise ({'; '.join(problems)}), which "
                 "would be pooled with these: give another --out")
    settings["data"] = {**before["data"], **settings["data"]}
    return settings


def run_one(data, flags, arch, run, out):
    """One benchmark_speed.py run with ``flags``; its JSON appears only when the run finished."""
    final, report = out / f"{arch}.run{run}.json", out / f"{arch}.run{run}.txt"
    partial = out / f"{arch}.run{run}.json.partial"
    command = [sys.executable, str(HERE / "benchmark_speed.py"), data, "--tree-arch", arch, *flags, "--json",
               str(partial)]
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


def main():
    a, passed = parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    if not a.table_only:
        data = data_bins(a)
        flags = overriding(DEFAULTS, passed)  # a flag passed replaces its default
        settings = check_settings(out, flags, data)
        write_json(out / "settings.json", settings)  # whole or not at all
        for run in range(1, a.runs + 1):
            for arch in a.families:
                if not (out / f"{arch}.run{run}.json").exists() and not run_one(data[arch], flags, arch, run, out):
                    failed.append(f"{arch} run {run}")
    runs = load_runs(out)
    if not runs:
        sys.exit(f"benchmark_all.py: error: no finished run in {out}")
    problems = mixed_settings(runs)
    if problems:
        sys.exit(f"benchmark_all.py: error: the runs in {out} were not made alike, and their medians would pool "
                 f"them: {'; '.join(problems)}")
    text = table(runs)
    (out / "table.md").write_text(text)
    sys.stdout.write(text)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
