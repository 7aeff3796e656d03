"""The whole pipeline on real data (../shared/data/iwslt14-de-en-lowres): balanced trees ->
subword-nmt BPE -> tree-fairseq-preprocess -> fairseq-train --task tree_translation."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from subword_nmt.apply_bpe import BPE

from conftest import shared_data
from tree_fairseq.cli import parse as parse_cli

pytestmark = pytest.mark.slow  # end to end: the README test command runs it, pytest -m "not slow" leaves it out

USER_DIR = str(Path(__file__).resolve().parents[1] / "tree_fairseq")
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def iwslt_databin(tmp_path_factory):
    data = shared_data("iwslt14-de-en-lowres")
    work = tmp_path_factory.mktemp("iwslt")
    with open(data / "bpe.codes", encoding="utf-8") as codes:
        bpe = BPE(codes)
    for split in ("train", "valid", "test"):
        parse_cli.main(["--parser", "balanced", "--input", str(data / f"{split}.de"),
                        "--output", str(work / f"{split}.tree.de")])
        for lang in ("de", "en"):
            with open(data / f"{split}.{lang}", encoding="utf-8") as f, \
                    open(work / f"{split}.{lang}", "w", encoding="utf-8") as out:
                out.writelines(bpe.process_line(line) for line in f)
    result = subprocess.run(
        [BIN / "tree-fairseq-preprocess", "--source-lang", "de", "--target-lang", "en",
         "--trainpref", work / "train", "--validpref", work / "valid", "--testpref", work / "test",
         "--destdir", work / "bin", "--joined-dictionary", "--workers", "2"],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: 11168 source trees" in result.stdout
    return work


def test_iwslt_trains_with_tree_translation(iwslt_databin):
    max_source_positions = 64
    too_long = sum(1 for line in open(iwslt_databin / "train.de", encoding="utf-8")
                   if len(line.split()) + 1 > max_source_positions)
    assert too_long > 0
    result = subprocess.run(
        [BIN / "fairseq-train", iwslt_databin / "bin", "--user-dir", USER_DIR, "--task", "tree_translation",
         "--arch", "tree_transformer_tiny", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000",
         "--max-update", "3", "--max-source-positions", str(max_source_positions),
         "--skip-invalid-size-inputs-valid-test", "--save-dir", iwslt_databin / "checkpoints",
         "--no-epoch-checkpoints", "--cpu", "--no-progress-bar", "--log-interval", "1", "--seed", "1"],
        capture_output=True, text=True)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert f"{too_long} samples have invalid sizes and will be skipped" in log
    losses = [float(x) for x in re.findall(r"\| loss ([0-9.]+) \|", log)]
    assert losses and all(loss == loss and loss > 0 for loss in losses)
    assert (iwslt_databin / "checkpoints" / "checkpoint_last.pt").exists()
