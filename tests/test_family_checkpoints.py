"""A checkpoint of each method family, trained by an earlier version of the code
(tests/data/make_family_checkpoints.py), still loads and computes what it computed then: the same
parameter names, translations (greedy and beam, from the data-bin's trees and from raw text), seeded
training loss, and the same parameters from a seeded build (the order in which parameters are
created and random numbers drawn). A reorganisation of the code must leave all of these alone."""

import pytest
import torch

import family_checkpoints as fc

pytestmark = pytest.mark.usefixtures("one_thread")
EXPECTED = fc.read_expected()


def test_every_family_has_a_small_checkpoint():
    assert set(EXPECTED) == set(fc.FAMILIES)
    for family in fc.FAMILIES:
        assert fc.checkpoint_path(family).stat().st_size < 200_000, family


@pytest.fixture(scope="module", params=list(fc.FAMILIES))
def family(request):
    task, model = fc.load(request.param)
    return request.param, task, model


def check_hypotheses(computed, expected, where):
    assert len(computed) == len(expected), where
    for sentence, (hypos, expected_hypos) in enumerate(zip(computed, expected)):
        assert [h["tokens"] for h in hypos] == [h["tokens"] for h in expected_hypos], (where, sentence)
        for hypo, expected_hypo in zip(hypos, expected_hypos):
            torch.testing.assert_close(torch.tensor(hypo["scores"]), torch.tensor(expected_hypo["scores"]),
                                       atol=1e-5, rtol=0)


def test_the_checkpoint_loads_with_the_same_parameter_names(family):
    name, _, model = family
    assert list(model.state_dict()) == EXPECTED[name]["state_dict_keys"]


def test_the_checkpoint_translates_as_before(family):
    name, task, model = family
    computed = fc.translations(task, model)
    assert set(computed) == set(EXPECTED[name]["translations"])
    for kind, expected in EXPECTED[name]["translations"].items():
        check_hypotheses(computed[kind], expected, (name, kind))


def test_the_seeded_training_loss_is_as_before(family):
    name, task, model = family
    assert fc.seeded_loss(task, model) == pytest.approx(EXPECTED[name]["loss"], rel=1e-6)


@pytest.mark.parametrize("name", list(fc.FAMILIES))
def test_a_seeded_build_starts_from_the_same_parameters(name):
    computed = fc.seeded_parameters(name)
    expected = EXPECTED[name]["seeded_parameters"]
    assert list(computed) == list(expected)  # the same names, in the same order
    for parameter, values in expected.items():
        assert computed[parameter]["shape"] == values["shape"], parameter
        assert computed[parameter]["values"] == pytest.approx(values["values"], abs=1e-7), parameter
        assert computed[parameter]["sum"] == pytest.approx(values["sum"], abs=1e-5), parameter


def test_the_comparison_sees_a_changed_parameter(family):
    """The checks above fail when one weight moves: a change of the numbers is not missed."""
    name, task, model = family
    weight = model.decoder.output_projection.weight
    saved = weight.detach().clone()
    with torch.no_grad():
        weight.mul_(1.5)
    try:
        with pytest.raises(AssertionError):
            check_hypotheses(fc.translations(task, model)["beam"], EXPECTED[name]["translations"]["beam"], name)
        assert fc.seeded_loss(task, model) != pytest.approx(EXPECTED[name]["loss"], rel=1e-6)
    finally:
        with torch.no_grad():
            weight.copy_(saved)
