"""Serving: Triton model repository from an export bundle, the local tritonserver, client, load tests.

Importing the package imports nothing heavy; see serving/README.md and `python -m serving --help`.
"""
