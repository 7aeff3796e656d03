"""The ``tree_pe_transformer`` model (tree positional encodings in the encoder): options and
architectures, positions from the tree, batch invariance of the encoder and of generation,
incremental decoding against the full forward pass, and fairseq-train + fairseq-generate end to end
on the tiny data-bin. Helpers here are shared with the other models' tests."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq import options, tasks
from fairseq.sequence_generator import SequenceGenerator

import tree_fairseq
from tree_fairseq.models.tree_pe_transformer import TreePETransformerModel
from tree_fairseq.modules.tree_positional_encoding import tree_paths

USER_DIR = str(Path(tree_fairseq.__file__).parent)
MAX_LEN = 12  # fixed (max_len_a = 0) so that a batch's longest source does not change it
ARCH = "tree_pe_transformer_tiny"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run several times faster on one thread than on threads that wait for each
    other on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def parse(databin, *flags, arch=ARCH, task="tree_translation"):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [
        str(databin), "--user-dir", USER_DIR, "--task", task, "--arch", arch, "--cpu", *flags,
    ])


def build(databin, *flags, arch=ARCH, task="tree_translation", left_pad_source=True, seed=1):
    """A tiny model (eval mode) and its task with the test split loaded."""
    args = parse(databin, *flags, arch=arch, task=task)
    args.left_pad_source = left_pad_source
    task = tasks.setup_task(args)
    task.load_dataset("test")
    torch.manual_seed(seed)
    return task, task.build_model(args).eval()


def by_length(task):
    """Test-split indices, shortest source first."""
    dataset = task.dataset("test")
    return sorted(range(len(dataset)), key=lambda i: (dataset.num_tokens(i), i))


def collate(task, indices):
    dataset = task.dataset("test")
    return dataset.collater([dataset[i] for i in indices])


def row_of(batch, index):
    return batch["id"].tolist().index(index)


def generate(model, task, sample, beam):
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=0, max_len_b=MAX_LEN)
    with torch.no_grad():
        return generator.generate([model], sample)


def check_encoder_batch_invariance(task, model):
    """Each short sentence's encoder output, alone and batched with the longest ones."""
    order = by_length(task)
    with torch.no_grad():
        for index in order[:4]:  # includes a sentence without nodes
            alone = collate(task, [index])
            batch = collate(task, [index, *order[-3:]])
            row = row_of(batch, index)
            out_alone = model.encoder.forward_torchscript(alone["net_input"])
            out_batch = model.encoder.forward_torchscript(batch["net_input"])
            real = ~out_batch["encoder_padding_mask"][0][row]
            assert real.sum() == out_alone["encoder_out"][0].size(0) < real.numel()
            assert not out_alone["encoder_padding_mask"][0].any()
            torch.testing.assert_close(
                out_batch["encoder_out"][0][real, row], out_alone["encoder_out"][0][:, 0], atol=1e-5, rtol=0)


def check_generation_batch_invariance(task, model, beam):
    order = by_length(task)
    for index in order[1:3]:
        alone = generate(model, task, collate(task, [index]), beam)[0]
        batch = collate(task, [index, *order[-3:]])
        batched = generate(model, task, batch, beam)[row_of(batch, index)]
        assert len(alone) == len(batched) == beam
        for hypo_alone, hypo_batched in zip(alone, batched):
            assert hypo_alone["tokens"].tolist() == hypo_batched["tokens"].tolist()
            torch.testing.assert_close(hypo_alone["positional_scores"], hypo_batched["positional_scores"],
                                       atol=1e-5, rtol=0)


def check_incremental_decoding(task, model, indices):
    """Step by step with an incremental state, against the full forward pass, through a beam
    reorder at step 3. Two hypotheses per sentence, with different prefixes (other sentences'
    targets); the reorder stays within each sentence's beam, as the generator's does (fairseq's
    cross-attention keeps its cache when the batch size does not change)."""
    net_input = collate(task, indices)["net_input"]
    sources = torch.tensor([0, 0, 1, 1, 2, 2])  # the generator's expansion to beam 2
    prev = net_input["prev_output_tokens"][torch.tensor([0, 1, 1, 2, 2, 0])]
    pairs = {k: v.index_select(0, sources) for k, v in net_input.items() if k != "prev_output_tokens"}
    with torch.no_grad():
        full = model(**pairs, prev_output_tokens=prev)[0]  # (6, T, V)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder.forward_torchscript(net_input), sources)
        state, rows, compared = {}, torch.arange(6), 0
        for t in range(prev.size(1)):
            if t == 3:
                new_order = torch.tensor([1, 0, 2, 2, 5, 4])
                model.decoder.reorder_incremental_state_scripting(state, new_order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
                rows = rows[new_order]
            step = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[rows, t].ne(task.target_dictionary.pad())  # right-padded targets
            torch.testing.assert_close(step[real, -1], full[rows[real], t], atol=1e-5, rtol=1e-5)
            compared += int(real.sum())
    assert compared > 4 * 6


def train_and_generate(databin, save_dir, arch, *train_flags, task="tree_translation", generate_flags=()):
    """fairseq-train (4 updates) then fairseq-generate on the test split, as subprocesses without
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD. Returns generate's stdout."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["OMP_NUM_THREADS"] = "1"  # see one_thread
    common = [str(databin), "--user-dir", USER_DIR, "--task", task, "--cpu", "--num-workers", "0"]
    train = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *common, "--arch", arch, *train_flags,
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "4",
        "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--no-save-optimizer-state",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    ], env=env, capture_output=True, text=True)
    assert train.returncode == 0, train.stderr[-3000:]
    assert (save_dir / "checkpoint_last.pt").exists()
    generate_run = subprocess.run([
        sys.executable, "-m", "fairseq_cli.generate", *common, "--path", str(save_dir / "checkpoint_last.pt"),
        "--gen-subset", "test", "--beam", "3", "--batch-size", "16", "--max-len-a", "0", "--max-len-b", "10",
        *generate_flags,
    ], env=env, capture_output=True, text=True)
    assert generate_run.returncode == 0, generate_run.stderr[-3000:]
    return generate_run.stdout


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin)


# Options and architectures


def test_options_are_in_the_model_help():
    parser = options.get_training_parser()
    TreePETransformerModel.add_args(parser)
    text = parser.format_help()
    for flag in ("--tree-pe-max-depth", "--tree-pe-num-weights", "--share-all-embeddings", "--encoder-layers"):
        assert flag in text


@pytest.mark.parametrize("arch, dims", [
    ("tree_pe_transformer_iwslt_de_en", (512, 1024, 4, 6, 6)),
    ("tree_pe_transformer_tiny", (32, 64, 4, 2, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
           args.encoder_layers, args.decoder_layers)
    assert got == dims
    assert (args.tree_pe_max_depth, args.tree_pe_num_weights) == (32, None)
    assert parse(tiny_databin, "--tree-pe-max-depth", "7", arch=arch).tree_pe_max_depth == 7


def test_tree_positions_replace_sinusoidal_ones(tiny):
    task, model = tiny
    encoder = model.encoder
    assert encoder.embed_positions is None
    assert model.decoder.embed_positions is not None  # the decoder reads a sentence
    assert encoder.embed_node_labels.num_embeddings == len(task.node_dictionary)
    assert id(encoder.embed_node_labels) not in {id(encoder.embed_tokens), id(model.decoder.embed_tokens)}
    # 32 // (2 · 32) weights -> one p, a 64-dimensional stack projected to 32
    assert encoder.tree_positions.num_weights == 1 and encoder.tree_positions.projection.in_features == 64

    batch = collate(task, by_length(task)[-3:])
    net_input = batch["net_input"]
    leaf_padding_mask = net_input["src_tokens"].eq(task.source_dictionary.pad())
    node_paths, leaf_paths = tree_paths(net_input["src_node_spans"], leaf_padding_mask,
                                        net_input["src_node_padding_mask"], 32)
    encoder_input = {k: v for k, v in net_input.items() if k != "prev_output_tokens"}
    assert encoder.layernorm_embedding is None
    with torch.no_grad():
        out = encoder(**encoder_input, return_all_hiddens=True)
        positions = encoder.tree_positions(torch.cat([node_paths, leaf_paths], dim=1))
        expected = out["encoder_embedding"][0] + positions  # the layers' input
        expected = expected.masked_fill(out["encoder_padding_mask"][0].unsqueeze(-1), 0)
        torch.testing.assert_close(out["encoder_states"][0].transpose(0, 1), expected)
    assert len(out["encoder_states"]) == 1 + len(encoder.layers)


def test_the_tree_changes_the_encoding(tiny):
    """The same words under another tree: the leaves' encodings change with their positions."""
    task, model = tiny
    index = next(i for i in by_length(task) if task.dataset("test").node_sizes[i] >= 2)
    net_input = {k: v for k, v in collate(task, [index])["net_input"].items() if k != "prev_output_tokens"}
    flat = {**net_input, "src_node_labels": net_input["src_node_labels"][:, -1:],
            "src_node_spans": net_input["src_node_spans"][:, -1:],
            "src_node_padding_mask": net_input["src_node_padding_mask"][:, -1:]}  # the root only
    with torch.no_grad():
        leaves = model.encoder(**net_input)["encoder_out"][0][-net_input["src_tokens"].size(1):]
        flat_leaves = model.encoder(**flat)["encoder_out"][0][-net_input["src_tokens"].size(1):]
    assert not torch.allclose(leaves, flat_leaves, atol=1e-3)


def test_decoder_attends_to_nodes_and_hands_back_leaf_weights(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-3:])
    net_input = batch["net_input"]
    with torch.no_grad():
        encoder_out = model.encoder.forward_torchscript(net_input)
        items = encoder_out["encoder_out"][0].size(0)
        assert items == net_input["src_node_labels"].size(1) + net_input["src_tokens"].size(1)
        _, extra = model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out)
        assert extra["attn"][0].shape == (*net_input["prev_output_tokens"].shape, net_input["src_tokens"].size(1))
        # the nodes reach the decoder: changing their states changes its output
        changed = {**encoder_out, "encoder_out": [encoder_out["encoder_out"][0].clone()]}
        changed["encoder_out"][0][0] += 1.0
        logits = model.decoder(net_input["prev_output_tokens"], encoder_out=encoder_out)[0]
        changed_logits = model.decoder(net_input["prev_output_tokens"], encoder_out=changed)[0]
    assert not torch.allclose(logits, changed_logits, atol=1e-4)


# Batch invariance and incremental decoding


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_encoder_output_is_batch_invariant(tiny_databin, left_pad_source):
    check_encoder_batch_invariance(*build(tiny_databin, left_pad_source=left_pad_source))


@pytest.mark.parametrize("beam", [1, 3])
def test_generation_is_batch_invariant(tiny, beam):
    check_generation_batch_invariance(*tiny, beam)


def test_incremental_decoding_matches_full_forward(tiny):
    task, model = tiny
    check_incremental_decoding(task, model, by_length(task)[10:13])


def test_training_step_reaches_every_part(tiny_databin):
    task, model = build(tiny_databin, "--share-all-embeddings")
    model.train()
    batch = collate(task, by_length(task)[-4:])
    logits = model(**batch["net_input"])[0]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(),
                                             ignore_index=task.target_dictionary.pad())
    loss.backward()
    encoder = model.encoder
    for parameter in (encoder.embed_node_labels.weight, encoder.tree_positions.theta,
                      encoder.tree_positions.projection.weight, encoder.layers[0].self_attn.q_proj.weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


# End to end


def test_fairseq_train_and_generate(tiny_databin, tmp_path):
    stdout = train_and_generate(tiny_databin, tmp_path, ARCH, "--share-all-embeddings")
    hypotheses = re.findall(r"^H-(\d+)\t", stdout, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(40))
    assert "Generate test with beam=3: BLEU4" in stdout
