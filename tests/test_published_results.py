"""Published system outputs (docs/results/*/) reproduce every figure: scripts/publish_results.py
writes them, and each published folder's scores are what sacreBLEU gives on its files, with as
many lines as the reference, its reference is the test set itself (never fairseq's T- lines), and
the figures docs/ quotes are those scores (and the p-value on a line naming both systems of a
paired bootstrap is that test's); a published training log gives its run's row of the page."""

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_data
from helpers import code_blocks, commands, train_and_generate

from tree_fairseq.analysis.methods_table import read_training_log
from tree_fairseq.cli.locking import output_lock
from tree_fairseq.cli.score import detokenize, split_sources, stored_reference

ROOT = Path(__file__).resolve().parents[1]
SACREBLEU = str(Path(sys.executable).parent / "sacrebleu")
PUBLISHED = sorted(path.parent for path in (ROOT / "docs" / "results").glob("*/scores.json"))
# The test set each published folder was translated from: (dataset of ../shared/data, file, language).
TEST_SETS = {"iwslt14-lowres-en-de": ("iwslt14-de-en-lowres", "test.de", "de")}


def sacrebleu_scores(folder: Path, ref: str, hyp: str) -> tuple[dict, dict]:
    """sacreBLEU's BLEU and chrF of ``hyp`` against ``ref``, as its command line gives them."""
    result = subprocess.run([SACREBLEU, ref, "-i", hyp, "-m", "bleu", "chrf", "-w", "2", "--format", "json"],
                            cwd=folder, capture_output=True, text=True, check=True)
    bleu, chrf = json.loads(result.stdout)
    return bleu, chrf


@pytest.mark.slow
def test_publish_results_writes_outputs_scores_and_commands(tiny_databin, tmp_path):
    output = train_and_generate(tiny_databin, tmp_path / "ck", "tree_transformer_tiny", "--inference-parser",
                                "balanced", max_update=2,
                                generate_flags=("--remove-bpe",))
    first = tmp_path / "first.txt"
    first.write_text(output)
    # fairseq's T- lines print the test words missing from the dictionary as <unk>: not the test set
    assert "<unk>" in "".join(line for line in output.splitlines() if line.startswith("T-"))
    # A second system: the test set itself as its hypotheses (a perfect score).
    second = tmp_path / "second.txt"
    lines = output.splitlines()
    references = stored_reference(str(tiny_databin), "test").tokenised
    second.write_text("".join(
        (f"H-{line.split(chr(9))[0][2:]}\t-0.1\t{references[int(line.split(chr(9))[0][2:])]}"
         if line.startswith("H-") else line) + "\n" for line in lines))
    out = tmp_path / "published"
    published = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out", str(out),
                                "--lang", "en", "--data-bin", str(tiny_databin), "--compare", "model.balanced:oracle",
                                "model.balanced=" + str(first), "oracle=" + str(second)],
                               capture_output=True, text=True)
    assert published.returncode == 1 and "--compare model.balanced:oracle: oracle is tested against model.balanced " \
        "already (the baseline's test" in published.stderr and not out.exists()
    published = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out", str(out),
                                "--lang", "en", "--data-bin", str(tiny_databin),
                                "model.balanced=" + str(first), "oracle=" + str(second)],
                               capture_output=True, text=True)
    assert published.returncode == 0, published.stderr[-2000:]
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores["systems"]) == {"model.balanced", "oracle"} and scores["sentences"] == 40
    assert scores["systems"]["oracle"]["score"] == pytest.approx(100.0)
    assert scores["systems"]["oracle"]["chrf"] == pytest.approx(100.0)
    assert (out / "ref.en").read_text().splitlines() == detokenize(references, "en")
    assert scores["systems"]["model.balanced"]["score"] < 100
    assert scores["paired_bootstrap"][0]["baseline"] == "model.balanced"
    assert scores["paired_bootstrap"][0]["p_value"] < 0.05
    # the test against the first system only: --compare model.balanced:oracle would make it again (reversed)
    assert [(test["baseline"], test["system"]) for test in scores["paired_bootstrap"]] == [("model.balanced", "oracle")]
    check_published(out)
    # score.sh gives the same figures
    result = subprocess.run(["bash", str(out / "score.sh")], capture_output=True, text=True, check=True,
                            env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    printed = [float(number) for number in re.findall(r'"name": "BLEU",\s+"score": ([0-9.]+)', result.stdout)]
    assert printed[:2] == pytest.approx([scores["systems"][name]["score"] for name in ("model.balanced", "oracle")])
    # a system with a missing sentence is refused (into another folder: this one publishes other systems)
    second.write_text("".join(line + "\n" for line in lines if not line.startswith(("H-0\t", "T-0\t", "S-0\t"))))
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out",
                             str(tmp_path / "another"),
                             "--lang", "en", "--data-bin", str(tiny_databin), "a=" + str(first), "b=" + str(second)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "1 missing (ids 0)" in result.stderr


def check_published(folder: Path) -> None:
    scores = json.loads((folder / "scores.json").read_text())
    reference = next(folder.glob("ref.*"))
    lines = len(reference.read_text(encoding="utf-8").splitlines())
    assert lines == scores["sentences"]
    for name, published in scores["systems"].items():
        hyp = folder / f"{name}.hyp{reference.suffix}"
        assert len(hyp.read_text(encoding="utf-8").splitlines()) == lines, hyp
        bleu, chrf = sacrebleu_scores(folder, reference.name, hyp.name)
        assert bleu["score"] == pytest.approx(published["score"], abs=1e-9)
        assert bleu["signature"] == published["signature"]
        assert float(re.search(r"BP = ([0-9.]+)", bleu["verbose_score"]).group(1)) == published["brevity_penalty"]
        assert (chrf["score"], chrf["signature"]) == (published["chrf"], published["chrf_signature"])
    assert "<unk>" not in reference.read_text(encoding="utf-8")  # a reference rebuilt from T- lines
    assert "T- lines" not in scores["reference"]


@pytest.mark.parametrize("folder", PUBLISHED, ids=[path.name for path in PUBLISHED])
def test_published_references_are_the_test_set(folder):
    dataset, name, lang = TEST_SETS[folder.name]  # every published folder says which test set it scores
    test_set = (shared_data(dataset) / name).read_text(encoding="utf-8").splitlines()
    assert (folder / f"ref.{lang}").read_text(encoding="utf-8").splitlines() == detokenize(test_set, lang)


@pytest.mark.parametrize("folder", PUBLISHED, ids=[path.name for path in PUBLISHED])
def test_published_outputs_reproduce_their_scores_and_the_docs(folder):
    check_published(folder)
    scores = json.loads((folder / "scores.json").read_text())
    quoting = [path for path in (ROOT / "docs").glob("*.md") if f"results/{folder.name}" in path.read_text()]
    assert quoting, f"no page of docs/ quotes {folder}"
    for page in quoting:
        text = page.read_text(encoding="utf-8")
        for name, published in scores["systems"].items():
            rows = [line for line in text.splitlines() if re.search(rf"`{re.escape(name)}`", line)]
            figures = {float(number) for row in rows for number in re.findall(r"\b\d+\.\d\d\b", row)}
            assert round(published["score"], 2) in figures, (page, name, published["score"])
        # a line naming both systems of a paired bootstrap, with a p-value, quotes that one
        for test in scores["paired_bootstrap"]:
            pair = (rf"`{re.escape(test['baseline'])}`", rf"`{re.escape(test['system'])}`")
            for line in text.splitlines():
                p_values = set(re.findall(r"\b0\.\d{2,3}\b", line))
                if p_values and all(re.search(name, line) for name in pair):
                    assert {f"{test['p_value']:.2f}", f"{test['p_value']:.3f}"} & p_values, (page, line, test["p_value"])


COMPARED = sorted(path.parent for path in (ROOT / "docs" / "results").glob("*/comparison.json"))


@pytest.mark.parametrize("folder", COMPARED, ids=[path.name for path in COMPARED])
def test_published_comparison_over_seeds_is_recomputed_and_quoted(folder, tmp_path):
    """comparison.json is what tree-fairseq-compare gives on the published files (its own command
    line, run again), and the page that quotes the folder gives each pair's intervals."""
    published = json.loads((folder / "comparison.json").read_text())
    command = shlex.split(published["command"])
    assert command[0] == "tree-fairseq-compare"
    subprocess.run([str(Path(sys.executable).parent / command[0]), *command[1:], "--json", str(tmp_path / "c.json")],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    again = json.loads((tmp_path / "c.json").read_text())
    assert again["pairs"] == published["pairs"] and again["systems"] == published["systems"]
    pages = [path.read_text(encoding="utf-8") for path in (ROOT / "docs").glob("*.md")
             if f"results/{folder.name}" in path.read_text()]
    for pair in published["pairs"]:
        for metric in ("BLEU", "chrF"):
            low, high = pair[metric]["interval"]
            quoted = f"{pair[metric]['difference']:+.2f} [{low:+.2f}, {high:+.2f}], {pair[metric]['p']:.4f}"
            assert any(quoted in page for page in pages), (pair["a"], pair["b"], metric, quoted)


LOGS = sorted((ROOT / "docs" / "results").glob("*/logs/*.train.log"))


def run_figures(log: Path) -> tuple[str, str, float]:
    """A training log's "epochs / updates", "best loss / nll (epoch)" and summed train_wall (hours), as
    the en-de page's run tables give them, the log read as the study table reads it."""
    run = read_training_log(str(log))
    return (f"{run.epochs} / {run.updates:,}", f"{run.best_loss:.3f} / {run.best_nll:.3f} ({run.best_epoch})",
            run.hours)


@pytest.mark.parametrize("log", LOGS, ids=[path.name for path in LOGS])
def test_published_training_logs_give_the_pages_run_figures(log):
    """A published training log is of a published system, and the page's row for that run gives its
    epochs and updates, best validation loss / nll and training time as the log has them."""
    folder = log.parent.parent
    name = log.name.removesuffix(".train.log")
    assert name in json.loads((folder / "scores.json").read_text())["systems"], log
    steps, best, hours = run_figures(log)
    rows = [line for page in (ROOT / "docs").glob("*.md") if f"results/{folder.name}" in page.read_text()
            for line in page.read_text(encoding="utf-8").splitlines()
            if re.match(rf"\| `{re.escape(name)}`( \(seed 1\))? \| converged", line)]  # run tables' rows only
    assert rows, f"no page's run table has a row for {name}"
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")]
        assert steps in cells and best in cells, (row, steps, best)
        assert any(cell.startswith(f"{hours:.2f} h") for cell in cells), (row, hours)


def test_publish_results_refuses_what_would_publish_a_wrong_score(tiny_databin, tmp_path):
    """Outputs with subword marks, a system named twice or with a path in its name, an unknown
    --baseline and two runs' outputs concatenated are refused with one line, before anything is
    written."""
    references = stored_reference(str(tiny_databin), "test").tokenised
    sources = [line.replace("@@ ", "") for line in split_sources(str(tiny_databin), "test")]

    def output(name, hyps, ids=range(len(references))):
        path = tmp_path / name
        path.write_text("".join(f"S-{i}\t{sources[i]}\nT-{i}\t{references[i]}\nH-{i}\t-0.5\t{hyps[i]}\n" for i in ids))
        return str(path)

    good = output("good.txt", references)
    out = tmp_path / "published"

    def refused(*args):
        result = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out", str(out),
                                 "--lang", "en", "--data-bin", str(tiny_databin), *args],
                                capture_output=True, text=True)
        assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
        return result.stderr.strip().splitlines()[-1]

    marked = output("marked.txt", [ref.replace(" ", "@@ ", 1) if " " in ref else ref for ref in references])
    assert "the text still holds subword marks" in refused("a=" + good, "b=" + marked)
    assert "system a is given twice" in refused("a=" + good, "a=" + good)
    assert "a system name is letters, digits" in refused("../a=" + good)
    assert "a system name is letters, digits" in refused("x/y=" + good)
    assert "--baseline c is not among the systems a, b" in refused("--baseline", "c", "a=" + good, "b=" + good)
    twice = tmp_path / "twice.txt"
    twice.write_text((tmp_path / "good.txt").read_text() * 2)
    assert "has two T- lines" in refused("a=" + str(twice))
    assert not out.exists()  # nothing written by a refused run


def written_final_comparison(page: str) -> list[str]:
    """The en-de page's final comparison: the first code block after its "**The final comparison**"
    paragraph, as the words of its one command."""
    block = code_blocks(page.split("**The final comparison**", 1)[1])[0][1]
    return shlex.split(commands(block)[0])


def test_the_published_comparison_is_the_one_written_before_the_last_runs():
    """The en-de comparison.json was made by the command the page's rule wrote down before the last
    runs were in (every seed of each system, the rule's eight pairs), not by one chosen after the scores."""
    page = (ROOT / "docs" / "iwslt_lowres.md").read_text(encoding="utf-8")
    published = json.loads((ROOT / "docs" / "results" / "iwslt14-lowres-en-de" / "comparison.json").read_text())
    assert shlex.split(published["command"]) == written_final_comparison(page)


BY_LENGTH = sorted(path.parent for path in (ROOT / "docs" / "results").glob("*/comparison-by-length.json"))


@pytest.mark.parametrize("folder", BY_LENGTH, ids=[path.name for path in BY_LENGTH])
def test_the_breakdown_by_length_is_the_comparisons_own_command_recomputed(folder, tmp_path):
    """comparison-by-length.json is comparison.json's command with the breakdown's options added
    (its overall figures the same), recomputed from the published files and the test set's source
    side; its picture is beside it."""
    published = json.loads((folder / "comparison-by-length.json").read_text())
    overall = json.loads((folder / "comparison.json").read_text())
    command = shlex.split(published["command"])
    assert command[:len(shlex.split(overall["command"]))] == shlex.split(overall["command"])
    added = command[len(shlex.split(overall["command"])):]
    assert "--by-length" in added and "--source" in added and "--plot" in added
    assert published["pairs"] == overall["pairs"] and published["systems"] == overall["systems"]
    assert (ROOT / added[added.index("--plot") + 1]).read_bytes()[:4] == b"\x89PNG"
    source = Path(added[added.index("--source") + 1])
    shared_data(source.parent.name)
    again_command = [*command[:command.index("--json")], *command[command.index("--json") + 2:]]
    again_command = [*again_command[:again_command.index("--plot")], *again_command[again_command.index("--plot") + 2:]]
    subprocess.run([str(Path(sys.executable).parent / again_command[0]), *again_command[1:],
                    "--json", str(tmp_path / "c.json")], cwd=ROOT, check=True, capture_output=True, text=True)
    assert json.loads((tmp_path / "c.json").read_text())["by_length"] == published["by_length"]


# publish_results.py in-process (its refusals come before anything is written; fairseq is imported once)


def publish_module():
    spec = importlib.util.spec_from_file_location("publish_results", ROOT / "scripts" / "publish_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def split_text(databin: Path, split: str = "test") -> tuple[list[str], list[str]]:
    """A split's tokenised references and its sources as fairseq-generate --remove-bpe prints them."""
    return (stored_reference(str(databin), split).tokenised,
            [line.replace("@@ ", "") for line in split_sources(str(databin), split)])


def write_output(path: Path, sources, references, hyps, ids=None, log: str = "", end: str = "") -> str:
    """fairseq-generate's output of the sentences ``ids`` (default: all), after ``log`` lines, then ``end``."""
    ids = range(len(references)) if ids is None else ids
    path.write_text(log + "".join(f"S-{i}\t{sources[i]}\nT-{i}\t{references[i]}\nH-{i}\t-0.5\t{hyps[i]}\n"
                                  for i in ids) + end, encoding="utf-8")
    return str(path)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


class Publisher:
    """publish_results.py's main with --out and --lang en given; ``refused`` returns its one-line error."""

    def __init__(self, out: Path, databin: Path):
        self.module, self.common = publish_module(), ["--out", str(out), "--lang", "en", "--data-bin", str(databin)]

    def __call__(self, *args, common=True):
        self.module.main([*(self.common if common else []), *map(str, args)])

    def refused(self, *args, common=True) -> str:
        with pytest.raises(SystemExit) as exit_info:
            self(*args, common=common)
        message = str(exit_info.value.code)
        assert message.startswith("publish_results.py: error: ") and "\n" not in message, message
        return message


def publish_a_and_b(databin: Path, tmp_path: Path) -> tuple[Publisher, Path, str, str]:
    """Systems a and b published from one output, the test set itself, into tmp_path/published; returns
    the publisher, that folder, and fairseq-generate outputs of the test set ("good") and of each
    reference's first word ("worse")."""
    references, sources = split_text(databin)
    good = write_output(tmp_path / "good.txt", sources, references, references)
    worse = write_output(tmp_path / "worse.txt", sources, references, [ref.split()[0] for ref in references])
    out = tmp_path / "results" / "published"  # its folder made too
    publish = Publisher(out, databin)
    publish("a=" + good, "b=" + good)
    return publish, out, good, worse


def test_publishing_again_drops_no_system_and_replaces_one_only_when_asked(tiny_databin, tmp_path, capsys):
    """Into a folder that publishes systems already, a run that does not name one of them is refused,
    naming it (scores.json and score.sh would drop it); a system given with a fairseq-generate
    output whose output --out already publishes is replaced only with --replace NAME, and the
    others keep their figures."""
    publish, out, good, worse = publish_a_and_b(tiny_databin, tmp_path)
    before = folder_bytes(out)
    assert publish.refused("a=" + good) == (
        f"publish_results.py: error: {out} already publishes b, which this run does not name: scores.json and "
        "score.sh would drop it. Name it too (a system by its name alone: its published output scored again), or "
        "publish into another --out")
    assert publish.refused("a=" + worse, "b") == (
        f"publish_results.py: error: system a is already published in {out} ({out / 'a.hyp.en'}): give "
        f"--replace a to replace its output and figures with those of {worse}")
    assert "--replace c: no system c among those given (a, b)" in publish.refused("--replace", "c", "a", "b")
    assert "--replace a is given twice" in publish.refused("--replace", "a", "--replace", "a", "a=" + worse, "b")
    assert ("--replace b: b is given by its name alone (its published output is scored again), not with a "
            "fairseq-generate output to replace it") in publish.refused("--replace", "b", "a=" + worse, "b")
    assert (f"--replace c: {out} publishes no c to replace") in publish.refused("--replace", "c", "a", "b",
                                                                                 "c=" + good)
    assert folder_bytes(out) == before  # nothing written by a refused run
    # a system added, the others by their names alone: their files and figures unchanged
    publish("a", "b", "c=" + worse)
    after = folder_bytes(out)
    assert {name: after[name] for name in ("a.hyp.en", "b.hyp.en", "ref.en")} == {
        name: before[name] for name in ("a.hyp.en", "b.hyp.en", "ref.en")}
    scores_before, scores = json.loads(before["scores.json"]), json.loads(after["scores.json"])
    assert list(scores["systems"]) == ["a", "b", "c"]
    assert {name: scores["systems"][name] for name in "ab"} == scores_before["systems"]
    # replaced when asked
    publish("--replace", "a", "a=" + worse, "b", "c")
    scores = json.loads((out / "scores.json").read_text())
    assert scores["systems"]["a"] == scores["systems"]["c"] and scores["systems"]["b"] == scores_before["systems"]["b"]
    assert (out / "a.hyp.en").read_bytes() == (out / "c.hyp.en").read_bytes()
    capsys.readouterr()


def test_systems_published_already_keep_the_test_set_they_translate(tiny_databin, tmp_path, capsys):
    """Systems named alone beside one given with its output of another split (or data-bin) were
    scored again against that output's reference, and ref.LANG replaced by it, though their
    published outputs translate the test set of the old one (a BLEU near 0 for them, exit 0). The
    new reference must be the text of --out's ref.LANG, as a raw reference is checked."""
    publish, out, good, worse = publish_a_and_b(tiny_databin, tmp_path)
    before = folder_bytes(out)
    valid_references, valid_sources = split_text(tiny_databin, "valid")
    valid_output = write_output(tmp_path / "valid.txt", valid_sources, valid_references, valid_references)
    message = publish.refused("--subset", "valid", "a", "b", "c=" + valid_output)
    assert message.startswith(
        f"publish_results.py: error: the reference of c ({tiny_databin / 'valid.ref.en'} (subword_nmt pieces "
        f"removed), detokenised (sacremoses -l en)) is not the text of {out / 'ref.en'} (the test set of the published "
        "a, b): 40 of its 40 lines spell other words (line 1: "), message
    assert folder_bytes(out) == before
    # an output of the published test set is added beside them, their figures as they were
    publish("a", "b", "c=" + worse)
    after = folder_bytes(out)
    assert after["ref.en"] == before["ref.en"] and after["a.hyp.en"] == before["a.hyp.en"]
    assert {name: json.loads(after["scores.json"])["systems"][name] for name in "ab"} == json.loads(
        before["scores.json"])["systems"]
    capsys.readouterr()


def test_publishing_stopped_part_way_leaves_the_folder_as_it_was_and_runs_one_at_a_time(tiny_databin, tmp_path,
                                                                                        monkeypatch, capsys):
    """Everything is written and scored in OUT/.publishing and moved into place once every figure is
    in: a run that fails while scoring leaves the published folder byte for byte as it was (no
    new output beside old figures); a staging folder left by a run killed outright is removed by the
    next run; a second run on the same --out while another holds its lock is refused."""
    publish, out, good, worse = publish_a_and_b(tiny_databin, tmp_path)
    before = folder_bytes(out)
    real, calls = publish.module._sacrebleu, []

    def fails_on_the_third_call(command, folder):
        calls.append(command)
        if len(calls) == 3:
            raise ValueError("sacrebleu stopped")
        return real(command, folder)

    monkeypatch.setattr(publish.module, "_sacrebleu", fails_on_the_third_call)
    assert publish.refused("--replace", "a", "a=" + worse, "b") == "publish_results.py: error: sacrebleu stopped"
    assert len(calls) == 3 and folder_bytes(out) == before  # a.hyp.en not replaced, no .publishing left
    monkeypatch.setattr(publish.module, "_sacrebleu", real)
    (out / ".publishing").mkdir()  # as a run killed outright leaves it
    (out / ".publishing" / "a.hyp.en").write_text("half\n")
    publish("--replace", "a", "a=" + worse, "b")
    assert f"removing {out / '.publishing'}, left by an earlier run" in capsys.readouterr().err
    after = folder_bytes(out)
    assert after["a.hyp.en"] != before["a.hyp.en"] and after["b.hyp.en"] == before["b.hyp.en"]
    assert sorted(after) == sorted(before)
    with output_lock(str(out), "--out"):
        assert f"--out {out} is being written by another run" in publish.refused("a", "b")
    assert folder_bytes(out) == after


def test_publish_results_checks_a_raw_reference_and_the_outputs_with_it(tiny_databin, tmp_path, capsys):
    """--ref-detok is checked as the data-bin's reference is: every output must be of the split and
    cover it, and the raw text must be the split's (its lines spell the words of the data-bin's
    tokenised reference); the raw text of another test set is refused."""
    references, sources = split_text(tiny_databin)
    valid_references, valid_sources = split_text(tiny_databin, "valid")
    assert len(valid_references) == len(references)  # another test set, as many lines
    raw, other = tmp_path / "test.raw.en", tmp_path / "valid.raw.en"
    raw.write_text("".join(line + "\n" for line in detokenize(references, "en")))
    other.write_text("".join(line + "\n" for line in detokenize(valid_references, "en")))
    good = write_output(tmp_path / "good.txt", sources, references, references)
    out = tmp_path / "published"
    publish = Publisher(out, tiny_databin)
    message = publish.refused("--ref-detok", other, "a=" + good)
    assert (f"--ref-detok {other} is not the text of {tiny_databin / 'test.ref.en'} (subword_nmt pieces removed): "
            "40 of its 40 lines spell other words (line 1: ") in message
    valid_output = write_output(tmp_path / "valid.txt", valid_sources, valid_references, valid_references)
    assert "the source of sentence 0 is" in publish.refused("--ref-detok", other, "a=" + valid_output)
    short = write_output(tmp_path / "short.txt", sources, references, references, ids=range(1, 40))
    assert "1 missing (ids 0)" in publish.refused("--ref-detok", raw, "a=" + short)
    assert not out.exists()
    publish("--ref-detok", raw, "a=" + good)
    assert (out / "ref.en").read_bytes() == raw.read_bytes()
    assert json.loads((out / "scores.json").read_text())["reference"] == f"{raw} (raw)"
    capsys.readouterr()


def test_publish_results_refuses_a_language_the_data_bin_does_not_translate_into(tiny_databin, tmp_path, capsys):
    references, sources = split_text(tiny_databin)
    good = write_output(tmp_path / "good.txt", sources, references, references)
    publish = Publisher(tmp_path / "published", tiny_databin)
    assert publish.refused("--out", tmp_path / "published", "--lang", "de", "--data-bin", tiny_databin, "a=" + good,
                           common=False) == (
        f"publish_results.py: error: --lang de, but {tiny_databin} translates de into en (its de-en split files): "
        "give --lang en")
    assert not (tmp_path / "published").exists()


def test_publish_results_says_why_sentences_are_missing(tiny_databin, tmp_path, capsys):
    """An output that lacks sentences is refused with what the file tells of why: fairseq-generate
    skipped them (it finished: its closing line is there, and its log where the file holds it), or
    the file is cut short (it ends inside a line, or without fairseq-generate's closing line); an
    output cut inside the last sentence's text is refused too. publish_results has no option to
    publish a subset."""
    references, sources = split_text(tiny_databin)
    closing = "Generate test with beam=5: BLEU4 = 10.00, 40.0/15.0/6.0/2.0 (BP=1.000, ratio=1.000, syslen=9, reflen=9)\n"
    kept = [i for i in range(40) if i not in (3, 17)]
    skipped = write_output(tmp_path / "skipped.txt", sources, references, references, ids=kept, end=closing)
    logged = write_output(
        tmp_path / "logged.txt", sources, references, references, ids=kept,
        log="2026-01-01 00:00:01 | WARNING | fairseq.data.data_utils | 2 samples have invalid sizes and will be "
        "skipped, max_positions=(10, 10), first few sample ids=[3, 17]\n", end=closing)
    unfinished = write_output(tmp_path / "unfinished.txt", sources, references, references, ids=range(30))
    cut = write_output(tmp_path / "cut.txt", sources, references, references, ids=range(30))
    Path(cut).write_text(Path(cut).read_text()[:-4])  # inside H-29's text
    whole_ids = write_output(tmp_path / "whole-ids.txt", sources, references, references)
    Path(whole_ids).write_text(Path(whole_ids).read_text()[:-4])
    publish = Publisher(tmp_path / "published", tiny_databin)
    message = publish.refused("a=" + skipped)
    assert "hypotheses for 38 of the 40 sentences of" in message and "2 missing (ids 3, 17): fairseq-generate " \
        "finished without them: it skipped them (--skip-invalid-size-inputs-valid-test" in message
    assert ("2 missing (ids 3, 17): fairseq-generate skipped 2 sentences as too long (its log: 2 samples have invalid "
            "sizes and will be skipped, max_positions=(10, 10), first few sample ids=[3, 17])") in publish.refused(
        "a=" + logged)
    message = publish.refused("a=" + unfinished)
    assert (f"10 missing (ids 30, 31, 32, 33, 34, 35, 36, 37, 38, 39): {unfinished} is cut short: it lacks "
            "fairseq-generate's closing line") in message
    message = publish.refused("a=" + cut)
    assert f"10 missing (ids 30, 31, 32, 33, 34, 35, 36, 37, 38, 39): {cut} is cut short: its last line (H-29) " \
        "ends without a newline" in message
    for message in (publish.refused("a=" + skipped), publish.refused("a=" + cut)):
        assert "--allow-subset" not in message and message.endswith("Translate every sentence")
    assert f"{whole_ids} is cut short: its last line (H-39) ends without a newline" in publish.refused("a=" + whole_ids)
    assert not (tmp_path / "published").exists()


def test_publish_results_refuses_a_duplicate_compare_before_any_work(tmp_path):
    """--compare A:A and a --compare pair that is the baseline's test or an earlier --compare's (either
    order) are refused in one line naming --compare, before --out is made."""
    published = ROOT / "docs" / "results" / "iwslt14-lowres-en-de"
    out = tmp_path / "out"

    def publish(*flags):
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out", str(out),
                               "--lang", "de", "--ref-detok", str(published / "ref.de"), *flags],
                              capture_output=True, text=True)

    cases = [
        (["--compare", "transformer:transformer", "transformer", "tree_transformer.spacy"],
         "--compare transformer:transformer: a system against itself"),
        (["--compare", "transformer:tree_transformer.spacy", "transformer", "tree_transformer.spacy"],
         "--compare transformer:tree_transformer.spacy: tree_transformer.spacy is tested against transformer already "
         "(the baseline's test"),
        (["--compare", "a:b", "--compare", "b:a", "transformer", "a", "b"],
         "--compare b:a: a is tested against b already (an earlier --compare"),
    ]
    for flags, said in cases:
        result = publish(*flags)
        assert result.returncode == 1 and said in result.stderr, result.stderr[-2000:]
        assert not out.exists() and not (tmp_path / "out.lock").exists()


def test_publish_results_refuses_ref_beside_ref_detok_when_it_would_go_unread(tmp_path):
    """--ref beside --ref-detok when every system is a published one (--ref never read) is refused in
    one line, before --out is made."""
    published = ROOT / "docs" / "results" / "iwslt14-lowres-en-de"
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_results.py"), "--out", str(out), "--lang",
                             "de", "--ref-detok", str(published / "ref.de"), "--ref", str(tmp_path / "nonexistent"),
                             "transformer"], capture_output=True, text=True)
    assert result.returncode == 1 and (f"--ref {tmp_path / 'nonexistent'} and --ref-detok {published / 'ref.de'}: with "
                                       "every system one already published") in result.stderr, result.stderr[-2000:]
    assert not out.exists() and not (tmp_path / "out.lock").exists()
