"""scripts/tree_benchmark.py as a command: its options, its runs' folders and its exit status."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "tree_benchmark.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("tree_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("option", [["--updates", "0"], ["--updates", "-5"], ["--jobs", "0"], ["--curve-every", "0"],
                                    ["--minutes", "-1"], ["--seeds", "-1"], ["--data-seed", "x"]])
def test_numbers_out_of_range_are_refused(tmp_path, option, capsys):
    # --updates 0 went to fairseq as --max-update 0, its "no limit": the run trained without end
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(tmp_path / "work"), *option, "--runs", "nosuch/text"])
    assert exit_info.value.code == 2 and option[0] in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_work_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "work").write_text("")
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(tmp_path / "work"), "--runs", "transformer/text"])
    assert exit_info.value.code == 2 and "is a file" in capsys.readouterr().err
