"""Cross-check the JVM's S3 request counts against the metering proxy's, on any Spark master that
runs on this machine (the proxy listens on the loopback): ``local[N]``, ``local-cluster[...]``, or a
standalone cluster (``spark://...``, or ``cluster``: one started here), with executors in JVMs of
their own whose counts reach the driver through the plugin.

``python -m ckptbench.jvm_crosscheck --store embedded --master 'local-cluster[1,1,1024]'`` runs the
stateful workload through each strategy and prints, as JSON, per strategy: the requests each
source counted, where they disagree (``jvm_requests.disagreements``), the requests they filed under
different batches (``jvm_requests.moved``) and which JVMs reported them (``cross_check``).
Exit status 1 when the sources disagree, a run failed, or a command line held the store's secret.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

import ckpt_impls
from infra.net import command_lines

from . import jvm_requests, results, runs

WARMUP, BATCHES, KEYS = 1, 3, 5


def cross_check(store: str, strategies, master: str, batches: int = BATCHES) -> dict:
    """Per strategy: the requests each source counted (in all and per operation), where they
    disagree, what moved between batches, which JVMs reported them; and where the runs ran
    (``runs.Lab.where``). On ``runs.CLUSTER``, also, while the application runs: how many of the
    cluster's JVMs of each role there were and how many processes' command lines held the store's
    secret key (0, or the keys leaked)."""
    settings = runs.Settings(store=store, size="smallest", bucket=None, raw=results.ROOT / "results" / "raw")
    out = {}
    with runs.started_store(settings, needs_proxy="the cross-check") as (metered, bucket), \
            runs.lab(metered, bucket, settings.plan, strategies[0], master=master) as lab:
        for strategy in strategies:
            recorder = results.Recorder()
            before = lab.jvm.origins.copy()
            lab.run(recorder, strategy, "stateful", KEYS, WARMUP, batches)
            record = recorder.results({})
            error = record.runs.error.iloc[0]
            if isinstance(error, str):
                out[strategy] = {"error": error}
                continue
            run = record.run(strategy, "stateful", KEYS)
            requests = record.requests
            jvm = requests[requests.source == "jvm"]
            out[strategy] = {"requests": {source: int((requests.source == source).sum()) for source in results.SOURCES},
                             "by_op": {source: requests[requests.source == source].op.value_counts().to_dict()
                                       for source in results.SOURCES},
                             "executor_state_puts": int(((jvm.op == "PUT") & (jvm.area == "state")
                                                         & (jvm.origin != "driver")).sum()),
                             "disagreements": jvm_requests.disagreements(run).to_dict("records"),
                             "moved": jvm_requests.moved(run).to_dict("records"),
                             "exact_disagreements": len(jvm_requests.disagreements(run, exact=True)),
                             "unanswered_jvm_attempts": int((jvm.status == 0).sum()),
                             "origins": dict(lab.jvm.origins - before), "dropped": lab.jvm.dropped()}
        checked = {"strategies": out, "where": lab.where}
        if lab.cluster is not None:
            checked["cluster_directory"] = str(lab.cluster.directory)
            secret = metered.credentials.secret_key if metered.credentials else None
            checked["cluster_jvms"] = {role: len(lines) for role, lines in lab.cluster.jvm_command_lines().items()}
            checked["secret_on_command_lines"] = (sum(secret in line for line in command_lines().values())
                                                  if secret else None)
    return checked


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckptbench.jvm_crosscheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="embedded")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    parser.add_argument("--batches", type=int, default=BATCHES)
    args = parser.parse_args(argv)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the JSON's alone
        out = cross_check(args.store, args.strategies.split(","), args.master, args.batches)
    print(json.dumps(out, indent=1, default=str))
    return int(any("error" in r or r["disagreements"] for r in out["strategies"].values())
               or bool(out.get("secret_on_command_lines")))


if __name__ == "__main__":
    sys.exit(main())
