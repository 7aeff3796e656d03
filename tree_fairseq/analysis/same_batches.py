"""Whether a tree model trained on fairseq's transformer's batches: the check behind a same-batch
control (``--batch-tokens text``).

Two checks, each of which can fail:

1. **The batches themselves.** fairseq's ``translation`` task and a tree task (``--batch-tokens
   text``) each build their training batches on the same data-bin as fairseq-train asks for them
   (the train split combined, ``--max-tokens`` folded into the size filter, too long sentences
   skipped, batches a multiple of ``--required-batch-size-multiple`` sentences, shuffled with the
   seed, epoch by epoch). The sentence ids of every batch, in order, must be the same.
2. **The run's log.** fairseq-train logs (``train_inner``, every ``--log-interval`` updates) the mean
   target tokens (``wpb``) and sentences (``bsz``) of the updates since its previous such line, or
   since the update the sitting resumed from. The same means over the translation task's batches,
   rounded as fairseq rounds them (one decimal), must be what the log says, for every line of every
   sitting. A run on its own tree batches, or with another seed or ``--max-tokens``, disagrees.
   (One batch is one update here: a run with ``--update-freq`` above 1 sums several, and disagrees.)

The log is fairseq's ``simple`` format (``scripts/train.sh``'s ``train.log``, or fairseq-train's
output when not on a terminal). A last line without its newline (the log read or copied while its
run wrote it, or the run stopped mid-line) is left out with a note: cut inside ``num_updates=150``
it would say 15. A ``train_inner`` line whose epoch, ``wpb``, ``bsz`` or ``num_updates`` cannot be read
(a field missing, twice, or not a number), or that does not go past the updates of the line before it,
is refused, naming it. So is a sitting that goes back before a checkpoint the log saved (fairseq's
``Saved checkpoint ... (epoch E @ U updates ...)``): a resumed run goes on from its last checkpoint
(``Loaded checkpoint ... (epoch E @ U updates)``), repeating only the updates after it, which the
sitting before it logged but never saved; a sitting repeated, or a second run, would count the same
updates twice. The command line is ``scripts/check_same_batches.py``, or
``python -m tree_fairseq.analysis.same_batches``.
"""

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass

import numpy as np

from tree_fairseq.cli import ArgumentParser, argtypes
from tree_fairseq.cli.patience import FRESH_START, read_log

# What fairseq's trainer logs when a sitting resumes from a checkpoint.
_RESUMED = re.compile(r"Loaded checkpoint .* \(epoch \d+ @ (\d+) updates\)")
_SAVED = re.compile(r"Saved checkpoint .* \(epoch \d+ @ (\d+) updates\b")
_INNER = re.compile(r"\| train_inner \| epoch (\d+):.*")
_VALUE = re.compile(r"\b(wpb|bsz|num_updates)=([^,\s]*)")
_NUMBER = re.compile(r"\d+(\.\d+)?")


@dataclass
class Interval:
    """One ``train_inner`` line: the updates ``start`` + 1 to ``end`` of its sitting."""

    start: int
    end: int
    epoch: int
    logged: tuple[float, float]  # (wpb, bsz) as the log prints them
    after_resume: bool = False  # the first line of a sitting resumed from a checkpoint
    computed: tuple[float, float] | None = None  # the same from the batches (None: beyond them)
    line: int = 0  # its line of the log (1: the first)

    @property
    def agrees(self) -> bool:
        return self.computed == self.logged


def load_task(databin: str, source_lang: str, target_lang: str, task: str = "translation", **overrides):
    """fairseq's ``translation`` task or a tree_fairseq task on ``databin``, its train split loaded."""
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    import tree_fairseq
    tree_fairseq.register()
    from tree_fairseq.tasks import (DependencyTranslationConfig, DependencyTranslationTask, TreeTranslationConfig,
                                    TreeTranslationTask)
    config, task_class = {
        "translation": (TranslationConfig, TranslationTask),
        "tree_translation": (TreeTranslationConfig, TreeTranslationTask),
        "dependency_translation": (DependencyTranslationConfig, DependencyTranslationTask),
    }[task]
    loaded = task_class.setup_task(config(data=databin, source_lang=source_lang, target_lang=target_lang,
                                          dataset_impl="mmap", required_seq_len_multiple=1, **overrides))
    loaded.load_dataset("train", combine=True, epoch=1)
    return loaded


def training_batches(task, seed: int, epochs: int, max_tokens: int, max_positions: int = 1024,
                     batch_multiple: int = 8) -> list[list[list[int]]]:
    """The sentence ids of each training batch of ``task``, epoch by epoch (epochs 1 to ``epochs``),
    as fairseq-train's trainer asks for them."""
    from fairseq import utils

    iterator = task.get_batch_iterator(
        task.dataset("train"), max_tokens=max_tokens,
        max_positions=utils.resolve_max_positions(task.max_positions(), (max_positions, max_positions), max_tokens),
        ignore_invalid_inputs=True, required_batch_size_multiple=batch_multiple, seed=seed, epoch=1,
        disable_iterator_cache=True)  # fairseq would hand a second call the first call's iterator, epochs on
    return [[batch["id"].tolist() for batch in iterator.next_epoch_itr(shuffle=True)] for _ in range(epochs)]


def logged_intervals(lines) -> list[Interval]:
    """Every ``train_inner`` line of a fairseq-train log, in order, with the updates it covers."""
    found, start, resumed_at = [], 0, None
    saved = None  # (update, line) of the last checkpoint the log says was saved
    for number, line in enumerate(lines, 1):
        resumed = _RESUMED.search(line)
        if resumed or FRESH_START in line:
            start = int(resumed.group(1)) if resumed else 0
            if saved is not None and start < saved[0]:
                sitting = f"resumed from a checkpoint of update {start}" if resumed else "found no checkpoint"
                raise ValueError(f"line {number}: a sitting {sitting}, though the log saved one of update {saved[0]} "
                                 f"before it (line {saved[1]}): a sitting repeated, or a second run, whose updates "
                                 "would be counted twice; a resumed run goes on from its last checkpoint")
            resumed_at = start if resumed else None
            continue
        checkpoint = _SAVED.search(line)
        if checkpoint:
            saved = (int(checkpoint.group(1)), number)
            continue
        if "| train_inner |" not in line:
            continue
        inner = _INNER.search(line)
        fields = _VALUE.findall(inner.group(0)) if inner else []
        values = dict(fields)
        if len(fields) != 3 or len(values) != 3 or not all(_NUMBER.fullmatch(value) for value in values.values()) \
                or not values["num_updates"].isdigit():
            raise ValueError(f"line {number}: a train_inner line whose epoch, wpb, bsz and num_updates cannot be read "
                             "(each once, a number; the epoch and num_updates whole): the line is damaged")
        end = int(values["num_updates"])
        found.append(Interval(start, end, int(inner.group(1)), (float(values["wpb"]), float(values["bsz"])),
                              after_resume=start == resumed_at, line=number))
        start, resumed_at = end, None
    return found


def compute(intervals: list[Interval], batches: list[list[list[int]]], target_sizes: np.ndarray) -> None:
    """Fill each interval's ``computed`` means from the batches of consecutive epochs."""
    updates = [batch for epoch in batches for batch in epoch]
    for interval in intervals:
        if interval.end > len(updates):
            continue
        span = updates[interval.start:interval.end]
        interval.computed = (round(float(np.mean([target_sizes[batch].sum() for batch in span])), 1),
                             round(float(np.mean([len(batch) for batch in span])), 1))


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description="Check that a tree task with --batch-tokens text builds fairseq's translation task's training "
                    "batches on DATA-BIN (the same sentence ids, in the same order, every epoch) and, with --log, "
                    "that a run's train_inner lines (wpb, bsz) are those batches' means. Reads the data-bin and "
                    "the log, writes nothing; exits 1 when either check fails.")
    parser.add_argument("databin", metavar="DATA-BIN")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--seed", type=argtypes.seed, required=True, help="the run's --seed (common.seed)")
    parser.add_argument("--epochs", type=argtypes.positive_int,
                        help="epochs to compare (default: the last epoch of --log's train_inner lines)")
    parser.add_argument("--max-tokens", type=argtypes.positive_int, default=4096,
                        help="the run's --max-tokens (default 4096)")
    parser.add_argument("--required-batch-size-multiple", type=argtypes.positive_int, default=8)
    parser.add_argument("--max-positions", type=argtypes.positive_int, default=1024,
                        help="the model's --max-source-positions and --max-target-positions (default 1024)")
    parser.add_argument("--task", choices=("tree_translation", "dependency_translation"), default="tree_translation",
                        help="the control's task, built with --batch-tokens text (default tree_translation)")
    parser.add_argument("--log", metavar="TRAIN.LOG", help="the run's fairseq-train log (simple format)")
    return parser


def main(argv=None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    import tree_fairseq
    tree_fairseq.register()
    logging.basicConfig(level=logging.WARNING, force=True)  # importing fairseq set the root logger to DEBUG
    if not os.path.isfile(os.path.join(args.databin, f"dict.{args.source_lang}.txt")):
        sys.exit(f"{args.databin}: no data-bin of source language {args.source_lang} "
                 f"(no dict.{args.source_lang}.txt)")
    intervals, cut = [], None
    if args.log:
        try:
            lines, cut = read_log(args.log)
        except OSError as error:
            sys.exit(f"{args.log}: {error.strerror}")
        try:
            intervals = logged_intervals(lines)
        except ValueError as error:
            sys.exit(f"{args.log}: {error}")
        if not intervals:
            sys.exit(f"{args.log}: no train_inner line with wpb, bsz and num_updates "
                     "(fairseq-train's simple log format is read)")
        for interval in intervals:
            if interval.end <= interval.start:
                sys.exit(f"{args.log}: line {interval.line}: a train_inner line at update {interval.end}, not after "
                         f"update {interval.start} of the line before it: the line is damaged, or lines of the log "
                         "are missing")
    epochs = args.epochs or max((interval.epoch for interval in intervals), default=0)
    if epochs < 1:
        sys.exit("--epochs is needed without --log")
    languages = (args.databin, args.source_lang, args.target_lang)
    sizes = dict(max_tokens=args.max_tokens, max_positions=args.max_positions,
                 batch_multiple=args.required_batch_size_multiple)
    translation = load_task(*languages)
    reference = training_batches(translation, args.seed, epochs, **sizes)
    control = training_batches(load_task(*languages, task=args.task, batch_tokens="text"), args.seed, epochs, **sizes)
    same = sum(ours == theirs for ours, theirs in zip(control, reference))
    print(f"{args.task} --batch-tokens text against translation, seed {args.seed}: identical batches (sentence ids, "
          f"in order) in {same} of {epochs} epochs; {len(reference[0])} updates an epoch")
    ok = same == epochs
    if intervals:
        if cut:
            print(f"{args.log}: line {cut} is cut short (it ends without a newline: the log was read or copied while "
                  "its run wrote it, or the run stopped mid-line): left out")
        compute(intervals, reference, translation.dataset("train").tgt_sizes)
        checked = [interval for interval in intervals if interval.computed is not None]
        wrong = [interval for interval in checked if not interval.agrees]
        resumed = sum(interval.after_resume for interval in checked)
        print(f"{args.log}: {len(intervals)} train_inner lines, {len(checked)} within the {epochs} epochs "
              f"({resumed} of them the first after a resume, over the updates since it), "
              f"{len(checked) - len(wrong)} agree with the translation task's batches (wpb, bsz)")
        for interval in wrong:
            print(f"  updates {interval.start + 1}-{interval.end}: logged wpb {interval.logged[0]}, bsz "
                  f"{interval.logged[1]}; the batches give {interval.computed[0]}, {interval.computed[1]}")
        ok = ok and not wrong and bool(checked)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
