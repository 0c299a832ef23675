"""The floor: the store's own latency per request on 1 KiB objects, timed by the metering proxy
(request head in to response out, so no client overhead), for reading every other figure as a
multiple of it. LIST lists one key's prefix (one entry, like S3A's existence checks).

And what the proxy itself adds: client-timed PUT and HEAD straight to the store and through the
proxy, in pairs (``measure.proxy_overhead``); the target is at most 10% of the store's PUT median.
"""

from ckptbench import measure, metrics

from . import common


class Floor:
    params = [list(measure.FLOOR_OPS)]
    param_names = ["op"]
    setup_cache = staticmethod(common.store_only)

    def track_p50(self, data, op):
        return metrics.percentile(data["floor"][op], 50)

    def track_p95(self, data, op):
        return metrics.percentile(data["floor"][op], 95)

    track_p50.unit = track_p95.unit = "ms"


class ProxyOverhead:
    params = [["PUT", "HEAD"]]
    param_names = ["op"]
    setup_cache = staticmethod(common.store_only)

    def track_added_ms(self, data, op):
        return _added(data, op)

    def track_added_pct_of_put(self, data, op):
        """The added latency as a percentage of the direct PUT median."""
        return 100 * _added(data, op) / common.median(data["overhead"]["PUT"]["direct"])

    track_added_ms.unit = "ms"
    track_added_pct_of_put.unit = "%"


def _added(data, op):
    """The median of the paired differences, proxied minus direct."""
    routes = data["overhead"][op]
    return common.median([p - d for p, d in zip(routes["proxied"], routes["direct"])])
