"""scripts/for2lam.py as a command: its --workdir (new or empty, one run at a time) and its numbers."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_for2lam():
    spec = importlib.util.spec_from_file_location("for2lam_script", ROOT / "scripts" / "for2lam.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _contents(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file()}


def test_a_previous_runs_workdir_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    # fairseq-train went on from the previous run's checkpoint_last.pt (a seed-2 run reported 20 updates on a
    # model of 40 begun with seed 1), and a refused run had already rewritten text/
    for2lam = load_for2lam()
    workdir = tmp_path / "work"
    (workdir / "checkpoints").mkdir(parents=True)
    (workdir / "checkpoints" / "checkpoint_last.pt").write_bytes(b"an earlier run's model")
    (workdir / "text").mkdir()
    (workdir / "text" / "train.for").write_text("an earlier run's text\n")
    before = _contents(workdir)
    monkeypatch.setattr(for2lam, "run", lambda *args: pytest.fail("went on"))
    with pytest.raises(SystemExit) as exit_info:
        for2lam.main(["--workdir", str(workdir), "--train", "6", "--test", "4", "--updates", "1", "--seed", "2"])
    assert f"--workdir {workdir} is not empty" in str(exit_info.value.code)
    assert _contents(workdir) == before


def test_a_workdir_that_is_a_file_or_held_is_refused(tmp_path, monkeypatch):
    from tree_fairseq.cli.locking import output_lock

    for2lam = load_for2lam()
    monkeypatch.setattr(for2lam, "run", lambda *args: pytest.fail("went on"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit) as exit_info:  # was a NotADirectoryError traceback
        for2lam.main(["--workdir", str(tmp_path / "file"), "--train", "6", "--test", "4"])
    assert f"--workdir {tmp_path / 'file'} is a file" in str(exit_info.value.code)
    assert (tmp_path / "file").read_text() == "x"
    (tmp_path / "held").mkdir()
    with output_lock(str(tmp_path / "held"), "--workdir"):
        with pytest.raises(SystemExit) as exit_info:
            for2lam.main(["--workdir", str(tmp_path / "held"), "--train", "6", "--test", "4"])
    assert "is being written by another run" in str(exit_info.value.code)
    assert not any((tmp_path / "held").iterdir())


def test_a_workdir_that_is_a_link_to_nothing_or_under_a_file_is_refused_in_one_line(tmp_path, monkeypatch):
    # both were tracebacks: FileExistsError, NotADirectoryError of locking.empty_folder's os.makedirs
    for2lam = load_for2lam()
    monkeypatch.setattr(for2lam, "run", lambda *args: pytest.fail("went on"))
    (tmp_path / "dangling").symlink_to(tmp_path / "missing" / "w")
    (tmp_path / "file").write_text("x")
    for workdir, message in ((tmp_path / "dangling", f"--workdir {tmp_path / 'dangling'} is a link to "
                              f"{tmp_path / 'missing' / 'w'}, which does not exist: make that folder, or give another "
                              "--workdir"),
                             (tmp_path / "file" / "w", f"--workdir {tmp_path / 'file' / 'w'}: cannot make the folder "
                              f"({tmp_path / 'file'} is not a folder)")):
        with pytest.raises(SystemExit) as exit_info:
            for2lam.main(["--workdir", str(workdir), "--train", "6", "--test", "4"])
        said = str(exit_info.value.code)
        assert said.startswith(f"for2lam.py: error: {message}") and "\n" not in said, said
    assert not (tmp_path / "missing").exists() and (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("option", [["--updates", "0"], ["--test", "0"], ["--train", "0"], ["--batch-size", "0"],
                                    ["--lr", "0"], ["--data-seed", "-1"]])
def test_numbers_out_of_range_are_refused(option, capsys):
    # --updates 0 went to fairseq as --max-update 0, its "no limit", and trained without end; --test 0 trained,
    # then died in fairseq-generate on an empty test split
    with pytest.raises(SystemExit) as exit_info:
        load_for2lam().parse_args(option)
    assert exit_info.value.code == 2 and option[0] in capsys.readouterr().err


def test_a_test_split_left_empty_is_refused_before_training(tmp_path, monkeypatch):
    for2lam = load_for2lam()
    monkeypatch.setattr(for2lam, "for2lam_pairs", lambda seed, count: [(type("S", (), {"leaves": ("x",)})(), None)])
    with pytest.raises(SystemExit, match="all 1 test programs are training programs"):
        for2lam.write_data(for2lam.parse_args(["--train", "1", "--test", "1"]), tmp_path)
