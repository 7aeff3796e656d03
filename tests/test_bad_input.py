"""Bad input and silent losses found by testing the pipeline against what real data and real flags do:
every sentence of a generated split comes back, scores over a subset are refused, unknown node labels
at inference are named, resumed parsing notices edited input, and deep trees, bracket tokens, bad
bytes and parser failures get a clear answer instead of a traceback."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import cli_args, subprocess_env, train_and_generate

from tree_fairseq.tasks import TreeTranslationConfig, TreeTranslationTask

ARCH = "tree_transformer_tiny"
ROOT = Path(__file__).resolve().parents[1]


def load_task(databin, split="valid", combine=False, **overrides):
    cfg = TreeTranslationConfig(data=str(databin), source_lang="de", target_lang="en", dataset_impl="mmap",
                                required_seq_len_multiple=1, **overrides)
    task = TreeTranslationTask.setup_task(cfg)
    task.load_dataset(split, combine=combine)
    return task


def hypothesis_ids(stdout: str) -> list[int]:
    return sorted(int(line.split("\t")[0][2:]) for line in stdout.splitlines() if line.startswith("H-"))


# Every sentence of a generated or validated split is translated


@pytest.fixture(scope="module")
def checkpoint(tiny_databin, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("checkpoint")
    train_and_generate(tiny_databin, save_dir, ARCH, "--share-all-embeddings", max_update=2)
    return save_dir / "checkpoint_last.pt"


def fairseq_generate(databin, checkpoint, *flags, task="tree_translation"):
    return subprocess.run([
        sys.executable, "-m", "fairseq_cli.generate", *cli_args(databin, task), "--path", str(checkpoint),
        "--gen-subset", "test", "--beam", "2", "--max-len-a", "0", "--max-len-b", "5", *flags,
    ], env=subprocess_env(), capture_output=True, text=True)


@pytest.mark.parametrize("flags", [("--batch-size", "1"), ("--max-tokens", "60")])
def test_fairseq_generate_translates_every_sentence_whatever_the_batch_multiple(tiny_databin, checkpoint, flags):
    # fairseq's default --required-batch-size-multiple 8 drops a last batch of another size:
    # with --batch-size 1 the last sentence in length order was never translated.
    result = fairseq_generate(tiny_databin, checkpoint, *flags)
    assert result.returncode == 0, result.stderr[-2000:]
    assert hypothesis_ids(result.stdout) == list(range(40))


# (split, combine, train_subset, sentences batched): fairseq drops the last batch of 1 of the split trained on
# (--train-subset, loaded with combine=True) only; valid loaded with combine=True (--combine-valid-subsets)
# is only evaluated and keeps every sentence.
KEPT_SENTENCES = [("valid", False, None, 40), ("valid", True, None, 40), ("train", True, None, 299),
                  ("train", False, None, 300), ("valid", True, "valid", 39)]


@pytest.mark.parametrize("split,combine,train_subset,expected", KEPT_SENTENCES)
def test_validation_batches_keep_every_sentence_training_batches_are_fairseqs(tiny_databin, split, combine,
                                                                              train_subset, expected):
    overrides = {} if train_subset is None else {"train_subset": train_subset}
    task = load_task(tiny_databin, split=split, combine=combine, **overrides)
    batches = task.get_batch_iterator(task.dataset(split), max_sentences=1, required_batch_size_multiple=8,
                                      max_positions=(1024, 1024)).next_epoch_itr(shuffle=False)
    ids = sorted(i for batch in batches for i in batch["id"].tolist())
    assert len(ids) == expected and len(set(ids)) == len(ids)


@pytest.fixture(scope="module")
def tree_target_databin(tmp_path_factory):
    """Linearised trees as targets (tree_generation's data), 200 training and 20 valid sentences."""
    from test_tree_decoder import write_parse_corpus

    return write_parse_corpus(tmp_path_factory.mktemp("tree_targets"), "depth_first")


@pytest.mark.parametrize("split,combine,train_subset,expected", [
    ("valid", False, None, 20), ("valid", True, None, 20), ("train", True, None, 199), ("train", False, None, 200),
    ("valid", True, "valid", 19)])
def test_tree_generation_keeps_every_sentence_of_an_evaluated_split(tree_target_databin, split, combine,
                                                                    train_subset, expected):
    from fairseq.tasks.translation import TranslationConfig

    from tree_fairseq.tasks.tree_generation import TreeGenerationTask

    overrides = {} if train_subset is None else {"train_subset": train_subset}
    cfg = TranslationConfig(data=str(tree_target_databin), source_lang="words", target_lang="tree",
                            dataset_impl="mmap", required_seq_len_multiple=1, **overrides)
    task = TreeGenerationTask.setup_task(cfg)
    task.load_dataset(split, combine=combine)
    batches = task.get_batch_iterator(task.dataset(split), max_sentences=1, required_batch_size_multiple=8,
                                      max_positions=(1024, 1024)).next_epoch_itr(shuffle=False)
    assert len({i for batch in batches for i in batch["id"].tolist()}) == expected


def test_trees_of_another_text_that_fit_inside_the_sentences_are_refused(tiny_databin, tmp_path):
    """The test text binarised again (here: the valid split's text, as many sentences) beside the test
    split's old tree streams: each tree fits inside its new sentence more often than not, so only the
    root's span tells. Refused at load naming the split, a sentence and the data-bin; the data-bin's own
    splits (with sentences of one piece, which have no node) load."""
    for split in ("train", "valid", "test"):
        for combine in (False, True):
            task = load_task(tiny_databin, split=split, combine=combine)
            assert len(task.dataset(split)) in (300, 40)
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    for ext in ("bin", "idx"):
        shutil.copy(databin / f"valid.de-en.de.{ext}", databin / f"test.de-en.de.{ext}")
    with pytest.raises(ValueError, match=rf"^split 'test' of {re.escape(str(databin))}: sentence \d+ has \d+ pieces "
                                         r"\(EOS not counted\) but (its root spans pieces \d+-\d+|its tree has no "
                                         r"node) \(\d+ such sentences\): the trees are not this text's"):
        load_task(databin, split="test")


def test_root_check_counts_eos_out_and_takes_one_piece_sentences_without_nodes():
    from fairseq.data import ListDataset

    from tree_fairseq.data.tree_pair_dataset import check_roots

    def spans(*sentences):
        items = [torch.tensor(s, dtype=torch.int32).view(-1) for s in sentences]
        return ListDataset(items, sizes=[len(i) for i in items])

    # sizes count EOS: 1 piece (no node), 2 pieces (root 0-1), 3 pieces (a node 0-1 under the root 0-2)
    check_roots([2, 3, 4], spans([], [[0, 1]], [[0, 1], [0, 2]]), "here")
    for sizes, trees in (([2], [[[0, 1]]]), ([3], [[]]), ([4], [[[0, 2], [0, 1]]]), ([5], [[[1, 3]]]),
                         ([5], [[[0, 2]]])):
        with pytest.raises(ValueError, match=r"^here: sentence 0 has \d pieces"):
            check_roots(sizes, spans(*trees), "here")


def test_max_tokens_below_a_sentences_leaves_and_nodes_skips_and_counts_it(tiny_databin, caplog):
    import logging

    task = load_task(tiny_databin)
    dataset = task.dataset("valid")
    sizes = dataset.num_tokens_vec(np.arange(len(dataset)))
    too_big = int((sizes > 30).sum())
    # leaves alone fit: fairseq's own filter (leaves against max_positions) keeps them all
    assert too_big > 0 and (dataset.dataset.src_sizes <= 30).sum() > len(dataset) - too_big
    with pytest.raises(Exception, match=r"Size of sample #\d+ is invalid: \d+ leaves \+ \d+ nodes = \d+ source "
                                        r"tokens .* > --max-tokens 30; skip this example with "
                                        "--skip-invalid-size-inputs-valid-test"):
        task.get_batch_iterator(dataset, max_tokens=30, max_positions=(30, 30))
    task = load_task(tiny_databin)
    with caplog.at_level(logging.WARNING):
        batches = task.get_batch_iterator(task.dataset("valid"), max_tokens=30, max_positions=(30, 30),
                                          ignore_invalid_inputs=True)
    kept = [i for batch in batches.next_epoch_itr(shuffle=False) for i in batch["id"].tolist()]
    assert sorted(kept) == sorted(np.flatnonzero(sizes <= 30).tolist())
    assert f"{too_big} samples have invalid sizes and will be skipped: source leaves + nodes" in caplog.text


# Scores over part of a split are refused


def write_generate_output(path, ids):
    path.write_text("".join(f"S-{i}\tsrc\nT-{i}\tthe cat sat\nH-{i}\t-0.5\tthe cat sat\n" for i in ids))
    return path


def test_score_refuses_a_subset_and_names_the_missing_sentences(tmp_path, tiny_databin):
    from tree_fairseq.cli import score

    output = write_generate_output(tmp_path / "generate-test.txt", [0, 1, 2, 5, 6])
    cover = score.coverage(score.read_generate_ids(str(output)), len(score.split_sources(str(tiny_databin), "test")))
    assert cover == {"scored": 5, "split": 40, "missing": [3, 4] + list(range(7, 40))}
    with pytest.raises(ValueError, match=r"hypotheses for 5 of the 40 sentences of .*: 35 missing \(ids 3, 4, 7, "):
        score.check_coverage(cover, allow_subset=False)
    score.check_coverage(cover, allow_subset=True)
    # without the data-bin, a gap in the ids is still seen
    with pytest.raises(SystemExit, match="hypotheses for 5 of the 7 sentences .* 2 missing \\(ids 3, 4\\)") as exited:
        score.main(["--generate-output", str(output), "--metrics", "tokbleu"])
    # without fairseq-generate's closing line, the file is cut short; --allow-subset is tree-fairseq-score's
    assert (f"{output} is cut short: it lacks fairseq-generate's closing line (\"Generate SUBSET with beam=N: ...\", "
            "written last), so fairseq-generate was stopped, or the file copied, before it finished; a score over a "
            "subset is not the split's score. Translate every sentence, or pass --allow-subset to score the subset, "
            "marked as such") in str(exited.value.code)


def test_score_without_data_bin_refuses_an_output_without_its_closing_line(tmp_path, capsys):
    """Without --data-bin, the ids of an output cut short after its last sentence still ran 0, 1,
    ... without a gap: it was scored as the whole split ("18 of 18"). fairseq-generate's closing
    line is what shows the file whole: without it the output is refused, or with --allow-subset
    scored and marked as perhaps part of the split."""
    from tree_fairseq.cli import score

    output = write_generate_output(tmp_path / "generate-test.txt", range(18))
    with pytest.raises(SystemExit) as exited:
        score.main(["--generate-output", str(output), "--metrics", "tokbleu"])
    assert str(exited.value.code) == (
        f"tree-fairseq-score: error: {output} lacks fairseq-generate's closing line (\"Generate SUBSET with beam=N: "
        "...\", written last), so it may be cut short: its 18 hypotheses (ids 0 to 17) need not be the whole split. "
        "Give --data-bin or --ref (the split's size is checked), or pass --allow-subset to score them, marked as such")
    assert capsys.readouterr().out == ""
    score.main(["--generate-output", str(output), "--metrics", "tokbleu", "--allow-subset"])
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"sentences scored: 18 of 18 (ids 0 to 17 of {output}, which lacks fairseq-generate's closing line: perhaps "
        "part of the split (--allow-subset))")
    with open(output, "a") as f:
        f.write("Generate test with beam=5: BLEU4 = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000)\n")
    score.main(["--generate-output", str(output), "--metrics", "tokbleu"])
    assert capsys.readouterr().out.splitlines()[-1] == f"sentences scored: 18 of 18 (ids 0 to 17 of {output})"


def test_score_refuses_the_output_of_another_split(tmp_path, tiny_databin):
    from tree_fairseq.cli import score

    sources = score.split_sources(str(tiny_databin), "test")
    valid = score.split_sources(str(tiny_databin), "valid")
    assert len(sources) == 40 and "@@" in " ".join(sources)

    references = score.stored_reference(str(tiny_databin), "test").tokenised + ["the cat"] * 2

    def output(texts, ids):  # as fairseq-generate --remove-bpe writes it
        path = tmp_path / "generate.txt"
        path.write_text("".join(f"S-{i}\t{texts[i].replace('@@ ', '')}\nT-{i}\t{references[i]}\nH-{i}\t-0.5\tthe cat\n"
                                for i in ids))
        return str(path)

    def refused(path):
        with pytest.raises(SystemExit) as exit_info:
            score.main(["--generate-output", path, "--metrics", "tokbleu", "--data-bin", str(tiny_databin)])
        return str(exit_info.value.code)

    right = output(sources, range(40))
    score.main(["--generate-output", right, "--metrics", "tokbleu", "--data-bin", str(tiny_databin)])
    assert "has hypotheses for ids 40, 41" in refused(output(sources + valid[:2], range(42)))
    wrong = output(valid + sources, range(40))  # the valid split's sentences under the test ids
    assert f"the source of sentence 0 is {valid[0].replace('@@ ', '')!r}, but sentence 0 of" in refused(wrong)


@pytest.mark.slow
def test_generate_sh_refuses_a_score_over_skipped_sentences(tiny_databin, checkpoint, tmp_path):
    root = subprocess_env()
    command = ["bash", str(ROOT / "scripts" / "generate.sh"), "--metrics", "tokbleu", str(tiny_databin),
               str(checkpoint), str(tmp_path / "out"), "--cpu", "--max-source-positions", "10",
               "--skip-invalid-size-inputs-valid-test", "--beam", "2", "--max-len-a", "0", "--max-len-b", "5"]
    env = {**root, "PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}:{root['PATH']}"}
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert re.search(r"tree-fairseq-score: error: hypotheses for (\d+) of the 40 sentences of .* test: (\d+) missing \(ids ",
                     result.stderr), result.stderr[-2000:]
    result = subprocess.run(command[:4] + ["--allow-subset"] + command[4:], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    scored = int(re.search(r"SUBSET: (\d+) of 40 sentences scored", result.stdout).group(1))
    assert 0 < scored < 40 and f"[SUBSET {scored}/40] tokenised BLEU" in result.stdout
    assert f"sentences scored: {scored} of 40 (the test split of {tiny_databin})" in result.stdout


# Raw-text translation with a parser other than the training data's


def test_inference_parser_labels_unseen_in_training_are_named(tagged_databin, caplog):
    import logging

    from tree_fairseq.data.inference import InferenceTrees

    task = load_task(tagged_databin)
    dataset = task.dataset("valid")
    sources = [dataset[i]["source"] for i in range(len(dataset))]
    # Trees by a parser whose labels the training data (a real parser's: S, NP, VP and tags) lacks.
    trees = InferenceTrees(task.source_dictionary, task.node_dictionary, "balanced")
    with pytest.raises(ValueError, match=r"^the trees of --inference-parser balanced have none of the training data's "
                                         r"node labels: theirs are @BPE, X, the training data's .*NP.*, so every node "
                                         r"would be <unk>. They are likely trees of another kind than the model was "
                                         r"trained on \(its trees are a parser's, not trivial ones: --inference-parser "
                                         r"stanza or spacy\): give --inference-parser the parser the training data was "
                                         r"parsed with, and its --subword-label$"):
        trees.dataset(sources, [len(s) for s in sources])
    # Some labels unseen: counted, one warning with their share, the known ones kept.

    class Relabelling:
        def parse(self, sentences, first_line, source):
            from tree_fairseq.trees import Node, Tree

            return [Tree(tuple(words), (Node("NP", 0, 1), Node("NEWLABEL", 0, len(words) - 1))) for words in sentences]

    trees = InferenceTrees(task.source_dictionary, task.node_dictionary, Relabelling(), subword_label="bpe")
    with caplog.at_level(logging.WARNING):
        trees.dataset(sources, [len(s) for s in sources])
        unknown, seen = sum(trees.labels_unknown.values()), sum(trees.labels_seen.values())
        trees.dataset(sources, [len(s) for s in sources])
    warnings = [r.getMessage() for r in caplog.records if "never seen in training" in r.getMessage()]
    assert len(warnings) == 1
    # per sentence: NP (known), NEWLABEL, and @BPE over each split word (the data-bin has tags there)
    assert trees.labels_unknown["NEWLABEL"] == 2 * len(sources)
    assert unknown == len(sources) + trees.labels_unknown["@BPE"] // 2
    assert trees.labels_seen["NP"] == 2 * len(sources) and "NP" not in trees.labels_unknown
    assert warnings[0].startswith(f"{unknown} of {seen} source node labels ({100 * unknown / seen:.1f}%) were never "
                                  "seen in training and become <unk>: {'@BPE': ")
    assert f"'NEWLABEL': {len(sources)}}}; is --inference-parser (Relabelling) the parser" in warnings[0]


@pytest.fixture(scope="module")
def tagged_databin(tmp_path_factory):
    from conftest import preprocess
    from test_preprocess import write_tagged_corpus

    corpus = tmp_path_factory.mktemp("tagged_corpus")
    for split, size, seed in (("train", 40, 11), ("valid", 12, 12), ("test", 12, 13)):
        write_tagged_corpus(corpus, split, size, seed)
    return preprocess(corpus, tmp_path_factory.mktemp("tagged") / "bin")


# tree-fairseq-parse: resuming, leftovers, options, bytes, brackets, depth, parser failures


def parse_run(tmp_path, *args):
    from tree_fairseq.cli import parse as parse_cli

    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), *args])
    return (tmp_path / "trees").read_text(encoding="utf-8").splitlines()


def parse_error(tmp_path, *args) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse_run(tmp_path, *args)
    return str(exit_info.value.code)


def test_resume_sees_an_edit_that_kept_size_and_time_stamp(tmp_path, monkeypatch):
    import os

    from tree_fairseq.cli import parse as parse_cli
    from tree_fairseq.parsing import TrivialParser

    class Interrupted(Exception):
        pass

    class StopAtLine4(TrivialParser):
        def parse(self, sentences, first_line, source):
            if first_line == 4:
                raise Interrupted
            return super().parse(sentences, first_line, source)

    text = tmp_path / "text"
    text.write_text("a b c\nd e f\ng h i\nj k l\n", encoding="utf-8")
    monkeypatch.setattr(parse_cli, "make_parser", lambda *a, **k: StopAtLine4("left"))
    with pytest.raises(Interrupted):
        parse_run(tmp_path, "--parser", "left", "--chunk-size", "3")
    assert (tmp_path / "trees.parts" / "00000000.trees").exists()
    # Edited in place, same size, time stamp put back (as cp -p, rsync -a and tar do).
    stat = os.stat(text)
    text.write_text("x y z\nd e f\ng h i\nj k l\n", encoding="utf-8")
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(text).st_size == stat.st_size and os.stat(text).st_mtime_ns == stat.st_mtime_ns
    monkeypatch.setattr(parse_cli, "make_parser", lambda *a, **k: TrivialParser("left"))
    lines = parse_run(tmp_path, "--parser", "left", "--chunk-size", "3")
    assert lines[0] == "(X (X x y) z)"  # not the stale "(X (X a b) c)"


def test_leftover_parts_without_a_readable_manifest_do_not_block_the_next_run(tmp_path, capsys):
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    parts = tmp_path / "trees.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text('{"input": [', encoding="utf-8")  # cut short
    (parts / "00000000.trees").write_text("(X stale tree)\n", encoding="utf-8")
    assert parse_run(tmp_path, "--parser", "balanced") == ["(X a b)"]
    (parts).mkdir()  # no manifest at all
    (parts / "00000000.trees.tmp").write_text("(X half", encoding="utf-8")
    assert parse_run(tmp_path, "--parser", "balanced") == ["(X a b)"]
    assert not parts.exists()


@pytest.mark.parametrize("args, message", [
    (("--parser", "bracketed"), "--parser bracketed needs --trees"),
    (("--parser", "stanza"), "--parser stanza needs --lang"),
    (("--parser", "bracketed", "--trees", "{tmp}/absent"), "--trees {tmp}/absent: no such file"),
])
def test_refused_options_leave_nothing_behind(tmp_path, args, message):
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    args = [arg.format(tmp=tmp_path) for arg in args]
    assert message.format(tmp=tmp_path) in parse_error(tmp_path, *args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_chunk_size_must_be_positive(tmp_path, capsys, value):
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        parse_run(tmp_path, "--parser", "balanced", "--chunk-size", value)
    assert exit_info.value.code == 2
    assert "argument --chunk-size: " in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]


def test_a_failed_run_that_finished_no_chunk_leaves_nothing(tmp_path):
    (tmp_path / "text").write_text("a b\n\n", encoding="utf-8")
    assert f"{tmp_path / 'text'}:2: empty line" in parse_error(tmp_path, "--parser", "balanced")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]


def test_bytes_that_are_not_utf8_are_named_with_file_and_line(tmp_path, tiny_corpus):
    (tmp_path / "text").write_bytes("a b\nc d\ncaf\xe9 e\n".encode("latin-1"))
    assert f"{tmp_path / 'text'}:3: not UTF-8: byte 0xe9 at byte 4 of the line" in parse_error(
        tmp_path, "--parser", "balanced")
    (tmp_path / "text").write_text("a b\nc d\n", encoding="utf-8")
    (tmp_path / "parsed").write_bytes(b"(S a b)\n(S c \xff)\n")
    assert f"{tmp_path / 'parsed'}:2: not UTF-8: byte 0xff" in parse_error(
        tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    from conftest import preprocess

    corpus = tmp_path / "corpus"
    import shutil

    shutil.copytree(tiny_corpus, corpus)
    lines = (corpus / "valid.en").read_bytes().split(b"\n")
    lines[4] = b"\x80" + lines[4]
    (corpus / "valid.en").write_bytes(b"\n".join(lines))
    with pytest.raises(SystemExit) as exit_info:
        preprocess(corpus, tmp_path / "bin")
    assert f"{corpus / 'valid.en'}:5: not UTF-8: byte 0x80 at byte 1 of the line" in str(exit_info.value.code)
    assert not (tmp_path / "bin").exists()


def test_tokens_with_brackets_and_entity_tokens_go_through_parse_and_preprocess(tmp_path):
    from conftest import preprocess

    from tree_fairseq.cli import parse as parse_cli

    text = ["f(x) ru@@ ns", "the &amp; sign", "&amp;", "g[y] &#124; a(b", "(x) ) ("]
    words = [line.replace("@@ ", "") for line in text]
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.tok").write_text("".join(w + "\n" for w in words), encoding="utf-8")
        (tmp_path / f"{split}.de").write_text("".join(t + "\n" for t in text), encoding="utf-8")
        (tmp_path / f"{split}.en").write_text("".join(w + "\n" for w in words), encoding="utf-8")
        parse_cli.main(["--input", str(tmp_path / f"{split}.tok"), "--output", str(tmp_path / f"{split}.tree.de"),
                        "--parser", "left"])
    assert (tmp_path / "train.tree.de").read_text().splitlines()[0] == "(X f-LRB-x-RRB- runs)"
    task = load_task(preprocess(tmp_path, tmp_path / "bin"))
    dataset = task.dataset("valid")
    for i, line in enumerate(text):
        pieces = line.split()
        assert [task.src_dict[t] for t in dataset[i]["source"][:-1]] == pieces
        # a left-branching tree over the words, the pieces of runs under their own node
        expected = len(words[i].split()) - 1 + sum(piece.endswith("@@") for piece in pieces)
        assert len(dataset[i]["node_labels"]) == expected


def test_a_tree_deeper_than_the_recursion_limit_parses_binarises_and_batches(tmp_path):
    from conftest import preprocess

    from tree_fairseq.cli import parse as parse_cli
    from tree_fairseq.trees import parse_tree

    n = max(400, sys.getrecursionlimit() + 10)
    words = [f"w{i % 50}" for i in range(n)]
    # A parser's left-branching tree, preterminals included: depth n + 1.
    bracketed = "(ROOT " + "(S " * (n - 1) + "(NN w0) " + " ".join(f"(NN {w}))" for w in words[1:]) + ")"
    tree = parse_tree(bracketed)
    assert len(tree.nodes) == n - 1 and tree.tags == ("NN",) * n
    assert parse_tree(tree.to_bracketed()) == tree
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.tok").write_text(" ".join(words) + "\na b\n", encoding="utf-8")
        (tmp_path / f"{split}.parsed").write_text(bracketed + "\n(S (NN a) (NN b))\n", encoding="utf-8")
        parse_cli.main(["--input", str(tmp_path / f"{split}.tok"), "--output", str(tmp_path / f"{split}.tree.de"),
                        "--parser", "bracketed", "--trees", str(tmp_path / f"{split}.parsed")])
        for side in ("de", "en"):
            (tmp_path / f"{split}.{side}").write_text(" ".join(words) + "\na b\n", encoding="utf-8")
    task = load_task(preprocess(tmp_path, tmp_path / "bin"))
    dataset = task.dataset("valid")
    batch = dataset.collater([dataset[0], dataset[1]])
    spans = batch["net_input"]["src_node_spans"]
    assert spans.shape == (2, n - 1, 2)
    row = batch["id"].tolist().index(0)
    assert sorted(spans[row].tolist()) == sorted([[0, end] for end in range(1, n)])


def test_on_failure_gives_lines_the_parser_gave_up_on_a_trivial_tree(tmp_path, capsys):
    from tree_fairseq.trees import trivial_tree

    text = ["a b c", "d e", "f g h i", "j k", "l m n", "o p"]
    (tmp_path / "text").write_text("".join(line + "\n" for line in text), encoding="utf-8")
    (tmp_path / "parsed").write_text("(S (NP a b) c)\nnull\n( )\n\n(S (NP l m) n\n(S o p)\n", encoding="utf-8")
    trees_flag = ("--parser", "bracketed", "--trees", str(tmp_path / "parsed"))
    message = parse_error(tmp_path, *trees_flag)
    assert f"{tmp_path / 'parsed'}:2: not a bracketed tree: 'null'" in message and "--on-failure" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parsed", "text"]
    lines = parse_run(tmp_path, *trees_flag, "--on-failure", "right", "--chunk-size", "2")
    assert lines == ["(S (NP a b) c)", *(trivial_tree(text[k].split(), "right").to_bracketed() for k in (1, 2, 3, 4)),
                     "(S o p)"]
    failures = (tmp_path / "trees.failures").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in failures] == ["2", "3", "4", "5"]
    assert "not a bracketed tree" in failures[0] and "empty bracket pair" in failures[1]
    assert "empty line" in failures[2] and "unbalanced brackets" in failures[3]
    assert ("tree-fairseq-parse: 4 of 6 lines (66.67%) could not be parsed and got right trees over their tokens: "
            f"lines 2, 3, 4, 5 (all in {tmp_path / 'trees'}.failures)") in capsys.readouterr().err
    # A tree over other words is no parser failure but files that do not belong together.
    (tmp_path / "parsed").write_text("(S a b c)\n(S d x)\n(S f g h i)\n(S j k)\n(S l m n)\n(S o p)\n")
    assert "leaf 2 is 'x' but token 2 is 'e'" in parse_error(tmp_path, *trees_flag, "--on-failure", "balanced")
    # A later clean run removes the old failure list.
    (tmp_path / "parsed").write_text("".join(f"(S {line})\n" for line in text))
    parse_run(tmp_path, *trees_flag, "--on-failure", "balanced")
    assert not (tmp_path / "trees.failures").exists()


def test_console_script_help_names_on_failure():
    result = subprocess.run([sys.executable, "-m", "tree_fairseq.cli.parse", "--help"],
                            capture_output=True, text=True, check=True)
    assert "--on-failure {error,balanced,left,right}" in result.stdout


def test_leaves_that_are_only_entities_of_no_character_align(tmp_path):
    from tree_fairseq.trees import align, parse_tree

    # Moses escapes of blanks canonicalise to nothing: a text of only those has no character to align by.
    tree = align(parse_tree("(X &#32;)"), ["&#32;", "&#32;"])
    assert tree.leaves == ("&#32;", "&#32;") and [(n.start, n.end) for n in tree.nodes] == [(0, 1)]
    (tmp_path / "text").write_text("&#32; &#32;\n&amp;\n", encoding="utf-8")
    (tmp_path / "parsed").write_text("(X &#32;)\n(SYM &)\n", encoding="utf-8")
    assert parse_run(tmp_path, "--parser", "bracketed", "--trees", str(tmp_path / "parsed")) == \
        ["(ROOT &#32; &#32;)", "(ROOT (SYM &amp;))"]


# A model reads node labels as ids of the node dictionary it was trained with


def _resorted_copy(databin, destination):
    """A copy of the data-bin whose node dictionary lists the same labels in another order: every
    node label id of its tree streams now means another label."""
    shutil.copytree(databin, destination)
    path = destination / "dict.de.nodes.txt"
    lines = path.read_text().splitlines()
    assert len(lines) >= 2
    path.write_text("".join(line + "\n" for line in reversed(lines)))
    return destination


@pytest.mark.slow
def test_generation_refuses_a_data_bin_with_another_node_dictionary(tiny_databin, checkpoint, tmp_path):
    assert fairseq_generate(tiny_databin, checkpoint).returncode == 0
    result = fairseq_generate(_resorted_copy(tiny_databin, tmp_path / "resorted"), checkpoint)
    assert result.returncode != 0
    assert (f"the checkpoint was trained with another node dictionary than {tmp_path / 'resorted' / 'dict.de.nodes.txt'}"
            in result.stderr), result.stderr[-2000:]
    # one label more: the node embeddings differ in size; the message says why, before any size mismatch
    larger = shutil.copytree(tiny_databin, tmp_path / "larger")
    with open(larger / "dict.de.nodes.txt", "a") as f:
        f.write("EXTRA 1\n")
    result = fairseq_generate(larger, checkpoint)
    assert result.returncode != 0 and "trained with another node dictionary than" in result.stderr
    assert "size mismatch" not in result.stderr


def test_shards_with_different_node_dictionaries_are_refused(tiny_databin, tmp_path):
    resorted = _resorted_copy(tiny_databin, tmp_path / "shard2")
    with pytest.raises(ValueError, match=f"the shards' node dictionaries differ: {resorted / 'dict.de.nodes.txt'} is not"):
        load_task(f"{tiny_databin}:{resorted}")
    load_task(f"{tiny_databin}:{shutil.copytree(tiny_databin, tmp_path / 'same')}")


def test_every_sentence_too_long_says_nothing_is_left(tiny_databin, tmp_path):
    result = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *cli_args(tiny_databin, "tree_translation"), "--arch", ARCH,
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "1", "--max-source-positions",
        "1", "--skip-invalid-size-inputs-valid-test", "--save-dir", str(tmp_path)], env=subprocess_env(),
        capture_output=True, text=True)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("tree_translation: error: all ") and "nothing is left to train or evaluate on" in last
    assert "Traceback" not in result.stderr


# A checkpoint cut short (a run killed, or a disk that filled up, while it was written or copied),
# or of another model, is named in one line by train.sh, the averaging and generate.sh


def run_script(script, *args):
    env = {**subprocess_env(), "PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(ROOT / "scripts" / script), *map(str, args)], env=env, capture_output=True,
                          text=True)


def cut_short(checkpoint: Path, path: Path) -> str:
    """A copy of the first half of ``checkpoint`` at ``path``; the reason the messages give."""
    size = checkpoint.stat().st_size // 2
    path.write_bytes(checkpoint.read_bytes()[:size])
    return f"{path} is truncated or not a checkpoint (cut short: {size:,} bytes, without the end of its zip archive)"


@pytest.fixture
def save_dir(checkpoint, tmp_path):
    """A SAVE-DIR whose checkpoint_last.pt was cut short, beside a good checkpoint_best.pt."""
    save_dir = tmp_path / "ck"
    save_dir.mkdir()
    shutil.copyfile(checkpoint, save_dir / "checkpoint_best.pt")
    return save_dir


@pytest.mark.slow
def test_train_sh_names_a_checkpoint_cut_short_and_the_one_to_resume_from(tiny_databin, save_dir):
    reason = cut_short(save_dir / "checkpoint_best.pt", save_dir / "checkpoint_last.pt")
    result = run_script("train.sh", "iwslt_tree_transformer", tiny_databin, save_dir, f"model._name={ARCH}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"train.sh: error: {reason}: resume from the newest readable checkpoint (cp {save_dir / 'checkpoint_best.pt'} "
        f"{save_dir / 'checkpoint_last.pt'}), or remove it to train from scratch")
    # damaged inside, its size whole: every member's checksum is checked
    data = bytearray((save_dir / "checkpoint_best.pt").read_bytes())
    data[len(data) // 2: len(data) // 2 + 8] = b"\0" * 8
    (save_dir / "checkpoint_last.pt").write_bytes(data)
    from tree_fairseq.cli.resume_check import check

    assert re.fullmatch(rf"{re.escape(str(save_dir / 'checkpoint_last.pt'))} is truncated or not a checkpoint "
                        r"\(damaged: \S+ fails its checksum\): resume from .*", check(str(save_dir), ["fairseq-train"]))


def test_averaging_names_a_checkpoint_cut_short_and_how_to_average_without_it(save_dir, capsys):
    from tree_fairseq.cli import average_checkpoints

    shutil.copyfile(save_dir / "checkpoint_best.pt", save_dir / "checkpoint1.pt")
    reason = cut_short(save_dir / "checkpoint_best.pt", save_dir / "checkpoint2.pt")
    with pytest.raises(SystemExit) as exit_info:
        average_checkpoints.main(["--inputs", str(save_dir), "--num-epoch-checkpoints", "2",
                                  "--output", str(save_dir / "averaged.pt")])
    assert exit_info.value.code == (f"tree-fairseq-average-checkpoints: error: {reason}: average without it (give "
                                    "the others as --inputs, or stop below it with --checkpoint-upper-bound 1)")
    assert not (save_dir / "averaged.pt").exists()


@pytest.mark.slow
def test_generate_sh_names_a_checkpoint_cut_short_and_another_of_its_run(tiny_databin, save_dir, tmp_path):
    reason = cut_short(save_dir / "checkpoint_best.pt", save_dir / "checkpoint_last.pt")
    result = run_script("generate.sh", tiny_databin, save_dir / "checkpoint_last.pt", tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.strip() == (f"generate.sh: error: {reason}: translate with another checkpoint of its run "
                                     f"({save_dir / 'checkpoint_best.pt'}), or retrain it")


@pytest.mark.slow
def test_generate_sh_names_a_data_bin_of_another_language_pair_not_the_checkpoint(tiny_databin, checkpoint, tmp_path):
    # the helper's error on a data-bin without the checkpoint's target dictionary was swallowed, and
    # generate.sh said "cannot read the task from CHECKPOINT" of a good checkpoint
    other = shutil.copytree(tiny_databin, tmp_path / "de-fr")
    (other / "dict.en.txt").rename(other / "dict.fr.txt")
    result = run_script("generate.sh", other, checkpoint, tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.strip() == (f"generate.sh: error: {other} has no dict.en.txt: {checkpoint} translates into "
                                     "en; give a data-bin of its language pair")


@pytest.mark.slow
def test_train_sh_names_both_models_when_save_dir_holds_another(tiny_databin, save_dir):
    shutil.copyfile(save_dir / "checkpoint_best.pt", save_dir / "checkpoint_last.pt")
    result = run_script("train.sh", "iwslt_lowres_transformer", tiny_databin, save_dir)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"train.sh: error: {save_dir} holds a checkpoint of another architecture: checkpoint_last.pt is {ARCH}, this "
        f"command trains transformer: choose another SAVE-DIR, or move {save_dir}/checkpoint*.pt and train.log away "
        "to train afresh there")
    # the same architecture in other sizes (the config's, not the tiny defaults)
    result = run_script("train.sh", "iwslt_lowres_tree_transformer", tiny_databin, save_dir, f"model._name={ARCH}")
    assert result.returncode == 2
    assert (f"train.sh: error: {save_dir} holds a checkpoint of another model size: checkpoint_last.pt is {ARCH} "
            "with decoder_embed_dim 32, ") in result.stderr
    assert f"this command trains {ARCH} with decoder_embed_dim 256, " in result.stderr
    # the model it holds: nothing to say
    from tree_fairseq.cli.resume_check import check

    assert check(str(save_dir), ["fairseq-train", *cli_args(tiny_databin, "tree_translation"), "--arch", ARCH,
                                 "--share-all-embeddings", "--max-tokens", "500"]) is None


# Messages that point the right way


def test_compressed_input_is_named_as_such(tmp_path):
    import gzip

    from tree_fairseq.cli import parse as parse_cli

    with gzip.open(tmp_path / "train.de.gz", "wt") as f:
        f.write("a b c\n" * 50)
    with pytest.raises(SystemExit) as exit_info:
        parse_cli.main(["--input", str(tmp_path / "train.de.gz"), "--output", str(tmp_path / "trees"),
                        "--parser", "balanced"])
    assert f"{tmp_path / 'train.de.gz'}: gzip-compressed, not text: decompress it first" in str(exit_info.value.code)


def test_a_trailing_blank_line_of_a_trees_file_is_named_as_blank(tmp_path):
    from tree_fairseq.cli import parse as parse_cli

    (tmp_path / "text").write_text("a b\n")
    (tmp_path / "parsed").write_text("(S a b)\n\n")
    with pytest.raises(SystemExit) as exit_info:
        parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"),
                        "--parser", "bracketed", "--trees", str(tmp_path / "parsed")])
    assert f"{tmp_path / 'parsed'}: ends with 1 blank line(s) after line 1, the input's last" in str(exit_info.value.code)


def test_sentencepiece_format_on_subword_nmt_text_says_which_format_it_is(tmp_path):
    from tree_fairseq.cli import preprocess as preprocess_cli

    (tmp_path / "train.de").write_text("ab@@ cd ef\n")
    (tmp_path / "train.en").write_text("x\n")
    (tmp_path / "train.tree.de").write_text("(S abcd ef)\n")
    with pytest.raises(SystemExit) as exit_info:
        preprocess_cli.main(["--source-lang", "de", "--target-lang", "en", "--trainpref", str(tmp_path / "train"),
                             "--destdir", str(tmp_path / "bin"), "--workers", "1", "--subword-format", "sentencepiece"])
    assert "the text is in subword-nmt's format" in str(exit_info.value.code)
    assert "give --subword-format subword_nmt" in str(exit_info.value.code)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_sigterm_ends_preprocess_without_leaving_its_staging_folder_or_lock(tmp_path, workers):
    """SIGTERM (what a scheduler or ``kill`` sends) cleans up as Ctrl-C does, worker processes
    included, and the run ends with SIGTERM's status."""
    import signal
    import time

    lines = ["a b c d e f g h"] * 200000
    for suffix, content in (("de", lines), ("en", lines), ("tree.de", ["(S a b c d e f g h)"] * len(lines))):
        (tmp_path / f"train.{suffix}").write_text("".join(line + "\n" for line in content))
    assert not os.path.exists(tmp_path / "bin.lock")
    run = subprocess.Popen([sys.executable, "-m", "tree_fairseq.cli.preprocess", "--source-lang", "de",
                            "--target-lang", "en", "--trainpref", str(tmp_path / "train"), "--destdir",
                            str(tmp_path / "bin"), "--workers", str(workers)], env=subprocess_env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".bin.partial-*/*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob(".bin.partial-*")), "preprocess never staged"

    def workers_running():
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(run.pid)], capture_output=True, text=True)
        return len(children.stdout.split())

    while workers > 1 and workers_running() < workers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers == 1 or workers_running() >= workers, "the pool's workers never started"
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=120) == -signal.SIGTERM, run.stderr.read()[-2000:]
    assert not list(tmp_path.glob(".bin.partial-*")) and not (tmp_path / "bin.lock").exists()
    assert not (tmp_path / "bin").exists()
    time.sleep(0.5)
    group = subprocess.run(["ps", "-o", "pid=,stat=,cmd=", "-g", str(run.pid)], capture_output=True, text=True).stdout
    alive = [line for line in group.splitlines() if line.split()[1][0] != "Z"]  # an exited child may await its reaper
    assert not alive, f"worker processes outlived the run: {alive}"


def test_sigterm_kills_a_worker_that_ignores_it(tmp_path):
    """A child that does not end on SIGTERM (hung in C, or ignoring it) gets SIGKILL after 10 s of
    SIGTERMs; the clean-ups run and the run ends with SIGTERM's status."""
    import signal
    import time

    program = f"""
import os, signal, time
from tree_fairseq.cli.termination import removed_on_sigterm
os.mkdir({str(tmp_path / "staging")!r})
with removed_on_sigterm({str(tmp_path / "staging")!r}):
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(tmp_path / "child.pid")!r}, "w").write(str(os.getpid()))
        while True:
            time.sleep(1)
    while True:
        time.sleep(1)
"""
    run = subprocess.Popen([sys.executable, "-c", program], env=subprocess_env(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "child.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    child = int((tmp_path / "child.pid").read_text())
    try:
        started = time.monotonic()
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == -signal.SIGTERM, run.stderr.read()[-2000:]
        assert 9 < time.monotonic() - started < 30
        assert not (tmp_path / "staging").exists()
        time.sleep(0.5)
        try:
            with open(f"/proc/{child}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            state = "gone"
        assert state in ("gone", "Z", "X"), f"the child that ignored SIGTERM outlived the run ({state})"
    finally:  # nothing of the test left behind if it fails
        for pid in (child, run.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
