"""Shared fixtures: a tiny tree data-bin made with our own CLIs, and the
optional ../shared data (tests that use it skip when it is absent)."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import SYLLABLES, fairseq_binarize, subprocess_env

from tree_fairseq.cli import overriding
from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.trees import group_pieces, trivial_tree
from tree_fairseq.trees.parents import control_heads, format_heads

# Tiny models on a small shared machine: one thread is faster and steadier than
# several competing for the cores; subprocesses (fairseq CLIs) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)



def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: an end-to-end test of half a minute or more (training, recipes, the quick starts); "
        "pytest -m 'not slow' leaves them out for a quick loop")


SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(name: str) -> Path:
    """A dataset of ../shared/data, or skip the test when it is not there."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data is only beside the repository in CI and dev machines)")
    return path


def write_corpus(directory: Path, split: str, num_sentences: int, seed: int, max_words: int = 12) -> None:
    """``{split}.de`` (BPE'd with subword-nmt's ``@@ ``), ``{split}.en`` and
    ``{split}.tree.de`` (balanced trees over the words) of a synthetic corpus
    whose target is the source's words reversed, pieces joined."""
    rng = random.Random(seed)
    bpe_lines, target_lines, tree_lines = [], [], []
    for _ in range(num_sentences):
        words = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(rng.randint(1, max_words))]
        pieces = [piece for word in words for piece in _pieces(word)]
        bpe_lines.append(" ".join(pieces))
        target_lines.append(" ".join(reversed(words)))
        tree_lines.append(trivial_tree(words, "balanced").to_bracketed())
    for suffix, lines in (("de", bpe_lines), ("en", target_lines), ("tree.de", tree_lines)):
        (directory / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _pieces(word: str) -> list[str]:
    """Two-letter pieces, all but the last marked with subword-nmt's ``@@``."""
    parts = [word[i:i + 2] for i in range(0, len(word), 2)]
    return [part + "@@" for part in parts[:-1]] + parts[-1:]


def preprocess(text_dir: Path, destdir: Path, *extra: str) -> Path:
    """tree-fairseq-preprocess of TEXT_DIR's splits into DESTDIR; an option of ``extra`` replaces its
    default here (an option given twice is refused)."""
    preprocess_cli.main([*overriding([
        "--source-lang", "de", "--target-lang", "en", "--trainpref", str(text_dir / "train"),
        "--validpref", str(text_dir / "valid"), "--testpref", str(text_dir / "test"),
        "--destdir", str(destdir), "--workers", "1"], list(extra)), "--joined-dictionary"])
    return destdir


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("tiny_corpus")
    for split, size, seed in (("train", 300, 1), ("valid", 40, 2), ("test", 40, 3)):
        write_corpus(directory, split, size, seed)
    return directory


@pytest.fixture(scope="session")
def tiny_databin(tiny_corpus, tmp_path_factory) -> Path:
    """A tree data-bin (de -> en) of the tiny corpus, made by tree-fairseq-preprocess."""
    return preprocess(tiny_corpus, tmp_path_factory.mktemp("tiny_databin") / "bin")


def write_heads(directory: Path, split: str, control: str = "random") -> None:
    """``{split}.heads.de`` beside ``{split}.de``: the trivial heads ``control`` over the words its
    pieces spell (tree-fairseq-parse --heads-control's)."""
    lines = (directory / f"{split}.de").read_text(encoding="utf-8").splitlines()
    words = ([word for word, _, _ in group_pieces(line.split(), "subword_nmt")] for line in lines)
    (directory / f"{split}.heads.de").write_text(
        "".join(format_heads(control_heads(sentence, control)) + "\n" for sentence in words), encoding="utf-8")


@pytest.fixture(scope="session")
def parent_corpus(tmp_path_factory) -> Path:
    """The tiny corpus's kind, with each word's dependency head (random projective trees)."""
    directory = tmp_path_factory.mktemp("parent_corpus")
    for split, size, seed in (("train", 300, 1), ("valid", 40, 2), ("test", 40, 3)):
        write_corpus(directory, split, size, seed)
        write_heads(directory, split)
    return directory


@pytest.fixture(scope="session")
def parent_databin(parent_corpus, tmp_path_factory) -> Path:
    """A tree data-bin with the sources' parents (--task dependency_translation), made by
    tree-fairseq-preprocess."""
    return preprocess(parent_corpus, tmp_path_factory.mktemp("parent_databin") / "bin")


@pytest.fixture(scope="session")
def plain_databin(tiny_corpus, tmp_path_factory) -> Path:
    """The tiny corpus's text, binarised by fairseq-preprocess alone (no trees)."""
    return fairseq_binarize(
        tmp_path_factory.mktemp("plain_databin"), "--source-lang", "de", "--target-lang", "en",
        "--trainpref", str(tiny_corpus / "train"), "--validpref", str(tiny_corpus / "valid"),
        "--testpref", str(tiny_corpus / "test"), "--joined-dictionary",
    )


@pytest.fixture(scope="session")
def mono_databin(tiny_corpus, tmp_path_factory):
    """The tiny corpus's English side as a monolingual data-bin (fairseq-preprocess --only-source)."""
    return fairseq_binarize(
        tmp_path_factory.mktemp("mono_databin"), "--only-source", "--trainpref", str(tiny_corpus / "train.en"),
        "--validpref", str(tiny_corpus / "valid.en"),
    )


@pytest.fixture(scope="session")
def bpe_codes(tmp_path_factory) -> Path:
    """subword-nmt merges that split the tiny corpus's words into its syllables."""
    codes = tmp_path_factory.mktemp("codes") / "codes"
    codes.write_text("#version: 0.2\n" + "".join(f"{s[0]} {s[1]}\n{s[0]} {s[1]}</w>\n" for s in SYLLABLES))
    return codes


@pytest.fixture(scope="session")
def stanza_models(tmp_path_factory) -> Path:
    """A stanza model folder, English, trained for this session by stanza's own trainers on a toy
    treebank (``tests/stanza_models.py``: about 30 s on one thread, a few hundred KB): a real
    ``stanza.Pipeline`` offline. Skips where stanza is not installed."""
    pytest.importorskip("stanza")
    directory = tmp_path_factory.mktemp("stanza")
    result = subprocess.run([sys.executable, str(Path(__file__).with_name("stanza_models.py")), str(directory)],
                            capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 0, result.stderr[-3000:]
    return directory / "models"


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run several times faster on one thread than on threads that wait for each
    other on a shared machine (``pytestmark = pytest.mark.usefixtures("one_thread")``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
