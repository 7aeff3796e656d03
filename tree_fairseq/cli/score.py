"""Score translations or summaries: BLEU three ways and ROUGE.

Reads either fairseq-generate's output (``--generate-output``: the first ``H-`` hypothesis of
each sentence, run fairseq-generate with ``--remove-bpe``) or two files of tokenised text, one
sentence per line (``--hyp``, ``--ref``; an empty one is refused). Prints one line per metric and
writes them as JSON with ``--json``. An output (``--json``, ``--write-text``) that would replace
an input (one of the files given, or a file of ``--data-bin``), that two options name, or that
has no folder to go in is refused before anything is scored; each is written whole or not at all.

The reference is the test set itself, never fairseq's ``T-`` lines by default: ``T-`` is the
target after binarisation, so a subword piece missing from the dictionary prints as ``<unk>``
and the score is taken against text that is not the test set. With ``--data-bin``, the reference
is the split's target text that tree-fairseq-preprocess keeps beside the binarised split
(``SPLIT.ref.LANG``, subword marks removed as ``--remove-bpe`` removes them), and sacreBLEU's
reference the split's untokenised text where the data-bin holds it (``SPLIT.ref.raw.LANG``,
written by the recipes that have one), else the Moses detokenisation of the former.
``--ref``/``--ref-detok`` give the references of a data-bin made elsewhere. ``--ref-detok`` is
refused unless it has a line for every sentence of the split (the data-bin's split, else ids 0
to the output's last; with ``--hyp``, a line for every line of ``--ref``) and the scored lines
spell the words of the tokenised reference, all but a tenth of them (as
scripts/publish_results.py checks it): the raw text of another test set is not scored. Without
any of these the ``T-`` lines are used only when none holds ``<unk>``; otherwise the scoring stops,
naming how many do, unless ``--allow-unk-reference``. The report names the reference it used.

A score over part of a split is not the split's score. fairseq-generate skips sentences without
failing (``--skip-invalid-size-inputs-valid-test`` with ``--max-source-positions`` or ``--max-tokens``,
fairseq's default ``--required-batch-size-multiple 8`` with the stock translation task): with
``--data-bin`` (and ``--subset``) the sentence ids of the output are compared with the split, and
without it the ids must at least run 0, 1, ... without a gap. With ``--data-bin``, the output must
also be of that split: an id the split does not have, or an ``S-`` source line other than the
split's sentence of that id, stops the scoring; without it, so does an output lacking
fairseq-generate's closing ``Generate ... with beam=`` line (it may be cut short after any
sentence; ``--allow-subset`` scores it, marked as perhaps part of the split). Missing sentences
stop the scoring, naming how many and which, and why as far as the file tells (fairseq-generate skipped them, having
written its closing ``Generate ... with beam=`` line; or the file is cut short, without that line
or inside a line), unless ``--allow-subset``, which scores them and marks every line (and
the JSON) with the share scored. A file that ends inside a sentence's line is refused in any case. The last line of the report (``sentences`` in the JSON) always
says how many sentences were scored, of how many in the split.

Metrics (``--metrics``):

- ``sacrebleu``: sacreBLEU (default 13a tokenisation, case-sensitive) on detokenised text, with
  its signature. Hypothesis and reference are detokenised with sacremoses' Moses detokenizer
  (``--lang``); ``--ref-detok FILE`` gives the raw reference instead (the official way).
- ``tokbleu``: tokenised BLEU as the papers report it: BLEU on the Moses-tokenised text as it is,
  i.e. sacreBLEU with ``tokenize="none"`` (what multi-bleu.perl computes: no tokenisation of
  its own, case-sensitive, corpus-level, brevity penalty on the corpus lengths).
- ``compound``: compound-split BLEU for WMT en-de (fairseq's ``compound_split_bleu.sh``): each
  ``a-b`` of tokenised hypothesis and reference becomes ``a ##AT##-##AT## b``, then tokenised BLEU.
- ``rouge``: ROUGE-1/2/L F1 (rouge-score, Porter stemmer unless ``--no-stemmer``), the mean over
  sentences (what ``python -m rouge_score.rouge --noaggregate`` gives per line), with the 95%
  bootstrap interval of rouge-score's ``BootstrapAggregator`` (its ``mid`` is the median of the
  bootstrap means, close to but not exactly the mean).
"""

import argparse
import html
import os
import re
import sys
import unicodedata
from dataclasses import dataclass

import numpy as np

from tree_fairseq.cli import ArgumentParser, argtypes
from tree_fairseq.cli.files import check_output, read_lines, same_file, write_json, write_lines
from tree_fairseq.trees.subwords import SUBWORD_MARKS, dictionary_subword_format, remove_subwords, spelling

METRICS = ("sacrebleu", "tokbleu", "compound", "rouge")
_COMPOUND = re.compile(r"(\S)-(\S)")


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="tree-fairseq-score",
        description="BLEU (sacreBLEU on detokenised text, tokenised BLEU, compound-split BLEU) and "
        "ROUGE-1/2/L of fairseq-generate output or of a hypothesis file against a reference file.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--generate-output", metavar="FILE",
                        help="fairseq-generate's output (run with --remove-bpe): H- and T- lines")
    source.add_argument("--hyp", metavar="FILE", help="tokenised hypotheses, one per line (with --ref)")
    parser.add_argument("--ref", metavar="FILE",
                        help="tokenised references without subword marks, one per line (with --hyp; with "
                        "--generate-output one per sentence of the split, instead of the data-bin's own: its lines "
                        "count the split)")
    parser.add_argument("--ref-detok", metavar="FILE",
                        help="raw (untokenised) references for sacreBLEU instead of detokenising the tokenised ones")
    parser.add_argument("--allow-unk-reference", action="store_true",
                        help="score against fairseq-generate's T- lines even when some hold <unk> (not the test set)")
    parser.add_argument("--lang", help="target language for the Moses detokenizer (default: the target language of "
                        "--data-bin, else en)")
    parser.add_argument("--metrics", nargs="+", choices=METRICS, default=["sacrebleu", "tokbleu"],
                        help="what to compute (default: sacrebleu tokbleu)")
    parser.add_argument("--no-stemmer", action="store_true", help="ROUGE without the Porter stemmer")
    parser.add_argument("--seed", type=argtypes.seed, default=1, help="seed of ROUGE's bootstrap interval (default: 1)")
    parser.add_argument("--write-text", metavar="PREFIX",
                        help="also write PREFIX.hyp, PREFIX.ref (tokenised) and PREFIX.hyp.detok, "
                        "PREFIX.ref.detok, e.g. to check with sacrebleu's own command line")
    parser.add_argument("--json", metavar="FILE", help="write the scores as JSON")
    parser.add_argument("--data-bin", metavar="DIR",
                        help="the data-bin that was translated: every sentence of --subset must have a hypothesis")
    parser.add_argument("--subset", default="test", help="the split of --data-bin (default: test)")
    parser.add_argument("--allow-subset", action="store_true",
                        help="score even when fairseq-generate skipped sentences, marking the score as a subset's")
    return parser


def check_outputs(args) -> None:
    """Refuse, before anything is scored, an output (``--json``, ``--write-text``'s four files) that
    is an empty name, a folder or other than a plain file, in a folder that does not exist, one of
    the inputs (``--generate-output``, ``--hyp``, ``--ref``, ``--ref-detok``, or a file that
    ``--data-bin`` holds: writing it would replace it) or another output."""
    outputs = [(f"--write-text {args.write_text}", f"{args.write_text}.{suffix}")
               for suffix in ("hyp", "ref", "hyp.detok", "ref.detok") if args.write_text]
    outputs += [("--json", args.json)] if args.json is not None else []
    if args.write_text == "":
        raise ValueError("--write-text '': give the prefix of the files to write")
    inputs = [(option, path) for option, path in (("--generate-output", args.generate_output), ("--hyp", args.hyp),
                                                  ("--ref", args.ref), ("--ref-detok", args.ref_detok)) if path]
    data_bin = args.data_bin.split(":")[0] if args.data_bin else None
    for n, (option, output) in enumerate(outputs):
        if not output:
            raise ValueError(f"{option} '': give the file to write")
        check_output(option, output, [(f"{given} {path}", path) for given, path in inputs])
        if data_bin and os.path.exists(output) and os.path.isdir(data_bin) and \
                os.path.samefile(os.path.dirname(os.path.realpath(output)), data_bin):
            raise ValueError(f"{option} {output} is a file of --data-bin {args.data_bin}: writing it would replace "
                             "it; name another file")
        for earlier, path in outputs[:n]:
            if same_file(output, path):
                raise ValueError(f"{option} {output} is written by {earlier} too ({path}): name two files")


def read_generate_ids(path: str) -> list[int]:
    """The sentence ids that have an ``H-`` line in fairseq-generate's output, sorted."""
    ids = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            kind, _, rest = line.partition("-")
            sentence = rest.split("\t", 1)[0]
            if kind == "H" and "\t" in rest and sentence.isdigit():
                ids.add(int(sentence))
    return sorted(ids)


def split_sources(data_bin: str, subset: str) -> list[str]:
    """The source sentences of ``subset`` of a fairseq data-bin, as its dictionary spells them
    (subword pieces and all)."""
    from fairseq.data import Dictionary, data_utils

    data_bin = data_bin.split(":")[0]  # fairseq's sharded data-bins: the first holds valid and test
    src, tgt = data_utils.infer_language_pair(data_bin)
    if src is None:
        raise ValueError(f"{data_bin}: no dict.*.txt of a language pair: not a fairseq data-bin")
    dictionary = Dictionary.load(os.path.join(data_bin, f"dict.{src}.txt"))
    for prefix in (f"{subset}.{src}-{tgt}.{src}", f"{subset}.{tgt}-{src}.{src}"):
        dataset = data_utils.load_indexed_dataset(os.path.join(data_bin, prefix), None)
        if dataset is not None:
            return [dictionary.string(dataset[i]) for i in range(len(dataset))]
    raise ValueError(f"{data_bin}: no split {subset!r} (no {subset}.{src}-{tgt}.{src}.idx)")


def language_pair(data_bin: str) -> tuple[str, str]:
    """The source and target language of a fairseq data-bin, from its split files' names
    (``SPLIT.SRC-TGT.LANG.idx``)."""
    from fairseq.data import data_utils

    src, tgt = data_utils.infer_language_pair(data_bin.split(":")[0])
    if src is None:
        raise ValueError(f"{data_bin}: no dict.*.txt of a language pair: not a fairseq data-bin")
    return src, tgt


def target_language(data_bin: str) -> str:
    """The target language of a fairseq data-bin."""
    return language_pair(data_bin)[1]


def reference_paths(data_bin: str, subset: str, lang: str) -> tuple[str, str]:
    """Where a data-bin keeps a split's target text: as it was binarised (tokenised, subword
    pieces and all; written by tree-fairseq-preprocess) and untokenised (written by the recipes
    that have the raw test set)."""
    return (os.path.join(data_bin, f"{subset}.ref.{lang}"), os.path.join(data_bin, f"{subset}.ref.raw.{lang}"))


@dataclass
class Reference:
    """A split's references: ``tokenised`` (what tokenised BLEU is taken against), ``raw`` (what
    sacreBLEU is taken against; None: the Moses detokenisation of ``tokenised``) and where they
    come from, in words."""

    tokenised: list[str]
    raw: list[str] | None
    source: str
    checked: bool = False  # the T- lines were found to be this text (a data-bin's stored reference)


def stored_reference(data_bin: str, subset: str) -> Reference | None:
    """The split's references that the data-bin keeps (:func:`reference_paths`), or None when it
    keeps none (a data-bin made by fairseq-preprocess, or by tree-fairseq-preprocess before it kept
    them). A raw text kept beside the tokenised one must be its text (:func:`check_raw_reference`):
    a recipe that copied another test set's raw text there would have sacreBLEU scored against it."""
    data_bin = data_bin.split(":")[0]
    tgt = target_language(data_bin)
    tokenised_path, raw_path = reference_paths(data_bin, subset, tgt)
    if not os.path.exists(tokenised_path):
        return None
    with open(os.path.join(data_bin, f"dict.{tgt}.txt"), encoding="utf-8") as f:
        subword_format = dictionary_subword_format([line.split(" ", 1)[0] for line in f])
    tokenised = [remove_subwords(line, subword_format) for line in read_lines(tokenised_path)]
    source = f"{tokenised_path} ({subword_format} pieces removed)"
    raw = None
    if os.path.exists(raw_path):
        raw = read_lines(raw_path)
        check_raw_reference(raw_path, raw, tokenised, tokenised_path)
        source += f", sacreBLEU against {raw_path}"
    return Reference(tokenised, raw, source)


def check_t_lines(path: str, ids: list[int], t_lines: list[str], reference: Reference) -> None:
    """fairseq-generate's ``T-`` lines spell the reference of the same sentence (``<unk>`` aside):
    the data-bin's stored text is the split that was translated."""
    for i, t_line in zip(ids, t_lines):
        if "<unk>" in t_line:
            continue
        if i >= len(reference.tokenised) or spelling(t_line) != spelling(reference.tokenised[i]):
            stored = reference.tokenised[i] if i < len(reference.tokenised) else "(no such line)"
            raise ValueError(f"{path}: the T- line of sentence {i} is {t_line!r}, but the reference of {reference.source} "
                             f"is {stored!r}: the stored text is not the split that was translated")


def unk_reference(path: str, t_lines: list[str]) -> Reference:
    """fairseq-generate's ``T-`` lines as the reference, refused when any holds ``<unk>``."""
    holding = sum("<unk>" in line for line in t_lines)
    if holding:
        raise ValueError(
            f"{path}: {holding} of the {len(t_lines)} references (T- lines) hold <unk>: fairseq-generate prints "
            "the target as binarised, so a piece missing from the dictionary is not the test set's text. Score "
            "against the test set: --data-bin of a data-bin made by tree-fairseq-preprocess (it keeps "
            "SPLIT.ref.LANG), or --ref FILE (tokenised) / --ref-detok FILE (raw); --allow-unk-reference scores "
            "against the T- lines anyway")
    return Reference(t_lines, None, f"the T- lines of {path}")


def reference_for(path: str, ids: list[int], t_lines: list[str], data_bin: str | None, subset: str,
                  ref: Reference | None = None, allow_unk: bool = False) -> Reference:
    """The references of the sentences ``ids`` (sorted) of fairseq-generate's output ``path``, whose
    ``T-`` lines are ``t_lines``: ``ref`` (the lines of ``--ref``, one per sentence id, read once by
    the caller: a pipe cannot be read twice) if given, else the data-bin's stored reference, else
    the ``T-`` lines (refused when one holds ``<unk>``, unless ``allow_unk``)."""
    if ref:
        if ids and ids[-1] >= len(ref.tokenised):
            raise ValueError(f"--ref {ref.source} has {len(ref.tokenised)} lines, but {path} translates sentence "
                             f"{ids[-1]}")
        found = ref
    else:
        found = stored_reference(data_bin, subset) if data_bin else None
        if found is None:
            if allow_unk:
                return Reference(t_lines, None, f"the T- lines of {path} (--allow-unk-reference)")
            return unk_reference(path, t_lines)
    check_t_lines(path, ids, t_lines, found)
    return Reference([found.tokenised[i] for i in ids], [found.raw[i] for i in ids] if found.raw else None,
                     found.source, checked=not ref)


def read_generate_sources(path: str) -> dict[int, str]:
    """The ``S-`` line of each sentence id of fairseq-generate's output."""
    sources = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            kind, _, rest = line.rstrip("\n").partition("-")
            sentence, _, text = rest.partition("\t")
            if kind == "S" and sentence.isdigit():
                sources[int(sentence)] = text
    return sources


def check_split(path: str, ids: list[int], sources: list[str], what: str) -> None:
    """Refuse output of another split: an id the split does not have, or an ``S-`` line that is
    not the split's source sentence of that id."""
    outside = [i for i in ids if i >= len(sources)]
    if outside:
        raise ValueError(f"{path} has hypotheses for ids {', '.join(map(str, outside[:10]))}"
                         f"{', ...' if len(outside) > 10 else ''}, but {what} has {len(sources)} sentences "
                         f"(ids 0 to {len(sources) - 1}): it is the output of another split or data-bin")
    for i, text in sorted(read_generate_sources(path).items()):
        if i < len(sources) and spelling(text) != spelling(sources[i]):
            raise ValueError(f"{path}: the source of sentence {i} is {text!r}, but sentence {i} of {what} is "
                             f"{sources[i]!r}: the output of another split or data-bin")


def _words(text: str) -> str:
    """A line's letters and digits, case aside, whatever its tokenisation and escapes
    (``&apos;``), punctuation and spaces."""
    text = unicodedata.normalize("NFKC", html.unescape(text)).casefold()
    return "".join(char for char in text if char.isalnum())


def check_raw_reference(given: str, raw: list[str], tokenised: list[str], source: str) -> None:
    """Refuse a raw reference (``given``: the option and file, for the message) that is not the
    text of the tokenised one (from ``source``): as many lines, and each spelling the same words
    (:func:`_words`; a line holding ``<unk>`` is left out), all but a tenth of them: tokenisation,
    escapes and lowercasing change no letter or digit, and a test set's text of another matches
    hardly a line."""
    if len(raw) != len(tokenised):
        raise ValueError(f"{given} has {len(raw)} lines, but {source} {len(tokenised)}: the reference of another "
                         "test set")
    compared = [i for i, line in enumerate(tokenised) if "<unk>" not in line]
    differ = [i for i in compared if _words(raw[i]) != _words(tokenised[i])]
    if len(differ) * 10 > len(compared):
        i = differ[0]
        raise ValueError(f"{given} is not the text of {source}: {len(differ)} of its {len(compared)} lines spell "
                         f"other words (line {i + 1}: {raw[i]!r}; there: {tokenised[i]!r}): the "
                         "reference of another test set? Give the raw text of the split that was translated")


def check_identified(path: str, reference: Reference, what: str) -> None:
    """Output without ``S-`` lines (fairseq-generate --quiet, or edited) is taken for the split's
    only when its ``T-`` lines were found to be the split's stored text: a size alone does not tell."""
    if not reference.checked and not read_generate_sources(path):
        raise ValueError(f"{path} has no S- lines and {what} keeps no reference text to check its T- lines against: "
                         "nothing shows it is the output of that split. Translate again without --quiet, or "
                         "binarise the split with tree-fairseq-preprocess (it keeps SPLIT.ref.LANG)")


def coverage(ids: list[int], size: int | None) -> dict:
    """How many of the split's sentences have a hypothesis: ``scored``, ``split`` (its size, or
    the largest id + 1 when unknown) and the ``missing`` ids."""
    expected = size if size is not None else (max(ids) + 1 if ids else 0)
    present = set(ids)
    return {"scored": len(present & set(range(expected))), "split": expected,
            "missing": [i for i in range(expected) if i not in present]}


def check_coverage(cover: dict, allow_subset: bool, what: str = "the split", path: str | None = None,
                   subset_option: str | None = "--allow-subset") -> None:
    """Raise ValueError when sentences are missing, unless ``allow_subset``: naming them, why (as far
    as fairseq-generate's output ``path`` tells, :func:`why_missing`), and the option that scores
    the subset (``subset_option``; None: the caller has none)."""
    missing = cover["missing"]
    if not missing or allow_subset:
        return
    shown = ", ".join(map(str, missing[:20])) + (", ..." if len(missing) > 20 else "")
    why = why_missing(path, cover["scored"]) if path else (
        "fairseq-generate skipped them (--skip-invalid-size-inputs-valid-test with --max-source-positions or "
        "--max-tokens, or --required-batch-size-multiple with the translation task), or its output is cut short")
    advice = (f"Translate every sentence, or pass {subset_option} to score the subset, marked as such" if subset_option
              else "Translate every sentence")
    raise ValueError(
        f"hypotheses for {cover['scored']} of the {cover['split']} sentences of {what}: {len(missing)} missing "
        f"(ids {shown}): {why}; a score over a subset is not the split's score. {advice}")


_CLOSING = re.compile(r"Generate \S+ with beam=\d+: ")
_TRANSLATED = re.compile(r"\| Translated ([\d,]+) sentences")
_SKIPPED = re.compile(r"([\d,]+) samples have invalid sizes and will be skipped[^\n]*")


def cut_line(path: str) -> tuple[int, str] | None:
    """The number and text of the last line of ``path`` when it ends without a newline (the file
    was cut short while it was written or copied), else None."""
    number, last = 0, ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, last in enumerate(f, 1):
            pass
    return (number, last) if last and not last.endswith("\n") else None


def closed(path: str) -> bool:
    """Whether fairseq-generate's output ``path`` holds its closing ``Generate SUBSET with beam=N``
    line (written once every sentence is)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(_CLOSING.match(line) for line in f)


def check_closed(path: str, hypotheses: int, allow_subset: bool) -> None:
    """Without a data-bin or --ref to count the split, refuse (unless ``allow_subset``) an output ``path``
    that lacks fairseq-generate's closing line: its ids run 0, 1, ... without a gap, but nothing
    shows the file holds the whole split (it may be cut short after any sentence)."""
    if not allow_subset:
        raise ValueError(
            f"{path} lacks fairseq-generate's closing line (\"Generate SUBSET with beam=N: ...\", written last), "
            f"so it may be cut short: its {hypotheses} hypotheses (ids 0 to {hypotheses - 1}) need not be the whole "
            "split. Give --data-bin or --ref (the split's size is checked), or pass --allow-subset to score them, "
            "marked as such")


def why_missing(path: str, hypotheses: int) -> str:
    """Why fairseq-generate's output ``path``, with ``hypotheses`` sentence ids, lacks sentences, as
    far as the file tells. fairseq-generate ends its output of a split with targets with a
    ``Generate SUBSET with beam=N: BLEU4 = ...`` line: a file without it, or that ends inside a line,
    is cut short (fairseq-generate stopped, or the file copied, before the end). Otherwise
    fairseq-generate finished without them: it skipped them, as its log says where it is in the file
    (``N samples have invalid sizes and will be skipped``; ``Translated N sentences``, N more than
    the file holds: lines were removed from it)."""
    translated, skipped, closed = None, None, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            closed = closed or bool(_CLOSING.match(line))
            if match := _TRANSLATED.search(line):
                translated = int(match.group(1).replace(",", ""))
            if match := _SKIPPED.search(line):
                skipped = match
    cut = cut_line(path)
    if cut:
        kind = cut[1].split("\t", 1)[0] if re.match(r"[A-Z]-\d+\t", cut[1]) else f"line {cut[0]}"
        return (f"{path} is cut short: its last line ({kind}) ends without a newline (fairseq-generate was "
                "stopped, or the file copied, before it finished)")
    if not closed:
        return (f"{path} is cut short: it lacks fairseq-generate's closing line (\"Generate SUBSET with beam=N: "
                "...\", written last), so fairseq-generate was stopped, or the file copied, before it finished")
    if translated is not None and translated > hypotheses:
        return (f"its log says fairseq-generate translated {translated:,} sentences, but {path} holds "
                f"{hypotheses:,}: lines of it were lost or removed")
    if skipped:
        return (f"fairseq-generate skipped {int(skipped.group(1).replace(',', ''))} sentences as too long (its log: "
                f"{skipped.group(0).strip()}): --skip-invalid-size-inputs-valid-test with --max-source-positions or "
                "--max-tokens")
    return ("fairseq-generate finished without them: it skipped them (--skip-invalid-size-inputs-valid-test with "
            "--max-source-positions or --max-tokens, or --required-batch-size-multiple with the translation task)")


def subset_note(cover: dict) -> str:
    if not cover["missing"]:
        return ""
    return (f"SUBSET: {cover['scored']} of {cover['split']} sentences scored "
            f"({len(cover['missing'])} missing), not the split's score")


def read_generate_output(path: str) -> tuple[list[str], list[str]]:
    """Hypotheses (the first ``H-`` of each id) and the ``T-`` lines, ordered by sentence id."""
    hyps: dict[int, str] = {}
    refs: dict[int, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            kind, _, rest = line.rstrip("\n").partition("-")
            if kind not in ("H", "T") or "\t" not in rest:
                continue
            fields = rest.split("\t")
            if not fields[0].isdigit():
                continue
            sentence = int(fields[0])
            if kind == "H":
                hyps.setdefault(sentence, fields[2] if len(fields) > 2 else "")
            elif sentence in refs:
                raise ValueError(f"{path}: sentence {sentence} has two T- lines: the outputs of two runs "
                                 "concatenated? Score each run's output on its own")
            else:
                refs[sentence] = fields[1]
    if not hyps:
        raise ValueError(f"{path}: no H- lines: not fairseq-generate output?")
    cut = cut_line(path)
    if cut and re.match(r"[HTS]-\d+\t", cut[1]):  # a sentence's text cut short: refused, not scored
        raise ValueError(f"{path} is cut short: its last line ({cut[1].split(chr(9), 1)[0]}) ends without a newline "
                         "(fairseq-generate was stopped, or the file copied, before it finished): translate again")
    if set(hyps) != set(refs):
        raise ValueError(f"{path}: {len(hyps)} hypotheses but {len(refs)} references (T- lines); "
                         "fairseq-generate prints T- only for data with targets")
    order = sorted(hyps)
    return [hyps[i] for i in order], [refs[i] for i in order]


def detokenize(lines: list[str], lang: str) -> list[str]:
    from sacremoses import MosesDetokenizer

    detokenizer = MosesDetokenizer(lang=lang)
    return [detokenizer.detokenize(line.split()) for line in lines]


def split_compounds(line: str) -> str:
    """fairseq's compound_split_bleu.sh: ``perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'``."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def bleu(hyps: list[str], refs: list[str], tokenize: str) -> dict:
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize=tokenize, force=tokenize == "none")
    score = metric.corpus_score(hyps, [refs])
    return {"score": score.score, "signature": str(metric.get_signature()), "details": str(score)}


def rouge(hyps: list[str], refs: list[str], use_stemmer: bool, seed: int) -> dict:
    from rouge_score import rouge_scorer, scoring

    types = ["rouge1", "rouge2", "rougeL"]
    scorer = rouge_scorer.RougeScorer(types, use_stemmer=use_stemmer)
    aggregator = scoring.BootstrapAggregator()
    per_sentence = []
    for hyp, ref in zip(hyps, refs):
        scores = scorer.score(ref, hyp)  # (target, prediction)
        aggregator.add_scores(scores)
        per_sentence.append(scores)
    np.random.seed(seed)
    intervals = aggregator.aggregate()
    result = {}
    for name in types:
        result[name] = {
            "f1": 100 * float(np.mean([s[name].fmeasure for s in per_sentence])),
            "f1_interval": [100 * intervals[name].low.fmeasure, 100 * intervals[name].high.fmeasure],
        }
    result["stemmer"] = use_stemmer
    return result


def score(hyps: list[str], refs: list[str], metrics: list[str], lang: str, ref_detok: list[str] | None = None,
          use_stemmer: bool = True, seed: int = 1) -> dict:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    for mark, what in SUBWORD_MARKS:
        if any(mark in line for line in hyps + refs):
            raise ValueError(f"the text still holds {what}: run fairseq-generate with --remove-bpe" + (
                " sentencepiece (scripts/generate.sh does for a sentencepiece data-bin)" if mark == "\u2581" else ""))
    results = {}
    if "sacrebleu" in metrics:
        ref_detok = ref_detok if ref_detok is not None else detokenize(refs, lang)
        if len(ref_detok) != len(hyps):
            raise ValueError(f"{len(hyps)} hypotheses but {len(ref_detok)} raw references")
        results["sacrebleu"] = bleu(detokenize(hyps, lang), ref_detok, "13a")
    if "tokbleu" in metrics:
        results["tokbleu"] = bleu(hyps, refs, "none")
    if "compound" in metrics:
        results["compound"] = bleu([split_compounds(h) for h in hyps], [split_compounds(r) for r in refs], "none")
    if "rouge" in metrics:
        results["rouge"] = rouge(hyps, refs, use_stemmer, seed)
    return results


def report(results: dict) -> str:
    lines = []
    if "sacrebleu" in results:
        r = results["sacrebleu"]
        lines.append(f"sacreBLEU (detokenised) = {r['score']:.2f}  {r['signature']}\n    {r['details']}")
    if "tokbleu" in results:
        r = results["tokbleu"]
        lines.append(f"tokenised BLEU (multi-bleu: tokenize=none on the tokenised text) = {r['score']:.2f}\n"
                     f"    {r['details']}")
    if "compound" in results:
        r = results["compound"]
        lines.append(f"compound-split BLEU (tokenised, ##AT##-##AT##) = {r['score']:.2f}\n    {r['details']}")
    if "rouge" in results:
        r = results["rouge"]
        parts = [f"ROUGE-{name[5:]} {r[name]['f1']:.2f} [{r[name]['f1_interval'][0]:.2f}, "
                 f"{r[name]['f1_interval'][1]:.2f}]" for name in ("rouge1", "rouge2", "rougeL")]
        lines.append("ROUGE F1 (rouge-score, mean over sentences [95% bootstrap], "
                     f"stemmer {'on' if r['stemmer'] else 'off'}): " + ", ".join(parts))
    if "subset" in results:  # every score line says it is a subset's
        mark = f"[SUBSET {results['subset']['scored']}/{results['subset']['split']}] "
        lines = [subset_note(results["subset"])] + [mark + line for line in lines]
    if "reference" in results:
        lines.append(f"reference: {results['reference']}")
    if "sentences" in results:
        count = results["sentences"]
        lines.append(f"sentences scored: {count['scored']} of {count['split']} ({count['source']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.hyp and not args.ref:
        parser.error("--hyp needs --ref")
    cover = None
    try:
        if args.lang is None:
            args.lang = target_language(args.data_bin) if args.data_bin else "en"
        check_outputs(args)
        if args.generate_output:
            hyps, t_lines = read_generate_output(args.generate_output)
            ids = read_generate_ids(args.generate_output)
            size = None
            if args.data_bin:
                sources = split_sources(args.data_bin, args.subset)
                check_split(args.generate_output, ids, sources, f"{args.data_bin} {args.subset}")
                size = len(sources)
            given = Reference(read_lines(args.ref), None, args.ref) if args.ref else None
            if given:
                # --ref holds one line per sentence of the split: with --data-bin as many as the
                # split, without one it counts the split (an output of fewer sentences is a subset)
                lines = len(given.tokenised)
                if size is not None and lines != size:
                    raise ValueError(f"--ref {args.ref} has {lines} lines, but the {args.subset} split of "
                                     f"{args.data_bin} has {size} sentences: the reference of another test set")
                size = lines
            reference = reference_for(args.generate_output, ids, t_lines, args.data_bin, args.subset, given,
                                      args.allow_unk_reference)
            if args.data_bin:
                check_identified(args.generate_output, reference, f"{args.data_bin} {args.subset}")
            cover = coverage(ids, size)
            check_coverage(cover, args.allow_subset, f"{args.data_bin} {args.subset}" if args.data_bin
                           else f"--ref {args.ref}" if args.ref
                           else f"{args.generate_output} (ids 0 to {cover['split'] - 1})", path=args.generate_output)
            source = (f"the {args.subset} split of {args.data_bin}" if args.data_bin
                      else f"--ref {args.ref}" if args.ref
                      else f"ids 0 to {cover['split'] - 1} of {args.generate_output}")
            sentences = {"scored": cover["scored"], "split": cover["split"], "source": source}
            if not args.data_bin and not args.ref and not closed(args.generate_output):
                check_closed(args.generate_output, cover["scored"], args.allow_subset)
                sentences["source"] += (", which lacks fairseq-generate's closing line: perhaps part of the split "
                                        "(--allow-subset)")
            if args.ref_detok:
                raw = read_lines(args.ref_detok)
                if len(raw) != cover["split"]:
                    raise ValueError(f"--ref-detok {args.ref_detok} has {len(raw)} lines, but {source} has "
                                     f"{cover['split']} sentences: the reference of another test set")
                raw = [raw[i] for i in ids]
                check_raw_reference(f"--ref-detok {args.ref_detok}", raw, reference.tokenised, reference.source)
                reference = Reference(reference.tokenised, raw,
                                      f"{reference.source}, sacreBLEU against {args.ref_detok}")
        else:
            hyps = read_lines(args.hyp)
            reference = Reference(read_lines(args.ref), read_lines(args.ref_detok) if args.ref_detok else None,
                                  args.ref + (f", sacreBLEU against {args.ref_detok}" if args.ref_detok else ""))
            for option, path, lines in (("--hyp", args.hyp, hyps), ("--ref", args.ref, reference.tokenised)):
                if not lines:
                    raise ValueError(f"{option} {path} is empty: no sentence to score")
            if args.ref_detok:
                check_raw_reference(f"--ref-detok {args.ref_detok}", reference.raw, reference.tokenised, args.ref)
            sentences = {"scored": len(hyps), "split": len(reference.tokenised), "source": f"the lines of {args.ref}"}
        results = score(hyps, reference.tokenised, args.metrics, args.lang, reference.raw, not args.no_stemmer,
                        args.seed)
        if cover and cover["missing"]:
            results["subset"] = cover
        results["reference"] = reference.source
        results["sentences"] = sentences
        if args.write_text:
            for suffix, lines in (("hyp", hyps), ("ref", reference.tokenised),
                                  ("hyp.detok", detokenize(hyps, args.lang)),
                                  ("ref.detok", reference.raw or detokenize(reference.tokenised, args.lang))):
                write_lines(f"{args.write_text}.{suffix}", lines)
        if args.json:
            write_json(args.json, results)
    except (OSError, ValueError) as error:
        sys.exit(f"tree-fairseq-score: error: {error}")
    print(report(results))


if __name__ == "__main__":
    main()
