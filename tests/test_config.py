from dataclasses import dataclass, field
from typing import Literal

import pytest

from ctrnas.config import from_dict, load_config, to_dict
from ctrnas.errors import RecipeError


@dataclass(frozen=True)
class Inner:
    width: int = 16
    ops: tuple[str, ...] = ("fc",)


@dataclass(frozen=True)
class Outer:
    name: str
    lr: float = 0.1
    mode: Literal["a", "b"] = "a"
    inner: Inner = field(default_factory=Inner)
    cap: int | None = None


def test_recipe_fills_nested_dataclasses_and_converts_lists():
    cfg = from_dict(Outer, {"name": "x", "lr": 1, "inner": {"ops": ["fc", "dot"]}, "cap": 5})
    assert cfg == Outer(name="x", lr=1.0, inner=Inner(16, ("fc", "dot")), cap=5)
    assert to_dict(cfg)["inner"]["ops"] == ["fc", "dot"]


def test_unknown_key_names_file_and_key(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("name: x\ninner:\n  widht: 3\n")
    with pytest.raises(RecipeError) as e:
        load_config(Outer, p)
    assert str(p) in str(e.value) and "inner.widht" in str(e.value) and "unknown key" in str(e.value)


@pytest.mark.parametrize("data,key,expected", [
    ({"name": "x", "lr": "fast"}, "lr", "float"),
    ({"name": "x", "inner": {"width": 1.5}}, "inner.width", "int"),
    ({"name": "x", "cap": True}, "cap", "int"),
    ({"name": 3}, "name", "str"),
    ({"name": "x", "mode": "c"}, "mode", "one of"),
])
def test_wrong_type_names_key_and_expected_type(data, key, expected):
    with pytest.raises(RecipeError) as e:
        from_dict(Outer, data, source="rec.yaml")
    msg = str(e.value)
    assert msg.startswith("rec.yaml") and f"'{key}'" in msg and expected in msg


def test_missing_required_key_is_an_error():
    with pytest.raises(RecipeError, match="missing required key"):
        from_dict(Outer, {})
