"""The workload axes, derived once from the Workload fields: grid YAML fields, `--where` filters,
store columns and the columns of printed tables all come from here, so a new field of Workload is
a new axis everywhere without further edits."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import ENUMS, Workload, WorkloadError

KI = 1024
_TYPES = {"int": int, "str": str, "bool": bool, "float": float}


@dataclass(frozen=True)
class Axis:
    name: str  # the Workload field
    type: type  # int | str | bool | float
    doc: str  # what it means (the store column's documentation)
    short: str  # table header
    length: bool = False  # a length: '4k' is accepted
    choices: tuple | None = None  # the allowed values of an enum axis
    default: object = None  # the Workload field's default (None: the field has none)
    since: int | None = None  # store schema version that added the axis (None: the first)
    modes: tuple | None = None  # the modes it is defined for (None: all); other modes' rows hold NULL

    def parse(self, value):
        """One value from text (a CLI filter) or YAML: '4k' for lengths, true/false for booleans,
        an enum value checked against its choices. Raises WorkloadError with a one-line reason."""
        if self.length:
            return parse_size(value)
        if self.type is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes"):
                return True
            if text in ("false", "0", "no"):
                return False
            raise WorkloadError(f"bad {self.name} {value!r}: use true or false")
        if self.type is int:
            try:
                if isinstance(value, bool):
                    raise ValueError
                return int(str(value).strip())
            except ValueError:
                raise WorkloadError(f"bad {self.name} {value!r}: use an integer") from None
        if self.type is float:
            try:
                return float(value)
            except (TypeError, ValueError):
                raise WorkloadError(f"bad {self.name} {value!r}: use a number") from None
        text = str(value).strip()
        if self.choices and text not in self.choices:
            raise WorkloadError(f"unknown {self.name} {text!r}; {self.name}s: {', '.join(self.choices)}")
        return text


def _axes() -> tuple[Axis, ...]:
    out = []
    for f in dataclasses.fields(Workload):
        meta = f.metadata
        default = None if f.default is dataclasses.MISSING else f.default
        out.append(Axis(f.name, _TYPES[str(f.type)], meta["doc"], meta["short"], meta.get("length", False),
                        ENUMS.get(f.name), default, meta.get("since"), meta.get("modes")))
    return tuple(out)


AXES: tuple[Axis, ...] = _axes()
NAMES: tuple[str, ...] = tuple(a.name for a in AXES)
_BY_NAME = {a.name: a for a in AXES}


def axis(name: str) -> Axis:
    if name not in _BY_NAME:
        raise WorkloadError(f"unknown workload axis {name!r}; axes: {', '.join(NAMES)}")
    return _BY_NAME[name]


def parse_size(x) -> int:
    """'4k' -> 4096, '512' -> 512, 16384 -> 16384."""
    if isinstance(x, bool):
        raise WorkloadError(f"bad length {x!r}")
    if isinstance(x, int):
        return x
    s = str(x).strip().lower()
    try:
        if s.endswith("k"):
            return int(float(s[:-1]) * KI)
        return int(s)
    except ValueError:
        raise WorkloadError(f"bad length {x!r}: use an integer or a number with k (e.g. 4k)") from None


Filters = dict  # axis name -> set of allowed values


def parse_where(expr: str) -> tuple[str, set]:
    """'kv_len=1k,4k' -> ('kv_len', {1024, 4096}); each value parsed by its axis."""
    name, sep, values = expr.partition("=")
    name = name.strip()
    if not sep or not name:
        raise WorkloadError(f"bad filter {expr!r}: use AXIS=V1,V2 (axes: {', '.join(NAMES)})")
    ax = axis(name)
    items = [v for v in (x.strip() for x in values.split(",")) if v]
    if not items:
        raise WorkloadError(f"filter {expr!r} names no value")
    return ax.name, {ax.parse(v) for v in items}


def narrow(filters: Filters, name: str, values: set) -> Filters:
    """Filters with one more condition; two conditions on one axis keep their intersection."""
    out = dict(filters)
    out[name] = out[name] & values if name in out else set(values)
    return out


def parse_filters(exprs) -> Filters:
    """Filters from --where expressions ('AXIS=V1,V2' each); two on one axis keep their intersection."""
    filters: Filters = {}
    for expr in exprs or ():
        filters = narrow(filters, *parse_where(expr))
    return filters


def select(workloads: list[Workload], filters: Filters) -> list[Workload]:
    """The workloads whose every filtered axis holds one of the allowed values."""
    return [w for w in workloads if all(getattr(w, n) in vals for n, vals in filters.items())]


def select_frame(frame, filters: Filters):
    """The same filters on a frame of store rows (booleans are stored as 0/1)."""
    for name, values in filters.items():
        column = frame[name].astype(bool) if axis(name).type is bool else frame[name]
        frame = frame[column.isin(values)]
    return frame


def varying(rows, names=NAMES) -> list[str]:
    """The axes (of `names`) on which the given workloads or rows (dicts, pandas rows) differ. The None
    of an axis defined for some modes only (a prefill row's decode_append) is no value of it: decode
    rows that all say 'excluded' beside prefill rows do not vary."""
    seen: dict[str, set] = {n: set() for n in names}
    for r in rows:
        for n in names:
            value = getattr(r, n) if isinstance(r, Workload) else r[n]
            if value is not None or axis(n).modes is None:
                seen[n].add(value)
    return [n for n in names if len(seen[n]) > 1]
