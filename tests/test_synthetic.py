"""The tree-dependent benchmark (tree_fairseq.synthetic): the target is the tree's reading of the
source, the tree-blind ceiling is the best exact match without the tree (checked against a
literal enumeration of every derivation), and the data-bins come out of the normal pipeline."""

import importlib.util
import itertools
import math
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch

from tree_fairseq import synthetic
from tree_fairseq.trees import parse_tree


def read_by_tree(tree_line: str, lexicon: dict) -> list[str]:
    """The target a reader of the normalised tree (spans and labels, as the data-bin keeps them)
    writes: children of an INV node reversed, recursively."""
    tree = parse_tree(tree_line)
    nodes = {(node.start, node.end): node.label for node in tree.nodes}

    def read(start, end):
        if start == end:
            return [lexicon[tree.leaves[start]]]
        label = nodes[(start, end)]
        inner = [span for span in nodes if start <= span[0] <= span[1] <= end and span != (start, end)]
        children, position = [], start
        while position <= end:  # the widest inner span starting here, or a leaf
            spans = [span for span in inner if span[0] == position
                     and not any(o != span and o[0] <= span[0] <= span[1] <= o[1] for o in inner)]
            child = spans[0] if spans else (position, position)
            children.append(read(*child))
            position = child[1] + 1
        if label == "INV":
            children.reverse()
        else:
            assert label == "STR"
        return [word for child in children for word in child]

    return read(0, len(tree.leaves) - 1)


def test_targets_are_the_trees_reading_of_the_source():
    config = synthetic.BenchmarkConfig(train=300, valid=5, test=5, max_children=4, seed=7)
    splits = synthetic.generate(config)
    _, lexicon = synthetic.vocabularies(config.vocab_size, config.seed)
    assert len(set(lexicon.values())) == len(lexicon) == config.vocab_size
    inverted = 0
    for example in splits["train"]:
        assert config.min_len <= len(example.source) <= config.max_len
        assert len(set(example.source)) == len(example.source)
        assert list(parse_tree(example.tree).leaves) == example.source
        assert read_by_tree(example.tree, lexicon) == example.target
        inverted += "INV" in example.tree
    assert 0 < inverted < len(splits["train"])
    # the same seed, the same data; another seed, other data
    assert synthetic.generate(config)["train"] == splits["train"]
    other = synthetic.generate(synthetic.BenchmarkConfig(train=300, valid=5, test=5, max_children=4, seed=8))
    assert other["train"] != splits["train"]


def derivation_distribution(n: int, max_children: int, p_inv: float) -> dict:
    """Every derivation of the generator over ``n`` words with its probability, summed per
    target order (a permutation of positions): a literal enumeration."""
    def orders(start, end):
        width = end - start
        if width == 1:
            return {(start,): 1.0}
        result = defaultdict(float)
        choices = range(2, min(max_children, width) + 1)
        for c in choices:
            cut_sets = list(itertools.combinations(range(start + 1, end), c - 1))
            for cuts in cut_sets:
                bounds = [start, *cuts, end]
                children = [orders(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
                for parts in itertools.product(*(child.items() for child in children)):
                    prob = math.prod(p for _, p in parts) / len(choices) / len(cut_sets)
                    straight = tuple(i for order, _ in parts for i in order)
                    inverted = tuple(i for order, _ in reversed(parts) for i in order)
                    result[straight] += (1 - p_inv) * prob
                    result[inverted] += p_inv * prob
        return result

    return orders(0, n)


@pytest.mark.parametrize("max_children,p_inv", [(2, 0.5), (3, 0.5), (3, 0.2), (4, 0.8)])
def test_ceiling_is_the_most_probable_order(max_children, p_inv):
    m = synthetic.best_order_probability(7, max_children, p_inv)
    for n in range(1, 8):
        distribution = derivation_distribution(n, max_children, p_inv)
        assert sum(distribution.values()) == pytest.approx(1.0)
        assert m[n] == pytest.approx(max(distribution.values()), rel=1e-12)
        best = tuple(range(n)) if p_inv <= 0.5 else tuple(reversed(range(n)))
        assert distribution[best] == pytest.approx(m[n], rel=1e-12)


def test_ceiling_of_the_default_benchmark_matches_a_sample():
    config = synthetic.BenchmarkConfig(train=1, valid=1, test=4000, seed=3)
    test = synthetic.generate(config)["test"]
    _, lexicon = synthetic.vocabularies(config.vocab_size, config.seed)
    ceiling = synthetic.tree_blind_ceiling(config, test, lexicon)
    # the best blind guess is right on as many test sentences as the exact value predicts
    assert abs(ceiling.test_sampled - ceiling.test_lengths) < 4 * math.sqrt(ceiling.test_lengths / len(test))
    assert ceiling.expected < 0.25  # the source words alone leave the order open
    # a blind predictor sees a sentence's words only through which words they are, drawn
    # independently of the tree: the most frequent target order per length is the monotone one
    counts = defaultdict(Counter)
    for example in test:
        counts[len(example.source)][tuple(example.target) == tuple(lexicon[w] for w in example.source)] += 1
    assert all(c[True] < c[False] for c in counts.values())


def test_databins_through_the_pipeline(tmp_path):
    from tree_fairseq.data import load_tree_streams

    summary = synthetic.make(synthetic.get_parser().parse_args(
        ["--out", str(tmp_path), "--train", "40", "--valid", "8", "--test", "8", "--seed", "5"]))
    assert set(summary["tree_blind_ceiling"]) == {"expected", "test_lengths", "test_sampled"}
    text = tmp_path / "text"
    examples = synthetic.generate(synthetic.BenchmarkConfig(train=40, valid=8, test=8, seed=5))
    assert (text / "test.tgt").read_text().splitlines() == [" ".join(e.target) for e in examples["test"]]
    for kind in synthetic.TREE_KINDS:
        databin = tmp_path / "data-bin" / kind
        labels, spans = load_tree_streams(str(databin), "test", "src", "tgt")
        first = parse_tree(examples["test"][0].tree if kind == "gold" else
                           (text / f"test.{kind}.src").read_text().splitlines()[0])
        node_dict = (databin / "dict.src.nodes.txt").read_text()
        assert ("INV" in node_dict) == (kind == "gold")
        assert len(labels[0]) == len(first.nodes)
        assert torch.equal(spans[0].view(-1, 2), torch.tensor([[n.start, n.end] for n in first.nodes]))
    assert (tmp_path / "data-bin" / "text" / "train.src-tgt.src.bin").exists()
    assert not list((tmp_path / "data-bin" / "text").glob("*.nodes.*"))


def test_every_benchmark_run_builds_its_model(tmp_path):
    """scripts/tree_benchmark.py's flags for every run make a model fairseq can build on its data-bin."""
    from fairseq import options, tasks

    path = Path(__file__).resolve().parents[1] / "scripts" / "tree_benchmark.py"
    spec = importlib.util.spec_from_file_location("tree_benchmark", path)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    synthetic.make(synthetic.get_parser().parse_args(
        ["--out", str(tmp_path), "--train", "16", "--valid", "8", "--test", "8", "--seed", "5"]))
    for name in benchmark.RUNS:
        flags = benchmark.train_flags(tmp_path, name, 1, 10, tmp_path / "save")
        args = options.parse_args_and_arch(options.get_training_parser(), flags)
        model = tasks.setup_task(args).build_model(args)
        assert args.arch == benchmark.run_spec(name)[0] and sum(p.numel() for p in model.parameters()), name
        if name.startswith("tree_composition_transformer") and "contextual" not in name:
            assert args.encoder_layers == 0  # its paper's model composes the word embeddings


def test_score_translations():
    output = "\n".join(["S-1\tka lo", "T-1\tA B C D E", "H-1\t-0.1\tA B C D E", "D-1\t-0.1\tA B C D E",
                        "T-0\tA B C D E", "H-0\t-0.2\tB A C D E", "P-0\t-0.1 -0.1"])
    scores = synthetic.score_translations(output)
    assert scores["sentences"] == 2 and scores["exact_match"] == 50.0
    assert 0 < scores["bleu"] < 100
    with pytest.raises(ValueError):
        synthetic.score_translations("T-0\tA B")
    with pytest.raises(ValueError, match="1 of the 1 references \\(T- lines\\) hold <unk>"):
        synthetic.score_translations("T-0\tA <<unk>>\nH-0\t-0.1\tA B")


def test_cli_rejects_impossible_configs(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        synthetic.main(["--out", str(tmp_path), "--vocab-size", "5", "--max-len", "8"])
    assert "distinct" in str(exit_info.value.code)
    assert not list(tmp_path.iterdir())


def test_an_out_holding_another_benchmark_or_a_file_is_refused(tmp_path):
    """--no-databins over the benchmark of another seed left the old data-bins and trees beside the
    new text, with a benchmark.json of the new seed; an --out that is a file gave a traceback. Both
    are refused, naming the folder (and the settings that differ), and nothing there is changed; the
    same settings again are written again."""
    out = tmp_path / "syn"
    small = ["--train", "6", "--valid", "2", "--test", "3", "--no-databins"]
    synthetic.main(["--out", str(out), "--seed", "1", *small])
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}

    def refused(*argv):
        with pytest.raises(SystemExit) as exit_info:
            synthetic.main([*argv, *small])
        return str(exit_info.value.code)

    assert refused("--out", str(out), "--seed", "2") == (
        f"tree-fairseq-synthetic: error: --out {out} holds the benchmark of other settings (--seed 1 there, 2 asked): "
        "writing there would mix the two; name another folder, or remove it")
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before
    synthetic.main(["--out", str(out), "--seed", "1", *small])
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before
    (out / "benchmark.json").unlink()
    assert refused("--out", str(out)).startswith(f"tree-fairseq-synthetic: error: --out {out} holds text/ but no "
                                                 "benchmark.json")
    (tmp_path / "file").write_text("x")
    assert refused("--out", str(tmp_path / "file")) == (
        f"tree-fairseq-synthetic: error: --out {tmp_path / 'file'} is a file: name a folder")
    with pytest.raises(SystemExit) as exit_info:
        synthetic.main(["--out", str(tmp_path / "other"), "--train", "0"])
    assert exit_info.value.code == 2 and not (tmp_path / "other").exists()
