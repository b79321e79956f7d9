"""Measure rlscope's per-event costs on this machine and store them (`rlscope calibrate`)."""
