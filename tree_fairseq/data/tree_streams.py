"""The tree streams of a data-bin, next to fairseq's own text files:

- ``dict.{src}.nodes.txt``: the node-label dictionary (a fairseq Dictionary);
- ``{split}.{src}-{tgt}.{src}.nodes.{bin,idx}``: node labels per sentence, ``(m,)``;
- ``{split}.{src}-{tgt}.{src}.spans.{bin,idx}``: node spans per sentence,
  flattened ``(2m,)`` = ``start0, end0, start1, end1, ...``, inclusive leaf
  indices counted from the sentence's first token, nodes bottom-up.

and, when the source has dependency heads (``{pref}.heads.{src}``):

- ``{split}.{src}-{tgt}.{src}.parents.{bin,idx}``: each piece's parent word, flattened
  ``(2n,)`` = ``first0, last0, first1, last1, ...``: the inclusive first and last piece of the
  word that is the parent of piece k's word (its own word for a root), counted from the
  sentence's first token; EOS has no entry (:mod:`tree_fairseq.trees.parents`).

All are fairseq mmap indexed datasets.
"""

import array
import hashlib
import os
import struct

import numpy as np
import torch
from fairseq.data import ConcatDataset, Dictionary, ListDataset, data_utils, indexed_dataset

NODES = "nodes"
SPANS = "spans"
PARENTS = "parents"


def tree_stream_prefix(data_dir: str, split: str, src: str, tgt: str) -> str:
    return os.path.join(data_dir, f"{split}.{src}-{tgt}.{src}.")


def node_dictionary_path(data_dir: str, src: str) -> str:
    return os.path.join(data_dir, f"dict.{src}.{NODES}.txt")


def load_node_dictionary(data_dir: str, src: str) -> Dictionary:
    """The node-label dictionary of a tree data-bin; a plain fairseq data-bin is named as such."""
    path = node_dictionary_path(data_dir, src)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} is missing: {data_dir} is not a tree data-bin (no source trees for --source-lang {src}); "
            "make it with tree-fairseq-preprocess, whose text part is fairseq-preprocess's own"
        )
    return Dictionary.load(path)


# The buffer a model trained on tree data keeps its node dictionary's fingerprint in.
NODE_DICTIONARY_BUFFER = "node_dictionary_fingerprint"


def node_dictionary_fingerprint(dictionary: Dictionary) -> torch.Tensor:
    """SHA-256 of the labels in id order, ``(32,)`` uint8: equal for the same labels in the same
    order, whatever the counts."""
    digest = hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).digest()
    return torch.tensor(list(digest), dtype=torch.uint8)


def keep_node_dictionary(model: torch.nn.Module, dictionary: Dictionary, path: str) -> None:
    """Make ``model`` carry the fingerprint of its node dictionary (``path``) in its state dict,
    and refuse a state dict with another one: a checkpoint trained on another node dictionary
    (another data-bin's, or the same labels in another order) would read every label as another.
    A state dict without a fingerprint (a checkpoint of an earlier version) loads unchecked."""
    fingerprint = node_dictionary_fingerprint(dictionary)
    model.register_buffer(NODE_DICTIONARY_BUFFER, fingerprint)

    def check(module, state_dict, prefix, *args):
        key = prefix + NODE_DICTIONARY_BUFFER
        if key not in state_dict:
            state_dict[key] = fingerprint.clone()
        elif not torch.equal(state_dict[key].to(fingerprint), fingerprint):
            raise ValueError(
                f"the checkpoint was trained with another node dictionary than {path} (other labels, or the same "
                "in another order): every node label would be read as another. Use the data-bin it was trained "
                "on, or binarise with tree-fairseq-preprocess --nodedict set to that data-bin's node dictionary")

    model.register_load_state_dict_pre_hook(check)


class _StreamBuilder:
    """One int32 stream being written: the items' values go to the ``.bin`` as they come, their
    sizes are kept (4 bytes each) for the ``.idx`` fairseq's index writer makes at the end."""

    def __init__(self, path: str):
        self.path = path
        self.data = open(indexed_dataset.data_file_path(path), "wb")
        self.sizes = array.array("i")

    def add_items(self, values, sizes) -> None:
        """Several items at once: their values one after the other (flat), and each one's size."""
        values = np.asarray(values, dtype=np.int32)
        if values.ndim != 1 or int(np.sum(sizes, dtype=np.int64)) != len(values):
            raise ValueError(f"{self.path}: {len(values)} values for items of sizes summing to {int(np.sum(sizes))}")
        self.data.write(values.tobytes())
        self.sizes.extend(sizes)

    def finalize(self) -> None:
        self.data.close()
        with indexed_dataset.MMapIndexedDataset.Index.writer(indexed_dataset.index_file_path(self.path),
                                                              np.int32) as index:
            index.write(self.sizes)


class TreeStreamWriter:
    """Writes the node labels and spans of one split, sentence by sentence or many at once."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.nodes, self.spans = (_StreamBuilder(prefix + name) for name in (NODES, SPANS))

    def add(self, labels: torch.Tensor, spans: torch.Tensor) -> None:
        labels = np.asarray(labels, dtype=np.int32).reshape(-1)
        self.add_sentences(labels, np.asarray(spans, dtype=np.int32).reshape(-1), [len(labels)])

    def add_sentences(self, labels, spans, node_counts) -> None:
        """Sentences one after the other: all their node labels (flat), all their spans (flat,
        ``start, end`` per node) and each sentence's number of nodes."""
        node_counts = array.array("i", node_counts)
        self.nodes.add_items(labels, node_counts)
        self.spans.add_items(spans, array.array("i", (2 * count for count in node_counts)))

    def finalize(self) -> None:
        self.nodes.finalize()
        self.spans.finalize()


def load_tree_streams(data_dir, split, src, tgt, combine=False, upsample_primary=1):
    """``(labels, spans)`` datasets of a split, shards ``split``, ``split1``, ...
    concatenated like fairseq's ``load_langpair_dataset`` does with ``combine``."""
    labels, spans = [], []
    for k in range(10**6):
        split_k = split + (str(k) if k > 0 else "")
        prefix = tree_stream_prefix(data_dir, split_k, src, tgt)
        if not indexed_dataset.dataset_exists(prefix + NODES, impl="mmap"):
            if k == 0:
                raise FileNotFoundError(
                    f"no source trees for split {split!r}: {prefix}{NODES}.idx is missing "
                    "(make the data-bin with tree-fairseq-preprocess)"
                )
            break
        labels.append(load_stream(prefix + NODES))
        spans.append(load_stream(prefix + SPANS))
        if not combine:
            break
    if len(labels) == 1:
        return labels[0], spans[0]
    ratios = [upsample_primary] + [1] * (len(labels) - 1)
    return ConcatDataset(labels, ratios), ConcatDataset(spans, ratios)


class ParentStreamWriter:
    """Writes the parent spans of one split's pieces, sentence by sentence or many at once."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.parents = _StreamBuilder(prefix + PARENTS)

    def add(self, parent_spans: torch.Tensor) -> None:
        parent_spans = np.asarray(parent_spans, dtype=np.int32).reshape(-1)
        self.parents.add_items(parent_spans, [len(parent_spans)])

    def add_sentences(self, parent_spans, piece_counts) -> None:
        """All the sentences' parent spans (flat, ``first, last`` per piece) and each one's number
        of pieces."""
        self.parents.add_items(parent_spans, array.array("i", (2 * count for count in piece_counts)))

    def finalize(self) -> None:
        self.parents.finalize()


def has_parent_stream(data_dir: str, split: str, src: str, tgt: str) -> bool:
    return indexed_dataset.dataset_exists(tree_stream_prefix(data_dir, split, src, tgt) + PARENTS, impl="mmap")


def load_parent_stream(data_dir, split, src, tgt, combine=False, upsample_primary=1):
    """The parent spans of a split's pieces, shards concatenated as :func:`load_tree_streams`
    does; FileNotFoundError when the data-bin has none."""
    parents = []
    for k in range(10**6):
        split_k = split + (str(k) if k > 0 else "")
        if not has_parent_stream(data_dir, split_k, src, tgt):
            if k == 0:
                raise FileNotFoundError(
                    f"no source parents for split {split!r}: {tree_stream_prefix(data_dir, split, src, tgt)}"
                    f"{PARENTS}.idx is missing (make the data-bin with tree-fairseq-preprocess and the "
                    f"dependency heads of the source, {{pref}}.heads.{src})"
                )
            break
        parents.append(load_stream(tree_stream_prefix(data_dir, split_k, src, tgt) + PARENTS))
        if not combine:
            break
    if len(parents) == 1:
        return parents[0]
    return ConcatDataset(parents, [upsample_primary] + [1] * (len(parents) - 1))


def load_stream(path: str):
    """One stream, checked against its index before fairseq opens it: a truncated ``.idx`` or
    ``.bin`` (a copy cut short) or one replaced by another run's is named instead of failing inside
    numpy (and again when Python cleans up the half-made dataset). A split without a single node
    (sentences of one word each) has an empty ``.bin``, which cannot be mapped: its items are read
    from the index alone."""
    data_file, index_file = indexed_dataset.data_file_path(path), indexed_dataset.index_file_path(path)
    if not os.path.exists(index_file):
        raise FileNotFoundError(f"{index_file} is missing: make the data-bin again with tree-fairseq-preprocess")
    if not os.path.exists(data_file):
        raise FileNotFoundError(f"{data_file} is missing (its index {index_file} is there): make the data-bin "
                                "again with tree-fairseq-preprocess")
    dtype, sizes = _read_index(index_file)
    expected = int(np.sum(sizes, dtype=np.int64)) * np.dtype(dtype).itemsize
    if os.path.getsize(data_file) != expected:
        raise ValueError(f"{data_file} holds {os.path.getsize(data_file)} bytes but its index {index_file} "
                         f"describes {expected}: the file is truncated or from another run; make the data-bin "
                         "again with tree-fairseq-preprocess")
    if expected == 0:
        empty = torch.zeros(0, dtype=torch.from_numpy(np.zeros(0, dtype=dtype)).dtype)
        return ListDataset([empty] * len(sizes), sizes=np.zeros(len(sizes), dtype=np.int64))
    return data_utils.load_indexed_dataset(path, None, "mmap")


_INDEX_MAGIC = b"MMIDIDX\x00\x00"
# magic, version (<Q), dtype code (<B), number of items (<Q); then int32 sizes and int64 pointers
_INDEX_HEADER = len(_INDEX_MAGIC) + 8 + 1 + 8


def _read_index(index_file: str) -> tuple[type, np.ndarray]:
    """The element type and item sizes of a fairseq mmap index; ValueError naming the file when it
    is not one or is cut short."""
    def unreadable(why):
        return ValueError(f"{index_file} cannot be read ({why}): make the data-bin again with tree-fairseq-preprocess")

    with open(index_file, "rb") as f:
        header = f.read(_INDEX_HEADER)
        if len(header) < _INDEX_HEADER or not header.startswith(_INDEX_MAGIC):
            raise unreadable("not a fairseq mmap index, or cut short in its header")
        (code,) = struct.unpack("<B", header[len(_INDEX_MAGIC) + 8:len(_INDEX_MAGIC) + 9])
        (count,) = struct.unpack("<Q", header[-8:])
        if code not in indexed_dataset._code_to_dtype:
            raise unreadable(f"unknown element type code {code}")
        if os.path.getsize(index_file) < _INDEX_HEADER + 12 * count:
            raise unreadable(f"cut short: {os.path.getsize(index_file)} bytes for the {count} items it announces")
        sizes = np.fromfile(f, dtype=np.int32, count=count)
    return indexed_dataset._code_to_dtype[code], sizes
