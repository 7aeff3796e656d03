"""scripts/check_same_batches.py: a tree task with --batch-tokens text builds the translation task's
batches, and a run's log says it trained on them. Checked on a real fairseq-train run of two sittings
(the second resumed from checkpoint_last.pt, as a stopped run is), and shown to fail when the seed or
--max-tokens it is given is not the run's, or when the batches are the tree task's own."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import cli_args, subprocess_env

from tree_fairseq.analysis.same_batches import Interval, load_task, logged_intervals, main, training_batches

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "scripts" / "check_same_batches.py")
MAX_TOKENS = 64
SEED = 5


def test_log_intervals_follow_the_sittings():
    """Each train_inner line covers the updates since the previous one of its sitting, or since the
    update its sitting resumed from; a sitting that found no checkpoint starts from 0."""
    lines = [
        "2026 | INFO | fairseq.trainer | No existing checkpoint found ck/checkpoint_last.pt",
        "2026 | INFO | train_inner | epoch 001:     10 / 30 loss=9.1, wpb=101.5, bsz=8, num_updates=10, lr=1",
        "2026 | INFO | train_inner | epoch 001:     20 / 30 loss=8.1, wpb=99, bsz=8.8, num_updates=20, lr=1",
        "2026 | INFO | train | epoch 001 | loss 8.5 | wpb 100 | bsz 8.4 | num_updates 30",
        "2026 | INFO | train_inner | epoch 002:     10 / 30 loss=7.1, wpb=98.2, bsz=8, num_updates=40, lr=1",
        "2026 | INFO | fairseq.trainer | Loaded checkpoint ck/checkpoint_last.pt (epoch 2 @ 30 updates)",
        "2026 | INFO | train_inner | epoch 002:     10 / 30 loss=7.1, wpb=98.2, bsz=8, num_updates=40, lr=1",
        "2026 | INFO | train_inner | epoch 002:     20 / 30 loss=6.1, wpb=97, bsz=8, num_updates=50, lr=1",
        "2026 | INFO | fairseq.trainer | No existing checkpoint found ck/checkpoint_last.pt",
        "2026 | INFO | train_inner | epoch 001:     10 / 30 loss=9.1, wpb=101.5, bsz=8, num_updates=10, lr=1",
    ]
    found = logged_intervals(lines)
    assert [(i.start, i.end, i.epoch, i.after_resume) for i in found] == [
        (0, 10, 1, False), (10, 20, 1, False), (20, 40, 2, False), (30, 40, 2, True), (40, 50, 2, False),
        (0, 10, 1, False)]
    assert found[1].logged == (99.0, 8.8)
    interval = Interval(0, 10, 1, (99.0, 8.8), computed=(99.0, 8.8))
    assert interval.agrees and not Interval(0, 10, 1, (99.0, 8.8), computed=(99.0, 8.7)).agrees


def check(*flags):
    return subprocess.run([sys.executable, SCRIPT, *flags], env=subprocess_env(), capture_output=True, text=True)


def train(databin, save_dir, max_epoch, *flags):
    result = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *cli_args(databin, "tree_translation"),
        "--arch", "tree_transformer_tiny", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", str(MAX_TOKENS),
        "--max-epoch", str(max_epoch), "--seed", str(SEED), "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--disable-validation", "--log-format", "simple", "--log-interval", "10", *flags,
    ], env=subprocess_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(save_dir / "train.log", "a", encoding="utf-8") as log:
        log.write(result.stdout + result.stderr)


@pytest.mark.slow
def test_a_resumed_text_batches_run_checks_and_others_do_not(tiny_databin, tmp_path):
    run = tmp_path / "text"
    train(tiny_databin, run, 2, "--batch-tokens", "text")
    train(tiny_databin, run, 3, "--batch-tokens", "text")  # a second sitting, from checkpoint_last.pt
    log = str(run / "train.log")
    common = [str(tiny_databin), "-s", "de", "-t", "en", "--log", log]
    updates = len(training_batches(load_task(str(tiny_databin), "de", "en"), SEED, 1, MAX_TOKENS)[0])
    assert updates > 30

    result = check(*common, "--seed", str(SEED), "--max-tokens", str(MAX_TOKENS))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = 3 * updates // 10
    assert "identical batches (sentence ids, in order) in 3 of 3 epochs" in result.stdout
    assert (f"{lines} train_inner lines, {lines} within the 3 epochs (1 of them the first after a resume, over the "
            f"updates since it), {lines} agree") in result.stdout

    for seed, max_tokens in ((SEED + 1, MAX_TOKENS), (SEED, MAX_TOKENS + 16)):
        result = check(*common, "--seed", str(seed), "--max-tokens", str(max_tokens))
        assert result.returncode == 1, result.stdout + result.stderr
        assert "in 3 of 3 epochs" in result.stdout  # the two tasks still agree with each other
        assert f"{lines} train_inner lines" in result.stdout and f", {lines} agree" not in result.stdout

    tree = tmp_path / "tree"
    train(tiny_databin, tree, 1)  # the tree task's own batches: nodes count toward --max-tokens
    result = check(*common[:-1], str(tree / "train.log"), "--seed", str(SEED), "--max-tokens", str(MAX_TOKENS))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "agree with the translation task's batches" in result.stdout
    assert "updates 1-10: logged wpb" in result.stdout


def test_text_batches_are_the_translation_tasks(tiny_databin, parent_databin):
    """Without a log: the batches alone, of either task a control can train with."""
    for databin, task in ((tiny_databin, "tree_translation"), (parent_databin, "dependency_translation")):
        result = check(str(databin), "-s", "de", "-t", "en", "--seed", str(SEED), "--epochs", "2",
                       "--max-tokens", str(MAX_TOKENS), "--task", task)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"{task} --batch-tokens text against translation, seed {SEED}: identical batches (sentence ids, in " \
               "order) in 2 of 2 epochs" in result.stdout
    result = check(str(tiny_databin), "-s", "de", "-t", "en", "--seed", str(SEED))
    assert result.returncode != 0 and "--epochs is needed without --log" in result.stderr


def test_batches_are_the_same_when_asked_again(tiny_databin):
    """fairseq hands a second request for a dataset's batches the first one's iterator, already
    epochs on; each request here starts at epoch 1."""
    task = load_task(str(tiny_databin), "de", "en")
    first = training_batches(task, SEED, 2, MAX_TOKENS)
    assert training_batches(task, SEED, 2, MAX_TOKENS) == first
    assert first[0] != first[1] and training_batches(task, SEED + 1, 2, MAX_TOKENS) != first


def test_a_missing_log_or_data_bin_is_named(tiny_databin, tmp_path):
    common = ["-s", "de", "-t", "en", "--seed", str(SEED)]
    result = check(str(tiny_databin), *common, "--log", str(tmp_path / "train.log"))
    assert result.returncode != 0 and result.stderr.strip().endswith(f"{tmp_path / 'train.log'}: No such file or directory")
    result = check(str(tmp_path), *common, "--epochs", "1")
    assert result.returncode != 0 and f"{tmp_path}: no data-bin of source language de (no dict.de.txt)" in result.stderr
    (tmp_path / "train.log").write_text("2026 | INFO | fairseq_cli.train | nothing trained\n", encoding="utf-8")
    result = check(str(tiny_databin), *common, "--log", str(tmp_path / "train.log"))
    assert result.returncode != 0 and "no train_inner line with wpb, bsz and num_updates" in result.stderr
    for flag in ("--epochs", "--max-tokens"):
        result = check(str(tiny_databin), *common, flag, "-3")
        assert result.returncode == 2 and f"argument {flag}: '-3': a whole number, 1 or more" in result.stderr


def check_log(databin, log) -> int:
    """check_same_batches on ``log`` against the tiny data-bin's batches, in process."""
    return main([str(databin), "-s", "de", "-t", "en", "--seed", str(SEED), "--max-tokens", str(MAX_TOKENS),
                 "--log", str(log)])


def test_a_log_cut_inside_its_last_line_is_read_without_it(tiny_databin, tmp_path, capsys):
    """A log read while its run writes it, or copied from a run stopped mid-line, ends inside a line:
    that line (here cut inside ``num_updates=30``) is left out, with a note naming it, not read as
    the updates 21 to 3 (no batches: a mean of nothing)."""
    task = load_task(str(tiny_databin), "de", "en")
    batches, sizes = training_batches(task, SEED, 1, MAX_TOKENS)[0], task.dataset("train").tgt_sizes
    lines = []
    for end in range(10, 31, 10):
        span = batches[end - 10:end]
        wpb, bsz = (round(float(np.mean(values)), 1) for values in ([sizes[batch].sum() for batch in span],
                                                                      [len(batch) for batch in span]))
        lines.append(f"2026 | INFO | train_inner | epoch 001:     {end} / {len(batches)} loss=9.1, wpb={wpb}, "
                     f"bsz={bsz}, num_updates={end}, lr=1\n")
    log = tmp_path / "train.log"
    text = "".join(lines)
    log.write_text(text[:text.rindex("num_updates=") + len("num_updates=3")])
    assert check_log(tiny_databin, log) == 0
    out = capsys.readouterr().out
    assert "nan" not in out
    assert (f"{log}: line 3 is cut short (it ends without a newline: the log was read or copied while its run wrote "
            "it, or the run stopped mid-line): left out") in out
    assert f"{log}: 2 train_inner lines, 2 within the 1 epochs" in out
    # a train_inner line that does not go past the updates before it is refused, naming it
    log.write_text(lines[0] + lines[1].replace("num_updates=20", "num_updates=2"))
    with pytest.raises(SystemExit) as exited:
        check_log(tiny_databin, log)
    assert str(exited.value.code) == (
        f"{log}: line 2: a train_inner line at update 2, not after update 10 of the line before it: the line is "
        "damaged, or lines of the log are missing")


INNER = "2026 | INFO | train_inner | epoch 001:     {0} / 30 loss=9.1, wpb=99, bsz=8, num_updates={0}, lr=1"


@pytest.mark.parametrize("damaged", [
    INNER.format(30).replace(" bsz=8,", ""), INNER.format(30).replace(" wpb=99,", ""),
    INNER.format(30).replace("wpb=99", "wpb=9x9"), INNER.format(30).replace("bsz=8", "bsz=8, bsz=8"),
    INNER.format(30).replace("num_updates=30", "num_updates=30.5"), INNER.format(30).replace("epoch 001:", "epoch :"),
], ids=["no bsz", "no wpb", "wpb not a number", "bsz twice", "num_updates not whole", "no epoch"])
def test_a_damaged_train_inner_line_is_refused_naming_it(tiny_databin, tmp_path, damaged):
    """A train_inner line missing a field (or with one twice, or not a number) was left out without a
    word: the last one of a log so damaged took its updates, and its epoch, out of the check."""
    log = tmp_path / "train.log"
    log.write_text(f"{INNER.format(10)}\n{INNER.format(20)}\n{damaged}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        check_log(tiny_databin, log)
    assert str(exited.value.code) == (
        f"{log}: line 3: a train_inner line whose epoch, wpb, bsz and num_updates cannot be read (each once, a "
        "number; the epoch and num_updates whole): the line is damaged")


PUBLISHED = (ROOT / "docs" / "results" / "iwslt14-lowres-en-de" / "logs"
             / "tree_transformer.balanced.text-batches.seed3.train.log")


def test_a_sitting_going_back_before_a_saved_checkpoint_is_refused():
    """A sitting that starts back before a checkpoint the log saved counts its updates twice: the
    published log's sitting resumed at update 1880, appended again after the last sitting, was read
    as 54 lines agreeing. A resume from the last checkpoint repeats only the updates after it."""
    lines = PUBLISHED.read_text(encoding="utf-8").splitlines()
    found = logged_intervals(lines)
    assert (len(found), sum(interval.after_resume for interval in found)) == (48, 5)
    assert "(epoch 21 @ 1880 updates)" in lines[921]
    with pytest.raises(ValueError) as raised:
        logged_intervals(lines + lines[921:1095])
    assert str(raised.value).startswith(
        f"line {len(lines) + 1}: a sitting resumed from a checkpoint of update 1880, though the log saved one of "
        "update ")
    assert "would be counted twice" in str(raised.value)

    saved = ("2026 | INFO | fairseq.checkpoint_utils | Saved checkpoint ck/checkpoint1.pt (epoch 1 @ 20 updates, "
             "score 8)")
    inner = "2026 | INFO | train_inner | epoch 001:     {0} / 30 loss=9.1, wpb=99, bsz=8, num_updates={0}, lr=1"
    loaded = "2026 | INFO | fairseq.trainer | Loaded checkpoint ck/checkpoint_last.pt (epoch 1 @ {} updates)"
    fresh = "2026 | INFO | fairseq.trainer | No existing checkpoint found ck/checkpoint_last.pt"
    run = [fresh, inner.format(10), inner.format(20), saved, inner.format(30)]
    # the updates after the last checkpoint (21-30), logged but never saved, are trained again: a resume
    assert [(i.start, i.end) for i in logged_intervals(run + [loaded.format(20), inner.format(30)])] == [
        (0, 10), (10, 20), (20, 30), (20, 30)]
    for sitting, message in ((loaded.format(10), "resumed from a checkpoint of update 10"),
                             (fresh, "found no checkpoint")):
        with pytest.raises(ValueError) as raised:
            logged_intervals(run + [sitting, inner.format(20)])
        assert str(raised.value).startswith(f"line 6: a sitting {message}, though the log saved one of update 20 "
                                            "before it (line 4)")
