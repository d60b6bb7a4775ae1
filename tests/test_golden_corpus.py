"""The answer for every committed corpus model x profile is the reference one
(``tests/golden/corpus/``), timing fields aside: a refactor must not change it; a change meant
to change answers regenerates them (``tests/golden/make_corpus_goldens.py``) and says why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))

from make_corpus_goldens import HERE, cases, golden_name, partition_json  # noqa: E402

pytestmark = pytest.mark.corpus

CASES = cases()


def test_every_committed_model_has_its_references():
    assert len(CASES) >= 14 * 7
    assert sorted(p.name for p in HERE.glob("*.json")) == sorted(golden_name(m, r) for m, r in CASES)


@pytest.mark.parametrize("model,rules", CASES, ids=[golden_name(m, r)[:-5] for m, r in CASES])
def test_partition_json_equals_the_reference(model, rules):
    want = (HERE / golden_name(model, rules)).read_text()
    assert partition_json(model, rules) + "\n" == want
