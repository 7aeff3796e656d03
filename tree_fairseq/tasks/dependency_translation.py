"""The ``dependency_translation`` task: ``tree_translation`` whose source sentences also carry each
piece's dependency parent (batch layout: :mod:`tree_fairseq.data.parent_dataset`), for the models
that read parents (``pascal_transformer``).

The data-bin is tree-fairseq-preprocess's with the parents stream, written when the source's
dependency heads lie beside the trees (``{pref}.heads.{src}``, tree-fairseq-parse). Raw text
(fairseq-interactive) gets its parents from ``--inference-heads``: ``parser``, the dependency
parse of ``--inference-parser spacy`` (the pipeline the training data was parsed with), or the
trivial heads the data-bin was made with (``next``, ``previous``, ``random`` with
``--inference-heads-seed``).

A sentence counts its source and target tokens toward ``--max-tokens`` by default
(``--batch-tokens text``), as ``--task translation`` counts: the models of this task read no tree
nodes, and so train on exactly the batches of fairseq's transformer on the same data-bin.
"""

import inspect
from dataclasses import dataclass, field

from fairseq import utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task

from tree_fairseq.data.parent_dataset import INFERENCE_HEADS, InferenceParents, ParentTreePairDataset
from tree_fairseq.data.tree_streams import load_parent_stream
from tree_fairseq.tasks.tree_translation import (
    BATCH_TOKENS, TreeTranslationConfig, TreeTranslationTask, _subword_format,
)


@dataclass
class DependencyTranslationConfig(TreeTranslationConfig):
    """tree_translation's options, counting text tokens by default, plus where raw text's heads
    come from."""

    batch_tokens: ChoiceEnum(BATCH_TOKENS) = field(
        default="text",
        metadata={"help": "what a sentence counts toward --max-tokens: text (default), max(source tokens, target "
                          "tokens), as --task translation counts; tree, source leaves + nodes (the models of this "
                          "task read no nodes)"},
    )
    inference_heads: ChoiceEnum(INFERENCE_HEADS) = field(
        default="parser",
        metadata={"help": "dependency heads of raw source sentences (fairseq-interactive): parser, those of "
                          "--inference-parser spacy; next, previous or random, the trivial heads of "
                          "tree-fairseq-parse --heads-control; use what the training data's heads were made with"},
    )
    inference_heads_seed: int = field(
        default=1, metadata={"help": "seed of --inference-heads random, as tree-fairseq-parse --heads-seed"}
    )


@register_task("dependency_translation", dataclass=DependencyTranslationConfig)
class DependencyTranslationTask(TreeTranslationTask):
    cfg: DependencyTranslationConfig
    #: What a model reading parents asks its task for.
    source_parents = True

    def __init__(self, cfg: DependencyTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.inference_parents = InferenceParents(
            src_dict, _subword_format(cfg, src_dict), heads=str(cfg.inference_heads),
            parser=lambda: self.inference_trees.parser, seed=cfg.inference_heads_seed,
        )

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if "src_parent_spans" not in inspect.signature(model.forward).parameters:
            raise ValueError(
                f"--arch {getattr(cfg, 'arch', None) or getattr(cfg, '_name', '?')} reads no dependency parents: "
                "train it with --task tree_translation on the same data-bin"
            )
        return model

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        paths = utils.split_paths(self.cfg.data)
        data_dir = paths[(epoch - 1) % len(paths)]
        parents = load_parent_stream(data_dir, split, self.cfg.source_lang, self.cfg.target_lang,
                                     combine=combine, upsample_primary=self.cfg.upsample_primary)
        self.datasets[split] = ParentTreePairDataset.with_parents(self.datasets[split], parents)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """Raw-text translation: trees from --inference-parser, parents from --inference-heads."""
        dataset = super().build_dataset_for_inference(src_tokens, src_lengths, constraints=constraints)
        return self.inference_parents.dataset(dataset, src_tokens)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        if "src_parent_spans" not in sample["net_input"]:
            # fairseq-interactive hands the generator src_tokens and src_lengths only.
            sample = {**sample, "net_input": self.inference_parents.add_parent_inputs(sample["net_input"])}
        return super().inference_step(generator, models, sample, prefix_tokens=prefix_tokens,
                                      constraints=constraints)
