"""Half-precision safety of every model family on CPU.

fairseq's ``--bf16`` implies ``--tpu`` (its trainer then asks for an XLA device), and its
``--fp16`` / ``--amp`` need CUDA, so on CPU the reduced-precision path is torch's autocast:
each model trains a few steps under bfloat16 autocast with a finite, falling loss. The masks
are checked in float16, where a fill value that overflows (a large negative cast to half
becomes -inf) or a fully masked row (-inf - -inf in the softmax) shows as NaN: every model's
forward pass in float16 over a padded batch (short sentences next to long ones, nodes padded)
gives finite log-probabilities."""

import pytest
import torch
import torch.nn.functional as F

from helpers import build, by_length, collate
from test_gradients import TRANSLATION_MODELS

pytestmark = pytest.mark.usefixtures("one_thread")

IDS = lambda value: " ".join(value) if isinstance(value, tuple) else value  # noqa: E731


def nll(model, sample):
    logits, _ = model(**sample["net_input"])
    return F.cross_entropy(logits.float().flatten(0, 1), sample["target"].flatten(),
                           ignore_index=model.decoder.dictionary.pad())


def padded_batch(task):
    """The shortest and the longest test sentences together: much padding of leaves and nodes."""
    order = by_length(task)
    return collate(task, order[:4] + order[-4:])


@pytest.mark.parametrize("arch,flags", TRANSLATION_MODELS, ids=IDS)
def test_trains_under_bfloat16_autocast(tiny_databin, arch, flags):
    task, model = build(tiny_databin, *flags, "--dropout", "0", arch=arch)
    model.train()
    sample = padded_batch(task)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nll(model, sample)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("arch,flags", TRANSLATION_MODELS, ids=IDS)
def test_float16_forward_over_padding_is_finite(tiny_databin, arch, flags):
    task, model = build(tiny_databin, *flags, arch=arch)
    sample = padded_batch(task)
    with torch.no_grad():
        reference, _ = model(**sample["net_input"])
        half, _ = model.half()(**sample["net_input"])
    assert half.dtype == torch.float16
    target_mask = sample["target"].ne(model.decoder.dictionary.pad())
    assert torch.isfinite(half[target_mask]).all()
    torch.testing.assert_close(half.float()[target_mask], reference[target_mask], atol=0.05, rtol=0.05)
