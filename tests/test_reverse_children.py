"""scripts/reverse_children.py (tree_fairseq.analysis.reversed_children): every node's children
reversed, the text's words with them; the result binarises, and tree composition as its paper
prints it (no positions) translates it as the original while a model with positions does not;
bad inputs and outputs are refused with the file and line."""

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import helpers
import pytest
import torch
from test_preprocess_rows import varied_line

from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.analysis import reversed_children
from tree_fairseq.analysis.reversed_children import reverse_files, reverse_line
from tree_fairseq.trees import TreeError, read_bracketed

ROOT = Path(__file__).resolve().parents[1]


def test_a_hand_made_tree():
    tree = "( (S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP the mat))) (. .)) )"
    assert reverse_line(tree, "the c@@ at sat on the m@@ a@@ t .") == (
        "( (S (. .) (VP (PP (NP mat the) (IN on)) (VBD sat)) (NP (NN cat) (DT the))))",
        ". m@@ a@@ t the on sat c@@ at the",
    )


def test_two_trees_on_a_line_and_sentencepiece():
    assert reverse_line("(A x) (B y z)", "▁x ▁y ▁z", "sentencepiece") == ("(B z y) (A x)", "▁z ▁y ▁x")
    assert reverse_line("(A xx) (B y)", "▁x x ▁y", "sentencepiece") == ("(B y) (A xx)", "▁y ▁x x")


def test_traces_are_not_words():
    tree, text = reverse_line("(S (NP (-NONE- *T*-1)) (VP (VB go) (NN home)))", "go home")
    assert (tree, text) == ("(S (VP (NN home) (VB go)) (NP (-NONE- *T*-1)))", "home go")


def _unordered(raw):
    """A tree as an unordered tree: each node a sorted tuple of its children's forms."""
    if raw.is_word:
        return raw.label
    return (raw.label, tuple(sorted((_unordered(child) for child in raw.children), key=repr)))


def test_varied_trees_keep_their_unordered_shape_and_reverse_back():
    rng = random.Random(7)
    refused = 0
    for _ in range(2000):
        pieces, _, tree, _ = varied_line(rng)
        try:
            new_tree, new_text = reverse_line(tree, pieces)
        except TreeError as error:
            assert "a node without a label would begin with the word" in str(error)
            refused += 1
            continue
        assert sorted(_unordered(t) for t in read_bracketed(new_tree)) == sorted(
            _unordered(t) for t in read_bracketed(tree))
        assert sorted(new_text.split()) == sorted(pieces.split())
        words = [w for t in read_bracketed(new_tree) for w in t.words() if not w.startswith("*T*")]
        assert "".join(new_text.split()).replace("@@", "") == "".join(words).replace("-LRB-", "(")
        again_tree, again_text = reverse_line(new_tree, new_text)
        assert again_text == pieces
        assert [_unordered(t) for t in read_bracketed(again_tree)] == [_unordered(t) for t in read_bracketed(tree)]
        assert read_bracketed(again_tree) == read_bracketed(tree)
    assert 0 < refused < 100  # the generator's unlabelled nodes that end with a word


def test_an_unlabelled_node_that_would_begin_with_a_word_is_refused():
    with pytest.raises(TreeError, match="without a label would begin with the word 'b'"):
        reverse_line("(S ( (A a) b))", "a b")
    assert reverse_line("( (S a b) )", "a b") == ("( (S b a))", "b a")


def test_a_deep_tree():
    depth = 5000
    tree = "(X " * depth + "a b" + ")" * depth
    new_tree, new_text = reverse_line(tree, "a b")
    assert new_text == "b a" and new_tree == "(X " * depth + "b a" + ")" * depth


def _files(tmp_path, trees, text):
    (tmp_path / "t.tree").write_text("".join(line + "\n" for line in trees))
    (tmp_path / "t.txt").write_text("".join(line + "\n" for line in text))
    return str(tmp_path / "t.tree"), str(tmp_path / "t.txt")


def _outputs(tmp_path):
    return str(tmp_path / "out.tree"), str(tmp_path / "out.txt")


def _left(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out"))


def test_files_and_the_command_line(tmp_path, capsys):
    trees, text = _files(tmp_path, ["(S (A a) (B b))", "(S c)"], ["a b", "c"])
    out_trees, out_text = _outputs(tmp_path)
    assert reversed_children.main(["--trees", trees, "--text", text, "--out-trees", out_trees,
                                   "--out-text", out_text]) == 0
    assert Path(out_trees).read_text() == "(S (B b) (A a))\n(S c)\n"
    assert Path(out_text).read_text() == "b a\nc\n"
    assert "2 sentences reversed" in capsys.readouterr().err
    assert _left(tmp_path) == ["out.tree", "out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert {Path(path).stat().st_mode & 0o777 for path in (out_trees, out_text)} == {0o666 & ~umask}
    # an existing output is refused and kept
    assert reversed_children.main(["--trees", trees, "--text", text, "--out-trees", out_trees,
                                   "--out-text", str(tmp_path / "other.txt")]) == 1
    assert "--out-trees" in capsys.readouterr().err and Path(out_trees).read_text().startswith("(S (B")


def test_an_output_in_a_missing_folder_is_refused_naming_the_option(tmp_path, capsys):
    """--out-trees nodir/o.tree reported the temporary partial file's name (mkstemp's error), not the
    option: it is refused naming the option and the missing folder, and nothing is written."""
    trees, text = _files(tmp_path, ["(S (A a) (B b))"], ["a b"])
    for option, missing in (("--out-trees", tmp_path / "nodir" / "o.tree"), ("--out-text", tmp_path / "nodir" / "o")):
        outputs = dict(zip(("--out-trees", "--out-text"), _outputs(tmp_path)), **{option: str(missing)})
        assert reversed_children.main(["--trees", trees, "--text", text, *(x for pair in outputs.items()
                                                                           for x in pair)]) == 1
        assert capsys.readouterr().err == (f"reverse_children: error: {option} {missing}: no folder "
                                           f"{tmp_path / 'nodir'} to write it in\n")
        assert _left(tmp_path) == []


def test_python_m_runs_the_module(tmp_path):
    """Without its ``__main__`` block, ``python -m`` imported the module and exited 0, writing nothing."""
    command = [sys.executable, "-m", "tree_fairseq.analysis.reversed_children"]
    shown = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0 and "usage:" in shown.stdout and "--out-trees" in shown.stdout
    trees, text = _files(tmp_path, ["(S (A a) (B b))"], ["a b"])
    out_trees, out_text = _outputs(tmp_path)
    run = subprocess.run([*command, "--trees", trees, "--text", text, "--out-trees", out_trees, "--out-text", out_text],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert Path(out_trees).read_text() == "(S (B b) (A a))\n" and Path(out_text).read_text() == "b a\n"
    assert "1 sentences reversed" in run.stderr


@pytest.mark.parametrize("trees, text, message", [
    (["(S a b)", "(S c)"], ["a b", "c d"], "t.tree:2 and {d}/t.txt:2: the trees have 1 words, the text 2"),
    (["(S a b)", "(S c"], ["a b", "c"], "t.tree:2 and {d}/t.txt:2: unbalanced brackets"),
    (["(S a b)", ""], ["a b", "c"], "t.tree:2 and {d}/t.txt:2: empty line"),
    (["(S a b)", "(S c)"], ["a b"], "t.tree has more lines than {d}/t.txt (1)"),
    (["(S a b)"], ["a b", "c"], "t.txt has more lines than {d}/t.tree (1)"),
])
def test_bad_input_names_the_file_and_line_and_leaves_no_output(tmp_path, trees, text, message):
    paths = _files(tmp_path, trees, text)
    with pytest.raises(ValueError) as error:
        reverse_files(*paths, *_outputs(tmp_path), "subword_nmt")
    assert message.format(d=tmp_path) in str(error.value)
    assert _left(tmp_path) == []


def test_text_that_is_not_utf8_names_the_file_and_line(tmp_path):
    trees, text = _files(tmp_path, ["(S a)", "(S b)"], ["a", "b"])
    Path(text).write_bytes(b"a\n\xff\n")
    with pytest.raises(ValueError, match=rf"{text}:2: not UTF-8 text"):
        reverse_files(trees, text, *_outputs(tmp_path), "subword_nmt")
    assert _left(tmp_path) == []


def test_a_file_given_twice_is_refused(tmp_path):
    trees, text = _files(tmp_path, ["(S a)"], ["a"])
    out_trees, out_text = _outputs(tmp_path)
    for args in [(trees, trees, out_trees, out_text), (trees, text, out_trees, out_trees),
                 (trees, text, text, out_text), (trees, text, out_trees, trees)]:
        with pytest.raises(ValueError, match="four different files"):
            reverse_files(*args, "subword_nmt")
    os.symlink(text, tmp_path / "link.txt")
    with pytest.raises(ValueError, match="four different files"):
        reverse_files(trees, str(tmp_path / "link.txt"), out_trees, text, "subword_nmt")
    assert Path(text).read_text() == "a\n" and _left(tmp_path) == []


def test_of_two_runs_at_once_the_second_to_finish_is_refused(tmp_path, monkeypatch):
    trees, text = _files(tmp_path, ["(S a b)"], ["a b"])
    out_trees, out_text = _outputs(tmp_path)
    real = reversed_children.reverse_line

    def other_run_finishes_meanwhile(*args):
        monkeypatch.setattr(reversed_children, "reverse_line", real)
        reverse_files(trees, text, out_trees, out_text, "subword_nmt")  # the other run, start to end
        return real(*args)

    monkeypatch.setattr(reversed_children, "reverse_line", other_run_finishes_meanwhile)
    with pytest.raises(ValueError, match="written by another run meanwhile"):
        reverse_files(trees, text, out_trees, out_text, "subword_nmt")
    assert Path(out_trees).read_text() == "(S b a)\n" and Path(out_text).read_text() == "b a\n"
    assert _left(tmp_path) == ["out.tree", "out.txt"]


def test_a_run_killed_half_way_leaves_no_output(tmp_path):
    """SIGTERM while the run reads a slow input (a FIFO that is never closed)."""
    fifo = tmp_path / "slow.tree"
    os.mkfifo(fifo)
    (tmp_path / "t.txt").write_text("a\n" * 10)
    out_trees, out_text = _outputs(tmp_path)
    run = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "reverse_children.py"), "--trees", str(fifo),
                            "--text", str(tmp_path / "t.txt"), "--out-trees", out_trees, "--out-text", out_text],
                           cwd=ROOT, stderr=subprocess.PIPE, text=True)
    with open(fifo, "w") as writer:
        writer.write("(S a)\n" * 5)
        writer.flush()
        # the run opened the FIFO: its partial outputs exist, and it waits for more lines
        partial = sorted(p.name.rsplit("-", 1)[0] for p in tmp_path.iterdir() if ".partial-" in p.name)
        assert partial == ["out.tree.partial", "out.txt.partial"]
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == -signal.SIGTERM
    assert _left(tmp_path) == []


@pytest.mark.parametrize("leaves", ["embeddings", "contextual"])
def test_tree_composition_translates_the_reversed_source_as_the_original_only_without_positions(
        tiny_corpus, tiny_databin, tmp_path, leaves):
    """The reversed test split, binarised with the data-bin's dictionaries: the paper's tree
    composition (no positions) gives every sentence the same output distribution as the original;
    with positions (``--composition-leaves contextual``) it does not."""
    reversed_text = tmp_path / "text"
    reversed_text.mkdir()
    reverse_files(str(tiny_corpus / "test.tree.de"), str(tiny_corpus / "test.de"),
                  str(reversed_text / "test.tree.de"), str(reversed_text / "test.de"), "subword_nmt")
    (reversed_text / "test.en").write_bytes((tiny_corpus / "test.en").read_bytes())
    reversed_bin = tmp_path / "bin"
    preprocess_cli.main(["--source-lang", "de", "--target-lang", "en", "--testpref", str(reversed_text / "test"),
                         "--srcdict", str(tiny_databin / "dict.de.txt"), "--tgtdict", str(tiny_databin / "dict.en.txt"),
                         "--nodedict", str(tiny_databin / "dict.de.nodes.txt"), "--destdir", str(reversed_bin),
                         "--workers", "1"])
    flags = ("--composition-leaves", "contextual", "--encoder-layers", "1") if leaves == "contextual" else ()
    task, model = helpers.build(tiny_databin, *flags, arch="tree_composition_transformer_tiny")
    reversed_task, _ = helpers.build(reversed_bin, *flags, arch="tree_composition_transformer_tiny")
    indices = list(range(len(task.dataset("test"))))
    original, reordered = helpers.collate(task, indices), helpers.collate(reversed_task, indices)
    assert not original["net_input"]["src_tokens"].equal(reordered["net_input"]["src_tokens"])
    with torch.no_grad():
        outputs = [model(**batch["net_input"])[0] for batch in (original, reordered)]
    rows = [batch["id"].tolist() for batch in (original, reordered)]
    by_id = [dict(zip(ids, output)) for ids, output in zip(rows, outputs)]
    differences = torch.stack([(by_id[0][i] - by_id[1][i]).abs().max() for i in indices])
    if leaves == "embeddings":
        assert differences.max() < 1e-5
    else:
        assert (differences > 1e-3).sum() > len(indices) // 2
