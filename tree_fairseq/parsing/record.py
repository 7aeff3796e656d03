"""What made a tree file: the *parser record*, kept from tree-fairseq-parse to the checkpoint.

tree-fairseq-parse writes ``OUTPUT.parser.json`` beside its trees (:func:`parse_record`): the
back-end (``parser``), its model where it has one (spaCy: the package or directory given, the
pipeline's ``lang``, ``name`` and ``version`` from its meta, spaCy's version; stanza: its version,
``--stanza-package``, the model files given one by one and every model file the pipeline loaded,
with its size), the tree shape (``dependency_tree_shape`` for spacy and conllu), the file of
``--trees`` for bracketed and conllu, and, with ``--heads``, where the heads come from
(``{"source": "parser"}`` or a control, ``{"source": "random", "seed": 1}``). It also holds the
BLAKE2b digest of the trees written (and of the heads file), so that a record that does not belong
to the file beside it (the trees edited or replaced afterwards) is known as such.

tree-fairseq-preprocess copies the records of its splits' tree files into the data-bin
(``parser.{src}.json``, :func:`databin_record_path`); the task keeps the training split's in its
config (``--tree-parser-record``), so every checkpoint carries it, and raw-text translation
(fairseq-interactive, the hub interface) takes its inference parser from it.

:func:`parser_identity` is what must agree between the training data's parser and an inference
parser: the back-end, the model (spaCy's pipeline language and name; stanza's model files by
name and size), the tree shape and the heads. A different version of the same spaCy pipeline or
of stanza is a warning, not a different parser (:func:`version_differences`).
"""

import hashlib
import json
import os
from pathlib import Path

RECORD_FORMAT = 1
RECORD_SUFFIX = ".parser.json"
# The record of trees made elsewhere (no OUTPUT.parser.json beside them, or one of other trees).
UNKNOWN = "unknown"
_BLOCK = 1 << 20


def record_path(trees_path: str) -> str:
    """Where tree-fairseq-parse writes the record of ``trees_path``."""
    return trees_path + RECORD_SUFFIX


def databin_record_path(data_dir: str, lang: str) -> str:
    """The data-bin's record of its ``lang`` source trees."""
    return os.path.join(data_dir, f"parser.{lang}.json")


def file_digest(path: str) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def model_file(path: str) -> dict:
    """A model file as the record names it: its last three path components (stanza's
    ``LANG/KIND/PACKAGE.pt``, the same wherever the model folder lies) and its size."""
    return {"file": "/".join(Path(path).parts[-3:]), "bytes": os.path.getsize(path)}


def describe_parser(name: str, parser=None, *, lang: str | None = None, spacy_model: str | None = None,
                    dependency_shape: str | None = None, stanza_package: str | None = None,
                    stanza_model_files: dict | None = None, trees: str | None = None,
                    model_dir: str | None = None) -> dict:
    """What the parser ``name`` (built: ``parser``, a spaCy or stanza back-end read for its model)
    is, as the record says it."""
    description: dict = {"parser": name}
    if name in ("spacy", "conllu"):
        description["dependency_tree_shape"] = dependency_shape or "layered"
    if name == "spacy":
        description["spacy_model"] = spacy_model
        nlp = getattr(parser, "nlp", None)
        if nlp is not None:
            import spacy

            description["pipeline"] = {key: nlp.meta.get(key) for key in ("lang", "name", "version")}
            description["spacy_version"] = spacy.__version__
    if name == "stanza":
        description["lang"] = lang
        description["stanza_package"] = stanza_package
        description["stanza_model_files"] = {kind: os.path.abspath(path)
                                             for kind, path in (stanza_model_files or {}).items() if path}
        if model_dir:  # the folder given, so that raw text finds the same models unasked
            description["model_dir"] = os.path.abspath(model_dir)
        pipeline = getattr(parser, "pipeline", None)
        if pipeline is not None:
            import stanza

            description["stanza_version"] = stanza.__version__
            paths = [pipeline.config.get(f"{kind}_{what}_path") for kind in ("pos", "constituency")
                     for what in ("model", "pretrain")]
            description["models"] = [model_file(path) for path in paths if path and os.path.isfile(path)]
    if name in ("bracketed", "conllu") and trees is not None:
        description["trees"] = os.path.abspath(trees)
    return description


def parse_record(description: dict, *, lines: int, trees_digest: str, on_failure: str, failures: int,
                 heads: str | None = None, heads_seed: int | None = None,
                 heads_digest: str | None = None) -> dict:
    """tree-fairseq-parse's record of one output: ``description`` (:func:`describe_parser`) and the
    run's facts."""
    record = {"format": RECORD_FORMAT, "made_by": "tree-fairseq-parse", **description, "lines": lines,
              "on_failure": on_failure, "failures": failures, "trees_blake2b": trees_digest}
    if heads is not None:
        record["heads"] = {"source": heads, **({"seed": heads_seed} if heads == "random" else {}),
                           "blake2b": heads_digest}
    return record


def parser_identity(record) -> dict | None:
    """What must agree between two parsers for one to stand for the other; None for an unknown record."""
    if not isinstance(record, dict):
        return None
    identity = {"parser": record.get("parser")}
    if record.get("parser") in ("spacy", "conllu"):
        identity["dependency_tree_shape"] = record.get("dependency_tree_shape", "layered")
    if record.get("parser") == "spacy":
        pipeline = record.get("pipeline") or {}
        identity["pipeline"] = (f"{pipeline.get('lang')}_{pipeline.get('name')}" if pipeline
                                else record.get("spacy_model"))
    if record.get("parser") == "stanza":
        identity["lang"] = record.get("lang")
        identity["models"] = sorted((m["file"], m["bytes"]) for m in record.get("models", []))
    return identity


def heads_identity(record) -> dict | None:
    heads = record.get("heads") if isinstance(record, dict) else None
    if not isinstance(heads, dict):
        return heads  # None (no heads) or unknown
    return {key: heads[key] for key in ("source", "seed") if key in heads}


def identity_differences(recorded: dict, used: dict) -> list[str]:
    """``key: recorded -> used`` for each part of :func:`parser_identity` that differs."""
    recorded, used = parser_identity(recorded), parser_identity(used)
    if recorded is None or used is None:
        return []
    if recorded["parser"] != used["parser"]:
        return [f"parser: {recorded['parser']} -> {used['parser']}"]
    return [f"{key}: {_shown(recorded.get(key))} -> {_shown(used.get(key))}"
            for key in sorted(recorded.keys() | used.keys()) if recorded.get(key) != used.get(key)]


def version_differences(recorded: dict, used: dict) -> list[str]:
    """The versions (spaCy's pipeline and spaCy, stanza) that differ between two records of one parser."""
    differences = []
    for key, name in (("spacy_version", "spaCy"), ("stanza_version", "stanza")):
        if recorded.get(key) and used.get(key) and recorded[key] != used[key]:
            differences.append(f"{name} {recorded[key]} -> {used[key]}")
    before, after = (recorded.get("pipeline") or {}).get("version"), (used.get("pipeline") or {}).get("version")
    if before and after and before != after:
        differences.append(f"pipeline version {before} -> {after}")
    return differences


def _shown(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(f"{name} ({size} bytes)" if isinstance(name, str) else str(name)
                               for name, size in value) + "]" if value else "[]"
    return str(value)


def describe(record) -> str:
    """One line naming the parser of ``record``."""
    if not isinstance(record, dict):
        return UNKNOWN
    parts = [record.get("parser", "?")]
    if record.get("parser") == "spacy":
        pipeline = record.get("pipeline") or {}
        name = f"{pipeline.get('lang')}_{pipeline.get('name')}" if pipeline else record.get("spacy_model")
        parts.append(f"{name} {pipeline.get('version', '')}".strip())
    if record.get("parser") == "stanza":
        parts.append(f"lang {record.get('lang')}, stanza {record.get('stanza_version', '?')}")
        if record.get("stanza_package"):
            parts.append(f"package {record['stanza_package']}")
    if record.get("dependency_tree_shape"):
        parts.append(f"{record['dependency_tree_shape']} trees")
    heads = record.get("heads")
    if heads == UNKNOWN:
        parts.append("heads unknown")
    elif heads:
        parts.append(f"heads {heads['source']}" + (f" seed {heads['seed']}" if "seed" in heads else ""))
    return ", ".join(parts)


def read_record(path: str):
    """The record in ``path``, or None when there is none; ValueError for one that is not JSON."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as error:
        raise ValueError(f"{path}: not a parser record ({error})") from None
