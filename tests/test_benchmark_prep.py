"""scripts/benchmark_prep.py: measures tree-fairseq-parse and tree-fairseq-preprocess against
fairseq-preprocess on a tiny corpus cycled to --lines, checks the workers' outputs are the same,
keeps what it measured for a rerun, prints the table and projection; bad inputs are named."""

import importlib.util
import json
import random
from pathlib import Path

import pytest

from tree_fairseq.cli import overriding

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("benchmark_prep", ROOT / "scripts" / "benchmark_prep.py")
benchmark_prep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(benchmark_prep)

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta"]


def tiny_inputs(directory: Path, lines: int = 12) -> dict[str, Path]:
    rng = random.Random(3)
    rows = []
    for _ in range(lines):
        words = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 2))) for _ in range(rng.randint(2, 6))]
        pieces = [piece for word in words for piece in ([word[:2] + "@@", word[2:]] if len(word) > 2 else [word])]
        tree = "(S " + " ".join(f"(NN {word})" for word in words) + ")"
        heads = " ".join(str(k + 2) if k + 1 < len(words) else "0" for k in range(len(words)))
        rows.append((" ".join(pieces), " ".join(reversed(words)), tree, heads))
    paths = {}
    for k, name in enumerate(("src", "tgt", "trees", "heads")):
        paths[name] = directory / f"input.{name}"
        paths[name].write_text("".join(row[k] + "\n" for row in rows), encoding="utf-8")
    return paths


def flags(paths, workdir, *extra):
    """The inputs' options, an option of ``extra`` replacing its default."""
    return overriding(["--src", str(paths["src"]), "--tgt", str(paths["tgt"]), "--trees", str(paths["trees"]),
                       "--heads", str(paths["heads"]), "--workdir", str(workdir)], list(extra))


@pytest.mark.slow
def test_measures_compares_and_reruns_nothing_it_has(tmp_path, capsys, monkeypatch):
    paths = tiny_inputs(tmp_path)
    workdir = tmp_path / "work"
    benchmark_prep.main(flags(paths, workdir, "--lines", "30", "--parsers", "balanced", "bracketed", "stanza"))
    printed = capsys.readouterr().out
    results = json.loads((workdir / "results.json").read_text())
    assert sorted(results["runs"]) == sorted(
        [f"parse {parser} w{workers}" for parser in ("balanced", "bracketed") for workers in (1, 2)]
        + [f"preprocess {tool} w{workers}" for tool in ("fairseq", "tree") for workers in (1, 2)])
    assert results["runs"]["parse bracketed w2"]["same_as_first_workers"]
    assert all(run["lines"] == 30 and run["cpu_s"] > 0 and run["peak_rss_mb"] > 0 for run in results["runs"].values())
    assert sum(1 for _ in open(workdir / "corpus" / "train.en")) == 30  # 12 lines cycled to 30
    assert (workdir / "preprocess" / "tree.w1" / "train.en-de.en.parents.bin").exists()  # the heads were taken
    assert "stanza: not measured: no stanza model offline" in printed
    assert "| 1 |" in printed and "WMT'14 en-de | 4,500,000 | bracketed |" in printed
    # A rerun measures nothing it has (a measurement would fail: no program to run).
    monkeypatch.setattr(benchmark_prep, "_measure", lambda *args: pytest.fail("measured again"))
    benchmark_prep.main(flags(paths, workdir, "--lines", "30", "--parsers", "balanced", "bracketed"))
    assert capsys.readouterr().out == printed


def test_projection_formula():
    runs = {"preprocess tree w1": {"lines_per_s": 1000.0}, "parse spacy w1": {"lines_per_s": 500.0}}
    text = benchmark_prep._projection(runs)
    # 4.5 M lines: 9,000 s parsing + 4,500 s preprocessing on one core = 3.75 h; 32 cores: /32
    assert "| WMT'14 en-de | 4,500,000 | spacy | 3.75 | 0.47 | 0.12 |" in text
    assert "| Gigaword | 3,800,000 | spacy | 3.17 |" in text


@pytest.mark.parametrize("change, message", [
    (lambda p, w: ["--lines", "0"], "--lines 0: give a positive number of lines"),
    (lambda p, w: ["--workers", "1", "1"], "give distinct positive numbers"),
    (lambda p, w: ["--workers", "0"], "give distinct positive numbers"),
    (lambda p, w: ["--parsers", "balanced", "balanced"], "a parser is given twice"),
    (lambda p, w: ["--tgt", str(p["src"])], "the same file is given for two inputs"),
    (lambda p, w: ["--heads", str(p["missing"])], "no such file"),
    (lambda p, w: ["--heads", str(p["short"])], "the inputs have different numbers of lines"),
    (lambda p, w: ["--src-lang", "de"], "--src-lang and --tgt-lang must differ"),
    (lambda p, w: ["--repeat", "0"], "--repeat 0: give a positive number of runs"),
])
def test_bad_inputs_are_named_before_anything_is_measured(tmp_path, change, message, monkeypatch):
    paths = tiny_inputs(tmp_path)
    paths["missing"] = tmp_path / "missing"
    paths["short"] = tmp_path / "short"
    paths["short"].write_text("1 0\n", encoding="utf-8")
    monkeypatch.setattr(benchmark_prep, "_measure", lambda *args: pytest.fail("measured"))
    with pytest.raises(SystemExit) as exit_info:
        benchmark_prep.main(flags(paths, tmp_path / "work", *change(paths, tmp_path)))
    assert message in str(exit_info.value.code)
    assert not (tmp_path / "work" / "results.json").exists()


def test_a_workdir_that_is_a_file_and_a_report_without_results_are_named(tmp_path):
    paths = tiny_inputs(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        benchmark_prep.main(flags(paths, tmp_path / "file"))
    assert "--workdir" in str(exit_info.value.code) and "is a file" in str(exit_info.value.code)
    with pytest.raises(SystemExit) as exit_info:
        benchmark_prep.main(["--workdir", str(tmp_path / "empty"), "--report"])
    assert "holds no measurement yet" in str(exit_info.value.code)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{")
    with pytest.raises(SystemExit) as exit_info:
        benchmark_prep.main(["--workdir", str(tmp_path / "bad"), "--report"])
    assert "is not the results file this script writes" in str(exit_info.value.code)


def test_other_inputs_measure_everything_again(tmp_path, monkeypatch):
    paths = tiny_inputs(tmp_path)
    workdir = tmp_path / "work"
    measured = []

    def fake_measure(command, lines, log):
        measured.append(command)
        return {"command": command, "lines": lines, "wall_s": 1.0, "cpu_s": 1.0, "lines_per_s": float(lines),
                "lines_per_cpu_s": float(lines), "peak_rss_mb": 1.0, "load_before": 0.0, "load_after": 0.0}

    monkeypatch.setattr(benchmark_prep, "_measure", fake_measure)
    monkeypatch.setattr(benchmark_prep, "_outputs_bytes", lambda out: [])
    benchmark_prep.main(flags(paths, workdir, "--lines", "20", "--only", "parse", "--parsers", "left"))
    assert len(measured) == 2
    benchmark_prep.main(flags(paths, workdir, "--lines", "20", "--only", "parse", "--parsers", "left"))
    assert len(measured) == 2  # nothing new
    benchmark_prep.main(flags(paths, workdir, "--lines", "25", "--only", "parse", "--parsers", "left"))
    assert len(measured) == 4  # other --lines: measured again, on a corpus of 25 lines
    assert sum(1 for _ in open(workdir / "corpus" / "tok.en")) == 25
    results = json.loads((workdir / "results.json").read_text())
    assert {run["lines"] for run in results["runs"].values()} == {25}


def test_parsers_without_a_model_here_are_said_not_measured(tmp_path, capsys, monkeypatch):
    paths = tiny_inputs(tmp_path)
    monkeypatch.setattr(benchmark_prep, "_measure", lambda *args: pytest.fail("measured"))
    with pytest.raises(SystemExit):  # nothing measured: no table
        benchmark_prep.main(flags(paths, tmp_path / "work", "--only", "parse", "--parsers", "spacy", "stanza",
                                  "--spacy-model", "no_such_pipeline_here", "--stanza-model-dir",
                                  str(tmp_path / "none")))
    results = json.loads((tmp_path / "work" / "results.json").read_text())
    assert results["not_measured"] == {
        "spacy": "the spaCy pipeline no_such_pipeline_here is not installed (give --spacy-model)",
        "stanza": f"--stanza-model-dir {tmp_path / 'none'} is no folder"}


def test_commands_are_the_console_scripts_users_run(tmp_path, monkeypatch):
    # What a user runs, not python -m tree_fairseq.cli.parse (whose worker processes import fairseq).
    assert Path(benchmark_prep.console_script("tree-fairseq-parse")).name == "tree-fairseq-parse"
    monkeypatch.setattr(benchmark_prep.sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(ValueError, match=r"tree-fairseq-parse is not installed beside .*bin/python: install"):
        benchmark_prep.console_script("tree-fairseq-parse")


def test_repeats_alternate_the_pair_and_report_medians_and_the_ratio_range(tmp_path, capsys, monkeypatch):
    paths = tiny_inputs(tmp_path)
    workdir = tmp_path / "work"
    order = []
    walls = {"fairseq": iter([10.0, 12.0, 11.0]), "tree": iter([20.0, 12.0, 11.0])}

    def fake_measure(command, lines, log):
        tool = "tree" if Path(command[0]).name == "tree-fairseq-preprocess" else "fairseq"
        order.append(tool)
        destdir = Path(command[command.index("--destdir") + 1])
        destdir.mkdir(parents=True)
        (destdir / "dict.en.txt").write_text("a 1\n")
        wall = next(walls[tool])
        return {"command": command, "lines": lines, "wall_s": wall, "cpu_s": wall / 2, "lines_per_s": lines / wall,
                "lines_per_cpu_s": 2 * lines / wall, "peak_rss_mb": wall, "load_before": 0.5, "load_after": 0.0}

    monkeypatch.setattr(benchmark_prep, "_measure", fake_measure)
    benchmark_prep.main(flags(paths, workdir, "--lines", "20", "--only", "preprocess", "--workers", "1",
                              "--repeat", "3"))
    assert order == ["fairseq", "tree"] * 3  # back to back, pair after pair
    runs = json.loads((workdir / "results.json").read_text())["runs"]
    tree = runs["preprocess tree w1"]
    assert tree["wall_s"] == 12.0 and tree["cpu_s"] == 6.0 and tree["peak_rss_mb"] == 20.0
    assert tree["repeats"] == [[20.0, 10.0], [12.0, 6.0], [11.0, 5.5]]
    assert runs["preprocess fairseq w1"]["wall_s"] == 11.0
    # wall: the medians' rates as stored (1.7 / 1.8 lines/s); CPU 5.5 / 6; each pair's wall 10/20, 12/12, 11/11
    printed = capsys.readouterr().out
    assert "| 1 | 2 | 2 | 0.94 (0.50-1.00 over 3 pairs) | 0.92 |" in printed, printed


def _fake_measure(measured):
    def fake_measure(command, lines, log):
        measured.append(command)
        return {"command": command, "lines": lines, "wall_s": 1.0, "cpu_s": 1.0, "lines_per_s": float(lines),
                "lines_per_cpu_s": float(lines), "peak_rss_mb": 1.0, "load_before": 0.0, "load_after": 0.0}
    return fake_measure


def test_a_last_line_without_its_newline_is_not_joined_to_the_next_cycle(tmp_path, capsys):
    # Cycled as it was, the last line ran into the next cycle's first: fewer lines parsed than recorded.
    paths = tiny_inputs(tmp_path, lines=3)
    for path in paths.values():
        path.write_bytes(path.read_bytes().rstrip(b"\n"))
    workdir = tmp_path / "work"
    benchmark_prep.main(flags(paths, workdir, "--lines", "7", "--only", "parse", "--parsers", "balanced",
                              "--workers", "1"))
    source = paths["src"].read_text(encoding="utf-8").split("\n")
    assert (workdir / "corpus" / "train.en").read_text(encoding="utf-8") == "".join(
        source[k % 3] + "\n" for k in range(7))
    for name in ("train.de", "train.tree.en", "train.heads.en", "tok.en"):
        assert (workdir / "corpus" / name).read_text(encoding="utf-8").count("\n") == 7, name
    results = json.loads((workdir / "results.json").read_text())
    assert results["runs"]["parse balanced w1"]["lines"] == 7
    assert sum(1 for _ in open(workdir / "parse" / "balanced.w1", encoding="utf-8")) == 7
    assert "| balanced | 1 |" in capsys.readouterr().out


def test_a_carriage_return_inside_a_line_is_not_a_line_break_of_the_corpus(tmp_path):
    # Cycled in text mode, a lone carriage return split its line in two: the source corpus had a
    # line more than the target's and than the lines counted. It stays inside its line now.
    paths = tiny_inputs(tmp_path, lines=3)
    lines = paths["src"].read_text(encoding="utf-8").split("\n")
    lines[1] = lines[1].replace(" ", "\r", 1)
    paths["src"].write_bytes("\n".join(lines).encode())
    target = tmp_path / "cycled"
    benchmark_prep._cycle(paths["src"], target, 7)
    assert target.read_bytes().split(b"\n")[:-1] == [lines[k % 3].encode() for k in range(7)]
    assert benchmark_prep._count_lines(target) == 7


def test_an_input_edited_to_the_same_size_measures_everything_again(tmp_path, monkeypatch):
    # The corpus was signed by the inputs' sizes: an edit that kept the size reused the old corpus and results.
    paths = tiny_inputs(tmp_path)
    workdir = tmp_path / "work"
    measured = []
    monkeypatch.setattr(benchmark_prep, "_measure", _fake_measure(measured))
    monkeypatch.setattr(benchmark_prep, "_outputs_bytes", lambda out: [])
    command = flags(paths, workdir, "--lines", "20", "--only", "parse", "--parsers", "left", "--workers", "1")
    benchmark_prep.main(command)
    assert len(measured) == 1
    before = paths["src"].read_bytes()
    after = before.replace(b"ka", b"KA")
    assert after != before and len(after) == len(before)
    paths["src"].write_bytes(after)
    benchmark_prep.main(command)
    assert len(measured) == 2  # measured again, on the new text
    assert "KA" in (workdir / "corpus" / "train.en").read_text(encoding="utf-8")
    benchmark_prep.main(command)
    assert len(measured) == 2  # the same content: nothing new
