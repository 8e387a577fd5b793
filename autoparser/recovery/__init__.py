"""Reading what a model meant from an output its format's strict parser rejects, and saying what was repaired.

The layer between the chat formats (autoparser/chat: llama.cpp's parsers, one per format) and the request's
result (autoparser/params). `relax.py`: the relaxed builder, on which a format's own build function makes the
relaxed parser; `plan.py`: what the recovery reads from it; `reading.py`: the steps of the default parse over
one frozen `Reader`; `completion.py`: closers supplied at the end of a truncated output; `checks.py`: the
repairs in words and the checks against the request's tools; `coverage.py`: no text lost, at run time;
`stream.py`: the default stream, llama.cpp's stream through its hooks.
"""

from autoparser.recovery.checks import MESSAGES
from autoparser.recovery.completion import close_json, viable_prefix
from autoparser.recovery.plan import RecoveryPlan, closers, plan_of
from autoparser.recovery.reading import Reader
from autoparser.recovery.relax import RelaxedBuilder
from autoparser.recovery.stream import RecoveringStream

__all__ = ["MESSAGES", "Reader", "RecoveringStream", "RecoveryPlan", "RelaxedBuilder", "close_json", "closers",
           "plan_of", "viable_prefix"]
