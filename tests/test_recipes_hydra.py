"""A config of configs/ read by fairseq-hydra-train itself (scripts/train.sh --hydra): it starts,
trains a tree model with the plugin loaded from common.user_dir, takes a key the YAML lacks as
hydra does (``+GROUP.KEY=VALUE`` to add it, ``++GROUP.KEY=VALUE`` to add or override it), checked
as a key fairseq knows, and leaves nothing in the working directory."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_hydra_train_with_a_config(tiny_databin, tmp_path):
    workdir, save_dir = tmp_path / "cwd", tmp_path / "checkpoints"
    workdir.mkdir()
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "train.sh"), "--hydra", "iwslt_tree_transformer", str(tiny_databin),
         str(save_dir), "model._name=tree_transformer_tiny", "optimization.max_update=1", "task.eval_bleu=false",
         "checkpoint.best_checkpoint_metric=loss", "checkpoint.maximize_best_checkpoint_metric=false",
         "dataset.max_tokens=500", "common.cpu=true",
         # keys the YAML's model and criterion lack, which hydra takes only with + or ++
         "++model.attention_dropout=0.25", "++model.dropout=0.2", "+criterion.report_accuracy=true"],
        capture_output=True, text=True, cwd=workdir,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "'_name': 'tree_transformer_tiny', 'share_decoder_input_output_embed': True, 'dropout': 0.2" in log
    assert "'attention_dropout': 0.25" in log and "'report_accuracy': True" in log
    assert "'lr': [0.0005]" in log and "'warmup_updates': 4000" in log and "TreeTransformerModel" in log
    assert (save_dir / "checkpoint_last.pt").exists()
    assert sorted(p.name for p in workdir.iterdir()) in ([], ["hydra_train.log"])  # no outputs/, no .hydra/


def test_plus_overrides_are_checked_and_taken_in_both_modes(tmp_path, capsys):
    """``+GROUP.KEY`` and ``++GROUP.KEY`` are checked as the other overrides (a key fairseq does not
    know is refused); ``+`` of a key the config sets already is refused as hydra refuses it, in one
    line; both give fairseq-train the same flags as ``GROUP.KEY``."""
    from tree_fairseq.cli import config_args

    path = str(ROOT / "configs" / "iwslt_tree_transformer.yaml")
    flags = config_args.config_to_args(config_args.load_config(path, ["++model.attention_dropout=0.25",
                                                                      "++model.dropout=0.2",
                                                                      "+criterion.report_accuracy=true"]))
    assert flags[flags.index("--attention-dropout") + 1] == "0.25" and flags[flags.index("--dropout") + 1] == "0.2"
    assert "--report-accuracy" in flags

    def refused(*overrides):
        with pytest.raises(SystemExit) as exited:
            config_args.main(["--check", path, *overrides])
        return str(exited.value.code)

    assert refused("++model.attention_dropou=0.25").endswith(
        "has no key 'attention_dropou' (did you mean 'attention_dropout'?)")
    assert refused("+model.dropout=0.2") == (
        "tree-fairseq-config-args: error: override '+model.dropout=0.2': the config sets model.dropout already, and "
        "+ only adds a key: write model.dropout=0.2, or ++model.dropout=0.2")
    config_args.main(["--check", path, "++model.attention_dropout=0.25", "+criterion.report_accuracy=true"])
    # a key overridden twice: hydra keeps the last silently (common.seed=1 common.seed=2 trained seed 2)
    for first, second in (("common.seed=1", "common.seed=2"), ("model.dropout=0.1", "++model.dropout=0.2")):
        key = first.split("=")[0]
        assert refused(first, second) == (f"tree-fairseq-config-args: error: override {second!r}: {key} is given "
                                          f"twice ({first!r}, then {second!r}): give it once")


@pytest.mark.parametrize("text,refusal", [
    ("task:\n  _name: tree_translation\ncheckpoint:\n", "group 'checkpoint' is empty (nothing under checkpoint:)"),
    ("task: tree_translation\n", "group 'task' is a str, not a mapping of keys"),
    ("- task\n- model\n", "the config is a list, not a mapping of groups"),
])
def test_a_config_not_made_of_groups_of_keys_is_refused_in_one_line(tmp_path, text, refusal):
    """An empty group (which fairseq-hydra-train refuses), a group that is a scalar and a config that is a
    list are refused naming the file, with or without the overrides scripts/train.sh adds to every config
    (an override into an empty group was a TypeError)."""
    from tree_fairseq.cli import config_args

    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    for overrides in ([], [f"checkpoint.save_dir={tmp_path}", "task.data=bin", "common.user_dir=x"]):
        for check in ([], ["--check"]):
            with pytest.raises(SystemExit) as exited:
                config_args.main([*check, str(path), *overrides])
            assert str(exited.value.code).startswith(f"tree-fairseq-config-args: error: {path}: {refusal}")
            assert "\n" not in str(exited.value.code)
