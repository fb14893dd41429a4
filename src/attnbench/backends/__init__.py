"""Attention backends: one file per family, each declaring what it supports and why not."""
from .base import ACCURACY_REFERENCE, CONTESTANT, Backend, DeviceInfo, Inputs, Rejected  # noqa: F401
