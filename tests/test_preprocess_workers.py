"""tree-fairseq-preprocess --workers: a value no machine can use is refused before anything starts
(--workers 99999999999999999999 started ~4,280 processes of ~240 MB and the OOM killer took other
jobs down), and the trees never take more processes than their split has chunks.

No test here starts a process: the pools are replaced by stand-ins that record what was asked."""

import os

import pytest

from conftest import preprocess, write_corpus
from tree_fairseq.cli import preprocess as preprocess_cli

MOST = 4 * len(os.sched_getaffinity(0))  # 4 per processor, as nproc counts them


class RecordedPool:
    """A stand-in for multiprocessing.Pool that starts nothing and maps in this process."""
    started: list = []

    def __init__(self, processes=None):
        RecordedPool.started.append(processes)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def imap(self, function, iterable):
        return map(function, iterable)


def refuse_pool(*args, **kwargs):
    raise AssertionError(f"a pool was started: Pool{args}{kwargs}")


@pytest.fixture
def no_processes(monkeypatch):
    import fairseq.binarizer
    import fairseq.data.dictionary

    RecordedPool.started = []
    monkeypatch.setattr(preprocess_cli, "Pool", RecordedPool)
    monkeypatch.setattr(fairseq.binarizer, "Pool", refuse_pool)
    monkeypatch.setattr(fairseq.data.dictionary, "Pool", refuse_pool)
    fairseq_workers = []
    # fairseq-preprocess's own pools are left out: these tests are about the trees' and the option's
    monkeypatch.setattr(preprocess_cli.fairseq_preprocess, "main", lambda args: fairseq_workers.append(args.workers))
    return fairseq_workers


@pytest.mark.parametrize("workers", ["99999999999999999999", str(MOST + 1)])
def test_workers_beyond_the_bound_are_refused_before_anything_starts(tiny_corpus, tmp_path, capsys, no_processes,
                                                                     workers):
    with pytest.raises(SystemExit) as exit_:
        preprocess(tiny_corpus, tmp_path / "bin", "--workers", workers)
    assert exit_.value.code == 2
    assert (f"argument --workers: '{workers}': a whole number from 1 to {MOST} (4 per processor of this machine: "
            "more processes only take memory)") in capsys.readouterr().err
    assert RecordedPool.started == [] and no_processes == []
    assert not (tmp_path / "bin").exists()


def test_the_trees_take_no_more_processes_than_chunks(tmp_path, no_processes):
    """The tiny corpus's splits are one chunk each: read here, no pool; 1,100 lines are 3 chunks."""
    workers = str(min(8, MOST))
    for split, size, seed in (("train", 1100, 1), ("valid", 40, 2), ("test", 40, 3)):
        write_corpus(tmp_path, split, size, seed)
    preprocess(tmp_path, tmp_path / "bin", "--workers", workers)
    assert RecordedPool.started == ([min(3, int(workers))] if int(workers) > 1 else [])
    assert no_processes == [int(workers)]
    assert (tmp_path / "bin" / "train.de-en.de.spans.bin").exists()


def test_an_option_given_twice_is_refused_naming_both(tiny_corpus, tmp_path, capsys, no_processes):
    """fairseq's parser kept the last of a repeated option: --destdir A ... --destdir B wrote B."""
    with pytest.raises(SystemExit) as exit_:
        preprocess(tiny_corpus, tmp_path / "bin", "--workers", "1", "--trainpref", str(tiny_corpus / "train"),
                   "--workers", "2")
    assert exit_.value.code == 2
    assert "argument --workers: given twice (--workers 1, then --workers 2): give it once" in capsys.readouterr().err
    assert not (tmp_path / "bin").exists()
