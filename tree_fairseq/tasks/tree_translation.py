"""The ``tree_translation`` task: fairseq's translation task whose source
sentences carry trees (batch layout: :mod:`tree_fairseq.data.tree_pair_dataset`)."""

import inspect
import json
import logging
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from fairseq import utils
from fairseq.tokenizer import tokenize_line
from fairseq.data import Dictionary
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from tree_fairseq.data import (
    TreePairDataset, keep_node_dictionary, load_node_dictionary, load_tree_streams, node_dictionary_path,
)
from tree_fairseq.data.inference import INFERENCE_PARSERS, InferenceTrees
from tree_fairseq.models.common import option
from tree_fairseq.parsing.record import (
    UNKNOWN, databin_record_path, describe, describe_parser, heads_identity, identity_differences, parser_identity,
    read_record, version_differences,
)
from tree_fairseq.tasks.resumed_batches import ResumedBatches
from tree_fairseq.trees import SUBWORD_FORMATS, SUBWORD_LABELS, dictionary_subword_format, group_pieces
from tree_fairseq.trees.dependency import DEPENDENCY_TREE_SHAPES

logger = logging.getLogger(__name__)

BATCH_TOKENS = ("tree", "text")
# The task's state entry (saved in checkpoints) holding the parser record of the training trees, as JSON.
PARSER_RECORD_STATE = "tree_parser_record"
# What fairseq-interactive does with an input line too long for the model.
INFERENCE_TOO_LONG = ("skip", "truncate")


@dataclass
class TreeTranslationConfig(TranslationConfig):
    """fairseq's translation options; the data-bin must come from tree-fairseq-preprocess.
    --batch-tokens says what --max-tokens counts; --inference-parser, --subword-format,
    --subword-label and --inference-too-long serve raw-text translation (fairseq-interactive).

    The parser that made the training trees (the data-bin's parser.SRC.json,
    :mod:`tree_fairseq.parsing.record`) is kept in the task's state, which fairseq saves in every
    checkpoint, not in this config: fairseq saves the command line's config, not the task's copy.
    Each --inference-* option left out is the recorded one (:func:`inference_choice`)."""

    batch_tokens: ChoiceEnum(BATCH_TOKENS) = option(
        "tree",
        "what a sentence counts toward --max-tokens. tree (default): max(source leaves + "
        "nodes, target tokens), since a tree batch's memory and compute grow with its nodes; "
        "text: max(source tokens, target tokens), as --task translation counts, so that with "
        "the same data-bin, seed and flags the training batches (sentences per update, updates "
        "per epoch) are the translation task's exactly; a sentence is then skipped for its "
        "text sizes only, and a batch's leaves + nodes may reach about twice --max-tokens",
    )

    inference_parser: Optional[ChoiceEnum(INFERENCE_PARSERS)] = option(
        None,
        "parser of raw source sentences (fairseq-interactive, the hub interface): stanza, spacy "
        "(--inference-spacy-model) or a trivial tree (balanced, left, right). Default: the one "
        "that made the training data's trees, as the checkpoint or the data-bin's parser.SRC.json "
        "records it (with its model, tree shape and heads); without a record it must be given. A "
        "parser, model, tree shape or heads other than the recorded ones is refused unless "
        "--inference-parser-override is given",
    )
    inference_parser_override: bool = option(
        False,
        "parse raw text with the --inference-parser (and model, tree shape, heads) given although "
        "the training data's record names another (a warning instead of a refusal)",
    )
    inference_parser_model_dir: Optional[str] = option(
        None,
        "stanza's model directory for --inference-parser stanza, as tree-fairseq-parse "
        "--model-dir",
    )
    inference_stanza_package: Optional[str] = option(
        None,
        "stanza's package for --inference-parser stanza, as tree-fairseq-parse "
        "--stanza-package",
    )
    inference_stanza_pos_model: Optional[str] = option(
        None,
        "stanza's tagger file, as tree-fairseq-parse --stanza-pos-model",
    )
    inference_stanza_constituency_model: Optional[str] = option(
        None,
        "stanza's parser file, as tree-fairseq-parse --stanza-constituency-model",
    )
    inference_stanza_pretrain: Optional[str] = option(
        None,
        "stanza's word vectors file, as tree-fairseq-parse --stanza-pretrain",
    )
    inference_spacy_model: Optional[str] = option(
        None,
        "the spaCy pipeline (package name or directory) for --inference-parser "
        "spacy, as tree-fairseq-parse --spacy-model (default: the recorded one)",
    )
    inference_dependency_tree_shape: Optional[ChoiceEnum(DEPENDENCY_TREE_SHAPES)] = option(
        None,
        "phrase structure of --inference-parser spacy's dependency parses, "
        "as tree-fairseq-parse --dependency-tree-shape (default: the recorded one, "
        "else layered)",
    )
    subword_format: ChoiceEnum(("auto",) + SUBWORD_FORMATS) = option(
        "auto",
        "how the source BPE marks word pieces, as tree-fairseq-preprocess --subword-format; "
        "auto (default): sentencepiece when the source dictionary holds \u2581 pieces, "
        "subword_nmt otherwise",
    )
    subword_label: ChoiceEnum(SUBWORD_LABELS) = option(
        "pos",
        "label of the node over a word's BPE pieces, as tree-fairseq-preprocess --subword-label",
    )
    inference_too_long: ChoiceEnum(INFERENCE_TOO_LONG) = option(
        "skip",
        "fairseq-interactive: an input line of more source tokens (BPE pieces and EOS) than the "
        "model's source positions (--max-source-positions, the checkpoint's own included), or "
        "that counts more than --max-tokens: skip (default) leaves it untranslated, truncate "
        "translates its first words that fit the positions; either with a warning naming the "
        "line and its length, and the session goes on with the next line",
    )


@register_task("tree_translation", dataclass=TreeTranslationConfig)
class TreeTranslationTask(ResumedBatches, TranslationTask):
    """A resumed run trains on the batches of an uninterrupted one (:mod:`tree_fairseq.tasks.resumed_batches`)."""

    cfg: TreeTranslationConfig

    def __init__(self, cfg: TreeTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        if cfg.truncate_source:
            raise ValueError("--truncate-source would cut leaves out from under their node spans; "
                             "long sentences are skipped by --max-source-positions instead")
        data_dirs = utils.split_paths(cfg.data)
        self.node_dict_path = node_dictionary_path(data_dirs[0], cfg.source_lang)
        self.node_dict = load_node_dictionary(data_dirs[0], cfg.source_lang)
        for shard in data_dirs[1:]:
            # fairseq reads shard k in epoch k with the first shard's dictionaries
            other = node_dictionary_path(shard, cfg.source_lang)
            if os.path.exists(other) and Dictionary.load(other).symbols != self.node_dict.symbols:
                raise ValueError(f"the shards' node dictionaries differ: {other} is not {self.node_dict_path}; "
                                 "binarise every shard with tree-fairseq-preprocess --nodedict "
                                 f"{self.node_dict_path}")
        self.subword_format = _subword_format(cfg, src_dict)
        # What made the training data's trees: the data-bin's record, until a checkpoint's replaces it
        # (load_state_dict). state_dict() adds it to the task's state, which fairseq saves in every checkpoint.
        self.parser_record = _databin_parser_record(data_dirs[0], cfg.source_lang)
        _check_shard_parsers(data_dirs, cfg.source_lang, self.parser_record)
        self._configure_inference()
        self._model_max_positions = []  # of each model built: fairseq-interactive's limits are the smallest
        self._interactive_lines = 0  # input lines fairseq-interactive has read so far
        self._interactive_batch = None  # (its first line number, lines, {index: length} of those to skip)

    def _configure_inference(self) -> None:
        """The raw-text parser: the options given, else the recorded ones (:func:`inference_choice`).
        Nothing is loaded before the first sentence; what cannot be chosen is said then."""
        cfg = self.cfg
        choice = inference_choice(cfg, self.parser_record)
        self.inference_choice = choice
        self.inference_trees = InferenceTrees(
            self.src_dict, self.node_dict, choice.get("parser"), subword_format=self.subword_format,
            subword_label=str(cfg.subword_label), lang=choice["lang"],
            parser_model_dir=choice["model_dir"], spacy_model=choice["spacy_model"],
            dependency_shape=choice["dependency_tree_shape"],
            stanza_package=choice.get("stanza_package"), stanza_model_files=choice.get("stanza_model_files"),
            missing=choice.get("missing"), on_built=self._check_inference_parser,
        )

    def _check_inference_parser(self, name: str, parser) -> None:
        """The parser built for raw text against the record: another back-end, model or tree shape
        is refused unless --inference-parser-override; another version of the same model is a warning."""
        choice = self.inference_choice
        used = describe_parser(name, parser, lang=choice.get("lang"), spacy_model=choice.get("spacy_model"),
                               dependency_shape=choice.get("dependency_tree_shape"),
                               stanza_package=choice.get("stanza_package"),
                               stanza_model_files=choice.get("stanza_model_files"))
        models = [f"{model['file']} ({model['bytes']} bytes)" for model in used.get("models", [])]
        origin = "as given" if self.cfg.inference_parser is not None else "as the training data's record says"
        logger.info(f"raw text is parsed by {describe(used)}{': ' + ', '.join(models) if models else ''} ({origin})")
        if not isinstance(self.parser_record, dict) or self.parser_record.get("parser") not in INFERENCE_PARSERS:
            return  # nothing recorded, or trees read from another parser's output: nothing to compare
        check_against_record(self.parser_record, used, bool(self.cfg.inference_parser_override),
                             "--inference-parser")

    def state_dict(self):
        return {**super().state_dict(), PARSER_RECORD_STATE: json.dumps(self.parser_record)}

    def load_state_dict(self, state_dict):
        """A checkpoint's state: its parser record (that of the data the model was trained on) replaces
        the data-bin's. A checkpoint older than the records has none: the data-bin's stays."""
        super().load_state_dict(state_dict)
        recorded = json.loads(state_dict.get(PARSER_RECORD_STATE) or "null")
        if recorded is None or recorded == UNKNOWN or recorded == self.parser_record:
            return
        if isinstance(self.parser_record, dict) and parser_identity(recorded) != parser_identity(self.parser_record):
            logger.warning(f"the checkpoint's training trees were made by {describe(recorded)}, the data-bin's "
                           f"{self.cfg.data} by {describe(self.parser_record)}: raw text is parsed as the "
                           "checkpoint's were")
        self.parser_record = recorded
        self._configure_inference()

    @property
    def node_dictionary(self) -> Dictionary:
        """Node labels; never part of the target vocabulary."""
        return self.node_dict

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        require_batch_key(model, cfg, "src_node_labels", "reads no source trees and cannot take a tree_translation "
                          "batch: train it with --task translation on the same data-bin (its text part is "
                          "fairseq-preprocess's own)")
        keep_node_dictionary(model, self.node_dict, self.node_dict_path)
        self._model_max_positions.append(model.max_positions())
        return model

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        if self.datasets[split].supports_prefetch:
            # --dataset-impl cached (also fairseq's guess for a data-bin binarised with lazy or cached) reads
            # from a cache only prefetch fills, and fairseq reads a first batch before it prefetches: fill it now.
            self.datasets[split].prefetch(np.arange(len(self.datasets[split])))
        paths = utils.split_paths(self.cfg.data)
        data_dir = paths[(epoch - 1) % len(paths)]
        labels, spans = load_tree_streams(data_dir, split, self.cfg.source_lang, self.cfg.target_lang,
                                          combine=combine, upsample_primary=self.cfg.upsample_primary)
        # Every split only evaluated (valid, --combine-valid-subsets' too, generate's --gen-subset,
        # fairseq-validate) keeps every sentence whatever --required-batch-size-multiple says.
        self.datasets[split] = TreePairDataset(self.datasets[split], labels, spans, self.node_dict,
                                               keep_every_sentence=not training_split(self.cfg, split, combine),
                                               count_nodes=self.count_nodes,
                                               where=f"split {split!r} of {data_dir}")

    @property
    def count_nodes(self) -> bool:
        """Whether a sentence's nodes count toward --max-tokens (--batch-tokens tree)."""
        return self.cfg.batch_tokens == "tree"

    def get_batch_iterator(self, dataset, max_tokens=None, *args, **kwargs):
        if isinstance(dataset, TreePairDataset):
            # Read by filter_indices_by_size, which fairseq calls with max_positions only.
            dataset.max_tokens = max_tokens
        return super().get_batch_iterator(dataset, max_tokens, *args, **kwargs)

    def get_interactive_tokens_and_lengths(self, lines, encode_fn):
        """fairseq-interactive's next input lines as source tokens. A line longer than the model's
        source positions (which fairseq-interactive would end the session on) is truncated to its
        first words that fit (--inference-too-long truncate), or else left for
        :meth:`filter_indices_by_size` to skip, its tokens EOS alone so that it is not parsed."""
        # As fairseq encodes them, keeping each line's pieces: a piece missing from the dictionary is
        # <unk> in the ids, which loses where its word ends (tree_fairseq.data.source_pieces).
        pieces = [tokenize_line(encode_fn(line)) for line in lines]
        tokens = [self.source_dictionary.encode_line(" ".join(p), add_if_not_exist=False).long() for p in pieces]
        first = self._interactive_lines + 1
        self._interactive_lines += len(lines)
        limit = self._source_positions()
        skipped = {}
        for i, sentence in enumerate(tokens):
            if len(sentence) <= limit:
                continue
            truncate = self.cfg.inference_too_long == "truncate"
            cut = self._first_words(sentence, limit, pieces[i]) if truncate else None
            if cut is None:
                skipped[i] = len(sentence)
                tokens[i] = sentence[-1:]
                continue
            tokens[i], words, all_words = cut
            pieces[i] = pieces[i][:len(tokens[i]) - 1]
            logger.warning(f"input line {first + i} is {len(sentence)} source tokens long (BPE pieces and EOS), more "
                           f"than the model's {limit} source positions: truncated to its first {words} of {all_words} "
                           f"words ({len(tokens[i])} tokens)")
        self._interactive_batch = (first, len(lines), skipped)
        self.inference_trees.source_pieces.remember(
            [(sentence, sentence_pieces) for i, (sentence, sentence_pieces) in enumerate(zip(tokens, pieces))
             if i not in skipped])
        return tokens, [len(sentence) for sentence in tokens]

    def _source_positions(self) -> float:
        """The source positions of the task and every model built (fairseq-interactive's limit)."""
        limits = utils.resolve_max_positions(self.max_positions(), *self._model_max_positions)
        limit = limits[0] if isinstance(limits, tuple) else limits
        return float("inf") if limit is None else limit

    def _first_words(self, sentence, limit: int, pieces: list[str]):
        """``sentence`` (EOS last; ``pieces``, its text's pieces) cut to its first whole words that fit
        ``limit`` tokens with EOS, the number of words kept and of all its words; None when not even its
        first word fits."""
        ends = [last for _, _, last in group_pieces(pieces, self.subword_format)]
        kept = [last for last in ends if last + 2 <= limit]
        if not kept:
            return None
        return torch.cat([sentence[:kept[-1] + 1], sentence[-1:]]), len(kept), len(ends)

    def _interactive_indices(self, indices, dataset, max_positions):
        """The sentences of fairseq-interactive's batch that fit; each other one is skipped with a
        warning naming its input line, and the session goes on (fairseq would end it)."""
        first, _, skipped = self._interactive_batch
        self._interactive_batch = None
        instead = "" if self.cfg.inference_too_long == "truncate" else \
            " (--inference-too-long truncate translates its first words instead)"
        for i, length in sorted(skipped.items()):
            logger.warning(f"input line {first + i} is {length} source tokens long (BPE pieces and EOS), more than the "
                           f"model's {self._source_positions():g} source positions: skipped{instead}")
        indices = np.asarray([i for i in indices if i not in skipped], dtype=np.int64)
        if max_positions is not None and len(indices):
            indices, too_long = dataset.filter_indices_by_size(indices, max_positions)
            for i in too_long:
                logger.warning(f"input line {first + i} is {dataset.size(i)} (source, target) tokens long, more than "
                               f"the model's {max_positions}: skipped")
        max_tokens = getattr(dataset, "max_tokens", None)
        if max_tokens is not None and isinstance(dataset, TreePairDataset) and len(indices):
            sizes = dataset.num_tokens_vec(indices)
            for i in sorted(indices[sizes > max_tokens]):
                logger.warning(f"input line {first + i} counts {dataset.describe_size(i)} > --max-tokens {max_tokens}: "
                               "skipped (raise --max-tokens to translate it)")
            indices = indices[sizes <= max_tokens]
        return np.asarray(indices, dtype=np.int64)

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """fairseq's filter (leaves against --max-source-positions, --max-tokens folded in), then
        the sentences whose count toward --max-tokens (leaves plus nodes with --batch-tokens tree)
        exceeds it, treated as fairseq treats a too-long sentence: skipped and counted (training,
        --skip-invalid-size-inputs-valid-test), an error otherwise.

        With --batch-tokens text the second filter counts what fairseq's first one already
        compared in training, so training keeps exactly the translation task's sentences: one
        whose leaves plus nodes exceed --max-tokens is trained on, in a batch whose leaves plus
        nodes then exceed --max-tokens (less than twice: every node spans two words or more, so a
        sentence has fewer nodes than leaves). In the splits only evaluated (fairseq folds --max-tokens into
        the first filter for training only), a sentence longer than --max-tokens is skipped or
        refused here instead of stopping fairseq's batching with an assertion.

        fairseq-interactive's batches (:meth:`get_interactive_tokens_and_lengths`) skip what does
        not fit, with a warning for each line, whatever --skip-invalid-size-inputs-valid-test says."""
        if self._interactive_batch is not None and len(dataset) == self._interactive_batch[1]:
            return self._interactive_indices(indices, dataset, max_positions)
        given = len(indices)
        indices = super().filter_indices_by_size(indices, dataset, max_positions, ignore_invalid_inputs)
        max_tokens = getattr(dataset, "max_tokens", None)
        if not isinstance(dataset, TreePairDataset) or max_tokens is None or len(indices) == 0:
            return _not_empty(indices, given, max_positions, max_tokens, self.count_nodes)
        indices = np.asarray(indices, dtype=np.int64)
        sizes = dataset.num_tokens_vec(indices)
        too_big = indices[sizes > max_tokens]
        if len(too_big) == 0:
            return indices
        if not ignore_invalid_inputs:
            raise Exception(
                f"Size of sample #{too_big[0]} is invalid: {dataset.describe_size(too_big[0])} > --max-tokens "
                f"{max_tokens}; skip this example with --skip-invalid-size-inputs-valid-test or raise --max-tokens"
            )
        logger.warning(f"{len(too_big):,} samples have invalid sizes and will be skipped: {dataset.counted} "
                       f"> --max-tokens {max_tokens}, first few sample ids={too_big[:10].tolist()}")
        return _not_empty(indices[sizes <= max_tokens], given, max_positions, max_tokens, self.count_nodes)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """Raw-text translation: the sentences (dictionary ids of their BPE pieces) with what
        :meth:`inference_dataset` adds (the trees of --inference-parser). A parser refused
        (:class:`InferenceTrees`) ends fairseq-interactive in one line; the hub interface's caller
        gets the ValueError."""
        try:
            return self.inference_dataset(src_tokens, src_lengths, constraints)
        except ValueError as error:
            if self._interactive_batch is None:
                raise
            raise SystemExit(f"fairseq-interactive: error: {error}") from None

    def inference_dataset(self, src_tokens, src_lengths, constraints):
        """fairseq's inference dataset of raw text with the source trees."""
        return self.inference_trees.dataset(src_tokens, src_lengths, self.target_dictionary, constraints=constraints,
                                            left_pad_source=self.cfg.left_pad_source, count_nodes=self.count_nodes)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        # fairseq-interactive hands the generator src_tokens and src_lengths only.
        sample = {**sample, "net_input": self.add_inference_inputs(sample["net_input"])}
        return super().inference_step(generator, models, sample, prefix_tokens=prefix_tokens,
                                      constraints=constraints)

    def add_inference_inputs(self, net_input: dict) -> dict:
        """``net_input`` with the source trees of raw text where it has none."""
        if "src_node_labels" not in net_input:
            net_input = self.inference_trees.add_tree_inputs(net_input)
        return net_input


def training_split(cfg, split: str, combine: bool) -> bool:
    """Whether ``load_dataset(split, combine=combine)`` loads the split trained on: fairseq's trainer loads
    --train-subset (the task's ``train_subset``) with combine=True. combine alone does not tell:
    --combine-valid-subsets loads valid with combine=True too, and generate may read the train split
    without. A config built outside fairseq's (``train_subset`` not resolved) trains on fairseq's default
    --train-subset, train."""
    try:
        subset = cfg.train_subset
    except Exception:  # an OmegaConf interpolation that cannot be resolved
        subset = None
    if not isinstance(subset, str) or subset.startswith("${"):
        subset = "train"
    return bool(combine) and split == subset


def require_batch_key(model, cfg, key: str, refusal: str) -> None:
    """ValueError ``--arch ARCH {refusal}`` when ``model.forward`` takes no ``key`` of the batch."""
    if key not in inspect.signature(model.forward).parameters:
        raise ValueError(f"--arch {getattr(cfg, 'arch', None) or getattr(cfg, '_name', '?')} {refusal}")


def _databin_parser_record(data_dir: str, lang: str):
    """The ``parser`` of the data-bin's parser.{lang}.json; ``unknown`` without one."""
    record = read_record(databin_record_path(data_dir, lang))
    if not isinstance(record, dict):
        return UNKNOWN
    return record.get("parser", UNKNOWN)


def _check_shard_parsers(data_dirs: list[str], lang: str, first) -> None:
    """Shards of one training set (``DATA-BIN-A:DATA-BIN-B``, one per epoch) whose trees were made by
    different parsers (or heads) are refused: the model would learn from two kinds of trees while
    its checkpoints record the first shard's alone. A shard without a record is a warning."""
    for shard in data_dirs[1:]:
        record = _databin_parser_record(shard, lang)
        if isinstance(first, dict) and isinstance(record, dict):
            if (parser_identity(record), heads_identity(record)) != (parser_identity(first), heads_identity(first)):
                raise ValueError(f"the shards' trees were made by different parsers: {data_dirs[0]} by "
                                 f"{describe(first)}, {shard} by {describe(record)}; binarise every shard from "
                                 "trees made alike")
        elif isinstance(first, dict) or isinstance(record, dict):
            unknown = shard if isinstance(first, dict) else data_dirs[0]
            logger.warning(f"the parser of {unknown}'s trees is unknown (no record): whether every shard's trees "
                           "were made alike cannot be checked")


def inference_choice(cfg, record) -> dict:
    """The raw-text parser and its options: each option given, else the record's. ``missing``
    says what to pass where neither names a parser that runs on raw text (nothing falls back)."""
    recorded = record if isinstance(record, dict) else {}
    name = str(cfg.inference_parser) if cfg.inference_parser is not None else None
    choice: dict = {}
    if name is None:
        if recorded.get("parser") in INFERENCE_PARSERS:
            name = recorded["parser"]
        elif recorded:
            choice["missing"] = (
                f"the training data's trees were made by tree-fairseq-parse --parser {recorded.get('parser')} from "
                "another parser's output, which cannot parse raw text here: give --inference-parser (stanza, spacy "
                "with --inference-spacy-model, balanced, left or right), the parser that output came from"
                + (" (its dependency-derived trees: --inference-parser spacy, --inference-dependency-tree-shape "
                   f"{recorded.get('dependency_tree_shape', 'layered')})"
                   if recorded.get("parser") == "conllu" else ""))
        else:
            choice["missing"] = (
                f"no record of the parser that made the training data's trees (neither the checkpoint nor "
                f"{databin_record_path(utils.split_paths(cfg.data)[0], cfg.source_lang)} has one: trees made "
                "before tree-fairseq-parse recorded its parser, or elsewhere): give --inference-parser, the parser "
                "the training data was parsed with (stanza, spacy with --inference-spacy-model, balanced, left or "
                "right)")
    choice["parser"] = name
    same = name is not None and recorded.get("parser") == name

    def option(given, key, default=None):
        return given if given is not None else (recorded.get(key, default) if same else default)

    choice["lang"] = option(None, "lang") or cfg.source_lang
    choice["spacy_model"] = option(cfg.inference_spacy_model, "spacy_model")
    shape = str(cfg.inference_dependency_tree_shape) if cfg.inference_dependency_tree_shape is not None else None
    choice["dependency_tree_shape"] = option(shape, "dependency_tree_shape", "layered")
    choice["stanza_package"] = option(cfg.inference_stanza_package, "stanza_package")
    files = {"pos": cfg.inference_stanza_pos_model, "constituency": cfg.inference_stanza_constituency_model,
             "pretrain": cfg.inference_stanza_pretrain}
    if same and not any(files.values()):
        # The recorded files where they are on this machine; the models used are compared afterwards.
        files = {kind: path for kind, path in (recorded.get("stanza_model_files") or {}).items()
                 if os.path.isfile(path)}
    choice["stanza_model_files"] = files
    recorded_dir = recorded.get("model_dir") if same else None
    choice["model_dir"] = cfg.inference_parser_model_dir or (
        recorded_dir if recorded_dir and os.path.isdir(recorded_dir) else None)
    return choice


def check_against_record(recorded: dict, used: dict, override: bool, flag: str) -> None:
    """ValueError when ``used`` (a parser's description) is another parser than ``recorded``, unless
    ``override``; a warning for another version of the same one, or for an override."""
    differences = identity_differences(recorded, used)
    if differences and not override:
        raise ValueError(
            f"raw text would be parsed otherwise than the training data: {'; '.join(differences)} (recorded: "
            f"{describe(recorded)}). Leave {flag} and its options out to use the recorded parser, or give "
            f"--inference-parser-override to parse with this one anyway")
    if differences:
        logger.warning(f"--inference-parser-override: raw text is parsed otherwise than the training data: "
                       f"{'; '.join(differences)} (recorded: {describe(recorded)})")
    versions = version_differences(recorded, used)
    if versions:
        logger.warning(f"raw text is parsed by other versions than the training data: {'; '.join(versions)}; "
                       "its trees may differ a little")


def _subword_format(cfg: TreeTranslationConfig, src_dict: Dictionary) -> str:
    """The source pieces' format: the data-bin's dictionary tells (sentencepiece pieces start with
    \u2581); a --subword-format that contradicts it is refused, since every piece would be taken
    for a word of its own."""
    found = dictionary_subword_format(src_dict.symbols[src_dict.nspecial:])
    sentencepiece = found == "sentencepiece"
    given = str(cfg.subword_format)
    if given == "sentencepiece" and not sentencepiece or given == "subword_nmt" and sentencepiece:
        raise ValueError(f"--subword-format {given}, but the source dictionary of {cfg.data} is "
                         f"{'' if sentencepiece else 'not '}sentencepiece's (pieces starting with \u2581): "
                         "leave --subword-format out (auto) or give the data-bin's own")
    return found


def _not_empty(indices, given: int, max_positions, max_tokens, count_nodes: bool):
    """``indices``, unless the size filter left none of ``given`` sentences: then one clear line
    (fairseq's batching would fail with an IndexError on the empty list)."""
    if given and len(indices) == 0:
        counted = ", leaves + nodes on the source side" if count_nodes else ""
        raise SystemExit(f"tree_translation: error: all {given} sentences of the split were skipped as too long "
                         f"(--max-source-positions/--max-target-positions {max_positions}, --max-tokens {max_tokens}"
                         f"{counted}): nothing is left to train or evaluate on; raise the limits")
    return indices
