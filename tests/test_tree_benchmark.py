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


def small_work(tmp_path) -> Path:
    from tree_fairseq import synthetic

    work = tmp_path / "work"
    synthetic.make(synthetic.get_parser().parse_args(
        ["--out", str(work / "data"), "--train", "40", "--valid", "8", "--test", "8", "--seed", "1"]))
    return work


def model_state(checkpoint: Path) -> dict:
    import torch

    return torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]


@pytest.mark.slow
def test_a_run_stopped_before_its_result_is_redone_from_the_start(tmp_path):
    """A run killed after its checkpoint but before its result: the rerun gives the model an
    uninterrupted run gives. It resumed checkpoint_last.pt, saved without the optimizer state, so
    fairseq counted from 0 again and trained the whole budget on top of the partial model."""
    import torch

    benchmark = load_benchmark()
    work = small_work(tmp_path)
    argv = ["--work", str(work), "--runs", "transformer/text", "--seeds", "1", "--updates", "3"]
    benchmark.main(argv)
    run_dir = work / "runs" / "3updates" / "transformer" / "text" / "seed1"
    uninterrupted = model_state(run_dir / "checkpoint_last.pt")
    (run_dir / "result.json").unlink()  # as if killed between the training and the scoring
    benchmark.main(argv)
    rerun = model_state(run_dir / "checkpoint_last.pt")
    assert all(torch.equal(uninterrupted[key], rerun[key]) for key in uninterrupted)
    assert (run_dir / "train.log").read_text().count("done training") == 1
