"""The BPE pieces of raw-text source sentences, as the trees and parents made for them must read them.

At raw-text translation the task gets each sentence as dictionary ids. A piece the dictionary
lacks is ``<unk>`` there, and ``<unk>`` says nothing of where its word ends: subword-nmt's
``le@@ ur@@ s`` becomes ``le@@ <unk> s``, which spells two words (``le<unk>`` and ``s``) where the
text had one (``leurs``), so a parser and a trivial control would see other words than
tree-fairseq-preprocess saw in the data-bin, which reads the text. :class:`SourcePieces` gives the
pieces as the text spelled them wherever they are known: fairseq-interactive's lines, remembered
when they are encoded (:meth:`SourcePieces.remember`); elsewhere (the hub interface hands the
task ids only) the dictionary's strings, with one warning per sentence whose ``<unk>`` makes its
words a guess.
"""

import logging

from fairseq.data import Dictionary
from torch import Tensor

logger = logging.getLogger(__name__)


def sentence_key(tokens: Tensor, src_dict: Dictionary) -> tuple[int, ...]:
    """A sentence's ids without its final EOS: the key under which its trees and parents are kept."""
    tokens = tokens.tolist()
    return tuple(tokens[:-1] if tokens and tokens[-1] == src_dict.eos() else tokens)


class SourcePieces:
    """The pieces of each sentence given as dictionary ids: the text's own where remembered."""

    def __init__(self, src_dict: Dictionary):
        self.src_dict = src_dict
        self._remembered: dict[tuple[int, ...], list[str]] = {}
        self._warned: set[tuple[int, ...]] = set()

    def remember(self, sentences: list[tuple[Tensor, list[str]]]) -> None:
        """The pieces of the sentences just encoded (ids, the text's pieces without EOS); replaces
        those remembered before (one batch of input lines at a time)."""
        self._remembered = {}
        for tokens, pieces in sentences:
            key = sentence_key(tokens, self.src_dict)
            if len(pieces) != len(key):
                raise ValueError(f"{len(pieces)} pieces for {len(key)} source ids: the pieces are not the sentence's")
            self._remembered[key] = list(pieces)

    def of(self, tokens: Tensor) -> list[str]:
        """The pieces of one sentence (ids, EOS last or not)."""
        key = sentence_key(tokens, self.src_dict)
        if key in self._remembered:
            return self._remembered[key]
        pieces = [self.src_dict[i] for i in key]
        if self.src_dict.unk() in key and key not in self._warned:
            self._warned.add(key)
            logger.warning(f"a source sentence holds a piece missing from the dictionary ({self.src_dict.unk_word}: "
                           f"{' '.join(pieces)!r}); with its text unknown here, where its word ends is guessed, and "
                           "its tree and parents may differ from those tree-fairseq-preprocess made from the text")
        return pieces
