"""The Opacus-interface accountant: Opacus' IAccountant behaviour (as Opacus documents
and implements it: history runs, __len__, mechanism(), the optimizer hook, state_dict)
and the same epsilon as `dpkit ledger` for the same sequence of steps."""

import json
import types

import pytest

import dpkit
from dpkit.opacus import OpacusPLDAccountant

# (noise_multiplier, sample_rate, steps): a schedule that changes noise and batch size.
# The noise multipliers are ones whose ledger form (clip_norm 1, noise_stddev z) collapses
# back to exactly z: z = 1 / (1 / z) in doubles (checked below).
SCHEDULE = [(1.1, 0.01, 120), (1.25, 0.01, 60), (1.1, 0.02, 40), (0.8, 0.004, 200)]


def run_schedule(accountant):
    for z, q, steps in SCHEDULE:
        for _ in range(steps):
            accountant.step(noise_multiplier=z, sample_rate=q)
    return accountant


def write_ledger(path):
    lines = []
    step = 0
    for z, q, steps in SCHEDULE:
        assert 1 / (1 / z) == z
        for _ in range(steps):
            lines.append(json.dumps({"type": "sample", "step": step, "sampling_rate": q,
                                     "queries": [{"clip_norm": 1.0, "noise_stddev": z}]}))
            step += 1
    path.write_text("\n".join(lines) + "\n")


def test_history_merges_identical_consecutive_steps_as_opacus_does():
    accountant = run_schedule(OpacusPLDAccountant())
    assert accountant.history == SCHEDULE
    assert len(accountant) == len(SCHEDULE)
    assert OpacusPLDAccountant.mechanism() == "dpkit_pld"


def test_epsilon_equals_dpkit_ledger_in_process(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    accountant = run_schedule(OpacusPLDAccountant())
    ledger = dpkit.read_ledger(path)
    assert ledger.entries == sum(steps for _, _, steps in SCHEDULE)
    reference = dpkit.PLDAccountant().compose(ledger.event)
    assert accountant.get_epsilon(1e-5) == reference.get_epsilon(1e-5)
    assert accountant.get_epsilon_bounds(1e-5) == reference.get_epsilon_bounds(1e-5)


def test_epsilon_equals_the_dpkit_ledger_command(tmp_path, cli):
    import subprocess  # noqa: PLC0415
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    proc = subprocess.run([cli, "ledger", str(path), "--delta=1e-5", "--accountant=pld",
                           "--format=json"], capture_output=True, text=True, check=True)
    pld = json.loads(proc.stdout)["pld"]
    accountant = run_schedule(OpacusPLDAccountant())
    assert accountant.get_epsilon(delta=1e-5) == pld["epsilon"]
    assert accountant.get_epsilon_bounds(1e-5) == (pld["epsilon_lower"], pld["epsilon_upper"])


def test_optimizer_hook_steps_with_the_accumulated_sample_rate():
    accountant = OpacusPLDAccountant()
    hook = accountant.get_optimizer_hook_fn(sample_rate=0.01)
    optimizer = types.SimpleNamespace(noise_multiplier=1.1, accumulated_iterations=2)
    hook(optimizer)
    hook(optimizer)
    assert accountant.history == [(1.1, 0.02, 2)]


def test_state_dict_round_trips_for_checkpoints():
    accountant = run_schedule(OpacusPLDAccountant())
    state = accountant.state_dict()
    assert state["mechanism"] == "dpkit_pld"
    restored = OpacusPLDAccountant()
    restored.load_state_dict(state)
    assert restored.history == accountant.history
    assert restored.get_epsilon(1e-5) == accountant.get_epsilon(1e-5)


def test_bad_state_dicts_and_steps_raise_value_errors():
    accountant = OpacusPLDAccountant()
    with pytest.raises(ValueError):
        accountant.load_state_dict({})
    with pytest.raises(ValueError, match="does not have the key `mechanism`"):
        accountant.load_state_dict({"history": []})
    with pytest.raises(ValueError, match="mechanism 'rdp'"):
        accountant.load_state_dict({"history": [], "mechanism": "rdp"})
    with pytest.raises(ValueError, match="sampling_rate must be in"):
        accountant.load_state_dict({"history": [(1.0, 2.0, 1)], "mechanism": "dpkit_pld"})
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        accountant.step(noise_multiplier=0.0, sample_rate=0.1)
    assert accountant.history == []
    assert accountant.get_epsilon(1e-5) == 0.0
