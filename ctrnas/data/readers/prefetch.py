"""Parsing one chunk ahead of the encoder, on a background thread."""

from __future__ import annotations

from typing import Iterator


def prefetch(items: Iterator, depth: int = 2) -> Iterator:
    """Iterate `items` in a background thread, `depth` ahead: pyarrow parses without the GIL, so the
    next chunk is parsed while the caller encodes this one (the single-threaded parse we need for line
    numbers would otherwise leave the second core idle). Exceptions re-raise in the caller."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def run():
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put((item, None))
            q.put((done, None))
        except BaseException as e:  # handed to the consumer, raised there
            q.put((done, e))

    t = threading.Thread(target=run, daemon=True, name="ctrnas-prefetch")
    t.start()
    try:
        while True:
            item, err = q.get()
            if item is done:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.05)
