"""A crash series in a configuration: Spark's own checkpoint levers (a ``config.LEVERS`` preset)
and a state store provider, as the settings and query options its drivers start with; and the
configurations Spark cannot run here, which a series records instead of running.

A configuration Spark refuses is a result, not a crash of the lab: where this Spark lacks one of
the levers (it would ignore the setting, so the series would measure its defaults:
``querylab.lacks``) no driver starts; where Spark refuses the configuration before the first
batch ends (async progress tracking with state, or with a sink it does not take:
``querylab.refusal``), the driver says so with Spark's message. Either way the series runs no
cycle and its ``error`` is ``REFUSED`` and the reason."""

from __future__ import annotations

from ckptbench.config import DEFAULT_PRESET, PROVIDERS, STATE_PROVIDER
from ckptbench.config import preset as preset_settings

#: How a series' ``error`` begins when it ran no cycle because Spark cannot or will not run its configuration.
REFUSED = "refused: "


def configuration(preset: str = DEFAULT_PRESET, provider: str | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(session settings, query options) of ``preset`` with the state store ``provider`` (a
    ``config.PROVIDERS`` name; None: the session's own); ValueError for an unknown lever or provider."""
    conf, options = preset_settings(preset)
    if provider is not None:
        if provider not in PROVIDERS:
            raise ValueError(f"unknown state store provider {provider!r}: the providers are {', '.join(PROVIDERS)}")
        conf = {STATE_PROVIDER: PROVIDERS[provider], **conf}
    return conf, options


def refused(driver) -> str | None:
    """Spark's message where it refused ``driver``'s configuration before its first batch ended
    (``ckptbench.harness.query_process``'s ``failed`` event); else None."""
    return (driver.first("failed") or {}).get("refused")
