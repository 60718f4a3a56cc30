"""Reading a compiled ``BackendConfig``: canonical comparison and diff, QConfigs that satisfy
it, and ``explain`` (why a node was or was not quantized)."""
