"""The recipes' script logic that runs offline: --help and argument errors of data-prep/ and
scripts/, the download error when offline, scoring against sacrebleu's and rouge-score's own
command lines, the YAML configs as fairseq-train flags, and the data-prep text helpers."""

import csv
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fairseq import options

import tree_fairseq
from helpers import write_tokenised_corpus

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
USER_DIR = str(Path(tree_fairseq.__file__).parent)
from tree_fairseq.cli import average_checkpoints, config_args, score  # noqa: E402

RECIPES = {
    "prepare-iwslt14.sh": ("de", "en", "http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz"),
    "prepare-iwslt13-en-fr.sh": ("en", "fr", "https://wit3.fbk.eu/archive/2013-01/texts/en/fr/en-fr.tgz"),
    "prepare-wmt14-en-de.sh": ("en", "de", "http://statmt.org/wmt13/training-parallel-europarl-v7.tgz"),
    "prepare-gigaword.sh": ("article", "title", "https://drive.usercontent.google.com/download?id="),
}
SCRIPTS = ["train.sh", "generate.sh", "average_checkpoints.sh", "quickstart.sh",
           "attention_mass.py", "draw_tree_attention.py", "compare_bleu.sh",
           "benchmark_speed.py", "benchmark_all.py", "for2lam.py"]


def run(command, cwd=None, env=None):
    environment = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, env=environment)


# Argument handling


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_data_prep_help_names_the_local_option(recipe):
    result = run(["bash", ROOT / "data-prep" / recipe, "--help"])
    assert result.returncode == 0, result.stderr
    src, tgt, _ = RECIPES[recipe]
    assert "--local DIR" in result.stdout and f"{{train,valid,test}}.{{{src},{tgt}}}" in result.stdout
    assert "--parser" in result.stdout and "Resumable" in result.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_help(script):
    path = ROOT / "scripts" / script
    result = run(["bash", path, "--help"] if script.endswith(".sh") else [sys.executable, path, "--help"])
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) >= 3


@pytest.mark.parametrize("command", ["tree-fairseq-score", "tree-fairseq-config-args",
                                     "tree-fairseq-average-checkpoints"])
def test_console_scripts_help(command):
    result = run([BIN / command, "--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {command} ")


@pytest.mark.parametrize("recipe, merges", [
    ("prepare-iwslt14.sh", 32000),  # Nguyen et al. (2020), appendix 7.4: BPE of 32,000 iterations
    ("prepare-iwslt13-en-fr.sh", 32000),
    ("prepare-wmt14-en-de.sh", 32000),
])
def test_data_prep_default_bpe_size_is_the_papers(recipe, merges):
    result = run(["bash", ROOT / "data-prep" / recipe, "--help"])
    assert result.returncode == 0, result.stderr
    assert re.search(r"--bpe-tokens N .*\(default: (\d+)\)", result.stdout).group(1) == str(merges)
    assert re.search(r"^BPE_TOKENS=(\d+)$", (ROOT / "data-prep" / recipe).read_text(), re.M).group(1) == str(merges)


def test_data_prep_argument_errors(tmp_path):
    recipe = ROOT / "data-prep" / "prepare-iwslt14.sh"
    result = run(["bash", recipe, "--local", tmp_path / "absent", "--work", tmp_path / "work"])
    assert result.returncode != 0 and "--local" in result.stderr and "no such directory" in result.stderr
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "train.de").write_text("a\n")
    result = run(["bash", recipe, "--local", tmp_path / "text", "--work", tmp_path / "work"])
    assert result.returncode != 0 and f"lacks {tmp_path / 'text' / 'train.en'}" in result.stderr
    result = run(["bash", recipe, "--parser", "cky"])
    assert result.returncode != 0 and "unknown parser 'cky'" in result.stderr
    result = run(["bash", recipe, "--parser", "bracketed"])
    assert result.returncode != 0 and "--trees-dir" in result.stderr
    result = run(["bash", recipe, "--bogus"])
    assert result.returncode != 0 and "unknown option --bogus" in result.stderr
    # an option given twice was the last one kept: --parser spacy --parser balanced made balanced trees
    result = run(["bash", recipe, "--parser", "spacy", "--work", tmp_path / "work", "--parser", "balanced"])
    assert result.returncode != 0 and "--parser given twice (--parser spacy, then --parser balanced): give it once" \
        in result.stderr
    result = run(["bash", recipe, "--directions", "", "--directions", "en-de"])  # an empty value counts as given
    assert result.returncode != 0 and "--directions given twice (--directions , then --directions en-de)" in result.stderr
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("split", ["train", "valid"])
def test_data_prep_refuses_an_empty_local_split_naming_its_files(tmp_path, split):
    """An empty train split stopped in subword-nmt's traceback ('max() arg is an empty sequence'),
    an empty valid one made a data-bin that fairseq-train could not read ('cannot mmap an empty file')."""
    write_tokenised_corpus(tmp_path / "text")
    for lang in ("de", "en"):
        (tmp_path / "text" / f"{split}.{lang}").write_text("")
    result = run(["bash", ROOT / "data-prep" / "prepare-iwslt14.sh", "--local", tmp_path / "text", "--work",
                  tmp_path / "work", "--parser", "balanced", "--bpe-tokens", "30", "--directions", "de-en",
                  "--workers", "1"])
    assert result.returncode != 0
    text = tmp_path / "text"
    assert result.stderr == (f"prepare-iwslt14.sh: error: --local {text}: {text / split}.de {text / split}.en "
                             "empty (every split needs its sentences)\n")
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("inside", ["bpe", "tok", "data-bin/de-en", "orig", "raw", "trees", ".steps"])
def test_data_prep_refuses_a_local_dir_inside_a_folder_it_writes(tmp_path, inside):
    """tok/ links to --local's files and the steps write WORK's folders: --local WORK/bpe had its
    train.de replaced by the BPE pieces, --local WORK/tok failed in ln, one in data-bin/ was removed.
    Refused by the resolved path, through a link and a relative path as well."""
    recipe = ROOT / "data-prep" / "prepare-iwslt14.sh"
    work = tmp_path / "work"
    (work / inside).parent.mkdir(parents=True)
    write_tokenised_corpus(work / inside)
    before = {path.name: path.read_text() for path in (work / inside).iterdir()}
    (tmp_path / "link").symlink_to(work / inside)
    for local in (work / inside, tmp_path / "link", Path("work") / inside):
        result = run(["bash", recipe, "--local", local, "--work", work, "--parser", "balanced", "--bpe-tokens", "30",
                      "--directions", "de-en", "--workers", "1"], cwd=tmp_path)
        assert result.returncode != 0
        assert result.stderr == (f"prepare-iwslt14.sh: error: --local {local} lies inside {work / inside.split('/')[0]}"
                                 ", which the recipe writes: put it outside --work's orig/, tok/, raw/, trees/, "
                                 "bpe/, data-bin/ and .steps/\n")
    assert {path.name: path.read_text() for path in (work / inside).iterdir()} == before
    assert sorted(path.name for path in work.iterdir()) == [inside.split("/")[0]]  # nothing written


def test_script_argument_errors(tmp_path):
    result = run(["bash", ROOT / "scripts" / "train.sh", "no_such_config", tmp_path, tmp_path / "ckpt"])
    assert result.returncode != 0 and "no config" in result.stderr
    result = run(["bash", ROOT / "scripts" / "generate.sh", tmp_path / "absent", "x.pt", tmp_path / "out"])
    assert result.returncode != 0 and "no data-bin" in result.stderr
    compare = ROOT / "scripts" / "compare_bleu.sh"
    result = run(["bash", compare, tmp_path / "absent", tmp_path / "out", "10", "transformer"])
    assert result.returncode != 0 and "no data-bin" in result.stderr
    result = run(["bash", compare, tmp_path, tmp_path / "out", "ten", "transformer"])
    assert result.returncode != 0 and "UPDATES must be a number" in result.stderr
    result = run(["bash", compare, tmp_path, tmp_path / "out", "10", "no_such_arch"], env={"PYTHON": sys.executable})
    assert result.returncode != 0 and "unknown architecture no_such_arch" in result.stderr
    assert not (tmp_path / "out").exists()
    result = run(["bash", ROOT / "scripts" / "quickstart.sh", tmp_path / "absent"])
    assert result.returncode != 0 and "no such directory" in result.stderr
    # an option or DIR given twice was the last one kept (--work A --work B worked in B)
    for argv, said in ((["--work", tmp_path / "a", "--minutes", "1", "--work", tmp_path / "b"], "--work is given twice"),
                       ([tmp_path, tmp_path / "other"], f"DIR is given twice ({tmp_path}, then {tmp_path / 'other'})")):
        result = run(["bash", ROOT / "scripts" / "quickstart.sh", *argv])
        assert result.returncode == 2 and result.stderr.startswith(f"quickstart.sh: error: {said}"), result.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    result = run([BIN / "tree-fairseq-average-checkpoints", "--inputs", tmp_path,
                  "--num-epoch-checkpoints", "2", "--output", tmp_path / "avg.pt"])
    assert result.returncode != 0 and "0 epoch checkpoints found, 2 asked for" in result.stderr


FAKE_PROGRAM = """\
#!{python}
# Stands in for {name}: appends its arguments to $FAKE_CALLS (one JSON list a line), then sleeps
# $FAKE_SLEEP seconds (a run in progress).
import json, os, sys, time
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
"""


def fake_fairseq(tmp_path: Path) -> tuple[dict, Path]:
    """An environment whose fairseq-train, fairseq-hydra-train and fairseq-generate record their
    arguments in the returned file (and do nothing else), and a data-bin folder of a language pair."""
    bin_dir, data = tmp_path / "fake-bin", tmp_path / "data"
    bin_dir.mkdir()
    data.mkdir()
    for name in ("fairseq-train", "fairseq-hydra-train", "fairseq-generate"):
        (bin_dir / name).write_text(FAKE_PROGRAM.format(python=sys.executable, name=name))
        (bin_dir / name).chmod(stat.S_IRWXU)
    for lang in ("de", "en"):
        (data / f"dict.{lang}.txt").write_text("a 1\n")
    calls = tmp_path / "calls"
    env = {"PYTHON": sys.executable, "PATH": f"{bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
           "FAKE_CALLS": str(calls)}
    return env, calls


def fake_calls(calls: Path) -> list[list[str]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


@pytest.mark.parametrize("hydra", [(), ("--hydra",)])
def test_train_sh_refuses_options_that_would_replace_its_own(tmp_path, hydra):
    # a later checkpoint.save_dir (or --save-dir) won in fairseq: the checkpoints went elsewhere, and
    # every check of SAVE-DIR before a resume was skipped (a run on another data-bin continued the other)
    env, calls = fake_fairseq(tmp_path)
    save_dir, other = tmp_path / "ck", tmp_path / "ck-other"
    cases = [(f"checkpoint.save_dir={other}", "the save dir is SAVE-DIR, the third argument"),
             (f"++checkpoint.save_dir={other}", "the save dir is SAVE-DIR, the third argument"),
             (f"task.data={tmp_path}", "the data-bin is DATA-BIN, the second argument"),
             (f"common.user_dir={tmp_path}", f"train.sh loads the plugin of {ROOT / 'tree_fairseq'}")]
    if not hydra:
        cases += [("--save-dir", "the save dir is SAVE-DIR, the third argument"),
                  (f"--save-dir={other}", "the save dir is SAVE-DIR, the third argument"),
                  ("--user-dir", f"train.sh loads the plugin of {ROOT / 'tree_fairseq'}")]
    for arg, why in cases:
        extra = [arg, str(other)] if arg in ("--save-dir", "--user-dir") else [arg]
        result = run(["bash", ROOT / "scripts" / "train.sh", *hydra, "quickstart_tree_transformer", tmp_path / "data",
                      save_dir, "optimization.max_epoch=1", *extra], env=env)
        assert result.returncode == 2, (arg, result.stderr[-2000:])
        assert result.stderr.strip() == f"train.sh: error: {arg}: {why}, not an override"
    assert fake_calls(calls) == [] and not save_dir.exists() and not other.exists()


def test_train_sh_refuses_a_flag_or_an_override_given_twice(tmp_path):
    """fairseq-train and hydra keep the last of a repeated flag or override silently: --seed 1 ... --seed 2
    trained seed 2. A flag after the config's own still replaces its value (that is how flags override it)."""
    env, calls = fake_fairseq(tmp_path)
    save_dir = tmp_path / "ck"
    train = ["bash", ROOT / "scripts" / "train.sh"]
    twice = "common.seed is given twice ('common.seed=1', then"
    for hydra, extra, said in (((), ["--seed", "1", "--max-epoch", "2", "--seed=2"], "train.sh: error: --seed is given "
                                 "twice: give it once"),
                               ((), ["common.seed=1", "common.seed=2"], twice),
                               (("--hydra",), ["common.seed=1", "++common.seed=2"], twice)):
        result = run([*train, *hydra, "quickstart_tree_transformer", tmp_path / "data", save_dir, *extra], env=env)
        assert result.returncode != 0 and said in result.stderr, (extra, result.stderr[-2000:])
    assert fake_calls(calls) == []


def test_train_sh_takes_keys_with_digits_as_overrides(tmp_path):
    # common.fp16=true did not match the override pattern (no digits): fairseq-train was given it as a
    # positional word, and --hydra refused it ("give GROUP.KEY=VALUE, not common.fp16=true")
    env, calls = fake_fairseq(tmp_path)
    train = ["bash", ROOT / "scripts" / "train.sh"]
    result = run([*train, "quickstart_tree_transformer", tmp_path / "data", tmp_path / "ck", "common.bf16=true",
                  "common.fp16=false", "--cpu"], env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    result = run([*train, "--hydra", "quickstart_tree_transformer", tmp_path / "data", tmp_path / "ck2",
                  "common.fp16=true"], env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    (plain, hydra) = fake_calls(calls)
    assert plain[0] == "fairseq-train" and "--bf16" in plain and "--fp16" not in plain and "--cpu" in plain
    assert not [word for word in plain if word.startswith("common.")]
    assert hydra[0] == "fairseq-hydra-train" and hydra[-1] == "common.fp16=true"


def test_train_sh_refuses_a_second_run_on_its_save_dir_until_the_first_ends(tmp_path):
    # two runs at once on one SAVE-DIR: one died in a FileNotFoundError traceback, train.log mixed both
    import signal
    import time

    env, calls = fake_fairseq(tmp_path)
    save_dir = tmp_path / "ck"
    command = [str(c) for c in ["bash", ROOT / "scripts" / "train.sh", "quickstart_tree_transformer", tmp_path / "data",
                                save_dir, "--cpu"]]
    first = subprocess.Popen(command, env={**os.environ, **env, "FAKE_SLEEP": "120"}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not fake_calls(calls):  # the first run trains (and holds the lock)
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = run(command, env=env)
        assert second.returncode == 2
        assert second.stderr.strip() == (
            f"train.sh: error: SAVE-DIR {save_dir} is being trained by another run (it holds "
            f"{save_dir / 'train.lock'}): wait for it to end, or give another SAVE-DIR")
        assert len(fake_calls(calls)) == 1 and (save_dir / "train.log").read_text().count("$ fairseq-train") == 1
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # killed: the lock goes with it
        first.wait()
    third = run(command, env=env)
    assert third.returncode == 0, third.stderr[-2000:]
    assert len(fake_calls(calls)) == 2


def test_scripts_refuse_a_folder_that_is_no_data_bin_of_a_language_pair(tmp_path):
    # the recipe's data-bin/ instead of data-bin/de-en: train.sh died in fairseq's "Could not infer
    # language pair" traceback, generate.sh blamed a good checkpoint ("cannot read the task from ...")
    env, calls = fake_fairseq(tmp_path)
    parent = tmp_path / "data-bin"
    parent.mkdir()
    shutil.move(tmp_path / "data", parent / "de-en")
    (parent / "dict.de.nodes.txt").write_text("NP 1\n")  # a tree stream's dictionary is not a pair's
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    message = (f"error: {parent} is no data-bin of a language pair (it holds no dict.SRC.txt and dict.TGT.txt); "
               f"give the one inside it, {parent / 'de-en'}")
    train = ["bash", ROOT / "scripts" / "train.sh", "quickstart_tree_transformer"]
    result = run([*train, parent, tmp_path / "ck"], env=env)
    assert result.returncode == 2 and result.stderr.strip() == f"train.sh: {message}"
    result = run(["bash", ROOT / "scripts" / "generate.sh", parent, tmp_path / "checkpoint_last.pt", tmp_path / "out"],
                 env=env)
    assert result.returncode == 2 and result.stderr.strip() == f"generate.sh: {message}"
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run([*train, empty, tmp_path / "ck"], env=env)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"train.sh: error: {empty} is no data-bin of a language pair (it holds no dict.SRC.txt and dict.TGT.txt)")
    assert fake_calls(calls) == [] and not (tmp_path / "ck").exists() and not (tmp_path / "out").exists()


def test_train_sh_records_the_dictionaries_and_generate_sh_refuses_others(tmp_path):
    # generate.sh translated with a checkpoint on a data-bin whose dictionaries had changed since its run
    env, calls = fake_fairseq(tmp_path)
    save_dir, data = tmp_path / "ck", tmp_path / "data"
    result = run(["bash", ROOT / "scripts" / "train.sh", "quickstart_tree_transformer", data, save_dir], env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads((save_dir / "dictionaries.json").read_text())
    assert sorted(record["sha256"]) == ["dict.de.txt", "dict.en.txt"] and record["data"] == str(data)
    (save_dir / "checkpoint_best.pt").write_bytes(b"")
    (data / "dict.de.txt").write_text("b 1\n")
    result = run(["bash", ROOT / "scripts" / "generate.sh", data, save_dir / "checkpoint_best.pt", tmp_path / "out"],
                 env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"generate.sh: error: {data / 'dict.de.txt'} is not the dictionary {save_dir / 'checkpoint_best.pt'} was "
        f"trained with ({save_dir / 'dictionaries.json'} records another): translate a data-bin made with the "
        "dictionaries of its run")
    # a checkpoint without the record beside it: not this check's to say
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "checkpoint_best.pt").write_bytes(b"")
    result = run(["bash", ROOT / "scripts" / "generate.sh", data, tmp_path / "elsewhere" / "checkpoint_best.pt",
                  tmp_path / "out"], env=env)
    assert "is not the dictionary" not in result.stderr and "checkpoint_best.pt is truncated" in result.stderr


def test_generate_sh_refuses_a_split_or_output_folder_given_to_fairseq_generate(tmp_path):
    # --gen-subset valid (or --results-path DIR) after OUT-DIR won in fairseq-generate, and the script
    # then scored the stale OUT-DIR/generate-test.txt and exited 0
    env, calls = fake_fairseq(tmp_path)
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    for flags, why in [(["--gen-subset", "valid"], "give the split as --subset SPLIT before DATA-BIN"),
                       (["--beam", "4", "--gen-subset=valid"], "give the split as --subset SPLIT before DATA-BIN"),
                       (["--results-path", tmp_path / "else"], "the output folder is OUT-DIR, the third argument")]:
        result = run(["bash", ROOT / "scripts" / "generate.sh", tmp_path / "data", tmp_path / "checkpoint_last.pt",
                      tmp_path / "out", *flags], env=env)
        assert result.returncode == 2, result.stderr[-2000:]
        arg = next(str(flag) for flag in flags if str(flag).startswith("--") and str(flag) != "--beam")
        assert result.stderr.strip() == f"generate.sh: error: {arg}: {why}, not as a fairseq-generate flag"
    # a flag given twice: fairseq-generate kept the last (--beam 4 ... --beam=6 searched with 6)
    result = run(["bash", ROOT / "scripts" / "generate.sh", tmp_path / "data", tmp_path / "checkpoint_last.pt",
                  tmp_path / "out", "--beam", "4", "--lenpen", "1", "--beam=6"], env=env)
    assert result.returncode == 2 and result.stderr.strip() == "generate.sh: error: --beam is given twice: give it once"
    assert fake_calls(calls) == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_offline_download_fails_with_the_url(tmp_path, recipe):
    offline = tmp_path / "offline-bin"
    offline.mkdir()
    for tool in ("curl", "wget"):  # what a machine without network gives back
        (offline / tool).write_text("#!/bin/sh\necho 'Could not resolve host' >&2\nexit 6\n")
        (offline / tool).chmod(stat.S_IRWXU)
    result = run(["bash", ROOT / "data-prep" / recipe, "--work", tmp_path / "work"],
                 env={"PATH": f"{offline}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode != 0
    _, _, url = RECIPES[recipe]
    assert "cannot download" in result.stderr and url in result.stderr and "--local DIR" in result.stderr
    assert not list((tmp_path / "work" / "orig").iterdir())  # no partial download left behind


# Scoring

HYPS = [
    "the cat sat on the mat .",
    "a well-known problem is hard to solve .",
    "we do n't know what happened , but it &apos;s fine .",
    "the state-of-the-art system translates the sentence .",
    "there are 2,000 americans in the survey .",
    "he said &quot; yes &quot; to the question .",
    "nothing matches here",
    "the long-term effects are not known yet .",
]
REFS = [
    "the cat sat on a mat .",
    "a well-known problem is difficult to solve .",
    "we don &apos;t know what happened , but it is fine .",
    "the state-of-the-art system translated the sentence .",
    "there were 2,000 americans in the survey .",
    "he said &quot; yes &quot; to this question .",
    "completely different words entirely",
    "the long-term effects are still not known .",
]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("scored")
    (tmp_path / "hyp").write_text("".join(line + "\n" for line in HYPS), encoding="utf-8")
    (tmp_path / "ref").write_text("".join(line + "\n" for line in REFS), encoding="utf-8")
    result = run([BIN / "tree-fairseq-score", "--hyp", tmp_path / "hyp", "--ref", tmp_path / "ref",
                  "--metrics", "sacrebleu", "tokbleu", "compound", "rouge", "--write-text", tmp_path / "text",
                  "--json", tmp_path / "scores.json"])
    assert result.returncode == 0, result.stderr
    return tmp_path, json.loads((tmp_path / "scores.json").read_text()), result.stdout


def sacrebleu_cli(ref, hyp, *flags):
    result = run([BIN / "sacrebleu", ref, "-i", hyp, "-b", "-w", "4", *flags])
    assert result.returncode == 0, result.stderr
    return float(result.stdout)


def test_sacrebleu_matches_its_command_line_on_detokenised_text(scored):
    tmp_path, scores, stdout = scored
    assert "&apos;" not in (tmp_path / "text.hyp.detok").read_text()
    expected = sacrebleu_cli(tmp_path / "text.ref.detok", tmp_path / "text.hyp.detok")
    assert round(scores["sacrebleu"]["score"], 4) == expected
    assert scores["sacrebleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert f"sacreBLEU (detokenised) = {expected:.2f}  nrefs:1|" in stdout


def test_tokenised_bleu_is_sacrebleu_without_tokenisation(scored):
    tmp_path, scores, stdout = scored
    assert stdout.splitlines()[-1] == f"sentences scored: {len(HYPS)} of {len(REFS)} (the lines of {tmp_path / 'ref'})"
    assert round(scores["tokbleu"]["score"], 4) == sacrebleu_cli(tmp_path / "ref", tmp_path / "hyp", "-tok", "none")
    assert "tok:none" in scores["tokbleu"]["signature"]


def test_compound_split_bleu(scored, tmp_path_factory):
    tmp_path, scores, _ = scored
    split = tmp_path_factory.mktemp("split")
    for name in ("hyp", "ref"):
        text = (tmp_path / name).read_text()
        if shutil.which("perl"):  # fairseq's compound_split_bleu.sh does it with this perl line
            perl = subprocess.run(["perl", "-ple", r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"], input=text,
                                  capture_output=True, text=True, check=True).stdout
            assert "".join(score.split_compounds(line) + "\n" for line in text.splitlines()) == perl
        (split / name).write_text("".join(score.split_compounds(line) + "\n" for line in text.splitlines()))
    assert score.split_compounds("state-of-the-art a - b") == \
        "state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art a - b"
    assert round(scores["compound"]["score"], 4) == sacrebleu_cli(split / "ref", split / "hyp", "-tok", "none")
    assert scores["compound"]["score"] != scores["tokbleu"]["score"]


def test_rouge_matches_its_command_line(scored):
    tmp_path, scores, _ = scored
    out = tmp_path / "rouge.csv"
    result = run([sys.executable, "-m", "rouge_score.rouge", f"--target_filepattern={tmp_path / 'ref'}",
                  f"--prediction_filepattern={tmp_path / 'hyp'}", f"--output_filename={out}",
                  "--use_stemmer=true", "--aggregate=false"])
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == len(HYPS)
    for name in ("rouge1", "rouge2", "rougeL"):
        expected = 100 * sum(float(row[f"{name}-F"]) for row in rows) / len(rows)
        assert scores["rouge"][name]["f1"] == pytest.approx(expected, abs=1e-3)
        low, high = scores["rouge"][name]["f1_interval"]
        assert low <= scores["rouge"][name]["f1"] <= high


def test_score_reads_generate_output(tmp_path):
    lines = []
    for i, (hyp, ref) in enumerate(zip(HYPS, REFS)):
        lines += [f"S-{i}\tsource", f"T-{i}\t{ref}", f"H-{i}\t-0.5\t{hyp}", f"D-{i}\t-0.5\t{hyp}", f"P-{i}\t-0.5"]
    lines.insert(0, "2026-01-01 | INFO | fairseq_cli.generate | loading")
    (tmp_path / "generate-test.txt").write_text("\n".join(reversed(lines)) + "\nGenerate test with beam=5: BLEU4 = 1\n")
    hyps, refs = score.read_generate_output(str(tmp_path / "generate-test.txt"))
    assert hyps == HYPS and refs == REFS
    # the report and the JSON say how many sentences were scored, of how many
    result = run([BIN / "tree-fairseq-score", "--generate-output", tmp_path / "generate-test.txt",
                  "--metrics", "tokbleu", "--json", tmp_path / "score.json"])
    assert result.returncode == 0, result.stderr
    n = len(HYPS)
    assert result.stdout.splitlines()[-1] == \
        f"sentences scored: {n} of {n} (ids 0 to {n - 1} of {tmp_path / 'generate-test.txt'})"
    assert json.loads((tmp_path / "score.json").read_text())["sentences"]["scored"] == n
    with pytest.raises(ValueError, match="--remove-bpe"):
        score.score(["a@@ b"], ["ab"], ["tokbleu"], "en")


# Configs


def config_names():
    return sorted(path.stem for path in (ROOT / "configs").glob("*.yaml"))


@pytest.mark.parametrize("name", config_names())
def test_config_as_fairseq_train_flags(tmp_path, tiny_databin, name):
    path = ROOT / "configs" / f"{name}.yaml"
    config = yaml.safe_load(path.read_text())
    assert config["hydra"]["run"]["dir"] == "." and config["common"]["user_dir"] == "tree_fairseq"
    assert config["task"]["data"] == "???"
    flags = config_args.config_to_args(config_args.load_config(
        str(path), [f"task.data={tiny_databin}", f"common.user_dir={USER_DIR}"]))
    args = options.parse_args_and_arch(options.get_training_parser(), flags)
    assert args.data == str(tiny_databin) and args.task == config["task"]["_name"]
    assert args.arch == config["model"]["_name"] and args.dropout == config["model"]["dropout"]
    assert args.lr == config["optimization"]["lr"] and args.max_tokens == config["dataset"].get("max_tokens")
    assert args.batch_size == config["dataset"].get("batch_size")
    assert args.warmup_updates == config["lr_scheduler"]["warmup_updates"]
    assert args.criterion == "label_smoothed_cross_entropy" and args.label_smoothing == 0.1
    if name in TWINS.values():
        assert args.task == "translation"
    else:
        assert args.task in ("translation", "tree_translation", "dependency_translation") and name in TWINS


@pytest.mark.parametrize("name", config_names())
def test_every_config_key_is_one_fairseq_knows(name):
    config_args.check_config(config_args.load_config(str(ROOT / "configs" / f"{name}.yaml")), name)


@pytest.mark.parametrize("hydra", [[], ["--hydra"]])
@pytest.mark.parametrize("edit, message", [
    (("model", "encoder_layers", "encoder_layer"),
     "model 'tree_transformer' has no key 'encoder_layer' (did you mean 'encoder_layers'?)"),
    (("model", "dropout", "dropou"), "has no key 'dropou' (did you mean 'dropout'?)"),  # argparse took it for --dropout
    (("optimization", None, "optimisation"), "unknown group 'optimisation'"),
])
def test_train_sh_refuses_a_misspelt_config_key_in_both_modes(tmp_path, tiny_databin, hydra, edit, message):
    config = yaml.safe_load((ROOT / "configs" / "iwslt_lowres_tree_transformer.yaml").read_text())
    group, key, misspelt = edit
    if key is None:
        config[misspelt] = config.pop(group)
    else:
        config[group][misspelt] = config[group].pop(key)
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(["bash", str(ROOT / "scripts" / "train.sh"), *hydra, str(tmp_path / "typo.yaml"),
                             str(tiny_databin), str(tmp_path / "ck")], capture_output=True, text=True,
                            env={**os.environ, "PYTHON": sys.executable, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert not list((tmp_path / "ck").glob("*.pt"))


# Each tree config and its baseline: fairseq's transformer with the same data, sizes and training.
TWINS = {
    "iwslt_tree_transformer": "iwslt_transformer",
    "wmt14_en_de_tree_transformer_base": "wmt14_en_de_transformer_base",
    "wmt14_en_de_tree_transformer_big": "wmt14_en_de_transformer_big",
    "gigaword_tree_transformer": "gigaword_transformer",
    "quickstart_tree_transformer": "quickstart_transformer",
    "iwslt_lowres_tree_transformer": "iwslt_lowres_transformer",
    "iwslt_lowres_pascal_transformer": "iwslt_lowres_transformer",
    "iwslt_lowres_constituent_transformer": "iwslt_lowres_transformer",
    "iwslt_lowres_treeformer": "iwslt_lowres_transformer",
    "iwslt_lowres_tree_pe_transformer": "iwslt_lowres_transformer",
    "iwslt_lowres_tree_composition_transformer": "iwslt_lowres_transformer",
    "iwslt_constituent_transformer": "iwslt_constituent_transformer_baseline",
    "iwslt_treeformer": "iwslt_treeformer_baseline",
    "iwslt_tree_pe_transformer": "iwslt_tree_pe_transformer_baseline",
    "iwslt_tree_composition_transformer": "iwslt_tree_composition_transformer_baseline",
}


# Where a twin must differ from its baseline, and why: the composition encoder's leaves are the word
# embeddings (the paper's model), which takes no transformer encoder layers.
SETTLED_DIFFERENCES = {"iwslt_lowres_tree_composition_transformer": {("model", "encoder_layers"): 0}}


# Baselines of several systems: the natural-text study's transformer (docs/iwslt_lowres.md).
SHARED_BASELINES = {"iwslt_lowres_transformer"}


def test_every_config_is_one_of_a_pair():
    paired = [baseline for baseline in TWINS.values() if baseline not in SHARED_BASELINES]
    assert len(set(paired)) == len(paired) and not set(TWINS) & set(TWINS.values())
    assert set(config_names()) == set(TWINS) | set(TWINS.values())


def model_options(arch):
    """The option names (dests) of the model class of ``arch``."""
    import argparse

    from fairseq.models import ARCH_MODEL_REGISTRY

    parser = argparse.ArgumentParser()
    ARCH_MODEL_REGISTRY[arch].add_args(parser)
    return {action.dest for action in parser._actions}


@pytest.mark.parametrize("name", sorted(TWINS))
def test_twins_differ_only_in_task_and_arch(name):
    import tree_fairseq.models  # noqa: F401  (registers the plugin's architectures)
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.models.transformer import TransformerModel

    tree = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
    baseline = yaml.safe_load((ROOT / "configs" / f"{TWINS[name]}.yaml").read_text())
    tree_arch, baseline_arch = tree["model"].pop("_name"), baseline["model"].pop("_name")
    assert ARCH_MODEL_REGISTRY[baseline_arch] is TransformerModel  # fairseq's own transformer
    assert ARCH_MODEL_REGISTRY[tree_arch].__module__.startswith("tree_fairseq.")
    assert baseline["task"].pop("_name") == "translation"
    assert tree["task"].pop("_name") in ("translation", "tree_translation", "dependency_translation")
    # Counting a sentence's text tokens toward max_tokens gives the baseline's batches: the same training.
    assert tree["task"].pop("batch_tokens", "text") == "text"
    for (group, key), value in SETTLED_DIFFERENCES.get(name, {}).items():
        assert tree[group][key] == value
        tree[group][key] = baseline[group][key]
    # The tree model's own options, which fairseq's transformer does not have, are the only extra keys.
    own = set(tree["model"]) - set(baseline["model"])
    assert not own & model_options(baseline_arch) and own <= model_options(tree_arch), own
    for key in own:
        del tree["model"][key]
    assert tree == baseline


# Nguyen et al. (ICLR 2020), section 5.1 and appendix 7.4: (d, d_ffn, heads, dropout, attention
# dropout, lr, warmup, weight decay, updates, tokens per update). The tree config and its baseline
# twin share them. Tokens per update: IWSLT "approximately 4000", WMT base "about 32K", WMT big
# "512K"; the big model's dropouts, lr and weight decay are those of Ott et al. (2018), which the
# paper replicates without giving them.
PAPER_SETTINGS = {
    "iwslt": (512, 1024, 4, 0.3, 0.0, 5e-4, 4000, 1e-4, 60_000, 4_000),
    "wmt14_en_de_{}_base": (512, 2048, 8, 0.1, 0.0, 7e-4, 4000, 1e-4, 200_000, 32_000),
    "wmt14_en_de_{}_big": (1024, 4096, 16, 0.3, 0.0, 5e-4, 4000, 0.0, 20_000, 512_000),
}


@pytest.mark.parametrize("model", ["tree_transformer", "transformer"])
@pytest.mark.parametrize("setting", sorted(PAPER_SETTINGS))
def test_configs_have_the_paper_settings(setting, model):
    name = f"{setting}_{model}" if setting == "iwslt" else setting.format(model)
    flags = config_args.config_to_args(config_args.load_config(str(ROOT / "configs" / f"{name}.yaml")))
    args = options.parse_args_and_arch(options.get_training_parser(), ["data", *flags, "--user-dir", USER_DIR])
    d, ffn, heads, dropout, attention_dropout, lr, warmup, weight_decay, updates, tokens = PAPER_SETTINGS[setting]
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads) == (d, ffn, heads)
    assert (args.decoder_embed_dim, args.decoder_ffn_embed_dim, args.decoder_attention_heads) == (d, ffn, heads)
    assert (args.encoder_layers, args.decoder_layers) == (6, 6)
    assert (args.dropout, args.attention_dropout, args.activation_dropout) == (dropout, attention_dropout, 0.0)
    assert (args.lr, args.warmup_updates, args.weight_decay, args.max_update) == ([lr], warmup, weight_decay, updates)
    assert (args.optimizer, args.adam_betas, args.lr_scheduler, args.label_smoothing) == (
        "adam", "(0.9,0.98)", "inverse_sqrt", 0.1)
    per_update = args.max_tokens * args.update_freq[0]
    assert abs(per_update - tokens) <= 0.03 * tokens, per_update
    if model == "tree_transformer":
        assert args.hier_embed_size == 100  # |E| (appendix 7.4)
        assert not (args.no_hier_embed or args.no_subtree_mask or args.no_tree_cross_attention)


# The other methods' configs (configs/README.md has the table with the sources): for the tree config
# and its baseline, then for the tree config only, the option values fairseq-train runs with.
# Settings the papers do not state for translation are fairseq's IWSLT recipe, 60k updates.
IWSLT_RECIPE = dict(dropout=0.3, attention_dropout=0.0, activation_dropout=0.0, optimizer="adam",
                    adam_betas="(0.9,0.98)", lr=[5e-4], lr_scheduler="inverse_sqrt", warmup_updates=4000,
                    weight_decay=1e-4, label_smoothing=0.1, max_update=60_000, max_tokens=4096, batch_size=None,
                    update_freq=[1], clip_norm=0.0, share_decoder_input_output_embed=True, eval_bleu=True,
                    best_checkpoint_metric="bleu")


def sizes(d, ffn, heads, encoder_layers, decoder_layers):
    return dict(encoder_embed_dim=d, encoder_ffn_embed_dim=ffn, encoder_attention_heads=heads,
                encoder_layers=encoder_layers, decoder_embed_dim=d, decoder_ffn_embed_dim=ffn,
                decoder_attention_heads=heads, decoder_layers=decoder_layers)


METHOD_SETTINGS = {
    # Wang et al. (2019), section 7.1: 512, 8 heads, ffn 2048, dropout 0.1; L = 10 (Tables 1-2).
    "iwslt_constituent_transformer": (
        {**IWSLT_RECIPE, **sizes(512, 2048, 8, 10, 6), "dropout": 0.1},
        {"renormalize_constituent_attention": False},
    ),
    # Patel and Flanigan, Table 1: 6 + 6 layers, 512, ffn 1024; section 4: H = 10.
    "iwslt_treeformer": (
        {**IWSLT_RECIPE, **sizes(512, 1024, 4, 6, 6)},
        {"chart_max_height": 10},
    ),
    # Shiv and Quirk, section 5: batch 128, dropout 0.1, clipping at 10, k = 32; section 5.2: 4 layers,
    # d_model 256, ffn 1024, d_pos 2048 (32 weights p of 2k = 64 each).
    "iwslt_tree_pe_transformer": (
        {**IWSLT_RECIPE, **sizes(256, 1024, 4, 4, 4), "dropout": 0.1, "clip_norm": 10.0, "batch_size": 128,
         "max_tokens": None},
        {"tree_pe_max_depth": 32, "tree_pe_num_weights": 32},
    ),
    # Ahmed et al. (2019), section 3: d 300, 6 branches of 50, PCNN 341, dropout 0.1, leaves = embeddings
    # (no encoder layers), one composition; the baseline's encoder has fairseq's 6 layers.
    "iwslt_tree_composition_transformer": (
        {**IWSLT_RECIPE, **sizes(300, 341, 6, 6, 6), "dropout": 0.1},
        {"encoder_layers": 0, "composition_leaves": "embeddings", "composition_form": "paper",
         "composition_layers": 1, "composition_branches": None, "node_labels": False},
    ),
}


def parsed_config(name):
    flags = config_args.config_to_args(config_args.load_config(str(ROOT / "configs" / f"{name}.yaml")))
    return options.parse_args_and_arch(options.get_training_parser(), ["data", *flags, "--user-dir", USER_DIR])


@pytest.mark.parametrize("side", ["tree", "baseline"])
@pytest.mark.parametrize("name", sorted(METHOD_SETTINGS))
def test_method_configs_have_the_paper_settings(name, side):
    shared, tree_only = METHOD_SETTINGS[name]
    expected = {**shared, **tree_only} if side == "tree" else shared
    args = parsed_config(name if side == "tree" else TWINS[name])
    assert {key: getattr(args, key) for key in expected} == expected
    if name == "iwslt_tree_pe_transformer" and side == "tree":
        assert args.tree_pe_num_weights * 2 * args.tree_pe_max_depth == 2048  # d_pos


def test_config_overrides():
    config = config_args.load_config(str(ROOT / "configs" / "iwslt_tree_transformer.yaml"),
                                     ["task.eval_bleu=false", "model._name=tree_transformer_tiny", "optimization.lr=[0.1]"])
    flags = config_args.config_to_args(config)
    assert "--eval-bleu" not in flags and flags[flags.index("--arch") + 1] == "tree_transformer_tiny"
    assert flags[flags.index("--lr") + 1] == "0.1"
    with pytest.raises(ValueError, match="GROUP.KEY=VALUE"):
        config_args.load_config(str(ROOT / "configs" / "iwslt_tree_transformer.yaml"), ["lr=1"])


def _booleans_true_by_default():
    """``(group, _name, key)`` of every boolean of fairseq and the plugin that defaults to true and that a
    config here could set: the fields of fairseq's plain groups, of the translation task and the plugin's,
    of every criterion, optimizer and learning-rate scheduler, and of the models the configs and the plugin
    name (``_name`` None for a plain group)."""
    import argparse
    import dataclasses

    from fairseq import models, registry, tasks
    from fairseq.dataclass.configs import FairseqConfig

    def true_by_default(dataclass):
        if not dataclasses.is_dataclass(dataclass):  # a group or name fairseq gives no fields (model, task)
            return []
        return [field.name for field in dataclasses.fields(dataclass) if field.default is True]

    found = [(field.name, None, key) for field in dataclasses.fields(FairseqConfig) if field.name != "_name"
             for key in true_by_default(field.type)]
    found += [("task", name, key) for name, dataclass in tasks.TASK_DATACLASS_REGISTRY.items()
              if name == "translation" or tasks.TASK_REGISTRY[name].__module__.startswith("tree_fairseq")
              for key in true_by_default(dataclass)]
    found += [(group, name, key) for group in ("criterion", "optimizer", "lr_scheduler")
              for name, dataclass in registry.REGISTRIES[group]["dataclass_registry"].items()
              for key in true_by_default(dataclass)]
    names = {yaml.safe_load(path.read_text())["model"]["_name"] for path in (ROOT / "configs").glob("*.yaml")}
    names |= {name for name, cls in models.ARCH_MODEL_REGISTRY.items() if cls.__module__.startswith("tree_fairseq")}
    for name in sorted(names):
        model = models.ARCH_MODEL_NAME_REGISTRY.get(name, name)  # an architecture: its model
        if model in models.MODEL_DATACLASS_REGISTRY:
            found += [("model", name, key) for key in true_by_default(models.MODEL_DATACLASS_REGISTRY[model])]
        else:
            parser = argparse.ArgumentParser(add_help=False)
            models.MODEL_REGISTRY[model].add_args(parser)
            found += [("model", name, action.dest) for action in parser._actions
                      if isinstance(action, argparse._StoreFalseAction)]
    return sorted(set(found), key=str)


def test_every_boolean_true_by_default_reaches_fairseq_train_as_set(tiny_databin):
    """``false`` for a key whose default is true is fairseq-train's bare flag (its store_false), ``true``
    no flag: each comes out of fairseq's own parser as the config says."""
    booleans = _booleans_true_by_default()
    assert ("task", "tree_translation", "left_pad_source") in booleans and ("task", "translation", "left_pad_source") in booleans
    for group, name, key in booleans:
        for value in (False, True):
            config = {"task": {"_name": "tree_translation", "data": str(tiny_databin)},
                      "model": {"_name": "tree_transformer_tiny"}, "common": {"user_dir": USER_DIR}}
            config.setdefault(group, {}).update({"_name": name} if name else {})
            config[group][key] = value
            flags = config_args.config_to_args(config)
            assert (f"--{key.replace('_', '-')}" in flags) == (not value), (group, name, key, value, flags)
            args = options.parse_args_and_arch(options.get_training_parser(), flags)
            assert getattr(args, key) is value, (group, name, key, value, flags)
    # the other booleans keep their meaning: true is the flag, false is none
    flags = config_args.config_to_args({"task": {"_name": "tree_translation", "left_pad_target": True},
                                        "checkpoint": {"no_epoch_checkpoints": False}})
    assert "--left-pad-target" in flags and "--no-epoch-checkpoints" not in flags


def test_average_checkpoints_picks_the_last_n(tmp_path):
    for name in ("checkpoint1.pt", "checkpoint2.pt", "checkpoint10.pt", "checkpoint_best.pt", "checkpoint_last.pt",
                 "checkpoint_2_900.pt", "checkpoint_3_1000.pt", "checkpoint_3_1100.pt"):
        (tmp_path / name).touch()
    assert average_checkpoints.last_checkpoints(str(tmp_path), 2, by_update=False) == [
        str(tmp_path / "checkpoint10.pt"), str(tmp_path / "checkpoint2.pt")]
    assert average_checkpoints.last_checkpoints(str(tmp_path), 2, by_update=False, upper_bound=2) == [
        str(tmp_path / "checkpoint2.pt"), str(tmp_path / "checkpoint1.pt")]
    assert average_checkpoints.last_checkpoints(str(tmp_path), 2, by_update=True) == [
        str(tmp_path / "checkpoint_3_1100.pt"), str(tmp_path / "checkpoint_3_1000.pt")]


def test_average_checkpoints_of_different_models_names_the_parameter_and_files(tmp_path):
    import torch

    def save(name, **params):
        torch.save({"model": {key: torch.zeros(shape) for key, shape in params.items()}}, tmp_path / name)
        return str(tmp_path / name)

    small = save("small.pt", embed=(4, 2), out=(2,))
    large = save("large.pt", embed=(6, 2), out=(2,))
    other = save("other.pt", embed=(4, 2), head=(2,))
    for inputs, message in (([small, large], f"parameter embed is (6, 2) in {large} but (4, 2) in {small}"),
                            ([small, other], f"{other} has a parameter head that {small} has not")):
        with pytest.raises(SystemExit) as exit_info:
            average_checkpoints.main(["--inputs", *inputs, "--output", str(tmp_path / "avg.pt")])
        assert message in str(exit_info.value.code)
    assert not (tmp_path / "avg.pt").exists()


def test_average_checkpoints_refuses_the_same_checkpoint_twice(tmp_path):
    """checkpoint_best.pt and checkpoint_last.pt are copies of an epoch checkpoint: averaged with
    ck/checkpoint*.pt, that epoch would weigh two or three times. The same file (by another name too)
    or the same training state with the same parameters is refused, naming both; checkpoints of two
    runs at the same update are not the same checkpoint."""
    import torch

    def save(name, value, epoch, updates, batch=0):
        torch.save({"model": {"w": torch.full((2, 2), float(value))},
                    "extra_state": {"train_iterator": {"epoch": epoch, "iterations_in_epoch": batch}},
                    "optimizer_history": [{"num_updates": updates}]}, tmp_path / name)
        return str(tmp_path / name)

    first, second = save("checkpoint1.pt", 1, 2, 10), save("checkpoint2.pt", 2, 3, 20)
    best = shutil.copyfile(second, tmp_path / "checkpoint_best.pt")
    (tmp_path / "link.pt").symlink_to(first)

    def refused(*inputs):
        with pytest.raises(SystemExit) as exit_info:
            average_checkpoints.main(["--inputs", *map(str, inputs), "--output", str(tmp_path / "avg.pt")])
        return str(exit_info.value.code)

    assert refused(first, second, best) == (
        f"tree-fairseq-average-checkpoints: error: {best} is the same checkpoint as {second} (the same training state: "
        "epoch 2 done, 20 updates, and the same parameters; checkpoint_best.pt and checkpoint_last.pt are copies of an "
        "epoch checkpoint): it would weigh twice in the average. Give each checkpoint once (e.g. --inputs "
        "SAVE-DIR/checkpoint[0-9]*.pt)")
    assert refused(first, first) == (f"tree-fairseq-average-checkpoints: error: {first} is given twice: it would weigh "
                                     "twice in the average. Give each checkpoint once")
    assert refused(first, second, tmp_path / "link.pt").startswith(
        f"tree-fairseq-average-checkpoints: error: {tmp_path / 'link.pt'} is the file {first}, given twice")
    assert not (tmp_path / "avg.pt").exists()
    other_run = save("other.pt", 4, 3, 20)  # another run's checkpoint at the same update: averaged
    average_checkpoints.main(["--inputs", second, other_run, "--output", str(tmp_path / "avg.pt")])
    assert torch.load(tmp_path / "avg.pt")["model"]["w"].tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_average_checkpoints_refuses_counts_bounds_and_outputs_it_cannot_honour(tmp_path):
    """A count below 1 (the script's N = -2 averaged all but the last 2 of the directory; 0 read the
    directory as a checkpoint), an upper bound with files (ignored), an --output that is an input
    (overwritten) or a folder (IsADirectoryError after the work) are refused before anything is
    read; a valid call of scripts/average_checkpoints.sh averages exactly as before."""
    import torch

    save_dir = tmp_path / "ck"
    save_dir.mkdir()
    for epoch in range(1, 5):
        torch.save({"model": {"w": torch.full((2,), float(epoch ** 2)), "n": torch.tensor([epoch])}},
                   save_dir / f"checkpoint{epoch}.pt")
    script = ROOT / "scripts" / "average_checkpoints.sh"
    for n in ("-2", "0"):
        result = run(["bash", script, save_dir, n], env={"PYTHON": sys.executable})
        assert result.returncode == 2 and f"argument --num-epoch-checkpoints: '{n}': a whole number, 1 or more" in (
            result.stderr), result.stderr
    assert sorted(os.listdir(save_dir)) == [f"checkpoint{epoch}.pt" for epoch in range(1, 5)]

    def refused(*argv):
        with pytest.raises(SystemExit) as exit_info:
            average_checkpoints.main([str(arg) for arg in argv])
        return str(exit_info.value.code)

    first, second = save_dir / "checkpoint1.pt", save_dir / "checkpoint2.pt"
    before = second.read_bytes()
    assert "--checkpoint-upper-bound picks the checkpoints of a directory" in refused(
        "--inputs", first, second, "--checkpoint-upper-bound", "1", "--output", tmp_path / "avg.pt")
    assert refused("--inputs", first, second, "--output", second) == (
        f"tree-fairseq-average-checkpoints: error: --output {second} is an input (--inputs): writing it would replace "
        "it; name another file")
    assert refused("--inputs", first, second, "--output", save_dir) == (
        f"tree-fairseq-average-checkpoints: error: --output {save_dir} is a folder: name a file")
    assert refused("--inputs", save_dir, "--output", tmp_path / "avg.pt").startswith(
        f"tree-fairseq-average-checkpoints: error: --inputs {save_dir} is a directory")
    assert second.read_bytes() == before and not (tmp_path / "avg.pt").exists()

    result = run(["bash", script, save_dir, "3"], env={"PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr
    averaged = torch.load(save_dir / "checkpoint_avg_last3.pt")["model"]
    assert torch.equal(averaged["w"], torch.full((2,), 29 / 3)) and averaged["n"].tolist() == [3]
    average_checkpoints.main(["--inputs", str(save_dir), "--num-epoch-checkpoints", "2", "--checkpoint-upper-bound",
                              "3", "--output", str(tmp_path / "new" / "avg.pt")])
    assert torch.load(tmp_path / "new" / "avg.pt")["model"]["w"].tolist() == [6.5, 6.5]


# scripts/for2lam.py: the sequence baseline's data


@pytest.mark.parametrize("order", ["depth_first", "breadth_first"])
def test_for2lam_writes_the_linearised_source(tmp_path, order):
    from tree_fairseq.trees.for2lam_corpus import for2lam_pairs
    from tree_fairseq.trees.linearize import delinearize, linearize

    spec = importlib.util.spec_from_file_location("for2lam_script", ROOT / "scripts" / "for2lam.py")
    for2lam = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(for2lam)
    assert for2lam.parse_args([]).system == "tree2tree"
    a = for2lam.parse_args(["--system", "transformer", "--order", order, "--train", "6", "--test", "4"])
    for2lam.write_data(a, tmp_path)
    train = (tmp_path / "train.lfor").read_text().splitlines()
    assert train == [" ".join(linearize(source, order)) for source, _ in for2lam_pairs(1, 6)]
    for split in ("train", "valid", "test"):
        programs = (tmp_path / f"{split}.for").read_text().splitlines()
        sources = (tmp_path / f"{split}.lfor").read_text().splitlines()
        targets = (tmp_path / f"{split}.lam").read_text().splitlines()
        assert len(sources) == len(programs) == len(targets) > 0
        for program, source in zip(programs, sources):
            # the program's tokens in order, with the For tree's nodes as LABEL(k) among them
            assert len(source.split()) > len(program.split())
            assert list(delinearize(source.split(), order).leaves) == program.split()
    result = run([sys.executable, ROOT / "scripts" / "for2lam.py", "--system", "rnn"])
    assert result.returncode != 0 and "invalid choice: 'rnn'" in result.stderr


# data-prep helpers


def test_clean_corpus_as_moses(tmp_path):
    src = ["a b c", "", "a  b   c d", "x " * 10, "one", "w" * 1001, "ok ok"]
    tgt = ["a b c", "e", "a b c d", "y", "one two three", "w", "ok ok ok"]
    tree = [f"(X {i})" for i in range(len(src))]
    for name, lines in (("s", src), ("t", tgt), ("tree", tree)):
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))
    result = run([sys.executable, ROOT / "data-prep" / "text_tools.py", "clean", "--src-in", tmp_path / "s",
                  "--tgt-in", tmp_path / "t", "--src-out", tmp_path / "s.out", "--tgt-out", tmp_path / "t.out",
                  "--max", "9", "--ratio", "1.5", "--also", tmp_path / "tree", tmp_path / "tree.out"])
    assert result.returncode == 0, result.stderr
    # dropped: an empty side, 10 > 9 tokens, ratio 3 > 1.5, a 1001-character token
    assert (tmp_path / "s.out").read_text() == "a b c\na b c d\nok ok\n"
    assert (tmp_path / "t.out").read_text() == "a b c\na b c d\nok ok ok\n"
    assert (tmp_path / "tree.out").read_text() == "(X 0)\n(X 2)\n(X 6)\n"
    assert re.search(r"kept 3 of 7 pairs", result.stdout)


def test_benchmark_speed_refuses_counts_below_one_before_measuring(tmp_path):
    """--updates 0 ran every measurement and then ended in a ZeroDivisionError in the report; the
    numeric options are argtypes now, and --json is checked before the minutes of measuring."""
    from types import SimpleNamespace

    from tree_fairseq.analysis import benchmark_speed as analysis

    spec = importlib.util.spec_from_file_location("benchmark_speed_script", ROOT / "scripts" / "benchmark_speed.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for option, value in (("--updates", "0"), ("--flop-batches", "0"), ("--gen-rounds", "-1"), ("--lengths", "16,0"),
                          ("--dropout", "2"), ("--warmup", "-1")):
        with pytest.raises(SystemExit) as exit_info:
            script.parse_args([str(tmp_path), option, value])
        assert exit_info.value.code == 2, option
    with pytest.raises(SystemExit):
        script.parse_args([str(tmp_path), "--json", str(tmp_path)])
    assert script.parse_args([str(tmp_path), "--warmup", "0"]).updates == 30
    with pytest.raises(ValueError, match="--updates 0: a whole number, 1 or more"):
        analysis.measure(SimpleNamespace(updates=0, flop_batches=5, memory_batches=3, gen_rounds=2, cpu=True))


def test_compare_bleu_refuses_numbers_that_never_end(tmp_path):
    # --jobs 0 waited for a free slot forever; UPDATES 0 reached fairseq as --max-update 0, its "no limit"
    env, calls = fake_fairseq(tmp_path)
    compare = ROOT / "scripts" / "compare_bleu.sh"
    for argv, message in ((["--jobs", "0", tmp_path / "data", tmp_path / "out", "5", "transformer"], "--jobs must be 1"),
                          ([tmp_path / "data", tmp_path / "out", "0", "transformer"], "UPDATES must be 1 or more"),
                          ([tmp_path / "data", tmp_path / "out", "5", "transformer", "transformer"],
                           "transformer is named more than once"),
                          # a fairseq-train flag given twice after --: fairseq-train kept the last
                          ([tmp_path / "data", tmp_path / "out", "5", "transformer", "--", "--lr", "0.001",
                            "--dropout", "0.2", "--lr=0.01"], "compare_bleu.sh: error: --lr is given twice: give it "
                           "once")):
        result = subprocess.run(["bash", str(compare), *map(str, argv)], capture_output=True, text=True, timeout=60,
                                env={**os.environ, **env})
        assert result.returncode == 2 and message in result.stderr, argv
    assert not (tmp_path / "out").exists() and not fake_calls(calls)


@pytest.mark.slow
def test_compare_bleu_refuses_a_model_made_with_other_settings(tmp_path):
    # a model of OUT was reused for any UPDATES, data-bin or flags, its score printed beside the new UPDATES
    env, calls = fake_fairseq(tmp_path)
    compare, data, out = ROOT / "scripts" / "compare_bleu.sh", tmp_path / "data", tmp_path / "out"
    run(["bash", compare, data, out, "5", "transformer", "--", "--lr", "1e-4"], env=env)
    assert len([call for call in fake_calls(calls) if call[0] == "fairseq-train"]) == 1
    assert "updates: 5" in (out / "transformer" / "run.txt").read_text()
    (out / "transformer" / "checkpoint_last.pt").write_text("")  # a model (without one, the record is replaced)
    other_data = tmp_path / "other-data"
    shutil.copytree(data, other_data)
    for argv, now in (([data, out, "6", "transformer", "--", "--lr", "1e-4"], "now: updates: 6"),
                      ([data, out, "5", "transformer"], "now: flags:"),
                      ([other_data, out, "5", "transformer", "--", "--lr", "1e-4"], f"now: data-bin: {other_data}")):
        result = run(["bash", compare, *argv], env=env)
        assert result.returncode == 2 and "was made with other settings" in result.stderr and now in result.stderr
    assert len([call for call in fake_calls(calls) if call[0] == "fairseq-train"]) == 1
    # the same settings resume it
    run(["bash", compare, data, out, "5", "transformer", "--", "--lr", "1e-4"], env=env)
    assert len([call for call in fake_calls(calls) if call[0] == "fairseq-train"]) == 2
    # a model of an older OUT, without the record, is not taken as this command's
    (out / "transformer" / "run.txt").unlink()
    (out / "transformer" / "score-test.txt").write_text("BLEU = 30.0\n")
    result = run(["bash", compare, data, out, "5", "transformer", "--", "--lr", "1e-4"], env=env)
    assert result.returncode == 2 and "without run.txt" in result.stderr


def test_compare_bleu_refuses_a_second_run_on_one_out_dir(tmp_path):
    # two runs on one OUT-DIR trained in the same OUT-DIR/ARCH at once
    import fcntl

    env, calls = fake_fairseq(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held as by a run in progress
        result = run(["bash", ROOT / "scripts" / "compare_bleu.sh", tmp_path / "data", out, "5", "transformer"],
                     env=env)
    assert result.returncode == 2 and result.stderr.splitlines()[-1] == (  # after fairseq's import messages
        f"compare_bleu.sh: error: OUT-DIR {out} is being written by another run (it holds {out}/.lock): wait for it "
        "to end, or give another OUT-DIR")
    assert not fake_calls(calls) and sorted(os.listdir(out)) == [".lock"]
    (tmp_path / "file").write_text("")
    result = run(["bash", ROOT / "scripts" / "compare_bleu.sh", tmp_path / "data", tmp_path / "file", "5",
                  "transformer"], env=env)
    assert result.returncode == 2 and "OUT-DIR" in result.stderr and "is a file" in result.stderr


def test_compare_bleu_replaces_the_record_of_a_folder_without_a_model(tmp_path):
    # run.txt was written before training: a mistyped first run (no model) locked out the corrected command
    env, calls = fake_fairseq(tmp_path)
    compare, data, out = ROOT / "scripts" / "compare_bleu.sh", tmp_path / "data", tmp_path / "out"
    run(["bash", compare, data, out, "5", "transformer", "--", "--bogus"], env=env)
    assert "--bogus" in (out / "transformer" / "run.txt").read_text()
    result = run(["bash", compare, data, out, "5", "transformer"], env=env)
    assert result.returncode != 2 and "was made with other settings" not in result.stderr
    assert (f"compare_bleu.sh: {out / 'transformer'}/run.txt records other settings and {out / 'transformer'} holds "
            "no model: replacing it") in result.stderr.splitlines()
    assert (out / "transformer" / "run.txt").read_text().endswith("flags:\n")
    trains = [call for call in fake_calls(calls) if call[0] == "fairseq-train"]
    assert len(trains) == 2 and "--bogus" not in trains[1]


@pytest.mark.parametrize("argv, message", [
    (["2", "avg.pt", "--updates"], "--updates: the one option is --updates, as the first argument"),
    (["2", "--updates"], "--updates: the one option is --updates, as the first argument"),
    (["2", "avg.pt", "extra", "more"],
     "arguments after OUTPUT: extra more (it takes [--updates] SAVE-DIR [N] [OUTPUT])"),
])
def test_average_checkpoints_sh_refuses_arguments_it_does_not_take(tmp_path, argv, message):
    # `average_checkpoints.sh ck 2 avg.pt --updates` averaged the epoch checkpoints, rc 0
    import torch

    save_dir = tmp_path / "ck"
    save_dir.mkdir()
    for epoch in range(1, 11):
        torch.save({"model": {"w": torch.full((2,), float(epoch))}}, save_dir / f"checkpoint{epoch}.pt")
    for epoch in range(1, 3):
        torch.save({"model": {"w": torch.full((2,), -1.0)}}, save_dir / f"checkpoint_{epoch}_{10 * epoch}.pt")
    script = ROOT / "scripts" / "average_checkpoints.sh"
    result = run(["bash", script, save_dir, *argv], cwd=tmp_path, env={"PYTHON": sys.executable})
    assert result.returncode == 2 and result.stderr == f"average_checkpoints.sh: error: {message}\n"
    assert sorted(os.listdir(tmp_path)) == ["ck"] and len(os.listdir(save_dir)) == 12
    for n, mean in (("10", 5.5), ("5", 8.0)):  # the study's calls: SAVE-DIR 10, SAVE-DIR 5
        result = run(["bash", script, save_dir, n], env={"PYTHON": sys.executable})
        assert result.returncode == 0, result.stderr
        assert torch.load(save_dir / f"checkpoint_avg_last{n}.pt")["model"]["w"].tolist() == [mean, mean]
    result = run(["bash", script, "--updates", save_dir, "2", tmp_path / "avg.pt"], env={"PYTHON": sys.executable})
    assert result.returncode == 0 and torch.load(tmp_path / "avg.pt")["model"]["w"].tolist() == [-1.0, -1.0]
