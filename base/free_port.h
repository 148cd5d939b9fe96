#ifndef DPKIT_BASE_FREE_PORT_H_
#define DPKIT_BASE_FREE_PORT_H_

namespace dpkit::base {

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice when binding
// port 0), or 0 when no socket could be bound. Used to pick a rendezvous port for local
// worker processes (dpkit train --nproc) and in their tests; another process may take the
// port before it is used, which the rendezvous then reports.
int FreeLoopbackPort();

}  // namespace dpkit::base

#endif  // DPKIT_BASE_FREE_PORT_H_
