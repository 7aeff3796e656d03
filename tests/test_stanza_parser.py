"""stanza's constituency parser behind tree-fairseq-parse and raw-text translation. A real
``stanza.Pipeline`` runs offline on the ``stanza_models`` fixture, a tiny English tagger and parser
trained for the session by stanza's own trainers (``tests/stanza_models.py``)."""

import json
import random
import shutil
import time

import pytest

stanza = pytest.importorskip("stanza")

from stanza.models.common.doc import Document  # noqa: E402
from stanza.models.constituency.tree_reader import read_trees  # noqa: E402

from fairseq import options, tasks  # noqa: E402
from helpers import TREE_KEYS, USER_DIR, check_inference_sources  # noqa: E402
from stanza_models import with_second_package  # noqa: E402

from tree_fairseq.cli import parse as parse_cli  # noqa: E402
from tree_fairseq.cli import preprocess as preprocess_cli  # noqa: E402
from tree_fairseq.parsing import stanza_parser  # noqa: E402
from tree_fairseq.parsing.stanza_parser import StanzaParser, document_trees, raw_tree  # noqa: E402
from tree_fairseq.trees import TreeError, normalize, parse_tree, trivial_tree, unescape  # noqa: E402


@pytest.mark.parametrize("bracketed, leaves, spans", [
    (  # ROOT wrapper and -LRB-/-RRB-, which stanza's reader turns back into brackets
        "(ROOT (S (NP (PRP He)) (VP (VBD said) (NP (-LRB- -LRB-) (NN hi) (-RRB- -RRB-))) (. .)))",
        ("He", "said", "(", "hi", ")", "."),
        [("NP", 2, 4), ("VP", 1, 4), ("S", 0, 5)],
    ),
    (  # a one-word VP and preterminals vanish
        "(ROOT (S (NP (NP (DT The) (NN cat)) (PP (IN on) (NP (DT the) (NN mat)))) (VP (VBD sat)) (. .)))",
        ("The", "cat", "on", "the", "mat", "sat", "."),
        [("NP", 0, 1), ("NP", 3, 4), ("PP", 2, 4), ("NP", 0, 4), ("S", 0, 6)],
    ),
    (  # German (SPMRL labels, STTS punctuation tags)
        "(ROOT (S (PPER Er) (VVFIN geht) (PP (APPRART zum) (NN Bahnhof)) ($, ,) "
        "(S (KOUS weil) (PPER es) (VVFIN regnet)) ($. .)))",
        ("Er", "geht", "zum", "Bahnhof", ",", "weil", "es", "regnet", "."),
        [("PP", 2, 3), ("S", 5, 7), ("S", 0, 8)],
    ),
    (  # a one-word sentence has no nodes
        "(ROOT (NP (UH Hello)))",
        ("Hello",),
        [],
    ),
])
def test_stanza_tree_to_normal_form(bracketed, leaves, spans):
    [stanza_tree] = read_trees(bracketed, use_tqdm=False)
    tree = normalize([raw_tree(stanza_tree)])
    tree.check()
    assert tree.leaves == leaves
    assert [(node.label, node.start, node.end) for node in tree.nodes] == spans


def _spans(tree):
    return [(node.label, node.start, node.end) for node in tree.nodes]


def test_stanza_labels_of_every_character_class_survive_writing_and_reading():
    """A stand-in tree, since no tiny model can give labels of every kind: a model reading XPOS tags
    may give German STTS's $( (quotes, brackets), and a label may hold any character."""
    from stanza.models.constituency.parse_tree import Tree as StanzaTree

    from tree_fairseq.trees import parse_tree

    tags = ["$(", "NN SBJ", "a\tb", "N)P", "x\u00a0y", "%", "名詞-普通名詞-一般", "ÄÖ", "$."]
    words = ["(", "ja", "b", ")", "y", "%", "nein", "ö", "."]
    stanza_tree = StanzaTree("ROOT", [StanzaTree("S-TPC", [
        StanzaTree("X Y", [StanzaTree(tag, [StanzaTree(word)]) for tag, word in zip(tags[:4], words[:4])]),
        *(StanzaTree(tag, [StanzaTree(word)]) for tag, word in zip(tags[4:], words[4:]))])])
    document = Document([[{"id": (i + 1,), "text": word} for i, word in enumerate(words)]])
    document.sentences[0].constituency = stanza_tree
    tokens = "-LRB- ja b -RRB- y % nein ö .".split()
    tree, = document_trees(document.sentences, [tokens], first_line=1, source="text")
    # stanza's labels are a treebank's: what follows a '-' is a function tag, cut as in bracketed input
    assert tree.tags == tuple(tag.split("-")[0] for tag in tags) and _spans(tree) == [("X Y", 0, 3), ("S", 0, 8)]
    line = tree.to_bracketed()
    assert line.startswith("(S (X%20Y ($%28 -LRB-) (NN%20SBJ ja) (a%09b b) (N%29P -RRB-))")
    read = parse_tree(line)
    assert read == tree and read.tags == tree.tags and _spans(read) == _spans(tree)


def test_document_trees_name_the_input_line_of_a_mismatch():
    """A stand-in sentence: stanza's pipeline gives its tree over the words it was given, so no real
    one is over other words than its line; the check names the line all the same."""
    document = Document([[{"id": (i + 1,), "text": word} for i, word in enumerate("Er geht zum Zug .".split())]])
    [document.sentences[0].constituency] = read_trees(
        "(ROOT (S (PPER Er) (VVFIN geht) (PP (APPRART zum) (NN Zug)) ($. .)))", use_tqdm=False)
    with pytest.raises(TreeError, match="^talk.de:8: tree leaves do not match the tokens"):
        document_trees(document.sentences, ["Er geht zum Bahnhof .".split()], first_line=8, source="talk.de")


def test_missing_models_fail_fast_with_the_download_command(tmp_path, monkeypatch):
    # A closed local port stands for "no network", so no test run ever downloads.
    monkeypatch.setattr(stanza_parser, "DEFAULT_RESOURCES_URL", "http://127.0.0.1:9")
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        StanzaParser("de", model_dir=str(tmp_path), use_gpu=False)
    assert time.monotonic() - start < 30
    message = str(error.value)
    assert "language 'de'" in message and str(tmp_path) in message
    command = next(line.strip() for line in message.splitlines() if "stanza.download" in line)
    assert command.startswith('python -c "') and command.endswith('"')
    compile(command[len('python -c "'):-1], "<command>", "exec")  # a valid Python line


@pytest.mark.parametrize("lang", ["xx", "fr", "Klingon"])
def test_a_language_without_a_constituency_parser_is_named_before_any_download(tmp_path, monkeypatch, lang):
    def no_download(*args, **kwargs):
        raise AssertionError("looked for models of a language stanza cannot parse")
    monkeypatch.setattr(stanza_parser, "download_models", no_download)
    monkeypatch.setattr(stanza_parser, "_load_pipeline", no_download)
    with pytest.raises(ValueError, match=f"no constituency parser for language '{lang}'; it has one for da, de, en"):
        StanzaParser(lang, model_dir=str(tmp_path), use_gpu=False)
    for known in ("de", "German", "zh"):
        stanza_parser.check_language(known)


# A real pipeline: the tiny English model


def _long_line(num_words: int) -> str:
    rng = random.Random(5)
    words = "the a man cat saw took in on with old small garden book city and .".split()
    return " ".join(rng.choice(words) for _ in range(num_words - 1)) + " ."


# Tokenised as Moses escapes it (&apos; &quot; &amp;), PTB's bracket escapes and plain brackets,
# one-word lines, a 100-word line: lines of many lengths, which stanza sorts by length to batch them.
TEXT = [
    "the old man saw a cat in the garden .",
    "he said that Mary &apos;s dog slept .",
    "&quot; London &quot; is a city .",
    "Paris",
    "John -LRB- a man -RRB- took two books .",
    "the dog ( a small dog ) ran near the house .",
    _long_line(100),
    "cats &amp; dogs slept .",
    "they",
    "we found it .",
    "every happy man will read this new book with John .",
    "she wrote that the cat &apos;s film was old , and they liked it .",
]


def _leaves(line: str) -> tuple[str, ...]:
    """The leaves tree-fairseq-parse writes for a line: its tokens, brackets written -LRB-/-RRB-."""
    return tuple(line.replace("(", "-LRB-").replace(")", "-RRB-").split())


def _parse_cli(tmp_path, models, lines, *args, name="trees"):
    (tmp_path / "text").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / name), "--parser", "stanza",
                    "--lang", "en", "--model-dir", str(models), "--cpu", *args])
    return (tmp_path / name).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def stanza_trees(stanza_models, tmp_path_factory):
    """TEXT through tree-fairseq-parse --parser stanza, three sentences per stanza batch."""
    return _parse_cli(tmp_path_factory.mktemp("stanza_trees"), stanza_models, TEXT, "--batch-size", "3")


def _alone(models, line: str) -> str:
    """The line parsed alone by the pipeline, as tree-fairseq-parse writes it."""
    parser = StanzaParser("en", model_dir=str(models), use_gpu=False)
    return parser.parse([line.split()], 1, "line").pop().to_bracketed()


def test_trees_are_stanzas_over_exactly_the_corpus_tokens(stanza_models, stanza_trees):
    assert len(stanza_trees) == len(TEXT)
    for line, text in zip(stanza_trees, TEXT):
        tree = parse_tree(line)
        tree.check()
        assert tree.leaves == _leaves(text)  # escapes and case kept
        assert tree.tags is not None and len(tree.tags) == len(tree.leaves)
    # Each line's tree is the one stanza gives it alone: stanza's sorting by length is undone.
    assert stanza_trees == [_alone(stanza_models, text) for text in TEXT]
    # The tiny parser nests phrases (poorly) beyond one flat node; a one-word line has no node.
    assert sum(len(parse_tree(line).nodes) for line in stanza_trees) > 2 * len(TEXT)
    assert not parse_tree(stanza_trees[TEXT.index("Paris")]).nodes


def test_trees_do_not_depend_on_the_batch_size(tmp_path, stanza_models, stanza_trees):
    assert _parse_cli(tmp_path, stanza_models, TEXT, "--batch-size", "1") == stanza_trees
    assert _parse_cli(tmp_path, stanza_models, TEXT, "--batch-size", "64", name="trees64") == stanza_trees


def test_an_interrupted_run_resumes_to_the_same_trees(tmp_path, monkeypatch, stanza_models, stanza_trees):
    parse = StanzaParser.parse
    calls = []

    def interrupted_on_third_chunk(self, sentences, first_line, source):
        calls.append(first_line)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return parse(self, sentences, first_line, source)

    monkeypatch.setattr(StanzaParser, "parse", interrupted_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        _parse_cli(tmp_path, stanza_models, TEXT, "--chunk-size", "4")
    assert sorted(p.name for p in (tmp_path / "trees.parts").glob("*.trees")) == ["00000000.trees", "00000001.trees"]
    assert _parse_cli(tmp_path, stanza_models, TEXT, "--chunk-size", "4") == stanza_trees
    assert calls == [1, 5, 9, 9]  # the two finished chunks were not parsed again


def test_workers_on_the_cpu_give_the_trees_and_record_of_one_process(tmp_path, stanza_models, stanza_trees):
    one = _parse_cli(tmp_path, stanza_models, TEXT, "--batch-size", "3", "--chunk-size", "4", name="one")
    three = _parse_cli(tmp_path, stanza_models, TEXT, "--batch-size", "3", "--chunk-size", "4", "--workers", "3",
                       name="three")
    assert three == one == stanza_trees
    assert (tmp_path / "three.parser.json").read_bytes() == (tmp_path / "one.parser.json").read_bytes()


def _pieces(word: str) -> str:
    parts = [word[i:i + 2] for i in range(0, len(word), 2)]
    return " ".join([part + "@@" for part in parts[:-1]] + parts[-1:])


@pytest.fixture(scope="module")
def stanza_databin(tmp_path_factory, stanza_trees):
    """TEXT and its stanza trees through tree-fairseq-preprocess (en -> de, a copy task), every word
    split into two-letter pieces."""
    text = tmp_path_factory.mktemp("stanza_text")
    splits = {"train": (TEXT, stanza_trees), "valid": (TEXT[:4], stanza_trees[:4]), "test": (TEXT, stanza_trees)}
    for split, (lines, trees) in splits.items():
        bpe = [" ".join(_pieces(word) for word in line.split()) for line in lines]
        for suffix, content in (("en", bpe), ("de", lines), ("tree.en", trees)):
            (text / f"{split}.{suffix}").write_text("".join(line + "\n" for line in content), encoding="utf-8")
    databin = tmp_path_factory.mktemp("stanza_bin") / "bin"
    preprocess_cli.main(["--source-lang", "en", "--target-lang", "de", "--trainpref", str(text / "train"),
                         "--validpref", str(text / "valid"), "--testpref", str(text / "test"),
                         "--destdir", str(databin), "--joined-dictionary", "--workers", "1"])
    return databin


def _model_files(models) -> dict[str, str]:
    return {kind: str(models / "en" / kind / "tiny.pt") for kind in ("pos", "constituency", "pretrain")}


@pytest.mark.parametrize("models", ["folder", "files"])
def test_inference_parser_stanza_makes_the_data_bin_trees(tmp_path, stanza_models, stanza_databin, models):
    """fairseq-interactive's dataset (the task's build_dataset_for_inference): the words recovered
    from the BPE pieces, parsed by --inference-parser stanza in one batch, give the data-bin's trees,
    with the model folder or with the model files alone."""
    if models == "folder":
        flags = ["--inference-parser-model-dir", str(stanza_models)]
    else:
        files = _model_files(stanza_models)
        flags = ["--inference-parser-model-dir", str(tmp_path / "no_models"),
                 "--inference-stanza-pos-model", files["pos"],
                 "--inference-stanza-constituency-model", files["constituency"],
                 "--inference-stanza-pretrain", files["pretrain"]]
    task = tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
        str(stanza_databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny",
        "--source-lang", "en", "--target-lang", "de", "--inference-parser", "stanza", *flags]))
    check_inference_sources(task, TREE_KEYS)
    assert task.inference_trees.labels_unknown == {}


# Choosing the model


def _no_network(monkeypatch):
    """A closed local port stands for stanza's server: no test run downloads."""
    monkeypatch.setattr(stanza_parser, "DEFAULT_RESOURCES_URL", "http://127.0.0.1:9")


def _cli_error(tmp_path, models, *args) -> str:
    with pytest.raises(SystemExit) as exit_info:
        _parse_cli(tmp_path, models, TEXT, *args)
    return str(exit_info.value.code)


def test_a_package_other_than_the_default_by_name(tmp_path, monkeypatch, stanza_models, stanza_trees):
    """A model folder whose default English parser (big) was never downloaded, beside the tiny one,
    also the parser of the package small."""
    _no_network(monkeypatch)
    models = with_second_package(stanza_models, tmp_path / "models")
    message = _cli_error(tmp_path, models)
    assert "the stanza models for language 'en' are not in" in message
    assert "stanza.download('en', processors='tokenize,pos,constituency', model_dir=" in message
    for package in ("constituency=tiny", "small", " pos = tiny , constituency=tiny"):
        assert _parse_cli(tmp_path, models, TEXT, "--stanza-package", package) == stanza_trees, package
    assert ("no package 'tiny' of the whole en pipeline in" in _cli_error(tmp_path, models, "--stanza-package", "tiny")
            and "(its packages: default, small; its constituency parsers: big, tiny); for its constituency parser "
            "tiny give constituency=tiny" in _cli_error(tmp_path, models, "--stanza-package", "tiny"))
    assert "no pos package 'nope' for en in" in _cli_error(tmp_path, models, "--stanza-package", "pos=nope")
    assert "'lemma=x' is not PROCESSOR=NAME" in _cli_error(tmp_path, models, "--stanza-package", "lemma=x")
    # A package that is listed but not downloaded: the fetch command names it.
    assert ("stanza.download('en', processors='tokenize,pos,constituency', package={'constituency': 'big'}, "
            in _cli_error(tmp_path, models, "--stanza-package", "constituency=big"))


def test_model_files_alone_make_the_pipeline(tmp_path, monkeypatch, stanza_models, stanza_trees):
    """The tagger, parser and word-vector files copied from elsewhere, no model folder: nothing is
    downloaded or written."""
    _no_network(monkeypatch)
    files = {kind: tmp_path / f"{kind}.pt" for kind in ("pos", "constituency", "pretrain")}
    for kind, path in _model_files(stanza_models).items():
        shutil.copy(path, files[kind])
    flags = ["--stanza-pos-model", str(files["pos"]), "--stanza-constituency-model", str(files["constituency"]),
             "--stanza-pretrain", str(files["pretrain"])]
    no_models = tmp_path / "no_models"
    assert _parse_cli(tmp_path, no_models, TEXT, *flags) == stanza_trees
    assert not no_models.exists()
    # A file that is not there is named; one file without a folder's models leaves the rest to download.
    assert f"stanza's pos model {tmp_path / 'x.pt'}: no such file" in _cli_error(
        tmp_path, no_models, "--stanza-pos-model", str(tmp_path / "x.pt"), *flags[2:])
    assert "are not in" in _cli_error(tmp_path, no_models, flags[0], flags[1])
    # The tagger and the parser without their word vectors, and files that are no stanza models: one line each.
    message = _cli_error(tmp_path, no_models, *flags[:4])
    assert "could not load the model files given (pos " in message and "without word vectors: give the pretrain" \
        in message and "--stanza-pretrain" in message
    (tmp_path / "text.pt").write_text("not a model\n")
    message = _cli_error(tmp_path, no_models, *flags[:2], "--stanza-constituency-model", str(files["pretrain"]),
                         "--stanza-pretrain", str(files["pretrain"]))
    assert f"could not load the model files given (pos {files['pos']}, constituency {files['pretrain']}" in message
    assert "is each one a stanza model of its kind" in message
    message = _cli_error(tmp_path, no_models, "--stanza-pos-model", str(tmp_path / "text.pt"), *flags[2:])
    assert "is each one a stanza model of its kind" in message
    # Files in place of a complete folder's: the files' tagger, the folder's parser.
    assert _parse_cli(tmp_path, stanza_models, TEXT, *flags[:2], *flags[4:]) == stanza_trees


def test_chunks_of_another_model_are_not_reused(tmp_path, monkeypatch, capsys, stanza_models, stanza_trees):
    parse = StanzaParser.parse

    def interrupted_on_second_chunk(self, sentences, first_line, source):
        if first_line == 5:
            raise KeyboardInterrupt
        return parse(self, sentences, first_line, source)

    monkeypatch.setattr(StanzaParser, "parse", interrupted_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        _parse_cli(tmp_path, stanza_models, TEXT, "--chunk-size", "4")
    assert (tmp_path / "trees.parts" / "00000000.trees").exists()
    monkeypatch.setattr(StanzaParser, "parse", parse)
    other = tmp_path / "other_models"
    shutil.copytree(stanza_models, other)
    assert _parse_cli(tmp_path, other, TEXT, "--chunk-size", "4") == stanza_trees
    assert "holds chunks of a run with other input or options" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_parser(stanza_models):
    return StanzaParser("en", model_dir=str(stanza_models), use_gpu=False)


ESCAPED = "he said &quot; Mary &apos;s dog -LRB- a cat -RRB- &amp; ( it ) slept &quot; .".split()


def test_stanza_reads_the_words_unescaped_and_the_tree_keeps_the_corpus_tokens(tiny_parser, monkeypatch):
    """As the spaCy back-end, through the same function (tree_fairseq.trees.unescape)."""
    read = []
    pipeline = tiny_parser.pipeline
    monkeypatch.setattr(tiny_parser, "pipeline", lambda words: read.append(words) or pipeline(words))
    tree, = tiny_parser.parse([ESCAPED], 1, "text")
    assert read == [[["he", "said", '"', "Mary", "'s", "dog", "(", "a", "cat", ")", "&", "(", "it", ")", "slept",
                      '"', "."]]]
    assert read[0][0] == [unescape(token) for token in ESCAPED]
    assert list(tree.leaves) == ESCAPED


def test_the_trees_carry_the_tags_the_parser_read(tiny_parser):
    """The preterminals are the pipeline's tagger's tags, in the column the constituency model reads
    (this one was trained without retagging: UPOS; the tiny tagger puts PTB tags in both)."""
    sentence, = tiny_parser.parsed_sentences([[unescape(token) for token in ESCAPED]])
    column = "xpos" if tiny_parser.pipeline.processors["constituency"]._model.uses_xpos() else "upos"
    tree, = tiny_parser.parse([ESCAPED], 1, "text")
    assert tree.tags == tuple(getattr(word, column) for word in sentence.words)
    assert {"DT", "NN", "NNP", "POS"} <= set(tree.tags)


def test_pretokenised_text_is_never_expanded_and_no_mwt_model_is_loaded(tmp_path, monkeypatch, stanza_models):
    """stanza marks no pretokenised token as a multi-word token, so an mwt model would expand nothing:
    a model folder whose language lists one (as stanza's German, French, ... have) parses without it,
    each token one word (no download attempted: a closed local port stands for stanza's server)."""
    monkeypatch.setattr(stanza_parser, "DEFAULT_RESOURCES_URL", "http://127.0.0.1:9")
    models = tmp_path / "models"
    shutil.copytree(stanza_models, models)
    resources = json.loads((models / "resources.json").read_text())
    resources["en"]["mwt"] = {"tiny": {}}
    resources["en"]["default_processors"]["mwt"] = "tiny"
    resources["en"]["packages"]["default"]["mwt"] = "tiny"
    (models / "resources.json").write_text(json.dumps(resources))
    parser = StanzaParser("en", model_dir=str(models), use_gpu=False)
    assert list(parser.pipeline.processors) == ["tokenize", "pos", "constituency"]
    tokens = "they can&apos;t see John&apos;s cat .".split()
    sentence, = parser.parsed_sentences([[unescape(token) for token in tokens]])
    assert [[word.text for word in token.words] for token in sentence.tokens] == [
        [unescape(token)] for token in tokens]
    assert list(parser.parse([tokens], 1, "text")[0].leaves) == tokens


# A sentence stanza's parser gets stuck on


def _stuck_on(monkeypatch, words: list[str]) -> list[int]:
    """Make stanza's constituency parser find no legal transition for the sentence ``words``, as it
    does when every transition its model scores is illegal in a state: its transition choice
    (``LSTMModel.predict``, which returns None for such a state) gives None there, and stanza's own
    ``bulk_apply`` marks the state broken and ``parse_sentences`` drops the sentence. Returns the
    sizes of the batches the sentence was in (each call to the pipeline parses it anew)."""
    from stanza.models.constituency.lstm_model import LSTMModel

    predict = LSTMModel.predict
    batches = []

    def predict_stuck(self, states, is_legal=True):
        predictions, transitions, scores = predict(self, states, is_legal)
        for i, state in enumerate(states):
            if [state.get_word(k).value.children[0].label for k in range(state.sentence_length)] == words:
                if state.num_transitions == 0:
                    batches.append(len(states))
                transitions[i] = None
        return predictions, transitions, scores

    monkeypatch.setattr(LSTMModel, "predict", predict_stuck)
    return batches


STUCK = TEXT.index("we found it .")


def test_a_sentence_stanza_gets_stuck_on_stops_the_run_naming_its_line(tmp_path, monkeypatch, stanza_models):
    _stuck_on(monkeypatch, TEXT[STUCK].split())
    with pytest.raises(SystemExit) as exit_info:
        _parse_cli(tmp_path, stanza_models, TEXT, "--chunk-size", "4")
    message = str(exit_info.value.code)
    assert message.startswith(f"tree-fairseq-parse: error: {tmp_path / 'text'}:{STUCK + 1}: stanza's constituency "
                              "parser gave up on this sentence"), message
    assert "--on-failure balanced/left/right gives such lines a trivial tree" in message
    assert not (tmp_path / "trees").exists()
    # The chunks before it are kept: the same command resumes there once the sentence parses.
    assert sorted(p.name for p in (tmp_path / "trees.parts").glob("*.trees")) == ["00000000.trees", "00000001.trees"]


def test_on_failure_gives_the_stuck_sentence_a_trivial_tree(tmp_path, monkeypatch, capsys, stanza_models,
                                                            stanza_trees):
    batches = _stuck_on(monkeypatch, TEXT[STUCK].split())
    trees = _parse_cli(tmp_path, stanza_models, TEXT, "--on-failure", "balanced", "--batch-size", "8")
    assert trees == [trivial_tree(TEXT[STUCK].split(), "balanced").to_bracketed() if i == STUCK else tree
                     for i, tree in enumerate(stanza_trees)]
    failures = (tmp_path / "trees.failures").read_text(encoding="utf-8").splitlines()
    assert len(failures) == 1 and failures[0].startswith(f"{STUCK + 1}\t{tmp_path / 'text'}:{STUCK + 1}: stanza's "
                                                         "constituency parser gave up on this sentence")
    assert f"1 of {len(TEXT)} lines (8.33%) could not be parsed and got balanced trees" in capsys.readouterr().err
    # The chunk failed in a batch with others; its halves were parsed again down to the sentence alone.
    assert batches[0] > 1 and batches[-1] == 1


def test_the_record_remembers_the_model_folder_and_raw_text_finds_it(tmp_path, stanza_models, monkeypatch):
    """A data-bin parsed with --model-dir: its record names the folder, and raw-text translation takes
    the models from there unasked (the message for missing models names each command's option)."""
    from tree_fairseq.tasks.tree_translation import TreeTranslationConfig, inference_choice

    _parse_cli(tmp_path, stanza_models, TEXT[:2])
    record = json.loads((tmp_path / "trees.parser.json").read_text())
    assert record["model_dir"] == str(stanza_models.resolve())
    choice = inference_choice(TreeTranslationConfig(source_lang="en"), record)
    assert choice["parser"] == "stanza" and choice["model_dir"] == str(stanza_models.resolve())
    given = inference_choice(TreeTranslationConfig(source_lang="en", inference_parser_model_dir=str(tmp_path)), record)
    assert given["model_dir"] == str(tmp_path)
    moved = {**record, "model_dir": str(tmp_path / "gone")}
    assert inference_choice(TreeTranslationConfig(source_lang="en"), moved)["model_dir"] is None
    _no_network(monkeypatch)
    message = _cli_error(tmp_path, tmp_path / "empty")
    assert "tree-fairseq-parse --model-dir, fairseq-interactive --inference-parser-model-dir" in message
