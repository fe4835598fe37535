"""The main job must run after a plain ``pip install -e .``: loading every built-in
plugin may not import an optional extra (httpx, mem0ai, onnxruntime, redis, psycopg,
the OpenTelemetry SDK, the service's Starlette, uvicorn and PyJWT). A subprocess makes
each of them unimportable and runs the demo."""

from __future__ import annotations

import subprocess
import sys
import textwrap

EXTRAS = ("httpx", "mem0", "onnxruntime", "tokenizers", "faiss", "qdrant_client",
          "redis", "psycopg", "psycopg_pool", "opentelemetry.sdk",
          "starlette", "uvicorn", "jwt", "langchain_core")


def test_every_builtin_plugin_loads_and_the_demo_runs_without_the_extras(tmp_path) -> None:
    script = textwrap.dedent(f"""
        import sys
        for name in {EXTRAS!r}:
            sys.modules[name] = None  # any import of it now raises ImportError
        from governed_memory.plugins import PluginManager
        manager = PluginManager.load()
        names = set(manager.plugin_names)
        assert {{"native", "mem0", "openai", "langchain", "embedders", "redis",
                 "service"}} <= names, names
        from governed_memory.cli.main import main
        sys.argv = ["governed-memory", "demo", "--dir", {str(tmp_path)!r}]
        try:
            main()
        except SystemExit as exit:
            assert exit.code in (0, None), exit.code
        print("OK")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.rstrip().endswith("OK")
