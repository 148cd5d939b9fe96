// The JS half of the C++/JS boundary (see web/calculator_bindings.h): one JSON request in,
// one JSON reply out, through the module's only exports dpkit_call / dpkit_free.
// Loaded by the page and by the Web Worker (both classic scripts, no modules, so that the
// page also works from file://).
'use strict';

// Instantiates the Emscripten glue (createDpkitModule) from an already compiled
// WebAssembly.Module, so that the bytes are fetched and compiled only once per page.
function dpkitInstantiate(wasmModule) {
  return createDpkitModule({
    instantiateWasm(imports, receiveInstance) {
      WebAssembly.instantiate(wasmModule, imports).then(
          (instance) => receiveInstance(instance, wasmModule));
      return {};
    },
    print() {},
    printErr() {},
  });
}

// Sends `request` (an object) to the module and returns the parsed reply
// {ok: true, result} or {ok: false, error}. A trap inside the module (which the C++ side
// avoids, but e.g. running out of memory can still cause) becomes {ok: false, error,
// fatal: true}: the caller must then discard this module instance and make a new one.
function dpkitCall(module, request) {
  let requestPtr = 0;
  let replyPtr = 0;
  try {
    const text = JSON.stringify(request);
    const size = module.lengthBytesUTF8(text) + 1;
    requestPtr = module._malloc(size);
    if (!requestPtr) return {ok: false, error: 'out of memory', fatal: true};
    module.stringToUTF8(text, requestPtr, size);
    replyPtr = module._dpkit_call(requestPtr);
    if (!replyPtr) return {ok: false, error: 'out of memory', fatal: true};
    return JSON.parse(module.UTF8ToString(replyPtr));
  } catch (e) {
    return {ok: false, error: 'the calculation failed inside WebAssembly (' +
        (e && e.message ? e.message : String(e)) + ')', fatal: true};
  } finally {
    try {
      if (replyPtr) module._dpkit_free(replyPtr);
      if (requestPtr) module._free(requestPtr);
    } catch (e) {
      // The module is already broken; the caller replaces it.
    }
  }
}

if (typeof module !== 'undefined' && module.exports) {
  module.exports = {dpkitCall, dpkitInstantiate};
}
