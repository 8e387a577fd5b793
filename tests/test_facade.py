"""The package's facade (autoparser/__init__.py): what a plain `import autoparser` gives a user."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_layers import LAYERS

STAGES = [unit for unit in LAYERS if not unit.startswith("__")]


def test_every_stage_is_an_attribute_after_a_plain_import() -> None:
    """`autoparser.export.response_template(source)`, as the README writes it, in a fresh interpreter (here every
    stage is imported already); the stages load when first used, the pytest plugin's package not before."""
    code = f"""if True:
        import json, sys
        import autoparser
        loaded_first = "autoparser.testing" in sys.modules
        stages = {STAGES!r}
        reached = [s for s in stages if getattr(autoparser, s) is sys.modules["autoparser." + s]]
        print(json.dumps({{"loaded_first": loaded_first, "reached": reached,
                          "listed": sorted(set(stages) & set(dir(autoparser))),
                          "export": callable(autoparser.export.response_template)}}))
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(r.stdout) == {"loaded_first": False, "reached": STAGES, "listed": sorted(STAGES),
                                    "export": True}


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    import autoparser

    with pytest.raises(AttributeError, match="has no attribute 'no_such_stage'"):
        autoparser.no_such_stage  # type: ignore[attr-defined]  # noqa: B018
