"""The built-in ``audit`` event sink, registered through the ordinary sink hook.

``PluginManager.load()`` registers this module alongside the entry-point plugins, so a
host finds the sink by name exactly as it would a third-party one::

    sink = PluginManager.load().sinks.get("audit").factory({"directory": "trail"})
"""

from __future__ import annotations

from collections.abc import Callable

from governed_memory.hookspecs import hookimpl

PLUGIN_NAME = "governed_memory.builtin"


@hookimpl
def register_event_sinks(register: Callable[..., None]) -> None:
    from governed_memory.audit.sink import audit_sink_from_config

    register("audit", audit_sink_from_config,
             description="hash-chained JSON lines trail (governed-memory audit verify)")
