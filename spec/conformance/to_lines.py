"""spec/conformance/vectors.json -> the line format spec/conformance/run.c reads.

One record per line, whitespace-separated tokens, hex for every byte string
and for binary32 values (their bit patterns, so that the C side parses no
decimal).  The comparisons all happen in run.c against libgrit; this script
only re-spells the JSON.

    python spec/conformance/to_lines.py [vectors.json] > vectors.txt
"""
from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path


def _f32_hex(x) -> str:
    if isinstance(x, str):
        x = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[x]
    return struct.pack("<f", x)[::-1].hex()          # big-endian hex of the bits


def _hex_or_dash(s: str) -> str:
    return s if s else "-"


def convert(doc: dict) -> list[str]:
    out = []
    for name, g in doc["grades"].items():
        out.append(f"grade {name} {g['grade_id']} {g['canonical']}")
    for r in doc["vectors"]:
        shape = " ".join(str(s) for s in r["shape"])
        out.append(" ".join([
            "vec", r["name"], r["grade"], r["desc_hex"], str(len(r["shape"])), shape,
            *[str(b) for b in r["plane_bytes"]], _hex_or_dash(r["payload_hex"]),
            r["digest"], r["gid"], r["gid_base32"],
            str(len(r["input_f32"])), *[_f32_hex(x) for x in r["input_f32"]],
            str(len(r["decoded_f32_bits"])), *r["decoded_f32_bits"]]))
    for r in doc["negative"]:
        shape = " ".join(str(s) for s in r["shape"])
        out.append(" ".join([
            "neg", r["name"], r["desc_hex"], str(len(r["shape"])), shape,
            *[str(b) for b in r["plane_bytes"]], _hex_or_dash(r["payload_hex"]),
            str(r["check_level"]), _hex_or_dash(r.get("expected_digest") or ""),
            r["expected_error"]]))
    for r in doc["fingerprint"]:
        k = r["kind"]
        if k == "canonicalization":
            out.append(f"canon {r['name']} {r['grade_id']} {r['canonical']}")
            for s in r["spellings"]:
                if s != r["canonical"]:
                    # the registry takes canonical strings only; whitespace
                    # is spelled as hex so the line stays one token
                    out.append(f"noncanon {r['name']} {s.encode().hex()}")
        elif k == "reject":
            out.append(f"reject {r['name']} {r['input'].encode().hex()}")
        elif k == "distinct":
            out.append(f"distinct {r['name']} {r['grade_id_a']} {r['a']} "
                       f"{r['grade_id_b']} {r['b']}")
        elif k == "distinct_gid":
            shape = " ".join(str(s) for s in r["shape"])
            for ab in ("a", "b"):
                out.append(f"gid {r['name']}/{ab} {r['desc_hex_' + ab]} {len(r['shape'])} {shape} "
                           f"{r['gid_' + ab]} {r['gid_' + ab + '_base32']}")
        elif k == "frame_note_split":
            shape = " ".join(str(s) for s in r["shape"])
            for which in ("clear", "set"):
                out.append(f"gid {r['name']}/{which} {r['desc_hex_note_' + which]} "
                           f"{len(r['shape'])} {shape} {r['gid']} {r['gid_base32']}")
        elif k == "crockford":
            out.append(f"b32 {r['name']} {r['gid']} {r['gid_base32']}")
            for s in r["aliases_accepted_on_parse"]:
                out.append(f"b32accept {r['name']} {r['gid']} {s}")
            for s in r["rejected_on_parse"]:
                out.append(f"b32reject {r['name']} {s}")
        else:
            raise SystemExit(f"unknown fingerprint kind {k!r}")
    return out


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("vectors.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    sys.stdout.write("\n".join(convert(doc)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
