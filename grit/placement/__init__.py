"""§5: placements — the 64-bit words (``words``), the layout expression
language and its registry (``expr``), the meaning of every registered word
(``registered``), the unit grids of each plane (``planes``), the placements as
typed stages (``stages``), relayout as their composition (``relayout``), and
the array laws (``laws``).

The package imports none of its modules (importing any of them runs this file
first, and the modules sit in different layers, docs/layers.md); the public
names are re-exported by ``grit`` itself (``grit.relayout``,
``grit.parse_layout``, ``grit.register_layout``, ``grit.layouts``).
"""
