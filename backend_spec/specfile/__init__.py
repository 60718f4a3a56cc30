"""Stage 1: spec text -> validated model. Readers with positions (YAML, TOML), the pydantic
models that define the format, validation into diagnostics, the JSON Schema, and ``fmt``."""
