"""`analyze`: the sections of analysis/sections (SECTIONS, in order), each computed once from several stores."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import pandas as pd

from . import sections
from .sections.basis import Basis


@dataclass(frozen=True)
class Analysis:
    """The computed sections by name, in SECTIONS order, with the basis they were computed from. A section's
    result reads as an attribute (analysis.winners.separated)."""

    by: str  # the axis compared across
    basis: Basis
    results: Mapping[str, Any]

    def __getattr__(self, name: str):
        try:
            return self.__dict__["results"][name]
        except KeyError:
            raise AttributeError(name) from None

    def to_json(self) -> dict:
        """Every section as JSON-ready values: the `analyze --json` document."""
        return {"by": self.by, **{name: None if r is None else r.to_json() for name, r in self.results.items()}}


def compute(df: pd.DataFrame, runs_by_label: dict[str, list[dict]], by: str = "label",
            include_references: bool = False, paths: dict | None = None) -> Analysis:
    """`df` holds the attempts of every store with its `label`, `runs_by_label` each store's runs (for the
    ceilings and the hosts), `paths` each label's file."""
    basis = Basis.of(df, runs_by_label, by, include_references, paths)
    done: dict[str, Any] = {}
    for section in sections.SECTIONS:
        done[section.NAME] = section.compute(basis, MappingProxyType(done))
    return Analysis(by, basis, MappingProxyType(done))


def of(dataset, by: str = "label", include_references: bool = False) -> Analysis:
    """The analysis of a store.sources.Dataset."""
    return compute(dataset.attempts, dataset.runs, by, include_references, dataset.paths)


def analyze(df: pd.DataFrame, runs_by_label: dict[str, list[dict]], by: str = "label",
            include_references: bool = False, paths: dict | None = None) -> dict:
    """Every section of `analyze` as JSON-ready values (compute(...).to_json())."""
    return compute(df, runs_by_label, by, include_references, paths).to_json()
