"""§5: placements (words, registry; relayout lives beside these)."""
from .words import *  # noqa: F401,F403
from .words import __all__  # noqa: F401
