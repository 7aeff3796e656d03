"""tree-fairseq-parse: one bracketed tree per line of tokenised text.

Reads ``--input`` (tokenised text, one sentence per line, tokens separated by spaces) and writes
``--output``: line k is the normal-form tree of input line k, whose leaves are
exactly that line's tokens (brackets inside tokens written -LRB-/-RRB-), each
under its part-of-speech tag when the parser gives one to every word (stanza,
tagged bracketed input, the dependency back-ends): ``(S (NP (DT the) (NN cat)) (VBD sat))``.
A label or tag holding a bracket, whitespace, ``%``, or a ``-`` or ``=`` the reader would take
for a function tag is percent-escaped (German ``$(`` -> ``$%28``), and read back as it was.
A line holding other whitespace (tab, no-break space, ...) is refused: subword-nmt would keep it
inside a word where the trees split there.

``stanza`` reads its models from ``--model-dir`` (a folder laid out as ``stanza.download`` lays one
out; stanza's own by default), the language's default package or ``--stanza-package``'s, or
from model files given one by one (``--stanza-pos-model``, ``--stanza-constituency-model``,
``--stanza-pretrain``): :mod:`tree_fairseq.parsing.stanza_parser`.

``spacy`` and ``conllu`` give dependency parses; each is turned into phrase structure by head
projection (``--dependency-tree-shape``, :mod:`tree_fairseq.trees.dependency`). Arcs lifted to
make a parse projective are counted and reported at the end.

``--heads FILE`` also writes the words' dependency heads, one line per input line: the 1-based
head of each word, 0 for a root (CoNLL-U's HEAD column), the ``{pref}.heads.{src}`` file from
which tree-fairseq-preprocess makes each piece's parent (``--task dependency_translation``).
With ``spacy`` and ``conllu`` they are the parser's heads over the line's tokens, as it gave them
(not lifted; a multiword token depends where its first word with a head outside it does; a line
that failed gets each word's parent the next word, and is listed in ``OUTPUT.failures``);
``--heads-control`` writes trivial heads instead, with any parser (:mod:`tree_fairseq.trees.parents`).

Work is done in chunks of ``--chunk-size`` lines, each kept in
``OUTPUT.parts/`` as soon as it is finished; an interrupted run restarted with
the same command redoes no finished chunk. Chunks are reused only when the
input (and ``--trees``) hold the same bytes, whatever their size and time stamp
say, and the options are the same; anything else in ``OUTPUT.parts/`` is
discarded. Options are checked before anything is written.

``--workers N`` parses the chunks in N processes, each with its own copy of the parser's model
(:class:`ParserProcesses`): the output is that of one process, byte for byte, and the chunks are
kept and reused as without it, by a resumed run with any ``--workers``. ``--join PART...`` parses
nothing: it joins the outputs of runs over consecutive parts of one input (parsed on several
machines) into the output one run over the whole writes, record included (:func:`join_outputs`).

One run at a time writes an output: a second run on the same ``--output`` is refused while the
first holds ``OUTPUT.lock``. The output cannot be the input (or ``--trees``) file, nor a device, and
no input can be a file the run writes or removes beside it (``OUTPUT.tmp``, ``OUTPUT.parser.json``...).
The trees are joined into ``OUTPUT.tmp`` and renamed ``OUTPUT`` once complete: a run stopped by a
full disk removes it, and says so; one killed outright leaves it, and the next run on that output
removes it (only a run holding the lock writes there).

Beside the trees, ``OUTPUT.parser.json`` records what made them (renamed into place just before
the trees): the back-end, its model and version where it has one (spaCy's pipeline name and
version; stanza's version, package and model files), the tree shape, where ``--heads`` came from
(the parser, or ``--heads-control`` and its seed) and the digest of the trees (and heads)
written. tree-fairseq-preprocess copies it into the data-bin, and raw-text translation takes its
parser from it (:mod:`tree_fairseq.parsing.record`).

``--on-failure``: a sentence the parser could not parse (stanza gave up on it; a
``--trees`` line that is empty, ``null``, ``( )`` or broken) stops the run by
default; ``balanced``/``left``/``right`` give it that trivial tree over its
tokens instead, so that nothing is dropped and the lines stay aligned. Those
lines are counted, listed in ``OUTPUT.failures`` (line number, tab, reason) and
summarised at the end.
"""

import argparse
import contextlib
import errno
import hashlib
import json
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import shutil
import signal
import sys
import traceback

from tqdm import tqdm

from tree_fairseq.cli import ArgumentParser, argtypes
from tree_fairseq.cli.files import leads_to_a_device, resolved_output, same_file, write_json, write_text
from tree_fairseq.cli.locking import output_lock
from tree_fairseq.parsing import ON_FAILURE, PARSERS, check_parser_options, make_parser
from tree_fairseq.parsing.record import describe_parser, file_digest, parse_record, read_record, record_path
from tree_fairseq.trees import TreeError
from tree_fairseq.trees.dependency import DEPENDENCY_TREE_SHAPES
from tree_fairseq.trees.parents import HEAD_CONTROLS, control_heads, format_heads
from tree_fairseq.trees.textio import other_space, utf8_lines

_FINGERPRINT_BLOCK = 1 << 20
# The thread pools of the libraries a parser may load (torch's OpenMP, MKL, OpenBLAS): one thread in
# each worker of --workers.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="tree-fairseq-parse",
        description="Write one bracketed source tree per line of tokenised text "
        "(the {pref}.tree.{src} file that tree-fairseq-preprocess reads).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", help="tokenised text, one sentence per line")
    source.add_argument("--join", nargs="+", metavar="PART",
                        help="parse nothing: join the outputs of tree-fairseq-parse runs over consecutive parts of "
                        "one input (split -n l/K), given in order, into --output as one run over the whole writes "
                        "it, with one record; the parts' records must agree but for their lines, failures and "
                        "digests (the same parser, model, options and heads)")
    parser.add_argument("--output", required=True,
                        help="trees, one per input line (work in OUTPUT.parts/ and OUTPUT.lock while running); "
                        "OUTPUT.parser.json beside them records the parser, its model and options")
    parser.add_argument("--parser", choices=PARSERS, default="stanza",
                        help="stanza: stanza's constituency parser; spacy: an installed spaCy pipeline's "
                        "dependency parser (--spacy-model); bracketed: existing parser output, one bracketed "
                        "tree per line (--trees); conllu: any dependency parser's CoNLL-U output, one sentence "
                        "block per line (--trees); balanced/left/right: trivial binary trees")
    parser.add_argument("--lang", help="language code of the text (stanza)")
    parser.add_argument("--trees", help="parser output to align: one bracketed tree per line (bracketed) or "
                        "one CoNLL-U sentence block per line (conllu)")
    parser.add_argument("--model-dir", help="stanza's model folder, as stanza.download lays it out (resources.json, "
                        "LANG/pos/..., LANG/constituency/...; default: stanza's own, or $STANZA_RESOURCES_DIR); "
                        "missing models are downloaded there")
    parser.add_argument("--stanza-package", metavar="NAME|PROCESSOR=NAME,...",
                        help="stanza's models other than the language's default: NAME, a package of the whole "
                        "pipeline (e.g. default_accurate), or the packages of some of its processors (tokenize, pos, "
                        "constituency; e.g. constituency=wsj), as stanza's package argument")
    parser.add_argument("--stanza-pos-model", metavar="FILE",
                        help="stanza's tagger model file, in place of the model folder's (with "
                        "--stanza-constituency-model, the two files make the pipeline without a model folder)")
    parser.add_argument("--stanza-constituency-model", metavar="FILE",
                        help="stanza's constituency parser model file, in place of the model folder's")
    parser.add_argument("--stanza-pretrain", metavar="FILE",
                        help="the word vectors (stanza's pretrain .pt file) the tagger and parser files were "
                        "trained with")
    parser.add_argument("--spacy-model", metavar="NAME_OR_PATH",
                        help="the spaCy pipeline (spacy): an installed package such as en_core_web_sm, or a "
                        "directory; nothing is downloaded")
    parser.add_argument("--dependency-tree-shape", choices=DEPENDENCY_TREE_SHAPES, default="layered",
                        help="phrase structure from dependency parses (spacy, conllu): layered (default) puts a "
                        "head and its right dependents in an inner phrase, its left dependents and trailing "
                        "punctuation above it; flat makes one phrase per head over its whole yield")
    parser.add_argument("--heads", metavar="FILE",
                        help="also write each word's dependency head to FILE, one line per input line (1-based, 0 "
                        "for the root), the {pref}.heads.{src} file tree-fairseq-preprocess reads: the parser's "
                        "heads (spacy, conllu), or --heads-control's")
    parser.add_argument("--heads-control", choices=HEAD_CONTROLS,
                        help="write trivial heads to --heads instead of a parser's, with any --parser: next (each "
                        "word's parent is the next word, the last word the root), previous (the previous word, "
                        "the first the root), random (a random projective tree drawn from the line's words and "
                        "--heads-seed: the same line gets the same tree)")
    parser.add_argument("--heads-seed", type=argtypes.seed, default=1,
                        help="seed of --heads-control random (default 1)")
    parser.add_argument("--join-heads", nargs="+", metavar="PART_HEADS",
                        help="with --join of parts parsed with --heads: their heads files, in the same order, "
                        "joined into --heads")
    parser.add_argument("--batch-size", type=argtypes.positive_int, default=64,
                        help="sentences per parser call (stanza, spacy)")
    parser.add_argument("--cpu", action="store_true", help="run stanza on the CPU even with a GPU")
    parser.add_argument("--chunk-size", type=argtypes.positive_int, default=2000,
                        help="lines per resumable chunk (default 2000)")
    parser.add_argument("--workers", type=argtypes.workers, default=1,
                        help="processes parsing chunks at once (default 1; at most 4 per processor), each on "
                        "one thread with its own copy of the parser's model (its memory once per worker); "
                        "the output is the same "
                        "whatever the number, and a resumed run reuses the chunks of one with another. Not "
                        "with stanza on a GPU (--cpu parses on the CPU)")
    parser.add_argument("--on-failure", choices=ON_FAILURE, default="error",
                        help="a sentence the parser could not parse (stanza gave up on it; a --trees line that is "
                        "empty, null, '( )' or broken; a CoNLL-U block without words or not well-formed): error "
                        "stops the run (default); balanced/left/right give it "
                        "that trivial tree over its tokens, count it and list its line in OUTPUT.failures")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    # Importing fairseq sets the root logger to DEBUG; parsers log through it.
    logging.basicConfig(level=logging.WARNING, force=True)
    try:
        parse_file(args)
    except OSError as error:
        if error.errno != errno.ENOSPC:
            sys.exit(f"tree-fairseq-parse: error: {error}")
        kept = "" if args.join else f" (the chunks parsed so far are kept in {args.output}.parts/)"
        sys.exit(f"tree-fairseq-parse: error: no space left on the device while writing {args.output}: free some and "
                 f"run the same command again{kept}")
    except (TreeError, ValueError) as error:
        sys.exit(f"tree-fairseq-parse: error: {error}")


def parse_file(args: argparse.Namespace) -> None:
    if args.join:
        return join_outputs(args)
    if args.join_heads:
        raise ValueError("--join-heads names the heads of the parts of --join PART...")
    # Everything that can be refused is refused before OUTPUT.parts/ is touched.
    check_parser_options(args.parser, lang=args.lang, trees=args.trees, spacy_model=args.spacy_model)
    for flag, path in (("--input", args.input), ("--trees", args.trees)):
        if path is not None and os.path.exists(path) and not os.path.isfile(path):
            raise ValueError(f"{flag} {path} is not a regular file (a pipe or a device): it is read twice, "
                             "once to fingerprint it for resuming; write it to a file first")
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"{flag} {path}: no such file")
    _check_output(args)
    _check_heads(args)
    _follow_links(args)
    _check_inputs_not_written(args, [("--input", args.input), ("--trees", args.trees)])
    if args.workers > 1 and args.parser == "stanza" and not args.cpu:
        import torch

        if torch.cuda.is_available():
            # One process on the GPU, as without --workers; several would share it for no gain.
            raise ValueError(f"--workers {args.workers}: stanza parses on the GPU in one process; leave out "
                             f"--workers, or add --cpu to parse in {args.workers} processes on the CPU")
    with output_lock(args.output, "--output"), \
            (output_lock(args.heads, "--heads") if args.heads is not None else contextlib.nullcontext()):
        _parse_file(args)


def stanza_model_files(args: argparse.Namespace) -> dict[str, str | None]:
    """The stanza model files given one by one, by kind."""
    return {"pos": args.stanza_pos_model, "constituency": args.stanza_constituency_model,
            "pretrain": args.stanza_pretrain}


def _check_output(args: argparse.Namespace) -> None:
    """The output is a regular file path of its own: not a directory or device, not the input."""
    if os.path.isdir(args.output):
        raise ValueError(f"--output {args.output} is a directory")
    if args.output == "-" or (os.path.exists(args.output) and not os.path.isfile(args.output)) or \
            leads_to_a_device(args.output):
        raise ValueError(f"--output {args.output} is not a regular file: give a file path (the trees are written "
                         "there once complete, with the work in OUTPUT.parts/ beside it)")
    for flag, path in (("--input", args.input), ("--trees", args.trees)):
        if path is not None and same_file(path, args.output):
            raise ValueError(f"--output {args.output} is the {flag} file: it would be replaced by the trees; "
                             "write them elsewhere")


def _follow_links(args: argparse.Namespace) -> None:
    """An --output or --heads that is a link (found not to lead to a device) stands for the file it
    leads to (:func:`resolved_output`), which is written, its record beside it."""
    for name in ("output", "heads"):
        path = getattr(args, name)
        if path is not None:
            setattr(args, name, resolved_output(path))


def _check_inputs_not_written(args: argparse.Namespace, inputs: list[tuple[str, str]]) -> None:
    """No input is a file this run writes, replaces or removes: OUTPUT's record, failures and
    scratch files (OUTPUT.tmp ... are removed as an earlier run's leftovers before parsing) and
    the heads' (an input so named would be deleted or overwritten)."""
    written = [args.output + ".parts", args.output + ".failures", record_path(args.output),
               *_joined_files(args.output, args.heads), *([args.heads] if args.heads is not None else [])]
    for flag, path in inputs:
        if path is None or not os.path.exists(path):
            continue
        for output in written:
            if same_file(path, output):
                raise ValueError(f"{flag} {path} is {output}, a file this run writes or removes beside --output "
                                 f"{args.output}: rename the input or write the output elsewhere")
    if args.heads is not None and any(same_file(args.heads, path) for path in written[:-1]):
        raise ValueError(f"--heads {args.heads} is a file this run writes beside --output {args.output} (its record, "
                         "failures or scratch files): write the heads elsewhere")


def _check_heads(args: argparse.Namespace) -> None:
    """--heads names a file of its own, and heads there are to be had (a dependency parser's or a control)."""
    if args.heads is None:
        if args.heads_control is not None:
            raise ValueError("--heads-control says which heads to write to --heads FILE: give --heads")
        return
    if args.heads_control is None and args.parser not in ("spacy", "conllu"):
        raise ValueError(f"--parser {args.parser} gives no dependency heads: --heads takes a dependency parser's "
                         f"(--parser spacy or conllu), or trivial ones (--heads-control {'/'.join(HEAD_CONTROLS)})")
    _check_heads_path(args)


def _check_heads_path(args: argparse.Namespace) -> None:
    """--heads names a regular file of its own."""
    if os.path.isdir(args.heads) or (os.path.exists(args.heads) and not os.path.isfile(args.heads)) or \
            leads_to_a_device(args.heads):
        raise ValueError(f"--heads {args.heads} is not a regular file: give a file path")
    for flag, path in (("--input", args.input), ("--trees", args.trees), ("--output", args.output)):
        if path is not None and same_file(path, args.heads):
            raise ValueError(f"--heads {args.heads} is the {flag} file: write the heads elsewhere")


def _parse_file(args: argparse.Namespace) -> None:
    parts_dir = args.output + ".parts"
    for path in _joined_files(args.output, args.heads):
        if os.path.isfile(path):
            print(f"tree-fairseq-parse: removing {path}, left by an earlier run that was killed while writing it",
                  file=sys.stderr)
            os.remove(path)
    total, input_fingerprint = _fingerprint(args.input)
    # Not --workers: a chunk is the same whichever process parsed it.
    manifest = {"input": [os.path.abspath(args.input), input_fingerprint],
                "trees": args.trees and [os.path.abspath(args.trees), _fingerprint(args.trees)[1]],
                "parser": args.parser, "lang": args.lang, "chunk_size": args.chunk_size,
                "on_failure": args.on_failure}
    with contextlib.ExitStack() as stack:
        if args.workers > 1:
            parser = stack.enter_context(ParserProcesses(args, -(-total // args.chunk_size)))
            version, description = parser.version, parser.description
        else:
            parser = _make_parser(args)
            version, description = getattr(parser, "version", None), _describe(args, parser)
        if args.parser in ("spacy", "conllu"):
            # Another pipeline version parses differently: its chunks are not reused.
            manifest.update(dependency_tree_shape=args.dependency_tree_shape, spacy_model=version)
        if args.parser == "stanza":
            # Nor are those of other stanza models.
            manifest.update(stanza_model=version)
        if args.heads is not None:
            # Chunks of a run without heads (or other ones) have none to join.
            manifest.update(heads=args.heads_control or "parser",
                            heads_seed=args.heads_seed if args.heads_control == "random" else None)
        created = _prepare_parts(parts_dir, manifest)
        try:
            with tqdm(total=total, unit="sent", desc="parse") as bar:
                if args.workers > 1:
                    parser.parse(_chunks(args), parts_dir, bar)
                else:
                    for index, first_line, sentences in _chunks(args):
                        if not os.path.exists(_chunk_stem(parts_dir, index) + ".trees"):
                            _write_chunk(parts_dir, index, _chunk_files(parser, sentences, first_line, args))
                        bar.update(len(sentences))
        except BaseException:
            # A run that finished no chunk leaves nothing behind; finished chunks stay for the next run.
            if created and not any(name.endswith(".trees") for name in os.listdir(parts_dir)):
                shutil.rmtree(parts_dir, ignore_errors=True)
            raise
    if args.parser in ("bracketed", "conllu"):
        # The processes' parsers read their file only as far as their chunks: one reads it to its end.
        (parser if args.workers == 1 else _make_parser(args)).check_exhausted(total)

    def record(trees_digest: str, heads_digest: str | None, failures: int) -> dict:
        return parse_record(description, lines=total, trees_digest=trees_digest, on_failure=args.on_failure,
                            failures=failures, heads=args.heads and (args.heads_control or "parser"),
                            heads_seed=args.heads_seed, heads_digest=heads_digest)

    failures, lifted = _join_parts(parts_dir, args.output, args.heads, record)
    _report_failures(failures, total, args.on_failure, args.output)
    _report_lifts(lifted, total)


def _make_parser(args: argparse.Namespace):
    return make_parser(args.parser, lang=args.lang, trees=args.trees, model_dir=args.model_dir,
                       batch_size=args.batch_size, use_gpu=False if args.cpu else None,
                       on_failure=args.on_failure, spacy_model=args.spacy_model,
                       dependency_shape=args.dependency_tree_shape, stanza_package=args.stanza_package,
                       stanza_model_files=stanza_model_files(args))


def _describe(args: argparse.Namespace, parser) -> dict:
    """The record's description of ``parser`` (:func:`~tree_fairseq.parsing.record.describe_parser`)."""
    return describe_parser(args.parser, parser, lang=args.lang, spacy_model=args.spacy_model,
                           dependency_shape=args.dependency_tree_shape, stanza_package=args.stanza_package,
                           stanza_model_files=stanza_model_files(args), trees=args.trees,
                           model_dir=args.model_dir if args.parser == "stanza" else None)


def _chunks(args: argparse.Namespace):
    """(index, first line, each line's tokens) of each chunk of the input, in input order; TreeError,
    naming the file and line, at a line that cannot be parsed (the chunks before it come first)."""
    chunk: list[list[str]] = []
    first_line = 1
    for line_number, line in enumerate(utf8_lines(args.input), start=1):
        tokens = line.split()
        if not tokens:
            raise TreeError(f"{args.input}:{line_number}: empty line: no tokens to parse")
        if problem := other_space(line):
            raise TreeError(f"{args.input}:{line_number}: {problem}")
        chunk.append(tokens)
        if len(chunk) == args.chunk_size:
            yield (first_line - 1) // args.chunk_size, first_line, chunk
            chunk, first_line = [], line_number + 1
    if chunk:
        yield (first_line - 1) // args.chunk_size, first_line, chunk


def _chunk_stem(parts_dir: str, index: int) -> str:
    return os.path.join(parts_dir, f"{index:08d}")


def _chunk_files(parser, sentences, first_line, args) -> dict[str, str]:
    """What a chunk's files hold, by suffix: its heads (with --heads), failures, lifts and trees."""
    failures = getattr(parser, "failures", None)
    lifted = getattr(parser, "lifted", [])
    already_failed = len(failures.failed) if failures else 0
    already_lifted = len(lifted)
    trees = parser.parse(sentences, first_line, args.input)
    failed = failures.failed[already_failed:] if failures else []
    dependency = getattr(parser, "dependency", None)
    parsed_heads = dependency.take_heads() if dependency is not None else {}
    files = {}
    if args.heads is not None:
        heads = [control_heads(tokens, args.heads_control, args.heads_seed) if args.heads_control
                 else parsed_heads.get(line) or control_heads(tokens, "next")
                 for line, tokens in enumerate(sentences, start=first_line)]
        files["heads"] = "".join(format_heads(h) + "\n" for h in heads)
    files["failures"] = "".join(f"{line}\t{' '.join(reason.split())}\n" for line, reason in failed)
    files["lifts"] = "".join(f"{line}\t{count}\n" for line, count in lifted[already_lifted:])
    files["trees"] = "".join(tree.to_bracketed() + "\n" for tree in trees)
    return files


def _write_chunk(parts_dir: str, index: int, files: dict[str, str]) -> None:
    # A chunk's failures, lifts and heads are written first: its .trees exists only with them.
    for suffix, text in files.items():
        write_text(f"{_chunk_stem(parts_dir, index)}.{suffix}", text, locked=True)


class ParserProcesses:
    """``--workers N``: the chunks parsed by N processes, each with a parser of its own (its own
    copy of the model). This process reads the input, hands each worker one chunk at a time in
    input order (the aligning parsers read their file forward only), and writes the chunk files
    that come back in OUTPUT.parts/, those one process writes: the output is the same, and a
    resumed run reuses them whatever its --workers. Only this process writes there, so that a
    worker outliving a killed run cannot add a chunk of the old run to a new one's.

    The workers are started with "spawn", not fork: forking a process whose threads may hold locks
    (torch's and OpenMP's pools, tqdm's monitor, those of any program calling :func:`main`) can hang
    the child. Spawned, they are this process's children, which the SIGTERM handler stops
    (:mod:`tree_fairseq.cli.termination`); each computes on one thread, the processes sharing the
    cores. A model that cannot be loaded is reported once, by the first worker. With stanza the
    first loads its model before the others start (stanza downloads a missing model, once); the
    others' workers, up to one per chunk of the input (``chunks``), all start at once: started one
    after the other, the second began a model load (2.5 s for spaCy's small pipeline) late, a tenth
    of a 20,000-line run on two workers."""

    def __init__(self, args: argparse.Namespace, chunks: int):
        self.args = args
        self.chunks = chunks
        self.workers: list[_Worker] = []
        first = self._start()
        try:
            if args.parser != "stanza":
                for _ in range(min(args.workers, chunks) - 1):
                    self._start()
            message = first.receive()
            if message is None:
                raise ChildProcessError(first.death("loading the parser"))
            if message[0] == "failed":
                raise message[1]
        except BaseException:
            self.__exit__()
            raise
        first.ready = True
        # Its parser's version and record description, for the manifest and the record.
        self.version, self.description = message[1:]

    def __enter__(self) -> "ParserProcesses":
        return self

    def __exit__(self, *exc) -> None:
        for worker in self.workers:
            worker.process.terminate()
        for worker in self.workers:
            worker.process.join()
            worker.connection.close()

    def _start(self) -> "_Worker":
        import tree_fairseq_console  # the worker's body, reached from there, loads no fairseq

        connection, child_end = multiprocessing.Pipe()
        process = multiprocessing.get_context("spawn").Process(
            target=tree_fairseq_console.parse_worker, args=(self.args, child_end), daemon=True)
        # Read when the libraries load, in the worker: one thread each.
        saved = {name: os.environ.get(name) for name in _THREAD_VARIABLES}
        os.environ.update(dict.fromkeys(_THREAD_VARIABLES, "1"))
        try:
            process.start()
        finally:
            for name, value in saved.items():
                if value is None:
                    del os.environ[name]
                else:
                    os.environ[name] = value
        child_end.close()  # the worker's end is the worker's alone: its death ends the pipe
        self.workers.append(_Worker(process, connection))
        return self.workers[-1]

    def parse(self, chunks, parts_dir: str, bar) -> None:
        """Parse the ``chunks`` (:func:`_chunks`) not finished in ``parts_dir``, starting as many
        workers as there are such chunks, up to --workers. An error (a line that cannot be parsed,
        a worker that died) stops the handing out; the chunks in work are finished, and the error
        of the first chunk in input order is raised: the one a single process stops at."""
        finished = sum(name.endswith(".trees") for name in os.listdir(parts_dir))
        for _ in range(min(self.args.workers, self.chunks - finished) - len(self.workers)):
            self._start()
        errors: list[tuple[float, BaseException]] = []  # (chunk index, error)
        unfinished = _unfinished(chunks, parts_dir, bar)
        last_index = -1
        while True:
            for worker in [w for w in self.workers if w.ready and w.chunk is None and not w.ended]:
                if errors or unfinished is None:
                    break
                try:
                    index, first_line, sentences = next(unfinished)
                except StopIteration:
                    unfinished = None
                    break
                except TreeError as error:  # a line of the chunk after those handed out
                    errors.append((last_index + 1, error))
                    break
                last_index, worker.chunk = index, (index, first_line, len(sentences))
                if not worker.send((first_line, sentences)):
                    errors.append((index, ChildProcessError(worker.death(self._lines(worker.chunk)))))
            busy = [w for w in self.workers if w.chunk is not None and not w.ended]
            if not busy and (errors or unfinished is None):
                break
            for worker in _ready(busy + [w for w in self.workers if not w.ready and not w.ended]):
                message = worker.receive()
                chunk, worker.chunk = worker.chunk, None
                where = chunk[0] if chunk else math.inf
                if message is None:
                    errors.append((where, ChildProcessError(worker.death(
                        self._lines(chunk) if chunk else "loading the parser"))))
                elif message[0] == "failed":
                    worker.ended = True
                    errors.append((where, message[1]))
                elif message[0] == "ready":
                    worker.ready = True
                    if message[1] != self.version:
                        errors.append((where, ValueError(f"the worker processes loaded different models: "
                                                         f"{self.version}; {message[1]}")))
                else:
                    _write_chunk(parts_dir, chunk[0], message[1])
                    bar.update(chunk[2])
        if errors:
            raise min(errors, key=lambda error: error[0])[1]

    def _lines(self, chunk: tuple[int, int, int]) -> str:
        _, first_line, count = chunk
        return f"parsing lines {first_line}-{first_line + count - 1} of {self.args.input}"


def _unfinished(chunks, parts_dir: str, bar):
    """The ``chunks`` not finished in ``parts_dir``; the others counted on ``bar``."""
    for index, first_line, sentences in chunks:
        if os.path.exists(_chunk_stem(parts_dir, index) + ".trees"):
            bar.update(len(sentences))
        else:
            yield index, first_line, sentences


class _Worker:
    """One worker process, the parent's end of its pipe, and the chunk it parses: (index, first
    line, lines), None while it waits for one."""

    def __init__(self, process, connection):
        self.process, self.connection = process, connection
        self.ready = False  # its parser loaded
        self.ended = False  # it failed or died
        self.chunk: tuple[int, int, int] | None = None

    def send(self, task) -> bool:
        """Hand it a task; False when it is no longer there to take it."""
        try:
            self.connection.send(task)
            return True
        except OSError:
            return False

    def receive(self):
        """Its next message, None when it died."""
        try:
            return self.connection.recv()
        except (EOFError, OSError):
            return None

    def death(self, doing: str) -> str:
        """What ended it, ``doing`` what."""
        self.ended = True
        self.process.join()
        code = self.process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return (f"a worker process (pid {self.process.pid}) ended ({how}) while {doing}; run the same command "
                "again: it reuses the chunks finished")


def _ready(workers: list[_Worker]) -> list[_Worker]:
    """The workers with a message (or a death) to read, once there is one."""
    ready = multiprocessing.connection.wait([worker.connection for worker in workers])
    return [worker for worker in workers if worker.connection in ready]


def run_worker(args: argparse.Namespace, connection) -> None:
    """A worker process of :class:`ParserProcesses`: loads the parser and says what it is, then
    answers each chunk handed to it with the chunk's files (:func:`_chunk_files`), until the pipe
    ends. An error is sent back (with its traceback where it is not one of those a run reports in
    one line), and ends the worker."""
    try:
        parser = _make_parser(args)
        if "torch" in sys.modules:  # loaded by the parser
            sys.modules["torch"].set_num_threads(1)
        connection.send(("ready", getattr(parser, "version", None), _describe(args, parser)))
        while True:
            first_line, sentences = connection.recv()
            connection.send(("done", _chunk_files(parser, sentences, first_line, args)))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the run ended or is gone (Ctrl-C reaches every process: the run says it)
    except BaseException as error:
        connection.send(("failed", _sendable(error)))


def _sendable(error: BaseException) -> BaseException:
    """``error`` as a worker sends it: itself when the run says it in one line (and it pickles),
    else a RuntimeError holding the worker's traceback."""
    if isinstance(error, (TreeError, ValueError, OSError)):
        try:
            return pickle.loads(pickle.dumps(error))
        except Exception:
            pass
    return RuntimeError("a worker process failed:\n" + "".join(traceback.format_exception(error)))


def _prepare_parts(parts_dir: str, manifest: dict) -> bool:
    """Keep ``parts_dir`` when its manifest is ``manifest`` (same input bytes and options),
    otherwise start it afresh. True when it was created now."""
    path = os.path.join(parts_dir, "manifest.json")
    if os.path.isdir(parts_dir):
        try:
            with open(path, encoding="utf-8") as f:
                if json.load(f) == manifest:
                    return False
        except (OSError, ValueError):
            pass  # no manifest, or one cut short: nothing in there can be trusted
        print(f"tree-fairseq-parse: {parts_dir} holds chunks of a run with other input or options, or of an "
              "unfinished start; discarding them", file=sys.stderr)
        shutil.rmtree(parts_dir)
    elif os.path.exists(parts_dir):
        raise ValueError(f"{parts_dir} is a file: remove it")
    os.makedirs(parts_dir)
    write_text(path, json.dumps(manifest, indent=1), locked=True)
    return True


def _fingerprint(path: str) -> tuple[int, str]:
    """(line count, content hash) of a file: chunks are reused only over the same bytes, whatever
    the size and time stamp (cp -p, rsync -a and tar restore them after an edit)."""
    digest = hashlib.blake2b(digest_size=16)
    lines = 0
    last = b"\n"
    with open(path, "rb") as f:
        while block := f.read(_FINGERPRINT_BLOCK):
            digest.update(block)
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n"), digest.hexdigest()


def _joined_files(output: str, heads: str | None) -> list[str]:
    """The files joining the chunks writes before it renames them (removed if it fails)."""
    return [output + ".tmp", output + ".failures.tmp", record_path(output) + ".tmp"] + \
        ([heads + ".tmp"] if heads is not None else [])


def _join_parts(parts_dir: str, output: str, heads: str | None = None,
                record=None) -> tuple[list[str], list[tuple[int, int]]]:
    """Join the chunks of ``parts_dir`` (:func:`_write_joined`) and remove it; returns the failure
    lines and the (line, arcs lifted) of the non-projective parses."""
    stems = [os.path.join(parts_dir, name.removesuffix(".trees"))
             for name in sorted(os.listdir(parts_dir)) if name.endswith(".trees")]
    failures: list[str] = []
    lifted: list[tuple[int, int]] = []
    for stem in stems:
        if os.path.exists(stem + ".failures"):
            with open(stem + ".failures", encoding="utf-8") as f:
                failures += f.read().splitlines()
        if os.path.exists(stem + ".lifts"):
            with open(stem + ".lifts", encoding="utf-8") as f:
                lifted += [tuple(map(int, line.split("\t"))) for line in f.read().splitlines()]
    _write_joined(output, [stem + ".trees" for stem in stems], heads, [stem + ".heads" for stem in stems],
                  failures, record)
    shutil.rmtree(parts_dir)
    return failures, lifted


def _write_joined(output: str, trees: list[str], heads: str | None, heads_parts: list[str], failures: list[str],
                  record=None) -> None:
    """Write OUTPUT, the ``trees`` files one after the other (and OUTPUT.failures when some line
    failed, the ``heads_parts`` joined when ``heads`` names their file, and OUTPUT.parser.json,
    ``record(trees digest, heads digest, failures)``, renamed just before OUTPUT:
    :mod:`tree_fairseq.parsing.record`). A join that fails (a full disk) leaves none of its files."""
    try:
        heads_digest = None
        if heads is not None:
            _concatenate(heads_parts, heads + ".tmp")
            heads_digest = file_digest(heads + ".tmp")
        _concatenate(trees, output + ".tmp")
        if failures:
            write_text(output + ".failures", "".join(line + "\n" for line in failures), locked=True)
        elif os.path.exists(output + ".failures"):
            os.remove(output + ".failures")  # of an earlier run
        if record is not None:
            # The record names the trees by their digest: one left beside other trees is known as such.
            write_json(record_path(output), record(file_digest(output + ".tmp"), heads_digest, len(failures)),
                       sort_keys=True, locked=True)
        # Written whole, both renamed together: a join that fails leaves the earlier heads beside the earlier trees.
        if heads is not None:
            os.replace(heads + ".tmp", heads)
        os.replace(output + ".tmp", output)
    except BaseException:
        for path in _joined_files(output, heads):
            if os.path.isfile(path):
                os.remove(path)
        raise


def _concatenate(paths: list[str], target: str) -> None:
    with open(target, "wb") as out:
        for path in paths:
            with open(path, "rb") as f:
                shutil.copyfileobj(f, out)


def join_outputs(args: argparse.Namespace) -> None:
    """--join: the outputs of tree-fairseq-parse runs over consecutive parts of one input, joined in
    order as one run over the whole writes them (:func:`_write_joined`): the trees, the heads, the
    failures (their lines counted from the start of the whole; each reason names its part) and one
    record. Each part must be the trees (and heads) its record describes, and the records must
    agree but for the parts' lines, failures and digests (and the --trees file each part aligned):
    one parser, model, version, tree shape and heads made them all."""
    parts, heads_parts = args.join, args.join_heads or []
    records = [_part_record(part) for part in parts]
    first = records[0]
    for part, record in zip(parts[1:], records[1:]):
        shared, other = _shared(first), _shared(record)
        differences = [f"{key}: {shared.get(key)} -> {other.get(key)}"
                       for key in sorted(shared.keys() | other.keys()) if shared.get(key) != other.get(key)]
        if differences:
            raise ValueError(f"--join {part} was parsed otherwise than {parts[0]} ({'; '.join(differences)}): "
                             "parse every part with the same command and installation")
    if "heads" in first and (args.heads is None or len(heads_parts) != len(parts)):
        raise ValueError(f"--join: the parts were parsed with --heads: give their heads files, in the same order, to "
                         f"--join-heads ({len(parts)} files) and the joined file to --heads")
    if "heads" not in first and (args.heads is not None or heads_parts):
        raise ValueError("--join: the parts were parsed without --heads: they have no heads to join")
    for part, path, record in zip(parts, heads_parts, records):
        if not os.path.isfile(path) or file_digest(path) != record["heads"]["blake2b"]:
            raise ValueError(f"--join-heads {path} is not the heads file of the parse of {part} (its record "
                             f"{record_path(part)}): give the parts' heads in the parts' order")
    _check_output(args)
    if args.heads is not None:
        _check_heads_path(args)
    for flag, path in (("--output", args.output), ("--heads", args.heads)):
        if path is not None and any(same_file(path, part) for part in parts + heads_parts):
            raise ValueError(f"{flag} {path} is one of the parts: write the joined file elsewhere")
    _follow_links(args)
    _check_inputs_not_written(args, [("--join", part) for part in parts] +
                              [("--join", record_path(part)) for part in parts] +
                              [("--join-heads", path) for path in heads_parts])
    failures: list[str] = []
    lines = 0
    for part, record in zip(parts, records):
        if record["failures"]:
            with open(part + ".failures", encoding="utf-8") as f:
                failures += [f"{int(number) + lines}\t{reason}"
                             for number, reason in (line.split("\t", 1) for line in f.read().splitlines())]
        lines += record["lines"]

    def record(trees_digest: str, heads_digest: str | None, failed: int) -> dict:
        joined = {**first, "lines": lines, "failures": failed, "trees_blake2b": trees_digest}
        if "heads" in first:
            joined["heads"] = {**first["heads"], "blake2b": heads_digest}
        if "trees" in first:
            joined["trees"] = [record["trees"] for record in records]
        return joined

    with output_lock(args.output, "--output"), \
            (output_lock(args.heads, "--heads") if args.heads is not None else contextlib.nullcontext()):
        _write_joined(args.output, parts, args.heads, heads_parts, failures, record)
    _report_failures(failures, lines, first["on_failure"], args.output)


def _part_record(part: str) -> dict:
    """The record of a part of --join, which must be that of its trees."""
    if not os.path.isfile(part):
        raise ValueError(f"--join {part}: no such file")
    record = read_record(record_path(part))
    if not isinstance(record, dict) or record.get("made_by") != "tree-fairseq-parse":
        raise ValueError(f"--join {part} has no record of tree-fairseq-parse beside it ({record_path(part)}): --join "
                         "joins the outputs of tree-fairseq-parse")
    if record.get("trees_blake2b") != file_digest(part):
        raise ValueError(f"--join {part} is not the trees its record {record_path(part)} describes (edited or "
                         "replaced since its parse)")
    return record


def _shared(record: dict) -> dict:
    """What the records of the parts of one input share: all but each part's own lines, failures,
    digests and --trees file."""
    shared = {key: value for key, value in record.items() if key not in ("lines", "failures", "trees_blake2b", "trees")}
    if isinstance(shared.get("heads"), dict):
        shared["heads"] = {key: value for key, value in shared["heads"].items() if key != "blake2b"}
    return shared


def _report_failures(failures: list[str], total: int, on_failure: str, output: str) -> None:
    if not failures:
        return
    lines = [failure.split("\t", 1)[0] for failure in failures]
    shown = ", ".join(lines[:10]) + (", ..." if len(lines) > 10 else "")
    print(f"tree-fairseq-parse: {len(failures)} of {total} lines ({100 * len(failures) / max(total, 1):.2f}%) "
          f"could not be parsed and got {on_failure} trees over their tokens: lines {shown} "
          f"(all in {output}.failures)", file=sys.stderr)


def _report_lifts(lifted: list[tuple[int, int]], total: int) -> None:
    if not lifted:
        return
    shown = ", ".join(str(line) for line, _ in lifted[:10]) + (", ..." if len(lifted) > 10 else "")
    print(f"tree-fairseq-parse: {sum(count for _, count in lifted)} non-projective arcs lifted to their head's "
          f"head in {len(lifted)} of {total} lines ({100 * len(lifted) / max(total, 1):.2f}%): lines {shown}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
