"""The floor: the store's own latency per request on 1 KiB objects, timed by the metering proxy
(request head in to response out, so no client overhead), for reading every other figure as a
multiple of it. LIST lists one key's prefix (one entry, like S3A's existence checks). And the same
requests as Spark's own S3 client makes them in the driver JVM (``store_alone.client_floor``), whose PUT a
checkpoint file costs at least.

And what the proxy itself adds: client-timed PUT and HEAD straight to the store and through the
proxy, in pairs (``ckptbench.experiments.store_alone.proxy_overhead``); the target is at most 10% of the store's
PUT median.
"""

from ckptbench import config, metrics

from . import common


class Floor(common.Tracks):
    params = [list(config.FLOOR_OPS)]
    param_names = ["op"]
    setup_cache = staticmethod(common.store_alone)
    percentile = staticmethod(metrics.floor_percentile)

    def track_p50(self, results, op):
        return self.percentile(results, op, 50)

    def track_p95(self, results, op):
        return self.percentile(results, op, 95)

    track_p50.unit = track_p95.unit = "ms"


class ClientFloor(Floor):
    """The same requests made by Spark's S3 client in the driver JVM of a streaming run."""

    setup_cache = staticmethod(common.streaming)
    percentile = staticmethod(metrics.client_floor_percentile)


class ProxyOverhead(common.Tracks):
    params = [["PUT", "HEAD"]]
    param_names = ["op"]
    setup_cache = staticmethod(common.store_alone)

    def track_added_ms(self, results, op):
        return metrics.proxy_added_ms(results, op)

    def track_added_pct_of_put(self, results, op):
        """The added latency as a percentage of the direct PUT median."""
        return metrics.proxy_added_pct_of_put(results, op)

    track_added_ms.unit = "ms"
    track_added_pct_of_put.unit = "%"
