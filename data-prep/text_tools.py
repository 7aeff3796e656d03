#!/usr/bin/env python3
"""Text steps of the data-prep recipes that Moses does in Perl and the shell does badly:

- ``clean``: Moses' clean-corpus-n.perl (fairseq's recipes run it with ``-ratio 1.5``): drop the
  pairs with an empty side, a side of fewer than ``--min`` or more than ``--max`` tokens, a token
  longer than 1000 characters, or a length ratio above ``--ratio``; whitespace is collapsed. The
  ``--also`` files are parallel to the pair and keep exactly the same lines, unchanged.
  (clean-corpus-n.perl also deletes ``|``, Moses' factor separator; the Moses tokenizer has
  escaped every ``|`` as ``&#124;`` before, so it is not repeated here.)
- ``lowercase``: Moses' lowercase.perl.
- ``spm-train`` / ``spm-encode``: sentencepiece on already tokenised text, with the identity
  normalisation so that the pieces of each line spell its tokens exactly (tree-fairseq-preprocess
  checks this against the trees).
- ``one-line``: standard input (or the FILEs, one after the other) to standard output, every line
  ended by ``\\n`` (a last line without it too, so that files are joined line by line), with every
  character that Python's text reading (and so sacremoses, subword-nmt, our own tools) takes for a
  line break, other than ``\\n``, made a space: a lone CR inside a line of one side would otherwise
  split it there and shift every later pair. Every other whitespace character (tab, no-break space,
  ...) becomes a space too. Run before the first tool that reads lines.
- ``parser-version``: prints the versions a parse step's trees depend on (the parser library and,
  for spaCy, the pipeline package or directory), so that the recipes parse again after an upgrade.
- ``check-text``: stops naming the file and line of such a line break, of whitespace other than the
  space (subword-nmt splits words at spaces only, fairseq and the tree tools at every whitespace
  character, so a no-break space inside a token would make the two disagree on the words), or of
  invalid UTF-8.

Lines are lines ending in ``\\n`` only, for reading and writing. Every output is written to
``OUT.tmp`` and renamed when complete.
"""

import argparse
import json
import os
import re
import sys
from importlib import metadata

MAX_TOKEN_CHARS = 1000
#: Characters other than LF that str.splitlines() (Python's readers of text streams) breaks a line at.
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: Whitespace that str.split() (fairseq, the tree tools) splits at but subword-nmt, which splits at
#: the space only, keeps inside a word.
OTHER_SPACES = "".join(char for char in map(chr, range(0x3000 + 1)) if char.isspace() and char not in LINE_BREAKS + " \n")
AS_SPACES = str.maketrans({char: " " for char in LINE_BREAKS + OTHER_SPACES})


def read_lines(path: str):
    return open(path, encoding="utf-8", newline="\n")


def write_lines(path: str):
    return open(path, "w", encoding="utf-8", newline="\n")


def clean(args) -> None:
    outputs = [args.src_out, args.tgt_out] + args.also[1::2]
    inputs = [read_lines(path) for path in [args.src_in, args.tgt_in] + args.also[0::2]]
    writers = [write_lines(path + ".tmp") for path in outputs]
    kept = total = 0
    for lines in _same_lengths(inputs, [args.src_in, args.tgt_in] + args.also[0::2]):
        total += 1
        src, tgt = (" ".join(line.split()) for line in lines[:2])
        src_len, tgt_len = len(src.split()), len(tgt.split())
        if not src or not tgt or not args.min <= src_len <= args.max or not args.min <= tgt_len <= args.max:
            continue
        if src_len / tgt_len > args.ratio or tgt_len / src_len > args.ratio:
            continue
        if any(len(token) > MAX_TOKEN_CHARS for token in src.split() + tgt.split()):
            continue
        kept += 1
        writers[0].write(src + "\n")
        writers[1].write(tgt + "\n")
        for writer, line in zip(writers[2:], lines[2:]):
            writer.write(line)
    for f in inputs + writers:
        f.close()
    for path in outputs:
        os.replace(path + ".tmp", path)
    print(f"clean: kept {kept} of {total} pairs ({args.min}-{args.max} tokens, ratio <= {args.ratio})")


def _same_lengths(files, paths):
    """zip(files), stopping with a message naming each file and its line count when one ends first."""
    try:
        yield from zip(*files, strict=True)
    except ValueError:
        counts = []
        for path in paths:
            with read_lines(path) as f:
                counts.append(f"{path} has {sum(1 for _ in f)}")
        sys.exit(f"clean: the files are not parallel, {', '.join(counts)} lines")


def lowercase(args) -> None:
    with read_lines(args.input) as f, write_lines(args.output + ".tmp") as out:
        for line in f:
            out.write(line.lower())
    os.replace(args.output + ".tmp", args.output)


def spm_train(args) -> None:
    import sentencepiece as spm

    try:
        spm.SentencePieceTrainer.train(
            input=",".join(args.inputs), model_prefix=args.model_prefix + ".tmp", vocab_size=args.vocab_size,
            model_type=args.model_type, character_coverage=1.0, normalization_rule_name="identity",
            split_by_whitespace=True, input_sentence_size=args.input_sentence_size, shuffle_input_sentence=True,
            bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1, minloglevel=2,
        )
    except RuntimeError as error:  # a vocabulary larger than the text allows: sentencepiece's message says how large
        if "vocab_size" not in str(error) and "Vocabulary size" not in str(error):
            raise
        most = re.search(r"<= *(\d+)", str(error))
        sys.exit(f"spm-train: --bpe-tokens {args.vocab_size} is larger than {' and '.join(args.inputs)} allow"
                 f"{f' (at most {most.group(1)})' if most else ''}: give a smaller --bpe-tokens")
    for suffix in (".model", ".vocab"):
        os.replace(args.model_prefix + ".tmp" + suffix, args.model_prefix + suffix)


def spm_encode(args) -> None:
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=args.model)
    with read_lines(args.input) as f, write_lines(args.output + ".tmp") as out:
        for line in f:
            out.write(" ".join(processor.encode(line.strip(), out_type=str)) + "\n")
    os.replace(args.output + ".tmp", args.output)


def one_line(args) -> None:
    for name in args.files or ["-"]:
        f = sys.stdin.buffer if name == "-" else open(name, "rb")
        where = "standard input" if name == "-" else name
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{where} line {number}: invalid UTF-8 ({error.reason} at byte {error.start})")
            # a last line without its newline ends here, not glued to the next file's first line
            sys.stdout.buffer.write(line.removesuffix("\n").translate(AS_SPACES).encode("utf-8") + b"\n")
        if f is not sys.stdin.buffer:
            f.close()


def check_text(args) -> None:
    for path in map(os.path.realpath, args.files):  # tok/ may link to the user's files: name those
        with open(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(f"{path}, line {number}: invalid UTF-8 ({error.reason} at byte {error.start})")
                breaks = sorted({char for char in line if char in LINE_BREAKS})
                if breaks:
                    names = ", ".join(f"U+{ord(char):04X}" for char in breaks)
                    raise ValueError(
                        f"{path}, line {number}: {names} inside the line, which Python's readers (sacremoses, "
                        "subword-nmt, fairseq) take for a line break, so this side would have more lines than "
                        "the other; replace it by a space (data-prep/text_tools.py one-line < IN > OUT)"
                    )
                body = line.removesuffix("\n")
                spaces = sorted({char for char in body if char in OTHER_SPACES})
                if spaces:
                    names = ", ".join(f"U+{ord(char):04X}" for char in spaces)
                    column = min(body.index(char) for char in spaces) + 1
                    raise ValueError(
                        f"{path}, line {number}, character {column}: whitespace other than the space ({names}: "
                        "tab, no-break space, ...); subword-nmt keeps it inside a word while fairseq and the "
                        "tree tools split the word there, so the sides would disagree on the tokens; replace "
                        "it by a space (data-prep/text_tools.py one-line < IN > OUT)"
                    )


def installed_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def parser_version(args) -> None:
    parts = []
    if args.parser in ("stanza", "spacy"):
        parts.append(f"{args.parser} {installed_version(args.parser)}")
    if args.parser == "spacy" and args.spacy_model:
        meta = os.path.join(args.spacy_model, "meta.json")
        if os.path.isfile(meta):  # a pipeline directory
            with open(meta, encoding="utf-8") as f:
                version = json.load(f).get("version", "unknown")
        else:
            version = installed_version(args.spacy_model)
        parts.append(f"{args.spacy_model} {version}")
    print(" ".join(parts))


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("clean", help="clean-corpus-n.perl on a sentence pair")
    p.add_argument("--src-in", required=True)
    p.add_argument("--tgt-in", required=True)
    p.add_argument("--src-out", required=True)
    p.add_argument("--tgt-out", required=True)
    p.add_argument("--min", type=int, default=1)
    p.add_argument("--max", type=int, required=True)
    p.add_argument("--ratio", type=float, default=1.5)
    p.add_argument("--also", nargs="*", default=[], metavar="IN OUT",
                   help="pairs of parallel files to filter the same way")
    p.set_defaults(run=clean)

    p = commands.add_parser("lowercase", help="lowercase.perl")
    p.add_argument("input")
    p.add_argument("output")
    p.set_defaults(run=lowercase)

    p = commands.add_parser("spm-train", help="train a sentencepiece model on tokenised text")
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--model-prefix", required=True)
    p.add_argument("--vocab-size", type=int, required=True)
    p.add_argument("--model-type", default="bpe", choices=("bpe", "unigram"))
    p.add_argument("--input-sentence-size", type=int, default=2_000_000,
                   help="sentences sampled for training (default 2M)")
    p.set_defaults(run=spm_train)

    p = commands.add_parser("spm-encode", help="sentencepiece pieces of tokenised text")
    p.add_argument("--model", required=True)
    p.add_argument("input")
    p.add_argument("output")
    p.set_defaults(run=spm_encode)

    p = commands.add_parser("one-line", help="stdin to stdout, every line break but LF made a space")
    p.add_argument("files", nargs="*", metavar="FILE", help="read these one after the other, not stdin")
    p.set_defaults(run=one_line)

    p = commands.add_parser("parser-version", help="the versions a parse step's trees depend on")
    p.add_argument("--parser", required=True)
    p.add_argument("--spacy-model", default="")
    p.set_defaults(run=parser_version)

    p = commands.add_parser("check-text", help="stop at a line with a line break inside or invalid UTF-8")
    p.add_argument("files", nargs="+")
    p.set_defaults(run=check_text)
    return parser


def main(argv=None) -> None:
    args = get_parser().parse_args(argv)
    if args.command == "clean" and len(args.also) % 2:
        sys.exit("text_tools.py clean: --also takes pairs IN OUT")
    try:
        args.run(args)
    except ValueError as error:  # zip(strict=True): files of different lengths; bad text
        sys.exit(f"text_tools.py {args.command}: error: {error}")


if __name__ == "__main__":
    main()
