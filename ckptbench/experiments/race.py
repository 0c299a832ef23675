"""Two writers racing to create one checkpoint file: does the strategy let exactly one win?

Per round, two instances of a strategy's CheckpointFileManager (built by Spark's own factory, as
a streaming query builds its own) in one driver JVM each open ``createAtomic(path,
overwriteIfPossible=false)`` of the same fresh path with contents of their own, and close it
from two threads at once. Spark relies on that create to refuse a second writer of a log file
(two queries on one checkpoint, a zombie after failover); a manager that checks whether the
file exists and then writes lets both pass when both checks come before either write. That
window is narrow, so the metering proxy holds it open: a ``Rendezvous`` rule holds the first
write of the file's key until the other writer's write of that key arrives (for ``manifest``,
whose files are records of a per-directory manifest, the record's key too), so every round
has both writers past their checks before either writes. A round whose rendezvous did not meet
(``paired`` false: one writer never wrote, or wrote another key) tested nothing and says so. Such a
round ends as soon as it cannot meet: the rendezvous is released when a writer is refused at create
(it never writes) or its close has ended (it writes no more) while the other's may still be held.

Each round is a row of the ``races`` table: the closes that succeeded (``winners``: 1 is
right, 2 is a second writer let through), each writer's outcome ("won" or the Java exception
class), whose content the file holds afterwards, whether the rendezvous met. Needs the metering
proxy (a plain http:// store); the managers reach the store through it whatever the session's
own settings for the bucket say.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time

import ckpt_impls
from infra.faults import Rendezvous

#: The checkpoint files raced, by kind: where Spark keeps each (``{n}``: the batch or version).
KINDS = {
    "offsets": "checkpoint/offsets/{n}",
    "commits": "checkpoint/commits/{n}",
    "state": "checkpoint/state/0/0/{n}.delta",
    "_spark_metadata": "output/_spark_metadata/{n}",
}
#: How long the first write waits for the second at most: both closes start together, so they
#: meet within the two writers' checks (a few requests each); a writer that will not write ends
#: the wait before (``race``), so this bounds only a wait nothing ended.
RENDEZVOUS_S = 15.0
#: How long a round may take before its threads are given up on.
ROUND_LIMIT_S = 120.0


def file_of(kind: str, n: int) -> str:
    """The path of kind ``kind``'s file ``n``, relative to a query's base (checkpoint and output)."""
    try:
        return KINDS[kind].format(n=n)
    except KeyError:
        raise ValueError(f"unknown file kind {kind!r}; known: {', '.join(KINDS)}") from None


def key_pattern(key: str, keys_mirror_paths: bool) -> str:
    """The regular expression (matched whole) of the keys two writers of the file at ``key``
    both write: the key itself and, where files are found through a manifest, the directory's
    manifest records (``<dir>/_manifest/r/<seq>``). Never a temp or staged key, which are each
    writer's own."""
    pattern = re.escape(key)
    if not keys_mirror_paths:
        pattern = f"(?:{pattern}|{re.escape(key.rsplit('/', 1)[0])}/_manifest/r/[0-9]+)"
    return pattern


def through_proxy(store, bucket: str) -> dict[str, str]:
    """Hadoop settings that send a manager's requests for ``bucket`` through ``store``'s proxy (a
    ``MeteredStore``), in a FileSystem of its own (not the session's cached one, which may reach
    the store directly), S3A's base endpoint too (a manager with a client of its own reads that),
    and keep ``manifest``'s directory records below the run prefix."""
    settings = {f"fs.s3a.bucket.{bucket}.endpoint": store.endpoint, "fs.s3a.endpoint": store.endpoint,
                "fs.s3a.impl.disable.cache": "true"}
    if getattr(store, "run_prefix", None):
        settings["ckptbench.manifest.root"] = f"s3a://{bucket}/{store.run_prefix}"
    return settings


def _java_class(error: BaseException) -> str:
    java = getattr(error, "java_exception", None)
    return java.getClass().getName() if java is not None else type(error).__name__


def _close_together(streams: list, ended=None) -> dict[int, str]:
    """Close each stream from a thread of its own, released together: writer -> "won" or the
    exception class its close failed with (it is then cancelled, as Spark's log does). ``ended()``
    is called as each close ends, won or failed: that writer writes no more."""
    barrier, outcome = threading.Barrier(len(streams)), {}

    def close(w: int) -> None:
        barrier.wait()
        try:
            streams[w].close()
            outcome[w] = "won"
        except Exception as e:  # py4j's Java exception, or the bridge's own
            outcome[w] = _java_class(e)
            with contextlib.suppress(Exception):  # a failed cancel changes nothing the round records
                streams[w].cancel()
        finally:
            if ended is not None:
                ended()

    threads = [threading.Thread(target=close, args=(w,), daemon=True) for w in range(len(streams))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(ROUND_LIMIT_S)
    return {w: outcome.get(w, "no answer") for w in range(len(streams))}


def _content(spark, manager, path) -> str:
    """Whose content the file holds: "writer-0", "writer-1", "none" (no file) or "other"."""
    try:
        if not manager.exists(path):
            return "none"
        stream = manager.open(path)
        try:
            text = bytes(stream.readAllBytes()).decode(errors="replace")
        finally:
            stream.close()
    except Exception as e:
        return f"unreadable: {_java_class(e)}"
    found = re.fullmatch(r"race (writer-[01]) .*", text)
    return found.group(1) if found else "other"


def race(spark, store, bucket: str, prefix: str, strategy: str, kinds=tuple(KINDS), rounds: int | range = 10,
         timeout_s: float = RENDEZVOUS_S, say=None) -> list[dict]:
    """Rounds (``rounds``: a count, or the round numbers) per kind of two ``strategy`` managers
    racing to create one file under ``s3a://bucket/prefix`` (fresh paths: file ``n`` of each
    kind in round ``n``), the proxy of ``store`` (a ``MeteredStore``) holding both writes until
    they meet. One row of ``races`` per round, returned."""
    jvm = spark._jvm
    base = f"s3a://{bucket}/{prefix}"
    settings = through_proxy(store, bucket)
    writers = [ckpt_impls.manager(spark, base, strategy, settings) for _ in (0, 1)]
    mirror = ckpt_impls.get(strategy).keys_mirror_paths
    rows = []
    for kind in kinds:
        directory = jvm.org.apache.hadoop.fs.Path(f"{base}/{file_of(kind, 0)}").getParent()
        writers[0].mkdirs(directory)  # as Spark's log and state store do before their first file
        for n in range(rounds) if isinstance(rounds, int) else rounds:
            rel = file_of(kind, n)
            path = jvm.org.apache.hadoop.fs.Path(f"{base}/{rel}")
            began, seen = time.monotonic(), len(store.proxy.injections())
            store.proxy.inject(Rendezvous(key_pattern(f"{prefix}/{rel}", mirror), timeout_s))
            streams, outcome = {}, {}
            try:
                for w, manager in enumerate(writers):
                    try:
                        stream = manager.createAtomic(path, False)
                        stream.write(bytearray(f"race writer-{w} {strategy} {kind} {n}".encode()))
                        streams[w] = stream
                    except Exception as e:  # refused at create: it never writes
                        outcome[w] = _java_class(e)
                # A writer refused at create never writes, one whose close ended writes no more:
                # the other's held write can no longer meet, so it goes on now (released).
                if len(streams) < 2:
                    store.proxy.clear_faults()
                closed = _close_together([streams[w] for w in sorted(streams)], store.proxy.clear_faults)
                outcome.update({w: closed[i] for i, w in enumerate(sorted(streams))})
            finally:
                store.proxy.clear_faults()
            met = [i.fault for i in store.proxy.injections()[seen:] if i.fault.startswith("rendezvous")
                   and i.key.startswith(prefix + "/")]
            row = {"strategy": strategy, "kind": kind, "round": n,
                   "winners": sum(outcome[w] == "won" for w in (0, 1)),
                   "outcome_0": outcome[0], "outcome_1": outcome[1],
                   "content": _content(spark, writers[0], path), "paired": "rendezvous" in met,
                   "seconds": time.monotonic() - began}
            rows.append(row)
            if say:
                say(f"race {strategy} x {kind} round {n}: {row['winners']} winner(s), "
                    f"{'met' if row['paired'] else 'NOT met'}, file holds {row['content']}")
    return rows
