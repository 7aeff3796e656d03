"""Compare systems over training seeds, not only over test sentences.

A system here is a set of trained runs that differ only in their training seed. Another seed of the
same system moves sacreBLEU by several tenths, and sacreBLEU's paired bootstrap resamples test
sentences only: it says whether two *runs* differ on this test set, not whether two *systems* do.
This tool reads published outputs (``RESULTS/ref.LANG`` and ``RESULTS/RUN.hyp.LANG``, detokenised,
one line per test sentence, as ``scripts/publish_results.py`` writes them) and reports:

- per run: sacreBLEU BLEU (its defaults: 13a, mixed case, exp smoothing), its brevity penalty and
  chrF (sacreBLEU's default chrF2), the numbers ``sacrebleu REF -i HYP -m bleu chrf`` prints;
- per system: the mean over its runs and the sample standard deviation (ddof 1; none with one run);
- per pair A:B: the difference of the system means (A - B) for BLEU and chrF, a 95% interval and
  a two-sided p-value from a bootstrap over both runs and sentences (:func:`bootstrap_differences`),
  and the p-values Holm-corrected over the pairs given, per metric (:func:`holm`);
- per pair, every run of A against every run of B with sacreBLEU's own paired bootstrap (BLEU, the
  p-value ``sacrebleu REF -i B_RUN A_RUN -m bleu --paired-bs --paired-bs-n N`` prints, seeded as
  sacreBLEU seeds it: SACREBLEU_SEED, default 12345). Runs are not matched by seed number across
  systems: seed 2 of one architecture has nothing to do with seed 2 of another.

- with ``--by-length 10,20,30 --source SRC``, each pair again on the test sentences grouped by the
  length of their source line in words (up to 10, 11-20, 21-30, over 30), each group's difference of
  the system means with the same bootstrap within the group (its own generator, so the other figures
  do not move), uncorrected: where a difference lies, not further tests; and each system's output
  length there (hypothesis / reference tokens as BLEU counts them, mean ± sd over its runs);
- with ``--plot FILE``, a picture: each system's runs as points with their mean, and each pair's
  BLEU interval (red where the difference is shown after Holm).

It prints Markdown tables and writes every number, the command line, sacreBLEU's version and
signatures, the number of replicates and the seed as JSON. A pair with a system of one run carries a
``note`` (and a warning is printed): such a system has no run-to-run spread to resample; so does a
length group of fewer than 50 sentences (``MIN_GROUP_SENTENCES``), whose figures describe rather
than show anything.

Refused, each in one line before anything is written: a system or run named twice, a pair given
twice or reversed (Holm would count it twice), the same output under two run names (a copy or a link
would count as two seeds), text that is not UTF-8 or holds a carriage return inside a line, fewer
than 100 replicates (no 95% percentile interval) or more than fit in memory, an output that is an
input or in a folder that is not there, and an existing ``RESULTS/comparison.json`` (a published
comparison) unless ``--json`` names it, and an existing ``--plot`` picture unless ``--json`` names
an existing file too (the comparison it goes with, both replaced); with ``--by-length``, a
``--source`` that is the target side (most lines the reference's or a run's text), still holds
subword marks, or is not in the test set's order (:func:`check_in_test_order`). The JSON and the
picture are written whole or not at all, and both or neither
(:mod:`tree_fairseq.cli.files`). With two runs a system's run-to-run spread is barely estimated (a
bootstrap over k runs sees (k - 1) / k of their variance): the interval is then a floor on the
uncertainty, not a measure of it; more seeds narrow it honestly.

Only numpy, sacrebleu and the pure-Python :mod:`tree_fairseq.trees` are imported (no fairseq, no torch;
matplotlib for ``--plot``).
"""

import argparse
import contextlib
import html
import os
import shlex
import sys

import numpy as np
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from tree_fairseq.cli import ArgumentParser, argtypes
from tree_fairseq.cli.files import check_output, read_lines, replacing, same_file, write_json
from tree_fairseq.trees.subwords import subword_marks

METRICS = ("BLEU", "chrF")
DETOKENISE = ("publish detokenised text (fairseq-generate --remove-bpe, then detokenise, as scripts/publish_results.py "
              "does)")
EXAMPLE = """\
example (two training seeds of three systems, three pairs):

  tree-fairseq-compare --results docs/results/iwslt14-lowres-en-de --lang de \\
      --system transformer=transformer,transformer.seed2 \\
      --system spacy=tree_transformer.spacy,tree_transformer.spacy.seed2 \\
      --system balanced=tree_transformer.balanced,tree_transformer.balanced.seed2 \\
      --pair spacy:balanced --pair spacy:transformer --pair balanced:transformer \\
      --json /tmp/comparison.json

reads DIR/ref.LANG and DIR/RUN.hyp.LANG (detokenised, one line per test sentence).
"""


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="tree-fairseq-compare",
        description="Compare systems over their training seeds, from published outputs.\n\n"
        "Per run: sacreBLEU BLEU, its brevity penalty and chrF. Per system: mean and sd over its runs.\n"
        "Per pair A:B: the difference of the system means with a 95% interval and p-value from a\n"
        "bootstrap over both runs and test sentences (Holm-corrected over the pairs), and sacreBLEU's\n"
        "paired bootstrap p-value of every run of A against every run of B. Prints Markdown tables\n"
        "and writes JSON (--json).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, metavar="DIR",
                        help="folder of ref.LANG and RUN.hyp.LANG files (e.g. docs/results/iwslt14-lowres-en-de)")
    parser.add_argument("--lang", required=True, help="target language: the files' suffix (e.g. de)")
    parser.add_argument("--system", action="append", required=True, metavar="NAME=RUN[,RUN...]",
                        help="a system and its runs, one per training seed: each RUN is DIR/RUN.hyp.LANG (repeatable)")
    parser.add_argument("--pair", action="append", required=True, metavar="A:B",
                        help="compare system A with system B, reported as A - B (repeatable)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="bootstrap replicates, also sacreBLEU's --paired-bs-n (default: 1000)")
    parser.add_argument("--seed", type=argtypes.seed, default=12345,
                        help="seed of the bootstrap over runs and sentences (default: 12345); sacreBLEU's own "
                        "paired bootstrap keeps its seed (SACREBLEU_SEED, default 12345)")
    parser.add_argument("--json", metavar="FILE",
                        help="where to write the results (default: DIR/comparison.json, written only when it does not "
                        "exist yet: an existing file is replaced only when named here)")
    parser.add_argument("--by-length", metavar="N[,N...]",
                        help="also compare each pair on the test sentences grouped by source length in words: upper "
                        "bounds of the groups, ascending (10,20,30: up to 10, 11-20, 21-30, over 30 words), with each "
                        "system's output length per group; needs --source")
    parser.add_argument("--source", metavar="FILE",
                        help="the test set's source side, one line per test sentence (its words, split at "
                        "whitespace, are the sentence's length for --by-length), in the test set's order; a file most "
                        "of whose lines are the reference's text is the target side and refused")
    parser.add_argument("--plot", metavar="FILE",
                        help="draw each system's runs with their mean and each pair's interval (BLEU) to FILE "
                        "(.png, .pdf or .svg; needs matplotlib, the analysis extra; an existing FILE is replaced only "
                        "along with an existing JSON that --json names)")
    return parser


def parse_system(text: str) -> tuple[str, list[str]]:
    """``NAME=RUN[,RUN...]`` as (name, runs)."""
    name, sep, runs = text.partition("=")
    names = [run.strip() for run in runs.split(",")]
    if not sep or not name.strip() or not all(names):
        raise ValueError(f"--system {text!r} is not NAME=RUN[,RUN...] (e.g. transformer=transformer,transformer.seed2)")
    return name.strip(), names


def parse_pair(text: str) -> tuple[str, str]:
    """``A:B`` as (A, B)."""
    a, sep, b = text.partition(":")
    if not sep or not a or not b:
        raise ValueError(f"--pair {text!r} is not A:B (two system names of --system)")
    return a, b


def check_design(systems: list[tuple[str, list[str]]], pairs: list[tuple[str, str]]) -> None:
    """Refuse a system named twice, a run listed twice (in one system or two), and a pair naming
    an unknown system or a system with itself: each would make the comparison mean something else."""
    seen_systems, seen_runs = [], {}
    for name, runs in systems:
        if name in seen_systems:
            raise ValueError(f"--system {name}=... is given twice: name each system once, with all its runs")
        seen_systems.append(name)
        for run in runs:
            if run in seen_runs:
                raise ValueError(f"run {run!r} is listed twice (in system {seen_runs[run]!r} and in {name!r}): "
                                 "each run is one training seed of one system; list it once")
            seen_runs[run] = name
    for a, b in pairs:
        for name in (a, b):
            if name not in seen_systems:
                raise ValueError(f"--pair {a}:{b}: no system {name!r}; the systems are {', '.join(seen_systems)} "
                                 f"(define it with --system {name}=RUN,...)")
        if a == b:
            raise ValueError(f"--pair {a}:{b} compares a system with itself: name two systems")
    for index, (a, b) in enumerate(pairs):
        for c, d in pairs[:index]:
            if {a, b} == {c, d}:
                same = "is given twice" if (a, b) == (c, d) else f"is {c}:{d} reversed"
                raise ValueError(f"--pair {a}:{b} {same}: Holm would correct over a pair counted twice; "
                                 "give each pair once")


def check_detokenised(path: str, lines: list[str], advice: str = DETOKENISE) -> None:
    """Refuse text that still holds subword marks: its score would not be the translation's (and
    a source side's pieces are not its words)."""
    for number, line in enumerate(lines, 1):
        what = subword_marks(line)
        if what is not None:
            raise ValueError(f"{path} line {number} still holds {what}: {advice}")


def load_outputs(results: str, lang: str, runs: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The reference and each run's hypotheses, each hypothesis file checked to be detokenised
    and to have one line per reference line."""
    ref_path = os.path.join(results, f"ref.{lang}")
    if not os.path.isfile(ref_path):
        raise ValueError(f"{ref_path}: no such file: --results names the folder of ref.{lang} and the "
                         f"RUN.hyp.{lang} files, --lang their suffix")
    refs = read_lines(ref_path)
    if not refs:
        raise ValueError(f"{ref_path} is empty: the reference must hold one line per test sentence")
    hyps = {}
    for run in runs:
        path = os.path.join(results, f"{run}.hyp.{lang}")
        if not os.path.isfile(path):
            present = sorted(name[:-len(f".hyp.{lang}")] for name in os.listdir(results)
                             if name.endswith(f".hyp.{lang}"))
            raise ValueError(f"{path}: no such file: a RUN of --system is the file RUN.hyp.{lang} in {results}; "
                             f"its runs are {', '.join(present) or 'none'}")
        lines = read_lines(path)
        if len(lines) != len(refs):
            raise ValueError(f"{path} has {len(lines)} lines but {ref_path} has {len(refs)}: every run must "
                             "translate every test sentence of that reference, one line each")
        check_detokenised(path, lines)
        for other, other_lines in hyps.items():
            if other_lines == lines:
                raise ValueError(f"{path} is the same output as {other}.hyp.{lang} (every line equal): two training "
                                 "runs never translate a test set identically, so one output would count as two runs")
        hyps[run] = lines
    return refs, hyps


def sentence_statistics(metric, hyps: list[str]) -> np.ndarray:
    """The metric's sufficient statistics of each sentence, (sentences, statistics): a corpus score
    is a function of their sum over the sentences, so a resampled corpus costs one sum."""
    return np.array(metric._extract_corpus_statistics(hyps, None), dtype=np.float64)


def resampled_scores(metric, statistics: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The corpus score of each resample: ``counts`` (replicates, sentences) says how often each
    sentence is drawn, so ``counts @ statistics`` is each resample's summed statistics."""
    return np.array([metric._compute_score_from_stats(row).score for row in counts @ statistics])


def mean_and_sd(values: list[float]) -> dict:
    """Mean and sample standard deviation (ddof 1; None with one value)."""
    return {"mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None}


def resample_sentences(rng: np.random.Generator, sentences: int, replicates: int) -> np.ndarray:
    """(replicates, sentences) counts: each row draws ``sentences`` test sentences with replacement."""
    return rng.multinomial(sentences, np.full(sentences, 1.0 / sentences), size=replicates)


def resample_runs(rng: np.random.Generator, runs: int, replicates: int) -> np.ndarray:
    """(replicates, runs) indices: each row draws a system's ``runs`` runs with replacement."""
    return rng.integers(0, runs, size=(replicates, runs))


def bootstrap_means(scores: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Each replicate's mean over its drawn runs: ``scores`` (runs, replicates) holds each run's
    score on the replicate's sentences, ``draws`` (replicates, runs) the runs drawn."""
    return np.take_along_axis(scores.T, draws, axis=1).mean(axis=1)


def bootstrap_differences(scores_a: np.ndarray, draws_a: np.ndarray, scores_b: np.ndarray,
                          draws_b: np.ndarray) -> np.ndarray:
    """The bootstrap distribution of mean(A) - mean(B): in each replicate, A's runs and B's runs
    are resampled with replacement, each system its own number of runs, and every run of both
    is scored on the same resampled test sentences (``scores_*``: (runs, replicates))."""
    return bootstrap_means(scores_a, draws_a) - bootstrap_means(scores_b, draws_b)


def percentile_interval(differences: np.ndarray) -> list[float]:
    """The 95% percentile interval: numpy's 2.5th and 97.5th percentiles (linear interpolation)."""
    low, high = np.percentile(differences, [2.5, 97.5])
    return [float(low), float(high)]


def bootstrap_p_value(differences: np.ndarray, observed: float) -> float:
    """Two-sided bootstrap p-value of "no difference": min(1, 2 (1 + c) / (N + 1)), where c counts
    the N replicates whose difference is 0 or of the sign opposite to the observed one (all of
    them when the observed difference is 0). It is about the smallest level at which the
    percentile interval would exclude 0; the +1 keeps it above 0 for a finite N."""
    opposite = int(np.sum(differences * np.sign(observed) <= 0))
    return min(1.0, 2 * (1 + opposite) / (len(differences) + 1))


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down correction, in the order given: the i-th smallest p (from 1) times
    (m - i + 1), made non-decreasing along that order and capped at 1."""
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_bootstrap(metric: BLEU, run_a: str, hyps_a: list[str], run_b: str, hyps_b: list[str],
                     replicates: int) -> tuple[float, str]:
    """sacreBLEU's own paired bootstrap of run A against baseline run B, BLEU: its p-value (what
    ``sacrebleu REF -i B A -m bleu --paired-bs --paired-bs-n N`` prints) and its signature."""
    signatures, scores = PairedTest([(run_b, hyps_b), (run_a, hyps_a)], {"BLEU": metric}, references=None,
                                    test_type="bs", n_samples=replicates)()
    return float(scores["BLEU"][1].p_value), signatures["BLEU"].format()


def score_runs(refs: list[str], hyps: dict[str, list[str]]) -> tuple[dict, dict, dict]:
    """Each run's sentence statistics per metric and its corpus BLEU, chrF and brevity penalty, with
    the metrics (references cached) they came from."""
    metrics = {"BLEU": BLEU(references=[refs]), "chrF": CHRF(references=[refs])}
    statistics = {name: {run: sentence_statistics(metric, lines) for run, lines in hyps.items()}
                  for name, metric in metrics.items()}
    scores = {}
    for run in hyps:
        bleu = metrics["BLEU"]._compute_score_from_stats(statistics["BLEU"][run].sum(axis=0))
        chrf = metrics["chrF"]._compute_score_from_stats(statistics["chrF"][run].sum(axis=0))
        scores[run] = {"BLEU": bleu.score, "chrF": chrf.score, "BP": bleu.bp}
    return metrics, statistics, scores


def compare(refs: list[str], hyps: dict[str, list[str]], systems: dict[str, list[str]],
            pairs: list[tuple[str, str]], replicates: int, seed: int,
            groups: list[tuple[str, np.ndarray]] | None = None) -> dict:
    """Every figure of the comparison (see the module's docstring), deterministic given ``seed``;
    with ``groups`` (:func:`length_groups`), each pair on each group of sentences too
    (:func:`compare_by_length`, under ``"groups"``).

    One bootstrap serves every pair and metric: its generator draws the replicates' sentence
    counts first, then each system's run draws in the order of ``systems``, so a replicate is one
    resample of every system at once, and adding a pair changes no other pair's figures."""
    metrics, statistics, run_scores = score_runs(refs, hyps)
    rng = np.random.default_rng(seed)
    counts = resample_sentences(rng, len(refs), replicates)
    draws = {name: resample_runs(rng, len(runs), replicates) for name, runs in systems.items()}
    resampled = {name: {run: resampled_scores(metrics[name], statistics[name][run], counts) for run in hyps}
                 for name in METRICS}

    summary = {name: {"runs": {run: run_scores[run] for run in runs},
                      **{key: mean_and_sd([run_scores[run][key] for run in runs]) for key in (*METRICS, "BP")}}
               for name, runs in systems.items()}
    results = []
    for a, b in pairs:
        result = {"a": a, "b": b}
        for name in METRICS:
            observed = summary[a][name]["mean"] - summary[b][name]["mean"]
            differences = bootstrap_differences(
                np.stack([resampled[name][run] for run in systems[a]]), draws[a],
                np.stack([resampled[name][run] for run in systems[b]]), draws[b])
            result[name] = {"difference": observed, "interval": percentile_interval(differences),
                            "p": bootstrap_p_value(differences, observed)}
        result["run_pairs"] = []
        for run_a in systems[a]:
            for run_b in systems[b]:
                p, signature = paired_bootstrap(metrics["BLEU"], run_a, hyps[run_a], run_b, hyps[run_b], replicates)
                result["run_pairs"].append({"a_run": run_a, "b_run": run_b, "a_bleu": run_scores[run_a]["BLEU"],
                                            "b_bleu": run_scores[run_b]["BLEU"], "p": p})
        result["paired_bootstrap_signature"] = signature
        single = [name for name in (a, b) if len(systems[name]) == 1]
        if single:
            result["note"] = (f"{' and '.join(single)} {'has' if len(single) == 1 else 'have'} one run: no run-to-run "
                              "spread is resampled for it, so the interval and p reflect the test sentences "
                              "(and the other system's runs) only")
        results.append(result)
    for name in METRICS:
        for result, adjusted in zip(results, holm([result[name]["p"] for result in results])):
            result[name]["holm_p"] = adjusted
    by_group = {} if groups is None else {
        "groups": compare_by_length(statistics, metrics, systems, pairs, groups, replicates, seed)}
    return {"sentences": len(refs), "bootstrap": replicates, "seed": seed, **by_group,
            "sacrebleu_version": sacrebleu.__version__,
            "signatures": {name: metric.get_signature().format() for name, metric in metrics.items()},
            "p_value": "two-sided bootstrap p of no difference: min(1, 2 (1 + c) / (N + 1)), c = replicates "
                       "whose difference is 0 or of the sign opposite to the observed difference",
            "systems": summary, "pairs": results}


def parse_bounds(text: str) -> list[int]:
    """``--by-length 10,20,30`` as [10, 20, 30]: positive whole numbers of words, ascending."""
    try:
        bounds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--by-length {text!r} is not whole numbers separated by commas (e.g. 10,20,30)") from None
    if any(bound < 1 for bound in bounds) or any(b <= a for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"--by-length {text!r}: the upper bounds must be positive and strictly ascending "
                         "(e.g. 10,20,30)")
    return bounds


MIN_GROUP_SENTENCES = 50  # a --by-length group of fewer carries a note and a warning


def length_groups(lengths: list[int], bounds: list[int]) -> list[tuple[str, np.ndarray]]:
    """The test sentences grouped by length: (label, sentence indices) per group, the last group
    the sentences longer than the last bound."""
    lengths = np.asarray(lengths)
    groups, low = [], 0
    for bound in bounds:
        label = f"{low + 1}-{bound}" if low else f"<= {bound}"
        groups.append((label, np.flatnonzero((lengths > low) & (lengths <= bound))))
        low = bound
    groups.append((f"> {low}", np.flatnonzero(lengths > low)))
    return groups


def compare_by_length(statistics: dict, metrics: dict, systems: dict[str, list[str]], pairs: list[tuple[str, str]],
                      groups: list[tuple[str, np.ndarray]], replicates: int, seed: int) -> list[dict]:
    """Each pair's difference of system means on each group of sentences, with the 95% interval
    and p of the same bootstrap over runs and sentences, the sentences resampled within the group
    (uncorrected: the groups describe where a difference lies; they are not further tests of the
    rule). Its own generator (``seed`` + 1), so the comparison's other figures do not move.

    Each group also says how long each system's output is there: under ``"length"``, per system the
    mean and sd over its runs of hypothesis tokens / reference tokens as sacreBLEU's BLEU counts them
    (13a), the ratio whose shortfall below 1 the brevity penalty punishes, and each run's ratio. It is
    descriptive (no bootstrap): where a system's output falls short, not a test."""
    rng = np.random.default_rng(seed + 1)
    draws = {name: resample_runs(rng, len(runs), replicates) for name, runs in systems.items()}
    figures = []
    for label, indices in groups:
        group = {"sentences": label, "count": int(len(indices)), "pairs": []}
        figures.append(group)
        if not len(indices):
            continue
        if len(indices) < MIN_GROUP_SENTENCES:
            group["note"] = (f"{len(indices)} sentence{'s' if len(indices) > 1 else ''} (fewer than "
                             f"{MIN_GROUP_SENTENCES}): BLEU over so few moves by points with one sentence more or "
                             "less, and a bootstrap over them has few distinct resamples (one sentence: every "
                             "replicate is that sentence, a point interval); a description, not evidence")
        counts = resample_sentences(rng, len(indices), replicates)
        runs = sorted({run for name in systems for run in systems[name]})
        observed_scores = {name: {run: metrics[name]._compute_score_from_stats(
            statistics[name][run][indices].sum(axis=0)).score for run in runs} for name in METRICS}
        resampled = {name: {run: resampled_scores(metrics[name], statistics[name][run][indices], counts)
                            for run in runs} for name in METRICS}
        group["length"] = {}
        for name, system_runs in systems.items():
            ratios = {run: length_ratio(statistics["BLEU"][run][indices]) for run in system_runs}
            figure = mean_and_sd(list(ratios.values())) if None not in ratios.values() else {"mean": None, "sd": None}
            group["length"][name] = {**figure, "runs": ratios}
        for a, b in pairs:
            entry = {"a": a, "b": b}
            for name in METRICS:
                observed = float(np.mean([observed_scores[name][run] for run in systems[a]])
                                 - np.mean([observed_scores[name][run] for run in systems[b]]))
                differences = bootstrap_differences(
                    np.stack([resampled[name][run] for run in systems[a]]), draws[a],
                    np.stack([resampled[name][run] for run in systems[b]]), draws[b])
                entry[name] = {"difference": observed, "interval": percentile_interval(differences),
                               "p": bootstrap_p_value(differences, observed)}
            group["pairs"].append(entry)
    return figures


def length_ratio(bleu_statistics: np.ndarray) -> float | None:
    """Hypothesis tokens over reference tokens of these sentences' BLEU statistics, whose first two
    columns are sacreBLEU's hypothesis and (closest) reference lengths; None where the references
    have no token (empty lines), which no ratio describes."""
    hypothesis, reference = bleu_statistics[:, :2].sum(axis=0)
    return float(hypothesis / reference) if reference > 0 else None


def _length_cell(group: dict, name: str) -> str:
    """A system's output length in one group of the breakdown, as the Markdown table prints it."""
    if "length" not in group:
        return "no sentences"
    figure = group["length"][name]
    return "no reference tokens" if figure["mean"] is None else _mean_sd(figure, 3)


def _mean_sd(figure: dict, digits: int) -> str:
    """``mean ± sd``, or the mean alone for a system of one run."""
    text = f"{figure['mean']:.{digits}f}"
    return text if figure["sd"] is None else f"{text} ± {figure['sd']:.{digits}f}"


def markdown(report: dict) -> str:
    """The report as Markdown: systems, runs, one table of pairs per metric, and sacreBLEU's
    paired bootstrap of the runs of each pair."""
    lines = [f"{report['sentences']} test sentences; sacreBLEU {report['sacrebleu_version']}: "
             + "; ".join(f"{name} {signature}" for name, signature in report["signatures"].items()), "",
             "| system | runs | BLEU mean ± sd | chrF mean ± sd | BP mean |", "|---|--:|--:|--:|--:|"]
    for name, system in report["systems"].items():
        lines.append(f"| {name} | {len(system['runs'])} | {_mean_sd(system['BLEU'], 2)} | "
                     f"{_mean_sd(system['chrF'], 2)} | {system['BP']['mean']:.3f} |")
    lines += ["", "| run | system | BLEU | chrF | BP |", "|---|---|--:|--:|--:|"]
    for name, system in report["systems"].items():
        for run, scores in system["runs"].items():
            lines.append(f"| {run} | {name} | {scores['BLEU']:.2f} | {scores['chrF']:.2f} | {scores['BP']:.3f} |")
    for metric in METRICS:
        lines += ["", f"{metric}, A - B of the system means: 95% percentile interval and two-sided p over "
                  f"{report['bootstrap']} bootstrap replicates resampling both runs and test sentences "
                  f"(seed {report['seed']}); Holm over the {len(report['pairs'])} pairs.", "",
                  "| A - B | difference | 95% interval | p | Holm p |", "|---|--:|--:|--:|--:|"]
        for pair in report["pairs"]:
            figure = pair[metric]
            lines.append(f"| {pair['a']} - {pair['b']} | {figure['difference']:+.2f} | "
                         f"[{figure['interval'][0]:+.2f}, {figure['interval'][1]:+.2f}] | {figure['p']:.4f} | "
                         f"{figure['holm_p']:.4f} |")
    lines += ["", "sacreBLEU's paired bootstrap (BLEU, test sentences only) of every run of A against every run of B:",
              "", "| A - B | run pairs | p range | p (A run - B run) |", "|---|--:|--:|---|"]
    for pair in report["pairs"]:
        ps = [run_pair["p"] for run_pair in pair["run_pairs"]]
        listed = "; ".join(f"{run_pair['a_run']} - {run_pair['b_run']}: {run_pair['p']:.4f}"
                           for run_pair in pair["run_pairs"])
        lines.append(f"| {pair['a']} - {pair['b']} | {len(ps)} | {min(ps):.4f}-{max(ps):.4f} | {listed} |")
    notes = [f"{pair['a']} - {pair['b']}: {pair['note']}" for pair in report["pairs"] if "note" in pair]
    if notes:
        lines += ["", "Note:", *(f"- {note}" for note in notes)]
    if "by_length" in report:
        for metric in METRICS:
            lines += ["", f"{metric} by source length ({report['by_length']['source']}, words): A - B of the system "
                      "means on each group's sentences, 95% interval and p of the same bootstrap within the group "
                      "(uncorrected).", "",
                      "| A - B | " + " | ".join(f"{group['sentences']} ({group['count']})"
                                                for group in report["by_length"]["groups"]) + " |",
                      "|---|" + "--:|" * len(report["by_length"]["groups"])]
            for index, pair in enumerate(report["pairs"]):
                cells = []
                for group in report["by_length"]["groups"]:
                    if not group["pairs"]:
                        cells.append("no sentences")
                        continue
                    figure = group["pairs"][index][metric]
                    cells.append(f"{figure['difference']:+.2f} [{figure['interval'][0]:+.2f}, "
                                 f"{figure['interval'][1]:+.2f}], {figure['p']:.4f}")
                lines.append(f"| {pair['a']} - {pair['b']} | " + " | ".join(cells) + " |")
        groups = report["by_length"]["groups"]
        lines += ["", "Output length by source length: hypothesis tokens / reference tokens as BLEU counts them "
                  "(13a) on each group's sentences, mean ± sd over each system's runs.", "",
                  "| system | " + " | ".join(f"{group['sentences']} ({group['count']})" for group in groups) + " |",
                  "|---|" + "--:|" * len(groups)]
        for name in report["systems"]:
            lines.append(f"| {name} | " + " | ".join(_length_cell(group, name) for group in groups) + " |")
        notes = [f"sources of {group['sentences']} words: {group['note']}" for group in groups if "note" in group]
        if notes:
            lines += ["", "Note:", *(f"- {note}" for note in notes)]
    return "\n".join(lines)


PLOT_FORMATS = (".png", ".pdf", ".svg")


def _shown(label: str) -> str:
    """``label`` as matplotlib draws it literally: a pair of '$' would otherwise be maths."""
    return label.replace("$", r"\$")


def plot(report: dict, path: str, file_format: str) -> None:
    """Two panels, BLEU, one above the other: each system's runs as points with their mean (a bar),
    and each pair's difference of means with its 95% interval, 0 marked; written to ``path`` in
    ``file_format`` (png, pdf, svg). Names are shown as given (a '$' is not matplotlib's maths)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems, pairs = report["systems"], report["pairs"]
    names = list(systems)
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(12, 1.6 + 0.42 * (len(names) + len(pairs))),
        gridspec_kw={"height_ratios": [max(1, len(names)), max(1, len(pairs))]})
    for row, name in enumerate(names):
        runs = [scores["BLEU"] for scores in systems[name]["runs"].values()]
        top.scatter(runs, [row] * len(runs), color="tab:blue", alpha=0.7, s=22, zorder=3)
        mean = systems[name]["BLEU"]["mean"]
        top.plot([mean, mean], [row - 0.3, row + 0.3], color="black", linewidth=2, zorder=4)
    top.set_yticks(range(len(names)), [_shown(f"{name} ({len(systems[name]['runs'])})") for name in names])
    top.set_ylim(len(names) - 0.5, -0.5)
    top.set_title("BLEU: each run (points), the mean (bar); runs in brackets", fontsize=10, loc="right")
    top.grid(axis="x", alpha=0.3)
    for row, pair in enumerate(pairs):
        bleu = pair["BLEU"]
        low, high = bleu["interval"]
        colour = "tab:red" if (low > 0 or high < 0) and bleu["holm_p"] < 0.05 else "tab:gray"
        bottom.plot([low, high], [row, row], color=colour, linewidth=2)
        bottom.scatter([bleu["difference"]], [row], color=colour, s=30, zorder=3)
    bottom.axvline(0, color="black", linewidth=0.8)
    bottom.set_yticks(range(len(pairs)), [_shown(f"{pair['a']} - {pair['b']}") for pair in pairs])
    bottom.set_ylim(len(pairs) - 0.5, -0.5)
    bottom.set_title(f"BLEU: A - B, 95% interval over runs and sentences (red: shown, Holm over {len(pairs)})",
                     fontsize=10, loc="right")
    bottom.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120, format=file_format)
    finally:
        plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    """Read the outputs, compare, write the JSON, then print the tables; a refusal is one line."""
    argv = sys.argv[1:] if argv is None else argv
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.bootstrap < MIN_REPLICATES:
        parser.error(f"--bootstrap {args.bootstrap}: a 95% percentile interval needs at least {MIN_REPLICATES} "
                     "replicates (1000 is the default)")
    if args.by_length is None and args.source is not None:
        parser.error("--source is read for --by-length only: give both, or neither")
    for flag, value in (("--json", args.json), ("--plot", args.plot), ("--source", args.source)):
        if value is not None and not value.strip():
            parser.error(f"{flag}: give a file name (an empty one would be the default's)")
    if args.by_length is not None and args.source is None:
        parser.error("--by-length needs --source, the test set's source side (the lengths are its words)")
    if args.plot is not None:
        if not args.plot.lower().endswith(PLOT_FORMATS):
            parser.error(f"--plot {args.plot}: name a {', '.join(PLOT_FORMATS)} file")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--plot needs matplotlib: pip install 'tree_fairseq[analysis]' (or matplotlib)")
    try:
        bounds = parse_bounds(args.by_length) if args.by_length is not None else None
        systems = [parse_system(text) for text in args.system]
        pairs = [parse_pair(text) for text in args.pair]
        check_design(systems, pairs)
        systems = dict(systems)
        runs = [run for runs in systems.values() for run in runs]
        path = args.json or os.path.join(args.results, "comparison.json")
        check_outputs_paths(args, path, runs)
        refs, hyps = load_outputs(args.results, args.lang, runs)
        check_memory(args.bootstrap, len(refs))
        groups = None
        if bounds is not None:
            lines = source_lines(args.source, len(refs))
            check_detokenised(args.source, lines, "give the word-tokenised source side, before BPE (its words are "
                              "counted)")
            check_not_the_target_side(args.source, lines, {f"ref.{args.lang}": refs,
                                                           **{f"{run}.hyp.{args.lang}": hyps[run] for run in hyps}})
            words = [len(line.split()) for line in lines]
            check_in_test_order(args.source, words, refs, f"ref.{args.lang}")
            groups = length_groups(words, bounds)
        report = compare(refs, hyps, systems, pairs, args.bootstrap, args.seed, groups)
        if bounds is not None:
            report["by_length"] = {"source": args.source, "bounds": bounds, "groups": report.pop("groups")}
        report = {"command": shlex.join(["tree-fairseq-compare", *argv]),
                  "reference": os.path.join(args.results, f"ref.{args.lang}"), **report}
        # The picture is drawn first and takes its name after the JSON: both are written, or neither.
        with replacing(args.plot) if args.plot is not None else contextlib.nullcontext() as picture:
            if picture is not None:
                plot(report, picture, args.plot.rsplit(".", 1)[1].lower())
            write_json(path, report)
    except (OSError, ValueError) as error:
        sys.exit(f"tree-fairseq-compare: error: {error}")
    for pair in report["pairs"]:
        if "note" in pair:
            print(f"tree-fairseq-compare: warning: {pair['a']} - {pair['b']}: {pair['note']}", file=sys.stderr)
    for group in report.get("by_length", {}).get("groups", []):
        if "note" in group:
            print(f"tree-fairseq-compare: warning: sources of {group['sentences']} words: {group['note']}",
                  file=sys.stderr)
    print(markdown(report))


MIN_REPLICATES = 100
MAX_BOOTSTRAP_BYTES = 4 * 2**30  # the (replicates, sentences) counts of one resample


def check_memory(replicates: int, sentences: int) -> None:
    """Refuse a bootstrap whose resampled sentence counts alone would not fit in memory."""
    needed = replicates * sentences * 8
    if needed > MAX_BOOTSTRAP_BYTES:
        raise ValueError(f"--bootstrap {replicates} over {sentences} sentences needs {needed / 2**30:.0f} GiB for the "
                         f"resampled counts alone (at most {MAX_BOOTSTRAP_BYTES // 2**30} GiB): give fewer replicates")


def check_outputs_paths(args, json_path: str, runs: list[str]) -> None:
    """Refuse to write over the published comparison or its picture unasked, over an input, or twice to
    one file. An existing picture is replaced only with an existing JSON that ``--json`` names: the
    comparison it was drawn with, replaced as asked (its name given)."""
    if args.json is None and os.path.exists(json_path):
        raise ValueError(f"{json_path} exists (a published comparison?): name the output with --json FILE "
                         "(naming that file replaces it)")
    inputs = [os.path.join(args.results, f"ref.{args.lang}"),
              *(os.path.join(args.results, f"{run}.hyp.{args.lang}") for run in runs),
              *([args.source] if args.source else [])]
    outputs = [("--json", json_path)] + ([("--plot", args.plot)] if args.plot else [])
    for flag, output in outputs:
        check_output(flag, output, [(given, given) for given in inputs])
    if args.plot and same_file(args.plot, json_path):
        raise ValueError(f"--plot and --json name one file, {json_path}: name two")
    if args.plot and os.path.lexists(args.plot) and not (args.json is not None and os.path.exists(json_path)):
        raise ValueError(f"--plot {args.plot} exists (a published picture?): name a new file, or replace it with the "
                         "comparison it goes with (--json naming that existing JSON, replaced too)")
    if args.source:
        reference = os.path.join(args.results, f"ref.{args.lang}")
        if same_file(reference, args.source):
            raise ValueError(f"--source {args.source} is the reference: give the test set's source side")


def source_lines(path: str, sentences: int, counted: str = "the reference") -> list[str]:
    """The lines of the test set's source side, refused unless there is one per test sentence (of
    ``counted``, the file they are counted in) and every one has words."""
    if not os.path.isfile(path):
        raise ValueError(f"--source {path}: no such file")
    lines = read_lines(path)
    if len(lines) != sentences:
        raise ValueError(f"--source {path} has {len(lines)} lines but {counted} has {sentences}: give the source "
                         "side of the same test set, one line per sentence")
    empty = [number for number, line in enumerate(lines, 1) if not line.split()]
    if empty:
        raise ValueError(f"--source {path} line {empty[0]} is empty ({len(empty)} empty line(s)): every test sentence "
                         "has words")
    return lines


def check_not_the_target_side(path: str, lines: list[str], targets: dict[str, list[str]]) -> None:
    """Refuses a --source most of whose lines are the text of one of ``targets`` (the reference, the
    runs' outputs; by their file names), tokenised or not (spacing, case and HTML escapes such as
    Moses' ``&apos;`` aside): the target side, whose words would group the sentences by a
    translation's length. A few lines of a source side can be the reference's ("okay ."); most
    cannot."""

    def text(line: str) -> str:
        return "".join(html.unescape(line).split()).lower()

    given = [text(line) for line in lines]
    for name, target in targets.items():
        same = sum(line == text(other) for line, other in zip(given, target))
        if same > len(lines) / 2:
            raise ValueError(f"--source {path}: {same} of {len(lines)} lines are the text of {name} (spacing, case "
                             "and HTML escapes aside): it is the target side; give the test set's source side")


ORDER_MIN_SENTENCES = 100  # below this a chance correlation is too wide to tell an order from a shuffle
ORDER_Z = 3.0  # a shuffled side's correlation is about normal with sd 1 / sqrt(n): 3 sd are passed 0.13% of the time


def check_in_test_order(path: str, words: list[int], refs: list[str], name: str) -> None:
    """Refuses a --source whose lines' word counts ``words`` do not follow the reference's: the same
    test set in another order (fairseq-generate's ``S-`` lines, written in batch order; a sorted or
    shuffled copy) passes the line count but groups every sentence by another sentence's length. The
    Pearson correlation of source and reference words per line is about 0.97 on IWSLT'14 en-de's
    test set and about 0 (sd 1 / sqrt(n)) for the same lines shuffled; it is refused below
    ``ORDER_Z`` / sqrt(n), from ``ORDER_MIN_SENTENCES`` sentences on (fewer cannot tell); lines whose
    reference is empty are left out."""
    counted = [(count, len(ref.split())) for count, ref in zip(words, refs) if ref.split()]
    if len(counted) < ORDER_MIN_SENTENCES:
        return
    source, target = np.array(counted, dtype=float).T
    if source.std() == 0 or target.std() == 0:
        return  # every line one length: no order to see
    correlation = float(np.corrcoef(source, target)[0, 1])
    floor = ORDER_Z / np.sqrt(len(counted))
    if correlation < floor:
        raise ValueError(f"--source {path}: its lines' word counts do not follow {name}'s (correlation "
                         f"{correlation:.3f}, below {floor:.3f} over {len(counted)} lines; a translation's are "
                         "near 1): is it in the test set's order? give the source side as the test set has it, "
                         "not fairseq-generate's S- lines (batch order)")


if __name__ == "__main__":
    main()
