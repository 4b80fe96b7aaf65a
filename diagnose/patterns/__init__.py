"""The pattern library: loading, validating and compiling ``patterns/*.toml`` (the data lives at the top
level of the repository and is installed as ``diagnose.patterns.builtin``)."""
