"""Mutation testing of the loader: small deliberate bugs that some test must catch.

``python -m tools.mutation python`` mutates the Python modules holding the
loader's semantics, one mutant at a time, and runs their tests against each;
``python -m tools.mutation native`` applies hand-written mutations to the C
and Cython kernels, rebuilds, and checks that a test fails for each. See
``docs/reliability.md``, "Mutation testing".
"""
