"""The smallest difference of two systems' mean scores that a study of k seeds per system detects,
from the run-to-run spread of a system already trained.

A study that compares systems over training seeds (``tree-fairseq-compare``) can only show a
difference larger than the seeds' own spread allows. Before its runs, the question is: with the
spread ``sd`` that one system's seeds showed, and ``k`` seeds of each of two systems, which
difference of their means would a two-sided test at level ``alpha`` find with probability
``power``? The usual two-sample answer, with Student's t on ``2k - 2`` degrees of freedom:

    d = (t(1 - alpha / 2) + t(power)) · sd · sqrt(2 / k)

(the normal approximation with t quantiles; within 0.01 BLEU of the exact noncentral-t answer at
the study's sizes). Holm's correction over P pairs tests the smallest p-value at ``alpha / P``;
``--pairs P`` gives that first step too. It assumes both systems share ``sd``. The comparison
tool's interval also resamples the test sentences, which widens it: the figure is a floor on
what the study detects, not a promise.

    python -m tree_fairseq.analysis.power docs/results/iwslt14-lowres-en-de/comparison.json \\
        --system transformer --seeds 3 5 --pairs 8

reads the system's sample sd over its runs from a comparison's JSON (``tree-fairseq-compare
--json``) and prints one line per number of seeds. Needs scipy (the ``analysis`` extra).
"""

import argparse
import json
import math
import sys

from tree_fairseq.cli import ArgumentParser, argtypes


def detectable_difference(sd: float, seeds: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The difference of two means of ``seeds`` runs each, spread ``sd``, that a two-sided test at
    ``alpha`` finds with probability ``power``."""
    from scipy import stats

    if seeds < 2:
        raise ValueError(f"a system of {seeds} run(s) has no run-to-run spread: give at least 2 seeds")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError("alpha and power must each lie strictly between 0 and 1")
    if not sd > 0 or math.isinf(sd):
        raise ValueError(f"the spread must be a positive number, not {sd}")
    df = 2 * seeds - 2
    return (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * sd * math.sqrt(2 / seeds)


def system_spread(comparison: dict, system: str, metric: str) -> tuple[float, int]:
    """``(sd, runs)`` of ``system``'s ``metric`` in a comparison's JSON."""
    systems = comparison.get("systems") if isinstance(comparison, dict) else None
    if not isinstance(systems, dict):
        raise ValueError("it has no 'systems': not a tree-fairseq-compare --json file")
    if system not in systems:
        raise ValueError(f"no system {system!r} in it (it has: {', '.join(sorted(systems))})")
    entry = systems[system]
    figures = entry.get(metric)
    sd = figures.get("sd") if isinstance(figures, dict) else None
    if sd is None:
        raise ValueError(f"system {system!r} has no sd of {metric} (one run has no run-to-run spread)")
    return float(sd), len(entry.get("runs", {}))


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m tree_fairseq.analysis.power",
        description="The smallest difference of two systems' means that k seeds each detect, from the "
        "run-to-run sd of a system in a tree-fairseq-compare JSON (two-sample t, both systems with that sd).")
    parser.add_argument("comparison", metavar="COMPARISON.json", help="a tree-fairseq-compare --json file")
    parser.add_argument("--system", required=True, help="the system whose sd over its runs is used")
    parser.add_argument("--metric", default="BLEU", choices=("BLEU", "chrF"), help="default: BLEU")
    parser.add_argument("--seeds", type=int, nargs="+", required=True, metavar="K",
                        help="seeds per system in the planned study (each at least 2)")
    parser.add_argument("--alpha", type=argtypes.fraction, default=0.05, help="two-sided level (default: 0.05)")
    parser.add_argument("--power", type=argtypes.fraction, default=0.8, help="default: 0.8")
    parser.add_argument("--pairs", type=argtypes.positive_int, default=1, metavar="P",
                        help="pairs Holm corrects over: also print the first step's alpha / P (default: 1)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    for k in args.seeds:
        if k < 2:
            parser.error(f"--seeds {k}: a system of fewer than 2 runs has no run-to-run spread")
    try:
        with open(args.comparison, encoding="utf-8") as f:
            comparison = json.load(f)
    except OSError as e:
        parser.error(f"cannot read {args.comparison}: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        parser.error(f"{args.comparison} is not JSON: {e}")
    try:
        sd, runs = system_spread(comparison, args.system, args.metric)
    except ValueError as e:
        parser.error(f"{args.comparison}: {e}")
    print(f"{args.system}: {args.metric} sd {sd:.3f} over {runs} runs ({args.comparison}); "
          f"two-sided, power {args.power:g}, both systems with that sd")
    levels = [args.alpha] + ([args.alpha / args.pairs] if args.pairs > 1 else [])
    for k in args.seeds:
        cells = [f"alpha {level:.4g}: {detectable_difference(sd, k, level, args.power):.2f}" for level in levels]
        print(f"{k} seeds each: " + "; ".join(cells)
              + (f" (Holm's first step over {args.pairs} pairs)" if args.pairs > 1 else ""))


if __name__ == "__main__":
    sys.exit(main())
