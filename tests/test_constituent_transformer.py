"""The ``constituent_transformer`` model: architectures, the encoder's link probabilities, their
batch invariance and their reordering in incremental decoding. What every model owes fairseq
(batch invariance, incremental decoding, beam scores, fairseq-train + fairseq-generate on tree and
plain data-bins) is test_model_contract.py's."""

import functools

import pytest
import torch
from helpers import by_source_length as by_length
from helpers import check_incremental_decoding_as_the_generator, collate, row_of

import helpers
from tree_fairseq.modules.constituent_attention import ConstituentSelfAttention

ARCH = "constituent_transformer_tiny"
parse = functools.partial(helpers.parse, arch=ARCH)
build = functools.partial(helpers.build, arch=ARCH)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin)


@pytest.mark.parametrize("arch, dims", [
    ("constituent_transformer_iwslt_de_en", (512, 1024, 4, 6, 6)),
    ("constituent_transformer_wmt_en_de", (512, 2048, 8, 6, 6)),
    ("constituent_transformer_tiny", (32, 64, 4, 2, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
            args.encoder_layers, args.decoder_layers) == dims
    assert args.renormalize_constituent_attention is False and args.neighbour_score_scale == "half-d-model"
    assert parse(tiny_databin, "--renormalize-constituent-attention", arch=arch).renormalize_constituent_attention


@pytest.mark.parametrize("arch, dims", [
    # the paper's section 7.1 (512 wide, 8 heads, ffn 2048, dropout 0.1) at its best depth, 10 layers
    ("constituent_encoder_lm", (512, 2048, 8, 10, 0.1)),
    ("constituent_encoder_lm_small", (256, 1024, 4, 6, 0.1)),
    ("constituent_encoder_lm_tiny", (32, 64, 4, 2, 0.1)),
])
def test_encoder_lm_architectures(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
            args.encoder_layers, args.dropout) == dims
    assert args.neighbour_score_scale == "half-d-model"


def test_layers_use_constituent_attention(tiny_databin, tiny):
    _, model = tiny
    layer = model.encoder.layers[0]
    assert isinstance(layer.self_attn, ConstituentSelfAttention) and not layer.self_attn.renormalize
    assert all(layer.constituent_attention.score_scale == "half-d-model" for layer in model.encoder.layers)
    _, renormalized = build(tiny_databin, "--renormalize-constituent-attention")
    assert renormalized.encoder.layers[0].self_attn.renormalize
    _, earlier = build(tiny_databin, "--neighbour-score-scale", "d-model")
    assert all(layer.constituent_attention.score_scale == "d-model" for layer in earlier.encoder.layers)


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
    encoder_out = check_incremental_decoding_as_the_generator(task, model, by_length(task)[-3:])
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
