// WebAssembly counterpart of //benchmarks:web_timing: answers each request given on the
// command line with the calculator module in Node and prints one JSON line per request
// with the process CPU seconds it took and the reply (benchmarks/gate.py, kind "web_ratio").
//   usage: node web/tests/timing.js [--repetitions=N] REQUEST_JSON...
// The module is DPKIT_CALCULATOR_DIR's (default: the --config=wasm bazel-out directory).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const {CALCULATOR_DIR} = require('./common.js');

const createDpkitModule = require(path.join(CALCULATOR_DIR, 'calculator.js'));
const {dpkitCall} = require(path.join(CALCULATOR_DIR, 'dpkit_call.js'));

function cpuSeconds() {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

async function main(args) {
  let repetitions = 1;
  if (args.length > 0 && args[0].startsWith('--repetitions=')) {
    repetitions = Math.max(1, parseInt(args.shift().slice('--repetitions='.length), 10));
  }
  const module = await createDpkitModule({
    wasmBinary: fs.readFileSync(path.join(CALCULATOR_DIR, 'calculator.wasm')),
    print() {}, printErr() {},
  });
  for (const request of args) {
    let best = Infinity;
    let reply = null;
    for (let r = 0; r < repetitions; ++r) {
      const start = cpuSeconds();
      reply = dpkitCall(module, JSON.parse(request));
      best = Math.min(best, cpuSeconds() - start);
    }
    console.log(JSON.stringify({cpu_seconds: best, reply}));
  }
}

main(process.argv.slice(2)).catch((e) => {
  console.error(e);
  process.exit(1);
});
