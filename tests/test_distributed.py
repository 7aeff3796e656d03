"""Training on several processes through fairseq's own distributed engine (gloo on CPU, as the
README's "Training on several GPUs or machines" section gives it): both ranks end with the same
parameters, and those equal one process that accumulates the same two batches per update
(``--update-freq 2``)."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import USER_DIR, subprocess_env

pytestmark = pytest.mark.slow  # end to end: the README test command runs it, pytest -m "not slow" leaves it out

WORKER = str(Path(__file__).with_name("distributed_worker.py"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def train_args(databin, arch, task):
    return [
        str(databin), "--user-dir", USER_DIR, "--task", task, "--arch", arch, "--cpu", "--num-workers", "0",
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "4", "--seed", "3",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--dropout", "0",
    ]


@pytest.mark.parametrize("arch,task", [("tree_transformer_tiny", "tree_translation"),
                                       ("treeformer_tiny", "tree_translation")])
def test_two_gloo_ranks_equal_one_process_with_update_freq_2(tiny_databin, tmp_path, arch, task):
    args = train_args(tiny_databin, arch, task)
    distributed = [
        "--ddp-backend", "legacy_ddp", "--distributed-backend", "gloo", "--distributed-world-size", "2",
        "--distributed-init-method", f"tcp://127.0.0.1:{free_port()}", "--distributed-no-spawn",
    ]
    env = subprocess_env()
    ranks = [
        subprocess.Popen(
            [sys.executable, WORKER, str(tmp_path / f"rank{rank}.pt"), *args, *distributed,
             "--distributed-rank", str(rank)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in (0, 1)
    ]
    for rank in ranks:
        output, _ = rank.communicate(timeout=600)
        assert rank.returncode == 0, output[-3000:]
    single = subprocess.run([sys.executable, WORKER, str(tmp_path / "single.pt"), *args, "--update-freq", "2"],
                            env=env, capture_output=True, text=True)
    assert single.returncode == 0, single.stderr[-3000:]

    rank0, rank1, alone = (torch.load(tmp_path / f"{name}.pt") for name in ("rank0", "rank1", "single"))
    assert (rank0["rank"], rank1["rank"]) == (0, 1)
    assert len(rank0["losses"]) == 4
    assert rank0["losses"] == rank1["losses"]
    torch.testing.assert_close(rank0["losses"], alone["losses"], rtol=1e-4, atol=1e-4)
    for name, tensor in rank0["params"].items():
        assert torch.equal(tensor, rank1["params"][name]), name
        torch.testing.assert_close(tensor, alone["params"][name], rtol=1e-5, atol=1e-6, msg=name)
    # The four updates were applied, not skipped.
    assert any(not torch.equal(tensor, alone["initial"][name]) for name, tensor in alone["params"].items())
