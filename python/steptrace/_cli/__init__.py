"""The steptrace command (show, compare, trace, report, ranks), the comparison rule of `compare`, and the
reference text docs/ takes from the definitions."""
