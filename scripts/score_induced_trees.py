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
Tables 1 and 2, with the baselines over the same sentences. The runs of one setting must agree on
every setting they record but ``seed`` and ``--max-epochs`` (the cap, which a run not yet finished may
be given higher, bounds nothing of a run stopped by its patience), or are refused, naming them; a row
with a run that did not stop by its patience (``stopped`` in its scores.json: at its cap, or fairseq
stopped) is marked ``*`` and the run named below the table (``unconverged`` in the JSON)::

    python scripts/score_induced_trees.py table runs/ptb-seed1 runs/ptb-seed2 runs/ptb+iwslt-seed1

``publish``: the results of finished runs, in a form that can go into a repository: for each
workdir, ``--out``/NAME (NAME: the workdir's name) gets its ``scores.json``, ``curve.png`` and
``links.png`` and ``trees/{m0,m1,...,left-branching,right-branching,random}.txt.gz``, the trees
unlexicalised (every word written ``_``: the words are the treebank's, which stays where it is) and
gzipped. Each file is scored again against ``--gold`` before anything is written and must give the
run's own figures. A NAME already in ``--out`` is refused; the folder is made aside and renamed into
place at the end, so a run stopped half-way (Ctrl-C, SIGTERM) leaves nothing and the second of two
runs at once is refused::

    python scripts/score_induced_trees.py publish --gold ptb-sample/wsj_0001-0199.mrg.txt \\
        --out docs/results/grammar-induction runs/ptb-small-seed1 runs/ptb-small-seed2

``score`` and ``table`` read published folders as they read workdirs (``score`` reads ``.gz`` files
and unlexicalised trees, which must have the gold tree's number of words).

``--json`` prints the figures (fractions, not percentages) as JSON instead of a table.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from tree_fairseq.analysis import induction
from tree_fairseq.cli import ArgumentParser, argtypes
from tree_fairseq.cli.files import current_umask
from tree_fairseq.cli.locking import make_folder
from tree_fairseq.cli.termination import removed_on_sigterm
from tree_fairseq.trees.evaluation import short_sentences


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="F1 of induced-tree files against the gold trees")
    score.add_argument("--gold", type=Path, required=True, help="gold trees, one bracketed tree a line")
    score.add_argument("--word-filter", choices=sorted(induction.WORD_FILTERS), default="word-tags",
                       help="which words of the gold trees are kept (default: %(default)s, as induce_trees.py)")
    score.add_argument("--short", type=argtypes.positive_int, default=10,
                       help="also score sentences of <= N words, N >= 1 (default: %(default)s)")
    score.add_argument("--json", action="store_true", help="print JSON")
    score.add_argument("trees", type=Path, nargs="+", help="induced-tree files")
    table = commands.add_parser("table", help="median and max over seeds of finished runs")
    table.add_argument("--m", type=int, default=3, help="Algorithm 1's m (default: %(default)s, the paper's)")
    table.add_argument("--json", action="store_true", help="print JSON")
    table.add_argument("workdirs", type=Path, nargs="+",
                       help="workdirs of finished runs (results/scores.json) or their published folders (scores.json)")
    publish = commands.add_parser("publish",
                                  help="a finished run's scores, pictures and unlexicalised trees, to publish")
    publish.add_argument("--gold", type=Path, required=True, help="the gold trees the runs parsed (re-scored against)")
    publish.add_argument("--out", type=Path, required=True, help="the folder that gets one folder per run")
    publish.add_argument("workdirs", type=Path, nargs="+", help="workdirs of finished runs")
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
        elif args.command == "table":
            table(args)
        else:
            publish(args)
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


# What scripts/induce_trees.py records of a finished run and these commands read.
RUN_KEYS = ("setting", "seed", "arch", "trees", "word_filter", "keep_case", "sentences", "short", "short_sentences",
            "induced", "baselines")


def finished_run(folder: Path) -> dict:
    """The scores.json of a finished run's workdir (results/scores.json) or of its published folder;
    refused, by name, when it is not one scripts/induce_trees.py wrote (a translation study's
    scores.json, a file cut short)."""
    for path in (folder / "results" / "scores.json", folder / "scores.json"):
        if path.exists():
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as error:
                raise ValueError(f"{path}: not JSON ({error})") from None
            missing = [key for key in RUN_KEYS if not isinstance(record, dict) or key not in record]
            if missing:
                raise ValueError(f"{path}: not the scores of an induce_trees.py run (no {', '.join(missing)})")
            return record
    raise ValueError(f"{folder} holds no finished run (no {folder / 'results' / 'scores.json'})")


# What a finished run's scores.json holds that is a result, not a setting of the run.
RESULT_KEYS = frozenset(("stopped", "epochs", "best_epoch", "best_updates", "best_valid_loss", "curve", "induced",
                         "links", "agreement", "baselines", "short_sentences", "valid_sentences"))
# Settings meant to differ between the runs of one row: the seed, and the cap, which may be raised for a run not
# yet finished and bounds nothing of a run stopped by its patience (the only runs a row takes).
SEED_KEYS = frozenset(("seed", "max_epochs"))
# scripts/induce_trees.py's "stopped" of a run stopped by its patience (tree_fairseq.cli.patience.max_epoch).
CONVERGED = re.compile(r"done: \d+ validation\(s\) since the best ")


def check_poolable(workdirs: list[Path], results: list[dict]) -> None:
    """Refuse, naming the folders, runs of one setting (pooled into one row) that differ in a setting
    other than :data:`SEED_KEYS`."""
    first: dict[str, tuple[Path, dict]] = {}
    for workdir, record in zip(workdirs, results):
        other, before = first.setdefault(record["setting"], (workdir, record))
        differ = sorted(key for key in (set(before) | set(record)) - RESULT_KEYS - SEED_KEYS
                        if before.get(key, "(none)") != record.get(key, "(none)"))
        if differ:
            said = ", ".join(f"{key} {before.get(key, '(none)')} / {record.get(key, '(none)')}" for key in differ)
            raise ValueError(f"{other} and {workdir}, both of setting {record['setting']}, were run with other "
                             f"settings ({said}): runs pooled into one row must differ in the seed only")


def table(args) -> None:
    results = [finished_run(workdir) for workdir in args.workdirs]
    sentences = {(r["trees"], r["word_filter"], r["sentences"], r["short"]) for r in results}
    if len(sentences) > 1:
        raise ValueError("the runs parsed other sentences (--trees, --word-filter, --sentences or --short differ)")
    check_poolable(args.workdirs, results)
    rows = induction.seed_table(results, args.m)
    unconverged = [(workdir, record) for workdir, record in zip(args.workdirs, results)
                   if not CONVERGED.match(str(record.get("stopped")))]
    for row in rows:
        if row["trees"].startswith("constituent attention, "):
            setting = row["trees"].removeprefix("constituent attention, ").rsplit(", m=", 1)[0]
            seeds = sorted(record["seed"] for _, record in unconverged if record["setting"] == setting)
            if seeds:
                row["unconverged"] = seeds
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"sentence-level F1 (%): median / max over seeds; all {results[0]['sentences']} sentences and the "
          f"{results[0]['short_sentences']} of <= {results[0]['short']} words")
    print(f"{'trees':<44} {'seeds':<12} {'all med':>7} {'all max':>7} {'short med':>9} {'short max':>9}")
    for row in rows:
        name = row["trees"] + (" *" if "unconverged" in row else "")
        print(f"{name:<44} {','.join(map(str, row['seeds'])):<12} {row['all']['median']:>7.1f} "
              f"{row['all']['max']:>7.1f} {row['short']['median']:>9.1f} {row['short']['max']:>9.1f}")
    for workdir, record in unconverged:
        print(f"* not converged: {workdir} (seed {record['seed']}, stopped: {record.get('stopped')})")


PICTURES = ("curve.png", "links.png")


def check_out_folder(out: Path) -> None:
    """Refuse, before any tree is scored, an --out that cannot be the folder (a file, a link to
    nothing, a file on the way to it)."""
    above = out
    while not above.exists():
        if above.is_symlink():
            raise ValueError(f"--out {out}: {above} is a link to {os.readlink(above)}, which does not exist")
        if above.parent == above:
            return
        above = above.parent
    if not above.is_dir():
        raise ValueError(f"--out {out}: {above} is a file, not a folder: give a folder (new, or of published runs)")


def publish(args) -> None:
    check_out_folder(args.out)
    names = [workdir.resolve().name for workdir in args.workdirs]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"two workdirs are named {name}: their published folders would be one")
        if (args.out / name).exists():
            raise ValueError(f"{args.out / name} exists; remove it to publish {name} again")
    staged, golds = [], {}
    for workdir in args.workdirs:  # everything read and checked before anything is written
        record = finished_run(workdir)
        if "trees" not in record or Path(record["trees"]).name != args.gold.name:
            raise ValueError(f"{workdir} parsed {record.get('trees')}, not --gold {args.gold}")
        reading = (record["word_filter"], record["keep_case"])
        if reading not in golds:  # runs of one setting share it
            golds[reading] = induction.read_gold(args.gold, *reading)[0]
        gold = golds[reading]
        short = short_sentences(gold, record["short"])
        trees = workdir / "results" / "trees"
        files = {f"m{m}": trees / f"m{m}.txt" for m in sorted(record["induced"], key=int)}
        files.update({name: trees / f"{name}.txt" for name in record["baselines"]})
        expected = {**{f"m{m}": v for m, v in record["induced"].items()}, **record["baselines"]}
        texts = {}
        for key, path in files.items():
            found = induction.read_induced(path, gold)
            if induction.scores(found, gold, short) != expected[key]:
                raise ValueError(f"{path} scores otherwise against {args.gold} than the run recorded")
            texts[key] = "".join(induction.unlexicalised(tree) + "\n" for tree in found)
        missing = [workdir / "results" / name for name in ("scores.json", *PICTURES)
                   if not (workdir / "results" / name).is_file()]
        if missing:
            raise ValueError(f"{missing[0]}: no such file; {workdir} is not a finished workdir (a published "
                             "folder is published already)")
        staged.append((workdir, texts))
    make_folder(args.out, "--out")
    for (workdir, texts), name in zip(staged, names):
        partial = tempfile.mkdtemp(prefix=f".{name}.", suffix=".partial", dir=args.out)
        with removed_on_sigterm(partial):
            try:
                shutil.copyfile(workdir / "results" / "scores.json", Path(partial) / "scores.json")
                for picture in PICTURES:
                    shutil.copyfile(workdir / "results" / picture, Path(partial) / picture)
                (Path(partial) / "trees").mkdir()
                for key, text in texts.items():
                    with open(Path(partial) / "trees" / f"{key}.txt.gz", "wb") as raw:
                        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
                            packed.write(text.encode("utf-8"))
                os.chmod(partial, 0o777 & ~current_umask())
                try:
                    os.rename(partial, args.out / name)  # refused if another run put it there meanwhile
                except OSError:
                    raise ValueError(f"{args.out / name} appeared while {name} was being published (another "
                                     "run at once?); nothing of this run was kept") from None
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
        print(f"published {workdir} as {args.out / name}")


if __name__ == "__main__":
    main()
