"""CrossGuard policy pack and its offline tooling (analyze, report, checkov). See policies/README.md."""
