"""Stage 3: validated model + resolved objects -> live ``BackendConfig`` (compiler, loader,
``extends``/``remove``)."""
