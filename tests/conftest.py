"""Fixtures shared by several test files."""
import pytest

import grit


@pytest.fixture
def clean_audit(monkeypatch):
    """A fresh per-process audit ledger and no rate ceiling, before and after."""
    monkeypatch.delenv("GRIT_AUDIT_MAX_RATE", raising=False)
    grit.audit._reset_for_tests()
    yield
    grit.audit._reset_for_tests()
