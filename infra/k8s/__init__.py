"""The Kubernetes layer every cloud shares: add-ons, Triton serving, training support, CI deployer RBAC."""
