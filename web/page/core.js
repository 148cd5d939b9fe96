// The calculator's WebAssembly core: one instance on the main thread for the fast requests
// (GDP, RDP), one in a Web Worker for the slow ones (PLD, calibration, plots). Loaded by
// index.html before app.js (classic scripts, no modules, so that the page also works from
// file://); uses app.js's `stats` only when called.
'use strict';

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error('could not load ' + src));
    document.head.appendChild(script);
  });
}

// The compiled WebAssembly core. Over http(s) the module compiles while it downloads (the
// download itself starts early, in index.html's head: self.dpkitWasmResponse); file:// pages may not fetch(), so
// there wasm_data.js carries the same bytes as base64. Returns {wasmModule, bytes}.
async function compileWasm() {
  if (location.protocol === 'http:' || location.protocol === 'https:') {
    try {
      const response = await (self.dpkitWasmResponse || fetch('calculator.wasm'));
      if (response.ok) {
        const bytes = Number(response.headers.get('Content-Length')) || 0;
        if (WebAssembly.compileStreaming &&
            response.headers.get('Content-Type') === 'application/wasm') {
          return {wasmModule: await WebAssembly.compileStreaming(response), bytes};
        }
        const data = new Uint8Array(await response.arrayBuffer());
        return {wasmModule: await WebAssembly.compile(data), bytes: data.length};
      }
    } catch (e) {
      // Fall through to the base64 copy.
    }
  }
  await loadScript('wasm_data.js');
  const text = atob(self.DPKIT_WASM_BASE64);
  const data = new Uint8Array(text.length);
  for (let i = 0; i < text.length; ++i) data[i] = text.charCodeAt(i);
  return {wasmModule: await WebAssembly.compile(data), bytes: data.length};
}

// Runs requests one at a time in a Web Worker; cancel() drops queued and running work by
// restarting the worker (a running WebAssembly call cannot be interrupted otherwise).
class CoreWorker {
  constructor(wasmModule, source) {
    this.wasmModule = wasmModule;
    this.url = URL.createObjectURL(new Blob([source], {type: 'text/javascript'}));
    this.pending = new Map();
    this.nextId = 1;
    this.start();
  }

  start() {
    this.worker = new Worker(this.url);
    this.worker.onmessage = (event) => {
      const message = event.data;
      if (message.type !== 'reply') return;
      const entry = this.pending.get(message.id);
      if (!entry) return;
      this.pending.delete(message.id);
      entry.resolve({reply: message.reply, milliseconds: message.milliseconds});
    };
    this.worker.onerror = (event) => {
      const error = 'the Web Worker failed: ' + (event.message || 'unknown error');
      for (const entry of this.pending.values()) entry.resolve({reply: {ok: false, error}});
      this.pending.clear();
    };
    this.worker.postMessage({type: 'init', module: this.wasmModule});
  }

  call(request) {
    return new Promise((resolve) => {
      const id = this.nextId++;
      this.pending.set(id, {resolve});
      this.worker.postMessage({type: 'call', id, request});
    });
  }

  cancel() {
    if (!this.pending.size) return;
    this.worker.terminate();
    for (const entry of this.pending.values()) entry.resolve({cancelled: true});
    this.pending.clear();
    this.start();
  }
}

const core = {
  instance: null,
  wasmModule: null,
  worker: null,
  cancelEpoch: 0,  // counts cancelHeavy() calls
  workerReady: null,  // resolves once the worker exists (or is known to be unavailable)
  available: [],  // accountants the compiled core offers ("version" op)

  // Resolves when the main thread's instance can answer the fast requests. The worker's
  // source loads beside the module and the worker starts when both are there; the first
  // (fast) result does not wait for it, heavy requests do (callHeavy).
  async init() {
    const workerSource = loadScript('worker_bundle.js').then(() => self.DPKIT_WORKER_SOURCE);
    workerSource.catch(() => {});  // Handled below, once the module exists.
    const {wasmModule, bytes} = await compileWasm();
    stats.phases = {compiled: performance.now() - stats.loadStart};
    stats.wasmBytes = bytes;
    this.wasmModule = wasmModule;
    this.workerReady = workerSource.then((source) => {
      this.worker = new CoreWorker(this.wasmModule, source);
      stats.worker = 'web worker';
    }, (e) => {
      this.worker = null;  // Heavy requests then run on the main thread.
      stats.worker = 'main thread (' + e.message + ')';
    });
    this.instance = await dpkitInstantiate(this.wasmModule);
    stats.phases.instantiated = performance.now() - stats.loadStart;
    const version = dpkitCall(this.instance, {op: 'version'});
    this.available = version.ok ? version.result.accountants : [];
    this.calibration = version.ok ? (version.result.calibration_accountants || []) : [];
  },

  // Fast requests: synchronous, on the main thread.
  callNow(request) {
    const reply = dpkitCall(this.instance, request);
    if (reply.fatal) {
      // Replace a trapped instance; the next request gets a fresh one.
      dpkitInstantiate(this.wasmModule).then((instance) => { this.instance = instance; });
    }
    return reply;
  },

  // Slow requests: in the worker. Resolves to {reply, milliseconds} or {cancelled: true}.
  async callHeavy(request) {
    const epoch = this.cancelEpoch;
    await this.workerReady;
    if (epoch !== this.cancelEpoch) return {cancelled: true};  // cancelled while waiting
    if (!this.worker) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      const start = performance.now();
      const reply = this.callNow(request);
      return {reply, milliseconds: performance.now() - start};
    }
    return this.worker.call(request);
  },

  cancelHeavy() {
    this.cancelEpoch += 1;
    if (this.worker) this.worker.cancel();
  },
};
