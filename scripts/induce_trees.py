#!/usr/bin/env python
"""Unsupervised parsing with constituent attention (Wang et al., EMNLP 2019, section 7.2).

Reads gold trees, one bracketed tree per line (default: the NLTK Penn Treebank sample, at the
path ``--help`` shows), normalised as everywhere in tree_fairseq (function tags and
traces stripped, preterminals dropped, unary chains collapsed), keeping only the words PRPN and
ON-LSTM's evaluation keeps (``--word-filter word-tags``: 36 word tags; punctuation, ``$``, ``#``
go; ``punctuation-tags`` drops only the punctuation tags ``. , : `` '' -LRB- -RRB-``, this
script's earlier reading; ``none`` keeps every word). Their words, lowercased unless
``--keep-case``, are the sentences. In ``--workdir`` it writes ``train.txt`` (one sentence per
line), ``data-bin/`` (fairseq-preprocess --only-source; words seen fewer than ``--min-count``
times become ``<unk>``) and ``checkpoints/``, then:

1. trains ``--arch`` (a ``constituent_encoder_lm``; default the paper's 10 layers of 512, 8
   heads, feed-forward 2048) with ``--task constituent_masked_lm`` on all the sentences, with
   fairseq's trainer, for ``--updates`` updates. Optimiser: the paper's, Adam with a learning
   rate of 1e-4, betas (0.9, 0.98), no weight decay, no clipping and a constant rate
   (``--lr-scheduler fixed``, after ``--warmup`` linear warm-up updates, default none); the
   paper says nothing of batch size, schedule or length of training. This script's earlier
   settings were ``--lr 5e-4 --lr-scheduler inverse_sqrt --warmup 200 --weight-decay 0.01
   --clip-norm 1.0``. The run saves ``checkpoints/checkpoint_last.pt`` every
   ``--save-interval`` updates; the same command resumes from it, and a larger ``--updates``
   trains on;
2. parses every sentence with the paper's Algorithm 1 (``--min-layer`` m, default 3, the paper's
   best, layers numbered from 0; ``--threshold``) and prints unlabelled bracket F1 against the
   gold trees next to left-branching, right-branching and random binary trees (seeded by
   ``--seed``) over the same sentences, on all of them and on those of at most ``--short``
   words (default 10: WSJ-10 when the trees are the PTB).

The model never sees the gold trees: training and evaluation sentences are the same (as usual in
unsupervised parsing on a treebank's own sentences). Scoring (``tree_fairseq.trees.evaluation``):
brackets of >= 2 words, labels ignored, the whole-sentence bracket left out unless
``--keep-trivial-spans``. "all sent." is PRPN / ON-LSTM's sentence-level F1, the paper's
metric: the mean over every sentence, one without a gold bracket scoring 1 if the parse has none
either and 0 otherwise; "gold-br. sent." is the mean over the sentences with a gold bracket
only (this script's earlier convention); corpus-level F1 pools the brackets of all sentences.

Time on one CPU thread (OMP_NUM_THREADS=1; CPU seconds, as the 2-core machine they were taken on
was shared with other jobs and wall time meant little): one update of the paper's architecture
(~3,300 tokens) took 15.5 s (a 4-update run less a 1-update run, 400 sentences), so an epoch of
the PTB sample (3,914 sentences, 23 updates) takes about 6 minutes and one of WSJ train (~40,000
sentences, ~11 times as many words) about 70 minutes; the paper states no number of updates, and a
run of many epochs is a GPU job. ``--arch constituent_encoder_lm_small`` (256 wide, 6 layers)
took 862 s for 250 updates and the parse, about 3.3 s an update. That run, with the paper's
optimiser and m = 3, gave one flat constituent per sentence (no link of layers 3-5 below the
threshold yet: sentence-level F1 1.1 on all sentences, 7.6 on those of <= 10 words), while the
same model parsed with ``--min-layer 0`` gave 24.4 and 41.5 (m = 1: 24.3 and 39.8; m = 2: 1.1 and
7.6, as m = 3), against 39.9 and 58.6 for right-branching trees, 8.6 and 19.2 for left-branching
and 17.7 and 29.4 for random ones: the masked LM is far from trained, and only its two lowest
layers have links below the threshold yet::

    OMP_NUM_THREADS=1 python scripts/induce_trees.py --workdir induce-trees \\
        --arch constituent_encoder_lm_small --updates 250 --warmup 50 --save-interval 50
    OMP_NUM_THREADS=1 python scripts/induce_trees.py --workdir induce-trees \\
        --arch constituent_encoder_lm_small --updates 250 --warmup 50 --save-interval 50 --min-layer 0
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
from tree_fairseq.trees.evaluation import (
    bracket_f1,
    parse_tree_of_word_tags,
    parse_tree_without_punctuation,
    random_binary_tree,
    short_sentences,
)

DEFAULT_TREES = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb-sample" / "wsj_0001-0199.mrg.txt"
USER_DIR = str(Path(tree_fairseq.__file__).parent)
WORD_FILTERS = {"word-tags": parse_tree_of_word_tags, "punctuation-tags": parse_tree_without_punctuation,
                "none": parse_tree}


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
    parser.add_argument("--word-filter", choices=sorted(WORD_FILTERS), default="word-tags",
                        help="which words of the trees to keep: word-tags, PRPN / ON-LSTM's whitelist of 36 "
                             "POS tags; punctuation-tags, all but punctuation; none, all (default: %(default)s)")
    parser.add_argument("--keep-punctuation", dest="word_filter", action="store_const", const="none",
                        help="the same as --word-filter none")
    parser.add_argument("--keep-case", action="store_true", help="do not lowercase the words")
    parser.add_argument("--min-count", type=int, default=2,
                        help="words seen fewer times map to <unk> (default: %(default)s)")
    parser.add_argument("--arch", default="constituent_encoder_lm",
                        help="a constituent_encoder_lm architecture (default: %(default)s, the paper's)")
    parser.add_argument("--updates", type=int, default=1000, help="training updates in all (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per batch (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=1e-4,
                        help="Adam's learning rate, the peak one after warm-up (default: %(default)s, the paper's)")
    parser.add_argument("--adam-betas", default="(0.9, 0.98)",
                        help="Adam's betas (default: %(default)s, the paper's for parsing)")
    parser.add_argument("--lr-scheduler", choices=("fixed", "inverse_sqrt"), default="fixed",
                        help="fixed: constant after warm-up, as the paper states one rate; inverse_sqrt: "
                             "decays as 1/sqrt(update) after warm-up (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=0,
                        help="linear warm-up updates (default: %(default)s; the paper states none)")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="Adam's decoupled weight decay (default: %(default)s; the paper states none)")
    parser.add_argument("--clip-norm", type=float, default=0.0,
                        help="clip gradients to this norm, 0 for none (default: %(default)s; the paper states none)")
    parser.add_argument("--save-interval", type=int, default=100,
                        help="save the checkpoint every N updates (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of training and of the random-tree baseline (default: %(default)s)")
    parser.add_argument("--min-layer", type=int, default=3,
                        help="Algorithm 1's minimum layer m, layers numbered from 0 (default: %(default)s, the "
                             "paper's best)")
    parser.add_argument("--threshold", type=float, default=0.8,
                        help="Algorithm 1's threshold (default: %(default)s)")
    parser.add_argument("--short", type=int, default=10,
                        help="also score the sentences of at most N words (default: %(default)s, WSJ-10)")
    parser.add_argument("--keep-trivial-spans", action="store_true",
                        help="also score the whole-sentence bracket (default: left out)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even when CUDA is available")
    return parser


def read_sentences(args) -> tuple[list, list[list[str]]]:
    """The normalised gold trees and their words (lowercased unless --keep-case); a tree left
    without words by --word-filter is skipped (it has nothing to parse)."""
    lines = [line for line in args.trees.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.sentences is not None:
        lines = lines[: args.sentences]
    gold = [tree for tree in map(WORD_FILTERS[args.word_filter], lines) if tree is not None]
    sentences = [[word if args.keep_case else word.lower() for word in tree.leaves] for tree in gold]
    return gold, sentences


def prepare_data(args, sentences: list[list[str]]) -> Path:
    """``train.txt`` and its data-bin in the workdir; refuses a workdir made from other sentences."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    text = "".join(" ".join(words) + "\n" for words in sentences)
    text_path, databin = args.workdir / "train.txt", args.workdir / "data-bin"
    if text_path.exists() and text_path.read_text(encoding="utf-8") != text:
        sys.exit(f"{args.workdir} holds a run on other sentences (--trees, --sentences, --word-filter or "
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
        "--criterion", "masked_lm", "--optimizer", "adam", "--adam-betas", args.adam_betas,
        "--weight-decay", str(args.weight_decay), "--clip-norm", str(args.clip_norm), "--lr", str(args.lr),
        "--lr-scheduler", args.lr_scheduler, "--warmup-updates", str(args.warmup), "--max-tokens", str(args.max_tokens),
        *(["--warmup-init-lr", "1e-7"] if args.lr_scheduler == "inverse_sqrt" else []),
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
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.lr_scheduler == "inverse_sqrt" and args.warmup < 1:
        parser.error("--lr-scheduler inverse_sqrt needs --warmup >= 1 (fairseq's decay starts from the warm-up's end)")
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
    subsets = [("all sentences", list(range(len(gold))))]
    if args.short:
        subsets.append((f"sentences of <= {args.short} words", short_sentences(gold, args.short)))
    print(f"\nUnlabelled bracket F1 (%) on {len(gold)} sentences of {args.trees.name} "
          f"({'cased' if args.keep_case else 'lowercased'}; words: --word-filter {args.word_filter}; "
          f"whole-sentence bracket {'kept' if args.keep_trivial_spans else 'left out'})")
    for title, indices in subsets:
        print_scores(title, rows, [gold[i] for i in indices], indices, drop_trivial=not args.keep_trivial_spans)


def print_scores(title: str, rows: list, gold: list, indices: list[int], drop_trivial: bool) -> None:
    """One table: per row of trees, sentence-level F1 over every sentence (PRPN / ON-LSTM) and
    over the sentences with a gold bracket, and corpus-level F1, P and R."""
    print(f"\n{title} ({len(indices)})")
    print(f"{'trees':<48} {'all sent.':>9} {'gold-br. sent.':>14} {'corpus F1':>9} {'corpus P':>8} {'corpus R':>8}")
    with_brackets = 0
    for name, trees in rows:
        trees = [trees[i] for i in indices]
        every = bracket_f1(trees, gold, drop_trivial=drop_trivial, every_sentence=True)
        some = bracket_f1(trees, gold, drop_trivial=drop_trivial)
        with_brackets = some.scored_sentences
        print(f"{name:<48} {100 * every.sentence_f1:>9.1f} {100 * some.sentence_f1:>14.1f} "
              f"{100 * every.corpus_f1:>9.1f} {100 * every.corpus_precision:>8.1f} {100 * every.corpus_recall:>8.1f}")
    print(f"(all sent.: mean over the {len(indices)} sentences; gold-br. sent.: over the {with_brackets} "
          "with a gold bracket)")


if __name__ == "__main__":
    main()
