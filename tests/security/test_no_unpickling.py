"""No code path of ctrnas unpickles a file: `weights_only=False`, `pickle.load(s)` and a `torch.load(` without
`weights_only=True` may appear in ctrnas/ only on a line marked `# pickle-ok:` with its reason, and only in
the few places listed here (each reads bytes this process made, or a file the user names on purpose)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# file name -> why it may (the files may move between folders, so names, not paths)
ALLOWED = {
    "cifar.py": "the CIFAR python release is a pickle by design; read only from the folder the user names, by "
                "an unpickler that builds numpy arrays and plain values only",
    "base.py": "an exception's pickle round trip in memory, to check it survives the trip to the parent",
    "workers.py": "bytes packed by this run's own processes, passed in memory (never a file)",
}
PATTERNS = [re.compile(r"weights_only\s*=\s*False"), re.compile(r"\bpickle\.loads?\("),
            re.compile(r"\bUnpickler\("), re.compile(r"\b(torch\.)?load\(")]


def _calls(text: str):
    """(line number, the statement) of each suspicious call; a statement may span lines."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        code = line.split("#", 1)[0]
        if "weights_only=False" in code.replace(" ", "") or re.search(r"\bpickle\.loads?\(|\bUnpickler\(", code):
            yield i, line
        elif "torch.load(" in code:
            stmt = " ".join(lines[i:i + 4])  # the call's arguments may continue on the next lines
            if not re.search(r"weights_only\s*=\s*True", stmt):
                yield i, line


def test_no_unpickling_outside_the_allow_list():
    bad = []
    for path in sorted((ROOT / "ctrnas").rglob("*.py")):
        text = path.read_text()
        for i, line in _calls(text):
            prev = text.splitlines()[i - 1] if i else ""
            marked = "# pickle-ok:" in line or "# pickle-ok:" in prev
            if not (marked and path.name in ALLOWED):
                bad.append(f"{path.relative_to(ROOT)}:{i + 1}: {line.strip()}")
    assert not bad, "unpickling outside the allow-list (see tests/security):\n" + "\n".join(bad)


def test_the_check_catches_each_pattern():
    for src in ["x = torch.load(p)", "torch.load(p, weights_only=False)", "pickle.load(f)", "pickle.loads(b)",
                "torch.load(\n    p,\n    map_location='cpu')", "pickle.Unpickler(f).load()"]:
        assert list(_calls(src)), src
    for src in ["torch.load(p, weights_only=True)", "torch.load(\n  p,\n  weights_only=True)", "json.load(f)",
                "# torch.load(p)"]:
        assert not list(_calls(src)), src
