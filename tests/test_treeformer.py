"""The ``treeformer`` model: architectures and the chart's options, the encoder memory (tokens then
chart cells of 2 … H tokens, EOS in no span), checkpoints of the earlier forms, and the chart's
padding mask following the beam. What every model owes fairseq (batch invariance, incremental
decoding, beam scores, fairseq-train + fairseq-generate on tree and plain data-bins) is
test_model_contract.py's."""

import functools

import pytest
import torch
from helpers import by_source_length as by_length
from helpers import check_incremental_decoding_as_the_generator, collate

import helpers

ARCH = "treeformer_tiny"
parse = functools.partial(helpers.parse, arch=ARCH)
build = functools.partial(helpers.build, arch=ARCH)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tiny_databin):
    return build(tiny_databin)


@pytest.mark.parametrize("arch, dims", [
    ("treeformer_iwslt_de_en", (512, 1024, 4, 6, 6)),
    ("treeformer_tiny", (32, 64, 4, 2, 2)),
])
def test_architectures_set_defaults(tiny_databin, arch, dims):
    args = parse(tiny_databin, arch=arch)
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
            args.encoder_layers, args.decoder_layers) == dims
    assert (args.chart_max_height, args.no_chart_checkpointing) == (10, False)
    assert (args.chart_composition, args.chart_pooling) == ("linear", "query_key")
    args = parse(tiny_databin, "--chart-max-height", "3", "--no-chart-checkpointing", "--chart-composition",
                 "gelu_layernorm", "--chart-pooling", "vector", arch=arch)
    assert (args.chart_max_height, args.no_chart_checkpointing) == (3, True)
    assert (args.chart_composition, args.chart_pooling) == ("gelu_layernorm", "vector")


def test_options_reach_the_chart(tiny_databin):
    _, model = build(tiny_databin)
    chart = model.encoder.chart
    assert (chart.max_span, chart.composition_form, chart.pooling_form) == (10, "linear", "query_key")
    _, model = build(tiny_databin, "--chart-max-height", "3", "--chart-composition", "gelu_layernorm",
                     "--chart-pooling", "vector")
    chart = model.encoder.chart
    assert (chart.max_span, chart.composition_form, chart.pooling_form) == (3, "gelu_layernorm", "vector")


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_memory_is_tokens_then_chart_cells_without_eos(tiny_databin, left_pad_source):
    task, model = build(tiny_databin, "--chart-max-height", "4", left_pad_source=left_pad_source)
    batch = collate(task, by_length(task)[-6:])
    src_tokens = batch["net_input"]["src_tokens"]
    batch_size, length = src_tokens.shape
    with torch.no_grad():
        out = model.encoder.forward_torchscript(batch["net_input"])
    memory, mask, kept = out["encoder_out"][0], out["encoder_padding_mask"][0], out["chart_cells"][0]
    levels = min(4, length) - 1  # the spans of 2, 3 and 4 tokens
    assert memory.shape == (length + kept.numel(), batch_size, 32)
    assert mask.shape == (batch_size, length + kept.numel())
    assert torch.equal(mask[:, :length], src_tokens.eq(task.source_dictionary.pad()))
    assert torch.equal(mask[:, length:], out["chart_padding_mask"][0])
    # every cell of the chart, [b, h - 2, i]: the span of h tokens from i; True where masked
    masked = torch.ones(batch_size, levels * length, dtype=torch.bool)
    masked[:, kept] = mask[:, length:]
    masked = masked.view(batch_size, levels, length)
    for b in range(batch_size):
        words = src_tokens[b].ne(task.source_dictionary.pad()) & src_tokens[b].ne(task.source_dictionary.eos())
        positions = words.nonzero().flatten().tolist()
        first, last = positions[0], positions[-1]
        for h in range(2, levels + 2):
            for i in range(length):
                inside = first <= i and i + h - 1 <= last  # the EOS column is past `last`
                assert bool(masked[b, h - 2, i]) == (not inside)
    # the cells left out are those masked in every sentence: at least the last h columns of height h
    assert torch.equal(kept, (~masked.all(dim=0)).flatten().nonzero().squeeze(1))
    assert kept.numel() <= levels * length - (2 + 3 + 4)
    assert (memory[length:].transpose(0, 1)[mask[:, length:]] == 0).all()


def with_every_chart_cell(encoder_out, length, levels):
    """The encoder output with all ``levels·length`` chart cells, the masked ones zero: the
    memory before the cells masked in every sentence were left out."""
    kept = encoder_out["chart_cells"][0]
    tokens, cells = encoder_out["encoder_out"][0][:length], encoder_out["encoder_out"][0][length:]
    cell_mask = encoder_out["chart_padding_mask"][0]
    every_cell = cells.new_zeros(levels * length, *cells.shape[1:])
    every_cell[kept] = cells
    every_mask = cell_mask.new_ones(cell_mask.size(0), levels * length)
    every_mask[:, kept] = cell_mask
    return {
        **encoder_out,
        "encoder_out": [torch.cat([tokens, every_cell])],
        "encoder_padding_mask": [torch.cat([encoder_out["encoder_padding_mask"][0][:, :length], every_mask], dim=1)],
        "chart_padding_mask": [every_mask],
        "chart_cells": [torch.arange(levels * length)],
    }


def test_cells_left_out_change_no_beam_output(tiny_databin, monkeypatch):
    task, model = build(tiny_databin)
    indices = by_length(task)[-8:]
    batch = collate(task, indices)
    hypos = helpers.generate(model, task, batch, beam=4)
    length = batch["net_input"]["src_tokens"].size(1)
    levels = min(model.encoder.chart.max_span, length) - 1
    with torch.no_grad():
        assert model.encoder.forward_torchscript(batch["net_input"])["chart_cells"][0].numel() < levels * length
    forward = type(model.encoder).forward
    monkeypatch.setattr(type(model.encoder), "forward",
                        lambda self, *args, **kwargs: with_every_chart_cell(forward(self, *args, **kwargs), length, levels))
    every_cell_hypos = helpers.generate(model, task, batch, beam=4)
    for sentence, every_cell_sentence in zip(hypos, every_cell_hypos, strict=True):
        for hypo, every_cell_hypo in zip(sentence, every_cell_sentence, strict=True):
            assert hypo["tokens"].tolist() == every_cell_hypo["tokens"].tolist()
            # the same sums over fewer terms: float32 rounding only
            torch.testing.assert_close(hypo["positional_scores"], every_cell_hypo["positional_scores"],
                                       atol=1e-5, rtol=0)


def test_tree_keys_are_ignored(tiny):
    task, model = tiny
    net_input = collate(task, by_length(task)[-4:])["net_input"]
    assert "src_node_spans" in net_input
    text_only = {k: net_input[k] for k in ("src_tokens", "src_lengths", "prev_output_tokens")}
    with torch.no_grad():
        torch.testing.assert_close(model(**net_input)[0], model(**text_only)[0], atol=0, rtol=0)


def test_attention_weights_cover_the_tokens(tiny):
    task, model = tiny
    net_input = collate(task, by_length(task)[-4:])["net_input"]
    with torch.no_grad():
        attn = model(**net_input)[1]["attn"][0]  # (B, T, n)
    assert attn.shape == (*net_input["prev_output_tokens"].shape, net_input["src_tokens"].size(1))


def test_incremental_decoding_matches_full_forward(tiny):
    task, model = tiny
    encoder_out = check_incremental_decoding_as_the_generator(task, model, by_length(task)[-3:])
    assert encoder_out["chart_padding_mask"][0].size(0) == 4


def test_training_step_reaches_the_chart(tiny_databin):
    task, model = build(tiny_databin)
    model.train()
    batch = collate(task, by_length(task)[-4:])
    logits = model(**batch["net_input"])[0]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(),
                                             ignore_index=task.target_dictionary.pad())
    loss.backward()
    assert torch.isfinite(loss)
    for name, parameter in model.encoder.chart.named_parameters():  # W, K, Q and w
        assert parameter.grad.abs().sum() > 0, name


def test_checkpoint_of_the_earlier_forms_and_height_count_loads(tiny_databin):
    """A state dict of this model before the chart followed eqs. 1-2 and counted H in tokens (no
    ``encoder.chart.version``; its H counted the heights above the tokens) loads into a model
    built with the defaults and that checkpoint's H, through fairseq's load_state_dict, and
    gives that model's output."""
    task, earlier = build(tiny_databin, "--chart-max-height", "5", "--chart-composition", "gelu_layernorm",
                          "--chart-pooling", "vector", seed=3)
    state = {key: value for key, value in earlier.state_dict().items() if key != "encoder.chart.version"}
    _, model = build(tiny_databin, "--chart-max-height", "4")
    model.load_state_dict(state, strict=True)
    assert (model.encoder.chart.composition_form, model.encoder.chart.pooling_form) == ("gelu_layernorm", "vector")
    net_input = collate(task, by_length(task)[-4:])["net_input"]
    with torch.no_grad():
        torch.testing.assert_close(model(**net_input)[0], earlier(**net_input)[0], atol=0, rtol=0)
