"""The project's own Triton attention kernels (issue 41's FlashAttention ladder); imported only by backends/triton_ladder.py at prepare time."""
from __future__ import annotations

import os


def interpreting() -> bool:
    """Whether Triton runs kernels on the CPU interpreter (TRITON_INTERPRET=1, read when a kernel is defined)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _patch_interpreter_index() -> None:
    """Triton 3.6's interpreter turns a scalar (held as a 1-element array) into a Python int with int(array),
    which numpy >= 2.4 refuses ("only 0-dimensional arrays..."): every loop with a runtime bound fails.
    The same conversion through the element itself; the GPU path never goes here."""
    try:
        from triton.runtime import interpreter as it
    except ImportError:
        return
    if getattr(it, "_attnbench_index_patch", False) or not hasattr(it, "_patch_lang_tensor"):
        return
    original = it._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    it._patch_lang_tensor = patched
    it._attnbench_index_patch = True


if interpreting():
    _patch_interpreter_index()
