// The accounting event of a mechanism whose parameters its factory already validated (so
// the event factory cannot fail): the one helper the mechanisms share for that.
#ifndef DPKIT_MECHANISMS_EVENT_OR_DIE_H_
#define DPKIT_MECHANISMS_EVENT_OR_DIE_H_

#include <cstdlib>
#include <utility>

#include "dpkit/accounting/event.h"

namespace dpkit::mechanisms {

// Aborts on an error: reaching it means a factory let invalid parameters through.
inline accounting::Event EventOrDie(accounting::Result<accounting::Event> event) {
  if (!event.ok()) std::abort();
  return *std::move(event);
}

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_EVENT_OR_DIE_H_
