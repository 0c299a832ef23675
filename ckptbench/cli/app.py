"""ckptbench's command line: `python -m ckptbench COMMAND` (see --help).

Bad input (an unknown strategy or store, an unreachable endpoint, rejected credentials,
a missing bucket, missing jars) ends with one line on stderr saying what is wrong and
what to do, and exit status 2.
"""

from __future__ import annotations

import argparse
import signal
import sys

import ckpt_impls
import infra
from ckpt_impls import foreign, jars, settings
from ckpt_impls.jars import JarsMissing
from ckptbench.cli import bench, labs, measure, recommend, records, stores
from ckptbench.cli.common import ContractFailed, Parser, UsageError, rerun_under_spark
from ckptbench.cli.continuous import Regression

#: The modules of the commands, each adding its own (``register``), in the order --help lists them.
COMMANDS = (stores, measure, bench, labs, records, recommend)
#: Options before the command that add strategies from outside (``ckpt_impls.foreign``).
FOREIGN_HELP = ("a strategy from outside, measured like ours: NAME=CLASS@JAR[,JAR...] (any Spark "
                "CheckpointFileManager; checked before anything runs); repeat for several")


def _foreign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategy", action="append", default=[], metavar="NAME=CLASS@JAR[,JAR...]", help=FOREIGN_HELP)
    p.add_argument("--strategies-file", metavar="FILE",
                   help="strategies from outside, one NAME=CLASS@JAR[,JAR...] a line, and settings for one "
                        "strategy, NAME: KEY=VALUE (*: KEY=VALUE for every one; # comments)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for every session and JVM each strategy runs in (spark.hadoop.KEY for a "
                        "Hadoop key a manager reads); recorded with the run; repeat for several. A secret one "
                        "goes in a strategies file, off the command line")


def register_foreign(argv: list[str]) -> None:
    """Register the strategies from outside and the settings that ``argv`` names before its command
    (``--strategy``, ``--strategies-file``, ``--conf``), so that every command and its default
    strategy lists know them."""
    commands = set(parser_commands())
    head = next((i for i, arg in enumerate(argv) if arg in commands), len(argv))
    pre = argparse.ArgumentParser(add_help=False)
    _foreign_options(pre)
    known, _ = pre.parse_known_args(argv[:head])
    try:
        given = [settings.parse(text) for text in known.conf]
        if secret := next((s for s in given if s.secret), None):
            raise settings.SettingError(f"--conf {secret.key} looks secret, and ps shows a command line to every "
                                        f"user: give it in a strategies file (--strategies-file) as "
                                        f"'{settings.EVERY}: {secret.key}=...'")
        specs = list(known.strategy)
        for line in foreign.read_file(known.strategies_file) if known.strategies_file else []:
            setting = settings.parse_line(line, f"strategies file {known.strategies_file}")
            if setting:
                given.append(setting)
            else:
                specs.append(line)
        for spec in specs:
            ckpt_impls.register(*foreign.parse(spec))
        for setting in given:
            settings.add(setting, ckpt_impls.STRATEGIES)
    except (foreign.ForeignStrategyError, settings.SettingError) as e:
        raise UsageError(str(e)) from None


def parser_commands() -> list[str]:
    """Every command's name, and every alias of one."""
    return list(parser()._subparsers._group_actions[0].choices)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ckptbench", description=__doc__.splitlines()[0])
    _foreign_options(p)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return p


def _stop_on_sigterm(signum, frame):
    # Python's default SIGTERM skips finally blocks and atexit, leaving Ceph daemons running.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        register_foreign(argv)
    except UsageError as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        rerun_under_spark(args, argv)
        if getattr(args, "continuous", None) or getattr(args, "commits", None):
            jars.s3a_jars()  # bench on other commits: each builds its own managers' jar, the S3A jars are shared
        elif hasattr(args, "spark"):  # measure, bench: a missing jar is said before any store starts
            jars.spark_jars()
        args.run(args)
    except (UsageError, infra.StoreUnavailable, ckpt_impls.UnknownStrategy, JarsMissing) as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    except ContractFailed as e:  # contract: the input was fine, a strategy broke a check
        print(f"ckptbench: contract broken by: {e}", file=sys.stderr)
        return 1
    except Regression as e:  # bench --continuous: the input was fine, a benchmark got worse
        print(f"ckptbench: regression: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ckptbench: interrupted", file=sys.stderr)
        return 130
    return 0
