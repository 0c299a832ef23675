"""The metering proxy's counts for a micro-batch match what each strategy's own logic implies.

A stateful query checkpoints through each strategy to each store behind a metering proxy (the
harness's ``runs.Lab``, as the suite runs it); in each measured batch, the requests on the checkpoint files
(offsets/, commits/ and the state store's files) say how each file was made visible:

- ``rename``: every file is a PUT of a temp object, a COPY of it onto the file's key and a
  DELETE of the temp: one COPY per PUT.
- ``direct`` and ``conditional``: a PUT straight to the file's key; no COPY anywhere.
- ``manifest``: offsets and commits are never stored under their own keys: PUTs go under the
  directory's ``_manifest/``; no COPY anywhere.
"""

from __future__ import annotations

import ckpt_impls
from ckptbench import results, runs

WARMUP, BATCHES, KEYS = 1, 3, 5
FILE_AREAS = ("offsets", "commits", "state")


def batch_requests(spark, metered, strategy) -> tuple[str, list[tuple[int, list]]]:
    """The checkpoint's key and, for each measured batch, its id and its requests."""
    proxied, bucket = metered
    recorder = results.Recorder()
    runs.Lab(spark, proxied, bucket, runs.PLANS["smallest"]).run(recorder, strategy, "stateful", KEYS, WARMUP, BATCHES)
    run = recorder.results({}).run(strategy, "stateful", KEYS)
    by_batch = run.requests.groupby("batch_id")
    return f"{run.info.prefix}/checkpoint", [(batch, list(rows.itertuples())) for batch, rows in by_batch]


def test_requests_per_batch_follow_the_strategy(spark, metered, strategy):
    checkpoint, batches = batch_requests(spark, metered, strategy)
    assert len(batches) == BATCHES
    for batch, events in batches:
        ok = [e for e in events if 200 <= e.status < 300]
        puts = [e.key for e in ok if e.op == "PUT" and e.area in FILE_AREAS]
        copies = [e.key for e in ok if e.op == "COPY"]
        logs = {f"{checkpoint}/offsets/{batch}", f"{checkpoint}/commits/{batch}"}
        seen = f"batch {batch}: PUT {puts}, COPY {copies}"
        if strategy == "rename":
            assert puts and all(ckpt_impls.TEMP_FILE.search(k) for k in puts), seen
            assert len(copies) == len(puts) and logs <= set(copies), seen
            assert not any(ckpt_impls.TEMP_FILE.search(k) for k in copies), seen
            deleted = {e.key for e in ok if e.op == "DELETE"}
            assert set(puts) <= deleted, f"{seen}, DELETE {sorted(deleted)}"
        elif strategy == "manifest":
            assert not copies, seen
            log_puts = [e.key for e in ok if e.op == "PUT" and e.area in ("offsets", "commits")]
            assert log_puts and all("/_manifest/" in k for k in log_puts), seen
        else:
            assert not copies, seen
            assert logs <= set(puts), seen
            assert not any(ckpt_impls.TEMP_FILE.search(k) for k in puts), seen
