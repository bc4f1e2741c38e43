"""What ``grit scan`` reports: the closed sets (category, severity, scan's own
statuses) and one registry of finding codes.

Every finding carries a code (``S101`` …).  A code fixes the finding's
category, its severity (the graded exit code it raises a report to) and its
status, and has one explanation — what it means, why it matters, how to fix
it.  ``grit explain CODE``, the ``code`` of each finding in the JSON
report and the findings section of docs/scan.md (:mod:`grit.scan.docs`) all
come from :data:`REGISTRY`.

Statuses are of two kinds that are never confused: the five §7.1 statuses
(:class:`grit.errors.Status`) for descriptor-vs-bytes results, and
:class:`ScanKind` for the rest of what scan reports.  Both are written into
the JSON report as their names (``SizeMismatch``, ``RoleDrift``).
"""
from __future__ import annotations

import enum
import textwrap
from dataclasses import dataclass, field

from ..errors import Status, pin

__all__ = ["Category", "Severity", "ScanKind", "CATEGORIES", "SECTIONS", "SEVERITY",
           "FindingSpec", "REGISTRY", "CHECK_CODES", "Finding", "MAX_PER_CODE", "status_name",
           "explain",
           "STRUCTURAL", "DISAGREEMENT", "WARNING", "UNPARSED", "NOTE"]


class _StrEnum(str, enum.Enum):
    """A str-valued enum that prints and formats as its value."""

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class Category(_StrEnum):
    """The §13 report sections, in report order."""

    STRUCTURAL = "structural"
    CROSS_FILE = "cross-file"
    DRIFT = "drift"
    ESCAPE_HATCH = "escape-hatch"
    DEEP = "deep"
    INFERRED = "inferred"
    INEXPRESSIBLE = "inexpressible"
    UNREADABLE = "unreadable"


class Severity(enum.IntEnum):
    """The graded exit code a finding raises the report to (§13); 1 is the
    most severe.  NOTE is information that never sets the exit code (what
    scan inferred or could not express of a checkpoint a convention fully
    recognises: docs/scan.md, "Notes")."""

    STRUCTURAL = 1
    DISAGREEMENT = 2
    WARNING = 3
    UNPARSED = 4
    NOTE = 5

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def sets_exit(self) -> bool:
        """Whether a finding of this severity counts toward the exit code."""
        return self is not Severity.NOTE


STRUCTURAL, DISAGREEMENT, WARNING, UNPARSED, NOTE = Severity

#: severity -> its name in the report
SEVERITY: dict[Severity, str] = {s: s.label for s in Severity}


class ScanKind(_StrEnum):
    """Scan's own statuses: what a finding reports when it is not one of the
    five §7.1 statuses (those stay :class:`grit.errors.Status`)."""

    BAD_HEADER = "BadHeader"
    BAD_ANNOTATION = "BadAnnotation"
    OVERLAP = "Overlap"
    TRUNCATED = "Truncated"
    SUFFIX_MISMATCH = "SuffixMismatch"
    GID_MISMATCH = "GidMismatch"
    ROLE_DRIFT = "RoleDrift"
    ARTIFACT_DRIFT = "ArtifactDrift"
    CONFIG_MISMATCH = "ConfigMismatch"
    FUSED_MISMATCH = "FusedMismatch"
    ASSUMED = "Assumed"
    PROBE = "Probe"
    PROBE_SKIPPED = "ProbeSkipped"
    UNVERIFIED = "Unverified"
    INFERRED = "Inferred"
    COMPANION = "Companion"
    READ_DIFFERENTLY = "ReadDifferently"
    SCALE_DIRECTION = "ScaleDirection"
    INEXPRESSIBLE = "Inexpressible"
    UNRECOGNISED = "Unrecognised"
    UNREADABLE = "Unreadable"


def status_name(status: Status | ScanKind) -> str:
    """The name a status has in the report."""
    return status.spec_name if isinstance(status, Status) else status.value


# category -> (title, the §13 item it implements)
CATEGORIES: dict[Category, str] = {
    Category.STRUCTURAL: "1. Descriptor-vs-bytes violations (§7.3, on-disk plane lengths)",
    Category.CROSS_FILE: "2. Cross-file gid disagreement (same tensor name, different gid)",
    Category.DRIFT: ("3. Grade drift and checkpoint contracts (roles, fused parts, the "
                     "quantisation config)"),
    Category.ESCAPE_HATCH: "4. Escape-hatch exposure (NOTE_ASSUMED, by producer tag)",
    Category.DEEP: "5. Deep checks (level-2 digest / metadata order, level-3 probes)",
    Category.INFERRED: "Inferred descriptors (ggml block types without GRIT annotations)",
    Category.INEXPRESSIBLE: "Tensors GRIT v1 cannot express or grit does not recognise",
    Category.UNREADABLE: "Inputs that could not be read",
}

#: the spec sections a category implements
SECTIONS: dict[Category, str] = {Category.STRUCTURAL: "§13.1", Category.CROSS_FILE: "§13.2",
            Category.DRIFT: "§13.3", Category.ESCAPE_HATCH: "§13.4, §12.5",
            Category.DEEP: "§13.5", Category.INFERRED: "§13",
            Category.INEXPRESSIBLE: "§13", Category.UNREADABLE: "§13"}


# ---------------------------------------------------------------------------
# the registry


@dataclass(frozen=True)
class FindingSpec:
    """One finding code.  ``status`` is None where the status is the one the
    §7.3 check returned (a ``deep`` content failure)."""

    code: str
    category: Category
    severity: Severity
    status: Status | ScanKind | None
    title: str
    what: str
    why: str
    fix: str


def _specs(*rows: tuple) -> dict[str, FindingSpec]:
    out: dict[str, FindingSpec] = {}
    for row in rows:
        spec = FindingSpec(*row)
        pin(spec.code not in out, f"finding code {spec.code} registered twice")
        out[spec.code] = spec
    return out


C, V, S, K = Category, Severity, Status, ScanKind

REGISTRY: dict[str, FindingSpec] = _specs(
    # -- 1. structural: the descriptor against the on-disk plane lengths
    ("S101", C.STRUCTURAL, V.STRUCTURAL, S.SIZE_MISMATCH,
     "plane lengths disagree with the §7.3 size equations",
     "A GRIT tensor's plane (or concatenated payload) holds a different number of bytes "
     "on disk than the size equations derive from its descriptor and shape — exactly, "
     "too large is as wrong as too small. The lines give the derivation and, for a "
     "truncated shard, how many bytes are missing.",
     "A reader trusting the descriptor reads past the plane or misses bytes: wrong group "
     "size, forgotten padding, dense/sparse confusion or a truncated download decode to "
     "garbage without this check.",
     "Re-fetch a truncated shard; otherwise re-export with the group size (k0), container "
     "and sparsity the bytes were actually written with."),
    ("S102", C.STRUCTURAL, V.STRUCTURAL, S.GRADE_UNKNOWN,
     "descriptor does not denote a grade this process knows",
     "§7.3 steps 1–2 fail: the frame is not a v1 frame (magic, version, reserved bits, "
     "inconsistent flags), its grade_id is not registered, or its fields disagree with "
     "the grade's canonical string. An inferred descriptor that fails here names the "
     "convention it was inferred from.",
     "A descriptor whose grade is unknown cannot say what its bytes mean; every later "
     "check would be guesswork.",
     "Carry the canonical grade string in the file (`grit.save` does), register it with "
     "`grit.register_grade`, or fix the descriptor field the message names."),
    ("S103", C.STRUCTURAL, V.STRUCTURAL, S.PLACEMENT_UNKNOWN,
     "placement word not registered, or aux placement without an aux plane",
     "§7.3 step 3 fails: a placement word is not UNSPECIFIED, a registered class-0x1 "
     "word, class 0x8 or class 0xF; or placement_meta and the presence of an aux plane "
     "disagree.",
     "The bytes' order is unknown, so no kernel can be matched to them and relayout "
     "cannot run.",
     "Carry the layout expression of a hashed word in the file (`grit.save` writes it), "
     "relayout to a registered placement, or fix placement_meta."),
    ("S104", C.STRUCTURAL, V.STRUCTURAL, K.UNREADABLE,
     "the level-1 check of an annotated tensor could not run",
     "A GRIT-annotated tensor was read but its check raised an error without a §7.5 "
     "detail (for example a shape the check refuses as an argument).",
     "The tensor was not checked at all.",
     "Look at the message: the annotation's shape or descriptor is usually malformed."),
    ("S111", C.STRUCTURAL, V.STRUCTURAL, S.GRADE_UNKNOWN,
     "recorded descriptor or shape cannot be read",
     "The GRIT annotation records a descriptor that is not 128 hex digits, or a shape "
     "that is not a list of at most 64 extents in [0, 2^63) (safetensors `__grit__`; GGUF "
     "`grit.desc.`/`grit.shape.` entries).",
     "Without a readable descriptor the tensor has no contract to check; a reader "
     "either refuses the file or guesses.",
     "Re-export the file with `grit.save` / `grit.save_gguf`, which write both."),
    ("S112", C.STRUCTURAL, V.STRUCTURAL, S.GRADE_UNKNOWN,
     "a grade string the file carries does not parse",
     "A canonical grade string in the annotation (the `__grit__` grades list, a tensor's "
     "grade, a GGUF `grit.grade.` entry) is not a valid `grit1(...)` string.",
     "The grade cannot be registered, so descriptors naming its id stay unknown.",
     "Fix the string (`grit grade TEXT` canonicalises it and says what is wrong)."),
    ("S113", C.STRUCTURAL, V.STRUCTURAL, S.SIZE_MISMATCH,
     "descriptor map names a tensor the file lacks",
     "A `__grit__` descriptor map gives a descriptor for a tensor name the header has no "
     "entry for: zero bytes are present where the descriptor requires a payload.",
     "The GRIT tensor is missing from the file (a renamed or dropped tensor).",
     "Rename the map entry to the tensor that holds the payload, or restore the tensor."),
    ("S114", C.STRUCTURAL, V.STRUCTURAL, S.DIGEST_MISMATCH,
     "recorded digest is not a 16-byte digest",
     "A `grit.digest.<tensor>` entry (safetensors `__metadata__`, GGUF KV) is neither 26 "
     "Crockford base32 digits nor 32 hex digits.",
     "--deep cannot verify the tensor's bytes against it.",
     "Record `grit.base32_encode(array.digest)`."),
    ("S115", C.STRUCTURAL, V.STRUCTURAL, K.UNREADABLE,
     "the `__grit__` metadata is not JSON",
     "The `__grit__` value in a safetensors file's `__metadata__` is not a JSON document (or has "
     "duplicate keys). scan then treats the file as one without GRIT metadata.",
     "The file claims GRIT tensors but no reader can find them.",
     "Re-export with `grit.save`."),
    ("S116", C.STRUCTURAL, V.STRUCTURAL, K.BAD_ANNOTATION,
     "GRIT annotation malformed or contradicting the file",
     "The `__grit__` document or the GGUF `grit.*` entries are well-formed JSON / KV but "
     "break the file format (docs/file-format.md): an unknown schema, version or key; a "
     "layout expression that does not hash to its word; a grade string whose id is not "
     "the descriptor's; a recorded gid that is not the gid of the descriptor, grade and "
     "shape; a plane naming no tensor, a tensor claimed by two GRIT tensors, "
     "a plane that is not U8 [n]; a GRIT tensor name colliding with a file tensor; an "
     "annotation naming no tensor.",
     "`grit.load` refuses the file; other readers may pair the wrong bytes with a "
     "descriptor.",
     "Re-export with `grit.save` / `grit.save_gguf`, or fix the entry the message names."),
    ("S121", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "header entry is not an object of dtype, shape and data_offsets",
     "A safetensors header entry is not a JSON object, or has keys besides dtype, shape "
     "and data_offsets.",
     "Readers disagree on such an entry; the official library rejects it.",
     "Rewrite the header with a conforming writer."),
    ("S122", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "unknown safetensors dtype",
     "A header entry names a dtype that is not a safetensors dtype (the line lists the "
     "names known).",
     "No reader knows the element size, so the entry's byte count cannot be checked.",
     "Use one of the listed names."),
    ("S123", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "header entry shape is not a list of non-negative integers",
     "A header entry's shape is not a list of at most 64 integers, or has a negative "
     "dimension or one past 2^63 − 1.",
     "The element count, hence the byte count, is undefined.",
     "Rewrite the header with the tensor's real shape."),
    ("S124", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "header entry has no valid data_offsets",
     "A header entry's data_offsets is not a list of two integers 0 ≤ begin ≤ end.",
     "The tensor's bytes cannot be located.",
     "Rewrite the header; offsets are relative to the byte after the header."),
    ("S125", C.STRUCTURAL, V.STRUCTURAL, S.SIZE_MISMATCH,
     "tensor byte span differs from numel × item size",
     "A plain (non-GRIT) tensor's data_offsets span a different number of bytes than its "
     "shape and dtype require (the line gives numel × item size; a product past 2^64 is "
     "reported without being formed).",
     "The header lies about the tensor: readers either refuse the file or read "
     "neighbouring bytes.",
     "Rewrite the header with the real shape or offsets."),
    ("S126", C.STRUCTURAL, V.STRUCTURAL, K.OVERLAP,
     "two tensors share bytes",
     "The data_offsets of two header entries overlap (both names and the shared byte "
     "count are given; past 20 pairs per file only a count, in `omitted`).",
     "Every byte belongs to at most one tensor; an overlap means one of the entries "
     "points at the wrong bytes.",
     "Rewrite the header with disjoint offsets."),
    ("S127", C.STRUCTURAL, V.STRUCTURAL, K.TRUNCATED,
     "plain tensor bytes run past the end of the file",
     "A plain safetensors tensor's data_offsets end beyond the file (GRIT planes are "
     "measured by the size equations instead, S101, and reported here only when the bytes "
     "present satisfy them while the declared span runs on; GGUF tensors are S807).",
     "A truncated download or a lying header: the missing bytes read as garbage or fail.",
     "Re-fetch the file."),
    ("S128", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "`__metadata__` value is not a string",
     "A safetensors `__metadata__` entry holds a JSON value other than a string.",
     "The format allows string values only; the official library rejects the file.",
     "Store the value as a string (JSON-encode it)."),
    ("S129", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "data buffer has bytes no tensor covers",
     "The safetensors data buffer has a gap between two tensors' data_offsets, or bytes "
     "after the last tensor (the message names the first gap; the line counts them all).",
     "The format indexes every byte of the buffer, without holes (which keeps a file from "
     "being a polyglot); the official library and `grit.load` refuse the file.",
     "Rewrite the file with a conforming writer."),
    ("S131", C.STRUCTURAL, V.WARNING, K.SUFFIX_MISMATCH,
     "file content is the other format from its suffix",
     "A file named .gguf holds safetensors, or one named .safetensors holds GGUF; scan "
     "reads it by its content.",
     "A reader that trusts the suffix rejects the file.",
     "Rename the file."),
    ("S141", C.STRUCTURAL, V.STRUCTURAL, K.OVERLAP,
     "GGUF tensors share bytes",
     "Two GGUF tensor infos place their tensors (offset, and the size fixed by the ggml "
     "type and dims) over common bytes; both names and the shared byte count are given. "
     "The file's other tensors are read and checked.",
     "Every byte belongs to at most one tensor; an overlap means one of the offsets "
     "points at the wrong bytes. `grit.load` refuses the file.",
     "Re-export the file with a conforming writer (gguf-py's GGUFWriter)."),
    ("S142", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "GGUF tensor offset not a multiple of the alignment",
     "A GGUF tensor's data offset is not a multiple of the file's alignment "
     "(`general.alignment`, 32 when absent).",
     "ggml's loader refuses the file; memory-mapped readers may read misaligned blocks. "
     "`grit.load` refuses the file.",
     "Re-export the file with a conforming writer."),
    ("S143", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "GGUF tensor not at the offset ggml requires",
     "A GGUF tensor's data offset differs from the sum of the sizes of the tensors before "
     "it in tensor-info order, each padded to the alignment — where ggml's loader "
     "requires it: the offsets are out of order or leave a gap. After a tensor of unknown "
     "size (S806) the rule restarts at the next tensor.",
     "llama.cpp refuses the file (`tensor … has offset …, expected …`); `grit.load` "
     "refuses it too.",
     "Re-export the file with a conforming writer."),
    # -- 1. structural, checkpoint-wide: a sharded checkpoint's index and shards
    ("S150", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "shard index cannot be read",
     "A `*.safetensors.index.json` is not a JSON object with a `weight_map` of tensor name "
     "→ shard file name (in the index's folder), or its `metadata.total_size` is not a "
     "byte count.",
     "Loaders find every tensor of a sharded checkpoint through the index; without one "
     "they load nothing, or guess.",
     "Rewrite the index (`save_pretrained` / huggingface_hub's `split_state_dict_into_shards` "
     "write it)."),
    ("S151", C.STRUCTURAL, V.STRUCTURAL, K.TRUNCATED,
     "index names a shard that is not there",
     "The index's `weight_map` maps tensors to a shard file that does not exist beside it "
     "(the message counts the tensors and names the first).",
     "Loading those tensors fails, or a loader that tolerates it leaves them at their "
     "initial values.",
     "Fetch the missing shard."),
    ("S152", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "tensor in the index is missing from its shard",
     "The index maps a tensor to a shard whose header has no such tensor (the message says "
     "which shard holds it, if any does).",
     "The loader opens the named shard and fails, or skips the tensor and runs without it.",
     "Regenerate the index from the shards' headers, or re-export the shard."),
    ("S153", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "shard tensor not in the index",
     "A shard of an indexed checkpoint holds a tensor the index's `weight_map` does not list "
     "(or lists in another shard).",
     "Loaders read tensors through the index: this one is silently never loaded.",
     "Regenerate the index from the shards' headers."),
    ("S154", C.STRUCTURAL, V.STRUCTURAL, K.OVERLAP,
     "tensor in two shards",
     "Two shards of one checkpoint both hold a tensor of the same name (both shards are "
     "named).",
     "Which copy a loader uses depends on the loader and the shard order; the copies may "
     "differ.",
     "Keep one copy and regenerate the index."),
    ("S155", C.STRUCTURAL, V.WARNING, K.BAD_HEADER,
     "index total_size differs from the shards' tensor bytes",
     "The index's `metadata.total_size` differs from the sum of the byte spans of the "
     "tensors in its shards (checked when every shard it names was read).",
     "Loaders use it to plan memory and to check a download; a wrong value usually means "
     "the index was written for other shards.",
     "Regenerate the index from the shards."),
    ("S156", C.STRUCTURAL, V.STRUCTURAL, K.TRUNCATED,
     "shards of one checkpoint are short",
     "One or more shards of a checkpoint end before their headers' last data offset: how "
     "many of the shards, the bytes missing in all and per shard, and the tensors cut. "
     "One root cause, one finding: each shard's own findings of the tensors cut (S127; "
     "S101 for a GRIT tensor whose plane was cut) are nested under it as its "
     "consequences.",
     "A loader reads zeros or fails part-way; the symptom looks like a runtime bug, not a "
     "download that stopped short.",
     "Re-fetch the shards named."),
    ("S157", C.STRUCTURAL, V.STRUCTURAL, K.TRUNCATED,
     "shard series incomplete",
     "Files named `<stem>-NNNNN-of-MMMMM` are the members 1…M of one checkpoint: a member is "
     "missing from the folder, or the members disagree on M.",
     "The checkpoint lacks the tensors of the missing member.",
     "Fetch the missing shard, or rename the shards consistently."),
    # -- 1. structural, checkpoint-wide: a GGUF model in gguf-split's shards
    ("S160", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "split GGUF shard's split entries cannot be read",
     "A GGUF file of a split model (llama.cpp's gguf-split: `PREFIX-0000i-of-0000N.gguf`) "
     "carries `split.count` but its `split.no`, `split.count` or `split.tensors.count` is "
     "absent, not an integer or out of range (`split.tensors.count` within the tensor cap, "
     "`split.count` within 1…65535 and what the tensors allow, `split.no` below "
     "`split.count`), or a file of the series lacks the entries altogether.",
     "llama.cpp finds a model's shards and counts its tensors by these entries; it refuses "
     "the model (`grit convert` and `grit.load` do too).",
     "Re-split the model with `llama-gguf-split` (or gguf-py's `GGUFWriter(split_max_tensors"
     "=…)`)."),
    ("S161", C.STRUCTURAL, V.STRUCTURAL, K.TRUNCATED,
     "split GGUF model has shards missing",
     "A shard of a split GGUF model says the model has `split.count` = N shards, and some of "
     "`PREFIX-00001-of-0000N.gguf` … `PREFIX-0000N-of-0000N.gguf` are not beside it (the "
     "message and `detail.numbers` say which). The shards present are still scanned, "
     "tensor by tensor.",
     "llama.cpp refuses to load the model; the missing shards' tensors are nowhere.",
     "Fetch the missing shards."),
    ("S162", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "split GGUF shards disagree on the model's counts",
     "A shard's `split.count` or `split.tensors.count` differs from the first shard's.",
     "The shards were not split from one model, or one was rewritten: llama.cpp refuses "
     "the model.",
     "Re-split the model, or fetch the shard again."),
    ("S163", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "split GGUF shard's number is not its name's",
     "A shard's `split.no` (from 0) is not the number in its file name (from 1), or a file "
     "whose `split.count` is over 1 is not named `PREFIX-0000i-of-0000N.gguf` with its "
     "`split.no` + 1 and `split.count`.",
     "llama.cpp opens shard i by its name: a renamed shard puts tensors in the wrong place "
     "or makes the model unloadable.",
     "Rename the shard to the name its split entries give."),
    ("S164", C.STRUCTURAL, V.STRUCTURAL, K.OVERLAP,
     "tensor in two shards of a split GGUF model",
     "Two shards of one split GGUF model both hold a tensor of the same name (both shards "
     "are named).",
     "Which copy a loader uses depends on the loader; llama.cpp refuses a duplicated tensor "
     "name.",
     "Re-split the model from its unsplit file."),
    ("S165", C.STRUCTURAL, V.STRUCTURAL, K.BAD_HEADER,
     "split GGUF shards' tensors are not split.tensors.count",
     "The shards of a split GGUF model hold more tensors in all than their "
     "`split.tensors.count` says (found as soon as the shards read so far exceed it), or, "
     "every shard present and read, fewer; for `split.count` 1, the file's own tensors.",
     "llama.cpp checks the count when it loads the shards and refuses the model.",
     "Re-split the model from its unsplit file."),
    # -- 2. cross-file
    ("S201", C.CROSS_FILE, V.DISAGREEMENT, K.GID_MISMATCH,
     "same tensor name, different gid across files",
     "A tensor with the same name has different gids in two files (tools, revisions); "
     "the detail carries the field-by-field grit explain diff and its verdict (e.g. same "
     "decode, different encode).",
     "Two artifacts that ought to be the same operand are not: a tool that loads one "
     "and produces garbage with the other is reading a different contract.",
     "`grit explain FILE_A:TENSOR FILE_B:TENSOR` shows the fields; re-export one side with "
     "the other's grade, or record a supersedes edge if the decodes are equal."),
    # -- 3. drift
    ("S301", C.DRIFT, V.DISAGREEMENT, K.ROLE_DRIFT,
     "one role carries several grades in one checkpoint",
     "Within one checkpoint, tensors of the same role (the name without layer indices) "
     "carry more than one grade_id, and no declared recipe explains the mix.",
     "The shape of a half-converted checkpoint: some layers were re-quantised and "
     "others not.",
     "Finish or undo the conversion; if the mix is intended, record it (llama.cpp's "
     "`general.file_type` does for its recipes, S302)."),
    ("S302", C.DRIFT, V.WARNING, K.ROLE_DRIFT,
     "one role carries several grades, mixed by design",
     "As S301, but the GGUF file declares a llama.cpp mixed recipe (`general.file_type`) "
     "and every ggml type seen is one that recipe assigns (its K-quant types and their "
     "row-size fallbacks).",
     "Expected of the recipe; reported so that the mix stays visible.",
     "Nothing to fix."),
    ("S303", C.DRIFT, V.WARNING, K.ARTIFACT_DRIFT,
     "roles use different grades in one checkpoint",
     "Within one checkpoint, roles that are each internally consistent use different "
     "grades (mixed precision by role, e.g. lm_head at another grade).",
     "Often intended; worth a look when it is not.",
     "Nothing to fix if intended."),
    # -- 3. config vs tensors, fused parts (checkpoint-wide contracts)
    ("S310", C.DRIFT, V.DISAGREEMENT, K.CONFIG_MISMATCH,
     "declared format is not what the shards hold",
     "The `quantization_config` (config.json; ModelOpt hf_quant_config.json) declares a "
     "storage format for a module — compressed-tensors `format` of its config group or of "
     "the whole config, ModelOpt `quant_algo`, GPTQ/AWQ — but the module's tensors on disk "
     "are another layout (e.g. `pack-quantized` declared, `weight`/`weight_scale` FP8 "
     "shipped), or `quantization_status` is not `compressed` while packed tensors are "
     "shipped.",
     "The loader picks its decompressor from the declared format: it unpacks bytes that "
     "are not packed, or fails, or leaves the checkpoint as garbage without an error.",
     "Re-save the config with the format the tensors were written in "
     "(`ModelCompressor.update_config`), or re-export the tensors."),
    ("S311", C.DRIFT, V.DISAGREEMENT, K.CONFIG_MISMATCH,
     "declared group size / strategy disagrees with the scale plane",
     "The config's `group_size` / `strategy` (compressed-tensors weights args, GPTQ/AWQ "
     "`group_size`, ModelOpt `group_size`) predicts a number of scales per row that the "
     "module's scale tensor does not have (the lines give in_features / group_size against "
     "the scale tensor's shape).",
     "A kernel configured from the config walks the scales with the wrong stride: every "
     "group after the first is scaled by the wrong value.",
     "Fix `group_size` in the config to in_features / scale columns, or re-export."),
    ("S312", C.DRIFT, V.DISAGREEMENT, K.CONFIG_MISMATCH,
     "declared element type / bits disagree with the tensors",
     "The config's `type`/`num_bits` (compressed-tensors), `bits` (GPTQ/AWQ) or "
     "`quant_algo` (ModelOpt) names one element type, and the module's tensors hold "
     "another (e.g. a declared FP8 checkpoint whose tensors read as 4-bit affine).",
     "A runtime that trusts the config reads the codes as the wrong type and produces "
     "garbage instead of an error.",
     "Correct the config to the element the tensors hold, or re-export."),
    ("S313", C.DRIFT, V.DISAGREEMENT, K.CONFIG_MISMATCH,
     "config_groups overlap with different schemes",
     "A module matches targets of two or more compressed-tensors `config_groups` whose "
     "weights schemes differ. compressed-tensors applies one: the first of its matched "
     "targets ordered exact names, then `re:` patterns (sorted), then class names; for a "
     "target string repeated across groups the later group. The lines say which group "
     "wins for which modules.",
     "The modules get the winning group's type; a config author who expected the other "
     "group gets the wrong quantisation for them (the issue's case: 8 layers).",
     "Make the targets disjoint (narrow the `re:` patterns or add the modules to one "
     "group's exact names)."),
    ("S314", C.DRIFT, V.WARNING, K.CONFIG_MISMATCH,
     "config target or ignore entry matches no module",
     "A `config_groups` target or an `ignore` / `exclude_modules` entry matches no module "
     "of the checkpoint (class names such as `Linear` match every 2-D weight).",
     "Usually a renamed module or a pattern typo; the scheme then silently applies to "
     "fewer modules than intended.",
     "Fix the pattern, or remove it."),
    ("S315", C.DRIFT, V.DISAGREEMENT, K.CONFIG_MISMATCH,
     "ignored layer is quantised on disk",
     "A module the config lists in `ignore` (ModelOpt `exclude_modules`, GPTQ/AWQ "
     "`modules_to_not_convert`) ships quantised tensors (packed weights, scales).",
     "The loader builds a dense layer for it and reads packed codes as weights.",
     "Remove the module from the ignore list, or ship its dense weight."),
    ("S316", C.DRIFT, V.DISAGREEMENT, K.CONFIG_MISMATCH,
     "targeted layer is not quantised on disk",
     "A module matched by a quantisation scheme (and not ignored) ships only a dense "
     "floating-point weight.",
     "The loader expects packed codes and scales for it: it fails, or reads the dense "
     "weight as codes.",
     "Add the module to `ignore`, or quantise it."),
    ("S317", C.DRIFT, V.WARNING, K.CONFIG_MISMATCH,
     "act-order declared (§0.3 c)",
     "The config declares activation ordering — GPTQ `desc_act: true`, compressed-tensors "
     "`actorder: group` — or the modules ship a `g_idx` / `weight_g_idx`: the input "
     "columns are assigned to groups by a permutation, which §0.3 (c) leaves out of v1 "
     "(groups are contiguous runs, g0 = lin(i)/k0). `actorder: weight` only reorders "
     "calibration and changes nothing on disk; it is not reported.",
     "Kernels that assume contiguous groups read the wrong scale for every permuted "
     "column; v1 cannot describe the permutation.",
     "Re-quantise without act-order, or permute the columns into group order at export "
     "(and the previous layer's rows to match)."),
    ("S318", C.DRIFT, V.WARNING, K.CONFIG_MISMATCH,
     "declared group size no kernel serves",
     "The group size of a scheme is not one the runtime kernels for its type serve "
     "(docs/spec-decisions.md lists the table and its sources): int4 GPTQ/AWQ/pack-"
     "quantized Marlin kernels serve -1 (channel), 32, 64 and 128; NVFP4 serves 16; "
     "MXFP4 32.",
     "The checkpoint loads only through a slow fallback path, or not at all.",
     "Re-quantise with a served group size."),
    ("S319", C.DRIFT, V.WARNING, K.CONFIG_MISMATCH,
     "quantization_config does not fit the compressed-tensors schema",
     "A field of the compressed-tensors config (QuantizationConfig, QuantizationScheme, "
     "QuantizationArgs) is unknown where the schema forbids extra fields, or holds a "
     "value the schema refuses (an unknown strategy, type, status or format; a group_size "
     "below -1; a strategy the group_size contradicts).",
     "compressed-tensors refuses to load the config (pydantic validation error), or reads "
     "a default where the author meant the misspelt field.",
     "Fix the field the message names (the schema's field names and defaults are in "
     "grit.conventions.compressed_tensors.CT_FIELDS)."),
    ("S320", C.DRIFT, V.DISAGREEMENT, K.FUSED_MISMATCH,
     "tensors a runtime fuses carry different grades",
     "Tensors that runtimes fuse into one matmul — the q/k/v projections of one attention "
     "block, gate/up of one MLP, the experts of one MoE layer, by their HF module names "
     "(vLLM, SGLang, TensorRT-LLM load them as one qkv_proj / gate_up_proj) — do not share "
     "a grade. llama.cpp's GGUF tensors (`blk.N.attn_q/k/v`, `ffn_gate/up`) are not "
     "compared: llama.cpp multiplies each by its own matmul, so their types may differ.",
     "A fused kernel takes one grade for all parts: the others are decoded with the wrong "
     "element type or group size.",
     "Re-quantise the parts with one scheme."),
    ("S321", C.DRIFT, V.DISAGREEMENT, K.FUSED_MISMATCH,
     "tensors a runtime fuses have different per-tensor scales",
     "The per-tensor / global scales of parts a runtime fuses differ — NVFP4 "
     "`weight_scale_2` (ModelOpt) or `weight_global_scale` (compressed-tensors), an FP8 "
     "per-tensor `weight_scale` — the spread (max/min) and the names are given. (llama.cpp "
     "applies a GGUF NVFP4 companion `.scale` to its own tensor's matmul: not compared.)",
     "The fused kernel has one scale for all parts: runtimes warn and use one (usually the "
     "max), so the other parts decode scaled by the wrong value — by up to the spread.",
     "Re-quantise the fused parts with one shared global scale (llm-compressor and "
     "ModelOpt both have an option to fuse the global scales of q/k/v and gate/up)."),
    ("S322", C.DRIFT, V.DISAGREEMENT, K.SCALE_DIRECTION,
     "per-tensor scale stored in the other convention's direction",
     "An NVFP4 per-tensor scale reads as the other convention's direction: "
     "compressed-tensors' `weight_global_scale` is a divisor g = 448·6/amax (≫ 1 for any "
     "weight with amax below 2688), ModelOpt's `weight_scale_2` a multiplier amax/2688 "
     "(< 1). A divisor below 1, or a multiplier above 1, means an amax above 2688 under the "
     "convention's own reading and an ordinary one under the other: the value was copied "
     "between the conventions without being inverted. The lines give both readings.",
     "The runtime decodes every element of the tensor scaled by value² (or 1/value²): "
     "garbage output without an error.",
     "Store 1/value (re-export through a converter that inverts the per-tensor scale), or "
     "declare the convention the value was written for."),
    # -- 4. escape hatch
    ("S401", C.ESCAPE_HATCH, V.WARNING, K.ASSUMED,
     "tensors carry `NOTE_ASSUMED`",
     "Tensors whose descriptor has `NOTE_ASSUMED` set — a placement asserted with "
     "`assume_placement`, never verified — one finding per producer tag and file.",
     "An assumption made once in a conversion script stays invisible downstream unless "
     "it is reported (§12.5).",
     "`grit.verify_placement(x, p)` reads the bytes, proves the claim and clears the flag."),
    # -- 5. deep
    ("S501", C.DEEP, V.STRUCTURAL, None,
     "plane contents disagree with the descriptor (--deep)",
     "--deep only: §7.3 step 5 fails — the planes do not hash to the recorded digest, "
     "or ASC_LSB sparse metadata is out of order. The status is the one the check "
     "returned (DigestMismatch).",
     "The bytes changed after the digest was taken (corruption, a partial write, a "
     "different tensor), or a sparse kernel would read disordered metadata.",
     "Re-fetch the bytes, or re-sort the metadata."),
    ("S502", C.DEEP, V.WARNING, K.PROBE,
     "level-3 decode-sanity probe warning (--deep)",
     "--deep only: a §7.6 probe found a structurally valid tensor whose decoded values "
     "look wrong: NaN scales, one shared-exponent scale for groups whose elements "
     "span several binades, int8 elements that never approach ±127.",
     "A descriptor that lies about its scale rule or plane order passes every size "
     "check; the probes catch some of those lies. Advisory: a probe never fails a load.",
     "Compare against the producer's dequantisation; a mislabelled plane is the usual "
     "cause."),
    ("S503", C.DEEP, V.WARNING, K.PROBE_SKIPPED,
     "level-3 probes could not run (--deep)",
     "--deep only: the tensor passed level 1 but its planes could not be read for the "
     "probes (e.g. an opaque placement, an inferred tensor whose planes cannot be built).",
     "The tensor's values were not sanity-checked.",
     "None needed; the message says why."),
    ("S504", C.DEEP, V.WARNING, K.UNVERIFIED,
     "a level-2 content check could not run (--deep)",
     "--deep only: the tensor passed level 1, but a §7.3 step-5 content check could not "
     "read the bytes it checks, e.g. SPORDER_ASC_LSB metadata under an opaque meta "
     "placement, or inside an interleaved data plane whose expression grit cannot take "
     "apart.",
     "The promise the descriptor makes about those bytes (ordered sparse metadata, §7.4) "
     "was not verified; a kernel relying on it would read whatever is there.",
     "Relayout to a placement grit reads (grit.relayout) and scan again, or verify the "
     "bytes with the vendor's tool."),
    ("S505", C.DEEP, V.DISAGREEMENT, K.READ_DIFFERENTLY,
     "NVFP4 scale bytes ggml and GRIT read differently (--deep)",
     "--deep only: an NVFP4 tensor's E4M3 block scales include bytes with bit 7 set or "
     "the code 0x7F. ggml reads them as UE4M3 (bit 7 ignored, 0x7F as 0); GRIT's E4M3 "
     "reads bit 7 as the sign and 0x7F/0xFF as NaN (docs/placements.md, \"GGUF\"). ggml's "
     "own quantiser never writes them.",
     "The blocks under those scales decode to different values in llama.cpp and in every "
     "GRIT reader — negated, NaN, or zero — with no error from either.",
     "Requantize the tensor from its source, or clear bit 7 of the scales if the producer "
     "meant unsigned scales."),
    # -- inferred / inexpressible
    ("S601", C.INFERRED, V.NOTE, K.INFERRED,
     "descriptor inferred from a safetensors convention",
     "A safetensors file without GRIT metadata holds weights of a recognised convention "
     "(compressed-tensors, ModelOpt, GPTQ, torchao, …); their descriptor was inferred from "
     "the layout and the config, one finding per convention and grade per file "
     "(docs/scan.md, \"Recognising checkpoints without GRIT metadata\"). A note: the "
     "inferred descriptor is checked like a recorded one (a failure is its own finding, "
     "S101…), so this finding never sets the exit code.",
     "The contract is scan's reading of the file, not a claim the file makes; the file is "
     "what its convention's loaders (vLLM, transformers, compressed-tensors) read.",
     "None needed: keep the checkpoint in its convention. Only where the consumers read "
     "GRIT, `grit convert SRC DST --to grit` writes a copy with the contract recorded; "
     "loaders without grit cannot read that copy."),
    ("S602", C.INFERRED, V.NOTE, K.INFERRED,
     "descriptor inferred from the ggml block type",
     "A GGUF tensor without a GRIT annotation: its descriptor was inferred from its ggml "
     "block type, one finding per type per file. A note, as S601: the ggml type fixes "
     "the layout, and the inferred descriptor is checked like a recorded one.",
     "As S601; the file is what llama.cpp reads.",
     "None needed: keep the file as llama.cpp wrote it."),
    ("S603", C.INFERRED, V.WARNING, K.COMPANION,
     "NVFP4 tensor without a usable companion scale",
     "llama.cpp's convert_hf_to_gguf keeps an NVFP4 tensor's per-tensor scale in an F32 "
     "companion tensor <base>.scale (or <name>.scale), which grit.load makes the array's "
     "level-1 scale. This tensor has none, or one grit cannot attach (not F32, or a shape "
     "that is neither one value nor a leading part of the tensor's); the message says "
     "which.",
     "Its values are the blocks alone. The converter leaves the companion out when the "
     "scale is 1.0; otherwise every value is off by the missing factor (thousands of "
     "times too large for a ModelOpt checkpoint), silently.",
     "Check the source checkpoint's weight_scale_2 (ModelOpt) or weight_global_scale "
     "(compressed-tensors); re-convert with a converter that writes the companion."),
    ("S604", C.INFERRED, V.WARNING, K.COMPANION,
     "NVFP4 companion scale: GRIT's decode rounds differently from ggml's",
     "The tensor and its companion scale are one two-level GRIT array. GRIT multiplies "
     "the scales first, f32(f32(s1·s0)·e) (§8.1, outermost first); ggml scales the matmul "
     "result, which elementwise is f32(f32(s0·e)·s1), one rounding. For this scale value, "
     "some (E4M3 scale, E2M1 code) pairs round to different binary32 values (1 ulp); the "
     "finding counts them.",
     "grit.decode and llama.cpp agree to 1 ulp on those elements, not bit for bit; both "
     "are correct readings of their own contracts.",
     "None needed; compare with a 1-ulp tolerance where the pairs occur."),
    ("S605", C.INFERRED, V.DISAGREEMENT, K.COMPANION,
     "NVFP4 companion scale under a name llama.cpp does not load",
     "An NVFP4 tensor's per-tensor scale is stored as `<name>.scale` (e.g. "
     "`blk.3.ffn_gate.weight.scale`); llama.cpp creates the companion as `<base>.scale` "
     "(`blk.3.ffn_gate.scale`, `tn(…, \"scale\", i)` in its model loader) and treats it as "
     "optional. grit.load attaches either name; the lines give both.",
     "llama.cpp does not find the companion and runs the tensor without its per-tensor "
     "scale: every value off by that factor, with no error.",
     "Rename the companion to `<base>.scale` (what llama.cpp's converter writes)."),
    ("S701", C.INEXPRESSIBLE, V.NOTE, K.INEXPRESSIBLE,
     "safetensors weights GRIT v1 cannot express",
     "Recognised weights whose layout v1 cannot express (codebooks, act-order, dense "
     "zero points, 2-D blocks, FNUZ floats, …), with the §0.3 item and the arithmetic; "
     "never silently skipped. A note: a convention recognised the weights, nothing in the "
     "checkpoint is wrong, so it never sets the exit code (the report's coverage counts "
     "their bytes as not checkable).",
     "These tensors were not checked.",
     "None in v1; the reason names what a future version would need."),
    ("S702", C.INEXPRESSIBLE, V.NOTE, K.INEXPRESSIBLE,
     "GGUF tensors GRIT v1 cannot express",
     "GGUF tensors of a ggml type v1 cannot express (IQ*, Q3_K, TQ1_0, …), with the "
     "reason; never silently skipped. A note, as S701.",
     "These tensors were not checked.",
     "None in v1."),
    ("S703", C.INEXPRESSIBLE, V.WARNING, K.UNRECOGNISED,
     "quantisation method grit does not know",
     "The `quantization_config` of config.json names a `quant_method` (or none) that no "
     "convention of grit's reads (`grit.conventions`: compressed-tensors, ModelOpt, GPTQ, "
     "AWQ, gpt-oss `mxfp4`, torchao, bitsandbytes, GRIT); the lines list the known ones.",
     "The checkpoint's quantised tensors were not recognised, so their bytes were not "
     "checked; the scan is not clean.",
     "Nothing to fix in the checkpoint; a convention for the method can be added "
     "(docs/layers.md, \"How to add a convention\")."),
    ("S704", C.INEXPRESSIBLE, V.WARNING, K.UNRECOGNISED,
     "tensors that look quantised and no convention claims",
     "Tensors whose name says packed codes (`*_packed`, `*_blocks`, `qweight`, `qzeros`) "
     "or whose dtype is a code type (int8, uint8, int32, FP8…) beside a `*scale*` tensor of "
     "the same module, which no convention grit knows claims.",
     "Their bytes are not checked, and a tool reading them as plain tensors reads codes as "
     "values.",
     "Nothing to fix in the checkpoint if it is what its runtime expects; a convention for "
     "it can be added (docs/layers.md, \"How to add a convention\")."),
    ("S705", C.INEXPRESSIBLE, V.WARNING, K.UNRECOGNISED,
     "tensors a convention claims and cannot read",
     "Tensors a convention claims by their names (`qweight`/`qzeros`/`scales`, "
     "`weight_packed`, a torchao subclass) whose shapes or values do not fit that "
     "convention, or on which the recogniser failed; the reason names the mismatch. Unlike "
     "S701 (a weight recognised whole that v1 cannot express), nothing here was "
     "recognised, so the scan is not clean.",
     "Their bytes are not checked, and the convention's own loader is likely to refuse "
     "them or read them wrong.",
     "Compare the tensors with the convention's layout (the reason names the mismatch), "
     "or re-export them with the convention's library."),
    # -- unreadable
    ("S801", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "no such file or directory",
     "A PATH on the command line, or listed in a manifest, does not exist.",
     "Part of the input was not scanned.",
     "Fix the path (manifest paths are relative to the manifest's folder)."),
    ("S802", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "directory cannot be listed",
     "A directory under a PATH could not be listed (permissions, a vanished mount).",
     "Part of the tree was not scanned.",
     "Fix the permissions."),
    ("S803", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "directory holds no model file",
     "A directory tree holds no file ending in .safetensors or .gguf.",
     "Nothing under it was scanned.",
     "Point scan at the checkpoint's folder."),
    ("S804", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "not a model file, a directory or a manifest",
     "A PATH is neither a model file (by suffix or content), nor a directory, nor a "
     "readable manifest (UTF-8 text or JSON, at most 16 MiB); or a manifest lists no "
     "paths, or lists a file that is not a model file (manifests do not nest).",
     "The input was not scanned.",
     "Give model files, directories or a manifest of them."),
    ("S805", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "model file cannot be parsed",
     "A model file's container cannot be read at all: empty, junk, a truncated or lying "
     "header, a bad magic or version. Severity 1 while other inputs parse; when no input "
     "at all could be parsed every unreadable finding is severity 4.",
     "An artifact that claims to be a checkpoint and cannot be read is structurally "
     "broken.",
     "Re-fetch or re-export the file."),
    ("S806", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "GGUF tensor cannot be read as its ggml type",
     "A GGUF tensor info names an unknown ggml type, declares more than 64 dimensions, "
     "repeats a name, has rows that are not whole blocks of its type, or its bytes could "
     "not be converted. The file's other tensors are read and checked.",
     "The tensor's bytes cannot be interpreted; `grit.load` refuses the file.",
     "Re-export the tensor with a conforming writer."),
    ("S807", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "GGUF tensor bytes run past the end of the file",
     "A GGUF tensor's offset and size (fixed by its ggml type and dims) end beyond the "
     "file: a truncated file or lying offsets. The file's other tensors are read and "
     "checked.",
     "The tensor cannot be read at all; `grit.load` refuses the file.",
     "Re-fetch the file."),
    ("S808", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "a configured limit was reached",
     "Reading the file went past a limit grit enforces on untrusted input: more GGUF KV "
     "entries than GRIT_MAX_GGUF_KV, more tensors than GRIT_MAX_TENSORS, or more remote "
     "requests or body bytes than the network policy allows one file or one scan "
     "(GRIT_NET_FILE_REQUESTS, GRIT_NET_FILE_BYTES, GRIT_NET_SCAN_REQUESTS, "
     "GRIT_NET_SCAN_BYTES; docs/scan.md, \"Network policy\"). The file was not read "
     "past the limit.",
     "The file, or the rest of the scan, was not checked; a file past the limit may be "
     "a server or a writer inventing entries without end.",
     "If the file is genuine, raise the limit the message names (an environment "
     "variable) and scan again."),
    ("S809", C.UNREADABLE, V.STRUCTURAL, K.UNREADABLE,
     "not a valid remote address",
     "An http(s) URL or hf:// name, given in a manifest or to the Python API, that grit "
     "refuses before sending anything: no host, a malformed host, port or IPv6 address, "
     "credentials in the URL, control characters, undecodable bytes, an over-long name, "
     "or a revision or repository id the Hub cannot hold. (On the command line the same "
     "address is a usage error.)",
     "The input was not scanned.",
     "Fix the address."),
)

#: §7.3 level-1 failures by status (the codes of the descriptor-vs-bytes check)
CHECK_CODES: dict[Status, str] = {S.SIZE_MISMATCH: "S101", S.GRADE_UNKNOWN: "S102",
                                  S.PLACEMENT_UNKNOWN: "S103"}

del C, V, S, K


# ---------------------------------------------------------------------------
# one finding

#: per file, at most this many findings of one code are listed; the rest are
#: counted in the last listed one's ``omitted`` (docs/scan.md, "Caps")
MAX_PER_CODE = 20


@dataclass
class Finding:
    """One reported finding.  ``code`` fixes the category, the status and the
    default severity (:data:`REGISTRY`); ``status`` is given only for a code
    whose status is the check's (S501)."""

    code: str
    file: str | None
    tensor: str | None
    message: str
    lines: tuple[str, ...] = ()
    detail: dict = field(default_factory=dict)
    kind: Status | ScanKind | None = None
    #: this many more findings of the same code in the same file were not listed
    #: (the per-file cap, :data:`MAX_PER_CODE`)
    omitted: int = 0
    #: the findings this one's root cause brings with it, nested under it (one
    #: root cause is one finding: counted once, its consequences listed here;
    #: docs/scan.md, "One root cause, one finding")
    consequences: list["Finding"] = field(default_factory=list)
    severity: Severity = field(init=False)

    def __post_init__(self) -> None:
        spec = REGISTRY[self.code]
        if spec.status is not None:
            if self.kind is not None and self.kind is not spec.status:
                raise ValueError(f"{self.code} has status {status_name(spec.status)}")
            self.kind = spec.status
        elif self.kind is None:
            raise ValueError(f"{self.code} needs the check's status")
        self.severity = spec.severity

    @property
    def spec(self) -> FindingSpec:
        return REGISTRY[self.code]

    @property
    def category(self) -> Category:
        return REGISTRY[self.code].category

    @property
    def status(self) -> str:
        """The status as the report names it (``SizeMismatch``, ``RoleDrift``)."""
        return status_name(self.kind)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# explanations and the docs section


def explain(code: str, width: int = 88) -> str:
    """The explanation ``grit explain CODE`` prints."""
    s = REGISTRY[code.upper()]
    status = status_name(s.status) if s.status is not None else "the check's §7.1 status"
    paras = [f"What it means: {s.what}", f"Why it matters: {s.why}", f"Fix: {s.fix}"]
    sev = (f"severity {int(s.severity)} ({s.severity.label})" if s.severity.sets_exit
           else "a note (never sets the exit code)")
    return (f"{s.code} {status} — {s.category.value}, {sev}\n{s.title}\n\n"
            + "\n\n".join(textwrap.fill(p, width) for p in paras))
