"""The service's ``governed_memory`` plugin (entry point ``service``): adds
``governed-memory serve``, ``governed-memory keys`` and ``governed-memory mcp`` to the
framework's command.

Nothing from the ``service`` extra is imported here or by the command modules at import
time: every ``PluginManager.load()`` imports this module, with or without the extra.
"""

from __future__ import annotations

from collections.abc import Callable

from governed_memory import hookimpl

PLUGIN_NAME = "service"


@hookimpl
def register_cli_commands(register: Callable[..., None]) -> None:
    from governed_memory_service.cli import keys
    from governed_memory_service.mcp_stdio import mcp
    from governed_memory_service.serve_command import serve

    register("serve", serve, description="Run the HTTP API (graceful on SIGTERM).")
    register("keys", keys, description="API keys of the service: create, list, revoke.")
    register("mcp", mcp, description="Serve MCP over stdio as one principal (desktop agents).")
