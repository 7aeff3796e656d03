#!/usr/bin/env python
"""Unsupervised parsing with constituent attention (Wang et al. 2019, issue 5, item 2).

Reads gold trees, one bracketed tree per line (default: the NLTK Penn Treebank sample in
``../shared/data/ptb-sample``), normalised as everywhere in tree_fairseq (function tags and
traces stripped, preterminals dropped, unary chains collapsed) and, unless
``--keep-punctuation``, without the words tagged as punctuation (``. , : `` '' -LRB- -RRB-``; the
usual setting of unsupervised parsing on the PTB). Their words, lowercased unless
``--keep-case``, are the sentences. In ``--workdir`` it writes ``train.txt`` (one sentence per
line), ``data-bin/`` (fairseq-preprocess --only-source; words seen fewer than ``--min-count``
times become ``<unk>``) and ``checkpoints/``, then:

1. trains ``--arch`` (a ``constituent_encoder_lm``) with ``--task constituent_masked_lm`` on all
   the sentences, with fairseq's trainer, for ``--updates`` updates (Adam, inverse-sqrt schedule).
   The run saves ``checkpoints/checkpoint_last.pt`` every ``--save-interval`` updates; the same
   command resumes from it, and a larger ``--updates`` trains on;
2. parses every sentence with the paper's Algorithm 1 (``--min-layer``, ``--threshold``) and
   prints unlabelled bracket F1 against the gold trees next to left-branching, right-branching
   and random binary trees (seeded by ``--seed``) over the same sentences.

The model never sees the gold trees: training and evaluation sentences are the same (as usual in
unsupervised parsing on a treebank's own sentences). Scoring (``tree_fairseq.trees.evaluation``):
brackets of >= 2 words, labels ignored, the whole-sentence bracket left out unless
``--keep-trivial-spans``; sentence-level F1 is the mean over the
sentences with a gold bracket, corpus-level F1 pools the brackets of all sentences.

Example: 250 updates of the default architecture (256 wide, 6 layers) took 10.7 minutes of CPU on
one thread (19 minutes on a 2-core machine shared with other jobs) and gave 23.3 sentence-level F1
against 39.3 for right-branching and 17.4 for random trees; the masked LM is far from trained then::

    OMP_NUM_THREADS=1 python scripts/induce_trees.py --workdir induce-trees --updates 250 --warmup 50
"""

import argparse
import logging
import random
import sys
from pathlib import Path

import torch
from fairseq import checkpoint_utils, distributed_utils, options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq_cli import preprocess as fairseq_preprocess
from fairseq_cli import train as fairseq_train

import tree_fairseq
from tree_fairseq.trees import parse_tree, trivial_tree
from tree_fairseq.trees.evaluation import bracket_f1, parse_tree_without_punctuation, random_binary_tree

DEFAULT_TREES = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb-sample" / "wsj_0001-0199.mrg.txt"
USER_DIR = str(Path(tree_fairseq.__file__).parent)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trees", type=Path, default=DEFAULT_TREES,
                        help="gold trees, one bracketed tree per line (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, required=True,
                        help="where the text, data-bin and checkpoints go; rerun with the same one to resume")
    parser.add_argument("--sentences", type=int, default=None, help="use the first N trees only (default: all)")
    parser.add_argument("--keep-punctuation", action="store_true",
                        help="keep punctuation in the sentences and the gold trees (default: removed)")
    parser.add_argument("--keep-case", action="store_true", help="do not lowercase the words")
    parser.add_argument("--min-count", type=int, default=2,
                        help="words seen fewer times map to <unk> (default: %(default)s)")
    parser.add_argument("--arch", default="constituent_encoder_lm",
                        help="a constituent_encoder_lm architecture (default: %(default)s)")
    parser.add_argument("--updates", type=int, default=1000, help="training updates in all (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per batch (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=5e-4, help="peak learning rate (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=200, help="warm-up updates (default: %(default)s)")
    parser.add_argument("--save-interval", type=int, default=100,
                        help="save the checkpoint every N updates (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of training and of the random-tree baseline (default: %(default)s)")
    parser.add_argument("--min-layer", type=int, default=0,
                        help="Algorithm 1's minimum layer m, 0-based (default: %(default)s)")
    parser.add_argument("--threshold", type=float, default=0.8,
                        help="Algorithm 1's threshold (default: %(default)s)")
    parser.add_argument("--keep-trivial-spans", action="store_true",
                        help="also score the whole-sentence bracket (default: left out)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even when CUDA is available")
    return parser


def read_sentences(args) -> tuple[list, list[list[str]]]:
    """The normalised gold trees and their words (lowercased unless --keep-case); a tree left
    without words by the removal of punctuation is skipped."""
    lines = [line for line in args.trees.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.sentences is not None:
        lines = lines[: args.sentences]
    read = parse_tree if args.keep_punctuation else parse_tree_without_punctuation
    gold = [tree for tree in map(read, lines) if tree is not None]
    sentences = [[word if args.keep_case else word.lower() for word in tree.leaves] for tree in gold]
    return gold, sentences


def prepare_data(args, sentences: list[list[str]]) -> Path:
    """``train.txt`` and its data-bin in the workdir; refuses a workdir made from other sentences."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    text = "".join(" ".join(words) + "\n" for words in sentences)
    text_path, databin = args.workdir / "train.txt", args.workdir / "data-bin"
    if text_path.exists() and text_path.read_text(encoding="utf-8") != text:
        sys.exit(f"{args.workdir} holds a run on other sentences (--trees, --sentences, --keep-punctuation or "
                 "--keep-case differ): use another --workdir")
    text_path.write_text(text, encoding="utf-8")
    if not (databin / "train.bin").exists():
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args([
            "--only-source", "--trainpref", str(text_path), "--destdir", str(databin),
            "--thresholdsrc", str(args.min_count), "--workers", "1",
        ]))
    return databin


def trained_updates(checkpoint: Path) -> int:
    if not checkpoint.exists():
        return 0
    return checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))["optimizer_history"][-1]["num_updates"]


def train(args, databin: Path, save_dir: Path) -> None:
    """fairseq-train with the masked-LM task, resuming from ``save_dir/checkpoint_last.pt``."""
    if trained_updates(save_dir / "checkpoint_last.pt") >= args.updates:
        logging.info("%s already has >= %d updates: not training", save_dir / "checkpoint_last.pt", args.updates)
        return
    argv = [
        str(databin), "--user-dir", USER_DIR, "--task", "constituent_masked_lm", "--arch", args.arch,
        "--criterion", "masked_lm", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
        "--weight-decay", "0.01", "--clip-norm", "1.0", "--lr", str(args.lr), "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", str(args.warmup), "--warmup-init-lr", "1e-7", "--max-tokens", str(args.max_tokens),
        "--max-update", str(args.updates), "--seed", str(args.seed), "--save-dir", str(save_dir),
        "--save-interval-updates", str(args.save_interval), "--keep-interval-updates", "1",
        "--no-epoch-checkpoints", "--disable-validation", "--num-workers", "0",
        "--log-format", "tqdm" if sys.stderr.isatty() else "simple", "--log-interval", "20",
    ]
    if args.cpu or not torch.cuda.is_available():
        argv.append("--cpu")
    train_args = options.parse_args_and_arch(options.get_training_parser(), argv)
    distributed_utils.call_main(convert_namespace_to_omegaconf(train_args), fairseq_train.main)


def induce(args, databin: Path, checkpoint: Path, sentences: list[list[str]]) -> list:
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(databin)})
    model = models[0]
    if torch.cuda.is_available() and not args.cpu:
        model.cuda()
    return task.induce_trees(model, sentences, min_layer=args.min_layer, threshold=args.threshold)


def main(argv=None) -> None:
    args = get_parser().parse_args(argv)
    # fairseq_cli.train logs to stdout when imported; the log goes to stderr, the table to stdout.
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO,
                        stream=sys.stderr, force=True)
    gold, sentences = read_sentences(args)
    databin = prepare_data(args, sentences)
    save_dir = args.workdir / "checkpoints"
    train(args, databin, save_dir)
    checkpoint = save_dir / "checkpoint_last.pt"
    induced = induce(args, databin, checkpoint, sentences)

    rng = random.Random(args.seed)
    rows = [
        (f"constituent attention ({trained_updates(checkpoint)} updates, m={args.min_layer})", induced),
        ("left-branching", [trivial_tree(list(words), "left") for words in sentences]),
        ("right-branching", [trivial_tree(list(words), "right") for words in sentences]),
        (f"random binary (seed {args.seed})", [random_binary_tree(words, rng) for words in sentences]),
    ]
    drop_trivial = not args.keep_trivial_spans
    scored = 0
    print(f"\nUnlabelled bracket F1 (%) on {len(gold)} sentences of {args.trees.name}"
          f" ({'cased' if args.keep_case else 'lowercased'}; whole-sentence bracket "
          f"{'kept' if args.keep_trivial_spans else 'left out'}; "
          f"punctuation {'kept' if args.keep_punctuation else 'removed'})")
    print(f"{'trees':<48} {'sentence F1':>11} {'corpus F1':>9} {'corpus P':>8} {'corpus R':>8}")
    for name, trees in rows:
        scores = bracket_f1(trees, gold, drop_trivial=drop_trivial)
        scored = scores.scored_sentences
        print(f"{name:<48} {100 * scores.sentence_f1:>11.1f} {100 * scores.corpus_f1:>9.1f} "
              f"{100 * scores.corpus_precision:>8.1f} {100 * scores.corpus_recall:>8.1f}")
    print(f"(sentence F1: mean over the {scored} sentences with a gold bracket)")


if __name__ == "__main__":
    main()
