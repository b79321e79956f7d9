"""The analysis of committed traces gives the committed summaries, exactly.

The traces under tests/golden/traces were recorded once (a fake clock, synthetic GPU records and a
short real CPU PPO run); a refactoring that changes any reported figure fails here. After an
intended change of the output, rebuild them with ``python -m tests.golden.build`` and review the diff.
"""

from __future__ import annotations

import json

import pytest

from tests.golden.build import BUILDERS, HERE, summary

# every events table checked is also checked by the numpy checks (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("validation_audited")


@pytest.mark.parametrize("correct", [True, False], ids=["corrected", "raw"])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_summary_is_unchanged(name: str, correct: bool) -> None:
    expected = json.loads((HERE / f"{name}.{'corrected' if correct else 'raw'}.json").read_text())
    assert summary(HERE / "traces" / name, correct) == expected
