"""A resumed run stops where an uninterrupted one stops: the patience count over the whole log
(tree_fairseq/cli/patience.py) and scripts/train.sh's resume loop around fairseq-train."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tree_fairseq.cli.patience import main as patience_main
from tree_fairseq.cli.patience import max_epoch, read_log, standing, validations

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


# A validation line as fairseq-train's simple log format writes it (the stand-in fairseq-train below
# writes the same, given this template).
VALID_LINE = ("2026-11-26 01:40:22 | INFO | valid | epoch {epoch:03d} | valid on '{subset}' subset | loss {loss} | "
              "nll_loss 6.593 | ppl 96.56{extra} | wps 2349 | wpb 1344.9 | bsz 58.2 | num_updates {updates} | "
              "best_loss {loss}\n")


def valid_line(epoch: int, loss: float, subset: str = "valid", bleu: float | None = None) -> str:
    extra = f" | bleu {bleu}" if bleu is not None else ""
    return VALID_LINE.format(epoch=epoch, subset=subset, loss=loss, extra=extra, updates=epoch * 10)


def test_validations_of_the_first_subset_and_its_metric():
    lines = [valid_line(1, 9.5, bleu=1.5), "2026 | INFO | train | epoch 001 | loss 9.9 | nll_loss 9.1\n",
             valid_line(1, 7.0, subset="test"), valid_line(2, 8.25, bleu=3.0)]
    assert validations(lines) == [(1, 9.5), (2, 8.25)]
    assert validations(lines, metric="bleu") == [(1, 1.5), (2, 3.0)]
    assert validations(lines, subset="test") == [(1, 7.0)]


def test_a_repeated_or_restarted_epoch_replaces_what_followed():
    # epoch 3 validated twice (killed before its checkpoint); then a restart from epoch 2
    lines = [valid_line(e, loss) for e, loss in [(1, 9.0), (2, 8.0), (3, 7.0), (3, 7.5), (4, 7.4), (2, 8.5)]]
    assert validations(lines) == [(1, 9.0), (2, 8.5)]
    lines = [valid_line(e, loss) for e, loss in [(1, 9.0), (2, 8.0), (3, 7.0), (3, 7.5), (4, 7.4)]]
    assert validations(lines) == [(1, 9.0), (2, 8.0), (3, 7.5), (4, 7.4)]


def test_standing_counts_as_fairseq_does():
    # an equal figure is no improvement; the count restarts at every better one
    state = standing([(1, 8.0), (2, 7.0), (3, 7.0), (4, 7.5), (5, 6.9), (6, 7.1), (7, 6.9)])
    assert (state.best, state.since, state.last_epoch) == (6.9, 2, 7)
    state = standing([(1, 10.0), (2, 12.0), (3, 11.0)], maximize=True)
    assert (state.best, state.since) == (12.0, 1)
    assert standing([]).best is None


@pytest.mark.parametrize("losses", [
    [8.0, float("nan"), 7.5, 7.6],  # a NaN epoch between finite ones
    [8.0, float("nan"), float("nan"), float("nan")],  # diverged for good: patience runs out
    [float("nan"), 7.0, 6.0],  # NaN first: fairseq keeps it as the best, nothing beats it
    [9.0, float("inf"), 1234567.891, 8.5],  # inf, and a figure "{:g}" writes with an exponent
])
def test_figures_fairseq_writes_for_a_diverged_run_are_counted_as_fairseq_counts_them(losses):
    """The figures come from fairseq's own formatting of a statistic, and the count is checked against
    fairseq-train's own early-stop function fed the same validations: no epoch is passed over."""
    from fairseq.logging.progress_bar import format_stat
    from fairseq_cli.train import should_stop_early
    from omegaconf import OmegaConf

    lines = [valid_line(epoch, format_stat(round(loss, 3))) for epoch, loss in enumerate(losses, 1)]
    found = validations(lines)
    assert [epoch for epoch, _ in found] == list(range(1, len(losses) + 1))
    # what the log prints ("{:g}" keeps 6 digits: 1234567.891 is read as 1234570.0)
    assert [str(value) for _, value in found] == [str(float(format_stat(round(loss, 3)))) for loss in losses]

    cfg = OmegaConf.create({"checkpoint": {"patience": 3, "maximize_best_checkpoint_metric": False}})
    for name in ("best", "num_runs"):
        if hasattr(should_stop_early, name):
            delattr(should_stop_early, name)
    stops = [should_stop_early(cfg, round(loss, 3)) for loss in losses]  # what fairseq holds in memory
    state = standing(found)
    assert str(state.best) == str(float(format_stat(should_stop_early.best)))
    assert state.since == should_stop_early.num_runs
    assert (max_epoch(lines, ["fairseq-train", "data", "--patience", "3"])[0] == 0) == stops[-1]


def test_max_epoch_to_resume_with():
    log = [valid_line(e, loss) for e, loss in [(1, 9.0), (2, 7.0), (3, 7.5), (4, 7.2)]]  # best at 2, 2 since
    assert max_epoch(log, ["fairseq-train", "data", "--patience", "5"])[0] == 4 + 3
    assert max_epoch(log, ["fairseq-train", "data", "--patience", "5", "--max-epoch", "6"])[0] == 6
    assert max_epoch(log, ["fairseq-train", "data", "--patience", "5", "--max-epoch", "4"])[0] == 0
    assert max_epoch(log, ["fairseq-train", "data", "--patience", "2"])[0] == 0
    # nothing to count: no patience, no validation yet, validation every N updates
    assert max_epoch(log, ["fairseq-train", "data"])[0] is None
    assert max_epoch([], ["fairseq-train", "data", "--patience", "5"])[0] is None
    assert max_epoch(log, ["fairseq-train", "--patience", "5", "--validate-interval-updates", "100"])[0] is None
    # the metric fairseq's early stop uses
    log = [valid_line(e, 7.0, bleu=b) for e, b in [(1, 10.0), (2, 12.0), (3, 11.0)]]
    command = ["fairseq-train", "--patience", "3", "--best-checkpoint-metric", "bleu",
               "--maximize-best-checkpoint-metric"]
    assert max_epoch(log, command)[0] == 3 + 2


def test_validate_interval_counts_every_kth_epoch_and_bounds_at_one():
    # --validate-interval 2: fairseq validates epochs 2, 4, 6, and once more at epoch 7, where
    # --max-update stopped it mid-epoch; a resume with a higher --max-update validates at 8, 10, ...
    # and an uninterrupted run would never have validated at 7 (its 3.0 would be a new best)
    log = [valid_line(e, loss) for e, loss in [(2, 5.0), (4, 4.0), (6, 4.5), (7, 3.0)]]
    command = ["fairseq-train", "data", "--patience", "3", "--validate-interval", "2"]
    assert max_epoch(log, command) == (10, "1 validation(s) since the best loss 4, last at epoch 6, patience 3: "
                                           "training to epoch 10 at most before counting again")
    # the sitting to epoch 10 validated 8 and 10, neither better: done, as an uninterrupted run
    log += [valid_line(e, loss) for e, loss in [(8, 4.1), (10, 4.2)]]
    assert max_epoch(log, command, trained_to=10)[0] == 0
    # a sitting bounded at 10 whose last validation is 8: fairseq stopped before 10 for its own reason
    assert max_epoch(log[:-1], command, trained_to=10) == (0, "done: fairseq stopped before epoch 10 (last "
                                                                "validation at epoch 8)")
    # --max-epoch 9 bounds the sitting at 9, which fairseq does not validate: --max-epoch reached
    assert max_epoch(log[:-1], [*command, "--max-epoch", "9"])[0] == 9
    assert max_epoch(log[:-1], [*command, "--max-epoch", "9"], trained_to=9)[1].startswith(
        "done: --max-epoch 9 reached")


def test_fairseqs_extra_validation_at_a_stop_is_replaced_by_its_epochs_own():
    # --max-update stopped the run in epoch 3 (validated there, 3.0); resumed with a higher
    # --max-update, fairseq ends epoch 3 and validates it again (4.5): only that one counts
    log = [valid_line(e, loss) for e, loss in [(1, 5.0), (2, 4.0), (3, 3.0), (3, 4.5)]]
    assert validations(log) == [(1, 5.0), (2, 4.0), (3, 4.5)]
    assert max_epoch(log, ["fairseq-train", "data", "--patience", "3"])[0] == 3 + 2


def test_validations_within_an_epoch_are_left_to_fairseq():
    log = [valid_line(e, loss) for e, loss in [(1, 5.0), (2, 4.0)]]
    for flags in (["--validate-interval-updates", "100"], ["--save-interval-updates", "100"]):
        bound, why = max_epoch(log, ["fairseq-train", "data", "--patience", "3", *flags])
        assert bound is None and "fairseq's own patience count applies after a resume" in why


def test_a_sitting_that_started_afresh_drops_what_the_log_said_before():
    fresh = "2026-11-26 15:50:59 | INFO | fairseq.trainer | No existing checkpoint found ck/checkpoint_last.pt\n"
    earlier = [valid_line(e, loss) for e, loss in [(1, 5.0), (2, 4.0), (3, 4.5), (4, 4.4), (5, 4.3)]]
    assert max_epoch(earlier, ["fairseq-train", "data", "--patience", "3"])[0] == 0  # that run is done
    log = earlier + [fresh, valid_line(1, 6.0)]
    assert validations(log) == [(1, 6.0)]
    assert max_epoch(log, ["fairseq-train", "data", "--patience", "3"])[0] == 1 + 3
    # killed before its first validation, the new run would have been taken for the earlier one, done
    assert validations(earlier + [fresh]) == []


FAKE_FAIRSEQ_TRAIN = """\
#!{python}
# Stands in for fairseq-train: records its flags, then "trains" from the epoch after the last one
# validated in SAVE-DIR/train.log up to --max-epoch (or FAKE_LAST, or the last epoch of FAKE_LOSSES),
# validating each epoch with the losses of FAKE_LOSSES, as fairseq's log prints them.
import os, sys
from tree_fairseq.cli.patience import validations
VALID_LINE = {valid_line!r}
args = sys.argv[1:]
save_dir = args[args.index("--save-dir") + 1]
bound = int(args[len(args) - 1 - args[::-1].index("--max-epoch") + 1]) if "--max-epoch" in args else 10**6
with open(os.path.join(save_dir, "calls"), "a") as f:
    f.write(str(bound) + "\\n")
done = validations(open(os.path.join(save_dir, "train.log")))
losses = dict(item.split(":") for item in os.environ["FAKE_LOSSES"].split(","))
last = min(bound, int(os.environ.get("FAKE_LAST", 10**6)), max(int(epoch) for epoch in losses))
for epoch in range(done[-1][0] + 1 if done else 1, last + 1):
    sys.stdout.write(VALID_LINE.format(epoch=epoch, subset="valid", loss=float(losses[str(epoch)]), extra="",
                                       updates=epoch * 10))
print("done training")
"""


def resume(tmp_path: Path, log: list[tuple[int, float]], losses: str, *extra: str, last: int | None = None,
           before: str = "", data: Path | None = None, checkpoint: dict | None = None,
           dictionaries: dict[str, str] | None = None):
    bin_dir, save_dir, data = tmp_path / "bin", tmp_path / "ck", data or tmp_path / "data"
    for folder in (bin_dir, save_dir, data):
        folder.mkdir(parents=True, exist_ok=True)
    for lang in ("de", "en"):  # a data-bin of a language pair, as train.sh checks
        (data / f"dict.{lang}.txt").write_text((dictionaries or {}).get(lang, "a 1\n"))
    fake = bin_dir / "fairseq-train"
    fake.write_text(FAKE_FAIRSEQ_TRAIN.format(python=sys.executable, valid_line=VALID_LINE))
    fake.chmod(stat.S_IRWXU)
    # read by train.sh's checks before a resume
    torch.save(checkpoint or {"model": {}}, save_dir / "checkpoint_last.pt")
    (save_dir / "train.log").write_text(before + "".join(valid_line(e, loss) for e, loss in log))
    env = {**os.environ, "PYTHON": sys.executable, "PATH": f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
           "FAKE_LOSSES": losses, **({"FAKE_LAST": str(last)} if last else {})}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "train.sh"), "iwslt_lowres_tree_transformer", str(data),
                             str(save_dir), "checkpoint.patience=3", *extra], capture_output=True, text=True, env=env)
    calls = (save_dir / "calls").read_text().split() if (save_dir / "calls").exists() else []
    return result, [int(c) for c in calls], validations(open(save_dir / "train.log"))


def test_train_sh_resumes_to_where_an_uninterrupted_run_stops(tmp_path):
    # best at epoch 2, one validation since: train to epoch 5 at most; epoch 4 is better, so count
    # again and train to 7; epochs 5-7 are not better than epoch 4: done, as an uninterrupted run
    # with patience 3 stops after epoch 7 (fairseq's own count, restarted at the resume, would go on)
    result, calls, log = resume(tmp_path, [(1, 5.0), (2, 4.0), (3, 4.5)], "4:3.9,5:4.2,6:4.1,7:3.9,8:3.0,9:3.0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == [5, 7]
    assert [epoch for epoch, _ in log] == list(range(1, 8))
    assert "patience: done: 3 validation(s) since the best loss 3.9, last at epoch 7" in result.stderr
    # a run already done trains no more
    result, calls, _ = resume(tmp_path / "done", [(1, 5.0), (2, 4.0), (3, 4.5), (4, 4.2), (5, 4.0)], "6:3.0")
    assert result.returncode == 0 and calls == [] and "patience: done: 3 validation(s)" in result.stderr
    assert (f"nothing is left to train (to train afresh, choose another SAVE-DIR, or move checkpoint*.pt and "
            f"train.log out of {tmp_path / 'done' / 'ck'})") in result.stderr


def test_train_sh_refuses_the_log_of_another_run(tmp_path):
    # SAVE-DIR holds a finished run of another config on another data-bin: train.sh used to find its
    # patience done and exit 0 without training
    other = tmp_path / "other-data"
    other.mkdir()
    before = f"$ fairseq-train {other} --user-dir tree_fairseq --task translation --arch transformer --patience 3\n"
    result, calls, _ = resume(tmp_path, [(1, 5.0), (2, 4.0), (3, 4.5), (4, 4.2), (5, 4.0)], "6:3.0", before=before)
    assert result.returncode == 2 and calls == []
    log = tmp_path / "ck" / "train.log"
    assert result.stderr.strip().splitlines()[-1] == (
        f"train.sh: error: {log} is the log of another run: its last command trained data-bin {other} (this "
        f"command: {tmp_path / 'data'}), --task translation (this command: tree_translation), --arch transformer "
        "(this command: tree_transformer). Resuming would continue that run's checkpoint_last.pt. To start afresh, "
        f"choose another SAVE-DIR, or move {tmp_path / 'ck'}/checkpoint*.pt and train.log away")
    # the same run, its data-bin given by another path: resumed
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "data")
    result, calls, _ = resume(tmp_path / "same", [(1, 5.0), (2, 4.0)], "3:3.9,4:3.8,5:3.7,6:3.9", data=link,
                              before=f"$ fairseq-train {tmp_path / 'data'} --task tree_translation "
                                     "--arch tree_transformer\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls


def test_train_sh_resume_refuses_a_data_bin_whose_dictionaries_changed(tmp_path):
    """A data-bin re-made at the same path from other text was resumed: with dictionaries of the same
    size every embedding silently meant another word, of another size fairseq died in two tracebacks.
    A SAVE-DIR made before the record was kept (a run in progress) resumes, and gets it."""
    import hashlib
    import json

    save_dir, data = tmp_path / "ck", tmp_path / "data"
    result, calls, _ = resume(tmp_path, [(1, 5.0), (2, 4.0)], "3:3.9,4:3.8", last=3)
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == [5]
    assert json.loads((save_dir / "dictionaries.json").read_text())["sha256"] == {
        f"dict.{lang}.txt": hashlib.sha256(b"a 1\n").hexdigest() for lang in ("de", "en")}
    record = save_dir / "dictionaries.json"
    for other in ("b 1\n", "a 1\nb 1\n"):  # the same size, another size
        result, calls, _ = resume(tmp_path, [(1, 5.0), (2, 4.0), (3, 3.9)], "4:3.8", dictionaries={"en": other})
        assert result.returncode == 2 and calls == [5]
        assert result.stderr.strip().splitlines()[-1] == (
            f"train.sh: error: {data / 'dict.en.txt'} is not the dictionary {save_dir}'s checkpoints were trained "
            f"with ({record} records another): every embedding would mean another word. Resume on the data-bin the "
            "run trained on, or choose another SAVE-DIR to train afresh")
    (data / "dict.de.txt").unlink()
    (data / "dict.fr.txt").write_text("a 1\n")
    from tree_fairseq.cli.dictionary_record import changed

    assert changed(str(save_dir), str(data)) == "dict.de.txt"
    # the same dictionaries: resumed
    result, calls, _ = resume(tmp_path, [(1, 5.0), (2, 4.0), (3, 3.9)], "4:3.8")
    assert result.returncode == 0 and calls == [5, 6], result.stderr[-2000:]


def saved_run(epoch: int, batches: int, updates: int, max_tokens: int = 4096, seed: int = 1) -> dict:
    """A checkpoint_last.pt's training state as fairseq saves it: ``batches`` into ``epoch`` (0: the
    epoch before it done)."""
    return {"model": {}, "cfg": {"dataset": {"max_tokens": max_tokens, "batch_size": None,
                                             "required_batch_size_multiple": 8}, "common": {"seed": seed}},
            "extra_state": {"train_iterator": {"version": 2, "epoch": epoch, "iterations_in_epoch": batches,
                                               "shuffle": True}},
            "optimizer_history": [{"num_updates": updates}]}


def test_train_sh_refuses_other_batches_mid_epoch(tmp_path):
    """fairseq resumes mid-epoch by skipping as many batches of the epoch as the checkpoint had
    trained on, batches built with the command's --max-tokens (and --seed, ...): with other ones,
    sentences of the epoch are skipped or seen twice. Refused; from an end-of-epoch checkpoint the next
    epoch's batches are built afresh, and the change is allowed."""
    log = [(1, 5.0), (2, 4.0)]
    result, calls, _ = resume(tmp_path, log, "3:3.9", "dataset.max_tokens=2048", checkpoint=saved_run(3, 17, 217))
    assert result.returncode == 2 and calls == []
    save_dir = tmp_path / "ck"
    assert result.stderr.strip().splitlines()[-1] == (
        f"train.sh: error: {save_dir / 'checkpoint_last.pt'} is mid-epoch, at update 217 (17 batches into epoch 3), "
        "and this command changes --max-tokens 4096 to 2048: fairseq's resume skips the epoch's first 17 batches "
        "as this command builds them, so sentences of epoch 3 would be skipped or seen twice. Resume with the same "
        "--max-tokens, or from an end-of-epoch checkpoint")
    # the same, checked as train.sh checks (without its runs of fairseq's parser for each case)
    from tree_fairseq.cli.config_args import config_to_args, load_config
    from tree_fairseq.cli.resume_check import check

    def command(*overrides):
        config = load_config(str(ROOT / "configs" / "iwslt_lowres_tree_transformer.yaml"),
                             [f"task.data={tmp_path / 'data'}", f"common.user_dir={ROOT / 'tree_fairseq'}", *overrides])
        return ["fairseq-train", *config_to_args(config)]

    torch.save({"model": {}}, save_dir / "checkpoint2.pt")
    torch.save(saved_run(3, 17, 217), save_dir / "checkpoint_last.pt")
    message = check(str(save_dir), command("dataset.max_tokens=2048", "common.seed=2"))
    assert "changes --max-tokens 4096 to 2048, --seed 1 to 2: " in message
    assert message.endswith(f"Resume with the same --max-tokens and --seed, or from an end-of-epoch checkpoint (cp "
                            f"{save_dir / 'checkpoint2.pt'} {save_dir / 'checkpoint_last.pt'})")
    # the same batches mid-epoch, or other ones from the epoch's start, or a dataloader reset: resumed
    assert check(str(save_dir), command("optimization.max_update=500")) is None
    assert check(str(save_dir), command("dataset.max_tokens=2048") + ["--reset-dataloader"]) is None
    torch.save(saved_run(3, 0, 200), save_dir / "checkpoint_last.pt")
    assert check(str(save_dir), command("dataset.max_tokens=2048")) is None


def test_train_sh_resume_stops_when_fairseq_stops_for_its_own_reason(tmp_path):
    # fairseq stops after epoch 4 (say --max-update): train.sh does not start it again
    result, calls, log = resume(tmp_path, [(1, 5.0), (2, 4.0), (3, 4.5)], "4:3.9,5:3.8", last=4)
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == [5] and log[-1] == (4, 3.9)
    # a config's own max_epoch bounds the resumed run
    result, calls, log = resume(tmp_path / "bounded", [(1, 5.0), (2, 4.0)], "3:3.9,4:3.8,5:3.7",
                                "optimization.max_epoch=4")
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == [4] and log[-1] == (4, 3.8)


def test_train_sh_trains_as_fairseq_does_before_the_first_validation(tmp_path):
    result, calls, log = resume(tmp_path, [], "1:5.0,2:4.0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert calls == [10**6] and [epoch for epoch, _ in log] == [1, 2]  # one run, no --max-epoch added


def test_patience_answers_without_loading_fairseq(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(valid_line(1, 5.0))
    result = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "tree_fairseq" / "cli" / "patience.py"),
                             str(log), "fairseq-train", "--patience", "2"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "3\n"
    imported = [line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert "argparse" in imported
    assert not [name for name in imported if name.split(".")[0] in ("fairseq", "torch", "tree_fairseq")]


def test_a_last_line_cut_short_is_not_a_validation(tmp_path, capsys):
    """A sitting killed mid-line leaves '| loss 7' of '| loss 7.5': read as a best loss of 7.0 it would
    restart the patience count. The line is left out; a whole last line is read."""
    log = tmp_path / "train.log"
    whole = "".join(valid_line(e, loss) for e, loss in [(1, 9.0), (2, 8.0), (3, 8.5), (4, 7.5)])
    log.write_text(whole[:whole.rindex("| loss 7.5") + len("| loss 7")])
    assert read_log(log) == ([line.rstrip("\n") for line in whole.splitlines(True)[:3]], 4)
    patience_main([str(log), "fairseq-train", "--patience", "3"])
    assert capsys.readouterr().out == "5\n"  # best at 2, epoch 3 not better: 2 + 3
    log.write_text(whole)
    assert read_log(log)[1] is None
    patience_main([str(log), "fairseq-train", "--patience", "3"])
    assert capsys.readouterr().out == "7\n"  # best at 4


@pytest.mark.slow
def test_fairseqs_own_log_with_validate_interval_and_a_stop_mid_epoch(tiny_databin, tmp_path):
    # fairseq-train validates every 2nd epoch, and at epoch 3 when --max-update 12 stops it there
    # (5 updates an epoch); resumed with --max-update 20, it validates at 4 again
    from helpers import cli_args, subprocess_env

    command = [sys.executable, "-m", "fairseq_cli.train", *cli_args(tiny_databin, "tree_translation"),
               "--arch", "tree_transformer_tiny", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000",
               "--validate-interval", "2", "--patience", "3", "--save-dir", str(tmp_path), "--no-epoch-checkpoints",
               "--log-format", "simple"]
    log = ""
    for max_update in (12, 20):
        run = subprocess.run([*command, "--max-update", str(max_update)], env=subprocess_env(), capture_output=True,
                             text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        log += run.stdout + run.stderr
    lines = log.splitlines()
    assert [epoch for epoch, _ in validations(lines)] == [2, 3, 4]
    bound, why = max_epoch(lines, ["fairseq-train", "--patience", "3", "--validate-interval", "2"])
    assert "last at epoch 4, patience 3" in why and bound % 2 == 0 and bound > 4
