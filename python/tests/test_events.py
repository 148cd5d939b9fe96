"""Events: dp_accounting names and fields, conversion both ways, JSON round trips."""

import dataclasses
import json
import types

import pytest

import dpkit
from dpkit.events import MAX_EVENT_DEPTH


def fake_dp_accounting():
    """A stand-in for the dp_accounting module: classes with its names and fields
    (dp_accounting itself cannot be installed here; conversion is duck-typed)."""

    def event_class(name, *fields):
        return dataclasses.make_dataclass(name, fields, frozen=True)

    return types.SimpleNamespace(
        __name__="fake_dp_accounting",
        GaussianDpEvent=event_class("GaussianDpEvent", "noise_multiplier"),
        LaplaceDpEvent=event_class("LaplaceDpEvent", "noise_multiplier"),
        EpsilonDeltaDpEvent=event_class("EpsilonDeltaDpEvent", "epsilon", "delta"),
        PoissonSampledDpEvent=event_class("PoissonSampledDpEvent", "sampling_probability",
                                          "event"),
        SampledWithoutReplacementDpEvent=event_class(
            "SampledWithoutReplacementDpEvent", "source_dataset_size", "sample_size", "event"),
        SampledWithReplacementDpEvent=event_class(
            "SampledWithReplacementDpEvent", "source_dataset_size", "sample_size", "event"),
        SelfComposedDpEvent=event_class("SelfComposedDpEvent", "event", "count"),
        ComposedDpEvent=event_class("ComposedDpEvent", "events"),
        NoOpDpEvent=event_class("NoOpDpEvent"),
    )


def dp_accounting_tree(dpa):
    return dpa.ComposedDpEvent(events=[
        dpa.SelfComposedDpEvent(
            dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.1)), 1000),
        dpa.SampledWithoutReplacementDpEvent(60000, 256, dpa.LaplaceDpEvent(2.0)),
        dpa.EpsilonDeltaDpEvent(1.0, 1e-6),
        dpa.EpsilonDeltaDpEvent(0.5, 0.0),
    ])


def dpkit_tree():
    return dpkit.ComposedDpEvent([
        dpkit.SelfComposedDpEvent(
            dpkit.PoissonSampledDpEvent(0.01, dpkit.GaussianDpEvent(1.1)), 1000),
        dpkit.SampledWithoutReplacementDpEvent(60000, 256, dpkit.LaplaceDpEvent(2.0)),
        dpkit.EpsilonDeltaDpEvent(1.0, 1e-6),
        dpkit.EpsilonDeltaDpEvent(0.5),
    ])


def test_dp_accounting_events_convert_to_equal_dpkit_events():
    dpa = fake_dp_accounting()
    assert dpkit.from_dp_accounting(dp_accounting_tree(dpa)) == dpkit_tree()


def test_conversion_round_trips_both_ways():
    dpa = fake_dp_accounting()
    original = dp_accounting_tree(dpa)
    assert dpkit.to_dp_accounting(dpkit.from_dp_accounting(original), dpa) == original
    assert dpkit.from_dp_accounting(dpkit.to_dp_accounting(dpkit_tree(), dpa)) == dpkit_tree()


def test_nested_dp_accounting_events_are_converted_inside_dpkit_events():
    dpa = fake_dp_accounting()
    event = dpkit.PoissonSampledDpEvent(0.5, dpa.GaussianDpEvent(2.0))
    assert event.event == dpkit.GaussianDpEvent(2.0)


def test_accountants_take_dp_accounting_events():
    dpa = fake_dp_accounting()
    step = dpa.PoissonSampledDpEvent(256 / 60000, dpa.GaussianDpEvent(1.1))
    ours = dpkit.PoissonSampledDpEvent(256 / 60000, dpkit.GaussianDpEvent(1.1))
    assert (dpkit.RDPAccountant().compose(step, 100).get_epsilon(1e-5)
            == dpkit.RDPAccountant().compose(ours, 100).get_epsilon(1e-5))


def test_unsupported_dp_accounting_event_is_a_value_error():
    dpa = fake_dp_accounting()
    with pytest.raises(ValueError, match="cannot convert SampledWithReplacementDpEvent"):
        dpkit.from_dp_accounting(
            dpa.SampledWithReplacementDpEvent(100, 10, dpa.GaussianDpEvent(1.0)))
    assert not dpkit.PLDAccountant().supports(
        dpa.SampledWithReplacementDpEvent(100, 10, dpa.GaussianDpEvent(1.0)))


def test_dpkit_only_events_have_no_dp_accounting_class():
    with pytest.raises(ValueError, match="has no DiscreteGaussianDpEvent"):
        dpkit.to_dp_accounting(dpkit.DiscreteGaussianDpEvent(3.0, 1), fake_dp_accounting())


def test_no_op_events_are_ignored_by_compose():
    dpa = fake_dp_accounting()
    accountant = dpkit.PLDAccountant().compose(dpa.NoOpDpEvent())
    assert accountant.ledger is None
    assert accountant.get_epsilon_bounds(1e-5) == (0.0, 0.0)


def test_json_round_trip_is_exact():
    tree = dpkit.ComposedDpEvent([
        dpkit_tree(),
        dpkit.DiscreteGaussianDpEvent(1500.0, 1025),
        dpkit.BoundedRangeDpEvent(0.1 + 0.2),  # 0.30000000000000004 must survive
    ])
    parsed = dpkit.event_from_json(tree.to_json())
    assert parsed == tree
    assert parsed.events[2].epsilon == 0.1 + 0.2
    assert json.loads(tree.to_json())["type"] == "composed"


def test_compose_merges_adjacent_identical_events():
    step = dpkit.PoissonSampledDpEvent(0.01, dpkit.GaussianDpEvent(1.0))
    other = dpkit.LaplaceDpEvent(3.0)
    accountant = dpkit.PLDAccountant()
    for _ in range(3):
        assert accountant.compose(step) is accountant
    accountant.compose(other).compose(step, 2)
    assert accountant.ledger == dpkit.ComposedDpEvent([
        dpkit.SelfComposedDpEvent(step, 3), other, dpkit.SelfComposedDpEvent(step, 2)])


def test_nesting_deeper_than_the_json_limit_is_rejected():
    event = dpkit.GaussianDpEvent(1.0)
    for _ in range(MAX_EVENT_DEPTH - 1):
        event = dpkit.SelfComposedDpEvent(event, 1)
    assert dpkit.event_from_json(event.to_json()) == event  # 256 levels: accepted
    with pytest.raises(ValueError, match="event nesting must be at most 256 levels deep"):
        dpkit.SelfComposedDpEvent(event, 1)


def test_fields_keep_dp_accounting_types():
    event = dpkit.SampledWithoutReplacementDpEvent(60000, 256, dpkit.GaussianDpEvent(1))
    assert isinstance(event.event.noise_multiplier, float)
    assert isinstance(event.source_dataset_size, int)
    assert repr(dpkit.GaussianDpEvent(1.5)) == "GaussianDpEvent(noise_multiplier=1.5)"


def test_parsed_events_keep_their_exact_kind():
    # approx_dp with delta 0 and pure_dp are both EpsilonDeltaDpEvent in Python; a parsed
    # tree is accounted and written back as it was parsed.
    event = dpkit.event_from_json('{"type":"approx_dp","epsilon":1,"delta":0}')
    assert event == dpkit.EpsilonDeltaDpEvent(1.0, 0.0)
    assert json.loads(event.to_json())["type"] == "approx_dp"
    assert json.loads(dpkit.EpsilonDeltaDpEvent(1.0, 0.0).to_json())["type"] == "pure_dp"
