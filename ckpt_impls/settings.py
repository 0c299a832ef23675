"""The user's own Spark settings for the strategies a run measures: ``--conf KEY=VALUE`` (every
strategy) and a strategies file's ``NAME: KEY=VALUE`` lines (strategy NAME only; ``*: KEY=VALUE``:
every strategy).

A key is a Spark setting (``spark.*``), as ``spark-submit --conf`` takes; a Hadoop key a manager
reads is ``spark.hadoop.<key>``. Where each goes:

- every strategy's, not secret: the session builder (so also the JVM of a cluster's executors);
- every strategy's, secret: Hadoop keys only, set in the running driver's Hadoop configuration
  after it starts (``in_memory``), from where Spark ships them to executors inside tasks, as the
  store's keys are (``ckpt_impls.set_credentials``);
- one strategy's: Hadoop keys only, set in the session's SQL configuration each time that
  strategy is chosen and unset when another is (``choose``): Spark copies the SQL configuration
  into the Hadoop configuration it gives a query's checkpoint manager, its state stores and its
  file sink log, so a session that measures several strategies gives each only its own.

A key looks secret by Spark's own default of ``spark.redaction.regex``. Its value is never put on a
command line (the builder's settings are: PySpark starts the driver's JVM with them; so ``--conf``
refuses one, which a strategies file takes), and is written in records, logs and pages as
``REDACTED``. The settings reach the processes a run starts (asv's benchmarks, the crash lab's
drivers, a re-run under another Spark's venv) through the environment variable ``ENV``, never
their command line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

#: The settings of this process, for its children: a JSON list of ``[scope, key, value]``.
ENV = "CKPT_SETTINGS"
#: The scope of a setting for every strategy.
EVERY = "*"
#: Spark's default ``spark.redaction.regex``: a key it matches has its value hidden.
SECRET = re.compile(r"(?i)secret|password|token|access[.]?key")
REDACTED = "*********(redacted)"
HADOOP = "spark.hadoop."
LINE = re.compile(r"(?P<scope>\*|[^\s:=]+)\s*:\s*(?P<setting>.*)")


class SettingError(ValueError):
    """A setting that cannot be used; str() is one line saying why and what to do, never its value."""


@dataclasses.dataclass(frozen=True)
class Setting:
    scope: str  # a strategy's name, or EVERY
    key: str  # a Spark setting
    value: str

    @property
    def secret(self) -> bool:
        return bool(SECRET.search(self.key))

    @property
    def hadoop_key(self) -> str | None:
        """The Hadoop key a ``spark.hadoop.*`` setting sets; None for another Spark setting."""
        return self.key[len(HADOOP):] if self.key.startswith(HADOOP) else None


_SETTINGS: list[Setting] = []


def parse(text: str, scope: str = EVERY, where: str = "--conf") -> Setting:
    """``KEY=VALUE`` as a Setting of ``scope``, or SettingError naming ``where`` it was given."""
    key, sep, value = text.strip().partition("=")
    key = key.strip()
    if not sep or not key:  # said without what follows an "=": it may be a secret
        raise SettingError(f"{where} takes KEY=VALUE (e.g. spark.hadoop.fs.s3a.connection.maximum=200), "
                           f"not {key + '=...' if sep else repr(key)}")
    if not key.startswith("spark."):
        raise SettingError(f"{where}: {key} is not a Spark setting (spark.*), which Spark would ignore: a Hadoop key "
                           f"a manager reads is spark.hadoop.{key}")
    setting = Setting(scope, key, value.strip())
    if setting.hadoop_key is None and (scope != EVERY or setting.secret):
        kind = "a strategy's own setting" if scope != EVERY else "a secret setting"
        raise SettingError(f"{where}: {kind} is set in the running session, so it must be a Hadoop key "
                           f"(spark.hadoop.*), not {key}")
    return setting


def parse_line(line: str, where: str) -> Setting | None:
    """A strategies file's ``NAME: KEY=VALUE`` (or ``*: KEY=VALUE``) line as a Setting; None for
    another line (a strategy, ``NAME=CLASS@JAR``)."""
    match = LINE.fullmatch(line.strip())
    return parse(match["setting"], match["scope"], where) if match else None


def add(setting: Setting, known) -> None:
    """Take ``setting`` for this run and hand it to this process's children; ``known``: the
    strategy names a scope may take."""
    if setting.scope != EVERY and setting.scope not in known:
        raise SettingError(f"a setting for {setting.scope!r}, which is no strategy: use one of {', '.join(known)} "
                           f"or {EVERY} (every strategy)")
    _SETTINGS[:] = [s for s in _SETTINGS if (s.scope, s.key) != (setting.scope, setting.key)] + [setting]
    os.environ[ENV] = json.dumps([dataclasses.astuple(s) for s in _SETTINGS])


def of(strategy: str) -> list[Setting]:
    """The settings ``strategy`` runs with: every strategy's, then its own (which win)."""
    return sorted((s for s in _SETTINGS if s.scope in (EVERY, strategy)), key=lambda s: s.scope != EVERY)


def builder_conf() -> dict[str, str]:
    """The settings for every strategy that go into a session's builder: none that looks secret."""
    return {s.key: s.value for s in _SETTINGS if s.scope == EVERY and not s.secret}


def in_memory(hadoop_conf) -> None:
    """Set the secret settings for every strategy in a running driver's Hadoop ``Configuration``."""
    for s in _SETTINGS:
        if s.scope == EVERY and s.secret:
            hadoop_conf.set(s.hadoop_key, s.value)


def choose(conf, strategy: str) -> None:
    """Give ``conf`` (a running session's ``spark.conf``, or a JVM Hadoop ``Configuration``)
    ``strategy``'s own Hadoop keys, and no other strategy's: each of theirs goes back to the value
    every strategy has, or is unset."""
    every = {s.hadoop_key: s.value for s in _SETTINGS if s.scope == EVERY and s.hadoop_key}
    own = {s.hadoop_key: s.value for s in _SETTINGS if s.scope == strategy}
    for key in {s.hadoop_key for s in _SETTINGS if s.scope not in (EVERY, strategy)} - own.keys():
        if key in every:
            conf.set(key, every[key])
        else:
            conf.unset(key)
    for key, value in own.items():
        conf.set(key, value)


def recorded() -> dict[str, dict[str, str]]:
    """The settings as a record keeps them: ``{scope: {key: value}}``, secret values redacted."""
    out: dict[str, dict[str, str]] = {}
    for s in _SETTINGS:
        out.setdefault(s.scope, {})[s.key] = REDACTED if s.secret else s.value
    return out


def said(recorded_settings: dict) -> str:
    """A record's settings (``recorded``) in one line: ``*: k=v; own: k=v``; "" for none."""
    return "; ".join(f"{scope}: " + ", ".join(f"{k}={v}" for k, v in keys.items())
                     for scope, keys in (recorded_settings or {}).items())


def _imported() -> None:
    text = os.environ.get(ENV)
    _SETTINGS[:] = [Setting(*s) for s in json.loads(text)] if text else []


_imported()  # a parent's settings, checked when it took them
