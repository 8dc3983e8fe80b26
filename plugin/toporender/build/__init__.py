"""Build stage: gangs -> Kubernetes objects (scheduler objects, Pods, template objects)."""
