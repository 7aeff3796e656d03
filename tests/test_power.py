"""The detectable difference of tree_fairseq.analysis.power: against a simulation of the t-test it
stands for, and its refusals of bad input."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tree_fairseq.analysis.power import detectable_difference

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_detectable_difference_is_found_about_as_often_as_asked(seeds):
    """Simulated studies of two systems whose means differ by exactly the detectable difference: a
    two-sided pooled t-test at 0.05 rejects in about 80% of them (the formula is an approximation to
    the noncentral t, so a little less or more, never far)."""
    sd = 0.17
    d = detectable_difference(sd, seeds, alpha=0.05, power=0.8)
    rng = np.random.default_rng(0)
    a = rng.normal(0.0, sd, size=(20000, seeds))
    b = rng.normal(d, sd, size=(20000, seeds))
    _, p = scipy_stats.ttest_ind(a, b, axis=1)
    assert 0.77 < np.mean(p < 0.05) < 0.83
    # half the difference is found far less often
    b_half = rng.normal(d / 2, sd, size=(20000, seeds))
    _, p_half = scipy_stats.ttest_ind(a, b_half, axis=1)
    assert np.mean(p_half < 0.05) < 0.4


def test_more_seeds_a_smaller_spread_and_a_looser_level_detect_less():
    assert detectable_difference(0.17, 5) < detectable_difference(0.17, 3)
    assert detectable_difference(0.10, 3) < detectable_difference(0.17, 3)
    assert detectable_difference(0.17, 3, alpha=0.05) < detectable_difference(0.17, 3, alpha=0.05 / 8)
    assert detectable_difference(0.17, 3) == pytest.approx(2 * detectable_difference(0.085, 3))


@pytest.mark.parametrize("sd, seeds, alpha, power, message", [
    (0.17, 1, 0.05, 0.8, "at least 2 seeds"),
    (0.17, 3, 0.0, 0.8, "strictly between"),
    (0.17, 3, 0.05, 1.0, "strictly between"),
    (0.0, 3, 0.05, 0.8, "positive number"),
    (float("nan"), 3, 0.05, 0.8, "positive number"),
])
def test_bad_arguments_are_refused(sd, seeds, alpha, power, message):
    with pytest.raises(ValueError, match=message):
        detectable_difference(sd, seeds, alpha, power)


def run(*args):
    return subprocess.run([sys.executable, "-m", "tree_fairseq.analysis.power", *args],
                          capture_output=True, text=True)


def comparison(tmp_path, systems):
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"systems": systems}))
    return str(path)


def test_the_command_reads_the_spread_of_the_named_system(tmp_path):
    path = comparison(tmp_path, {"base": {"runs": {"a": {}, "b": {}, "c": {}}, "BLEU": {"mean": 10.0, "sd": 0.2}}})
    result = run(path, "--system", "base", "--seeds", "3", "5", "--pairs", "4")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "sd 0.200 over 3 runs" in lines[0]
    assert lines[1].startswith("3 seeds each: alpha 0.05: %.2f; alpha 0.0125: %.2f" % (
        detectable_difference(0.2, 3), detectable_difference(0.2, 3, alpha=0.0125)))
    assert lines[2].startswith("5 seeds each: alpha 0.05: %.2f" % detectable_difference(0.2, 5))


@pytest.mark.parametrize("systems, args, message", [
    ({"base": {"runs": {"a": {}}, "BLEU": {"mean": 10.0, "sd": None}}}, ["--system", "base", "--seeds", "3"],
     "no sd of BLEU"),
    ({"base": {"runs": {}, "BLEU": {"mean": 10.0, "sd": 0.2}}}, ["--system", "other", "--seeds", "3"],
     "no system 'other' in it"),
    ({"base": {"runs": {}, "BLEU": {"mean": 10.0, "sd": 0.2}}}, ["--system", "base", "--seeds", "1"],
     "fewer than 2 runs"),
    ({"base": {"runs": {}, "BLEU": {"mean": 10.0, "sd": 0.2}}}, ["--system", "base", "--seeds", "3", "--pairs", "0"],
     "argument --pairs: '0': a whole number, 1 or more"),
    ({"base": {"runs": {}, "BLEU": {"mean": 10.0, "sd": 0.2}}}, ["--system", "base", "--seeds", "3", "--alpha", "5"],
     "argument --alpha: '5': a number between 0 and 1, both left out"),
])
def test_the_command_refuses_in_one_line(tmp_path, systems, args, message):
    result = run(comparison(tmp_path, systems), *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_or_wrong_file_is_named(tmp_path):
    missing = run(str(tmp_path / "none.json"), "--system", "base", "--seeds", "3")
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "none.json" in missing.stderr
    (tmp_path / "bad.json").write_text("ref.de\n")
    bad = run(str(tmp_path / "bad.json"), "--system", "base", "--seeds", "3")
    assert bad.returncode == 2 and "is not JSON" in bad.stderr
    (tmp_path / "list.json").write_text("[1, 2]")
    other = run(str(tmp_path / "list.json"), "--system", "base", "--seeds", "3")
    assert other.returncode == 2 and "not a tree-fairseq-compare --json file" in other.stderr
