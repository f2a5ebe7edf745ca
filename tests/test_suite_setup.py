"""tests/conftest.py: the order `make test` hands out the test files in (the longest named first, all run), and
the fixture folders built once for all worker processes."""

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _conftest():
    from tests import conftest  # the module pytest loaded: its SLOW_FIRST and built_once

    return conftest


def test_every_file_named_slow_exists_once():
    slow = _conftest().SLOW_FIRST
    assert len(set(slow)) == len(slow)
    assert [f for f in slow if not (TESTS / f).is_file()] == []


def test_the_slow_files_go_first_and_every_other_test_keeps_its_place():
    conf = _conftest()

    class Item:
        def __init__(self, rel, name):
            self.path, self.name = TESTS / rel, name

    items = [Item("a/test_x.py", "1"), Item(conf.SLOW_FIRST[1], "2"), Item("a/test_x.py", "3"),
             Item(conf.SLOW_FIRST[0], "4"), Item("b/test_y.py", "5"), Item(conf.SLOW_FIRST[1], "6"),
             Item("/elsewhere/test_z.py", "7")]
    conf.pytest_collection_modifyitems(items)
    assert [i.name for i in items] == ["4", "2", "6", "1", "3", "5", "7"]


def test_make_test_gives_whole_files_in_this_order():
    line = next(s for s in (TESTS.parent / "Makefile").read_text().splitlines() if "-m pytest" in s)
    assert "--dist loadfile" in line and "--no-loadscope-reorder" in line


def test_a_folder_is_built_once_and_a_failed_build_is_redone(tmp_path_factory):
    built = []

    def build(folder):
        built.append(folder)
        folder.mkdir()
        (folder / "x").write_text(str(len(built)))

    first = _conftest().built_once(tmp_path_factory, "probe", build)
    again = _conftest().built_once(tmp_path_factory, "probe", build)
    assert first == again and len(built) == 1 and (first / "x").read_text() == "1"

    def fails(folder):
        folder.mkdir()
        raise RuntimeError("half made")

    with pytest.raises(RuntimeError):
        _conftest().built_once(tmp_path_factory, "broken", fails)
    redone = _conftest().built_once(tmp_path_factory, "broken", build)
    assert (redone / "x").read_text() == "2"  # the half-made folder was replaced
