"""What ``scripts/benchmark_speed.py`` needs to know of a family beyond fairseq's transformer: the
task that trains it, what its encoder reads, the work of its equations that torch's FLOP counter
does not see, and its training target.

- Task: a model that reads dependency parents (its ``forward`` takes ``src_parent_spans``:
  ``pascal_transformer``) trains with ``--task dependency_translation`` on a data-bin with parents;
  every other family with ``--task tree_translation``.
- FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` counts matrix products only. Where a
  method's own work is elementwise (PASCAL's Gaussian weights and their product with the scores
  of its parent-scaled heads), the encoder says how much (``method_flops(batch_size, length,
  backward)``) and :class:`MethodFlops` adds it for every encoder forward it sees, so that the
  FLOP ideal charges the method with it.
"""

import inspect
from pathlib import Path

import torch
from fairseq.models import ARCH_MODEL_NAME_REGISTRY, MODEL_REGISTRY
from torch import Tensor

from tree_fairseq.data.parent_dataset import collate_parents
from tree_fairseq.trees.parents import control_heads, piece_parent_spans

#: The task of a model that reads each source piece's dependency parent.
PARENTS_TASK = "dependency_translation"
#: The task of every other family.
TREE_TASK = "tree_translation"
#: Training speed over its FLOP ideal, at least: the project's target for every family ...
TRAIN_TARGET = 0.9
#: ... and for the models whose method is a small elementwise addition to the transformer.
TRAIN_TARGETS = {"pascal_transformer": 0.95}


def model_class(arch: str) -> type:
    """The registered model class of the fairseq architecture ``arch``."""
    if arch not in ARCH_MODEL_NAME_REGISTRY:
        raise ValueError(f"unknown architecture {arch!r}")
    return MODEL_REGISTRY[ARCH_MODEL_NAME_REGISTRY[arch]]


def reads_parents(arch: str) -> bool:
    """Whether ``arch``'s model reads the source's dependency parents (``src_parent_spans``)."""
    return "src_parent_spans" in inspect.signature(model_class(arch).forward).parameters


def task_for(arch: str) -> str:
    """The task that trains ``arch`` on a tree data-bin."""
    return PARENTS_TASK if reads_parents(arch) else TREE_TASK


def has_parents(data_dir) -> bool:
    """Whether the data-bin ``data_dir`` holds the sources' dependency parents (its training split's
    parents stream, written by tree-fairseq-preprocess from ``{pref}.heads.{src}``)."""
    return any(Path(data_dir).glob("train.*.parents.idx"))


def train_target(arch: str) -> float:
    """The target of training speed over its FLOP ideal for ``arch``."""
    return TRAIN_TARGETS.get(ARCH_MODEL_NAME_REGISTRY.get(arch, ""), TRAIN_TARGET)


def synthetic_parent_spans(length: int, batch_size: int, seed: int = 1) -> Tensor:
    """``src_parent_spans (batch_size, length + 1, 2)`` of sentences of ``length`` one-piece words
    and EOS, unpadded: a random projective tree over the words (the ``random`` control of
    tree-fairseq-parse --heads-control), the same in every row."""
    words = [str(i) for i in range(length)]
    spans = torch.tensor(piece_parent_spans(control_heads(words, "random", seed), words, "subword_nmt"),
                         dtype=torch.long).view(-1, 2)
    return collate_parents([spans] * batch_size, torch.zeros(batch_size, dtype=torch.long), length + 1)


class MethodFlops:
    """Counts a model's method FLOPs that torch's counter leaves out, while active (``with``): for
    each forward of ``model.encoder`` that has ``method_flops``, that count for the encoder's
    batch (its ``encoder_padding_mask``, ``(B, n)``), with the backward pass when the forward
    ran in training with autograd (a training step's forward is followed by its backward).
    ``total`` is 0 for a model without such work.

    The encoder's ``forward`` is wrapped rather than hooked: fairseq's beam search calls it
    directly (``forward_torchscript``), which runs no module hooks."""

    def __init__(self, model):
        self.encoder = model.encoder
        self.total = 0
        self._wrapped = False

    def __enter__(self):
        if hasattr(self.encoder, "method_flops"):
            encoder, forward = self.encoder, self.encoder.forward

            def counted(*args, **kwargs):
                out = forward(*args, **kwargs)
                batch_size, length = out["encoder_padding_mask"][0].shape
                self.total += encoder.method_flops(batch_size, length,
                                                   backward=encoder.training and torch.is_grad_enabled())
                return out

            encoder.forward = counted  # an instance attribute, ahead of the class's method
            self._wrapped = True
        return self

    def __exit__(self, *exc):
        if self._wrapped:
            del self.encoder.forward
            self._wrapped = False
        return False
