// The calculator page: form state <-> URL, inline validation, and the requests to the
// WebAssembly accounting core (fast GDP/RDP on the main thread, PLD and calibration in a
// Web Worker, both in core.js). Classic script, no modules, so that the page also works
// from file://.
'use strict';

const ACCOUNTANTS = ['pld', 'rdp', 'gdp'];
const COLORS = {pld: '#1f5fbf', pld_lower: '#7aa7e8', rdp: '#c2410c', gdp: '#6b7280'};
const LABELS = {pld: 'PLD ε upper', pld_lower: 'PLD ε lower', rdp: 'RDP ε', gdp: 'GDP-CLT ε (approx.)'};
const MAX_STEPS = 1e7;
// Type I errors of the tradeoff table.
const TABLE_ALPHAS = [0, 0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1];
// Type I errors at which the run's own (PLD, RDP) tradeoff curves are plotted: uniform, and
// fine near 0 where the curves are steep.
const RUN_ALPHAS = Array.from({length: 201}, (_, i) => i / 200)
    .concat([1e-5, 1e-4, 3e-4, 1e-3, 2e-3, 3e-3, 5e-3]).sort((a, b) => a - b);

const $ = (selector) => document.querySelector(selector);
// Timings the browser test records (web_timings.json): PLD epsilon of the cards, the plot's
// other PLD points (wall clock, all of them), and calibrations per accountant.
const stats = {loadStart: performance.now(), firstResultMs: null, pldMs: [], wasmBytes: 0,
               worker: 'none', pldPlotMs: null, calibrateMs: {}};
window.dpkitStats = stats;

// ---------------------------------------------------------------------------------------
// Formatting.

// Outward rounding (issue 15): a certified upper bound is shown rounded UP and a certified
// lower bound rounded DOWN at the shown precision, so that the text, read back as a
// number, is still a bound (the page once showed the upper bound 3.706249 as 3.7062). The
// C++ side has the same rule in accounting/report_rounding.h. `direction` is 'up', 'down'
// or 'nearest' (approximations, inputs).

// Adds (+1) or subtracts (-1) one unit of the last digit of a string of decimal digits;
// returns the new digits (one more on a carry out, a leading '0' after a borrow).
function stepDigits(digits, step) {
  const out = digits.split('');
  for (let i = out.length - 1; i >= 0; --i) {
    const d = Number(out[i]) + step;
    if (d >= 0 && d <= 9) {
      out[i] = String(d);
      return out.join('');
    }
    out[i] = step > 0 ? '0' : '9';
  }
  return step > 0 ? '1' + out.join('') : out.join('');
}

// The number with `digits` significant digits nearest to `value` on the side `direction`
// asks for: toExponential's decimal (exact, correctly rounded) moved one unit of its last
// digit outward when it falls on the wrong side of `value`.
function roundSignificant(value, digits, direction = 'nearest') {
  if (!Number.isFinite(value) || value === 0) return value;
  const text = value.toExponential(digits - 1);
  const parsed = Number(text);
  if (direction === 'nearest' || (direction === 'up' ? parsed >= value : parsed <= value)) {
    return parsed;
  }
  const negative = value < 0;
  const [mantissa, exponentText] = text.replace(/^-/, '').split('e');
  let mantissaDigits = mantissa.replace('.', '');
  let exponent = Number(exponentText);
  // Up for a positive value (down for a negative one) grows the magnitude.
  const grow = (direction === 'up') !== negative;
  mantissaDigits = stepDigits(mantissaDigits, grow ? 1 : -1);
  if (mantissaDigits.length > digits) {
    mantissaDigits = mantissaDigits.slice(0, digits);
    exponent += 1;
  } else if (mantissaDigits[0] === '0') {
    mantissaDigits = '9'.repeat(digits);
    exponent -= 1;
  }
  const moved = (negative ? '-' : '') + mantissaDigits[0] +
      (digits > 1 ? '.' + mantissaDigits.slice(1) : '') + 'e' + exponent;
  return Number(moved);
}

function formatNumber(value, digits = 5, direction = 'nearest') {
  if (value === Infinity) return '∞';
  if (!Number.isFinite(value)) return '–';
  if (value === 0) return '0';
  const rounded = roundSignificant(value, digits, direction);
  if (!Number.isFinite(rounded)) return rounded > 0 ? '∞' : '−∞';
  const magnitude = Math.abs(rounded);
  // String() and toExponential() give the shortest text that reads back as `rounded`.
  if (magnitude >= 1e6 || magnitude < 1e-4) return rounded.toExponential();
  return String(rounded);
}

// A probability as a percentage with 2 decimals, rounded as `direction` says: the digits
// of value.toFixed(4) (exact), moved one unit outward if needed, with the point moved by 2.
function formatPercent(value, direction = 'nearest') {
  if (!Number.isFinite(value)) return '–';
  let text = value.toFixed(4);
  const parsed = Number(text);
  if (direction !== 'nearest' && (direction === 'up' ? parsed < value : parsed > value) &&
      value >= 0) {
    const negative = text.startsWith('-');
    let digits = text.replace(/^-/, '').replace('.', '');
    digits = stepDigits(digits, direction === 'up' ? 1 : -1).padStart(5, '0');
    text = (negative ? '-' : '') + digits.slice(0, digits.length - 4) + '.' + digits.slice(-4);
  }
  const [whole, fraction] = text.split('.');
  const percent = Number(whole + fraction.slice(0, 2)) + '.' + fraction.slice(2);
  return percent + ' %';
}

// ---------------------------------------------------------------------------------------
// Form state, validation and the URL.

const URL_KEYS = {
  mode: 'mode', sampling: 'sampling', length: 'length', dataset_size: 'n', batch_size: 'b',
  sampling_rate: 'q', epochs: 'epochs', steps: 'T', noise_multiplier: 'sigma',
  target_epsilon: 'target', delta: 'delta',
};

function radioValue(name) {
  return document.querySelector(`input[name="${name}"]:checked`).value;
}

function setRadio(name, value) {
  const input = document.querySelector(`input[name="${name}"][value="${value}"]`);
  if (input) input.checked = true;
}

function readState() {
  const state = {mode: radioValue('mode'), sampling: radioValue('sampling'),
                 length: radioValue('length'), accountants: []};
  for (const key of ['dataset_size', 'batch_size', 'sampling_rate', 'epochs', 'steps',
                     'noise_multiplier', 'target_epsilon', 'delta']) {
    state[key] = document.getElementById(key).value.trim();
  }
  for (const name of ACCOUNTANTS) {
    if (document.querySelector(`#accountants input[name="${name}"]`).checked) {
      state.accountants.push(name);
    }
  }
  return state;
}

function writeUrl(state) {
  const params = new URLSearchParams();
  for (const [key, short] of Object.entries(URL_KEYS)) params.set(short, state[key]);
  params.set('acc', state.accountants.join(','));
  history.replaceState(null, '', '#' + params.toString());
}

function readUrl() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  for (const [key, short] of Object.entries(URL_KEYS)) {
    if (!params.has(short)) continue;
    const value = params.get(short);
    if (['mode', 'sampling', 'length'].includes(key)) {
      setRadio(key, value);
    } else {
      document.getElementById(key).value = value;
    }
  }
  if (params.has('acc')) {
    const chosen = params.get('acc').split(',');
    for (const name of ACCOUNTANTS) {
      document.querySelector(`#accountants input[name="${name}"]`).checked =
          chosen.includes(name);
    }
  }
}

// Parses a decimal number the way a person types it ("1e-5", "0.5", " 60 "); NaN if not.
function parseNumber(text) {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) return NaN;
  return Number(text);
}

// Checks one field; returns [value, message] with message '' when valid.
function checkField(id, text, rule) {
  const value = parseNumber(text);
  if (text === '') return [NaN, `${rule.label} is required (${rule.range})`];
  if (!Number.isFinite(value)) return [NaN, `${rule.label} must be a number (${rule.range})`];
  if (rule.integer && !Number.isInteger(value)) {
    return [NaN, `${rule.label} must be an integer (${rule.range})`];
  }
  const aboveMin = rule.minExclusive ? value > rule.min : value >= rule.min;
  if (!aboveMin || value > rule.max) return [NaN, `${rule.label} must be ${rule.range}`];
  return [value, ''];
}

const RULES = {
  dataset_size: {label: 'dataset size', integer: true, min: 1, max: 1e12,
                 range: 'an integer from 1 to 10^12'},
  batch_size: {label: 'batch size', integer: true, min: 1, max: 1e12,
               range: 'an integer from 1 to the dataset size'},
  sampling_rate: {label: 'sampling rate', min: 0, minExclusive: true, max: 1,
                  range: 'in (0, 1]'},
  epochs: {label: 'epochs', min: 0, minExclusive: true, max: 1e12, range: 'greater than 0'},
  steps: {label: 'steps', integer: true, min: 1, max: MAX_STEPS,
          range: 'an integer from 1 to 10^7'},
  noise_multiplier: {label: 'noise multiplier', min: 0.1, max: 1000,
                     range: 'from 0.1 to 1000'},
  target_epsilon: {label: 'target ε', min: 0.01, max: 100, range: 'from 0.01 to 100'},
  delta: {label: 'δ', min: 1e-15, max: 0.1, range: 'from 1e-15 to 0.1'},
};

// Validates the form. Returns {ok, inputs, errors}: inputs holds the numbers the core needs
// (sampling_rate, steps, delta and noise_multiplier or target_epsilon).
function validate(state) {
  const errors = {};
  const numbers = {};
  const check = (id) => {
    const [value, message] = checkField(id, state[id], RULES[id]);
    if (message) errors[id] = message;
    numbers[id] = value;
  };
  if (state.sampling === 'dataset') {
    check('dataset_size');
    check('batch_size');
    if (!errors.batch_size && !errors.dataset_size && numbers.batch_size > numbers.dataset_size) {
      errors.batch_size = 'batch size must be an integer from 1 to the dataset size (' +
          numbers.dataset_size + ')';
    }
  } else {
    check('sampling_rate');
  }
  if (state.length === 'epochs') check('epochs'); else check('steps');
  if (state.mode === 'epsilon') check('noise_multiplier'); else check('target_epsilon');
  check('delta');
  if (!state.accountants.length) errors.accountants = 'choose at least one accountant';

  const inputs = {delta: numbers.delta};
  if (state.sampling === 'dataset') {
    inputs.sampling_rate = numbers.batch_size / numbers.dataset_size;
  } else {
    inputs.sampling_rate = numbers.sampling_rate;
  }
  if (state.length === 'epochs') {
    // Same rule as `dpkit epsilon --epochs`: steps = ceil(epochs / q).
    inputs.epochs = numbers.epochs;
    inputs.steps = stepsForEpochs(numbers.epochs, inputs.sampling_rate);
    if (!errors.epochs && Number.isFinite(inputs.steps) &&
        !(inputs.steps >= 1 && inputs.steps <= MAX_STEPS)) {
      errors.epochs = `epochs must give 1 to 10^7 steps (epochs / q = ${formatNumber(
          numbers.epochs / inputs.sampling_rate)})`;
    }
  } else {
    inputs.steps = numbers.steps;
  }
  if (state.mode === 'epsilon') inputs.noise_multiplier = numbers.noise_multiplier;
  else inputs.target_epsilon = numbers.target_epsilon;
  return {ok: Object.keys(errors).length === 0, inputs, errors};
}

function stepsForEpochs(epochs, samplingRate) {
  return Math.ceil(epochs / samplingRate);
}

function showErrors(errors) {
  for (const id of Object.keys(RULES)) {
    const input = document.getElementById(id);
    const message = errors[id] || '';
    input.setAttribute('aria-invalid', message ? 'true' : 'false');
    input.closest('.field').querySelector('.error').textContent = message;
  }
  $('#accountants .error').textContent = errors.accountants || '';
}

function applyVisibility(state) {
  for (const element of document.querySelectorAll('[data-when-sampling]')) {
    element.hidden = element.dataset.whenSampling !== state.sampling;
  }
  for (const element of document.querySelectorAll('[data-when-length]')) {
    element.hidden = element.dataset.whenLength !== state.length;
  }
  for (const element of document.querySelectorAll('[data-when-mode]')) {
    element.hidden = element.dataset.whenMode !== state.mode;
  }
  document.body.classList.toggle('calibrate', state.mode === 'calibrate');
  for (const name of ACCOUNTANTS) {
    document.getElementById('card-' + name).hidden = !state.accountants.includes(name);
  }
}

// ---------------------------------------------------------------------------------------
// Rendering results.

function setValue(id, value, text, direction = 'nearest') {
  const element = document.getElementById(id);
  element.classList.remove('busy', 'failed');
  element.textContent = text !== undefined ? text : formatNumber(value, 5, direction);
  if (Number.isFinite(value)) element.dataset.value = String(value);
  else delete element.dataset.value;
}

function setBusy(id) {
  const element = document.getElementById(id);
  element.classList.add('busy');
  element.classList.remove('failed');
  element.textContent = '…';
  delete element.dataset.value;
}

function setFailed(id, message) {
  const element = document.getElementById(id);
  element.classList.remove('busy');
  element.classList.add('failed');
  element.textContent = message;
  delete element.dataset.value;
}

const CARD_FIELDS = {
  pld: ['pld-noise-multiplier', 'pld-epsilon-upper', 'pld-epsilon-lower', 'pld-min-error'],
  rdp: ['rdp-noise-multiplier', 'rdp-epsilon', 'rdp-order', 'rdp-min-error'],
  gdp: ['gdp-noise-multiplier', 'gdp-mu', 'gdp-epsilon', 'gdp-min-error'],
};

function clearCard(name) {
  for (const id of CARD_FIELDS[name]) setValue(id, NaN, '–');
}

function showSlot(name, slot) {
  const [sigmaId, ...ids] = CARD_FIELDS[name];
  if (!slot || slot.error) {
    setFailed(ids[0], slot ? slot.error : 'not available');
    for (const id of ids.slice(1)) setValue(id, NaN, '–');
    return;
  }
  if (slot.noise_multiplier !== undefined) setValue(sigmaId, slot.noise_multiplier);
  if (name === 'pld') {
    setValue('pld-epsilon-upper', slot.epsilon_upper, undefined, 'up');
    setValue('pld-epsilon-lower', slot.epsilon_lower, undefined, 'down');
  } else if (name === 'rdp') {
    setValue('rdp-epsilon', slot.epsilon, undefined, 'up');
    setValue('rdp-order', slot.order);
    $('#rdp-conversion').textContent = slot.conversion + ' conversion';
  } else {
    setValue('gdp-mu', slot.mu);
    // Exact mu-GDP (q = 1) is a certified bound; the CLT value is an approximation.
    setValue('gdp-epsilon', slot.epsilon, undefined, slot.approximate ? 'nearest' : 'up');
  }
  // GDP: the value of G_mu (approximate for DP-SGD); PLD and RDP: certified lower bounds.
  const minError = name === 'gdp' ? slot.min_error : slot.min_error_lower;
  if (minError !== undefined) {
    setValue(name + '-min-error', minError,
             formatPercent(minError, name === 'gdp' ? 'nearest' : 'down'));
  }
}

// The epsilon of an accountant's slot that bounds (or approximates) the privacy loss.
function slotEpsilon(name, slot) {
  if (!slot || slot.error) return NaN;
  return name === 'pld' ? slot.epsilon_upper : slot.epsilon;
}

function drawEpsilonPlot(view) {
  const series = [];
  for (const name of view.accountants) {
    const points = view.grid.map((g, i) => [g.x, slotEpsilon(name, view.curve[i][name])]);
    series.push({name: LABELS[name], points, color: COLORS[name],
                 dashed: name === 'gdp', markers: true});
    if (name === 'pld') {
      const lower = view.grid.map((g, i) => {
        const slot = view.curve[i].pld;
        return [g.x, slot && !slot.error ? slot.epsilon_lower : NaN];
      });
      series.push({name: LABELS.pld_lower, points: lower, color: COLORS.pld_lower,
                   dashed: true});
    }
  }
  drawLineChart($('#plot-epsilon'), {
    title: 'epsilon against training length',
    xLabel: view.lengthMode === 'epochs' ? 'epochs' : 'steps T',
    yLabel: `ε at δ = ${formatNumber(view.inputs.delta)}`,
    xDomain: [0, view.grid[view.grid.length - 1].x],
    series,
  });
  $('#plot-epsilon-caption').textContent = `ε against training length for each accountant, ` +
      `at σ = ${formatNumber(view.sigma)}, q = ${formatNumber(view.inputs.sampling_rate)}, ` +
      `δ = ${formatNumber(view.inputs.delta)}. The marked column of the table is your input.`;
}

function drawEpsilonTable(view) {
  const table = $('#table-epsilon');
  const headers = [view.lengthMode === 'epochs' ? 'epochs' : 'steps T', 'steps'];
  for (const name of view.accountants) {
    if (name === 'pld') headers.push('PLD ε upper', 'PLD ε lower');
    if (name === 'rdp') headers.push('RDP ε', 'RDP order');
    if (name === 'gdp') headers.push('GDP μ', 'GDP-CLT ε (approx.)');
  }
  table.tHead.innerHTML = '<tr>' + headers.map((h) => `<th>${h}</th>`).join('') + '</tr>';
  const rows = view.grid.map((g, i) => {
    const cells = [formatNumber(g.x), String(g.steps)];
    for (const name of view.accountants) {
      const slot = view.curve[i][name];
      const pair = !slot ? ['…', '…'] : slot.error ? ['error', ''] :
          name === 'pld' ? [formatNumber(slot.epsilon_upper, 5, 'up'),
                            formatNumber(slot.epsilon_lower, 5, 'down')] :
          name === 'rdp' ? [formatNumber(slot.epsilon, 5, 'up'), formatNumber(slot.order)] :
          [formatNumber(slot.mu), formatNumber(slot.epsilon)];
      cells.push(...pair);
    }
    const current = g.current ? ' class="current"' : '';
    return `<tr${current}>` + cells.map((c) => `<td>${c}</td>`).join('') + '</tr>';
  });
  table.tBodies[0].innerHTML = rows.join('');
}

// Tradeoff curves of the current result: G_mu (CLT) and f_{eps,delta} for each accountant's eps.
function drawTradeoff(view) {
  const curves = [];
  const gdpSlot = view.result.gdp;
  const mu = gdpSlot && !gdpSlot.error ? gdpSlot.mu : NaN;
  const alphas = [];
  for (let i = 0; i <= 200; ++i) alphas.push(i / 200);
  // Fine near alpha = 0, where the curves are steep.
  for (const a of [1e-4, 3e-4, 1e-3, 2e-3, 3e-3, 5e-3]) alphas.push(a);
  alphas.sort((a, b) => a - b);
  const request = (epsilon, points) => core.callNow({op: 'tradeoff', mu: Number.isFinite(mu) ? mu : 0,
      epsilon: Number.isFinite(epsilon) ? epsilon : 0, delta: view.inputs.delta, alphas: points});
  for (const name of ['pld', 'rdp']) {
    const epsilon = slotEpsilon(name, view.result[name]);
    if (!view.accountants.includes(name) || !Number.isFinite(epsilon)) continue;
    const plot = request(epsilon, alphas);
    const table = request(epsilon, TABLE_ALPHAS);
    if (!plot.ok || !table.ok) continue;
    curves.push({name: `(ε, δ) from ${name.toUpperCase()}, ε = ${formatNumber(epsilon, 4, 'up')}`,
                 color: COLORS[name], dash: '2 4', values: plot.result.approx_dp,
                 tableValues: table.result.approx_dp});
  }
  // The run's own curves from the worker (certified lower envelopes of its tradeoff curve).
  const run = view.runTradeoff;
  for (const name of ['pld', 'rdp']) {
    if (!run || !run[name] || run[name].error) continue;
    const beta = run[name].beta;
    curves.push({name: `${name.toUpperCase()} curve of this run (certified), min α+β ≥ ` +
                       formatPercent(run[name].min_error_lower, 'down'),
                 tableName: `${name.toUpperCase()} curve (certified)`,
                 color: COLORS[name], xs: RUN_ALPHAS,
                 values: beta.slice(0, RUN_ALPHAS.length),
                 tableValues: beta.slice(RUN_ALPHAS.length)});
  }
  if (view.accountants.includes('gdp') && Number.isFinite(mu)) {
    const plot = request(0, alphas);
    const table = request(0, TABLE_ALPHAS);
    if (plot.ok && table.ok) {
      curves.push({name: `G_μ, μ = ${formatNumber(mu, 4)} (CLT, approx.)`, color: COLORS.gdp,
                   dashed: true, values: plot.result.gdp, tableValues: table.result.gdp});
    }
  }
  const series = curves.map((c) => ({name: c.name, color: c.color, dashed: c.dashed,
      dash: c.dash, points: (c.xs || alphas).map((a, i) => [a, c.values[i]])}));
  series.push({name: 'no privacy: β = 0 … perfect: β = 1 − α', color: '#c8ced8', dashed: true,
               points: [[0, 1], [1, 0]]});
  drawLineChart($('#plot-tradeoff'), {
    title: 'tradeoff curves', xLabel: 'type I error α', yLabel: 'type II error β',
    xDomain: [0, 1], yDomain: [0, 1], legend: 'top-right', series,
  });
  const table = $('#table-tradeoff');
  table.tHead.innerHTML = '<tr><th>α</th>' + curves.map((c) => `<th>${c.tableName || c.name}</th>`).join('') +
      '</tr>';
  table.tBodies[0].innerHTML = TABLE_ALPHAS.map((a, i) => '<tr><td>' + a + '</td>' +
      curves.map((c) => `<td>${formatNumber(c.tableValues[i], 4)}</td>`).join('') + '</tr>')
      .join('');
}

// ---------------------------------------------------------------------------------------
// The update cycle.

let generation = 0;
let pendingJobs = 0;

function setPending(delta) {
  pendingJobs += delta;
  document.body.dataset.pending = String(pendingJobs);
}

// details: also the minimum type I + type II error (certified for PLD and RDP), which
// costs more than epsilon itself; asked for the user's own point only.
function epsilonRequest(inputs, sigma, steps, accountants, details = false) {
  return {op: 'epsilon', sampling_rate: inputs.sampling_rate, noise_multiplier: sigma,
          steps, delta: inputs.delta, accountants, details};
}

// Training lengths of the epsilon plot: 12 points, the user's input at the 8th.
function lengthGrid(inputs, lengthMode) {
  const grid = [];
  for (let i = 1; i <= 12; ++i) {
    if (lengthMode === 'epochs') {
      const epochs = inputs.epochs * i / 8;
      grid.push({x: epochs, steps: Math.max(1, stepsForEpochs(epochs, inputs.sampling_rate)),
                 current: i === 8});
    } else {
      const steps = Math.max(1, Math.round(inputs.steps * i / 8));
      grid.push({x: steps, steps: i === 8 ? inputs.steps : steps, current: i === 8});
    }
  }
  return grid.filter((g) => g.steps <= MAX_STEPS);
}

function markFirstResult() {
  if (stats.firstResultMs === null) {
    stats.firstResultMs = performance.now() - stats.loadStart;
    // The same moment counted from the navigation's start (HTML, scripts and all).
    stats.firstResultFromNavigationMs = performance.now();
    document.body.dataset.firstResult = 'yes';
  }
}

function updateTiming() {
  const parts = [];
  if (stats.firstResultMs !== null) {
    parts.push(`First result ${stats.firstResultMs.toFixed(0)} ms after load.`);
  }
  if (stats.pldMs.length) {
    parts.push(`Last PLD ε: ${stats.pldMs[stats.pldMs.length - 1].toFixed(0)} ms (${stats.worker}).`);
  }
  parts.push(`WebAssembly module: ${(stats.wasmBytes / 1024).toFixed(0)} KiB.`);
  $('#timing').textContent = parts.join(' ');
}

async function update() {
  const state = readState();
  applyVisibility(state);
  writeUrl(state);
  const {ok, inputs, errors} = validate(state);
  showErrors(errors);
  generation += 1;
  const myGeneration = generation;
  document.body.dataset.generation = String(myGeneration);
  document.body.dataset.scheduled = 'no';
  core.cancelHeavy();
  // Results of earlier input stay visible but greyed (and marked for assistive technology)
  // while the input is invalid: they no longer describe what the form says.
  for (const id of ['#cards', '#plots', '#tables']) {
    const section = $(id);
    if (!section) continue;
    section.classList.toggle('stale', !ok);
    section.setAttribute('aria-disabled', ok ? 'false' : 'true');
  }
  if (!ok) {
    $('#summary').textContent = 'Fix the marked fields; nothing is computed from invalid input. ' +
        'The greyed results below are for the previous input.';
    $('#summary').classList.add('bad');
    document.body.dataset.done = String(myGeneration);
    document.body.dataset.cardsDone = String(myGeneration);
    return;
  }
  $('#summary').classList.remove('bad');
  let accountants = state.accountants.filter((a) => core.available.includes(a));
  const unavailable = state.accountants.filter((a) => !core.available.includes(a));
  for (const name of unavailable) {
    clearCard(name);
    setFailed(CARD_FIELDS[name][1], 'this accountant is not in this build of the core');
  }
  const stale = () => myGeneration !== generation;

  setPending(+1);
  try {
    let sigma = inputs.noise_multiplier;
    const result = {};
    if (state.mode === 'calibrate') {
      for (const name of accountants.filter((a) => !core.calibration.includes(a))) {
        clearCard(name);
        setFailed(CARD_FIELDS[name][0], 'this build cannot calibrate with this accountant');
      }
      accountants = accountants.filter((a) => core.calibration.includes(a));
      for (const name of accountants) {
        clearCard(name);
        setBusy(CARD_FIELDS[name][0]);
      }
      $('#summary').textContent = `Calibrating σ for ε = ${formatNumber(inputs.target_epsilon)}` +
          ` at δ = ${formatNumber(inputs.delta)}, q = ${formatNumber(inputs.sampling_rate)}, ` +
          `T = ${inputs.steps} steps…`;
      for (const name of accountants) {
        const {reply, milliseconds, cancelled} = await core.callHeavy({op: 'calibrate',
            target_epsilon: inputs.target_epsilon, delta: inputs.delta,
            sampling_rate: inputs.sampling_rate, steps: inputs.steps, accountant: name});
        if (cancelled || stale()) return;
        stats.calibrateMs[name] = milliseconds;
        const slot = reply.ok ? reply.result : {error: reply.error};
        result[name] = slot;
        if (slot.error) {
          setFailed(CARD_FIELDS[name][0], slot.error);
        } else {
          setValue(CARD_FIELDS[name][0], slot.noise_multiplier);
          // The epsilon the calibrated sigma achieves, with the accountant's other outputs.
          const check = await core.callHeavy(epsilonRequest(inputs, slot.noise_multiplier,
              inputs.steps, [name], true));
          if (check.cancelled || stale()) return;
          if (check.reply.ok) {
            result[name] = Object.assign({}, check.reply.result[name],
                {noise_multiplier: slot.noise_multiplier});
          }
          showSlot(name, result[name]);
        }
        markFirstResult();
      }
      const first = accountants.find((a) => result[a] && !result[a].error);
      if (!first) {
        $('#summary').textContent = 'No accountant could calibrate σ for this target.';
        $('#summary').classList.add('bad');
        document.body.dataset.done = String(myGeneration);
        document.body.dataset.cardsDone = String(myGeneration);
        return;
      }
      sigma = result[first].noise_multiplier;
      $('#summary').textContent = `Smallest σ for ε ≤ ${formatNumber(inputs.target_epsilon)} ` +
          `at δ = ${formatNumber(inputs.delta)}: ${formatNumber(sigma)} by ` +
          `${first === 'gdp' ? 'GDP-CLT (approximate)' : first.toUpperCase()} ` +
          `(q = ${formatNumber(inputs.sampling_rate)}, ` +
          `T = ${inputs.steps} steps). Plots use this σ.`;
    } else {
      $('#summary').textContent = `q = ${formatNumber(inputs.sampling_rate)}, ` +
          `T = ${inputs.steps} steps, σ = ${formatNumber(sigma)}, ` +
          `δ = ${formatNumber(inputs.delta)}.`;
      // The fast accountants on the main thread, one request each, the closed form (GDP)
      // first: each card is shown as soon as it is known, and the page yields between them
      // so that the browser paints it (the RDP request costs tens of milliseconds).
      const fast = ['gdp', 'rdp'].filter((a) => accountants.includes(a));
      for (const name of fast) {
        if (stats.phases.fastStart === undefined) {
          stats.phases.fastStart = performance.now() - stats.loadStart;
        }
        const reply = core.callNow(epsilonRequest(inputs, sigma, inputs.steps, [name], true));
        result[name] = reply.ok ? reply.result[name] : {error: reply.error};
        showSlot(name, result[name]);
        markFirstResult();
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (stale()) return;
      }
      if (accountants.includes('pld')) {
        for (const id of CARD_FIELDS.pld.slice(1)) setBusy(id);
        const {reply, milliseconds, cancelled} =
            await core.callHeavy(epsilonRequest(inputs, sigma, inputs.steps, ['pld'], true));
        if (cancelled || stale()) return;
        result.pld = reply.ok ? reply.result.pld : {error: reply.error};
        if (reply.ok && !result.pld.error) stats.pldMs.push(milliseconds);
        showSlot('pld', result.pld);
        markFirstResult();
      }
    }
    updateTiming();
    document.body.dataset.cardsDone = String(myGeneration);

    // Plots and tables: the fast accountants at once, PLD point by point in the worker (the
    // user's own point first, so that the tradeoff plot is complete early). In calibrate
    // mode they show every chosen accountant at the calibrated sigma.
    const shown = state.accountants.filter((a) => core.available.includes(a));
    const reuse = state.mode === 'epsilon';
    const view = {inputs, sigma, accountants: shown, lengthMode: state.length,
                  grid: lengthGrid(inputs, state.length)};
    view.curve = view.grid.map(() => ({}));
    const currentIndex = view.grid.findIndex((g) => g.current);
    view.result = currentIndex >= 0 ? view.curve[currentIndex] : {};
    const fast = shown.filter((a) => a !== 'pld');
    view.grid.forEach((g, i) => {
      if (g.current && reuse) {
        Object.assign(view.curve[i], result);
        return;
      }
      if (!fast.length) return;
      const reply = core.callNow(epsilonRequest(inputs, sigma, g.steps, fast));
      for (const name of fast) {
        view.curve[i][name] = reply.ok ? reply.result[name] : {error: reply.error};
      }
    });
    drawTradeoff(view);
    drawEpsilonPlot(view);
    drawEpsilonTable(view);
    // The run's PLD and RDP tradeoff curves (heavy: the PLD curve), at the plot's and the
    // table's type I errors in one request.
    const runCurves = shown.filter((a) => a === 'pld' || a === 'rdp');
    if (runCurves.length) {
      const {reply, cancelled} = await core.callHeavy({op: 'run_tradeoff',
          sampling_rate: inputs.sampling_rate, noise_multiplier: sigma, steps: inputs.steps,
          alphas: RUN_ALPHAS.concat(TABLE_ALPHAS), accountants: runCurves});
      if (cancelled || stale()) return;
      view.runTradeoff = reply.ok ? reply.result : null;
      drawTradeoff(view);
    }
    if (shown.includes('pld')) {
      const order = view.grid.map((g, i) => i).filter((i) => !(view.grid[i].current && reuse));
      order.sort((a, b) => (b === currentIndex) - (a === currentIndex));
      const plotStart = performance.now();
      for (const i of order) {
        const {reply, cancelled} = await core.callHeavy(
            epsilonRequest(inputs, sigma, view.grid[i].steps, ['pld']));
        if (cancelled || stale()) return;
        view.curve[i].pld = reply.ok ? reply.result.pld : {error: reply.error};
        if (i === currentIndex) drawTradeoff(view);
        drawEpsilonPlot(view);
        drawEpsilonTable(view);
      }
      // Wall-clock time of the plot's PLD points (those not reused from the cards).
      stats.pldPlotMs = performance.now() - plotStart;
    }
    document.body.dataset.done = String(myGeneration);
  } finally {
    setPending(-1);
  }
}

// Re-computes shortly after the last keystroke; radio buttons and checkboxes update at once.
let debounceTimer = null;
function scheduleUpdate(delayMs) {
  clearTimeout(debounceTimer);
  document.body.dataset.scheduled = 'yes';
  debounceTimer = setTimeout(update, delayMs);
}

async function main() {
  readUrl();
  applyVisibility(readState());
  document.body.dataset.pending = '0';
  try {
    await core.init();
  } catch (e) {
    $('#summary').textContent = 'Could not start the WebAssembly accounting core: ' + e.message;
    $('#summary').classList.add('bad');
    return;
  }
  $('#form').addEventListener('input', (event) => {
    scheduleUpdate(['radio', 'checkbox'].includes(event.target.type) ? 0 : 120);
  });
  $('#form').addEventListener('submit', (event) => event.preventDefault());
  window.addEventListener('hashchange', () => {
    readUrl();
    scheduleUpdate(0);
  });
  document.body.dataset.ready = 'yes';
  await update();
}

main();
