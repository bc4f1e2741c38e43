"""Runs inside a separate environment that has grit-datatype 1.1.0 installed
(it also imports as ``grit``).  Reads cases as JSON on stdin, writes results as
JSON on stdout.  Only the peer's public functions are called."""
import json
import sys

import grit  # grit-datatype

CANON = {n: grit.grade.GRADE_REGISTRY[n] for n in (
    "GRADE_MXFP4", "GRADE_MXFP4_RNE", "GRADE_Q4KS", "GRADE_NVF4", "GRADE_NVF4_RTZ",
    "GRADE_I8S24")}


def _vals(xs):
    return [float(x) for x in xs]


def main():
    cases = json.load(sys.stdin)
    out = []
    for c in cases:
        name, kind = c["grade"], c["kind"]
        r = {"id": c["id"]}
        try:
            desc = grit.desc_for_grade(name).pack()
            r["desc_hex"] = desc.hex()
            g = grit.gid_of(desc, CANON[name], c["shape"])
            r["gid"] = bytes(g).hex() if isinstance(g, (bytes, bytearray)) else "%032x" % g
            if kind == "encode":
                planes = grit.encode(name, _vals(c["values"]))
                r["payload_hex"] = b"".join(bytes(p) for p in planes).hex()
                r["plane_bytes"] = [len(p) for p in planes]
            else:
                raw = bytes.fromhex(c["payload_hex"])
                planes, off = [], 0
                for n in c["plane_bytes"]:
                    planes.append(raw[off:off + n])
                    off += n
                planes = list(planes)
            numel = 1
            for x in c["shape"]:
                numel *= x
            r["decoded_bits"] = grit.decode_bits(name, planes, numel)
        except Exception as e:  # the peer's own error types vary
            r["error"] = f"{type(e).__name__}: {e}"
        out.append(r)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
