"""The crash lab: does each strategy keep exactly-once when the driver is killed (``ckptbench.experiments.crashlab``)?

Per strategy x workload, ``CRASH_PLAN.cycles`` cycles of: kill the driver with SIGKILL (its whole
process group, the JVM included) at a crash point (a seeded random delay, just after ``offsets/N``
is stored, during the state upload, just after the sink committed), restart it on the same
checkpoint and output, check the output read through Spark against ``commits/``. Then a clean
stop, a last check at rest and a count of what was left behind. Per strategy, a second driver
started on a checkpoint the first still runs on (a zombie after failover), and two started
together, held at one file until both write it. Per strategy x file kind, the race of two
managers creating one file (``Races``): the measure of whether a second writer is refused.

- duplicated / lost rows: from the check at rest after each series' clean stop; any non-zero value
  is a broken exactly-once guarantee;
- recovery: from just before the restarted query's ``start()`` (its SparkSession already up; the
  JVM's start is ``track_jvm_start_p50_ms``) to the end of the request that stored its first
  ``commits/N``; its requests are those the metering proxy saw in that window;
- left behind: Spark's rename temp files, sink data files its ``_spark_metadata`` does not list
  (a killed batch's), multipart uploads never completed nor aborted.
"""

from ckptbench import metrics

from . import common


class CrashCycles(common.Tracks):
    params = [common.STRATEGIES, list(common.CRASH_PLAN.workloads)]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.crashes)

    def track_cycles(self, results, strategy, workload):
        return metrics.crash_cycles(results, strategy, workload)

    def track_kills_inside_a_batch(self, results, strategy, workload):
        """Cycles whose kill left offsets/N without commits/N, so the restart re-ran batch N."""
        return metrics.kills_inside_a_batch(results, strategy, workload)

    def track_restart_failure_rate(self, results, strategy, workload):
        return metrics.restart_failure_rate(results, strategy, workload)

    def track_duplicated_rows(self, results, strategy, workload):
        return metrics.duplicated_rows(results, strategy, workload)

    def track_lost_rows(self, results, strategy, workload):
        return metrics.lost_rows(results, strategy, workload)

    def track_cycles_not_exactly_once(self, results, strategy, workload):
        """Cycles whose check after the restart found duplicated or lost rows or a partly visible batch."""
        return metrics.cycles_not_exactly_once(results, strategy, workload)

    def track_recovery_p50_ms(self, results, strategy, workload):
        return metrics.recovery_percentile(results, strategy, 50, workload)

    def track_recovery_p95_ms(self, results, strategy, workload):
        return metrics.recovery_percentile(results, strategy, 95, workload)

    def track_recovery_requests(self, results, strategy, workload):
        """Median S3 requests from the restarted query's start to its first stored commits/N."""
        return metrics.recovery_requests(results, strategy, workload)

    def track_jvm_start_p50_ms(self, results, strategy, workload):
        return metrics.jvm_start_percentile(results, strategy, 50, workload)

    def track_temp_objects_left(self, results, strategy, workload):
        return metrics.leftover_objects(results, strategy, "temp_objects", workload)

    def track_orphan_data_files_left(self, results, strategy, workload):
        return metrics.leftover_objects(results, strategy, "orphan_files", workload)

    def track_pending_uploads_left(self, results, strategy, workload):
        return metrics.leftover_objects(results, strategy, "pending_uploads", workload)

    track_cycles.unit = track_cycles_not_exactly_once.unit = track_kills_inside_a_batch.unit = "cycles"
    track_restart_failure_rate.unit = "share of cycles"
    track_duplicated_rows.unit = track_lost_rows.unit = "rows"
    track_recovery_p50_ms.unit = track_recovery_p95_ms.unit = track_jvm_start_p50_ms.unit = "ms"
    track_recovery_requests.unit = "requests"
    track_temp_objects_left.unit = track_orphan_data_files_left.unit = track_pending_uploads_left.unit = "objects"


class TwoWriters(common.Tracks):
    """Two drivers on one checkpoint and output, the second started after ``head_start`` batches of
    the first (0: together): 1 when the run ended as named, else 0. ``clean-error``: a query failed
    on the other's file, output exactly-once; ``silent-damage``: output not exactly-once (or
    unreadable) or a log file written twice."""

    params = [common.TWO_WRITER_STRATEGIES, list(common.CRASH_PLAN.two_writers),
              list(common.CRASH_PLAN.two_writer_starts)]
    param_names = ["strategy", "workload", "head_start"]
    setup_cache = staticmethod(common.crashes)

    def track_clean_error(self, results, strategy, workload, head_start):
        return metrics.two_writer_outcome_is(results, strategy, "clean-error", workload, head_start)

    def track_silent_damage(self, results, strategy, workload, head_start):
        return metrics.two_writer_outcome_is(results, strategy, "silent-damage", workload, head_start)

    def track_overwritten_log_files(self, results, strategy, workload, head_start):
        return float(metrics.two_writer_run(results, strategy, workload, head_start).overwritten_logs)

    track_clean_error.unit = track_silent_damage.unit = "yes (1) / no (0)"
    track_overwritten_log_files.unit = "files"


class TwoWritersRaced(common.Tracks):
    """Two drivers started together on one checkpoint and output, each held by the metering proxy
    at its write of one file (``race``: its kind, of batch 0) until the other's came, so both
    write it past every check: 1 when the run ended as named, else 0 (see ``TwoWriters``)."""

    params = [common.TWO_WRITER_STRATEGIES, list(common.CRASH_PLAN.two_writers),
              list(common.CRASH_PLAN.two_writer_races)]
    param_names = ["strategy", "workload", "race"]
    setup_cache = staticmethod(common.crashes)

    def track_clean_error(self, results, strategy, workload, race):
        return metrics.two_writer_outcome_is(results, strategy, "clean-error", workload, race=race)

    def track_silent_damage(self, results, strategy, workload, race):
        return metrics.two_writer_outcome_is(results, strategy, "silent-damage", workload, race=race)

    track_clean_error.unit = track_silent_damage.unit = "yes (1) / no (0)"


class Races(common.Tracks):
    """Two managers of the strategy creating one new file of a kind (offsets, commits, a state
    delta, _spark_metadata) with overwrite off, closed at once while the proxy holds the first
    write until the second's comes (``ckptbench.experiments.race``). Two-winner rounds: both
    writers told the file is theirs, a second writer let through; 0 is right. What decides
    whether the recommendation counts a strategy as refusing a second writer."""

    params = [common.STRATEGIES, list(common.CRASH_PLAN.race_kinds)]
    param_names = ["strategy", "kind"]
    setup_cache = staticmethod(common.crashes)

    def track_two_winner_rounds(self, results, strategy, kind):
        return metrics.race_two_winners(results, strategy, kind)

    def track_one_winner_rounds(self, results, strategy, kind):
        """Rounds whose writes met at the store and exactly one writer won."""
        return metrics.race_one_winner(results, strategy, kind)

    def track_unmet_rounds(self, results, strategy, kind):
        """Rounds whose writes never met at the store: they tested nothing."""
        return metrics.race_unmet(results, strategy, kind)

    track_two_winner_rounds.unit = track_one_winner_rounds.unit = track_unmet_rounds.unit = "rounds"
