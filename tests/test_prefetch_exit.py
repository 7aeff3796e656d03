"""A fairseq run stopped mid-epoch exits with status 0 under the plugin (tree_fairseq.compat.prefetch_exit):
fairseq's batch-prefetching daemon thread, caught inside torch when Python ends, aborts the process
otherwise."""

import subprocess
import sys
import textwrap

from helpers import subprocess_env

# fairseq's BufferedIterator over batches that each take one long torch operation; the run takes one
# batch and ends, its prefetching thread inside the next one.
SCRIPT = textwrap.dedent("""
    import sys
    import torch
    if sys.argv[1] == "plugin":
        import tree_fairseq  # noqa: F401  (what --user-dir does)
    from fairseq.data.iterators import BufferedIterator

    class SlowBatches:
        def __len__(self):
            return 1000

        def __iter__(self):
            x = torch.randn(1200, 1200)
            while True:
                yield torch.tanh(x @ x)

    torch.set_num_threads(1)
    batches = BufferedIterator(2, SlowBatches())
    next(batches)
    print("stopped after one batch", flush=True)
""")


def run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300,
                          env=subprocess_env())


def test_a_run_stopped_mid_epoch_exits_cleanly_with_the_plugin():
    with_plugin = run("plugin")
    assert with_plugin.returncode == 0, with_plugin.stderr[-2000:]
    assert "stopped after one batch" in with_plugin.stdout
    # the same without the plugin aborts: the case above is the one the plugin repairs
    without = run("fairseq only")
    assert without.returncode != 0 and "terminate called without an active exception" in without.stderr, \
        (without.returncode, without.stderr[-2000:])
