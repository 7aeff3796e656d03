"""One run at a time per output: two runs writing the same output would mix their work.

A run holds ``OUTPUT.lock`` (created atomically, holding its process id, host, start time and
command) while it writes OUTPUT, and removes it when it ends, however it ends. A second run on
the same output is refused, naming the first. A lock left by a run that died without removing it
(killed with SIGKILL, a machine that went down) is taken over when its process no longer runs on
this host; a lock of another host is never taken over (the message says how to remove it).
"""

import json
import os
import signal
import socket
import sys
import time
from contextlib import contextmanager


# What a SIGTERM must undo before the process ends, newest last (see exit_on_sigterm).
_CLEANUPS: list = []


def exit_on_sigterm() -> None:
    """End the run on SIGTERM (``kill``, a job scheduler's stop) as on Ctrl-C: its lock and staged
    work are removed (:func:`cleaned_up_on_sigterm`), exit status 143. The handler cleans up and
    exits itself rather than raising: an exception raised at an arbitrary point can land in a
    finaliser, where Python ignores it and the run goes on. Worker processes forked later
    (multiprocessing pools, ours and fairseq-preprocess's) keep SIGTERM's default: a pool stops
    its workers with it."""
    main_process = os.getpid()

    def stop(signum, frame):
        if os.getpid() == main_process:
            for cleanup in reversed(_CLEANUPS):
                try:
                    cleanup()
                except OSError:
                    pass
            print(f"{os.path.basename(sys.argv[0])}: stopped by signal {signum}", file=sys.stderr, flush=True)
            os._exit(128 + signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, stop)
    # A parent may have left SIGTERM blocked (the mask is inherited): it would never arrive.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


@contextmanager
def cleaned_up_on_sigterm(cleanup):
    """Within the body, a SIGTERM (with :func:`exit_on_sigterm`) calls ``cleanup`` before exiting."""
    _CLEANUPS.append(cleanup)
    try:
        yield
    finally:
        _CLEANUPS.remove(cleanup)


@contextmanager
def output_lock(output: str, option: str):
    """Hold ``output + ".lock"`` for the body; ValueError when another live run holds it.
    ``option`` names the output in messages (``--output``, ``--destdir``)."""
    lock = os.path.abspath(output) + ".lock"
    _acquire(lock, output, option)

    def release():
        try:
            os.remove(lock)
        except FileNotFoundError:
            pass

    try:
        with cleaned_up_on_sigterm(release):
            yield
    finally:
        release()


def _acquire(lock: str, output: str, option: str) -> None:
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                         "command": " ".join(sys.argv)})
    for _ in range(2):
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = _holder(lock)
            if holder is not None and not _alive(holder):
                print(f"{lock}: taking over the lock of run {holder.get('pid')}, which no longer runs", file=sys.stderr)
                os.remove(lock)
                continue
            about = (f"process {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: "
                     f"{holder.get('command')}" if holder else "a run whose lock file cannot be read")
            raise ValueError(f"{option} {output} is being written by another run ({about}); wait for it to end, "
                             f"or remove {lock} if no such run is alive") from None
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            f.write(record)
        return
    raise ValueError(f"{option} {output}: cannot take {lock}")


def _holder(lock: str) -> dict | None:
    try:
        with open(lock, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _alive(holder: dict) -> bool:
    """Whether the run of a lock still runs: its process exists on this host (another host's
    cannot be checked: taken as running)."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder.get("pid")), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError):
        return True
    return True
