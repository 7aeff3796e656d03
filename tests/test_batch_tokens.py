"""--batch-tokens, what a sentence counts toward --max-tokens in tree_translation: with ``text`` the
training batches are exactly those of fairseq's translation task on the same data-bin, seed and
flags (a tree model and the transformer then make the same updates); with ``tree``, the default,
a sentence counts its source leaves plus nodes. The option is checked through fairseq-train's
parser, a config override (scripts/train.sh and fairseq-hydra-train) and a training run."""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from fairseq import options, tasks
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from helpers import USER_DIR, cli_args, parse, subprocess_env

from tree_fairseq.analysis.same_batches import training_batches
from tree_fairseq.cli import config_args
from tree_fairseq.tasks import TreeTranslationConfig, TreeTranslationTask

ROOT = Path(__file__).resolve().parents[1]
MAX_TOKENS = 48  # a hundred batches or more of the tiny data-bin; two sentences' leaves + nodes exceed it
SEED = 3
EPOCHS = 2


def load(databin, task="tree_translation", **overrides):
    config, task_class = ((TreeTranslationConfig, TreeTranslationTask) if task == "tree_translation"
                          else (TranslationConfig, TranslationTask))
    cfg = config(data=str(databin), source_lang="de", target_lang="en", dataset_impl="mmap",
                 required_seq_len_multiple=1, **overrides)
    return task_class.setup_task(cfg)


def epoch_batches(task, max_tokens=MAX_TOKENS, epochs=EPOCHS):
    """The sentence ids of each training batch, epoch by epoch, asked for as fairseq-train's trainer
    asks: the train split combined, --max-tokens folded into the size filter, too long sentences
    skipped, batches a multiple of 8 sentences, shuffled with the seed."""
    task.load_dataset("train", combine=True, epoch=1)
    return training_batches(task, SEED, epochs, max_tokens)


def leaves_and_nodes(task, split="train"):
    """Per sentence: (source leaves + nodes, target tokens), counted from the streams themselves."""
    dataset = task.dataset(split)
    nodes = np.array([len(dataset.node_labels[i]) for i in range(len(dataset))])
    return dataset.dataset.src_sizes + nodes, dataset.dataset.tgt_sizes


@pytest.fixture(scope="module")
def translation_batches(tiny_databin):
    return epoch_batches(load(tiny_databin, "translation"))


def test_text_gives_the_translation_tasks_batches(tiny_databin, translation_batches):
    task = load(tiny_databin, batch_tokens="text")
    batches = epoch_batches(task)
    assert len(translation_batches[0]) > 100
    assert translation_batches[0] != translation_batches[1]  # shuffled: each epoch its own order
    assert batches == translation_batches
    # A sentence whose leaves + nodes exceed --max-tokens is trained on: only its text sizes count.
    trees, _ = leaves_and_nodes(task)
    assert set(np.flatnonzero(trees > MAX_TOKENS).tolist()) & {i for batch in batches[0] for i in batch}


def test_tree_counts_leaves_and_nodes(tiny_databin, translation_batches):
    task = load(tiny_databin)
    assert task.cfg.batch_tokens == "tree"
    batches = epoch_batches(task)
    trees, targets = leaves_and_nodes(task)
    counted = np.maximum(trees, targets)
    for epoch in batches:
        # fairseq's rule, on leaves + nodes: the batch padded to its longest sentence fits
        assert all(len(batch) * counted[batch].max() <= MAX_TOKENS for batch in epoch)
        # every sentence that fits is there, but for fairseq's last batch when under 8 (it drops that)
        batched, fit = {i for batch in epoch for i in batch}, set(np.flatnonzero(counted <= MAX_TOKENS).tolist())
        assert batched <= fit and len(batched) > len(fit) - 8 and len(fit) < len(counted)
    assert batches != translation_batches
    assert len(batches[0]) > 1.5 * len(translation_batches[0])  # more, smaller updates
    # the translation task's batches would not fit when the nodes count
    assert any(len(batch) * counted[batch].max() > MAX_TOKENS for batch in translation_batches[0])


def test_evaluated_splits_skip_what_the_choice_counts(tiny_databin, caplog):
    """fairseq folds --max-tokens into its size filter in training only; the task's own filter skips
    (or refuses) what --batch-tokens counts beyond --max-tokens in the other splits too."""
    for choice, counted in (("tree", "source leaves + nodes (or target tokens)"),
                            ("text", "source (or target) tokens")):
        task = load(tiny_databin, batch_tokens=choice)
        task.load_dataset("valid")
        trees, targets = leaves_and_nodes(task, "valid")
        sources = task.dataset("valid").dataset.src_sizes
        sizes = np.maximum(trees if choice == "tree" else sources, targets)
        max_tokens = 24
        assert 0 < (sizes > max_tokens).sum() < len(sizes)
        caplog.clear()
        iterator = task.get_batch_iterator(task.dataset("valid"), max_tokens=max_tokens, max_positions=(1024, 1024),
                                           ignore_invalid_inputs=True)
        kept = sorted(i for batch in iterator.next_epoch_itr(shuffle=False) for i in batch["id"].tolist())
        assert kept == np.flatnonzero(sizes <= max_tokens).tolist()
        assert f"{(sizes > max_tokens).sum()} samples have invalid sizes and will be skipped: {counted}" in caplog.text
        task = load(tiny_databin, batch_tokens=choice)
        task.load_dataset("valid")
        with pytest.raises(Exception, match=f"> --max-tokens {max_tokens}; skip this example"):
            task.get_batch_iterator(task.dataset("valid"), max_tokens=max_tokens, max_positions=(1024, 1024))


def test_raw_text_batches_count_as_the_choice_says(tiny_databin):
    for choice, nodes_counted in (("tree", True), ("text", False)):
        task = load(tiny_databin, batch_tokens=choice, inference_parser="balanced")
        task.load_dataset("test")
        sources = [task.dataset("test")[i]["source"] for i in range(4)]
        dataset = task.build_dataset_for_inference(sources, [len(source) for source in sources])
        nodes = [len(dataset[i]["node_labels"]) for i in range(4)]
        assert sum(nodes) > 0
        assert [dataset.num_tokens(i) for i in range(4)] == [
            len(source) + (n if nodes_counted else 0) for source, n in zip(sources, nodes)]


def test_fairseq_train_parser(tiny_databin, capsys):
    args = parse(tiny_databin, "--batch-tokens", "text", arch="tree_transformer_tiny")
    task = tasks.setup_task(args)
    assert task.cfg.batch_tokens == "text"
    task.load_dataset("valid")
    assert not task.dataset("valid").count_nodes
    default = tasks.setup_task(parse(tiny_databin, arch="tree_transformer_tiny"))
    assert default.cfg.batch_tokens == "tree"
    default.load_dataset("valid")
    assert default.dataset("valid").count_nodes
    with pytest.raises(SystemExit):
        parse(tiny_databin, "--batch-tokens", "leaves", arch="tree_transformer_tiny")
    assert "invalid choice: 'leaves'" in capsys.readouterr().err
    # fairseq-train --help stops before the task's options are added; this is what they add
    parser = argparse.ArgumentParser()
    TreeTranslationTask.add_args(parser)
    help_text = " ".join(parser.format_help().split())
    assert "--batch-tokens {tree,text}" in help_text and "as --task translation counts" in help_text


def test_config_override_as_train_sh_gives_it(tiny_databin, translation_batches):
    """scripts/train.sh CONFIG DATA-BIN SAVE-DIR task.batch_tokens=text: the config's flags."""
    overrides = [f"task.data={tiny_databin}", f"common.user_dir={USER_DIR}", "task.batch_tokens=text"]
    path = str(ROOT / "configs" / "quickstart_tree_transformer.yaml")
    config = config_args.load_config(path, overrides)
    config_args.check_config(config, path)
    flags = config_args.config_to_args(config)
    assert flags[flags.index("--batch-tokens") + 1] == "text"
    task = tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), flags))
    assert epoch_batches(task) == translation_batches


def hydra_task(config_dir: Path, name: str, overrides: list[str]):
    """The task fairseq-hydra-train sets up from ``config_dir/name.yaml`` and ``overrides``."""
    from fairseq.dataclass.initialize import add_defaults, hydra_init
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    hydra_init(name)
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(name, overrides=overrides)
    add_defaults(cfg)
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    return tasks.setup_task(cfg.task)


def test_hydra_config_and_override(tiny_databin, translation_batches, tmp_path):
    """fairseq-hydra-train: ``batch_tokens: text`` in a config's task group, or hydra's override of a
    task key the config does not set (``+task.batch_tokens=text``)."""
    name = "quickstart_tree_transformer"
    config = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    config["task"]["batch_tokens"] = "text"
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(config))
    task = hydra_task(tmp_path, name, [f"task.data={tiny_databin}"])
    assert task.cfg.batch_tokens == "text"
    assert epoch_batches(task) == translation_batches
    task = hydra_task(ROOT / "configs", name, [f"task.data={tiny_databin}", "+task.batch_tokens=text"])
    assert task.cfg.batch_tokens == "text"
    assert hydra_task(ROOT / "configs", name, [f"task.data={tiny_databin}"]).cfg.batch_tokens == "tree"


@pytest.mark.slow
def test_training_makes_the_translation_tasks_updates(tiny_databin, tmp_path):
    """fairseq-train --batch-tokens text, one epoch: as many updates as the translation task has
    batches, not as many as the default makes."""
    max_tokens = 64
    result = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *cli_args(tiny_databin, "tree_translation"),
        "--batch-tokens", "text", "--arch", "tree_transformer_tiny", "--optimizer", "adam", "--lr", "1e-3",
        "--max-tokens", str(max_tokens), "--max-epoch", "1", "--seed", str(SEED), "--no-save",
        "--disable-validation", "--log-format", "simple",
    ], env=subprocess_env(), capture_output=True, text=True)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    updates = int(re.search(r"\| train \| epoch 001 \|.*\| num_updates (\d+) \|", log).group(1))
    translation = len(epoch_batches(load(tiny_databin, "translation"), max_tokens, epochs=1)[0])
    tree = len(epoch_batches(load(tiny_databin), max_tokens, epochs=1)[0])
    assert updates == translation != tree
