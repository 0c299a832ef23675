"""How a record was measured, as clauses the report's captions and headers append: who counted
its requests, how its measured batches were split over queries, and which strategies from outside
the project it ran."""

from __future__ import annotations

from pathlib import Path

from ckpt_impls import settings
from ckptbench import config
from ckptbench.record import results


def counted_by(record: results.Results) -> str:
    """Who counted the record's requests: the metering proxy (and every record before ``where``), or
    Spark's JVMs alone where no proxy could front the store."""
    where = record.environment.get("where")
    return "Spark's JVMs (no proxy fronts an https store)" if where and "proxy" not in where["counted_by"] \
        else "the metering proxy"


def foreign_said(environment: dict) -> str:
    """The strategies from outside a record measured, each named fully (class; each jar's file name,
    SHA-256 prefix, size and version), as a clause to append to where it was measured; "" for none."""
    said = []
    for name, found in (environment.get("foreign_strategies") or {}).items():
        jars = ", ".join(f"{Path(j['path']).name} sha256 {j['sha256'][:12]}, {j['size']:,} bytes"
                         + (f", version {j['implementation_version']}" if j["implementation_version"] else "")
                         for j in found["jars"])
        said.append(f"{name} = {found['class']} ({jars})")
    return f"; strategies from outside: {'; '.join(said)}" if said else ""


def settings_said(environment: dict) -> str:
    """The user's settings a record ran with (``--conf``, a strategies file's; secret values redacted),
    as a clause to append to where it was measured; "" for none."""
    said = settings.said(environment.get("settings") or {})
    return f"; the user's settings: {said}" if said else ""


def runtime_said(environment: dict) -> str:
    """What ran the checkpoints: Spark and the S3A connector with the AWS SDK it is built on
    ("Spark 4.3.0, hadoop-aws 3.5.0 on AWS SDK v2 2.35.4"), from the record's ``versions``, and the
    strategies that connector cannot run, so were not measured (``not_runnable``)."""
    versions = environment.get("versions") or {}
    said = f"Spark {versions.get('spark', '?')}"
    if versions.get("hadoop_aws"):
        said += f", hadoop-aws {versions['hadoop_aws']} on AWS SDK {versions.get('aws_sdk', '?')}"
    missing = environment.get("not_runnable") or {}
    if missing:
        said += " (not measured on it: " + "; ".join(f"{name}, which needs hadoop-aws {need}+"
                                                      for name, need in missing.items()) + ")"
    return said


def measured_said(plan: dict) -> str:
    """How a record's ``plan`` measured each configuration: its measured batches, and the queries
    (``config.Plan.repeats``, one in a record from before repeats) they were split over."""
    repeats = plan.get("repeats", 1)
    if repeats == 1:
        return f"{plan['batches']} measured batches after {plan['warmup']} warm-up per query"
    return (f"{plan['batches']} measured batches per configuration over {repeats} queries in mirrored rounds, "
            f"{config.per_query(plan['batches'], repeats)} each after {plan['warmup']} warm-up")
