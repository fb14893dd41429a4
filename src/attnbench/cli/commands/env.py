"""`attnbench env`: the provenance a run would record, as JSON."""
from __future__ import annotations

import json

from .. import console

NAME = "env"
HELP = "print the provenance a run would record"
DESCRIPTION = ("Collect, as JSON, what a run records about where it runs: device, driver, toolkit, library "
               "versions, source revision, timer overhead and the measured ceilings (copy and read bandwidth, "
               "matmul rate per dtype).")


def add_arguments(e) -> None:
    e.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    e.add_argument("--no-ceilings", action="store_true", help="skip measuring copy bandwidth and matmul rate")


def run(args) -> int:
    from ...runner.options import check_device, default_device
    from ...runner.worker import run_provenance

    device = check_device(args.device or default_device())
    prov = run_provenance(device, 0, measure_ceilings=not args.no_ceilings)
    console.out.print_json(json.dumps(prov, default=str))
    return 0
