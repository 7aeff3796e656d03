"""Source sentences with trees and each piece's dependency parent (``--task dependency_translation``).

The collated batch is that of :mod:`tree_fairseq.data.tree_pair_dataset` plus::

    sample["net_input"]["src_parent_spans"]   (B, n, 2) long: for each column of src_tokens, the
                                              inclusive first and last column of the pieces of
                                              its parent word (padding already counted, so
                                              aligned with src_tokens padded either side);
                                              EOS and padding columns: their own column twice

A root word's pieces point at the root word itself; so does EOS, which no parser parses, at
itself. The model turns the spans into positions (the middle or the first piece,
:func:`~tree_fairseq.modules.parent_scaled_attention.parent_positions`).

:class:`InferenceParents` makes the parents of raw text (fairseq-interactive) as the data-bin's
were made: the parser's heads (``--inference-parser spacy``) or a trivial control, over the words
the BPE pieces spell (the text's own pieces where known: :mod:`tree_fairseq.data.source_pieces`).
"""

from collections.abc import Callable

import torch
from fairseq import utils
from fairseq.data import Dictionary, ListDataset
from torch import Tensor

from tree_fairseq.data.source_pieces import SourcePieces, sentence_key
from tree_fairseq.data.tree_pair_dataset import TreePairDataset
from tree_fairseq.trees import TreeError, group_pieces
from tree_fairseq.trees.parents import HEAD_CONTROLS, check_heads, control_heads, piece_parent_spans

# Where raw text's heads come from: the inference parser's dependency parse, or a control.
INFERENCE_HEADS = ("parser",) + HEAD_CONTROLS


def collate_parents(parent_spans: list[Tensor], offsets: Tensor, num_columns: int) -> Tensor:
    """``src_parent_spans (B, num_columns, 2)`` from each sentence's parent spans ``(k_i, 2)``
    over its pieces (counted from its first token), the sentence starting at column
    ``offsets[b]``. Columns without an entry (EOS, padding) get their own column."""
    columns = torch.arange(num_columns).view(1, -1, 1)
    spans = columns.expand(len(parent_spans), num_columns, 2).clone()
    for b, (sentence, offset) in enumerate(zip(parent_spans, offsets.tolist())):
        spans[b, offset:offset + len(sentence)] = sentence.long() + offset
    return spans


def first_token_columns(src_tokens: Tensor, pad: int) -> Tensor:
    """``(B,)``: the column of each row's first token, whichever side it is padded on."""
    return src_tokens.ne(pad).int().argmax(dim=1)


class ParentTreePairDataset(TreePairDataset):
    """A :class:`TreePairDataset` whose sentences also carry ``parent_spans`` (the data-bin's
    parents stream, one ``(first, last)`` per piece, EOS excluded) and whose batches
    ``src_parent_spans``."""

    def __init__(self, pairs, node_labels, node_spans, parent_spans, node_dict, **kwargs):
        super().__init__(pairs, node_labels, node_spans, node_dict, **kwargs)
        if len(parent_spans) != len(pairs):
            raise ValueError(f"{len(pairs)} sentence pairs but {len(parent_spans)} parent entries: text and "
                             "parents come from different data")
        self.parent_spans = parent_spans

    @classmethod
    def with_parents(cls, dataset: TreePairDataset, parent_spans) -> "ParentTreePairDataset":
        """``dataset`` with ``parent_spans`` added."""
        return cls(dataset.dataset, dataset.node_labels, dataset.node_spans, parent_spans, dataset.node_dict,
                   keep_every_sentence=dataset.keep_every_sentence, count_nodes=dataset.count_nodes)

    def __getitem__(self, index):
        example = super().__getitem__(index)
        spans = self.parent_spans[index].view(-1, 2)
        pieces = len(example["source"]) - 1
        if len(spans) != pieces or (len(spans) and (spans.min() < 0 or spans.max() >= pieces)):
            raise ValueError(f"sentence {index}: its parents are not over its {pieces} pieces: text and parents come "
                             "from different data")
        example["parent_spans"] = spans
        return example

    def collater(self, samples, pad_to_length=None):
        batch = super().collater(samples, pad_to_length=pad_to_length)
        if not samples:
            return batch
        by_id = {sample["id"]: sample for sample in samples}
        net_input = batch["net_input"]
        src_tokens = net_input["src_tokens"]
        net_input["src_parent_spans"] = collate_parents(
            [by_id[i]["parent_spans"] for i in batch["id"].tolist()],
            first_token_columns(src_tokens, self.dataset.src_dict.pad()), src_tokens.size(1))
        return batch


class InferenceParents:
    """The parent spans of source sentences given as dictionary ids (BPE pieces, EOS last).

    ``heads`` (one of :data:`INFERENCE_HEADS`): ``parser``, the dependency heads of the parser
    ``parser()`` returns (one with ``dependency_parses``, a spaCy pipeline: built once, shared
    with the trees), or a control of :data:`~tree_fairseq.trees.parents.HEAD_CONTROLS` drawn with
    ``seed``: those the training data's heads were made with. The parents of the last dataset are
    kept, so each sentence is parsed once; ``known_heads()``, the heads of the parses the trees were
    made from (:attr:`~tree_fairseq.data.inference.InferenceTrees.word_heads`, by the sentence's
    words), spares the parser a second parse of the same sentence. ``refused``: why the heads asked
    for may not be used, raised at the first sentence."""

    def __init__(self, src_dict: Dictionary, subword_format: str, heads: str = "parser",
                 parser: Callable[[], object] | None = None, seed: int = 1,
                 known_heads: Callable[[], dict] | None = None, refused: str | None = None,
                 source_pieces: SourcePieces | None = None):
        if heads not in INFERENCE_HEADS:
            raise ValueError(f"unknown heads {heads!r}; one of {INFERENCE_HEADS}")
        self.src_dict = src_dict
        self.source_pieces = source_pieces or SourcePieces(src_dict)  # shared with the trees' where given
        self.subword_format = subword_format
        self.heads = heads
        self.seed = seed
        self._parser = parser
        self._known_heads = known_heads
        self._refused = refused  # why these heads may not be used (said at the first sentence)
        self._parents: dict[tuple[int, ...], Tensor] = {}

    def parent_tensors(self, src_tokens: list[Tensor]) -> list[Tensor]:
        """``(k, 2)`` parent spans over the pieces of each sentence (EOS last, no padding)."""
        pieces = [self.source_pieces.of(tokens) for tokens in src_tokens]
        words = [[word for word, _, _ in group_pieces(p, self.subword_format)] for p in pieces]
        heads = self._word_heads(words)
        tensors = []
        for sentence_pieces, sentence_heads in zip(pieces, heads):
            try:
                spans = piece_parent_spans(sentence_heads, sentence_pieces, self.subword_format)
            except TreeError as error:
                raise TreeError(f"{error} (source sentence: {' '.join(sentence_pieces)!r})") from None
            tensors.append(torch.tensor(spans, dtype=torch.long).view(-1, 2))
        return tensors

    def _word_heads(self, words: list[list[str]]) -> list[tuple[int, ...]]:
        if self._refused:
            raise ValueError(self._refused)
        if self.heads != "parser":
            return [control_heads(sentence, self.heads, self.seed) for sentence in words]
        known = self._known_heads() if self._known_heads is not None else {}
        to_parse = [i for i, sentence in enumerate(words) if sentence and tuple(sentence) not in known]
        parsed = {}
        if to_parse or not known:
            parser = self._parser() if self._parser is not None else None
            if not hasattr(parser, "dependency_parses"):
                raise ValueError("--inference-heads parser takes the heads of a dependency parser: --inference-parser "
                                 "spacy (the pipeline the training data's heads came from); for trivial heads give "
                                 f"--inference-heads {' or '.join(HEAD_CONTROLS)}")
            parsed = {i: parse.heads for i, parse in
                      zip(to_parse, parser.dependency_parses([words[i] for i in to_parse]))}
        heads = []
        for i in range(len(words)):
            sentence_heads = parsed[i] if i in parsed else known.get(tuple(words[i]), ())
            check_heads(sentence_heads)
            heads.append(sentence_heads)
        return heads

    def dataset(self, dataset: TreePairDataset, src_tokens: list[Tensor]) -> ParentTreePairDataset:
        """``dataset`` (fairseq's inference dataset with trees) with the parents of ``src_tokens``."""
        parents = self.parent_tensors(src_tokens)
        self._parents = {sentence_key(tokens, self.src_dict): spans for tokens, spans in zip(src_tokens, parents)}
        return ParentTreePairDataset.with_parents(dataset, ListDataset(parents, sizes=[2 * len(p) for p in parents]))

    def add_parent_inputs(self, net_input: dict) -> dict:
        """``net_input`` with ``src_tokens`` ``(B, n)`` (padded either side, EOS last) -> the same
        plus ``src_parent_spans``."""
        src_tokens = net_input["src_tokens"]
        rows = [utils.strip_pad(row, self.src_dict.pad()) for row in src_tokens.cpu()]
        missing = [row for row in rows if sentence_key(row, self.src_dict) not in self._parents]
        self._parents.update((sentence_key(row, self.src_dict), spans)
                             for row, spans in zip(missing, self.parent_tensors(missing)))
        spans = collate_parents([self._parents[sentence_key(row, self.src_dict)] for row in rows],
                                first_token_columns(src_tokens.cpu(), self.src_dict.pad()), src_tokens.size(1))
        return {**net_input, "src_parent_spans": spans.to(src_tokens.device)}
