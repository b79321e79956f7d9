"""Check rlscope's corrected figures against the program run without it (`rlscope validate`)."""
