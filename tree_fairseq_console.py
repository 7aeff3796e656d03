"""Entry points of the tree-fairseq-* console scripts.

Imported before :mod:`tree_fairseq`, this module tells the package not to
register its fairseq models on import, so that ``--help`` and the parsers that
need no model answer without loading fairseq and torch (seconds saved per call).
Each script loads only what it uses; those that need fairseq's registries call
``tree_fairseq.register()``.
"""

import importlib


def _run(module: str):
    return importlib.import_module(f"tree_fairseq.{module}").main()


def parse():
    return _run("cli.parse")


def preprocess():
    return _run("cli.preprocess")


def score():
    return _run("cli.score")


def compare():
    return _run("cli.compare")


def config_args():
    return _run("cli.config_args")


def average_checkpoints():
    return _run("cli.average_checkpoints")


def synthetic():
    return _run("synthetic")


def parse_worker(*args):
    """A worker process of tree-fairseq-parse --workers (spawned: a fresh interpreter), started
    here so that it too loads fairseq and torch only if its parser needs them."""
    from tree_fairseq.cli.parse import run_worker

    return run_worker(*args)
