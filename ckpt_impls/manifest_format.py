"""Reading what the ``manifest`` strategy stores, from Python (the tests and the compaction history).

The format's home is ``ckpt_impls/java/ckptbench/checkpoint/DirManifest.java``, which writes and
reads it; this is its one Python reader and checks the same headers. Under ``<dir>/_manifest/``:

- ``r/<seq, 20 digits>``: a record, ``ckptbench-manifest-record 1 <seq>`` then one change a line
  (``put <name> <id> <length> <modifiedMs>[ <where>]``, ``dir <name> <modifiedMs>``,
  ``del <name>``, ``clear``);
- ``c/<number, 20 digits>``: a compact, ``ckptbench-manifest-compact 1 <number> through <seq>
  created <ms> orphans-listed <ms>`` (the last: when a compactor last listed the staged objects
  for orphans) then the live entries (``file <name> <id> <length> <modifiedMs>[ <where>]``,
  ``dir <name> <modifiedMs>``) and the garbage generations still pending (``garbage
  <notBeforeMs> <recordsFrom> <recordsTo> <compact> <staged>...``);
- ``s/...``: staged objects; ``hint``: the number of the latest compact.

A file's ``<where>``: none when its bytes are staged object ``s/<id>``; ``inline:<Base64>`` when
they are in the entry itself (a small file); ``key`` when they are at the file's own key (a
RocksDB checkpoint zip, which the FileSystem reads). For the last two ``<id>`` only names the write.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import unquote_plus

RECORD_HEADER = "ckptbench-manifest-record 1"
COMPACT_HEADER = "ckptbench-manifest-compact 1"


def prefix(directory_key: str) -> str:
    """The manifest's key prefix for the directory at ``directory_key`` ("" for the bucket root)."""
    return f"{directory_key}/_manifest/" if directory_key else "_manifest/"


def record_key(directory_key: str, seq: int) -> str:
    return f"{prefix(directory_key)}r/{seq:020d}"


def compact_key(directory_key: str, number: int) -> str:
    return f"{prefix(directory_key)}c/{number:020d}"


@dataclasses.dataclass
class Garbage:
    not_before_ms: int
    records: tuple[int, int]  # [from, to]; empty when from > to
    compact: int
    staged: list[str]


@dataclasses.dataclass
class Compact:
    number: int
    through: int
    files: dict[str, str]  # name -> its id (the staged object's name for a staged file)
    dirs: set[str]
    garbage: list[Garbage]

    @property
    def entries(self) -> int:
        return len(self.files) + len(self.dirs)

    @property
    def garbage_staged(self) -> int:
        return sum(len(g.staged) for g in self.garbage)


class NotAManifest(ValueError):
    """An object that is not in the manifest format."""


def parse_record(text: str, seq: int) -> list[list[str]]:
    """A record's changes, each as its fields (names decoded)."""
    lines = text.splitlines()
    if not lines or lines[0] != f"{RECORD_HEADER} {seq}":
        raise NotAManifest(f"not record {seq}: {lines[:1]}")
    changes = []
    for line in lines[1:]:
        fields = line.split(" ")
        if fields[0] not in ("put", "dir", "del", "clear"):
            raise NotAManifest(f"record {seq}: {line}")
        if len(fields) > 1:
            fields[1] = unquote_plus(fields[1])
        changes.append(fields)
    return changes


def parse_compact(text: str) -> Compact:
    lines = text.splitlines()
    head = lines[0].split(" ") if lines else []
    if not lines or not lines[0].startswith(COMPACT_HEADER + " ") or len(head) != 9 or head[3] != "through":
        raise NotAManifest(f"not a compact: {lines[:1]}")
    compact = Compact(int(head[2]), int(head[4]), {}, set(), [])
    for line in lines[1:]:
        f = line.split(" ")
        if f[0] == "file":
            compact.files[unquote_plus(f[1])] = f[2]
        elif f[0] == "dir":
            compact.dirs.add(unquote_plus(f[1]))
        elif f[0] == "garbage":
            compact.garbage.append(Garbage(int(f[1]), (int(f[2]), int(f[3])), int(f[4]), f[5:]))
        else:
            raise NotAManifest(f"compact {compact.number}: {line}")
    return compact
