"""tree_fairseq.cli.files: a file is written whole or not at all, with open()'s permissions, and two
writers of one path at once never mix their contents."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from tree_fairseq.cli import files

ROOT = Path(__file__).resolve().parents[1]


def test_a_file_is_written_whole_with_the_permissions_open_would_give(tmp_path):
    path = tmp_path / "out.json"
    previous = os.umask(0o027)
    try:
        files.write_json(path, {"b": 1, "a": [1, 2]}, sort_keys=True)
    finally:
        os.umask(previous)
    assert path.read_text(encoding="utf-8") == '{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}\n'
    assert path.stat().st_mode & 0o777 == 0o640  # 0666 less the umask, not a temporary file's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    files.write_lines(path, ["x", "y"])  # replaces it
    assert path.read_text(encoding="utf-8") == "x\ny\n"


def test_a_body_that_fails_leaves_the_earlier_file_and_no_partial_one(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("earlier\n")
    for locked in (False, True):
        with pytest.raises(RuntimeError):
            with files.replacing(path, locked) as partial:
                Path(partial).write_text("half")
                raise RuntimeError("stopped")
        assert path.read_text() == "earlier\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_two_writers_at_once_each_write_their_own_partial_file(tmp_path):
    path = tmp_path / "out.txt"
    with files.replacing(path) as first:
        with files.replacing(path) as second:
            assert first != second and os.path.dirname(first) == os.path.dirname(second) == str(tmp_path)
            Path(first).write_text("first\n" * 1000)
            Path(second).write_text("second\n")
        assert path.read_text() == "second\n"
    assert path.read_text() == "first\n" * 1000  # the last rename wins, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_locked_writer_uses_a_name_the_next_run_can_find(tmp_path):
    path = tmp_path / "out.txt"
    with files.replacing(path, locked=True) as partial:
        assert partial == str(path) + ".tmp"
        Path(partial).write_text("whole\n")
    assert path.read_text() == "whole\n" and not Path(partial).exists()


def test_sigterm_while_writing_removes_the_partial_file_and_keeps_the_earlier_one(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("earlier\n")
    script = ("import os, signal, sys\n"
              "import tree_fairseq_console\n"
              "from tree_fairseq.cli import files\n"
              "with files.replacing(sys.argv[1]) as partial:\n"
              "    open(partial, 'w').write('half')\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    open(partial, 'a').write(' and more')\n")
    result = subprocess.run([sys.executable, "-c", script, str(path)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == -signal.SIGTERM, result.stderr[-2000:]
    assert path.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0])
def test_the_umask_is_read_without_changing_it(mask):
    previous = os.umask(mask)
    try:
        assert files.current_umask() == mask
        assert os.umask(mask) == mask  # still set
    finally:
        os.umask(previous)


def test_an_output_that_is_not_a_plain_file_or_leads_to_a_device_is_refused(tmp_path):
    """check_output refuses what the rename of ``replacing`` would put a file in place of: a folder,
    a pipe, a link into /dev or /proc (``/dev/stdout`` redirected to a file is a plain file once
    followed: replacing the link would break the device), also through a linked folder. The links
    are the test's own, in its folder: nothing outside it is touched."""
    pipe, to_pipe, to_device, devices = (tmp_path / name for name in ("pipe", "to-pipe", "to-null", "devices"))
    os.mkfifo(pipe)
    to_pipe.symlink_to(pipe)
    to_device.symlink_to("/dev/null")
    devices.symlink_to("/dev")
    for output, kind in ((tmp_path, "a folder"), (pipe, "not a plain file"), (to_pipe, "not a plain file"),
                         (to_device, "not a plain file"), (devices / "null", "not a plain file"),
                         (devices / "no-such-file", "not a plain file")):
        with pytest.raises(ValueError) as refused:
            files.check_output("--json", str(output), [])
        assert str(refused.value) == f"--json {output} is {kind}: name a file"
    assert os.path.islink(to_device) and os.readlink(to_device) == "/dev/null"
    # a plain file, a link to one, a new name: accepted
    plain = tmp_path / "plain.json"
    plain.write_text("{}\n")
    (tmp_path / "to-plain").symlink_to(plain)
    for output in (plain, tmp_path / "to-plain", tmp_path / "new.json"):
        files.check_output("--json", str(output), [])


def test_a_link_to_a_file_not_yet_written_is_that_file(tmp_path):
    """same_file follows links when a file does not exist yet: an input given as a link to the
    output (both missing) names the output, as the output named through a linked folder does."""
    (tmp_path / "link").symlink_to(tmp_path / "out.json")
    (tmp_path / "folder").symlink_to(tmp_path)
    assert files.same_file(tmp_path / "link", tmp_path / "out.json")
    assert files.same_file(tmp_path / "folder" / "out.json", tmp_path / "out.json")
    assert not files.same_file(tmp_path / "other.json", tmp_path / "out.json")
    with pytest.raises(ValueError, match="is an input"):
        files.check_output("--json", str(tmp_path / "out.json"), [("--hyp", str(tmp_path / "link"))])


@pytest.mark.parametrize("locked", [False, True])
def test_an_output_that_is_a_link_is_written_at_the_file_it_leads_to(tmp_path, locked):
    """Writing through a symlink changes the file it names and keeps the link a link (the rename
    onto the link replaced it by a regular file, the file it named left stale); a dangling link,
    to a file not yet written, makes that file."""
    (tmp_path / "res").mkdir()
    real = tmp_path / "res" / "real.json"
    real.write_text("stale\n")
    link, dangling = tmp_path / "link.json", tmp_path / "dangling.json"
    link.symlink_to(Path("res") / "real.json")
    dangling.symlink_to(tmp_path / "res" / "new.json")
    files.write_json(link, {"score": 1}, locked=locked)
    files.write_lines(dangling, ["a", "b"], locked=locked)
    assert link.is_symlink() and os.readlink(link) == os.path.join("res", "real.json")
    assert real.read_text() == '{\n "score": 1\n}\n'
    assert dangling.is_symlink() and (tmp_path / "res" / "new.json").read_text() == "a\nb\n"
    assert sorted(os.listdir(tmp_path / "res")) == ["new.json", "real.json"]
    # check_output looks for the folder of the file the link leads to
    (tmp_path / "nowhere.json").symlink_to(tmp_path / "no-folder" / "out.json")
    with pytest.raises(ValueError, match=f"no folder {tmp_path / 'no-folder'} to write it in"):
        files.check_output("--json", str(tmp_path / "nowhere.json"), [])


def test_a_byte_order_mark_is_refused_naming_the_file_and_line_1(tmp_path):
    """A UTF-8 byte-order mark was read as part of the first word: that sentence scored against
    another word (BLEU 86.28 for a --ref-detok equal to the hypotheses). It is refused as
    non-UTF-8 bytes are, saying how to remove it; the same text without it reads."""
    text = "the cat sat on the mat .\na dog ran .\n"
    (tmp_path / "bom").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        files.read_lines(str(tmp_path / "bom"))
    assert str(refused.value) == (f"{tmp_path / 'bom'} line 1 starts with a UTF-8 byte-order mark (bytes EF BB BF): "
                                  rf"remove it, e.g. sed -i '1s/^\xEF\xBB\xBF//' {tmp_path / 'bom'}")
    assert files.read_lines(str(tmp_path / "plain")) == ["the cat sat on the mat .", "a dog ran ."]
    for option in ("--hyp", "--ref", "--ref-detok"):
        given = {"--hyp": "plain", "--ref": "plain", "--ref-detok": "plain", option: "bom"}
        result = subprocess.run([sys.executable, "-m", "tree_fairseq.cli.score", "--metrics", "sacrebleu"]
                                + [word for pair in given.items() for word in (pair[0], str(tmp_path / pair[1]))],
                                capture_output=True, text=True, cwd=tmp_path, env=helpers.subprocess_env())
        assert result.returncode == 1, (option, result.stderr[-2000:])
        assert f"error: {tmp_path / 'bom'} line 1 starts with a UTF-8 byte-order mark" in result.stderr, option


def test_a_link_to_a_device_is_replaced_not_followed(tmp_path):
    # /dev/stdout resolves to whatever the standard output is, a regular file when it is redirected:
    # following the link would write the output over that file (the callers refuse such outputs up
    # front with check_output; replacing() itself must not follow one either).
    log = tmp_path / "log"
    log.write_text("the log\n", encoding="utf-8")
    link = tmp_path / "out.json"
    link.symlink_to("/dev/stdout")
    with open(log, "a", encoding="utf-8") as redirected:
        saved = os.dup(1)
        os.dup2(redirected.fileno(), 1)
        try:
            files.write_json(str(link), {"a": 1})
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    assert log.read_text(encoding="utf-8") == "the log\n"
    assert not link.is_symlink() and json.loads(link.read_text(encoding="utf-8")) == {"a": 1}
