"""Fourier accountant for heterogeneous compositions (Koskela, Jälkö, Prediger, Honkela).

Certified lower <= δ(ε) <= upper for a list of (mechanism, count): grid placement rounding
losses up / down (``grid``), one FFT product per side (``compose``), the running δ of a
schedule by Plancherel (``plancherel``), the a-priori choice of L and n (``choose``), rows
and the command line (``report``).
"""
