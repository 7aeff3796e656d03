#!/usr/bin/env python
"""Publish test-set outputs so that anyone can recompute every BLEU and significance figure
without training: from fairseq-generate's output of each system (scripts/generate.sh writes
OUT/generate-test.txt), writes to --out

- SYSTEM.hyp.LANG: the system's hypotheses, detokenised (sacremoses, as tree-fairseq-score does),
  one per test sentence in sentence-id order;
- ref.LANG: the reference they are scored against, detokenised the same way (every system's T-
  lines must be the same);
- scores.json: per system its sacreBLEU score (two decimals, `-w 2`) and signature, and the paired bootstrap of every
  system against the baseline (the first system, or --baseline) and of each --compare pair;
- score.sh: the sacrebleu commands that give those figures from the files above.

Every system must have translated every sentence of the split (--data-bin, --subset; checked as
tree-fairseq-score checks). Name systems after the model and its trees:

    python scripts/publish_results.py --out docs/results/iwslt14-lowres-en-de --lang de \\
        --data-bin WORK/spacy/data-bin/en-de --compare tree_transformer.spacy:tree_transformer.balanced \\
        transformer=OUT/transformer/generate-test.txt \\
        tree_transformer.spacy=OUT/tree_transformer.spacy/generate-test.txt \\
        tree_transformer.balanced=OUT/tree_transformer.balanced/generate-test.txt
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

from tree_fairseq.cli.score import (
    check_coverage, check_split, coverage, detokenize, read_generate_ids, read_generate_output, split_sources,
)

BOOTSTRAP_RESAMPLES = 1000
BLEU = ["-m", "bleu", "-w", "2"]  # two decimals, as the docs quote scores


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("systems", nargs="+", metavar="NAME=GENERATE_OUTPUT",
                        help="a system's name and its fairseq-generate output (run with --remove-bpe)")
    parser.add_argument("--out", required=True, help="the folder to write")
    parser.add_argument("--lang", required=True, help="target language (file suffix and detokenizer)")
    parser.add_argument("--data-bin", required=True, help="the data-bin that was translated")
    parser.add_argument("--subset", default="test", help="its split (default: test)")
    parser.add_argument("--baseline", help="the system every other is tested against (default: the first)")
    parser.add_argument("--compare", action="append", default=[], metavar="A:B",
                        help="a further paired bootstrap test: system A against baseline B (repeatable)")
    args = parser.parse_args(argv)
    try:
        publish(args)
    except (OSError, ValueError, subprocess.CalledProcessError) as error:
        sys.exit(f"publish_results.py: error: {error}")


def publish(args) -> None:
    systems = dict(_name_and_path(item) for item in args.systems)
    baseline = args.baseline or next(iter(systems))
    pairs = [(baseline, name) for name in systems if name != baseline]
    for pair in args.compare:
        system, _, other = pair.partition(":")
        if system not in systems or other not in systems:
            raise ValueError(f"--compare {pair}: both must be among the systems {', '.join(systems)}")
        if (other, system) not in pairs:
            pairs.append((other, system))
    sources = split_sources(args.data_bin, args.subset)
    os.makedirs(args.out, exist_ok=True)
    reference = None
    for name, path in systems.items():
        ids = read_generate_ids(path)
        check_split(path, ids, sources, f"{args.data_bin} {args.subset}")
        check_coverage(coverage(ids, len(sources)), allow_subset=False, what=f"{args.data_bin} {args.subset}")
        hyps, refs = read_generate_output(path)
        if reference is None:
            reference = refs
        elif refs != reference:
            raise ValueError(f"{path}: its references (T- lines) are not those of {systems[baseline]}")
        _write_lines(os.path.join(args.out, f"{name}.hyp.{args.lang}"), detokenize(hyps, args.lang))
    _write_lines(os.path.join(args.out, f"ref.{args.lang}"), detokenize(reference, args.lang))

    commands, scores = [], {"systems": {}, "paired_bootstrap": []}
    for name in systems:
        command = ["sacrebleu", f"ref.{args.lang}", "-i", f"{name}.hyp.{args.lang}", *BLEU, "--format", "json"]
        commands.append(command)
        result = json.loads(_sacrebleu(command, args.out))
        scores["systems"][name] = {"score": result["score"], "signature": result["signature"]}
    for base, system in pairs:
        command = ["sacrebleu", f"ref.{args.lang}", "-i", f"{base}.hyp.{args.lang}", f"{system}.hyp.{args.lang}",
                   *BLEU, "--paired-bs", "--paired-bs-n", str(BOOTSTRAP_RESAMPLES), "--format", "json"]
        commands.append(command)
        result = json.loads(_sacrebleu(command, args.out))
        scores["paired_bootstrap"].append({
            "baseline": base, "system": system, "p_value": result[1]["BLEU"]["p_value"],
            "baseline_mean": result[0]["BLEU"]["mean"], "baseline_ci": result[0]["BLEU"]["ci"],
            "system_mean": result[1]["BLEU"]["mean"], "system_ci": result[1]["BLEU"]["ci"]})
    scores["sentences"] = len(reference)
    with open(os.path.join(args.out, "scores.json"), "w", encoding="utf-8") as f:
        json.dump(scores, f, indent=1)
        f.write("\n")
    _write_lines(os.path.join(args.out, "score.sh"), [
        "#!/usr/bin/env bash",
        "# The figures of scores.json from the files beside this script (run it in this folder).",
        "set -euo pipefail", 'cd "$(dirname "$0")"'] + [shlex.join(command) for command in commands])
    print(json.dumps(scores, indent=1))


def _sacrebleu(command: list[str], folder: str) -> str:
    executable = os.path.join(os.path.dirname(sys.executable), "sacrebleu")
    return subprocess.run([executable if os.path.exists(executable) else "sacrebleu", *command[1:]], cwd=folder,
                          check=True, capture_output=True, text=True).stdout


def _name_and_path(item: str) -> tuple[str, str]:
    name, sep, path = item.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"{item!r} is not NAME=GENERATE_OUTPUT")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file")
    return name, path


def _write_lines(path: str, lines: list[str]) -> None:
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
