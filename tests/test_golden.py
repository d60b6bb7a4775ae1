"""The answer for every example x profile is the reference one (``tests/golden/``), timing
fields aside.  A refactor must not change it; a change meant to change answers regenerates the
references (``tests/golden/make_goldens.py``) and says why in its commit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))

from make_goldens import HERE, cases, golden_name, partition_json  # noqa: E402

CASES = cases()


@pytest.mark.parametrize("model,rules", CASES, ids=[golden_name(m, r)[:-5] for m, r in CASES])
def test_partition_json_equals_the_reference(model, rules):
    want = (HERE / golden_name(model, rules)).read_text()
    assert partition_json(model, rules) + "\n" == want
