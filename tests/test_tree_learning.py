"""Learning regression: the Tree Transformer uses its source tree.

On the tree-dependent benchmark (tree_fairseq.synthetic: the target's word order is given by the
STR/INV labels and spans of the source tree) a small Tree Transformer trained on the gold trees
must get clearly more test sentences exactly right than the same model, same seed and same
updates, on balanced trees (which carry no label and depend only on the length), and clearly
more than the tree-blind ceiling: the exact best any model can do without the tree. A change
that cuts the tree off from the model (nodes masked out, spans lost, node labels dropped)
brings the gold-tree model down to the ceiling and fails this test.

Both models train at once, one thread each (about 2 minutes on an idle 2-core machine).
"""

import subprocess
import sys

import pytest

from helpers import USER_DIR, subprocess_env

from tree_fairseq import synthetic

pytestmark = pytest.mark.slow  # end to end: the README test command runs it, pytest -m "not slow" leaves it out

CONFIG = synthetic.BenchmarkConfig(valid=20, seed=1)  # the default benchmark (docs/tree_benchmark.md)
UPDATES = 1000
MARGIN = 15.0  # exact-match points


def train_command(databin, save_dir):
    return [
        sys.executable, "-m", "fairseq_cli.train", str(databin), "--user-dir", USER_DIR,
        "--task", "tree_translation", "--arch", "tree_transformer_tiny",
        "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--decoder-embed-dim", "64",
        "--decoder-ffn-embed-dim", "128", "--share-decoder-input-output-embed", "--dropout", "0.0",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-3", "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", "100", "--criterion", "cross_entropy", "--max-tokens", "1024",
        "--max-update", str(UPDATES), "--seed", "1", "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--no-save-optimizer-state", "--disable-validation", "--cpu", "--num-workers", "0",
    ]


def exact_match(databin, checkpoint):
    run = subprocess.run([
        sys.executable, "-m", "fairseq_cli.generate", str(databin), "--user-dir", USER_DIR,
        "--task", "tree_translation", "--path", str(checkpoint), "--gen-subset", "test", "--beam", "1",
        "--batch-size", "200", "--required-batch-size-multiple", "1", "--max-len-a", "0",
        "--max-len-b", str(2 * CONFIG.max_len + 2), "--cpu",
        "--num-workers", "0",
    ], env=subprocess_env(), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    scores = synthetic.score_translations(run.stdout)
    assert scores["sentences"] == CONFIG.test
    return scores["exact_match"]


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    work = tmp_path_factory.mktemp("tree_benchmark")
    splits = synthetic.generate(CONFIG)
    synthetic.write_text(splits, str(work / "text"))
    synthetic.build_databins(str(work / "text"), str(work / "data-bin"), kinds=("gold", "balanced"),
                             text_only=False)
    _, lexicon = synthetic.vocabularies(CONFIG.vocab_size, CONFIG.seed)
    return work, synthetic.tree_blind_ceiling(CONFIG, splits["test"], lexicon)


def test_tree_transformer_learns_from_the_gold_tree(benchmark):
    work, ceiling = benchmark
    runs = {}
    for kind in ("gold", "balanced"):
        save_dir = work / f"checkpoints-{kind}"
        log = open(work / f"train-{kind}.log", "w")
        runs[kind] = (subprocess.Popen(train_command(work / "data-bin" / kind, save_dir), env=subprocess_env(),
                                       stdout=log, stderr=subprocess.STDOUT), save_dir, log)
    scores = {}
    for kind, (process, save_dir, log) in runs.items():
        returncode = process.wait()
        log.close()
        text = (work / f"train-{kind}.log").read_text()
        assert returncode == 0, text[-3000:]
        scores[kind] = exact_match(work / "data-bin" / kind, save_dir / "checkpoint_last.pt")
    blind = 100 * ceiling.test_lengths
    summary = f"exact match: gold {scores['gold']:.1f}, balanced {scores['balanced']:.1f}, ceiling {blind:.1f}"
    # the balanced trees say nothing the words do not: that model cannot pass the ceiling by much
    assert scores["balanced"] <= blind + 5, summary
    assert scores["gold"] >= scores["balanced"] + MARGIN, summary
    assert scores["gold"] >= blind + MARGIN, summary
