"""Everything that measures or removes rlscope's own cost, in three parts.

- ``correct``: plan and apply the correction (windows, writer stall, reference speed, residual
  per-event costs). The analysis imports this part only.
- ``calibrate``: measure the per-event costs on this machine and store them (``rlscope calibrate``).
- ``validate``: check the corrected figures against the program run without rlscope
  (``rlscope validate``).

The core (annotate, session, collectors, trace, analysis, viz) never imports ``calibrate`` or
``validate``; tests/test_imports.py holds that rule.
"""
