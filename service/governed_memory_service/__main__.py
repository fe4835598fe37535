"""``python -m governed_memory_service``: see :mod:`governed_memory_service.cli`."""

from governed_memory_service.cli import main

main()
