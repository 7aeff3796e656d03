#!/usr/bin/env python
"""Unsupervised parsing with constituent attention (Wang et al., EMNLP 2019, section 7.2).

Reads gold trees, one bracketed tree per line (default: the NLTK Penn Treebank sample, at the
path ``--help`` shows), normalised as everywhere in tree_fairseq (function tags and
traces stripped, preterminals dropped, unary chains collapsed), keeping only the words PRPN and
ON-LSTM's evaluation keeps (``--word-filter word-tags``: 36 word tags; punctuation, ``$``, ``#``
go; ``punctuation-tags`` drops only the punctuation tags ``. , : `` '' -LRB- -RRB-``, this
script's earlier reading; ``none`` keeps every word). Their words, lowercased unless
``--keep-case``, are the sentences. In ``--workdir`` it writes ``settings.json`` (the options
that make the training, from ``--trees`` to ``--seed``: a workdir of other ones is refused, naming
the option and both values, as is a non-empty one without it, and one another run holds,
``WORKDIR.lock``; ``--updates`` and the parsing and scoring options may change), ``train.txt``
(one sentence per line), ``data-bin/`` (fairseq-preprocess --only-source; words seen fewer than
``--min-count`` times become ``<unk>``) and ``checkpoints/``, then:

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
unsupervised parsing on a treebank's own sentences).

``--until-converged`` trains instead until the masked-LM validation loss stops improving, then
scores every epoch (``--updates`` and ``--save-interval`` do not go with it):

- ``--valid-fraction`` (default 0.1) of the trees' sentences, drawn with ``--valid-seed`` (the same
  draw for every ``--seed``), are held out as ``valid.txt``; the others are ``train.txt``, with
  ``--setting ptb+iwslt`` followed by the lines of ``--extra-text`` (default IWSLT'14's English
  training side, at the path ``--help`` shows), unescaped (``&apos;`` is ``'``), lowercased unless
  ``--keep-case``, punctuation-only tokens left out. The dictionary is train.txt's. The trees
  that are scored are still those of ALL the trees' sentences, the held-out ones included (the
  paper, too, parses sentences it trained on);
- fairseq-train validates at every epoch's end and saves ``checkpoints/checkpoint{N}.pt``, kept
  as ``checkpoints/epoch{N}.pt`` without the optimiser's state; the run stops after
  ``--patience`` (default 5) epochs without a lower validation loss, or at ``--max-epochs``. It
  trains in sittings of at most ``--patience`` epochs, each resuming ``checkpoint_last.pt``, and
  counts its patience over the validations of ``checkpoints/train.log`` as scripts/train.sh does
  (tree_fairseq/cli/patience.py), so that a run killed at any point and started again with the
  same command stops where an uninterrupted one does, with the same losses (killed while fairseq
  copied an epoch's checkpoint to ``checkpoint_last.pt``, it resumes from the epoch's own file);
- after every sitting each new epoch model parses all sentences (Algorithm 1 with every m,
  0 .. layers - 1) into ``results/epochs/epoch{N}.json``: its validation loss, sentence- and
  corpus-level F1 on all sentences and on those of <= ``--short`` words, the link
  probabilities' distribution per layer, and per layer how their order agrees with the gold trees'
  (the concordance of tree_fairseq.analysis.induction.link_agreement, for the accumulated links
  and each layer's own: a reading of what the model learns that does not depend on the threshold;
  an epoch file written before it was recorded gets it added at the next sitting);
- at the end, the best epoch (the lowest validation loss, the first of equals, as fairseq's
  checkpoint_best.pt) writes ``results/trees/m{m}.txt`` (one bracketed tree a line, every m, in the
  trees' order) and the baselines' ``left-branching.txt``, ``right-branching.txt`` and
  ``random.txt`` (seeded by ``--seed``), ``results/curve.png`` (F1 with m = ``--min-layer`` and the
  validation loss over the epochs), ``results/links.png`` (the link probabilities per layer against
  ``--threshold``), ``results/scores.txt``, and last ``results/scores.json``, which marks the run
  finished. scripts/score_induced_trees.py recomputes F1 from the tree files and tabulates runs
  over seeds.

The workdir's ``settings.json`` records the run's mode and options: a workdir with other settings, one
this mode did not make, or a finished one is refused (one setting may change: ``--max-epochs``
raised for a run not yet finished, which goes on to the new cap, as the cap bounds the cost and
not what the epochs before it compute), and so is a second run on the same workdir
while one runs (``WORKDIR.lock``, :mod:`tree_fairseq.cli.locking`). Settings are chosen before the
run or on the validation loss only, never on the scored trees. Scoring (``tree_fairseq.trees.evaluation``):
brackets of >= 2 words, labels ignored, the whole-sentence bracket left out unless
``--keep-trivial-spans`` (the default mode only: ``--until-converged`` scores with PRPN / ON-LSTM's
metric alone, the one scripts/score_induced_trees.py recomputes when it publishes and tabulates
runs, and refuses it). "all sent." is PRPN / ON-LSTM's sentence-level F1, the paper's
metric: the mean over every sentence, one without a gold bracket scoring 1 if the parse has none
either and 0 otherwise; "gold-br. sent." is the mean over the sentences with a gold bracket
only (this script's earlier convention); corpus-level F1 pools the brackets of all sentences.

Time on one CPU thread (OMP_NUM_THREADS=1; CPU seconds, as the 2-core machine they were taken on
was shared with other jobs and wall time meant little): one update of the paper's architecture
(~3,300 tokens) took 15.5 s (a 4-update run less a 1-update run, 400 sentences), so an epoch of
the PTB sample (3,914 sentences, 23 updates) takes about 6 minutes and one of WSJ train (~40,000
sentences, ~11 times as many words) about 70 minutes; the paper states no number of updates, and a
run of many epochs is a GPU job. Measured again on 2026-11-28/29 (the same kind of machine, load
average 5-10 from other trainings, niced; user CPU time): 2.8 s an update of the small encoder
and 14.9 s of the paper's; with ``--until-converged`` an epoch of the small encoder on
the PTB sample less its held-out tenth (21 updates) took 67 CPU s with its validation, and parsing
and scoring all 3,914 sentences with every m 27 CPU s more (docs/grammar_induction.md). ``--arch constituent_encoder_lm_small`` (256 wide, 6 layers)
took 862 s for 250 updates and the parse, about 3.3 s an update. That run, with the paper's
optimiser and m = 3, gave one flat constituent per sentence (no link of layers 3-5 below the
threshold yet: sentence-level F1 1.1 on all sentences, 7.6 on those of <= 10 words), while the
same model parsed with ``--min-layer 0`` gave 24.4 and 41.5 (m = 1: 24.3 and 39.8; m = 2: 1.1 and
7.6, as m = 3), against 39.9 and 58.6 for right-branching trees, 8.6 and 19.2 for left-branching
and 17.7 and 29.4 for random ones: the masked LM is far from trained, and only its two lowest
layers have links below the threshold yet. These runs of the default mode (and the 15.5 s and 23
updates an epoch above) are of its earlier batching, by fairseq's default multiple of 8 sentences,
which left up to 7 of each epoch's longest sentences out; it now trains on every sentence, as
``--until-converged`` does, so the same commands give other figures for the model (the baselines'
are the same)::

    OMP_NUM_THREADS=1 python scripts/induce_trees.py --workdir induce-trees \\
        --arch constituent_encoder_lm_small --updates 250 --warmup 50 --save-interval 50
    OMP_NUM_THREADS=1 python scripts/induce_trees.py --workdir induce-trees \\
        --arch constituent_encoder_lm_small --updates 250 --warmup 50 --save-interval 50 --min-layer 0
"""

import argparse
import contextlib
import json
import logging
import random
import re
import shutil
import sys
from pathlib import Path

import torch
from fairseq import checkpoint_utils, distributed_utils, options
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq_cli import preprocess as fairseq_preprocess
from fairseq_cli import train as fairseq_train

import tree_fairseq
from tree_fairseq.analysis import induction
from tree_fairseq.analysis.induction import WORD_FILTERS
from tree_fairseq.cli import ArgumentParser, argtypes, files, patience
from tree_fairseq.cli.locking import make_folder, output_lock
from tree_fairseq.compat.checkpoints import load_checkpoint, newest_readable_checkpoint
from tree_fairseq.modules.constituent_attention import unsupervised_parse
from tree_fairseq.trees import trivial_tree
from tree_fairseq.trees.evaluation import bracket_f1, random_binary_tree, short_sentences

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_TREES = SHARED_DATA / "ptb-sample" / "wsj_0001-0199.mrg.txt"
DEFAULT_EXTRA_TEXT = SHARED_DATA / "iwslt14-de-en-lowres" / "train.en"
USER_DIR = str(Path(tree_fairseq.__file__).parent)
SETTINGS = ("ptb", "ptb+iwslt")
# The options that make a run what it is, recorded in WORKDIR/settings.json: a workdir is refused with others.
# The default mode's: its training text, dictionary and training (it parses and scores again at every run, with
# the --min-layer, --threshold, --short of that run, and a larger --updates trains on).
TRAINING_OPTIONS = ("trees", "sentences", "word_filter", "keep_case", "min_count", "arch", "max_tokens", "lr",
                    "adam_betas", "lr_scheduler", "warmup", "weight_decay", "clip_norm", "seed")
# A run to convergence's: also its split, its stop and its scoring (every epoch is scored, one is chosen).
RUN_OPTIONS = (*TRAINING_OPTIONS, "setting", "extra_text", "valid_fraction", "valid_seed", "patience", "max_epochs",
               "threshold", "short", "min_layer")
MODES = {"updates": "the default mode (--updates)", "until-converged": "--until-converged"}
# Keys settings.json has held only since a later version, and what a settings.json without one was written by:
# before the mode was recorded, only --until-converged wrote settings.json.
RECORDED_LATER = {"mode": "until-converged"}


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trees", type=Path, default=DEFAULT_TREES,
                        help="gold trees, one bracketed tree per line (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, required=True,
                        help="where the text, data-bin and checkpoints go; rerun with the same one to resume")
    parser.add_argument("--sentences", type=argtypes.positive_int, default=None,
                        help="use the first N trees only, N >= 1 (default: all)")
    parser.add_argument("--word-filter", choices=sorted(WORD_FILTERS), default="word-tags",
                        help="which words of the trees to keep: word-tags, PRPN / ON-LSTM's whitelist of 36 "
                             "POS tags; punctuation-tags, all but punctuation; none, all (default: %(default)s)")
    parser.add_argument("--keep-punctuation", dest="word_filter", action="store_const", const="none",
                        help="the same as --word-filter none")
    parser.add_argument("--keep-case", action="store_true", help="do not lowercase the words")
    parser.add_argument("--min-count", type=argtypes.nonnegative_int, default=2,
                        help="words seen fewer times map to <unk> (default: %(default)s)")
    parser.add_argument("--arch", default="constituent_encoder_lm",
                        help="a constituent_encoder_lm architecture (default: %(default)s, the paper's)")
    parser.add_argument("--updates", type=argtypes.positive_int, default=None,
                        help="training updates in all (default: 1000; not with --until-converged)")
    parser.add_argument("--max-tokens", type=argtypes.positive_int, default=4096,
                        help="tokens per batch (default: %(default)s)")
    parser.add_argument("--lr", type=argtypes.positive_float, default=1e-4,
                        help="Adam's learning rate, the peak one after warm-up (default: %(default)s, the paper's)")
    parser.add_argument("--adam-betas", default="(0.9, 0.98)",
                        help="Adam's betas (default: %(default)s, the paper's for parsing)")
    parser.add_argument("--lr-scheduler", choices=("fixed", "inverse_sqrt"), default="fixed",
                        help="fixed: constant after warm-up, as the paper states one rate; inverse_sqrt: "
                             "decays as 1/sqrt(update) after warm-up (default: %(default)s)")
    parser.add_argument("--warmup", type=argtypes.nonnegative_int, default=0,
                        help="linear warm-up updates (default: %(default)s; the paper states none)")
    parser.add_argument("--weight-decay", type=argtypes.nonnegative_float, default=0.0,
                        help="Adam's decoupled weight decay (default: %(default)s; the paper states none)")
    parser.add_argument("--clip-norm", type=argtypes.nonnegative_float, default=0.0,
                        help="clip gradients to this norm, 0 for none (default: %(default)s; the paper states none)")
    parser.add_argument("--save-interval", type=argtypes.positive_int, default=None,
                        help="save the checkpoint every N updates (default: 100; not with --until-converged, "
                             "which saves at every epoch's end)")
    parser.add_argument("--seed", type=argtypes.seed, default=1,
                        help="seed of training and of the random-tree baseline (default: %(default)s)")
    parser.add_argument("--min-layer", type=argtypes.nonnegative_int, default=3,
                        help="Algorithm 1's minimum layer m, layers numbered from 0 (default: %(default)s, the "
                             "paper's best)")
    parser.add_argument("--threshold", type=argtypes.probability, default=0.8,
                        help="Algorithm 1's threshold (default: %(default)s)")
    parser.add_argument("--short", type=argtypes.positive_int, default=10,
                        help="also score the sentences of at most N words (default: %(default)s, WSJ-10)")
    parser.add_argument("--keep-trivial-spans", action="store_true",
                        help="also score the whole-sentence bracket (default: left out; not with --until-converged, "
                             "whose scores are PRPN / ON-LSTM's)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even when CUDA is available")
    converged = parser.add_argument_group(
        "training to convergence (--until-converged)",
        "a held-out part of the trees' sentences is validated every epoch; the run stops after --patience epochs "
        "without a lower masked-LM validation loss, then parses all sentences with every epoch's model")
    converged.add_argument("--until-converged", action="store_true",
                           help="train to convergence instead of for --updates updates, then evaluate every epoch")
    converged.add_argument("--setting", choices=SETTINGS, default=None,
                           help="ptb: the trees' sentences alone; ptb+iwslt: and --extra-text as more training text "
                                "(default: ptb)")
    converged.add_argument("--extra-text", type=Path, default=None,
                           help=f"the extra training text of --setting ptb+iwslt, one tokenised sentence a line "
                                f"(default: {DEFAULT_EXTRA_TEXT})")
    converged.add_argument("--valid-fraction", type=argtypes.fraction, default=0.1,
                           help="share of the trees' sentences held out for validation (default: %(default)s)")
    converged.add_argument("--valid-seed", type=argtypes.seed, default=1,
                           help="seed of the held-out draw, the same for every --seed (default: %(default)s)")
    converged.add_argument("--patience", type=argtypes.positive_int, default=5,
                           help="stop after this many epochs without a lower validation loss (default: %(default)s)")
    converged.add_argument("--max-epochs", type=argtypes.positive_int, default=200,
                           help="stop at this epoch whatever the validation loss (default: %(default)s)")
    return parser


def read_sentences(args) -> tuple[list, list[list[str]]]:
    """The normalised gold trees and their words (lowercased unless --keep-case); a tree left
    without words by --word-filter is skipped (it has nothing to parse)."""
    return induction.read_gold(args.trees, args.word_filter, args.keep_case, args.sentences)


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


def training_flags(args, databin: Path, save_dir: Path, *mode: str) -> list[str]:
    """fairseq-train's flags of both modes (the task, the model, the optimiser, the batches, the
    device) around ``mode``'s own (how long to train, when to save and validate, the log)."""
    argv = [
        str(databin), "--user-dir", USER_DIR, "--task", "constituent_masked_lm", "--arch", args.arch,
        "--criterion", "masked_lm", "--optimizer", "adam", "--adam-betas", args.adam_betas,
        "--weight-decay", str(args.weight_decay), "--clip-norm", str(args.clip_norm), "--lr", str(args.lr),
        "--lr-scheduler", args.lr_scheduler, "--warmup-updates", str(args.warmup), "--max-tokens", str(args.max_tokens),
        *(["--warmup-init-lr", "1e-7"] if args.lr_scheduler == "inverse_sqrt" else []),
        "--seed", str(args.seed), "--save-dir", str(save_dir), *mode, "--num-workers", "0",
        # fairseq's batch_by_size drops the sentences past the last multiple of --required-batch-size-multiple
        # (default 8): up to 7 training sentences would never be trained on (the longest, as batches are
        # sorted by length), 7 of the 391 held-out sentences would never be validated, and a training or
        # validation set of fewer than 8 would be empty.
        "--required-batch-size-multiple", "1",
    ]
    if args.cpu or not torch.cuda.is_available():
        argv.append("--cpu")
    return argv


def train(args, databin: Path, save_dir: Path) -> None:
    """fairseq-train with the masked-LM task, resuming from ``save_dir/checkpoint_last.pt``."""
    if trained_updates(save_dir / "checkpoint_last.pt") >= args.updates:
        logging.info("%s already has >= %d updates: not training", save_dir / "checkpoint_last.pt", args.updates)
        return
    argv = training_flags(
        args, databin, save_dir, "--max-update", str(args.updates),
        "--save-interval-updates", str(args.save_interval), "--keep-interval-updates", "1",
        "--no-epoch-checkpoints", "--disable-validation",
        "--log-format", "tqdm" if sys.stderr.isatty() else "simple", "--log-interval", "20",
    )
    train_args = options.parse_args_and_arch(options.get_training_parser(), argv)
    distributed_utils.call_main(convert_namespace_to_omegaconf(train_args), fairseq_train.main)


def induce(args, databin: Path, checkpoint: Path, sentences: list[list[str]]) -> list:
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(databin)})
    model = models[0]
    if torch.cuda.is_available() and not args.cpu:
        model.cuda()
    return task.induce_trees(model, sentences, min_layer=args.min_layer, threshold=args.threshold)


def encoder_layers(parser: argparse.ArgumentParser, arch: str) -> int:
    """The number of layers of ``arch``, refused unless it is a ``constituent_encoder_lm`` architecture."""
    family = ARCH_MODEL_REGISTRY["constituent_encoder_lm"]
    if ARCH_MODEL_REGISTRY.get(arch) is not family:
        names = sorted(name for name, model in ARCH_MODEL_REGISTRY.items() if model is family)
        parser.error(f"--arch {arch} is not a constituent_encoder_lm architecture: one of {', '.join(names)}")
    defaults = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](defaults)
    return defaults.encoder_layers


def check_options(parser: argparse.ArgumentParser, args) -> None:
    """Refuse options that do not go together; fill in the defaults of the mode."""
    layers = encoder_layers(parser, args.arch)
    if args.min_layer >= layers:  # refused now, not after the training (Algorithm 1 reads layers m and up)
        parser.error(f"--min-layer {args.min_layer} is not one of the {layers} layers of --arch {args.arch} "
                     "(numbered from 0)")
    if args.lr_scheduler == "inverse_sqrt" and args.warmup < 1:
        parser.error("--lr-scheduler inverse_sqrt needs --warmup >= 1 (fairseq's decay starts from the warm-up's end)")
    if not args.until_converged:
        for flag, value in (("--setting", args.setting), ("--extra-text", args.extra_text)):
            if value is not None:
                parser.error(f"{flag} goes with --until-converged")
        args.updates = 1000 if args.updates is None else args.updates
        args.save_interval = 100 if args.save_interval is None else args.save_interval
        args.trees = args.trees.resolve()  # as recorded in settings.json
        return
    for flag, value in (("--updates", args.updates), ("--save-interval", args.save_interval)):
        if value is not None:
            parser.error(f"{flag} does not go with --until-converged (it trains by epochs until the validation "
                         "loss stops improving)")
    if args.keep_trivial_spans:
        # Its scores are PRPN / ON-LSTM's (the paper's metric), as score_induced_trees.py publishes and tabulates
        # them: scored otherwise, a run could not be published (its trees re-scored would not give its figures)
        # and would be put beside runs of the other metric in one median.
        parser.error("--keep-trivial-spans does not go with --until-converged (its scores leave the whole-sentence "
                     "bracket out, as PRPN / ON-LSTM's and scripts/score_induced_trees.py's do)")
    args.setting = args.setting or "ptb"
    if args.extra_text is not None and args.setting != "ptb+iwslt":
        parser.error("--extra-text goes with --setting ptb+iwslt")
    if args.setting == "ptb+iwslt":
        args.extra_text = (args.extra_text or DEFAULT_EXTRA_TEXT).resolve()
        if not args.extra_text.is_file():
            parser.error(f"--extra-text {args.extra_text}: no such file")
        if args.extra_text == args.trees.resolve():
            parser.error(f"--extra-text {args.extra_text} is the --trees file")
    if not args.trees.is_file():
        parser.error(f"--trees {args.trees}: no such file")
    args.trees = args.trees.resolve()
    try:
        import matplotlib  # noqa: F401  (the curve's PNG; refused now rather than after hours of training)
    except ImportError:
        parser.error("--until-converged draws its curves with matplotlib: pip install -e '.[analysis]'")


def main(argv=None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    check_options(parser, args)
    # fairseq_cli.train logs to stdout when imported; the log goes to stderr, the table to stdout.
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO,
                        stream=sys.stderr, force=True)
    if args.until_converged:
        try:
            until_converged(args)
        except Refused as error:  # another run holds the workdir, the workdir is another run's, too few sentences
            sys.exit(f"induce_trees.py: error: {error}")
        return
    gold, sentences = read_sentences(args)
    with contextlib.ExitStack() as held:
        try:
            make_folder(args.workdir, "--workdir")
            held.enter_context(output_lock(str(args.workdir), "--workdir"))
            claim_workdir(args)
        except ValueError as error:  # a workdir that cannot be made, another run holds it, or it is another run's
            sys.exit(f"induce_trees.py: error: {error}")
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


# Training to convergence


class Refused(ValueError):
    """A run to convergence that cannot start: said in one line."""


def run_settings(args) -> dict:
    """What makes the run (:data:`RUN_OPTIONS` with --until-converged, :data:`TRAINING_OPTIONS`
    without), as recorded in WORKDIR/settings.json beside the mode."""
    options = RUN_OPTIONS if args.until_converged else TRAINING_OPTIONS
    return {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()
            if key in options}


def claim_workdir(args) -> None:
    """Record the run's mode and settings in a new workdir; refuse a workdir of the other mode or of
    other settings, one with no record of its run, or one whose run to convergence is finished."""
    record = args.workdir / "settings.json"
    mode = "until-converged" if args.until_converged else "updates"
    settings = {"mode": mode, **run_settings(args)}
    if record.exists():
        before = {**RECORDED_LATER, **json.loads(record.read_text(encoding="utf-8"))}
        if before["mode"] != mode:
            raise Refused(f"--workdir {args.workdir} holds a run of {MODES.get(before['mode'], before['mode'])}, "
                          f"not of {MODES[mode]}: use another --workdir")
        differ = sorted(key for key in set(before) | set(settings) if before.get(key) != settings.get(key))
        finished = args.until_converged and (args.workdir / "results" / "scores.json").exists()
        raised = (args.until_converged and differ == ["max_epochs"] and settings["max_epochs"] > before["max_epochs"]
                  and not finished)
        if differ and not raised:
            said = ", ".join(f"--{key.replace('_', '-')} {before.get(key)} (now {settings.get(key)})" for key in differ)
            raise Refused(f"--workdir {args.workdir} holds a run with other settings: {said}; use another --workdir"
                          + (" (a higher --max-epochs goes on with an unfinished run only)"
                             if differ == ["max_epochs"] and args.until_converged else ""))
        if finished:
            raise Refused(f"--workdir {args.workdir} holds a finished run (results/scores.json): nothing to do; "
                             "to run it again, use another --workdir")
        if raised:
            # The cap bounds the cost only: the epochs trained so far are the same whatever it is.
            logging.info("--max-epochs raised from %d to %d; the run goes on", before["max_epochs"],
                         settings["max_epochs"])
            files.write_json(record, settings, sort_keys=True, locked=True)
        return
    if any(path.name != "settings.json.tmp" for path in args.workdir.iterdir()):
        if args.until_converged:
            raise Refused(f"--workdir {args.workdir} is not empty and holds no run to convergence (no settings.json): "
                          "use another --workdir")
        raise Refused(f"--workdir {args.workdir} is not empty and holds no settings.json (a run of the default mode "
                      "made before runs recorded their settings, or no run of this script): use another --workdir")
    files.write_json(record, settings, sort_keys=True, locked=True)


def prepare_split_data(args, sentences: list[list[str]], valid: list[int], extra: list[list[str]]) -> Path:
    """``train.txt`` (the trees' sentences but the held-out ones ``valid``, then ``extra``, the
    sentences of --extra-text for ptb+iwslt), ``valid.txt`` (the held-out ones, in the trees' order)
    and their data-bin (the dictionary of train.txt alone); the data-bin is written whole or not at all."""
    held = set(valid)
    train = [words for i, words in enumerate(sentences) if i not in held] + extra
    databin = args.workdir / "data-bin"
    if not (databin / "dict.txt").exists():
        for name, part in (("train.txt", train), ("valid.txt", [sentences[i] for i in valid])):
            files.write_lines(args.workdir / name, (" ".join(words) for words in part), locked=True)
        partial = args.workdir / "data-bin.partial"
        if partial.exists():
            shutil.rmtree(partial)
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args([
            "--only-source", "--trainpref", str(args.workdir / "train.txt"),
            "--validpref", str(args.workdir / "valid.txt"), "--destdir", str(partial),
            "--thresholdsrc", str(args.min_count), "--workers", "1",
        ]))
        partial.rename(databin)
    return databin


def converged_command(args, databin: Path, save_dir: Path) -> list[str]:
    """fairseq-train's flags: validation and a checkpoint at every epoch's end, fairseq's
    --patience, --max-epoch the cap."""
    return training_flags(
        args, databin, save_dir, "--valid-subset", "valid",
        "--best-checkpoint-metric", "loss", "--patience", str(args.patience), "--max-epoch", str(args.max_epochs),
        "--log-format", "simple", "--log-interval", "10",
    )


def train_until_converged(args, databin: Path, save_dir: Path, after_sitting) -> str:
    """Train in sittings of at most --patience epochs, each resuming checkpoint_last.pt, until the
    validations of SAVE_DIR/train.log (every sitting's, of this and earlier runs of the command)
    have had --patience epochs without a lower loss, or --max-epochs: the count of
    :mod:`tree_fairseq.cli.patience`, which scripts/train.sh uses, so that a run killed and resumed
    stops where an uninterrupted one stops. ``after_sitting()`` runs after every sitting. Returns why
    the run stopped."""
    save_dir.mkdir(parents=True, exist_ok=True)
    log = save_dir / "train.log"
    command = converged_command(args, databin, save_dir)
    trained_to = None
    while True:
        lines = patience.read_log(log)[0] if log.exists() else []
        bound, why = patience.max_epoch(lines, command, trained_to)
        if why:
            logging.info("patience: %s", why)
        if bound == 0:
            return why
        found = patience.validations(lines)
        last = found[-1][0] if found else 0
        # At most --patience epochs a sitting: each sitting's epoch checkpoints are then thinned.
        sitting_end = min(bound or args.max_epochs, last + args.patience)
        sitting = [*command, "--max-epoch", str(sitting_end)]
        handler = logging.FileHandler(log, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
        logging.getLogger().addHandler(handler)
        try:
            logging.info("$ fairseq-train %s", " ".join(sitting))
            # fairseq's own early-stop count lives in function attributes: every sitting starts it afresh,
            # as a new process would (the count of the whole log decides when to stop).
            for name in ("best", "num_runs"):
                fairseq_train.should_stop_early.__dict__.pop(name, None)
            train_args = options.parse_args_and_arch(options.get_training_parser(), sitting)
            distributed_utils.call_main(convert_namespace_to_omegaconf(train_args), fairseq_train.main)
        finally:
            logging.getLogger().removeHandler(handler)
            handler.close()
        trained_to = sitting_end
        after_sitting()


EPOCH_CHECKPOINT = re.compile(r"checkpoint(\d+)\.pt")


def thin_epoch_checkpoints(save_dir: Path) -> None:
    """fairseq's checkpoint{N}.pt without the optimiser's state, as epoch{N}.pt (a third of the size;
    checkpoint_last.pt, which a resume reads, keeps it)."""
    for path in sorted(save_dir.glob("checkpoint*.pt")):
        match = EPOCH_CHECKPOINT.fullmatch(path.name)
        if not match:
            continue
        state = torch.load(path, map_location="cpu", weights_only=False)
        state["last_optimizer_state"] = None
        with files.replacing(save_dir / f"epoch{match.group(1)}.pt", locked=True) as partial:
            torch.save(state, partial)
        path.unlink()


def recover_cut_short_last(save_dir: Path) -> None:
    """A run killed while fairseq copied its newest epoch checkpoint to checkpoint_last.pt leaves that
    file cut short. fairseq writes the epoch's checkpoint{N}.pt whole first (under another name,
    then renamed) and only then copies it, so that file (or checkpoint_best.pt copied from it) is
    the same state: the newest readable one takes the place of the cut-short one. Refused, naming
    the file, when none is left (epoch checkpoints thinned to epoch{N}.pt have no optimiser state)."""
    last = save_dir / "checkpoint_last.pt"
    if not last.exists():
        return
    try:
        load_checkpoint(str(last), mmap=True)
    except ValueError as error:
        instead = newest_readable_checkpoint(str(save_dir), but=str(last))
        if instead is None:
            raise Refused(f"{error}, and no epoch checkpoint with the optimiser's state is left to resume from; "
                          f"remove {save_dir} (or the whole --workdir) to train from the start") from None
        with files.replacing(last, locked=True) as partial:
            shutil.copyfile(instead, partial)
        logging.warning("%s; resuming from %s, the checkpoint it was being copied from", error, Path(instead).name)


def epoch_models(save_dir: Path) -> dict[int, Path]:
    return {int(path.name[5:-3]): path for path in save_dir.glob("epoch*.pt") if re.fullmatch(r"epoch\d+\.pt", path.name)}


def load_model(args, databin: Path, checkpoint: Path):
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(databin)})
    model = models[0]
    if torch.cuda.is_available() and not args.cpu:
        model.cuda()
    return model, task


def parse_every_m(args, links: list, sentences: list[list[str]]) -> dict[int, list]:
    """Algorithm 1 with every m (0 .. layers - 1) over the same link probabilities."""
    layers = links[0].shape[0]
    return {m: [unsupervised_parse(a, words, m, args.threshold) for a, words in zip(links, sentences)]
            for m in range(layers)}


def evaluate_epochs(args, databin: Path, save_dir: Path, gold: list, sentences: list, short: list[int]) -> None:
    """results/epochs/epoch{N}.json for every epoch model not yet scored: its validation loss, F1
    with every m, and the distribution of its link probabilities."""
    out = args.workdir / "results" / "epochs"
    out.mkdir(parents=True, exist_ok=True)
    log = save_dir / "train.log"
    losses = dict(patience.validations(patience.read_log(log)[0]))
    for epoch, path in sorted(epoch_models(save_dir).items()):
        target = out / f"epoch{epoch}.json"
        scored = json.loads(target.read_text(encoding="utf-8")) if target.exists() else None
        if scored is not None and "agreement" in scored:
            continue
        model, task = load_model(args, databin, path)
        links = task.sentence_links(model, sentences)
        if scored is not None:  # scored before the agreement was recorded: add it, keep the rest
            files.write_json(target, {**scored, "agreement": induction.link_agreement(links, gold)}, sort_keys=True,
                             locked=True)
            logging.info("added the links' agreement with the gold trees to epoch %d", epoch)
            continue
        updates = torch.load(path, map_location="cpu", weights_only=False)["optimizer_history"][-1]["num_updates"]
        files.write_json(target, {
            "epoch": epoch, "updates": updates, "valid_loss": losses.get(epoch),
            "induced": {str(m): induction.scores(trees, gold, short)
                        for m, trees in parse_every_m(args, links, sentences).items()},
            "links": induction.link_distribution(links, args.threshold),
            "agreement": induction.link_agreement(links, gold),
        }, sort_keys=True, locked=True)
        logging.info("scored the trees of epoch %d", epoch)


def until_converged(args) -> None:
    """Train to convergence (resuming), score every epoch, write the best epoch's trees and the
    results (:func:`finish`)."""
    gold, sentences = read_sentences(args)
    extra = induction.extra_sentences(args.extra_text, args.keep_case) if args.setting == "ptb+iwslt" else []
    try:
        valid = induction.held_out(len(sentences), args.valid_fraction, args.valid_seed)  # refused before any write
    except ValueError as error:
        raise Refused(error) from None
    with contextlib.ExitStack() as held:
        try:
            make_folder(args.workdir, "--workdir")
            held.enter_context(output_lock(str(args.workdir), "--workdir"))
        except ValueError as error:  # a workdir that cannot be made, or another run holds it
            raise Refused(error) from None
        claim_workdir(args)
        databin = prepare_split_data(args, sentences, valid, extra)
        save_dir = args.workdir / "checkpoints"
        short = short_sentences(gold, args.short)

        def after_sitting():
            thin_epoch_checkpoints(save_dir)
            evaluate_epochs(args, databin, save_dir, gold, sentences, short)

        recover_cut_short_last(save_dir)  # a sitting killed while fairseq copied it
        thin_epoch_checkpoints(save_dir)  # of a sitting killed before it could
        stopped = train_until_converged(args, databin, save_dir, after_sitting)
        after_sitting()
        finish(args, databin, save_dir, gold, sentences, short, valid, stopped)


def finish(args, databin, save_dir, gold, sentences, short, valid, stopped: str) -> None:
    """results/: trees/m{m}.txt (the best epoch's trees with every m, one bracketed tree a line, in
    the trees' order) and the baselines' trees, curve.png and links.png, scores.txt, and last
    scores.json (its presence marks the run finished)."""
    results = args.workdir / "results"
    log = save_dir / "train.log"
    found = patience.validations(patience.read_log(log)[0])
    try:
        best_epoch, best_loss = patience.best_validation(found)
    except ValueError as error:
        raise Refused(f"{log}: {error} to parse with (its checkpoints are kept)") from None
    epochs = [json.loads((results / "epochs" / f"epoch{epoch}.json").read_text(encoding="utf-8"))
              for epoch in sorted(epoch_models(save_dir))]
    if [e["epoch"] for e in epochs] != [epoch for epoch, _ in found]:
        raise ValueError(f"{save_dir}: the epoch models {[e['epoch'] for e in epochs]} are not the validated epochs "
                         f"{[epoch for epoch, _ in found]}")
    model, task = load_model(args, databin, epoch_models(save_dir)[best_epoch])
    links = task.sentence_links(model, sentences)
    trees_dir = results / "trees"
    trees_dir.mkdir(parents=True, exist_ok=True)
    induced = parse_every_m(args, links, sentences)
    for m, trees in induced.items():
        induction.write_trees(trees_dir / f"m{m}.txt", trees, locked=True)
    baselines = induction.baselines(sentences, args.seed)
    for name, trees in baselines.items():
        induction.write_trees(trees_dir / f"{name}.txt", trees, locked=True)
    best = next(e for e in epochs if e["epoch"] == best_epoch)
    record = {
        **run_settings(args), "stopped": stopped, "epochs": len(epochs), "best_epoch": best_epoch,
        "best_valid_loss": best_loss, "best_updates": best["updates"], "sentences": len(sentences),
        "short_sentences": len(short), "valid_sentences": len(valid),
        "induced": {str(m): induction.scores(trees, gold, short) for m, trees in induced.items()},
        "baselines": {name: induction.scores(trees, gold, short) for name, trees in baselines.items()},
        "links": best["links"], "agreement": best["agreement"],
        "curve": [{"epoch": e["epoch"], "updates": e["updates"], "valid_loss": e["valid_loss"],
                   "induced": {m: {s: v[s]["sentence_f1"] for s in ("all", "short")} for m, v in e["induced"].items()},
                   "concordance": [layer["concordance"] for layer in e["agreement"]]}
                  for e in epochs],
    }
    if record["induced"] != best["induced"]:
        raise ValueError(f"the trees of epoch {best_epoch} parsed again score otherwise than when the epoch was scored")
    draw(args, record, results)
    files.write_text(results / "scores.txt", scores_text(args, record), locked=True)
    files.write_json(results / "scores.json", record, sort_keys=True, locked=True)
    print(scores_text(args, record), end="")


def scores_text(args, record: dict) -> str:
    lines = [f"Sentence-level F1 (%, PRPN / ON-LSTM's) on all {record['sentences']} sentences of {args.trees.name} and "
             f"on the {record['short_sentences']} of <= {args.short} words; {args.arch}, --setting {args.setting}, "
             f"--seed {args.seed}; best validation loss {record['best_valid_loss']:g} at epoch {record['best_epoch']} "
             f"({record['best_updates']} updates) of {record['epochs']}; stopped: {record['stopped']}",
             f"{'trees':<32} {'all':>6} {'short':>6} {'corpus F1 all':>13}"]
    rows = [(f"constituent attention, m={m}", v) for m, v in record["induced"].items()]
    rows += list(record["baselines"].items())
    for name, v in rows:
        lines.append(f"{name:<32} {100 * v['all']['sentence_f1']:>6.1f} {100 * v['short']['sentence_f1']:>6.1f} "
                     f"{100 * v['all']['corpus_f1']:>13.1f}")
    lines.append(f"link probabilities at epoch {record['best_epoch']}, share above --threshold {args.threshold} per "
                 "layer: " + " ".join(f"{layer['above_threshold']:.2f}" for layer in record["links"]))
    lines.append("their order against the gold trees' (concordance, 0.5 none, 1 the gold splits first) per layer: "
                 + " ".join(f"{layer['concordance']:.3f}" for layer in record["agreement"])
                 + "; each layer's own links: " + " ".join(f"{layer['own_concordance']:.3f}" for layer in record["agreement"]))
    return "\n".join(lines) + "\n"


def draw(args, record: dict, results: Path) -> None:
    """curve.png: sentence-level F1 (m = --min-layer, every sentence and the short ones) and the
    validation loss over the epochs; links.png: the link probabilities' histogram per layer at the
    best epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = str(min(args.min_layer, len(record["induced"]) - 1))
    epochs = [point["epoch"] for point in record["curve"]]
    figure, axis = plt.subplots(figsize=(7, 4))
    for subset, style in (("all", "-"), ("short", "--")):
        axis.plot(epochs, [100 * point["induced"][m][subset] for point in record["curve"]], style, marker=".",
                  label=f"constituent attention, m={m} ({subset})")
        axis.axhline(100 * record["baselines"]["right-branching"][subset]["sentence_f1"], color="grey",
                     linestyle=style, linewidth=0.8, label=f"right-branching ({subset})")
    axis.axvline(record["best_epoch"], color="black", linewidth=0.5)
    axis.set_xlabel("epoch")
    axis.set_ylabel("sentence-level F1 (%)")
    loss_axis = axis.twinx()
    loss_axis.plot(epochs, [point["valid_loss"] for point in record["curve"]], color="tab:red", linewidth=0.8)
    loss_axis.set_ylabel("validation loss (masked LM)", color="tab:red")
    axis.legend(fontsize=7, loc="lower right")
    axis.set_title(f"{args.arch}, {args.setting}, seed {args.seed}", fontsize=9)
    figure.tight_layout()
    with files.replacing(results / "curve.png", locked=True) as partial:
        figure.savefig(partial, dpi=120, format="png")
    plt.close(figure)

    layers = record["links"]
    figure, axes = plt.subplots(len(layers), 1, figsize=(6, 1.1 * len(layers) + 0.6), sharex=True)
    for axis, layer in zip(list(getattr(axes, "flat", [axes])), layers):
        width = 1 / len(layer["histogram"])
        total = max(layer["links"], 1)
        axis.bar([i * width for i in range(len(layer["histogram"]))], [c / total for c in layer["histogram"]],
                 width=width, align="edge")
        axis.axvline(args.threshold, color="red", linewidth=0.8)
        axis.set_ylabel(f"layer {layer['layer']}", fontsize=7)
    axes_list = list(getattr(axes, "flat", [axes]))
    axes_list[-1].set_xlabel(f"link probability (red: threshold {args.threshold}); share of links per bin")
    figure.tight_layout()
    with files.replacing(results / "links.png", locked=True) as partial:
        figure.savefig(partial, dpi=120, format="png")
    plt.close(figure)


if __name__ == "__main__":
    main()
