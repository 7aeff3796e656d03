"""The study table: training logs read as fairseq writes them, a resumed epoch counted once, runs
without a log counted and never guessed, and bad inputs refused with the file named."""

import json

import pytest

from tree_fairseq.analysis.methods_table import main, read_training_log, table


def epoch_lines(epoch: int, updates: int, train_wall: float, loss: float) -> str:
    stamp = "2026-11-28 10:00:00 | INFO |"
    return (
        f"{stamp} train_inner | epoch {epoch:03d}:     50 / 94 loss=9.1, nll_loss=8.5, num_updates={updates - 44}\n"
        f"{stamp} train | epoch {epoch:03d} | loss 9.0 | nll_loss 8.4 | ppl 300 | num_updates {updates} "
        f"| lr 0.001 | gnorm 1.1 | train_wall {train_wall} | wall 900\n"
        f"{stamp} valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | nll_loss {loss - 1} "
        f"| ppl 200 | wps 1500 | num_updates {updates} | best_loss {loss}\n"
    )


def write_log(path, epochs):
    path.write_text("".join(epoch_lines(*epoch) for epoch in epochs))
    return str(path)


def comparison(runs: dict[str, list[str]]) -> dict:
    systems = {}
    for name, names in runs.items():
        bleu = [10.0 + index for index in range(len(names))]
        systems[name] = {
            "runs": {run: {"BLEU": value, "chrF": 30.0, "BP": 1.0} for run, value in zip(names, bleu)},
            "BLEU": {"mean": sum(bleu) / len(bleu), "sd": 0.7071 if len(bleu) == 2 else None},
            "chrF": {"mean": 30.0, "sd": 0.0 if len(bleu) == 2 else None},
            "BP": {"mean": 1.0, "sd": 0.0 if len(bleu) == 2 else None},
        }
    pair = {"a": "tree", "b": "base", "BLEU": {"difference": 0.5, "interval": [-0.25, 1.25], "p": 0.2, "holm_p": 0.4},
            "chrF": {"difference": -0.1, "interval": [-1.0, 0.8], "p": 0.9, "holm_p": 1.0}}
    return {"command": "tree-fairseq-compare --results r --lang de", "systems": systems, "pairs": [pair]}


def test_log_summary_counts_a_resumed_epoch_once(tmp_path):
    """Epoch 2 trained twice (killed after it, resumed from epoch 1's checkpoint): its last attempt
    counts; the best validation loss is epoch 3's; minutes per epoch are the median train_wall, and
    the fastest epoch the smallest of the epochs counted (not the 9000 s of the attempt replaced)."""
    log = write_log(tmp_path / "run.train.log",
                    [(1, 94, 600, 9.5), (2, 188, 9000, 9.0), (2, 188, 480, 8.9), (3, 282, 540, 8.5),
                     (4, 376, 660, 8.7)])
    summary = read_training_log(log)
    assert (summary.epochs, summary.updates, summary.best_epoch, summary.best_loss) == (4, 376, 3, 8.5)
    assert summary.minutes_per_epoch == pytest.approx(570 / 60)  # median of 600, 480, 540, 660
    assert summary.fastest_epoch_minutes == pytest.approx(480 / 60)


def test_log_summary_leaves_out_a_run_started_afresh_and_gives_the_best_nll_and_hours(tmp_path):
    """A sitting that found no checkpoint started the run over: the epochs logged before it are of
    another run (here a better loss and 3 epochs) and are not counted; the best epoch's nll and the
    summed train_wall are those of the run that counts."""
    path = tmp_path / "run.train.log"
    earlier = "".join(epoch_lines(*epoch) for epoch in [(1, 94, 600, 7.0), (2, 188, 600, 6.5), (3, 282, 600, 6.0)])
    fresh = "2026-11-28 11:00:00 | INFO | fairseq.trainer | No existing checkpoint found run/checkpoint_last.pt\n"
    later = "".join(epoch_lines(*epoch) for epoch in [(1, 94, 720, 9.5), (2, 188, 1080, 9.0)])
    path.write_text(earlier + fresh + later)
    summary = read_training_log(str(path))
    assert (summary.epochs, summary.updates, summary.best_epoch, summary.best_loss) == (2, 188, 2, 9.0)
    assert summary.best_nll == pytest.approx(8.0)
    assert summary.hours == pytest.approx(1800 / 3600)
    assert summary.fastest_epoch_minutes == pytest.approx(12.0)


def test_a_file_without_epochs_is_refused_by_name(tmp_path):
    path = tmp_path / "notes.train.log"
    path.write_text("2026-11-28 10:00:00 | INFO | fairseq_cli.train | started\n")
    with pytest.raises(ValueError, match="notes.train.log: no epoch was trained and validated"):
        read_training_log(str(path))


def test_an_epoch_figure_that_is_no_number_is_refused_by_name(tmp_path):
    path = tmp_path / "garbled.train.log"
    write_log(path, [(1, 94, 600, 9.5)])
    path.write_text(path.read_text().replace("train_wall 600", "train_wall six"))
    with pytest.raises(ValueError, match="garbled.train.log: an epoch line has a figure that is not a number"):
        read_training_log(str(path))


@pytest.mark.parametrize("figure", ["nan", "inf"])
def test_a_diverged_run_is_refused_by_name_and_epoch(tmp_path, figure):
    """A NaN or infinite validation loss (what fairseq writes for a run that diverged) has no place
    among the best losses: refused, not passed over as if the epoch had not been validated."""
    path = tmp_path / "diverged.train.log"
    write_log(path, [(1, 94, 600, 9.5), (2, 188, 600, 9.0), (3, 282, 600, 9.2)])
    path.write_text(path.read_text().replace("loss 9.2 |", f"loss {figure} |"))
    with pytest.raises(ValueError, match=f"diverged.train.log: the validation loss of epoch 3 is {figure}"):
        read_training_log(str(path))


def test_table_reads_the_logs_there_and_counts_the_missing(tmp_path):
    write_log(tmp_path / "tree.train.log", [(1, 94, 600, 9.5), (2, 188, 600, 9.0)])
    # a run paused during two of its three epochs: the median counts the pauses, the fastest epoch does not
    write_log(tmp_path / "tree.seed2.train.log", [(1, 90, 1200, 9.4), (2, 180, 3000, 9.1), (3, 270, 2400, 9.2)])
    text = table(comparison({"base": ["base", "base.seed2"], "tree": ["tree", "tree.seed2"]}), str(tmp_path))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    assert rows["base"].endswith("| – | – | – | – | 0 of 2 |")
    assert "| 10.50 ± 0.71 |" in rows["tree"]
    assert "| 2.5 ± 0.7 | 229 ± 58 | 25.0 ± 21.2 | 15.0 ± 7.1 | 2 of 2 |" in rows["tree"]
    assert "| tree − base | +0.50 [-0.25, +1.25] | 0.200 (0.400) | -0.10 [-1.00, +0.80] | 0.900 (1.000) |" in text


def test_command_line_refusals(tmp_path, capsys):
    data = tmp_path / "comparison.json"
    data.write_text(json.dumps(comparison({"tree": ["tree"]})))
    with pytest.raises(SystemExit, match="--logs .*nowhere: no such folder"):
        main([str(data), "--logs", str(tmp_path / "nowhere")])
    (tmp_path / "other.json").write_text(json.dumps({"scores": {}}))
    with pytest.raises(SystemExit, match="other.json: not a tree-fairseq-compare --json file"):
        main([str(tmp_path / "other.json")])
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(SystemExit, match="broken.json"):
        main([str(tmp_path / "broken.json")])
    assert main([str(data)]) == 0
    assert "| tree | 1 | 10.00 | 30.00 | 1.000 | – | – | – | – | not read |" in capsys.readouterr().out


def test_a_log_cut_short_is_refused_not_read_as_figures(tmp_path):
    """A log copied while its run wrote it ends mid-line: 'train_wall 25' of 'train_wall 253' would be
    a fastest epoch of 0.4 minutes, 'loss 7' of 'loss 7.761' the best loss."""
    path = tmp_path / "running.train.log"
    write_log(path, [(1, 94, 253, 9.5), (2, 188, 260, 7.761)])
    whole = path.read_text()
    assert read_training_log(str(path)).fastest_epoch_minutes == pytest.approx(253 / 60)
    for cut in (whole[:whole.rindex("train_wall 260") + len("train_wall 26")], whole[:whole.rindex("| loss 7") + 8]):
        path.write_text(cut)
        with pytest.raises(ValueError, match=r"running.train.log: line \d+ is cut short"):
            read_training_log(str(path))


def broken(change) -> dict:
    data = comparison({"tree": ["tree", "tree.seed2"], "base": ["base"]})
    change(data)
    return data


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("command"), "not a tree-fairseq-compare --json file"),
    (lambda d: d.update(systems={}), "it has no 'systems'"),
    (lambda d: d["systems"].update(tree=[]), "system 'tree' has no 'runs'"),
    (lambda d: d["systems"]["tree"].update(runs="tree"), "system 'tree' has no 'runs'"),
    (lambda d: d["systems"]["tree"]["BLEU"].update(mean=float("nan")), "system 'tree': its BLEU has no finite"),
    (lambda d: d["systems"]["base"].pop("BP"), "system 'base': its BP has no finite"),
    (lambda d: d["pairs"][0]["BLEU"].pop("holm_p"), "pair 1: its BLEU lacks"),
    (lambda d: d["pairs"][0]["chrF"].update(interval=[0.1]), "pair 1: its chrF lacks"),
    (lambda d: d.update(pairs={}), "its 'pairs' is not a list"),
])
def test_what_is_not_a_whole_comparison_is_refused_by_what_it_lacks(change, message):
    with pytest.raises(ValueError, match=message):
        table(broken(change), None)


def test_a_results_folders_scores_json_is_refused(tmp_path):
    """score.sh's scores.json has 'systems' too (each run's scores): not a comparison."""
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({"systems": {"transformer": {"BLEU": 10.8, "chrF": 37.1, "BP": 0.987}}}))
    with pytest.raises(SystemExit, match="scores.json: not a tree-fairseq-compare --json file"):
        main([str(path)])
