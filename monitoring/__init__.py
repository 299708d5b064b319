"""Model and platform monitoring: inference records, drift, quality, metrics, alert rules, routing.

Kept import-light: the Triton python models import `monitoring.records` from a copy of this package.
"""
