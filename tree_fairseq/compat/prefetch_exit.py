"""A fairseq run that stops mid-epoch exits cleanly.

fairseq fetches the next batches in a daemon thread (``BufferedIterator``'s
``BackgroundConsumer``). When a run stops before its epoch is used up
(``--max-update``, ``--stop-time-hours``) that thread is usually inside torch
when Python ends; Python stops daemon threads by unwinding them, which a torch
C++ frame does not allow, and the process aborts with "terminate called
without an active exception" (exit status 134) after the run has written
everything. Scripts that check the status then see a finished run as failed.

At exit, before Python stops the threads, every such thread is told to stop
after the batch it is fetching (its ``_max_len`` is the count it breaks at),
its queue is emptied so that it is not left waiting to put a batch, and it is
joined. A fetch that does not end within ``TIMEOUT`` seconds is left as
fairseq leaves it.
"""

import atexit
import queue
import threading
import time

from fairseq.data.iterators import BackgroundConsumer

TIMEOUT = 30.0


def stop_prefetch_threads() -> None:
    consumers = [t for t in threading.enumerate() if isinstance(t, BackgroundConsumer)]
    for consumer in consumers:
        consumer._max_len = 0  # fairseq breaks once count >= _max_len, after the batch in hand
    deadline = time.monotonic() + TIMEOUT
    for consumer in consumers:
        while consumer.is_alive() and time.monotonic() < deadline:
            try:
                while True:
                    consumer._queue.get_nowait()
            except queue.Empty:
                pass
            consumer.join(0.05)


atexit.register(stop_prefetch_threads)
