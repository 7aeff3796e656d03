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
from fairseq.data import BaseWrapperDataset, FairseqDataset


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
    set silently leaves sentences untranslated; here that last batch is kept."""

    def __init__(self, pairs, node_labels, node_spans, node_dict, keep_every_sentence=False, count_nodes=True):
        super().__init__(pairs)
        self.keep_every_sentence = keep_every_sentence
        self.count_nodes = count_nodes
        if not len(pairs) == len(node_labels) == len(node_spans):
            raise ValueError(
                f"{len(pairs)} sentence pairs but {len(node_labels)} node label and "
                f"{len(node_spans)} span entries: text and trees come from different data"
            )
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
