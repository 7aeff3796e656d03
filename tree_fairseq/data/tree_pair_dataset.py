"""A fairseq language-pair dataset whose source sentences carry trees.

The collated batch (the layout every tree_fairseq model reads)::

    sample["net_input"] = {
        "src_tokens":       (B, n) leaves: the BPE tokens of the source, then EOS,
                            padded with pad (left or right, --left-pad-source),
        "src_lengths":      (B,)  leaves per sentence, EOS included,
        "src_node_labels":  (B, m) node labels (node dictionary), nodes bottom-up,
                            right-padded with the node dictionary's pad,
        "src_node_spans":   (B, m, 2) inclusive [start, end] leaf spans as column
                            indices into src_tokens (padding already counted);
                            padded nodes are (-1, -1), outside every span,
        "src_node_padding_mask": (B, m) bool, True at padded nodes,
        "prev_output_tokens": (B, T) as in fairseq's translation task,
    }

EOS is a leaf outside every node span. Everything else (id, ntokens,
nsentences, target) is fairseq's LanguagePairDataset batch unchanged.
"""

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, ConcatDataset, FairseqDataset
from fairseq.data.indexed_dataset import MMapIndexedDataset


def collate_trees(labels, spans, src_tokens, src_lengths, left_pad, label_pad):
    """Pad per-sentence node labels ``(m_i,)`` and spans ``(m_i, 2)`` (leaf
    indices from the first token) into the batch tensors described above."""
    batch_size = len(labels)
    m = max((len(x) for x in labels), default=0)
    node_labels = src_tokens.new_full((batch_size, m), label_pad)
    node_spans = src_tokens.new_full((batch_size, m, 2), -1)
    offsets = src_tokens.size(1) - src_lengths if left_pad else torch.zeros_like(src_lengths)
    for b, (label, span) in enumerate(zip(labels, spans)):
        node_labels[b, : len(label)] = label
        node_spans[b, : len(label)] = span + offsets[b]
    return {
        "src_node_labels": node_labels,
        "src_node_spans": node_spans,
        "src_node_padding_mask": node_labels.eq(label_pad),
    }


def root_spans(node_spans) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(nodes, start, end)`` per sentence of a spans stream: its number of nodes and the span of its
    last node (bottom-up: the root, which covers every piece; 0 where it has no node). Read from the
    stream's file (two values a sentence) where it is fairseq's mmap dataset, as a whole otherwise."""
    if isinstance(node_spans, MMapIndexedDataset):
        sizes = np.asarray(node_spans.sizes, dtype=np.int64)
        if not sizes.any():
            zeros = np.zeros(len(sizes), dtype=np.int64)
            return zeros, zeros, zeros.copy()
        values = np.frombuffer(node_spans._bin_buffer, dtype=node_spans._index.dtype)
        last = node_spans._index._pointers // np.dtype(node_spans._index.dtype).itemsize + sizes - 1
        has = sizes >= 2
        end = np.zeros(len(sizes), dtype=np.int64)
        start = np.zeros(len(sizes), dtype=np.int64)
        end[has] = values[last[has]]
        start[has] = values[last[has] - 1]
        return sizes // 2, start, end
    if isinstance(node_spans, ConcatDataset) and all(float(r).is_integer() for r in node_spans.sample_ratios):
        parts = [tuple(np.tile(a, int(r)) for a in root_spans(d))
                 for d, r in zip(node_spans.datasets, node_spans.sample_ratios)]
        return tuple(np.concatenate(arrays) for arrays in zip(*parts))
    nodes, start, end = (np.zeros(len(node_spans), dtype=np.int64) for _ in range(3))
    for i in range(len(node_spans)):
        spans = np.asarray(node_spans[i]).reshape(-1)
        nodes[i] = len(spans) // 2
        if len(spans) >= 2:
            start[i], end[i] = spans[-2], spans[-1]
    return nodes, start, end


def check_roots(src_sizes, node_spans, where: str) -> None:
    """ValueError naming ``where`` and the first sentence whose tree does not cover exactly its pieces
    (a sentence of n >= 2 pieces, EOS not counted, has a root over pieces 0 to n-1, stored last; one of a
    single piece has no node): text binarised again over another text's trees (fairseq-preprocess
    writing a split's text beside its old tree streams) fits inside the sentences and would be read
    silently with every node over other words."""
    pieces = np.asarray(src_sizes, dtype=np.int64) - 1  # EOS is a leaf outside every span
    nodes, start, end = root_spans(node_spans)
    bad = np.where(nodes == 0, pieces > 1, (pieces < 2) | (start != 0) | (end != pieces - 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        tree = f"its root spans pieces {start[i]}-{end[i]}" if nodes[i] else "its tree has no node"
        raise ValueError(f"{where}: sentence {i} has {pieces[i]} pieces (EOS not counted) but {tree} "
                         f"({int(bad.sum())} such sentences): the trees are not this text's (text binarised again "
                         "beside old tree streams?); binarise text and trees together with tree-fairseq-preprocess")


class TreePairDataset(BaseWrapperDataset):
    """Wraps fairseq's LanguagePairDataset; adds each source sentence's node
    labels and spans. ``--max-source-positions`` limits leaves, as in fairseq.

    ``count_nodes`` (the task's ``--batch-tokens tree``, the default): a
    sentence counts ``max(source leaves + nodes, target tokens)`` toward
    ``--max-tokens``, since a batch's tree tensors grow with its nodes.
    Without (``--batch-tokens text``): ``max(source tokens, target tokens)``,
    the wrapped dataset's own count, so that the batches are those of fairseq's
    translation task on the same data (ordering and sizes are the wrapped
    dataset's in both cases).

    ``keep_every_sentence`` (the splits translated or scored: generate, validate,
    raw text): batches never drop a sentence. fairseq's batching drops the last
    batch when its size is not a multiple of ``--required-batch-size-multiple``
    (default 8), which for a training epoch costs a few sentences but for a test
    set silently leaves sentences untranslated; here that last batch is kept.

    ``where`` (the split and data-bin the streams were read from): each sentence's tree must cover
    exactly its pieces (:func:`check_roots`), checked once here; trees made from the text itself
    (raw text) leave it out."""

    def __init__(self, pairs, node_labels, node_spans, node_dict, keep_every_sentence=False, count_nodes=True,
                 where=None):
        super().__init__(pairs)
        self.keep_every_sentence = keep_every_sentence
        self.count_nodes = count_nodes
        if not len(pairs) == len(node_labels) == len(node_spans):
            raise ValueError(
                f"{len(pairs)} sentence pairs but {len(node_labels)} node label and "
                f"{len(node_spans)} span entries: text and trees come from different data"
            )
        if where is not None:
            check_roots(pairs.src_sizes, node_spans, where)
        self.node_labels = node_labels
        self.node_spans = node_spans
        self.node_dict = node_dict
        self.node_sizes = np.asarray(node_labels.sizes)

    def __getitem__(self, index):
        example = self.dataset[index]
        spans = self.node_spans[index].view(-1, 2)
        if len(spans) and spans.max() >= len(example["source"]) - 1:
            raise ValueError(f"sentence {index}: a node span reaches past its {len(example['source']) - 1} tokens")
        example["node_labels"] = self.node_labels[index]
        example["node_spans"] = spans
        return example

    def collater(self, samples, pad_to_length=None):
        batch = self.dataset.collater(samples, pad_to_length=pad_to_length)
        if not samples:
            return batch
        by_id = {sample["id"]: sample for sample in samples}
        ordered = [by_id[i] for i in batch["id"].tolist()]  # fairseq sorts by source length
        net_input = batch["net_input"]
        net_input.update(collate_trees(
            [s["node_labels"] for s in ordered], [s["node_spans"] for s in ordered],
            net_input["src_tokens"], net_input["src_lengths"],
            self.dataset.left_pad_source, self.node_dict.pad(),
        ))
        return batch

    def num_tokens(self, index):
        if not self.count_nodes:
            return self.dataset.num_tokens(index)
        return max(self.dataset.src_sizes[index] + self.node_sizes[index],
                   self.dataset.tgt_sizes[index] if self.dataset.tgt_sizes is not None else 0)

    def num_tokens_vec(self, indices):
        if not self.count_nodes:
            return self.dataset.num_tokens_vec(indices)
        sizes = self.dataset.src_sizes[indices] + self.node_sizes[indices]
        if self.dataset.tgt_sizes is not None:
            sizes = np.maximum(sizes, self.dataset.tgt_sizes[indices])
        return sizes

    @property
    def counted(self) -> str:
        """What --max-tokens counts of a sentence, in words."""
        return "source leaves + nodes (or target tokens)" if self.count_nodes else "source (or target) tokens"

    def describe_size(self, index):
        """What --max-tokens compares for sentence ``index``, in words."""
        leaves, nodes = int(self.dataset.src_sizes[index]), int(self.node_sizes[index])
        if self.count_nodes:
            text = f"{leaves} leaves + {nodes} nodes = {leaves + nodes} source tokens"
        else:
            text = f"{leaves} source tokens (its {nodes} nodes not counted)"
        if self.dataset.tgt_sizes is not None:
            text += f" ({int(self.dataset.tgt_sizes[index])} target tokens)"
        return text

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        if max_tokens is not None and len(indices):
            sizes = self.num_tokens_vec(np.asarray(indices, dtype=np.int64))
            if sizes.max() > max_tokens:
                index = int(np.asarray(indices)[sizes.argmax()])
                raise ValueError(f"sentence {index}: {self.describe_size(index)} > max_tokens {max_tokens}; "
                                 "filter such sentences first (the task's filter_indices_by_size) or raise "
                                 "--max-tokens")
        # The wrapped dataset would count its own tokens whatever count_nodes says.
        batches = FairseqDataset.batch_by_size(
            self, indices, max_tokens=max_tokens, max_sentences=max_sentences,
            required_batch_size_multiple=required_batch_size_multiple,
        )
        if self.keep_every_sentence:
            # fairseq's batches are consecutive runs of ``indices``; what it dropped is the tail.
            batched = sum(len(batch) for batch in batches)
            if batched < len(indices):
                batches = list(batches) + [np.asarray(indices[batched:], dtype=np.int64)]
        return batches
