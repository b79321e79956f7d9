"""Code that runs inside the profiled program rather than in rlscope's own tools.

``autorun`` starts a session in every interpreter ``rlscope run`` starts (through ``boot/``'s
``sitecustomize``), ``child_signal`` lets a process a signal ends (SIGTERM, SIGHUP) flush its trace
first and keeps rlscope's threads from taking the program's signals, and
``autograd_engine`` wraps torch's autograd entry for the collectors that need each backward call.
"""

from pathlib import Path

# the directory `rlscope run` and `rlscope validate` put first on their program's PYTHONPATH:
# its sitecustomize starts the session
BOOT_DIR = Path(__file__).resolve().parent / "boot"
