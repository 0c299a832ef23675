"""A run's stores: start each named store (behind the metering proxy where it speaks plain
http://; an https store or AWS S3 as it is, its requests then counted in Spark's JVMs alone), with
a bucket and a run prefix of the run's own, and clean up the prefixes runs killed before their
clean-up left behind. A run writes, lists and deletes only under its prefix."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
import uuid

import infra
from ckptbench.config import Settings
from infra.metered import MeteredStore
from infra.net import proc_stat

#: Every key a run writes in its bucket is under ``RUNS_ROOT<run id>/``, beside which an owner object
#: (``RUNS_ROOT<run id>.owner.json``: host, pid, start) says whose run it is; nothing else in a bucket is
#: ever written or deleted by a run, and only ``RUNS_ROOT`` is listed.
RUNS_ROOT = "ckptbench-runs/"
OWNER_SUFFIX = ".owner.json"
#: A run id: its start (UTC) and a random part.
RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}")
#: A run prefix older than this is stale whoever owns it: no experiment runs this long.
STALE_AFTER_S = 24 * 3600


@contextlib.contextmanager
def run_prefix(store: infra.ObjectStore, bucket: str):
    """A fresh prefix for one run, under ``RUNS_ROOT``, its owner object written first; at the end
    everything under it is deleted, the owner object last, so that a clean-up cut short leaves a
    prefix still known as a run's. A run killed before that leaves them behind, for
    ``remove_stale_runs`` (the next run, or ``python -m ckptbench clean``)."""
    started = time.time()
    run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(started))}-{uuid.uuid4().hex[:8]}"
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "started": started}
    store.client().put_object(Bucket=bucket, Key=RUNS_ROOT + run_id + OWNER_SUFFIX, Body=json.dumps(owner).encode())
    try:
        yield f"{RUNS_ROOT}{run_id}/"
    finally:
        _remove_run(store, bucket, run_id)


def _remove_run(store: infra.ObjectStore, bucket: str, run_id: str) -> None:
    store.empty_bucket(bucket, f"{RUNS_ROOT}{run_id}/")
    store.client().delete_object(Bucket=bucket, Key=RUNS_ROOT + run_id + OWNER_SUFFIX)


def stale_runs(store: infra.ObjectStore, bucket: str) -> list[str]:
    """The run prefixes in ``bucket`` whose run is over: its owner object names a process on this
    host that is gone, or a start more than ``STALE_AFTER_S`` ago, or cannot be read. Only run ids
    with an owner object count: a prefix under ``RUNS_ROOT`` without one is not a run's (a run
    writes its owner first and deletes it last), and stays."""
    s3, stale = store.client(), []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=RUNS_ROOT, Delimiter="/"):
        for entry in page.get("Contents", []):
            run_id = entry["Key"][len(RUNS_ROOT):].removesuffix(OWNER_SUFFIX)
            if not (entry["Key"].endswith(OWNER_SUFFIX) and RUN_ID.fullmatch(run_id)):
                continue
            try:
                owner = json.loads(s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read())
                here = owner["host"] == socket.gethostname()
                running = _alive(int(owner["pid"])) if here else True  # another host's: it may be
                recent = time.time() - float(owner["started"]) < STALE_AFTER_S
            except (s3.exceptions.NoSuchKey, ValueError, KeyError, TypeError):
                running = recent = False
            if not (running and recent):
                stale.append(f"{RUNS_ROOT}{run_id}/")
    return stale


def remove_stale_runs(store: infra.ObjectStore, bucket: str) -> list[str]:
    """Delete every stale run (``stale_runs``) in ``bucket``, its prefix and owner object; the
    prefixes removed."""
    stale = stale_runs(store, bucket)
    for prefix in stale:
        _remove_run(store, bucket, prefix[len(RUNS_ROOT):-1])
    return stale


def _alive(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat[1] != "Z"


@contextlib.contextmanager
def started_stores(names: list[str], bucket: str | None, say=print, fault_profile: str = "none", fault_seed: int = 0,
                   needs_proxy: str | None = None):
    """Start each named store that can start (saying why for the others), with its bucket and a run
    prefix of its own in it (``store.run_prefix``, ``run_prefix``; stale ones from killed runs are
    removed first): ``{name: (store, bucket)}``.

    A store on a plain http:// endpoint is put behind the metering proxy (injecting
    ``fault_profile``'s faults), a ``MeteredStore``; one the proxy cannot front (https://, AWS S3)
    is used as it is, its requests counted inside Spark's JVMs only. ``needs_proxy`` names what
    cannot do without the proxy (a fault profile cannot either): such a store is refused in one line.

    Local stores get a fresh bucket named after the store: S3A settings are per bucket name, so two
    stores must never share one. A store this project did not start (``owns_buckets`` false) needs
    ``bucket``, an existing one: no bucket is created or deleted there.
    """
    if bucket and len(names) > 1:
        raise infra.StoreUnavailable("--bucket names one bucket, so measure one store at a time with it")
    if fault_profile != "none":
        needs_proxy = needs_proxy or f"fault profile {fault_profile}"
    with contextlib.ExitStack() as stack:
        started = {}
        for name in names:
            cls = infra.store_class(name)
            reason = cls.unavailable_reason()
            if reason:
                say(f"skipping {reason}")
                continue
            inner = stack.enter_context(cls())
            if bucket is None and not inner.owns_buckets:
                raise infra.StoreUnavailable(f"{name}: name an existing bucket (--bucket or {Settings.ENV['bucket']}); "
                                             "a bucket on a store ckptbench did not start is never created by it")
            if needs_proxy and not inner.meterable:
                raise infra.StoreUnavailable(
                    f"{name}: {needs_proxy} needs the metering proxy, which fronts plain http:// stores only, not "
                    f"{inner.endpoint or 'AWS S3'}; run it on a local store (--store ceph or embedded)")
            target = bucket or f"ckptbench-measure-{name}"
            if bucket is None:
                inner.create_bucket(target)
            inner.check_bucket(target)
            store = stack.enter_context(MeteredStore(inner, fault_profile, fault_seed)) if inner.meterable else inner
            for prefix in remove_stale_runs(inner, target):
                say(f"removed {prefix} in {target}, left by a run that ended before cleaning up")
            store.run_prefix = inner.run_prefix = stack.enter_context(run_prefix(inner, target))
            started[name] = (store, target)
            say(f"store: {store.describe()}")
        yield started


@contextlib.contextmanager
def started_store(settings: Settings, needs_proxy: str | None = None):
    """The one store of ``settings`` with its bucket (``started_stores``); fails in one line if it
    cannot start, or cannot be metered and ``needs_proxy`` says what needs that."""
    reason = infra.store_class(settings.store).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    with started_stores([settings.store], settings.bucket, fault_profile=settings.fault_profile,
                        fault_seed=settings.fault_seed, needs_proxy=needs_proxy) as stores:
        yield stores[settings.store]
