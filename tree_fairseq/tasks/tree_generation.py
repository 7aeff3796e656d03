"""The ``tree_generation`` task: fairseq's translation task whose targets are trees linearised by
:mod:`tree_fairseq.trees.linearize` (symbols ``LABEL(k)`` announcing their number of children,
leaves plain), e.g. parsing as translation with ``--arch tree_pe_parser_*``; and ``tree_to_tree``,
the same targets from the source trees of ``tree_translation`` (``--arch tree_pe_tree2tree_*``).

The data-bin is fairseq-preprocess's, the target side one linearised tree per line. Training is
fairseq's translation task unchanged. Generation only ever emits whole trees: the generator's
search is wrapped by :class:`TreeConstrainedSearch`, which before each step masks every symbol that
cannot continue a hypothesis into a tree within the generator's length limit. A prefix's open slots
are ``1 + Σ (k_i − 1)`` in either order (depth or breadth first), so the constraint needs neither
the order nor the model: it holds for any model, search strategy and beam. The symbols kept keep
the model's log-probabilities (no renormalisation over them): a hypothesis' score is the model's.
"""

import math
import os
from dataclasses import dataclass

from fairseq import search, utils
from fairseq.sequence_generator import SequenceGenerator
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from torch import Tensor

from tree_fairseq.models.tree_pe_transformer import symbol_arities
from tree_fairseq.tasks.resumed_batches import ResumedBatches
from tree_fairseq.tasks.tree_translation import TreeTranslationConfig, TreeTranslationTask, training_split


def allowed_continuations(prefixes: Tensor, arities: Tensor, eos: int, step: int, max_len: int) -> Tensor:
    """Which symbols may come next: ``(N, V)`` bool for prefixes ``(N, step + 1)`` (BOS first).

    With ``s`` open slots after the prefix, EOS is allowed iff ``s == 0``, and a symbol with ``k``
    children iff ``s > 0`` and the ``s − 1 + k`` slots it leaves can still be filled before the
    generator forces EOS at step ``max_len``: one slot per step at most, so ``k <= max_len − step
    − s``. A leaf (``k = 0``) always fits while ``s <= max_len − step``, which holds from the first
    step (``s = 1``) on, so every hypothesis has a continuation. ``arities`` ``(V,)`` is
    :func:`symbol_arities` (``-1``: BOS, EOS, padding, never a symbol).
    """
    symbols = arities[prefixes[:, 1:]]  # (N, step)
    open_slots = 1 + (symbols - 1).masked_fill(symbols < 0, 0).sum(-1, keepdim=True)  # (N, 1)
    allowed = (arities >= 0) & (arities <= max_len - step - open_slots) & (open_slots > 0)  # (N, V)
    allowed[:, eos] = open_slots.squeeze(-1) == 0
    return allowed


class TreeConstrainedSearch(search.Search):
    """Wraps a fairseq search strategy: masks the continuations that cannot become a tree
    (:func:`allowed_continuations`), then lets the wrapped strategy choose. ``max_len`` is set by
    :class:`TreeSequenceGenerator` for each batch."""

    def __init__(self, inner: search.Search, arities: Tensor, tgt_dict):
        super().__init__(tgt_dict)
        self.inner = inner
        self.register_buffer("arities", arities, persistent=False)
        self.max_len = -1
        self.supports_constraints = inner.supports_constraints
        self.stop_on_max_len = inner.stop_on_max_len
        self.needs_src_lengths = getattr(inner, "needs_src_lengths", False)

    def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
        if self.max_len < 0:
            raise RuntimeError("TreeConstrainedSearch needs max_len: build it with TreeSequenceGenerator")
        bsz, beam_size, vocab_size = lprobs.shape
        arities = self.arities.to(prev_output_tokens.device)
        allowed = allowed_continuations(prev_output_tokens, arities, self.eos, step, self.max_len)
        lprobs = lprobs.masked_fill(~allowed.view(bsz, beam_size, vocab_size), -math.inf)
        return self.inner.step(step, lprobs, scores, prev_output_tokens, original_batch_idxs)

    def set_src_lengths(self, src_lengths):
        self.inner.set_src_lengths(src_lengths)

    def init_constraints(self, batch_constraints, beam_size: int):
        self.inner.init_constraints(batch_constraints, beam_size)

    def prune_sentences(self, batch_idxs: Tensor):
        self.inner.prune_sentences(batch_idxs)

    def update_constraints(self, active_hypos: Tensor):
        self.inner.update_constraints(active_hypos)


class TreeSequenceGenerator(SequenceGenerator):
    """fairseq's generator whose search only extends hypotheses into whole trees. ``arities``:
    :func:`symbol_arities` of the target dictionary."""

    def __init__(self, models, tgt_dict, arities: Tensor, **kwargs):
        super().__init__(models, tgt_dict, **kwargs)
        self.search = TreeConstrainedSearch(self.search, arities, tgt_dict)

    def _generate(self, sample, prefix_tokens=None, constraints=None, bos_token=None):
        # The search must know where the generator will force EOS: the same max_len as
        # SequenceGenerator._generate computes from the batch.
        net_input = sample["net_input"]
        if self.match_source_len:
            max_len = int(net_input["src_lengths"].max())
        else:
            max_len = min(int(self.max_len_a * net_input["src_tokens"].size(1) + self.max_len_b), self.max_len - 1)
        self.search.max_len = max_len
        return super()._generate(sample, prefix_tokens=prefix_tokens, constraints=constraints, bos_token=bos_token)


class TreeOutputs:
    """Generation for a translation task whose targets are linearised trees: fairseq's, through a
    :class:`TreeSequenceGenerator`. Mix in before the task class. A target dictionary without a single
    ``LABEL(k)`` symbol (text, not linearised trees) is refused: every symbol would be a leaf, a
    whole tree, and each sentence would be decoded as one token."""

    # What a tree decoder's model asks of its task (the models cannot import the tasks above them).
    generates_trees = True

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        if not bool((symbol_arities(tgt_dict) > 0).any()):
            data = utils.split_paths(cfg.data)[0] if getattr(cfg, "data", None) else "the data-bin"
            raise ValueError(
                f"--task {getattr(cfg, '_name', None) or type(self).__name__}: the target dictionary "
                f"{os.path.join(data, f'dict.{cfg.target_lang}.txt')} holds no LABEL(k) symbol (a node and its "
                "number of children): its targets are text, not linearised trees (tree_fairseq.trees.linearize); "
                "translate text with --task translation or tree_translation")

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        if seq_gen_cls is not None or getattr(args, "print_alignment", False):
            raise ValueError(f"{type(self).__name__} builds its own sequence generator (no --print-alignment)")
        extra_gen_cls_kwargs = {**(extra_gen_cls_kwargs or {}), "arities": symbol_arities(self.target_dictionary)}
        return super().build_generator(models, args, seq_gen_cls=TreeSequenceGenerator,
                                       extra_gen_cls_kwargs=extra_gen_cls_kwargs, **kwargs)


@dataclass
class TreeGenerationConfig(TranslationConfig):
    """fairseq's translation options; the targets are linearised trees."""


@register_task("tree_generation", dataclass=TreeGenerationConfig)
class TreeGenerationTask(TreeOutputs, ResumedBatches, TranslationTask):
    """A resumed run trains on the batches of an uninterrupted one (:mod:`tree_fairseq.tasks.resumed_batches`)."""

    cfg: TreeGenerationConfig

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self._training_splits: set[str] = set()

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        # The split trained on (fairseq's trainer loads --train-subset with combine=True); every split
        # only evaluated (valid, --combine-valid-subsets' too, generate's --gen-subset) is not.
        if training_split(self.cfg, split, combine):
            self._training_splits.add(split)
        else:
            self._training_splits.discard(split)

    def get_batch_iterator(self, dataset, *args, **kwargs):
        # fairseq drops the last batch when its size is not a multiple of
        # --required-batch-size-multiple (default 8): a few sentences of a training epoch, but
        # sentences left untranslated in a split that is generated or scored. Those keep them all.
        if not any(self.datasets.get(split) is dataset for split in self._training_splits):
            kwargs["required_batch_size_multiple"] = 1
        return super().get_batch_iterator(dataset, *args, **kwargs)


@dataclass
class TreeToTreeConfig(TreeTranslationConfig):
    """tree_translation's options (a data-bin of tree-fairseq-preprocess); the targets are
    linearised trees."""


@register_task("tree_to_tree", dataclass=TreeToTreeConfig)
class TreeToTreeTask(TreeOutputs, TreeTranslationTask):
    cfg: TreeToTreeConfig
