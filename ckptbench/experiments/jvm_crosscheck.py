"""Cross-check the JVM's S3 request counts against the metering proxy's, on any Spark master that
runs on this machine (the proxy listens on the loopback): ``local[N]``, ``local-cluster[...]``, or a
standalone cluster (``spark://...``, or ``cluster``: one started here), with executors in JVMs of
their own whose counts reach the driver through the plugin.

``python -m ckptbench.experiments.jvm_crosscheck --store embedded --master 'local-cluster[1,1,1024]'`` runs the
stateful workload through each strategy and prints, as JSON, per strategy: the requests each
source counted, where they disagree (``jvm_requests.disagreements``), the JVM's attempts that never
reached the proxy (``jvm_requests.unseen_by_proxy``) and the proxy's unanswered records no attempt
pairs with (``unanswered_only_in_proxy``), the requests they filed under
different batches (``jvm_requests.moved``), which JVMs reported them and the state store PUTs each
executor sent (``cross_check``); on a cluster started here, its JVMs' pids by role and any process
whose command line holds the store's secret key.
Exit status 1 when the sources disagree, a run failed, or a command line held the store's secret.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

import pandas as pd

import ckpt_impls
from ckptbench import config
from ckptbench.harness import jvm_requests, querylab, stores
from ckptbench.record import results, schema
from infra.net import command_lines_holding, proc_started

WARMUP, BATCHES, KEYS = 1, 3, 5


def executor_state_puts(jvm: pd.DataFrame) -> dict[str, int]:
    """The PUTs to the state store's area among ``jvm`` (request rows the JVMs counted) per executor
    id that sent them; the driver's are left out ({} in local mode, where the driver runs the tasks)."""
    puts = jvm[(jvm.op == "PUT") & (jvm.area == "state") & jvm.origin.notna() & (jvm.origin != "driver")]
    return {str(k): int(v) for k, v in puts.origin.value_counts().sort_index().items()}


def cross_check(store: str, strategies, master: str, batches: int = BATCHES) -> dict:
    """Per strategy: the requests each source counted (in all and per operation), where they
    disagree, what moved between batches, which JVMs reported them; and where the runs ran
    (``querylab.QueryLab.where``). On ``config.CLUSTER``, also, taken while the application still runs: the
    pids of the cluster's JVMs by role and when each started (``cluster``: a pid and its start name
    one process) and every process whose command line held the store's secret key, by pid and role
    (``secret_on_command_lines``: {}, or the key leaked)."""
    settings = config.Settings(store=store, size="smallest", bucket=None, raw=config.ROOT / "results" / "raw")
    out = {}
    with stores.started_store(settings, needs_proxy="the cross-check") as (metered, bucket), \
            querylab.lab(metered, bucket, settings.plan, strategies[0], master=master) as lab:
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
            out[strategy] = {"requests": {source: int((requests.source == source).sum()) for source in schema.SOURCES},
                             "by_op": {source: requests[requests.source == source].op.value_counts().to_dict()
                                       for source in schema.SOURCES},
                             "executor_state_puts": executor_state_puts(jvm),
                             "disagreements": jvm_requests.disagreements(run).to_dict("records"),
                             "moved": jvm_requests.moved(run).to_dict("records"),
                             "exact_disagreements": len(jvm_requests.disagreements(run, exact=True)),
                             "unanswered_jvm_attempts": int((jvm.status == 0).sum()),
                             "unseen_by_proxy": jvm_requests.unseen_by_proxy(run),
                             "unanswered_only_in_proxy": jvm_requests.unanswered_only_in_proxy(run),
                             "origins": dict(lab.jvm.origins - before), "dropped": lab.jvm.dropped()}
        checked = {"strategies": out, "where": lab.where}
        if lab.cluster is not None:
            jvms = lab.cluster.jvm_command_lines()
            role = {pid: name for name, lines in jvms.items() for pid in lines}
            secret = metered.credentials.secret_key if metered.credentials else None
            checked["cluster"] = {"directory": str(lab.cluster.directory),
                                  "jvms": {name: sorted(lines) for name, lines in jvms.items()},
                                  "started": {pid: proc_started(pid) for pid in role}}
            # pids and roles only: the lines themselves would put the secret into this output
            checked["secret_on_command_lines"] = (None if secret is None else
                                                  {pid: role.get(pid, "other")
                                                   for pid in command_lines_holding([secret])})
    return checked


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ckptbench.experiments.jvm_crosscheck",
                                     description=__doc__.split("\n\n")[0])
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
