"""What a user would read after a crash: the logs, the sink's output checked for every row exactly
once, what was left under the prefix, and how a two-writer run ended."""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path

import ckpt_impls
from ckptbench.experiments.crashlab.points import IGNORE_MISSING, Workload, publishes
from ckptbench.harness.spark import settings_set
from infra.s3ops import Event

# -- reading what a user would read ------------------------------------------------------------


def log_ids(spark, strategy: str, url: str) -> list[int]:
    """The batch ids in the metadata log at ``url`` (``.../commits``, ``.../offsets``), as the
    strategy's manager lists them (temp files and others left out)."""
    fm, path = ckpt_impls.manager(spark, url, strategy), spark._jvm.org.apache.hadoop.fs.Path(url)
    if not fm.exists(path):
        return []
    names = [s.getPath().getName() for s in fm.list(path, spark._jvm.org.apache.hadoop.fs.GlobFilter("[0-9]*"))]
    return sorted(int(n) for n in names if n.isdigit())


def last_committed(spark, strategy: str, checkpoint: str) -> int:
    """The last batch id in ``commits/``; -1 if none."""
    return max(log_ids(spark, strategy, f"{checkpoint}/commits"), default=-1)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the output holds against the committed batches ``0..last``.

    ``duplicates``: rows beyond the first of each value (anywhere in the output). ``lost``: values
    of batches ``0..last`` missing. ``partial``: batches only partly visible (among ``0..last``
    while a writer runs; also the batch after it at rest, when the sink may be a batch ahead of
    ``commits/``). ``unexpected``: rows at rest from batches past that one. A sink whose batches
    are not atomic (``Workload.atomic_batches``: foreach) may hold any batch past ``last`` partly
    (a restart re-runs it; with async progress tracking, every batch since the last one whose
    progress was written): there only more values than a batch has count, as ``unexpected``.
    """

    last: int
    rows: int
    duplicates: int
    lost: int
    partial: int
    unexpected: int

    @property
    def exactly_once(self) -> bool:
        return not (self.duplicates or self.lost or self.partial or self.unexpected)


def output_counts(spark, strategy: str, workload: Workload, output: str,
                  rows_per_batch: int) -> dict[int, tuple[int, int]]:
    """``{batch: (rows, distinct values)}`` of the sink's output read through Spark (one scan,
    counted here: a Spark aggregation would add two shuffle stages to every check). ``output``: an
    s3a:// URL of parquet, or for a foreach sink (``Workload.sink``) a local directory of text files,
    one value a line (Spark skips the writers' hidden temp files; a line cut short by a kill is no
    number and is left out)."""
    from pyspark.errors import AnalysisException

    ckpt_impls.use(spark, strategy)
    try:
        if workload.sink == "foreach":
            frame = (spark.read.text(Path(output).absolute().as_uri())
                     .selectExpr("CAST(trim(value) AS long) AS value").where("value IS NOT NULL"))
        else:
            frame = spark.read.schema("value long").parquet(output)
    except AnalysisException as e:
        if "PATH_NOT_FOUND" in str(e) or "Path does not exist" in str(e):
            return {}
        raise
    batch = workload.batch_sql.format(rows=rows_per_batch)
    # A data file the sink's log lists but the store lost is lost rows, not a failed check. The
    # rows come through Arrow (DataFrame.toArrow is Spark 4.0+; toPandas over Arrow is in 3.5 too).
    with settings_set(spark, {IGNORE_MISSING: "true", "spark.sql.execution.arrow.pyspark.enabled": "true"}):
        table = frame.selectExpr(f"CAST({batch} AS long) AS batch", "value").toPandas()
    values: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for b, value in zip(table["batch"].tolist(), table["value"].tolist(), strict=True):
        values[b][value] += 1
    return {b: (sum(c.values()), len(c)) for b, c in values.items()}


def judge(counts: dict[int, tuple[int, int]], last: int, workload: Workload, rows_per_batch: int,
          at_rest: bool) -> Verdict:
    """The verdict on ``counts`` (``output_counts``) against committed batches ``0..last``; see
    ``Verdict``. Pure, so the rules are tested on their own."""
    duplicates = sum(n - d for n, d in counts.values())
    lost = partial = unexpected = 0
    for batch in range(last + 1):
        expected = workload.rows_in(batch, rows_per_batch)
        distinct = counts.get(batch, (0, 0))[1]
        lost += max(0, expected - distinct)
        partial += 0 < distinct < expected
        unexpected += max(0, distinct - expected)
    if not workload.atomic_batches:
        unexpected += sum(max(0, distinct - workload.rows_in(batch, rows_per_batch))
                          for batch, (_, distinct) in counts.items() if batch > last)
        unexpected += sum(distinct for batch, (_, distinct) in counts.items() if batch < 0)
    elif at_rest:
        for batch, (_, distinct) in counts.items():
            if batch == last + 1:  # the sink may have committed the batch commits/ has not
                expected = workload.rows_in(batch, rows_per_batch)
                partial += 0 < distinct < expected
                unexpected += max(0, distinct - expected)
            elif batch > last + 1 or batch < 0:
                unexpected += distinct
    return Verdict(last, sum(n for n, _ in counts.values()), duplicates, lost, partial, unexpected)


def verify(spark, strategy: str, workload: Workload, base: str, rows_per_batch: int, at_rest: bool,
           output: str | None = None) -> Verdict:
    """Read ``commits/`` (first) and then the output (``output``, else the one under ``base``) and
    judge them. Safe while a writer runs (``at_rest`` False): batches committed after ``commits/``
    was read are ignored but for duplicates, which are wrong whenever they are seen."""
    last = last_committed(spark, strategy, f"{base}/checkpoint")
    counts = output_counts(spark, strategy, workload, output or f"{base}/output", rows_per_batch)
    return judge(counts, last, workload, rows_per_batch, at_rest)


@dataclasses.dataclass(frozen=True)
class Leftovers:
    temp_objects: int  # Spark's rename temp files, .<name>.<uuid>.tmp
    orphan_files: int  # sink data files the sink's log does not list (NaN-like -1: no log to ask)
    pending_uploads: int  # multipart uploads never completed nor aborted
    objects: int  # every object under the prefix


def leftovers(spark, strategy: str, store, bucket: str, prefix: str, workload: Workload) -> Leftovers:
    """What a series left under ``prefix`` at rest, listed on the store itself (``store``: not
    through the proxy)."""
    s3 = store.client()
    keys = store.list_keys(bucket, prefix + "/")
    temps = [k for k in keys if ckpt_impls.TEMP_FILE.search(k)]
    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix + "/").get("Uploads", [])
    orphans = -1
    if workload.sink == "file":  # its log says which data files are the output
        output = f"{prefix}/output/"
        data = {k for k in keys if k.startswith(output) and not any(
            part.startswith(("_", ".")) for part in k[len(output):].split("/"))}
        ckpt_impls.use(spark, strategy)
        listed = set()
        if data:
            listed = {re.sub(r"^s3a://[^/]+/", "", f) for f in
                      spark.read.schema("value long").parquet(f"s3a://{bucket}/{output}").inputFiles()}
        orphans = len(data - listed)
    return Leftovers(len(temps), orphans, len(uploads), len(keys))


#: The errors of a query that found another writer's file where it meant to write its own.
CONFLICT = re.compile(r"concurrent|already exists|FileAlreadyExists|Race while writing|Multiple streaming"
                      r"|PreconditionFailed|412|CHECKPOINT_LOCATION_NOT_EMPTY", re.I)
OUTCOMES = ("clean-error", "silent-damage", "both-ran-no-damage-seen", "other-error")


def classify(row: dict) -> str:
    """``silent-damage``: the output is not exactly-once, unreadable, or a log file was written
    twice; else ``clean-error``: a query failed on the other's file (``CONFLICT``); else
    ``other-error``: a query failed otherwise; else ``both-ran-no-damage-seen``."""
    damaged = row["verify_error"] or row["overwritten_logs"] or any(
        row.get(k) for k in ("duplicates", "lost", "partial", "unexpected"))
    if damaged:
        return "silent-damage"
    errors = [e for e in (row["first_error"], row["second_error"]) if e]
    if any(CONFLICT.search(e) for e in errors):
        return "clean-error"
    return "other-error" if errors else "both-ran-no-damage-seen"


def overwritten_logs(events: list[Event], store, bucket: str, prefix: str, keys_mirror_paths: bool) -> list[str]:
    """Metadata log files (offsets, commits, _spark_metadata) stored more than once, relative to
    ``prefix``: a log file is written once, so a second successful write replaced the first (the
    proxy does not keep bodies, so whether the two differed is not known). Seen in the proxy's
    requests where keys mirror paths; for the manifest strategy, in the manifests' records (a
    ``put`` of a name already put and not deleted since)."""
    logs = ("offsets", "commits", "_spark_metadata")
    if keys_mirror_paths:
        writes: dict[str, int] = {}
        for e in events:
            if any(publishes(e, log) and "/_manifest/" not in e.key for log in logs):
                writes[e.key] = writes.get(e.key, 0) + 1
        return sorted(key[len(prefix) + 1:] for key, n in writes.items() if n > 1)
    from ckpt_impls import manifest_format

    s3, twice = store.client(), []
    logs = (f"{prefix}/checkpoint/offsets", f"{prefix}/checkpoint/commits", f"{prefix}/output/_spark_metadata")
    for directory in logs:
        live: set[str] = set()
        keys = sorted(store.list_keys(bucket, manifest_format.prefix(directory) + "r/"))
        for key in keys:
            text = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            for change in manifest_format.parse_record(text, int(key.rsplit("/", 1)[1])):
                if change[0] == "put":
                    if change[1] in live:
                        twice.append(f"{directory[len(prefix) + 1:]}/{change[1]}")
                    live.add(change[1])
                elif change[0] == "del":
                    live.discard(change[1])
                elif change[0] == "clear":
                    live.clear()
    return twice


def stored_batches(events: list[Event], store, bucket: str, log: str, keys_mirror_paths: bool) -> list[int]:
    """The batch ids of metadata log ``log``'s files (``offsets``, ``commits``) that ``events``
    stored, in order: from their keys where keys mirror paths, else (manifest) from the records
    they put, read from ``store`` itself."""
    from ckpt_impls import manifest_format

    found, s3 = [], None
    for e in events:
        if not publishes(e, log):
            continue
        if keys_mirror_paths:
            found.append(int(re.match(r"\d+", e.key.rsplit("/", 1)[1]).group(0)))
            continue
        s3 = s3 or store.client()
        text = s3.get_object(Bucket=bucket, Key=e.key)["Body"].read().decode()
        found += [int(change[1]) for change in manifest_format.parse_record(text, int(e.key.rsplit("/", 1)[1]))
                  if change[0] == "put" and change[1].isdigit()]
    return found
