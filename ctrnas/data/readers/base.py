"""The reader interface: what every reader yields (records.py), the streaming CSV core that knows each row's
physical line number (csv_stream.py) and the background prefetch of parsed chunks (prefetch.py), importable
from here as one place."""

from __future__ import annotations

from ctrnas.data.readers.csv_stream import CsvStream, blank_rows
from ctrnas.data.readers.prefetch import prefetch
from ctrnas.data.readers.records import LinedBatch, RawBatch, Reject, input_info, open_input
from ctrnas.data.readers.values import cut

__all__ = ["CsvStream", "LinedBatch", "RawBatch", "Reject", "blank_rows", "cut", "input_info", "open_input", "prefetch"]
