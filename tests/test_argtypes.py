"""tree_fairseq.cli.argtypes: numbers of the command lines are ASCII text only, refused otherwise
in one line naming the value and the range."""

import argparse
import importlib
import importlib.util
from pathlib import Path

import pytest

from tree_fairseq.cli import argtypes

WHOLE = [argtypes.positive_int, argtypes.nonnegative_int]
ROOT = Path(__file__).resolve().parents[1]
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


def _script(name):
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse(name: str):
    """A function that parses a command line of ``name`` (a script's, or a module's get_parser)."""
    if name in ("for2lam", "parse_as_translation", "benchmark_speed"):
        return _script(name).parse_args
    if name == "tree_benchmark":
        return _script(name).main
    if name == "induce_trees":
        return _script(name).get_parser().parse_args
    return importlib.import_module(name).get_parser().parse_args


SEEDS = [("for2lam", "--seed"), ("for2lam", "--data-seed"), ("parse_as_translation", "--seed"),
         ("benchmark_speed", "--seed"), ("tree_benchmark", "--seeds"), ("tree_benchmark", "--data-seed"),
         ("induce_trees", "--seed"), ("induce_trees", "--valid-seed"), ("tree_fairseq.synthetic", "--seed"),
         ("tree_fairseq.analysis.same_batches", "--seed"), ("tree_fairseq.cli.parse", "--heads-seed"),
         ("tree_fairseq.cli.compare", "--seed"), ("tree_fairseq.cli.score", "--seed")]


@pytest.mark.parametrize("name, option", SEEDS)
def test_every_seed_option_is_refused_beyond_numpys_range_on_the_command_line(name, option, capsys):
    """A seed of 2**32 or more was accepted, then failed in numpy's traceback at fairseq-train (after
    the workdir was written); tree-fairseq-score --seed -1 printed numpy's message without the option."""
    parse = _parse(name)
    for value in ("4294967296", "-1"):
        with pytest.raises(SystemExit) as exit_info:
            parse([option, value])
        assert exit_info.value.code == 2
        assert f"argument {option}: {value!r}: a whole number from 0 to 4294967295 (2**32 - 1)" \
            in capsys.readouterr().err


def test_a_seed_is_a_whole_number_from_0_to_2_to_the_32_less_1():
    assert argtypes.seed("0") == 0 and argtypes.seed("4294967295") == 2**32 - 1
    for text in ("4294967296", "-1", "1_0", " 1", "1.0"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"^'.*': a whole number from 0 to 4294967295 \("):
            argtypes.seed(text)
