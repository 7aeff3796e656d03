"""Source trees for raw-text translation (fairseq-interactive, the hub interface's ``translate``).

There the task gets the source as dictionary ids of the tokenised, BPE'd sentence and nothing else.
:class:`InferenceTrees` makes the trees tree-fairseq-parse and tree-fairseq-preprocess would have
made for that sentence: the words are recovered from the BPE pieces (:func:`group_pieces`), parsed
with a configurable parser (:func:`make_parser`), every word of several pieces becomes a node over
them (:func:`expand_subwords`) and the node labels are encoded with the task's node dictionary
(labels unseen in training become ``<unk>``, as tree-fairseq-preprocess does for valid and test).

A parser other than the training data's says so, by one rule for every parser, over the node labels
of all the trees made so far: when none of them is a label of the training data (every node would be
``<unk>``: trees of another kind than the model was trained on, e.g. ``balanced`` trees for a model
trained on stanza's, or spaCy's for one trained on balanced trees), the parser is refused with the
first sentence that has nodes; when some are, one warning gives their share.

Which parser: the task's choice (:func:`~tree_fairseq.tasks.tree_translation.inference_choice`, the
options given or the parser record of the training data); without one, ``parser`` is None and the
first sentence stops with ``missing``, the message saying what to pass. ``on_built(name, parser)``
is called once the parser is built (the task checks it against the record there).

A dependency parser (spaCy) parses each sentence once: the heads of its parse are kept
(:attr:`InferenceTrees.word_heads`) for the parents of ``--task dependency_translation``.

fairseq-interactive collates :meth:`InferenceTrees.dataset` but hands the generator only
``src_tokens`` and ``src_lengths``; :meth:`InferenceTrees.add_tree_inputs` puts the tree inputs back.
The trees of the last dataset are kept, so each sentence is parsed once.
"""

import logging
from collections import Counter
from collections.abc import Callable

import torch
from fairseq import utils
from fairseq.data import Dictionary, LanguagePairDataset, ListDataset
from torch import Tensor

from tree_fairseq.data.source_pieces import SourcePieces, sentence_key
from tree_fairseq.data.tree_pair_dataset import TreePairDataset, collate_trees
from tree_fairseq.parsing import Parser, TrivialParser, make_parser
from tree_fairseq.trees import (
    SUBWORD_LABEL, SUBWORD_LABELS, TreeError, align, expand_subwords, group_pieces, node_tensors,
)
from tree_fairseq.trees.trivial import TRIVIAL_LABEL

logger = logging.getLogger(__name__)

# Parsers that need no file beside the sentences.
INFERENCE_PARSERS = ("stanza", "spacy", "balanced", "left", "right")


class InferenceTrees:
    """Trees of source sentences given as dictionary ids (BPE pieces, EOS last).

    ``parser`` is a parser name of :data:`INFERENCE_PARSERS` (built on first use, so a task that
    never translates raw text never loads stanza) or a :class:`~tree_fairseq.parsing.Parser`.
    Use the parser the training data was parsed with, and its ``subword_label`` (one of
    :data:`~tree_fairseq.trees.SUBWORD_LABELS`, as tree-fairseq-preprocess --subword-label);
    for ``spacy`` its pipeline (``spacy_model``) and ``dependency_shape``, for ``stanza`` its
    models (``parser_model_dir``, ``stanza_package``, ``stanza_model_files``), as tree-fairseq-parse.
    """

    def __init__(self, src_dict: Dictionary, node_dict: Dictionary, parser: str | Parser | None,
                 subword_format: str = "subword_nmt", lang: str | None = None,
                 parser_model_dir: str | None = None, subword_label: str = "pos",
                 spacy_model: str | None = None, dependency_shape: str = "layered",
                 stanza_package: str | None = None, stanza_model_files: dict[str, str | None] | None = None,
                 missing: str | None = None, on_built: Callable[[str, Parser], None] | None = None):
        if isinstance(parser, str) and parser not in INFERENCE_PARSERS:
            raise ValueError(f"parser {parser!r} cannot parse raw text; one of {INFERENCE_PARSERS}")
        self._missing = missing or ("no parser for raw text: give --inference-parser, the parser the training "
                                    "data was parsed with")
        if subword_label not in SUBWORD_LABELS:
            raise ValueError(f"unknown subword label {subword_label!r}; one of {SUBWORD_LABELS}")
        self.src_dict = src_dict
        self.source_pieces = SourcePieces(src_dict)  # the text's own pieces where known (fairseq-interactive)
        self.node_dict = node_dict
        self.subword_format = subword_format
        self.subword_label = subword_label
        self._parser = parser
        self._parser_name = _parser_name(parser)  # as given: the parser's object replaces a name once built
        self._lang = lang
        self._parser_model_dir = parser_model_dir
        self._spacy_model = spacy_model
        self._dependency_shape = dependency_shape
        self._stanza_package = stanza_package
        self._stanza_model_files = stanza_model_files
        self._on_built = on_built
        # The heads of the dependency parser's parse of each sentence (its words) parsed since the last
        # dataset, for the parents of --task dependency_translation.
        self.word_heads: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._trees: dict[tuple[int, ...], tuple[Tensor, Tensor]] = {}
        self.labels_seen: Counter = Counter()  # every node label encoded so far
        self.labels_unknown: Counter = Counter()  # those unseen in training
        self._warned = False

    @property
    def parser(self) -> Parser:
        if self._parser is None:
            raise ValueError(self._missing)
        if isinstance(self._parser, str):
            if self._parser == "spacy" and not self._spacy_model:
                raise ValueError("--inference-parser spacy needs --inference-spacy-model NAME_OR_PATH (the pipeline "
                                 "the training data was parsed with)")
            parser = make_parser(self._parser, lang=self._lang, model_dir=self._parser_model_dir,
                                 spacy_model=self._spacy_model, dependency_shape=self._dependency_shape,
                                 stanza_package=self._stanza_package, stanza_model_files=self._stanza_model_files)
            if self._on_built is not None:
                self._on_built(self._parser, parser)
            self._parser = parser
        return self._parser

    def dataset(self, src_tokens: list[Tensor], src_lengths: list[int], tgt_dict: Dictionary | None = None,
                constraints=None, left_pad_source: bool = True, count_nodes: bool = True) -> TreePairDataset:
        """What ``task.build_dataset_for_inference`` returns: fairseq's inference dataset with trees
        (``count_nodes``: as :class:`TreePairDataset`)."""
        self.word_heads = {}
        trees = self.tree_tensors(src_tokens)
        self._trees = {sentence_key(tokens, self.src_dict): tree for tokens, tree in zip(src_tokens, trees)}
        pairs = LanguagePairDataset(src_tokens, src_lengths, self.src_dict, tgt_dict=tgt_dict,
                                    constraints=constraints, left_pad_source=left_pad_source)
        labels = ListDataset([label for label, _ in trees], sizes=[len(label) for label, _ in trees])
        spans = ListDataset([span for _, span in trees], sizes=[len(span) for _, span in trees])
        return TreePairDataset(pairs, labels, spans, self.node_dict, keep_every_sentence=True, count_nodes=count_nodes)

    def add_tree_inputs(self, net_input: dict) -> dict:
        """``net_input`` with ``src_tokens`` ``(B, n)`` (padded either side, EOS last) and
        ``src_lengths`` -> the same plus the tree inputs of :mod:`tree_fairseq.data.tree_pair_dataset`."""
        src_tokens, src_lengths = net_input["src_tokens"], net_input["src_lengths"]
        rows = [utils.strip_pad(row, self.src_dict.pad()) for row in src_tokens.cpu()]
        missing = [row for row in rows if sentence_key(row, self.src_dict) not in self._trees]
        self._trees.update((sentence_key(row, self.src_dict), tree) for row, tree in zip(missing, self.tree_tensors(missing)))
        trees = [self._trees[sentence_key(row, self.src_dict)] for row in rows]
        # Spans count from a sentence's first token; move them past its padding.
        first = src_tokens.ne(self.src_dict.pad()).int().argmax(dim=1).cpu()
        tree_inputs = collate_trees(
            [labels for labels, _ in trees], [spans + start for (_, spans), start in zip(trees, first)],
            src_tokens.cpu(), src_lengths.cpu(), left_pad=False, label_pad=self.node_dict.pad(),
        )
        return {**net_input, **{name: value.to(src_tokens.device) for name, value in tree_inputs.items()}}

    def tree_tensors(self, src_tokens: list[Tensor]) -> list[tuple[Tensor, Tensor]]:
        """Node labels ``(m,)`` and inclusive spans ``(m, 2)`` over the pieces of each sentence
        (dictionary ids, EOS last, no padding), parsed in one call to the parser."""
        pieces = [self.source_pieces.of(tokens) for tokens in src_tokens]
        words = [[word for word, _, _ in group_pieces(p, self.subword_format)] for p in pieces]
        to_parse = [i for i, w in enumerate(words) if w]
        parsed = self.parser.parse([words[i] for i in to_parse], 1, "<raw input>") if to_parse else []
        tree_of = dict(zip(to_parse, parsed))
        dependency = getattr(self.parser, "dependency", None)
        if dependency is not None:
            heads = dependency.take_heads()  # by line: the k-th sentence parsed is line k
            self.word_heads.update((tuple(words[i]), heads[line]) for line, i in enumerate(to_parse, start=1)
                                   if line in heads)
        tensors = []
        for i, sentence_pieces in enumerate(pieces):
            if i not in tree_of:  # an empty sentence: EOS only, no nodes
                tensors.append((torch.zeros(0, dtype=torch.long), torch.zeros(0, 2, dtype=torch.long)))
                continue
            try:
                tree = expand_subwords(align(tree_of[i], words[i]), sentence_pieces, self.subword_format,
                                       self.subword_label)
            except TreeError as error:
                raise TreeError(f"{error} (source sentence: {' '.join(sentence_pieces)!r})") from None
            tensors.append(node_tensors(tree, self.node_dict.index))
            self._count_labels(tree)
        self._check_labels()
        return tensors

    def _count_labels(self, tree) -> None:
        labels = Counter(node.label for node in tree.nodes)
        self.labels_seen.update(labels)
        self.labels_unknown.update({label: n for label, n in labels.items()
                                    if self.node_dict.index(label) == self.node_dict.unk()})

    def _check_labels(self) -> None:
        """Refuse trees none of whose node labels the training data has; warn once when some are unseen."""
        unknown, seen = sum(self.labels_unknown.values()), sum(self.labels_seen.values())
        if not unknown:
            return
        if unknown == seen:
            known = self.node_dict.symbols[self.node_dict.nspecial:]
            raise ValueError(
                f"the trees of --inference-parser {self._parser_name} have none of the training data's node "
                f"labels: theirs are {_some(sorted(self.labels_unknown))}, the training data's {_some(known)}, so "
                f"every node would be {self.node_dict.unk_word}. They are likely trees of another kind than the "
                f"model was trained on{self._kind_of_training(known)}: give --inference-parser the parser the "
                "training data was parsed with, and its --subword-label")
        if not self._warned:
            self._warned = True
            logger.warning(
                f"{unknown} of {seen} source node labels ({100 * unknown / seen:.1f}%) were never seen in training "
                f"and become {self.node_dict.unk_word}: {dict(self.labels_unknown.most_common(10))}; is "
                f"--inference-parser ({self._parser_name}) the parser of the training data?")

    def _kind_of_training(self, known: list[str]) -> str:
        """What the training data's labels say of its trees, where they say it."""
        if set(known) <= {TRIVIAL_LABEL, SUBWORD_LABEL}:
            return (f" (its trees are trivial ones, labelled {TRIVIAL_LABEL}: --inference-parser balanced, left "
                    "or right)")
        if isinstance(self.parser, TrivialParser):
            return " (its trees are a parser's, not trivial ones: --inference-parser stanza or spacy)"
        return ""


def _some(labels: list[str], shown: int = 12) -> str:
    return ", ".join(labels[:shown]) + (", ..." if len(labels) > shown else "")


def _parser_name(parser) -> str:
    if parser is None or isinstance(parser, str):
        return parser
    return getattr(parser, "shape", None) or type(parser).__name__
