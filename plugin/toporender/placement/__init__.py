"""Placement: committed node inventory, deterministic topology-aware gang packer, plan reports, Run specs.

The packer is a pure function over plain data (:func:`toporender.placement.packer.pack`); the CLI in
:mod:`toporender.cli.plan` is the only place that reads files or prints.
"""
