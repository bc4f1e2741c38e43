"""Import-time pins (Appendix A constants checked when a module loads) are
explicit checks: they raise GritPinError, and they still run under
``python -O``, which strips every ``assert``."""
import subprocess
import sys

import pytest

import grit
from grit.errors import GritError, GritPinError, pin


def test_pin_raises_a_grit_error():
    pin(True, "holds")
    with pytest.raises(GritPinError, match="pinned constant violated: the thing"):
        pin(False, "the thing")
    assert issubclass(GritPinError, GritError)


def test_pins_run_under_optimisation():
    code = ("import grit, grit.errors as e\n"
            "try:\n    e.pin(False, 'x')\nexcept e.GritPinError:\n    print('raised')\n")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "raised"


def test_no_assert_statement_in_the_package():
    """Every check the package relies on survives -O."""
    import ast
    import pathlib
    root = pathlib.Path(grit.__file__).parent
    found = [f"{p.relative_to(root)}:{n.lineno}" for p in root.rglob("*.py")
             for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(n, ast.Assert)]
    assert found == []
