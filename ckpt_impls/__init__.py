"""Checkpoint strategies Spark really uses, and the one call that wires one into a SparkSession.

Each strategy except ``rename`` is a JVM ``CheckpointFileManager`` chosen through
``spark.sql.streaming.checkpointFileManagerClass``: ours (``ckpt_impls/java``), whose guarantees are
in its class's doc comment, or Spark's own from a Spark module pyspark does not ship (``abortable``,
``Strategy.module``), described where it is registered.

Credentials never go into the builder: PySpark passes builder confs to the JVM on its
command line, where ``ps`` shows them. ``set_credentials`` puts them into the running
driver's Hadoop configuration instead, from where Spark ships them to executors inside
tasks.

The store under test (of a session's stores, the last configured) also reaches a manager the
standard ways, for one with an AWS SDK client of its own: S3A's base keys (``fs.s3a.endpoint``,
``fs.s3a.path.style.access``, ``fs.s3a.endpoint.region``, and in memory ``fs.s3a.access.key`` and
``fs.s3a.secret.key``), and its keys in the environment of each JVM that runs one, where the
SDKs' default credential chain reads them (``chain_env``). S3A itself reads the per-bucket keys,
which come first.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from . import foreign, jars, settings

MANAGER_CLASS_CONF = "spark.sql.streaming.checkpointFileManagerClass"
#: The Spark plugin that counts S3 requests inside Spark's JVMs, driver and executors
#: (``ckpt_impls/java/ckptbench/metering``; read the counts with ``ckptbench.harness.jvm_requests``).
REQUESTS_PLUGIN = "ckptbench.metering.S3RequestsPlugin"
#: "false" switches that counting off for a session (the SDK handler stays registered, idle).
REQUESTS_ENABLED_CONF = "spark.ckptbench.requests.enabled"
#: The JVM options of the driver and of every executor.
JAVA_OPTIONS_CONFS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
#: Spark's rename temp files: ``.<name>.<uuid>.tmp`` beside the target.
TEMP_FILE = re.compile(r"(^|/)\.[^/]+\.tmp$")
#: Settings that hold a list: a user's value (``settings``) joins ours with the separator, not over it.
_JOINED = {"spark.jars": ",", "spark.plugins": ",", "spark.driver.extraClassPath": ":",
           **{key: " " for key in JAVA_OPTIONS_CONFS}}

#: Settings S3A gets from us, by the AWS SDK generation its connector is built on (``jars.aws_sdk``).
#: S3A 3.3 (SDK v1) parses these keys as plain numbers, and Hadoop 3.4+'s core-default.xml (a
#: Spark 4 user's) gives them as duration strings ("60s") it fails on; so they are set, as the
#: numbers S3A 3.4+ uses by default, on S3A 3.3 wherever it runs, and S3A 3.3 connects and waits
#: as S3A 3.4+ does (its own connect timeout is 5 s, not 30 s). S3A 3.4+ (SDK v2) needs none.
_S3A_SETTINGS = {
    "v1": {
        "fs.s3a.threads.keepalivetime": "60",
        "fs.s3a.connection.establish.timeout": "30000",
        "fs.s3a.connection.timeout": "200000",
        "fs.s3a.multipart.purge.age": "86400",
    },
    "v2": {},
}
#: The AWS SDK's own credential chain (environment, profile, instance role) as each SDK
#: generation names it: S3A 3.4+ translates only a few SDK v1 class names, not this one.
_SDK_CHAIN = {
    "v1": "com.amazonaws.auth.DefaultAWSCredentialsProviderChain",
    "v2": "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
}
_KEYS_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


#: What a strategy can need from a store, each checked against a real one by ``ckptbench.experiments.probe``
#: (``python -m ckptbench probe``): name -> what the store must do.
CAPABILITIES: dict[str, str] = {
    "conditional_put": "refuses a PUT with If-None-Match: * of an existing key (412) and keeps the first content",
    "exclusive_create": "of two concurrent If-None-Match: * PUTs of one new key, lets exactly one win",
    "user_metadata": "keeps the x-amz-meta-* headers of a conditional PUT (HEAD returns them)",
    "multipart_abort": "after AbortMultipartUpload, leaves no object and no pending upload",
    "read_after_write": "returns the new content to a GET right after a PUT (also of a key just found "
                        "missing, and after an overwrite)",
    "list_after_write": "lists a new key right after its PUT, and no longer after its DELETE",
    "delete": "a DELETE removes the key at once; a DELETE of a missing key, single or bulk, succeeds",
    "copy": "a server-side COPY makes an identical object",
}


@dataclasses.dataclass(frozen=True)
class Need:
    """One capability (a key of ``CAPABILITIES``) a strategy needs from its store, and why.
    ``unless``: a setting (Hadoop key=value) that makes the strategy run without it."""

    capability: str
    why: str
    unless: str | None = None

    def __post_init__(self) -> None:
        if self.capability not in CAPABILITIES:
            raise ValueError(f"unknown store capability {self.capability!r}; known: {', '.join(CAPABILITIES)}")


@dataclasses.dataclass(frozen=True)
class Option:
    """A Hadoop configuration key a strategy's manager reads (``spark.hadoop.<name>`` from Spark),
    with the default the manager uses when it is unset."""

    name: str
    default: str
    what: str


# The needs the S3A-based strategies share: its existence checks (HEAD + LIST) must see a write at
# once, and it deletes through single and bulk DELETEs (directory markers, missing keys included).
_S3A_NEEDS = (
    Need("read_after_write", "S3A's existence check before a create-only write is a HEAD"),
    Need("list_after_write", "S3A's existence check is a HEAD plus a LIST; a lagging LIST hides a file"),
    Need("delete", "S3A deletes parent directory markers (often missing) in bulk on every create"),
)
# The needs of the strategies that PUT with If-None-Match: * on the S3A client themselves.
_CONDITIONAL_NEEDS = (
    Need("conditional_put", "create-only writes are refused by the store itself; the manager checks it at "
                            "start and refuses a store that ignores the header"),
    Need("exclusive_create", "two writers of one file: the store must let exactly one win"),
    Need("user_metadata", "a PUT is tagged with its writer so a retried PUT whose first attempt landed is "
                          "not taken for another writer's (a lost response would fail the query)"),
    Need("read_after_write", "files are read with a GET right after they are written, also after a miss"),
    Need("delete", "deletes are plain (and bulk) DELETEs that must succeed on missing keys"),
)


@dataclasses.dataclass(frozen=True)
class Strategy:
    name: str
    #: The JVM CheckpointFileManager; None keeps Spark's own default.
    manager_class: str | None
    description: str
    #: Two writers creating one file with overwrite=false: the store lets exactly one win.
    exclusive_create: bool = False
    #: May leave ``.<name>.<uuid>.tmp`` objects behind: Spark's rename does when a create
    #: with overwrite=false loses (its stream is already closed, so cancel() deletes nothing).
    leaves_temp_files: bool = False
    #: Each checkpoint file is the object at its own key (False: found through a manifest).
    keys_mirror_paths: bool = True
    #: What it needs from the store (``ckptbench.experiments.probe`` checks a store against it).
    requires: tuple[Need, ...] = ()
    #: Its manager's settings, with their defaults.
    options: tuple[Option, ...] = ()
    #: A strategy from outside (``ckpt_impls.foreign``): the jars its manager comes in; () for ours.
    jars: tuple[foreign.Jar, ...] = ()
    #: The oldest S3A connector (hadoop-aws version) its manager runs on; None: any this repository loads.
    min_hadoop_aws: str | None = None
    #: Spark's own manager in a Spark module pyspark does not ship: the module (a key of
    #: ``jars.SPARK_MODULES``, pinned per Spark line and fetched at set-up); None for the others.
    module: str | None = None

    @property
    def ours(self) -> bool:
        """Its manager is in our managers' jar (``jars.managers_jar``)."""
        return self.manager_class is not None and not self.jars and self.module is None


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("rename", None,
                 "Spark's default: write a temp file, then rename it (COPY + DELETE on S3)",
                 leaves_temp_files=True,
                 requires=(Need("copy", "a rename on S3 is a server-side COPY, then a DELETE"), *_S3A_NEEDS)),
        Strategy("direct", "ckptbench.checkpoint.DirectWriteCheckpointFileManager",
                 "write the final key through S3A; cancel aborts the upload (or deletes, with retries)",
                 requires=(Need("multipart_abort", "cancel aborts the upload of a file written in parts",
                                unless="ckptbench.direct.cancel.abort=false"), *_S3A_NEEDS),
                 options=(
                     Option("ckptbench.direct.cancel.abort", "true",
                            "cancel aborts the upload; false: close, then delete (with the retries below)"),
                     Option("ckptbench.direct.cancel.delete.attempts", "5",
                            "tries of that delete before the query fails"),
                     Option("ckptbench.direct.cancel.delete.initialDelayMs", "100",
                            "back-off before the second try, doubled each time"),
                     Option("ckptbench.direct.cancel.delete.maxDelayMs", "5000", "longest back-off"))),
        Strategy("conditional", "ckptbench.checkpoint.ConditionalPutCheckpointFileManager",
                 "one S3 PUT with If-None-Match: *, so the store itself refuses a second writer",
                 exclusive_create=True,
                 requires=(*_CONDITIONAL_NEEDS,
                           Need("list_after_write", "exists and list are LISTs of the checkpoint's prefix"))),
        Strategy("s3a-conditional", "ckptbench.checkpoint.S3AConditionalCreateCheckpointFileManager",
                 "write the final key through S3A's own conditional create (If-None-Match: *, hadoop-aws 3.4.2+)",
                 exclusive_create=True, min_hadoop_aws="3.4.2",
                 requires=(
                     Need("conditional_put", "create-only writes are refused by the store itself (S3A sends the "
                                             "header; the manager does not check that the store honours it)"),
                     Need("exclusive_create", "two writers of one file: the store must let exactly one win"),
                     Need("multipart_abort", "cancel aborts the upload of a file written in parts"),
                     Need("read_after_write", "S3A's existence check is a HEAD, also of a key just written"),
                     Need("list_after_write", "S3A's existence check is a HEAD plus a LIST; a lagging LIST hides "
                                              "a file"),
                     Need("delete", "S3A deletes directory trees through single and bulk DELETEs"))),
        Strategy("manifest", "ckptbench.checkpoint.ManifestCheckpointFileManager",
                 "stage under a unique key; publish as the next record of a compacted per-directory manifest",
                 exclusive_create=True, keys_mirror_paths=False,
                 requires=_CONDITIONAL_NEEDS,
                 options=(
                     Option("ckptbench.manifest.compactInterval", "10", "records between compacts"),
                     Option("ckptbench.manifest.cleanupDelayMs", "600000",
                            "how long superseded records, compacts and staged objects stay readable; must far "
                            "exceed any request and the writers' clock skew"),
                     Option("ckptbench.manifest.inlineMaxBytes", "4096",
                            "a file up to this size (0-65536 bytes) goes inside its record, one PUT; a larger "
                            "one is staged under its own key, then recorded"),
                     Option("ckptbench.manifest.root", "",
                            "a directory (s3a://bucket/prefix) taken to exist with its ancestors: no manifest is "
                            "written above it; empty: the bucket root"))),
        # Spark's own (spark-hadoop-cloud): create() refuses an existing file, but close() checks for
        # one and then uploads, two requests, and catches every error of its own (that check's
        # FileAlreadyExistsException, a failed upload) and only logs it: a close that wrote
        # nothing returns as if it had. It refuses, at construction, a filesystem without abortable
        # output streams (the path capability fs.capability.outputstream.abortable).
        Strategy("abortable", "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager",
                 "Spark's own (spark-hadoop-cloud): write the final key through S3A; cancel aborts the upload; "
                 "close() only logs its errors",
                 requires=(Need("multipart_abort", "cancel aborts the upload of a file written in parts"),
                           *_S3A_NEEDS),
                 module="spark-hadoop-cloud"),
    )
}


#: NOT a strategy: the benchmark's floor. Its manager keeps checkpoint files in the JVM's memory
#: and sends no request, so Spark's commit times through it are Spark's own share; the benchmark
#: runs it beside the strategies and subtracts it. Kept out of ``STRATEGIES``: no user can choose,
#: deploy or be recommended it (``get`` refuses its name), only ``select``/``use`` take it.
FLOOR = Strategy("in-memory-floor", "ckptbench.checkpoint.InMemoryCheckpointFileManager",
                 "benchmark floor, not a strategy: checkpoint files in the JVM's memory, no store")

#: Not a strategy: wraps the one a run measures and logs the state store maintenance's calls to it
#: (its doc comment says which), so that a benchmark can leave out the batches they overlapped.
MAINTENANCE_WATCH = "ckptbench.checkpoint.MaintenanceWatchCheckpointFileManager"
#: The class ``MAINTENANCE_WATCH`` wraps (unset: Spark's default); the Java class reads this name.
MAINTENANCE_WATCHED_CONF = "spark.ckptbench.maintenanceWatch.managerClass"


def register(name: str, manager_class: str, paths: list, check: bool = True) -> Strategy:
    """Add the foreign strategy ``name`` (``manager_class`` in the jars ``paths``) to ``STRATEGIES``,
    checked first (``foreign.check``: ForeignStrategyError in one line if it cannot run) unless a
    parent process did (``foreign.exported``), and hand it on to this process's children."""
    paths = [Path(p) for p in paths]
    found = (foreign.check(name, manager_class, paths, {*STRATEGIES, FLOOR.name}) if check
             else [foreign.Jar.of(p) for p in paths])
    STRATEGIES[name] = Strategy(name, manager_class, f"from outside: {manager_class} in "
                                + ", ".join(p.name for p in paths), jars=tuple(found))
    foreign.export([[s.name, s.manager_class, [j.path for j in s.jars]] for s in STRATEGIES.values() if s.jars])
    return STRATEGIES[name]


def foreign_jar(path: str):
    """(the foreign strategy, its ``foreign.Jar``) whose jar is at ``path``, or None."""
    return next(((s, j) for s in STRATEGIES.values() for j in s.jars if j.path == str(path)), None)


def foreign_jars() -> list[str]:
    """The jars of every foreign strategy registered, for a session's ``spark.jars``."""
    return [j.path for s in STRATEGIES.values() for j in s.jars]


def unavailable(name: str) -> str | None:
    """Why strategy ``name`` cannot run on the loaded S3A connector (its hadoop-aws is older than the
    strategy needs), in one line; None when it can or the connector's version is unknown (a
    renamed jar: the manager itself then refuses at construction if it must)."""
    need = get(name).min_hadoop_aws
    have = jars.versions()["hadoop_aws"] if need else "unknown"
    if have == "unknown" or _release(have) >= _release(need):
        return None
    return f"strategy {name!r} needs hadoop-aws {need}+, and the loaded S3A is hadoop-aws {have}: use Spark 4.3's"


def runnable(names=None) -> list[str]:
    """``names`` (default: every strategy in ``STRATEGIES``), in their order, less those the loaded
    S3A connector cannot run (``unavailable``)."""
    return [name for name in (STRATEGIES if names is None else names) if not unavailable(name)]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def needed_jars(strategy: str, paths: list[str]) -> list[str]:
    """Those of a session's jars ``paths`` that ``strategy`` runs on: the S3A jars, and the jar its
    manager is in (ours, its Spark module's or its own from outside), none of another strategy's."""
    chosen, ours = get(strategy), str(jars.managers_jar())
    own = {ours} if chosen.ours else {*(j.path for j in chosen.jars),
                                      *([str(jars.module_jar(chosen.module))] if chosen.module else [])}
    managers = {ours, *foreign_jars(), *(str(jars.module_jar(m)) for m in jars.SPARK_MODULES)}
    return [p for p in paths if p in own or p not in managers]


class UnknownStrategy(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown checkpoint strategy '{name}'; valid strategies: {', '.join(STRATEGIES)}")


def get(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(name) from None


def describe() -> str:
    """One line per strategy: its name and what it does."""
    width = max(map(len, STRATEGIES))
    return "\n".join(f"{s.name:<{width}}  {s.description}" for s in STRATEGIES.values())


def store_conf(store, bucket: str) -> dict[str, str]:
    """Non-secret S3A settings that point ``s3a://bucket`` at ``store`` (Hadoop keys), and S3A's
    base keys at it as the store under test."""
    prefix = f"fs.s3a.bucket.{bucket}."
    conf = {prefix + "aws.credentials.provider": _KEYS_PROVIDER if store.credentials else _SDK_CHAIN[jars.aws_sdk()]}
    if store.endpoint:
        conf[prefix + "endpoint"] = store.endpoint
        conf[prefix + "path.style.access"] = "true"
        conf[prefix + "connection.ssl.enabled"] = str(store.endpoint.startswith("https://")).lower()
    conf.update({prefix + k: v for k, v in store.s3a_options(jars.aws_sdk()).items()})
    conf.update(base_conf(store))
    return conf


def base_conf(store) -> dict[str, str]:
    """S3A's base keys (no bucket in them) pointing at ``store``: where a manager with an SDK client
    of its own, configured the way S3A is, finds the store under test."""
    conf = {"fs.s3a.endpoint.region": store.region}
    if store.endpoint:
        conf.update({"fs.s3a.endpoint": store.endpoint, "fs.s3a.path.style.access": "true"})
    return conf


def chain_env(store) -> dict[str, str]:
    """``store``'s keys and region as the AWS SDKs' default credential chain reads them from a JVM's
    environment; {} for a store without keys of its own (the chain then finds the user's). For the
    environment of a JVM as it starts, never its command line."""
    if store is None or store.credentials is None:
        return {}
    return {"AWS_ACCESS_KEY_ID": store.credentials.access_key,
            "AWS_SECRET_ACCESS_KEY": store.credentials.secret_key, "AWS_REGION": store.region}


def session_conf(strategy: str, store, bucket: str) -> dict[str, str]:
    """Every Spark setting that wires ``strategy`` and ``s3a://bucket`` on ``store`` into a session:
    the jars, the manager class, the S3A settings (as ``spark.hadoop.*``), for a store whose
    certificate only its own truststore vouches for, that truststore for the driver's and the
    executors' JVMs (a path: the JKS file needs no password), and the user's settings for every
    strategy (``settings.builder_conf``). No secrets; no strategy's own settings (``select``)."""
    chosen = get(strategy)
    conf = {"spark.jars": ",".join([*map(str, jars.spark_jars()), *foreign_jars()])}
    if chosen.manager_class:
        conf[MANAGER_CLASS_CONF] = chosen.manager_class
    for key, value in {**_S3A_SETTINGS[jars.aws_sdk()], **store_conf(store, bucket)}.items():
        conf["spark.hadoop." + key] = value
    if getattr(store, "truststore", None) is not None:
        for key in JAVA_OPTIONS_CONFS:
            conf[key] = f"-Djavax.net.ssl.trustStore={store.truststore} -Djavax.net.ssl.trustStoreType=JKS"
    for key, value in settings.builder_conf().items():  # the user's, for every strategy
        conf[key] = f"{conf[key]}{_JOINED[key]}{value}" if key in _JOINED and conf.get(key) else value
    return conf


def configure(conf: dict[str, str], strategy: str, store, bucket: str) -> dict[str, str]:
    """``conf`` (Spark settings for a SparkSession's builder) with ``strategy`` and ``s3a://bucket``
    on ``store`` wired in.

    Adds the jars, the manager class and the S3A settings (``session_conf``), and the lab's
    request-counting plugin (``REQUESTS_PLUGIN``, after any plugin ``conf`` already names; off
    with ``REQUESTS_ENABLED_CONF=false``; not in ``session_conf``, which ``deploy`` prints for jobs
    whose counts nobody reads); call it once per store to reach several. After ``getOrCreate()``,
    call ``set_credentials`` for each store.
    """
    conf = dict(conf)
    for key, value in session_conf(strategy, store, bucket).items():
        before = conf.get(key, value) if key in JAVA_OPTIONS_CONFS else value
        # JVM options set before (a cluster's) stay. A JVM has one truststore: one such store per session.
        conf[key] = value if before == value else f"{before} {value}"
    plugins = [p for p in conf.get("spark.plugins", "").split(",") if p]
    if REQUESTS_PLUGIN not in plugins:
        conf["spark.plugins"] = ",".join([*plugins, REQUESTS_PLUGIN])
    return conf


def set_settings(spark, strategy: str) -> None:
    """Give a running session the user's settings that stay off its builder: the secret ones for
    every strategy (``settings.in_memory``) and ``strategy``'s own (``select``)."""
    settings.in_memory(spark.sparkContext._jsc.hadoopConfiguration())
    settings.choose(spark.conf, strategy)


def set_credentials(spark, store, bucket: str) -> None:
    """Give the running session ``store``'s keys for ``bucket``, and as S3A's base keys (the store
    under test), in memory only."""
    if store.credentials is None:
        return
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for prefix in (f"fs.s3a.bucket.{bucket}.", "fs.s3a."):
        hadoop_conf.set(prefix + "access.key", store.credentials.access_key)
        hadoop_conf.set(prefix + "secret.key", store.credentials.secret_key)


def attach(spark, store, bucket: str) -> None:
    """Reach ``s3a://bucket`` on ``store`` from an already running session (settings and keys)."""
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in store_conf(store, bucket).items():
        hadoop_conf.set(key, value)
    set_credentials(spark, store, bucket)


def select(conf, strategy: str, watch_maintenance: bool = False) -> None:
    """Make ``conf`` (a running session's ``spark.conf``, or a JVM Hadoop ``Configuration``) choose
    ``strategy``'s manager: its class, or Spark's default for ``rename`` (also ``FLOOR``'s name), and
    the user's settings for it alone (``settings.choose``).
    ``watch_maintenance``: inside ``MAINTENANCE_WATCH``, which logs the state store maintenance's
    calls (``ckptbench.harness.querylab.maintenance_calls`` reads them)."""
    chosen = FLOOR if strategy == FLOOR.name else get(strategy)
    settings.choose(conf, chosen.name)
    conf.unset(MAINTENANCE_WATCHED_CONF)
    if watch_maintenance:
        conf.set(MANAGER_CLASS_CONF, MAINTENANCE_WATCH)
        if chosen.manager_class:
            conf.set(MAINTENANCE_WATCHED_CONF, chosen.manager_class)
    elif chosen.manager_class:
        conf.set(MANAGER_CLASS_CONF, chosen.manager_class)
    else:
        conf.unset(MANAGER_CLASS_CONF)


def manager_trait() -> str:
    """Spark's CheckpointFileManager (the trait and its factory) in the running Spark: its package
    moved in 4.1 (``jars.checkpoint_package``)."""
    return f"{jars.checkpoint_package()}.CheckpointFileManager"


def __getattr__(name: str):
    # MANAGER_TRAIT: manager_trait(), read when asked for (it depends on the running pyspark).
    if name == "MANAGER_TRAIT":
        return manager_trait()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def manager(spark, url: str, strategy: str, settings: dict | None = None):
    """``strategy``'s JVM CheckpointFileManager for ``url`` (an s3a:// directory), built by Spark's
    own factory from the session's Hadoop configuration plus ``settings``, as a streaming query
    builds it."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    select(conf, strategy)
    for key, value in (settings or {}).items():
        conf.set(key, str(value))
    return jvm_class(spark, manager_trait()).create(jvm.org.apache.hadoop.fs.Path(url), conf)


def jvm_class(spark, name: str):
    """The class ``name`` (fully qualified) in ``spark``'s JVM, through py4j: its static methods
    (a Scala object's, through the trait's static forwarders) are called on it."""
    found = spark._jvm
    for part in name.split("."):
        found = getattr(found, part)
    return found


def use(spark, strategy: str, watch_maintenance: bool = False) -> None:
    """Switch a running session to ``strategy`` for the queries it starts from now on (see ``select``)."""
    select(spark.conf, strategy, watch_maintenance)


for _name, _class, _paths in foreign.exported():  # checked by the process that started this one
    if _name not in STRATEGIES:
        register(_name, _class, _paths, check=False)
