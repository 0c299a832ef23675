"""ckptbench's command line: ``python -m ckptbench COMMAND`` (see ``--help``)."""

from ckptbench.cli.app import main

__all__ = ["main"]
