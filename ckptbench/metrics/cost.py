"""What a checkpoint's requests would cost on AWS S3: a PROJECTION from requests counted on
whatever store was measured, at AWS S3's published request prices.

The prices, their date and source, which operation falls in which price tier and what is billed
live in one data file, ``data/aws-s3-prices.json``; everything that shows money (``report``,
``python -m ckptbench cost``) reads them through here and says they are a projection. Requests
are counted per batch by ``ckptbench.metrics``; this turns those counts into dollars.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

PRICES_FILE = Path(__file__).resolve().parent / "data" / "aws-s3-prices.json"
LABEL = "projection at AWS S3 list prices"
SECONDS_PER_MONTH = 30 * 24 * 3600


@functools.cache
def prices() -> dict:
    """The price file: ``per_1000_requests`` by tier, ``tiers`` by operation, ``as_of``, ``source``."""
    return json.loads(PRICES_FILE.read_text())


def price_per_request(op: str) -> float:
    """Dollars for one request of ``op`` (one of ``infra.s3ops.OPS``)."""
    table = prices()
    return table["per_1000_requests"][table["tiers"][op]] / 1000


def dollars(requests_by_op: dict[str, float]) -> float:
    """Dollars for ``requests_by_op`` (a count, or a mean per batch, per operation)."""
    return sum(n * price_per_request(op) for op, n in requests_by_op.items())


def parse_interval(text: str) -> float:
    """Seconds in a trigger interval such as ``10s``, ``500ms``, ``1min``, ``2h``."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?\s*", text)
    if not found:
        raise ValueError(f"not a trigger interval: {text!r} (say 500ms, 10s, 1min or 2h)")
    value, unit = float(found.group(1)), found.group(2) or "s"
    seconds = value * {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
    if seconds <= 0:
        raise ValueError(f"a trigger interval must be positive, not {text!r}")
    return seconds


def per_month(per_batch: float, trigger_seconds: float) -> float:
    """A per-batch quantity over a 30-day month of back-to-back batches every ``trigger_seconds``."""
    return per_batch * SECONDS_PER_MONTH / trigger_seconds


#: Spark's default ``spark.sql.streaming.stateStore.maintenanceInterval``: the maintenance rounds a
#: projection assumes (the experiments run it more often, to see it at all).
SPARK_MAINTENANCE_INTERVAL_S = 60


def maintenance_per_month(listings_per_partition_round: float, files_per_partition_batch: float,
                          partitions: int, trigger_seconds: float) -> float:
    """State store maintenance's requests over a 30-day month at ``partitions`` state partitions:
    its listings every round at Spark's default interval, and its snapshots and deletes with every
    batch (``ckptbench.metrics.maintenance_rates``)."""
    rounds = SECONDS_PER_MONTH / SPARK_MAINTENANCE_INTERVAL_S
    return partitions * (listings_per_partition_round * rounds + per_month(files_per_partition_batch, trigger_seconds))


def caption() -> str:
    """The line every money figure carries."""
    table = prices()
    return (f"{LABEL} ({table['what']}, as of {table['as_of']}); requests counted on the measured store; "
            f"{table['billed']}")
