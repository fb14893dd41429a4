"""Several stores read side by side, each under its own label, so rows that share attempt keys stay apart."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .db import Store, StoreError


@dataclass(frozen=True)
class Source:
    label: str
    path: Path


def parse_sources(specs: list[str]) -> list[Source]:
    """STORE or LABEL=STORE per argument; the label defaults to the file's stem. Two sources with one
    label are an error: their rows could not be told apart."""
    out: list[Source] = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or Path(spec).is_file() or "/" in label:
            label, path = Path(spec).stem, spec
        if not label:
            raise StoreError(f"empty label in {spec!r}; use LABEL=STORE")
        if any(s.label == label for s in out):
            raise StoreError(f"two stores are labelled {label!r}; name them apart with LABEL=STORE")
        out.append(Source(label, Path(path)))
    return out


def read_labelled(sources: list[Source]) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """Every attempt of every store with a `label` column, and each label's runs (oldest first).
    Missing or foreign stores raise StoreError before anything is read."""
    for s in sources:  # every name is checked before any store is read
        if not s.path.is_file():
            raise StoreError(f"store not found: {s.path}")
    frames, runs = [], {}
    for s in sources:
        store = Store(s.path, create=False, readonly=True)
        try:
            frames.append(store.dataframe().assign(label=s.label))
            runs[s.label] = store.runs()
        finally:
            store.close()
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df, runs
