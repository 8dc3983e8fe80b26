"""Expand stage: workflows -> gangs, each with its tree of topology requirements."""
