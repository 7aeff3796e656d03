"""tree-fairseq-preprocess: fairseq-preprocess plus the source trees.

For each of --trainpref/--validpref/--testpref it reads the BPE'd text
``{pref}.{src}``, ``{pref}.{tgt}`` and the word-level source trees
``{pref}.{tree-suffix}.{src}`` (tree-fairseq-parse on the text before BPE).
The text part of --destdir is written by fairseq-preprocess itself, so the
stock ``translation`` task trains on the same data-bin; the trees are added as
the streams described in :mod:`tree_fairseq.data.tree_streams`.

Every option and line is checked first: the dictionaries given must load, the
destination must not hold another data-bin's dictionaries, the train split must
not be empty, the three files of a split must have the same number of lines, and
the BPE pieces of each source line must spell that line's tree leaves. Any
mismatch stops the run with the file and line. Everything is written to a
staging folder beside --destdir and moved there only when complete, so a run
that fails leaves nothing behind and the same command can simply be run again.
One run at a time writes a --destdir (``DESTDIR.lock``): a second is refused.
A run killed outright (SIGKILL, a machine that went down) leaves its staging
folder (``.DESTNAME.partial-XXXXXXXX`` beside --destdir) and its lock: the next
run on that --destdir removes the one and takes over the other once no live
run holds the lock (by hand: ``rm -r`` the folder when no process named in
``DESTDIR.lock`` runs).

Each split's target text is kept as given, beside its binarised form
(``{split}.ref.{tgt}``): scores are taken against it (tree-fairseq-score
--data-bin), not against the binarised target, in which a piece missing from
the dictionary reads ``<unk>``.

A word split into several pieces gets a node over them labelled with the
word's part-of-speech tag, the preterminal of its tree (Nguyen et al., ICLR
2020, appendix 7.4), or ``@BPE`` when the tree has no preterminals (trivial
trees); ``--subword-label bpe`` labels them all ``@BPE``.

When every split also has the words' dependency heads, ``{pref}.{heads-suffix}.{src}``
(tree-fairseq-parse --heads; one line per sentence, the 1-based head of each word, 0 for a
root), each piece's parent word is added as the ``parents`` stream (the pieces of a word share
its parent; :mod:`tree_fairseq.data.tree_streams`), which ``--task dependency_translation``
reads. Heads for some splits only are refused.

What made the trees goes into the data-bin as ``parser.{src}.json``: the record tree-fairseq-parse
wrote beside each split's tree file (``{tree file}.parser.json``, also looked for beside the file a
symbolic link leads to), per split, and as ``parser`` the training split's, the one raw-text
translation takes by default (:mod:`tree_fairseq.parsing.record`). A tree file without a record,
or whose record names other trees (its digest differs: the trees were edited or replaced), is
``unknown``: nothing is guessed. Splits whose records name different parsers (back-end, model,
tree shape or heads) are refused, since valid and test are then not the trees the model trains
on; ``--mixed-parsers`` accepts them (each split keeps its record; ``parser`` is train's).
"""

import itertools
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from contextlib import nullcontext
from multiprocessing import Pool
from typing import NamedTuple

import numpy as np
from fairseq import options
from fairseq.data import Dictionary
from fairseq.tasks import TASK_REGISTRY, FairseqTask
from fairseq_cli import preprocess as fairseq_preprocess
from tqdm import tqdm

from tree_fairseq.cli import argtypes, refusing_repeats
from tree_fairseq.cli.files import write_json
from tree_fairseq.cli.locking import output_lock
from tree_fairseq.cli.score import reference_paths
from tree_fairseq.cli.termination import removed_on_sigterm
from tree_fairseq.data import TreeStreamWriter, node_dictionary_path, tree_stream_prefix
from tree_fairseq.data.tree_streams import ParentStreamWriter
from tree_fairseq.parsing.record import (
    RECORD_FORMAT, UNKNOWN, databin_record_path, describe, file_digest, heads_identity, parser_identity, read_record,
    record_path,
)
from tree_fairseq.trees import (
    SUBWORD_FORMATS, SUBWORD_LABELS, TreeError, align, expand_subwords, group_pieces, located, parse_tree,
)
from tree_fairseq.trees.parents import piece_parent_spans, read_heads
from tree_fairseq.trees.rows import parent_rows, piece_rows
from tree_fairseq.trees.subwords import check_labels
from tree_fairseq.trees.textio import other_space, utf8_lines

logger = logging.getLogger("tree_fairseq.preprocess")

_CHUNK_LINES = 500
_END_OF_SENTENCE = Dictionary().eos_word


def get_parser():
    parser = options.get_preprocessing_parser()
    parser.prog = "tree-fairseq-preprocess"
    parser.description = (
        "fairseq-preprocess for tree_translation: binarises the BPE'd text exactly as "
        "fairseq-preprocess does and adds the source trees ({pref}.{tree-suffix}.{src}) "
        "as node-label and span streams."
    )
    # fairseq's own --workers (type=int) took any number: a bound per processor, refused by argparse before
    # anything starts (see argtypes.WORKERS_PER_PROCESSOR)
    workers = next(action for action in parser._actions if "--workers" in action.option_strings)
    workers.type = argtypes.workers
    workers.help = (f"worker processes, at most {argtypes.WORKERS_PER_PROCESSOR} per processor; the trees take "
                    f"no more than the {_CHUNK_LINES}-line chunks of a split (default: 1)")
    group = parser.add_argument_group("source trees")
    group.add_argument("--tree-suffix", default="tree",
                       help="trees are read from {pref}.{tree-suffix}.{source-lang} (default: tree)")
    group.add_argument("--subword-format", choices=SUBWORD_FORMATS, default="subword_nmt",
                       help="how the source BPE marks word pieces: subword_nmt ('@@ ') "
                       "or sentencepiece ('\u2581')")
    group.add_argument("--subword-label", choices=SUBWORD_LABELS, default="pos",
                       help="label of the node over the pieces of a word split by BPE: pos, the word's "
                       "part-of-speech tag from its tree (@BPE for trees without tags); bpe, always @BPE "
                       "(default: pos)")
    group.add_argument("--heads-suffix", default="heads",
                       help="dependency heads, when every split has them, are read from "
                       "{pref}.{heads-suffix}.{source-lang} and written as each piece's parent (default: heads)")
    group.add_argument("--mixed-parsers", action="store_true",
                       help="accept splits whose tree files were made by different parsers, as their records "
                       "(TREEFILE.parser.json) say; by default refused. Each split's record is kept in "
                       "parser.{src}.json; raw-text translation takes train's")
    group.add_argument("--nodedict", metavar="FP", help="reuse a node-label dictionary")
    group.add_argument("--allow-retokenized-trees", action="store_true",
                       help="accept trees whose leaves spell the text in other tokens (e.g. 'tag.' for 'tag .') "
                       "and align them character by character, as tree-fairseq-parse --parser bracketed does; "
                       "by default the leaves must be the text's words, PTB escapes aside")
    return refusing_repeats(parser)  # fairseq's parser kept the last of an option given twice (--destdir)


def main(argv=None):
    args = get_parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stdout, force=True)
    try:
        run(args)
    except (TreeError, ValueError, OSError) as error:
        sys.exit(f"tree-fairseq-preprocess: error: {error}")


def run(args):
    """One run at a time per --destdir: a second is refused while the first holds DESTDIR.lock."""
    destdir = os.path.abspath(args.destdir)
    os.makedirs(os.path.dirname(destdir), exist_ok=True)
    with output_lock(destdir, "--destdir"):
        _remove_killed_runs_stages(destdir)
        _run(args)


def _remove_killed_runs_stages(destdir: str) -> None:
    """Remove the staging folders that runs on ``destdir`` killed outright left beside it. Only a
    run holding DESTDIR.lock stages there, and this one holds it: none of them belongs to a live run."""
    stage = re.compile(rf"\.{re.escape(os.path.basename(destdir))}\.partial-[a-z0-9_]{{8}}")
    parent = os.path.dirname(destdir)
    for name in sorted(os.listdir(parent)):
        path = os.path.join(parent, name)
        if stage.fullmatch(name) and os.path.isdir(path) and not os.path.islink(path):
            logger.warning(f"removing {path}, the staging folder of an earlier run on --destdir {destdir} that was "
                           "killed before it could")
            shutil.rmtree(path)


def _run(args):
    splits = _splits(args)
    _check_options(args, splits)
    with_heads = _with_heads(args, splits)
    for _, prefix in splits:
        _check_line_counts([f"{prefix}.{args.source_lang}", f"{prefix}.{args.target_lang}",
                            _tree_path(args, prefix)] + ([_heads_path(args, prefix)] if with_heads else []))
    parser_record = _parser_record(args, splits, with_heads)
    destdir = os.path.abspath(args.destdir)
    os.makedirs(os.path.dirname(destdir), exist_ok=True)
    stage = tempfile.mkdtemp(prefix=f".{os.path.basename(destdir)}.partial-", dir=os.path.dirname(destdir))
    source_words = None
    with removed_on_sigterm(stage):  # as Ctrl-C does
        try:
            args.destdir = stage
            # Trees first: a bad tree stops the run before fairseq binarises the text.
            node_dict = Dictionary.load(args.nodedict) if args.nodedict else Dictionary()
            source_words = Counter() if _counts_source_words(args) else None
            for name, prefix in splits:
                _write_trees(args, name, prefix, node_dict, grow_dictionary=name == "train" and not args.nodedict,
                             with_heads=with_heads, words=source_words if name == "train" else None)
            node_dict.save(node_dictionary_path(stage, args.source_lang))
            write_json(databin_record_path(stage, args.source_lang), parser_record, sort_keys=True)
            if source_words is not None:
                # fairseq-preprocess loads the source dictionary instead of counting the text again.
                args.srcdict = os.path.join(stage, f"dict.{args.source_lang}.txt")
                _source_dictionary(args, source_words).save(args.srcdict)
                logger.info(f"[{args.source_lang}] dictionary: the words of {args.trainpref}.{args.source_lang} "
                            "counted as its trees were read")
            try:
                fairseq_preprocess.main(args)
            except AssertionError as error:  # fairseq checks some options by assert
                raise ValueError(f"fairseq-preprocess: {error}") from None
            for name, prefix in splits:
                # The target text as given, for scoring against the test set rather than its binarised
                # form (fairseq-generate's T- lines print a piece missing from the dictionary as <unk>).
                shutil.copyfile(f"{prefix}.{args.target_lang}", reference_paths(stage, name, args.target_lang)[0])
            os.makedirs(destdir, exist_ok=True)
            for name in sorted(os.listdir(stage)):
                os.replace(os.path.join(stage, name), os.path.join(destdir, name))
        finally:
            args.destdir = destdir
            if source_words is not None:
                args.srcdict = None
            shutil.rmtree(stage, ignore_errors=True)


def _check_options(args, splits) -> None:
    """Everything that would stop the run later, before anything is written."""
    if not args.source_lang or not args.target_lang or args.only_source:
        raise ValueError("--source-lang and --target-lang are required (and --only-source is not supported)")
    if not splits:
        raise ValueError("nothing to binarise: give --trainpref, --validpref or --testpref")
    if args.source_lang == args.target_lang:
        raise ValueError(f"--source-lang and --target-lang are both {args.source_lang}: a data-bin's files are "
                         "named by language, so the two sides need two names (e.g. en and en_tgt)")
    if not args.trainpref:
        missing = [flag for flag, given in (("--nodedict", args.nodedict), ("--srcdict", args.srcdict),
                                            ("--tgtdict", args.tgtdict or (args.joined_dictionary and args.srcdict)))
                   if not given]
        if missing:
            raise ValueError(f"without --trainpref, give the dictionaries to use: {', '.join(missing)}")
    if args.joined_dictionary and args.srcdict and args.tgtdict:
        raise ValueError("--joined-dictionary takes --srcdict or --tgtdict, not both")
    if args.dataset_impl == "huffman":
        raise ValueError("--dataset-impl huffman is not supported by fairseq-preprocess")
    for flag, path in (("--srcdict", args.srcdict), ("--tgtdict", args.tgtdict), ("--nodedict", args.nodedict)):
        if path:
            try:
                Dictionary.load(path)
            except (OSError, ValueError, UnicodeDecodeError) as error:
                raise ValueError(f"{flag} {path}: not a fairseq dictionary ({error})") from None
    for lang, given in ((args.source_lang, args.srcdict), (args.target_lang, args.tgtdict)):
        existing = os.path.join(args.destdir, f"dict.{lang}.txt")
        if not given and not (args.joined_dictionary and (args.srcdict or args.tgtdict)) and os.path.exists(existing):
            raise ValueError(f"{existing} exists: --destdir holds a data-bin already; remove it, choose another "
                             "--destdir, or reuse its dictionaries with --srcdict/--tgtdict/--nodedict")
    node_dict_path = node_dictionary_path(args.destdir, args.source_lang)
    if not args.nodedict and os.path.exists(node_dict_path):
        raise ValueError(f"{node_dict_path} exists: --destdir holds a data-bin already; remove it, choose another "
                         "--destdir, or reuse its dictionaries with --srcdict/--tgtdict/--nodedict")
    _check_same_dictionaries(args)
    if os.path.exists(args.destdir) and not os.path.isdir(args.destdir):
        raise ValueError(f"--destdir {args.destdir} is a file")
    if args.trainpref:
        for lang in (args.source_lang, args.target_lang):
            path = f"{args.trainpref}.{lang}"
            if os.path.exists(path) and _count_lines(path) == 0:
                raise ValueError(f"{path} is empty: the train split needs sentences")


def _check_same_dictionaries(args) -> None:
    """Splits added to a data-bin take its own dictionaries: the splits there were binarised with
    them, and another one would give their indices other words silently."""
    tgtdict = args.tgtdict or (args.srcdict if args.joined_dictionary else None)
    srcdict = args.srcdict or (args.tgtdict if args.joined_dictionary else None)
    for flag, given, existing in (
            ("--srcdict", srcdict, os.path.join(args.destdir, f"dict.{args.source_lang}.txt")),
            ("--tgtdict", tgtdict, os.path.join(args.destdir, f"dict.{args.target_lang}.txt")),
            ("--nodedict", args.nodedict, node_dictionary_path(args.destdir, args.source_lang))):
        if given and os.path.exists(existing) and Dictionary.load(given).symbols != Dictionary.load(existing).symbols:
            raise ValueError(f"{flag} {given} is not {existing}, the dictionary the data-bin's splits were binarised "
                             f"with: give {existing} to add splits to it, or choose another --destdir")


def _splits(args) -> list[tuple[str, str]]:
    """(output split name, input prefix), train first, as fairseq-preprocess names them."""
    splits = [("train", args.trainpref)] if args.trainpref else []
    for split, prefixes in (("valid", args.validpref), ("test", args.testpref)):
        for k, prefix in enumerate(prefixes.split(",") if prefixes else []):
            splits.append((split + (str(k) if k else ""), prefix))
    return splits


def _tree_path(args, prefix):
    return f"{prefix}.{args.tree_suffix}.{args.source_lang}"


def _heads_path(args, prefix):
    return f"{prefix}.{args.heads_suffix}.{args.source_lang}"


def _with_heads(args, splits) -> bool:
    """Whether the splits have dependency heads: all of them, or none (ValueError for some)."""
    present = [os.path.exists(_heads_path(args, prefix)) for _, prefix in splits]
    if any(present) and not all(present):
        missing = [_heads_path(args, prefix) for (_, prefix), here in zip(splits, present) if not here]
        found = [_heads_path(args, prefix) for (_, prefix), here in zip(splits, present) if here]
        raise ValueError(f"dependency heads for some splits only: {', '.join(found)} but no {', '.join(missing)}; "
                         "give every split its heads (tree-fairseq-parse --heads), or none")
    return all(present)


def _parser_record(args, splits, with_heads: bool) -> dict:
    """The data-bin's parser.{src}.json: each split's record (or ``unknown``), those of a data-bin
    the splits are added to kept, and, as ``parser``, train's (without a train split, the splits'
    common one). ValueError for splits parsed differently, unless --mixed-parsers."""
    # Splits added to a data-bin: the splits already there keep their records (one given again is replaced).
    there = read_record(databin_record_path(args.destdir, args.source_lang))
    kept = there.get("splits", {}) if isinstance(there, dict) and isinstance(there.get("splits"), dict) else {}
    added = {name: _split_record(args, prefix, with_heads) for name, prefix in splits}
    records = {**{name: record for name, record in kept.items() if name not in added}, **added}
    kinds = {}
    for name, record in records.items():
        if record != UNKNOWN:
            kind = json.dumps([parser_identity(record), heads_identity(record)], sort_keys=True)
            kinds.setdefault(kind, []).append(name)
    if len(kinds) > 1:
        described = "; ".join(f"{', '.join(names)}: {describe(records[names[0]])}" for names in kinds.values())
        parsers = {json.dumps(parser_identity(records[names[0]]), sort_keys=True) for names in kinds.values()}
        # One parser, other heads: say what differs (a heads file edited or replaced since its parse
        # reads "heads unknown"), not that other parsers made the trees.
        what = ("the splits' trees were made by different parsers" if len(parsers) > 1 else
                "the splits' trees were made alike but their heads were not (\"heads unknown\": a heads file that "
                "is not the one its parse wrote, edited or replaced since)")
        if not args.mixed_parsers:
            raise ValueError(f"{what} ({described}), as their records "
                             f"({record_path(_tree_path(args, splits[0][1]))}, ...) say: parse every split alike, "
                             "or give --mixed-parsers to binarise them as they are")
        logger.warning(f"--mixed-parsers: {what} ({described})")
    unknown = [name for name, record in records.items() if record == UNKNOWN]
    if unknown:
        logger.warning(f"no parser record for the trees of {', '.join(unknown)} (tree-fairseq-parse writes one beside "
                       "its output, TREEFILE.parser.json): the data-bin records their parser as unknown")
    if "train" in records:
        chosen = records["train"]
    else:
        chosen = next(iter(records.values())) if len(kinds) == 1 and not unknown else UNKNOWN
    if chosen != UNKNOWN:
        logger.info(f"source trees made by {describe(chosen)} (recorded in "
                    f"{os.path.basename(databin_record_path(args.destdir, args.source_lang))})")
    return {"format": RECORD_FORMAT, "source_lang": args.source_lang, "parser": chosen, "splits": records}


def _split_record(args, prefix, with_heads: bool):
    """The record of a split's tree file, ``unknown`` where there is none or it names other trees;
    its heads are kept when the data-bin takes them and the heads file is the one recorded."""
    tree_path = _tree_path(args, prefix)
    candidates = [record_path(tree_path)]
    if os.path.realpath(tree_path) != os.path.abspath(tree_path):
        candidates.append(record_path(os.path.realpath(tree_path)))
    for path in candidates:
        record = read_record(path)
        if record is None:
            continue
        if not isinstance(record, dict) or record.get("trees_blake2b") != file_digest(tree_path):
            logger.warning(f"{path} is the record of other trees than {tree_path} (edited or replaced since it was "
                           "written): their parser is unknown")
            return UNKNOWN
        record = {**record, "trees_file": os.path.abspath(tree_path)}
        heads = record.pop("heads", None)
        if with_heads:
            if heads and heads.get("blake2b") == file_digest(_heads_path(args, prefix)):
                record["heads"] = heads
            else:
                record["heads"] = UNKNOWN
                why = "is not the one" if heads else "was not written by"
                logger.warning(f"{_heads_path(args, prefix)} {why} the parse of {tree_path} (its record {path}; "
                               "edited, or from another run): the data-bin records its heads as unknown, and raw "
                               "text then needs --inference-heads to say how its heads are made")
        return record
    return UNKNOWN


def _counts_source_words(args) -> bool:
    """Whether the pass that reads train's source text for its trees also counts its words for the
    source dictionary. fairseq-preprocess would read the text once more for them, counting each word
    on its own (3.8 s of a 30 s run on 100,000 IWSLT'14 lines, measured); counted here, in the pass
    already made, the dictionary is the same. Only where fairseq would build it the plain way: no --srcdict, no
    --joined-dictionary (it counts both sides), a task that keeps fairseq's dictionary building."""
    if args.srcdict or args.joined_dictionary or not args.trainpref:
        return False
    task = TASK_REGISTRY.get(args.task)
    return task is not None and task.build_dictionary.__func__ is FairseqTask.build_dictionary.__func__


def _source_dictionary(args, words: Counter) -> Dictionary:
    """The dictionary fairseq-preprocess builds from the train text, from its counted words (each
    line's ``str.split()``, the tokens of fairseq's ``tokenize_line``, and one end of sentence per
    line): added in sorted order and finalised by fairseq's own Dictionary, with
    --thresholdsrc, --nwordssrc and --padding-factor."""
    dictionary = Dictionary()
    for word, count in sorted(words.items()):
        dictionary.add_symbol(word, count)
    dictionary.finalize(threshold=args.thresholdsrc, nwords=args.nwordssrc, padding_factor=args.padding_factor)
    return dictionary


def _check_line_counts(paths):
    """The files of a split have as many lines, and are UTF-8 (a bad byte is named with its line)."""
    files = [utf8_lines(path) for path in paths]
    try:
        for line_number, lines in enumerate(itertools.zip_longest(*files), start=1):
            if None in lines:
                ended = [p for p, line in zip(paths, lines) if line is None]
                going = [p for p, line in zip(paths, lines) if line is not None]
                raise ValueError(f"line counts differ: {', '.join(ended)} ended at line {line_number - 1} "
                                 f"but {', '.join(going)} go on at line {line_number}")
    finally:
        for f in files:
            f.close()


def _write_trees(args, split, prefix, node_dict, grow_dictionary, with_heads=False, words=None):
    """The split's tree streams, chunk by chunk: in this process with one worker, else in --workers
    processes (chunks come back in order, so labels get the ids they would get line by line).
    ``words``, a Counter, also gets the words of the source text and an end of sentence per line."""
    text_path, tree_path = f"{prefix}.{args.source_lang}", _tree_path(args, prefix)
    stream_prefix = tree_stream_prefix(args.destdir, split, args.source_lang, args.target_lang)
    writer = TreeStreamWriter(stream_prefix)
    heads_path = _heads_path(args, prefix) if with_heads else None
    parent_writer = ParentStreamWriter(stream_prefix) if heads_path else None
    unknown = Counter()
    sentences = nodes = 0
    heads_file = open(heads_path, encoding="utf-8") if heads_path else nullcontext(itertools.repeat(None))
    lines = _count_lines(text_path)
    # never more processes than chunks: a split of a few lines is read here, whatever --workers says
    processes = min(args.workers, -(-lines // _CHUNK_LINES))
    pool = Pool(processes) if processes > 1 else nullcontext()
    with open(text_path, encoding="utf-8") as text, open(tree_path, encoding="utf-8") as trees, heads_file as heads, \
            pool:
        chunks = _chunks(zip(itertools.count(1), text, trees, heads), text_path, tree_path, heads_path,
                         args.subword_format, args.allow_retokenized_trees, args.subword_label, words is not None)
        results = pool.imap(_tree_chunk, chunks) if processes > 1 else map(_tree_chunk, chunks)
        with tqdm(desc=f"trees {split}", unit="sent", total=lines) as bar:
            for chunk in results:
                counts = np.bincount(chunk.codes, minlength=len(chunk.labels))
                if grow_dictionary:
                    ids = [node_dict.add_symbol(label, n=int(count)) for label, count in zip(chunk.labels, counts)]
                else:
                    ids = [node_dict.index(label) for label in chunk.labels]
                    unknown.update({label: int(count) for label, count, i in zip(chunk.labels, counts, ids)
                                    if i == node_dict.unk()})
                writer.add_sentences(np.asarray(ids, dtype=np.int32)[chunk.codes], chunk.spans, chunk.node_counts)
                if parent_writer is not None:
                    parent_writer.add_sentences(chunk.parents, chunk.piece_counts)
                if words is not None:
                    words.update(chunk.words)
                nodes += len(chunk.codes)
                sentences += len(chunk.node_counts)
                bar.update(len(chunk.node_counts))
    writer.finalize()
    if parent_writer is not None:
        parent_writer.finalize()
    logger.info(f"{split}: {sentences} source trees, {nodes} nodes ({nodes / max(sentences, 1):.1f} per sentence), "
                f"{len(node_dict) - node_dict.nspecial} node labels")
    if unknown:
        logger.warning(f"{split}: {sum(unknown.values())} nodes have labels unseen in train, mapped to "
                       f"{node_dict.unk_word}: {dict(unknown.most_common(10))}")


def _chunks(numbered_lines, text_path, tree_path, heads_path, subword_format, retokenized, subword_label,
            count_words):
    while chunk := list(itertools.islice(numbered_lines, _CHUNK_LINES)):
        yield chunk, text_path, tree_path, heads_path, subword_format, retokenized, subword_label, count_words


class _ChunkRows(NamedTuple):
    """The tree streams of a chunk of lines, compact enough to send between processes: the node
    labels as codes into ``labels`` (numbered in order of first use), the spans (``start, end`` per
    node), each sentence's number of nodes, and with heads each piece's parent span and each
    sentence's number of pieces (else empty); when asked, the count of each word of the text and of
    the end of sentence (else empty)."""
    labels: list
    codes: np.ndarray
    spans: np.ndarray
    node_counts: list
    parents: np.ndarray
    piece_counts: list
    words: Counter


def _tree_chunk(job) -> _ChunkRows:
    """Worker: the rows of each line's tree and heads over its BPE pieces. Lines of the common kind
    take :func:`~tree_fairseq.trees.rows.piece_rows`; the others, and every line that is wrong,
    the long way, which names what is wrong with the file and line."""
    chunk, text_path, tree_path, heads_path, subword_format, retokenized, subword_label, count_words = job
    code_of: dict[str, int] = {}
    codes, spans, node_counts, parents, piece_counts = [], [], [], [], []
    words = Counter({_END_OF_SENTENCE: len(chunk)}) if count_words else Counter()
    for line_number, text_line, tree_line, heads_line in chunk:
        pieces = text_line.split()
        if count_words:
            words.update(pieces)
        rows = piece_rows(tree_line, pieces, subword_format, subword_label)
        if rows is None:
            rows = _rows_the_long_way(line_number, text_line, tree_line, pieces, text_path, tree_path,
                                      subword_format, retokenized, subword_label)
        else:
            _check_subword_format(pieces, text_line, subword_format, text_path, line_number)
        labels, line_spans = rows
        codes += [code_of.setdefault(label, len(code_of)) for label in labels]
        spans += line_spans
        node_counts.append(len(labels))
        if heads_line is not None:
            line_parents = parent_rows(heads_line, pieces, subword_format)
            if line_parents is None:
                try:
                    parent_spans = piece_parent_spans(read_heads(heads_line), pieces, subword_format)
                except TreeError as error:
                    raise located(f"{error} (text: {text_path}:{line_number})", heads_path, line_number) from None
                line_parents = [index for span in parent_spans for index in span]
            parents += line_parents
            piece_counts.append(len(pieces))
    return _ChunkRows(list(code_of), np.asarray(codes, dtype=np.int64), np.asarray(spans, dtype=np.int32),
                      node_counts, np.asarray(parents, dtype=np.int32), piece_counts, words)


def _check_subword_format(pieces, text_line, subword_format, text_path, line_number) -> None:
    """TreeError naming the line when its pieces are plainly in the other subword format."""
    if subword_format == "subword_nmt":
        if "\u2581" in text_line and any(piece.startswith("\u2581") for piece in pieces):
            raise located("a token starts with sentencepiece's \u2581: give --subword-format sentencepiece",
                          text_path, line_number)
    elif (not any(piece.startswith("\u2581") for piece in pieces)
            and any(piece.endswith("@@") for piece in pieces[:-1])):
        raise located("the text is in subword-nmt's format (pieces joined by '@@ ', no \u2581): give "
                      "--subword-format subword_nmt", text_path, line_number)


def _rows_the_long_way(line_number, text_line, tree_line, pieces, text_path, tree_path, subword_format, retokenized,
                       subword_label):
    """(labels, flat spans) of a line read, normalised, aligned and expanded over its pieces."""
    try:
        tree = parse_tree(tree_line)
        check_labels(tree)
    except TreeError as error:
        raise located(error, tree_path, line_number) from None
    _check_subword_format(pieces, text_line, subword_format, text_path, line_number)
    words = [word for word, _, _ in group_pieces(pieces, subword_format)]
    try:
        tree = expand_subwords(align(tree, words, retokenized), pieces, subword_format, subword_label)
    except TreeError as error:
        # A tab or no-break space inside a word: subword-nmt kept it there, str.split() did not.
        error = other_space(text_line) or error
        raise located(f"{error} (tree: {tree_path}:{line_number})", text_path, line_number) from None
    return [node.label for node in tree.nodes], [index for node in tree.nodes for index in (node.start, node.end)]


def _count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


if __name__ == "__main__":
    main()
