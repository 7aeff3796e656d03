"""Writes tests/data/families/: a tiny tree data-bin with dependency parents (made by
tree-fairseq-preprocess), one checkpoint per method family trained a few updates on it by
fairseq-train, and expected.json, what each checkpoint computes (``tests/family_checkpoints.py``).

Run it only to renew the fixtures on purpose (it overwrites them), from the repository root:

    python tests/data/make_family_checkpoints.py

tests/test_family_checkpoints.py then checks that the code computes the same again."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import family_checkpoints as fc  # noqa: E402
from conftest import preprocess, write_corpus, write_heads  # noqa: E402
from helpers import cli_args, subprocess_env  # noqa: E402

SPLITS = (("train", 48, 1), ("valid", 8, 2), ("test", 8, 3))
MAX_WORDS = 6


def make_databin(work: Path) -> None:
    text = work / "text"
    text.mkdir()
    for split, size, seed in SPLITS:
        write_corpus(text, split, size, seed, max_words=MAX_WORDS)
        write_heads(text, split)
    if fc.DATABIN.exists():
        shutil.rmtree(fc.DATABIN)
    preprocess(text, fc.DATABIN)


def train(family: str, work: Path) -> None:
    save_dir = work / family
    _, task = fc.FAMILIES[family]
    result = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *cli_args(fc.DATABIN, task), *fc.train_flags(family)[2:],
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "400", "--max-update", "3", "--seed", "1",
        "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--no-save-optimizer-state",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    ], env=subprocess_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    shutil.copyfile(save_dir / "checkpoint_last.pt", fc.checkpoint_path(family))


def main() -> None:
    fc.FAMILIES_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        make_databin(Path(work))
        for family in fc.FAMILIES:
            train(family, Path(work))
    expected = {family: fc.compute(family) for family in fc.FAMILIES}
    fc.EXPECTED.write_text(json.dumps(expected, separators=(",", ":")) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
