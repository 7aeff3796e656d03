"""Grammar induction trained to convergence: the held-out sentences, the extra text, the baselines and
scores on hand-made trees, the link probabilities' distribution, induced-tree files and the table over
seeds (tree_fairseq.analysis.induction); scripts/induce_trees.py --until-converged on tiny synthetic
trees with the tiny model (the stop, a run killed and resumed, the refusals) and
scripts/score_induced_trees.py (the same F1 from the published files)."""

import gzip
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
import torch
from conftest import shared_data
from helpers import subprocess_env

from tree_fairseq.analysis import induction
from tree_fairseq.cli import patience
from tree_fairseq.trees import Node, Tree
from tree_fairseq.trees.evaluation import short_sentences

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
INDUCE, SCORE = SCRIPTS / "induce_trees.py", SCRIPTS / "score_induced_trees.py"


def tree(words: str, *spans: tuple[int, int]) -> Tree:
    return Tree(tuple(words.split()), tuple(Node("X", start, end) for start, end in spans))


# Hand-made pieces


def test_held_out_sentences_are_seeded_and_checked():
    first = induction.held_out(100, 0.1, 1)
    assert len(first) == 10 and first == sorted(first) and first == induction.held_out(100, 0.1, 1)
    assert first != induction.held_out(100, 0.1, 2)
    assert len(induction.held_out(3914, 0.1, 1)) == 391
    for fraction in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            induction.held_out(100, fraction, 1)
    with pytest.raises(ValueError, match="leaves no validation"):
        induction.held_out(4, 0.1, 1)


def test_extra_text_is_made_like_the_tree_words(tmp_path):
    path = tmp_path / "train.en"
    path.write_text("It &apos;s a Test , &quot; she said .\n. , --\n\n5 % of $ 3\n", encoding="utf-8")
    assert induction.extra_sentences(path) == [["it", "'s", "a", "test", "she", "said"], ["5", "of", "3"]]
    assert induction.extra_sentences(path, keep_case=True)[0][:4] == ["It", "'s", "a", "Test"]


def test_baselines_and_scores_on_a_hand_made_example():
    """Gold (a (b c)) (d e) over 5 words: brackets (1,2), (0,2), (3,4) without the root.
    Right-branching (1,4) (2,4) (3,4): P = 1/3, R = 1/3; left-branching (0,1) (0,2) (0,3): 1/3, 1/3;
    the 2-word sentence has no gold bracket and no predicted one: 1 for every tree."""
    gold = [tree("a b c d e", (1, 2), (0, 2), (3, 4), (0, 4)), tree("f g", (0, 1))]
    sentences = [list(t.leaves) for t in gold]
    trees = induction.baselines(sentences, seed=3)
    assert trees["right-branching"][0] == tree("a b c d e", (3, 4), (2, 4), (1, 4), (0, 4))
    assert trees["left-branching"][0] == tree("a b c d e", (0, 1), (0, 2), (0, 3), (0, 4))
    right = induction.scores(trees["right-branching"], gold, short=[1])
    assert right["all"]["sentence_f1"] == pytest.approx((1 / 3 + 1) / 2)
    assert right["short"] == {"sentence_f1": 1.0, "corpus_f1": 0.0, "corpus_precision": 0.0, "corpus_recall": 0.0,
                              "sentences": 1}
    assert right["all"]["corpus_f1"] == pytest.approx(1 / 3)
    left = induction.scores(trees["left-branching"], gold, short=[0, 1])
    assert left["all"]["sentence_f1"] == left["short"]["sentence_f1"] == pytest.approx((1 / 3 + 1) / 2)
    assert trees["random"] == induction.baselines(sentences, seed=3)["random"]
    perfect = induction.scores(gold, gold, short=[0])
    assert perfect["all"]["sentence_f1"] == perfect["short"]["sentence_f1"] == 1.0


def test_link_distribution_per_layer():
    links = [torch.tensor([[0.1, 0.93], [0.85, 0.96]]), torch.tensor([[0.5], [1.0]])]
    layers = induction.link_distribution(links, threshold=0.8)
    assert [layer["links"] for layer in layers] == [3, 3]
    assert layers[0]["above_threshold"] == pytest.approx(1 / 3) and layers[1]["above_threshold"] == 1.0
    assert layers[0]["histogram"][2] == 1 and layers[0]["histogram"][10] == 1 and layers[0]["histogram"][18] == 1
    assert layers[1]["histogram"][-1] == 2  # 0.96 and 1.0 in the last bin
    assert sum(layers[1]["histogram"]) == 3 and layers[1]["mean"] == pytest.approx((0.85 + 0.96 + 1.0) / 3)
    assert induction.link_distribution([]) == []


def test_own_links_invert_the_hierarchical_constraint():
    own = torch.tensor([[0.2, 0.9, 0.5], [0.4, 0.1, 0.7], [0.3, 0.6, 0.0]])
    accumulated = [own[0]]
    for layer in own[1:]:
        accumulated.append(accumulated[-1] + (1 - accumulated[-1]) * layer)
    assert torch.allclose(induction.own_links(torch.stack(accumulated)), own.double(), atol=1e-6)
    saturated = induction.own_links(torch.tensor([[1.0, 0.5], [1.0, 0.75]]))
    assert saturated[1, 0].isnan() and saturated[1, 1].item() == pytest.approx(0.5)


def test_link_agreement_orders_boundaries_against_the_gold_tree():
    # ((a b) (c d)): boundaries a|b and c|d lie inside two-word nodes, b|c between the root's children.
    gold = [tree("a b c d", (0, 1), (2, 3), (0, 3)), tree("e", ), tree("f g", (0, 1))]
    assert induction.boundary_sizes(gold[0]) == [2, 4, 2] and induction.boundary_sizes(gold[2]) == [2]
    assert induction.boundary_sizes(tree("a b c", (1, 2))) == [3, 2]  # the root spans all words
    own = torch.tensor([[0.9, 0.1, 0.8], [0.2, 0.9, 0.3]])  # layer 0 cuts b|c first, layer 1 last
    accumulated = torch.stack([own[0], own[0] + (1 - own[0]) * own[1]])
    links = [accumulated, torch.zeros(2, 0), torch.tensor([[0.5], [0.7]])]
    layers = induction.link_agreement(links, gold)
    assert [layer["pairs"] for layer in layers] == [2, 2]  # (b|c, a|b) and (b|c, c|d); one-pair sentences add none
    assert layers[0]["concordance"] == layers[0]["own_concordance"] == 1.0
    # layer 1: accumulated 0.92, 0.91, 0.86: b|c is below a|b but not below c|d; its own links cut it last
    assert layers[1]["concordance"] == 0.5 and layers[1]["own_concordance"] == 0.0
    assert layers[1]["own_mean"] == pytest.approx((0.2 + 0.9 + 0.3 + 0.4) / 4)
    tied = induction.link_agreement([torch.full((1, 3), 0.5)], gold[:1])
    assert tied[0]["concordance"] == 0.5
    assert induction.link_agreement([], []) == []
    with pytest.raises(ValueError, match="links of 3 words for a gold tree of 4"):
        induction.link_agreement([torch.zeros(2, 2)], gold[:1])
    with pytest.raises(ValueError, match="1 sentences' links for 3 gold trees"):
        induction.link_agreement(links[:1], gold)


def test_induced_tree_files_round_trip_and_bad_files(tmp_path):
    gold = [tree("the cat sat", (0, 1), (0, 2)), tree("dogs", ), tree("a b", (0, 1))]
    predicted = [tree("The cat sat", (1, 2), (0, 2)), tree("dogs"), tree("a b", (0, 1))]
    path = tmp_path / "m3.txt"
    induction.write_trees(path, predicted)
    assert induction.read_induced(path, gold) == predicted
    assert not (tmp_path / "m3.txt.tmp").exists()
    with pytest.raises(ValueError, match="3 trees for 2 gold trees"):
        induction.read_induced(path, gold[:2])
    lines = path.read_text(encoding="utf-8").splitlines()
    (tmp_path / "other.txt").write_text("\n".join([lines[0], "(X cats)", lines[2]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: the words cats"):
        induction.read_induced(tmp_path / "other.txt", gold)
    (tmp_path / "broken.txt").write_text("\n".join([lines[0], lines[1], "(X a b"]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.txt, line 3"):
        induction.read_induced(tmp_path / "broken.txt", gold)
    # Unlexicalised (published) trees, gzipped or not: the structure, as many words as the gold tree.
    hidden = "".join(induction.unlexicalised(t) + "\n" for t in predicted)
    assert hidden.splitlines()[0].count("_") == 3 and "cat" not in hidden
    (tmp_path / "hidden.txt").write_text(hidden, encoding="utf-8")
    with gzip.open(tmp_path / "hidden.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write(hidden)
    for name in ("hidden.txt", "hidden.txt.gz"):
        read = induction.read_induced(tmp_path / name, gold)
        assert [t.nodes for t in read] == [t.nodes for t in predicted]
        assert induction.scores(read, gold, [0, 1, 2]) == induction.scores(predicted, gold, [0, 1, 2])
    assert hidden.splitlines()[0] == "(X _ (X _ _))"
    (tmp_path / "short.txt").write_text("(X _ _)\n" + "".join(hidden.splitlines(keepends=True)[1:]), encoding="utf-8")
    with pytest.raises(ValueError, match="short.txt, line 1: a tree of 2 words for a gold tree of 3"):
        induction.read_induced(tmp_path / "short.txt", gold)
    packed = (tmp_path / "hidden.txt.gz").read_bytes()
    (tmp_path / "cut.txt.gz").write_bytes(packed[:len(packed) // 2])
    (tmp_path / "plain.txt.gz").write_text(hidden, encoding="utf-8")
    (tmp_path / "latin.txt").write_bytes("(X caf\xe9 b c)\n".encode("latin-1"))
    for name, message in (("cut.txt.gz", "not a whole gzip file"), ("plain.txt.gz", "not a whole gzip file"),
                          ("latin.txt", "not UTF-8 text")):
        with pytest.raises(ValueError, match=f"{name}: {message}"):
            induction.read_induced(tmp_path / name, gold)


def result(setting: str, seed: int, f1_m3: float, arch: str = "small") -> dict:
    def score(value):
        return {"all": {"sentence_f1": value}, "short": {"sentence_f1": value + 0.1}}

    return {"setting": setting, "seed": seed, "arch": arch,
            "induced": {str(m): score(f1_m3 if m == 3 else 0.0) for m in range(6)},
            "baselines": {"random": score(0.2 + seed / 100), "left-branching": score(0.09),
                          "right-branching": score(0.4)}}


def test_seed_table_median_and_max_per_setting():
    runs = [result("ptb", 1, 0.30), result("ptb", 2, 0.50), result("ptb", 3, 0.40), result("ptb+iwslt", 1, 0.45)]
    rows = {row["trees"]: row for row in induction.seed_table(runs)}
    ptb = rows["constituent attention, ptb, m=3"]
    assert ptb["seeds"] == [1, 2, 3]
    assert ptb["all"] == {"median": pytest.approx(40), "max": pytest.approx(50)}
    assert ptb["short"] == {"median": pytest.approx(50), "max": pytest.approx(60)}
    assert rows["constituent attention, ptb+iwslt, m=3"]["all"] == {"median": pytest.approx(45), "max": pytest.approx(45)}
    # Seed 1's random trees are the same in both settings: counted once (21, 22, 23, not 21, 21, 22, 23).
    assert rows["random"]["seeds"] == [1, 2, 3]
    assert rows["random"]["all"] == {"median": pytest.approx(22), "max": pytest.approx(23)}
    assert rows["right-branching"]["all"]["median"] == pytest.approx(40)
    assert induction.seed_table(runs, m=0)[0]["all"]["max"] == 0.0
    with pytest.raises(ValueError, match="seed\\(s\\) given twice"):
        induction.seed_table([result("ptb", 1, 0.3), result("ptb", 1, 0.4)])
    with pytest.raises(ValueError, match="several architectures"):
        induction.seed_table([result("ptb", 1, 0.3), result("ptb", 2, 0.4, arch="paper")])
    with pytest.raises(ValueError, match="m = 7 is not a layer"):
        induction.seed_table(runs, m=7)
    other = result("ptb+iwslt", 2, 0.45)
    other["baselines"]["random"]["all"]["sentence_f1"] = 0.5
    with pytest.raises(ValueError, match="two runs of seed 2 hold different baseline figures"):
        induction.seed_table(runs + [other])


# The scripts on tiny synthetic trees


def synthetic_trees(count: int, seed: int = 0) -> str:
    """PTB-style trees of a small grammar: S -> NP VP ., NP -> DT (JJ) NN (PP), VP -> VBZ NP."""
    rng = random.Random(seed)

    def noun_phrase(depth=0):
        words = f"(DT {rng.choice(['the', 'a'])}) " + ("(JJ big) " if rng.random() < 0.3 else "")
        words += f"(NN {rng.choice(['cat', 'dog', 'man', 'park', 'tree', 'bird'])})"
        if depth == 0 and rng.random() < 0.3:
            return f"(NP (NP {words}) (PP (IN {rng.choice(['in', 'near'])}) {noun_phrase(1)}))"
        return f"(NP {words})"

    return "".join(f"( (S {noun_phrase()} (VP (VBZ {rng.choice(['sees', 'likes'])}) {noun_phrase()}) (. .)) )\n"
                   for _ in range(count))


@pytest.fixture(scope="module")
def trees_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trees") / "trees.txt"
    path.write_text(synthetic_trees(60), encoding="utf-8")
    return path


def run(script: Path, *flags, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *map(str, flags)], env=subprocess_env(), capture_output=True,
                          text=True, **kwargs)


def tiny(trees_file: Path, workdir: Path, *flags) -> list:
    """A tiny run to convergence: the 2-layer model, m = 1 for the curve."""
    return ["--until-converged", "--trees", trees_file, "--workdir", workdir, "--arch", "constituent_encoder_lm_tiny",
            "--max-tokens", "300", "--cpu", "--min-layer", "1", *flags]


def log_validations(workdir: Path) -> list[tuple[int, float]]:
    return patience.validations((workdir / "checkpoints" / "train.log").read_text(encoding="utf-8").splitlines())


def load_script(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    return load_script(INDUCE)


@pytest.mark.parametrize("flags, message", [
    (["--updates", "5"], "--updates does not go with --until-converged"),
    (["--save-interval", "5"], "--save-interval does not go with --until-converged"),
    (["--valid-fraction", "0"], "argument --valid-fraction: '0': a number between 0 and 1, both left out"),
    (["--valid-fraction", "1.2"], "argument --valid-fraction: '1.2': a number between 0 and 1, both left out"),
    (["--patience", "0"], "argument --patience: '0': a whole number, 1 or more"),
    (["--max-epochs", "-1"], "argument --max-epochs: '-1': a whole number, 1 or more"),
    (["--extra-text", "x.txt"], "--extra-text goes with --setting ptb\\+iwslt"),
    (["--setting", "ptb+iwslt", "--extra-text", "nowhere.txt"], "--extra-text .*nowhere.txt: no such file"),
])
def test_converged_options_refused(script, trees_file, tmp_path, flags, message, capsys):
    with pytest.raises(SystemExit):
        script.main([str(flag) for flag in tiny(trees_file, tmp_path / "w", *flags)])
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("option, value, kind", [
    ("--updates", "0", "a whole number, 1 or more"),  # fairseq's --max-update 0: no limit, a run without end
    ("--save-interval", "0", "a whole number, 1 or more"),
    ("--max-tokens", "0", "a whole number, 1 or more"),
    ("--min-count", "-1", "a whole number, 0 or more"),
    ("--warmup", "-5", "a whole number, 0 or more"),
    ("--seed", "-1", "a whole number from 0 to 4294967295 (2**32 - 1)"),
    ("--valid-seed", "x", "a whole number from 0 to 4294967295 (2**32 - 1)"),
    ("--min-layer", "-1", "a whole number, 0 or more"),  # Algorithm 1 counted the layers from the top
    ("--short", "0", "a whole number, 1 or more"),
    ("--lr", "0", "a number above 0"),
    ("--lr", "nan", "a number above 0"),
    ("--weight-decay", "-0.1", "a number, 0 or more"),
    ("--clip-norm", "-1", "a number, 0 or more"),
    ("--threshold", "1.5", "a number from 0 to 1"),
])
def test_numbers_out_of_their_range_are_refused_on_the_command_line(script, option, value, kind, capsys):
    """A count, rate or threshold out of its range was taken as given: --updates 0 trained without end
    (fairseq reads --max-update 0 as no limit), --min-layer -1 counted layers from the top, a negative
    --short scored no sentence. Each is refused by argparse, naming the option, the value and the range."""
    with pytest.raises(SystemExit):
        script.get_parser().parse_args(["--workdir", "w", option, value])
    assert f"argument {option}: {value!r}: {kind}" in capsys.readouterr().err


@pytest.mark.parametrize("mode", [["--updates", "1"], ["--until-converged"]], ids=["updates", "until-converged"])
def test_a_min_layer_beyond_the_model_or_another_arch_is_refused_before_training(script, trees_file, tmp_path, mode,
                                                                                 capsys):
    """The paper's m = 3 on a 2-layer model trained first and failed after, in a traceback; an --arch
    of another model family wrote the data-bin and failed in fairseq. Both are refused before anything
    is written."""
    flags = ["--trees", trees_file, "--workdir", tmp_path / "w", "--sentences", "12", "--cpu", *mode]
    for arch, message in (
            ("constituent_encoder_lm_tiny",
             "--min-layer 3 is not one of the 2 layers of --arch constituent_encoder_lm_tiny (numbered from 0)"),
            ("transformer", "--arch transformer is not a constituent_encoder_lm architecture: one of "
                            "constituent_encoder_lm, ")):
        with pytest.raises(SystemExit):
            script.main([str(flag) for flag in flags] + ["--arch", arch])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_keep_trivial_spans_is_refused_with_until_converged(script, trees_file, tmp_path, capsys):
    """--until-converged scored PRPN / ON-LSTM's F1 whatever --keep-trivial-spans said, and did not
    record it: the option is refused there (the default mode honours it)."""
    args = script.get_parser().parse_args([str(flag) for flag in tiny(trees_file, tmp_path / "w",
                                                                      "--keep-trivial-spans")])
    with pytest.raises(SystemExit):
        script.check_options(script.get_parser(), args)
    assert "--keep-trivial-spans does not go with --until-converged" in capsys.readouterr().err
    args = script.get_parser().parse_args(["--workdir", str(tmp_path / "w"), "--keep-trivial-spans"])
    script.check_options(script.get_parser(), args)
    assert args.keep_trivial_spans and not (tmp_path / "w").exists()


def test_converged_options_refused_without_until_converged_and_trees_as_extra(script, trees_file, tmp_path, capsys):
    with pytest.raises(SystemExit):
        script.main(["--workdir", str(tmp_path / "w"), "--setting", "ptb"])
    assert "--setting goes with --until-converged" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main([str(f) for f in tiny(trees_file, tmp_path / "w", "--setting", "ptb+iwslt", "--extra-text", trees_file)])
    assert "is the --trees file" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-10", "x", "2.5"])
@pytest.mark.parametrize("mode", [[], ["--until-converged"]], ids=["updates", "until-converged"])
def test_sentences_must_be_a_positive_count(script, trees_file, tmp_path, value, mode, capsys):
    """--sentences 0 died in fairseq-preprocess ("cannot mmap an empty file") and -10 silently took
    all trees but the last 10 (lines[:-10]): both are refused on the command line, in both modes."""
    with pytest.raises(SystemExit):
        script.get_parser().parse_args(["--trees", str(trees_file), "--workdir", str(tmp_path / "w"), *mode,
                                        "--sentences", value])
    assert f"argument --sentences: {value!r}: a whole number, 1 or more" in capsys.readouterr().err
    assert script.get_parser().parse_args(["--workdir", "w", "--sentences", "7"]).sentences == 7
    assert not (tmp_path / "w").exists()


def test_bad_trees_or_extra_text_are_refused_naming_the_file_before_the_workdir_is_claimed(script, trees_file,
                                                                                          tmp_path):
    """A --trees line that is no tree is refused naming the file and line, a --trees or --extra-text
    file that is not UTF-8 naming the file; nothing is written (a workdir left claimed by
    settings.json would refuse the corrected run's other --extra-text)."""
    broken = tmp_path / "broken.mrg"
    broken.write_text(trees_file.read_text(encoding="utf-8").splitlines()[0] + "\n\n(S (NP (DT a) (NN dog)\n",
                      encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("the caf\u00e9 is open\n".encode("latin-1"))
    workdir = tmp_path / "w"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(broken))}, line 3: unbalanced brackets"):
        script.main([str(f) for f in tiny(broken, workdir)])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(latin1))}: not UTF-8 text"):
        script.main([str(f) for f in tiny(latin1, workdir)])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(latin1))}: not UTF-8 text"):
        script.main([str(f) for f in tiny(trees_file, workdir, "--setting", "ptb+iwslt", "--extra-text", latin1)])
    assert not workdir.exists()


def test_ptb_plus_extra_text_data(script, trees_file, tmp_path):
    """The extra text trains only: validation is the held-out tree sentences, and the scored
    sentences are all the trees' ones."""
    extra = tmp_path / "extra.en"
    extra.write_text("the bird &apos;s tree , sees a cat .\nzebras run\n", encoding="utf-8")
    args = script.get_parser().parse_args([str(f) for f in tiny(trees_file, tmp_path / "w", "--setting", "ptb+iwslt",
                                                                "--extra-text", extra)])
    script.check_options(script.get_parser(), args)
    gold, sentences = script.read_sentences(args)
    args.workdir.mkdir()
    valid = script.induction.held_out(len(sentences), args.valid_fraction, args.valid_seed)
    databin = script.prepare_split_data(args, sentences, valid,
                                        script.induction.extra_sentences(args.extra_text, args.keep_case))
    train = (args.workdir / "train.txt").read_text(encoding="utf-8").splitlines()
    valid_text = (args.workdir / "valid.txt").read_text(encoding="utf-8").splitlines()
    assert len(valid) == 6 and valid_text == [" ".join(sentences[i]) for i in valid]
    assert train[-2:] == ["the bird 's tree sees a cat", "zebras run"]
    assert train[:-2] == [" ".join(words) for i, words in enumerate(sentences) if i not in valid]
    assert (databin / "valid.bin").exists() and not (args.workdir / "data-bin.partial").exists()


@pytest.mark.slow
def test_stops_after_patience_epochs_without_a_lower_loss(trees_file, tmp_path):
    """With a learning rate of 1e-9 the validation loss never gets lower (as logged, to 3 decimals):
    the best is epoch 1 and the run stops at epoch 1 + patience, well before --max-epochs."""
    workdir = tmp_path / "w"
    done = run(INDUCE, *tiny(trees_file, workdir, "--lr", "1e-9", "--patience", "2", "--max-epochs", "20"))
    assert done.returncode == 0, done.stderr[-3000:]
    found = log_validations(workdir)
    assert [epoch for epoch, _ in found] == [1, 2, 3] and len({loss for _, loss in found}) == 1
    record = json.loads((workdir / "results" / "scores.json").read_text(encoding="utf-8"))
    assert (record["best_epoch"], record["epochs"]) == (1, 3)
    assert record["stopped"].startswith("done: 2 validation(s) since the best loss")
    assert sorted(p.name for p in (workdir / "checkpoints").glob("epoch*.pt")) == ["epoch1.pt", "epoch2.pt", "epoch3.pt"]
    assert not list((workdir / "checkpoints").glob("checkpoint[0-9]*.pt"))
    assert torch.load(workdir / "checkpoints" / "epoch2.pt", weights_only=False)["last_optimizer_state"] is None


@pytest.mark.slow
def test_converges_scores_publishes_and_resumes_after_a_kill(trees_file, tmp_path):
    """An uninterrupted run and one killed (SIGKILL) after its third validation, then resumed by the
    same command, validate the same losses and stop at the same epoch with the same scores; the
    published trees score the same by score_induced_trees.py; a finished workdir, other settings on
    it and a second run at once are refused."""
    flags = ("--lr", "1e-3", "--patience", "2", "--max-epochs", "7")
    whole = tmp_path / "whole"
    done = run(INDUCE, *tiny(trees_file, whole, *flags))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((whole / "results" / "scores.json").read_text(encoding="utf-8"))
    assert record["sentences"] == 60 and record["valid_sentences"] == 6
    assert set(record["induced"]) == {"0", "1"} and set(record["baselines"]) == {"left-branching", "right-branching",
                                                                                   "random"}
    assert [point["epoch"] for point in record["curve"]] == [epoch for epoch, _ in log_validations(whole)]
    assert len(record["links"]) == 2 and all(layer["links"] == record["links"][0]["links"] for layer in record["links"])
    assert [layer["layer"] for layer in record["agreement"]] == [0, 1]
    assert all(0 <= layer["concordance"] <= 1 and layer["pairs"] > 0 for layer in record["agreement"])
    assert all(len(point["concordance"]) == 2 for point in record["curve"])
    for name in ("curve.png", "links.png", "scores.txt", "trees/m0.txt", "trees/m1.txt", "trees/random.txt"):
        assert (whole / "results" / name).stat().st_size > 0
    assert "constituent attention, m=1" in done.stdout

    # The published files score the same.
    trees = whole / "results" / "trees"
    scored = run(SCORE, "score", "--gold", trees_file, "--json", trees / "m0.txt", trees / "m1.txt",
                 trees / "right-branching.txt", trees / "left-branching.txt", trees / "random.txt")
    assert scored.returncode == 0, scored.stderr[-3000:]
    recomputed = json.loads(scored.stdout)
    for m in ("0", "1"):
        assert recomputed[str(trees / f"m{m}.txt")] == record["induced"][m]
    for name, value in record["baselines"].items():
        assert recomputed[str(trees / f"{name}.txt")] == value
    twice = run(SCORE, "score", "--gold", trees_file, trees / "m1.txt", trees / "m1.txt")
    assert twice.returncode == 2 and "is given twice" in twice.stderr
    short_gold = tmp_path / "short.txt"
    short_gold.write_text("".join(trees_file.read_text(encoding="utf-8").splitlines(keepends=True)[:59]), encoding="utf-8")
    wrong = run(SCORE, "score", "--gold", short_gold, trees / "m1.txt")
    assert wrong.returncode == 1 and "60 trees for 59 gold trees" in wrong.stderr
    table = run(SCORE, "table", "--m", "1", whole)
    assert table.returncode == 0 and "constituent attention, ptb, m=1" in table.stdout

    # Published: unlexicalised, gzipped trees that score the same; the same table from the published folder.
    out = tmp_path / "published"
    published = run(SCORE, "publish", "--gold", trees_file, "--out", out, whole)
    assert published.returncode == 0, published.stderr[-3000:]
    folder = out / "whole"
    assert sorted(p.name for p in (folder / "trees").iterdir()) == sorted(
        [f"{name}.txt.gz" for name in ("m0", "m1", "left-branching", "right-branching", "random")])
    assert json.loads((folder / "scores.json").read_text(encoding="utf-8")) == record
    assert (folder / "curve.png").read_bytes() == (whole / "results" / "curve.png").read_bytes()
    words = {w for line in trees_file.read_text(encoding="utf-8").splitlines() for w in re.findall(r"([^\s()]+)\)", line)}
    text = gzip.decompress((folder / "trees" / "m1.txt.gz").read_bytes()).decode("utf-8")
    assert len(text.splitlines()) == 60 and not words & set(re.findall(r"[^\s()]+", text)) - {"X", "_", "ROOT"}
    again = run(SCORE, "score", "--gold", trees_file, "--json", *(folder / "trees" / f"m{m}.txt.gz" for m in "01"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert [json.loads(again.stdout)[str(folder / "trees" / f"m{m}.txt.gz")] for m in "01"] == [
        record["induced"]["0"], record["induced"]["1"]]
    # Stopped at its cap (--max-epochs 7): marked, the folder named.
    assert table.stdout.splitlines()[-1].startswith(f"* not converged: {whole} (seed 1, stopped: done: --max-epoch 7")
    assert run(SCORE, "table", "--m", "1", folder).stdout == table.stdout.replace(str(whole), str(folder))
    assert set(p.name for p in out.iterdir()) == {"whole"}  # no partial folder left
    # Refused: a folder already published, two workdirs of one name, an unfinished run, other gold trees.
    existing = run(SCORE, "publish", "--gold", trees_file, "--out", out, whole)
    assert existing.returncode == 1 and "published/whole exists" in existing.stderr
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "whole").symlink_to(whole)
    twice = run(SCORE, "publish", "--gold", trees_file, "--out", tmp_path / "other", whole, tmp_path / "link" / "whole")
    assert twice.returncode == 2 and "is given twice" in twice.stderr
    shutil.copytree(whole, tmp_path / "elsewhere" / "whole")
    same_name = run(SCORE, "publish", "--gold", trees_file, "--out", tmp_path / "other", whole, tmp_path / "elsewhere" / "whole")
    assert same_name.returncode == 1 and "two workdirs are named whole" in same_name.stderr
    (tmp_path / "unfinished").mkdir()
    unfinished = run(SCORE, "publish", "--gold", trees_file, "--out", tmp_path / "other", whole, tmp_path / "unfinished")
    assert unfinished.returncode == 1 and "unfinished holds no finished run" in unfinished.stderr
    other_gold = run(SCORE, "publish", "--gold", short_gold, "--out", tmp_path / "other", whole)
    assert other_gold.returncode == 1 and "parsed" in other_gold.stderr and "not --gold" in other_gold.stderr
    assert not (tmp_path / "other").exists()  # nothing written before everything was checked
    (tmp_path / "renamed").mkdir()
    shutil.copyfile(short_gold, tmp_path / "renamed" / trees_file.name)
    fewer = run(SCORE, "publish", "--gold", tmp_path / "renamed" / trees_file.name, "--out", tmp_path / "other", whole)
    assert fewer.returncode == 1 and "60 trees for 59 gold trees" in fewer.stderr and not (tmp_path / "other").exists()
    # Stopped half-way, or beaten to the folder by another run: nothing of this run is left.
    module = load_script(SCORE)
    copy = shutil.copyfile

    def interrupted(source, target):
        if str(target).endswith("links.png"):
            raise KeyboardInterrupt
        return copy(source, target)

    with mock.patch.object(module.shutil, "copyfile", interrupted), pytest.raises(KeyboardInterrupt):
        module.main(["publish", "--gold", str(trees_file), "--out", str(tmp_path / "stopped"), str(whole)])
    assert list((tmp_path / "stopped").iterdir()) == []

    def beaten(source, target):
        (tmp_path / "raced" / "whole").mkdir(exist_ok=True)
        (tmp_path / "raced" / "whole" / "scores.json").write_text("{}", encoding="utf-8")
        return copy(source, target)

    with mock.patch.object(module.shutil, "copyfile", beaten), pytest.raises(SystemExit) as stopped:
        module.main(["publish", "--gold", str(trees_file), "--out", str(tmp_path / "raced"), str(whole)])
    assert "appeared while whole was being published" in str(stopped.value)
    assert [p.name for p in (tmp_path / "raced").iterdir()] == ["whole"]
    assert [p.name for p in (tmp_path / "raced" / "whole").iterdir()] == ["scores.json"]

    # Killed after the third validation, resumed by the same command.
    killed = tmp_path / "killed"
    command = [sys.executable, str(INDUCE), *map(str, tiny(trees_file, killed, *flags))]
    process = subprocess.Popen(command, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = killed / "checkpoints" / "train.log"
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if log.exists() and "| epoch 003 | valid on 'valid' subset" in log.read_text(encoding="utf-8"):
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (killed / "results" / "scores.json").exists()
    # An epoch scored before the links' agreement was recorded gets it added, the rest kept.
    first = killed / "results" / "epochs" / "epoch1.json"
    earlier = json.loads(first.read_text(encoding="utf-8"))
    del earlier["agreement"]
    first.write_text(json.dumps(earlier), encoding="utf-8")
    resumed = run(INDUCE, *tiny(trees_file, killed, *flags))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "taking over the lock" in resumed.stderr
    assert log_validations(killed) == log_validations(whole)
    again = json.loads((killed / "results" / "scores.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in again.items() if k != "stopped"} == {k: v for k, v in record.items() if k != "stopped"}
    assert (killed / "results" / "trees" / "m1.txt").read_text() == (trees / "m1.txt").read_text()

    # Refusals.
    finished = run(INDUCE, *tiny(trees_file, whole, *flags))
    assert finished.returncode == 1 and "holds a finished run" in finished.stderr
    other = run(INDUCE, *tiny(trees_file, whole, *flags[:-1], "9"))
    assert other.returncode == 1 and "--max-epochs 7 (now 9)" in other.stderr
    other_seed = run(INDUCE, *tiny(trees_file, whole, *flags, "--seed", "2"))
    assert other_seed.returncode == 1 and "--seed 1 (now 2)" in other_seed.stderr


def test_the_default_mode_trains_on_every_sentence(trees_file, tmp_path):
    """fairseq's --required-batch-size-multiple (default 8) left the longest N % 8 sentences out of
    every epoch of the default (--updates) mode, as --until-converged already did not: 5 sentences
    made no batch at all ("The dataset is empty" traceback). One update on 5 sentences trains on all 5."""
    done = run(INDUCE, "--trees", trees_file, "--workdir", tmp_path / "w", "--arch", "constituent_encoder_lm_tiny",
               "--cpu", "--min-layer", "0", "--sentences", "5", "--updates", "1", "--save-interval", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on 5 sentences of trees.txt" in done.stdout and "constituent attention (1 updates, m=0)" in done.stdout
    assert re.search(r"\| epoch 001 \| loss .* \| bsz 5 \|", done.stderr), done.stderr[-3000:]


def in_process(script, *flags) -> str:
    """scripts/induce_trees.py's main in this process; the message it stops with."""
    with pytest.raises(SystemExit) as stopped:
        script.main([str(flag) for flag in flags])
    return str(stopped.value)


def test_the_default_mode_refuses_a_workdir_of_other_training_settings(script, trees_file, tmp_path):
    """The default mode kept a workdir's dictionary whatever --min-count said, scored another --arch's
    checkpoint as this run's (or died loading it) and went on with another --lr or --seed: its
    settings.json records the options that make the training, and a workdir of other ones, of the
    other mode or without the record is refused before anything is touched, naming the option and both
    values. --updates and the parsing options may change (a larger --updates trains on)."""
    workdir = tmp_path / "w"
    flags = ["--trees", trees_file, "--workdir", workdir, "--arch", "constituent_encoder_lm_tiny", "--cpu",
             "--sentences", "12", "--save-interval", "1"]
    done = run(INDUCE, *flags, "--updates", "1", "--min-layer", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    recorded = json.loads((workdir / "settings.json").read_text(encoding="utf-8"))
    assert (recorded["mode"], recorded["min_count"], recorded["arch"], recorded["sentences"]) == (
        "updates", 2, "constituent_encoder_lm_tiny", 12)
    assert recorded["trees"] == str(trees_file.resolve()) and "min_layer" not in recorded
    dictionary = (workdir / "data-bin" / "dict.txt").read_bytes()
    for option, value, said in (("--min-count", "1", "--min-count 2 (now 1)"),
                                ("--arch", "constituent_encoder_lm_small",
                                 "--arch constituent_encoder_lm_tiny (now constituent_encoder_lm_small)"),
                                ("--lr", "0.001", "--lr 0.0001 (now 0.001)"), ("--seed", "2", "--seed 1 (now 2)")):
        changed = [*flags, option, value] if option not in flags else [
            value if k and flags[k - 1] == option else word for k, word in enumerate(flags)]
        message = in_process(script, *changed, "--updates", "2", "--min-layer", "0")
        assert f"holds a run with other settings: {said}; use another --workdir" in message
    assert (workdir / "data-bin" / "dict.txt").read_bytes() == dictionary
    assert json.loads((workdir / "settings.json").read_text(encoding="utf-8")) == recorded
    assert script.trained_updates(workdir / "checkpoints" / "checkpoint_last.pt") == 1
    again = run(INDUCE, *flags, "--updates", "2", "--min-layer", "0")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "constituent attention (2 updates, m=0)" in again.stdout
    # The other mode's workdir, both ways (a settings.json without "mode" is --until-converged's, the only
    # mode that wrote one before the mode was recorded), and a default-mode workdir without the record.
    said = in_process(script, *tiny(trees_file, workdir))
    assert "holds a run of the default mode (--updates), not of --until-converged" in said
    converged = tmp_path / "converged"
    converged.mkdir()
    (converged / "settings.json").write_text(json.dumps({k: v for k, v in recorded.items() if k != "mode"}))
    said = in_process(script, *flags[:2], "--workdir", converged, *flags[4:], "--updates", "1", "--min-layer", "0")
    assert "holds a run of --until-converged, not of the default mode (--updates)" in said
    (workdir / "settings.json").unlink()
    assert "is not empty and holds no settings.json" in in_process(script, *flags, "--updates", "3", "--min-layer", "0")
    assert script.trained_updates(workdir / "checkpoints" / "checkpoint_last.pt") == 2


def test_a_checkpoint_last_cut_short_by_a_kill_is_replaced_by_its_epochs_own(script, tmp_path):
    """fairseq writes checkpoint{N}.pt whole, then copies it to checkpoint_last.pt: a kill during the
    copy leaves the copy cut short, and the resume takes the epoch's file instead."""
    save_dir = tmp_path / "checkpoints"
    save_dir.mkdir()
    for epoch in (2, 3):
        torch.save({"model": {"w": torch.full((1000,), float(epoch))}}, save_dir / f"checkpoint{epoch}.pt")
    whole = (save_dir / "checkpoint3.pt").read_bytes()
    (save_dir / "checkpoint_last.pt").write_bytes(whole[: len(whole) // 2])
    script.recover_cut_short_last(save_dir)
    assert (save_dir / "checkpoint_last.pt").read_bytes() == whole
    assert not (save_dir / "checkpoint_last.pt.tmp").exists()
    script.recover_cut_short_last(save_dir)  # a whole one is left alone
    assert (save_dir / "checkpoint_last.pt").read_bytes() == whole
    for epoch in (2, 3):
        (save_dir / f"checkpoint{epoch}.pt").unlink()
    (save_dir / "checkpoint_last.pt").write_bytes(whole[:100])
    with pytest.raises(script.Refused, match="checkpoint_last.pt is truncated .* no epoch checkpoint with the "
                                              "optimiser's state is left"):
        script.recover_cut_short_last(save_dir)
    script.recover_cut_short_last(tmp_path)  # nothing to resume: nothing to do


def test_a_diverged_run_is_refused_before_its_trees_are_published(script, tmp_path):
    """A NaN validation loss (fairseq's log of a diverged run) gives no best epoch: refused, naming
    the log and the epoch, before anything is written to results/."""
    save_dir = tmp_path / "checkpoints"
    save_dir.mkdir()
    valid = ("2026-11-30 04:50:30 | INFO | valid | epoch {:03d} | valid on 'valid' subset | loss {} | ppl 114.26 | "
             "num_updates {} | best_loss 6.836\n")
    lines = [valid.format(1, 7.5, 73), valid.format(2, "nan", 146), valid.format(3, 7.4, 219)]
    (save_dir / "train.log").write_text("".join(lines))
    args = type("Args", (), {"workdir": tmp_path})()
    with pytest.raises(script.Refused, match=r"train.log: the validation loss of epoch 2 is nan: the run diverged"):
        script.finish(args, None, save_dir, [], [], [], None, "patience")
    assert not (tmp_path / "results").exists()


def test_refuses_a_validation_fraction_that_leaves_nothing_before_writing(script, trees_file, tmp_path):
    said = in_process(script, *tiny(trees_file, tmp_path / "w", "--sentences", "4"))
    assert "leaves no validation or no training sentence" in said
    assert not (tmp_path / "w").exists()


def test_refuses_a_workdir_held_by_another_run_or_not_its_own(script, trees_file, tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    lock = Path(str(busy.resolve()) + ".lock")
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "now", "command": "test"}))
    assert "is being written by another run" in in_process(script, *tiny(trees_file, busy))
    assert lock.exists() and not (busy / "settings.json").exists()
    # the default mode too (it had no lock: two runs at once wrote one data-bin and one checkpoint)
    said = in_process(script, "--trees", trees_file, "--workdir", busy, "--arch", "constituent_encoder_lm_tiny",
                      "--cpu", "--sentences", "12", "--updates", "1", "--min-layer", "0")
    assert "is being written by another run" in said
    assert lock.exists() and not (busy / "settings.json").exists()
    lock.unlink()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "train.txt").write_text("a b\n")
    assert "holds no run to convergence" in in_process(script, *tiny(trees_file, foreign))
    assert not (Path(str(foreign.resolve()) + ".lock")).exists()  # the refused run let its lock go


def test_a_workdir_that_cannot_be_made_is_refused_in_one_line(script, trees_file, tmp_path):
    """A plain file (or a link to nothing) as --workdir ended in mkdir's FileExistsError traceback, in
    both modes; a file on the way in NotADirectoryError's."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    default = ["--trees", trees_file, "--arch", "constituent_encoder_lm_tiny", "--cpu", "--sentences", "12",
               "--updates", "1", "--min-layer", "0"]
    for workdir, message in ((tmp_path / "afile", f"--workdir {tmp_path / 'afile'} is a file: give a new or empty "
                              "folder"),
                             (tmp_path / "dangling", f"--workdir {tmp_path / 'dangling'} is a link to "
                              f"{tmp_path / 'nowhere'}, which does not exist: make that folder, or give another "
                              "--workdir"),
                             (tmp_path / "afile" / "w", f"--workdir {tmp_path / 'afile' / 'w'}: cannot make the "
                              f"folder ({tmp_path / 'afile'} is not a folder)")):
        for flags in (tiny(trees_file, workdir), [*default, "--workdir", workdir]):
            said = in_process(script, *flags)
            assert said.startswith(f"induce_trees.py: error: {message}") and "\n" not in said, said
    assert (tmp_path / "afile").read_text() == "x" and not (tmp_path / "nowhere").exists()


# The published runs (docs/results/grammar-induction/): their trees give their figures again, and
# the page quotes each run's m = 3 figure.

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_RUNS = sorted(path.parent for path in (ROOT / "docs" / "results" / "grammar-induction").glob("*/scores.json"))


def test_a_higher_max_epochs_goes_on_with_an_unfinished_run_only(script, trees_file, tmp_path):
    """The cap bounds a run's cost: raised on a run not yet finished, the run goes on to the new cap
    (settings.json records it); lowered, raised with another setting, or raised on a finished run,
    it is refused naming what differs."""
    workdir = tmp_path / "w"
    workdir.mkdir()

    def claim(*flags):
        args = script.get_parser().parse_args([str(flag) for flag in tiny(trees_file, workdir, *flags)])
        script.check_options(script.get_parser(), args)
        script.claim_workdir(args)

    def settings():
        return json.loads((workdir / "settings.json").read_text(encoding="utf-8"))

    claim("--max-epochs", "7")
    claim("--max-epochs", "9")
    assert settings()["max_epochs"] == 9
    with pytest.raises(script.Refused, match=r"--max-epochs 9 \(now 8\); use another --workdir \(a higher "):
        claim("--max-epochs", "8")
    with pytest.raises(script.Refused, match=r"--max-epochs 9 \(now 12\), --seed 1 \(now 2\); use another --workdir$"):
        claim("--max-epochs", "12", "--seed", "2")
    (workdir / "results").mkdir()
    (workdir / "results" / "scores.json").write_text("{}", encoding="utf-8")
    with pytest.raises(script.Refused, match=r"--max-epochs 9 \(now 12\).*goes on with an unfinished run only"):
        claim("--max-epochs", "12")
    assert settings()["max_epochs"] == 9


@pytest.mark.parametrize("folder", PUBLISHED_RUNS, ids=[path.name for path in PUBLISHED_RUNS])
def test_published_induced_trees_give_their_scores_and_the_page(folder):
    record = json.loads((folder / "scores.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "grammar_induction.md").read_text(encoding="utf-8")
    assert f"results/grammar-induction/{folder.name}/" in page
    assert f"| {100 * record['induced']['3']['all']['sentence_f1']:.1f} |" in page
    gold, _ = induction.read_gold(shared_data("ptb-sample") / Path(record["trees"]).name, record["word_filter"])
    short = short_sentences(gold, record["short"])
    expected = {**{f"m{m}": v for m, v in record["induced"].items()}, **record["baselines"]}
    assert sorted(path.name for path in (folder / "trees").iterdir()) == sorted(f"{key}.txt.gz" for key in expected)
    for key, value in expected.items():
        trees = induction.read_induced(folder / "trees" / f"{key}.txt.gz", gold)
        assert all(set(tree.leaves) == {induction.HIDDEN_WORD} for tree in trees)  # no treebank words published
        assert induction.scores(trees, gold, short) == value


def workdir_of(published: Path, workdir: Path) -> Path:
    """A finished run's workdir made back from its published folder (the trees gunzipped into
    results/trees/, unlexicalised: they score the same)."""
    results = workdir / "results"
    (results / "trees").mkdir(parents=True)
    for name in ("scores.json", "curve.png", "links.png"):
        shutil.copyfile(published / name, results / name)
    for packed in (published / "trees").iterdir():
        (results / "trees" / packed.name.removesuffix(".gz")).write_bytes(gzip.decompress(packed.read_bytes()))
    return workdir


@pytest.mark.skipif(not PUBLISHED_RUNS, reason="no published run")
def test_publish_checks_every_workdir_before_it_writes_and_table_reads_only_runs(tmp_path):
    """A second workdir without its picture is refused before the first is published; table and
    publish refuse a scores.json that is not an induce_trees.py run's, naming it; --short 0 is not a
    length."""
    module = load_script(SCORE)
    gold = shared_data("ptb-sample") / "wsj_0001-0199.mrg.txt"
    first = workdir_of(PUBLISHED_RUNS[0], tmp_path / "a" / PUBLISHED_RUNS[0].name)
    second = workdir_of(PUBLISHED_RUNS[-1], tmp_path / "b" / PUBLISHED_RUNS[-1].name)
    (second / "results" / "links.png").unlink()
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"links.png: no such file; .* is not a finished workdir"):
        module.main(["publish", "--gold", str(gold), "--out", str(out), str(first), str(second)])
    assert not out.exists()
    study = ROOT / "docs" / "results" / "iwslt14-lowres-en-de"
    with pytest.raises(SystemExit, match=r"iwslt14-lowres-en-de/scores.json: not the scores of an induce_trees.py run"):
        module.main(["table", str(PUBLISHED_RUNS[0]), str(study)])
    (second / "results" / "scores.json").write_text('{"setting": "ptb", ', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"results/scores.json: not JSON"):
        module.main(["table", str(second)])
    with pytest.raises(SystemExit):
        module.main(["score", "--short", "0", "--gold", str(gold), str(first / "results" / "trees" / "m3.txt")])


@pytest.mark.skipif(len([p for p in PUBLISHED_RUNS if p.name.startswith("ptb-small-")]) < 2,
                    reason="fewer than two published ptb runs")
def test_table_refuses_runs_of_other_settings_in_one_row_and_marks_unconverged_ones(tmp_path, capsys):
    """table pools the seeds of one setting only when they were run with the same settings (the cap
    aside), naming the folders and the keys; a run not stopped by its patience is marked, named."""
    module = load_script(SCORE)
    runs = [p for p in PUBLISHED_RUNS if p.name.startswith("ptb-small-")]
    copies = []
    for folder in runs:
        (tmp_path / folder.name).mkdir()
        shutil.copyfile(folder / "scores.json", tmp_path / folder.name / "scores.json")
        copies.append(tmp_path / folder.name)
    module.main(["table", *map(str, runs)])
    published = capsys.readouterr().out
    record = json.loads((copies[1] / "scores.json").read_text(encoding="utf-8"))
    changed = {**record, "lr": 0.01, "threshold": 0.5, "keep_case": True, "max_tokens": 1024, "extra_text": "x",
               "min_layer": 1}
    (copies[1] / "scores.json").write_text(json.dumps(changed), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{copies[0]} and {copies[1]}, both of setting ptb, were run with other "
                                         r"settings \(extra_text None / x, keep_case False / True, lr 0.0001 / 0.01, "
                                         r"max_tokens 4096 / 1024, min_layer 3 / 1, threshold 0.8 / 0.5\)"):
        module.main(["table", *map(str, copies)])
    stopped = {**record, "max_epochs": 300, "stopped": "done: --max-epoch 300 reached (2 validation(s) since ...)"}
    (copies[1] / "scores.json").write_text(json.dumps(stopped), encoding="utf-8")
    module.main(["table", *map(str, copies)])
    marked = capsys.readouterr().out
    assert "constituent attention, ptb, m=3 *" in marked
    assert f"* not converged: {copies[1]} (seed {record['seed']}, stopped: done: --max-epoch 300" in marked
    assert marked.splitlines()[3:-1] == published.splitlines()[3:]  # the baselines' rows as before
    module.main(["table", "--json", *map(str, copies)])
    assert json.loads(capsys.readouterr().out)[0]["unconverged"] == [record["seed"]]


def test_publish_refuses_an_out_that_is_a_file_before_it_scores(tmp_path):
    """--out a plain file (or a file on the way to it) is refused up front, naming --out, before any
    workdir is read (here none is a run at all)."""
    module = load_script(SCORE)
    (tmp_path / "outfile").write_text("", encoding="utf-8")
    for out in (tmp_path / "outfile", tmp_path / "outfile" / "sub"):
        with pytest.raises(SystemExit, match=rf"^score_induced_trees.py: error: --out {out}: {tmp_path / 'outfile'} is "
                                             r"a file, not a folder"):
            module.main(["publish", "--gold", str(tmp_path / "none.txt"), "--out", str(out), str(tmp_path)])
    assert (tmp_path / "outfile").read_text(encoding="utf-8") == ""
