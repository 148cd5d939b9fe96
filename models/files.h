// The trainers' names for the file helpers of base/files.h (path joining, directory
// creation, durable renames, atomic writes): one implementation, in base/.
#ifndef DPKIT_MODELS_FILES_H_
#define DPKIT_MODELS_FILES_H_

#include "dpkit/base/files.h"

namespace dpkit::models {

using base::Join;
using base::MakeDirs;
using base::PathExists;
using base::RemoveIfExists;
using base::RenameDurably;
using base::SyncPath;
using base::WriteFileAtomically;

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_FILES_H_
