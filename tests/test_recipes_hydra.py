"""A config of configs/ read by fairseq-hydra-train itself (scripts/train.sh --hydra): it starts,
trains a tree model with the plugin loaded from common.user_dir, and leaves nothing in the
working directory."""

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
         "dataset.max_tokens=500", "common.cpu=true"],
        capture_output=True, text=True, cwd=workdir,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "'_name': 'tree_transformer_tiny', 'share_decoder_input_output_embed': True, 'dropout': 0.3" in log
    assert "'lr': [0.0005]" in log and "'warmup_updates': 4000" in log and "TreeTransformerModel" in log
    assert (save_dir / "checkpoint_last.pt").exists()
    assert sorted(p.name for p in workdir.iterdir()) in ([], ["hydra_train.log"])  # no outputs/, no .hydra/
