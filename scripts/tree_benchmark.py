"""Does a model use its source tree? Exact match and sacreBLEU on the tree-dependent benchmark
(``tree-fairseq-synthetic``: targets ordered by STR/INV source trees), every model with the same
small configuration and update budget, against the best exact match a model can reach without
the tree (the tree-blind ceiling, exact).

    python scripts/tree_benchmark.py --work WORK [--seeds 1 2 3] [--updates 800] [--runs NAME ...]
        [--curve] [--jobs N] [--table docs/tree_benchmark.md]

Runs (``--runs``; all by default, ``--list`` prints them):

    tree_transformer/{gold,balanced,left,right}     tree_translation on each tree kind
    tree_transformer/gold/--no-hier-embed, .../--no-subtree-mask, .../--no-tree-cross-attention
    tree_pe_transformer/{gold,balanced}, tree_composition_transformer/{gold,balanced}
    tree_composition_transformer/{gold,balanced}/--composition-leaves/contextual/--encoder-layers/2/--node-labels
    constituent_transformer/text, treeformer/text, transformer/text   translation, text alone

A run's ``/--flag[/value]`` parts go to fairseq-train after the model's settings below, which they
replace; the budget, seed, folders and logging are the script's (refused in a run's name), and a run
gives each flag once.

Every model: 64 / ffn 128 / 4 heads, 2 + 2 layers (the composition model: no encoder layers, its
paper's model composes the word embeddings), shared decoder input/output embeddings, no
dropout, Adam (0.9, 0.98), lr 5e-3, inverse sqrt with 100 warmup updates, cross-entropy, batches
of 1024 tokens (leaves + nodes for tree inputs), UPDATES updates, one CPU thread; the last
checkpoint translates the test split greedily (beam 1, at most 2n + 2 tokens). ``--curve`` also
keeps a checkpoint every ``--curve-every`` updates for the tree transformer on gold and balanced
trees (each with and without ``--leaf-weight-per-head``, where those runs are asked for) and
scores each (exact match vs updates). WORK/data is the benchmark (made once, with
``--data-seed`` and its default size), WORK/runs/BUDGET/NAME/seedS holds each run; a finished run is
not redone (one that lacks what the command asks, another budget or no such curve, is refused before
any run, naming its folder to remove), and a run that was stopped before its result is started
afresh (its folder emptied), so an interrupted command continues with the runs it had not finished
and ends with the table an uninterrupted one gives. The table (mean and standard deviation over the
seeds that finished; missing cells say so) is printed and, with ``--table``, written as Markdown.
"""

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import tree_fairseq
from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.argtypes import nonnegative_float, positive_int, seed
from tree_fairseq.cli.files import check_output, write_json, write_text
from tree_fairseq.cli.locking import output_lock
from tree_fairseq.synthetic import get_parser as benchmark_parser
from tree_fairseq.synthetic import make, score_translations

USER_DIR = str(Path(tree_fairseq.__file__).parent)
ARCHS = {  # family -> the architecture whose defaults the flags below override
    "tree_transformer": "tree_transformer_tiny",
    "tree_pe_transformer": "tree_pe_transformer_tiny",
    "tree_composition_transformer": "tree_composition_transformer_tiny",
    "constituent_transformer": "constituent_transformer_tiny",
    "treeformer": "treeformer_tiny",
    "transformer": "transformer",
}
RUNS = [
    "tree_transformer/gold", "tree_transformer/balanced", "tree_transformer/left", "tree_transformer/right",
    "tree_transformer/gold/--no-hier-embed", "tree_transformer/gold/--no-subtree-mask",
    "tree_transformer/gold/--no-tree-cross-attention",
    "tree_pe_transformer/gold", "tree_pe_transformer/balanced",
    "tree_composition_transformer/gold", "tree_composition_transformer/balanced",
    # the composition model with positions and labels, the form that can use the tree in translation
    "tree_composition_transformer/gold/--composition-leaves/contextual/--encoder-layers/2/--node-labels",
    "tree_composition_transformer/balanced/--composition-leaves/contextual/--encoder-layers/2/--node-labels",
    "constituent_transformer/text", "treeformer/text", "transformer/text",
]
CURVE_RUNS = ["tree_transformer/gold", "tree_transformer/balanced",
              "tree_transformer/gold/--leaf-weight-per-head", "tree_transformer/balanced/--leaf-weight-per-head"]
MODEL_FLAGS = [
    "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4",
    "--encoder-layers", "2", "--decoder-embed-dim", "64", "--decoder-ffn-embed-dim", "128",
    "--decoder-attention-heads", "4", "--decoder-layers", "2", "--share-decoder-input-output-embed",
    "--dropout", "0.0",
]
# The composition model of Ahmed et al. composes the word embeddings (no transformer encoder layers).
FAMILY_FLAGS = {"tree_composition_transformer": ["--encoder-layers", "0"]}
OPTIM_FLAGS = [
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-3", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "100", "--criterion", "cross_entropy", "--max-tokens", "1024",
]


# The flags train_flags gives after a run's own, which fairseq-train would take over the run's silently.
OWN_FLAGS = ("--user-dir", "--task", "--arch", "--max-update", "--stop-time-hours", "--seed", "--save-dir",
             "--no-epoch-checkpoints", "--no-save-optimizer-state", "--disable-validation", "--log-format",
             "--log-interval", "--cpu", "--num-workers", "--save-interval-updates", "--keep-interval-updates")


def run_spec(name: str):
    """``(arch, task, data-bin kind, extra flags)`` of a run name ``family/kind[/--flag]``; a run's
    flag replaces the model's and optimiser's defaults, but not the script's own (``OWN_FLAGS``)
    and not another of the run's."""
    family, kind, *flags = name.split("/")
    if family not in ARCHS:
        raise ValueError(f"unknown model family in run {name!r}; one of {sorted(ARCHS)}")
    named = [flag.split("=", 1)[0] for flag in flags if flag.startswith("--")]
    for flag in named:
        if flag in OWN_FLAGS:
            raise ValueError(f"run {name!r}: {flag} is the script's own (set by --updates, --minutes, --seeds, "
                             "--work or --curve-every), not a run's flag")
        if named.count(flag) > 1:
            raise ValueError(f"run {name!r}: {flag} is given twice: give it once")
    task = "translation" if kind == "text" else "tree_translation"
    return ARCHS[family], task, kind, flags


def train_flags(data: Path, name: str, seed: int, updates: int, save_dir: Path, curve_every: int = 0,
                minutes: float = 0) -> list:
    arch, task, kind, flags = run_spec(name)
    family_flags = FAMILY_FLAGS.get(name.split("/")[0], [])
    extra = ["--save-interval-updates", str(curve_every), "--keep-interval-updates", "-1"] if curve_every else []
    # a time budget is instead of the update budget: the run stops at the time alone, not at UPDATES as well
    limit = ["--stop-time-hours", str(minutes / 60)] if minutes else ["--max-update", str(updates)]
    return [str(data / "data-bin" / kind), "--user-dir", USER_DIR, "--task", task, "--arch", arch,
            *MODEL_FLAGS, *family_flags, *OPTIM_FLAGS, *flags, *limit, "--seed", str(seed),
            "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--no-save-optimizer-state",
            "--disable-validation", "--log-format", "simple", "--log-interval", "100", "--cpu",
            "--num-workers", "0", *extra]


def translate(data: Path, name: str, checkpoint: Path, max_len: int) -> dict:
    _, task, kind, _ = run_spec(name)
    out = subprocess.run(
        [sys.executable, "-m", "fairseq_cli.generate", str(data / "data-bin" / kind), "--user-dir", USER_DIR,
         "--task", task, "--path", str(checkpoint), "--gen-subset", "test", "--beam", "1",
         "--batch-size", "256", "--required-batch-size-multiple", "1", "--max-len-a", "0",
         "--max-len-b", str(2 * max_len + 2), "--cpu",
         "--num-workers", "0"],
        env=_env(), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"fairseq-generate failed on {checkpoint}:\n{out.stderr[-2000:]}")
    return score_translations(out.stdout)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["OMP_NUM_THREADS"] = "1"
    return env


def budget(updates: int, minutes: float) -> str:
    return f"{minutes:g}min" if minutes else f"{updates}updates"


def run_folder(work: Path, name: str, seed: int, updates: int, minutes: float = 0) -> Path:
    return work / "runs" / budget(updates, minutes) / name.replace("/--", "/") / f"seed{seed}"


def curve_steps(updates: int, curve_every: int) -> set[int]:
    """The updates a curve of a run that made ``updates`` updates has a point at."""
    return {*range(curve_every, updates, curve_every), updates}


def unlike_command(result: dict, updates: int, minutes: float, curve_every: int) -> str:
    """What a finished run's result lacks of what the command asks (its budget, its curve), or ''."""
    if result.get("budget") != budget(updates, minutes):
        return f"its budget is {result.get('budget')}, not {budget(updates, minutes)}"
    if minutes and result.get("max_update", 0) is not None:  # before, a time budget also stopped at --updates
        return f"it stopped at {minutes:g} minutes or an update limit, whichever came first"
    if curve_every:
        has = {int(step) for step in result.get("curve", {})}
        if has != curve_steps(result["updates"], curve_every):
            return (f"its learning curve has points at {sorted(has) or 'no update'}, not every {curve_every} "
                    "updates (--curve-every)")
    return ""


def run_one(data: Path, work: Path, name: str, seed: int, updates: int, max_len: int, curve_every: int,
            minutes: float = 0) -> dict:
    run_dir = run_folder(work, name, seed, updates, minutes)
    result_path = run_dir / "result.json"
    if result_path.exists():
        result = json.loads(result_path.read_text())
        unlike = unlike_command(result, updates, minutes, curve_every)
        if unlike:  # main refuses these before any run; checked again here, where the result is taken
            raise RuntimeError(f"{name} seed {seed}: {run_dir} holds a finished run other than this command's: "
                               f"{unlike}; remove {run_dir} to run it again")
        if not curve_every:
            result.pop("curve", None)  # not asked for: the table has no curve of it
        return result
    if run_dir.exists():
        # A run stopped before its result: its checkpoint has no optimizer state (which fairseq would need to go
        # on counting updates), and a time budget cannot be resumed, so the run starts afresh, as if never begun.
        print(f"{name} seed {seed}: {run_dir} holds an unfinished run; starting it afresh", file=sys.stderr, flush=True)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    start = time.time()
    with open(run_dir / "train.log", "w") as log:
        train = subprocess.run([sys.executable, "-m", "fairseq_cli.train",
                                *train_flags(data, name, seed, updates, run_dir, curve_every, minutes)],
                               env=_env(), stdout=log, stderr=subprocess.STDOUT)
    log_text = (run_dir / "train.log").read_text()
    if train.returncode:
        raise RuntimeError(f"{name} seed {seed}: fairseq-train failed (see {run_dir / 'train.log'})")
    done = re.findall(r"num_updates[= ](\d+)", log_text)
    if not done:  # the count was --updates' whether or not the run got there (a time budget has none)
        raise RuntimeError(f"{name} seed {seed}: {run_dir / 'train.log'} records no update count (num_updates)")
    result = {"run": name, "seed": seed, "budget": budget(updates, minutes), "max_update": None if minutes else updates,
              "updates": int(done[-1]), "train_seconds": round(time.time() - start),
              **translate(data, name, run_dir / "checkpoint_last.pt", max_len)}
    if curve_every:
        result["curve"] = {}
        for step in range(curve_every, result["updates"], curve_every):
            matches = list(run_dir.glob(f"checkpoint_*_{step}.pt"))
            if matches:
                checkpoint = matches[0]
                result["curve"][step] = translate(data, name, checkpoint, max_len)["exact_match"]
        result["curve"][result["updates"]] = result["exact_match"]
        for checkpoint in run_dir.glob("checkpoint_*_*.pt"):
            checkpoint.unlink()
    write_json(result_path, result)  # whole or not at all: one cut short by a kill would read as a finished run
    print(f"[{time.strftime('%H:%M:%S')}] {name} seed {seed}: exact match {result['exact_match']:.1f}%, "
          f"BLEU {result['bleu']:.1f} ({result['train_seconds']} s)", flush=True)
    return result


def _mean_std(values):
    if not values:
        return "missing"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def table(results: list[dict], runs: list[str], seeds: list[int], ceiling: dict) -> str:
    lines = [
        "| run (model / source trees / option) | task | seeds done | updates | exact match % | sacreBLEU |",
        "|---|---|---|---|---|---|",
    ]
    for name in runs:
        done = [r for r in results if r["run"] == name]
        _, task, _, _ = run_spec(name)
        updates = "/".join(sorted({str(r["updates"]) for r in done})) or "-"
        lines.append(f"| {name} | {task} | {len(done)}/{len(seeds)} | {updates} | "
                     f"{_mean_std([r['exact_match'] for r in done])} | {_mean_std([r['bleu'] for r in done])} |")
    lines.append(f"| tree-blind ceiling (exact: the best any model without the tree can do) | | | | "
                 f"{100 * ceiling['test_lengths']:.1f} | |")
    curves = [r for r in results if r.get("curve")]
    if curves:
        steps = sorted({int(s) for r in curves for s in r["curve"]})
        lines += ["", "Exact match (%) on the test split against updates:", "",
                  "| run | seed | " + " | ".join(map(str, steps)) + " |",
                  "|---|---|" + "---|" * len(steps)]
        for r in sorted(curves, key=lambda r: (r["run"], r["seed"])):
            cells = [f"{r['curve'].get(str(s), r['curve'].get(s, float('nan'))):.1f}" for s in steps]
            lines.append(f"| {r['run']} | {r['seed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--work", type=Path, help="benchmark data, runs and results")
    parser.add_argument("--seeds", type=seed, nargs="+", default=[1, 2, 3],
                        help="training seeds (default 1 2 3)")
    parser.add_argument("--updates", type=positive_int, help="updates per model (default 800)")
    parser.add_argument("--minutes", type=nonnegative_float, default=0,
                        help="train each model this many minutes instead of --updates updates (no update limit; "
                        "not with --updates)")
    parser.add_argument("--runs", nargs="+", default=RUNS, metavar="NAME", help="runs (default: all; --list)")
    parser.add_argument("--list", action="store_true", help="print the run names and exit")
    parser.add_argument("--curve", action="store_true",
                        help="learning curve of the tree transformer on gold and balanced trees (with and "
                        "without --leaf-weight-per-head, where those runs are asked for)")
    parser.add_argument("--curve-every", type=positive_int, default=200, help="updates between curve points")
    parser.add_argument("--jobs", type=positive_int, default=1, help="runs at once, one thread each (default 1)")
    parser.add_argument("--data-seed", type=seed,
                        help="seed of the benchmark data WORK/data is made with (default 1); a WORK whose data "
                        "has another seed is refused")
    parser.add_argument("--table", type=Path, help="also write the table (Markdown) to this file")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(RUNS))
        return
    if args.work is None:
        parser.error("--work is required")
    if args.minutes and args.updates is not None:
        parser.error(f"--minutes {args.minutes:g} is instead of --updates: give one of them")
    if args.updates is None:
        args.updates = 800
    if args.work.exists() and not args.work.is_dir():
        parser.error(f"--work {args.work} is a file, not a folder")
    if args.table is not None:
        try:  # a folder failed with IsADirectoryError after all the runs
            check_output("--table", args.table, [])
        except ValueError as error:
            parser.error(str(error))
    for name in args.runs:
        try:
            run_spec(name)
        except ValueError as error:
            parser.error(str(error))
    # Each (run, seed) has one folder: a run or seed named twice was trained twice in it (at once with --jobs).
    for option, values in (("--seeds", args.seeds), ("--runs", [name.replace("/--", "/") for name in args.runs])):
        twice = sorted({str(value) for value in values if values.count(value) > 1})
        if twice:
            parser.error(f"{option} names {', '.join(twice)} more than once")
    data = args.work / "data"
    if (data / "benchmark.json").exists():
        made_with = json.loads((data / "benchmark.json").read_text())["config"]["seed"]
        if args.data_seed is not None and args.data_seed != made_with:
            parser.error(f"--data-seed {args.data_seed}: {data} was made with seed {made_with}, and its runs "
                         "are on those data; give another --work for other data")
    args.work.mkdir(parents=True, exist_ok=True)  # WORK.lock is written beside it
    with contextlib.ExitStack() as held:
        try:  # one command per WORK: two at once would train (and empty) the same run folders
            held.enter_context(output_lock(str(args.work), "--work"))
        except ValueError as error:
            sys.exit(f"tree_benchmark.py: error: {error}")
        failed = _benchmark(args, data)
    if failed:
        sys.exit(f"tree_benchmark.py: error: {failed} of the runs failed (FAILED above); their cells say missing")


def _benchmark(args, data: Path) -> int:
    """The runs and the table; how many runs failed."""
    if not (data / "benchmark.json").exists():
        seed = 1 if args.data_seed is None else args.data_seed
        make(benchmark_parser().parse_args(["--out", str(data), "--seed", str(seed)]))
    summary = json.loads((data / "benchmark.json").read_text())
    max_len = summary["config"]["max_len"]
    jobs = [(name, seed) for seed in args.seeds for name in args.runs]

    def curve_every(name: str) -> int:
        return args.curve_every if args.curve and name in CURVE_RUNS else 0

    # A finished run that lacks what this command asks (another budget, no curve or another one) is not its result.
    for name, seed in jobs:
        result_path = run_folder(args.work, name, seed, args.updates, args.minutes) / "result.json"
        if result_path.exists():
            unlike = unlike_command(json.loads(result_path.read_text()), args.updates, args.minutes, curve_every(name))
            if unlike:
                sys.exit(f"tree_benchmark.py: error: {result_path.parent} holds a finished run other than this "
                         f"command's ({unlike}): remove {result_path.parent} to run it again, or give another --work")
    results, failed = [], 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_one, data, args.work, name, seed, args.updates, max_len, curve_every(name),
                               args.minutes): (name, seed)
                   for name, seed in jobs}
        for future in concurrent.futures.as_completed(futures):
            try:
                results.append(future.result())
            except RuntimeError as error:
                print(f"FAILED: {error}", file=sys.stderr, flush=True)
                failed += 1
    text = table(results, args.runs, args.seeds, summary["tree_blind_ceiling"])
    print(f"\nbenchmark: {json.dumps(summary['config'])}\n"
          f"budget per model: {budget(args.updates, args.minutes)}\n\n{text}")
    if args.table:
        write_text(args.table, text + "\n")  # whole or not at all
    return failed


if __name__ == "__main__":
    main()
