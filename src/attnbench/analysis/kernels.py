"""Whose kernel a backend's time went to: the library attention kernel family a row ran."""
from __future__ import annotations

from ..measure.dispatch import default_classifier


def library_kernel(family: str | None, main_family, attention_family, kernels: list[str] | None) -> str | None:
    """The library attention kernel family a backend's time went to, when its name does not say so.

    An SDPA backend is pinned to one kernel and named after it; any other backend (compile, a
    plugin) whose main kernel family (most device time) is an attention family is attributed to
    it: Inductor, for one, rewrites plain softmax(QK^T)V into an SDPA call where its pattern
    matcher recognises it, and then times cuDNN or flash, not its own code.

    `main_family` and `attention_family` are the dispatch probe's stored columns. Rows written
    before they existed (both NULL) fall back to classifying the first of `kernels`, which are
    ordered by device time, most first."""
    if family == "sdpa":
        return None
    main = main_family if isinstance(main_family, str) else None  # NULL reads back as None or NaN
    attention = attention_family if isinstance(attention_family, str) else None
    if main is not None or attention is not None:
        return attention if attention is not None and main == attention else None
    if not kernels:
        return None
    classifier = default_classifier()  # rows that predate the probe's stored families
    fam = classifier.family_of(kernels[0])
    return fam if fam in classifier.attention else None
