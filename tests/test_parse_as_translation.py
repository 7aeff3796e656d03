"""scripts/parse_as_translation.py: a --workdir holding files (a previous run's) or that is a file is
refused, naming it, before anything is written; it is not a run to resume."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("parse_as_translation", ROOT / "scripts" / "parse_as_translation.py")
parse_as_translation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parse_as_translation)


def _contents(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file()}


def test_a_previous_runs_workdir_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    # It rewrote WORKDIR/text/* and then stopped in fairseq-preprocess on the old dictionary (FileExistsError).
    ptb = tmp_path / "ptb.txt"
    ptb.write_text("(S (NP a) (VP b))\n")
    workdir = tmp_path / "work"
    (workdir / "data-bin-tree").mkdir(parents=True)
    (workdir / "data-bin-tree" / "dict.words.txt").write_text("a 1\n")
    (workdir / "text").mkdir()
    (workdir / "text" / "train.words").write_text("an earlier run's text\n")
    before = _contents(workdir)
    monkeypatch.setattr(parse_as_translation, "read_trees", lambda path: pytest.fail("went on"))
    with pytest.raises(SystemExit) as exit_info:
        parse_as_translation.main(["--ptb", str(ptb), "--workdir", str(workdir), "--updates", "1"])
    message = str(exit_info.value.code)
    assert message.startswith(f"parse_as_translation.py: error: --workdir {workdir} is not empty") and "another --workdir" in message
    assert "\n" not in message
    assert _contents(workdir) == before


def test_a_workdir_that_is_a_file_is_refused_and_an_empty_one_taken(tmp_path, monkeypatch):
    ptb = tmp_path / "ptb.txt"
    ptb.write_text("(S (NP a) (VP b))\n")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit, match=f"--workdir {tmp_path / 'file'} is a file"):
        parse_as_translation.main(["--ptb", str(ptb), "--workdir", str(tmp_path / "file")])
    assert (tmp_path / "file").read_text() == "x"

    def stop(path):
        raise SystemExit("read")

    monkeypatch.setattr(parse_as_translation, "read_trees", stop)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="^read$"):  # past the check, to the reading of --ptb
        parse_as_translation.main(["--ptb", str(ptb), "--workdir", str(tmp_path / "empty")])


def test_a_workdir_another_run_holds_is_refused(tmp_path, monkeypatch):
    # Two runs at once both found the folder empty, then wrote each other's text and data-bins.
    from tree_fairseq.cli.locking import output_lock

    ptb = tmp_path / "ptb.txt"
    ptb.write_text("(S (NP a) (VP b))\n")
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.setattr(parse_as_translation, "read_trees", lambda path: pytest.fail("went on"))
    with output_lock(str(workdir), "--workdir"):
        with pytest.raises(SystemExit) as exit_info:
            parse_as_translation.main(["--ptb", str(ptb), "--workdir", str(workdir)])
    assert "is being written by another run" in str(exit_info.value.code)
    assert not any(workdir.iterdir())


@pytest.mark.parametrize("option", [["--updates", "0"], ["--batch-size", "0"], ["--dropout", "1.5"], ["--lr", "0"]])
def test_numbers_out_of_range_are_refused(option, capsys):
    # --updates 0 went to fairseq as --max-update 0, its "no limit": the models trained without end
    with pytest.raises(SystemExit) as exit_info:
        parse_as_translation.parse_args(option)
    assert exit_info.value.code == 2 and option[0] in capsys.readouterr().err
