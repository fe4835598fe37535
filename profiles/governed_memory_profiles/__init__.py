"""Built-in versioned profiles (TOML files in this package) and an example domain pack,
registered through the ``governed_memory`` entry point like any third-party plugin."""
