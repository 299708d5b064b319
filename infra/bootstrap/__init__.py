"""Bootstrap stacks: the cloud side of the CI's OIDC trust and the state backend (see README.md)."""
