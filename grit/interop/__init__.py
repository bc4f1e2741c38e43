"""GRIT arrays in the frameworks models run in: one thin module per framework.

* :mod:`grit.interop.torch` — planes as torch tensors (zero-copy), decode
  into a torch tensor of any float dtype, encode from torch tensors
  (bfloat16 included);
* :mod:`grit.interop.nn` — :class:`~grit.interop.nn.GritLinear`, a
  weight-only quantised linear layer over a GRIT array's planes;
* :mod:`grit.interop.triton` — decode kernels for a GPU, bit-exact to
  ``grit.decode``;
* :mod:`grit.interop.transformers` — ``from_pretrained`` of GRIT checkpoints
  and a writer for them;
* :mod:`grit.conventions.grit` — the checkpoint's ``quantization_config``
  entry (imports no framework).

``import grit`` imports none of them (and so never torch): import the one
you use, e.g. ``import grit.interop.torch as gt``.  See docs/torch.md.
"""
