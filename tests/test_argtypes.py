"""tree_fairseq.cli.argtypes: numbers of the command lines are ASCII text only, refused otherwise
in one line naming the value and the range."""

import argparse

import pytest

from tree_fairseq.cli import argtypes

WHOLE = [argtypes.positive_int, argtypes.nonnegative_int]
REAL = [argtypes.positive_float, argtypes.nonnegative_float, argtypes.probability, argtypes.fraction]


@pytest.mark.parametrize("text", ["1_000", "\u0663", " 3", "3 ", "+3", "3\n", "0x1", "", "-", "1" * 5000])
@pytest.mark.parametrize("kind", WHOLE)
def test_a_whole_number_is_ascii_digits_only(kind, text):
    """int() took '1_000', an Arabic-Indic digit and spaces around as numbers."""
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kind(text)
    assert str(refused.value).startswith(f"{text!r}: a whole number, ")


@pytest.mark.parametrize("text", ["0_5", "\u0660.\u0665", " 0.5", "0.5 ", "0.5\n", "nan", "inf", "0x1p-1", ".", "e1"])
@pytest.mark.parametrize("kind", REAL)
def test_a_real_number_is_parsed_from_ascii_text_only(kind, text):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kind(text)
    assert str(refused.value).startswith(f"{text!r}: a number")


def test_plain_numbers_are_still_read():
    assert argtypes.positive_int("12") == 12 and argtypes.nonnegative_int("0") == 0
    assert argtypes.nonnegative_int("007") == 7
    for text, value in (("0.5", 0.5), (".5", 0.5), ("5.", 5.0), ("+0.25", 0.25), ("1e-3", 0.001), ("2E1", 20.0)):
        assert argtypes.positive_float(text) == value
    assert argtypes.probability("0") == 0 and argtypes.probability("1") == 1
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'-1': a whole number, 0 or more$"):
        argtypes.nonnegative_int("-1")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'-0.5': a number from 0 to 1$"):
        argtypes.probability("-0.5")
