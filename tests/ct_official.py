"""compressed-tensors checkpoints written by compressed-tensors itself.

:func:`write_checkpoint` builds a small model of ``torch.nn.Linear`` layers
named as a Llama MLP, applies a quantisation config with the library's own
``apply_quantization_config``, sets each weight's qparams from the library's
``calculate_qparams`` (min/max per group: what a min-max observer gives),
compresses with ``ModelCompressor`` and saves the state dict and the
library's own ``config.json`` entry.  :func:`decompress` is the library's
dequantisation of one module.  Importing this module needs torch and
compressed-tensors (callers ``pytest.importorskip`` them first).
"""
from __future__ import annotations

import json
import os

import torch
from compressed_tensors.compressors import BaseCompressor, ModelCompressor
from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig,
                                             QuantizationScheme, apply_quantization_config)
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
from safetensors.torch import load_file, save_file
from torch import nn

#: the weights args of each compressed format the tests build
ARGS = {
    "int-quantized": dict(num_bits=8, type="int", strategy="channel", symmetric=True),
    "int-quantized-asym": dict(num_bits=8, type="int", strategy="channel", symmetric=False),
    "float-quantized": dict(num_bits=8, type="float", strategy="channel", symmetric=True),
    "mxfp8-quantized": dict(num_bits=8, type="float", strategy="group", group_size=32,
                            symmetric=True, scale_dtype=torch.uint8),
    "nvfp4-pack-quantized": dict(num_bits=4, type="float", strategy="tensor_group",
                                 group_size=16, symmetric=True),
    "mxfp4-pack-quantized": dict(num_bits=4, type="float", strategy="group", group_size=32,
                                 symmetric=True, scale_dtype=torch.uint8),
    "pack-quantized": dict(num_bits=4, type="int", strategy="group", group_size=32,
                           symmetric=True),
}

#: module -> (in_features, out_features)
LAYERS = {"model.layers.0.mlp.down_proj": (128, 32), "model.layers.0.mlp.up_proj": (64, 128)}


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Module()
        self.model.layers = nn.ModuleList([nn.Module()])
        self.model.layers[0].mlp = nn.Module()
        for name, (i, o) in LAYERS.items():
            setattr(self.model.layers[0].mlp, name.rsplit(".", 1)[1], nn.Linear(i, o, bias=False))


def _format(kind: str) -> str:
    return kind.removesuffix("-asym")


def calibrate(model, each=None) -> None:
    """Set the weight qparams of every module a compressed-tensors scheme
    was applied to, by min/max per channel or group (and the global scale
    of a ``tensor_group`` scheme), as a calibration would; ``each(mod)``:
    called first on each such module (for qparams of its own)."""
    with torch.no_grad():
        for mod in model.modules():
            qa = getattr(getattr(mod, "quantization_scheme", None), "weights", None)
            if qa is None:
                continue
            if each is not None:
                each(mod)
            w = mod.weight.float()
            out_f, in_f = w.shape
            st = str(getattr(qa.strategy, "value", qa.strategy))
            if st == "channel":
                mn, mx = w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
            else:
                g = w.reshape(out_f, in_f // qa.group_size, qa.group_size)
                mn, mx = g.amin(dim=2), g.amax(dim=2)
            gscale = None
            if st == "tensor_group":
                gscale = generate_gparam(w.amin(), w.amax())
                mod.weight_global_scale.data.copy_(gscale.reshape(mod.weight_global_scale.shape))
            scale, zp = calculate_qparams(mn, mx, qa, global_scale=gscale)
            mod.weight_scale.data = scale.to(mod.weight_scale.dtype).reshape(
                mod.weight_scale.shape)
            if hasattr(mod, "weight_zero_point"):
                mod.weight_zero_point.data = zp.to(mod.weight_zero_point.dtype).reshape(
                    mod.weight_zero_point.shape)


def write_checkpoint(path: str, groups: dict[str, tuple[str, list[str]]], *, seed: int = 0
                     ) -> str:
    """A compressed-tensors checkpoint in folder ``path``; ``groups``: group
    name -> (an :data:`ARGS` key, targets).  One format for every group is
    that format; several are ``mixed-precision``.  Returns the safetensors
    file's path."""
    torch.manual_seed(seed)
    model = _Model().to(torch.bfloat16)
    schemes = {gn: QuantizationScheme(targets=targets, weights=QuantizationArgs(**ARGS[kind]),
                                      format=_format(kind))
               for gn, (kind, targets) in groups.items()}
    fmts = {_format(kind) for kind, _ in groups.values()}
    fmt = fmts.pop() if len(fmts) == 1 else "mixed-precision"
    apply_quantization_config(model, QuantizationConfig(config_groups=schemes, format=fmt))
    calibrate(model)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
    # mixed precision: each module compresses with its own scheme's format
    comp = ModelCompressor.from_pretrained_model(
        model, quantization_format=None if fmt == "mixed-precision" else fmt)
    comp.compress_model(model)
    out = os.path.join(path, "model.safetensors")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out)
    comp.update_config(path)
    return out


def decompress(path: str, module: str) -> torch.Tensor:
    """compressed-tensors' own dequantisation of ``module``'s weight in the
    checkpoint folder ``path`` (its compressor for the module's format,
    under the scheme its config resolves for the module)."""
    with open(os.path.join(path, "config.json")) as f:
        q = json.load(f)["quantization_config"]
    sd = load_file(os.path.join(path, "model.safetensors"))
    local = {k[len(module) + 1:]: v for k, v in sd.items() if k.startswith(module + ".")}
    for g in q["config_groups"].values():
        if module.rsplit(".", 1)[1] in str(g["targets"]) or "Linear" in g["targets"]:
            scheme = QuantizationScheme(**g)
            cls = BaseCompressor.get_value_from_registry(g.get("format") or q["format"])
            return cls.decompress(local, scheme)["weight"]
    raise KeyError(module)
