// jax_tmem: the record-stage handlers of the CUDA custom calls (record.cc; see jax_tmem/record.h).
#pragma once

#include <string>

#include "xla/ffi/api/c_api.h"

#if defined(__has_include)
#if __has_include("xla/ffi/api/record_c_api.h")
#define JAX_TMEM_HAS_FFI_RECORD 1
#endif
#endif
#ifndef JAX_TMEM_HAS_FFI_RECORD
#define JAX_TMEM_HAS_FFI_RECORD 0
#endif

namespace jax_tmem::record {

// What the record stage did in this process (the report and tests read it).
struct Stats {
  bool available;           // built against FFI headers with the record stage
  long long created;        // calls recorded as kernel nodes (first recording of a command buffer)
  long long updated;        // calls whose kernel nodes were updated with new arguments
  long long captured;       // calls handed back to stream capture (no kernel image), see last_reason
  long long failed;         // calls that returned an error from the record stage
  std::string last_reason;  // why the last captured call was not recorded
};
Stats stats();

#if JAX_TMEM_HAS_FFI_RECORD
// Runs `execute` (the call's execute handler) with its launches recorded into the frame of the call's record
// extension; see record.cc.
XLA_FFI_Error* record_stage(XLA_FFI_CallFrame* call_frame, XLA_FFI_Handler* execute);

// The record handler of the custom call whose execute handler is `Execute`.
template <XLA_FFI_Handler* Execute>
XLA_FFI_Error* record_handler(XLA_FFI_CallFrame* call_frame) {
  return record_stage(call_frame, Execute);
}
#endif

}  // namespace jax_tmem::record
