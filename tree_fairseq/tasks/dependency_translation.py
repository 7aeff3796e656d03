"""The ``dependency_translation`` task: ``tree_translation`` whose source sentences also carry each
piece's dependency parent (batch layout: :mod:`tree_fairseq.data.parent_dataset`), for the models
that read parents (``pascal_transformer``).

The data-bin is tree-fairseq-preprocess's with the parents stream, written when the source's
dependency heads lie beside the trees (``{pref}.heads.{src}``, tree-fairseq-parse). Raw text
(fairseq-interactive) gets its parents from ``--inference-heads``: ``parser``, the dependency
parse of ``--inference-parser spacy`` (the pipeline the training data was parsed with; the parse
the tree is made from, not a second one), or the trivial heads the data-bin was made with
(``next``, ``previous``, ``random`` with ``--inference-heads-seed``). By default those the parser
record says the training data's heads came from (:mod:`tree_fairseq.parsing.record`), else
``parser``; other heads or another seed than the recorded ones are refused unless
``--inference-parser-override``.

A sentence counts its source and target tokens toward ``--max-tokens`` by default
(``--batch-tokens text``), as ``--task translation`` counts: the models of this task read no tree
nodes, and so train on exactly the batches of fairseq's transformer on the same data-bin.
"""

import logging
from dataclasses import dataclass
from typing import Optional

from fairseq import utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task

from tree_fairseq.data.parent_dataset import INFERENCE_HEADS, InferenceParents, ParentTreePairDataset
from tree_fairseq.data.tree_streams import load_parent_stream
from tree_fairseq.models.common import option
from tree_fairseq.parsing.record import UNKNOWN, describe
from tree_fairseq.tasks.tree_translation import (
    BATCH_TOKENS,
    TreeTranslationConfig,
    TreeTranslationTask,
    require_batch_key,
)

logger = logging.getLogger(__name__)


@dataclass
class DependencyTranslationConfig(TreeTranslationConfig):
    """tree_translation's options, counting text tokens by default, plus where raw text's heads
    come from."""

    batch_tokens: ChoiceEnum(BATCH_TOKENS) = option(
        "text",
        "what a sentence counts toward --max-tokens: text (default), max(source tokens, target "
        "tokens), as --task translation counts; tree, source leaves + nodes (the models of this "
        "task read no nodes)",
    )
    inference_heads: Optional[ChoiceEnum(INFERENCE_HEADS)] = option(
        None,
        "dependency heads of raw source sentences (fairseq-interactive): parser, those of "
        "--inference-parser spacy; next, previous or random, the trivial heads of "
        "tree-fairseq-parse --heads-control. Default: what the training data's heads were made "
        "with, as recorded (parser without a record); others are refused unless "
        "--inference-parser-override",
    )
    inference_heads_seed: Optional[int] = option(
        None,
        "seed of --inference-heads random, as tree-fairseq-parse --heads-seed "
        "(default: the recorded one, else 1)",
    )


@register_task("dependency_translation", dataclass=DependencyTranslationConfig)
class DependencyTranslationTask(TreeTranslationTask):
    cfg: DependencyTranslationConfig
    #: What a model reading parents asks its task for.
    source_parents = True

    def _configure_inference(self) -> None:
        super()._configure_inference()
        try:
            heads, seed, refused = *inference_heads(self.cfg, self.parser_record), None
        except ValueError as error:  # said when raw text comes, not to training
            heads, seed, refused = "parser", 1, str(error)
        self.inference_parents = InferenceParents(
            self.src_dict, self.subword_format, heads=heads, parser=lambda: self.inference_trees.parser, seed=seed,
            known_heads=lambda: self.inference_trees.word_heads, refused=refused,
            source_pieces=self.inference_trees.source_pieces,
        )

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        require_batch_key(model, cfg, "src_parent_spans", "reads no dependency parents: train it with --task "
                          "tree_translation on the same data-bin")
        return model

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        paths = utils.split_paths(self.cfg.data)
        data_dir = paths[(epoch - 1) % len(paths)]
        parents = load_parent_stream(data_dir, split, self.cfg.source_lang, self.cfg.target_lang,
                                     combine=combine, upsample_primary=self.cfg.upsample_primary)
        self.datasets[split] = ParentTreePairDataset.with_parents(self.datasets[split], parents)

    def inference_dataset(self, src_tokens, src_lengths, constraints):
        """Raw-text translation: trees from --inference-parser, parents from --inference-heads."""
        dataset = super().inference_dataset(src_tokens, src_lengths, constraints)
        return self.inference_parents.dataset(dataset, src_tokens)

    def add_inference_inputs(self, net_input: dict) -> dict:
        """``net_input`` with the source parents, then the trees, of raw text where it has none."""
        if "src_parent_spans" not in net_input:
            net_input = self.inference_parents.add_parent_inputs(net_input)
        return super().add_inference_inputs(net_input)

def inference_heads(cfg: DependencyTranslationConfig, record) -> tuple[str, int]:
    """(heads, seed) of raw text: those given, else the recorded ones, else ``parser`` and 1.
    ValueError for given ones the record contradicts, unless --inference-parser-override."""
    recorded = record.get("heads") if isinstance(record, dict) else None
    given_heads = str(cfg.inference_heads) if cfg.inference_heads is not None else None
    if recorded == UNKNOWN:
        # The trees' parse is known but the heads file is not the one it wrote (another run's, or
        # edited since): the parser's own heads may not be the training data's.
        if given_heads is None:
            raise ValueError("the training data's heads are unknown: its heads file is not the one its trees' parse "
                             f"recorded ({describe(record)}). Say how raw text's heads are made with --inference-heads "
                             "(parser, next, previous or random with --inference-heads-seed), as its heads were made")
        logger.warning(f"the training data's heads are unknown: raw text's heads are made as --inference-heads "
                       f"{given_heads} says")
    recorded = recorded if isinstance(recorded, dict) else {}  # none, or unknown and given
    heads = given_heads or recorded.get("source") or "parser"
    seed = cfg.inference_heads_seed
    if seed is None:
        seed = recorded.get("seed", 1) if recorded.get("source") == heads else 1
    if recorded:
        differences = []
        if heads != recorded["source"]:
            differences.append(f"heads: {recorded['source']} -> {heads}")
        elif heads == "random" and seed != recorded.get("seed", 1):
            differences.append(f"heads seed: {recorded.get('seed', 1)} -> {seed}")
        if differences and not cfg.inference_parser_override:
            raise ValueError(f"raw text's heads would be made otherwise than the training data's: "
                             f"{'; '.join(differences)} (recorded: {describe(record)}). Leave --inference-heads and "
                             "--inference-heads-seed out to use the recorded ones, or give "
                             "--inference-parser-override to use these anyway")
        if differences:
            logger.warning(f"--inference-parser-override: raw text's heads are made otherwise than the training "
                           f"data's: {'; '.join(differences)}")
    return heads, seed
