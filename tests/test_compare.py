"""tree-fairseq-compare on synthetic outputs whose answer is known: runs made by corrupting a
reference (word drops and substitutions) at a set rate, one RNG seed per run. Two systems of the
same rate must not differ, a system of a much lower rate must; each run's scores and each paired
bootstrap p-value are what sacreBLEU's command line prints for the same files."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tree_fairseq.cli import compare, overriding

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
    """Sentence i has 4 + (i % 40) // 2 + (0 to 6) words: as long as source_words' sentence i (1 + i % 40
    words) is, roughly, as a translation is as long as its source."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(4 + (i % 40) // 2 + rng.randint(0, 6))).capitalize()
            for i in range(SENTENCES)]


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
    """The comparison's JSON; an option of ``argv`` replaces its default here."""
    command = overriding(["--results", str(folder), "--lang", LANG, "--bootstrap", str(REPLICATES),
                          "--json", str(folder / "out.json")], list(argv))
    compare.main(command)
    return json.loads(Path(command[command.index("--json") + 1]).read_text())


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


def test_every_run_of_a_replicate_reads_the_same_sentences(results):
    # Systems whose runs are copies of each other's. With the same sentences for every run of a
    # replicate, one run against its copy never differs (resampling sentences per run, most
    # replicates would); two runs against their copies differ only where the runs drawn differ.
    # (Called below the command line, which refuses identical outputs as two runs.)
    refs = reference()
    hyps = {}
    for run in ("same1", "same2"):
        hyps[run] = hyps[f"twin.{run}"] = compare.read_lines(str(results / f"{run}.hyp.{LANG}"))
    twins = compare.compare(refs, hyps, {"a": ["same1"], "b": ["twin.same1"]}, [("a", "b")], REPLICATES, 12345)
    for metric in ("BLEU", "chrF"):
        assert twins["pairs"][0][metric]["interval"] == [0.0, 0.0] and twins["pairs"][0][metric]["p"] == 1.0
    twins = compare.compare(refs, hyps, {"a": ["same1", "same2"], "b": ["twin.same1", "twin.same2"]}, [("a", "b")],
                            REPLICATES, 12345)
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
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:b", "--pair", "a:b"],
     "--pair a:b is given twice: Holm would correct over a pair counted twice"),
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:b", "--pair", "b:a"], "--pair b:a is a:b reversed"),
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:b", "--by-length", "10,x", "--source", "s"],
     "--by-length '10,x' is not whole numbers"),
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:b", "--by-length", "20,10", "--source", "s"],
     "strictly ascending"),
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:b", "--by-length", "0,10", "--source", "s"],
     "must be positive"),
    (["--system", "a=same1", "--system", "b=other1", "--pair", "a:b", "--by-length", "10", "--source", "nowhere.txt"],
     "--source nowhere.txt: no such file"),
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


def test_refuses_one_output_counted_as_two_runs(results, tmp_path):
    """A file given twice under two names (a copy or a link) would be "2 runs, sd 0.00"."""
    write(tmp_path / f"ref.{LANG}", reference())
    (tmp_path / f"a1.hyp.{LANG}").write_bytes((results / f"same1.hyp.{LANG}").read_bytes())
    (tmp_path / f"a2.hyp.{LANG}").write_bytes((results / f"same1.hyp.{LANG}").read_bytes())
    (tmp_path / f"a3.hyp.{LANG}").symlink_to(tmp_path / f"a1.hyp.{LANG}")
    (tmp_path / f"b.hyp.{LANG}").write_bytes((results / f"other1.hyp.{LANG}").read_bytes())
    for copy in ("a2", "a3"):
        message = refusal(tmp_path, "--system", f"a=a1,{copy}", "--system", "b=b", "--pair", "a:b")
        assert f"{copy}.hyp.{LANG} is the same output as a1.hyp.{LANG}" in message


def test_a_system_of_one_run_is_said_to_have_no_run_spread(results, capsys):
    report = run_compare(results, "--system", "a=same1", "--system", "b=other1,other2", "--pair", "a:b")
    note = report["pairs"][0]["note"]
    assert note.startswith("a has one run: no run-to-run spread is resampled for it")
    captured = capsys.readouterr()
    assert f"warning: a - b: {note}" in captured.err and note in captured.out
    both = run_compare(results, "--system", "a=same1", "--system", "b=other1", "--pair", "a:b")
    assert both["pairs"][0]["note"].startswith("a and b have one run")
    assert "note" not in run_compare(results, *SYSTEMS, *PAIRS)["pairs"][0]


@pytest.mark.parametrize("replicates, message", [
    ("1", "--bootstrap 1: a 95% percentile interval needs at least 100 replicates"),
    ("99", "needs at least 100"),
])
def test_refuses_too_few_replicates(results, tmp_path, replicates, message, capsys):
    with pytest.raises(SystemExit):
        compare.main(["--results", str(results), "--lang", LANG, "--bootstrap", replicates, "--json",
                      str(tmp_path / "c.json"), *SYSTEMS, *PAIRS])
    assert message in capsys.readouterr().err and not (tmp_path / "c.json").exists()


def test_refuses_a_bootstrap_that_cannot_fit_in_memory_up_front(results, tmp_path):
    message = refusal(results, "--bootstrap", "100000000", *SYSTEMS, *PAIRS)
    assert "--bootstrap 100000000 over 300 sentences needs 224 GiB" in message


def test_does_not_overwrite_the_default_comparison_unasked(results, tmp_path):
    write(tmp_path / f"ref.{LANG}", reference())
    for run in ("same1", "other1"):
        (tmp_path / f"{run}.hyp.{LANG}").write_bytes((results / f"{run}.hyp.{LANG}").read_bytes())
    argv = ["--results", str(tmp_path), "--lang", LANG, "--bootstrap", "100", "--system", "a=same1",
            "--system", "b=other1", "--pair", "a:b"]
    compare.main(argv)  # no comparison.json yet: the default is written
    first = (tmp_path / "comparison.json").read_text()
    with pytest.raises(SystemExit) as raised:
        compare.main([*argv, "--seed", "7"])
    assert "comparison.json exists (a published comparison?): name the output with --json FILE" in raised.value.code
    assert (tmp_path / "comparison.json").read_text() == first
    compare.main([*argv, "--seed", "7", "--json", str(tmp_path / "comparison.json")])  # named: replaced
    assert json.loads((tmp_path / "comparison.json").read_text())["seed"] == 7


def test_refuses_to_write_over_an_input(results, tmp_path):
    write(tmp_path / f"ref.{LANG}", reference())
    for run in ("same1", "other1"):
        (tmp_path / f"{run}.hyp.{LANG}").write_bytes((results / f"{run}.hyp.{LANG}").read_bytes())
    before = (tmp_path / f"ref.{LANG}").read_bytes()

    def refused(*outputs):
        with pytest.raises(SystemExit) as raised:
            compare.main(["--results", str(tmp_path), "--lang", LANG, "--bootstrap", "100", *outputs,
                          "--system", "a=same1", "--system", "b=other1", "--pair", "a:b"])
        return raised.value.code

    for name in (f"ref.{LANG}", f"other1.hyp.{LANG}"):
        assert "is an input" in refused("--json", str(tmp_path / name))
    assert (tmp_path / f"ref.{LANG}").read_bytes() == before
    same_file = refused("--json", str(tmp_path / "c.png"), "--plot", str(tmp_path / "c.png"))
    assert "--plot and --json name one file" in same_file
    (tmp_path / "c.json").write_text("{}")
    (tmp_path / "link.png").symlink_to(tmp_path / "c.json")  # one file, two names: the picture would replace the JSON
    linked = refused("--json", str(tmp_path / "c.json"), "--plot", str(tmp_path / "link.png"))
    assert "--plot and --json name one file" in linked
    assert (tmp_path / "c.json").read_text() == "{}" and (tmp_path / "link.png").is_symlink()
    # what is not a plain file (the test's own links: to a pipe, into /dev) is refused, left as it was
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "to-pipe.json").symlink_to(tmp_path / "pipe")
    (tmp_path / "to-null.png").symlink_to("/dev/null")
    for option, name in (("--json", "to-pipe.json"), ("--plot", "to-null.png"), ("--json", "pipe")):
        assert f"{option} {tmp_path / name} is not a plain file: name a file" in refused(option, str(tmp_path / name))
    assert os.readlink(tmp_path / "to-null.png") == "/dev/null" and (tmp_path / "to-pipe.json").is_symlink()


@pytest.mark.parametrize("content, message", [
    (b"fine\n\xff\xfe bad\n", "line 2: bytes that are not UTF-8"),
    (b"one\rtwo\n", "line 1 holds a carriage return inside the line"),
])
def test_refuses_bytes_that_would_miscount_lines(results, tmp_path, content, message):
    refs = reference()
    write(tmp_path / f"ref.{LANG}", refs)
    (tmp_path / f"same1.hyp.{LANG}").write_bytes((results / f"same1.hyp.{LANG}").read_bytes())
    bad = (results / f"other1.hyp.{LANG}").read_bytes().split(b"\n")
    bad[4] = content.rstrip(b"\n")
    (tmp_path / f"other1.hyp.{LANG}").write_bytes(b"\n".join(bad))
    got = refusal(tmp_path, "--system", "a=same1", "--system", "b=other1", "--pair", "a:b")
    assert f"other1.hyp.{LANG} line {4 + int(message.split()[1].rstrip(':'))}" in got
    assert message.split(" ", 2)[2] in got


def test_windows_line_ends_are_read_as_line_ends(results, tmp_path):
    refs = reference()
    (tmp_path / f"ref.{LANG}").write_bytes("".join(line + "\r\n" for line in refs).encode())
    (tmp_path / f"same1.hyp.{LANG}").write_bytes((results / f"same1.hyp.{LANG}").read_bytes())
    (tmp_path / f"other1.hyp.{LANG}").write_bytes((results / f"other1.hyp.{LANG}").read_bytes())
    crlf = run_compare(tmp_path, "--system", "a=same1", "--system", "b=other1", "--pair", "a:b")
    plain = run_compare(results, "--system", "a=same1", "--system", "b=other1", "--pair", "a:b")
    assert crlf["systems"] == plain["systems"]


# (h): by source length, and the picture


def source_words(count: int) -> list[str]:
    """A source side whose sentence i has 1 + i % 40 words."""
    return [" ".join(["w"] * (1 + i % 40)) for i in range(count)]


def test_by_length_groups_the_sentences_and_leaves_the_rest_unchanged(results, tmp_path):
    write(tmp_path / "source.txt", source_words(SENTENCES))
    plain = run_compare(results, *SYSTEMS, *PAIRS)
    grouped = run_compare(results, *SYSTEMS, *PAIRS,
                          "--by-length", "10,20,30", "--source", str(tmp_path / "source.txt"))
    assert grouped["pairs"] == plain["pairs"] and grouped["systems"] == plain["systems"]
    groups = grouped["by_length"]["groups"]
    assert [group["sentences"] for group in groups] == ["<= 10", "11-20", "21-30", "> 30"]
    assert [group["count"] for group in groups] == [80, 80, 70, 70]  # lengths 1-20 eight times, 21-40 seven
    assert grouped["by_length"]["bounds"] == [10, 20, 30]
    # each group's difference is the difference of the system means on its sentences alone
    refs = reference()
    indices = [i for i in range(SENTENCES) if 11 <= 1 + i % 40 <= 20]
    from sacrebleu.metrics import BLEU

    def mean_bleu(runs):
        scores = []
        for run in runs:
            hyps = compare.read_lines(str(results / f"{run}.hyp.{LANG}"))
            scores.append(BLEU().corpus_score([hyps[i] for i in indices], [[refs[i] for i in indices]]).score)
        return np.mean(scores)

    figure = groups[1]["pairs"][1]["BLEU"]  # good - same, sentences of 11-20 words
    assert figure["difference"] == pytest.approx(mean_bleu(["good1", "good2"]) - mean_bleu(["same1", "same2", "same3"]))
    low, high = figure["interval"]
    assert 0 < low < figure["difference"] < high
    same = groups[1]["pairs"][0]["BLEU"]
    assert same["interval"][0] < 0 < same["interval"][1]


def test_by_length_gives_each_systems_output_length_per_group(results, tmp_path, capsys):
    """Per group, each run's hypothesis / reference tokens as sacreBLEU's BLEU counts them on the
    group's sentences, and the system's mean and sd of them; printed as a table of its own."""
    from sacrebleu.metrics import BLEU

    write(tmp_path / "source.txt", source_words(SENTENCES))
    groups = run_compare(results, *SYSTEMS, *PAIRS, "--by-length", "10,20,30",
                         "--source", str(tmp_path / "source.txt"))["by_length"]["groups"]
    refs = reference()
    for group, (low, high) in zip(groups, [(1, 10), (11, 20), (21, 30), (31, 40)]):
        indices = [i for i in range(SENTENCES) if low <= 1 + i % 40 <= high]
        assert set(group["length"]) == {"same", "other", "good"}
        for name, runs in (("same", ["same1", "same2", "same3"]), ("good", ["good1", "good2"])):
            expected = {}
            for run in runs:
                hyps = compare.read_lines(str(results / f"{run}.hyp.{LANG}"))
                score = BLEU().corpus_score([hyps[i] for i in indices], [[refs[i] for i in indices]])
                expected[run] = score.sys_len / score.ref_len
            figure = group["length"][name]
            assert figure["runs"] == pytest.approx(expected)
            assert figure["mean"] == pytest.approx(np.mean(list(expected.values())))
            assert figure["sd"] == pytest.approx(np.std(list(expected.values()), ddof=1))
        # a run drops 2.5% (good) or 15% (same) of the words
        assert 0.95 < group["length"]["good"]["mean"] < 1 and 0.8 < group["length"]["same"]["mean"] < 0.9
    out = capsys.readouterr().out
    table = out.split("Output length by source length", 1)[1]
    good = groups[2]["length"]["good"]
    assert "| good | " in table and f"{good['mean']:.3f} ± {good['sd']:.3f}" in table


def test_by_length_gives_no_length_where_the_references_are_empty(tmp_path, capsys):
    """A group whose reference lines are all empty has no output length (not NaN or infinity in
    the JSON): None, printed as such."""
    refs = reference()
    long = [i for i in range(SENTENCES) if 1 + i % 40 > 30]
    for i in long:
        refs[i] = ""
    write(tmp_path / f"ref.{LANG}", refs)
    for run in ("same1", "same2", "other1", "other2"):
        write(tmp_path / f"{run}.hyp.{LANG}", corrupt(reference(), *RUNS[run]))
    write(tmp_path / "source.txt", source_words(SENTENCES))
    report = run_compare(tmp_path, "--system", "same=same1,same2", "--system", "other=other1,other2",
                         "--pair", "same:other", "--by-length", "30", "--source", str(tmp_path / "source.txt"))
    short, empty = report["by_length"]["groups"]
    assert empty["count"] == len(long) and empty["length"]["same"] == {
        "mean": None, "sd": None, "runs": {"same1": None, "same2": None}}
    assert 0.8 < short["length"]["same"]["mean"] < 0.9
    assert "NaN" not in (tmp_path / "out.json").read_text() and "Infinity" not in (tmp_path / "out.json").read_text()
    table = capsys.readouterr().out.split("Output length by source length", 1)[1]
    assert next(line for line in table.splitlines() if line.startswith("| same |")).endswith("| no reference tokens |")


def test_by_length_reports_an_empty_group(results, tmp_path, capsys):
    write(tmp_path / "source.txt", source_words(SENTENCES))
    report = run_compare(results, *SYSTEMS, *PAIRS, "--by-length", "40,50", "--source", str(tmp_path / "source.txt"))
    assert [group["count"] for group in report["by_length"]["groups"]] == [300, 0, 0]
    assert report["by_length"]["groups"][1]["pairs"] == [] and "length" not in report["by_length"]["groups"][1]
    table = capsys.readouterr().out.split("Output length by source length", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| same |"))
    assert row.count("no sentences") == 2


def test_by_length_notes_a_group_of_few_sentences(results, tmp_path, capsys):
    """A group of fewer than MIN_GROUP_SENTENCES sentences carries a note, printed as a warning and
    under the tables (a group of one sentence with one-run systems has a point interval and a small
    p, which read alone looks like evidence); the larger groups carry none."""
    words = source_words(SENTENCES)
    words[0] = " ".join(["w"] * 60)
    write(tmp_path / "source.txt", words)
    report = run_compare(results, *SYSTEMS, *PAIRS, "--by-length", "1,38,50", "--source", str(tmp_path / "source.txt"))
    groups = report["by_length"]["groups"]
    assert [group["count"] for group in groups] == [7, 278, 14, 1]  # 1 word: i % 40 == 0 but i = 0
    assert compare.MIN_GROUP_SENTENCES == 50
    assert [("note" in group) for group in groups] == [True, False, True, True]
    assert groups[0]["note"].startswith("7 sentences (fewer than 50): BLEU over so few")
    assert groups[3]["note"].startswith("1 sentence (fewer than 50)")
    captured = capsys.readouterr()
    assert captured.err.count("tree-fairseq-compare: warning: sources of ") == 3
    assert "warning: sources of > 50 words: 1 sentence (fewer than 50)" in captured.err
    assert "- sources of 39-50 words: 14 sentences (fewer than 50)" in captured.out.split("Output length", 1)[1]
    # one-run systems on the one-sentence group: the point interval the note warns of
    single = run_compare(results, "--system", "a=same1", "--system", "b=good1", "--pair", "a:b",
                         "--by-length", "50", "--source", str(tmp_path / "source.txt"))
    low, high = single["by_length"]["groups"][1]["pairs"][0]["BLEU"]["interval"]
    assert low == high and "note" in single["by_length"]["groups"][1]


@pytest.mark.parametrize("argv, message", [
    (["--by-length", "10"], "--by-length needs --source"),
    (["--source", "x.txt"], "--source is read for --by-length only"),
    (["--plot", "x.jpg"], "--plot x.jpg: name a .png, .pdf, .svg file"),
    (["--seed", "-1"], "argument --seed: '-1': a whole number from 0 to 4294967295 (2**32 - 1)"),
])
def test_by_length_and_plot_options_refused_in_one_line(results, argv, message, capsys):
    with pytest.raises(SystemExit):
        run_compare(results, *SYSTEMS, *PAIRS, *argv)
    assert message in capsys.readouterr().err


def test_by_length_refuses_a_source_of_another_length_or_the_reference(results, tmp_path):
    write(tmp_path / "short.txt", source_words(SENTENCES - 1))
    message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / "short.txt"))
    assert f"short.txt has {SENTENCES - 1} lines but the reference has {SENTENCES}" in message
    message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(results / f"ref.{LANG}"))
    assert "is the reference: give the test set's source side" in message
    lines = source_words(SENTENCES)
    lines[6] = ""
    write(tmp_path / "holes.txt", lines)
    message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / "holes.txt"))
    assert "holes.txt line 7 is empty" in message


def test_by_length_refuses_the_target_side_tokenised_or_not(results, tmp_path):
    """The reference's text in another file (lower-cased, spaced otherwise) is the target side; a
    source side with a few lines the reference's is not refused."""
    refs = (results / f"ref.{LANG}").read_text(encoding="utf-8").splitlines()
    tokenised = [line.lower().replace(" ", "  ") for line in refs]
    tokenised[:140] = source_words(SENTENCES)[:140]  # 160 of 300 lines the reference's
    write(tmp_path / f"test.{LANG}", tokenised)
    message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / f"test.{LANG}"))
    assert f"test.{LANG}: 160 of {SENTENCES} lines are the text of ref.{LANG}" in message
    assert "it is the target side; give the test set's source side" in message
    source = source_words(SENTENCES)
    source[:150] = refs[:150]  # half the lines: not refused
    write(tmp_path / "source.txt", source)
    grouped = run_compare(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / "source.txt"))
    assert sum(group["count"] for group in grouped["by_length"]["groups"]) == SENTENCES


def test_by_length_refuses_a_source_in_another_order(results, tmp_path):
    """The test set's source side shuffled, or sorted by length as fairseq-generate's S- lines come
    (batch order), has the right line count but groups each sentence by another's length: refused
    by the correlation of its line lengths with the reference's. The same lines in order pass, and
    below ORDER_MIN_SENTENCES no order is judged."""
    source = source_words(SENTENCES)
    shuffled = source[:]
    random.Random(0).shuffle(shuffled)
    for name, lines in (("shuffled.txt", shuffled), ("sorted.txt", sorted(source, key=len))):
        write(tmp_path / name, lines)
        message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / name))
        assert f"--source {tmp_path / name}: its lines' word counts do not follow ref.{LANG}'s (correlation" in message
        assert f"over {SENTENCES} lines" in message and "is it in the test set's order?" in message
    write(tmp_path / "source.txt", source)
    grouped = run_compare(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / "source.txt"))
    assert sum(group["count"] for group in grouped["by_length"]["groups"]) == SENTENCES
    refs = reference()
    def counts(lines):
        return [len(line.split()) for line in lines[:compare.ORDER_MIN_SENTENCES]]

    compare.check_in_test_order("few.txt", counts(shuffled)[:-1], refs[:compare.ORDER_MIN_SENTENCES - 1], "ref")
    with pytest.raises(ValueError, match="few.txt: its lines' word counts do not follow ref's"):
        compare.check_in_test_order("few.txt", counts(sorted(source, key=len)), refs[:compare.ORDER_MIN_SENTENCES],
                                    "ref")


def test_by_length_refuses_a_translation_or_a_bpe_source(results, tmp_path):
    """A run's output is the target side too (the sentences would be grouped by one system's output
    length), and a source side after BPE would count subword pieces, not words."""
    hypothesis = (results / f"good1.hyp.{LANG}").read_text(encoding="utf-8").splitlines()
    write(tmp_path / "copy.txt", [line.upper() for line in hypothesis])
    message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / "copy.txt"))
    assert f"copy.txt: {SENTENCES} of {SENTENCES} lines are the text of good1.hyp.{LANG}" in message
    for mark in ("@@ ", "\u2581"):
        source = source_words(SENTENCES)
        source[4] = source[4].replace(" ", f"{mark.strip()} ", 1) if mark == "@@ " else "\u2581" + source[4]
        write(tmp_path / "bpe.txt", source)
        message = refusal(results, *SYSTEMS, *PAIRS, "--by-length", "10", "--source", str(tmp_path / "bpe.txt"))
        assert "bpe.txt line 5 still holds" in message and "give the word-tokenised source side, before BPE" in message


def test_an_empty_file_name_is_refused_not_taken_for_the_default(results, tmp_path, capsys):
    """--json '' would write RESULTS/comparison.json, past the refusal to replace it unasked."""
    published = tmp_path / "comparison.json"
    for name in ("ref", *RUNS):
        suffix = LANG if name == "ref" else f"hyp.{LANG}"
        source = results / (f"ref.{LANG}" if name == "ref" else f"{name}.hyp.{LANG}")
        (tmp_path / f"{name}.{suffix}").write_bytes(source.read_bytes())
    published.write_text('{"published": true}\n')
    for flag in ("--json", "--plot", "--source"):
        with pytest.raises(SystemExit):
            compare.main(["--results", str(tmp_path), "--lang", LANG, "--bootstrap", "100", *SYSTEMS, *PAIRS,
                          flag, "", *(["--by-length", "10"] if flag == "--source" else [])])
        assert f"{flag}: give a file name" in capsys.readouterr().err
    assert published.read_text() == '{"published": true}\n'


def test_a_plot_that_cannot_be_written_leaves_the_json_as_it_was(results, tmp_path):
    """The picture is drawn before the JSON is written: a picture that fails leaves no JSON written
    or replaced, and a folder that is not there is named, not a hidden partial file."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "c.json"
    target.write_text("earlier\n")
    message = refusal(results, *SYSTEMS, *PAIRS, "--json", str(target), "--plot", str(tmp_path / "nowhere" / "c.png"))
    assert f"--plot {tmp_path / 'nowhere' / 'c.png'}: no folder {tmp_path / 'nowhere'}" in message
    assert target.read_text() == "earlier\n"
    # a name matplotlib's maths cannot read is drawn as it is; a file named '.png' is a png
    compare.main(["--results", str(results), "--lang", LANG, "--bootstrap", "100", "--json", str(target),
                  "--system", "a$\\frac$=same1,same2", "--system", "b=other1", "--pair", "a$\\frac$:b",
                  "--plot", str(tmp_path / ".png")])
    assert (tmp_path / ".png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads(target.read_text())["pairs"][0]["a"] == "a$\\frac$"
    assert not [path.name for path in tmp_path.iterdir() if "partial" in path.name]


def test_plot_draws_the_runs_and_the_intervals(results, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "comparison.png"
    run_compare(results, *SYSTEMS, *PAIRS, "--plot", str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    image = matplotlib.image.imread(str(path))
    assert image.shape[1] > image.shape[0] > 200
    # red is drawn for the one pair shown (good - same), gray for the other
    red = (image[..., 0] > 0.7) & (image[..., 1] < 0.3) & (image[..., 2] < 0.3)
    assert red.sum() > 20


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
    done = subprocess.run([script, "--results", str(results), "--lang", LANG, "--bootstrap", "100", "--json", str(path),
                           *SYSTEMS, *PAIRS], capture_output=True, text=True, check=True)
    assert "| same - other |" in done.stdout and "| good - same |" in done.stdout
    written = json.loads(path.read_text())
    assert written["command"].startswith("tree-fairseq-compare --results") and written["bootstrap"] == 100
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


def test_an_existing_picture_is_replaced_only_with_its_comparison(results, tmp_path):
    """--plot wrote over an existing picture (the published comparison.png) without a word, whatever
    --json named; like the JSON, it is replaced only when asked: with the existing JSON it goes with."""
    pytest.importorskip("matplotlib")
    picture, earlier = tmp_path / "comparison.png", tmp_path / "comparison.json"
    picture.write_bytes(b"published picture")
    message = refusal(results, *SYSTEMS, *PAIRS, "--json", str(tmp_path / "new.json"), "--plot", str(picture))
    assert message == (f"tree-fairseq-compare: error: --plot {picture} exists (a published picture?): name a new "
                       "file, or replace it with the comparison it goes with (--json naming that existing JSON, "
                       "replaced too)")
    assert picture.read_bytes() == b"published picture" and not (tmp_path / "new.json").exists()
    earlier.write_text("{}\n")
    compare.main(["--results", str(results), "--lang", LANG, "--bootstrap", "100", *SYSTEMS, *PAIRS,
                  "--json", str(earlier), "--plot", str(picture)])
    assert picture.read_bytes()[:4] == b"\x89PNG" and json.loads(earlier.read_text())["pairs"]
