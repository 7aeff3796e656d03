#!/usr/bin/env python
"""Parsing as translation on the Penn Treebank sample: the tree decoder of
Shiv & Quirk (2019) against a plain transformer that emits the bracketed tree, same budget.

Reads ``--ptb`` (NLTK's PTB sample, one gold tree per line; default
``../shared/data/ptb-sample/wsj_0001-0199.mrg.txt`` beside the repository). Writes into
``--workdir`` (default: a new temporary directory): the text data, two fairseq data-bins, two
checkpoints and the generated test output. Prints one table. A run is not resumed: a ``--workdir``
that is not empty (a previous run's data-bins, on which fairseq-preprocess stops, and checkpoints,
from which fairseq-train would go on) or is a file is refused before anything is written; the run
holds ``WORKDIR.lock`` (beside it, :mod:`tree_fairseq.cli.locking`) from that check to its end, so a
second run on the same ``--workdir`` at once is refused.

1. **Data.** Each line is read and normalised as every source tree of this project
   (:func:`tree_fairseq.trees.parse_tree`: traces and function tags removed, preterminals dropped,
   unary chains collapsed). Fixed split, in file order: the first 3,500 sentences train, the next
   200 valid, the last 214 test. The source is the sentence's words; the target is its tree with
   every word replaced by ``XX`` (as Vinyals et al. 2015: the brackets are what is scored, and
   neither model has to learn to copy words; ``--leaves words`` keeps the words), written
   - for the tree decoder: :func:`linearize` symbols with their number of children, e.g.
     ``S(3) NP(2) XX XX VP(2) XX ...`` (``--order``, depth first by default);
   - for the transformer: the bracketed tree, one token per bracket, e.g.
     ``(S (NP XX XX ) (VP XX ... ) XX )``.
2. **Training**, same budget for both: the same encoder and decoder sizes, optimiser, learning
   rate schedule, dropout, label smoothing, seed, ``--updates`` updates of ``--batch-size``
   sentences each (so both see the same sentences; the bracketed targets are longer). fairseq-train
   with ``--task tree_generation --arch tree_pe_parser`` and ``--task translation --arch
   transformer``; no validation during training, the last checkpoint is evaluated.
3. **Generation** on the test split with fairseq-generate, beam ``--beam``; maximum length
   ``2·(n+1) + 5`` symbols for the tree decoder and ``3·(n+1) + 5`` tokens for the transformer
   (a tree over ``n`` words has at most ``2n − 1`` symbols, ``3n − 2`` bracketed tokens).
   ``--task tree_generation`` only ever emits whole trees.
4. **Scores**: labelled and unlabelled bracket F1 against the gold normalised trees. A tree's
   brackets are its nodes' spans (with the label, for labelled F1), the root included, punctuation
   scored like any word; every node of the normal form spans >= 2 words and spans are unique.
   Spans are leaf positions: a tree over the wrong number of words is scored as it is (its
   brackets past the first wrong leaf rarely match). An output that is not one tree (unbalanced
   brackets, text outside brackets, several trees) is *malformed*: it counts as F1 0 for that
   sentence and as no predicted bracket in the corpus totals. Sentence F1 is the mean over the
   test sentences with a bracket (>= 2 words); corpus F1 pools the brackets of all of them
   (evalb's). The scorer is :func:`tree_fairseq.trees.evaluation.bracket_f1`. Also reported:
   well-formed outputs, outputs with the right number of words, exact matches (labelled).

Example (CPU, the default small model: 7 CPU minutes in all, one thread per fairseq process)::

    python scripts/parse_as_translation.py --updates 1000 --seed 1
"""

import contextlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tree_fairseq
from tree_fairseq.cli import ArgumentParser, DefaultsHelpFormatter
from tree_fairseq.cli.argtypes import positive_float, positive_int, probability, seed
from tree_fairseq.cli.locking import empty_folder
from tree_fairseq.trees import Tree, TreeError, parse_tree
from tree_fairseq.trees.evaluation import bracket_f1, brackets
from tree_fairseq.trees.linearize import (
    TREE_ORDERS,
    bracketed_symbols,
    delinearize,
    from_bracketed_symbols,
    linearize,
)

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_PTB = REPOSITORY.parent / "shared" / "data" / "ptb-sample" / "wsj_0001-0199.mrg.txt"
USER_DIR = str(Path(tree_fairseq.__file__).parent)
SPLITS = (("train", 0, 3500), ("valid", 3500, 3700), ("test", 3700, 3914))
PLACEHOLDER = "XX"

log = logging.getLogger("parse_as_translation")


def parse_args(argv=None):
    parser = ArgumentParser(
        description=__doc__.split("\n\n")[0] + " Reads --ptb, writes --workdir, prints a table.",
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--ptb", type=Path, default=DEFAULT_PTB, help="PTB trees, one per line")
    parser.add_argument("--workdir", type=Path, help="where data, data-bins, checkpoints and outputs go "
                                                      "(default: a new temporary directory)")
    parser.add_argument("--updates", type=positive_int, default=1000, help="training updates of each model")
    parser.add_argument("--seed", type=seed, default=1, help="fairseq's --seed for both trainings")
    parser.add_argument("--order", choices=TREE_ORDERS, default="depth_first", help="the tree decoder's order")
    parser.add_argument("--leaves", choices=("xx", "words"), default="xx",
                        help=f"target leaves: {PLACEHOLDER} for every word, or the words themselves")
    model = parser.add_argument_group("model and budget, the same for both")
    model.add_argument("--embed-dim", type=positive_int, default=128)
    model.add_argument("--ffn-dim", type=positive_int, default=256)
    model.add_argument("--heads", type=positive_int, default=4)
    model.add_argument("--encoder-layers", type=positive_int, default=2)
    model.add_argument("--decoder-layers", type=positive_int, default=2)
    model.add_argument("--dropout", type=probability, default=0.1)
    model.add_argument("--lr", type=positive_float, default=1e-3)
    model.add_argument("--batch-size", type=positive_int, default=32, help="sentences per update")
    model.add_argument("--beam", type=positive_int, default=5)
    model.add_argument("--threads", type=positive_int, default=1, help="torch threads of each fairseq process")
    return parser.parse_args(argv)


# Data


def read_trees(path: Path) -> list[Tree]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != SPLITS[-1][2]:
        raise SystemExit(f"{path}: {len(lines)} trees, expected {SPLITS[-1][2]} (NLTK's PTB sample)")
    trees = []
    for number, line in enumerate(lines, 1):
        try:
            trees.append(parse_tree(line))
        except TreeError as error:
            raise SystemExit(f"{path}:{number}: {error}") from error
    return trees


def target_tree(tree: Tree, leaves: str) -> Tree:
    return tree if leaves == "words" else Tree((PLACEHOLDER,) * len(tree.leaves), tree.nodes)


def prepare(trees: list[Tree], a, workdir: Path) -> dict[str, Path]:
    """Text files and one data-bin per system (``tree``, ``brackets``)."""
    from fairseq import options
    from fairseq_cli import preprocess

    text = workdir / "text"
    text.mkdir(parents=True, exist_ok=True)
    for split, start, end in SPLITS:
        chunk = trees[start:end]
        targets = [target_tree(tree, a.leaves) for tree in chunk]
        files = {
            "words": [" ".join(tree.leaves) for tree in chunk],
            "tree": [" ".join(linearize(tree, a.order)) for tree in targets],
            "brackets": [" ".join(bracketed_symbols(tree)) for tree in targets],
        }
        for suffix, lines in files.items():
            (text / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    databins = {}
    for system in ("tree", "brackets"):
        destdir = workdir / f"data-bin-{system}"
        parser = options.get_preprocessing_parser()
        preprocess.main(parser.parse_args([
            "--source-lang", "words", "--target-lang", system, "--destdir", str(destdir), "--workers", "1",
            "--trainpref", str(text / "train"), "--validpref", str(text / "valid"), "--testpref", str(text / "test"),
        ]))
        databins[system] = destdir
    return databins


# Training and generation


def fairseq(module: str, argv: list[str], a, log_path: Path) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
    env.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    started = time.time()
    run = subprocess.run([sys.executable, "-m", module, *argv], env=env, capture_output=True, text=True)
    log_path.write_text(run.stdout + run.stderr, encoding="utf-8")
    if run.returncode:
        raise SystemExit(f"{module} failed (log: {log_path}):\n{run.stderr[-3000:]}")
    log.info("%s done in %.0f s (log: %s)", module, time.time() - started, log_path)
    return run.stdout


def train(system: str, databin: Path, a, workdir: Path) -> Path:
    save_dir = workdir / f"checkpoints-{system}"
    if system == "tree":
        model = ["--task", "tree_generation", "--arch", "tree_pe_parser", "--tree-order", a.order]
    else:
        model = ["--task", "translation", "--arch", "transformer"]
    dims = [
        "--encoder-embed-dim", a.embed_dim, "--decoder-embed-dim", a.embed_dim,
        "--encoder-ffn-embed-dim", a.ffn_dim, "--decoder-ffn-embed-dim", a.ffn_dim,
        "--encoder-attention-heads", a.heads, "--decoder-attention-heads", a.heads,
        "--encoder-layers", a.encoder_layers, "--decoder-layers", a.decoder_layers,
        "--share-decoder-input-output-embed", "--dropout", a.dropout,
    ]
    fairseq("fairseq_cli.train", [
        str(databin), "--user-dir", USER_DIR, *model, *map(str, dims), "--cpu", "--num-workers", "0",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "1.0",
        "--lr", str(a.lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(max(1, a.updates // 10)),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--batch-size", str(a.batch_size), "--max-tokens", "100000", "--max-update", str(a.updates),
        "--seed", str(a.seed), "--disable-validation", "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--no-save-optimizer-state", "--log-format", "simple", "--log-interval", "50",
        "--required-batch-size-multiple", "1",
    ], a, workdir / f"train-{system}.log")
    return save_dir / "checkpoint_last.pt"


def generate(system: str, databin: Path, checkpoint: Path, a, workdir: Path) -> dict[int, list[str]]:
    """Test-split hypotheses as token lists, by sentence index within the split."""
    task = ["--task", "tree_generation"] if system == "tree" else ["--task", "translation"]
    max_len_a = "2" if system == "tree" else "3"
    stdout = fairseq("fairseq_cli.generate", [
        str(databin), "--user-dir", USER_DIR, *task, "--path", str(checkpoint), "--cpu", "--num-workers", "0",
        "--gen-subset", "test", "--beam", str(a.beam), "--batch-size", "32",
        "--max-len-a", max_len_a, "--max-len-b", "5",
        # fairseq's default multiple of 8 silently drops the last len(test) % 8 sentences
        # (facebookresearch/fairseq#5036)
        "--required-batch-size-multiple", "1",
    ], a, workdir / f"generate-{system}.log")
    found = re.findall(r"^H-(\d+)\t\S+\t(.*)$", stdout, flags=re.M)
    hypotheses = {int(index): text.split() for index, text in found}
    test_size = SPLITS[2][2] - SPLITS[2][1]
    if sorted(hypotheses) != list(range(test_size)):
        raise SystemExit(f"fairseq-generate gave {len(hypotheses)} hypotheses for {test_size} test sentences "
                         f"(log: {workdir / f'generate-{system}.log'})")
    return hypotheses


# Scores


def score(predicted: list[Tree | None], gold: list[Tree]) -> dict[str, float]:
    """Bracket F1 (see the module docstring); ``None`` is a malformed output."""
    result = {}
    for labelled, name in ((False, "unlabelled"), (True, "labelled")):
        scores = bracket_f1(predicted, gold, drop_trivial=False, labelled=labelled, same_words=False)
        result[f"{name} F1 (sentence mean)"] = 100 * scores.sentence_f1
        result[f"{name} F1 (corpus)"] = 100 * scores.corpus_f1
    well_formed = [p for p in predicted if p is not None]
    result["well-formed %"] = 100 * len(well_formed) / len(gold)
    result["right word count %"] = 100 * sum(
        p is not None and len(p.leaves) == len(g.leaves) for p, g in zip(predicted, gold)) / len(gold)
    result["exact match %"] = 100 * sum(
        p is not None and len(p.leaves) == len(g.leaves)
        and brackets(p, drop_trivial=False, labelled=True) == brackets(g, drop_trivial=False, labelled=True)
        for p, g in zip(predicted, gold)) / len(gold)
    return result


def read_output(system: str, symbols: list[str], order: str) -> Tree | None:
    """The tree of one output, None if it is malformed."""
    try:
        return delinearize(symbols, order) if system == "tree" else from_bracketed_symbols(symbols)
    except TreeError:
        return None


def main(argv=None):
    a = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO, stream=sys.stderr)
    if not a.ptb.exists():
        raise SystemExit(f"{a.ptb} is absent: pass --ptb (NLTK's PTB sample, one tree per line)")
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="parse_as_translation_"))
    with contextlib.ExitStack() as held:
        # two runs at once both found it empty, and wrote each other's text, data-bins and checkpoints
        try:
            held.enter_context(empty_folder(str(workdir), "--workdir"))
        except ValueError as error:
            raise SystemExit(f"parse_as_translation.py: error: {error}") from None
        run_in(a, workdir)


def run_in(a, workdir: Path) -> None:
    """The run, in an empty ``workdir`` this process holds."""
    log.info("work directory: %s", workdir)
    trees = read_trees(a.ptb)
    databins = prepare(trees, a, workdir)
    gold = trees[SPLITS[2][1]:SPLITS[2][2]]

    rows = {}
    names = {"tree": f"tree decoder (tree_pe_parser, {a.order})", "brackets": "transformer, bracketed output"}
    for system in ("tree", "brackets"):
        checkpoint = train(system, databins[system], a, workdir)
        hypotheses = generate(system, databins[system], checkpoint, a, workdir)
        predicted = [read_output(system, hypotheses[i], a.order) for i in range(len(gold))]
        rows[names[system]] = score(predicted, gold)

    columns = list(next(iter(rows.values())))
    width = max(map(len, rows))
    print(f"PTB sample, test = sentences 3701-3914 ({len(gold)}), {a.updates} updates x {a.batch_size} sentences, "
          f"seed {a.seed}, leaves {a.leaves}")
    print(f"{'system':<{width}}  " + "  ".join(columns))
    for name, values in rows.items():
        print(f"{name:<{width}}  " + "  ".join(f"{values[c]:>{len(c)}.1f}" for c in columns))


if __name__ == "__main__":
    main()
