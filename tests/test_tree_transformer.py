"""The ``tree_transformer`` model: options and architectures, batch invariance of the encoder's
nodes too, incremental decoding that computes the tree memory once per layer, the Table 3
ablations, bf16 autocast, and fairseq-train + fairseq-generate + fairseq-validate end to end on the
tiny data-bin. What every model owes fairseq is test_model_contract.py's."""

import functools
import re
import subprocess
import sys

import pytest
import torch
from fairseq import options
from fairseq.modules import MultiheadAttention
from helpers import (
    by_length,
    cli_args,
    collate,
    generate,
    row_of,
    subprocess_env,
    train_and_generate,
)

import helpers
from tree_fairseq.models.tree_transformer import TreeEncoderAttention, TreeTransformerModel

ARCH = "tree_transformer_tiny"
parse = functools.partial(helpers.parse, arch=ARCH)
build = functools.partial(helpers.build, arch=ARCH)


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin)


# Options and architectures


def test_options_are_in_the_model_help():
    parser = options.get_training_parser()
    TreeTransformerModel.add_args(parser)
    text = parser.format_help()
    for flag in ("--hier-embed-size", "--no-hier-embed", "--no-subtree-mask", "--no-tree-cross-attention",
                 "--leaf-weight-per-head",
                 "--share-all-embeddings", "--share-decoder-input-output-embed", "--encoder-normalize-before"):
        assert flag in text


# (d, d_ffn, heads, encoder layers, decoder layers, dropout, attention dropout): appendix 7.4 gives
# d, d_ffn and dropout for IWSLT (512, 1024, 0.3) and WMT base (512, 2048, 0.1), section 5.1 d = 1024
# for WMT big; the rest are the Transformer settings of Ott et al. (2018) that the paper replicates,
# those of fairseq's baseline architecture in the same config's twin (configs/).
@pytest.mark.parametrize("arch, baseline, dims", [
    ("tree_transformer_iwslt_de_en", "transformer_iwslt_de_en", (512, 1024, 4, 6, 6, 0.3, 0.0)),
    ("tree_transformer_wmt_en_de", "transformer_wmt_en_de", (512, 2048, 8, 6, 6, 0.1, 0.0)),
    ("tree_transformer_wmt_en_de_big", "transformer_vaswani_wmt_en_de_big", (1024, 4096, 16, 6, 6, 0.3, 0.0)),
    ("tree_transformer_tiny", None, (32, 64, 4, 2, 2, 0.1, 0.0)),
])
def test_architectures_set_defaults(tiny_databin, arch, baseline, dims):
    def settings(args):
        return (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
                args.encoder_layers, args.decoder_layers, args.dropout, args.attention_dropout)

    args = parse(tiny_databin, arch=arch)
    assert settings(args) == dims
    assert (args.decoder_embed_dim, args.decoder_ffn_embed_dim, args.decoder_attention_heads) == (
        dims[0], dims[1], dims[2])
    assert (args.activation_dropout, args.encoder_normalize_before, args.decoder_normalize_before) == (
        0.0, False, False)
    assert (args.hier_embed_size, args.no_hier_embed, args.no_subtree_mask, args.no_tree_cross_attention,
            args.leaf_weight_per_head) == (100, False, False, False, False)
    if baseline is not None:  # the baseline twin in configs/ has the same sizes (its dropout is set there)
        baseline_args = options.parse_args_and_arch(
            options.get_training_parser(), [str(tiny_databin), "--arch", baseline])
        assert settings(baseline_args)[:5] + settings(baseline_args)[6:] == dims[:5] + dims[6:]
    # a command-line value wins over the architecture's default
    assert parse(tiny_databin, "--hier-embed-size", "7", arch=arch).hier_embed_size == 7
    assert parse(tiny_databin, "--dropout", "0.2", arch=arch).dropout == 0.2


def test_node_labels_have_their_own_table(tiny):
    task, model = tiny
    assert model.encoder.embed_node_labels.num_embeddings == len(task.node_dictionary)
    assert model.encoder.embed_node_labels.padding_idx == task.node_dictionary.pad()
    assert model.decoder.output_projection.out_features == len(task.target_dictionary)
    tables = {id(model.encoder.embed_tokens), id(model.decoder.embed_tokens)}
    assert id(model.encoder.embed_node_labels) not in tables
    assert model.encoder.layers[0].self_attn.hierarchical_embedding.vertical.size(0) == 100


def test_leaf_weights_are_shared_by_the_heads_unless_asked(tiny_databin, tiny):
    # w = L·u with u ∈ R^d (eqs. 16, 23): one vector per attention module, for all its heads
    _, model = tiny
    for layer in model.encoder.layers:
        assert layer.self_attn.leaf_weight.weight.shape == (1, 32)
    for layer in model.decoder.layers:
        assert layer.encoder_attn.leaf_weight.weight.shape == (1, 32)
    _, model = build(tiny_databin, "--leaf-weight-per-head")
    assert model.encoder.layers[0].self_attn.leaf_weight.weight.shape == (4, 32)
    assert model.decoder.layers[0].encoder_attn.leaf_weight.weight.shape == (4, 32)
    # a checkpoint with one u per head (the default before) loads into the default model
    _, shared = build(tiny_databin, seed=5)
    shared.load_state_dict(model.state_dict())
    assert shared.decoder.layers[1].encoder_attn.leaf_weight.weight.shape == (4, 32)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), shared.state_dict().values()))


def test_embedding_sharing_flags(tiny_databin):
    task, model = build(tiny_databin, "--share-all-embeddings")
    assert model.encoder.embed_tokens is model.decoder.embed_tokens
    assert model.decoder.output_projection.weight is model.decoder.embed_tokens.weight
    assert model.encoder.embed_node_labels.num_embeddings == len(task.node_dictionary)
    _, model = build(tiny_databin, "--share-decoder-input-output-embed")
    assert model.encoder.embed_tokens is not model.decoder.embed_tokens
    assert model.decoder.output_projection.weight is model.decoder.embed_tokens.weight


# Batch invariance


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_encoder_output_is_batch_invariant(tiny_databin, left_pad_source):
    task, model = build(tiny_databin, left_pad_source=left_pad_source)
    order = by_length(task)
    longest = order[-3:]
    with torch.no_grad():
        for index in order[:4]:  # includes a sentence without nodes
            alone = collate(task, [index])
            batch = collate(task, [index, *longest])
            row = row_of(batch, index)
            out_alone = model.encoder.forward_torchscript(alone["net_input"])
            out_batch = model.encoder.forward_torchscript(batch["net_input"])
            leaves = ~out_batch["encoder_padding_mask"][0][row]
            assert leaves.sum() == alone["net_input"]["src_tokens"].size(1) < leaves.numel()
            torch.testing.assert_close(
                out_batch["encoder_out"][0][leaves, row], out_alone["encoder_out"][0][:, 0], atol=1e-5, rtol=0)
            m = alone["net_input"]["src_node_labels"].size(1)
            assert batch["net_input"]["src_node_padding_mask"][row, m:].all()
            torch.testing.assert_close(
                out_batch["tree_source"][0].nodes[row, :m], out_alone["tree_source"][0].nodes[0], atol=1e-5, rtol=0)


# Incremental decoding


def test_incremental_decoding_matches_full_forward(tiny, monkeypatch):
    task, model = tiny
    batch = collate(task, by_length(task)[10:13])
    net_input = batch["net_input"]
    prev = net_input["prev_output_tokens"]
    computed = []
    tree_memory = TreeEncoderAttention.tree_memory

    def counted_tree_memory(self, *args):
        computed.append(self)
        return tree_memory(self, *args)

    monkeypatch.setattr(TreeEncoderAttention, "tree_memory", counted_tree_memory)
    with torch.no_grad():
        full = model(**net_input)[0]  # (B, T, V)
        computed.clear()
        encoder_out = model.encoder.forward_torchscript(net_input)  # as the generator calls it
        state, rows, reordered, compared = {}, torch.arange(prev.size(0)), False, 0
        for t in range(prev.size(1)):
            if t == 3:  # a beam step: sentence 1 continues twice, sentence 2 once, sentence 0 is dropped
                new_order = torch.tensor([1, 2, 1])
                model.decoder.reorder_incremental_state_scripting(state, new_order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
                rows, reordered = rows[new_order], True
            step = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[rows, t].ne(task.target_dictionary.pad())  # right-padded targets
            torch.testing.assert_close(step[real, -1], full[rows[real], t], atol=1e-5, rtol=1e-5)
            compared += int(real.sum())
    assert reordered and compared > 3 * 4
    # the accumulated source is computed once per layer, not once per step
    assert sorted(map(id, computed)) == sorted(id(layer.encoder_attn) for layer in model.decoder.layers)


# Ablations and precision


@pytest.mark.parametrize("flag", ["--no-hier-embed", "--no-subtree-mask", "--no-tree-cross-attention"])
def test_ablations_build_and_run(tiny_databin, tiny, flag):
    task, model = build(tiny_databin, flag)
    encoder_attention = model.encoder.layers[0].self_attn
    cross_attention = model.decoder.layers[0].encoder_attn
    if flag == "--no-hier-embed":
        assert encoder_attention.hierarchical_embedding is None and cross_attention.hierarchical_embedding is None
    elif flag == "--no-subtree-mask":
        assert not encoder_attention.subtree_masking
    else:
        assert type(cross_attention) is MultiheadAttention
    # The ablated model with the full model's parameters: only the ablated computation differs.
    default = tiny[1]
    assert model.load_state_dict(default.state_dict(), strict=False).missing_keys == []
    batch = collate(task, by_length(task)[-4:])
    with torch.no_grad():
        assert not torch.allclose(model(**batch["net_input"])[0], default(**batch["net_input"])[0], atol=1e-3)
    hypos = generate(model, task, batch, beam=3)
    assert all(len(h) == 3 and h[0]["tokens"][-1] == task.target_dictionary.eos() for h in hypos)

    model.train()
    logits = model(**batch["net_input"])[0]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(),
                                             ignore_index=task.target_dictionary.pad())
    loss.backward()
    assert torch.isfinite(loss)
    assert model.encoder.embed_tokens.weight.grad.abs().sum() > 0
    assert model.decoder.layers[0].encoder_attn.q_proj.weight.grad.abs().sum() > 0


def test_pre_norm_builds_and_runs(tiny_databin):
    task, model = build(tiny_databin, "--encoder-normalize-before", "--decoder-normalize-before")
    assert model.encoder.layer_norm is not None and model.encoder.layers[0].normalize_before
    batch = collate(task, by_length(task)[-4:])
    with torch.no_grad():
        assert torch.isfinite(model(**batch["net_input"])[0]).all()


def test_bf16_autocast_forward_has_no_nan(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-6:])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        encoder_out = model.encoder.forward_torchscript(batch["net_input"])
        logits = model(**batch["net_input"])[0]
    assert logits.dtype == torch.bfloat16
    assert torch.isfinite(logits).all()
    assert torch.isfinite(encoder_out["encoder_out"][0]).all() and torch.isfinite(encoder_out["tree_source"][0].nodes).all()


# End to end


@pytest.mark.slow
def test_fairseq_train_and_generate(tiny_databin, tmp_path):
    stdout = train_and_generate(tiny_databin, tmp_path, ARCH, "--share-all-embeddings")
    hypotheses = re.findall(r"^H-(\d+)\t", stdout, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(40))
    assert "Generate test with beam=3: BLEU4" in stdout

    validate_run = subprocess.run([
        sys.executable, "-m", "fairseq_cli.validate", *cli_args(tiny_databin, "tree_translation"),
        "--path", str(tmp_path / "checkpoint_last.pt"), "--valid-subset", "valid", "--max-tokens", "500",
    ], env=subprocess_env(), capture_output=True, text=True)
    assert validate_run.returncode == 0, validate_run.stderr[-3000:]
    loss = re.search(r"valid on 'valid' subset \| loss ([0-9.]+)", validate_run.stdout + validate_run.stderr)
    assert loss and 0 < float(loss.group(1)) < 20


# A beam's hypotheses attend to their sentence's tree memory together


def test_sentence_groups_finds_the_beams_hypotheses_side_by_side():
    from tree_fairseq.models.tree_transformer import sentence_groups

    sentences, group = sentence_groups(torch.tensor([0, 0, 0, 2, 2, 2, 3, 3, 3]))
    assert sentences.tolist() == [0, 2, 3] and group == 3
    assert sentence_groups(torch.tensor([0, 1, 2]))[1] == 1  # one row per sentence
    for rows in ([0, 0, 1, 1, 1], [0, 0, 1, 2], [0, 1, 0, 1]):  # unequal groups, or not side by side
        assert sentence_groups(torch.tensor(rows)) == (None, 1)


def test_grouped_hypotheses_change_no_beam_output(tiny, monkeypatch):
    """Beam search with each sentence's hypotheses attending together, against the memory
    gathered once per hypothesis (the way before): the same hypotheses, scores equal to float32
    rounding; the batch shrinks during the search (sentences finish at different steps)."""
    from tree_fairseq.models import tree_transformer

    task, model = tiny
    batch = collate(task, by_length(task)[-8:])
    groups = []
    original = tree_transformer.sentence_groups

    def per_hypothesis(rows):
        groups.append(original(rows)[1])
        return None, 1

    hook = helpers.eos_at_varied_steps(model, task.target_dictionary.eos())
    try:
        grouped = generate(model, task, batch, beam=4)
        monkeypatch.setattr(tree_transformer, "sentence_groups", per_hypothesis)
        gathered = generate(model, task, batch, beam=4)
    finally:
        hook.remove()
    assert groups and set(groups) == {4}  # the search's rows did come in groups of 4
    assert len({len(hypos[0]["tokens"]) for hypos in grouped}) > 1
    for sentence, gathered_sentence in zip(grouped, gathered, strict=True):
        for hypo, gathered_hypo in zip(sentence, gathered_sentence, strict=True):
            assert hypo["tokens"].tolist() == gathered_hypo["tokens"].tolist()
            # float32 rounding, amplified by the EOS hook's sin(20·feature), as in the contract's beam check
            torch.testing.assert_close(hypo["positional_scores"], gathered_hypo["positional_scores"],
                                       atol=1e-4, rtol=0)
