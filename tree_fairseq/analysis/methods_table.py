"""One table of a study's systems: their scores over training seeds beside what training them cost.

A comparison's JSON (``tree-fairseq-compare --json``) holds each system's runs with their BLEU,
chrF and brevity penalty, and each pair's difference with its interval. The training side is in
each run's fairseq log, published beside the outputs as ``LOGS/RUN.train.log``. This module
reads both and prints one Markdown table per study:

- per system: its runs, mean ± sd of BLEU, chrF and BP over them (the comparison's own figures),
  and from the logs the epochs trained, the updates, and the minutes an epoch took (median and
  fastest);
- per pair: the difference of means and its 95% interval, p and Holm's p, for BLEU and chrF.

From a log, counted by its sittings as scripts/train.sh's patience count counts it (an epoch logged
again replaces what followed it; a sitting that started afresh leaves out what came before): the
last epoch that was validated, the last ``num_updates`` of an epoch's ``train``
line, the best validation loss and its epoch, and minutes per epoch from fairseq's per-epoch
``train_wall``, twice: the median over the epochs, and the fastest epoch. ``train_wall`` is wall
time, so an epoch during which the run was paused or shared its core with more than the work it was
planned beside counts that too; the median is robust to a few such epochs, not to a run most of
whose epochs had them. Every epoch trains on the same sentences, so the work of one is nearly that
of another, and only other work on the machine makes an epoch slower: the fastest epoch is the
least disturbed one, the nearer figure to what the method costs (the table says how many runs each
figure rests on). A run whose log is not there is counted as "log not kept", never guessed; a log
whose last line ends without a newline (copied while its run wrote it) is refused, as is a JSON
that is not a whole tree-fairseq-compare comparison.

    python -m tree_fairseq.analysis.methods_table docs/results/iwslt14-lowres-en-de/comparison.json \\
        --logs docs/results/iwslt14-lowres-en-de/logs
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.patience import best_validation, epoch_records, read_log, validations

METRICS = ("BLEU", "chrF", "BP")
_TRAIN_EPOCH = re.compile(r"\| train \| epoch (\d+) \|(.*)$")
_FIGURE = re.compile(r"\| (num_updates|train_wall) ([^|]+?) (?=\||$)")


@dataclass
class TrainingLog:
    """What one fairseq training log says about its run."""

    epochs: int  # the last epoch validated
    updates: int  # num_updates at the end of the last epoch trained
    best_loss: float
    best_nll: float | None  # the best epoch's validation nll_loss, None where the log has none
    best_epoch: int
    minutes_per_epoch: float  # median over epochs of train_wall / 60
    fastest_epoch_minutes: float  # the smallest train_wall of an epoch / 60
    hours: float  # the sum of the epochs' train_wall / 3600


def read_training_log(path: str) -> TrainingLog:
    """The summary of fairseq's log ``path``; a log with no completed epoch, or with a validation loss
    that is NaN or infinite (a run that diverged), is refused. The log is
    counted by its sittings as the patience count of scripts/train.sh counts it
    (:func:`tree_fairseq.cli.patience.epoch_records`): an epoch logged again (a run resumed from an
    earlier checkpoint) replaces what the log said from that epoch on, and a sitting that started the
    run afresh leaves out everything before it. The best epoch is the first of the lowest validation
    loss, as fairseq keeps it."""
    lines, cut = read_log(path)
    if cut is not None:
        raise ValueError(f"{path}: line {cut} is cut short (it ends without a newline): the log was copied while "
                         "its run wrote it, or the run stopped mid-line; copy it again when the run has ended")

    def train_figures(match):
        fields = dict(_FIGURE.findall(match.group(2) + " "))
        return fields if {"num_updates", "train_wall"} <= fields.keys() else None

    trained = dict(epoch_records(lines, _TRAIN_EPOCH, train_figures))
    losses = validations(lines, metric="loss")
    if not trained or not losses:
        raise ValueError(f"{path}: no epoch was trained and validated in it (no '| train | epoch' and "
                         "'| valid | epoch' lines): not a fairseq training log, or one of a run that never "
                         "finished an epoch")
    try:
        best_epoch, best_loss = best_validation(losses)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    try:
        walls = [float(fields["train_wall"]) for fields in trained.values()]
        updates = int(trained[max(trained)]["num_updates"])
    except ValueError as error:
        raise ValueError(f"{path}: an epoch line has a figure that is not a number ({error})") from None
    return TrainingLog(
        epochs=losses[-1][0],
        updates=updates,
        best_loss=best_loss,
        best_nll=dict(validations(lines, metric="nll_loss")).get(best_epoch),
        best_epoch=best_epoch,
        minutes_per_epoch=statistics.median(walls) / 60,
        fastest_epoch_minutes=min(walls) / 60,
        hours=sum(walls) / 3600,
    )


def _mean_sd(values: list[float], digits: int) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def _figure(entry: dict, metric: str, digits: int) -> str:
    figures = entry[metric]
    if figures.get("sd") is None:
        return f"{figures['mean']:.{digits}f}"
    return f"{figures['mean']:.{digits}f} ± {figures['sd']:.{digits}f}"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_comparison(comparison) -> None:
    """Refuses what is not a comparison tree-fairseq-compare wrote (a results folder's scores.json
    also has 'systems'), or one missing a figure the table prints, naming the system or pair."""
    command = comparison.get("command") if isinstance(comparison, dict) else None
    if not isinstance(command, str) or command.split(" ", 1)[0] != "tree-fairseq-compare":
        raise ValueError("not a tree-fairseq-compare --json file (its 'command' is not tree-fairseq-compare's)")
    systems = comparison.get("systems")
    if not isinstance(systems, dict) or not systems:
        raise ValueError("it has no 'systems': not a tree-fairseq-compare --json file")
    for name, entry in systems.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("runs"), dict) or not entry["runs"]:
            raise ValueError(f"system {name!r} has no 'runs'")
        for metric in METRICS:
            figures = entry.get(metric)
            if not (isinstance(figures, dict) and _finite(figures.get("mean"))
                    and (figures.get("sd") is None or _finite(figures["sd"]))):
                raise ValueError(f"system {name!r}: its {metric} has no finite 'mean' and 'sd'")
    pairs = comparison.get("pairs", [])
    if not isinstance(pairs, list):
        raise ValueError("its 'pairs' is not a list")
    for number, pair in enumerate(pairs, 1):
        for metric in METRICS[:2]:
            figures = pair.get(metric) if isinstance(pair, dict) else None
            interval = figures.get("interval") if isinstance(figures, dict) else None
            if not (isinstance(interval, list) and len(interval) == 2 and all(map(_finite, interval))
                    and all(_finite(figures.get(key)) for key in ("difference", "p", "holm_p"))
                    and isinstance(pair.get("a"), str) and isinstance(pair.get("b"), str)):
                raise ValueError(f"pair {number}: its {metric} lacks a finite difference, interval, p or holm_p "
                                 "(or the pair its systems' names)")


def table(comparison: dict, logs: str | None) -> str:
    """The Markdown of the systems' table and the pairs' table (:func:`check_comparison` first)."""
    check_comparison(comparison)
    systems = comparison["systems"]
    rows = ["| system | runs | BLEU | chrF | BP | epochs | updates | minutes / epoch | fastest epoch, minutes | logs |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, entry in systems.items():
        runs = list(entry["runs"])
        read = []
        for run in runs:
            path = os.path.join(logs, f"{run}.train.log") if logs else None
            if path and os.path.exists(path):
                read.append(read_training_log(path))
        kept = f"{len(read)} of {len(runs)}" if logs else "not read"
        rows.append(
            f"| {name} | {len(runs)} | {_figure(entry, 'BLEU', 2)} | {_figure(entry, 'chrF', 2)} "
            f"| {_figure(entry, 'BP', 3)} | {_mean_sd([log.epochs for log in read], 1)} "
            f"| {_mean_sd([log.updates for log in read], 0)} "
            f"| {_mean_sd([log.minutes_per_epoch for log in read], 1)} "
            f"| {_mean_sd([log.fastest_epoch_minutes for log in read], 1)} | {kept} |"
        )
    pairs = comparison.get("pairs", [])
    if pairs:
        rows += ["", "| pair (A − B) | BLEU difference [95% interval] | p (Holm) | chrF difference [95% interval] "
                 "| p (Holm) |", "| --- | --- | --- | --- | --- |"]
        for pair in pairs:
            cells = []
            for metric in ("BLEU", "chrF"):
                figures = pair[metric]
                low, high = figures["interval"]
                cells += [f"{figures['difference']:+.2f} [{low:+.2f}, {high:+.2f}]",
                          f"{figures['p']:.3f} ({figures['holm_p']:.3f})"]
            rows.append(f"| {pair['a']} − {pair['b']} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m tree_fairseq.analysis.methods_table",
        description="Print a comparison's systems (mean ± sd of BLEU, chrF and BP over their runs; epochs, "
        "updates and minutes per epoch, median and fastest, from their training logs) and pairs as Markdown "
        "tables.",
    )
    parser.add_argument("comparison", help="a tree-fairseq-compare --json file")
    parser.add_argument("--logs", metavar="DIR",
                        help="folder of the runs' training logs, RUN.train.log; runs without one are counted "
                        "in the 'logs' column")
    return parser


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    if args.logs is not None and not os.path.isdir(args.logs):
        sys.exit(f"methods_table: error: --logs {args.logs}: no such folder")
    try:
        with open(args.comparison, encoding="utf-8") as file:
            comparison = json.load(file)
        sys.stdout.write(table(comparison, args.logs))
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"methods_table: error: {args.comparison}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
