"""Score translations or summaries: BLEU three ways and ROUGE.

Reads either fairseq-generate's output (``--generate-output``: the first ``H-`` hypothesis and
the ``T-`` reference of each sentence, run fairseq-generate with ``--remove-bpe``) or two files of
tokenised text, one sentence per line (``--hyp``, ``--ref``). Prints one line per metric and
writes them as JSON with ``--json``.

A score over part of a split is not the split's score. fairseq-generate skips sentences without
failing (``--skip-invalid-size-inputs-valid-test`` with ``--max-source-positions`` or ``--max-tokens``,
fairseq's default ``--required-batch-size-multiple 8`` with the stock translation task): with
``--data-bin`` (and ``--subset``) the sentence ids of the output are compared with the split, and
without it the ids must at least run 0, 1, ... without a gap. With ``--data-bin``, the output must
also be of that split: an id the split does not have, or an ``S-`` source line other than the
split's sentence of that id, stops the scoring. Missing sentences stop the scoring,
naming how many and which, unless ``--allow-subset``, which scores them and marks every line (and
the JSON) with the share scored. The last line of the report (``sentences`` in the JSON) always
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
import json
import re
import sys

import numpy as np

METRICS = ("sacrebleu", "tokbleu", "compound", "rouge")
_COMPOUND = re.compile(r"(\S)-(\S)")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tree-fairseq-score",
        description="BLEU (sacreBLEU on detokenised text, tokenised BLEU, compound-split BLEU) and "
        "ROUGE-1/2/L of fairseq-generate output or of a hypothesis file against a reference file.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--generate-output", metavar="FILE",
                        help="fairseq-generate's output (run with --remove-bpe): H- and T- lines")
    source.add_argument("--hyp", metavar="FILE", help="tokenised hypotheses, one per line (with --ref)")
    parser.add_argument("--ref", metavar="FILE", help="tokenised references, one per line (with --hyp)")
    parser.add_argument("--ref-detok", metavar="FILE",
                        help="raw (untokenised) references for sacreBLEU instead of detokenising --ref")
    parser.add_argument("--lang", default="en", help="target language for the Moses detokenizer (default: en)")
    parser.add_argument("--metrics", nargs="+", choices=METRICS, default=["sacrebleu", "tokbleu"],
                        help="what to compute (default: sacrebleu tokbleu)")
    parser.add_argument("--no-stemmer", action="store_true", help="ROUGE without the Porter stemmer")
    parser.add_argument("--seed", type=int, default=1, help="seed of ROUGE's bootstrap interval (default: 1)")
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
    import os

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


def _spelling(text: str) -> str:
    """A sentence's characters without spaces and subword marks, whatever --remove-bpe did."""
    return "".join(text.replace("@@", "").replace("\u2581", "").split())


def check_split(path: str, ids: list[int], sources: list[str], what: str) -> None:
    """Refuse output of another split: an id the split does not have, or an ``S-`` line that is
    not the split's source sentence of that id."""
    outside = [i for i in ids if i >= len(sources)]
    if outside:
        raise ValueError(f"{path} has hypotheses for ids {', '.join(map(str, outside[:10]))}"
                         f"{', ...' if len(outside) > 10 else ''}, but {what} has {len(sources)} sentences "
                         f"(ids 0 to {len(sources) - 1}): it is the output of another split or data-bin")
    for i, text in sorted(read_generate_sources(path).items()):
        if i < len(sources) and _spelling(text) != _spelling(sources[i]):
            raise ValueError(f"{path}: the source of sentence {i} is {text!r}, but sentence {i} of {what} is "
                             f"{sources[i]!r}: the output of another split or data-bin")


def coverage(ids: list[int], size: int | None) -> dict:
    """How many of the split's sentences have a hypothesis: ``scored``, ``split`` (its size, or
    the largest id + 1 when unknown) and the ``missing`` ids."""
    expected = size if size is not None else (max(ids) + 1 if ids else 0)
    present = set(ids)
    return {"scored": len(present & set(range(expected))), "split": expected,
            "missing": [i for i in range(expected) if i not in present]}


def check_coverage(cover: dict, allow_subset: bool, what: str = "the split") -> None:
    """Raise ValueError when sentences are missing, unless ``allow_subset``."""
    missing = cover["missing"]
    if not missing or allow_subset:
        return
    shown = ", ".join(map(str, missing[:20])) + (", ..." if len(missing) > 20 else "")
    raise ValueError(
        f"hypotheses for {cover['scored']} of the {cover['split']} sentences of {what}: {len(missing)} missing "
        f"(ids {shown}). fairseq-generate skipped them (--skip-invalid-size-inputs-valid-test with "
        "--max-source-positions or --max-tokens, or --required-batch-size-multiple with the translation task); "
        "a score over a subset is not the split's score. Translate every sentence, or pass --allow-subset "
        "to score the subset, marked as such")


def subset_note(cover: dict) -> str:
    if not cover["missing"]:
        return ""
    return (f"SUBSET: {cover['scored']} of {cover['split']} sentences scored "
            f"({len(cover['missing'])} missing), not the split's score")


def read_generate_output(path: str) -> tuple[list[str], list[str]]:
    """Hypotheses (the first ``H-`` of each id) and references (``T-``), ordered by sentence id."""
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
            else:
                refs[sentence] = fields[1]
    if not hyps:
        raise ValueError(f"{path}: no H- lines: not fairseq-generate output?")
    if set(hyps) != set(refs):
        raise ValueError(f"{path}: {len(hyps)} hypotheses but {len(refs)} references (T- lines); "
                         "fairseq-generate prints T- only for data with targets")
    order = sorted(hyps)
    return [hyps[i] for i in order], [refs[i] for i in order]


def read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


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
    if any("@@ " in line for line in hyps + refs):
        raise ValueError("the text still holds subword-nmt's '@@ ' joins: run fairseq-generate with --remove-bpe")
    if any("\u2581" in line for line in hyps + refs):
        raise ValueError("the text still holds sentencepiece's \u2581 pieces: run fairseq-generate with "
                         "--remove-bpe sentencepiece (scripts/generate.sh does for a sentencepiece data-bin)")
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
        if args.generate_output:
            hyps, refs = read_generate_output(args.generate_output)
            ids = read_generate_ids(args.generate_output)
            size = None
            if args.data_bin:
                sources = split_sources(args.data_bin, args.subset)
                check_split(args.generate_output, ids, sources, f"{args.data_bin} {args.subset}")
                size = len(sources)
            cover = coverage(ids, size)
            check_coverage(cover, args.allow_subset, f"{args.data_bin} {args.subset}" if args.data_bin
                           else f"{args.generate_output} (ids 0 to {cover['split'] - 1})")
            source = (f"the {args.subset} split of {args.data_bin}" if args.data_bin
                      else f"ids 0 to {cover['split'] - 1} of {args.generate_output}")
            sentences = {"scored": cover["scored"], "split": cover["split"], "source": source}
        else:
            hyps, refs = read_lines(args.hyp), read_lines(args.ref)
            sentences = {"scored": len(hyps), "split": len(refs), "source": f"the lines of {args.ref}"}
        ref_detok = read_lines(args.ref_detok) if args.ref_detok else None
        results = score(hyps, refs, args.metrics, args.lang, ref_detok, not args.no_stemmer, args.seed)
    except (OSError, ValueError) as error:
        sys.exit(f"tree-fairseq-score: error: {error}")
    if args.write_text:
        for suffix, lines in (("hyp", hyps), ("ref", refs), ("hyp.detok", detokenize(hyps, args.lang)),
                              ("ref.detok", ref_detok or detokenize(refs, args.lang))):
            with open(f"{args.write_text}.{suffix}", "w", encoding="utf-8") as out:
                out.writelines(line + "\n" for line in lines)
    if cover and cover["missing"]:
        results["subset"] = cover
    results["sentences"] = sentences
    print(report(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
