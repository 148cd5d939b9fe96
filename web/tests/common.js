// Shared by the calculator's Node and browser tests: where the built files are, and the
// reference numbers from the `dpkit` command line.
'use strict';

const {spawnSync} = require('node:child_process');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
// web/tests/run_tests.sh sets these from `bazel info`; the defaults are Bazel's usual paths.
const CALCULATOR_DIR = process.env.DPKIT_CALCULATOR_DIR ||
    path.join(ROOT, 'bazel-out', 'wasm-fastbuild', 'bin', 'web', 'calculator');
const DPKIT = process.env.DPKIT_BIN ||
    path.join(ROOT, 'bazel-out', 'k8-fastbuild', 'bin', 'tools', 'dpkit');
const OUTPUT_DIR = process.env.TEST_UNDECLARED_OUTPUTS_DIR ||
    process.env.DPKIT_WEB_TEST_OUTPUT || path.join(ROOT, 'out', 'web-tests');

// Bu et al. 2020, Table 1: MNIST, n = 60000, b = 256 (p = 256/60000), delta = 1e-5.
const TABLE1_ROWS = [
  {sigma: 1.3, epochs: 15}, {sigma: 1.1, epochs: 60}, {sigma: 0.7, epochs: 45},
  {sigma: 0.6, epochs: 62}, {sigma: 0.55, epochs: 68}, {sigma: 0.5, epochs: 100},
];

// Runs `dpkit ARGS... --format=json` and returns the parsed output.
function dpkitJson(args) {
  const result = spawnSync(DPKIT, [...args, '--format=json'], {encoding: 'utf8'});
  if (result.status !== 0) {
    throw new Error(`dpkit ${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  }
  return JSON.parse(result.stdout);
}

// Tolerances for "the browser shows what the command line prints". Both run the same C++
// source, but WebAssembly's long double is IEEE binary128 (x86: 80-bit) and Emscripten's
// libm is musl (x86: glibc), so last-place differences are expected:
//  - GDP and RDP are closed forms and one-dimensional minimisations: 1e-9 relative;
//  - calibration: 1e-6 relative.
// PLD bounds are certified on both sides, and the WebAssembly build computes them in double
// (musl's long double functions are double's anyway), so its error allowances are those of
// double (ld and kLdUnit, accounting/internal/pld_real.h), wider than x86's: its bounds need not equal the command line's, but both
// intervals contain the exact epsilon, so they must overlap, and each browser bound must
// lie within PLD_GAP_FRACTION of the command line's gap (upper - lower) of the command
// line's (measured: up to 0.9 % of the gap, 1.6e-6 relative, at sigma 0.5, 100 epochs).
const TOLERANCE = {gdp: 1e-9, rdp: 1e-9, calibrate: 1e-6};
const PLD_GAP_FRACTION = 0.02;

// The browser's certified PLD interval [lower, upper] against the command line's.
function assertPldConsistent(assert, browser, cli, what) {
  for (const v of [browser.lower, browser.upper]) {
    assert.ok(Number.isFinite(v), `${what}: browser pld bound ${v}`);
  }
  assert.ok(browser.lower <= cli.upper && cli.lower <= browser.upper,
      `${what}: browser pld [${browser.lower}, ${browser.upper}] and dpkit ` +
      `[${cli.lower}, ${cli.upper}] do not overlap (both are certified)`);
  const allowed = PLD_GAP_FRACTION * (cli.upper - cli.lower) + 1e-9 * Math.abs(cli.upper);
  for (const side of ['lower', 'upper']) {
    assert.ok(Math.abs(browser[side] - cli[side]) <= allowed,
        `${what}: browser pld ${side} ${browser[side]} vs dpkit ${cli[side]} (differ by ${
          Math.abs(browser[side] - cli[side])} > ${PLD_GAP_FRACTION} of dpkit's gap)`);
  }
}

function assertClose(assert, actual, expected, relative, what) {
  assert.ok(Number.isFinite(actual), `${what}: got ${actual}`);
  const error = Math.abs(actual - expected);
  assert.ok(error <= relative * Math.abs(expected),
      `${what}: browser ${actual} vs dpkit ${expected} (relative error ${
        error / Math.abs(expected)} > ${relative})`);
}

module.exports = {ROOT, CALCULATOR_DIR, DPKIT, OUTPUT_DIR, TABLE1_ROWS, TOLERANCE, dpkitJson,
                  assertClose, assertPldConsistent};
