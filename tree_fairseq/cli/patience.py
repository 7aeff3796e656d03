"""Where a resumed fairseq-train run stands against its patience, counted over its whole log.

fairseq's early stop (``checkpoint.patience``: stop after that many validations in a row without a
better ``best_checkpoint_metric``) keeps its count in memory only. A run resumed from
``checkpoint_last.pt`` takes its first validation as the best so far and counts from there, so an
interrupted run can train up to ``patience`` validations longer than an uninterrupted one, and stop
at another epoch. scripts/train.sh asks this module instead, on every resume:

    python tree_fairseq/cli/patience.py SAVE-DIR/train.log fairseq-train FLAG ...

(run as a file, it imports neither fairseq nor torch: it answers in a fraction of a second)

reads the validations of the log (the first of ``--valid-subset``, the metric of
``--best-checkpoint-metric``, as fairseq's early stop does) and the command's flags, and prints

- nothing, when there is nothing to count (no ``--patience``, no validation in the log yet, or
  validations within an epoch, which this count does not follow: every N updates, or at every
  mid-epoch save of ``--save-interval-updates``): train as fairseq does;
- ``0``, when the run is done: ``--patience`` validations since the best, ``--max-epoch`` reached,
  or (``--trained-to EPOCH``, the bound of the sitting just ended) fairseq stopped short of it for a
  reason of its own (``--max-update``, ``--stop-time-hours``);
- otherwise the ``--max-epoch`` to train to: the epoch at which, with no better validation, an
  uninterrupted run would stop. fairseq's own count cannot stop the run before that (it needs more
  validations than this leaves), so train.sh trains to it and asks again.

The log keeps every sitting: a validation that is logged again (a sitting killed between the
validation and its checkpoint repeats that epoch) or a run started over from an earlier epoch
replaces what the log said from that epoch on, and a sitting that found no checkpoint to resume
(fairseq logs ``No existing checkpoint found``) started the run afresh: what the log said before it
is of an earlier run and not counted. Figures are compared as the log prints them (fairseq rounds
them to three decimals), so a gain below 0.0005 does not count here.

With ``--validate-interval K``, fairseq validates at the end of every K-th epoch, and once more
when ``--max-update`` or ``--stop-time-hours`` stops it within an epoch. That extra validation
belongs to no run that goes on: a resume with a higher limit validates every K-th epoch again (and,
when the extra one fell on such an epoch, that epoch's own validation replaces it). So only the
validations of every K-th epoch count, and the bound is such an epoch, unless ``--max-epoch`` comes
first.
"""

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass

# What fairseq's trainer logs when a sitting finds no checkpoint to resume and starts the run afresh.
FRESH_START = "No existing checkpoint found"


@dataclass
class Standing:
    best: float | None  # best figure so far (None: no validation yet)
    since: int  # validations since the best that did not beat it
    last_epoch: int  # epoch of the last validation (0: none)


def read_log(path) -> tuple[list[str], int | None]:
    """The complete lines of a fairseq log (without their line ends), and the number of its last line
    when that was left out for ending without a newline (the log read or copied while its run wrote
    it, or the run stopped mid-line: ``| loss 7`` of ``| loss 7.761``), else None."""
    with open(path, encoding="utf-8", errors="replace") as file:
        lines = file.readlines()  # split at line ends only ("\r\n" read as "\n"), as a log's lines are numbered
    cut = len(lines) if lines and not lines[-1].endswith("\n") else None
    return [line.removesuffix("\n") for line in lines[:-1 if cut else None]], cut


def epoch_records(lines, pattern: re.Pattern, record) -> list[tuple[int, object]]:
    """(epoch, record) of each line of a fairseq log that ``pattern`` matches (its group 1: the epoch)
    and ``record(match)`` does not answer None for, in order, by the log's sittings: only since the last
    sitting that started the run afresh, and a line of an epoch already seen drops that epoch and every
    later one first."""
    found: list[tuple[int, object]] = []
    for line in lines:
        if FRESH_START in line:
            found = []
            continue
        match = pattern.search(line)
        if not match:
            continue
        value = record(match)
        if value is None:
            continue
        epoch = int(match.group(1))
        while found and found[-1][0] >= epoch:
            found.pop()
        found.append((epoch, value))
    return found


def validations(lines, subset: str = "valid", metric: str = "loss") -> list[tuple[int, float]]:
    """(epoch, figure) of each validation of ``subset`` in a fairseq log, counted by the log's sittings
    (:func:`epoch_records`). Figures are read as fairseq writes them (``"{:g}"``): ``7.819``,
    ``1.5e+06``, and ``nan`` or ``inf`` for a run that diverged, which are kept (fairseq's early stop
    counts them: nothing is better than a NaN best, and a NaN is better than nothing), not passed over."""
    pattern = re.compile(rf"\| epoch (\d+) \| valid on '{re.escape(subset)}' subset \|(.*)$")
    figure = re.compile(rf"\| {re.escape(metric)} (-?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|nan|inf))(?: \||$)")

    def value(match):
        found = figure.search("|" + match.group(2))
        return None if found is None else float(found.group(1))

    return epoch_records(lines, pattern, value)


def best_validation(found: list[tuple[int, float]]) -> tuple[int, float]:
    """(epoch, figure) of the lowest validation of ``found``, the first of equal ones, as fairseq keeps
    its best checkpoint. Refused: no validation, or a NaN or infinite figure (a run that diverged)."""
    if not found:
        raise ValueError("no validation: no best epoch")
    for epoch, value in found:
        if not math.isfinite(value):
            raise ValueError(f"the validation loss of epoch {epoch} is {value}: the run diverged and has no best epoch")
    return min(found, key=lambda item: item[1])


def standing(found: list[tuple[int, float]], maximize: bool = False) -> Standing:
    """fairseq's early-stop count over ``found``: a validation is better only if strictly so."""
    best, since = None, 0
    for _, value in found:
        if best is None or (value > best if maximize else value < best):
            best, since = value, 0
        else:
            since += 1
    return Standing(best, since, found[-1][0] if found else 0)


def _flags(command: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--patience", type=int, default=-1)
    parser.add_argument("--max-epoch", type=int, default=0)
    parser.add_argument("--valid-subset", default="valid")
    parser.add_argument("--best-checkpoint-metric", default="loss")
    parser.add_argument("--maximize-best-checkpoint-metric", action="store_true")
    parser.add_argument("--validate-interval", type=int, default=1)
    parser.add_argument("--validate-interval-updates", type=int, default=0)
    parser.add_argument("--save-interval-updates", type=int, default=0)
    parser.add_argument("--disable-validation", action="store_true")
    return parser.parse_known_args(command)[0]


def max_epoch(log_lines, command: list[str], trained_to: int | None = None) -> tuple[int | None, str]:
    """The ``--max-epoch`` to resume with (None: train as fairseq does; 0: done), and why (empty
    when there is nothing to say). ``trained_to``: the ``--max-epoch`` of the sitting just ended; a
    log that stops short of it means fairseq stopped for a reason of its own (``--max-update``,
    ``--stop-time-hours``), and the run is done."""
    flags = _flags(command)
    if flags.patience <= 0 or flags.disable_validation:
        return None, ""
    if flags.validate_interval_updates > 0:
        return None, "validation every N updates: fairseq's own patience count applies after a resume"
    if flags.save_interval_updates > 0:
        return None, ("validation at every mid-epoch save (--save-interval-updates): fairseq's own patience count "
                      "applies after a resume")
    interval = max(flags.validate_interval, 1)
    # Only every interval-th epoch's validation: fairseq's extra one when it stops mid-epoch is of no run that goes on.
    found = [(epoch, value) for epoch, value in
             validations(log_lines, flags.valid_subset.split(",")[0], flags.best_checkpoint_metric)
             if epoch % interval == 0]
    state = standing(found, flags.maximize_best_checkpoint_metric)
    if trained_to and state.last_epoch < trained_to - trained_to % interval:
        return 0, (f"done: fairseq stopped before epoch {trained_to - trained_to % interval} "
                   f"(last validation at epoch {state.last_epoch})")
    if state.best is None:
        return None, ""
    said = (f"{state.since} validation(s) since the best {flags.best_checkpoint_metric} {state.best:g}, "
            f"last at epoch {state.last_epoch}, patience {flags.patience}")
    if state.since >= flags.patience:
        return 0, f"done: {said}"
    if flags.max_epoch and max(state.last_epoch, trained_to or 0) >= flags.max_epoch:
        return 0, f"done: --max-epoch {flags.max_epoch} reached ({said})"
    bound = state.last_epoch + interval * (flags.patience - state.since)
    if flags.max_epoch:
        bound = min(bound, flags.max_epoch)
    return bound, f"{said}: training to epoch {bound} at most before counting again"


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--trained-to", type=int, metavar="EPOCH",
                        help="the --max-epoch of the sitting just ended (a log short of it: done)")
    parser.add_argument("log", help="the run's log (scripts/train.sh writes SAVE-DIR/train.log)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the fairseq-train command and its flags")
    args = parser.parse_args(argv)
    try:
        lines, _ = read_log(args.log)
    except FileNotFoundError:
        lines = []
    bound, why = max_epoch(lines, args.command, args.trained_to)
    if bound == 0 and args.trained_to is None:
        why += (f"; nothing is left to train (to train afresh, choose another SAVE-DIR, or move checkpoint*.pt and "
                f"train.log out of {os.path.dirname(args.log) or '.'})")
    if why:
        print(f"patience: {why}", file=sys.stderr)
    if bound is not None:
        print(bound)


if __name__ == "__main__":
    main()
