"""`make demo` itself runs outside the test suite (a few minutes); this keeps its module loadable:
a merge that leaves demo.py unparsable, or a name it imports gone, fails here."""

import importlib


def test_the_demo_module_loads_with_every_part_it_runs():
    demo = importlib.import_module("local.demo")
    for part in ("run_demo", "archive_demo", "check_access_events", "build_auditctl", "browse", "main"):
        assert callable(getattr(demo, part)), part
