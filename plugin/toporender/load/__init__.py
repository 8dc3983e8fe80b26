"""Load stage: read the repo's YAML with source positions into validated models."""
