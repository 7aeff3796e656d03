"""tree-fairseq-preprocess and the tree_translation task's batches."""

import filecmp
import logging
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from fairseq import options
from fairseq_cli import preprocess as fairseq_preprocess

from conftest import preprocess
from helpers import train_and_generate
from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.data.inference import InferenceTrees
from tree_fairseq.tasks import TreeTranslationConfig, TreeTranslationTask
from tree_fairseq.trees import expand_subwords, parse_tree


def test_text_part_is_what_fairseq_preprocess_writes(tiny_corpus, tiny_databin, tmp_path):
    args = options.get_preprocessing_parser().parse_args([
        "--source-lang", "de", "--target-lang", "en", "--trainpref", str(tiny_corpus / "train"),
        "--validpref", str(tiny_corpus / "valid"), "--testpref", str(tiny_corpus / "test"),
        "--destdir", str(tmp_path), "--joined-dictionary", "--workers", "1"])
    fairseq_preprocess.main(args)
    fairseq_files = sorted(p.name for p in tmp_path.iterdir() if p.name != "preprocess.log")
    assert len(fairseq_files) == 14
    _, mismatch, errors = filecmp.cmpfiles(tmp_path, tiny_databin, fairseq_files, shallow=False)
    assert mismatch == [] and errors == []


def load_task(databin, **overrides):
    overrides = {"dataset_impl": "mmap", **overrides}
    cfg = TreeTranslationConfig(data=str(databin), source_lang="de", target_lang="en", required_seq_len_multiple=1,
                                **overrides)
    task = TreeTranslationTask.setup_task(cfg)
    task.load_dataset("valid")
    return task


def expected_trees(corpus, split):
    texts = (corpus / f"{split}.de").read_text(encoding="utf-8").splitlines()
    trees = (corpus / f"{split}.tree.de").read_text(encoding="utf-8").splitlines()
    return [expand_subwords(parse_tree(tree), text.split(), "subword_nmt") for text, tree in zip(texts, trees)]


@pytest.mark.parametrize("left_pad", [True, False])
def test_batches_carry_trees_over_the_bpe_leaves(tiny_corpus, tiny_databin, left_pad):
    task = load_task(tiny_databin, left_pad_source=left_pad)
    trees = expected_trees(tiny_corpus, "valid")
    dataset = task.dataset("valid")
    batches = task.get_batch_iterator(dataset, max_tokens=200).next_epoch_itr(shuffle=False)
    seen = 0
    pad, eos = task.src_dict.pad(), task.src_dict.eos()
    for batch in batches:
        net_input = batch["net_input"]
        tokens, spans, labels = net_input["src_tokens"], net_input["src_node_spans"], net_input["src_node_labels"]
        assert net_input["src_node_padding_mask"].equal(labels.eq(task.node_dictionary.pad()))
        for b, sentence in enumerate(batch["id"].tolist()):
            tree = trees[sentence]
            leaves = tokens[b][tokens[b].ne(pad)]
            assert leaves[-1] == eos
            assert [task.src_dict[t] for t in leaves[:-1]] == list(tree.leaves)
            first = (tokens.size(1) - len(leaves)) if left_pad else 0
            m = len(tree.nodes)
            assert [task.node_dictionary[x] for x in labels[b, :m]] == [node.label for node in tree.nodes]
            assert spans[b, :m].tolist() == [[node.start + first, node.end + first] for node in tree.nodes]
            # padded nodes lie outside every span and are masked
            assert (spans[b, m:] == -1).all() and net_input["src_node_padding_mask"][b, m:].all()
            seen += 1
    assert seen == len(trees) == 40


def test_max_tokens_counts_leaves_and_nodes(tiny_databin):
    dataset = load_task(tiny_databin).dataset("valid")
    for i in range(len(dataset)):
        pair = dataset.dataset
        assert dataset.num_tokens(i) == max(pair.src_sizes[i] + len(dataset.node_labels[i]), pair.tgt_sizes[i])
    indices = dataset.ordered_indices()
    for batch in dataset.batch_by_size(indices, max_tokens=60):
        assert len(batch) * max(dataset.num_tokens(i) for i in batch) <= 60 or len(batch) == 1
    assert dataset.num_tokens_vec(np.arange(3)).tolist() == [dataset.num_tokens(i) for i in range(3)]


def test_too_long_sentences_get_fairseqs_usual_treatment(tiny_databin, caplog):
    task = load_task(tiny_databin)
    dataset = task.dataset("valid")
    too_long = int((dataset.dataset.src_sizes > 10).sum())
    assert too_long > 0
    indices = dataset.ordered_indices()
    with caplog.at_level(logging.WARNING):
        kept = task.filter_indices_by_size(indices, dataset, max_positions=(10, 1024), ignore_invalid_inputs=True)
    assert len(kept) == len(indices) - too_long
    assert f"{too_long} samples have invalid sizes and will be skipped" in caplog.text
    with pytest.raises(Exception, match="invalid"):
        task.filter_indices_by_size(indices, dataset, max_positions=(10, 1024), ignore_invalid_inputs=False)


def test_truncate_source_is_refused(tiny_databin):
    with pytest.raises(ValueError, match="truncate-source"):
        load_task(tiny_databin, truncate_source=True)


def test_dataset_impl_cached_trains_and_generates(tiny_corpus, tiny_databin, tmp_path):
    """fairseq reads a first batch (the trainer's dummy batch) before it prefetches into --dataset-impl
    cached's cache: without the task filling it, KeyError. fairseq also guesses cached for a data-bin
    binarised with lazy or cached when no --dataset-impl is given (generation below)."""
    databin = preprocess(tiny_corpus, tmp_path / "bin", "--dataset-impl", "cached")
    cached, mmap = load_task(databin, dataset_impl="cached"), load_task(tiny_databin)
    for i in range(len(mmap.dataset("valid"))):
        expected, got = mmap.dataset("valid")[i], cached.dataset("valid")[i]
        assert expected.keys() == got.keys() and expected["id"] == got["id"] == i
        assert all(torch.equal(got[key], expected[key]) for key in expected if key != "id")
    output = train_and_generate(databin, tmp_path / "ck", "tree_transformer_tiny", "--dataset-impl", "cached",
                                max_update=2)
    assert len([line for line in output.splitlines() if line.startswith("H-")]) == 40


def _broken_corpus(tiny_corpus, tmp_path, name, line_number, replacement):
    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_corpus, corpus)
    lines = (corpus / name).read_text(encoding="utf-8").splitlines()
    if replacement is None:
        del lines[line_number - 1]
    else:
        lines[line_number - 1] = replacement
    (corpus / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return corpus


@pytest.mark.parametrize("name, line, replacement, message", [
    ("valid.tree.de", 3, "(X (X a b)", "valid.tree.de:3: unbalanced brackets"),
    ("valid.tree.de", 4, "", "valid.tree.de:4: empty line"),
    ("valid.tree.de", 5, "null", "valid.tree.de:5: not a bracketed tree"),
    ("valid.tree.de", 6, "(X (X zz yy) xx)", "valid.de:6: tree leaves do not match the tokens"),
    ("train.de", 7, "ka@@ lo", "train.de:7: tree leaves do not match the tokens"),
    ("test.tree.de", 40, None, "test.tree.de ended at line 39"),
    ("test.en", 1, None, "test.en ended at line 39"),
])
def test_bad_input_stops_with_file_and_line(tiny_corpus, tmp_path, name, line, replacement, message):
    corpus = _broken_corpus(tiny_corpus, tmp_path, name, line, replacement)
    with pytest.raises(SystemExit) as exit_info:
        preprocess(corpus, tmp_path / "bin")
    assert message in str(exit_info.value.code)


def test_unseen_labels_in_valid_are_counted(tiny_corpus, tmp_path, capsys):
    trees = (tiny_corpus / "valid.tree.de").read_text(encoding="utf-8").splitlines()
    line = next(i for i, tree in enumerate(trees) if len(parse_tree(tree).leaves) > 1)
    relabelled = "(NEWLABEL " + " ".join(parse_tree(trees[line]).leaves) + ")"
    corpus = _broken_corpus(tiny_corpus, tmp_path, "valid.tree.de", line + 1, relabelled)
    preprocess(corpus, tmp_path / "bin")
    assert "valid: 1 nodes have labels unseen in train, mapped to <unk>: {'NEWLABEL': 1}" in capsys.readouterr().out
    task = load_task(tmp_path / "bin")
    assert task.dataset("valid").node_labels[line].tolist()[-1] == task.node_dictionary.unk()  # the root


def _preprocess_error(corpus, destdir, *extra) -> str:
    with pytest.raises(SystemExit) as exit_info:
        preprocess(corpus, destdir, *extra)
    return str(exit_info.value.code)


def test_a_failed_run_leaves_nothing_and_the_same_command_runs_again(tiny_corpus, tmp_path):
    # test.de's last line no longer matches its tree: found after train and valid were written.
    corpus = _broken_corpus(tiny_corpus, tmp_path, "test.de", 40, "zz yy")
    assert "test.de:40: tree leaves do not match the tokens" in _preprocess_error(corpus, tmp_path / "out" / "bin")
    assert list((tmp_path / "out").iterdir()) == []  # no data-bin, no staging folder
    shutil.copy(tiny_corpus / "test.de", corpus / "test.de")
    preprocess(corpus, tmp_path / "out" / "bin")
    assert (tmp_path / "out" / "bin" / "dict.de.nodes.txt").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["bin"]


@pytest.mark.slow
def test_the_next_run_removes_what_a_killed_run_left(tiny_corpus, tmp_path, capsys):
    """SIGKILL gives a run no chance to clean up: its staging folder and lock stay beside --destdir
    until the next run on that --destdir, which removes the one and takes over the other."""
    import os
    import signal
    import time

    from helpers import subprocess_env

    big = tmp_path / "big"
    big.mkdir()
    lines = ["a b c d e f g h"] * 200000
    for suffix, content in (("de", lines), ("en", lines), ("tree.de", ["(S a b c d e f g h)"] * len(lines))):
        (big / f"train.{suffix}").write_text("".join(line + "\n" for line in content))
    run = subprocess.Popen([sys.executable, "-m", "tree_fairseq.cli.preprocess", "--source-lang", "de", "--target-lang",
                            "en", "--trainpref", str(big / "train"), "--destdir", str(tmp_path / "bin"), "--workers",
                            "2"], env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".bin.partial-*/*")) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    [stage] = tmp_path.glob(".bin.partial-*")
    assert (tmp_path / "bin.lock").exists()
    # folders of other destinations beside it stay
    others = [tmp_path / ".bin2.partial-abcd1234", tmp_path / ".bin.partial-x.partial-abcd1234"]
    for other in others:
        other.mkdir()
    preprocess(tiny_corpus, tmp_path / "bin")
    assert (f"removing {stage}, the staging folder of an earlier run on --destdir {tmp_path / 'bin'} that was killed "
            "before it could") in capsys.readouterr().out
    assert not stage.exists() and not (tmp_path / "bin.lock").exists()
    assert (tmp_path / "bin" / "dict.de.nodes.txt").exists() and all(other.exists() for other in others)


def test_a_live_runs_staging_folder_is_never_removed(tiny_corpus, tmp_path):
    import json
    import os
    import socket

    stage = tmp_path / ".bin.partial-abcd1234"
    stage.mkdir()
    # the lock of a run that still runs (this test's own process)
    (tmp_path / "bin.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                                   "started": "now", "command": "tree-fairseq-preprocess"}))
    with pytest.raises(SystemExit, match="is being written by another run"):
        preprocess(tiny_corpus, tmp_path / "bin")
    assert stage.exists()


def test_an_empty_train_file_stops_before_anything_is_written(tiny_corpus, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_corpus, corpus)
    for name in ("train.de", "train.en", "train.tree.de"):
        (corpus / name).write_text("")
    assert f"{corpus / 'train.de'} is empty" in _preprocess_error(corpus, tmp_path / "bin")
    assert not (tmp_path / "bin").exists()


@pytest.mark.parametrize("extra, message", [
    (("--srcdict", "{missing}"), "--srcdict {missing}: not a fairseq dictionary"),
    (("--srcdict", "{corpus}/train.de", "--tgtdict", "{corpus}/train.de"),
     "--joined-dictionary takes --srcdict or --tgtdict, not both"),
    (("--dataset-impl", "huffman"), "--dataset-impl huffman is not supported"),
    (("--target-lang", "de"), "--source-lang and --target-lang are both de"),
])
def test_option_errors_come_before_anything_is_written(tiny_corpus, tmp_path, extra, message):
    values = {"missing": str(tmp_path / "no-such-dict.txt"), "corpus": str(tiny_corpus)}
    extra = [arg.format(**values) for arg in extra]
    assert message.format(**values) in _preprocess_error(tiny_corpus, tmp_path / "bin", *extra)
    assert not (tmp_path / "bin").exists()


def test_a_destination_holding_a_data_bin_is_named(tiny_corpus, tiny_databin, tmp_path):
    destdir = tmp_path / "bin"
    shutil.copytree(tiny_databin, destdir)
    before = sorted(p.name for p in destdir.iterdir())
    assert f"{destdir / 'dict.de.txt'} exists: --destdir holds a data-bin already" in _preprocess_error(tiny_corpus, destdir)
    assert sorted(p.name for p in destdir.iterdir()) == before


def _corpus_with_valid_line(tiny_corpus, tmp_path, text, tree):
    corpus = _broken_corpus(tiny_corpus, tmp_path, "valid.de", 2, text)
    return _broken_corpus(corpus, tmp_path / "second", "valid.tree.de", 2, tree)


def test_trees_over_other_tokens_stop_unless_allowed(tiny_corpus, tmp_path):
    corpus = _corpus_with_valid_line(tiny_corpus, tmp_path, "ka@@ lo mi .", "(S (NP kalo) (VP mi.))")
    message = _preprocess_error(corpus, tmp_path / "bin")
    assert "valid.de:2: tree leaves are the same text in other tokens: leaf 2 is 'mi.' but token 2 is 'mi'" in message
    preprocess(corpus, tmp_path / "bin", "--allow-retokenized-trees")
    task = load_task(tmp_path / "bin")
    spans = task.dataset("valid").node_spans[1].view(-1, 2).tolist()
    assert [2, 3] not in spans and [0, 1] in spans  # the kalo pieces; "mi ." is no constituent


def test_ptb_escapes_are_not_other_tokens(tiny_corpus, tmp_path):
    corpus = _corpus_with_valid_line(tiny_corpus, tmp_path, "ka@@ lo ( mi )", "(S (NP kalo) (PRN -LRB- mi -RRB-))")
    preprocess(corpus, tmp_path / "bin")


def test_unicode_normal_forms_that_differ_are_named(tiny_corpus, tmp_path):
    corpus = _corpus_with_valid_line(tiny_corpus, tmp_path, "caf\u00e9 mi", "(S (NP cafe\u0301) (VP mi))")
    assert "differ only in their Unicode normal form (NFC vs NFD)" in _preprocess_error(corpus, tmp_path / "bin")


@pytest.mark.parametrize("char, name", [("\u00a0", "U+00A0 NO-BREAK SPACE"), ("\t", "U+0009 CHARACTER TABULATION"),
                                        ("\x1f", "U+001F INFORMATION SEPARATOR ONE")])
def test_whitespace_inside_a_word_is_named_with_the_fix_not_retokenised_trees(tiny_corpus, tmp_path, char, name):
    # The tokens 10<NBSP>000 parsed as 10 and 000 (str.split()); subword-nmt kept one word, whose pieces
    # str.split() joins again into 10000.
    corpus = _corpus_with_valid_line(tiny_corpus, tmp_path, f"ka 10@@ {char}000 mi", "(S ka (NP 10 000) mi)")
    message = _preprocess_error(corpus, tmp_path / "bin")
    assert (f"valid.de:2: {name} at character 9, in '<U+{ord(char):04X}>000': tree-fairseq-parse and fairseq "
            "split tokens there but subword-nmt does not") in message, message
    assert "python data-prep/text_tools.py one-line < IN > OUT" in message
    assert "re-tokenised" not in message and "retokenized" not in message


def test_sentencepiece_text_needs_its_format(tiny_corpus, tmp_path):
    corpus = _corpus_with_valid_line(tiny_corpus, tmp_path, "\u2581ka lo \u2581mi", "(S (NP \u2581ka) lo \u2581mi)")
    assert "valid.de:2: a token starts with sentencepiece's \u2581: give --subword-format sentencepiece" in \
        _preprocess_error(corpus, tmp_path / "bin")


def test_a_plain_fairseq_data_bin_says_to_run_tree_fairseq_preprocess(plain_databin):
    with pytest.raises(FileNotFoundError, match="is not a tree data-bin .* make it with tree-fairseq-preprocess"):
        load_task(plain_databin)


@pytest.mark.parametrize("name", ["valid.de-en.de.spans.bin", "valid.de-en.de.nodes.bin"])
def test_a_truncated_tree_stream_is_named(tiny_databin, tmp_path, name):
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    with open(databin / name, "r+b") as f:
        f.truncate(f.seek(0, 2) // 2)
    with pytest.raises(ValueError, match=f"{databin / name} holds .* bytes but its index .* describes"):
        load_task(databin)


@pytest.mark.parametrize("keep", [10, 100])  # cut in the header, cut in the sizes
def test_a_truncated_index_is_named_without_an_error_at_exit(tiny_databin, tmp_path, keep):
    databin = tmp_path / "bin"
    shutil.copytree(tiny_databin, databin)
    with open(databin / "valid.de-en.de.nodes.idx", "r+b") as f:
        f.truncate(keep)
    code = ("import sys\nfrom test_preprocess import load_task\ntry:\n    load_task(sys.argv[1])\n"
            "except ValueError as error:\n    print(error)\n")
    result = subprocess.run([sys.executable, "-c", code, str(databin)], capture_output=True, text=True,
                            cwd=Path(__file__).parent)
    assert f"{databin / 'valid.de-en.de.nodes.idx'} cannot be read" in result.stdout, result.stdout + result.stderr
    assert "Exception ignored" not in result.stderr and "AttributeError" not in result.stderr


def test_one_word_sentences_make_a_data_bin_that_trains(tmp_path):
    for split in ("train", "valid", "test"):
        words = [f"w{i % 7}" for i in range(20)]
        for suffix, lines in (("de", words), ("en", words), ("tree.de", [f"(X {w})" for w in words])):
            (tmp_path / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines))
    databin = tmp_path / "bin"
    preprocess_cli.main(["--source-lang", "de", "--target-lang", "en", "--trainpref", str(tmp_path / "train"),
                         "--validpref", str(tmp_path / "valid"), "--testpref", str(tmp_path / "test"),
                         "--destdir", str(databin), "--workers", "1"])
    assert (databin / "train.de-en.de.nodes.bin").stat().st_size == 0  # not a single node
    output = train_and_generate(databin, tmp_path / "ck", "tree_transformer_tiny", "--inference-parser", "balanced")
    assert len([line for line in output.splitlines() if line.startswith("H-")]) == 20


def test_a_model_without_trees_is_refused_by_the_tree_task_in_one_line(tiny_databin):
    task = load_task(tiny_databin)
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tiny_databin), "--task", "tree_translation", "--arch", "transformer"])
    with pytest.raises(ValueError, match="--arch transformer reads no source trees .* --task translation"):
        task.build_model(args)


# The node over the BPE pieces of a word is labelled with the word's part-of-speech tag
# (Nguyen et al., ICLR 2020, appendix 7.4), @BPE where the tree has no tags.


def write_tagged_corpus(directory, split, num_sentences, seed):
    """Parser-style trees with every word under its tag: ``(ROOT (S (NP (DT the) (NN noun)) (VP
    (VBZ verb) (ADVP (RB adverb))) (. .)))``, words of 1-3 two-letter pieces. Returns, per
    sentence, the words and their tags."""
    rng = random.Random(seed)
    sentences, bpe_lines, target_lines, tree_lines = [], [], [], []
    for _ in range(num_sentences):
        noun, verb, adverb = ("".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(3))
        words, tags = ["the", noun, verb, adverb, "."], ["DT", "NN", "VBZ", "RB", "."]
        sentences.append((words, tags))
        tree_lines.append(f"(ROOT (S (NP (DT the) (NN {noun})) (VP (VBZ {verb}) (ADVP (RB {adverb}))) (. .)))")
        bpe_lines.append(" ".join(piece for word in words for piece in two_letter_pieces(word)))
        target_lines.append(" ".join(reversed(words)))
    for suffix, lines in (("de", bpe_lines), ("en", target_lines), ("tree.de", tree_lines)):
        (directory / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return sentences


SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta"]


def two_letter_pieces(word):
    parts = [word[i:i + 2] for i in range(0, len(word), 2)]
    return [part + "@@" for part in parts[:-1]] + parts[-1:]


def nodes_by_hand(words, tags, subword_label):
    """(label, first piece, last piece) of the data-bin's nodes, bottom-up: a node over the pieces
    of every word of >= 2 pieces (its tag, or @BPE), then NP (the, noun), VP (verb, adverb), S."""
    first, last, position = [], [], 0
    for word in words:
        first.append(position)
        position += len(two_letter_pieces(word))
        last.append(position - 1)
    nodes = [(tag if subword_label == "pos" else "@BPE", first[k], last[k])
             for k, tag in enumerate(tags) if last[k] > first[k]]
    nodes += [("NP", first[0], last[1]), ("VP", first[2], last[3]), ("S", first[0], last[4])]
    return sorted(nodes, key=lambda node: (node[2], -node[1]))


@pytest.fixture(scope="module")
def tagged_corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tagged_corpus")
    sentences = {split: write_tagged_corpus(directory, split, size, seed)
                 for split, size, seed in (("train", 40, 11), ("valid", 12, 12), ("test", 12, 13))}
    return directory, sentences


@pytest.mark.parametrize("subword_label", ["pos", "bpe"])
def test_subword_nodes_carry_the_part_of_speech(tagged_corpus, tmp_path, subword_label):
    corpus, sentences = tagged_corpus
    flags = () if subword_label == "pos" else ("--subword-label", "bpe")
    task = load_task(preprocess(corpus, tmp_path / "bin", *flags))
    dataset = task.dataset("valid")
    labels_in_dictionary = set(task.node_dictionary.symbols[task.node_dictionary.nspecial:])
    if subword_label == "pos":
        assert {"NN", "VBZ", "RB"} <= labels_in_dictionary and "@BPE" not in labels_in_dictionary
    else:
        assert "@BPE" in labels_in_dictionary and not {"NN", "VBZ", "RB", "DT"} & labels_in_dictionary
    split_words = 0
    for i, (words, tags) in enumerate(sentences["valid"]):
        labels = [task.node_dictionary[x] for x in dataset.node_labels[i].tolist()]
        spans = dataset.node_spans[i].view(-1, 2).tolist()
        assert [(label, s, e) for label, (s, e) in zip(labels, spans)] == nodes_by_hand(words, tags, subword_label)
        split_words += sum(len(two_letter_pieces(word)) >= 3 for word in words)
    assert split_words > 0  # some word of three pieces


def test_trees_without_tags_label_subword_nodes_bpe(tiny_databin):
    task = load_task(tiny_databin)  # balanced trees over the words: no tags
    assert set(task.node_dictionary.symbols[task.node_dictionary.nspecial:]) == {"X", "@BPE"}


class _TreeFileParser:
    """A parser that answers with the trees of a tree file (the parser of raw-text translation)."""

    def __init__(self, path):
        trees = [parse_tree(line) for line in path.read_text(encoding="utf-8").splitlines()]
        self.tree_of = {tree.leaves: tree for tree in trees}

    def parse(self, sentences, first_line, source):
        return [self.tree_of[tuple(tokens)] for tokens in sentences]


@pytest.mark.parametrize("subword_label", ["pos", "bpe"])
def test_raw_text_translation_labels_subword_nodes_as_preprocess(tagged_corpus, tmp_path, subword_label):
    corpus, _ = tagged_corpus
    task = load_task(preprocess(corpus, tmp_path / "bin", "--subword-label", subword_label),
                     subword_label=subword_label)
    assert task.inference_trees.subword_label == subword_label
    dataset = task.dataset("valid")
    sources = [dataset[i]["source"] for i in range(len(dataset))]
    trees = InferenceTrees(task.source_dictionary, task.node_dictionary, _TreeFileParser(corpus / "valid.tree.de"),
                           subword_label=subword_label)
    inference = trees.dataset(sources, [len(s) for s in sources], task.target_dictionary)
    for i in range(len(dataset)):
        assert torch.equal(inference[i]["node_labels"], dataset[i]["node_labels"].long())
        assert torch.equal(inference[i]["node_spans"], dataset[i]["node_spans"].long())
