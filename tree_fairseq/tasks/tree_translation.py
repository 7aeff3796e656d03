"""The ``tree_translation`` task: fairseq's translation task whose source
sentences carry trees (batch layout: :mod:`tree_fairseq.data.tree_pair_dataset`)."""

from dataclasses import dataclass

from fairseq import utils
from fairseq.data import Dictionary
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from tree_fairseq.data import TreePairDataset, load_tree_streams, node_dictionary_path


@dataclass
class TreeTranslationConfig(TranslationConfig):
    """fairseq's translation options; the data-bin must come from tree-fairseq-preprocess."""


@register_task("tree_translation", dataclass=TreeTranslationConfig)
class TreeTranslationTask(TranslationTask):
    cfg: TreeTranslationConfig

    def __init__(self, cfg: TreeTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        if cfg.truncate_source:
            raise ValueError("--truncate-source would cut leaves out from under their node spans; "
                             "long sentences are skipped by --max-source-positions instead")
        data_dir = utils.split_paths(cfg.data)[0]
        self.node_dict = Dictionary.load(node_dictionary_path(data_dir, cfg.source_lang))

    @property
    def node_dictionary(self) -> Dictionary:
        """Node labels; never part of the target vocabulary."""
        return self.node_dict

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        paths = utils.split_paths(self.cfg.data)
        data_dir = paths[(epoch - 1) % len(paths)]
        labels, spans = load_tree_streams(data_dir, split, self.cfg.source_lang, self.cfg.target_lang,
                                          combine=combine, upsample_primary=self.cfg.upsample_primary)
        self.datasets[split] = TreePairDataset(self.datasets[split], labels, spans, self.node_dict)
