"""``python -m ckptbench cost``'s tables: money per month for one query, a PROJECTION at AWS S3
list prices (``metrics.cost``) from the requests a record counted, at the record's own scale
(``cost_table``, streaming records) or at another number of shuffle partitions from the scale
experiment's fits (``cost_at_scale_table``). The CLI checks its arguments and prints what these
return; nothing here reads a directory but the records given."""

from __future__ import annotations

import math

from ckptbench import metrics
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.report.table import Table


def cost_table(records: list[results.Results], trigger_text: str, trigger_s: float) -> Table:
    """Per store x strategy x workload of streaming ``records``: billable requests per batch, dollars
    per million batches, and requests and dollars a month at one batch every ``trigger_s`` seconds
    (``trigger_text``: the interval as the user wrote it). A run that failed or is missing is left out."""
    rows = []
    for record in records:
        for strategy in record.strategies():
            for workload in dict.fromkeys(record.runs.workload):
                try:
                    by_op = metrics.billable_requests_by_op(record.run(strategy, workload))
                except (results.RunFailed, KeyError):
                    continue
                per_batch, dollars = sum(by_op.values()), cost.dollars(by_op)
                rows.append([record.environment["store"], strategy, workload, f"{per_batch:.1f}",
                             f"{dollars * 1e6:,.2f}", f"{cost.per_month(per_batch, trigger_s):,.0f}",
                             f"{cost.per_month(dollars, trigger_s):,.2f}"])
    return Table(f"Cost per month, one query, a batch every {trigger_text}: {cost.caption()}.",
                 ["store", "strategy", "workload", "billable requests per batch", "$ per million batches",
                  "requests per month", "$ per month"], rows)


def cost_at_scale_table(records: list[results.Results], partitions: int, trigger_text: str, trigger_s: float,
                        strategies: list[str] | None = None) -> tuple[Table, int]:
    """The requests of one batch at ``partitions`` shuffle partitions, from each operation's fit
    against partitions in the scale ``records``, per month and in dollars, per store x strategy
    (``strategies``, else every strategy a record ran); a strategy with no fit says why in its row.
    The note: the state store's maintenance, measured apart and projected to ``partitions``. Also
    returns how many rows have a fit (none: nothing was projected)."""
    rows, notes, fitted = [], [], 0
    for record in records:
        store = record.environment["store"]
        for strategy in strategies or record.strategies():
            try:
                points = metrics.scale_points(record, "partitions", strategy)
                by_op = metrics.projected_requests_by_op(record, strategy, partitions)
                _, slope, r2 = metrics.scale_fit(record, "partitions", strategy, "requests")
            except (results.RunFailed, KeyError, TypeError, ValueError) as e:
                rows.append([store, strategy, f"no fit: {e}", "", "", "", ""])
                continue
            beyond = " (extrapolated)" if partitions > max(x for x, _ in points) else ""
            per_batch, fitted = sum(by_op.values()), fitted + 1
            rows.append([store, strategy, ", ".join(f"{x:,.0f}" for x, _ in points), f"{slope:.2f} (r² {r2:.2f})",
                         f"{per_batch:,.1f}{beyond}", f"{cost.per_month(per_batch, trigger_s):,.0f}",
                         f"{cost.per_month(cost.dollars(by_op), trigger_s):,.2f}"])
            listings, files = metrics.or_none(metrics.maintenance_rates, record, strategy) or (math.nan, math.nan)
            if not math.isnan(listings):
                month = cost.maintenance_per_month(listings, 0.0 if math.isnan(files) else files, partitions, trigger_s)
                by_batch = (f"snapshots and deletes {files:.2f} per state partition and batch over the long query"
                            if not math.isnan(files) else "snapshots and deletes not measured (no long query in the "
                            "record: a point's few batches stay under the retention)")
                notes.append(f"- {store} {strategy}: listings {listings:.2f} requests per state partition and round "
                             f"over its scale runs; {by_batch}; about {month:,.0f} requests a month more")
    note = "\n".join([f"Not in these figures: the state store's maintenance (listings every round, snapshots and "
                      f"deletes past retention with the batches), which runs on its own schedule. Measured, and "
                      f"PROJECTED to {partitions:,} partitions at Spark's default interval of "
                      f"{cost.SPARK_MAINTENANCE_INTERVAL_S} s:", *notes]) if notes else ""
    return Table(f"Cost per month, one query with {partitions:,} shuffle partitions and one stateful operator, a "
                 f"batch every {trigger_text}: a PROJECTION from the measured slopes ({cost.caption()}).",
                 ["store", "strategy", "measured partitions", "requests per partition (fit)",
                  "billable requests per batch (projected)", "requests per month", "$ per month"], rows, note), fitted
