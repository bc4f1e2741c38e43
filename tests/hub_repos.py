"""Hub repositories of three kinds for the hf:// request-count tests and
bench/bench_hub.py, each with an optional planted defect a level-1 scan
must find:

* ``bf16``  — a plain bf16 checkpoint; defect: the last shard cut short
  (its header places tensors past the end of the file);
* ``nvfp4`` — a compressed-tensors NVFP4 checkpoint (``weight_packed``,
  ``weight_scale``, ``weight_global_scale`` per projection, as grit's
  compressed-tensors emitter writes them, with the emitter's
  ``quantization_config``); defect: one ``weight_global_scale`` written as
  its reciprocal (the other convention's direction: S322);
* ``mxfp4`` — a GRIT MXFP4 checkpoint (``grit.save``); defect: one data
  plane 16 bytes shorter than its descriptor derives.

Every checkpoint is sharded (``model-0000i-of-0000S.safetensors`` and
``model.safetensors.index.json``) with a ``config.json``, its tensors laid
out as safetensors writes them (by dtype width, widest first, then by
name), so a compressed-tensors shard holds its float32 global scales
together right after its header, as real ones do.  The bytes of each
kind are built once per shape and shared by every repository of it.
"""
from __future__ import annotations

import functools
import json
import struct

import numpy as np

#: what a level-1 scan reports for each kind's planted defect
DEFECT_CODE = {"bf16": "S127", "nvfp4": "S322", "mxfp4": "S101"}
KINDS = ("bf16", "nvfp4", "mxfp4")
_PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
_WIDTH = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1, "F8_E4M3": 1, "I8": 1}


def _shape(proj: str, d: int, mlp: int) -> tuple[int, int]:
    if proj in ("mlp.gate_proj", "mlp.up_proj"):
        return mlp, d
    if proj == "mlp.down_proj":
        return d, mlp
    return d, d


def st_bytes(tensors: dict[str, tuple[str, tuple[int, ...], bytes]],
             metadata: dict[str, str] | None = None) -> bytes:
    """A safetensors file of ``{name: (dtype, shape, bytes)}``, laid out as
    the safetensors library lays it out (widest dtype first, then by
    name)."""
    order = sorted(tensors, key=lambda n: (-_WIDTH[tensors[n][0]], n))
    head: dict = {"__metadata__": metadata} if metadata else {}
    off = 0
    for n in order:
        dt, shape, raw = tensors[n]
        head[n] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(tensors[n][2] for n in order)


def _st_dtype(a) -> str:
    import ml_dtypes  # noqa: PLC0415
    return {np.dtype(np.float32): "F32", np.dtype(np.uint8): "U8",
            np.dtype(ml_dtypes.bfloat16): "BF16",
            np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3"}[a.dtype]


def _weights(layers: int, d: int, mlp: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"model.layers.{i}.{p}.weight": rng.standard_normal(_shape(p, d, mlp))
            .astype(np.float32) for i in range(layers) for p in _PROJ}


def _split(names: list[str], shards: int) -> list[list[str]]:
    per = -(-len(names) // shards)
    return [names[i:i + per] for i in range(0, len(names), per)]


@functools.lru_cache(maxsize=None)
def kind_files(kind: str, defect: bool = False, layers: int = 24, d: int = 256,
               mlp: int = 512, shards: int = 3) -> dict[str, bytes]:
    """The files of one repository of ``kind`` ({path: bytes}), with its
    planted defect when ``defect``."""
    import ml_dtypes  # noqa: PLC0415

    import grit  # noqa: PLC0415
    from grit import conventions  # noqa: PLC0415

    w = _weights(layers, d, mlp)
    norm = {f"model.layers.{i}.input_layernorm.weight": np.ones(d, ml_dtypes.bfloat16)
            for i in range(layers)}
    config: dict = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                    "hidden_size": d, "intermediate_size": mlp, "num_hidden_layers": layers}
    per_shard: list[dict[str, tuple[str, tuple[int, ...], bytes]]] = []
    meta: list[dict[str, str] | None] = []
    groups = _split(sorted(w), shards)
    if kind == "bf16":
        for g in groups:
            t = {n: ("BF16", w[n].shape, w[n].astype(ml_dtypes.bfloat16).tobytes()) for n in g}
            per_shard.append(t)
            meta.append(None)
    elif kind == "nvfp4":
        # the parts a runtime fuses (q/k/v, gate/up) share their global scale,
        # as compressed-tensors' own quantiser writes them: each fused set is
        # encoded as one array and its emitted tensors cut back into parts
        arrays: dict = {}
        for i in range(layers):
            for parts in (("q_proj", "k_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"),
                          ("down_proj",)):
                names = [next(n for n in w if n.startswith(f"model.layers.{i}.")
                              and n.endswith(f".{q}.weight")) for q in parts]
                arrays["+".join(names)] = grit.encode(np.concatenate([w[n] for n in names]),
                                                      grit.GRADE_NVF4)
        fused = conventions.emit("compressed-tensors", arrays)
        em_tensors: dict = {}
        em_weights: dict = {}
        for key in arrays:
            names = key.split("+")
            rows = np.cumsum([0] + [w[n].shape[0] for n in names])
            for leaf, v in fused.tensors.items():
                if not leaf.startswith(key[:-len(".weight")] + "."):
                    continue
                tail = leaf[len(key) - len(".weight"):]
                for n, a, b in zip(names, rows[:-1], rows[1:]):
                    v = np.asarray(v)
                    em_tensors[n[:-len(".weight")] + tail] = v if v.shape == (1,) else v[a:b]
            for n in names:
                em_weights[n] = fused.weights[key]
        config.update(conventions.by_name("compressed-tensors")
                      .emit_config(em_weights, {})["config.json"])
        # as compressed-tensors' own quantiser writes it: the Linear layers, not
        # each module by name
        for g in config["quantization_config"]["config_groups"].values():
            g["targets"] = ["Linear"]
        em = type("Emitted", (), {"tensors": em_tensors})
        for g in groups:
            mods = {n[:-len(".weight")] for n in g}
            t = {}
            for n, v in em.tensors.items():
                if n.rsplit(".", 1)[0] in mods:
                    v = np.asarray(v)
                    t[n] = (_st_dtype(v), v.shape, v.tobytes())
            per_shard.append(t)
            meta.append(None)
        if defect:                  # one global scale in the other direction: 1/g
            n = sorted(k for k in per_shard[0] if k.endswith(".weight_global_scale"))[0]
            dt, shape, raw = per_shard[0][n]
            g = np.frombuffer(raw, np.float32)
            per_shard[0][n] = (dt, shape, (np.float32(1) / g).astype(np.float32).tobytes())
    elif kind == "mxfp4":
        import os  # noqa: PLC0415
        import tempfile  # noqa: PLC0415
        with tempfile.TemporaryDirectory() as tmp:
            for g in groups:
                p = os.path.join(tmp, "s.safetensors")
                grit.save(p, {n: grit.encode(w[n], grit.GRADE_MXFP4) for n in g})
                raw = open(p, "rb").read()
                n = struct.unpack("<Q", raw[:8])[0]
                head = json.loads(raw[8:8 + n])
                md = head.pop("__metadata__", None)
                t = {k: (e["dtype"], tuple(e["shape"]),
                         raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
                     for k, e in head.items()}
                per_shard.append(t)
                meta.append(md)
        if defect:                  # a data plane shorter than its descriptor derives
            k = sorted(x for x in per_shard[0] if x.endswith(".grit.data"))[0]
            dt, shape, raw = per_shard[0][k]
            per_shard[0][k] = (dt, (shape[0] - 16,), raw[:-16])
    else:
        raise ValueError(kind)
    files: dict[str, bytes] = {}
    weight_map: dict[str, str] = {}
    total = 0
    for i, (t, md) in enumerate(zip(per_shard, meta)):
        name = f"model-{i + 1:05d}-of-{len(per_shard):05d}.safetensors"
        if i == len(per_shard) - 1:
            t.update({k: ("BF16", v.shape, v.tobytes()) for k, v in norm.items()})
        files[name] = st_bytes(t, md)
        weight_map.update({k: name for k in t})
        total += sum(len(x[2]) for x in t.values())
    if defect and kind == "bf16":   # the last shard cut short
        last = sorted(files)[-1]
        files[last] = files[last][:-100]
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
        indent=2).encode()
    files["config.json"] = json.dumps(config, indent=2).encode()
    return files
