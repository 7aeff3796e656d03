"""scripts/tree_benchmark.py as a command: its options, its runs' folders and its exit status."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tree_fairseq.cli import overriding

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


@pytest.mark.parametrize("option, twice", [(["--seeds", "1", "1"], "--seeds names 1 more than once"),
                                           (["--runs", "transformer/text", "transformer/text"],
                                            "--runs names transformer/text more than once")])
def test_a_run_named_twice_is_refused(tmp_path, option, twice, capsys):
    # --seeds 1 1 trained one folder twice ("seeds done 2/2"); with --jobs 2 both at once, and one died
    work = small_work(tmp_path)
    argv = overriding(["--work", str(work), "--runs", "transformer/text", "--jobs", "2", "--updates", "2"], option)
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(argv)
    assert exit_info.value.code == 2 and twice in capsys.readouterr().err
    assert not (work / "runs").exists()


def test_a_data_seed_other_than_works_is_refused(tmp_path, capsys):
    # the table came from the seed-1 data WORK held, under a command that asked for seed 2
    work = small_work(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(work), "--data-seed", "2", "--runs", "transformer/text"])
    assert exit_info.value.code == 2 and "was made with seed 1" in capsys.readouterr().err
    assert not (work / "runs").exists()


@pytest.mark.parametrize("run, said", [
    ("transformer/text/--max-update/5", "run 'transformer/text/--max-update/5': --max-update is the script's own"),
    ("transformer/text/--seed=3", "--seed is the script's own (set by --updates, --minutes, --seeds"),
    ("transformer/text/--lr/1e-3/--lr/5e-3", "run 'transformer/text/--lr/1e-3/--lr/5e-3': --lr is given twice"),
])
def test_a_runs_flag_that_fairseq_would_override_is_refused(tmp_path, run, said, capsys):
    """The script's own --max-update, --seed, ... follow a run's flags and won silently in
    fairseq-train (transformer/text/--max-update/5 trained --updates' count), as did the second of
    a flag the run gives twice. A run's flag still replaces a model default (--encoder-layers)."""
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(tmp_path / "work"), "--runs", run])
    assert exit_info.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "work").exists()
    flags = load_benchmark().train_flags(tmp_path, "tree_composition_transformer/gold/--encoder-layers/2", 1, 10,
                                         tmp_path / "save")
    assert flags[len(flags) - 1 - flags[::-1].index("--encoder-layers") + 1] == "2"  # the last one, which fairseq takes


def test_a_failed_run_sets_the_exit_status(tmp_path, capsys):
    # FAILED: was printed, and the command ended with status 0
    work = small_work(tmp_path)
    # a run whose flag fairseq-train refuses fails at once
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(work), "--runs", "transformer/text/--no-such-flag", "--updates", "2",
                                           "--seeds", "1"])
    assert exit_info.value.code and "1 of the runs failed" in str(exit_info.value.code)
    assert "FAILED:" in capsys.readouterr().err


def test_a_second_command_on_one_work_is_refused(tmp_path):
    from tree_fairseq.cli.locking import output_lock

    work = small_work(tmp_path)
    with output_lock(str(work), "--work"):
        with pytest.raises(SystemExit) as exit_info:
            load_benchmark().main(["--work", str(work), "--runs", "transformer/text", "--updates", "2"])
    assert "is being written by another run" in str(exit_info.value.code)
    assert not (work / "runs").exists()


def test_a_work_in_folders_yet_to_be_made_is_made(tmp_path, monkeypatch):
    benchmark = load_benchmark()
    monkeypatch.setattr(benchmark, "make", lambda args: sys.exit("made"))
    with pytest.raises(SystemExit, match="^made$"):  # past the lock, WORK.lock beside a WORK not there yet
        benchmark.main(["--work", str(tmp_path / "a" / "b" / "work"), "--runs", "transformer/text"])


def test_minutes_are_instead_of_updates(tmp_path, capsys):
    # --minutes 60 also passed --max-update 800: the time budget stopped at 800 updates
    benchmark = load_benchmark()
    flags = benchmark.train_flags(tmp_path, "transformer/text", 1, 800, tmp_path / "save", minutes=60)
    assert "--max-update" not in flags and flags[flags.index("--stop-time-hours") + 1] == "1.0"
    flags = benchmark.train_flags(tmp_path, "transformer/text", 1, 800, tmp_path / "save")
    assert flags[flags.index("--max-update") + 1] == "800" and "--stop-time-hours" not in flags
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(["--work", str(tmp_path / "work"), "--minutes", "1", "--updates", "5"])
    assert exit_info.value.code == 2 and "--minutes 1 is instead of --updates" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def finished(work: Path, folder: str, **result) -> Path:
    run_dir = work / "runs" / folder / "seed1"
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps({"seed": 1, "exact_match": 50.0, "bleu": 40.0, **result}))
    return run_dir


CURVE_UNLIKE = ", not every 2 updates (--curve-every)"


@pytest.mark.parametrize("folder, result, argv, unlike", [
    ("5updates/tree_transformer/gold", {"budget": "5updates", "updates": 5},
     ["--updates", "5", "--curve", "--curve-every", "2"], "its learning curve has points at no update" + CURVE_UNLIKE),
    ("5updates/tree_transformer/gold", {"budget": "5updates", "updates": 5, "curve": {"3": 1.0, "5": 50.0}},
     ["--updates", "5", "--curve", "--curve-every", "2"], "its learning curve has points at [3, 5]" + CURVE_UNLIKE),
    ("1min/tree_transformer/gold", {"budget": "1min", "updates": 5},  # capped at --updates, as before
     ["--minutes", "1"], "it stopped at 1 minutes or an update limit, whichever came first"),
])
def test_a_finished_run_other_than_the_commands_is_refused(tmp_path, capsys, folder, result, argv, unlike):
    # --curve was ignored for a finished run without one (rc 0, no curve table), and a --minutes result capped at
    # --updates updates was reused as the time budget's
    work = small_work(tmp_path)
    run_dir = finished(work, folder, run="tree_transformer/gold", **result)
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(work), "--runs", "tree_transformer/gold", "--seeds", "1", *argv])
    assert str(exit_info.value.code) == (
        f"tree_benchmark.py: error: {run_dir} holds a finished run other than this command's ({unlike}): "
        f"remove {run_dir} to run it again, or give another --work")
    assert sorted(path.name for path in run_dir.iterdir()) == ["result.json"]


def test_a_finished_run_with_what_the_command_asks_is_reused(tmp_path, capsys):
    work = small_work(tmp_path)
    finished(work, "5updates/tree_transformer/gold", run="tree_transformer/gold", budget="5updates", updates=5,
             max_update=5, curve={"2": 10.0, "4": 30.0, "5": 50.0})
    finished(work, "1min/transformer/text", run="transformer/text", budget="1min", updates=9, max_update=None)
    benchmark = load_benchmark()
    benchmark.main(["--work", str(work), "--runs", "tree_transformer/gold", "--seeds", "1", "--updates", "5",
                    "--curve", "--curve-every", "2"])
    assert "| tree_transformer/gold | 1 | 10.0 | 30.0 | 50.0 |" in capsys.readouterr().out
    benchmark.main(["--work", str(work), "--runs", "tree_transformer/gold", "--seeds", "1", "--updates", "5"])
    assert "Exact match (%) on the test split against updates" not in capsys.readouterr().out  # not asked for
    benchmark.main(["--work", str(work), "--runs", "transformer/text", "--seeds", "1", "--minutes", "1"])
    assert "| transformer/text | translation | 1/1 | 9 | 50.0 | 40.0 |" in capsys.readouterr().out


@pytest.mark.parametrize("table", ["folder", "absent/table.md"])
def test_a_table_that_cannot_be_written_is_refused_before_the_runs(tmp_path, capsys, table):
    # --table DIR ended in IsADirectoryError after all the runs
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--work", str(tmp_path / "work"), "--runs", "transformer/text",
                               "--table", str(tmp_path / table)])
    assert exit_info.value.code == 2 and f"--table {tmp_path / table}" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_the_table_is_written(tmp_path, capsys):
    work = small_work(tmp_path)
    finished(work, "5updates/transformer/text", run="transformer/text", budget="5updates", updates=5, max_update=5)
    load_benchmark().main(["--work", str(work), "--runs", "transformer/text", "--seeds", "1", "--updates", "5",
                           "--table", str(tmp_path / "table.md")])
    text = (tmp_path / "table.md").read_text()
    assert text.endswith("\n") and text[:-1] in capsys.readouterr().out
    assert "| transformer/text | translation | 1/1 | 5 | 50.0 | 40.0 |" in text


def test_a_run_whose_log_counts_no_update_fails_instead_of_reporting_the_budget(tmp_path, monkeypatch):
    """A log without num_updates was reported as --updates' count (800 under a time budget, which
    has no update count): the run now fails naming its log."""
    benchmark = load_benchmark()

    def quiet_train(command, stdout, **kwargs):
        stdout.write("training began, and said nothing of its updates\n")
        return benchmark.subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(benchmark.subprocess, "run", quiet_train)
    with pytest.raises(RuntimeError, match=r"transformer/text seed 1: .*train.log records no update count"):
        benchmark.run_one(tmp_path / "data", tmp_path / "work", "transformer/text", 1, 800, 64, 0, minutes=1)
