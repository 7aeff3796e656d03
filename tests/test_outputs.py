"""Outputs that cannot be silently wrong: one run at a time per output (tree-fairseq-parse
--output, tree-fairseq-preprocess --destdir), no output over an input or onto a device, and a
line break other than LF inside a line refused by every reader of the corpus."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tree_fairseq.cli import parse as parse_cli
from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.cli.locking import output_lock


def _parse(tmp_path, *args, output=None):
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(output or tmp_path / "trees"), *args])


def _refused(function, *args, **kwargs):
    with pytest.raises(SystemExit) as exit_info:
        function(*args, **kwargs)
    return str(exit_info.value.code)


def test_a_second_parse_run_on_the_same_output_is_refused_naming_the_first(tmp_path):
    lines = [f"w{i} x{i} y{i} z{i}" for i in range(400)]
    (tmp_path / "text").write_text("".join(line + "\n" for line in lines))
    command = [sys.executable, "-m", "tree_fairseq.cli.parse", "--input", str(tmp_path / "text"), "--output",
               str(tmp_path / "trees"), "--parser", "balanced", "--chunk-size", "1"]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "trees.lock").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "trees.lock").exists(), "the first run never took its lock"
    message = _refused(_parse, tmp_path, "--parser", "left")
    assert f"--output {tmp_path / 'trees'} is being written by another run (process {first.pid}" in message
    assert first.wait(timeout=300) == 0, first.stderr.read()
    trees = (tmp_path / "trees").read_text().splitlines()
    assert len(trees) == len(lines) and trees[0] == "(X (X w0 x0) (X y0 z0))"  # the first run's trees, all
    assert not (tmp_path / "trees.lock").exists()


def test_no_input_is_a_file_the_run_writes_or_removes_beside_its_output(tmp_path):
    """An input named OUTPUT.tmp was deleted as an earlier run's leftover; one named
    OUTPUT.parser.json was replaced by the record; heads named so collided with the record."""
    text = "a b c\n"
    for name in ("out.tmp", "out.failures.tmp", "out.parser.json.tmp", "out.parser.json", "out.failures"):
        (tmp_path / name).write_text(text)
        message = _refused(parse_cli.main, ["--input", str(tmp_path / name), "--output", str(tmp_path / "out"),
                                            "--parser", "balanced"])
        assert f"--input {tmp_path / name} is {tmp_path / name}, a file this run writes or removes" in message
        assert (tmp_path / name).read_text() == text
    (tmp_path / "text").write_text(text)
    message = _refused(parse_cli.main, ["--input", str(tmp_path / "text"), "--output", str(tmp_path / "out"),
                                        "--parser", "balanced", "--heads-control", "next",
                                        "--heads", str(tmp_path / "out.parser.json")])
    assert "is a file this run writes beside --output" in message
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.parts").exists()


def test_a_lock_of_a_dead_run_is_taken_over(tmp_path, capsys):
    (tmp_path / "text").write_text("a b c\n")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "trees.lock").write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(),
                                                      "started": "then", "command": "killed"}))
    _parse(tmp_path, "--parser", "balanced")
    assert (tmp_path / "trees").read_text() == "(X (X a b) c)\n"
    assert "taking over the lock" in capsys.readouterr().err
    assert not (tmp_path / "trees.lock").exists()


def test_a_lock_is_released_when_the_run_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with output_lock(str(tmp_path / "out"), "--output"):
            raise RuntimeError
    assert not (tmp_path / "out.lock").exists()


def test_the_output_cannot_be_the_input_or_a_device(tmp_path):
    (tmp_path / "text").write_text("a b c\n")
    (tmp_path / "parsed").write_text("(S a b c)\n")
    assert "is the --input file" in _refused(_parse, tmp_path, "--parser", "balanced", output=tmp_path / "text")
    os.symlink(tmp_path / "text", tmp_path / "link")
    assert "is the --input file" in _refused(_parse, tmp_path, "--parser", "balanced", output=tmp_path / "link")
    assert "is the --trees file" in _refused(_parse, tmp_path, "--parser", "bracketed", "--trees",
                                             str(tmp_path / "parsed"), output=tmp_path / "parsed")
    # Links of our own to the devices: were the check to fail, the run would replace these links,
    # not the machine's /dev/stdout and /dev/null.
    os.symlink("/dev/stdout", tmp_path / "stdout")
    os.symlink("/proc/self/fd/1", tmp_path / "fd1")
    os.symlink("/dev/null", tmp_path / "null")
    for device in ("stdout", "fd1", "null"):
        assert "is not a regular file" in _refused(_parse, tmp_path, "--parser", "balanced", output=tmp_path / device)
        assert os.path.islink(tmp_path / device)
    assert "is not a regular file" in _refused(_parse, tmp_path, "--parser", "balanced", output="-")
    assert (tmp_path / "text").read_text() == "a b c\n" and (tmp_path / "parsed").read_text() == "(S a b c)\n"


def test_a_pipe_as_input_is_refused_as_such(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    message = _refused(parse_cli.main, ["--input", str(tmp_path / "fifo"), "--output", str(tmp_path / "trees"),
                                        "--parser", "balanced"])
    assert "is not a regular file (a pipe or a device)" in message


@pytest.mark.parametrize("char", ["\r", "\u2028", "\x0b"])
def test_a_line_break_inside_a_line_stops_parse_naming_file_and_line(tmp_path, char):
    (tmp_path / "text").write_text(f"a b\nc{char}d e\nf g\n", encoding="utf-8", newline="")
    message = _refused(_parse, tmp_path, "--parser", "balanced")
    assert f"{tmp_path / 'text'}:2: U+{ord(char):04X} inside the line" in message
    assert not (tmp_path / "trees").exists()


def test_crlf_line_endings_are_line_endings(tmp_path):
    (tmp_path / "text").write_bytes(b"a b c\r\nd e\r\n")
    _parse(tmp_path, "--parser", "right")
    assert (tmp_path / "trees").read_text().splitlines() == ["(X a (X b c))", "(X d e)"]


def _corpus(directory, source_lines):
    directory.mkdir(exist_ok=True)
    (directory / "train.de").write_text("".join(line + "\n" for line in source_lines), encoding="utf-8", newline="")
    (directory / "train.en").write_text("".join(f"t{i}\n" for i in range(len(source_lines))))
    (directory / "train.tree.de").write_text("".join(f"(X {' '.join(line.split())})\n" for line in source_lines),
                                             encoding="utf-8")


def _preprocess(directory, destdir):
    preprocess_cli.main(["--source-lang", "de", "--target-lang", "en", "--trainpref", str(directory / "train"),
                         "--destdir", str(destdir), "--workers", "1"])


def test_preprocess_refuses_a_carriage_return_inside_a_line(tmp_path):
    _corpus(tmp_path / "text", ["a b", "c\rd", "e f"])
    message = _refused(_preprocess, tmp_path / "text", tmp_path / "bin")
    assert f"{tmp_path / 'text' / 'train.de'}:2: U+000D inside the line" in message
    assert not (tmp_path / "bin").exists()


def test_a_second_preprocess_run_on_the_same_destdir_is_refused(tmp_path):
    _corpus(tmp_path / "text", ["a b", "c d"])
    with output_lock(str(tmp_path / "bin"), "--destdir"):
        message = _refused(_preprocess, tmp_path / "text", tmp_path / "bin")
    assert f"--destdir {tmp_path / 'bin'} is being written by another run (process {os.getpid()}" in message
    assert not (tmp_path / "bin").exists()
    _preprocess(tmp_path / "text", tmp_path / "bin")
    assert (tmp_path / "bin" / "dict.de.nodes.txt").exists() and not (tmp_path / "bin.lock").exists()


def test_a_second_preprocess_run_on_the_same_destdir_under_another_name_is_refused(tmp_path):
    """The lock is of the folder, not of its name: a link to it (or to a folder above it) finds it."""
    _corpus(tmp_path / "text", ["a b", "c d"])
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    with output_lock(str(tmp_path / "real" / "bin"), "--destdir"):
        message = _refused(_preprocess, tmp_path / "text", tmp_path / "alias" / "bin")
    assert f"--destdir {tmp_path / 'alias' / 'bin'} is being written by another run (process {os.getpid()}" in message
    assert not (tmp_path / "real" / "bin").exists()
    (tmp_path / "bin").mkdir()
    os.symlink(tmp_path / "bin", tmp_path / "bin-link")
    with output_lock(str(tmp_path / "bin"), "--destdir"):
        assert "is being written by another run" in _refused(_preprocess, tmp_path / "text", tmp_path / "bin-link")


def test_two_parse_runs_writing_the_same_heads_file_are_refused(tmp_path):
    """Two runs with their own --output but one --heads would each write the heads: one run's would
    be lost, the other's beside trees that are not theirs."""
    (tmp_path / "text").write_text("a b c\n")
    with output_lock(str(tmp_path / "heads"), "--heads"):
        message = _refused(_parse, tmp_path, "--parser", "balanced", "--heads-control", "next", "--heads",
                           str(tmp_path / "heads"), output=tmp_path / "trees2")
    assert f"--heads {tmp_path / 'heads'} is being written by another run (process {os.getpid()}" in message
    assert not (tmp_path / "trees2").exists() and not (tmp_path / "heads").exists()
    assert not (tmp_path / "trees2.lock").exists()  # the output's lock, taken first, is let go
    _parse(tmp_path, "--parser", "balanced", "--heads-control", "next", "--heads", str(tmp_path / "heads"),
           output=tmp_path / "trees2")
    assert (tmp_path / "heads").read_text() == "2 3 0\n" and not (tmp_path / "heads.lock").exists()


@pytest.mark.parametrize("tree, label", [("(S (<pad> a b) c)", "<pad>"), ("(S (@BPE a b) c)", "@BPE"),
                                         ("(S (NP (<unk> a) (NN b)) (VB c))", "<unk>")])
def test_preprocess_refuses_reserved_labels_naming_file_and_line(tmp_path, tree, label):
    _corpus(tmp_path / "text", ["a b c", "a b c"])
    (tmp_path / "text" / "train.tree.de").write_text(f"(S a b c)\n{tree}\n")
    message = _refused(_preprocess, tmp_path / "text", tmp_path / "bin")
    assert f"{tmp_path / 'text' / 'train.tree.de'}:2: the tree uses the reserved label(s) {label}" in message


def test_attention_mass_refuses_a_json_that_is_an_input(tmp_path):
    """--json was opened with a plain open(..., "w"): --json naming the checkpoint (or a file of the
    data-bin) overwrote it with the table. It is refused before the model is loaded."""
    from tree_fairseq.analysis import attention

    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "dict.src.txt").write_text("a 1\n")
    victim = tmp_path / "victim.pt"
    victim.write_bytes(b"checkpoint")
    assert _refused(attention.main, [str(data), "--path", str(victim), "--json", str(victim)]) == (
        f"attention_mass.py: error: --json {victim} is an input (--path): writing it would replace it; "
        "name another file")
    assert _refused(attention.main, [str(data), "--path", str(victim), "--json", str(data / "dict.src.txt")]).endswith(
        f"is an input (DATA {data}): writing it would replace it; name another file")
    assert _refused(attention.main, [str(data), "--path", str(victim), "--json", str(data)]).endswith(
        f"--json {data} is a folder: name a file")
    assert victim.read_bytes() == b"checkpoint" and (data / "dict.src.txt").read_text() == "a 1\n"
    with pytest.raises(SystemExit) as exit_info:
        attention.main([str(data), "--path", str(victim), "--max-sentences", "0"])
    assert exit_info.value.code == 2


def test_draw_tree_attention_writes_the_png_it_names(tmp_path):
    """--output tnoext printed 'wrote tnoext' but wrote tnoext.png, --output t.jpg wrote a JPEG though
    the help says PNG. An --output not named *.png, and one that is an input or a folder, is refused
    before the model is loaded; the drawing is written as a PNG at exactly the path given."""
    import torch

    from tree_fairseq.analysis import drawing

    victim = tmp_path / "victim.pt"
    victim.write_bytes(b"checkpoint")
    data = tmp_path / "data-bin"
    data.mkdir()
    for name in ("tnoext", "t.jpg"):
        assert _refused(drawing.main, [str(data), "--path", str(victim), "--output", str(tmp_path / name)]) == (
            f"draw_tree_attention.py: error: --output {tmp_path / name}: the drawing is a PNG; name a file ending "
            "in .png")
    (tmp_path / "dir.png").mkdir()
    assert _refused(drawing.main, [str(data), "--path", str(victim), "--output", str(tmp_path / "dir.png")]).endswith(
        "is a folder: name a file")
    (tmp_path / "in.png").write_bytes(b"input")
    assert "is an input (--path)" in _refused(drawing.main, [str(data), "--path", str(tmp_path / "in.png"),
                                                             "--output", str(tmp_path / "in.png")])
    with pytest.raises(SystemExit) as exit_info:
        drawing.main([str(data), "--path", str(victim), "--output", str(tmp_path / "t.png"), "--layer", "0"])
    assert exit_info.value.code == 2
    assert sorted(os.listdir(tmp_path)) == ["data-bin", "dir.png", "in.png", "victim.pt"]

    pytest.importorskip("matplotlib")
    output = tmp_path / "t.PNG"
    drawing.draw(["a", "b", "</s>"], ["S"], torch.tensor([[0, 1]]), torch.tensor([0.5, 0.2, 0.2, 0.1]), "t",
                 str(output))
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(tmp_path)) == ["data-bin", "dir.png", "in.png", "t.PNG", "victim.pt"]
