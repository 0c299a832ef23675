"""Spark's checkpoint contract, checked on any strategy against a real store: ``python -m ckptbench
contract`` and ``tests/test_contract.py`` run these same checks.

A manager is built by Spark's own factory (``CheckpointFileManager.create``) from the strategy's
class setting, exactly as a streaming query builds it, and driven through py4j (``CheckpointFiles``).
Each check in ``CHECKS`` returns what it saw, or raises ``ContractBroken`` saying what broke. They
cover what Spark's logs and state store rely on: directories that exist once made and listings that
honour their filter and hold only the directory's own entries (else a restarted query sees no
batches, or another directory's), a create that refuses an existing file and a cancel that leaves
nothing, an overwrite, a missing file opened as ``FileNotFoundException`` (Spark tells "no such
batch" by it), and two creators of one file at once. A lost response to a create and lagging
listings need faults in the store's path: ``tests/test_lost_response.py`` and the fault lab cover
them; this command does not.
"""

from __future__ import annotations

import threading
import uuid

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

import ckpt_impls

#: Rounds of the racing-creators check.
RACE_ROUNDS = 10


class ContractBroken(AssertionError):
    """A check saw the manager break the contract; str() says what it saw."""


def java_class(error: Py4JJavaError) -> str:
    return error.java_exception.getClass().getName()


def converted_class(error: CapturedException) -> str:
    """The JVM class of an error PySpark converted to one of its own: PySpark keeps the JVM's
    exception only in a private attribute, so its own class name where that is gone."""
    origin = getattr(error, "_origin", None)
    return origin.getClass().getName() if origin is not None else type(error).__name__


def expect(condition: bool, seen: str) -> None:
    if not condition:
        raise ContractBroken(seen)


class CheckpointFiles:
    """A strategy's JVM CheckpointFileManager for ``s3a://bucket/prefix``, with byte-level helpers.

    Built by Spark's own factory from the strategy's class setting; ``settings`` are added to the
    Hadoop conf. ``store`` lists what is stored under the prefix (``ObjectStore.list_keys``)."""

    def __init__(self, spark, strategy: str, store, prefix: str, bucket: str, settings: dict | None = None) -> None:
        jvm = spark._jvm
        self.jvm, self.strategy, self.store, self.prefix, self.bucket = jvm, strategy, store, prefix, bucket
        self.fm = ckpt_impls.manager(spark, f"s3a://{bucket}/{prefix}", strategy, settings)

    def path(self, rel: str):
        return self.jvm.org.apache.hadoop.fs.Path(f"s3a://{self.bucket}/{self.prefix}/{rel}".rstrip("/"))

    def create(self, rel: str, overwrite: bool, data: bytes):
        out = self.fm.createAtomic(self.path(rel), overwrite)
        out.write(bytearray(data))
        return out

    def write(self, rel: str, data: bytes, overwrite: bool = False) -> None:
        """Write as HDFSMetadataLog.write does: close, or cancel if that fails."""
        out = self.create(rel, overwrite, data)
        try:
            out.close()
        except Py4JJavaError:
            out.cancel()
            raise

    def read(self, rel: str) -> bytes:
        stream = self.fm.open(self.path(rel))
        try:
            return bytes(stream.readAllBytes())
        finally:
            stream.close()

    def exists(self, rel: str) -> bool:
        return self.fm.exists(self.path(rel))

    def mkdirs(self, rel: str) -> None:
        self.fm.mkdirs(self.path(rel))

    def delete(self, rel: str) -> None:
        self.fm.delete(self.path(rel))

    def statuses(self, rel: str, glob: str = "*"):
        return list(self.fm.list(self.path(rel), self.jvm.org.apache.hadoop.fs.GlobFilter(glob)))

    def names(self, rel: str, glob: str = "*") -> set[str]:
        return {s.getPath().getName() + ("/" if s.isDirectory() else "") for s in self.statuses(rel, glob)}

    def visible(self, rel: str = "") -> set[str]:
        """Every file the manager shows under ``rel``, recursively, relative to the prefix."""
        found = set()
        for status in self.statuses(rel):
            child = f"{rel}/{status.getPath().getName()}".lstrip("/")
            found |= self.visible(child) if status.isDirectory() else {child}
        return found

    def objects(self) -> set[str]:
        """Every object stored under the prefix except directory markers, relative to the prefix."""
        keys = getattr(self.store, "inner", self.store).list_keys(self.bucket, self.prefix + "/")
        return {k[len(self.prefix) + 1:] for k in keys if not k.endswith("/")}

    def assert_files(self, expected: set[str]) -> None:
        """The manager shows exactly ``expected``, and so does the bucket where keys mirror paths,
        besides the temp files a strategy is known to leave (Spark's batch filter skips them)."""
        chosen = ckpt_impls.get(self.strategy)
        visible = self.visible()
        stored = self.objects() if chosen.keys_mirror_paths else visible
        temps = {k for k in visible | stored if ckpt_impls.TEMP_FILE.search(k)}
        expect(visible - temps == expected, f"the manager shows {sorted(visible - temps)}, not {sorted(expected)}")
        expect(stored - temps == expected, f"the bucket holds {sorted(stored - temps)}, not {sorted(expected)}")
        expect(chosen.leaves_temp_files or not temps, f"{self.strategy} left temp objects: {sorted(temps)}")


def race(files: CheckpointFiles, rel: str) -> dict[int, str]:
    """Two writers close a create of ``rel`` (overwrite=false) at once: writer -> "won" or the
    Java exception class it failed with."""
    streams = [files.create(rel, False, f"writer-{w}".encode()) for w in (0, 1)]
    barrier, outcome = threading.Barrier(2), {}

    def close(w: int) -> None:
        barrier.wait()
        try:
            streams[w].close()
            outcome[w] = "won"
        except Py4JJavaError as e:
            outcome[w] = java_class(e)

    threads = [threading.Thread(target=close, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcome


def nested_mkdirs_are_idempotent(fm: CheckpointFiles) -> str:
    expect(not fm.exists("a/b/c"), "a/b/c exists before it was made")
    fm.mkdirs("a/b/c")
    fm.mkdirs("a/b/c")
    made = {d: fm.exists(d) for d in ("a/b/c", "a/b", "a")}
    expect(all(made.values()), f"after mkdirs(a/b/c) exists() says {made}")
    fm.mkdirs("a/b")
    expect(fm.exists("a/b/c"), "mkdirs(a/b) after mkdirs(a/b/c) lost a/b/c")
    return "a/b/c, a/b and a exist after mkdirs(a/b/c), twice"


def list_honours_its_filter(fm: CheckpointFiles) -> str:
    fm.mkdirs("log/sub")
    for name in ("0", "1", "x"):
        fm.write(f"log/{name}", name.encode())
    for glob, expected in (("*", {"0", "1", "x", "sub/"}), ("[0-9]*", {"0", "1"}), ("nothing-matches", set())):
        names = fm.names("log", glob)
        expect(names == expected, f"list(log, {glob}) gave {sorted(names)}, not {sorted(expected)}")
    expect(all(s.isFile() for s in fm.statuses("log", "[0-9]*")), "a file was listed as a directory")
    expect("log/" in fm.names("", "*"), "the prefix's listing lacks the directory log/")
    return "*, [0-9]* and a filter matching nothing each listed what they match"


def a_listing_holds_its_directory_alone(fm: CheckpointFiles) -> str:
    """A listing of ``state/0/1`` holds its own files, not ``state/0/10``'s: a key prefix without
    its trailing slash matches both, and Spark would load another partition's state."""
    for directory, version in (("state/0/1", 1), ("state/0/10", 2)):
        fm.mkdirs(directory)
        fm.write(f"{directory}/{version}.delta", directory.encode())
    names = fm.names("state/0/1")
    expect(names == {"1.delta"}, f"list(state/0/1) gave {sorted(names)}, not ['1.delta']")
    return "list(state/0/1) holds its 1.delta alone, not state/0/10's 2.delta"


def create_refuses_an_existing_file(fm: CheckpointFiles) -> str:
    fm.mkdirs("offsets")
    fm.create("offsets/0", False, b"partial").cancel()
    expect(not fm.exists("offsets/0"), "a cancelled create left offsets/0")
    fm.assert_files(set())
    fm.write("offsets/0", b"first")
    expect(fm.read("offsets/0") == b"first", "offsets/0 does not read back what was written")
    try:
        fm.write("offsets/0", b"second")
    except Py4JJavaError as e:
        refused = java_class(e)
    else:
        raise ContractBroken("a second createAtomic(overwriteIfPossible=false) of offsets/0 succeeded: "
                             f"it now reads {fm.read('offsets/0')!r}")
    expect(refused in ("org.apache.hadoop.fs.FileAlreadyExistsException", "java.io.IOException"),
           f"the second create failed with {refused}, not FileAlreadyExistsException")
    expect(fm.read("offsets/0") == b"first", f"the refused create changed offsets/0 to {fm.read('offsets/0')!r}")
    fm.assert_files({"offsets/0"})
    return f"a cancelled create left nothing; a second create was refused ({refused.rsplit('.', 1)[-1]})"


def create_overwrites_when_asked(fm: CheckpointFiles) -> str:
    fm.mkdirs("state")  # as Spark's state store does: FileContext needs the parent
    fm.create("state/1.delta", True, b"partial").cancel()
    expect(not fm.exists("state/1.delta"), "a cancelled overwrite-create left state/1.delta")
    fm.write("state/1.delta", b"v1", overwrite=True)
    fm.write("state/1.delta", b"v2", overwrite=True)
    expect(fm.read("state/1.delta") == b"v2", f"state/1.delta reads {fm.read('state/1.delta')!r}, not v2")
    fm.create("state/1.delta", True, b"partial").cancel()
    expect(fm.read("state/1.delta") == b"v2", "a cancelled overwrite changed the content")
    fm.assert_files({"state/1.delta"})
    return "v1 then v2 overwrote; a cancelled overwrite kept v2"


def a_missing_file_is_not_found(fm: CheckpointFiles) -> str:
    fm.mkdirs("commits")
    fm.write("commits/0", b"c0")
    fm.delete("commits/0")
    expect(not fm.exists("commits/0"), "commits/0 exists after delete")
    try:
        fm.read("commits/0")
    except Py4JJavaError as e:
        expect(java_class(e) == "java.io.FileNotFoundException",
               f"open of a deleted file threw {java_class(e)}, not java.io.FileNotFoundException")
    else:
        raise ContractBroken("open of a deleted file succeeded")
    fm.delete("commits/0")
    fm.delete("never/written")
    fm.write("commits/0", b"again")  # overwrite=false: a deleted path is free again
    expect(fm.read("commits/0") == b"again", "a deleted path could not be written again")
    fm.assert_files({"commits/0"})
    return "open of a deleted file: FileNotFoundException; delete of a missing path succeeded"


def one_of_two_racing_creators_wins(fm: CheckpointFiles) -> str:
    fm.mkdirs("race")
    two = []
    for i in range(RACE_ROUNDS):
        outcome = race(fm, f"race/{i}")
        winners = [w for w, result in outcome.items() if result == "won"]
        if len(winners) != 1:
            two.append(f"race/{i}: {outcome}")
            continue
        expect(outcome[1 - winners[0]] in ("org.apache.hadoop.fs.FileAlreadyExistsException", "java.io.IOException"),
               f"race/{i}: the loser failed with {outcome[1 - winners[0]]}")
        expect(fm.read(f"race/{i}") == f"writer-{winners[0]}".encode(), f"race/{i}: the winner's content is gone")
    expect(not two, f"{len(two)} of {RACE_ROUNDS} rounds had no single winner, e.g. {two[0] if two else ''}")
    return f"exactly one winner in each of {RACE_ROUNDS} rounds, the loser refused"


#: The checks, in the order they run: name -> check(files) -> what it saw.
CHECKS = {f.__name__.replace("_", " "): f for f in (
    nested_mkdirs_are_idempotent, list_honours_its_filter, a_listing_holds_its_directory_alone,
    create_refuses_an_existing_file, create_overwrites_when_asked, a_missing_file_is_not_found,
    one_of_two_racing_creators_wins)}


def run(spark, strategy: str, store, bucket: str, under: str) -> list[tuple[str, bool, str]]:
    """Every check of ``CHECKS`` on ``strategy``, each under a fresh prefix inside ``under``:
    ``[(check, passed, what it saw)]``. A check that fails with a JVM error it did not expect fails
    with that error's first line."""
    out = []
    for name, check in CHECKS.items():
        files = CheckpointFiles(spark, strategy, store, f"{under}contract-{strategy}-{uuid.uuid4().hex[:8]}", bucket)
        try:
            out.append((name, True, check(files)))
        except ContractBroken as e:
            out.append((name, False, str(e)))
        except Py4JJavaError as e:
            out.append((name, False, f"{java_class(e)}: {str(e.java_exception.getMessage())[:200]}"))
        except CapturedException as e:  # a JVM error PySpark converts (IllegalArgumentException, ...)
            out.append((name, False, f"{converted_class(e)}: {str(e).splitlines()[0][:200]}"))
        finally:
            getattr(store, "inner", store).empty_bucket(bucket, files.prefix + "/")
    return out
