"""Unsupervised parsing: bracket F1 on hand-made trees (this plugin's convention and PRPN /
ON-LSTM's, every sentence counting), the random-tree baseline, PTB trees without punctuation
(by punctuation tags or by PRPN / ON-LSTM's word-tag whitelist), the WSJ-10 length filter, the
``constituent_masked_lm`` task (batches, fairseq-train, trees from the trained encoder), and
``scripts/induce_trees.py`` (the paper's defaults; end to end on a few PTB sentences)."""

import importlib.util
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import shared_data
from fairseq import checkpoint_utils, options, tasks
from helpers import USER_DIR, subprocess_env

from tree_fairseq.trees import Node, Tree, parse_tree, trivial_tree
from tree_fairseq.trees.evaluation import (
    bracket_f1,
    brackets,
    parse_tree_of_word_tags,
    parse_tree_without_punctuation,
    random_binary_tree,
    short_sentences,
)

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "induce_trees.py"


def tree(words: str, *spans: tuple[int, int]) -> Tree:
    return Tree(tuple(words.split()), tuple(Node("X", start, end) for start, end in spans))


# Bracket F1


def test_bracket_f1_on_hand_made_trees():
    gold = [
        tree("a b c d e", (0, 1), (3, 4), (2, 4), (0, 4)),
        tree("f g h", (0, 1), (0, 2)),
        tree("i j", (0, 1)),  # no bracket but the whole sentence: not in the sentence-level mean
    ]
    predicted = [trivial_tree(list(t.leaves), shape) for t, shape in zip(gold, ("right", "left", "left"))]
    scores = bracket_f1(predicted, gold)
    # sentence 1: {(1,4), (2,4), (3,4)} against {(0,1), (2,4), (3,4)}: P = R = 2/3; sentence 2: F1 = 1
    assert scores.sentence_f1 == pytest.approx((2 / 3 + 1) / 2)
    assert scores.scored_sentences == 2
    # pooled: 3 matches, 4 predicted, 4 gold
    assert (scores.corpus_precision, scores.corpus_recall, scores.corpus_f1) == pytest.approx((0.75, 0.75, 0.75))

    with_root = bracket_f1(predicted, gold, drop_trivial=False)
    # sentence 1: 3 of 4 match; 2 and 3: all match
    assert with_root.sentence_f1 == pytest.approx((0.75 + 1 + 1) / 3)
    assert with_root.corpus_f1 == pytest.approx(6 / 7)
    assert with_root.scored_sentences == 3


def test_bracket_f1_every_sentence_as_prpn_and_on_lstm():
    """PRPN / ON-LSTM's sentence-level F1: the whole-sentence span and one-word spans never
    count, every sentence is in the mean, and one without gold brackets scores 1 when the parse
    has no bracket either (recall 1, precision 1) and 0 otherwise (recall 1, precision 0).

    ===  ==============  ====================  ====================  =====================
    #    words           gold brackets         predicted brackets    sentence F1
    ===  ==============  ====================  ====================  =====================
    1    a b c d e       (0,1) (2,4) (3,4)     right: (1,4) (2,4)    P = R = 2/3, F1 = 2/3
                                               (3,4)
    2    f g h           (0,1)                 left: (0,1)           1
    3    i j             none                  none                  1 (no gold bracket)
    4    k l m (flat)    none                  right: (1,2)          0 (no gold bracket)
    5    n               none                  none                  1 (no gold bracket)
    ===  ==============  ====================  ====================  =====================

    Every sentence: (2/3 + 1 + 1 + 0 + 1) / 5 = 11/15 = 0.7333; over the sentences with a gold
    bracket (the default): (2/3 + 1) / 2 = 5/6. Corpus: 3 matches of 5 predicted and 4 gold
    brackets, P = 3/5, R = 3/4, F1 = 2/3, the same under both conventions.
    """
    gold = [
        tree("a b c d e", (0, 1), (3, 4), (2, 4), (0, 4)),
        tree("f g h", (0, 1), (0, 2)),
        tree("i j", (0, 1)),
        tree("k l m", (0, 2)),
        tree("n"),
    ]
    predicted = [trivial_tree(list(t.leaves), shape) for t, shape in zip(gold, ("right", "left", "left", "right", "left"))]
    every = bracket_f1(predicted, gold, every_sentence=True)
    assert every.sentence_f1 == pytest.approx(11 / 15)
    assert every.scored_sentences == 5
    assert (every.corpus_precision, every.corpus_recall, every.corpus_f1) == pytest.approx((3 / 5, 3 / 4, 2 / 3))
    some = bracket_f1(predicted, gold)
    assert (some.sentence_f1, some.scored_sentences) == (pytest.approx(5 / 6), 2)
    assert some[1:4] == every[1:4]
    # The same by the scoring rule written out for each sentence (their formula, without the 1e-8).
    expected = []
    for prediction, reference in zip(predicted, gold):
        p_spans, g_spans = brackets(prediction), brackets(reference)
        precision = len(p_spans & g_spans) / len(p_spans) if p_spans else 0.0
        recall = len(p_spans & g_spans) / len(g_spans) if g_spans else 0.0
        if not g_spans:
            recall = 1.0
            precision = 1.0 if not p_spans else precision
        expected.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    assert every.sentence_f1 == pytest.approx(sum(expected) / len(expected))


def test_bracket_f1_edge_cases():
    gold = [tree("a b c d", (0, 1), (2, 3), (0, 3))]
    flat = [tree("a b c d", (0, 3))]
    assert bracket_f1(flat, gold) == (0.0, 0.0, 0.0, 0.0, 1)
    assert bracket_f1(gold, gold)[:4] == (1.0, 1.0, 1.0, 1.0)
    assert brackets(gold[0]) == {(0, 1), (2, 3)}
    assert brackets(gold[0], drop_trivial=False) == {(0, 1), (2, 3), (0, 3)}
    with pytest.raises(ValueError, match="leaves"):
        bracket_f1([tree("a b c", (0, 2))], gold)
    with pytest.raises(ValueError, match="2 predicted trees but 1 gold"):
        bracket_f1(gold * 2, gold)


def test_labelled_bracket_f1_with_malformed_and_wrong_length_outputs():
    """The parsing-as-translation scoring: labels count, the root counts, a malformed output
    (None) scores 0 with no predicted bracket, a tree over other words is scored as it is."""
    gold = [
        Tree(tuple("a b c".split()), (Node("NP", 0, 1), Node("S", 0, 2))),
        Tree(tuple("d e".split()), (Node("S", 0, 1),)),
        Tree(tuple("f g h".split()), (Node("VP", 1, 2), Node("S", 0, 2))),
    ]
    predicted = [
        Tree(tuple("a b c".split()), (Node("VP", 0, 1), Node("S", 0, 2))),  # one label wrong
        None,  # malformed
        Tree(tuple("f g".split()), (Node("S", 0, 1),)),  # one word short
    ]
    labelled = bracket_f1(predicted, gold, drop_trivial=False, labelled=True, same_words=False)
    # sentence 1: 1 of 2 (P = R = 1/2); sentence 2: 0; sentence 3: (S 0 1) matches nothing
    assert labelled.sentence_f1 == pytest.approx(0.5 / 3)
    # pooled: 1 match, 3 predicted, 5 gold
    assert (labelled.corpus_precision, labelled.corpus_recall) == pytest.approx((1 / 3, 1 / 5))
    unlabelled = bracket_f1(predicted, gold, drop_trivial=False, same_words=False)
    assert unlabelled.sentence_f1 == pytest.approx(1 / 3)
    assert brackets(gold[0], drop_trivial=False, labelled=True) == {("NP", 0, 1), ("S", 0, 2)}
    with pytest.raises(ValueError, match="leaves"):
        bracket_f1(predicted, gold, drop_trivial=False)


def test_random_binary_tree_is_binary_and_seeded():
    words = [f"w{i}" for i in range(9)]
    first = random_binary_tree(words, random.Random(3))
    first.check()
    assert len(first.nodes) == len(words) - 1  # binary: n - 1 nodes, the root included
    assert first == random_binary_tree(words, random.Random(3))
    assert len({random_binary_tree(words, random.Random(seed)) for seed in range(10)}) > 1
    assert random_binary_tree(["one"], random.Random(0)).nodes == ()


def test_ptb_tree_without_punctuation():
    line = "( (S (NP-SBJ (NNP Mr.) (NNP Vinken) ) (, ,) (VP (VBZ is) (NP (-NONE- *T*-1) )) (. .) ))"
    assert parse_tree(line).leaves == ("Mr.", "Vinken", ",", "is", ".")
    without = parse_tree_without_punctuation(line)
    assert without.leaves == ("Mr.", "Vinken", "is")
    assert {(n.label, n.start, n.end) for n in without.nodes} == {("NP", 0, 1), ("S", 0, 2)}
    assert parse_tree_without_punctuation("( (S (. .) (NP (-NONE- *) )))") is None


def test_ptb_tree_of_word_tags_drops_punctuation_currency_and_empty_elements():
    line = ("( (S (NP-SBJ (NNP Mr.) (NNP Vinken) ) (, ,) (VP (VBZ is) (NP ($ $) (CD 5) (-NONE- *U*) )) "
            "(. .) ))")
    kept = parse_tree_of_word_tags(line)
    assert kept.leaves == ("Mr.", "Vinken", "is", "5")
    # (NP $ 5) lost its $: a one-word node is no bracket; VP and S remain
    assert {(n.label, n.start, n.end) for n in kept.nodes} == {("NP", 0, 1), ("VP", 2, 3), ("S", 0, 3)}
    punctuation_only = parse_tree_without_punctuation(line)  # the other reading keeps $
    assert punctuation_only.leaves == ("Mr.", "Vinken", "is", "$", "5")
    assert {(n.start, n.end) for n in punctuation_only.nodes} == {(0, 1), (3, 4), (2, 4), (0, 4)}
    assert parse_tree_of_word_tags("( (S (. .) ($ $) (NP (-NONE- *) )))") is None


def test_wsj10_keeps_sentences_of_at_most_ten_words_after_punctuation_removal():
    def line(num_words: int, punctuation: int) -> str:
        words = " ".join(f"(NN w{i})" for i in range(num_words))
        return f"( (S (NP {words}) {'(, ,) ' * punctuation}(. .)) )"

    lines = [line(10, 2), line(11, 0), line(1, 0), line(9, 5), line(12, 0)]
    trees = [parse_tree_of_word_tags(text) for text in lines]
    assert [len(t.leaves) for t in trees] == [10, 11, 1, 9, 12]
    assert short_sentences(trees) == [0, 2, 3]  # 13, 12 and 15 tokens with punctuation
    assert short_sentences(trees, max_words=11) == [0, 1, 2, 3]


# The masked-LM task


def test_masked_lm_batches_are_single_sentences(mono_databin, tiny_corpus):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(mono_databin), "--user-dir", USER_DIR, "--task", "constituent_masked_lm",
        "--arch", "constituent_encoder_lm_tiny", "--criterion", "masked_lm", "--cpu",
    ])
    task = tasks.setup_task(args)
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    dictionary = task.source_dictionary
    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    src_tokens, target = batch["net_input"]["src_tokens"], batch["target"]
    assert set(batch["net_input"]) == {"src_tokens", "src_lengths"}
    for row, index in enumerate(batch["id"].tolist()):
        length = len(lines[index].split()) + 1  # words </s>, no <s>
        assert int(batch["net_input"]["src_lengths"][row]) == length
        restored = torch.where(target[row].ne(dictionary.pad()), target[row], src_tokens[row])  # unmasked
        words = dictionary.encode_line(lines[index], add_if_not_exist=False, append_eos=True)
        assert restored[:length].tolist() == words.tolist()
        assert src_tokens[row, length:].eq(dictionary.pad()).all()
    masked = target.ne(dictionary.pad())
    assert masked.any() and src_tokens[masked].eq(task.mask_idx).any()

    torch.manual_seed(0)
    model = task.build_model(args)
    logits, encoder_out = model(**batch["net_input"], masked_tokens=masked)
    assert logits.shape == (int(masked.sum()), len(dictionary))
    assert model.encoder.embed_tokens.num_embeddings == len(dictionary)  # <mask> included
    links = encoder_out["constituent_links"][0]
    assert links.shape == (*src_tokens.shape[:1], 2, src_tokens.size(1) - 1)
    # the final token is outside every constituent even where the masking replaced the EOS
    lengths = batch["net_input"]["src_lengths"]
    final_links = links[torch.arange(len(lengths)), :, lengths - 2]  # (B, L): last word to EOS
    assert (final_links == 0).all()
    assert (src_tokens[torch.arange(len(lengths)), lengths - 1] != dictionary.eos()).any()


def test_fairseq_masked_lm_options_the_model_cannot_take_are_refused(mono_databin):
    """fairseq's own --task masked_lm (inputs the model does not take: TypeError 'src_id') and
    --mask-whole-words (fairseq's code reads the task's missing ``args``: AttributeError) were
    tracebacks; each is refused in one line naming the option."""
    def setup(*flags):
        args = options.parse_args_and_arch(options.get_training_parser(), [
            str(mono_databin), "--user-dir", USER_DIR, "--arch", "constituent_encoder_lm_tiny",
            "--criterion", "masked_lm", "--cpu", *flags])
        return args, tasks.setup_task(args)

    with pytest.raises(ValueError, match=r"^--mask-whole-words: --task constituent_masked_lm masks single tokens"):
        setup("--task", "constituent_masked_lm", "--mask-whole-words")
    args, task = setup("--task", "masked_lm")
    with pytest.raises(ValueError, match=r"^--arch constituent_encoder_lm_tiny is trained with --task "
                                         r"constituent_masked_lm, not MaskedLMTask$"):
        task.build_model(args)
    args, task = setup("--task", "constituent_masked_lm")
    assert task.build_model(args) is not None


def test_masked_lm_trains_and_parses(mono_databin, tiny_corpus, tmp_path):
    train = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", str(mono_databin), "--user-dir", USER_DIR,
        "--task", "constituent_masked_lm", "--arch", "constituent_encoder_lm_tiny", "--criterion", "masked_lm",
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "3", "--cpu",
        "--num-workers", "0", "--save-dir", str(tmp_path), "--no-epoch-checkpoints",
    ], env=subprocess_env(), capture_output=True, text=True)
    assert train.returncode == 0, train.stderr[-3000:]
    assert re.search(r"valid on 'valid' subset \| loss [0-9.]+", train.stdout + train.stderr)

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "checkpoint_last.pt")])
    sentences = [line.split() for line in (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()]
    sentences.append(["an", "unseen", "word", "or", "three"])
    model = models[0].train()
    with pytest.raises(ValueError, match="min_layer 3"):  # the paper's m = 3 needs 4 layers; this model has 2
        task.induce_trees(model, sentences)
    trees = task.induce_trees(model, sentences, min_layer=0, batch_size=7)
    assert [t.leaves for t in trees] == [tuple(words) for words in sentences]
    for induced in trees:
        induced.check()
    assert model.training  # left as it was, and parsed without dropout:
    assert task.induce_trees(model, sentences, min_layer=0, batch_size=64) == trees


# The script


def run_script(*flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *flags], env=subprocess_env(), capture_output=True, text=True)


@pytest.fixture(scope="module")
def script():
    """scripts/induce_trees.py as a module."""
    spec = importlib.util.spec_from_file_location("induce_trees", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_help(script):
    text = script.get_parser().format_help()
    for flag in ("--updates", "--seed", "--workdir", "--min-layer", "--keep-punctuation", "--keep-trivial-spans",
                 "--word-filter", "--short", "--lr-scheduler", "--adam-betas"):
        assert flag in text


def test_script_defaults_are_the_papers(script):
    """Section 7.2: Adam, learning rate 1e-4, betas (0.9, 0.98); section 7.1 and Table 1: the
    10-layer encoder; section 7.3: m = 3; section 6: threshold 0.8; PRPN / ON-LSTM's words."""
    args = script.get_parser().parse_args(["--workdir", "w"])
    assert args.lr == 1e-4 and args.adam_betas == "(0.9, 0.98)"
    assert (args.lr_scheduler, args.warmup, args.weight_decay, args.clip_norm) == ("fixed", 0, 0.0, 0.0)
    assert args.arch == "constituent_encoder_lm"
    assert (args.min_layer, args.threshold) == (3, 0.8)
    assert (args.word_filter, args.short) == ("word-tags", 10)
    assert script.get_parser().parse_args(["--workdir", "w", "--keep-punctuation"]).word_filter == "none"


@pytest.mark.slow
def test_script_trains_parses_scores_and_resumes(script, tmp_path):
    trees = shared_data("ptb-sample") / "wsj_0001-0199.mrg.txt"
    # The tiny model has 2 layers: m = 0 (the default m = 3 needs 4).
    common = ["--trees", str(trees), "--workdir", str(tmp_path), "--sentences", "25",
              "--arch", "constituent_encoder_lm_tiny", "--max-tokens", "300", "--save-interval", "2", "--cpu",
              "--min-layer", "0"]
    first = run_script(*common, "--updates", "2")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "on 25 sentences" in first.stdout and "all sentences (25)" in first.stdout
    assert re.search(r"sentences of <= 10 words \(\d+\)", first.stdout)
    for row in (r"constituent attention \(2 updates, m=0\)", "left-branching", "right-branching",
                r"random binary \(seed 1\)"):
        assert len(re.findall(row + r"(\s+\d+\.\d){5}\n", first.stdout)) == 2, first.stdout
    assert (tmp_path / "checkpoints" / "checkpoint_last.pt").exists()

    resumed = run_script(*common, "--updates", "4")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert re.search(r"Loaded checkpoint .*\(epoch \d+ @ 2 updates\)", resumed.stderr)
    assert "constituent attention (4 updates, m=0)" in resumed.stdout
    # the baselines do not depend on the model
    def baselines(stdout):
        return [line for line in stdout.splitlines() if re.match("(left|right)-branching|random", line)]

    assert len(baselines(first.stdout)) == 6 and baselines(first.stdout) == baselines(resumed.stdout)

    args = script.get_parser().parse_args([*common[:5], "24", *common[6:]])
    with pytest.raises(SystemExit, match="holds a run on other sentences"):
        script.prepare_data(args, script.read_sentences(args)[1])
