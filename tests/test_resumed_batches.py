"""A run resumed from a checkpoint trains on exactly the batches (the sentence ids of each, in order)
the same run trains on uninterrupted, for every task of the package: resumed at an epoch boundary
(``checkpoint_last.pt`` of the end of epoch 1) and mid-epoch (the last ``--save-interval-updates``
checkpoint of a run stopped in epoch 2). fairseq orders a split's sentences with the seed plus the
epoch its batches are built in, which for a resumed run is the epoch it resumes in
(:mod:`tree_fairseq.tasks.resumed_batches`).

The first tests follow fairseq-train's own path without training: a Trainer asks for the batches
(``Trainer.get_train_iterator``), epochs go on as fairseq_cli.train's loop asks for them, a checkpoint
keeps what ``checkpoint_utils.save_checkpoint`` keeps of them (the iterator's ``state_dict``) and a
resume does what ``checkpoint_utils.load_checkpoint`` does with it, in a new task and trainer. The
slow test trains for real: fairseq-train's ``main``, each sitting a new call with the same command,
the batches recorded as the trainer takes them, a sitting stopped mid-epoch by an interruption after
its last save."""

import pytest
from fairseq import checkpoint_utils, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer
from fairseq_cli import train as fairseq_train
from helpers import parse

pytestmark = pytest.mark.usefixtures("one_thread")

SEED = 3
# (task, data-bin fixture, arch, flags): every task of the package, tree_translation with either
# --batch-tokens; tree_to_tree and tree_generation on linearised trees as targets (they refuse text).
RUNS = {
    "tree_translation": ("tree_translation", "tiny_databin", "tree_transformer_tiny", []),
    "tree_translation text": ("tree_translation", "tiny_databin", "tree_transformer_tiny", ["--batch-tokens", "text"]),
    "dependency_translation": ("dependency_translation", "parent_databin", "pascal_transformer_tiny", []),
    "tree_to_tree": ("tree_to_tree", "for2lam_databin", "tree_pe_tree2tree_tiny", []),
    "tree_generation": ("tree_generation", "parse_databin", "tree_pe_parser_tiny", []),
    "constituent_masked_lm": ("constituent_masked_lm", "mono_databin", "constituent_encoder_lm_tiny",
                              ["--criterion", "masked_lm"]),
}


@pytest.fixture(scope="module")
def for2lam_databin(tmp_path_factory):
    from test_tree_to_tree import write_for2lam

    return write_for2lam(tmp_path_factory.mktemp("for2lam"))


@pytest.fixture(scope="module")
def parse_databin(tmp_path_factory):
    from test_tree_decoder import write_parse_corpus

    # 60 valid sentences: the slow test trains on them, and needs more than 6 batches an epoch
    return write_parse_corpus(tmp_path_factory.mktemp("parse_corpus"), "depth_first",
                              (("train", 200, 1), ("valid", 60, 2), ("test", 24, 3)))


def config(request, name, *flags):
    """fairseq-train's config of run ``name`` with ``flags``."""
    task, databin, arch, task_flags = RUNS[name]
    args = parse(request.getfixturevalue(databin), *task_flags, "--seed", str(SEED), "--optimizer", "adam",
                 "--lr", "1e-3", "--num-workers", "0", *flags, arch=arch, task=task)
    return convert_namespace_to_omegaconf(args)


# fairseq-train's path to its batches, without training


def sitting(cfg, max_epoch, state=None, stop_after=None):
    """The batches one sitting of fairseq-train takes, ``[(epoch, ids), ...]``, from ``state`` (a
    checkpoint's iterator state; None: a fresh start) until ``max_epoch`` ends or after
    ``stop_after`` batches, and the iterator state a checkpoint would keep at that point."""
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    trainer = Trainer(cfg, task, model, task.build_criterion(cfg.criterion))
    # checkpoint_utils.load_checkpoint
    epoch_itr = trainer.get_train_iterator(epoch=1 if state is None else state["epoch"], load_dataset=True)
    if state is not None:
        epoch_itr.load_state_dict(state)
    taken = []
    # fairseq_cli.train.main and train
    while epoch_itr.next_epoch_idx <= max_epoch:
        itr = epoch_itr.next_epoch_itr(fix_batches_to_gpus=cfg.distributed_training.fix_batches_to_gpus,
                                       shuffle=epoch_itr.next_epoch_idx > cfg.dataset.curriculum)
        for sample in itr:
            taken.append((epoch_itr.epoch, sample["id"].tolist()))
            if len(taken) == stop_after:
                return taken, epoch_itr.state_dict()
        epoch_itr = trainer.get_train_iterator(epoch_itr.next_epoch_idx, load_dataset=False)
    return taken, epoch_itr.state_dict()


def differing(resumed, uninterrupted):
    """How many batches of ``resumed`` (the tail of a run) are not those of ``uninterrupted``'s tail."""
    tail = uninterrupted[len(uninterrupted) - len(resumed):]
    return sum(ours != theirs for ours, theirs in zip(resumed, tail)) + abs(len(resumed) - len(tail))


@pytest.fixture(scope="module")
def uninterrupted_runs():
    """The batches of each run's two epochs uninterrupted (``--max-tokens`` 64), by name."""
    return {}


@pytest.mark.parametrize("interrupted", ["end of epoch 1", "in epoch 2"])
@pytest.mark.parametrize("name", list(RUNS))
def test_a_resumed_run_takes_the_uninterrupted_runs_batches(request, uninterrupted_runs, name, interrupted):
    cfg = config(request, name, "--max-tokens", "64")
    if name not in uninterrupted_runs:
        uninterrupted_runs[name] = sitting(cfg, max_epoch=2)[0]
    uninterrupted = uninterrupted_runs[name]
    first = [batch for batch in uninterrupted if batch[0] == 1]
    assert len(first) > 20 and len(uninterrupted) == 2 * len(first)
    if interrupted == "end of epoch 1":
        taken, state = sitting(cfg, max_epoch=1)
        assert state == {"version": 2, "epoch": 2, "iterations_in_epoch": 0, "shuffle": True}
    else:  # ten batches into epoch 2
        taken, state = sitting(cfg, max_epoch=2, stop_after=len(first) + 10)
        assert state["epoch"] == 2 and state["iterations_in_epoch"] == 10
    resumed, _ = sitting(cfg, max_epoch=2, state=state)
    assert resumed and {epoch for epoch, _ in resumed} == {2}
    assert differing(resumed, uninterrupted) == 0
    assert taken + resumed == uninterrupted


def test_a_resumed_text_batches_run_keeps_the_uninterrupted_transformers_batches(request):
    """--batch-tokens text, resumed: the batches of fairseq's translation task uninterrupted (a
    translation run resumed in epoch 2 or later has batches of the same sizes, other sentences)."""
    translation = convert_namespace_to_omegaconf(parse(
        request.getfixturevalue("tiny_databin"), "--seed", str(SEED), "--optimizer", "adam", "--lr", "1e-3",
        "--num-workers", "0", "--max-tokens", "64", "--encoder-layers", "1", "--decoder-layers", "1",
        "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "16",
        "--decoder-ffn-embed-dim", "16", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        arch="transformer", task="translation"))
    transformer, _ = sitting(translation, max_epoch=2)
    cfg = config(request, "tree_translation text", "--max-tokens", "64")
    taken, state = sitting(cfg, max_epoch=1)
    resumed, _ = sitting(cfg, max_epoch=2, state=state)
    assert taken + resumed == transformer


# fairseq-train for real


class Interrupted(Exception):
    """A sitting killed before an update (after the last checkpoint it saved)."""


def train(cfg, monkeypatch, stop_before=None):
    """One sitting of fairseq-train (``fairseq_cli.train.main``, what the command runs on one CPU):
    the sentence ids of each batch it trains on, in order. ``stop_before``: the sitting is
    interrupted before that update (counted over the whole run), as a killed run is."""
    taken = []
    train_step = Trainer.train_step

    def recorded(trainer, samples, *args, **kwargs):
        if stop_before is not None and trainer.get_num_updates() + 1 == stop_before:
            raise Interrupted
        taken.append([sample["id"].tolist() for sample in samples])
        return train_step(trainer, samples, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", recorded)
        try:
            fairseq_train.main(cfg)
        except Interrupted:
            pass
    return taken


def updates_saved(save_dir) -> int:
    """The updates checkpoint_last.pt of ``save_dir`` was saved after."""
    state = checkpoint_utils.load_checkpoint_to_cpu(str(save_dir / "checkpoint_last.pt"))
    return state["optimizer_history"][-1]["num_updates"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_fairseq_train_resumed_takes_the_uninterrupted_runs_batches(request, monkeypatch, tmp_path, name):
    """Each sitting the same command but for --max-epoch; the valid split (40 sentences) is the
    training data, which keeps a run to a few seconds."""
    def run(save_dir, max_epoch, stop_before=None, save_interval=0):
        cfg = config(request, name, "--train-subset", "valid", "--max-tokens", "48", "--max-epoch", str(max_epoch),
                     "--save-dir", str(tmp_path / save_dir), "--save-interval-updates", str(save_interval),
                     "--no-epoch-checkpoints", "--disable-validation", "--log-format", "simple")
        return train(cfg, monkeypatch, stop_before)

    uninterrupted = run("uninterrupted", 2)
    first = run("boundary", 1)  # fairseq-train --max-epoch 1, then --max-epoch 2 in the same save dir
    assert 6 < len(first) < len(uninterrupted) and first == uninterrupted[:len(first)]
    resumed = run("boundary", 2)
    assert differing(resumed, uninterrupted) == 0 and first + resumed == uninterrupted

    # saved three updates into epoch 2 (--save-interval-updates), killed two updates later, resumed
    save_interval = len(first) + 3
    killed = run("mid-epoch", 2, stop_before=len(first) + 6, save_interval=save_interval)
    saved = updates_saved(tmp_path / "mid-epoch")
    assert len(killed) == len(first) + 5 and saved == len(first) + 3
    resumed = run("mid-epoch", 2, save_interval=save_interval)
    assert len(resumed) == len(uninterrupted) - saved
    assert differing(resumed, uninterrupted) == 0 and killed[:saved] + resumed == uninterrupted
