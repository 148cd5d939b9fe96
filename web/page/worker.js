// The calculator's Web Worker: runs the slow requests (PLD accounting, calibration, the
// epsilon-vs-epochs curve) off the page's main thread, so typing never freezes the page.
// Its source is bundled with the Emscripten glue and dpkit_call.js into worker_bundle.js
// and started from a Blob URL, which also works when the page is opened from file://.
//
// Messages in:  {type: 'init', module: WebAssembly.Module}
//               {type: 'call', id, request}
// Messages out: {type: 'ready'} | {type: 'reply', id, reply, milliseconds}
'use strict';

let dpkitWasmModule = null;
let dpkitInstance = null;

async function dpkitEnsureInstance() {
  if (!dpkitInstance) dpkitInstance = await dpkitInstantiate(dpkitWasmModule);
  return dpkitInstance;
}

self.onmessage = async (event) => {
  const message = event.data;
  if (message.type === 'init') {
    dpkitWasmModule = message.module;
    await dpkitEnsureInstance();
    self.postMessage({type: 'ready'});
    return;
  }
  if (message.type === 'call') {
    const instance = await dpkitEnsureInstance();
    const start = performance.now();
    const reply = dpkitCall(instance, message.request);
    const milliseconds = performance.now() - start;
    if (reply.fatal) dpkitInstance = null;  // A trapped instance is never reused.
    self.postMessage({type: 'reply', id: message.id, reply, milliseconds});
  }
};
