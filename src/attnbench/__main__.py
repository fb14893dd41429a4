"""python -m attnbench"""
from .cli.main import main

raise SystemExit(main())
