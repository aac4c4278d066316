"""From sums and analytic values to result rows: row building, baselines, one configuration in process.

May import the ground floor, montecarlo, bounds and analytic; never inverse or the entry points.
"""
