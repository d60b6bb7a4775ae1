"""Test-only code, kept out of the installed package: problem generators
(:mod:`support.generators`) and the brute-force reference (:mod:`support.brute`).

Tests import them as ``support.*`` (pytest puts ``tests/`` on the path); benchmarks put
``tests/`` on ``sys.path`` first.
"""
