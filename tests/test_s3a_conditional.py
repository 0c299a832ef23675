"""``s3a-conditional``: S3A's own conditional create (hadoop-aws 3.4.2+) sends ``If-None-Match: *``
on the manager's create-only PUT, and the manager refuses an S3A that cannot.

That the header is sent is shown by taking it away: behind a metering proxy the store refuses a
second create of a file with a 412 (and S3A sends no HEAD or LIST before it); with the proxy
dropping ``If-None-Match`` from PUTs, moto (which then sees a plain PUT) lets the same create
overwrite the file. A manager that checked and wrote instead (S3A's plain ``create``) fails both.
"""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from ckptbench.experiments.contract import java_class
from helpers import CheckpointFiles, ckptbench_here, fresh_bucket_behind_proxy, one_error_line
from infra.faults import Fault

STRATEGY = "s3a-conditional"


@pytest.fixture
def behind_proxy(spark, suite_stores):
    """The embedded store (moto server) behind a fresh metering proxy, on a bucket of its own."""
    if ckpt_impls.unavailable(STRATEGY):
        pytest.skip(ckpt_impls.unavailable(STRATEGY))
    with fresh_bucket_behind_proxy(spark, suite_stores.get("embedded"), "s3ac") as (m, bucket):
        yield m, bucket


def test_the_create_only_put_carries_if_none_match(spark, behind_proxy):
    store, bucket = behind_proxy
    files = CheckpointFiles(spark, STRATEGY, store, "ck", bucket)
    files.mkdirs("offsets")
    files.write("offsets/0", b"first")

    mark = store.proxy.mark()
    with pytest.raises(Py4JJavaError) as raised:
        files.write("offsets/0", b"second")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    sent = [(e.op, e.status) for e in store.proxy.events_since(mark) if e.key == "ck/offsets/0"]
    assert sent == [("PUT", 412)], sent  # refused by the store, with no probe before it
    assert files.read("offsets/0") == b"first"

    store.proxy.inject(Fault("PUT", drop_header="If-None-Match"))
    files.write("offsets/0", b"third")  # the same create, without the header: a plain PUT
    assert files.read("offsets/0") == b"third"


@pytest.mark.parametrize("cause", ["switched off", "S3A too old"])
def test_an_s3a_without_conditional_create_is_refused_in_one_line(spark, suite_stores, cause):
    """Spark 4.3's S3A with ``fs.s3a.create.conditional.enabled=false``; in the Spark 3.5 venv
    (``tests/test_spark35.py``), hadoop-aws 3.3.4 as it is."""
    too_old = ckpt_impls.unavailable(STRATEGY) is not None
    if too_old != (cause == "S3A too old"):
        pytest.skip("the loaded S3A " + ("lacks the feature: it cannot be switched off" if too_old else "has it"))
    settings = {} if too_old else {"fs.s3a.create.conditional.enabled": "false",
                                   "fs.s3a.impl.disable.cache": "true"}  # a filesystem of this setting's own
    with pytest.raises(Py4JJavaError) as raised:
        CheckpointFiles(spark, STRATEGY, suite_stores.get("embedded"), "refused", settings=settings)
    lines = [line for line in str(raised.value).splitlines() if "Strategy 's3a-conditional' needs" in line]
    assert lines, str(raised.value)[:2000]
    line = lines[0]
    assert "UnsupportedFileSystemException" in line and "use strategy 'conditional'" in line, line
    expected = "fs.s3a.create.conditional.enabled=false" if not too_old else "hadoop-aws 3.4.2+"
    assert expected in line, line


def test_bench_leaves_it_out_where_the_loaded_s3a_is_too_old_and_refuses_it_named():
    """In the Spark 3.5 venv (``tests/test_spark35.py``): ``bench`` measures every strategy but this
    one, and refuses ``--strategies`` naming it, in one line, before anything starts."""
    reason = ckpt_impls.unavailable(STRATEGY)
    if reason is None:
        pytest.skip("the loaded S3A has conditional create")
    assert ckpt_impls.runnable() == [s for s in ckpt_impls.STRATEGIES if s != STRATEGY]
    line = one_error_line(ckptbench_here("bench", "--strategies", f"rename,{STRATEGY}"))
    assert line == f"ckptbench: error: {reason}", line
