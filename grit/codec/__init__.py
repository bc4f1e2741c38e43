"""§8–§10: the codec.  ``decode`` (§8), ``encode`` (§9, §10) and
``requantize`` (L4), vectorised over whole arrays for every grade the
grammar can express; ``packing`` and ``layout`` hold the plane byte formats
and the lin(i) order they share."""
from .decode import decode
from .encode import SCALE_RULES, Requantized, encode, requantize

quantize = encode

__all__ = ["decode", "encode", "quantize", "requantize", "Requantized", "SCALE_RULES"]
