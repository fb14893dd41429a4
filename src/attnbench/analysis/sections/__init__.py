"""The sections of `analyze`, in the order its JSON, text, Markdown and the report site show them.

A section is one module here with NAME and compute(basis, done) -> its typed result (a frozen dataclass
with to_json(), or None where it has nothing to say); `done` holds the results of the sections before
it. Adding a section is one new module plus one entry in SECTIONS (and its renderers where it shows)."""
from __future__ import annotations

from . import (correctness, definitions, dispatch, efficiency, host_pace, ladder, mechanism, outcomes, pairs, sources,
               transfer, winners)

SECTIONS = (sources, host_pace, definitions, winners, transfer, pairs, outcomes, dispatch, correctness, efficiency,
            mechanism, ladder)
