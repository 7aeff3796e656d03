"""The ``constituent_masked_lm`` task: fairseq's ``masked_lm`` task (BERT-style masking) with one
sentence per sample, to train a constituent-attention encoder alone (the paper's section 7.2
trains its encoder as a masked LM) and parse with it. docs/methods.md (section 2) lists the
paper's settings against this code.

Data: a monolingual data-bin of one sentence per line, as fairseq-preprocess writes it::

    fairseq-preprocess --only-source --trainpref train.txt --validpref valid.txt \\
        --destdir data-bin/mono --workers 4
    fairseq-train data-bin/mono --user-dir tree_fairseq --task constituent_masked_lm \\
        --arch constituent_encoder_lm --criterion masked_lm --optimizer adam --lr 1e-4 \\
        --adam-betas "(0.9, 0.98)" --max-tokens 4096 --max-update 5000

The text is used as it is (tokenise and lowercase it beforehand as you wish). Every sample is
one line, ``w_1 … w_k </s>`` (``--sample-break-mode eos``; without the ``<s>`` fairseq's
``masked_lm`` prepends for sentence classification, which is not needed here and would be one
more token beside the first word), masked as fairseq's ``masked_lm`` masks
(``--mask-prob`` 0.15, of which 10 % left and 10 % replaced at random); the ``masked_lm``
criterion scores the masked tokens. :meth:`ConstituentMaskedLMTask.induce_trees` parses sentences
with the trained model (Algorithm 1 over the word-to-word links of every layer).
"""

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from fairseq import utils
from fairseq.data import data_utils
from fairseq.data.shorten_dataset import maybe_shorten_dataset
from fairseq.tasks import register_task
from fairseq.tasks.language_modeling import SAMPLE_BREAK_MODE_CHOICES
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

from tree_fairseq.models.common import option
from tree_fairseq.modules.constituent_attention import unsupervised_parse
from tree_fairseq.tasks.resumed_batches import ResumedBatches
from tree_fairseq.trees.tree import Tree


@dataclass
class ConstituentMaskedLMConfig(MaskedLMConfig):
    """fairseq's masked-LM options; one sentence per sample by default."""

    sample_break_mode: SAMPLE_BREAK_MODE_CHOICES = option(
        "eos",
        'one sentence (one line of the data) per sample with "eos" (default); the other '
        "modes of fairseq's masked_lm pack several, which the constituent prior would join",
    )
    include_index: bool = option(False, "add each sample's index to the model input (data2vec's; off here)")


@register_task("constituent_masked_lm", dataclass=ConstituentMaskedLMConfig)
class ConstituentMaskedLMTask(ResumedBatches, MaskedLMTask):
    """Masked LM over single sentences, for ``--arch constituent_encoder_lm``. A resumed run trains on the
    batches of an uninterrupted one (:mod:`tree_fairseq.tasks.resumed_batches`; fairseq's masked_lm
    already orders its sentences with the seed alone)."""

    cfg: ConstituentMaskedLMConfig
    # What ``constituent_encoder_lm`` asks of its task (the models cannot import the tasks above them).
    trains_constituent_lm = True

    def __init__(self, cfg: ConstituentMaskedLMConfig, dictionary):
        if cfg.mask_whole_words:
            # fairseq's whole-word masking reads the task's ``args`` (its --bpe), which a task built
            # from its dataclass does not have: it would fail with an AttributeError at the first load.
            raise ValueError("--mask-whole-words: --task constituent_masked_lm masks single tokens (the paper's "
                             "masking); leave the option out")
        super().__init__(cfg, dictionary)

    def _load_dataset_split(self, split, epoch, combine):
        """In ``eos`` mode, one sample per line of the data-bin, ``w_1 … w_k </s>`` as it is stored
        (fairseq's TokenBlockDataset, which would cut the lines again, fails in this mode on numpy
        >= 2, which has no ``np.compat``); the other modes as fairseq's masked_lm."""
        if self.cfg.sample_break_mode != "eos":
            return super()._load_dataset_split(split, epoch, combine)
        paths = utils.split_paths(self.cfg.data)
        split_path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        dataset = data_utils.load_indexed_dataset(split_path, self.source_dictionary, combine=combine)
        if dataset is None:
            raise FileNotFoundError(f"Dataset not found: {split} ({split_path})")
        return maybe_shorten_dataset(
            dataset, split, self.cfg.shorten_data_split_list, self.cfg.shorten_method,
            self.cfg.tokens_per_sample, self.cfg.seed,
        )

    def induce_trees(
        self,
        model,
        sentences: Sequence[Sequence[str]],
        min_layer: int = 3,
        threshold: float = 0.8,
        batch_size: int = 64,
    ) -> list[Tree]:
        """One unlabelled tree per sentence (a list of words, mapped with the task's dictionary,
        unknown words to ``<unk>``), by Algorithm 1 over the link probabilities of every layer
        of ``model`` (a ``constituent_encoder_lm``) from ``min_layer`` (the paper's ``m``, layers
        numbered from 0; default 3 as the paper's best) up. The model is run without dropout and
        left in the mode it was in."""
        links = self.sentence_links(model, sentences, batch_size)
        return [unsupervised_parse(a, words, min_layer, threshold) for a, words in zip(links, sentences)]

    def sentence_links(self, model, sentences: Sequence[Sequence[str]], batch_size: int = 64) -> list[torch.Tensor]:
        """The link probabilities of each sentence, ``(L, k - 1)`` for k words (link j joins words j
        and j + 1, every layer from the lowest), as :meth:`induce_trees` parses them: one pass of the
        encoder serves Algorithm 1 for every ``m``. Run without dropout; the model is left in the mode
        it was in."""
        dictionary = self.source_dictionary
        device = next(model.parameters()).device
        encoded = [
            dictionary.encode_line(" ".join(words), add_if_not_exist=False, append_eos=True).long()
            for words in sentences
        ]
        order = sorted(range(len(sentences)), key=lambda i: len(encoded[i]))
        found: list[torch.Tensor | None] = [None] * len(sentences)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                for first in range(0, len(order), batch_size):
                    batch = order[first : first + batch_size]
                    src_tokens = data_utils.collate_tokens([encoded[i] for i in batch], dictionary.pad())
                    links = model.encoder(src_tokens.to(device))["constituent_links"][0].cpu()  # (B, L, n - 1)
                    for row, index in enumerate(batch):
                        # right-padded: link j joins words j and j + 1 for j < k - 1
                        found[index] = links[row, :, : len(sentences[index]) - 1].clone()
        finally:
            model.train(was_training)
        return found
