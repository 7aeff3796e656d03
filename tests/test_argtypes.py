"""tree_fairseq.cli.argtypes: numbers of the command lines are ASCII text only, refused otherwise
in one line naming the value and the range."""

import argparse
import importlib
import importlib.util
from pathlib import Path

import pytest

from tree_fairseq.cli import ArgumentParser, argtypes, overriding, refusing_repeats

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


@pytest.mark.parametrize("name, option", SEEDS)
def test_every_command_line_refuses_an_option_given_twice(name, option, capsys):
    """argparse kept the last of a repeated option silently (``--seed 1 --seed 2`` trained seed 2,
    ``--gold A --gold B`` scored against B): every command line's parser is the plugin's
    ArgumentParser, which refuses it naming both."""
    with pytest.raises(SystemExit) as exit_info:
        _parse(name)([option, "1", option, "2"])
    assert exit_info.value.code == 2
    assert f"argument {option}: given twice ({option} 1, then {option} 2): give it once" in capsys.readouterr().err


def test_the_parser_refuses_a_repeated_value_but_not_a_repeated_list_or_flag(capsys):
    parser = ArgumentParser(prog="x")
    parser.add_argument("--gold")
    parser.add_argument("--many", action="append")
    parser.add_argument("--flag", action="store_true")
    parser.add_argument("--words", nargs="+")
    parser.add_argument_group("more").add_argument("--count", type=int)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(["--gold", "G", "--many", "1", "--many", "2", "--flag", "--flag", "a", "b"])
    assert (args.gold, args.many, args.flag, args.files) == ("G", ["1", "2"], True, ["a", "b"])
    assert parser.parse_args(["--gold", "H"]).gold == "H"  # a second parse starts afresh
    for argv, said in ((["--gold", "A", "--gold", "B"], "argument --gold: given twice (--gold A, then --gold B)"),
                       (["--go", "a b", "--gold=B"], "argument --gold: given twice (--gold 'a b', then --gold B)"),
                       (["--count", "1", "--count", "1"], "argument --count: given twice (--count 1, then --count 1)"),
                       (["--words", "a", "b", "--words", "c"], "given twice (--words a b, then --words c)")):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert said in capsys.readouterr().err
    commands = ArgumentParser(prog="y")
    publish = commands.add_subparsers(dest="command").add_parser("publish")
    publish.add_argument("--out")
    assert isinstance(publish, ArgumentParser) and commands.parse_args(["publish", "--out", "o"]).out == "o"
    with pytest.raises(SystemExit):
        commands.parse_args(["publish", "--out", "o", "--out", "p"])
    assert "y publish: error: argument --out: given twice" in capsys.readouterr().err


def test_no_command_line_is_built_on_argparses_own_parser():
    """Every parser of a command line is the plugin's; argparse's own only where it reads fairseq's
    options (add_help=False) or in the two checks train.sh runs as files, which need no package."""
    standalone = {"tree_fairseq/cli/patience.py", "tree_fairseq/cli/resume_check.py"}
    found = []
    for path in sorted([*ROOT.glob("tree_fairseq/**/*.py"), *ROOT.glob("scripts/*.py")]):
        name = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "argparse.ArgumentParser(" in line and "add_help=False" not in line and name not in standalone:
                found.append(f"{name}:{number}")
    assert found == []


def test_a_wrapper_replaces_a_default_option_instead_of_giving_it_twice():
    """benchmark_all.py passes its defaults and then the user's flags to benchmark_speed.py; with
    options given twice refused, a passed option must replace its default's pair, in either spelling."""
    defaults = ["--threads", "1", "--updates", "10", "--lengths", "16,256"]
    assert overriding(defaults, ["--updates", "2", "--embed-dim", "32"]) == [
        "--threads", "1", "--lengths", "16,256", "--updates", "2", "--embed-dim", "32"]
    assert overriding(defaults, ["--lengths=8"]) == ["--threads", "1", "--updates", "10", "--lengths=8"]
    assert overriding(defaults, ["--upd", "3"]) == ["--threads", "1", "--lengths", "16,256", "--upd", "3"]
    assert overriding(defaults, ["--", "x"]) == [*defaults, "--", "x"]
    assert overriding(defaults, []) == defaults
    parser = ArgumentParser(prog="x")
    for option in ("--threads", "--updates", "--lengths"):
        parser.add_argument(option)
    assert parser.parse_args(overriding(defaults, ["--updates", "2"])).updates == "2"
    assert parser.parse_args(overriding(defaults, ["--upd", "4"])).updates == "4"
    with pytest.raises(ValueError):
        overriding(["--threads", "1", "--cpu"], [])  # defaults are pairs


def test_a_parser_built_elsewhere_refuses_a_repeated_value_and_parses_afresh(capsys):
    """fairseq's parsers are argparse's own: cli.refusing_repeats gives their "store" options the same
    refusal (tree-fairseq-preprocess), each parse counting its own command line."""
    parser = argparse.ArgumentParser(prog="z")
    parser.add_argument("--destdir")
    parser.add_argument("--flag", action="store_true")
    refusing_repeats(parser)
    assert parser.parse_args(["--destdir", "a", "--flag", "--flag"]).destdir == "a"
    assert parser.parse_args(["--destdir", "b"]).destdir == "b"  # not "given twice" across two parses
    with pytest.raises(SystemExit):
        parser.parse_args(["--destdir", "a", "--destdir=b"])
    assert "argument --destdir: given twice (--destdir a, then --destdir b): give it once" in capsys.readouterr().err
