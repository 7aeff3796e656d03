"""Every command of README.md runs as written, on small data, so the README cannot drift from
what runs. A command's placeholders (DATA-BIN, CKPT, CODES, WORK, OUT, ``...``) become the test's
small data and budgets; each test lists its replacements, and a replacement whose text is no
longer in the README fails. Every README command has exactly one test here
(:func:`test_every_readme_command_has_its_test`).

Two are not run by a test, and their tests say so and check what can be checked here: the
install and test commands (``.ci/run`` runs those two, read from the README), and the several-
machine ``torchrun`` line (it needs machines with GPUs; its flags are checked against torchrun's
and fairseq's parsers)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sacrebleu
import torch
from conftest import shared_data
from fairseq import options
from helpers import code_blocks, commands, subprocess_env, write_tokenised_corpus
from sacremoses import MosesDetokenizer

from tree_fairseq.trees import parse_tree, trivial_tree

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# Each README command (a command starts with one of these) and the test that runs it: test_readme_KEY.
COMMANDS = {
    "train": "fairseq-train DATA-BIN --user-dir tree_fairseq --task tree_translation --arch tree_transformer_iwslt_de_en",
    "quickstart_iwslt": "bash scripts/quickstart.sh [DIR]",
    "quickstart_synthetic": "bash scripts/quickstart.sh --synthetic",
    "induce_trees": "python scripts/induce_trees.py",
    "parse_as_translation": "python scripts/parse_as_translation.py",
    "benchmark_speed": "python scripts/benchmark_speed.py",
    "benchmark_all": "python scripts/benchmark_all.py",
    "compare_bleu": "bash scripts/compare_bleu.sh",
    "check_same_batches": "python scripts/check_same_batches.py",
    "reverse_children": "python scripts/reverse_children.py",
    "install": "python3 -m venv .venv",
    "test": ".venv/bin/python -m pytest",
    "parse_stanza": "tree-fairseq-parse --parser stanza",
    "parse_spacy": "tree-fairseq-parse --parser spacy",
    "parse_bracketed": "tree-fairseq-parse --parser bracketed",
    "parse_conllu": "tree-fairseq-parse --parser conllu",
    "parse_balanced": "tree-fairseq-parse --parser balanced",
    "learn_bpe": "cat train.tok.de train.tok.en | subword-nmt learn-bpe",
    "apply_bpe": "for split in train valid test; do",
    "preprocess": "tree-fairseq-preprocess",
    "train_tree_model": "fairseq-train data-bin/iwslt14.de-en",
    "interactive": "fairseq-interactive",
    "python_api": "from tree_fairseq.models.tree_transformer import TreeTransformerModel",
    "train_gpus": "fairseq-train DATA-BIN --user-dir tree_fairseq --task tree_translation --arch tree_transformer_wmt_en_de",
    "torchrun": "torchrun",
    "train_cpu_ranks": "for rank in 0 1; do",
}
# Code blocks that are not commands (the package layout).
NOT_COMMANDS = ("tree_fairseq/trees/",)
# A tiny training budget for the commands whose own flags end in "...".
BUDGET = "--optimizer adam --lr 1e-4 --max-tokens 500 --max-update 1 --num-workers 0"


# Reading the README


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [command for _, block in code_blocks(text) if not block.startswith(NOT_COMMANDS)
            for command in commands(block)]


def readme_command(key: str) -> str:
    matches = [command for command in readme_commands() if command.startswith(COMMANDS[key])]
    assert len(matches) == 1, f"README commands starting with {COMMANDS[key]!r}: {matches}"
    return matches[0]


def fill(command: str, replacements: dict) -> str:
    """``command`` with each placeholder replaced; a placeholder it does not contain fails."""
    for old, new in replacements.items():
        assert old in command, f"{old!r} is no longer in the README command {command!r}"
        command = command.replace(old, str(new))
    return command


def bash(command: str, cwd: Path, timeout: int = 900, stdin: str | None = None,
         **extra_env) -> subprocess.CompletedProcess:
    """``command`` in bash with this Python environment's commands first on PATH."""
    env = {**subprocess_env(), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **extra_env}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, input=stdin)


def succeeded(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return result.stdout


def test_every_readme_command_has_its_test():
    found = readme_commands()
    assert len(found) >= len(COMMANDS)
    for command in found:
        keys = [key for key, start in COMMANDS.items() if command.startswith(start)]
        assert len(keys) == 1, f"README command without exactly one test: {command!r} ({keys})"
    for key, start in COMMANDS.items():
        assert any(command.startswith(start) for command in found), f"{start!r} is not in the README"
        assert callable(globals().get(f"test_readme_{key}")), f"no test_readme_{key}"


def test_code_blocks_and_commands():
    text = "a\n\n    x --a \\\n        --b   # note\n    # only a comment\n    y\n\ntext\n```bash\nz\n```\n"
    blocks = code_blocks(text)
    assert blocks == [(3, "x --a \\\n    --b   # note\n# only a comment\ny"), (10, "z")]
    assert commands(blocks[0][1]) == ["x --a --b", "y"]


# Training and the quick start


def test_readme_train(tiny_databin):
    command = fill(readme_command("train"), {"DATA-BIN": tiny_databin, "...": f"{BUDGET} --no-save"})
    assert "done training" in succeeded(bash(command, ROOT))


@pytest.mark.slow
def test_readme_train_gpus(tiny_databin):
    # Without GPUs, fairseq trains in this one process.
    command = fill(readme_command("train_gpus"), {"DATA-BIN": tiny_databin, "...": f"{BUDGET} --no-save"})
    result = bash(command, ROOT)
    assert "done training" in succeeded(result) + result.stderr


def test_readme_train_cpu_ranks(tiny_databin, tmp_path):
    command = fill(readme_command("train_cpu_ranks"), {
        "DATA-BIN": tiny_databin, "... &": f"{BUDGET.replace('1 --num', '2 --num')} --save-dir {tmp_path} &"})
    result = bash(command, ROOT, timeout=600)
    succeeded(result)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    state = torch.load(tmp_path / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert state["optimizer_history"][-1]["num_updates"] == 2
    assert state["cfg"]["distributed_training"]["distributed_world_size"] == 2


def test_readme_torchrun(tiny_databin):
    """Needs several machines with GPUs: torchrun must know its flags, fairseq-train its own."""
    command = readme_command("torchrun")
    launcher, _, train = command.partition(" $(which fairseq-train) ")
    torchrun_help = succeeded(bash("torchrun --help", ROOT))
    for flag in re.findall(r"--[a-z_]+", launcher):
        assert flag in torchrun_help, flag
    assert succeeded(bash("which fairseq-train", ROOT)).strip()
    args = fill(train, {"DATA-BIN": tiny_databin, "...": "tree_transformer_tiny"}).split()
    parsed = options.parse_args_and_arch(options.get_training_parser(), args)
    assert (parsed.task, parsed.arch) == ("tree_translation", "tree_transformer_tiny")


def test_left_pad_source_as_the_readme_names_it(tiny_databin):
    """Every ``--left-pad-source ...`` the README's prose names parses with fairseq 0.12's option
    (store_false: a flag with no value) and turns left-padding off."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    mentions = re.findall(r"`(--left-pad-source\b[^`]*)`", text)
    assert mentions
    for mention in mentions:
        args = [str(tiny_databin), "--task", "tree_translation", "--arch", "tree_transformer_tiny", *mention.split()]
        assert options.parse_args_and_arch(options.get_training_parser(), args).left_pad_source is False, mention


def check_scored_against_the_test_set(out: Path, databin: Path, test_text: Path) -> None:
    """scripts/generate.sh's score in ``out`` is against the data-bin's kept test text (not
    fairseq's T- lines): its sacreBLEU is sacrebleu's own on the detokenised hypotheses and test file."""
    scores = json.loads((out / "score-test.json").read_text())
    assert scores["reference"].startswith(f"{databin / 'test.ref.en'} "), scores["reference"]
    hyps = {}
    for line in (out / "generate-test.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            fields = line.split("\t")
            hyps.setdefault(int(fields[0][2:]), fields[2] if len(fields) > 2 else "")
    detokenizer = MosesDetokenizer(lang="en")
    refs = [detokenizer.detokenize(line.split()) for line in test_text.read_text(encoding="utf-8").splitlines()]
    assert sorted(hyps) == list(range(len(refs)))
    expected = sacrebleu.corpus_bleu([detokenizer.detokenize(hyps[i].split()) for i in sorted(hyps)], [refs])
    assert scores["sacrebleu"]["score"] == pytest.approx(expected.score, abs=1e-9)
    assert scores["sacrebleu"]["details"] == str(expected)  # ref_len too: minutes of training may score 0


@pytest.mark.slow
def test_readme_quickstart_iwslt(tmp_path):
    write_tokenised_corpus(tmp_path / "text")
    command = fill(readme_command("quickstart_iwslt"),
                   {"[DIR]": f"{tmp_path / 'text'} --work {tmp_path / 'work'} --minutes 0.02"})
    output = succeeded(bash(command, ROOT))
    assert "sacreBLEU on IWSLT'14 de-en test (8 sentences)" in output
    for model in ("tree transformer", "transformer"):
        assert re.search(rf"^ +{model} +\S", output, re.M), output
    assert "docs/iwslt_lowres.md" in output  # where the converged scores are
    for model in ("tree_transformer", "transformer"):
        check_scored_against_the_test_set(tmp_path / "work" / model / "test",
                                          tmp_path / "work" / "iwslt14.de-en" / "data-bin" / "de-en",
                                          tmp_path / "text" / "test.en")


@pytest.mark.slow
def test_readme_quickstart_synthetic(tmp_path):
    command = fill(readme_command("quickstart_synthetic"),
                   {"--synthetic": f"--synthetic --work {tmp_path} --minutes 0.02"})
    output = succeeded(bash(command, ROOT))
    for run in ("tree_transformer/gold", "tree_transformer/balanced", "transformer/text"):
        assert re.search(rf"^ +\| {run} \| \w+ \| 1/1 \| \d+ \| \d+\.\d \|", output, re.M), output
    assert re.search(r"^ +\| tree-blind ceiling .* \d+\.\d \|", output, re.M), output


# Experiments


def test_readme_induce_trees(tmp_path):
    shared_data("ptb-sample")
    command = fill(readme_command("induce_trees"), {"WORK": tmp_path}) + (
        " --sentences 25 --arch constituent_encoder_lm_tiny --max-tokens 300 --updates 2 --min-layer 0 --cpu")
    assert "constituent attention (2 updates, m=0)" in succeeded(bash(command, ROOT))


@pytest.mark.slow
def test_readme_parse_as_translation(tmp_path):
    shared_data("ptb-sample")
    command = fill(readme_command("parse_as_translation"), {"WORK": tmp_path}) + (
        " --updates 2 --embed-dim 32 --ffn-dim 64 --heads 2 --encoder-layers 1 --decoder-layers 1 --beam 1")
    output = succeeded(bash(command, ROOT))
    assert "tree decoder" in output and "transformer" in output, output


@pytest.mark.parametrize("arch,databin", [("tree_transformer_tiny", "tiny_databin"),
                                          ("pascal_transformer_tiny", "parent_databin")])
def test_readme_benchmark_speed(arch, databin, request):
    """The Tree Transformer on a tree data-bin; PASCAL, which reads dependency parents, on one with
    parents (--task dependency_translation)."""
    command = fill(readme_command("benchmark_speed"), {"DATA-BIN": request.getfixturevalue(databin)}) + (
        f" --tree-arch {arch} --baseline-arch transformer --embed-dim 32 --ffn-dim 64 --heads 2"
        " --encoder-layers 1 --decoder-layers 1 --updates 2 --warmup 1 --max-tokens 500 --gen-sentences 8"
        " --gen-rounds 1 --flop-batches 1 --memory-batches 1 --lengths 16 --sweep-batch-size 2")
    output = succeeded(bash(command, ROOT))
    for row in ("1 training target words/s", "measured / ideal", "2 generation sentences/s", "3 peak training memory",
                "4 encoder-forward memory growth"):
        assert row in output, output
    generation = output[output.index("2 generation sentences/s"):output.index("3 peak training memory")]
    assert "ideal = FLOPs transf. / FLOPs tree" in generation and "measured / ideal" in generation, output
    assert "NOT MEASURED" not in output, output
    task = "dependency_translation" if arch.startswith("pascal") else "tree_translation"
    assert f"fairseq's {task} batching" in output, output
    assert ("of which the method's elementwise work" in output) == arch.startswith("pascal"), output


@pytest.mark.slow
def test_readme_benchmark_all(tiny_databin, parent_databin, tmp_path):
    """Two families, one on the tree data-bin and PASCAL on --parents-data's."""
    command = fill(readme_command("benchmark_all"), {"DATA-BIN": tiny_databin, "BENCH": tmp_path}) + (
        f" --families treeformer_iwslt_de_en pascal_transformer_iwslt_de_en --parents-data {parent_databin} --runs 1"
        " --embed-dim 32 --ffn-dim 64 --heads 2 --encoder-layers 1 --decoder-layers 1 --updates 2 --warmup 1"
        " --max-tokens 500 --gen-sentences 8 --gen-rounds 1 --flop-batches 1 --memory-batches 1 --lengths 16,32"
        " --sweep-batch-size 2")
    output = succeeded(bash(command, ROOT))
    assert output == (tmp_path / "table.md").read_text()
    assert "| Treeformer (chart) (`treeformer_iwslt_de_en`) | 1 |" in output, output
    assert "| parent-scaled self-attention (PASCAL) (`pascal_transformer_iwslt_de_en`) | 1 |" in output, output
    for arch, databin in (("treeformer_iwslt_de_en", tiny_databin), ("pascal_transformer_iwslt_de_en", parent_databin)):
        assert json.loads((tmp_path / f"{arch}.run1.json").read_text())["data"] == str(databin)


@pytest.mark.slow
def test_readme_compare_bleu(tiny_databin, tiny_corpus, tmp_path):
    command = fill(readme_command("compare_bleu"), {"DATA-BIN OUT 400": f"{tiny_databin} {tmp_path} 2", " ...": ""})
    output = succeeded(bash(command, ROOT))
    for arch, task in (("transformer_iwslt_de_en", "translation"), ("tree_transformer_iwslt_de_en", "tree_translation")):
        assert re.search(rf"^{arch} \({task}\) +2 +sacreBLEU", output, re.M), output
        check_scored_against_the_test_set(tmp_path / arch, tiny_databin, tiny_corpus / "test.en")


@pytest.mark.slow
def test_readme_check_same_batches(tiny_databin, tmp_path):
    """A --batch-tokens text run of one epoch (its log as scripts/train.sh keeps it) checks."""
    train = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", str(tiny_databin), "--user-dir", str(ROOT / "tree_fairseq"),
        "--task", "tree_translation", "--batch-tokens", "text", "--arch", "tree_transformer_tiny", "--cpu",
        "--num-workers", "0", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "64", "--max-epoch", "1",
        "--seed", "2", "--no-save", "--disable-validation", "--log-format", "simple", "--log-interval", "10",
    ], env=subprocess_env(), capture_output=True, text=True)
    assert train.returncode == 0, train.stderr[-3000:]
    (tmp_path / "train.log").write_text(train.stdout + train.stderr, encoding="utf-8")
    command = fill(readme_command("check_same_batches"), {
        "DATA-BIN": tiny_databin, "SRC": "de", "TGT": "en", "--seed N": "--seed 2", "SAVE-DIR": tmp_path})
    output = succeeded(bash(command + " --max-tokens 64", ROOT))
    assert "identical batches (sentence ids, in order) in 1 of 1 epochs" in output, output
    assert re.search(r"(\d+) train_inner lines, \1 within the 1 epochs \(0 of them .*\), \1 agree", output), output


def test_readme_reverse_children(tiny_corpus, tmp_path):
    """The tiny corpus's test trees and text, every node's children reversed."""
    command = fill(readme_command("reverse_children"), {
        "--trees T": f"--trees {tiny_corpus / 'test.tree.de'}", "--text X": f"--text {tiny_corpus / 'test.de'}",
        "T2": tmp_path / "test.tree.de", "X2": tmp_path / "test.de"})
    succeeded(bash(command, ROOT))
    original = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    reordered = (tmp_path / "test.de").read_text(encoding="utf-8").splitlines()
    assert len(reordered) == len(original) == 40
    assert [sorted(line.split()) for line in reordered] == [sorted(line.split()) for line in original]
    assert sum(a != b for a, b in zip(reordered, original)) > 30
    assert len((tmp_path / "test.tree.de").read_text(encoding="utf-8").splitlines()) == 40


# Install and test: .ci/run runs them


def test_readme_install():
    check_ci_reads("install", readme_command("install"))


def test_readme_test():
    check_ci_reads("test", readme_command("test"))


def check_ci_reads(marker: str, command: str):
    """.ci/run runs the line after the README's ``<!-- ci:MARKER -->`` fence: that is ``command``."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    at = lines.index(f"<!-- ci:{marker} -->")
    assert lines[at + 1].startswith("```") and lines[at + 2] == command
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"command_after {marker}" in ci and 'bash -c "$install"' in ci and 'bash -c "$tests"' in ci


# From text to a data-bin

SENTENCES = ["das haus ist klein .", "er sagt ( nichts ) ."]


def test_readme_parse_balanced(tmp_path):
    (tmp_path / "train.tok.de").write_text("".join(line + "\n" for line in SENTENCES))
    succeeded(bash(readme_command("parse_balanced"), tmp_path))
    trees = (tmp_path / "train.tree.de").read_text().splitlines()
    assert trees == [trivial_tree(line.replace("(", "-LRB-").replace(")", "-RRB-").split(), "balanced").to_bracketed()
                     for line in SENTENCES]


def test_readme_parse_bracketed(tmp_path):
    (tmp_path / "train.tok.de").write_text("".join(line + "\n" for line in SENTENCES))
    (tmp_path / "parser-output.txt").write_text(
        "(ROOT (S (NP (ART das) (NN haus)) (VP (VAFIN ist) (ADJD klein)) ($. .)))\n"
        "( (S (PPER er) (VP (VVFIN sagt) (XY -LRB-) (PIS nichts) (XY -RRB-)) ($. .)) )\n")
    succeeded(bash(readme_command("parse_bracketed"), tmp_path))
    trees = [parse_tree(line) for line in (tmp_path / "train.tree.de").read_text().splitlines()]
    assert [" ".join(tree.leaves) for tree in trees] == ["das haus ist klein .", "er sagt -LRB- nichts -RRB- ."]
    assert {(node.label, node.start, node.end) for node in trees[0].nodes} >= {("NP", 0, 1), ("VP", 2, 3)}


def test_readme_parse_spacy(tmp_path):
    pytest.importorskip("spacy", reason="spaCy is not installed: pip install -e '.[test]'")
    (tmp_path / "train.tok.fr").write_text("le chat dort sur le canapé .\nil a vu l&apos; homme .\n")
    succeeded(bash(readme_command("parse_spacy"), tmp_path))
    trees = [parse_tree(line) for line in (tmp_path / "train.tree.fr").read_text().splitlines()]
    assert [" ".join(tree.leaves) for tree in trees] == ["le chat dort sur le canapé .", "il a vu l&apos; homme ."]
    assert all(tree.tags and len(tree.nodes) >= 2 for tree in trees)


def test_readme_parse_conllu(tmp_path):
    (tmp_path / "train.tok.de").write_text("das haus ist klein .\n")
    (tmp_path / "parser-output.conllu").write_text(
        "# text = Das Haus ist klein.\n1\tDas\tder\tDET\tART\t_\t2\tdet\t_\t_\n"
        "2\tHaus\tHaus\tNOUN\tNN\t_\t4\tnsubj\t_\t_\n3\tist\tsein\tAUX\tVAFIN\t_\t4\tcop\t_\t_\n"
        "4\tklein\tklein\tADJ\tADJD\t_\t0\troot\t_\tSpaceAfter=No\n5\t.\t.\tPUNCT\t$.\t_\t4\tpunct\t_\t_\n\n")
    succeeded(bash(readme_command("parse_conllu"), tmp_path))
    assert (tmp_path / "train.tree.de").read_text().splitlines() == [
        "(ADJP (NP (ART das) (NN haus)) (VAFIN ist) (ADJD klein) ($. .))"]


def test_readme_parse_stanza(tmp_path):
    """Parses when stanza's German model is installed; without it (and no network: a closed local
    port stands for stanza's server, so no test run downloads) it stops at once with the command
    that fetches the model."""
    (tmp_path / "train.tok.de").write_text("".join(line + "\n" for line in SENTENCES))
    start = time.monotonic()
    result = bash(readme_command("parse_stanza"), tmp_path, STANZA_RESOURCES_URL="http://127.0.0.1:9")
    if result.returncode == 0:
        trees = [parse_tree(line) for line in (tmp_path / "train.tree.de").read_text().splitlines()]
        assert [" ".join(tree.leaves) for tree in trees] == [s.replace("(", "-LRB-").replace(")", "-RRB-")
                                                             for s in SENTENCES]
    else:
        assert "stanza.download('de'" in result.stderr, result.stderr[-3000:]
        assert time.monotonic() - start < 120
        assert not (tmp_path / "train.tree.de").exists()


def test_readme_preprocess(tiny_corpus, tmp_path):
    (tmp_path / "bpe").mkdir()
    for split in ("train", "valid", "test"):
        for suffix in ("de", "en", "tree.de"):
            (tmp_path / "bpe" / f"{split}.{suffix}").write_bytes((tiny_corpus / f"{split}.{suffix}").read_bytes())
    succeeded(bash(readme_command("preprocess"), tmp_path))
    written = {path.name for path in (tmp_path / "data-bin" / "iwslt14.de-en").iterdir()}
    assert {"dict.de.txt", "dict.de.nodes.txt", "train.de-en.de.nodes.bin", "test.de-en.de.spans.idx",
            "valid.de-en.en.bin"} <= written


def tokenised_and_parsed(directory: Path) -> Path:
    """{split}.tok.{de,en} and {split}.tree.de in ``directory``, as step 1 of the README leaves them."""
    write_tokenised_corpus(directory / "text")
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):
            (directory / f"{split}.tok.{lang}").write_text((directory / "text" / f"{split}.{lang}").read_text())
        trees = [trivial_tree(line.split(), "balanced").to_bracketed()
                 for line in (directory / f"{split}.tok.de").read_text().splitlines()]
        (directory / f"{split}.tree.de").write_text("".join(tree + "\n" for tree in trees))
    return directory


def test_readme_learn_bpe(tmp_path):
    succeeded(bash(readme_command("learn_bpe"), tokenised_and_parsed(tmp_path)))
    assert (tmp_path / "codes").read_text().startswith("#version")


def test_readme_apply_bpe(tmp_path):
    """Step 2 as written, then step 3's command on what it leaves: the data-bin step 4 trains on."""
    tokenised_and_parsed(tmp_path)
    succeeded(bash(readme_command("learn_bpe"), tmp_path))
    succeeded(bash(readme_command("apply_bpe"), tmp_path))
    for split in ("train", "valid", "test"):
        assert (tmp_path / "bpe" / f"{split}.tree.de").read_text() == (tmp_path / f"{split}.tree.de").read_text()
        for lang in ("de", "en"):
            bpe = (tmp_path / "bpe" / f"{split}.{lang}").read_text()
            assert bpe.replace("@@ ", "") == (tmp_path / f"{split}.tok.{lang}").read_text()
    succeeded(bash(readme_command("preprocess"), tmp_path))
    assert (tmp_path / "data-bin" / "iwslt14.de-en" / "test.de-en.de.nodes.bin").exists()


def test_readme_train_tree_model(tiny_databin, tmp_path):
    command = fill(readme_command("train_tree_model"), {
        "data-bin/iwslt14.de-en": tiny_databin, "--max-update 60000": "--max-update 1 --num-workers 0",
        "--max-tokens 4096": "--max-tokens 500", "checkpoints/tree_transformer": tmp_path})
    assert "done training" in succeeded(bash(command, ROOT))
    assert (tmp_path / "checkpoint_last.pt").exists()


# Raw text: fairseq-interactive and the Python API translate the same


@pytest.fixture(scope="module")
def trained(tiny_databin, tmp_path_factory):
    """tree_transformer_tiny after 4 updates on the tiny data-bin (balanced trees), with checkpoint_best.pt."""
    save_dir = tmp_path_factory.mktemp("readme_checkpoints")
    succeeded(bash(f"fairseq-train {tiny_databin} --user-dir tree_fairseq --task tree_translation "
                   f"--arch tree_transformer_tiny --optimizer adam --lr 5e-3 --max-tokens 500 --max-update 4 "
                   f"--num-workers 0 --save-dir {save_dir} --no-epoch-checkpoints --seed 1", ROOT))
    return save_dir


def raw_sentence(tiny_corpus) -> str:
    """A test sentence of the tiny corpus, BPE removed."""
    return (tiny_corpus / "test.de").read_text().splitlines()[3].replace("@@ ", "")


@pytest.fixture(scope="module")
def interactive_translation(tiny_databin, tiny_corpus, trained, bpe_codes):
    # The tiny model was trained on balanced trees: it parses raw text the same way (stanza has no model here).
    command = fill(readme_command("interactive"), {
        "DATA-BIN": tiny_databin, "CKPT": trained / "checkpoint_best.pt", "CODES": bpe_codes,
        "--inference-parser stanza": "--inference-parser balanced"})
    output = succeeded(bash(command, ROOT, timeout=600, stdin=raw_sentence(tiny_corpus) + "\n"))
    return re.findall(r"^D-0\t\S+\t(.*)$", output, re.M)


@pytest.mark.slow
def test_readme_interactive(interactive_translation):
    assert len(interactive_translation) == 1 and interactive_translation[0].strip()


def test_readme_python_api(tiny_databin, tiny_corpus, trained, bpe_codes, interactive_translation):
    code = fill(readme_command("python_api"), {
        '"checkpoints/"': repr(str(trained)), '"DATA-BIN"': repr(str(tiny_databin)), '"CODES"': repr(str(bpe_codes)),
        '"stanza"': '"balanced"', '"ein kleiner satz ."': repr(raw_sentence(tiny_corpus))})
    *body, last = code.splitlines()
    namespace = {}
    exec("\n".join(body), namespace)
    assert eval(last, namespace) == interactive_translation[0]
