"""`python -m demo` (what `make demo` runs): plans + policy, S3 + training, export, Triton, promotion."""
