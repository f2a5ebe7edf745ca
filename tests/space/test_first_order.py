"""The first-order term as an arch choice (`Arch.first_order`, `SpaceConfig.first_order`): files and hashes of
archs without it are as before, and only a space with the choice draws, mutates or accepts it."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ctrnas.errors import ArchValidationError
from ctrnas.space import PRESETS, Arch, get_space
from ctrnas.space.features import arch_features, feature_matrix
from ctrnas.space.config import space_record

ARCHS = Path(__file__).resolve().parents[2] / "ctrnas" / "space" / "archs"
# keys of the shipped archs computed by ctrnas at c21dd84, before the field existed
KEYS = {"dcnv2-like.json": "0d8a1b6245f95b84", "dcnv2-stacked.json": "618ed383454c147b",
        "dlrm-like.json": "89ee9013888c9372"}
CHOICE = dataclasses.replace(PRESETS["ctrnas-small"], name="fo", first_order=(False, True))


@pytest.mark.parametrize("name", sorted(KEYS))
def test_shipped_archs_read_write_and_hash_as_before(name):
    data = json.loads((ARCHS / name).read_text())
    arch = Arch.from_json(data)
    assert arch.first_order is False
    assert arch.to_json() == data and "first_order" not in arch.dumps()
    assert arch.key() == KEYS[name]


def test_first_order_round_trips_and_changes_the_key():
    arch = Arch.from_json((ARCHS / "dlrm-like.json").read_text())
    on = dataclasses.replace(arch, first_order=True)
    assert on.to_json()["first_order"] is True
    assert Arch.from_json(on.dumps()) == on
    assert on.key() != arch.key()
    with pytest.raises(ArchValidationError, match="first_order"):
        Arch.from_json({**arch.to_json(), "first_order": "yes"})


def test_validate_accepts_first_order_only_in_a_space_with_the_choice():
    arch = Arch.from_json((ARCHS / "dlrm-like.json").read_text())
    on = dataclasses.replace(arch, first_order=True)
    small = get_space(PRESETS["ctrnas-small"])
    with pytest.raises(ArchValidationError, match="first_order.*no such term"):
        small.validate(on)
    assert get_space(CHOICE).validate(on) is on and get_space(CHOICE).validate(arch) is arch
    with pytest.raises(ArchValidationError, match="first_order"):
        get_space(dataclasses.replace(CHOICE, first_order=(True,))).validate(arch)


def test_sampling_draws_it_last_so_the_blocks_are_those_of_the_space_without_it():
    plain, choice = get_space(PRESETS["ctrnas-small"]), get_space(CHOICE)
    drawn = []
    for seed in range(30):
        a, b = plain.sample(np.random.default_rng(seed)), choice.sample(np.random.default_rng(seed))
        assert a.first_order is False and dataclasses.replace(b, first_order=False) == a
        drawn.append(b.first_order)
    assert 5 < sum(drawn) < 25  # both values, about half each


def test_mutate_flips_it_sometimes_and_mutate_local_may_flip_it():
    choice = get_space(CHOICE)
    arch = Arch.from_json((ARCHS / "dlrm-like.json").read_text())
    rng = np.random.default_rng(0)
    flips = sum(choice.mutate(arch, rng).first_order for _ in range(400))
    assert 5 < flips < 80  # rare, as the width move: 0.5 / number of micro fields
    local = [choice.mutate_local(arch, rng) for _ in range(200)]
    flipped = [m for m in local if m.first_order]
    assert flipped and all(dataclasses.replace(m, first_order=False) == arch for m in flipped)
    # a space without the choice never gives one
    plain = get_space(PRESETS["ctrnas-small"])
    assert not any(plain.mutate(arch, rng).first_order or plain.mutate_local(arch, rng).first_order
                   for _ in range(100))


def test_fingerprint_of_a_space_without_the_choice_is_as_before():
    assert "first_order" not in space_record(PRESETS["ctrnas-small"])
    assert space_record(CHOICE)["first_order"] == [False, True]
    assert get_space({"base": "ctrnas-small", "first_order": [False, True]}).config.first_order == (False, True)


def test_the_predictor_sees_it_as_a_feature():
    arch = Arch.from_json((ARCHS / "dlrm-like.json").read_text())
    on = dataclasses.replace(arch, first_order=True)
    assert "first-order term" not in arch_features(arch) and arch_features(on)["first-order term"] == 1.0
    names, rows = feature_matrix([arch, on])
    j = names.index("first-order term")
    assert [r[j] for r in rows] == [0.0, 1.0]


FM_CHOICE = dataclasses.replace(PRESETS["ctrnas-small"], name="fm", field_fm=(False, True))


def test_field_fm_is_a_choice_like_first_order():
    arch = Arch.from_json((ARCHS / "dlrm-like.json").read_text())
    on = dataclasses.replace(arch, field_fm=True)
    assert Arch.from_json(on.dumps()) == on and on.to_json()["field_fm"] is True and on.key() != arch.key()
    with pytest.raises(ArchValidationError, match="field_fm.*no such term"):
        get_space(PRESETS["ctrnas-small"]).validate(on)
    assert get_space(FM_CHOICE).validate(on) is on
    plain, choice = get_space(PRESETS["ctrnas-small"]), get_space(FM_CHOICE)
    drawn = [choice.sample(np.random.default_rng(s)) for s in range(30)]
    assert all(dataclasses.replace(b, field_fm=False) == plain.sample(np.random.default_rng(s))
               for s, b in enumerate(drawn))
    assert 5 < sum(b.field_fm for b in drawn) < 25 and not any(b.first_order for b in drawn)
    rng = np.random.default_rng(1)
    flipped = [m for m in (choice.mutate_local(arch, rng) for _ in range(200)) if m.field_fm]
    assert flipped and all(dataclasses.replace(m, field_fm=False) == arch for m in flipped)
    assert 5 < sum(choice.mutate(arch, rng).field_fm for _ in range(400)) < 80
    assert "field_fm" not in space_record(PRESETS["ctrnas-small"]) and space_record(FM_CHOICE)["field_fm"] == [
        False, True]
    assert arch_features(on)["field fm"] == 1.0 and "field fm" not in arch_features(arch)
