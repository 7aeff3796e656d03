"""The ``constituent_transformer`` model: architectures, the encoder's link probabilities, batch
invariance, incremental decoding against the full forward pass, and fairseq-train +
fairseq-generate end to end on the tiny tree data-bin (``--task tree_translation``) and on a plain
fairseq-preprocess data-bin (``--task translation``)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq import options, tasks
from fairseq_cli import preprocess as fairseq_preprocess

import tree_fairseq
from tree_fairseq.modules.constituent_attention import ConstituentSelfAttention

USER_DIR = str(Path(tree_fairseq.__file__).parent)
ARCH = "constituent_transformer_tiny"


def parse(databin, *flags, arch=ARCH, task="tree_translation"):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [
        str(databin), "--user-dir", USER_DIR, "--task", task, "--arch", arch, "--cpu", *flags,
    ])


def build(databin, *flags, left_pad_source=True, seed=1, task="tree_translation"):
    """The tiny model (eval mode) and its task with the test split loaded."""
    args = parse(databin, *flags, task=task)
    args.left_pad_source = left_pad_source
    setup = tasks.setup_task(args)
    setup.load_dataset("test")
    torch.manual_seed(seed)
    return setup, setup.build_model(args).eval()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run faster on one thread, and much faster on a machine shared with other jobs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def plain_databin(tiny_corpus, tmp_path_factory):
    """The tiny corpus's text, binarised by fairseq-preprocess alone (no trees)."""
    destdir = tmp_path_factory.mktemp("plain_databin")
    fairseq_preprocess.main(options.get_preprocessing_parser().parse_args([
        "--source-lang", "de", "--target-lang", "en", "--trainpref", str(tiny_corpus / "train"),
        "--validpref", str(tiny_corpus / "valid"), "--testpref", str(tiny_corpus / "test"),
        "--destdir", str(destdir), "--joined-dictionary", "--workers", "1",
    ]))
    return destdir


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin)


def by_length(task):
    dataset = task.dataset("test")
    return sorted(range(len(dataset)), key=lambda i: (len(dataset[i]["source"]), i))


def collate(task, indices):
    dataset = task.dataset("test")
    return dataset.collater([dataset[i] for i in indices])


def row_of(batch, index):
    return batch["id"].tolist().index(index)


@pytest.mark.parametrize("arch, dims", [
    ("constituent_transformer_iwslt_de_en", (512, 1024, 4, 6, 6)),
    ("constituent_transformer_wmt_en_de", (512, 2048, 8, 6, 6)),
    ("constituent_transformer_tiny", (32, 64, 4, 2, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
            args.encoder_layers, args.decoder_layers) == dims
    assert args.renormalize_constituent_attention is False
    assert parse(tiny_databin, "--renormalize-constituent-attention", arch=arch).renormalize_constituent_attention


def test_layers_use_constituent_attention(tiny_databin, tiny):
    _, model = tiny
    layer = model.encoder.layers[0]
    assert isinstance(layer.self_attn, ConstituentSelfAttention) and not layer.self_attn.renormalize
    _, renormalized = build(tiny_databin, "--renormalize-constituent-attention")
    assert renormalized.encoder.layers[0].self_attn.renormalize


def test_links_follow_the_hierarchical_constraint(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-5:])
    with torch.no_grad():
        out = model.encoder.forward_torchscript(batch["net_input"])
    links = out["constituent_links"][0]  # (B, L, n - 1)
    padding = out["encoder_padding_mask"][0]
    assert links.shape == (padding.size(0), len(model.encoder.layers), padding.size(1) - 1)
    assert ((links >= 0) & (links <= 1)).all()
    assert (links[:, 1:] >= links[:, :-1]).all()  # a^l >= a^{l-1}
    # EOS, the last token of each sentence, is outside every constituent, as padding is
    outside = padding | batch["net_input"]["src_tokens"].eq(task.source_dictionary.eos())
    touches_outside = outside[:, :-1] | outside[:, 1:]
    assert touches_outside.any() and (links.masked_select(touches_outside.unsqueeze(1)) == 0).all()
    assert (links.masked_select(~touches_outside.unsqueeze(1)) > 0).all()


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_encoder_output_is_batch_invariant(tiny_databin, left_pad_source):
    task, model = build(tiny_databin, left_pad_source=left_pad_source)
    order = by_length(task)
    with torch.no_grad():
        for index in order[:3] + order[20:22]:
            alone = collate(task, [index])
            batch = collate(task, [index, *order[-3:]])
            row = row_of(batch, index)
            out_alone = model.encoder.forward_torchscript(alone["net_input"])
            out_batch = model.encoder.forward_torchscript(batch["net_input"])
            real = ~out_batch["encoder_padding_mask"][0][row]
            assert real.sum() == alone["net_input"]["src_tokens"].size(1) < real.numel()
            torch.testing.assert_close(
                out_batch["encoder_out"][0][real, row], out_alone["encoder_out"][0][:, 0], atol=1e-5, rtol=0)
            real_links = real[:-1] & real[1:]
            torch.testing.assert_close(
                out_batch["constituent_links"][0][row][:, real_links], out_alone["constituent_links"][0][0],
                atol=1e-5, rtol=0)


def test_tree_keys_are_ignored(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-4:])
    net_input = batch["net_input"]
    assert "src_node_spans" in net_input
    text_only = {k: net_input[k] for k in ("src_tokens", "src_lengths", "prev_output_tokens")}
    with torch.no_grad():
        torch.testing.assert_close(model(**net_input)[0], model(**text_only)[0], atol=0, rtol=0)


def test_incremental_decoding_matches_full_forward(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-3:])
    net_input = batch["net_input"]
    prev = net_input["prev_output_tokens"]
    assert prev.size(1) > 5
    with torch.no_grad():
        full = model(**net_input)[0]  # (B, T, V)
        # As fairseq's SequenceGenerator: two beams per sentence, beams reordered within their
        # sentence, then a finished sentence leaves the batch.
        rows = torch.arange(prev.size(0)).repeat_interleave(2)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder.forward_torchscript(net_input), rows)
        steps = {3: torch.tensor([1, 0, 3, 2, 5, 4]), 5: torch.tensor([2, 3, 4, 5])}
        state, compared = {}, 0
        for t in range(prev.size(1)):
            if t in steps:
                model.decoder.reorder_incremental_state_scripting(state, steps[t])
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, steps[t])
                rows = rows[steps[t]]
            step = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[rows, t].ne(task.target_dictionary.pad())
            torch.testing.assert_close(step[real, -1], full[rows[real], t], atol=1e-5, rtol=1e-5)
            compared += int(real.sum())
    assert compared > 3 * 5
    assert encoder_out["constituent_links"][0].size(0) == 4


def test_training_step_reaches_the_constituent_attention(tiny_databin):
    task, model = build(tiny_databin)
    model.train()
    batch = collate(task, by_length(task)[-4:])
    logits = model(**batch["net_input"])[0]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(),
                                             ignore_index=task.target_dictionary.pad())
    loss.backward()
    assert torch.isfinite(loss)
    for layer in model.encoder.layers:
        assert layer.constituent_attention.query.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("task, databin", [("tree_translation", "tiny_databin"), ("translation", "plain_databin")])
def test_fairseq_train_and_generate(request, tmp_path, task, databin):
    databin = request.getfixturevalue(databin)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["OMP_NUM_THREADS"] = "1"  # see one_thread
    common = [str(databin), "--user-dir", USER_DIR, "--task", task, "--cpu", "--num-workers", "0"]
    train = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *common, "--arch", ARCH, "--share-all-embeddings",
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "3",
        "--save-dir", str(tmp_path), "--no-epoch-checkpoints", "--no-save-optimizer-state",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    ], env=env, capture_output=True, text=True)
    assert train.returncode == 0, train.stderr[-3000:]
    assert (tmp_path / "checkpoint_last.pt").exists()

    generate = subprocess.run([
        sys.executable, "-m", "fairseq_cli.generate", *common, "--path", str(tmp_path / "checkpoint_last.pt"),
        "--gen-subset", "test", "--beam", "3", "--batch-size", "16", "--max-len-a", "0", "--max-len-b", "10",
    ], env=env, capture_output=True, text=True)
    assert generate.returncode == 0, generate.stderr[-3000:]
    hypotheses = re.findall(r"^H-(\d+)\t", generate.stdout, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(40))
    assert "Generate test with beam=3: BLEU4" in generate.stdout
