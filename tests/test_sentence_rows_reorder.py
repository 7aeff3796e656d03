"""``SentenceRowsReorder``: beam search's reorders of the encoder output copy nothing while every
row stays with its sentence, and give fairseq's reordered output whenever rows change sentence.
``SentenceCrossAttentionDecoder``: per-sentence keys and values only when each sentence's rows
lie side by side (the generator's layout; beam search itself is checked in each model's tests)."""

import pytest
import torch
from fairseq.models.transformer import TransformerEncoderBase
from helpers import build, by_length, collate

from tree_fairseq.models.common import SentenceRowsReorder


ARCHS = [
    "tree_transformer_tiny", "treeformer_tiny", "constituent_transformer_tiny", "tree_pe_transformer_tiny",
    "tree_composition_transformer_tiny",
]


@pytest.mark.parametrize("arch", ARCHS)
def test_reorder_copies_only_when_a_row_changes_sentence(tiny_databin, arch):
    task, model = build(tiny_databin, arch=arch)
    assert isinstance(model.encoder, SentenceRowsReorder)
    keys = ("encoder_out", "encoder_padding_mask", *model.encoder.sentence_keys)

    def plain_reorder(encoder_out, order):  # fairseq's, plus the encoder's own per-sentence entries
        reordered = TransformerEncoderBase.reorder_encoder_out(model.encoder, encoder_out, order)
        for key in model.encoder.sentence_keys:
            reordered[key] = [encoder_out[key][0].index_select(0, order)]
        return reordered

    with torch.no_grad():
        encoder_out = model.encoder.forward_torchscript(collate(task, by_length(task)[-3:])["net_input"])
        expanded = model.encoder.reorder_encoder_out(encoder_out, torch.tensor([0, 0, 1, 1, 2, 2]))
        expected = plain_reorder(encoder_out, torch.tensor([0, 0, 1, 1, 2, 2]))
        within = model.encoder.reorder_encoder_out(expanded, torch.tensor([1, 0, 2, 2, 5, 4]))
        across = model.encoder.reorder_encoder_out(within, torch.tensor([4, 5, 0, 1, 2, 3]))  # same size
        shrunk = model.encoder.reorder_encoder_out(across, torch.tensor([2, 3, 4, 5]))
    for key in keys:
        torch.testing.assert_close(expanded[key][0], expected[key][0], atol=0, rtol=0)
        assert within[key][0] is expanded[key][0]
        torch.testing.assert_close(across[key][0], plain_reorder(expected, torch.tensor([4, 5, 0, 1, 2, 3]))[key][0],
                                   atol=0, rtol=0)
        torch.testing.assert_close(shrunk[key][0], plain_reorder(expected, torch.tensor([0, 1, 2, 3]))[key][0],
                                   atol=0, rtol=0)
    assert across["source_rows"][0].tolist() == [2, 2, 0, 0, 1, 1]
    assert shrunk["source_rows"][0].tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("arch", ARCHS)
def test_incremental_decoding_over_interleaved_rows(tiny_databin, arch):
    """Rows [0, 1, 0, 1]: two hypotheses per sentence, but not side by side, so the keys and
    values must stay per row; every step equals the full forward pass."""
    task, model = build(tiny_databin, arch=arch)
    net_input = collate(task, by_length(task)[-2:])["net_input"]
    order = torch.tensor([0, 1, 0, 1])
    rows = {k: v.index_select(0, order) for k, v in net_input.items()}
    prev = rows["prev_output_tokens"]
    with torch.no_grad():
        full = model(**rows)[0]
        encoder_out = model.encoder.reorder_encoder_out(model.encoder.forward_torchscript(net_input), order)
        state = {}
        for t in range(prev.size(1)):
            step = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[:, t].ne(task.target_dictionary.pad())
            torch.testing.assert_close(step[real, -1], full[real, t], atol=1e-5, rtol=1e-5)
