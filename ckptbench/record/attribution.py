"""Which batch made a request, or whether state store maintenance or nothing batch-driven did: a
request's ``cause`` (``CAUSES``), given by the checkpoint file it touches and by the maintenance
calls the manager logged, so that a batch's own requests are the same whenever maintenance ran
and however a request's start fell against the batches' windows.

The rules, in order (``attribute``):

1. **Maintenance** made it where a logged call of the state store's maintenance did
   (``maintenance_methods``: by key, within the call's span; a write's or delete's requests on its
   directory itself too, where no batch's file in that directory was being committed meanwhile,
   as the ``file_commits`` table says), or where its file is one only
   maintenance writes (``MAINTENANCE_FILES``: an HDFS-backed store's ``N.snapshot``; a RocksDB
   ``V.zip`` in a partition the run wrote changelogs to, where a zip is a snapshot), or it deletes
   a state file that is not a temp file (old versions past retention; ``MaintenanceWatch`` says
   the same of the manager's calls), whenever it came. RocksDB's SST and log uploads
   (``infra.s3ops.FILESYSTEM_DIRS``, which no manager call names) go with the checkpoint
   ``V.zip`` of their partition written next after them, which ``RocksDBFileManager`` writes once
   they are up: a snapshot maintenance uploaded (changelog checkpointing on) takes its SSTs with
   it; a batch's own zip keeps its SSTs in that batch.
2. **A batch** made it where the file it writes or reads names one (``named_batch``):
   ``offsets/N``, ``commits/N``, ``_spark_metadata/N``, a file source's ``sources/<i>/N`` and
   their ``N.compact`` are batch N's; a state file (under ``state/<operator>/<partition>/``) of
   version V (``V.delta``, ``V.changelog``, ``V.zip``, with or without format v2's ``_<id>``) is
   batch V - 1's; under any name a request gives the file (``.<name>.<uuid>.tmp`` on the way to a
   rename, ``<name>.crc``, S3A's probe of ``<name>/``). A write (``WRITES``, or a temp file's
   DELETE after its rename) always; a read (HEAD, LIST, GET) only until the file's first write
   ended, or where the run never wrote it (a query stopped before its write): S3A's probes before
   a write are that write's, while a later batch reads a file sink's ``N.compact`` to compact it,
   which its window gives. Nor a DELETE of such a file: Spark purges a log's old files from a
   later batch.
3. Else the batch whose window the request started in (``requests.batch_id``, the recorder's):
   for requests that name no batch (a LIST of a log's directory, a sink's data files, a
   manifest's records), a batch's own only by time. Where it started in no window, it is
   **between** batches: a query's start, anything else timing-driven.

Limits: on a cluster (or before schema 6) no maintenance call was logged, and only rule 1's file
names tell maintenance apart. Rule 3 is by time: a request that names no batch and fell in another
batch's window counts there; so does a maintenance write's request on its directory itself while a
batch's file there was being committed too (both send the same), or where no commit was logged
(before schema 11). RocksDB's SST reads (a store loaded from the checkpoint) stay with
their window: only uploads go with a zip.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

import ckpt_impls
from ckpt_impls import manifest_format
from infra.s3ops import FILESYSTEM_DIRS

#: Why a request was made: by a batch (its own, counted in the batch's figures), by the state store's
#: maintenance, or between batches by nothing a batch's files name.
CAUSES = ("batch", "maintenance", "between")

#: Progress timestamps have millisecond resolution: a batch's window is widened by that much on each
#: side when a request or a maintenance call is placed in it.
WINDOW_SLACK_S = 0.001

#: The operations a ``list`` call sends: S3A's LIST and its HEAD of the directory's key, a
#: manifest's GETs of its records.
LISTING_OPS = ("LIST", "HEAD", "GET")

#: Files only the state store's maintenance writes (and deletes): an HDFS-backed store's snapshots.
MAINTENANCE_FILES = re.compile(r"^\d+(_[^./]*)?\.snapshot$")

#: A temp file on the way to a rename (``ckpt_impls.TEMP_FILE``, ``.<name>.<uuid>.tmp``), the
#: target's name captured.
_TEMP = re.compile(r"^\.(?P<name>.+)\.[^.]+\.tmp$")
#: A log file of batch N (offsets, commits, a file sink's or a file source's log).
_LOG_FILE = re.compile(r"^(?P<n>\d+)(\.compact)?$")
#: A state file of version V, made by batch V - 1.
_STATE_FILE = re.compile(r"^(?P<n>\d+)(_[^./]*)?\.(delta|changelog|zip)$")
_LOG_AREAS = ("offsets", "commits", "_spark_metadata")
#: The operations that write a file.
WRITES = ("PUT", "COPY", "MPU_INIT", "MPU_PART", "MPU_COMPLETE", "MPU_ABORT")
#: What S3A sends on a file's directory itself around a write or a delete of the file: its probes
#: of the parent (HEAD, LIST) and the bulk DELETE of the directory markers above a new object.
DIRECTORY_OPS = ("HEAD", "LIST", "BULK_DELETE")
#: The maintenance calls whose requests on their file's directory itself are theirs (``maintenance_methods``).
_FILE_CHANGES = ("createAtomic", "delete")


def file_name(key: str) -> str:
    """The checkpoint file a key is about: its last segment (a directory probe's ``<name>/`` too),
    without a temp file's ``.``/``.<uuid>.tmp`` and a checksum's ``.crc``."""
    name = key.rstrip("/").rpartition("/")[2]
    if temp := _TEMP.match(name):
        name = temp["name"]
    name = name.removesuffix(".crc")
    return name[1:] if name.startswith(".") else name


def named_batch(op: str, key: str) -> int | None:
    """The batch the file a request of ``op`` on ``key`` touches names (rule 2 of the module's,
    reads whenever they came), None where it names none."""
    named, _, _, temp, *_ = _key_facts(key)
    return None if op in ("DELETE", "BULK_DELETE") and not temp else named


#: What ``_key_facts`` says of a key.
_FACTS = ("named", "directory", "file", "temp", "maintenance_file", "uploads", "zip", "state_file")


def _key_facts(key: str) -> tuple:
    """Of a key (see ``_FACTS``): the batch its file names (None: none; a purge's DELETE aside);
    the directory of the file (the last segment's parent); the file (that directory and
    ``file_name``); whether it is a temp file; whether only
    maintenance writes its file (``MAINTENANCE_FILES``); for an SST or log upload the partition
    directory it goes with, else None; whether its file is a checkpoint zip; whether it lies in a
    state partition's directory (``state/<operator>/<partition>/...``)."""
    parts = key.rstrip("/").split("/")
    name, directory = file_name(key), "/".join(parts[:-1])
    named, state_file = None, False
    if len(parts) > 1 and (parts[-2] in _LOG_AREAS or (len(parts) > 2 and parts[-3] == "sources")):
        named = int(log["n"]) if (log := _LOG_FILE.match(name)) else None
    # A state file lies in an operator's partition: state/<operator>/<partition>/[<store>/]<file>.
    elif (state_file := "state" in parts[:-3]) and (state := _STATE_FILE.match(name)):
        named = int(state["n"]) - 1
    uploads = None
    if not FILESYSTEM_DIRS.isdisjoint(parts):
        uploads = next(("/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)
                        if parts[i] in FILESYSTEM_DIRS and "state" in parts[:i]), None)
    temp, snapshot = bool(ckpt_impls.TEMP_FILE.search(parts[-1])), bool(MAINTENANCE_FILES.match(name))
    return named, directory, f"{directory}/{name}", temp, snapshot, uploads, name.endswith(".zip"), state_file


def _facts(requests: pd.DataFrame) -> pd.DataFrame:
    """``_key_facts`` of each of ``requests`` (columns ``_FACTS``), worked out once per distinct
    key: a run's probes, writes and reads of one file share one."""
    codes, keys = pd.factorize(requests.key)
    facts = pd.DataFrame([_key_facts(k) for k in keys], columns=list(_FACTS), dtype=object)
    return facts.iloc[codes].set_axis(requests.index)


def _on_listed(key: str, directory: str) -> bool:
    """Whether ``key`` is ``directory``, its prefix, or in it but not a temp file (``.<name>...``:
    a task's write on the way to a rename, not a listing's)."""
    return key in (directory, directory + "/") or (key.startswith(directory + "/")
                                                    and not key[len(directory) + 1:].startswith("."))


def maintenance_methods(requests: pd.DataFrame, calls: pd.DataFrame, commits: pd.DataFrame | None = None) -> pd.Series:
    """For each of ``requests``, the method of the one of ``calls`` (rows of the ``maintenance``
    table) that made it, None where none did (a batch's own): it started within the call's span
    (widened by ``WINDOW_SLACK_S``) on the call's object. A ``list`` call's object is the directory
    it listed: a read (``LISTING_OPS``) of it or in it. Another call's is the file it names, under
    any name the request gives it (``.<name>.<uuid>.tmp`` on the way to a rename, S3A's probe of
    ``<name>/``), or its directory's manifest, where ``manifest`` writes and deletes a file; a
    write's or a delete's (``_FILE_CHANGES``) also its directory itself (``DIRECTORY_OPS``: S3A's
    probe of the parent, its marker cleanup) where ``commits`` (rows of the ``file_commits`` table)
    show that no file a batch names in that directory was being committed during the call.

    By key and time, since no request says which thread sent it: a task's own read in a directory
    during a listing of it (a few milliseconds) counts as maintenance's, and a request on a
    directory itself during both a maintenance write and a batch's commit there stays the batch's,
    as both send the same. Attributes nothing where no call was logged (before schema 6, or on a
    cluster)."""
    made = pd.Series(None, index=requests.index, dtype=object)
    if calls.empty or requests.empty:
        return made
    ordered = requests.sort_values("start")
    starts, ops, keys = ordered.start.to_numpy(), ordered.op.to_numpy(), ordered.key.to_numpy()
    committed = _batch_commits(commits)
    for start, end, method, key in zip(calls.start, calls.end, calls.method, calls.key, strict=True):
        first = starts.searchsorted(start - WINDOW_SLACK_S, side="left")
        last = starts.searchsorted(end + WINDOW_SLACK_S, side="right")
        if method == "list":
            listed = key.rstrip("/")
            hits = [i for i in range(first, last) if ops[i] in LISTING_OPS and _on_listed(keys[i], listed)]
        else:
            directory, _, name = key.rpartition("/")
            log = manifest_format.prefix(directory)
            hits = [i for i in range(first, last) if keys[i].startswith(log) or (
                keys[i].startswith(directory + "/") and name in keys[i][len(directory) + 1:])]
            if method in _FILE_CHANGES and _alone_in(committed, directory, key, start, end):
                hits += [i for i in range(first, last)
                         if ops[i] in DIRECTORY_OPS and keys[i] in (directory, directory + "/")]
        made.loc[ordered.index[hits]] = method
    return made


def _batch_commits(commits: pd.DataFrame | None) -> dict[str, pd.DataFrame] | None:
    """The commits (rows of the ``file_commits`` table) of files a batch names, by directory, each
    with its ``end``; None where none were logged, so nothing is known."""
    if commits is None or commits.empty:
        return None
    named = commits[commits.batch_id.notna()]
    named = named.assign(end=named.start + named.ms / 1000)
    return dict(tuple(named.groupby(named.key.str.rpartition("/")[0])))


def _alone_in(committed: dict[str, pd.DataFrame] | None, directory: str, key: str, start: float,
              end: float) -> bool:
    """Whether ``committed`` (``_batch_commits``) shows that no file a batch names in ``directory``,
    other than ``key``, was being committed from ``start`` to ``end`` (widened by
    ``WINDOW_SLACK_S``); False where nothing is known."""
    if committed is None:
        return False
    mine = committed.get(directory)
    if mine is None:
        return True
    mine = mine[mine.key != key]
    return not ((mine.start <= end + WINDOW_SLACK_S) & (mine.end >= start - WINDOW_SLACK_S)).any()


def attribute(requests: pd.DataFrame, calls: pd.DataFrame, commits: pd.DataFrame | None = None) -> pd.DataFrame:
    """For each of one run's ``requests`` (rows of the ``requests`` table, one source's or several),
    its maintenance ``calls`` (rows of the ``maintenance`` table) and its files' ``commits`` (rows
    of the ``file_commits`` table, where logged): ``cause`` (one of ``CAUSES``), ``batch`` (the
    batch that made it; NA unless ``cause`` is ``batch``) and ``call`` (the logged maintenance
    method that made it, None where none did), by the module's rules."""
    call = maintenance_methods(requests, calls, commits)
    facts = _facts(requests)
    batch = _named_batches(requests, facts).fillna(requests.batch_id.astype("Int64"))
    logged = requests.op.isin(WRITES) & facts.file.str.endswith(".changelog")
    snapshot = facts.zip.astype(bool) & facts.directory.isin(set(facts.directory[logged]))
    purged = (requests.op == "DELETE") & facts.state_file.astype(bool) & ~facts.temp.astype(bool)
    maintenance = call.notna() | facts.maintenance_file.astype(bool) | snapshot | purged
    out = pd.DataFrame({"batch": batch, "maintenance": maintenance, "call": call})
    for _, rows in requests.groupby("source"):
        _with_their_zip(out, rows, facts.loc[rows.index])
    cause = np.where(out.maintenance, "maintenance", np.where(out.batch.isna(), "between", "batch"))
    out["cause"] = pd.Series(cause, index=requests.index, dtype=object)
    out.loc[out.maintenance, "batch"] = pd.NA
    return out.drop(columns="maintenance")


def _named_batches(requests: pd.DataFrame, facts: pd.DataFrame) -> pd.Series:
    """For each of ``requests``, the batch its file names where rule 2 gives it one (a read only
    until the file's first write, as the same source saw it, ended, if it had one), NA elsewhere."""
    temp = facts.temp.astype(bool)
    named = facts.named.astype("Int64").where(~requests.op.isin(["DELETE", "BULK_DELETE"]) | temp)
    written = requests.op.isin(WRITES) | ((requests.op == "DELETE") & temp)
    ends = (requests.start + requests.ms / 1000)[written & named.notna()]
    ended = ends.groupby([requests.source[ends.index], facts.file[ends.index]]).min()
    first_write = ended.reindex(pd.MultiIndex.from_arrays([requests.source, facts.file])).to_numpy()
    before = requests.start.to_numpy() <= np.nan_to_num(first_write, nan=np.inf)
    return named.where(written | before)


def _with_their_zip(out: pd.DataFrame, requests: pd.DataFrame, facts: pd.DataFrame) -> None:
    """Give each SST or log upload among ``requests`` (one source's; ``facts``, theirs) the batch
    and maintenance flag in ``out`` of the zip written next after it in its partition's directory
    (rule 1)."""
    uploads = requests[facts.uploads.notna() & ~requests.op.isin(["GET", "DELETE"])]
    if uploads.empty:
        return
    zips = requests[requests.op.isin(["PUT", "COPY", "MPU_COMPLETE"]) & facts.zip.astype(bool)]
    zips = zips.assign(directory=facts.directory[zips.index]).sort_values("start")
    for directory, rows in uploads.groupby(facts.uploads[uploads.index]):
        written = zips[zips.directory == directory]
        after = written.start.to_numpy().searchsorted(rows.start.to_numpy(), side="left")
        has = after < len(written)
        if has.any():
            which, zip_rows = rows.index[has], written.index[after[has]]
            out.loc[which, "batch"] = out.loc[zip_rows, "batch"].to_numpy()
            out.loc[which, "maintenance"] = out.loc[zip_rows, "maintenance"].to_numpy()
