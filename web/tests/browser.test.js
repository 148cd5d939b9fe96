// End-to-end tests of the calculator page in headless Chromium (Debian's /usr/bin/chromium
// driven by npm playwright-core), served by `dpkit serve` on 127.0.0.1.
// Run by web/tests/run_tests.sh: node --test web/tests/browser.test.js
'use strict';

const assert = require('node:assert');
const {spawn, spawnSync} = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {after, before, test} = require('node:test');
const {chromium} = require('playwright-core');
const {CALCULATOR_DIR, DPKIT, OUTPUT_DIR, TABLE1_ROWS, TOLERANCE, dpkitJson, assertClose,
       assertPldConsistent} =
    require('./common.js');

const CHROMIUM = process.env.DPKIT_CHROMIUM || '/usr/bin/chromium';
let server = null;
let baseUrl = null;
let context = null;
let profileDir = null;
const timings = {};

before(async () => {
  fs.mkdirSync(OUTPUT_DIR, {recursive: true});
  server = spawn(DPKIT, ['serve', '--port=0', `--dir=${CALCULATOR_DIR}`],
                 {stdio: ['ignore', 'pipe', 'pipe']});
  baseUrl = await new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error('dpkit serve did not start: ' + output)),
                             10000);
    const onData = (chunk) => {
      output += chunk;
      const match = /http:\/\/127\.0\.0\.1:\d+\//.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[0]);
      }
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('exit', (code) => reject(new Error(`dpkit serve exited ${code}: ${output}`)));
  });
  profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dpkit-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    viewport: {width: 1280, height: 900},
  });
  // The page must never reach the network: fail any request that is not to our server.
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(baseUrl) || url.startsWith('file:') || url.startsWith('blob:') ||
        url.startsWith('data:')) {
      return route.continue();
    }
    return route.abort();
  });
});

after(async () => {
  fs.writeFileSync(path.join(OUTPUT_DIR, 'web_timings.json'),
                   JSON.stringify(timings, null, 2) + '\n');
  console.log('# web timings: ' + JSON.stringify(timings));
  if (context) await context.close();
  if (server) server.kill('SIGTERM');
  if (profileDir) fs.rmSync(profileDir, {recursive: true, force: true});
});

async function newPage(url) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (error) => problems.push('page error: ' + error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push('console error: ' + message.text());
  });
  page.on('requestfailed', (request) => problems.push('request failed: ' + request.url()));
  page.problems = problems;
  await page.goto(url || baseUrl);
  await page.waitForSelector('body[data-ready="yes"]', {timeout: 10000});
  await settle(page);
  return page;
}

// Waits until the last edit has been computed completely (PLD included).
async function settle(page) {
  await page.waitForFunction(() => {
    const d = document.body.dataset;
    return d.scheduled !== 'yes' && d.pending === '0' && d.generation !== undefined &&
        d.done === d.generation;
  }, null, {timeout: 120000, polling: 50});
}

// Waits until the result cards of the last edit are filled (the plots may still be filling).
async function settleCards(page) {
  await page.waitForFunction(() => {
    const d = document.body.dataset;
    return d.scheduled !== 'yes' && d.generation !== undefined && d.cardsDone === d.generation;
  }, null, {timeout: 120000, polling: 50});
}

async function value(page, id) {
  const text = await page.getAttribute('#' + id, 'data-value');
  return text === null ? NaN : Number(text);
}

async function setForm(page, fields, wait = settle) {
  for (const [name, text] of Object.entries(fields)) {
    if (['mode', 'sampling', 'length'].includes(name)) {
      await page.check(`input[name="${name}"][value="${text}"]`);
    } else {
      await page.fill('#' + name, String(text));
    }
  }
  await wait(page);
}

async function accountantsOf(page) {
  return page.evaluate(() => ACCOUNTANTS.filter(
      (a) => document.querySelector(`#accountants input[name="${a}"]`).checked));
}

test('the first result appears within 1 s of loading, without network', async () => {
  const page = await context.newPage();
  await page.goto(baseUrl);
  await page.waitForSelector('body[data-first-result="yes"]', {timeout: 5000});
  const stats = await page.evaluate(() => window.dpkitStats);
  timings.first_result_ms = stats.firstResultMs;
  timings.first_result_from_navigation_ms = stats.firstResultFromNavigationMs;
  timings.first_result_phases_ms = stats.phases;
  timings.wasm_bytes = stats.wasmBytes;
  assert.ok(stats.firstResultMs < 1000, `first result after ${stats.firstResultMs} ms`);
  assert.strictEqual(stats.worker, 'web worker');
  await settle(page);
  await page.close();
});

test('Table 1 rows of Bu et al. equal dpkit epsilon --format=json', async () => {
  const page = await newPage();
  const available = await page.evaluate(() => core.available);
  const pldMs = [];
  const pldPlotMs = [];
  for (const row of TABLE1_ROWS) {
    await setForm(page, {mode: 'epsilon', sampling: 'dataset', length: 'epochs',
                         dataset_size: 60000, batch_size: 256, epochs: row.epochs,
                         noise_multiplier: row.sigma, delta: '1e-5'}, settleCards);
    const cli = dpkitJson(['epsilon', '--dataset_size=60000', '--batch_size=256',
      `--noise_multiplier=${row.sigma}`, `--epochs=${row.epochs}`, '--delta=1e-5',
      '--accountant=all']);
    const what = `sigma=${row.sigma} epochs=${row.epochs}`;
    const summary = await page.textContent('#summary');
    assert.ok(summary.includes(`T = ${cli.input.steps} steps`), `${what}: ${summary}`);
    assertClose(assert, await value(page, 'gdp-mu'), cli.gdp.mu, TOLERANCE.gdp, what + ' mu');
    assertClose(assert, await value(page, 'gdp-epsilon'), cli.gdp.epsilon, TOLERANCE.gdp,
                what + ' gdp epsilon');
    assertClose(assert, await value(page, 'rdp-epsilon'), cli.rdp.epsilon, TOLERANCE.rdp,
                what + ' rdp epsilon');
    assert.strictEqual(await value(page, 'rdp-order'), cli.rdp.order, what + ' rdp order');
    assert.strictEqual(cli.rdp.conversion, 'optimal', what + ' rdp conversion');
    assertClose(assert, await value(page, 'rdp-min-error'), cli.rdp.min_error_lower,
                TOLERANCE.rdp, what + ' rdp min error');
    assertClose(assert, await value(page, 'gdp-min-error'), cli.gdp.min_error, TOLERANCE.gdp,
                what + ' gdp min error');
    if (available.includes('pld')) {
      assert.ok(cli.pld, `${what}: dpkit epsilon --accountant=all has no pld entry`);
      assertPldConsistent(assert,
          {lower: await value(page, 'pld-epsilon-lower'),
           upper: await value(page, 'pld-epsilon-upper')},
          {lower: cli.pld.epsilon_lower, upper: cli.pld.epsilon_upper}, what);
      // The min-error figure is 1 - (certified upper bound on delta(0)); delta queries refine
      // their grid until the gap is small or the point limit is reached, and WASM's long
      // double (software quad) and x86's (80-bit) can stop that refinement one step apart.
      // Both values are certified, so the browser's lower bound must lie in the CLI's
      // certified interval [min_error_lower, min_error_upper], widened below by its width.
      const pldMinError = await value(page, 'pld-min-error');
      const width = cli.pld.min_error_upper - cli.pld.min_error_lower;
      assert.ok(pldMinError <= cli.pld.min_error_upper &&
                pldMinError >= cli.pld.min_error_lower - width,
                `${what} pld min error: browser ${pldMinError} outside dpkit's certified ` +
                `[${cli.pld.min_error_lower}, ${cli.pld.min_error_upper}]`);
    }
    if (available.includes('pld')) {
      const stats = await page.evaluate(() => window.dpkitStats.pldMs);
      pldMs.push(Math.round(stats[stats.length - 1]));
      // The epsilon plot's other 11 PLD points (the user's own comes from the cards).
      await settle(page);
      pldPlotMs.push(Math.round(await page.evaluate(() => window.dpkitStats.pldPlotMs)));
    }
  }
  if (pldMs.length) timings.pld_epsilon_ms_table1 = pldMs;
  if (pldPlotMs.length) timings.pld_plot_other_11_points_ms_table1 = pldPlotMs;
  assert.deepStrictEqual(page.problems, []);
  await page.close();
});

test('printed bounds are rounded outward: upper bounds up, lower bounds down', async () => {
  const page = await newPage();
  await setForm(page, {mode: 'epsilon', sampling: 'dataset', length: 'epochs',
                       dataset_size: 60000, batch_size: 256, epochs: 60,
                       noise_multiplier: 1.1, delta: '1e-5'}, settleCards);
  // The cards: the shown text, read back, is on the certified side of the exact value.
  const shown = (id) => page.evaluate((i) => {
    const e = document.getElementById(i);
    return {text: e.textContent, value: e.dataset.value};
  }, id);
  const available = await page.evaluate(() => core.available);
  const cards = [['rdp-epsilon', 'up'], ['rdp-min-error', 'down']];
  if (available.includes('pld')) {
    cards.push(['pld-epsilon-upper', 'up'], ['pld-epsilon-lower', 'down'],
               ['pld-min-error', 'down']);
  }
  for (const [id, direction] of cards) {
    const {text, value} = await shown(id);
    assert.ok(value !== undefined, `${id} has no value`);
    // Percentages: the decimal point moved two places (exactly, in the text).
    const number = text.endsWith(' %') ? Number(text.replace(' %', '').replace(
        /^(\d*)\.(\d\d)/, (m, w, f) => (w.padStart(3, '0').slice(0, -2) + '.' +
                                           w.padStart(3, '0').slice(-2) + f)))
        : Number(text);
    assert.ok(direction === 'up' ? number >= Number(value) : number <= Number(value),
              `${id}: shown ${text} is not a${direction === 'up' ? 'n upper' : ' lower'} ` +
              `bound of ${value}`);
  }
  // The page's formatting functions over 100,000 random values of every magnitude (seeded
  // generator, so a failure repeats): the property holds for every value and precision.
  const failures = await page.evaluate(() => {
    let state = 20261125;
    const random = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
    const bad = [];
    for (let i = 0; i < 100000 && bad.length < 5; ++i) {
      const value = (random() - 0.2) * Math.pow(10, Math.floor(random() * 600 - 300));
      const digits = 1 + Math.floor(random() * 12);
      const read = (t) => Number(t.replace('∞', 'Infinity').replace('−', '-'));
      const up = read(formatNumber(value, digits, 'up'));
      const down = read(formatNumber(value, digits, 'down'));
      if (!(up >= value && down <= value)) bad.push([value, digits, up, down]);
    }
    return bad;
  });
  assert.deepStrictEqual(failures, []);
  assert.deepStrictEqual(page.problems, []);
  await page.close();
});

test('a calibration equals dpkit calibrate (or re-accounts to the target)', async () => {
  const page = await newPage();
  await setForm(page, {mode: 'calibrate', sampling: 'dataset', length: 'epochs',
                       dataset_size: 60000, batch_size: 256, epochs: 60, target_epsilon: 2,
                       delta: '1e-5'}, settleCards);
  const available = await page.evaluate(() => core.calibration);
  if (available.includes('pld')) {
    timings.pld_calibrate_ms_table1_row2 =
        Math.round(await page.evaluate(() => window.dpkitStats.calibrateMs.pld));
  }
  const hasCalibrate = spawnSync(DPKIT, ['calibrate', '--help']).status === 0;
  for (const accountant of available) {
    const sigma = await value(page, `${accountant}-noise-multiplier`);
    if (hasCalibrate) {
      const cli = dpkitJson(['calibrate', '--dataset_size=60000', '--batch_size=256',
        '--epochs=60', '--target_epsilon=2', '--delta=1e-5', `--accountant=${accountant}`]);
      assertClose(assert, sigma, cli.noise_multiplier, TOLERANCE.calibrate,
                  accountant + ' calibrated sigma');
    }
    // Whatever the accountant, the calibrated sigma must meet the target when the command
    // line re-accounts it (the GDP one only approximately: it is the CLT).
    const check = dpkitJson(['epsilon', '--dataset_size=60000', '--batch_size=256',
      '--epochs=60', '--delta=1e-5', `--noise_multiplier=${sigma}`,
      `--accountant=${accountant}`]);
    const epsilon = accountant === 'pld' ? check.pld.epsilon_upper : check[accountant].epsilon;
    assert.ok(epsilon <= 2 * (1 + 1e-9), `${accountant}: sigma ${sigma} gives epsilon ${epsilon}`);
    assert.ok(epsilon >= 2 * (1 - 1e-3), `${accountant}: sigma ${sigma} is not the smallest ` +
              `(epsilon ${epsilon} < 2 by more than 0.1 %)`);
  }
  assert.deepStrictEqual(page.problems, []);
  await page.close();
});

test('invalid input is marked at the field with its range and nothing is computed', async () => {
  const page = await newPage();
  const before = await value(page, 'gdp-mu');
  await setForm(page, {noise_multiplier: '-1'});
  assert.strictEqual(await page.getAttribute('#noise_multiplier', 'aria-invalid'), 'true');
  const message = await page.textContent('#noise_multiplier ~ .error');
  assert.match(message, /noise multiplier must be from 0\.1 to 1000/);
  assert.match(await page.textContent('#summary'), /nothing is computed from invalid input/);
  assert.strictEqual(await value(page, 'gdp-mu'), before, 'the old result stays untouched');

  await setForm(page, {noise_multiplier: '1.1', batch_size: '70000'});
  assert.match(await page.textContent('#batch_size ~ .error'), /from 1 to the dataset size/);
  await setForm(page, {batch_size: '256', delta: 'abc'});
  assert.match(await page.textContent('#delta ~ .error'), /δ must be a number/);
  await setForm(page, {delta: '1e-5'});
  assert.strictEqual(await page.getAttribute('#delta', 'aria-invalid'), 'false');
  assert.strictEqual(await page.textContent('#noise_multiplier ~ .error'), '');
  assert.deepStrictEqual(page.problems, []);
  await page.close();
});

test('on invalid input the previous results are greyed out, and restored on valid input', async () => {
  const page = await newPage();
  const stale = () => page.evaluate(() => ['#cards', '#plots', '#tables'].map((id) => {
    const element = document.querySelector(id);
    return {stale: element.classList.contains('stale'),
            opacity: Number(getComputedStyle(element).opacity),
            disabled: element.getAttribute('aria-disabled')};
  }));
  for (const section of await stale()) assert.strictEqual(section.stale, false);
  await setForm(page, {noise_multiplier: '-1'});
  for (const section of await stale()) {
    assert.strictEqual(section.stale, true);
    assert.ok(section.opacity < 0.5, `a stale section is greyed (opacity ${section.opacity})`);
    assert.strictEqual(section.disabled, 'true');
  }
  assert.match(await page.textContent('#summary'), /greyed results below are for the previous input/);
  await setForm(page, {noise_multiplier: '1.1'});
  for (const section of await stale()) {
    assert.strictEqual(section.stale, false);
    assert.strictEqual(section.opacity, 1);
  }
  assert.deepStrictEqual(page.problems, []);
  await page.close();
});

test('the plots render and the table holds the same data', async () => {
  const page = await newPage();
  const counts = await page.evaluate(() => ({
    epsilonLines: document.querySelectorAll('#plot-epsilon polyline').length,
    epsilonPoints: Math.max(...[...document.querySelectorAll('#plot-epsilon polyline')]
        .map((p) => p.getAttribute('points').split(' ').length)),
    tradeoffLines: document.querySelectorAll('#plot-tradeoff polyline').length,
    tableRows: document.querySelectorAll('#table-epsilon tbody tr').length,
    tradeoffRows: document.querySelectorAll('#table-tradeoff tbody tr').length,
    current: document.querySelector('#table-epsilon tr.current td:nth-child(2)').textContent,
  }));
  const available = await page.evaluate(() => core.available);
  const accountants = (await accountantsOf(page)).filter((a) => available.includes(a));
  assert.ok(counts.epsilonLines >= accountants.length, JSON.stringify(counts));
  assert.ok(counts.epsilonPoints >= 10, JSON.stringify(counts));
  // The run's PLD and RDP curves, the (eps, delta) curve of each, G_mu and the diagonal.
  const expectedTradeoff = 1 + accountants.filter((a) => a === 'gdp').length +
      2 * accountants.filter((a) => a === 'pld' || a === 'rdp').length;
  assert.ok(counts.tradeoffLines >= expectedTradeoff, JSON.stringify(counts));
  const legend = await page.textContent('#plot-tradeoff');
  for (const name of accountants.filter((a) => a === 'pld' || a === 'rdp')) {
    assert.ok(legend.includes(`${name.toUpperCase()} curve of this run (certified)`), legend);
  }
  assert.strictEqual(counts.tableRows, 12);
  assert.strictEqual(counts.tradeoffRows, 11);
  assert.strictEqual(counts.current, '14063');
  const box = await page.locator('#plot-epsilon').boundingBox();
  assert.ok(box.width > 200 && box.height > 100, JSON.stringify(box));
  await page.screenshot({path: path.join(OUTPUT_DIR, 'calculator.png'), fullPage: true});
  await page.close();
});

test('the URL holds the state and reproduces the result', async () => {
  const page = await newPage();
  await setForm(page, {noise_multiplier: '0.7', epochs: '45'});
  const url = page.url();
  assert.match(url, /sigma=0\.7/);
  assert.match(url, /epochs=45/);
  const mu = await value(page, 'gdp-mu');
  const copy = await newPage(url);
  assert.strictEqual(await copy.inputValue('#noise_multiplier'), '0.7');
  assert.strictEqual(await value(copy, 'gdp-mu'), mu);
  await page.close();
  await copy.close();
});

test('the page is usable at phone width', async () => {
  const page = await context.newPage();
  await page.setViewportSize({width: 390, height: 844});
  await page.goto(baseUrl);
  await page.waitForSelector('body[data-ready="yes"]');
  await settle(page);
  const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
  const input = await page.locator('#noise_multiplier').boundingBox();
  assert.ok(input.width > 200, 'inputs are wide enough to type in');
  await page.screenshot({path: path.join(OUTPUT_DIR, 'calculator_phone.png'), fullPage: true});
  await page.close();
});

test('at phone width the tradeoff legend lies below the plot, not over it', async () => {
  const page = await context.newPage();
  await page.setViewportSize({width: 390, height: 844});
  await page.goto(baseUrl);
  await page.waitForSelector('body[data-ready="yes"]');
  await settle(page);
  const boxes = () => page.evaluate(() => ['#plot-tradeoff', '#plot-epsilon'].map((id) => {
    const svg = document.querySelector(id);
    const frame = svg.querySelector('rect.frame').getBoundingClientRect();
    const legend = svg.querySelector('g.legend').getBoundingClientRect();
    return {id, where: svg.dataset.legend, frameBottom: frame.bottom, legendTop: legend.top,
            legendBottom: legend.bottom, svgBottom: svg.getBoundingClientRect().bottom};
  }));
  for (const box of await boxes()) {
    assert.strictEqual(box.where, 'below', box.id);
    assert.ok(box.legendTop >= box.frameBottom, `${box.id}: legend starts inside the plot`);
    assert.ok(box.legendBottom <= box.svgBottom + 0.5, `${box.id}: legend is cut off`);
  }
  // Back at desktop width the chart is redrawn with the legend inside again.
  await page.setViewportSize({width: 1200, height: 900});
  await page.waitForFunction(
      () => document.querySelector('#plot-tradeoff').dataset.legend === 'inside');
  await page.screenshot({path: path.join(OUTPUT_DIR, 'calculator_phone_legend.png')});
  await page.close();
});

test('the page works from file:// (worker and WebAssembly included)', async () => {
  const page = await newPage('file://' + path.join(CALCULATOR_DIR, 'index.html'));
  const stats = await page.evaluate(() => window.dpkitStats);
  assert.strictEqual(stats.worker, 'web worker');
  assert.ok(Number.isFinite(await value(page, 'gdp-mu')));
  assert.ok(Number.isFinite(await value(page, 'rdp-epsilon')));
  assert.deepStrictEqual(page.problems, []);
  await page.close();
});
