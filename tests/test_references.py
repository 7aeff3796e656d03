"""Scores are taken against the test set itself, never against fairseq-generate's ``T-`` lines
(which print a piece missing from the dictionary as ``<unk>``): tree-fairseq-preprocess keeps each
split's target text in the data-bin (``SPLIT.ref.TGT``), the download recipes the untokenised test
set (``SPLIT.ref.raw.TGT``); tree-fairseq-score, scripts/generate.sh and scripts/publish_results.py
score against them and refuse ``T-`` lines holding ``<unk>`` when nothing else is at hand."""

import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import sacrebleu
from conftest import _pieces, preprocess, write_corpus
from fairseq.data.data_utils import post_process
from helpers import subprocess_env, train_and_generate, write_tokenised_corpus
from sacremoses import MosesDetokenizer, MosesTokenizer

from tree_fairseq.cli import score

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def detok(lines: list[str], lang: str = "en") -> list[str]:
    """Moses detokenisation, as the test computes it (sacremoses, not tree_fairseq's wrapper)."""
    detokenizer = MosesDetokenizer(lang=lang)
    return [detokenizer.detokenize(line.split()) for line in lines]


def corpus_bleu(hyps: list[str], refs: list[str]) -> float:
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def dictionary_words(databin: Path, lang: str = "en") -> set[str]:
    return {line.split()[0] for line in lines_of(databin / f"dict.{lang}.txt")}


def hypotheses(generate_output: str) -> list[str]:
    """The first H- line of each sentence id of fairseq-generate's output, in id order."""
    found = {}
    for line in generate_output.splitlines():
        if line.startswith("H-"):
            fields = line.split("\t")
            found.setdefault(int(fields[0][2:]), fields[2] if len(fields) > 2 else "")
    return [found[i] for i in sorted(found)]


def t_lines(generate_output: str) -> list[str]:
    found = {int(line.split("\t")[0][2:]): line.split("\t")[1] for line in generate_output.splitlines()
             if line.startswith("T-")}
    return [found[i] for i in sorted(found)]


# 1. tree-fairseq-preprocess keeps the target text


def test_preprocess_keeps_each_splits_target_text(tiny_corpus, tiny_databin):
    for split in ("train", "valid", "test"):
        assert (tiny_databin / f"{split}.ref.en").read_bytes() == (tiny_corpus / f"{split}.en").read_bytes(), split
        assert not (tiny_databin / f"{split}.ref.raw.en").exists()  # no recipe gave it a raw reference
        assert not (tiny_databin / f"{split}.ref.de").exists()  # the target side only
    stored = score.stored_reference(str(tiny_databin), "test")
    assert stored.tokenised == lines_of(tiny_corpus / "test.en") and stored.raw is None
    assert stored.source.startswith(f"{tiny_databin / 'test.ref.en'} (subword_nmt pieces removed)")
    assert score.stored_reference(str(tiny_databin), "valid").tokenised == lines_of(tiny_corpus / "valid.en")


def test_stored_reference_removes_the_subword_marks(tiny_corpus, tiny_databin, tmp_path):
    words = lines_of(tiny_corpus / "test.en")
    # subword-nmt pieces, as fairseq-generate --remove-bpe removes them
    bpe = tmp_path / "bpe"
    shutil.copytree(tiny_databin, bpe)
    pieces = [" ".join(piece for word in line.split() for piece in _pieces(word)) for line in words]
    assert any("@@ " in line for line in pieces)
    (bpe / "test.ref.en").write_text("".join(line + "\n" for line in pieces), encoding="utf-8")
    stored = score.stored_reference(str(bpe), "test")
    assert stored.tokenised == words == [post_process(line, "subword_nmt") for line in pieces]
    assert "subword_nmt pieces removed" in stored.source
    # sentencepiece pieces (the dictionary holds ▁ pieces), as --remove-bpe sentencepiece removes them
    spm = tmp_path / "spm"
    shutil.copytree(tiny_databin, spm)
    with open(spm / "dict.en.txt", "a", encoding="utf-8") as f:
        f.write("\u2581ka 1\n")
    spm_pieces = [" ".join("\u2581" + " ".join(part.rstrip("@") for part in _pieces(word)) for word in line.split())
                  for line in words]
    assert spm_pieces[0] != words[0] and "@" not in spm_pieces[0]
    (spm / "test.ref.en").write_text("".join(line + "\n" for line in spm_pieces), encoding="utf-8")
    stored = score.stored_reference(str(spm), "test")
    assert stored.tokenised == words == [post_process(line, "sentencepiece") for line in spm_pieces]
    assert "sentencepiece pieces removed" in stored.source


@pytest.mark.parametrize("line, fmt, words", [
    ("\u2581the \u2581ca t \u2581sat \u2581.", "sentencepiece", "the cat sat ."),
    ("\u2581a b\u2581c \u2581d", "sentencepiece", "ab c d"),
    ("the ca@@ t sat .", "subword_nmt", "the cat sat ."),
    ("ka@@ lo@@ mi ne", "subword_nmt", "kalomi ne"),
])
def test_remove_subwords_is_fairseqs_remove_bpe(line, fmt, words):
    assert score.remove_subwords(line, fmt) == post_process(line, fmt) == words


def test_a_data_bin_raw_reference_of_another_length_is_refused(tiny_databin, tmp_path):
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    (databin / "test.ref.raw.en").write_text("only one line\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"test.ref.raw.en has 1 lines, but .*test.ref.en 40: the reference of "
                                         "another test set"):
        score.stored_reference(str(databin), "test")


def test_a_data_bin_raw_reference_of_another_test_set_is_refused(tiny_databin, tiny_corpus, tmp_path):
    """A raw reference of the right length but another text (a recipe's leftover of an earlier
    test set) was taken as sacreBLEU's reference: a perfect output scored near 0. It must spell
    the tokenised reference's words, as --ref-detok must."""
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    valid = lines_of(tiny_corpus / "valid.en")
    assert len(valid) == 40
    (databin / "test.ref.raw.en").write_text("".join(line + "\n" for line in detok(valid)), encoding="utf-8")
    with pytest.raises(ValueError, match=r"test.ref.raw.en is not the text of .*test.ref.en: 40 of its 40 lines"):
        score.stored_reference(str(databin), "test")
    (databin / "test.ref.raw.en").write_text("".join(line + "\n" for line in detok(lines_of(tiny_corpus / "test.en"))),
                                             encoding="utf-8")
    assert score.stored_reference(str(databin), "test").raw == detok(lines_of(tiny_corpus / "test.en"))


# 2. tree-fairseq-score against the stored text, on a hand-written fairseq-generate output


@pytest.fixture(scope="module")
def generate_output(tiny_corpus, tiny_databin, tmp_path_factory):
    """fairseq-generate --remove-bpe output over the tiny test split, written by hand: T- lines as
    fairseq prints them (a word missing from the dictionary as <<unk>>), hypotheses that are the
    reference with its first word left out on every other sentence, and the closing line
    fairseq-generate writes last (the file is whole). Returns the path, the
    hypotheses, the T- lines and the ids of the sentences whose T- line holds <unk>."""
    sources = [line.replace("@@ ", "") for line in lines_of(tiny_corpus / "test.de")]
    references = lines_of(tiny_corpus / "test.en")
    known = dictionary_words(tiny_databin)
    ts = [" ".join(word if word in known else "<<unk>>" for word in line.split()) for line in references]
    hyps = [" ".join(line.split()[i % 2:]) for i, line in enumerate(references)]
    path = tmp_path_factory.mktemp("generate") / "generate-test.txt"
    order = list(range(len(references)))
    random.Random(1).shuffle(order)  # batch order, as fairseq-generate prints
    path.write_text("".join(f"S-{i}\t{sources[i]}\nT-{i}\t{ts[i]}\nH-{i}\t-0.5\t{hyps[i]}\nD-{i}\t-0.5\t{hyps[i]}\n"
                            for i in order) + "Generate test with beam=5: BLEU4 = 50.00, 70.0/55.0/45.0/35.0\n",
                    encoding="utf-8")
    with_unk = [i for i, line in enumerate(ts) if "<unk>" in line]
    assert 0 < len(with_unk) < len(ts)  # the tiny test set has words the dictionary lacks, and lines without
    return path, hyps, ts, with_unk


def run_score(capsys, *args) -> str:
    score.main(["--metrics", "sacrebleu", "tokbleu", *map(str, args)])
    return capsys.readouterr().out


def refusal(*args) -> str:
    with pytest.raises(SystemExit) as exit_info:
        score.main(["--metrics", "sacrebleu", *map(str, args)])
    message = str(exit_info.value.code)
    assert message.startswith("tree-fairseq-score: error: "), message
    return message


def written_score(capsys, tmp_path, *args) -> tuple[dict, str]:
    out = run_score(capsys, *args, "--json", tmp_path / "score.json")
    return json.loads((tmp_path / "score.json").read_text()), out


def test_score_refuses_t_lines_holding_unk_naming_how_many(generate_output):
    path, _, ts, with_unk = generate_output
    # the console script: a non-zero exit and the message
    result = subprocess.run([BIN / "tree-fairseq-score", "--generate-output", path, "--metrics", "sacrebleu"],
                            capture_output=True, text=True, env=subprocess_env())
    assert result.returncode != 0 and not result.stdout
    assert f"{path}: {len(with_unk)} of the {len(ts)} references (T- lines) hold <unk>" in result.stderr
    assert "--allow-unk-reference" in result.stderr and "--data-bin" in result.stderr


def test_score_against_the_t_lines_only_when_allowed(generate_output, capsys, tmp_path):
    path, hyps, ts, _ = generate_output
    results, out = written_score(capsys, tmp_path, "--generate-output", path, "--allow-unk-reference")
    assert results["sacrebleu"]["score"] == pytest.approx(corpus_bleu(detok(hyps), detok(ts)), abs=1e-9)
    assert f"reference: the T- lines of {path} (--allow-unk-reference)" in out
    assert results["reference"] == f"the T- lines of {path} (--allow-unk-reference)"


def test_score_with_data_bin_is_against_the_stored_test_text(generate_output, tiny_corpus, tiny_databin, capsys,
                                                             tmp_path):
    path, hyps, ts, _ = generate_output
    test_text = lines_of(tiny_corpus / "test.en")
    results, out = written_score(capsys, tmp_path, "--generate-output", path, "--data-bin", tiny_databin)
    expected = corpus_bleu(detok(hyps), detok(test_text))
    assert results["sacrebleu"]["score"] == pytest.approx(expected, abs=1e-9)
    assert expected != pytest.approx(corpus_bleu(detok(hyps), detok(ts)), abs=0.01)  # the T- lines would differ
    assert results["tokbleu"]["score"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [test_text], tokenize="none", force=True).score, abs=1e-9)
    assert re.search(rf"^reference: {re.escape(str(tiny_databin / 'test.ref.en'))} ", out, re.M), out
    assert results["reference"].startswith(str(tiny_databin / "test.ref.en"))
    assert out.splitlines()[-1] == f"sentences scored: 40 of 40 (the test split of {tiny_databin})"


def test_lang_defaults_to_the_data_bins_target_language(generate_output, tiny_corpus, tiny_databin, capsys,
                                                       monkeypatch):
    path = generate_output[0]
    assert score.target_language(str(tiny_databin)) == "en"
    detokenised = []
    real = score.detokenize
    monkeypatch.setattr(score, "detokenize", lambda lines, lang: detokenised.append(lang) or real(lines, lang))
    run_score(capsys, "--generate-output", path, "--data-bin", tiny_databin, "--lang", "fr")
    assert set(detokenised) == {"fr"}
    detokenised.clear()
    run_score(capsys, "--generate-output", path, "--allow-unk-reference")  # no data-bin: English
    assert set(detokenised) == {"en"}
    detokenised.clear()
    monkeypatch.setattr(score, "target_language", lambda data_bin: "de")  # as for a data-bin into German
    run_score(capsys, "--generate-output", path, "--data-bin", tiny_databin, "--ref", tiny_corpus / "test.en")
    assert detokenised and set(detokenised) == {"de"}


def test_a_data_bin_without_its_kept_text_falls_back_to_the_t_lines_and_refuses(generate_output, tiny_corpus,
                                                                                tiny_databin, capsys, tmp_path):
    path, hyps, ts, with_unk = generate_output
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    (databin / "test.ref.en").unlink()
    message = refusal("--generate-output", path, "--data-bin", databin)
    assert f"{len(with_unk)} of the {len(ts)} references (T- lines) hold <unk>" in message
    # --ref FILE: the test set from elsewhere
    reference = tiny_corpus / "test.en"
    results, out = written_score(capsys, tmp_path, "--generate-output", path, "--data-bin", databin,
                                 "--ref", reference)
    assert f"reference: {reference}\n" in out
    assert results["sacrebleu"]["score"] == pytest.approx(corpus_bleu(detok(hyps), detok(lines_of(reference))),
                                                          abs=1e-9)
    # --ref wins over the data-bin's own text too
    other = tmp_path / "other.en"
    other.write_text("".join(" ".join(reversed(line.split())) + "\n" for line in lines_of(reference)))
    message = refusal("--generate-output", path, "--data-bin", tiny_databin, "--ref", other)
    assert "the reference of " + str(other) in message


def test_a_ref_of_another_length_than_the_split_is_refused(generate_output, tiny_corpus, tiny_databin, capsys,
                                                          tmp_path):
    """--ref with more lines than the split was accepted (only one too short was refused): the
    reference of a longer test set scored the output as complete. With --data-bin its lines must be
    the split's sentences; without one they count the split, so an output of fewer sentences (one
    cut short, closing line or not) is a subset, refused unless --allow-subset."""
    path, hyps, _, _ = generate_output
    reference = tiny_corpus / "test.en"
    longer = tmp_path / "longer.en"
    longer.write_text(reference.read_text() + "one more sentence .\n")
    assert refusal("--generate-output", path, "--data-bin", tiny_databin, "--ref", longer) == (
        f"tree-fairseq-score: error: --ref {longer} has 41 lines, but the test split of {tiny_databin} has 40 "
        "sentences: the reference of another test set")
    message = refusal("--generate-output", path, "--ref", longer)
    assert f"hypotheses for 40 of the 41 sentences of --ref {longer}: 1 missing (ids 40)" in message
    results, out = written_score(capsys, tmp_path, "--generate-output", path, "--ref", longer, "--allow-subset")
    assert results["subset"]["missing"] == [40] and results["sentences"]["split"] == 41
    # the whole split, by its --ref: scored, without fairseq-generate's closing line too
    unclosed = tmp_path / "generate-unclosed.txt"
    unclosed.write_text("".join(line + "\n" for line in lines_of(path) if not line.startswith("Generate ")))
    for output in (path, unclosed):
        results, out = written_score(capsys, tmp_path, "--generate-output", output, "--ref", reference)
        assert results["sentences"] == {"scored": 40, "split": 40, "source": f"--ref {reference}"}
        assert "subset" not in results
    cut = tmp_path / "generate-cut.txt"
    cut.write_text("".join(line + "\n" for line in lines_of(path) if not re.match(r"[A-Z]-(39|38)\t", line)))
    message = refusal("--generate-output", cut, "--ref", reference)
    assert f"hypotheses for 38 of the 40 sentences of --ref {reference}: 2 missing (ids 38, 39)" in message


def test_a_ref_given_as_a_pipe_is_read_once(generate_output, tiny_corpus, tiny_databin, tmp_path):
    """--ref was read twice (its line count, then its lines): a pipe (a shell's ``<(...)``) gave
    nothing the second time, and the output was refused as translating sentences --ref lacks."""
    path, _, _, _ = generate_output
    reference = tiny_corpus / "test.en"
    scores = {}
    for name, given in (("file", str(reference)), ("pipe", f"<(cat {reference})")):
        out = tmp_path / f"{name}.json"
        result = subprocess.run(["bash", "-c", f"{BIN / 'tree-fairseq-score'} --generate-output {path} --data-bin "
                                 f"{tiny_databin} --ref {given} --metrics tokbleu --json {out}"],
                                capture_output=True, text=True, env=subprocess_env())
        assert result.returncode == 0, result.stderr
        scores[name] = json.loads(out.read_text())
    assert scores["pipe"]["tokbleu"] == scores["file"]["tokbleu"]
    assert scores["pipe"]["sentences"]["scored"] == 40


def test_a_carriage_return_inside_a_ref_line_is_refused_naming_the_line(generate_output, tiny_corpus,
                                                                         tmp_path):
    """Read in text mode, a lone carriage return split one --ref line in two: without --data-bin
    every later sentence met the reference of the one before. A CRLF line ending is no such
    return (the line reads as without it)."""
    path, _, _, _ = generate_output
    lines = lines_of(tiny_corpus / "test.en")
    split = tmp_path / "split.en"
    split.write_bytes("".join(line.replace(" ", " \r", 1) + "\n" if i == 3 else line + "\n"
                              for i, line in enumerate(lines)).encode())
    message = refusal("--generate-output", path, "--ref", split)
    assert message == (f"tree-fairseq-score: error: {split} line 4 holds a carriage return inside the line: one test "
                       "sentence per line, ended by a newline")
    crlf = tmp_path / "crlf.en"
    crlf.write_bytes("".join(line + "\r\n" for line in lines).encode())
    assert score.read_lines(str(crlf)) == lines


def test_a_stored_text_that_is_not_the_t_lines_is_refused_naming_the_sentence(generate_output, tiny_databin,
                                                                              tmp_path):
    path, _, _, with_unk = generate_output
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    stored = lines_of(databin / "test.ref.en")
    edited = next(i for i in range(len(stored)) if i not in with_unk and len(stored[i].split()) > 1)
    stored[edited] = " ".join(reversed(stored[edited].split()))
    (databin / "test.ref.en").write_text("".join(line + "\n" for line in stored), encoding="utf-8")
    message = refusal("--generate-output", path, "--data-bin", databin)
    assert f"the T- line of sentence {edited} is " in message
    assert f"is {stored[edited]!r}: the stored text is not the split that was translated" in message


def test_output_without_source_lines_needs_a_stored_reference(generate_output, tiny_databin, capsys, tmp_path):
    path, hyps, _, _ = generate_output
    quiet = tmp_path / "generate-quiet.txt"
    quiet.write_text("".join(line + "\n" for line in lines_of(path) if not line.startswith("S-")))
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    (databin / "test.ref.en").unlink()
    message = refusal("--generate-output", quiet, "--data-bin", databin, "--allow-unk-reference")
    assert f"{quiet} has no S- lines and {databin} test keeps no reference text" in message
    # the T- lines match the data-bin's kept text: the output is that split's
    out = run_score(capsys, "--generate-output", quiet, "--data-bin", tiny_databin)
    assert f"reference: {tiny_databin / 'test.ref.en'}" in out


def test_two_runs_concatenated_are_refused(generate_output, tiny_databin, tmp_path):
    path, _, _, _ = generate_output
    twice = tmp_path / "generate-twice.txt"
    twice.write_text(path.read_text() * 2)
    for extra in ([], ["--data-bin", tiny_databin], ["--allow-unk-reference"]):
        message = refusal("--generate-output", twice, *extra)
        assert re.search(r"sentence \d+ has two T- lines: the outputs of two runs concatenated", message), message


def test_score_checks_a_raw_reference_against_the_tokenised_one(generate_output, tiny_corpus, tiny_databin, capsys,
                                                                tmp_path):
    """--ref-detok was taken as it was: the raw text of another test set, or with more lines, was
    scored (a BLEU near 0 reported as the system's). It must have a line per sentence of the split
    and spell the words of the tokenised reference (publish_results' check_raw_reference), with
    --generate-output as with --hyp."""
    path, hyps, _, _ = generate_output
    test_text, valid_text = lines_of(tiny_corpus / "test.en"), lines_of(tiny_corpus / "valid.en")
    raw, other, longer = tmp_path / "test.raw.en", tmp_path / "valid.raw.en", tmp_path / "longer.raw.en"
    raw.write_text("".join(line + "\n" for line in detok(test_text)))
    other.write_text("".join(line + "\n" for line in detok(valid_text)))  # as many lines, other sentences
    longer.write_text(raw.read_text() + "one more sentence .\n")
    common = ("--generate-output", path, "--data-bin", tiny_databin)
    message = refusal(*common, "--ref-detok", other)
    assert (f"--ref-detok {other} is not the text of {tiny_databin / 'test.ref.en'} (subword_nmt pieces removed): "
            "40 of its 40 lines spell other words (line 1: ") in message
    assert refusal(*common, "--ref-detok", longer) == (
        f"tree-fairseq-score: error: --ref-detok {longer} has 41 lines, but the test split of {tiny_databin} has 40 "
        "sentences: the reference of another test set")
    # without --data-bin: checked against --ref, whose lines count the split
    message = refusal("--generate-output", path, "--ref", tiny_corpus / "test.en", "--ref-detok", other)
    assert f"--ref-detok {other} is not the text of {tiny_corpus / 'test.en'}: 40 of its 40 lines" in message
    assert f"--ref-detok {longer} has 41 lines, but --ref {tiny_corpus / 'test.en'} has 40 sentences" in refusal(
        "--generate-output", path, "--ref", tiny_corpus / "test.en", "--ref-detok", longer)
    # --hyp and --ref
    hyp = tmp_path / "hyp.en"
    hyp.write_text("".join(line + "\n" for line in hyps))
    message = refusal("--hyp", hyp, "--ref", tiny_corpus / "test.en", "--ref-detok", other)
    assert f"--ref-detok {other} is not the text of {tiny_corpus / 'test.en'}: 40 of its 40 lines" in message
    assert f"--ref-detok {longer} has 41 lines, but {tiny_corpus / 'test.en'} 40: the reference of another" in refusal(
        "--hyp", hyp, "--ref", tiny_corpus / "test.en", "--ref-detok", longer)
    # the test set's raw text is taken
    results, out = written_score(capsys, tmp_path, *common, "--ref-detok", raw)
    assert results["sacrebleu"]["score"] == pytest.approx(corpus_bleu(detok(hyps), detok(test_text)), abs=1e-9)
    assert f"sacreBLEU against {raw}" in results["reference"]


@pytest.mark.parametrize("metric", ["sacrebleu", "rouge"])
def test_score_refuses_empty_hypotheses_or_references_by_name(metric, tmp_path):
    """Empty --hyp and --ref files were a traceback (sacreBLEU's IndexError, rouge's KeyError on an
    aggregate of nothing); each is refused by name."""
    empty, text = tmp_path / "empty", tmp_path / "text"
    empty.write_text("")
    text.write_text("the cat sat .\n")
    for hyp, ref, named in ((empty, empty, f"--hyp {empty}"), (text, empty, f"--ref {empty}"),
                            (empty, text, f"--hyp {empty}")):
        with pytest.raises(SystemExit) as exit_info:
            score.main(["--hyp", str(hyp), "--ref", str(ref), "--metrics", metric])
        assert str(exit_info.value.code) == f"tree-fairseq-score: error: {named} is empty: no sentence to score"


def test_score_refuses_an_output_that_replaces_an_input_before_scoring(generate_output, tiny_corpus, tiny_databin,
                                                                      capsys, tmp_path):
    """--json and --write-text are checked before anything is scored: one naming an input (the
    generate output, --ref, a file of --data-bin) would replace it, one in a folder that does not
    exist failed (a traceback) only after the scores were printed; each is refused in one line,
    the input left as it was and nothing printed."""
    path = tmp_path / "generate-test.txt"
    shutil.copy(generate_output[0], path)
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    before = path.read_bytes(), (databin / "test.ref.en").read_bytes()
    ref = tmp_path / "test.en"
    shutil.copy(tiny_corpus / "test.en", ref)
    common = ("--generate-output", path, "--data-bin", databin)
    assert refusal(*common, "--json", path) == (
        f"tree-fairseq-score: error: --json {path} is an input (--generate-output {path}): writing it would replace "
        "it; name another file")
    assert refusal(*common, "--json", databin / "test.ref.en") == (
        f"tree-fairseq-score: error: --json {databin / 'test.ref.en'} is a file of --data-bin {databin}: writing it "
        "would replace it; name another file")
    assert refusal(*common, "--json", tmp_path / "nodir" / "s.json") == (
        f"tree-fairseq-score: error: --json {tmp_path / 'nodir' / 's.json'}: no folder {tmp_path / 'nodir'} to "
        "write it in")
    assert refusal(*common, "--json", tmp_path) == (
        f"tree-fairseq-score: error: --json {tmp_path} is a folder: name a file")
    assert refusal(*common, "--json", "") == "tree-fairseq-score: error: --json '': give the file to write"
    prefix = tmp_path / "test"  # --write-text writes test.hyp, test.ref, test.hyp.detok, test.ref.detok
    (tmp_path / "test.ref").write_text("kept\n")
    assert refusal(*common, "--ref", tmp_path / "test.ref", "--write-text", prefix) == (
        f"tree-fairseq-score: error: --write-text {prefix} {prefix}.ref is an input (--ref {tmp_path / 'test.ref'}): "
        "writing it would replace it; name another file")
    assert refusal(*common, "--write-text", prefix, "--json", f"{prefix}.hyp") == (
        f"tree-fairseq-score: error: --json {prefix}.hyp is written by --write-text {prefix} too ({prefix}.hyp): "
        "name two files")
    assert capsys.readouterr().out == ""  # refused before any score was printed
    assert (path.read_bytes(), (databin / "test.ref.en").read_bytes()) == before
    assert (tmp_path / "test.ref").read_text() == "kept\n" and not (tmp_path / "test.hyp").exists()
    # a new file beside the inputs, and in the data-bin's folder, is written
    results, _ = written_score(capsys, databin, *common)
    assert results["sentences"]["scored"] == 40


# 3. End to end: generate.sh and publish_results.py on a data-bin whose test set has unknown pieces


@pytest.fixture(scope="module")
def unk_databin(tmp_path_factory):
    """The tiny corpus with its target side in subword-nmt pieces too, and in every third test
    sentence a word of pieces no training sentence has (missing from the dictionary). Returns the
    text folder and the data-bin."""
    text = tmp_path_factory.mktemp("unk_corpus")
    for split, size, seed in (("train", 300, 1), ("valid", 40, 2), ("test", 40, 3)):
        write_corpus(text, split, size, seed)
        words = lines_of(text / f"{split}.en")
        if split == "test":
            words = [line + (" quixy" if i % 3 == 0 else "") for i, line in enumerate(words)]
        (text / f"{split}.en").write_text(
            "".join(" ".join(piece for word in line.split() for piece in _pieces(word)) + "\n" for line in words),
            encoding="utf-8")
    return text, preprocess(text, tmp_path_factory.mktemp("unk_databin") / "bin")


@pytest.mark.slow
def test_generate_sh_and_publish_score_against_the_test_set(unk_databin, tmp_path):
    text, databin = unk_databin
    assert {"qu@@", "ix@@", "y"} - dictionary_words(databin) == {"qu@@", "ix@@", "y"}
    save_dir = tmp_path / "ck"
    train_and_generate(databin, save_dir, "tree_transformer_tiny", "--inference-parser", "balanced", max_update=2,
                       generate_flags=("--remove-bpe",))
    env = {**subprocess_env(), "PYTHON": sys.executable, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    out = tmp_path / "out"
    result = subprocess.run(["bash", str(ROOT / "scripts" / "generate.sh"), str(databin),
                             str(save_dir / "checkpoint_last.pt"), str(out), "--cpu", "--beam", "2",
                             "--max-len-a", "0", "--max-len-b", "8"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    generated = (out / "generate-test.txt").read_text(encoding="utf-8")
    hyps, ts = hypotheses(generated), t_lines(generated)
    assert len(hyps) == 40
    # fairseq's T- lines are not the test set: its unknown pieces print as <unk>
    assert sum("<unk>" in line for line in ts) == 14
    test_text = detok([post_process(line, "subword_nmt") for line in lines_of(text / "test.en")])
    assert sum("quixy" in line for line in test_text) == 14
    expected = corpus_bleu(detok(hyps), test_text)
    scores = json.loads((out / "score-test.json").read_text())
    assert scores["sacrebleu"]["score"] == pytest.approx(expected, abs=1e-9)
    assert expected > 0 and expected != pytest.approx(corpus_bleu(detok(hyps), detok(ts)), abs=1e-6)
    assert scores["reference"].startswith(f"{databin / 'test.ref.en'} (subword_nmt pieces removed)")
    assert f"reference: {databin / 'test.ref.en'}" in (out / "score-test.txt").read_text()
    # publish_results.py: ref.en is the test set, and the same score
    published = tmp_path / "published"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out", str(published),
                             "--lang", "en", "--data-bin", str(databin), f"model={out / 'generate-test.txt'}"],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert lines_of(published / "ref.en") == test_text
    assert lines_of(published / "model.hyp.en") == detok(hyps)
    summary = json.loads((published / "scores.json").read_text())
    assert summary["systems"]["model"]["score"] == pytest.approx(float(f"{expected:.2f}"), abs=1e-9)
    assert summary["reference"].startswith(str(databin / "test.ref.en"))


# 4. A recipe's download path keeps the raw reference (about 15 s: not marked slow)

TEST_SETS = ["IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011",
             "IWSLT14.TED.tst2012"]
WORDS = ["Haus", "Katze", "gut", "Tag", "Welt", "Zeit", "Mann", "Frau", "Kind", "Weg"]
EN_WORDS = ["House", "cat", "good", "day", "World", "time", "man", "Woman", "child", "way"]


def fake_sentence(rng: random.Random) -> tuple[str, str]:
    """A German sentence and its English one: as many words, capitals, a comma, an apostrophe, a
    quote, a full stop (what Moses tokenisation and lowercasing change)."""
    picks = [rng.randrange(len(WORDS)) for _ in range(rng.randint(2, 6))]
    de = " ".join(WORDS[i] for i in picks)
    en = " ".join(EN_WORDS[i] for i in reversed(picks))
    comma = rng.randrange(len(picks) - 1)
    en_words = en.split()
    en_words[comma] += ","
    de_words = de.split()
    de_words[comma] += ","
    if rng.random() < 0.5:
        return " ".join(de_words) + ".", "It's " + " ".join(en_words) + "."
    return "\u201e" + " ".join(de_words) + "\u201c.", '"' + " ".join(en_words) + '."'


def write_iwslt_archive(archive: Path) -> dict[str, list[str]]:
    """A small de-en.tgz as IWSLT'14's: train transcripts with their metadata lines and tags, and
    the five test sets in xml. Returns the test segments of each language, in TEST_SETS order."""
    rng = random.Random(5)
    files, segments = {}, {"de": [], "en": []}
    train = [fake_sentence(rng) for _ in range(80)]
    for k, lang in enumerate(("de", "en")):
        lines = []
        for j, pair in enumerate(train):
            if j % 20 == 0:
                lines += [f"<url>http://www.ted.com/talks/{j}</url>", f"<keywords>talks, {j}</keywords>",
                          f"<talkid>{j}</talkid>", f"<title>Talk {j}</title>",
                          f"<description>TED talk {j}</description>"]
            lines.append(pair[k])
        files[f"de-en/train.tags.de-en.{lang}"] = "".join(line + "\n" for line in lines)
    for n, stem in enumerate(TEST_SETS):
        pairs = [fake_sentence(rng) for _ in range(2 + n % 2)]
        for k, lang in enumerate(("de", "en")):
            segs = [pair[k] for pair in pairs]
            segments[lang] += segs
            files[f"de-en/{stem}.de-en.{lang}.xml"] = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n'
                f'<{"srcset" if lang == "de" else "refset"} setid="{stem}" srclang="german" trglang="english">\n'
                f'<doc docid="{n}" genre="lectures">\n<url>http://www.ted.com/talks/{n}</url>\n'
                f"<talkid>{n}</talkid>\n<title>Talk {n}</title>\n"
                + "".join(f'<seg id="{i + 1}"> {seg} </seg>\n' for i, seg in enumerate(segs))
                + "</doc>\n</srcset>\n</mteval>\n")
    with tarfile.open(archive, "w:gz") as tar:
        for name, content in files.items():
            data = content.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return segments


def run_iwslt_recipe(work: Path, *flags: str) -> list[str]:
    result = subprocess.run(
        ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--work", str(work), "--parser", "balanced",
         "--bpe-tokens", "30", "--workers", "1", "--directions", "de-en", *flags],
        capture_output=True, text=True, env={**subprocess_env(), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [line[4:] for line in result.stdout.splitlines() if line.startswith("==> ")]


def test_iwslt_download_path_keeps_the_raw_test_reference(tmp_path):
    work = tmp_path / "work"
    (work / "orig").mkdir(parents=True)
    segments = write_iwslt_archive(work / "orig" / "de-en.tgz")  # download() keeps a file that is there
    steps = run_iwslt_recipe(work)
    assert f"have {work / 'orig' / 'de-en.tgz'}" in steps and not any(s.startswith("download") for s in steps)
    databin = work / "data-bin" / "de-en"
    raw = [line.lower() for line in segments["en"]]
    assert len(raw) == 12 and any("it's" in line for line in raw) and any('"' in line for line in raw)
    assert lines_of(work / "raw" / "test.en") == raw
    assert lines_of(databin / "test.ref.raw.en") == raw
    tokenizer = MosesTokenizer(lang="en")
    tokenised = [tokenizer.tokenize(line, return_str=True, escape=True).lower() for line in segments["en"]]
    assert any("&apos;s" in line for line in tokenised)
    assert lines_of(work / "tok" / "test.en") == tokenised
    assert lines_of(databin / "test.ref.en") == lines_of(work / "bpe" / "test.en")
    assert any("@@ " in line for line in lines_of(databin / "test.ref.en"))
    assert [post_process(line, "subword_nmt") for line in lines_of(databin / "test.ref.en")] == tokenised
    # train and valid (every 23rd train pair) have no raw reference: they come from the transcripts
    assert not (databin / "valid.ref.raw.en").exists() and not (databin / "train.ref.raw.en").exists()
    assert lines_of(databin / "valid.ref.en") == lines_of(work / "bpe" / "valid.en")
    # tree-fairseq-score takes the raw text as sacreBLEU's reference
    stored = score.stored_reference(str(databin), "test")
    assert stored.tokenised == tokenised and stored.raw == raw
    assert stored.source.endswith(f"sacreBLEU against {databin / 'test.ref.raw.en'}")
    # resumable: a second run skips every step and leaves the data-bin as it was
    before = {path.name: path.stat().st_mtime_ns for path in databin.iterdir()}
    steps = run_iwslt_recipe(work)
    done = [step for step in steps if not step.startswith(("skip", "have", "done", "iwslt14"))]
    assert done == [], steps
    assert {"skip extract (done)", "skip tokenize-train (done)", "skip tokenize-test (done)",
            "skip binarize-de-en (done)"} <= set(steps)
    assert {path.name: path.stat().st_mtime_ns for path in databin.iterdir()} == before


def test_a_work_of_the_download_and_local_text_by_turns_keeps_nothing_of_the_other(tmp_path):
    """The step markers were keyed on the archive only: a download run after a --local run skipped
    every step and kept the --local text, and a --local run after a download run took the
    download's raw/ test set as the data-bin's sacreBLEU reference (a perfect output scored 1.35).
    WORK/.steps/source records where the text came from; a run from the other starts the steps again."""
    work = tmp_path / "work"
    (work / "orig").mkdir(parents=True)
    segments = write_iwslt_archive(work / "orig" / "de-en.tgz")
    run_iwslt_recipe(work)
    text = tmp_path / "text"
    write_tokenised_corpus(text, sizes=(("train", 60), ("valid", 8), ("test", 12)))  # as many lines as raw/'s
    steps = run_iwslt_recipe(work, "--local", str(text))
    databin = work / "data-bin" / "de-en"
    stored = score.stored_reference(str(databin), "test")
    assert stored.raw is None and [post_process(line, "subword_nmt") for line in stored.tokenised] == lines_of(
        text / "test.en")
    assert not (work / "raw").exists() and (work / "tok" / "train.de").resolve() == text / "train.de"
    assert f"{work} was made from the download, this run is from --local text: tok/, raw/ and the step markers " \
           "cleared (orig/ kept)" in steps
    steps = run_iwslt_recipe(work)
    assert not (work / "tok" / "train.de").is_symlink()
    assert lines_of(databin / "test.ref.raw.en") == [line.lower() for line in segments["en"]]
    assert len(lines_of(databin / "train.ref.en")) != 60 and lines_of(databin / "train.ref.en") == lines_of(
        work / "bpe" / "train.en")
    assert {"tokenize-train", "tokenize-test", "skip extract (done)"} <= set(steps)
    assert f"{work} was made from --local text, this run is from the download: tok/, raw/ and the step markers " \
           "cleared (orig/ kept)" in steps
    # a WORK made before the record resumes from where its tok/ came from
    (work / ".steps" / "source").unlink()
    steps = run_iwslt_recipe(work)
    assert [step for step in steps if not step.startswith(("skip", "have", "done", "iwslt14"))] == [], steps
    assert (work / ".steps" / "source").read_text() == "download"


def test_a_deleted_raw_folder_is_made_again_not_left_out_of_the_data_bin(tmp_path):
    """With raw/ deleted, tokenize-test was skipped as done and binarize, its inputs changed, rebuilt
    the data-bin without test.ref.raw.en: sacreBLEU then scored against the tokenised text. The step
    whose outputs are missing runs again; the data-bin is left as it was."""
    work = tmp_path / "work"
    (work / "orig").mkdir(parents=True)
    write_iwslt_archive(work / "orig" / "de-en.tgz")
    run_iwslt_recipe(work)
    databin = work / "data-bin" / "de-en"
    before = {path.name: path.stat().st_mtime_ns for path in databin.iterdir()}
    shutil.rmtree(work / "raw")
    steps = run_iwslt_recipe(work)
    assert "tokenize-test: done before, but raw/test.de raw/test.en missing: again" in steps
    assert "skip binarize-de-en (done)" in steps
    assert {path.name: path.stat().st_mtime_ns for path in databin.iterdir()} == before
