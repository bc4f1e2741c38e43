"""§8–§10: the codec on the canonical placement.  ``decode.decode_canonical``
(§8), ``encode.encode`` (§9, §10) and ``encode.requantize`` (L4), vectorised
over whole arrays for every grade the grammar can express; ``packing`` and
``layout`` hold the plane byte formats and the lin(i) order they share.

The package imports none of its modules: ``packing`` and ``layout`` sit low
(the placement stages read them), ``encode`` high (it builds GritArrays).
The public forms are ``grit.decode``, ``grit.encode`` and ``grit.requantize``.
"""
