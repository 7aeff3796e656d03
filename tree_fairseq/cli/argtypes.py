"""argparse types of a number in a range, the one place the plugin's command lines spell them: a
value outside, or text that is no such number, is refused by argparse before anything runs, in
one line naming the option and the range (``argument --short: '0': a whole number, 1 or more``),
never read as "none", as a count from the end or as fairseq's "no limit". Only ASCII digits are
numbers (Python's int() and float() also take '1_000', other scripts' digits and spaces around).

Only the standard library is imported.
"""

import argparse
import math
import os
import re

_WHOLE = re.compile(r"-?[0-9]+")
_REAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


def _whole(text: str, low: int, what: str, high: int | None = None) -> int:
    try:
        value = int(text) if _WHOLE.fullmatch(text) else None
    except ValueError:  # more digits than int() reads
        value = None
    if value is None or value < low or high is not None and value > high:
        raise argparse.ArgumentTypeError(f"{text!r}: {what}")
    return value


def _real(text: str, inside, what: str) -> float:
    value = float(text) if _REAL.fullmatch(text) else math.nan
    if not math.isfinite(value) or not inside(value):
        raise argparse.ArgumentTypeError(f"{text!r}: {what}")
    return value


def positive_int(text: str) -> int:
    """A count of 1 or more."""
    return _whole(text, 1, "a whole number, 1 or more")


def nonnegative_int(text: str) -> int:
    """A count or an index: 0 or more."""
    return _whole(text, 0, "a whole number, 0 or more")


SEED_MAX = 2**32 - 1


def seed(text: str) -> int:
    """A random seed: what numpy's generator takes (fairseq seeds it), 0 to 2**32 - 1."""
    return _whole(text, 0, f"a whole number from 0 to {SEED_MAX} (2**32 - 1)", SEED_MAX)


def positive_float(text: str) -> float:
    """A finite number above 0."""
    return _real(text, lambda value: value > 0, "a number above 0")


def nonnegative_float(text: str) -> float:
    """A finite number of 0 or more."""
    return _real(text, lambda value: value >= 0, "a number, 0 or more")


def probability(text: str) -> float:
    """A number from 0 to 1, both included."""
    return _real(text, lambda value: 0 <= value <= 1, "a number from 0 to 1")


def fraction(text: str) -> float:
    """A share strictly between 0 and 1."""
    return _real(text, lambda value: 0 < value < 1, "a number between 0 and 1, both left out")


def processors() -> int:
    """The processors this process may run on (as ``nproc`` counts them), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Worker processes per processor that --workers may ask for. Each worker of tree-fairseq-preprocess
# (and of the fairseq-preprocess it runs, which starts --workers - 1 whatever the size of the text)
# is a copy of the Python process, ~240 MB: beyond a few per processor they only take memory, and
# --workers 99999999999999999999 started thousands until the OOM killer ended other jobs.
WORKERS_PER_PROCESSOR = 4


def workers(text: str) -> int:
    """--workers: a count of processes from 1 to WORKERS_PER_PROCESSOR per processor of this machine."""
    most = WORKERS_PER_PROCESSOR * processors()
    return _whole(text, 1, f"a whole number from 1 to {most} ({WORKERS_PER_PROCESSOR} per processor of "
                  "this machine: more processes only take memory)", most)

