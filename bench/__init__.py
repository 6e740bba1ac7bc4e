"""onion's benchmarks: `python -m bench` prints one table of ratios against baselines.

Every figure is a ratio to a baseline measured in the same run (interleaved
batches, medians), so the table means the same on a fast or a slow machine.
See docs/performance.md for the method and the latest figures.
"""
