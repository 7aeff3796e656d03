"""What the plugin refuses inside fairseq's own commands is one line (``PROG: error: ...``), not a
traceback; every other exception keeps Python's traceback (tree_fairseq.errors)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import USER_DIR, subprocess_env

from tree_fairseq import errors
from tree_fairseq.trees import TreeError

FAIRSEQ_TRAIN = str(Path(sys.executable).parent / "fairseq-train")


def _raised(function):
    try:
        function()
    except BaseException as error:  # noqa: BLE001  (the hook's input, whatever it is)
        return error
    raise AssertionError("nothing was raised")


def _hooked(error, capsys):
    called = []
    errors._hook(type(error), error, error.__traceback__, lambda *args: called.append(args))
    return called, capsys.readouterr().err


def test_a_refusal_the_plugin_raised_is_one_line(capsys, monkeypatch):
    from tree_fairseq.trees.parents import read_heads

    monkeypatch.setattr(sys, "argv", ["/venv/bin/fairseq-train", "data"])
    error = _raised(lambda: read_heads("2 1"))
    assert isinstance(error, TreeError) and errors.raised_by_plugin(error)
    called, printed = _hooked(error, capsys)
    assert not called and printed == "fairseq-train: error: the heads form a cycle (words 1, 2): not a dependency tree\n"


def test_other_exceptions_keep_their_traceback(capsys):
    def here():
        raise ValueError("raised outside the plugin")

    for error in (_raised(here), _raised(lambda: int("x")), _raised(lambda: [][1])):
        assert not errors.raised_by_plugin(error)
        called, printed = _hooked(error, capsys)
        assert len(called) == 1 and called[0][1] is error and printed == ""


def test_a_plugin_error_keeps_its_traceback_when_asked(capsys, monkeypatch):
    from tree_fairseq.trees.parents import read_heads

    monkeypatch.setenv("TREE_FAIRSEQ_TRACEBACK", "1")
    called, printed = _hooked(_raised(lambda: read_heads("2 1")), capsys)
    assert len(called) == 1 and printed == ""


class _ReadsHeads:
    """A dataset whose items are read by the plugin: "2 1" is a cycle (a TreeError), "x" not its own."""

    def __init__(self, text):
        self.text = text

    def __len__(self):
        return 1

    def __getitem__(self, index):
        from tree_fairseq.trees.parents import read_heads

        return read_heads(self.text) if self.text != "x" else int(self.text)


def _from_worker(text):
    """What the main process gets when a DataLoader worker (fairseq's default --num-workers 1)
    reading ``_ReadsHeads(text)`` raises: torch re-raises it with the worker's traceback as its message."""
    import torch.utils.data

    return _raised(lambda: next(iter(torch.utils.data.DataLoader(_ReadsHeads(text), num_workers=1,
                                                                 collate_fn=lambda items: items))))


def test_a_refusal_raised_in_a_dataloader_worker_is_the_same_one_line(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/fairseq-generate", "data"])
    error = _from_worker("2 1")
    assert isinstance(error, TreeError) and "Caught TreeError in DataLoader worker process 0" in str(error)
    assert errors.raised_by_plugin(error)
    called, printed = _hooked(error, capsys)
    assert not called
    assert printed == "fairseq-generate: error: the heads form a cycle (words 1, 2): not a dependency tree\n"


def test_an_error_raised_in_a_dataloader_worker_outside_the_plugin_keeps_its_traceback(capsys):
    error = _from_worker("x")
    assert isinstance(error, ValueError) and "Caught ValueError in DataLoader worker" in str(error)
    assert not errors.raised_by_plugin(error)
    called, printed = _hooked(error, capsys)
    assert len(called) == 1 and called[0][1] is error and printed == ""


def test_install_puts_the_hook_once():
    errors.install()
    hook = sys.excepthook
    errors.install()
    assert sys.excepthook is hook and hook.tree_fairseq


def _train(databin, tmp_path, *flags):
    return subprocess.run([FAIRSEQ_TRAIN, str(databin), "--user-dir", USER_DIR, "--cpu", "--num-workers", "0",
                           "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000", "--max-update", "1",
                           "--save-dir", str(tmp_path / "ck"), *flags],
                          env=subprocess_env(), capture_output=True, text=True)


def _one_line(result, message):
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq-train: error: ") and message in last, last


@pytest.mark.slow
def test_fairseq_train_says_a_tree_model_needs_the_tree_task_in_one_line(tiny_databin, tmp_path):
    _one_line(_train(tiny_databin, tmp_path, "--task", "translation", "--arch", "tree_transformer_tiny"),
              "reads source trees: use --task tree_translation")


@pytest.mark.slow
def test_fairseq_train_says_a_data_bin_without_trees_in_one_line(tiny_databin, tmp_path):
    plain = shutil.copytree(tiny_databin, tmp_path / "plain")
    (plain / "dict.de.nodes.txt").unlink()
    _one_line(_train(plain, tmp_path, "--task", "tree_translation", "--arch", "tree_transformer_tiny"),
              "dict.de.nodes.txt")


@pytest.mark.slow
def test_fairseq_train_says_a_cut_short_parser_record_in_one_line(tiny_databin, tmp_path):
    cut = shutil.copytree(tiny_databin, tmp_path / "cut")
    record = (cut / "parser.de.json").read_text()
    (cut / "parser.de.json").write_text(record[:len(record) // 2])
    result = _train(cut, tmp_path, "--task", "tree_translation", "--arch", "tree_transformer_tiny")
    _one_line(result, "parser.de.json")


@pytest.mark.slow
def test_fairseq_train_says_a_refused_resume_in_one_line(tiny_databin, tmp_path):
    """A refusal of upgrade_state_dict_named, which fairseq's trainer replaces by its own bare
    Exception ("Cannot load model parameters ..."): one line, the refusal's message then fairseq's."""
    flags = ("--task", "tree_translation", "--arch", "tree_transformer_tiny")
    assert _train(tiny_databin, tmp_path, *flags).returncode == 0
    result = _train(tiny_databin, tmp_path, *flags, "--leaf-weight-per-head", "--max-update", "2")
    _one_line(result, "--leaf-weight-per-head: encoder.layers.0.self_attn.leaf_weight.weight has 1 row")
    assert "Cannot load model parameters from checkpoint" in result.stderr.strip().splitlines()[-1]
