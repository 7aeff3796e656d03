"""Bad input and silent losses found by testing the pipeline against what real data and real flags do:
every sentence of a generated split comes back, scores over a subset are refused, unknown node labels
at inference are named, resumed parsing notices edited input, and deep trees, bracket tokens, bad
bytes and parser failures get a clear answer instead of a traceback."""

import subprocess
import sys

import numpy as np
import pytest
from helpers import cli_args, subprocess_env, train_and_generate

from tree_fairseq.tasks import TreeTranslationConfig, TreeTranslationTask

ARCH = "tree_transformer_tiny"


def load_task(databin, split="valid", combine=False, **overrides):
    cfg = TreeTranslationConfig(data=str(databin), source_lang="de", target_lang="en", dataset_impl="mmap",
                                required_seq_len_multiple=1, **overrides)
    task = TreeTranslationTask.setup_task(cfg)
    task.load_dataset(split, combine=combine)
    return task


def hypothesis_ids(stdout: str) -> list[int]:
    return sorted(int(line.split("\t")[0][2:]) for line in stdout.splitlines() if line.startswith("H-"))


# Every sentence of a generated or validated split is translated


@pytest.fixture(scope="module")
def checkpoint(tiny_databin, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("checkpoint")
    train_and_generate(tiny_databin, save_dir, ARCH, "--share-all-embeddings", max_update=2)
    return save_dir / "checkpoint_last.pt"


def fairseq_generate(databin, checkpoint, *flags, task="tree_translation"):
    return subprocess.run([
        sys.executable, "-m", "fairseq_cli.generate", *cli_args(databin, task), "--path", str(checkpoint),
        "--gen-subset", "test", "--beam", "2", "--max-len-a", "0", "--max-len-b", "5", *flags,
    ], env=subprocess_env(), capture_output=True, text=True)


@pytest.mark.parametrize("flags", [("--batch-size", "1"), ("--max-tokens", "60"), ("--batch-size", "3")])
def test_fairseq_generate_translates_every_sentence_whatever_the_batch_multiple(tiny_databin, checkpoint, flags):
    # fairseq's default --required-batch-size-multiple 8 drops a last batch of another size:
    # with --batch-size 1 the last sentence in length order was never translated.
    result = fairseq_generate(tiny_databin, checkpoint, *flags)
    assert result.returncode == 0, result.stderr[-2000:]
    assert hypothesis_ids(result.stdout) == list(range(40))


def test_validation_batches_keep_every_sentence_training_batches_are_fairseqs(tiny_databin):
    for combine, expected in ((False, 40), (True, 39)):  # fairseq drops the last batch of 1
        task = load_task(tiny_databin, combine=combine)
        batches = task.get_batch_iterator(task.dataset("valid"), max_sentences=1, required_batch_size_multiple=8,
                                          max_positions=(1024, 1024)).next_epoch_itr(shuffle=False)
        ids = sorted(i for batch in batches for i in batch["id"].tolist())
        assert len(ids) == expected and len(set(ids)) == len(ids)


def test_tree_generation_keeps_every_sentence_of_an_evaluated_split(plain_databin):
    from fairseq.tasks.translation import TranslationConfig

    from tree_fairseq.tasks.tree_generation import TreeGenerationTask

    cfg = TranslationConfig(data=str(plain_databin), source_lang="de", target_lang="en", dataset_impl="mmap",
                            required_seq_len_multiple=1)
    for combine, expected in ((False, 40), (True, 39)):
        task = TreeGenerationTask.setup_task(cfg)
        task.load_dataset("valid", combine=combine)
        batches = task.get_batch_iterator(task.dataset("valid"), max_sentences=1, required_batch_size_multiple=8,
                                          max_positions=(1024, 1024)).next_epoch_itr(shuffle=False)
        assert len({i for batch in batches for i in batch["id"].tolist()}) == expected
