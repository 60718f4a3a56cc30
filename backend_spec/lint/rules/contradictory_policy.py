"""**Why.** The pt2e policy keys of versions 3 to 5 compose, but a few combinations say two
things that cannot both happen, and the pt2e flow then silently does one of them:

- `output: never` (or `if_consumer_quantized`) on an `output_share_observer_with_input` entry:
  the output is never observed, so there is nothing to share; the observation type does
  nothing in pt2e.
- `consumers: quantizing` (or version 8's `quantizable`) with `output: never`: the entry waits
  for a consumer that quantizes (or that some entry names), to hand it a quantized output, and
  then hands it a float one.
- `producers: join` on an entry that does not share its input's observer: the key is about the
  producers of a shared group's other inputs, and there is no group.

```yaml
  - pattern: torch.flatten
    observation_type: output_share_observer_with_input
    consumers: quantizing
    output: never                                 # BS523 (twice)
```

**Fix.** Drop the key that cannot take effect, or change the one that contradicts it (for a
view op that must keep its input's qparams, leave `output` out).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.specfile.models import PatternModel

CODE = codes.CONTRADICTORY_POLICY

_SHARE = "output_share_observer_with_input"


def _shares(model: PatternModel) -> bool:
    return str(model.observation_type or "").lower() == _SHARE


def _contradictions(model: PatternModel) -> Iterator[tuple[str, str, str]]:
    """``(key, what contradicts it, fix)`` for each contradictory combination of the entry."""
    if _shares(model) and model.output in ("never", "if_consumer_quantized"):
        yield (
            "output",
            f"output: {model.output} on an entry that shares its input's observer "
            f"({_SHARE}): the output is never observed, so nothing is shared",
            "leave output out (always), or drop the observation type",
        )
    if model.consumers in ("quantizing", "quantizable") and model.output == "never":
        yield (
            "consumers",
            f"consumers: {model.consumers} waits for a consumer that reads a quantized output, "
            "but output: never hands it a float output",
            f"drop consumers: {model.consumers}, or let the output be observed",
        )
    if model.producers == "join" and not _shares(model):
        yield (
            "producers",
            f"producers: join acts on a shared observer group, but this entry does not share "
            f"its input's observer ({_SHARE})",
            "drop producers, or set observation_type: output_share_observer_with_input",
        )


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        for key, message, fix in _contradictions(entry.model):
            yield Problem((*entry.path, key), f"{entry.label}: {message}", fix)
