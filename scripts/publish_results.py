#!/usr/bin/env python
"""Publish test-set outputs so that anyone can recompute every score and significance figure
without training: from fairseq-generate's output of each system (scripts/generate.sh writes
OUT/generate-test.txt), writes to --out

- SYSTEM.hyp.LANG: the system's hypotheses, detokenised (sacremoses, as tree-fairseq-score does),
  one per test sentence in sentence-id order;
- ref.LANG: the reference they are scored against: the test set itself, never fairseq-generate's
  T- lines (which print a piece missing from the dictionary as <unk>). From the data-bin's kept
  text as tree-fairseq-score takes it (the raw reference where the data-bin holds one, else the
  Moses detokenisation of the tokenised text), or from --ref (tokenised, detokenised here) or
  --ref-detok (raw);
- scores.json: per system its sacreBLEU BLEU (two decimals, `-w 2`), brevity penalty and chrF with
  their signatures, the paired bootstrap (BLEU) of every system against the baseline (the first
  system, or --baseline) and of each --compare pair, and what the reference is;
- score.sh: the sacrebleu commands that give those figures from the files above.

Every system must have translated every sentence of the split (--data-bin, --subset; checked as
tree-fairseq-score checks). Name systems after the model and its trees (letters, digits, '.',
'_', '-'):

    python scripts/publish_results.py --out docs/results/iwslt14-lowres-en-de --lang de \\
        --data-bin WORK/spacy/data-bin/en-de --compare tree_transformer.spacy:tree_transformer.balanced \\
        transformer=OUT/transformer/generate-test.txt \\
        tree_transformer.spacy=OUT/tree_transformer.spacy/generate-test.txt \\
        tree_transformer.balanced=OUT/tree_transformer.balanced/generate-test.txt

A system given by its name alone is one already published in --out (its SYSTEM.hyp.LANG): the
folder is scored again, e.g. against a corrected reference (--ref or --ref-detok, needed when no
system is given with its fairseq-generate output).

Publishing into a folder that publishes systems already drops none and replaces none unasked: every
system of its scores.json must be named again (by its name alone, to score its published output
again, or with a new output), else the run is refused naming those it would drop from scores.json
and score.sh; and a system given with a fairseq-generate output whose SYSTEM.hyp.LANG the folder
holds already is replaced only with --replace SYSTEM (the new output, its figures and tests). The
figures of a system given by its name alone are recomputed from its published output: the same,
unless the reference changed. When such systems are scored beside outputs given anew, the
reference of those outputs must be the text of the test set --out publishes (its ref.LANG, checked
as a raw reference is, below): the reference of another data-bin or split is refused, not put in
its place.

One run at a time publishes into a folder: a second is refused while the first holds OUT.lock
(beside the folder). Every file is written and scored in OUT/.publishing first and moved into place
only once every figure is in, so a run stopped part-way (an error, Ctrl-C, SIGTERM) leaves the
folder as it was, never a new output beside old figures; one killed outright leaves .publishing,
which the next run removes.

--lang must be the data-bin's target language (its split files name the pair): the files' suffix
and the detokenizer's rules are that language's. A raw reference (--ref-detok) is checked as the
data-bin's is: every output must be of the split and cover it, and each of its lines must spell the
words (letters and digits, case aside) of the split's tokenised reference, the data-bin's kept
text or --ref, all but a tenth of them (a file of another test set matches hardly any); scoring the
published outputs again, it is checked against the reference --out publishes.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.files import read_lines, write_json, write_lines
from tree_fairseq.cli.locking import output_lock
from tree_fairseq.cli.score import (
    Reference, check_coverage, check_identified, check_raw_reference, check_split, coverage, detokenize, language_pair,
    read_generate_ids, read_generate_output, reference_for, split_sources, stored_reference,
)
from tree_fairseq.cli.termination import removed_on_sigterm
from tree_fairseq.trees.subwords import subword_marks

BOOTSTRAP_RESAMPLES = 1000
TWO_DECIMALS = ["-w", "2"]  # as the docs quote scores
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_BREVITY_PENALTY = re.compile(r"BP = ([0-9.]+)")
STAGE = ".publishing"  # in --out: the new files, scored before any replaces a published one


def main(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("systems", nargs="+", metavar="NAME[=GENERATE_OUTPUT]",
                        help="a system's name and its fairseq-generate output (run with --remove-bpe); a name "
                        "alone: the system's outputs already published in --out")
    parser.add_argument("--out", required=True, help="the folder to write")
    parser.add_argument("--lang", required=True, help="target language (file suffix and detokenizer)")
    parser.add_argument("--data-bin", help="the data-bin that was translated (needed with fairseq-generate outputs)")
    parser.add_argument("--subset", default="test", help="its split (default: test)")
    parser.add_argument("--ref", metavar="FILE",
                        help="the test set's tokenised target text (no subword marks), one line per sentence, "
                        "instead of the data-bin's kept text")
    parser.add_argument("--ref-detok", metavar="FILE", help="the test set's raw (untokenised) target text instead")
    parser.add_argument("--baseline", help="the system every other is tested against (default: the first)")
    parser.add_argument("--compare", action="append", default=[], metavar="A:B",
                        help="a further paired bootstrap test: system A against baseline B (repeatable; a pair "
                        "tested already, in either order, or A:A is refused)")
    parser.add_argument("--replace", action="append", default=[], metavar="NAME",
                        help="replace the output (and figures) that --out publishes for system NAME with the "
                        "fairseq-generate output given for it (repeatable); without it, a system already published "
                        "there is refused")
    args = parser.parse_args(argv)
    try:
        publish(args)
    except (OSError, ValueError) as error:
        sys.exit(f"publish_results.py: error: {error}")


def publish(args) -> None:
    systems = _systems(args.systems)
    if args.ref and args.ref_detok and not any(systems.values()):
        raise ValueError(f"--ref {args.ref} and --ref-detok {args.ref_detok}: with every system one already published, "
                         "--ref-detok is the reference and --ref would go unread (it checks --ref-detok only against "
                         "fairseq-generate outputs); give one of them")
    pairs = _pairs(args, systems)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)  # where the lock goes, beside --out
    with output_lock(args.out, "--out"):
        _publish(args, systems, pairs)


def _pairs(args, systems: dict) -> list[tuple[str, str]]:
    """The paired tests, (baseline, system): every system against the baseline, then each --compare
    pair; refused in one line naming --compare, a system against itself and a test made already (in
    either order: the paired bootstrap of B against A is that of A against B)."""
    baseline = args.baseline or next(iter(systems))
    if baseline not in systems:
        raise ValueError(f"--baseline {baseline} is not among the systems {', '.join(systems)}")
    pairs = [(baseline, name) for name in systems if name != baseline]
    defaults = len(pairs)
    for pair in args.compare:
        system, _, other = pair.partition(":")
        if system not in systems or other not in systems:
            raise ValueError(f"--compare {pair}: both must be among the systems {', '.join(systems)}")
        if system == other:
            raise ValueError(f"--compare {pair}: a system against itself; give two systems")
        made = next((made for made in pairs if set(made) == {system, other}), None)
        if made is not None:
            why = "the baseline's test" if pairs.index(made) < defaults else "an earlier --compare"
            raise ValueError(f"--compare {pair}: {made[1]} is tested against {made[0]} already ({why}; the test in "
                             "either order is the same): leave it out")
        pairs.append((other, system))
    return pairs


def _publish(args, systems: dict, pairs: list) -> None:
    _check_published(args, systems)
    if args.data_bin:
        src, tgt = language_pair(args.data_bin)
        if args.lang != tgt:
            raise ValueError(f"--lang {args.lang}, but {args.data_bin} translates {src} into {tgt} (its {src}-{tgt} "
                             f"split files): give --lang {tgt}")
    reference, described = _reference(args, systems)
    outputs = {name: _hypotheses(args, name, path, len(reference)) for name, path in systems.items()}
    os.makedirs(args.out, exist_ok=True)
    stage = os.path.join(args.out, STAGE)
    if os.path.lexists(stage):  # left by a run killed outright: only a run holding the lock writes there
        print(f"publish_results.py: removing {stage}, left by an earlier run that was stopped", file=sys.stderr)
        shutil.rmtree(stage)
    os.mkdir(stage)
    try:
        with removed_on_sigterm(stage):
            scores = _score(args, stage, outputs, reference, described, pairs)
            for name in sorted(os.listdir(stage)):  # all scored: into place together
                os.replace(os.path.join(stage, name), os.path.join(args.out, name))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    print(json.dumps(scores, indent=1))


def _score(args, stage: str, outputs: dict, reference: list[str], described: str, pairs: list) -> dict:
    """Write the outputs, the reference, scores.json and score.sh to ``stage`` and score them there."""
    for name, hyps in outputs.items():
        write_lines(os.path.join(stage, f"{name}.hyp.{args.lang}"), hyps)
    write_lines(os.path.join(stage, f"ref.{args.lang}"), reference)
    commands, scores = [], {"systems": {}, "paired_bootstrap": []}
    for name in outputs:
        command = ["sacrebleu", f"ref.{args.lang}", "-i", f"{name}.hyp.{args.lang}", "-m", "bleu", "chrf",
                   *TWO_DECIMALS, "--format", "json"]
        commands.append(command)
        bleu, chrf = json.loads(_sacrebleu(command, stage))
        scores["systems"][name] = {
            "score": bleu["score"], "signature": bleu["signature"],
            "brevity_penalty": float(_BREVITY_PENALTY.search(bleu["verbose_score"]).group(1)),
            "chrf": chrf["score"], "chrf_signature": chrf["signature"]}
    for base, system in pairs:
        command = ["sacrebleu", f"ref.{args.lang}", "-i", f"{base}.hyp.{args.lang}", f"{system}.hyp.{args.lang}",
                   "-m", "bleu", *TWO_DECIMALS, "--paired-bs", "--paired-bs-n", str(BOOTSTRAP_RESAMPLES),
                   "--format", "json"]
        commands.append(command)
        result = json.loads(_sacrebleu(command, stage))
        scores["paired_bootstrap"].append({
            "baseline": base, "system": system, "p_value": result[1]["BLEU"]["p_value"],
            "baseline_mean": result[0]["BLEU"]["mean"], "baseline_ci": result[0]["BLEU"]["ci"],
            "system_mean": result[1]["BLEU"]["mean"], "system_ci": result[1]["BLEU"]["ci"]})
    scores["sentences"] = len(reference)
    scores["reference"] = described
    write_json(os.path.join(stage, "scores.json"), scores)
    write_lines(os.path.join(stage, "score.sh"), [
        "#!/usr/bin/env bash",
        "# The figures of scores.json from the files beside this script (run it in this folder).",
        "set -euo pipefail", 'cd "$(dirname "$0")"'] + [shlex.join(command) for command in commands])
    return scores


def _check_published(args, systems: dict) -> None:
    """Refuse a run that would drop a system --out publishes (one of its scores.json that this run
    does not name), or replace a published system's output without --replace (a bad --replace too)."""
    given = ", ".join(systems)
    for i, name in enumerate(args.replace):
        if name in args.replace[:i]:
            raise ValueError(f"--replace {name} is given twice")
        if name not in systems:
            raise ValueError(f"--replace {name}: no system {name} among those given ({given})")
        if systems[name] is None:
            raise ValueError(f"--replace {name}: {name} is given by its name alone (its published output is scored "
                             f"again), not with a fairseq-generate output to replace it")
        if not os.path.isfile(_hypothesis_path(args, name)):
            raise ValueError(f"--replace {name}: {args.out} publishes no {name} to replace")
    scores = os.path.join(args.out, "scores.json")
    if os.path.isfile(scores):
        try:
            with open(scores, encoding="utf-8") as f:
                published = list(json.load(f)["systems"])
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{scores} is not what publish_results.py writes ({error!r}): move it away, or publish "
                             "into another --out") from None
        dropped = [name for name in published if name not in systems]
        if dropped:
            them = "them" if len(dropped) > 1 else "it"
            raise ValueError(f"{args.out} already publishes {', '.join(dropped)}, which this run does not name: "
                             f"scores.json and score.sh would drop {them}. Name {them} too (a system by its name "
                             "alone: its published output scored again), or publish into another --out")
    for name, path in systems.items():
        published = _hypothesis_path(args, name)
        if path is not None and os.path.isfile(published) and name not in args.replace:
            raise ValueError(f"system {name} is already published in {args.out} ({published}): give --replace {name} "
                             f"to replace its output and figures with those of {path}")


def _reference(args, systems: dict) -> tuple[list[str], str]:
    """The detokenised reference every system is scored against, and where it comes from."""
    if not any(systems.values()):
        if args.ref_detok:
            reference, described = read_lines(args.ref_detok), f"{args.ref_detok} (raw)"
        elif args.ref:
            reference = detokenize(read_lines(args.ref), args.lang)
            described = f"{args.ref}, detokenised (sacremoses -l {args.lang})"
        else:
            raise ValueError("every system is one already published: give the reference to score them against "
                             "(--ref, tokenised, or --ref-detok, raw)")
        published = os.path.join(args.out, f"ref.{args.lang}")
        if os.path.isfile(published):  # the published outputs translate the test set it holds
            check_raw_reference(f"--ref-detok {args.ref_detok}" if args.ref_detok else f"--ref {args.ref}",
                                reference, read_lines(published), published)
        return reference, described
    if not args.data_bin:
        raise ValueError("--data-bin: the data-bin that was translated, to check that every output is of its split")
    sources = split_sources(args.data_bin, args.subset)
    what = f"{args.data_bin} {args.subset}"
    given = Reference(read_lines(args.ref), None, args.ref) if args.ref else None  # read once: it may be a pipe
    reference, first = None, None
    for name, path in systems.items():
        if path is None:
            continue
        ids = read_generate_ids(path)
        check_coverage(coverage(ids, len(sources)), allow_subset=False, what=what, path=path, subset_option=None)
        check_split(path, ids, sources, what)
        _, t_lines = read_generate_output(path)
        if args.ref_detok and not args.ref and stored_reference(args.data_bin, args.subset) is None:
            # the T- lines only check the raw reference (those holding <unk> left out)
            found = Reference(t_lines, None, f"the T- lines of {path}")
        else:
            found = reference_for(path, ids, t_lines, args.data_bin, args.subset, given)
        check_identified(path, found, what)
        if reference is None:
            reference, first = found, path
        elif found.tokenised != reference.tokenised:
            raise ValueError(f"{path}: its reference is not that of {first}: outputs of different test sets")
    if args.ref_detok:
        raw = read_lines(args.ref_detok)
        check_raw_reference(f"--ref-detok {args.ref_detok}", raw, reference.tokenised, reference.source)
        found = raw, f"{args.ref_detok} (raw)"
    elif reference.raw is not None:
        found = reference.raw, f"{reference.source} (raw)"
    else:
        found = (detokenize(reference.tokenised, args.lang),
                 f"{reference.source}, detokenised (sacremoses -l {args.lang})")
    _check_published_reference(args, systems, *found)
    return found


def _check_published_reference(args, systems: dict, reference: list[str], described: str) -> None:
    """Refuse to score the systems given by their names alone against a reference (``described``)
    that is not the text of the test set their published outputs translate, --out's ref.LANG (as a
    raw reference is checked, :func:`check_raw_reference`): the reference of the outputs given
    beside them, from another data-bin or split, replaced it and scored them against other sentences."""
    alone = [name for name, path in systems.items() if path is None]
    published = os.path.join(args.out, f"ref.{args.lang}")
    if alone and os.path.isfile(published):
        given = [name for name, path in systems.items() if path is not None]
        check_raw_reference(f"the reference of {', '.join(given)} ({described})", reference, read_lines(published),
                            f"{published} (the test set of the published {', '.join(alone)})")


def _hypotheses(args, name: str, path: str | None, size: int) -> list[str]:
    """A system's detokenised hypotheses, from its fairseq-generate output or, with no path, as
    published in --out."""
    published = path is None
    if published:
        path = _hypothesis_path(args, name)
        if not os.path.isfile(path):
            raise ValueError(f"system {name}: no {path} to score again; give {name}=GENERATE_OUTPUT")
        hyps = read_lines(path)
    else:
        hyps, _ = read_generate_output(path)
    if any(subword_marks(line) for line in hyps):
        raise ValueError(f"{path}: the text still holds subword marks ('@@ ' or \u2581): translate with --remove-bpe "
                         "(scripts/generate.sh does)")
    if len(hyps) != size:
        raise ValueError(f"{path} has {len(hyps)} hypotheses, the reference {size} lines")
    return hyps if published else detokenize(hyps, args.lang)


def _systems(items: list[str]) -> dict:
    """NAME -> fairseq-generate output (None: the outputs already published), in the order given."""
    systems = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not _NAME.fullmatch(name):
            raise ValueError(f"{item!r}: a system name is letters, digits, '.', '_' and '-' (it names files in --out)")
        if sep and not os.path.isfile(path):
            raise ValueError(f"{path}: no such file")
        if name in systems:
            raise ValueError(f"system {name} is given twice")
        systems[name] = path if sep else None
    return systems


def _hypothesis_path(args, name: str) -> str:
    return os.path.join(args.out, f"{name}.hyp.{args.lang}")


def _sacrebleu(command: list[str], folder: str) -> str:
    executable = os.path.join(os.path.dirname(sys.executable), "sacrebleu")
    result = subprocess.run([executable if os.path.exists(executable) else "sacrebleu", *command[1:]], cwd=folder,
                            capture_output=True, text=True)
    if result.returncode:
        raise ValueError(f"{shlex.join(command)} (in {folder}) failed: {result.stderr.strip()[-500:]}")
    return result.stdout


if __name__ == "__main__":
    main()
