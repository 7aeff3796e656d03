"""tree-fairseq-parse: output format, bracketed alignment, errors, resumability."""

import subprocess
import sys
from pathlib import Path

import pytest

from tree_fairseq.cli import parse as parse_cli
from tree_fairseq.parsing import TrivialParser
from tree_fairseq.trees import parse_tree, trivial_tree
from tree_fairseq.trees.bracketed import quoted

TEXT = ["es ist diese pyramide .", "durch die muttermilch .", "ja ?", "&quot; ( das ) &quot; ist &apos;s ."]


def run(tmp_path, *args):
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), *args])
    return (tmp_path / "trees").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("shape", ["balanced", "left", "right"])
def test_trivial_trees_have_the_line_tokens_as_leaves(tmp_path, shape):
    (tmp_path / "text").write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    lines = run(tmp_path, "--parser", shape)
    assert len(lines) == len(TEXT)
    for line, text in zip(lines, TEXT):
        tree = parse_tree(line)
        assert " ".join(tree.leaves).replace("-LRB-", "(").replace("-RRB-", ")") == text
        assert tree == trivial_tree(list(tree.leaves), shape)
    assert not (tmp_path / "trees.parts").exists()


def test_bracketed_parser_output_is_aligned_to_the_corpus_tokens(tmp_path):
    (tmp_path / "text").write_text("it &apos;s ( ok ) .\ni don&apos;t know\n", encoding="utf-8")
    (tmp_path / "parsed").write_text(
        "(ROOT (S (NP (PRP It)) (VP (VBZ 's) (-LRB- -LRB-) (JJ OK) (-RRB- -RRB-)) (. .)))\n"
        "(ROOT (S (NP (PRP I)) (VP (VBP do) (RB n't) (VB know))))\n", encoding="utf-8")
    lines = run(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    # The preterminals stay, for the subword nodes of tree-fairseq-preprocess; a token the parser
    # split (don't = do n't) gets the tag of its first part.
    assert lines == ["(S (PRP it) (VP (VBZ &apos;s) (-LRB- -LRB-) (JJ ok) (-RRB- -RRB-)) (. .))",
                     "(S (PRP i) (VP (VBP don&apos;t) (VB know)))"]
    (tmp_path / "parsed").write_text("(S it (VP 's -LRB- ok -RRB-) .)\n(S I (VP do n't know))\n", encoding="utf-8")
    lines = run(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    assert lines == ["(S it (VP &apos;s -LRB- ok -RRB-) .)", "(S i (VP don&apos;t know))"]  # no tags to keep


def _error(capsys, tmp_path, *args):
    with pytest.raises(SystemExit) as exit_info:
        run(tmp_path, *args)
    return str(exit_info.value.code)


def test_errors_name_file_and_line(tmp_path, capsys):
    (tmp_path / "text").write_text("a b\nc d\n", encoding="utf-8")
    (tmp_path / "parsed").write_text("(S a b)\n(S c e)\n", encoding="utf-8")
    message = _error(capsys, tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    assert f"{tmp_path / 'parsed'}:2:" in message and "leaf 2 is 'e' but token 2 is 'd'" in message
    (tmp_path / "parsed").write_text("(S a b)\nnull\n", encoding="utf-8")
    assert f"{tmp_path / 'parsed'}:2: not a bracketed tree" in _error(
        capsys, tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    (tmp_path / "parsed").write_text("(S a b)\n", encoding="utf-8")
    assert "fewer lines than the input" in _error(
        capsys, tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    (tmp_path / "text").write_text("a b\n\nc d\n", encoding="utf-8")
    assert f"{tmp_path / 'text'}:2: empty line" in _error(capsys, tmp_path, "--parser", "balanced")
    assert "needs --trees" in _error(capsys, tmp_path, "--parser", "bracketed")


def test_interrupted_run_resumes_without_redoing_finished_chunks(tmp_path, monkeypatch):
    text = [f"w{i} x{i} y{i}" for i in range(10)]
    (tmp_path / "text").write_text("\n".join(text) + "\n", encoding="utf-8")
    calls = []

    class Interrupted(Exception):
        pass

    class CountingParser(TrivialParser):
        def __init__(self, fail_at):
            super().__init__("balanced")
            self.fail_at = fail_at

        def parse(self, sentences, first_line, source):
            calls.append(first_line)
            if first_line == self.fail_at:
                raise Interrupted
            return super().parse(sentences, first_line, source)

    args = ["--parser", "balanced", "--chunk-size", "3"]
    monkeypatch.setattr(parse_cli, "make_parser", lambda *a, **k: CountingParser(fail_at=7))
    with pytest.raises(Interrupted):
        run(tmp_path, *args)
    assert calls == [1, 4, 7]
    assert not (tmp_path / "trees").exists()
    calls.clear()
    monkeypatch.setattr(parse_cli, "make_parser", lambda *a, **k: CountingParser(fail_at=None))
    lines = run(tmp_path, *args)
    assert calls == [7, 10]  # chunks 1-3 and 4-6 were kept
    assert lines == [trivial_tree(t.split(), "balanced").to_bracketed() for t in text]


def test_chunks_of_a_run_with_other_input_are_discarded(tmp_path, capsys):
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    (tmp_path / "trees.parts").mkdir()
    (tmp_path / "trees.parts" / "manifest.json").write_text('{"input": "elsewhere"}', encoding="utf-8")
    (tmp_path / "trees.parts" / "00000000.trees").write_text("(X stale tree)\n", encoding="utf-8")
    assert run(tmp_path, "--parser", "balanced") == ["(X a b)"]
    assert "discarding them" in capsys.readouterr().err


def test_a_full_disk_leaves_no_partial_output_and_the_same_command_finishes(tmp_path, monkeypatch, capsys):
    import errno
    import shutil

    text = [f"w{i} x{i} y{i}" for i in range(10)]
    (tmp_path / "text").write_text("\n".join(text) + "\n", encoding="utf-8")
    args = ["--parser", "balanced", "--chunk-size", "3"]
    copy = shutil.copyfileobj

    def fill_the_disk(source, target, *rest):
        copy(source, target, *rest)
        if target.tell() > 40:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(parse_cli.shutil, "copyfileobj", fill_the_disk)
    with pytest.raises(SystemExit) as exit_info:
        run(tmp_path, *args)
    assert exit_info.value.code == (
        f"tree-fairseq-parse: error: no space left on the device while writing {tmp_path / 'trees'}: free some and "
        f"run the same command again (the chunks parsed so far are kept in {tmp_path / 'trees'}.parts/)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text", "trees.parts"]  # no trees.tmp
    monkeypatch.setattr(parse_cli.shutil, "copyfileobj", copy)
    assert run(tmp_path, *args) == [trivial_tree(t.split(), "balanced").to_bracketed() for t in text]


def test_a_full_disk_while_joining_keeps_the_earlier_heads_beside_the_earlier_trees(tmp_path, monkeypatch):
    """A second parse with --heads whose trees cannot be written whole leaves the first run's trees and
    heads as they were: never the new heads beside the old trees."""
    import errno
    import shutil

    (tmp_path / "text").write_text("a b c\nd e\n", encoding="utf-8")
    heads = ["--heads", str(tmp_path / "heads"), "--heads-control"]
    run(tmp_path, "--parser", "balanced", *heads, "next")
    before = {name: (tmp_path / name).read_bytes() for name in ("trees", "heads", "trees.parser.json")}
    copy = shutil.copyfileobj

    def fill_the_disk(source, target, *rest):
        if target.name.endswith("trees.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        copy(source, target, *rest)

    monkeypatch.setattr(parse_cli.shutil, "copyfileobj", fill_the_disk)
    with pytest.raises(SystemExit, match="no space left on the device"):
        run(tmp_path, "--parser", "left", *heads, "previous")
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert not list(tmp_path.glob("*.tmp"))


def test_a_resumed_run_with_every_chunk_finished_checks_the_parser_output_from_its_last_line(tmp_path, monkeypatch):
    """The aligning parsers check that their file ends with the input; a resumed run that parses no
    chunk (the join was cut short) reads it up to the input's last line first."""
    import errno
    import shutil

    (tmp_path / "text").write_text("a b\nc d\ne f\n", encoding="utf-8")
    (tmp_path / "parsed").write_text("(S a b)\n(S c d)\n(S e f)\n", encoding="utf-8")
    (tmp_path / "parsed.conllu").write_text("".join(f"1\t{a}\t_\tX\tX\t_\t0\troot\t_\t_\n2\t{b}\t_\tX\tX\t_\t1\tdep\t_\t_\n\n"
                                                    for a, b in ("ab", "cd", "ef")), encoding="utf-8")
    copy = shutil.copyfileobj
    for parser, trees in (("bracketed", "parsed"), ("conllu", "parsed.conllu")):
        args = ["--parser", parser, "--trees", str(tmp_path / trees), "--chunk-size", "1"]
        monkeypatch.setattr(parse_cli.shutil, "copyfileobj", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "")))
        with pytest.raises(SystemExit, match="no space left"):
            run(tmp_path, *args)
        monkeypatch.setattr(parse_cli.shutil, "copyfileobj", copy)
        assert len(run(tmp_path, *args)) == 3


def test_the_next_run_removes_the_partial_output_of_a_killed_one(tmp_path, capsys):
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    (tmp_path / "trees.tmp").write_text("(X a b)\n(X half", encoding="utf-8")  # killed while joining
    assert run(tmp_path, "--parser", "balanced") == ["(X a b)"]
    assert (f"tree-fairseq-parse: removing {tmp_path / 'trees.tmp'}, left by an earlier run that was killed while "
            "writing it") in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text", "trees", "trees.parser.json"]


def test_stanza_without_models_stops_with_the_fetch_command(tmp_path, monkeypatch):
    from tree_fairseq.parsing import stanza_parser

    monkeypatch.setattr(stanza_parser, "DEFAULT_RESOURCES_URL", "http://127.0.0.1:9")
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"stanza.download\('de'"):
        run(tmp_path, "--parser", "stanza", "--lang", "de", "--model-dir", str(tmp_path / "models"))


LIGHT_RUN = """
import sys, tree_fairseq_console
sys.argv = [sys.argv[0], *sys.argv[1:]]
try:
    getattr(tree_fairseq_console, {script!r})()
except SystemExit as stop:
    assert not stop.code, stop.code
heavy = sorted(name for name in ("torch", "fairseq", "spacy", "stanza") if name in sys.modules)
print("imported:", " ".join(heavy) or "nothing heavy")
"""


@pytest.mark.parametrize("script", ["parse", "score", "config_args", "average_checkpoints", "synthetic"])
def test_console_script_help_loads_neither_fairseq_nor_torch(script):
    """The console scripts start through tree_fairseq_console: ``--help`` answers at once."""
    result = subprocess.run([sys.executable, "-c", LIGHT_RUN.format(script=script), "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout and "imported: nothing heavy" in result.stdout, result.stdout


@pytest.mark.parametrize("parser", ["balanced", "right", "bracketed"])
def test_parsers_without_a_model_load_neither_fairseq_nor_torch(tmp_path, parser):
    (tmp_path / "text").write_text("a b c\nd e\n", encoding="utf-8")
    (tmp_path / "given").write_text("(S (X a b) c)\n(S d e)\n", encoding="utf-8")
    args = ["--parser", parser, "--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees")]
    args += ["--trees", str(tmp_path / "given")] if parser == "bracketed" else []
    result = subprocess.run([sys.executable, "-c", LIGHT_RUN.format(script="parse"), *args],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "imported: nothing heavy" in result.stdout
    assert len((tmp_path / "trees").read_text(encoding="utf-8").splitlines()) == 2


def test_importing_the_package_registers_the_plugin_outside_the_console_scripts():
    code = ("import tree_fairseq\nfrom fairseq.models import ARCH_MODEL_REGISTRY\nfrom fairseq.tasks import TASK_REGISTRY\n"
            "print('tree_transformer' in ARCH_MODEL_REGISTRY, 'tree_translation' in TASK_REGISTRY)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["True", "True"], result.stderr[-2000:]


def test_console_script_help():
    result = subprocess.run([sys.executable, "-m", "tree_fairseq.cli.parse", "--help"],
                            capture_output=True, text=True, check=True)
    assert "--parser {stanza,spacy,bracketed,conllu,balanced,left,right}" in result.stdout
    assert "--spacy-model NAME_OR_PATH" in result.stdout and "--dependency-tree-shape {layered,flat}" in result.stdout


def test_the_written_trees_read_back_as_parser_output_and_binarise(tmp_path):
    """A CoNLL-U parse with German STTS tags ($( for brackets and quotes) and tags holding a space or a
    bracket: the trees written read back to the same tags, as --trees of the bracketed back-end too
    (the same lines again), and tree-fairseq-preprocess takes them with the tags as they were."""
    from tree_fairseq.cli import preprocess as preprocess_cli
    from tree_fairseq.data import load_node_dictionary

    rows = [("er", "PPER", 2), ("sagt", "VVFIN", 0), ("(", "$(", 4), ("ja", "NN SBJ", 2), (")", "N)P", 4),
            ("&quot;", "$(", 2), (".", "$.", 2)]
    (tmp_path / "parsed.conllu").write_text("".join(f"{k}\t{w}\t_\tX\t{tag}\t_\t{head}\tdep\t_\t_\n"
                                                    for k, (w, tag, head) in enumerate(rows, start=1)))
    (tmp_path / "text").write_text("er sagt ( ja ) &quot; .\n", encoding="utf-8")
    lines = run(tmp_path, "--parser", "conllu", "--trees", str(tmp_path / "parsed.conllu"))
    assert parse_tree(lines[0]).tags == tuple(tag for _, tag, _ in rows)
    (tmp_path / "written").write_text(lines[0] + "\n", encoding="utf-8")
    assert run(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "written")) == lines
    pieces = "er sa@@ gt ( ja ) &quot; ."
    for suffix, content in (("de", pieces), ("en", "he says yes ."), ("tree.de", lines[0])):
        (tmp_path / f"train.{suffix}").write_text(content + "\n", encoding="utf-8")
    preprocess_cli.main(["--source-lang", "de", "--target-lang", "en", "--trainpref", str(tmp_path / "train"),
                         "--destdir", str(tmp_path / "bin"), "--workers", "1"])
    assert "VVFIN" in load_node_dictionary(str(tmp_path / "bin"), "de").symbols  # the tag of sagt, split in two


@pytest.mark.parametrize("char, name", [("\t", "U+0009 CHARACTER TABULATION"), ("\u00a0", "U+00A0 NO-BREAK SPACE"),
                                        ("\x1f", "U+001F INFORMATION SEPARATOR ONE"),
                                        ("\u202f", "U+202F NARROW NO-BREAK SPACE")])
def test_whitespace_other_than_the_space_is_named_with_the_fix(tmp_path, char, name):
    (tmp_path / "text").write_text(f"a b\nes kostet 10{char}000 euro .\n", encoding="utf-8")
    message = _error(None, tmp_path, "--parser", "balanced")
    assert (f"{tmp_path / 'text'}:2: {name} at character 13, in {quoted('10' + char + '000')}: tree-fairseq-parse and "
            "fairseq split tokens there but subword-nmt does not") in message
    assert "python data-prep/text_tools.py one-line < IN > OUT" in message and "retokeni" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]
    # the command named makes the text one that parses
    result = subprocess.run([sys.executable, "data-prep/text_tools.py", "one-line"], input=(tmp_path / "text").read_bytes(),
                            capture_output=True, check=True, cwd=Path(__file__).resolve().parents[1])
    (tmp_path / "text").write_bytes(result.stdout)
    assert run(tmp_path, "--parser", "balanced")[1] == trivial_tree("es kostet 10 000 euro .".split(), "balanced").to_bracketed()


@pytest.mark.parametrize("written_before", [True, False])
def test_an_output_that_is_a_link_is_written_at_its_file_with_its_record(tmp_path, written_before):
    # The rename of OUTPUT.tmp onto the link replaced the link by a file: the file it named kept
    # the trees of before (or was never written), and what reads it got the old trees.
    (tmp_path / "text").write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "trees"
    if written_before:
        target.write_text("(S old)\n", encoding="utf-8")
    link = tmp_path / "link"
    link.symlink_to(target)
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(link), "--parser", "balanced"])
    assert link.is_symlink()
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [" ".join(parse_tree(line).leaves) for line in lines][:3] == TEXT[:3]
    assert (tmp_path / "real" / "trees.parser.json").is_file()
