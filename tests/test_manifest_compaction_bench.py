"""The compaction history (``ckptbench.experiments.histories``, read by benchmarks/manifest_compaction.py) in
its smallest form on the embedded store: the structural
claim holds: the manifest's compact stays about the same size as its history doubles (it holds
the retained entries and the garbage of the cleanup delay), while Spark's _spark_metadata
compact grows with it (it holds every entry ever written). That every track_* gives a finite
number is test_benchmarks.py's check, for every module.

The history runs in a child process of its own: the benchmark module reads its settings
(CKPT_BENCH_SIZE, CKPT_STORE) at import, and the history starts its own SparkSession, which could
not share this process with the tests' one. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import infra

pytestmark = pytest.mark.spark  # a whole benchmark run in a child process
ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, sys
    from benchmarks import common, manifest_compaction as m
    data = common.history()
    out = {"batches": list(m.SHAPE.batches), "tracks": {}}
    for cls in (m.ManifestCompaction, m.SparkMetadataCompaction):
        for name in dir(cls):
            if name.startswith("track_"):
                out["tracks"][f"{cls.__name__}.{name}"] = {
                    str(b): getattr(cls(), name)(data, b) for b in m.SHAPE.batches}
    sys.stdout.write("RESULT " + json.dumps(out) + "\\n")
""")


def test_manifest_compact_stays_flat_while_sparks_grows(tmp_path):
    if infra.EmbeddedStore.unavailable_reason():
        pytest.skip(infra.EmbeddedStore.unavailable_reason())
    env = {**os.environ, "CKPT_STORE": "embedded", "CKPT_BENCH_SIZE": "smallest",
           "CKPT_BENCH_RAW": str(tmp_path / "raw")}
    env.pop("CKPT_BUCKET", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = json.loads(lines[-1][len("RESULT "):])
    small, large = (str(b) for b in out["batches"])
    tracks = out["tracks"]

    manifest_kib = tracks["ManifestCompaction.track_compact_kib"]
    spark_kib = tracks["SparkMetadataCompaction.track_compact_kib"]
    assert manifest_kib[large] <= 1.5 * manifest_kib[small], manifest_kib
    assert tracks["ManifestCompaction.track_live_entries"][large] == \
        tracks["ManifestCompaction.track_live_entries"][small]
    assert spark_kib[large] >= 1.8 * spark_kib[small], spark_kib
    assert tracks["SparkMetadataCompaction.track_entries"] == {small: int(small), large: int(large)}

    assert (tmp_path / "raw" / "embedded-manifest-compaction" / "environment.json").exists()
