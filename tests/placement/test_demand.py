"""Demands cross process boundaries (``toporender plan``'s workers send them pickled)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from toporender.placement.demand import PodDemand


@pytest.mark.parametrize("pod", [
    PodDemand("a", 8),
    PodDemand("b", 4, (("nvidia.com/gpu", None, "NoSchedule"), ("team", "ml", None)), ("node-1", "node-2")),
])
def test_a_pod_demand_pickles_whole(pod: PodDemand) -> None:
    assert pickle.loads(pickle.dumps(pod)) == pod


def test_the_pickled_form_names_every_field() -> None:
    """``PodDemand.__reduce__`` lists its fields by hand; a field added without it would be lost in transit."""
    pod = PodDemand("b", 4, (("k", "v", None),), ("n",))
    assert pod.__reduce__()[1] == tuple(getattr(pod, f.name) for f in dataclasses.fields(PodDemand))
