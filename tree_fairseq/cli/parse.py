"""tree-fairseq-parse: one bracketed tree per line of tokenised text.

Reads ``--input`` (tokenised text, one sentence per line) and writes
``--output``: line k is the normal-form tree of input line k, whose leaves are
exactly that line's tokens (brackets inside tokens written -LRB-/-RRB-), each
under its part-of-speech tag when the parser gives one to every word (stanza,
tagged bracketed input): ``(S (NP (DT the) (NN cat)) (VBD sat))``.

Work is done in chunks of ``--chunk-size`` lines, each kept in
``OUTPUT.parts/`` as soon as it is finished; an interrupted run restarted with
the same command redoes no finished chunk.
"""

import argparse
import json
import logging
import os
import shutil
import sys

from tqdm import tqdm

from tree_fairseq.parsing import PARSERS, BracketedParser, make_parser
from tree_fairseq.trees import TreeError


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tree-fairseq-parse",
        description="Write one bracketed source tree per line of tokenised text "
        "(the {pref}.tree.{src} file that tree-fairseq-preprocess reads).",
    )
    parser.add_argument("--input", required=True, help="tokenised text, one sentence per line")
    parser.add_argument("--output", required=True, help="trees, one per input line")
    parser.add_argument("--parser", choices=PARSERS, default="stanza",
                        help="stanza: stanza's constituency parser; bracketed: existing parser "
                        "output (--trees); balanced/left/right: trivial binary trees")
    parser.add_argument("--lang", help="language code of the text (stanza)")
    parser.add_argument("--trees", help="parser output to align, one bracketed tree per line (bracketed)")
    parser.add_argument("--model-dir", help="where stanza models are kept (default: stanza's)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per parser call (stanza)")
    parser.add_argument("--cpu", action="store_true", help="run stanza on the CPU even with a GPU")
    parser.add_argument("--chunk-size", type=int, default=2000,
                        help="lines per resumable chunk (default 2000)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    # Importing fairseq sets the root logger to DEBUG; parsers log through it.
    logging.basicConfig(level=logging.WARNING, force=True)
    try:
        parse_file(args)
    except (TreeError, ValueError, OSError) as error:
        sys.exit(f"tree-fairseq-parse: error: {error}")


def parse_file(args: argparse.Namespace) -> None:
    parts_dir = args.output + ".parts"
    _check_resumable(parts_dir, args)
    with open(args.input, encoding="utf-8") as f:
        total = sum(1 for _ in f)
    parser = make_parser(args.parser, lang=args.lang, trees=args.trees, model_dir=args.model_dir,
                         batch_size=args.batch_size, use_gpu=False if args.cpu else None)
    with open(args.input, encoding="utf-8") as f, tqdm(total=total, unit="sent", desc="parse") as bar:
        chunk: list[list[str]] = []
        first_line = 1
        for line_number, line in enumerate(f, start=1):
            tokens = line.split()
            if not tokens:
                raise TreeError(f"{args.input}:{line_number}: empty line: no tokens to parse")
            chunk.append(tokens)
            if len(chunk) == args.chunk_size:
                _parse_chunk(parser, chunk, first_line, args, parts_dir)
                bar.update(len(chunk))
                chunk, first_line = [], line_number + 1
        if chunk:
            _parse_chunk(parser, chunk, first_line, args, parts_dir)
            bar.update(len(chunk))
    if isinstance(parser, BracketedParser):
        parser.check_exhausted()
    _join_parts(parts_dir, args.output)


def _parse_chunk(parser, sentences, first_line, args, parts_dir) -> None:
    part = os.path.join(parts_dir, f"{(first_line - 1) // args.chunk_size:08d}.trees")
    if os.path.exists(part):
        return
    trees = parser.parse(sentences, first_line, args.input)
    with open(part + ".tmp", "w", encoding="utf-8") as out:
        out.writelines(tree.to_bracketed() + "\n" for tree in trees)
    os.replace(part + ".tmp", part)


def _check_resumable(parts_dir: str, args: argparse.Namespace) -> None:
    """Finished chunks are reused only when the input and the options that
    decide their content are unchanged."""
    manifest = {"input": _identity(args.input), "trees": args.trees and _identity(args.trees),
                "parser": args.parser, "lang": args.lang, "chunk_size": args.chunk_size}
    path = os.path.join(parts_dir, "manifest.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if json.load(f) == manifest:
                return
        print(f"tree-fairseq-parse: {parts_dir} holds chunks of a run with other input or options; "
              "discarding them", file=sys.stderr)
        shutil.rmtree(parts_dir)
    os.makedirs(parts_dir)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)


def _identity(path: str) -> list:
    stat = os.stat(path)
    return [os.path.abspath(path), stat.st_size, stat.st_mtime_ns]


def _join_parts(parts_dir: str, output: str) -> None:
    parts = sorted(p for p in os.listdir(parts_dir) if p.endswith(".trees"))
    with open(output + ".tmp", "wb") as out:
        for part in parts:
            with open(os.path.join(parts_dir, part), "rb") as f:
                shutil.copyfileobj(f, out)
    os.replace(output + ".tmp", output)
    shutil.rmtree(parts_dir)


if __name__ == "__main__":
    main()
