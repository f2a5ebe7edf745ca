"""A worker's error reaches the parent as itself when it can be rebuilt there, else as the nearest kind with
the same message."""

import threading

from ctrnas.errors import CtrnasError
from ctrnas.execution.base import portable_error


class TwoArgs(Exception):
    def __init__(self, what, where):  # rebuilt from args=(message,) it would miss `where`
        super().__init__(f"{what} at {where}")


class HoldsALock(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.lock = threading.Lock()  # cannot be pickled


def test_a_plain_error_is_passed_as_itself():
    for e in (ValueError("bad row 3"), CtrnasError("bad row 3")):
        assert portable_error(e, "tb") is e


def test_an_error_that_cannot_be_rebuilt_becomes_the_nearest_kind():
    out = portable_error(TwoArgs("bad", "row 3"), "the traceback")
    assert type(out) is RuntimeError and str(out) == "TwoArgs: bad at row 3\nthe traceback"


def test_an_error_that_cannot_be_pickled_becomes_the_nearest_kind():
    out = portable_error(HoldsALock("locked"), "tb")
    assert type(out) is RuntimeError and str(out).startswith("HoldsALock: locked")
