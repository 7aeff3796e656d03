"""stanza's constituency parser behind the :class:`~tree_fairseq.parsing.Parser`
interface: tokenised sentences in, normal-form trees over exactly those tokens out.

stanza gets one sentence per input line, pretokenised: its words are the line's tokens, with the
Moses and PTB escapes undone as for every parser (:func:`~tree_fairseq.trees.unescape`, shared with
the spaCy back-end: ``&apos;s`` -> ``'s``, ``-LRB-`` -> ``(``). Over pretokenised text stanza marks
no token as a multi-word token, so nothing is expanded: German ``zum`` is one word, not ``zu dem``,
and no mwt model is loaded. Its tree is aligned to the corpus tokens with
:func:`~tree_fairseq.trees.align`; each word keeps as its preterminal the tag the constituency
parser read, the pipeline's tagger's (UPOS or XPOS, whichever the parser was trained on).

A sentence the parser gives up on (stanza drops it and fails the whole call) is found by parsing
the call's sentences again in halves, and handed to ``--on-failure``.

Models are read from a model folder laid out as ``stanza.download`` lays one out (its
``resources.json`` names each language's packages), stanza's own by default, or from model files
given one by one; a package other than the language's default is chosen by name. Missing ones are
downloaded once; when stanza's resource server cannot be reached the constructor fails within
seconds, naming the command that fetches them.
"""

import contextlib
import os
import sys
import tempfile

import requests
import stanza
import torch
from stanza.resources.common import (DEFAULT_MODEL_DIR, DEFAULT_RESOURCES_URL, get_language_resources,
                                     load_resources_json)

from tree_fairseq.trees import RawTree, Tree, TreeError, align, located, normalize, unescape
from tree_fairseq.trees.bracketed import escape_label
from tree_fairseq.trees.tree import strip_function_tags

PROCESSORS = "tokenize,pos,constituency"
# The model files that may be given instead of a model folder's.
MODEL_FILES = ("pos", "constituency", "pretrain")
# Without it a blocked connection would hang the first request for minutes.
NETWORK_TIMEOUT_S = 5


class StanzaParser:
    """stanza's pipeline for ``lang``: its models from the model folder ``model_dir`` (stanza's own
    by default), the language's default package unless ``package`` names another
    (:func:`stanza_package`), each of ``model_files`` (``{"pos": FILE, "constituency": FILE,
    "pretrain": FILE}``) in place of the folder's. A folder without models for the language gets
    them downloaded, unless ``model_files`` names both the tagger and the parser: those files alone
    (with the word vectors of ``pretrain``) then make the pipeline, with nothing downloaded."""

    def __init__(self, lang: str, model_dir: str | None = None, batch_size: int = 64,
                 use_gpu: bool | None = None, on_failure: str = "error", package: str | None = None,
                 model_files: dict[str, str | None] | None = None):
        from tree_fairseq.parsing.interface import Failures

        self.failures = Failures(on_failure)
        model_dir = model_dir or DEFAULT_MODEL_DIR
        files = {kind: path for kind, path in (model_files or {}).items() if path}
        for kind, path in files.items():
            if kind not in MODEL_FILES:
                raise ValueError(f"unknown stanza model file {kind!r}; one of {MODEL_FILES}")
            if not os.path.isfile(path):
                raise ValueError(f"stanza's {kind} model {path}: no such file")
        files_alone = {"pos", "constituency"} <= files.keys() and not _has_language(model_dir, lang)
        if not files_alone:
            check_language(lang)
        package = stanza_package(package)
        options = dict(
            tokenize_pretokenized=True,  # one input line is one sentence, never re-split
            pos_batch_size=batch_size, constituency_batch_size=batch_size,
            use_gpu=torch.cuda.is_available() if use_gpu is None else use_gpu,
            **{f"{kind}_model_path": files[kind] for kind in ("pos", "constituency") if kind in files},
            **({"pos_pretrain_path": files["pretrain"], "constituency_pretrain_path": files["pretrain"]}
               if "pretrain" in files else {}),
        )
        with _models_that_load(files):
            if files_alone:
                self.pipeline = _pipeline_from_files(lang, model_dir, options)
            else:
                try:
                    self.pipeline = _load_pipeline(lang, model_dir, package, options)
                except FileNotFoundError:
                    download_models(lang, model_dir, package)
                    self.pipeline = _load_pipeline(lang, model_dir, package, options)
        if "constituency" not in self.pipeline.processors:
            raise ValueError(f"stanza has no constituency parser for language {lang!r}")
        # What a resumed tree-fairseq-parse must find unchanged to reuse its chunks.
        paths = [self.pipeline.config.get(f"{kind}_{name}_path") for kind in ("pos", "constituency")
                 for name in ("model", "pretrain")]
        self.version = f"stanza {stanza.__version__}: " + ", ".join(
            f"{path} ({os.path.getsize(path)} bytes)" for path in paths if path)

    def parse(self, sentences: list[list[str]], first_line: int, source: str) -> list[Tree]:
        parsed = self.parsed_sentences([[unescape(token) for token in tokens] for tokens in sentences])
        return document_trees(parsed, sentences, first_line, source, self.failures)

    def parsed_sentences(self, words: list[list[str]]) -> list:
        """stanza's parsed ``Sentence`` for each sentence of ``words``, or, where its constituency
        parser gave up on the sentence, why (a str).

        stanza's transition parser drops a sentence on which it gets stuck (no legal transition,
        or too many transitions: ``bulk_apply`` marks its state broken), and the pipeline call then
        fails as a whole (``AssertionError: Number of list elements must match with original
        indices.``). Its sentences are then parsed again in halves, down to single sentences: a
        sentence that fails alone is the one the parser gives up on, and the others get their
        trees (a few calls per such sentence, not one per sentence of the call)."""
        try:
            document = self.pipeline(words)
        except AssertionError as error:
            if len(words) == 1:
                return ["stanza's constituency parser gave up on this sentence (its transition parser found no "
                        "legal transition or ran too long, dropped the sentence, and stanza stopped with "
                        f"AssertionError: {error})"]
            half = len(words) // 2
            return self.parsed_sentences(words[:half]) + self.parsed_sentences(words[half:])
        if len(document.sentences) != len(words):
            raise TreeError(f"stanza returned {len(document.sentences)} sentences for {len(words)} lines")
        return document.sentences


def stanza_package(text: str | None) -> str | dict[str, str] | None:
    """stanza's ``package`` from ``--stanza-package``: ``NAME``, a package of the whole pipeline
    (``default``, ``default_accurate``: stanza's ``package="NAME"``), or ``PROCESSOR=NAME,...``,
    the package of some of the processors (``constituency=wsj``: stanza's ``package={"constituency":
    "wsj"}``, the others the language's default)."""
    if not text or "=" not in text:
        return text or None
    package = {}
    for item in text.split(","):
        processor, _, name = item.partition("=")
        if processor.strip() not in PROCESSORS.split(",") or not name.strip():
            raise ValueError(f"stanza package {text!r}: {item!r} is not PROCESSOR=NAME with a processor of "
                             f"{PROCESSORS} (e.g. constituency=wsj), nor is the whole a package name")
        package[processor.strip()] = name.strip()
    return package


def _has_language(model_dir: str, lang: str) -> bool:
    try:
        return get_language_resources(load_resources_json(model_dir), lang) is not None
    except FileNotFoundError:
        return False


def _load_pipeline(lang: str, model_dir: str, package, options: dict) -> stanza.Pipeline:
    """The pipeline from the models in ``model_dir``, never downloading;
    FileNotFoundError when some are missing (or the folder's resources.json)."""
    _check_package(load_resources_json(model_dir), lang, package, model_dir)
    return stanza.Pipeline(lang, model_dir=model_dir, processors=PROCESSORS, download_method=None,
                           logging_level="WARN", **({"package": package} if package else {}), **options)


def _check_package(resources: dict, lang: str, package, model_dir: str) -> None:
    """ValueError for a package the folder's resources do not list, which stanza would skip with a
    warning (and then fail to find a tagger or parser)."""
    language = get_language_resources(resources, lang)
    if not package or language is None:
        return
    bundles = sorted(language.get("packages", {}))
    if isinstance(package, str):
        if package not in bundles:
            parsers = sorted(language.get("constituency", {}))
            hint = f"; for its constituency parser {package} give constituency={package}" if package in parsers else ""
            raise ValueError(f"stanza has no package {package!r} of the whole {lang} pipeline in {model_dir} (its "
                             f"packages: {', '.join(bundles)}; its constituency parsers: {', '.join(parsers)}){hint}")
        return
    for processor, name in package.items():
        known = sorted(language.get(processor, {}))
        if name not in known and name not in bundles:
            raise ValueError(f"stanza has no {processor} package {name!r} for {lang} in {model_dir} (its {processor} "
                             f"packages: {', '.join(known)}; of the whole pipeline: {', '.join(bundles)})")


@contextlib.contextmanager
def _models_that_load(files: dict[str, str]):
    """What stanza raises on model files given one by one that it cannot load, as one ValueError
    naming them: files that are no stanza models of their kind end in stanza's own IndexError or
    unpickling error, a tagger and a parser without their word vectors in an AttributeError."""
    try:
        yield
    except (ValueError, FileNotFoundError):
        raise
    except Exception as error:  # noqa: BLE001  (whatever stanza's loaders raise on a wrong file)
        if not files:
            raise
        given = ", ".join(f"{kind} {path}" for kind, path in files.items())
        said = f"{type(error).__name__}: {error}"
        if "pretrain" not in files:
            raise ValueError(f"stanza could not load the model files given ({given}) without word vectors: give the "
                             "pretrain file the models were trained with (--stanza-pretrain; at raw-text translation "
                             f"--inference-stanza-pretrain) (stanza said: {said})") from None
        raise ValueError(f"stanza could not load the model files given ({given}): is each one a stanza model of its "
                         "kind (a tagger, a constituency parser, their word vectors)? (stanza said: "
                         f"{said})") from None


def _pipeline_from_files(lang: str, model_dir: str, options: dict) -> stanza.Pipeline:
    """The pipeline of the model files in ``options`` alone. stanza reads a resources.json even
    then; an empty one, with ``allow_unknown_language``, makes it load just the files given."""
    with tempfile.TemporaryDirectory() as empty:
        resources = os.path.join(empty, "resources.json")
        with open(resources, "w", encoding="utf-8") as f:
            f.write("{}")
        return stanza.Pipeline(lang, model_dir=model_dir, processors=PROCESSORS, download_method=None,
                               logging_level="WARN", allow_unknown_language=True, resources_filepath=resources,
                               **options)


def document_trees(parsed: list, sentences: list[list[str]], first_line: int, source: str,
                   failures=None) -> list[Tree]:
    """The trees of stanza's parsed sentences ``parsed`` (stanza's ``Sentence``, or why the parser
    gave up on one: a str) over the corpus tokens ``sentences``, lines ``first_line``, ... of the
    file ``source``.

    A sentence the parser gave up on, or whose tree has no normal form (:func:`normalize` refuses
    it), is a failure, handed to ``failures`` (a :class:`~tree_fairseq.parsing.Failures`; None: an
    error). A tree over other text than the line's stays an error."""
    trees = []
    for i, (tokens, sentence) in enumerate(zip(sentences, parsed, strict=True)):
        try:
            if isinstance(sentence, str):
                raise TreeError(sentence)
            tree = normalize([raw_tree(sentence.constituency)])
        except TreeError as error:
            if failures is None:
                raise located(error, source, first_line + i) from None
            trees.append(failures.fallback(tokens, located(error, source, first_line + i), first_line + i))
            continue
        try:
            trees.append(align(tree, tokens))
        except TreeError as error:
            raise located(error, source, first_line + i) from None
    return trees


def raw_tree(tree) -> RawTree:
    """A ``stanza.models.constituency.parse_tree.Tree`` as a :class:`RawTree`
    (in both, a word is a node without children); iterative, for deep trees.

    A RawTree holds its labels as written in brackets, so each of stanza's labels is escaped
    (:func:`~tree_fairseq.trees.bracketed.escape_label`; German ``$(`` -> ``$%28``) after its
    function tags are stripped, as they would be from stanza's bracketed output."""
    def written(node) -> str:
        return escape_label(strip_function_tags(node.label)) if node.children else node.label

    root = RawTree(written(tree))
    stack = [(tree, root)]
    while stack:
        source, copy = stack.pop()
        copy.children = [RawTree(written(child)) for child in source.children]
        stack.extend(zip(source.children, copy.children))
    return root


def check_language(lang: str) -> None:
    """ValueError unless stanza has a constituency parser for ``lang`` (a code such as ``de`` or a
    name stanza knows, ``German``), said before any model is looked for or downloaded."""
    from stanza.models.common.constant import lang_to_langcode
    from stanza.resources.default_packages import default_constituency, optional_constituency

    known = sorted(set(default_constituency) | set(optional_constituency))
    try:
        code = lang_to_langcode(lang)
    except ValueError:  # stanza's UnknownLanguageError
        code = None
    if code is None or not any(name == code or name.startswith(code + "-") for name in known):
        raise ValueError(f"stanza {stanza.__version__} has no constituency parser for language {lang!r}; it has "
                         f"one for {', '.join(known)}. For another language use --parser spacy (its dependency "
                         "parses), or parse with another tool and read its output with --parser bracketed or "
                         "--parser conllu")


def download_models(lang: str, model_dir: str, package=None) -> None:
    """Fetch the models with ``stanza.download``; when that fails, raise
    ValueError with the command that fetches them."""
    try:
        requests.head(DEFAULT_RESOURCES_URL, timeout=NETWORK_TIMEOUT_S)
    except requests.RequestException as error:
        raise _missing_models(lang, model_dir, package, f"{DEFAULT_RESOURCES_URL} cannot be reached: "
                                                         f"{type(error).__name__}") from None
    print(f"downloading the stanza models for language {lang!r} to {model_dir}", file=sys.stderr)
    try:
        stanza.download(lang, model_dir=model_dir, processors=PROCESSORS, logging_level="WARN",
                        **({"package": package} if package else {}))
    except Exception as error:  # network, HTTP and hub errors come from three libraries
        raise _missing_models(lang, model_dir, package, error) from None


def _missing_models(lang: str, model_dir: str, package, reason) -> ValueError:
    package_argument = f", package={package!r}" if package else ""
    command = (f"python -c \"import stanza; stanza.download({lang!r}, processors={PROCESSORS!r}{package_argument}, "
               f"model_dir={model_dir!r})\"")
    return ValueError(f"the stanza models for language {lang!r} are not in {model_dir} and could not be "
                      f"downloaded ({reason}). Fetch them where there is network access with\n"
                      f"  {command}\nand copy that folder here (tree-fairseq-parse --model-dir, "
                      "fairseq-interactive --inference-parser-model-dir, or the STANZA_RESOURCES_DIR environment "
                      "variable).")
