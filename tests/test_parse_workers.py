"""A large corpus. tree-fairseq-parse --workers N: the output of one process, byte for byte; errors
said as one process says them; a run stopped (a worker killed, SIGTERM, Ctrl-C) keeps its finished
chunks for the next run, whatever its --workers. The real parsers' runs with workers are tested
beside their other tests (test_spacy_parser.py, test_stanza_parser.py). Parts parsed on several
machines and joined with --join: docs/parsers.md's sequence gives one run's output and record."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tree_fairseq.cli import argtypes
from tree_fairseq.cli import parse as parse_cli

ROOT = Path(__file__).resolve().parents[1]
LINES = [f"w{i} x{i} y{i}" + " z" * (i % 3) for i in range(9)]


def _parse(tmp_path, *args, output="trees", text="text"):
    parse_cli.main(["--input", str(tmp_path / text), "--output", str(tmp_path / output), *args])


def _outputs(tmp_path, name):
    """The files a run leaves, by suffix: trees, heads, failures and record."""
    return {suffix: (tmp_path / (name + suffix)).read_bytes() for suffix in ("", ".heads", ".failures", ".parser.json")
            if (tmp_path / (name + suffix)).exists()}


def _one_and_three(tmp_path, capsys, *args):
    """The outputs and closing lines of --workers 1 and --workers 3 runs, two lines per chunk."""
    runs = []
    for workers, name in ((1, "one"), (3, "three")):
        heads = ["--heads", str(tmp_path / f"{name}.heads")] if "--heads" in args else []
        _parse(tmp_path, *[a for a in args if a != "--heads"], *heads, "--chunk-size", "2", "--workers", str(workers),
               output=name)
        closing = [line for line in capsys.readouterr().err.replace(name, "OUT").splitlines()
                   if line.startswith("tree-fairseq-parse:")]
        runs.append((_outputs(tmp_path, name), closing))
        assert not (tmp_path / f"{name}.parts").exists()
    return runs


def test_workers_give_the_trees_heads_and_record_of_one_process(tmp_path, capsys):
    (tmp_path / "text").write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    one, three = _one_and_three(tmp_path, capsys, "--parser", "balanced", "--heads", "--heads-control", "random")
    assert one == three and set(one[0]) == {"", ".heads", ".parser.json"}


def test_workers_list_the_failures_of_one_process(tmp_path, capsys):
    (tmp_path / "text").write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    trees = [f"(S {line})" if i % 4 else "null" for i, line in enumerate(LINES)]
    (tmp_path / "parsed").write_text("".join(tree + "\n" for tree in trees), encoding="utf-8")
    one, three = _one_and_three(tmp_path, capsys, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"),
                                "--on-failure", "left")
    assert one == three and one[0][".failures"].decode().splitlines()[1].startswith("5\t")
    assert "3 of 9 lines (33.33%) could not be parsed and got left trees" in one[1][-1]


def test_workers_count_the_lifted_arcs_and_write_the_parser_heads_of_one_process(tmp_path, capsys):
    """CoNLL-U parses with crossing arcs: the lifts are counted in the closing line, the heads are the parser's."""
    crossing = [("a", 3), ("b", 4), ("c", 0), ("d", 3)]  # b's arc to d crosses a's to c
    blocks = "".join("".join(f"{k}\t{word}{i}\t_\tX\tX\t_\t{head}\tdep\t_\t_\n"
                             for k, (word, head) in enumerate(crossing, start=1)) + "\n" for i in range(7))
    (tmp_path / "parsed.conllu").write_text(blocks, encoding="utf-8")
    (tmp_path / "text").write_text("".join(f"a{i} b{i} c{i} d{i}\n" for i in range(7)), encoding="utf-8")
    one, three = _one_and_three(tmp_path, capsys, "--parser", "conllu", "--trees", str(tmp_path / "parsed.conllu"),
                                "--heads")
    assert one == three and one[0][".heads"].decode().splitlines()[0] == "3 4 0 3"
    assert "non-projective arcs lifted to their head's head in 7 of 7 lines" in one[1][-1]


def test_more_workers_than_chunks_start_one_per_chunk(tmp_path, monkeypatch):
    (tmp_path / "text").write_text("".join(line + "\n" for line in LINES[:5]), encoding="utf-8")
    _parse(tmp_path, "--parser", "right", "--chunk-size", "2", output="one")
    started = []
    start = parse_cli.ParserProcesses._start
    monkeypatch.setattr(parse_cli.ParserProcesses, "_start", lambda self: started.append(1) or start(self))
    _parse(tmp_path, "--parser", "right", "--chunk-size", "2", "--workers", "8", output="eight")
    assert len(started) == 3  # 3 chunks
    assert _outputs(tmp_path, "eight") == _outputs(tmp_path, "one")


class _FakeWorker:
    def __init__(self, log):
        self.log, self.ready, self.ended, self.chunk = log, False, False, None
        log.append("start")

    def receive(self):
        self.log.append("first ready")
        return ("ready", "version", {"parser": "fake"})


@pytest.mark.parametrize("parser, started_before_the_first_is_ready", [("spacy", 3), ("right", 3), ("stanza", 1)])
def test_workers_start_at_once_but_stanzas_after_the_first(monkeypatch, parser, started_before_the_first_is_ready):
    # The others load their models while the first does, except stanza's: its first may download the model.
    log = []
    monkeypatch.setattr(parse_cli.ParserProcesses, "_start",
                        lambda self: self.workers.append(_FakeWorker(log)) or self.workers[-1])
    args = parse_cli.get_parser().parse_args(["--input", "x", "--output", "y", "--parser", parser, "--workers", "3"])
    processes = parse_cli.ParserProcesses(args, chunks=5)
    assert log.index("first ready") == started_before_the_first_is_ready
    assert processes.version == "version"
    log.clear()
    parse_cli.ParserProcesses(args, chunks=2)  # no more workers than chunks
    assert log.count("start") == (2 if parser != "stanza" else 1)


@pytest.mark.parametrize("workers", ["0", "-2", "two", str(4 * argtypes.processors() + 1), "99999999999999999999"])
def test_workers_is_a_whole_number_up_to_four_per_processor(tmp_path, capsys, workers):
    """--workers of 20 digits started a process per chunk, each with its own model, until memory ran
    out: at most 4 per processor, as data-prep and tree-fairseq-preprocess take it."""
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        _parse(tmp_path, "--parser", "balanced", "--workers", workers)
    error = capsys.readouterr().err.splitlines()[-1]
    most = 4 * argtypes.processors()
    assert error == ("tree-fairseq-parse: error: argument --workers: "
                     + f"'{workers}': a whole number from 1 to {most} (4 per processor of this machine: more "
                     "processes only take memory)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]


def _refusal(tmp_path, *args, output="trees"):
    with pytest.raises(SystemExit) as exit_info:
        _parse(tmp_path, *args, output=output)
    return str(exit_info.value.code)


def test_a_line_a_worker_cannot_parse_stops_the_run_as_in_one_process(tmp_path):
    """Lines 5 and 6 are no trees: whichever worker finds its line first, the run stops at line 5, with
    the message of one process, and keeps the chunks finished for the next run."""
    (tmp_path / "text").write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    trees = [f"(S {line})" if i not in (4, 5) else "( )" for i, line in enumerate(LINES)]
    (tmp_path / "parsed").write_text("".join(tree + "\n" for tree in trees), encoding="utf-8")
    args = ["--parser", "bracketed", "--trees", str(tmp_path / "parsed"), "--chunk-size", "1"]
    one = _refusal(tmp_path, *args, output="one")
    assert one.startswith(f"tree-fairseq-parse: error: {tmp_path / 'parsed'}:5: ")
    for _ in range(2):
        assert _refusal(tmp_path, *args, "--workers", "3") == one
        kept = sorted(p.name for p in (tmp_path / "trees.parts").glob("*.trees"))
        assert kept[:4] == [f"0000000{k}.trees" for k in range(4)] and "00000004.trees" not in kept
    # An empty input line, read by the run itself, is said as one process says it too.
    (tmp_path / "text").write_text("".join(line + "\n" for line in LINES[:6]) + "\n", encoding="utf-8")
    args = ["--parser", "balanced", "--chunk-size", "2"]
    assert _refusal(tmp_path, *args, "--workers", "3") == _refusal(tmp_path, *args, output="one") == (
        f"tree-fairseq-parse: error: {tmp_path / 'text'}:7: empty line: no tokens to parse")


def test_stanza_on_a_gpu_is_parsed_in_one_process(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    assert _refusal(tmp_path, "--parser", "stanza", "--lang", "en", "--workers", "2") == (
        "tree-fairseq-parse: error: --workers 2: stanza parses on the GPU in one process; leave out --workers, or "
        "add --cpu to parse in 2 processes on the CPU")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]


# A run of tree-fairseq-parse whose trivial parser logs each chunk it parses and sleeps
# $PARSE_DELAY seconds per chunk: spawn runs this file in each worker before the worker's body.
SLOW_RUN = """
import os, sys, time
import tree_fairseq_console  # noqa: F401  (before tree_fairseq: no fairseq)
from tree_fairseq.parsing import TrivialParser

trivial = TrivialParser.parse


def parse(self, sentences, first_line, source):
    with open(os.environ["PARSE_LOG"], "a") as log:
        log.write(f"{first_line}\\n")
    time.sleep(float(os.environ["PARSE_DELAY"]))
    return trivial(self, sentences, first_line, source)


TrivialParser.parse = parse
if __name__ == "__main__":
    from tree_fairseq.cli import parse as parse_cli
    parse_cli.main(sys.argv[1:])
"""
SLOW_LINES = [f"w{i} x{i} y{i}" for i in range(40)]


def _slow_run(tmp_path, *args, delay=0.4, log="log", **popen):
    (tmp_path / "slow_run.py").write_text(SLOW_RUN)
    (tmp_path / "text").write_text("".join(line + "\n" for line in SLOW_LINES), encoding="utf-8")
    env = {**os.environ, "PARSE_LOG": str(tmp_path / log), "PARSE_DELAY": str(delay),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(tmp_path / "slow_run.py"), "--input", str(tmp_path / "text"), "--output",
               str(tmp_path / "trees"), "--parser", "balanced", "--chunk-size", "1", *args]
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, **popen)


def _workers_of(run) -> list[int]:
    """The worker processes of ``run`` (not multiprocessing's resource tracker)."""
    pids = []
    for thread in os.listdir(f"/proc/{run.pid}/task"):
        with open(f"/proc/{run.pid}/task/{thread}/children") as f:
            pids += [int(pid) for pid in f.read().split()]
    return [pid for pid in pids if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def _finished(tmp_path) -> set[int]:
    return {int(p.stem) for p in (tmp_path / "trees.parts").glob("*.trees")}


def _wait_for_chunks(tmp_path, run, count=3):
    deadline = time.monotonic() + 120
    while (not (tmp_path / "trees.parts").is_dir() or len(_finished(tmp_path)) < count) and run.poll() is None:
        assert time.monotonic() < deadline, "no chunk was finished"
        time.sleep(0.05)
    assert run.poll() is None, run.stderr.read()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _resumes_to_the_output_of_one_process(tmp_path, finished, workers):
    """A run with ``workers`` parses only the chunks not ``finished``, to the trees of one process."""
    resumed = _slow_run(tmp_path, "--workers", str(workers), delay=0, log="resumed")
    assert resumed.wait(timeout=120) == 0, resumed.stderr.read()
    parsed = {int(line) - 1 for line in (tmp_path / "resumed").read_text().split()}
    assert parsed == set(range(len(SLOW_LINES))) - finished
    _parse(tmp_path, "--parser", "balanced", output="one")
    assert _outputs(tmp_path, "trees") == _outputs(tmp_path, "one")


def test_a_killed_worker_stops_the_run_and_the_next_run_resumes(tmp_path):
    run = _slow_run(tmp_path, "--workers", "2")
    _wait_for_chunks(tmp_path, run)
    os.kill(_workers_of(run)[0], signal.SIGKILL)
    assert run.wait(timeout=60) == 1
    error = run.stderr.read().splitlines()[-1]
    assert re.fullmatch(rf"tree-fairseq-parse: error: a worker process \(pid \d+\) ended \(killed by SIGKILL\) while "
                        rf"parsing lines (\d+)-\1 of {re.escape(str(tmp_path / 'text'))}; run the same command again: "
                        "it reuses the chunks finished", error), error
    assert not (tmp_path / "trees.lock").exists()
    _resumes_to_the_output_of_one_process(tmp_path, _finished(tmp_path), workers=3)


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_a_stopped_run_stops_its_workers_and_keeps_the_finished_chunks(tmp_path, stop):
    """SIGTERM of the run, or Ctrl-C (SIGINT to every process of the terminal's group), while a
    second run on the same output is refused."""
    run = _slow_run(tmp_path, "--workers", "2", start_new_session=True)
    _wait_for_chunks(tmp_path, run)
    workers = _workers_of(run)
    assert len(workers) == 2
    assert f"is being written by another run (process {run.pid}" in _refusal(tmp_path, "--parser", "balanced")
    if stop == "SIGTERM":
        run.send_signal(signal.SIGTERM)
    else:
        os.killpg(run.pid, signal.SIGINT)
    assert run.wait(timeout=60) == (-signal.SIGTERM if stop == "SIGTERM" else -signal.SIGINT)
    deadline = time.monotonic() + 30
    while not all(_gone(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived the run"
        time.sleep(0.05)
    finished = _finished(tmp_path)
    assert finished and not (tmp_path / "trees.lock").exists() and not (tmp_path / "trees").exists()
    _resumes_to_the_output_of_one_process(tmp_path, finished, workers=1)


# Parsing on several machines: docs/parsers.md's command sequence, run as written.
DOCS_PARSE = 'PARSE="tree-fairseq-parse --parser spacy --spacy-model en_core_web_sm"'
TEST_PARSE = 'PARSE="tree-fairseq-parse --parser balanced --heads-control random --heads-seed 3"'


def _docs_sequence() -> str:
    from helpers import code_blocks

    text = (ROOT / "docs" / "parsers.md").read_text(encoding="utf-8")
    blocks = [block for _, block in code_blocks(text) if "--join" in block]
    assert len(blocks) == 1 and DOCS_PARSE in blocks[0], blocks
    return blocks[0]


def _bash(script: str, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(["bash", "-euc", script], cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_parts_parsed_apart_and_joined_are_one_run_over_the_whole(tmp_path):
    """docs/parsers.md's sequence (split, a parse per part, --join) with a trivial parser and random
    heads: the joined trees, heads and record are a single run's, and tree-fairseq-preprocess takes
    them with their record and heads."""
    from tree_fairseq.cli import preprocess as preprocess_cli

    lines = [" ".join(f"w{i}x{k}" for k in range(1 + i % 7)) for i in range(50)]
    (tmp_path / "train.tok.en").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    _bash(_docs_sequence().replace(DOCS_PARSE, TEST_PARSE), tmp_path)
    assert sorted(p.name for p in tmp_path.glob("part.0?")) == [f"part.0{k}" for k in range(4)]
    _bash(f"{TEST_PARSE}\n$PARSE --input train.tok.en --output whole.tree --heads whole.heads", tmp_path)
    for joined, whole in (("train.tree.en", "whole.tree"), ("train.heads.en", "whole.heads"),
                          ("train.tree.en.parser.json", "whole.tree.parser.json")):
        assert (tmp_path / joined).read_bytes() == (tmp_path / whole).read_bytes(), joined
    (tmp_path / "train.en").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (tmp_path / "train.de").write_text("".join(f"t{i}\n" for i in range(len(lines))), encoding="utf-8")
    preprocess_cli.main(["--source-lang", "en", "--target-lang", "de", "--trainpref", str(tmp_path / "train"),
                         "--destdir", str(tmp_path / "bin"), "--workers", "1"])
    recorded = json.loads((tmp_path / "bin" / "parser.en.json").read_text())["parser"]
    whole = json.loads((tmp_path / "whole.tree.parser.json").read_text())
    assert recorded == {**whole, "trees_file": str(tmp_path / "train.tree.en")}  # the heads too: not "unknown"
    heads = [str(tmp_path / f"part.0{k}.heads") for k in (1, 0, 2, 3)]
    with pytest.raises(SystemExit) as exit_info:
        parse_cli.main(["--join", *(str(tmp_path / f"part.0{k}.tree") for k in range(4)), "--join-heads", *heads,
                        "--output", str(tmp_path / "out"), "--heads", str(tmp_path / "out.heads")])
    assert str(exit_info.value.code) == (
        f"tree-fairseq-parse: error: --join-heads {heads[0]} is not the heads file of the parse of "
        f"{tmp_path / 'part.00.tree'} (its record {tmp_path / 'part.00.tree.parser.json'}): give the parts' heads "
        "in the parts' order")


def test_join_renumbers_the_failures_and_refuses_parts_that_do_not_belong_together(tmp_path, capsys):
    (tmp_path / "text").write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    trees = [f"(S {line})" if i % 4 else "null" for i, line in enumerate(LINES)]
    for name, rows in (("a", slice(0, 5)), ("b", slice(5, None))):
        (tmp_path / f"text.{name}").write_text("".join(line + "\n" for line in LINES[rows]), encoding="utf-8")
        (tmp_path / f"parsed.{name}").write_text("".join(tree + "\n" for tree in trees[rows]), encoding="utf-8")
        _parse(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / f"parsed.{name}"), "--on-failure",
               "left", text=f"text.{name}", output=f"trees.{name}")
    parts = [str(tmp_path / "trees.a"), str(tmp_path / "trees.b")]
    capsys.readouterr()
    parse_cli.main(["--join", *parts, "--output", str(tmp_path / "joined")])
    assert "3 of 9 lines (33.33%) could not be parsed and got left trees" in capsys.readouterr().err
    (tmp_path / "parsed").write_text("".join(tree + "\n" for tree in trees), encoding="utf-8")
    _parse(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"), "--on-failure", "left",
           output="whole")
    assert (tmp_path / "joined").read_bytes() == (tmp_path / "whole").read_bytes()
    assert [line.split("\t")[0] for line in (tmp_path / "joined.failures").read_text().splitlines()] == ["1", "5", "9"]
    whole, joined = (json.loads((tmp_path / f"{name}.parser.json").read_text()) for name in ("whole", "joined"))
    assert joined.pop("trees") == [str(tmp_path / "parsed.a"), str(tmp_path / "parsed.b")]  # each part's own
    assert whole.pop("trees") == str(tmp_path / "parsed") and joined == whole

    def refusal(*args):
        with pytest.raises(SystemExit) as exit_info:
            parse_cli.main(["--join", *args, "--output", str(tmp_path / "out")])
        assert not (tmp_path / "out").exists()
        return str(exit_info.value.code)

    _parse(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed.b"), "--on-failure", "right",
           text="text.b", output="other.b")
    assert refusal(parts[0], str(tmp_path / "other.b")) == (
        f"tree-fairseq-parse: error: --join {tmp_path / 'other.b'} was parsed otherwise than {parts[0]} "
        "(on_failure: left -> right): parse every part with the same command and installation")
    (tmp_path / "edited").write_bytes((tmp_path / "trees.b").read_bytes() + b"(X a)\n")
    os.link(tmp_path / "trees.b.parser.json", tmp_path / "edited.parser.json")
    assert "--join {} is not the trees its record".format(tmp_path / "edited") in refusal(parts[0], str(tmp_path / "edited"))
    assert "has no record of tree-fairseq-parse beside it" in refusal(parts[0], str(tmp_path / "text"))
    assert "the parts were parsed without --heads" in refusal(*parts, "--heads", str(tmp_path / "heads"))
    assert "--output {} is one of the parts".format(parts[0]) in str(
        pytest.raises(SystemExit, parse_cli.main, ["--join", *parts, "--output", parts[0]]).value.code)
