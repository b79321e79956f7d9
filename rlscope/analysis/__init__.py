"""The analysis: :func:`analyze` turns a trace into one :class:`AnalysisResult` that every output renders.

Light to import: numpy and pyarrow load when :func:`analyze` runs.
"""

from rlscope.analysis.result import AnalysisResult, analyze

__all__ = ["AnalysisResult", "analyze"]
