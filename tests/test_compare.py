"""tree-fairseq-compare on synthetic outputs whose answer is known: runs made by corrupting a
reference (word drops and substitutions) at a set rate, one RNG seed per run. Two systems of the
same rate must not differ, a system of a much lower rate must; each run's scores and each paired
bootstrap p-value are what sacreBLEU's command line prints for the same files."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from tree_fairseq.cli import compare

BIN = os.path.dirname(sys.executable)
SACREBLEU = os.path.join(BIN, "sacrebleu")
LANG = "xx"
SENTENCES = 300
REPLICATES = 200
VOCABULARY = [f"{consonant}{vowel}{end}" for consonant in "bdfgklmnprst" for vowel in "aeiou" for end in "nrs"]
# run name: (noise rate, RNG seed)
RUNS = {"same1": (0.3, 1), "same2": (0.3, 2), "same3": (0.3, 3),
        "other1": (0.3, 4), "other2": (0.3, 5), "other3": (0.3, 6),
        "good1": (0.05, 7), "good2": (0.05, 8)}
SYSTEMS = ["--system", "same=same1,same2,same3", "--system", "other=other1,other2,other3",
           "--system", "good=good1,good2"]
PAIRS = ["--pair", "same:other", "--pair", "good:same"]


def reference(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(8, 20))).capitalize() for _ in range(SENTENCES)]


def corrupt(lines: list[str], rate: float, seed: int) -> list[str]:
    """Each word dropped with probability rate / 2, replaced by a random word with rate / 2."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = []
        for word in line.split():
            draw = rng.random()
            if draw >= rate:
                words.append(word)
            elif draw >= rate / 2:
                words.append(rng.choice(VOCABULARY))
        out.append(" ".join(words))
    return out


def write(path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    refs = reference()
    write(folder / f"ref.{LANG}", refs)
    for run, (rate, seed) in RUNS.items():
        write(folder / f"{run}.hyp.{LANG}", corrupt(refs, rate, seed))
    return folder


def run_compare(folder, *argv: str) -> dict:
    path = folder / "out.json"
    compare.main(["--results", str(folder), "--lang", LANG, "--bootstrap", str(REPLICATES), "--json", str(path),
                  *argv])
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def report(results):
    return run_compare(results, *SYSTEMS, *PAIRS)


def pair(report: dict, a: str, b: str) -> dict:
    return next(item for item in report["pairs"] if (item["a"], item["b"]) == (a, b))


def sacrebleu_json(folder, *argv: str):
    result = subprocess.run([SACREBLEU, f"ref.{LANG}", "-i", *argv, "--format", "json"], cwd=folder,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


# (a), (b): the bootstrap over runs and sentences


def test_systems_of_the_same_noise_do_not_differ(report):
    same = pair(report, "same", "other")
    for metric in ("BLEU", "chrF"):
        low, high = same[metric]["interval"]
        assert low < 0 < high, same[metric]
        assert low <= same[metric]["difference"] <= high
        assert same[metric]["p"] > 0.05


def test_a_much_less_noisy_system_differs(report):
    better = pair(report, "good", "same")
    for metric in ("BLEU", "chrF"):
        low, high = better[metric]["interval"]
        assert 0 < low <= better[metric]["difference"] <= high, better[metric]
        assert better[metric]["p"] == pytest.approx(2 / (REPLICATES + 1))  # no replicate crosses 0
    # each system its own number of runs, every run of A against every run of B
    assert report["systems"]["good"]["BLEU"]["mean"] == pytest.approx(
        np.mean([report["systems"]["good"]["runs"][run]["BLEU"] for run in ("good1", "good2")]))
    assert [(item["a_run"], item["b_run"]) for item in better["run_pairs"]] == [
        (a, b) for a in ("good1", "good2") for b in ("same1", "same2", "same3")]


def test_every_run_of_a_replicate_reads_the_same_sentences(results, tmp_path):
    # Systems whose runs are copies of each other's. With the same sentences for every run of a
    # replicate, one run against its copy never differs (resampling sentences per run, most
    # replicates would); two runs against their copies differ only where the runs drawn differ.
    write(tmp_path / f"ref.{LANG}", reference())
    for run in ("same1", "same2"):
        for copy in (run, f"twin.{run}"):
            (tmp_path / f"{copy}.hyp.{LANG}").write_bytes((results / f"{run}.hyp.{LANG}").read_bytes())
    twins = run_compare(tmp_path, "--system", "a=same1", "--system", "b=twin.same1", "--pair", "a:b")
    for metric in ("BLEU", "chrF"):
        assert twins["pairs"][0][metric]["interval"] == [0.0, 0.0] and twins["pairs"][0][metric]["p"] == 1.0
    twins = run_compare(tmp_path, "--system", "a=same1,same2", "--system", "b=twin.same1,twin.same2",
                        "--pair", "a:b")
    low, high = twins["pairs"][0]["BLEU"]["interval"]
    assert twins["pairs"][0]["BLEU"]["difference"] == 0 and low < 0 < high

def test_system_means_and_sample_sd(report):
    same = report["systems"]["same"]
    scores = [same["runs"][run]["chrF"] for run in ("same1", "same2", "same3")]
    assert same["chrF"]["mean"] == pytest.approx(np.mean(scores))
    assert same["chrF"]["sd"] == pytest.approx(np.std(scores, ddof=1))
    assert report["bootstrap"] == REPLICATES and report["seed"] == 12345 and report["sentences"] == SENTENCES


def test_holm_over_the_pairs(report):
    for metric in ("BLEU", "chrF"):
        ps = [item[metric]["p"] for item in report["pairs"]]
        assert [item[metric]["holm_p"] for item in report["pairs"]] == pytest.approx(compare.holm(ps))


def test_deterministic_given_the_seed(results, report):
    again = run_compare(results, *SYSTEMS, *PAIRS)
    assert again["pairs"] == report["pairs"]
    reseeded = run_compare(results, *SYSTEMS, *PAIRS, "--seed", "7")
    assert pair(reseeded, "same", "other")["BLEU"]["interval"] != pair(report, "same", "other")["BLEU"]["interval"]
    assert pair(reseeded, "same", "other")["BLEU"]["difference"] == pair(report, "same", "other")["BLEU"]["difference"]


# (c), (d): the same numbers as sacreBLEU's command line


def test_paired_bootstrap_p_is_sacrebleus(results, monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    single = run_compare(results, "--system", "a=same1", "--system", "b=other1", "--pair", "a:b")
    assert single["systems"]["a"]["BLEU"]["sd"] is None
    (run_pair,) = single["pairs"][0]["run_pairs"]
    printed = sacrebleu_json(results, f"other1.hyp.{LANG}", f"same1.hyp.{LANG}", "-m", "bleu", "--paired-bs",
                             "--paired-bs-n", str(REPLICATES))
    assert 0.01 < printed[1]["BLEU"]["p_value"] < 1  # a p-value that the seed and the pairing decide
    assert run_pair["p"] == printed[1]["BLEU"]["p_value"]


def test_run_scores_are_sacrebleus(results, report):
    for run in ("same1", "good2"):
        bleu, chrf = sacrebleu_json(results, f"{run}.hyp.{LANG}", "-m", "bleu", "chrf", "-w", "4")
        scores = report["systems"]["same" if run == "same1" else "good"]["runs"][run]
        assert round(scores["BLEU"], 4) == bleu["score"]
        assert round(scores["chrF"], 4) == chrf["score"]
        assert f"BP = {scores['BP']:.3f} " in bleu["verbose_score"]
        assert report["signatures"]["BLEU"] == bleu["signature"] and report["signatures"]["chrF"] == chrf["signature"]


# (e): refusals


def refusal(folder, *argv: str) -> str:
    with pytest.raises(SystemExit) as raised:
        run_compare(folder, *argv)
    message = raised.value.code
    assert isinstance(message, str) and message.startswith("tree-fairseq-compare: error: ") and "\n" not in message
    return message


def test_refuses_a_missing_file(results):
    message = refusal(results, "--system", "a=same1,nope", "--system", "b=other1", "--pair", "a:b")
    assert f"nope.hyp.{LANG}: no such file" in message and "good1, good2, other1" in message


def test_refuses_other_line_counts(results, tmp_path):
    refs = reference()
    write(tmp_path / f"ref.{LANG}", refs)
    write(tmp_path / f"full.hyp.{LANG}", refs)
    write(tmp_path / f"short.hyp.{LANG}", refs[:-1])
    message = refusal(tmp_path, "--system", "a=full", "--system", "b=short", "--pair", "a:b")
    assert f"short.hyp.{LANG} has {SENTENCES - 1} lines but" in message
    assert f"ref.{LANG} has {SENTENCES}" in message


@pytest.mark.parametrize("argv, expected", [
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:c"], "--pair a:c: no system 'c'"),
    (["--system", "a=same1,same1", "--system", "b=other1", "--pair", "a:b"], "run 'same1' is listed twice"),
    (["--system", "a=same1", "--system", "b=same1", "--pair", "a:b"],
     "run 'same1' is listed twice (in system 'a' and in 'b')"),
    (["--system", "a=same1", "--system", "a=other1", "--pair", "a:a"], "--system a=... is given twice"),
    (["--system", "a=same1", "--pair", "a:a"], "compares a system with itself"),
    (["--system", "a", "--pair", "a:a"], "is not NAME=RUN[,RUN...]"),
])
def test_refuses_a_design_that_means_something_else(results, argv, expected):
    assert expected in refusal(results, *argv)


@pytest.mark.parametrize("mark, what", [("@@ ", "subword-nmt's '@@ ' joins"), ("\u2581", "sentencepiece's")])
def test_refuses_subword_marks(tmp_path, mark, what):
    refs = reference()
    write(tmp_path / f"ref.{LANG}", refs)
    write(tmp_path / f"clean.hyp.{LANG}", refs)
    write(tmp_path / f"pieces.hyp.{LANG}", refs[:2] + [refs[2].replace(" ", mark, 1)] + refs[3:])
    message = refusal(tmp_path, "--system", "a=clean", "--system", "b=pieces", "--pair", "a:b")
    assert f"pieces.hyp.{LANG} line 3 still holds {what}" in message


# (f): the p-value and Holm's correction


def test_holm_on_known_p_values():
    assert compare.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert compare.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert compare.holm([0.02]) == pytest.approx([0.02])


def test_bootstrap_p_value_counts_the_other_side():
    differences = np.array([1.0, 2.0, 0.5, 3.0, 1.5, 2.5, 0.8, 1.2, -0.3])
    assert compare.bootstrap_p_value(differences, 1.4) == pytest.approx(2 * 2 / 10)
    assert compare.bootstrap_p_value(-differences, -1.4) == pytest.approx(2 * 2 / 10)
    assert compare.bootstrap_p_value(np.append(differences, 0.0), 1.4) == pytest.approx(2 * 3 / 11)
    assert compare.bootstrap_p_value(differences, 0.0) == 1.0


# (g): the console script


def test_console_script(results, tmp_path):
    script = os.path.join(BIN, "tree-fairseq-compare")
    shown = subprocess.run([script, "--help"], capture_output=True, text=True, check=True).stdout
    assert "--system NAME=RUN[,RUN...]" in shown and "example" in shown
    path = tmp_path / "comparison.json"
    done = subprocess.run([script, "--results", str(results), "--lang", LANG, "--bootstrap", "50", "--json", str(path),
                           *SYSTEMS, *PAIRS], capture_output=True, text=True, check=True)
    assert "| same - other |" in done.stdout and "| good - same |" in done.stdout
    written = json.loads(path.read_text())
    assert written["command"].startswith("tree-fairseq-compare --results") and written["bootstrap"] == 50
    assert set(written["systems"]) == {"same", "other", "good"}
    refused = subprocess.run([script, "--results", str(results), "--lang", LANG, "--system", "a=same1",
                              "--pair", "a:b"], capture_output=True, text=True)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()] and "no system 'b'" in refused.stderr


def test_imports_neither_fairseq_nor_torch():
    code = ("import sys, importlib, tree_fairseq_console; importlib.import_module('tree_fairseq.cli.compare'); "
            "print(sorted({'fairseq', 'torch'} & set(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
