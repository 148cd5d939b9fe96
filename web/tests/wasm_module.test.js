// Fast feedback: the calculator's WebAssembly module alone, in Node (no browser).
// Run by web/tests/run_tests.sh: node --test web/tests/wasm_module.test.js
'use strict';

const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const {test} = require('node:test');
const {CALCULATOR_DIR, TABLE1_ROWS, TOLERANCE, dpkitJson, assertClose, assertPldConsistent} =
    require('./common.js');

const createDpkitModule = require(path.join(CALCULATOR_DIR, 'calculator.js'));
const {dpkitCall} = require(path.join(CALCULATOR_DIR, 'dpkit_call.js'));

let modulePromise = null;
function loadModule() {
  // wasmBinary: Node 20's fetch() cannot read file paths, so the bytes are handed over.
  modulePromise = modulePromise || createDpkitModule({
    wasmBinary: fs.readFileSync(path.join(CALCULATOR_DIR, 'calculator.wasm')),
    print() {}, printErr() {},
  });
  return modulePromise;
}

function table1Request(row, accountants) {
  return {op: 'epsilon', sampling_rate: 256 / 60000, noise_multiplier: row.sigma,
          steps: Math.ceil(row.epochs * 60000 / 256), delta: 1e-5, accountants};
}

test('the module reports its accountants and operations', async () => {
  const module = await loadModule();
  const reply = dpkitCall(module, {op: 'version'});
  assert.strictEqual(reply.ok, true, JSON.stringify(reply));
  assert.ok(reply.result.accountants.includes('gdp'));
  assert.ok(reply.result.accountants.includes('rdp'));
  assert.ok(reply.result.operations.includes('epsilon'));
});

test('Table 1 rows of Bu et al. match dpkit epsilon for every accountant', async () => {
  const module = await loadModule();
  const accountants = dpkitCall(module, {op: 'version'}).result.accountants;
  for (const row of TABLE1_ROWS) {
    const reply = dpkitCall(module, table1Request(row, accountants));
    assert.strictEqual(reply.ok, true, JSON.stringify(reply));
    const cli = dpkitJson(['epsilon', '--dataset_size=60000', '--batch_size=256',
      `--noise_multiplier=${row.sigma}`, `--epochs=${row.epochs}`, '--delta=1e-5',
      `--accountant=${accountants.length > 1 ? 'all' : accountants[0]}`]);
    assert.strictEqual(cli.input.steps, table1Request(row).steps, 'same number of steps');
    const what = `sigma=${row.sigma} epochs=${row.epochs}`;
    assertClose(assert, reply.result.gdp.mu, cli.gdp.mu, TOLERANCE.gdp, what + ' gdp mu');
    assertClose(assert, reply.result.gdp.epsilon, cli.gdp.epsilon, TOLERANCE.gdp,
        what + ' gdp epsilon');
    assert.strictEqual(reply.result.gdp.approximate, true);
    assertClose(assert, reply.result.rdp.epsilon, cli.rdp.epsilon, TOLERANCE.rdp,
        what + ' rdp epsilon');
    assert.strictEqual(reply.result.rdp.order, cli.rdp.order, what + ' rdp order');
    assert.strictEqual(reply.result.rdp.conversion, cli.rdp.conversion);
    if (accountants.includes('pld') && cli.pld) {
      assertPldConsistent(assert,
          {lower: reply.result.pld.epsilon_lower, upper: reply.result.pld.epsilon_upper},
          {lower: cli.pld.epsilon_lower, upper: cli.pld.epsilon_upper}, what);
    }
  }
});

test('bad input comes back as a message and the module keeps working', async () => {
  const module = await loadModule();
  const bad = dpkitCall(module, {op: 'epsilon', sampling_rate: 0.01, noise_multiplier: -1,
                                 steps: 100, delta: 1e-5});
  assert.strictEqual(bad.ok, false);
  assert.match(bad.error, /noise_multiplier must be finite and > 0, got -1/);
  const badRate = dpkitCall(module, {op: 'epsilon', sampling_rate: 1.5, noise_multiplier: 1,
                                     steps: 100, delta: 1e-5});
  assert.strictEqual(badRate.ok, false);
  assert.match(badRate.error, /sampling_rate/);
  const notJson = module._dpkit_call(0);  // A null request is treated as empty text.
  assert.match(module.UTF8ToString(notJson), /not valid JSON/);
  module._dpkit_free(notJson);
  const unknown = dpkitCall(module, {op: 'nonsense'});
  assert.deepStrictEqual(unknown, {ok: false, error: 'unknown op "nonsense"'});
  const good = dpkitCall(module, table1Request(TABLE1_ROWS[1], ['gdp']));
  assert.strictEqual(good.ok, true);
});

test('tradeoff curves are the closed forms G_mu and f_eps_delta', async () => {
  const module = await loadModule();
  const reply = dpkitCall(module, {op: 'tradeoff', mu: 1, epsilon: 1, delta: 0.01,
                                   alphas: [0, 0.5, 1]});
  assert.strictEqual(reply.ok, true, JSON.stringify(reply));
  // G_1(0.5) = Phi(-1) = 0.15865525393145705 (normal table); f_{1,0.01}(0.5) = 0.49/e.
  assertClose(assert, reply.result.gdp[1], 0.15865525393145705, 1e-12, 'G_1(0.5)');
  assertClose(assert, reply.result.approx_dp[1], 0.49 / Math.E, 1e-12, 'f(0.5)');
  assert.strictEqual(reply.result.gdp[0], 1);
  assert.strictEqual(reply.result.gdp[2], 0);
});

test('a GDP calibration reaches its target', async () => {
  const module = await loadModule();
  const reply = dpkitCall(module, {op: 'calibrate', target_epsilon: 2, delta: 1e-5,
    sampling_rate: 256 / 60000, steps: 14063, accountant: 'gdp'});
  assert.strictEqual(reply.ok, true, JSON.stringify(reply));
  // //accounting:calibrate's contract: meets the target, within 0.1 % of the smallest sigma.
  assert.ok(reply.result.epsilon <= 2 && reply.result.epsilon >= 2 * (1 - 1e-3),
            'calibrated epsilon ' + reply.result.epsilon);
  const check = dpkitCall(module, {op: 'epsilon', sampling_rate: 256 / 60000,
    noise_multiplier: reply.result.noise_multiplier, steps: 14063, delta: 1e-5,
    accountants: ['gdp']});
  assertClose(assert, check.result.gdp.epsilon, reply.result.epsilon, 1e-12,
              're-accounted epsilon');
});
