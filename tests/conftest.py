"""Fixtures shared by several test files."""
import pytest

import grit

try:
    from grit import _kernels
except ImportError:  # pragma: no cover - only where no compiler exists
    _kernels = None

#: the loops of the C extension this machine can run
SIMD = ["portable"] + (["avx2"] if _kernels is not None and _kernels.simd() == "avx2" else [])


@pytest.fixture(params=SIMD)
def simd(request):
    """Both loops of the extension: the AVX2 one where the CPU has it, and the
    portable one (the test file skips itself where the extension is missing)."""
    prev = _kernels.simd()
    _kernels.simd(request.param == "avx2")
    assert _kernels.simd() == request.param
    yield request.param
    _kernels.simd(prev == "avx2")


@pytest.fixture
def clean_audit(monkeypatch):
    """A fresh per-process audit ledger and no rate ceiling, before and after."""
    monkeypatch.delenv("GRIT_AUDIT_MAX_RATE", raising=False)
    grit.audit._reset_for_tests()
    yield
    grit.audit._reset_for_tests()


@pytest.fixture(scope="module")
def ct():
    """tests/ct_official.py: compressed-tensors checkpoints written by
    compressed-tensors itself (needs torch and the library; skips without)."""
    pytest.importorskip("torch", reason="torch (CPU) is not installed")
    pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
    import ct_official
    return ct_official
