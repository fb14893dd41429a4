"""The explicit list of backends, and the one door plugins enter by (--plugin FILE.py, entry points)."""
from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

from . import compiled, cudnn_fe, fa4, flash_attn2, flash_attn3, flashinfer, flex, jax_attention, reference, sdpa, xformers
from . import triton_ladder
from . import capabilities
from .base import ISOLATIONS, Backend

# order is the listing order; the optional libraries' modules import nothing optional at load time
BUILTIN_MODULES = (reference, sdpa, flex, compiled, fa4, flash_attn2, flash_attn3, flashinfer, cudnn_fe, jax_attention,
                   xformers, triton_ladder)
ENTRY_POINT_GROUP = "attnbench.backends"


class BackendError(ValueError):
    """Unknown backend name, broken plugin, or clashing names."""


def builtin() -> list[Backend]:
    return [b for m in BUILTIN_MODULES for b in _as_list(m.make(), f"built-in module {m.__name__}")]


def name_problem(name) -> str | None:
    """Why `name` cannot name a backend, or None. Names are comma-list items (--backends) and are
    printed in rich tables, where brackets are markup and control characters break the layout."""
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if name != name.strip():
        return "has leading or trailing whitespace"
    for ch in name:
        if ch == ",":
            return "contains a comma"
        if ch in "[]":
            return f"contains {ch!r}"
        if not ch.isprintable() and ch != " ":
            return f"contains the unprintable character U+{ord(ch):04X}"
    return None


def _check(b: Backend, origin: str) -> None:
    why = name_problem(b.name)
    if why:
        raise BackendError(f"{origin}: backend name {b.name!r} {why}")
    if b.isolation not in ISOLATIONS:
        raise BackendError(f"{origin}: backend {b.name!r} has isolation {b.isolation!r}; "
                           f"use one of {', '.join(ISOLATIONS)}")
    wrong = capabilities.problems(b)
    if wrong:
        raise BackendError(f"{origin}: backend {b.name!r} {wrong[0]}")


def _as_list(obj, origin: str) -> list[Backend]:
    """The backends a module or entry point offers, each checked as it enters."""
    try:
        if callable(obj) and not isinstance(obj, Backend):
            obj = obj()
        items = [obj] if isinstance(obj, Backend) else list(obj or [])
    except (Exception, SystemExit) as e:  # the plugin's own bug (or its sys.exit): one line, exit 2
        raise BackendError(f"{origin}: listing its backends failed: {_what(e)}") from None
    for b in items:
        if not isinstance(b, Backend):
            raise BackendError(f"{origin}: {b!r} is not an attnbench Backend")
        _check(b, origin)
    return items


def load_plugin_file(path: str | Path) -> list[Backend]:
    """A plugin file defines BACKENDS (a list) or backends() returning one."""
    p = Path(path).resolve()
    if not p.is_file():
        raise BackendError(f"plugin file not found: {path}")
    mod_name = f"attnbench_plugin_{abs(hash(str(p)))}"
    if mod_name in sys.modules:
        mod = sys.modules[mod_name]
    else:
        spec = importlib.util.spec_from_file_location(mod_name, p)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        try:
            spec.loader.exec_module(mod)
        except (Exception, SystemExit) as e:  # a plugin's own bug (or its sys.exit) is bad input: one line, exit 2
            del sys.modules[mod_name]
            raise BackendError(f"plugin {path} failed to import: {_what(e)}") from None
    listed, function = getattr(mod, "BACKENDS", None), getattr(mod, "backends", None)
    if listed is None and function is None:
        raise BackendError(f"plugin {path} defines neither BACKENDS nor backends()")
    items = _as_list(listed if listed or function is None else function, str(path))
    if not items:
        raise BackendError(f"plugin {path} declares no backends ("
                           f"{'BACKENDS is empty' if function is None else 'backends() returned none'})")
    return items


def _what(e: BaseException) -> str:
    """A plugin's exception in a few words; its sys.exit() said as such (it would end attnbench silently)."""
    if isinstance(e, SystemExit):
        return f"it called sys.exit({e.code!r})"
    return f"{type(e).__name__}: {e}"


def entry_point_backends() -> list[Backend]:
    out = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            out += _as_list(ep.load(), f"entry point {ep.name}")
        except BackendError:
            raise
        except (Exception, SystemExit) as e:
            raise BackendError(f"entry point {ep.name} failed to load: {_what(e)}") from None
    return out


def all_backends(plugins: list[str] | tuple[str, ...] = ()) -> list[Backend]:
    """Built-ins, then entry-point plugins, then --plugin files; names must be unique."""
    out = builtin() + entry_point_backends()
    for p in plugins:
        out += load_plugin_file(p)
    seen: set[str] = set()
    for b in out:
        if b.name in seen:
            raise BackendError(f"two backends are named {b.name!r}")
        seen.add(b.name)
    return out


def select(names: list[str] | None, plugins=()) -> list[Backend]:
    """The named backends (all when names is None), in registry order."""
    everything = all_backends(plugins)
    if not names:
        return everything
    by_name = {b.name: b for b in everything}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise BackendError(f"unknown backend {unknown[0]!r}; known: {', '.join(by_name)}")
    return [by_name[n] for n in dict.fromkeys(names)]
