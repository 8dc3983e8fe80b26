"""Host adapters: Argo CD CMP, KRM function / kustomize legacy plugin, pre-commit golden files."""
