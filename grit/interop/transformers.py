"""transformers loads GRIT checkpoints; a writer for them.

``import grit.interop.transformers`` registers, through transformers'
public plug-in points (``register_quantization_config`` and
``register_quantizer`` of ``transformers.quantizers.auto``), the quant_method
``"grit"``.  A checkpoint whose config.json carries the entry
:mod:`grit.conventions.grit` defines then loads with
``AutoModelForCausalLM.from_pretrained(path)``: before any weight is read,
each ``nn.Linear`` whose ``<module>.weight`` the safetensors files declare
as a GRIT tensor (their ``__grit__`` documents, read from the headers) is
replaced by a :class:`~grit.interop.nn.GritLinear` with buffers of exactly
the plane sizes, and transformers' loader moves each plane tensor
``<module>.weight.grit.<role>`` into the buffer ``<module>.grit_<role>``
(a ``WeightRenaming`` per role).  Nothing is decoded on load: the model
holds the packed planes and decodes one layer's weight per forward.

:func:`save_pretrained` writes such a checkpoint: the linear layers'
weights encoded (``grit.encode``) and saved with ``grit.save`` as
``model.safetensors``, every other tensor as it is, and config.json with the
entry.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable

import numpy as np
import torch
from torch import nn
from transformers.core_model_loading import WeightRenaming
from transformers.quantizers.auto import (AUTO_QUANTIZATION_CONFIG_MAPPING,
                                          AUTO_QUANTIZER_MAPPING, register_quantization_config,
                                          register_quantizer)
from transformers.quantizers.base import HfQuantizer
from transformers.utils.quantization_config import QuantizationConfigMixin

from ..array import GritArray
from ..codec.encode import encode
from ..errors import GritUsageError
from ..facts import PLANE_NAMES
from ..grade import Grade
from ..io import load, save
from ..conventions.grit import (FILE_CONVENTION as CONVENTION, QUANT_METHOD, VERSION,
                               build_config, parse_config)
from .nn import BUFFERS, GritLinear
from .torch import values

__all__ = ["GritConfig", "GritHfQuantizer", "save_pretrained", "WEIGHTS_NAME"]

#: the file save_pretrained writes the weights to (transformers' single-file name)
WEIGHTS_NAME = "model.safetensors"


class GritConfig(QuantizationConfigMixin):
    """The ``quantization_config`` of a GRIT checkpoint (checked by
    :func:`grit.conventions.grit.parse_config`)."""

    def __init__(self, quant_method: str = QUANT_METHOD, convention: str = CONVENTION,
                 version: int = VERSION, modules_not_converted: Iterable[str] | None = None,
                 **kwargs):
        entry = {"quant_method": quant_method, "convention": convention, "version": version,
                 "modules_not_converted": list(modules_not_converted or []), **kwargs}
        parsed = parse_config(entry)
        self.quant_method = QUANT_METHOD
        self.convention = CONVENTION
        self.version = VERSION
        self.modules_not_converted = list(parsed.modules_not_converted)

    def to_dict(self) -> dict[str, Any]:
        return build_config(modules_not_converted=self.modules_not_converted)


def _grit_weights(files) -> dict[str, tuple[Any, tuple[int, ...]]]:
    """``{tensor name: (descriptor, shape)}`` of every GRIT tensor the
    safetensors files declare (headers only: the arrays are views of a
    memory map, no plane byte is read)."""
    out: dict[str, tuple[Any, tuple[int, ...]]] = {}
    for f in files or ():
        if not str(f).endswith(".safetensors"):
            continue
        for name, a in load(f, recognise=False).items():
            if isinstance(a, GritArray):
                out[name] = (a.descriptor, a.shape)
    return out


class GritHfQuantizer(HfQuantizer):
    """Loads pre-quantised GRIT checkpoints into GritLinear modules."""

    requires_calibration = True          # GRIT checkpoints only: no quantising on load
    quantization_config: GritConfig

    def validate_environment(self, *args, **kwargs):
        return

    def _process_model_before_weight_loading(self, model, checkpoint_files=None, **kwargs):
        weights = _grit_weights(checkpoint_files)
        skip = set(self.quantization_config.modules_not_converted)
        prefix = getattr(model, "base_model_prefix", "") or ""
        self.converted: list[str] = []
        for name, module in list(model.named_modules()):
            if not isinstance(module, nn.Linear) or name in skip:
                continue
            found = weights.get(f"{name}.weight")
            if found is None and prefix and name.startswith(prefix + "."):
                found = weights.get(f"{name[len(prefix) + 1:]}.weight")
            if found is None and prefix:
                found = weights.get(f"{prefix}.{name}.weight")
            if found is None:
                continue
            desc, shape = found
            if shape != (module.out_features, module.in_features):
                raise GritUsageError(f"{name}.weight: the checkpoint's GRIT tensor has shape "
                                     f"{list(shape)}; the model's linear layer is "
                                     f"{[module.out_features, module.in_features]}")
            bias = module.bias
            new = GritLinear(module.in_features, module.out_features, desc,
                             bias=bias is not None, device=module.weight.device,
                             dtype=None if bias is None else bias.dtype)
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, new)
            self.converted.append(name)
        return model

    def get_weight_conversions(self):
        """``<module>.weight.grit.<role>`` (grit.save's plane tensors) ->
        the GritLinear buffer ``<module>.grit_<role>``."""
        return [WeightRenaming(source_patterns=f"weight.grit.{role}", target_patterns=buf)
                for role, buf in zip(PLANE_NAMES, BUFFERS)]

    def is_serializable(self):
        return False                    # save with grit.interop.transformers.save_pretrained

    @property
    def is_trainable(self) -> bool:
        return False


def _register() -> None:
    if QUANT_METHOD not in AUTO_QUANTIZATION_CONFIG_MAPPING:
        register_quantization_config(QUANT_METHOD)(GritConfig)
    if QUANT_METHOD not in AUTO_QUANTIZER_MAPPING:
        register_quantizer(QUANT_METHOD)(GritHfQuantizer)


_register()


# ---------------------------------------------------------------------------
# writing a GRIT checkpoint


def _fits(grade: Grade, in_features: int) -> bool:
    g = grade.descriptor()
    span = g.k0 * (g.k1 or 1) if g.n_levels == 2 and g.k1 else g.k0
    return in_features % span == 0


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        try:
            import ml_dtypes
        except ImportError:              # written as float32 (exact) without ml_dtypes
            return values(t)
        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.contiguous().numpy()


def save_pretrained(model, path, grade, *, modules_not_converted: Iterable[str] = ("lm_head",),
                    ) -> list[str]:
    """Write ``model`` (a transformers PreTrainedModel) as a GRIT checkpoint
    in the folder ``path``: every ``nn.Linear`` not named in
    ``modules_not_converted`` whose ``in_features`` is whole groups of
    ``grade`` gets its weight encoded into ``grade`` (group axis: the input
    features); every other tensor of the state dict is saved as it is; the
    config.json carries the GRIT entry.  Returns the converted modules'
    names."""
    g = Grade.parse(grade) if isinstance(grade, str) else grade
    if not isinstance(g, Grade):
        raise GritUsageError(f"save_pretrained(): grade must be a Grade or grade string, "
                             f"got {type(grade).__name__}")
    os.makedirs(path, exist_ok=True)
    skip = set(modules_not_converted)
    converted = [n for n, m in model.named_modules()
                 if isinstance(m, nn.Linear) and n not in skip and _fits(g, m.in_features)]
    quantised = {f"{n}.weight" for n in converted}
    tensors: dict[str, Any] = {}
    for key, t in model.state_dict().items():
        if key in quantised:
            tensors[key] = encode(t, g)
        else:
            tensors[key] = _numpy(t)
    save(os.path.join(path, WEIGHTS_NAME), tensors, {"format": "pt"})
    cfg = model.config.to_dict()
    cfg["quantization_config"] = build_config(modules_not_converted=sorted(skip))
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    return converted
