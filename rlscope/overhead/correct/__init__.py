"""Plan and apply the correction of rlscope's own cost: what the analysis imports."""
