// ibv_import_device and the object imports (abi/verbs/import_verbs.cc): the bookkeeping
// ibv_close_device needs for contexts that share a session.
#pragma once

namespace wharf::abi {

struct Context;

// Closes an imported context: its own descriptors and memory. The last one to go also
// releases the context it imported from if the application closed that one already.
void close_imported_context(Context* imported);

// True if ctx still has importers: its release then waits for the last of them.
bool defer_close_while_imported(Context* ctx);

}  // namespace wharf::abi
