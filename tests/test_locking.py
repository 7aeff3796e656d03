"""tree_fairseq.cli.locking: one run holds an output's lock, also when two runs find the same lock
of a run that no longer runs."""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import helpers
from tree_fairseq.cli import locking

# A run that reads the stale lock, then is descheduled (here: waits for the file GO) before it acts.
SLOW_RUN = textwrap.dedent("""
    import os, sys, time
    from tree_fairseq.cli import locking
    out, read, go = sys.argv[1:]
    original, calls = locking._holder, []

    def slow_holder(lock):
        holder = original(lock)
        if not calls:
            calls.append(holder)
            open(read, "w").close()
            while not os.path.exists(go):
                time.sleep(0.02)
        return holder

    locking._holder = slow_holder
    try:
        with locking.output_lock(out, "--out"):
            print("HOLDS", flush=True)
    except ValueError as error:
        print("refused:", error, flush=True)
""")


def _wait_for(path, process):
    deadline = time.monotonic() + 120
    while not path.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)


def test_two_runs_that_find_one_stale_lock_never_both_hold_it(tmp_path):
    """B reads the lock of a dead run and is descheduled; A takes the lock over and holds it; B goes
    on. B removed A's fresh lock and made its own: both held the output. Now B reads the lock again
    under the takeover's flock, finds A's live run and is refused."""
    out, read, go = tmp_path / "out", tmp_path / "read", tmp_path / "go"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = tmp_path / "out.lock"
    lock.write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(), "started": "then",
                                "command": "killed"}))
    slow = subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(out), str(read), str(go)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=helpers.subprocess_env())
    try:
        _wait_for(read, slow)  # B has read the stale lock
        with locking.output_lock(str(out), "--out"):  # A takes it over
            go.touch()
            said, errors = slow.communicate(timeout=120)
            assert said.startswith("refused: --out ") and f"process {os.getpid()} on " in said, (said, errors[-2000:])
            assert json.loads(lock.read_text())["pid"] == os.getpid()
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert not lock.exists()
