#!/usr/bin/env python
"""Score published induced trees against gold trees, and tabulate runs of scripts/induce_trees.py
--until-converged over seeds.

``score``: sentence-level F1 (PRPN / ON-LSTM's, the paper's metric: every sentence counts, the
whole-sentence bracket left out) and corpus-level F1 of each induced-tree file (one bracketed tree
a line, as ``results/trees/m{m}.txt`` of a run) against the gold trees given by path, read as
scripts/induce_trees.py reads them (``--word-filter``, default PRPN / ON-LSTM's 36 word tags), on
every sentence and on those of at most ``--short`` words. The files must have one tree per gold
tree, over the same words (case aside)::

    python scripts/score_induced_trees.py score --gold ptb-sample/wsj_0001-0199.mrg.txt \\
        W/results/trees/m3.txt W/results/trees/right-branching.txt

``table``: median and max over seeds, per setting, of the sentence-level F1 with Algorithm 1's
``--m`` (default 3, the paper's) of finished runs (their ``results/scores.json``), as the paper's
Tables 1 and 2, with the baselines over the same sentences::

    python scripts/score_induced_trees.py table runs/ptb-seed1 runs/ptb-seed2 runs/ptb+iwslt-seed1

``--json`` prints the figures (fractions, not percentages) as JSON instead of a table.
"""

import argparse
import json
import sys
from pathlib import Path

from tree_fairseq.analysis import induction
from tree_fairseq.trees.evaluation import short_sentences


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="F1 of induced-tree files against the gold trees")
    score.add_argument("--gold", type=Path, required=True, help="gold trees, one bracketed tree a line")
    score.add_argument("--word-filter", choices=sorted(induction.WORD_FILTERS), default="word-tags",
                       help="which words of the gold trees are kept (default: %(default)s, as induce_trees.py)")
    score.add_argument("--short", type=int, default=10, help="also score sentences of <= N words (default: %(default)s)")
    score.add_argument("--json", action="store_true", help="print JSON")
    score.add_argument("trees", type=Path, nargs="+", help="induced-tree files")
    table = commands.add_parser("table", help="median and max over seeds of finished runs")
    table.add_argument("--m", type=int, default=3, help="Algorithm 1's m (default: %(default)s, the paper's)")
    table.add_argument("--json", action="store_true", help="print JSON")
    table.add_argument("workdirs", type=Path, nargs="+", help="workdirs of finished runs (results/scores.json)")
    return parser


def given_twice(paths: list[Path]) -> Path | None:
    seen = set()
    for path in paths:
        if path.resolve() in seen:
            return path
        seen.add(path.resolve())
    return None


def main(argv=None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    paths = args.trees if args.command == "score" else args.workdirs
    twice = given_twice(paths)
    if twice is not None:
        parser.error(f"{twice} is given twice")
    try:
        if args.command == "score":
            score(args)
        else:
            table(args)
    except (OSError, ValueError) as error:
        sys.exit(f"score_induced_trees.py: error: {error}")


def score(args) -> None:
    gold, _ = induction.read_gold(args.gold, args.word_filter)
    short = short_sentences(gold, args.short)
    found = {str(path): induction.scores(induction.read_induced(path, gold), gold, short) for path in args.trees}
    if args.json:
        print(json.dumps(found, indent=1, sort_keys=True))
        return
    print(f"sentence-level F1 (%) on all {len(gold)} sentences of {args.gold} and on the {len(short)} of <= "
          f"{args.short} words; corpus-level F1 on all")
    print(f"{'all':>6} {'short':>6} {'corpus':>6}  trees")
    for path, value in found.items():
        print(f"{100 * value['all']['sentence_f1']:>6.1f} {100 * value['short']['sentence_f1']:>6.1f} "
              f"{100 * value['all']['corpus_f1']:>6.1f}  {path}")


def table(args) -> None:
    results = []
    for workdir in args.workdirs:
        path = workdir / "results" / "scores.json"
        if not path.exists():
            raise ValueError(f"{workdir} holds no finished run (no {path})")
        results.append(json.loads(path.read_text(encoding="utf-8")))
    sentences = {(r["trees"], r["word_filter"], r["sentences"], r["short"]) for r in results}
    if len(sentences) > 1:
        raise ValueError("the runs parsed other sentences (--trees, --word-filter, --sentences or --short differ)")
    rows = induction.seed_table(results, args.m)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"sentence-level F1 (%): median / max over seeds; all {results[0]['sentences']} sentences and the "
          f"{results[0]['short_sentences']} of <= {results[0]['short']} words")
    print(f"{'trees':<44} {'seeds':<12} {'all med':>7} {'all max':>7} {'short med':>9} {'short max':>9}")
    for row in rows:
        print(f"{row['trees']:<44} {','.join(map(str, row['seeds'])):<12} {row['all']['median']:>7.1f} "
              f"{row['all']['max']:>7.1f} {row['short']['median']:>9.1f} {row['short']['max']:>9.1f}")


if __name__ == "__main__":
    main()
