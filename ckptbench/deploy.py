"""How to run a strategy in production: the jars, and the exact ``spark-submit`` flags and
``SparkSession`` settings, built from ``ckpt_impls.session_conf`` (what ``ckpt_impls.configure``
puts on the lab's own sessions) plus the strategy's declared options at their defaults.

Credentials never appear: the per-bucket S3A settings name the AWS SDK's default provider chain,
which reads keys from the environment, Java system properties, the profile file or the
instance/container role of each node. ``python -m ckptbench deploy`` prints it.
"""

from __future__ import annotations

import os
import shlex

import ckpt_impls
import infra
from ckpt_impls import jars, settings
from infra.minio import ENDPOINT_ENV as MINIO_ENDPOINT_ENV
from infra.remote import ENDPOINT_ENV

#: The application argument of the printed spark-submit command: replace it with yours.
APP = "your_app.py"
SPARK_HADOOP = "spark.hadoop."


class Target(infra.ObjectStore):
    """A store that runs elsewhere, of a kind ckptbench knows (its S3A settings: Ceph RGW's signer,
    say) at an endpoint the user names. Nothing is started; credentials stay with the AWS SDKs'
    default chains (boto3 for the bucket check, the S3A SDK's in the JVM)."""

    def __init__(self, kind: type[infra.ObjectStore], endpoint: str) -> None:
        self.name, self.emulator, self.endpoint = kind.name, kind.emulator, endpoint
        self._kind = kind

    def _start(self) -> None:
        pass

    def _stop(self) -> None:
        pass

    def s3a_options(self, sdk: str) -> dict[str, str]:
        return self._kind().s3a_options(sdk)


def target(kind: str) -> Target:
    """The running store of ``kind``: AWS S3 for ``s3``; for every other kind the endpoint in
    ``CKPT_S3_ENDPOINT`` (for ``minio`` also ``CKPT_MINIO_ENDPOINT``). deploy starts no server:
    the flags must outlive the command."""
    cls = infra.store_class(kind)
    if kind == "s3":
        return Target(cls, "")
    names = (MINIO_ENDPOINT_ENV, ENDPOINT_ENV) if kind == "minio" else (ENDPOINT_ENV,)
    endpoint = next((os.environ[n] for n in names if os.environ.get(n)), "")
    if not endpoint:
        raise infra.StoreUnavailable(f"deploy --store {kind}: set {ENDPOINT_ENV} to the URL of the running {kind} "
                                     "server (deploy starts no server: its flags must outlive the command)")
    if not endpoint.startswith(("http://", "https://")):
        raise infra.StoreUnavailable(f"deploy --store {kind}: '{endpoint}' is not an http(s):// URL")
    return Target(cls, endpoint.rstrip("/"))


def plan(strategy: str, store, bucket: str) -> dict:
    """What running ``strategy`` on ``s3a://bucket`` of ``store`` takes, as data: ``jars`` (path and
    what each is), ``conf`` (every Spark setting but the jars, in order: the manager class, the
    S3A settings, the user's settings (``ckpt_impls.settings``), the strategy's options at their
    defaults, its own settings), ``submit`` (spark-submit's argv, the application last), and the
    keys of the user's settings (``yours``) and of those not printed as they look secret (``secret``)."""
    chosen = ckpt_impls.get(strategy)
    conf = ckpt_impls.session_conf(strategy, store, bucket)
    paths = ckpt_impls.needed_jars(strategy, conf.pop("spark.jars").split(","))
    for option in chosen.options:
        conf[SPARK_HADOOP + option.name] = option.default
    yours = settings.of(strategy)
    conf.update({s.key: s.value for s in yours if s.scope != settings.EVERY and not s.secret})
    submit = ["spark-submit", "--jars", ",".join(paths)]
    for key, value in conf.items():
        submit += ["--conf", f"{key}={value}"]
    return {"strategy": strategy, "store": store.name, "endpoint": store.endpoint or "AWS S3", "bucket": bucket,
            "emulator": store.emulator, "jars": [{"path": p, "what": _jar_what(p)} for p in paths],
            "packages": _packages(paths), "conf": conf, "submit": [*submit, APP], "versions": jars.versions(),
            "yours": [s.key for s in yours], "secret": [s.key for s in yours if s.secret]}


def _packages(paths: list[str]) -> list[str]:
    """The Maven coordinates of the bundled S3A jars among ``paths`` (``jars.S3A``), which a user can
    give spark-submit's ``--packages`` instead of their paths; none where the S3A jars are the user's.
    A Spark module's jar (``jars.SPARK_MODULES``) is named by its path only: ``--packages`` resolves
    transitively, and spark-hadoop-cloud's POM brings a hadoop-aws of its own over the pinned one."""
    if jars.users_own():
        return []
    names = {os.path.basename(p) for p in paths}
    return [a.coordinates for a in jars.bundled() if a.file in names]


def _command(argv: list[str]) -> str:
    """``argv`` as one shell command, an option and its value per line."""
    words = [shlex.quote(arg) for arg in argv]
    lines, i = [words[0]], 1
    while i < len(words):
        takes_value = words[i].startswith("--") and i + 1 < len(words)
        lines.append(" ".join(words[i:i + 2]) if takes_value else words[i])
        i += 2 if takes_value else 1
    return " \\\n  ".join(lines)


def _jar_what(path: str) -> str:
    if path == str(jars.MANAGERS_JAR):
        return "ckptbench's checkpoint managers (built from ckpt_impls/java)"
    if module := next((m for m in jars.SPARK_MODULES if path == str(jars.module_jar(m))), None):
        return f"Spark's {module} module, which holds the manager ({jars.module(module).coordinates}, bundled)"
    if found := ckpt_impls.foreign_jar(path):
        strategy, jar = found
        return (f"{strategy.name}'s manager, from outside ({strategy.manager_class}; sha256 {jar.sha256[:12]}"
                + (f", version {jar.implementation_version}" if jar.implementation_version else "") + ")")
    source = f"yours, from {jars.USER_JARS_ENV}" if jars.users_own() else "bundled"
    name = os.path.basename(path)
    if name.startswith("hadoop-aws"):
        return f"the S3A connector ({source})"
    if "sdk" in name or name.startswith("bundle"):
        return f"the AWS SDK the S3A connector is built on ({source})"
    return f"for the S3A connector ({source})"


def _what_conf(key: str, bucket: str, strategy, yours: list[str]) -> str:
    if key in yours:
        return "yours (--conf, or the strategies file)"
    if key == ckpt_impls.MANAGER_CLASS_CONF:
        return "the strategy's CheckpointFileManager"
    if key.startswith(f"{SPARK_HADOOP}fs.s3a.bucket.{bucket}."):
        return "the store, for this bucket only"
    if key.startswith(SPARK_HADOOP + "fs.s3a."):
        return "needed by hadoop-aws 3.3.x on Spark 4's Hadoop 3.5 client"
    option = next((o for o in strategy.options if SPARK_HADOOP + o.name == key), None)
    return f"option (default): {option.what}" if option else ""


def text(data: dict) -> str:
    """``plan``'s data for a person: the jars, the spark-submit command, the same as SparkSession
    settings, and where the credentials come from."""
    chosen = ckpt_impls.get(data["strategy"])
    bucket, v = data["bucket"], data["versions"]
    lines = [f"# strategy {chosen.name}: {chosen.description}",
             f"# store: {data['store']} at {data['endpoint']}, checkpoints under s3a://{bucket}/...",
             f"# built for Spark {v['spark']} (Hadoop {v['hadoop']} client), hadoop-aws {v['hadoop_aws']}, "
             f"AWS SDK {v['aws_sdk']}"
             + (f", {chosen.module} {v[chosen.module.replace('-', '_')]}" if chosen.module else "")
             + "; run it on the same versions",
             f"# check the store first: {'' if data['store'] == 's3' else ENDPOINT_ENV + '=' + data['endpoint'] + ' '}"
             f"python -m ckptbench probe --store {'s3' if data['store'] == 's3' else 'endpoint'} --bucket {bucket}"]
    if data["emulator"]:
        lines.append(f"# WARNING: {data['store']} is an emulator, for tests, not production")
    lines += ["", "## jars (paths on this machine; --jars ships them to the executors)"]
    lines += [f"{j['path']}  # {j['what']}" for j in data["jars"]]
    if data["packages"]:
        lines.append(f"# or, for the S3A jars, their Maven coordinates (from Maven Central): "
                     f"--packages {','.join(data['packages'])}")
    lines += ["", "## settings"]
    width = max(map(len, data["conf"]))
    lines += [f"{k:<{width}}  {_what_conf(k, bucket, chosen, data['yours'])}".rstrip() for k in data["conf"]]
    if chosen.manager_class is None:
        lines.append(f"(no {ckpt_impls.MANAGER_CLASS_CONF}: Spark's own default manager)")
    lines += ["", "## spark-submit", _command(data["submit"])]
    lines += ["", "## or in PySpark, before the session starts", "from pyspark.sql import SparkSession", "",
              "spark = (SparkSession.builder",
              f"         .config({'spark.jars'!r}, {','.join(j['path'] for j in data['jars'])!r})"]
    lines += [f"         .config({k!r}, {value!r})" for k, value in data["conf"].items()]
    lines += ["         .getOrCreate())", "",
              "## credentials",
              "None of the above holds a key. S3A (and the managers, which use S3A's own client) take them from",
              "the AWS SDK's default chain on each node: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (and",
              "AWS_SESSION_TOKEN) in the environment, the Java system properties aws.accessKeyId/aws.secretKey,",
              "the profile file (AWS_PROFILE), or the container/instance role. Never pass keys as --conf:",
              "spark-submit's command line is visible to every user of the machine (ps)."]
    if data["secret"]:
        lines += [f"Your settings {', '.join(data['secret'])} look secret and are not printed: give them to the job "
                  "the way its credentials go, off the command line (spark-defaults.conf readable by its user alone, "
                  "or the session's Hadoop configuration once it runs)."]
    return "\n".join(lines)
